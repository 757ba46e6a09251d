"""moefuse's speed-up over each peer under two timing protocols, from bench_moe JSONs.

    python3 tools/protocol_ab.py A1.json,A2.json B1.json,B2.json [--names old,new] [--out ab.md]

A and B are bench_moe runs of the same shapes and T under two protocols (e.g. --rounds 1, the old
order with moefuse first, against --rounds 3, interleaved). Per (shape, T, peer): the speed-up
peer ms / moefuse ms in each run, the median over each protocol's runs, and B's median over A's
(below 1: moefuse's lead is smaller under B). A row missing from a run, or failed there (ms null),
leaves that run out of the cell; a cell with no run on either side is not printed. Exit 2 on a
missing or unreadable file.
"""
import argparse
import json
import statistics
import sys


def speedups(path):
    """{(shape, T, peer): peer ms / moefuse ms} of one bench_moe JSON (moefuse's default row:
    'moefuse', or its first 'moefuse-*' variant per (shape, T))."""
    doc = json.load(open(path))
    ms = {}
    for r in doc.get("rows", []):
        if r.get("ms"):
            ms.setdefault((r["shape"], r["T"]), {})[r["impl"]] = r["ms"]
    out = {}
    for (shape, T), by in ms.items():
        mine = by.get("moefuse") or next((v for k, v in by.items() if k.startswith("moefuse")), None)
        if mine is None:
            continue
        for impl, v in by.items():
            if not impl.startswith("moefuse"):
                out[(shape, T, impl)] = v / mine
    return out


def table(a_runs, b_runs, names):
    keys = sorted(set(k for run in a_runs + b_runs for k in run), key=lambda k: (k[0], k[1], k[2]))
    lines = [f"| shape | T | peer | {names[0]} speed-ups | {names[1]} speed-ups | {names[0]} median | "
             f"{names[1]} median | {names[1]} / {names[0]} |", "|---|---|---|---|---|---|---|---|"]
    for k in keys:
        a = [run[k] for run in a_runs if k in run]
        b = [run[k] for run in b_runs if k in run]
        if not a and not b:
            continue
        ma = statistics.median(a) if a else None
        mb = statistics.median(b) if b else None
        f = lambda xs: ", ".join(f"{x:.3f}" for x in xs) or "-"
        g = lambda x: "-" if x is None else f"{x:.3f}"
        ratio = "-" if ma is None or mb is None else f"{mb / ma:.3f}"
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {f(a)} | {f(b)} | {g(ma)} | {g(mb)} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a"), ap.add_argument("b")
    ap.add_argument("--names", default="A,B")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    names = args.names.split(",")
    if len(names) != 2:
        ap.error(f"--names {args.names}: expected two comma-separated names")
    try:
        a_runs = [speedups(p) for p in args.a.split(",") if p]
        b_runs = [speedups(p) for p in args.b.split(",") if p]
    except (OSError, ValueError) as e:
        print(f"protocol_ab: {e}", file=sys.stderr)
        return 2
    md = table(a_runs, b_runs, names)
    if args.out:
        open(args.out, "w").write(md)
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
