# Device call J3 (session 8): where deepseek-v3's FP8 T=64 forward spends 2.58 ms (J2: 1.44x
# torch._scaled_grouped_mm, floor 2.34 ms at the bench's 4.19 TB/s; the lab's GEMM2 alone streamed
# 4.26 TB/s), kernel by kernel; the racecheck of the header fix.
# Prediction (before the run): racecheck fp8 0 hazards. Per kernel (ncu, caches and clocks as
# they run): GEMM1 ~1.6 ms at ~4.0 TB/s, GEMM2 ~0.8 ms, the small kernels (plan, quantise,
# permute, A2 quantiser, combine) ~40 us together; the gap to 2.30 ms is mostly GEMM1.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite; P=$O/prof
mkdir -p $L $P
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run racecheck_fp8 150 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
for s in deepseek-v3 gpt-oss-120b qwen3-30b-a3b; do
  for t in 8 64; do
    timeout 90 ncu --clock-control none --cache-control none --metrics $M --csv --launch-count 40 \
      $B/bench_gpu_forward --shapes $s --tokens $t --gemm hopper --dtype fp8 > $P/ncu_${s}_$t.csv 2>&1
    mark "ncu $s $t" $? /dev/null
  done
done
python3 - $P > $P/summary.md 2>&1 <<'PY'
import csv, glob, sys, collections
for f in sorted(glob.glob(sys.argv[1] + "/ncu_*.csv")):
    lines = open(f, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None: print(f, "no data"); continue
    rows = collections.OrderedDict()
    for r in csv.DictReader(lines[start:]):
        k = (int(r["ID"]), r["Kernel Name"][:60])
        u = r.get("Metric Unit", ""); v = float(r["Metric Value"].replace(",", ""))
        rows.setdefault(k, {})[r["Metric Name"]] = (v, u)
    print("##", f.split("/")[-1])
    print("| id | kernel | us | DRAM read MB | write MB | read TB/s | SM GHz |")
    print("|---|---|---|---|---|---|---|")
    for (i, n), m in rows.items():
        t, tu = m.get("gpu__time_duration.sum", (0, "ns"))
        us = t * {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3}.get(tu, 1)
        def mb(name):
            v, un = m.get(name, (0, "byte"))
            return v * {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3, "KB": 1e-3, "MB": 1, "GB": 1e3}.get(un, 1e-6)
        rd, wr = mb("dram__bytes_read.sum"), mb("dram__bytes_write.sum")
        c, cu = m.get("sm__cycles_elapsed.avg.per_second", (0, ""))
        ghz = c * {"cycle/nsecond": 1, "cycle/usecond": 1e-3, "cycle/second": 1e-9, "Ghz": 1, "Mhz": 1e-3}.get(cu, 1e-9)
        print(f"| {i} | {n} | {us:.1f} | {rd:.1f} | {wr:.1f} | {rd / us if us else 0:.2f} | {ghz:.2f} ({c} {cu}) |")
PY
mark summary $? /dev/null
mark done 0 /dev/null
