# Median ms per (shape, T) of bench_gpu_forward logs, one column per arm: ab_summary.py DIR arm1 arm2 ...
import glob, statistics, sys
d, arms = sys.argv[1], sys.argv[2:]
t = {}
for a in arms:
    for f in sorted(glob.glob(f"{d}/{a}_*.log")):
        for line in open(f):
            p = line.split()
            if len(p) >= 4 and p[1].isdigit():
                t.setdefault((p[0], int(p[1])), {}).setdefault(a, []).append(float(p[3]))
print("| shape | T | " + " | ".join(f"{a} ms (median of n)" for a in arms) + " | " + " | ".join(f"{arms[0]} / {a}" for a in arms[1:]) + " |")
print("|---" * (2 + 2 * len(arms) - 1) + "|")
for k in sorted(t, key=lambda k: (k[0], k[1])):
    m = [statistics.median(t[k][a]) if a in t[k] else float('nan') for a in arms]
    n = [len(t[k].get(a, [])) for a in arms]
    print(f"| {k[0]} | {k[1]} | " + " | ".join(f"{x:.4f} ({c})" for x, c in zip(m, n)) + " | " + " | ".join(f"{m[0]/x:.3f}" for x in m[1:]) + " |")
