# Median ms per (shape, T, GEMM path) of bench_gpu_forward logs, one column per arm:
#   ab_summary.py [--across-paths] DIR arm1 arm2 ...      (reads DIR/<arm>_*.log)
# The GEMM path is part of the key: a log run without --gemm holds a forced-v1 row and a
# forced-hopper row per (shape, T), and until session 31 this tool pooled the two into one median
# (session 10's calls L3 and L4 were read that way; src/cuda/NOTES.md, "Session 31").
# --across-paths compares arms that ran different paths (e.g. --gemm hopper against --gemm v1): the
# key is (shape, T) and the gemm column names each arm's path; an arm whose logs hold two paths
# for one (shape, T) is refused. Exit 2 on a refusal, or when an arm has no log or no rows.
# --rounds adds a second table: per (shape, T, path), the first arm's time over each other arm's in
# each round (logs <arm>_<round>.log paired by round; "-" where an arm lacks that round), for rules
# that ask for a margin in every round. An arm's logs are <arm>_<suffix>.log with no "_" in the suffix,
# so that arm "fill" does not take arm "fill_static"'s logs.
import glob, os, re, statistics, sys

args = sys.argv[1:]
across = "--across-paths" in args
per_round = "--rounds" in args
args = [a for a in args if a not in ("--across-paths", "--rounds")]
if len(args) < 2:
    sys.exit("usage: ab_summary.py [--across-paths] [--rounds] DIR arm1 [arm2 ...]")
d, arms = args[0], args[1:]
t, paths, by_round = {}, {}, {}
for a in arms:
    files = sorted(f for f in glob.glob(f"{d}/{a}_*.log")
                   if "_" not in os.path.basename(f)[len(a) + 1:-len(".log")])
    rows = 0
    for f in files:
        rnd = re.fullmatch(re.escape(a) + r"_(\d+)\.log", os.path.basename(f))
        for line in open(f):
            p = line.split()
            if len(p) >= 4 and p[1].isdigit():
                try:
                    ms = float(p[3])
                except ValueError:
                    continue
                key = (p[0], int(p[1])) if across else (p[0], int(p[1]), p[2])
                seen = paths.setdefault((key, a), p[2])
                if seen != p[2]:
                    print(f"ab_summary.py: arm {a}: {p[0]} T={p[1]} ran both {seen} and {p[2]} ({f}); "
                          "--across-paths needs one path per arm", file=sys.stderr)
                    sys.exit(2)
                t.setdefault(key, {}).setdefault(a, []).append(ms)
                if rnd:
                    slot = by_round.setdefault(key, {}).setdefault(int(rnd.group(1)), {})
                    if a in slot:
                        print(f"ab_summary.py: arm {a}: {p[0]} T={p[1]} twice in round {rnd.group(1)} ({f}); "
                              "the rounds table keeps the last", file=sys.stderr)
                    slot[a] = ms
                rows += 1
    if rows == 0:
        print(f"ab_summary.py: arm {a}: no rows in {d}/{a}_*.log ({len(files)} files)", file=sys.stderr)
        sys.exit(2)
print("| shape | T | gemm | " + " | ".join(f"{a} ms (median of n)" for a in arms) + " | " +
      " | ".join(f"{arms[0]} / {a}" for a in arms[1:]) + " |")
print("|---" * (3 + 2 * len(arms) - 1) + "|")
for k in sorted(t):
    m = [statistics.median(t[k][a]) if a in t[k] else float("nan") for a in arms]
    n = [len(t[k].get(a, [])) for a in arms]
    gemm = "/".join(paths.get((k, a), "-") for a in arms) if across else k[2]
    print(f"| {k[0]} | {k[1]} | {gemm} | " + " | ".join(f"{x:.4f} ({c})" for x, c in zip(m, n)) + " | " +
          " | ".join(f"{m[0] / x:.3f}" for x in m[1:]) + " |")
if per_round:
    print()
    print("| shape | T | gemm | " + " | ".join(f"{arms[0]} / {a} by round" for a in arms[1:]) + " |")
    print("|---" * (3 + len(arms) - 1) + "|")
    for k in sorted(by_round):
        rounds = by_round[k]
        gemm = "/".join(paths.get((k, a), "-") for a in arms) if across else k[2]
        cols = []
        for a in arms[1:]:
            r = [f"{rounds[i][arms[0]] / rounds[i][a]:.3f}" if arms[0] in rounds[i] and rounds[i].get(a, 0) > 0
                 else "-" for i in sorted(rounds)]
            cols.append(", ".join(r))
        print(f"| {k[0]} | {k[1]} | {gemm} | " + " | ".join(cols) + " |")
