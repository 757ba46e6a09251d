#!/usr/bin/env python3
"""Per-kernel table of ncu --csv runs (one file each): time, DRAM bytes and read rate, SM clock.
Usage: ncu_summary.py FILE.csv ... (ncu run with --metrics gpu__time_duration.sum,
dram__bytes_read.sum,dram__bytes_write.sum[,sm__cycles_elapsed.avg.per_second])."""
import collections
import csv
import sys

TIME = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3}
BYTES = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3, "KB": 1e-3, "MB": 1, "GB": 1e3}
CLOCK = {"cycle/nsecond": 1, "cycle/usecond": 1e-3, "cycle/second": 1e-9, "Ghz": 1, "Mhz": 1e-3}


def table(path):
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    print("##", path.split("/")[-1])
    if start is None:
        print("no data")
        return
    rows = collections.OrderedDict()
    for r in csv.DictReader(lines[start:]):
        key = (int(r["ID"]), r["Kernel Name"][:60])
        rows.setdefault(key, {})[r["Metric Name"]] = (float(r["Metric Value"].replace(",", "")), r.get("Metric Unit", ""))
    print("| id | kernel | us | DRAM read MB | write MB | read TB/s | SM GHz |")
    print("|---|---|---|---|---|---|---|")
    for (i, name), m in rows.items():
        t, tu = m.get("gpu__time_duration.sum", (0, "ns"))
        us = t * TIME.get(tu, 1)
        rd, wr = (m.get(n, (0, "byte"))[0] * BYTES.get(m.get(n, (0, "byte"))[1], 1e-6)
                  for n in ("dram__bytes_read.sum", "dram__bytes_write.sum"))
        c, cu = m.get("sm__cycles_elapsed.avg.per_second", (0, ""))
        print(f"| {i} | {name} | {us:.1f} | {rd:.1f} | {wr:.1f} | {rd / us if us else 0:.2f} | "
              f"{c * CLOCK.get(cu, 1e-9):.2f} |")


for f in sys.argv[1:]:
    table(f)
