#!/usr/bin/env python3
"""Median table of alternated grouped-lab rounds.

    python3 tools/lab_ab.py DIR BASE ARM [ARM ...]

Reads DIR/lab_<T>_<arm>_<round>.jsonl (grouped_lab --json), takes per (shape, gemm, T, arm) the
median ms over the rounds (every row must have passed its checks; a failed row is reported and
left out), and prints a markdown table: each arm's median ms and its ratio to BASE.
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    folder, base, arms = sys.argv[1], sys.argv[2], sys.argv[3:]
    runs = {}  # (shape, gemm, T, arm) -> [ms]
    failed = []
    for path in sorted(glob.glob(os.path.join(folder, "lab_*_*_*.jsonl"))):
        m = re.match(r"lab_(\d+)_(.+)_(\d+)\.jsonl$", os.path.basename(path))
        if not m:
            continue
        arm = m.group(2)
        for line in open(path):
            row = json.loads(line)
            key = (row["shape"], row["data"], int(row["T"]), arm)
            if not row["pass"]:
                failed.append("%s %s (%s)" % (os.path.basename(path), row["variant"], row["shape"]))
                continue
            runs.setdefault(key, []).append(row["ms"])
    keys = sorted({k[:3] for k in runs}, key=lambda k: (k[0], k[1], k[2]))
    head = "| shape | gemm | T | rounds | %s ms |" % base
    rule = "|---|---|---|---|---|"
    for a in arms:
        head += " %s ms | %s/%s |" % (a, a, base)
        rule += "---|---|"
    print(head)
    print(rule)
    for k in keys:
        b = runs.get(k + (base,))
        if not b:
            continue
        bm = statistics.median(b)
        line = "| %s | %s | %d | %d | %.4f |" % (k[0], k[1], k[2], len(b), bm)
        for a in arms:
            r = runs.get(k + (a,))
            if r:
                am = statistics.median(r)
                line += " %.4f | %.3f |" % (am, am / bm)
            else:
                line += " - | - |"
        print(line)
    for f in failed:
        print("FAILED (left out): " + f)


if __name__ == "__main__":
    main()
