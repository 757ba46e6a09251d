#!/usr/bin/env python3
"""Issue 3's speed gates, evaluated from one run of bench/bench_moe.py per dtype.

    issue3_gates.py BF16_JSON FP8_JSON --out gates.json [--md gates.md]

The issue: moefuse at least as fast as torch._grouped_mm at every T, and >= 1.5x it for T <= 64, in
bf16 and FP8 (FP8: moefuse's block-scaled path against torch._scaled_grouped_mm, as PERF.md's FP8
table). Each (dtype, shape, T) of the JSON is a gate "speed-up >= 1", and those with T <= 64 also
"speed-up >= 1.5"; a cell without both rows is reported missing and not passed.

For the 1.5x gates, "needs" says what passing would take in the same run: moefuse's time at 1.5x,
and the memory floor's time over it (the floor: PERF.md's bytes, the touched experts' weights plus
x and y, recovered from the row's gbps, at the run's measured read bandwidth). Above 1, the gate
asks for the layer to run faster than it takes to read the weights it must read.
"""
import argparse
import sys

import gate_io

# (moefuse impl, its alias in runs that name the default path, the peer) per dtype.
IMPLS = {"bf16": ("moefuse", "moefuse-auto", "torch_grouped_mm"),
         "fp8": ("moefuse-block128", "moefuse-auto-block128", "torch_scaled_grouped_mm")}


def row(rows, names, shape, T):
    for name in names:
        for r in rows:
            if r.get("impl") == name and r.get("shape") == shape and r.get("T") == T and r.get("ms"):
                return r
    return None


def floor_ms(mo, read_tbps):
    """The memory floor's time (ms) of moefuse's row: its gbps is floor bytes / ms."""
    if not read_tbps or not mo.get("gbps"):
        return None
    return mo["gbps"] * mo["ms"] / (read_tbps * 1e3)


def evaluate(dtype, doc):
    ours, alias, peer = IMPLS[dtype]
    rows = doc.get("rows", [])
    read = doc.get("ceilings", {}).get("read_TBps")
    shapes = list(dict.fromkeys(r["shape"] for r in rows if "shape" in r))
    out = []
    for s in shapes:
        for T in sorted({r["T"] for r in rows if r.get("shape") == s}):
            mo, pe = row(rows, (ours, alias), s, T), row(rows, (peer,), s, T)
            up = None if mo is None or pe is None else pe["ms"] / mo["ms"]
            for need in ((1.0, 1.5) if T <= 64 else (1.0,)):
                g = {"dtype": dtype, "shape": s, "T": T, "gate": f"speed-up over {peer} >= {need}",
                     "value": None if up is None else round(up, 4), "threshold": need,
                     "pass": up is not None and up >= need, "needs": None}
                if need > 1.0 and mo is not None and pe is not None:
                    fl = floor_ms(mo, read)
                    ms = pe["ms"] / need
                    g["needs"] = {"ms": round(ms, 5), "floor_ms": None if fl is None else round(fl, 5),
                                  "floor_over_needed": None if fl is None else round(fl / ms, 3)}
                out.append(g)
    return out


def markdown(gates, sources):
    lines = ["| dtype | shape | T | gate | value | pass | passing needs (moefuse ms; memory floor's ms / it) |",
             "|---|---|---|---|---|---|---|"]
    for g in gates:
        v = "missing" if g["value"] is None else f"{g['value']:.3f}"
        n = g["needs"]
        nt = "" if not n else f"{n['ms']:.4f} ms" + ("" if n["floor_over_needed"] is None else
                                                     f"; floor {n['floor_ms']:.4f} ms = {n['floor_over_needed']:.2f}")
        lines.append(f"| {g['dtype']} | {g['shape']} | {g['T']} | {g['gate']} | {v} | {'yes' if g['pass'] else 'no'} "
                     f"| {nt} |")
    n = sum(g["pass"] for g in gates)
    lines.append(f"\n{n} of {len(gates)} gates pass. Sources: " + ", ".join(sources) + ".")
    past = [g for g in gates if not g["pass"] and g["needs"] and (g["needs"]["floor_over_needed"] or 0) > 1]
    if past:
        lines.append(f"{len(past)} of the misses would need the layer to finish faster than the memory floor of the "
                     "same run (the needs column's ratio over 1): " +
                     ", ".join(f"{g['dtype']} {g['shape']} T={g['T']}" for g in past) + ".")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bf16"), ap.add_argument("fp8")
    ap.add_argument("--out", required=True)
    ap.add_argument("--md")
    a = ap.parse_args(argv)
    gates = []
    for dtype, path in (("bf16", a.bf16), ("fp8", a.fp8)):
        got = evaluate(dtype, gate_io.load("issue3_gates", path, "its gates are absent"))
        if not got:
            gates.append({"dtype": dtype, "shape": "all", "T": None, "gate": "a table", "value": None,
                          "threshold": None, "pass": False, "needs": None})
        gates += got
    gate_io.write({"sources": [a.bf16, a.fp8], "gates": gates}, a.out, markdown(gates, [a.bf16, a.fp8]), a.md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
