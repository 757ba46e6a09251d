#!/usr/bin/env python3
"""Issue 4's must-show gates, evaluated from one device run's outputs (bench/issue4_gates.sh).

    issue4_gates.py BF16_JSON FP8_JSON LAB_BF16_JSON LAB_FP8_JSON --out gates.json [--md gates.md]

Inputs: bench_moe.py's JSON for bf16 (impls moefuse-auto = the default path, moefuse-v1,
torch_grouped_mm, dense_equiv_cublas) and for fp8 (moefuse-auto-block128, ...), and the dense
labs' JSON (lab/gemm_lab.cu: engine vs cublas; lab/gemm_fp8_lab.cu: fp8engine vs cublaslt and lt-block).
Every gate is one measured value against the issue's threshold; a value the inputs lack is
reported as missing (and the gate as not passed), never guessed.

For the forward's gates, "needs" says what passing would take in the same run: moefuse's time at
the threshold, the TFLOP/s that time means, and that rate over the run's own dense GEMM ceiling
(the JSON's ceilings: cuBLAS bf16 or per-tensor FP8 at 8192^3, measured beside it). Above 1, the
gate asks the MoE layer to outrun a dense GEMM of the same machine.
"""
import argparse
import sys

import gate_io

PERF = ["qwen3-30b-a3b", "gpt-oss-120b", "mixtral-8x7b", "deepseek-v3"]
UNTUNED = ["qwen3-235b-a22b", "glm-4.5-air", "qwen3-next-80b-a3b", "gpt-oss-20b"]


# The default path is timed as moefuse-auto (MOEFUSE_GEMM=auto) beside moefuse-v1, or as plain
# "moefuse" in a run without --moefuse-gemm: either stands for it.
DEFAULT_ALIASES = {"moefuse-auto": "moefuse", "moefuse-auto-block128": "moefuse-block128"}


def rows_by(rows, impl, shape, T):
    for name in (impl, DEFAULT_ALIASES.get(impl)):
        for r in rows:
            if r.get("impl") == name and r.get("shape") == shape and r.get("T") == T and r.get("ms"):
                return r
    return None


def gate(out, name, shape, value, op, threshold, detail, needs=None):
    ok = value is not None and (value >= threshold if op == ">=" else value <= threshold)
    out.append({"gate": name, "shape": shape, "value": None if value is None else round(value, 4), "op": op,
                "threshold": threshold, "pass": ok, "detail": detail, "needs": needs})


def needs(mo, ms, ceiling):
    """At moefuse time `ms` (the gate's threshold), the rate of moefuse's row `mo` and its share of the
    run's GEMM ceiling (TFLOP/s; None when the JSON has none)."""
    if mo is None or ms is None or not mo.get("tflops"):
        return None
    tflops = mo["tflops"] * mo["ms"] / ms  # the row's FLOPs at the new time
    return {"ms": round(ms, 4), "tflops": round(tflops, 1),
            "of_ceiling": round(tflops / ceiling, 3) if ceiling else None}


def ratio(a, b):
    return None if a is None or b is None else a["ms"] / b["ms"]


def evaluate(bf16, fp8, lab_bf16, lab_fp8):
    g = []
    b = bf16.get("rows", [])
    f = fp8.get("rows", [])
    bf16_ceiling = bf16.get("ceilings", {}).get("bf16_TFLOPs")
    fp8_ceiling = fp8.get("ceilings", {}).get("fp8_TFLOPs")
    for shapes, tag in ((PERF, ""), (UNTUNED, " (untuned shape)")):
        for s in shapes:
            mo = rows_by(b, "moefuse-auto", s, 16384)
            de = rows_by(b, "dense_equiv_cublas", s, 16384)
            gm = rows_by(b, "torch_grouped_mm", s, 16384)
            gate(g, "bf16 T=16384 time / dense-equiv cuBLAS time" + tag, s, ratio(mo, de), "<=", 1.1,
                 "moefuse-auto ms / dense_equiv_cublas ms, same run",
                 needs(mo, de and de["ms"] * 1.1, bf16_ceiling))
            gate(g, "bf16 T=16384 speed-up over torch._grouped_mm" + tag, s, ratio(gm, mo), ">=", 2.4,
                 "torch_grouped_mm ms / moefuse-auto ms, same run",
                 needs(mo, gm and gm["ms"] / 2.4, bf16_ceiling))
            v1 = rows_by(b, "moefuse-v1", s, 4096)
            ho = rows_by(b, "moefuse-auto", s, 4096)
            gate(g, "bf16 T=4096 speed-up over the v1 forward" + tag, s, ratio(v1, ho), ">=", 1.3,
                 "moefuse-v1 ms / moefuse-auto ms, same run")
    q = rows_by(b, "moefuse-auto", "qwen3-30b-a3b", 16384)
    gate(g, "bf16 T=16384 TFLOP/s", "qwen3-30b-a3b", q and q["tflops"], ">=", 650, "routed FLOPs / moefuse-auto ms",
         needs(q, q and q["tflops"] * q["ms"] / 650, bf16_ceiling))
    for s, t in (("deepseek-v3", 1100), ("qwen3-30b-a3b", 900)):
        r = rows_by(f, "moefuse-auto-block128", s, 16384)
        gate(g, "FP8 block-scaled T=16384 TFLOP/s", s, r and r["tflops"], ">=", t,
             "routed FLOPs / moefuse-auto-block128 ms", needs(r, r and r["tflops"] * r["ms"] / t, fp8_ceiling))
    # FP8 against cuBLASLt (its promoting accumulation, not fast accumulation): the engine's
    # block-scaled mode against per-tensor cuBLASLt (more work against less: the strictest reading),
    # and each mode against cuBLASLt on the same operands: per-tensor scales, and our block scales
    # (1x128 x 128x128, cuBLAS >= 12.9).
    for lab, ours, peer, what in ((lab_bf16, "engine", "cublas", "bf16 dense 8192^3 TFLOP/s / cuBLAS's"),
                                  (lab_fp8, "fp8engine", "cublaslt", "FP8 dense 8192^3 TFLOP/s / cuBLASLt's"),
                                  (lab_fp8, "fp8engine_pt", "cublaslt",
                                   "FP8 dense 8192^3 TFLOP/s / cuBLASLt's on the same per-tensor operands"),
                                  (lab_fp8, "fp8engine", "lt-block",
                                   "FP8 dense 8192^3 TFLOP/s / cuBLASLt's on the same block-scaled operands")):
        rows = lab.get("rows", [])
        o = next((r for r in rows if r.get("shape") == "square-8192" and r.get("impl") == ours and r.get("pass")), None)
        p = next((r for r in rows if r.get("shape") == "square-8192" and r.get("impl") == peer and r.get("pass")), None)
        gate(g, what, "8192x8192x8192", None if o is None or p is None else o["tflops"] / p["tflops"], ">=", 0.95,
             f"lab {ours} vs {peer}, same process")
    return g


def needs_text(n):
    if not n:
        return ""
    share = "" if n["of_ceiling"] is None else f" = {n['of_ceiling']:.2f}x the run's dense 8192^3 GEMM"
    return f"{n['ms']:.3f} ms, {n['tflops']:.0f} TFLOP/s{share}"


def markdown(gates, sources):
    lines = ["| gate | shape | value | threshold | pass | passing needs (moefuse ms, its rate) |",
             "|---|---|---|---|---|---|"]
    for x in gates:
        v = "missing" if x["value"] is None else f"{x['value']:.3f}"
        lines.append(f"| {x['gate']} | {x['shape']} | {v} | {x['op']} {x['threshold']} | {'yes' if x['pass'] else 'no'} "
                     f"| {needs_text(x.get('needs'))} |")
    n = sum(x["pass"] for x in gates)
    beyond = [x for x in gates if not x["pass"] and (x.get("needs") or {}).get("of_ceiling") and
              x["needs"]["of_ceiling"] > 1]
    lines.append(f"\n{n} of {len(gates)} gates pass. Sources: " + ", ".join(sources) + ".")
    if beyond:
        lines.append(f"{len(beyond)} of the misses would need the MoE layer to run faster than the same run's dense "
                     "8192^3 GEMM (cuBLAS bf16, or per-tensor FP8 by torch._scaled_mm; the JSON's ceilings): the "
                     "needs column over 1x.")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bf16"), ap.add_argument("fp8"), ap.add_argument("lab_bf16"), ap.add_argument("lab_fp8")
    ap.add_argument("--out", required=True)
    ap.add_argument("--md")
    a = ap.parse_args(argv)
    sources = [a.bf16, a.fp8, a.lab_bf16, a.lab_fp8]
    docs = [gate_io.load("issue4_gates", path, "its gates are reported missing") for path in sources]
    gates = evaluate(*docs)
    meta = {"commits": [d.get("commit") for d in docs], "gpu": [d.get("gpu") for d in docs], "sources": sources}
    gate_io.write({"meta": meta, "gates": gates}, a.out, markdown(gates, sources), a.md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
