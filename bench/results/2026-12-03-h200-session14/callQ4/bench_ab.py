#!/usr/bin/env python3
"""Median table of alternated bench_moe runs: bench_ab.py DIR BASE ARM...

Reads DIR/<arm>_<round>.json (bench_moe --out), takes per (shape, T, arm) the median moefuse ms and
the median torch_grouped_mm ms over the rounds, and prints each arm's median and its ratio to BASE."""
import glob, json, os, statistics, sys

folder, arms = sys.argv[1], sys.argv[2:]
ms = {}
for arm in arms:
    for path in glob.glob(os.path.join(folder, "%s_*.json" % arm)):
        for r in json.load(open(path))["rows"]:
            if r.get("ms") is None or r.get("pass") != "forward":
                continue
            ms.setdefault((r["shape"], r["T"], r["impl"], arm), []).append(r["ms"])
keys = sorted({(k[0], k[1]) for k in ms})
print("| shape | T | " + " | ".join("%s ms (n)" % a for a in arms) + " | " +
      " | ".join("%s/%s" % (a, arms[0]) for a in arms[1:]) + " | torch_grouped_mm ms per arm |")
print("|---" * (3 + 2 * (len(arms) - 1) + 1) + "|")
for s, t in keys:
    med = [statistics.median(ms.get((s, t, "moefuse", a), [float("nan")])) for a in arms]
    n = [len(ms.get((s, t, "moefuse", a), [])) for a in arms]
    peer = [statistics.median(ms.get((s, t, "torch_grouped_mm", a), [float("nan")])) for a in arms]
    print("| %s | %d | " % (s, t) + " | ".join("%.4f (%d)" % (m, c) for m, c in zip(med, n)) + " | " +
          " | ".join("%.3f" % (m / med[0]) for m in med[1:]) + " | " + " / ".join("%.4f" % p for p in peer) + " |")
