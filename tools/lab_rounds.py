"""The drift left under the labs' interleaved timing, from their JSON rows' round_ms.

    python3 tools/lab_rounds.py lab.json [more.json ...] [--out rounds.md]

Each lab row (lab/gemm_lab.cu, lab/gemm_fp8_lab.cu) since session 30 carries its impl's median per
round (round_ms, in round order). Per (shape, impl): each round's median over the row's overall
median, and the spread (slowest round / fastest). Per (file, shape), the mean of those ratios per
round over every impl: a card that slows as it warms shows ratios rising with the round. The files
are kept apart (the bf16 and FP8 labs share shape names but run in different processes). Rows without
round_ms (older JSON) are left out. Exit 2 on a missing or unreadable file.
"""
import argparse
import json
import os
import statistics
import sys


def rows_of(path):
    doc = json.load(open(path))
    rows = doc.get("rows", doc) if isinstance(doc, dict) else doc
    name = os.path.basename(path)
    return [dict(r, lab=name) for r in rows if r.get("round_ms") and r.get("ms", 0) > 0]


def table(rows):
    n = max(len(r["round_ms"]) for r in rows)
    head = "| lab | shape | impl | " + " | ".join(f"round {i + 1}" for i in range(n)) + " | spread |"
    lines = [head, "|---|---|---|" + "---|" * n + "---|"]
    per_shape = {}
    for r in rows:
        ratios = [m / r["ms"] for m in r["round_ms"]]
        per_shape.setdefault((r["lab"], r["shape"]), []).append(ratios)
        cells = " | ".join(f"{x:.3f}" for x in ratios) + " | " * (n - len(ratios))
        lines.append(f"| {r['lab']} | {r['shape']} | {r['impl']} | {cells} | "
                     f"{max(r['round_ms']) / min(r['round_ms']):.3f} |")
    lines.append("")
    lines.append("| lab | shape | impls | " + " | ".join(f"round {i + 1} mean" for i in range(n)) + " |")
    lines.append("|---|---|---|" + "---|" * n)
    for (lab, shape), rs in per_shape.items():
        means = [statistics.mean(x[i] for x in rs if len(x) > i) for i in range(n)]
        lines.append(f"| {lab} | {shape} | {len(rs)} | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        rows = [r for f in a.files for r in rows_of(f)]
    except (OSError, ValueError) as e:
        print(f"lab_rounds: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("lab_rounds: no row with round_ms", file=sys.stderr)
        return 2
    md = table(rows)
    if a.out:
        open(a.out, "w").write(md)
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
