"""moefuse against its PyTorch peers, in one process on the same tensors (PERF.md's protocol).

Per shape and token count T, on the same random inputs and the same routing (softmax +
top-k over random logits, drawn once with torch; routing itself is not timed):

--dtype bf16 (the default), bf16 weights and activations:
  moefuse             moefuse.torch.fused_experts, CUDA graph replay (packed at warm-up);
                      "moefuse-<v>" when $MOEFUSE_GEMM=<v> is set (the library reads it);
                      --moefuse-gemm v1,hopper times each value in turn
  torch_loop          Hugging Face style loop over the hit experts (index / index_add_);
                      eager (it syncs on the host per expert), skipped above T=4096
  torch_grouped_mm    sort by expert, gather, torch._grouped_mm, SiLU(gate)*up,
                      torch._grouped_mm, weight, unpermute, sum over slots; CUDA graph
  dense_equiv_cublas  all T*k rows through expert 0 with torch.matmul: GEMM1, SiLU*up, GEMM2

--dtype fp8, e4m3 weights, activations quantised to e4m3 inside each timed forward:
  moefuse-block128    fused_experts(use_fp8_w8a8=True, block_shape=[128, 128]): weights
                      FP8_BLOCK128 (128x128 block scales), activations FP8_ROW128 (1x128)
  moefuse-tensor      fused_experts(use_fp8_w8a8=True): per-expert weight scales
                      (FP8_TENSOR), activations FP8_TENSOR
  torch_scaled_grouped_mm  as torch_grouped_mm with torch._scaled_grouped_mm: weights with
                      one scale per output row, activations quantised per row in the graph
  dense_equiv_cublas  the same through expert 0 with torch._scaled_mm (rowwise scales)

  ceilings            device copy, streaming read, bf16 GEMM 8192^3, FP8 GEMM 8192^3

Every impl's output (the graph's own output) is compared with an fp64 torch reference on a
sample of tokens after one replay and again after all the timing rounds; a relative Frobenius
error above the dtype's tolerance (bf16 1e-2, fp8 5e-2), a non-finite value or a raised error
makes the row "failed" (ms null) and the process exits 1 after writing everything. FP8
references use exactly the quantised weights the impl was given, and x and (where its rows
alone decide the scales) the GLU output quantised by the impl's own activation rule.

Shapes: PERF.md's four by default (qwen3-30b-a3b, gpt-oss-120b, mixtral-8x7b, deepseek-v3);
--shapes also takes four no bench was tuned on (PERF.md's P7): qwen3-235b-a22b, glm-4.5-air,
qwen3-next-80b-a3b, gpt-oss-20b. Each is (E, H, I, k) of moefuse's preset of the same name.
Every impl runs only the routed experts, each a SiLU GLU without biases, as PERF.md's peers
do. Left out: gpt-oss's clamped SwiGLU and expert biases, and the shared expert of deepseek-v3,
glm-4.5-air and qwen3-next-80b-a3b (gated there). With moefuse loaded, the notes name per
shape what its preset has beyond that (--selftest checks these claims against the presets).

Before the first capture of each (shape, T) the inputs are checked on the host (ids in range
and distinct per token, weights finite, and for the grouped peers their offsets and operands
against torch._grouped_mm's preconditions): a bad input is one FAILED row with a message,
never a device-side assert that loses the CUDA context.

Timing: per (shape, T) every impl is first captured, checked and warmed; then all are timed
together in --rounds (3) rounds, each round in a rotated order and each impl its share of at least
--min-reps (20) CUDA-event-timed replays, more until --target-s (0.5 s) of replays, at most
--max-reps (200), after one untimed replay; the median of all its replays is reported. (Timed one
after another in one block each, a lab kernel ran 1-1.5% slower for every impl timed before it in
the process, the card warming up: session 30; --rounds 1 is that old order, moefuse first.) When
one input set (x and routing) fits in L2 (60 MB) the replays rotate among 3 sets, each its own graph.

Output: the JSON of PERF.md's results format to --out, a markdown table beside it (same
stem, .md). Both are rewritten after every (shape, T) is timed, so a run cut short still leaves
the rows of every T it finished;
--budget-s stops starting new rows (noted as skipped) once that many seconds have passed.

    python3 bench/bench_moe.py [--dtype bf16|fp8] [--shapes a,b] [--tokens 1,8,64] [--quick] [--out F.json]
    python3 bench/bench_moe.py --shapes qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
    python3 bench/bench_moe.py --selftest   # no GPU: pure parts; with torch also its CPU checks
"""

import argparse
import datetime
import gc
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

# name -> (E, H, I, k) of moefuse's preset of that name; checked against moefuse.preset(name)
# at run time and by --selftest. PERF.md's four first (the default), then four no bench was
# tuned on (PERF.md's P7: other E, I, k).
SHAPES = {
    "qwen3-30b-a3b": (128, 2048, 768, 8),
    "gpt-oss-120b": (128, 2880, 2880, 4),
    "mixtral-8x7b": (8, 4096, 14336, 2),
    "deepseek-v3": (256, 7168, 2048, 8),
    "qwen3-235b-a22b": (128, 4096, 1536, 8),
    "glm-4.5-air": (128, 4096, 1408, 8),
    "qwen3-next-80b-a3b": (512, 2048, 512, 10),
    "gpt-oss-20b": (32, 2880, 2880, 4),
}
PERF_SHAPES = ["qwen3-30b-a3b", "gpt-oss-120b", "mixtral-8x7b", "deepseek-v3"]
PRESET_SHAPES = set(SHAPES)  # checked against moefuse's presets (the selftest adds tiny shapes)
DEFAULT_TOKENS = [1, 8, 64, 512, 4096, 16384]
QUICK_TOKENS = [1, 64, 4096]
DENSE = "dense_equiv_cublas"
# Per dtype: the impls (in run order), the peers whose best one is "best peer", the ratio
# columns of the markdown (title, impls whose fastest is the base), weight bytes per element,
# the error tolerance vs fp64 (DESIGN.md: bf16 ~1e-2, FP8 ~5e-2) and the GEMM ceiling used
# for the compute floor.
DTYPES = {
    "bf16": {"impls": ["moefuse", "torch_loop", "torch_grouped_mm", DENSE],
             "peers": ["torch_loop", "torch_grouped_mm"],
             "ratios": [("vs grouped_mm", ["torch_grouped_mm"]), ("vs best peer", ["torch_loop", "torch_grouped_mm"]),
                        ("vs dense-equiv", [DENSE])],
             "weight_bytes": 2, "tol": 1e-2, "gemm_ceiling": "bf16_TFLOPs"},
    "fp8": {"impls": ["moefuse", "torch_scaled_grouped_mm", DENSE],
            "peers": ["torch_scaled_grouped_mm"],
            "ratios": [("vs scaled_grouped_mm", ["torch_scaled_grouped_mm"]), ("vs dense-equiv", [DENSE])],
            "weight_bytes": 1, "tol": 5e-2, "gemm_ceiling": "fp8_TFLOPs"},
}
ALL_IMPLS = list(dict.fromkeys(i for d in DTYPES.values() for i in d["impls"]))
# moefuse's FP8 schemes: suffix -> (block_shape for fused_experts, weight format, activation format).
FP8_SCHEMES = {"block128": ([128, 128], "fp8-block128", "fp8-row128"), "tensor": (None, "fp8-tensor", "fp8-tensor")}
FP8_MAX = 448.0  # largest e4m3fn value; scales are amax / 448 (1 for an all-zero block)
INT32_MAX = 2**31 - 1
LOOP_MAX_T = 4096
L2_BYTES = 60 * 10**6
ROTATE_SETS = 3
SAMPLE_TOKENS = 32
CEILING_COPY_ELEMS = 1 << 30  # 2 GiB of bf16 for the copy and read ceilings
CEILING_GEMM_N = 8192
ROW_KEYS = ["shape", "E", "H", "I", "k", "T", "dtype", "pass", "impl", "ms", "tflops", "gbps", "err"]


class BenchError(RuntimeError):
    """A row that must not be reported as a pass (wrong output, bad input, failed call)."""


# ---------------------------------------------------------------------------------------
# Pure helpers (no torch): arguments, formulas, input checks, writers. --selftest covers them.
# ---------------------------------------------------------------------------------------


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of integers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def name_list(text):
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown shape(s) {unknown or text!r}; expected some of {', '.join(SHAPES)}")
    return names


def impl_list(text):
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n not in ALL_IMPLS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown impl(s) {unknown or text!r}; expected some of {', '.join(ALL_IMPLS)}")
    return names


def gemm_list(text):
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or any(not re.fullmatch(r"[A-Za-z0-9_.]+", v) for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected distinct names like v1,hopper, got {text!r}")
    return values


def moefuse_impl_name(env=None):
    """"moefuse", or "moefuse-<v>" when MOEFUSE_GEMM=<v> (only [A-Za-z0-9_.] kept)."""
    env = os.environ if env is None else env
    v = env.get("MOEFUSE_GEMM", "")
    v = re.sub(r"[^A-Za-z0-9_.]+", "_", v).strip("_")
    return f"moefuse-{v}" if v else "moefuse"


def moefuse_opt_ins(env=None):
    """The MOEFUSE_* settings other than MOEFUSE_GEMM and MOEFUSE_LIB (which have notes of their own),
    as sorted "NAME=value" strings: the library reads them, so a result must say which were set."""
    env = os.environ if env is None else env
    return sorted(f"{k}={v}" for k, v in env.items()
                  if k.startswith("MOEFUSE_") and k not in ("MOEFUSE_GEMM", "MOEFUSE_LIB"))


def moefuse_variants(gemm_values, env=None, dtype="bf16"):
    """[(impl name, MOEFUSE_GEMM value or None for the environment as it is, FP8 scheme or
    None)] to time: one per GEMM value, and under fp8 one per FP8 scheme of each."""
    if not gemm_values:
        base = [(moefuse_impl_name(env), None)]
    else:
        base = [(moefuse_impl_name({"MOEFUSE_GEMM": v}), v) for v in gemm_values]
    if dtype != "fp8":
        return [(name, gemm, None) for name, gemm in base]
    return [(f"{name}-{scheme}", gemm, scheme) for name, gemm in base for scheme in FP8_SCHEMES]


def left_out(layer):
    """What of a preset's layer (moefuse.LayerSpec) no impl here computes: they all run the
    routed experts only, as the SiLU GLU without biases (routing is the bench's own)."""
    out = []
    if layer.activation != "swiglu":
        out.append(f"{layer.activation} activation (limit {layer.act_limit:g})")
    if layer.expert_has_bias:
        out.append("expert biases")
    if layer.num_shared_experts:
        gated = "gated " if layer.shared_gate else ""
        out.append(f"{layer.num_shared_experts} {gated}shared expert (I = {layer.shared_intermediate})")
    return out


def import_moefuse():
    """The moefuse package: the installed one, else this repository's python/."""
    try:
        import moefuse
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
        import moefuse
    return moefuse


def utc_date():
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def parse_args(argv):
    p = argparse.ArgumentParser(description="moefuse vs PyTorch peers on public MoE shapes (one process, one GPU)")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16",
                   help="bf16 (default) or fp8 (e4m3 w8a8: moefuse block128 and tensor schemes, "
                        "torch._scaled_grouped_mm, torch._scaled_mm)")
    p.add_argument("--shapes", type=name_list, default=list(PERF_SHAPES),
                   help=f"comma list of {', '.join(SHAPES)} (default: the first four, PERF.md's)")
    p.add_argument("--tokens", type=int_list, default=None,
                   help=f"comma list of T (default {','.join(map(str, DEFAULT_TOKENS))}; "
                        f"--quick: {','.join(map(str, QUICK_TOKENS))})")
    p.add_argument("--impls", type=impl_list, default=None, help="comma list (default: all of the dtype's)")
    p.add_argument("--quick", action="store_true", help="short run: fewer T, 0.1 s of replays per row")
    p.add_argument("--moefuse-gemm", type=gemm_list, default=None,
                   help="time moefuse once per MOEFUSE_GEMM value in this comma list (e.g. v1,hopper), rows "
                        "moefuse-<value>; default: one moefuse row with the environment as it is")
    p.add_argument("--out", default=None, help="JSON path (default bench/results/<date>-h200-bench[-fp8].json)")
    p.add_argument("--min-reps", type=int, default=20, help="replays per row at least (>= 20 per PERF.md)")
    p.add_argument("--target-s", type=float, default=None, help="seconds of replays per row (0.5; --quick 0.1)")
    p.add_argument("--max-reps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3,
                   help="timing rounds per (shape, T): every impl is captured and checked first, then the impls are "
                        "timed in turn, each round in a rotated order, each its share of the replays (default 3; 1: "
                        "one block per impl in run order, moefuse first)")
    p.add_argument("--budget-s", type=float, default=0.0,
                   help="stop starting new rows after this many seconds (0: no limit); the rest are noted as skipped")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--selftest", action="store_true", help="test the parts that need no GPU, then exit")
    a = p.parse_args(argv)
    allowed = DTYPES[a.dtype]["impls"]
    if a.impls is None:
        a.impls = list(allowed)
    elif any(i not in allowed for i in a.impls):
        p.error(f"--impls {','.join(a.impls)}: --dtype {a.dtype} has {','.join(allowed)}")
    if a.tokens is None:
        a.tokens = list(QUICK_TOKENS if a.quick else DEFAULT_TOKENS)
    if a.target_s is None:
        a.target_s = 0.1 if a.quick else 0.5
    if a.min_reps < 20:
        p.error(f"--min-reps {a.min_reps}: PERF.md's protocol wants at least 20")
    if a.max_reps < a.min_reps:
        p.error(f"--max-reps {a.max_reps} is below --min-reps {a.min_reps}")
    if a.rounds < 1:
        p.error(f"--rounds {a.rounds}: expected at least 1")
    if a.out is None:
        stem = f"{utc_date()}-h200-bench" + ("" if a.dtype == "bf16" else f"-{a.dtype}")
        a.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", stem + ".json")
    return a


def flops(T, k, H, I):
    return 6.0 * T * k * H * I


def active_experts(E, k, T):
    """Expected number of distinct experts T tokens touch (PERF.md: E*(1-(1-k/E)^T))."""
    return E * (1.0 - (1.0 - k / E) ** T)


def floor_bytes(E, H, I, k, T, weight_bytes=2):
    """Bytes of PERF.md's memory floor: touched expert weights (3*H*I each) plus bf16 x and y."""
    return active_experts(E, k, T) * 3 * H * I * weight_bytes + 2 * T * H * 2


def dense_bytes(H, I, k, T, weight_bytes=2):
    """Bytes dense-equiv must move at least: one expert's weights, T*k bf16 rows in and out."""
    return 3 * H * I * weight_bytes + 2 * T * k * H * 2


def floors_ms(E, H, I, k, T, read_tbps, gemm_tflops, weight_bytes=2):
    """(memory floor, compute floor) in ms at the measured ceilings."""
    mem = floor_bytes(E, H, I, k, T, weight_bytes) / (read_tbps * 1e9) if read_tbps else None
    comp = flops(T, k, H, I) / (gemm_tflops * 1e9) if gemm_tflops else None
    return mem, comp


def rotation_sets(bytes_per_set):
    """Input sets to rotate among: 3 when one set fits in L2 (it would stay there), else 1."""
    return ROTATE_SETS if bytes_per_set <= L2_BYTES else 1


def replays_needed(done, elapsed_ms, min_reps, target_s, max_reps):
    """True while another timed replay is wanted."""
    if done < min_reps:
        return True
    return done < max_reps and elapsed_ms < target_s * 1e3


def timed_samples(run_once, min_reps, target_s, max_reps, first=0):
    """run_once(i) results (ms each) for i = first, first + 1, ..., replayed per replays_needed."""
    times = []
    while replays_needed(len(times), sum(times), min_reps, target_s, max_reps):
        times.append(run_once(first + len(times)))
    return times


def median_timed(run_once, min_reps, target_s, max_reps):
    """Median of run_once() results (ms each), replayed per replays_needed; (median, count)."""
    times = timed_samples(run_once, min_reps, target_s, max_reps)
    return statistics.median(times), len(times)


def without_frames(e):
    """e with the tracebacks of its chain dropped: their frames would keep a failed row's graphs
    and tensors (its captures so far, its inputs) alive until its T is timed, and through an
    out-of-memory retry."""
    x = e
    while x is not None:
        x.__traceback__, x = None, x.__context__
    return e


def out_of_memory(e):
    """Whether e, or an exception it was raised while handling, is an out-of-memory error."""
    while e is not None:
        if "OutOfMemory" in type(e).__name__:
            return True
        e = e.__context__
    return False


def round_order(n, r):
    """Round r's order of n rows: rotated by r, so that each row leads a round in turn."""
    return [(j + r) % n for j in range(n)]


def round_share(min_reps, target_s, max_reps, rounds):
    """One round's replays of a row timed over `rounds` rounds: the minimum, target and maximum
    split evenly (the minimum rounded up, so the whole stays at least min_reps)."""
    return -(-min_reps // rounds), target_s / rounds, max(-(-max_reps // rounds), -(-min_reps // rounds))


# -- input checks (host side, once per (shape, T) before any capture) ----------------------


def _first(problems, limit=3):
    """The first few problems, and how many more."""
    more = len(problems) - limit
    return "; ".join(problems[:limit]) + (f"; and {more} more" if more > 0 else "")


def routing_problems(ids, weights, T, k, E):
    """What is wrong with flat [T*k] routing (ids as ints, weights as floats), as messages."""
    out = []
    if len(ids) != T * k or len(weights) != T * k:
        return [f"routing has {len(ids)} ids and {len(weights)} weights, expected T*k = {T * k}"]
    bad = [i for i, e in enumerate(ids) if not 0 <= e < E]
    if bad:
        out.append(f"{len(bad)} ids outside [0, {E}), first ids[{bad[0] // k}][{bad[0] % k}] = {ids[bad[0]]}")
    dup = [t for t in range(T) if len(set(ids[t * k:(t + 1) * k])) != k]
    if dup:
        out.append(f"{len(dup)} tokens repeat an expert among their top-{k}, first token {dup[0]}: "
                   f"{ids[dup[0] * k:(dup[0] + 1) * k]}")
    badw = [i for i, w in enumerate(weights) if not (math.isfinite(w) and w >= 0.0)]
    if badw:
        out.append(f"{len(badw)} routing weights not finite and >= 0, first {weights[badw[0]]}")
    return out


def offs_problems(offs, E, rows):
    """What is wrong with grouped-GEMM offsets (ints) for E groups over `rows` rows, against
    torch._grouped_mm's preconditions: E cumulative ends, int32, non-decreasing from 0, and
    (prepare_grouped_gemm_data's device assert) none above the rows of A. This bench's
    offsets count every row, so the last must be exactly `rows`."""
    if len(offs) != E:
        return [f"offs has {len(offs)} entries, expected one per expert ({E})"]
    out = []
    prev = 0
    for e, o in enumerate(offs):
        if not 0 <= o <= INT32_MAX:
            out.append(f"offs[{e}] = {o} is outside int32's non-negative range")
        elif o < prev:
            out.append(f"offs[{e}] = {o} < offs[{e - 1}] = {prev} (group sizes must be >= 0)")
        elif o > rows:
            out.append(f"offs[{e}] = {o} > {rows} rows of A (torch asserts offset <= A.shape[0] on the device)")
        prev = o
    if not out and offs[-1] != rows:
        out.append(f"offs[-1] = {offs[-1]}, expected {rows}: the groups do not cover every row")
    return out


def grouped_operand_problems(a, b, scaled):
    """What torch._grouped_mm (scaled: torch._scaled_grouped_mm, rowwise) would refuse in a 2-D
    A and a 3-D B, each given as (shape, strides, data_ptr, element_size). From torch 2.11's
    checks: K of A equals K of B; every leading dimension a multiple of 16 bytes and every
    pointer 16-byte aligned (TMA); scaled: A row-major, B column-major, K and N multiples of 16."""
    (sa, ta, pa, ea), (sb, tb, pb, eb) = a, b
    if len(sa) != 2 or len(sb) != 3:
        return [f"A is {len(sa)}-D and B {len(sb)}-D, expected 2-D A and 3-D B"]
    out = []
    if sa[1] != sb[1]:
        out.append(f"A is {list(sa)} and B {list(sb)}: K differs ({sa[1]} vs {sb[1]})")
    for name, shape, strides, ptr, es in (("A", sa, ta, pa, ea), ("B", sb, tb, pb, eb)):
        if ptr % 16:
            out.append(f"{name}'s data pointer {ptr:#x} is not 16-byte aligned")
        rows, cols = shape[-2], shape[-1]
        if strides[-1] == 1 and strides[-2] >= max(1, cols):
            lead, major = strides[-2], "row"
        elif strides[-2] == 1 and strides[-1] >= max(1, rows):
            lead, major = strides[-1], "column"
        else:
            out.append(f"{name} strides {list(strides)} for shape {list(shape)} are neither row- nor column-major")
            continue
        if lead * es % 16:
            out.append(f"{name}'s leading stride {lead} x {es} bytes is not a multiple of 16 bytes")
        if scaled and name == "A" and major != "row":
            out.append("A must be row-major for torch._scaled_grouped_mm")
        if scaled and name == "B" and major != "column":
            out.append("B must be column-major (a transposed [E, N, K]) for torch._scaled_grouped_mm")
    if scaled and (sa[1] % 16 or sb[2] % 16):
        out.append(f"K = {sa[1]} and N = {sb[2]} must be multiples of 16 for torch._scaled_grouped_mm")
    return out


# -- rows and writers ----------------------------------------------------------------------


def _round(v, digits=6):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return float(f"{v:.{digits}g}")


def make_row(shape, dims, T, impl, ms, err, dtype="bf16"):
    """A results row in PERF.md's format; ms None = failed (tflops and gbps None too)."""
    E, H, I, k = dims
    wb = DTYPES[dtype]["weight_bytes"]
    if ms is not None:
        nbytes = dense_bytes(H, I, k, T, wb) if impl == DENSE else floor_bytes(E, H, I, k, T, wb)
        tflops, gbps = flops(T, k, H, I) / ms * 1e-9, nbytes / ms * 1e-6
    else:
        tflops = gbps = None
    return {"shape": shape, "E": E, "H": H, "I": I, "k": k, "T": T, "dtype": dtype, "pass": "forward",
            "impl": impl, "ms": _round(ms), "tflops": _round(tflops, 5), "gbps": _round(gbps, 5),
            "err": _round(err, 4)}


def result_doc(gpu, commit, ceilings, rows, notes, extra=None):
    doc = {"gpu": gpu, "date": utc_date(), "commit": commit, "ceilings": ceilings, "rows": rows, "notes": notes}
    doc.update(extra or {})
    return doc


def _fmt(v, digits=4):
    if v is None:
        return "-"
    return f"{v:.{digits}g}"


def markdown(doc, shapes, tokens, dtype="bf16"):
    """The per-(shape, T) table: times, floors and moefuse's ratios to each peer."""
    cfg = DTYPES[dtype]
    c = doc["ceilings"]
    rows = [r for r in doc["rows"] if r["dtype"] == dtype]
    by = {(r["shape"], r["T"], r["impl"]): r for r in rows}
    skipped = {tuple(s) for s in doc.get("skipped", [])}
    named = [r["impl"] for r in rows] + [s[2] for s in doc.get("skipped", [])]
    moe = list(dict.fromkeys(n for n in named if n.startswith("moefuse"))) or ["moefuse"]  # in run order
    others = [i for i in cfg["impls"] if i != "moefuse"]
    short = {DENSE: "dense_equiv"}
    lines = [f"# bench_moe ({dtype}): {doc['gpu']}, {doc['date']}, commit {doc['commit'] or '?'}", "",
             f"Ceilings measured in this run: read {_fmt(c.get('read_TBps'))} TB/s, copy (read+written) "
             f"{_fmt(c.get('copy_TBps'))} TB/s, bf16 GEMM 8192^3 {_fmt(c.get('bf16_TFLOPs'))} TFLOP/s, "
             f"fp8 GEMM {_fmt(c.get('fp8_TFLOPs'))} TFLOP/s.",
             "Times in ms (median of CUDA-event-timed graph replays; torch_loop eager"
             f"{'; ' + doc['timing'] if doc.get('timing') else ''}). Ratios are peer ms / "
             f"moefuse ms (> 1: moefuse faster). 'best peer' = the fastest of {', '.join(cfg['peers'])}. "
             f"'% mem floor' = memory floor ({cfg['weight_bytes']}-byte weights) / moefuse ms; compute floor at "
             f"the {cfg['gemm_ceiling'].split('_')[0]} GEMM ceiling. FAIL = output check failed or error (not timed).",
             ""]
    for m in moe:
        head = ([f"shape | T | mem floor | compute floor | {m} | TFLOP/s | % mem floor"] +
                [short.get(i, i) for i in others] + [title for title, _ in cfg["ratios"]] + ["err"])
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * (7 + len(others) + len(cfg["ratios"]) + 1)]
        for name in shapes:
            E, H, I, k = SHAPES[name]
            for T in tokens:
                present = [i for i in [m] + others if (name, T, i) in by]
                if not present and not any((name, T, i) in skipped for i in [m] + others):
                    continue
                mem, comp = floors_ms(E, H, I, k, T, c.get("read_TBps"), c.get(cfg["gemm_ceiling"]),
                                      cfg["weight_bytes"])

                def cell(impl):
                    r = by.get((name, T, impl))
                    if r is None:
                        return "skipped" if (name, T, impl) in skipped else "-"
                    return "FAIL" if r["ms"] is None else _fmt(r["ms"])

                def ms_of(impl):
                    r = by.get((name, T, impl))
                    return r["ms"] if r is not None else None

                mr = by.get((name, T, m))
                mms = ms_of(m)

                def ratio(impls):
                    got = [ms_of(i) for i in impls if ms_of(i)]
                    return f"{min(got) / mms:.2f}x" if got and mms else "-"

                cells = ([name, str(T), _fmt(mem), _fmt(comp), cell(m), _fmt(mr["tflops"] if mr else None),
                          f"{100 * mem / mms:.0f}%" if mem and mms else "-"] + [cell(i) for i in others] +
                         [ratio(impls) for _, impls in cfg["ratios"]] +
                         [_fmt(mr["err"], 2) if mr and mr["err"] is not None else "-"])
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if doc.get("notes"):
        lines += ["Notes:", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(lines)


def write_outputs(doc, path, shapes, tokens, dtype="bf16"):
    """JSON to path, markdown to the same stem + .md; returns the markdown. Each file is
    written beside and renamed over the old one, so a kill mid-write leaves the last whole one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    clean = {k: v for k, v in doc.items() if k != "skipped"}
    clean["rows"] = [{key: r[key] for key in ROW_KEYS} for r in doc["rows"]]
    md = markdown(doc, shapes, tokens, dtype)
    for target, text in ((path, json.dumps(clean, indent=1) + "\n"), (os.path.splitext(path)[0] + ".md", md + "\n")):
        with open(target + ".tmp", "w") as f:
            f.write(text)
        os.replace(target + ".tmp", target)
    return md


def git_commit():
    env = os.environ.get("BENCH_COMMIT")
    if env:
        return env
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# ---------------------------------------------------------------------------------------
# The torch part (torch imported only here). Device-agnostic where it can be, so that
# --selftest can run the peers, the quantisers and the reference on the CPU.
# ---------------------------------------------------------------------------------------


def log(msg):
    print(msg, flush=True)


class Captured:
    """A captured CUDA graph, its output, and the function it was captured from. A graph
    replays raw addresses: every tensor the function names (e.g. a constant it made outside
    the capture) must live as long as the graph, so the function is kept here with it. (The
    first H200 run dropped it: torch_grouped_mm's `ones` was freed after capture, its memory
    reused, and the replayed expert counts summed past the row count: torch's device assert
    `offset <= tensor_ShapeA[0]`, and the CUDA context was lost.)"""

    __slots__ = ("graph", "out", "fn")

    def __init__(self, graph, out, fn):
        self.graph, self.out, self.fn = graph, out, fn


class RowTimer:
    """A row captured, checked and warm, waiting to be timed: replay(i) runs it once (input set
    i mod the sets), finish() -> its worst error over every check, the last ones after the timing."""

    __slots__ = ("replay", "finish")

    def __init__(self, replay, finish):
        self.replay, self.finish = replay, finish


class Gpu:
    """Graph capture, event timing, the ceilings, the peers, the quantisers and the fp64
    reference. device "cpu" (tests only): no streams, graphs or timing."""

    def __init__(self, args, device=None):
        try:
            import torch
            import torch.nn.functional as F
        except ImportError as e:
            raise SystemExit(f"bench_moe: FATAL: PyTorch is not importable here ({e}); this bench needs torch with CUDA")
        self.torch, self.F, self.args = torch, F, args
        self.e4m3 = getattr(torch, "float8_e4m3fn", None)
        if device is not None:
            self.dev, self.stream = torch.device(device), None
            return
        if not torch.cuda.is_available():
            raise SystemExit("bench_moe: FATAL: torch sees no CUDA device")
        self.dev = torch.device("cuda", torch.cuda.current_device())
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp64/fp32 reference must not use TF32
        self.stream = torch.cuda.Stream()  # warm-up and capture both run here (moefuse's workspace is per stream)

    # -- capture and timing ------------------------------------------------------------------
    def capture(self, fn, pool=None):
        """fn() warmed up twice, then captured; a Captured that keeps fn alive."""
        torch = self.torch
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(2):
                fn()
        self.stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=self.stream):
            out = fn()
        torch.cuda.synchronize()
        return Captured(g, out, fn)

    def capture_all(self, fns):
        """One graph per fn, all in the first one's memory pool. A later graph may reuse the
        memory of an earlier one's intermediates (never of its output, which stays alive), so
        the graphs are only consistent after a whole round of replays in capture order."""
        caps = []
        for fn in fns:
            caps.append(self.capture(fn, pool=caps[0].graph.pool() if caps else None))
        return caps

    def replay_round(self, caps):
        for c in caps:
            c.graph.replay()
        self.sync()

    def sync(self):
        self.torch.cuda.synchronize()

    def device_name(self):
        return self.torch.cuda.get_device_name()

    def empty_cache(self):
        self.torch.cuda.empty_cache()

    def clock(self, launch):
        """once(i): launch(i) timed with CUDA events on the current stream, in ms."""
        torch = self.torch
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def once(i):
            start.record()
            launch(i)
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop)

        return once

    def timed(self, launch):
        """launch(i) timed per call (ms): median and count, per the arguments' replays."""
        a = self.args
        return median_timed(self.clock(launch), a.min_reps, a.target_s, a.max_reps)

    def time_graphs(self, graphs):
        for _ in range(3):  # warm replays of every set
            for g in graphs:
                g.replay()
        self.sync()
        return self.timed(lambda i: graphs[i % len(graphs)].replay())

    def graph_row(self, fns, check_one):
        """Capture fns (one per input set), check each output (check_one(i, out) -> err) and
        warm every graph: a RowTimer replaying graph i mod n, whose finish() checks the outputs
        again after a whole round and frees the graphs."""
        caps = self.capture_all(fns)
        self.replay_round(caps)
        errs = [check_one(i, c.out) for i, c in enumerate(caps)]
        for _ in range(2):
            self.replay_round(caps)

        def finish():
            self.replay_round(caps)
            worst = max(errs + [check_one(i, c.out) for i, c in enumerate(caps)])
            caps.clear()
            return worst

        return RowTimer(lambda i: caps[i % len(caps)].graph.replay(), finish)

    # -- ceilings ------------------------------------------------------------------------
    def ceilings(self):
        torch = self.torch
        out = {"read_TBps": None, "bf16_TFLOPs": None, "fp8_TFLOPs": None, "copy_TBps": None}
        n = CEILING_COPY_ELEMS
        src = torch.randn(n, device=self.dev, dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        c = self.capture(lambda: dst.copy_(src))
        ms, _ = self.time_graphs([c.graph])
        out["copy_TBps"] = 2 * n * 2 / ms * 1e-9
        c = self.capture(lambda: src.sum(dtype=torch.float32))
        ms, _ = self.time_graphs([c.graph])
        out["read_TBps"] = n * 2 / ms * 1e-9
        c = src = dst = None  # (not del: the lambdas above name them)
        m = CEILING_GEMM_N
        a = torch.randn(m, m, device=self.dev, dtype=torch.bfloat16)
        b = torch.randn(m, m, device=self.dev, dtype=torch.bfloat16)
        c = self.capture(lambda: a @ b)
        ms, _ = self.time_graphs([c.graph])
        out["bf16_TFLOPs"] = 2 * m**3 / ms * 1e-9
        c = None
        try:  # FP8 e4m3, per-tensor scales; b column-major as _scaled_mm wants
            a8 = a.to(self.e4m3)
            b8 = b.to(self.e4m3).t()
            one = torch.ones((), device=self.dev, dtype=torch.float32)
            c = self.capture(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            ms, _ = self.time_graphs([c.graph])
            out["fp8_TFLOPs"] = 2 * m**3 / ms * 1e-9
            c = a8 = b8 = None
        except Exception as e:  # the bf16 ceilings still stand
            log(f"ceilings: fp8 GEMM not measured: {type(e).__name__}: {e}")
        a = b = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return {k: (round(v, 4) if v is not None else None) for k, v in out.items()}

    # -- inputs ----------------------------------------------------------------------------
    def weights(self, E, H, I, seed):
        torch = self.torch
        gen = torch.Generator(device=self.dev).manual_seed(seed)
        w13 = torch.randn(E, 2 * I, H, device=self.dev, dtype=torch.bfloat16, generator=gen).mul_(H**-0.5)
        w2 = torch.randn(E, H, I, device=self.dev, dtype=torch.bfloat16, generator=gen).mul_(I**-0.5)
        return w13, w2

    def input_set(self, E, H, k, T, seed):
        """x [T, H] bf16, ids [T, k] int32, ids64 (the same values), weights [T, k] fp32
        (softmax + top-k) and their bf16 copy (HF's loop multiplies in x's dtype)."""
        torch = self.torch
        gen = torch.Generator(device=self.dev).manual_seed(seed)
        x = torch.randn(T, H, device=self.dev, dtype=torch.bfloat16, generator=gen)
        logits = torch.randn(T, E, device=self.dev, dtype=torch.float32, generator=gen)
        wts, ids64 = torch.softmax(logits, dim=-1).topk(k, dim=-1)
        return {"x": x, "ids": ids64.to(torch.int32).contiguous(), "ids64": ids64.contiguous(),
                "wts": wts.contiguous(), "wts_bf16": wts.to(torch.bfloat16)}

    def sample_index(self, T):
        torch = self.torch
        n = min(T, SAMPLE_TOKENS)
        return torch.linspace(0, T - 1, n, device=self.dev).round().long().unique()

    # -- host-side input checks (once per (shape, T), outside any timing) --------------------
    def check_inputs(self, s, E, k):
        """BenchError naming what is wrong with one input set's x and routing."""
        torch = self.torch
        x, ids, ids64 = s["x"], s["ids"], s["ids64"]
        T = x.shape[0]
        problems = []
        if ids.dtype != torch.int32 or ids64.dtype != torch.int64 or tuple(ids.shape) != (T, k):
            problems.append(f"ids {ids.dtype} {tuple(ids.shape)}, ids64 {ids64.dtype}: expected int32/int64 [{T}, {k}]")
        elif not torch.equal(ids.long(), ids64):
            problems.append("ids (int32, moefuse's) and ids64 (the torch peers') differ")
        problems += routing_problems(ids64.flatten().tolist(), s["wts"].flatten().tolist(), T, k, E)
        if not bool(torch.isfinite(x).all()):
            problems.append("x has non-finite values")
        if problems:
            raise BenchError("bad inputs: " + _first(problems))

    def check_grouped(self, s, b13, b2, E, scaled, scales=None):
        """BenchError when torch._grouped_mm / _scaled_grouped_mm would refuse (or assert on
        the device for) this set's offsets or the operands built like the graph builds them;
        scales: the rowwise weight scales (s13 [E, 2I], s2 [E, H]) of the scaled one."""
        torch = self.torch
        ids64 = s["ids64"]
        T, k = ids64.shape
        ones = torch.ones(T * k, device=ids64.device, dtype=torch.int32)
        offs = self.group_by_expert(ids64, ones, E)[1]  # what the graph computes
        problems = [] if offs.dtype == torch.int32 else [f"offs dtype {offs.dtype}, expected int32"]
        problems += offs_problems(offs.tolist(), E, T * k)
        H, I = b13.shape[1], b2.shape[1]
        es = b13.element_size()
        # Stand-ins for the gathered rows and the GLU output (fresh allocations: aligned).
        rows = torch.empty(T * k, H, device="meta", dtype=b13.dtype)
        mid = torch.empty(T * k, I, device="meta", dtype=b13.dtype)

        def desc(t):
            return (tuple(t.shape), tuple(t.stride()), t.data_ptr(), es)

        for what, a, b in (("GEMM1", rows, b13), ("GEMM2", mid, b2)):
            problems += [f"{what}: {p}" for p in grouped_operand_problems(desc(a), desc(b), scaled)]
        for what, sc, b in zip(("s13", "s2"), scales or (), (b13, b2)):
            if sc.dtype != torch.float32 or tuple(sc.shape) != (E, b.shape[2]) or sc.stride(-1) != 1:
                problems.append(f"{what}: {sc.dtype} {tuple(sc.shape)} strides {sc.stride()}, expected float32 "
                                f"[{E}, {b.shape[2]}] contiguous in the last dimension")
        if problems:
            raise BenchError("grouped_mm preconditions: " + _first(problems))

    # -- FP8 quantisation (the rule of moefuse.h: scale = amax / 448, 1 for an all-zero block) -
    def _fp8_scale(self, amax):
        return self.torch.where(amax > 0, amax / FP8_MAX, self.torch.ones_like(amax))

    def quant_rows(self, m):
        """Rowwise e4m3 of a 2-D tensor: (codes, fp32 scales [rows]). The peers' in-graph
        activation quantiser, and the reference's copy of it (the same ops, the same bits)."""
        amax = m.abs().amax(dim=-1).float()
        s = self._fp8_scale(amax)
        return (m.float() / s.unsqueeze(-1)).to(self.e4m3), s

    def _blocks(self, m, br, bc):
        """m [R, C] fp32 zero-padded to multiples of (br, bc), viewed as [R/br, br, C/bc, bc]."""
        R, C = m.shape
        p = self.F.pad(m, (0, -C % bc, 0, -R % br))
        return p.view(p.shape[0] // br, br, p.shape[1] // bc, bc)

    def quant_block(self, m, br, bc):
        """[R, C] -> e4m3 codes [R, C] and fp32 scales [ceil(R/br), ceil(C/bc)]."""
        R, C = m.shape
        b = self._blocks(m.float(), br, bc)
        s = self._fp8_scale(b.abs().amax(dim=(1, 3)))
        q = (b / s[:, None, :, None]).to(self.e4m3).view(b.shape[0] * br, b.shape[2] * bc)
        return q[:R, :C].contiguous(), s

    def dequant_block(self, q, s, br, bc):
        R, C = q.shape
        full = s.double().repeat_interleave(br, 0).repeat_interleave(bc, 1)
        return q.double() * full[:R, :C]

    def quantise_weights(self, w, scheme):
        """Expert weights w [E, R, C] bf16 -> (e4m3 codes [E, R, C], fp32 scales): scheme
        "rowwise" [E, R] (the torch peers), "block128" [E, R/128, C/128] (DeepSeek's
        weight_scale_inv), "tensor" [E] (one per expert). Per expert, to bound the fp32 copy."""
        torch = self.torch
        E, R, C = w.shape
        q = torch.empty(E, R, C, device=w.device, dtype=self.e4m3)
        scales = []
        for e in range(E):
            if scheme == "rowwise":
                q[e], s = self.quant_rows(w[e])
            elif scheme == "block128":
                q[e], s = self.quant_block(w[e], 128, 128)
            elif scheme == "tensor":
                q[e], s = self.quant_block(w[e], R, C)
                s = s.reshape(())
            else:
                raise ValueError(f"scheme {scheme!r}")
            scales.append(s)
        return q, torch.stack(scales).contiguous()

    def dequant_expert(self, q, s, scheme, e):
        """Expert e's weights as float64, exactly as the codes and scales say."""
        if scheme == "rowwise":
            return q[e].double() * s[e].double().unsqueeze(-1)
        if scheme == "block128":
            return self.dequant_block(q[e], s[e], 128, 128)
        return q[e].double() * s[e].double()

    def act_roundtrip(self, x, rule):
        """x [T, H] through an activation quantiser and back, float64: "rowwise" (the peers),
        "row128" (moefuse FP8_ROW128: 1x128 groups) or "tensor" (one scale for all of x)."""
        if rule == "rowwise":
            q, s = self.quant_rows(x)
            return q.double() * s.double().unsqueeze(-1)
        T, H = x.shape
        br, bc = (1, 128) if rule == "row128" else (T, H)
        q, s = self.quant_block(x, br, bc)
        return self.dequant_block(q, s, br, bc)

    # -- the fp64 reference ----------------------------------------------------------------
    def reference(self, sets, expert_weights, I, x_rows=None, mid=None):
        """(idx, [n, H] float64 outputs per set) of each set's sampled tokens:
        sum_j w_j * W2 mid(silu(g) * u). expert_weights(e) -> (W13 [2I, H], W2 [H, I]) float64;
        x_rows(s, idx) -> [n, H] float64 (default: x itself; FP8: x through the impl's quantiser);
        mid: the impl's quantiser of the intermediate rows, when rows alone decide it."""
        torch, F = self.torch, self.F
        idx = self.sample_index(sets[0]["x"].shape[0])
        xs = [x_rows(s, idx) if x_rows else s["x"][idx].double() for s in sets]
        ids = [s["ids64"][idx] for s in sets]
        wts = [s["wts"][idx].double() for s in sets]
        outs = [torch.zeros(x.shape[0], x.shape[1], device=self.dev, dtype=torch.float64) for x in xs]
        for e in torch.cat([i.flatten() for i in ids]).unique().tolist():
            w1e, w2e = expert_weights(e)
            for i in range(len(sets)):
                rows, slots = (ids[i] == e).nonzero(as_tuple=True)
                if rows.numel() == 0:
                    continue
                h = xs[i][rows] @ w1e.T
                a = F.silu(h[:, :I]) * h[:, I:]
                o = (mid(a) if mid else a) @ w2e.T
                outs[i].index_add_(0, rows, o * wts[i][rows, slots][:, None])
        return idx, outs

    def check(self, y, idx, ref, what, tol):
        """Relative Frobenius error of y[idx] against ref; BenchError when it is not a pass."""
        torch = self.torch
        if y.dtype != torch.bfloat16:
            raise BenchError(f"{what}: output dtype {y.dtype}, expected bfloat16")
        if not bool(torch.isfinite(y).all()):
            raise BenchError(f"{what}: output has non-finite values")
        ref_norm = float(ref.norm())
        if ref_norm == 0.0:
            raise BenchError(f"{what}: the reference is all zero (inputs drawn wrong)")
        err = float((y[idx].double() - ref).norm()) / ref_norm
        if not err <= tol:
            e = BenchError(f"{what}: rel Frobenius error {err:.3g} > {tol} on {len(idx)} sampled tokens")
            e.err = err  # recorded in the failed row
            raise e
        return err

    # -- the implementations ---------------------------------------------------------------
    def group_by_expert(self, ids64, ones, E):
        """(order, offs): the T*k (token, slot) rows sorted by expert, and each expert's end
        row (int32 [E], torch._grouped_mm's offs); ones: T*k int32 ones, made by the caller."""
        torch = self.torch
        flat = ids64.flatten()
        order = flat.argsort(stable=True)
        counts = torch.zeros(E, device=flat.device, dtype=torch.int32).scatter_add_(0, flat, ones)
        return order, counts.cumsum(0, dtype=torch.int32)

    def combine(self, o, order, wts, k):
        """Expert-ordered output rows o [T*k, H] weighted (fp32), put back in (token, slot)
        order and summed over the k slots: bf16 [T, H]."""
        torch = self.torch
        o = o.float() * wts.flatten()[order].unsqueeze(1)
        out = torch.empty_like(o).index_copy_(0, order, o)
        return out.view(-1, k, o.shape[1]).sum(1).to(torch.bfloat16)

    def grouped_mm_fn(self, s, w13t, w2t, E, I, k):
        """torch._grouped_mm's MoE forward on set s; w13t [E, H, 2I], w2t [E, I, H] (transposed views)."""
        torch, F = self.torch, self.F
        x, ids64, wts = s["x"], s["ids64"], s["wts"]
        ones = torch.ones(x.shape[0] * k, device=self.dev, dtype=torch.int32)  # lives with fn (see Captured)

        def fwd():
            order, offs = self.group_by_expert(ids64, ones, E)
            h = torch._grouped_mm(x.index_select(0, order // k), w13t, offs=offs)
            a = F.silu(h[:, :I]) * h[:, I:]
            return self.combine(torch._grouped_mm(a, w2t, offs=offs), order, wts, k)

        return fwd

    def scaled_grouped_mm_fn(self, s, q13t, s13, q2t, s2, E, I, k, mm=None):
        """The same with torch._scaled_grouped_mm (rowwise): q13t [E, H, 2I] / q2t [E, I, H]
        e4m3 (transposed views), s13 [E, 2I] / s2 [E, H] fp32; x quantised per token before
        the gather, the GLU output per row before GEMM2, both inside the graph."""
        torch, F = self.torch, self.F
        mm = mm or torch._scaled_grouped_mm
        x, ids64, wts = s["x"], s["ids64"], s["wts"]
        ones = torch.ones(x.shape[0] * k, device=self.dev, dtype=torch.int32)  # lives with fn (see Captured)

        def fwd():
            order, offs = self.group_by_expert(ids64, ones, E)
            xq, xscale = self.quant_rows(x)
            rows = order // k
            # The gather moves the codes as bytes (index_select on float8 may not exist on CUDA).
            xg = xq.view(torch.uint8).index_select(0, rows).view(xq.dtype)
            h = mm(xg, q13t, xscale.index_select(0, rows), s13, offs=offs, out_dtype=torch.bfloat16)
            a = F.silu(h[:, :I]) * h[:, I:]
            aq, ascale = self.quant_rows(a)
            return self.combine(mm(aq, q2t, ascale, s2, offs=offs, out_dtype=torch.bfloat16), order, wts, k)

        return fwd

    def loop_forward(self, s, w13, w2, E, I):
        """Hugging Face's MoE block loop (Mixtral / Qwen3-MoE), routing weights in x's dtype."""
        torch, F = self.torch, self.F
        x, ids64, wts = s["x"], s["ids64"], s["wts_bf16"]
        y = torch.zeros_like(x)
        mask = F.one_hot(ids64, num_classes=E).permute(2, 1, 0)  # [E, k, T]
        hit = (mask.sum(dim=(-1, -2)) > 0).nonzero().flatten().tolist()
        for e in hit:
            slot, tok = torch.where(mask[e])
            cur = x[tok]
            h = F.silu(F.linear(cur, w13[e, :I])) * F.linear(cur, w13[e, I:])
            y.index_add_(0, tok, F.linear(h, w2[e]) * wts[tok, slot, None])
        return y

    def dense_fn(self, xr, w1e, w2e, I):
        F = self.F

        def fwd():
            h = xr @ w1e.T
            return (F.silu(h[:, :I]) * h[:, I:]) @ w2e.T

        return fwd

    def dense_fp8_fn(self, xr, q1e, s1e, q2e, s2e, I, mm=None):
        """dense-equiv in FP8: torch._scaled_mm rowwise; q1e [2I, H] / q2e [H, I] e4m3 with
        per-row scales s1e [2I] / s2e [H]; activations quantised per row in the graph."""
        torch, F = self.torch, self.F
        mm = mm or torch._scaled_mm
        b1, b2 = q1e.t(), q2e.t()  # column-major [H, 2I], [I, H]
        sb1, sb2 = s1e.reshape(1, -1).contiguous(), s2e.reshape(1, -1).contiguous()

        def fwd():
            xq, xs = self.quant_rows(xr)
            h = mm(xq, b1, scale_a=xs.unsqueeze(1), scale_b=sb1, out_dtype=torch.bfloat16)
            a = F.silu(h[:, :I]) * h[:, I:]
            aq, a_s = self.quant_rows(a)
            return mm(aq, b2, scale_a=a_s.unsqueeze(1), scale_b=sb2, out_dtype=torch.bfloat16)

        return fwd

    def dense_reference(self, xr, w1e, w2e, I, x_rows=None, mid=None):
        """(idx, fp64 output rows) of dense-equiv; w1e/w2e float64, x_rows and mid as in reference."""
        idx = self.sample_index(xr.shape[0])
        x = x_rows(xr, idx) if x_rows else xr[idx].double()
        h = x @ w1e.T
        a = self.F.silu(h[:, :I]) * h[:, I:]
        return idx, (mid(a) if mid else a) @ w2e.T


class ShapeWeights:
    """One shape's weights as each impl family takes them, and each family's fp64 view of
    expert e (what its reference multiplies by). bf16: w13 [E, 2I, H], w2 [E, H, I]. fp8:
    the bf16 draw quantised per family ("rowwise" for the torch peers, "block128" / "tensor"
    for moefuse's schemes), then dropped."""

    def __init__(self, gpu, dtype, E, H, I, seed, families):
        self.gpu, self.dtype, self.I = gpu, dtype, I
        w13, w2 = gpu.weights(E, H, I, seed)
        if dtype == "bf16":
            self.bf16 = (w13, w2)
            self.q = {}
        else:
            self.bf16 = None
            self.q = {f: gpu.quantise_weights(w13, f) + gpu.quantise_weights(w2, f) for f in families}
        del w13, w2

    def expert(self, family, e):
        """(W13 [2I, H], W2 [H, I]) float64 of expert e as `family` computes with them."""
        if self.dtype == "bf16":
            return self.bf16[0][e].double(), self.bf16[1][e].double()
        g = self.gpu
        q13, s13, q2, s2 = self.q[family]
        w13 = g.dequant_expert(q13, s13, family, e)
        I = self.I
        if family == "block128" and I % 128:
            # moefuse packs gate and up each on its own 128-row grid (moefuse.h): CONCAT blocks
            # that straddle the two are decoded and quantised anew, per half.
            halves = [g.quant_block(w13[r].float(), 128, 128) for r in (slice(0, I), slice(I, 2 * I))]
            w13 = g.torch.cat([g.dequant_block(q, s, 128, 128) for q, s in halves])
        return w13, g.dequant_expert(q2, s2, family, e)


def run(args, gpu=None):
    t_start = time.time()
    gpu = gpu or Gpu(args)
    torch = gpu.torch
    cfg = DTYPES[args.dtype]
    tol = cfg["tol"]
    fp8 = args.dtype == "fp8"
    variants = moefuse_variants(args.moefuse_gemm, dtype=args.dtype)
    notes = [f"torch {torch.__version__}; --dtype {args.dtype}; all shapes: routed experts only, SiLU GLU without "
             f"biases; routing softmax + top-k (not renormalised), identical for every impl; err = rel Frobenius "
             f"vs fp64 on <= {SAMPLE_TOKENS} sampled tokens per input set, after one replay and again after the "
             f"timed ones, pass <= {tol}",
             f"replays per row: >= {args.min_reps}, until {args.target_s} s (<= {args.max_reps}); "
             f"{ROTATE_SETS} rotated input sets when one set (x + routing) is <= {L2_BYTES // 10**6} MB",
             f"gbps = PERF.md's memory-floor bytes ({cfg['weight_bytes']}-byte weights) / ms (dense_equiv: one "
             f"expert's weights + T*k rows in and out)"]
    if fp8:
        notes += ["fp8: e4m3 weights and activations, bf16 x and y. torch_scaled_grouped_mm and dense_equiv "
                  "(torch._scaled_mm): weights with one fp32 scale per output row, x and the GLU output quantised "
                  "per row inside the graph. moefuse-*-block128: 128x128 weight blocks, 1x128 activation groups; "
                  "moefuse-*-tensor: one scale per expert matrix and per activation tensor. Scales amax/448. "
                  "Each impl's reference: its own dequantised weights, x through its own activation quantiser, "
                  "and the intermediate through it too where each row decides its scales (rowwise, 1x128); "
                  "moefuse-*-tensor's intermediate (one scale over all rows) stays unquantised, so its err "
                  "includes that rounding (~2-3%)"]
    else:
        notes.append(f"torch_loop is eager (host sync per expert) and skipped above T={LOOP_MAX_T}; the other impls "
                     f"are CUDA graph replays")
    if args.moefuse_gemm:
        notes.append(f"moefuse timed once per MOEFUSE_GEMM in {','.join(args.moefuse_gemm)} (set before each capture)")
    elif os.environ.get("MOEFUSE_GEMM"):
        notes.append(f"MOEFUSE_GEMM={os.environ['MOEFUSE_GEMM']} (impl {variants[0][0]})")
    opt_ins = moefuse_opt_ins()
    if opt_ins:
        notes.append("moefuse settings from the environment: " + " ".join(opt_ins))
    failures = []
    run_impls = [n for i in args.impls for n in ([v[0] for v in variants] if i == "moefuse" else [i])]
    doc = result_doc(gpu.device_name(), git_commit(), {}, [], notes,
                     {"skipped": [], "timing": f"{args.rounds} rotated rounds per (shape, T)" if args.rounds > 1
                      else "each impl in one block, in run order"})
    lost = []  # the message, once the CUDA context is gone: nothing after it can run

    def save():
        write_outputs(doc, args.out, args.shapes, args.tokens, args.dtype)

    def fail(msg):
        log("bench_moe: ERROR: " + msg)
        failures.append(msg)
        notes.append(msg)

    mf = None
    if "moefuse" in args.impls:
        try:
            moefuse = import_moefuse()
            import moefuse.torch as mft
            notes.append(f"moefuse {moefuse.version()} ({os.path.dirname(moefuse.__file__)}), "
                         f"MOEFUSE_LIB={os.environ.get('MOEFUSE_LIB', '(unset)')}")
            mf = (moefuse, mft)
        except Exception as e:
            msg = f"moefuse could not be loaded: {type(e).__name__}: {e}"
            log("!" * 80 + f"\nbench_moe: ERROR: {msg}\n" + "!" * 80)
            notes.append(msg)
            failures.append(msg)

    log(f"bench_moe: {doc['gpu']}, commit {doc['commit'] or '?'}, dtype {args.dtype}, impls {','.join(run_impls)}, "
        f"shapes {','.join(args.shapes)}, T {','.join(map(str, args.tokens))}")
    try:
        c = gpu.ceilings()
    except Exception as e:  # the rows can still be compared with each other
        c = {"read_TBps": None, "bf16_TFLOPs": None, "fp8_TFLOPs": None, "copy_TBps": None}
        fail(f"ceilings FAILED: {type(e).__name__}: {e}")
    doc["ceilings"] = c
    log(f"ceilings: read {c['read_TBps']} TB/s, copy {c['copy_TBps']} TB/s, bf16 {c['bf16_TFLOPs']} TFLOP/s, "
        f"fp8 {c['fp8_TFLOPs']} TFLOP/s ({time.time() - t_start:.0f} s)")

    def over_budget(reserve_s=0.0):
        """True when the budget (less reserve_s, what the next step is expected to take) is spent."""
        return args.budget_s > 0 and time.time() - t_start > args.budget_s - reserve_s

    def cuda_alive(after):
        """False (and the run stops) once a device-side error has taken the CUDA context."""
        if lost:
            return False
        try:
            gpu.sync()
            return True
        except Exception as e:
            lost.append(f"the CUDA context was lost after {after} ({type(e).__name__}: {str(e).splitlines()[0]}); "
                        f"every later row is skipped")
            fail(lost[0])
            return False

    pending = []  # this (shape, T)'s rows: [impl, RowTimer or None, exception or None, seconds, times, round medians]

    def record(name, dims, T, impl, fn, nsets):
        """fn() -> a RowTimer (captured, checked, warm) or raises: queued for time_pending. Out of
        memory with other rows still captured: those are timed and freed first (time_pending, noted),
        and fn runs once more."""
        if lost:
            doc["skipped"].append((name, T, impl))
            return

        def prepared():
            t1 = time.time()
            try:
                return [impl, fn(), None, time.time() - t1, [], []]
            except Exception as e:  # a failing impl is reported (time_pending) and the run goes on
                return [impl, None, without_frames(e), time.time() - t1, [], []]

        row = prepared()
        if row[2] is not None and out_of_memory(row[2]) and any(p[1] is not None for p in pending):
            notes.append(f"{name} T={T}: out of memory capturing {impl} beside {len(pending)} captured rows: "
                         f"those were timed first, without it")
            time_pending(name, dims, T, nsets)
            gc.collect()
            gpu.empty_cache()
            row = prepared()
        pending.append(row)
        if row[2] is not None:
            cuda_alive(f"{name} T={T} {impl}")

    def time_pending(name, dims, T, nsets):
        """Times the queued rows together: args.rounds rounds, each in a rotated order (round_order),
        each row its share of the replays (round_share) after one untimed replay, so that no impl
        always runs first on a cool card; then each row's last checks (finish), and every row,
        passed or failed, appended in run order. Saves."""
        share = round_share(args.min_reps, args.target_s, args.max_reps, args.rounds)
        for r in range(args.rounds):
            live = [j for j, p in enumerate(pending) if p[1] is not None]  # rotate over the rows still timed
            for i in round_order(len(live), r):
                p = pending[live[i]]
                if p[1] is None or lost:
                    continue
                t1 = time.time()
                try:
                    p[1].replay(len(p[4]))
                    got = timed_samples(gpu.clock(p[1].replay), *share, first=len(p[4]) + 1)
                    p[4] += got
                    p[5].append(statistics.median(got))
                except Exception as e:
                    p[1], p[2] = None, without_frames(e)
                    cuda_alive(f"{name} T={T} {p[0]} (timing)")
                p[3] += time.time() - t1
        for impl, timer, exc, secs, times, per_round in pending:
            if lost and exc is None:
                doc["skipped"].append((name, T, impl))
                continue
            label = f"{name:18s} T={T:6d} {impl:24s}"
            try:
                if exc is not None:
                    raise exc
                err = timer.finish()
                ms = statistics.median(times)
                doc["rows"].append(make_row(name, dims, T, impl, ms, err, args.dtype))
                log(f"{label} {ms:10.4f} ms  {flops(T, dims[3], dims[1], dims[2]) / ms * 1e-9:7.1f} TFLOP/s  "
                    f"err {err:.2e}  ({len(times)} reps in {args.rounds} round{'s' if args.rounds > 1 else ''}"
                    f"{' of ' + '/'.join(f'{m:.4f}' for m in per_round) + ' ms' if args.rounds > 1 else ''}, "
                    f"{nsets} set{'s' if nsets > 1 else ''}, {secs:.1f} s)")
            except Exception as e:  # a failing impl is reported and the run goes on
                doc["rows"].append(make_row(name, dims, T, impl, None, getattr(e, "err", None), args.dtype))
                msg = f"{name} T={T} {impl}: FAILED: {type(e).__name__}: {e}"
                failures.append(msg)
                notes.append(msg)
                log(f"{label} FAILED: {type(e).__name__}: {e}")
                cuda_alive(f"{name} T={T} {impl}")
        pending.clear()
        save()

    def shape_rows(name, dims, t0):
        """Every row of one shape; its weights are freed when this returns."""
        E, H, I, k = dims
        families = []
        if fp8 and "moefuse" in args.impls:
            families += [s for _, _, s in variants if s not in families]
        if fp8 and ("torch_scaled_grouped_mm" in args.impls or DENSE in args.impls):
            families.append("rowwise")
        W = ShapeWeights(gpu, args.dtype, E, H, I, args.seed + E * H + I, families)
        if fp8:
            q13r, s13r, q2r, s2r = W.q.get("rowwise", (None,) * 4)
            b13, b2 = (q13r.transpose(1, 2), q2r.transpose(1, 2)) if q13r is not None else (None, None)
        else:
            w13, w2 = W.bf16
            b13, b2 = w13.transpose(1, 2), w2.transpose(1, 2)  # [E, H, 2I], [E, I, H] for _grouped_mm
        gpu.sync()
        log(f"\n== {name}: E={E} H={H} I={I} k={k}; weights drawn{' and quantised' if fp8 else ''} "
            f"in {time.time() - t0:.1f} s")
        packed = set()
        for T in args.tokens:
            if lost:
                doc["skipped"] += [(name, T, i) for i in run_impls]
                continue
            if over_budget():
                msg = f"{name} T={T}: skipped, over the {args.budget_s:g} s budget"
                log(msg)
                notes.append(msg)
                doc["skipped"] += [(name, T, i) for i in run_impls]
                continue
            nsets = rotation_sets(T * H * 2 + T * k * 8)
            try:
                sets = [gpu.input_set(E, H, k, T, args.seed * 1000003 + T * 7 + i) for i in range(nsets)]
                bad = None
                for s in sets:
                    gpu.check_inputs(s, E, k)
            except BenchError as e:  # every row of this T would be wrong: one message each, no capture
                bad = e
            except Exception as e:  # no inputs: no row of this T can run
                fail(f"{name} T={T}: FAILED drawing the inputs: {type(e).__name__}: {e}")
                cuda_alive(f"{name} T={T} inputs")
                continue
            refs = {}
            pending.clear()  # (a row queued before an error outside any row is dropped with its T)

            def family_ref(family):
                """(idx, fp64 outputs per set) of one family's quantised inputs, made once per T."""
                if family not in refs:
                    rule = {"rowwise": "rowwise", "block128": "row128", "tensor": "tensor"}.get(family)
                    if rule == "tensor":  # one scale over all of x
                        x_rows = lambda s, idx: gpu.act_roundtrip(s["x"], rule)[idx]
                    else:  # each row its own scales: only the sampled rows are needed
                        x_rows = (lambda s, idx: gpu.act_roundtrip(s["x"][idx], rule)) if rule else None
                    # The intermediate's quantisation is emulated where its own row decides it.
                    mid = (lambda a: gpu.act_roundtrip(a, rule)) if rule in ("rowwise", "row128") else None
                    refs[family] = gpu.reference(sets, lambda e: W.expert(family, e), I, x_rows, mid)
                return refs[family]

            def graph_impl(make_fn, family, what, preflight=None):
                def go():
                    if bad is not None:
                        raise bad
                    if preflight is not None:  # host-side, before anything of this impl runs
                        for s in sets:
                            preflight(s)
                    idx, ref = family_ref(family)
                    fns = [make_fn(s) for s in sets]
                    return gpu.graph_row(fns, lambda i, y: gpu.check(y, idx, ref[i], f"{what} set {i}", tol))
                return go

            if "moefuse" in args.impls:
                for impl, gemm, scheme in variants:
                    if mf is None:
                        doc["rows"].append(make_row(name, dims, T, impl, None, None, args.dtype))
                        continue
                    mft = mf[1]
                    if scheme is None:
                        wargs = (W.bf16[0], W.bf16[1])
                        kw = {}
                    else:  # vLLM's w8a8 arguments (moefuse.torch.fused_experts)
                        q13, s13, q2, s2 = W.q[scheme]
                        wargs = (q13, q2)
                        kw = {"use_fp8_w8a8": True, "w1_scale": s13, "w2_scale": s2,
                              "block_shape": FP8_SCHEMES[scheme][0]}

                    def make(s, wargs=wargs, kw=kw):
                        return lambda: mft.fused_experts(s["x"], wargs[0], wargs[1], s["wts"], s["ids"], **kw)

                    if scheme not in packed and bad is None:  # pack once per shape, outside any capture
                        t1 = time.time()
                        try:
                            make(sets[0])()
                            gpu.sync()
                            log(f"{name}: moefuse packed the {scheme or 'bf16'} weights in {time.time() - t1:.1f} s")
                        except Exception:
                            pass  # the row below fails with the same error and records it
                        packed.add(scheme)
                    saved = os.environ.get("MOEFUSE_GEMM")
                    if gemm is not None:  # the library reads it when the forward is captured
                        os.environ["MOEFUSE_GEMM"] = gemm
                    try:
                        record(name, dims, T, impl, graph_impl(make, scheme, impl), nsets)
                    finally:
                        if saved is None:
                            os.environ.pop("MOEFUSE_GEMM", None)
                        else:
                            os.environ["MOEFUSE_GEMM"] = saved
            if "torch_loop" in args.impls:
                if T > LOOP_MAX_T:
                    doc["skipped"].append((name, T, "torch_loop"))
                else:
                    def loop():
                        if bad is not None:
                            raise bad
                        idx, ref = family_ref(None)
                        y = gpu.loop_forward(sets[0], w13, w2, E, I)
                        gpu.sync()
                        err = gpu.check(y, idx, ref[0], "torch_loop", tol)
                        for _ in range(2):
                            for s in sets:
                                gpu.loop_forward(s, w13, w2, E, I)
                        return RowTimer(lambda i: gpu.loop_forward(sets[i % len(sets)], w13, w2, E, I), lambda: err)
                    record(name, dims, T, "torch_loop", loop, nsets)
            if "torch_grouped_mm" in args.impls:
                record(name, dims, T, "torch_grouped_mm", graph_impl(
                    lambda s: gpu.grouped_mm_fn(s, b13, b2, E, I, k), None, "torch_grouped_mm",
                    preflight=lambda s: gpu.check_grouped(s, b13, b2, E, False)), nsets)
            if "torch_scaled_grouped_mm" in args.impls:
                record(name, dims, T, "torch_scaled_grouped_mm", graph_impl(
                    lambda s: gpu.scaled_grouped_mm_fn(s, b13, s13r, b2, s2r, E, I, k), "rowwise",
                    "torch_scaled_grouped_mm",
                    preflight=lambda s: gpu.check_grouped(s, b13, b2, E, True, (s13r, s2r))), nsets)
            if DENSE in args.impls:
                def dense():
                    n_d = rotation_sets(T * k * H * 2)
                    xrs = [torch.randn(T * k, H, device=gpu.dev, dtype=torch.bfloat16) for _ in range(n_d)]
                    if fp8:
                        fns = [gpu.dense_fp8_fn(xr, q13r[0], s13r[0], q2r[0], s2r[0], I) for xr in xrs]
                        w1e, w2e = W.expert("rowwise", 0)
                        x_rows = lambda xr, idx: gpu.act_roundtrip(xr, "rowwise")[idx]
                        mid = lambda a: gpu.act_roundtrip(a, "rowwise")
                    else:
                        fns = [gpu.dense_fn(xr, w13[0], w2[0], I) for xr in xrs]
                        w1e, w2e, x_rows, mid = w13[0].double(), w2[0].double(), None, None
                    refs_d = [gpu.dense_reference(xr, w1e, w2e, I, x_rows, mid) for xr in xrs]
                    return gpu.graph_row(fns, lambda i, y: gpu.check(y, refs_d[i][0], refs_d[i][1],
                                                                     f"{DENSE} set {i}", tol))
                record(name, dims, T, DENSE, dense, nsets)
            time_pending(name, dims, T, nsets)
            sets = refs = None  # free this T's inputs (not del: the closures name them)
            gc.collect()
            save()

    for name in args.shapes:
        dims = SHAPES[name]
        E, H, I, k = dims
        if lost:
            doc["skipped"] += [(name, T, i) for T in args.tokens for i in run_impls]
            continue
        # Drawing (and quantising) the weights, packing them through the host: ~1.5 GB/s, guessed.
        if over_budget(reserve_s=5 + 3 * E * H * I * 2 / 1.5e9):
            msg = f"{name}: skipped, the {args.budget_s:g} s budget would be spent on its weights"
            log(msg)
            notes.append(msg)
            doc["skipped"] += [(name, T, i) for T in args.tokens for i in run_impls]
            continue
        if mf is not None and name in PRESET_SHAPES:
            try:
                layer = mf[0].preset(name).layer
                got = (layer.num_experts, layer.hidden, layer.intermediate, layer.top_k)
                if got != dims:
                    raise BenchError(f"moefuse.preset({name!r}) has (E, H, I, k) = {got}, SHAPES says {dims}")
                if left_out(layer):
                    notes.append(f"{name}: every impl leaves out its preset's {'; '.join(left_out(layer))}")
            except Exception as e:
                fail(str(e))
        t0 = time.time()
        try:
            shape_rows(name, dims, t0)
        except Exception as e:  # outside any row (drawing weights, quantising): note, go on
            fail(f"{name}: FAILED outside a row: {type(e).__name__}: {e}")
            cuda_alive(f"{name} (outside a row)")
        # Free the shape before the next: graphs are gone, so the packed weights may go too.
        if mf is not None:
            mf[1].clear_cache()
        gc.collect()
        if cuda_alive(f"{name} (freeing it)"):
            gpu.empty_cache()
        save()
        log(f"== {name} done in {time.time() - t0:.0f} s (total {time.time() - t_start:.0f} s); wrote {args.out}")

    md = write_outputs(doc, args.out, args.shapes, args.tokens, args.dtype)
    log(f"\nbench_moe: {len(doc['rows'])} rows in {time.time() - t_start:.0f} s -> {args.out} and .md\n")
    if failures:
        log("FAILURES:\n  " + "\n  ".join(failures))
    log(md)
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------
# --selftest: everything above that needs no GPU. The pure part always; with torch
# importable also the peers, quantisers, input checks and the reference on the CPU (and
# moefuse's CPU backend through the binding when the library loads).
# ---------------------------------------------------------------------------------------


class _Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}")


def _selftest_args(check):
    import contextlib
    import io
    a = parse_args([])
    check(a.tokens == DEFAULT_TOKENS and a.shapes == PERF_SHAPES and a.impls == DTYPES["bf16"]["impls"], "defaults")
    check(len(SHAPES) == 8 and set(PERF_SHAPES) < set(SHAPES) == PRESET_SHAPES, "SHAPES: PERF.md's four and four more")
    untuned = ["qwen3-235b-a22b", "glm-4.5-air", "qwen3-next-80b-a3b", "gpt-oss-20b"]
    check(parse_args(["--shapes", ",".join(untuned)]).shapes == untuned, "the untuned shapes parse")
    check(a.target_s == 0.5 and a.min_reps == 20 and a.dtype == "bf16", "default replays, dtype")
    check(a.out.endswith(f"results/{utc_date()}-h200-bench.json"), f"default out {a.out}")
    a = parse_args(["--dtype", "fp8"])
    check(a.impls == ["moefuse", "torch_scaled_grouped_mm", DENSE], f"fp8 impls {a.impls}")
    check(a.out.endswith(f"results/{utc_date()}-h200-bench-fp8.json"), f"fp8 out {a.out}")
    a = parse_args(["--quick", "--shapes", "deepseek-v3,qwen3-30b-a3b", "--tokens", "3,5", "--out", "x.json"])
    check(a.tokens == [3, 5] and a.shapes == ["deepseek-v3", "qwen3-30b-a3b"] and a.target_s == 0.1, "overrides")
    check(parse_args(["--quick"]).tokens == QUICK_TOKENS, "quick tokens")
    for bad in (["--shapes", "llama"], ["--tokens", "1,x"], ["--tokens", "0"], ["--min-reps", "5"],
                ["--impls", "triton"], ["--moefuse-gemm", "v1,v1"], ["--moefuse-gemm", "a b"],
                ["--dtype", "fp4"], ["--dtype", "fp8", "--impls", "torch_loop"],
                ["--impls", "torch_scaled_grouped_mm"], ["--rounds", "0"]):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                parse_args(bad)
            check(False, f"{bad} accepted")
        except SystemExit as e:
            check(e.code == 2, f"{bad} exit code {e.code}")

    check(moefuse_impl_name({}) == "moefuse", "impl name")
    check(moefuse_impl_name({"MOEFUSE_GEMM": "hopper"}) == "moefuse-hopper", "impl suffix")
    check(moefuse_impl_name({"MOEFUSE_GEMM": "a b/c"}) == "moefuse-a_b_c", "impl suffix sanitised")
    check(moefuse_opt_ins({"MOEFUSE_PDL": "1", "MOEFUSE_GEMM": "v1", "MOEFUSE_LIB": "/x", "PATH": "/bin",
                           "MOEFUSE_FP8_A2": "epilogue"}) ==
          ["MOEFUSE_FP8_A2=epilogue", "MOEFUSE_PDL=1"], "opt-ins listed, GEMM and LIB left to their notes")
    check(moefuse_opt_ins({}) == [], "no opt-ins")
    check(moefuse_variants(None, {}) == [("moefuse", None, None)], "variants default")
    check(moefuse_variants(None, {"MOEFUSE_GEMM": "v1"}) == [("moefuse-v1", None, None)], "variants from env")
    check(moefuse_variants(parse_args(["--moefuse-gemm", "v1,hopper"]).moefuse_gemm) ==
          [("moefuse-v1", "v1", None), ("moefuse-hopper", "hopper", None)], "variants from --moefuse-gemm")
    check(moefuse_variants(None, {}, "fp8") == [("moefuse-block128", None, "block128"),
                                                 ("moefuse-tensor", None, "tensor")], "fp8 variants")
    check([v[0] for v in moefuse_variants(["hopper"], {}, "fp8")] == ["moefuse-hopper-block128",
                                                                      "moefuse-hopper-tensor"], "fp8 gemm variants")


def _selftest_left_out(check):
    from types import SimpleNamespace as Spec
    plain = dict(activation="swiglu", act_limit=0.0, expert_has_bias=False, num_shared_experts=0,
                 shared_intermediate=0, shared_gate=False)
    check(left_out(Spec(**plain)) == [], "left_out: nothing for a plain SiLU GLU")
    oai = Spec(**dict(plain, activation="swiglu-oai", act_limit=7.0, expert_has_bias=True))
    check(left_out(oai) == ["swiglu-oai activation (limit 7)", "expert biases"], f"left_out gpt-oss: {left_out(oai)}")
    shared = Spec(**dict(plain, num_shared_experts=1, shared_intermediate=512, shared_gate=True))
    check(left_out(shared) == ["1 gated shared expert (I = 512)"], f"left_out qwen3-next: {left_out(shared)}")


def _selftest_presets(check):
    """Every SHAPES entry against moefuse's preset of that name, and what the module docstring
    says the impls leave out of each. Skipped when the library does not load."""
    try:
        moefuse = import_moefuse()
        moefuse.version()  # loads the library
    except Exception as e:
        print(f"skipped: SHAPES against moefuse's presets ({type(e).__name__}: {e})")
        return
    oai = ["swiglu-oai activation (limit 7)", "expert biases"]
    expected = {"qwen3-30b-a3b": [], "gpt-oss-120b": oai, "mixtral-8x7b": [],
                "deepseek-v3": ["1 shared expert (I = 2048)"], "qwen3-235b-a22b": [],
                "glm-4.5-air": ["1 shared expert (I = 1408)"],
                "qwen3-next-80b-a3b": ["1 gated shared expert (I = 512)"], "gpt-oss-20b": oai}
    for name in SHAPES:
        try:
            layer = moefuse.preset(name).layer
        except Exception as e:
            check(False, f"{name}: no such preset: {type(e).__name__}: {e}")
            continue
        got = (layer.num_experts, layer.hidden, layer.intermediate, layer.top_k)
        check(got == SHAPES[name], f"{name}: SHAPES {SHAPES[name]}, preset {got}")
        check(left_out(layer) == expected[name], f"{name}: left out {left_out(layer)}, expected {expected[name]}")


def _selftest_formulas(check):
    # PERF.md's floor column at its ceilings (4.19 TB/s, 751 TFLOP/s). Its memory floors are
    # not all exactly the formula at 4.19 TB/s (mixtral T=1: 0.158 vs 0.168, deepseek T=8:
    # 1.192 vs 1.207, as if read at 4.2-4.45 TB/s): 7% there, 0.6% for the rest.
    def floor(name, T):
        return max(floors_ms(*SHAPES[name], T, 4.19, 751))
    for name, T, want, tol in (("qwen3-30b-a3b", 1, 0.018, 0.006), ("qwen3-30b-a3b", 512, 0.289, 0.006),
                               ("qwen3-30b-a3b", 4096, 0.412, 0.006), ("qwen3-30b-a3b", 16384, 1.646, 0.006),
                               ("gpt-oss-120b", 64, 1.316, 0.006), ("gpt-oss-120b", 16384, 4.341, 0.006),
                               ("mixtral-8x7b", 1, 0.158, 0.07), ("mixtral-8x7b", 16384, 15.37, 0.006),
                               ("deepseek-v3", 8, 1.192, 0.07), ("deepseek-v3", 64, 4.656, 0.006),
                               ("deepseek-v3", 4096, 5.409, 0.006), ("deepseek-v3", 16384, 15.37, 0.006)):
        got = floor(name, T)
        check(abs(got - want) <= tol * want + 5e-4, f"floor {name} T={T}: {got:.4f}, PERF.md {want}")
    check(abs(active_experts(128, 8, 1) - 8) < 1e-9 and active_experts(8, 2, 10**6) == 8, "E_act")
    E, H, I, k = SHAPES["deepseek-v3"]
    check(abs(floor_bytes(E, H, I, k, 64, 1) - (floor_bytes(E, H, I, k, 64) - active_experts(E, k, 64) * 3 * H * I))
          < 1.0, "fp8 floor: 1-byte weights")

    check(rotation_sets(60 * 10**6) == 3 and rotation_sets(60 * 10**6 + 1) == 1, "rotation")
    check(not replays_needed(20, 600.0, 20, 0.5, 200) and replays_needed(19, 1e9, 20, 0.5, 200), "min reps")
    check(replays_needed(20, 100.0, 20, 0.5, 200) and not replays_needed(200, 100.0, 20, 0.5, 200), "target/max")
    med, n = median_timed(lambda i: 0.01 * (i % 7), 20, 0.5, 200)
    check(n == 200 and abs(med - 0.03) < 1e-12, f"median_timed short rows: {n} {med}")
    med, n = median_timed(lambda i: 40.0 + i, 20, 0.5, 200)
    check(n == 20 and med == 49.5, f"median_timed long rows: {n} {med}")
    check(timed_samples(lambda i: float(i), 3, 0.0, 10, first=5) == [5.0, 6.0, 7.0], "timed_samples: indices from first")
    check([round_order(3, r) for r in range(4)] == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]], "round_order rotates")
    check(round_share(20, 0.5, 200, 3) == (7, 0.5 / 3, 67) and round_share(20, 0.5, 200, 1) == (20, 0.5, 200),
          f"round_share {round_share(20, 0.5, 200, 3)}")
    check(round_share(20, 0.1, 20, 3) == (7, 0.1 / 3, 7), "round_share: the maximum never below the minimum")
    check(parse_args([]).rounds == 3 and parse_args(["--rounds", "1"]).rounds == 1, "--rounds")


def _selftest_input_checks(check):
    # offsets: torch._grouped_mm's preconditions, the device assert of the first H200 run included
    check(offs_problems([0, 2, 2, 8], 4, 8) == [], "offs fine (empty groups allowed)")
    check(offs_problems([0, 0, 0, 0], 4, 0) == [], "offs of T=0")
    p = offs_problems([1, 3, 1000000000, 1000000008], 4, 8)
    check(len(p) == 2 and "offs[2] = 1000000000 > 8 rows" in p[0] and "device" in p[0], f"offs past rows: {p}")
    p = offs_problems([3, 2, 8, 8], 4, 8)
    check(len(p) == 1 and "offs[1] = 2 < offs[0] = 3" in p[0], f"offs decreasing: {p}")
    check("outside int32" in offs_problems([-1, 8], 2, 8)[0], "offs negative")
    check("outside int32" in offs_problems([2**31, 2**31], 2, 2**31)[0], "offs past int32")
    check("do not cover" in offs_problems([2, 6], 2, 8)[0], "offs short of rows")
    check("one per expert" in offs_problems([8], 2, 8)[0], "offs length")
    # routing
    check(routing_problems([0, 3, 2, 1], [0.5, 0.25, 0.125, 0.0], 2, 2, 4) == [], "routing fine")
    p = routing_problems([0, 4, 2, 2], [0.5, float("nan"), 0.1, -0.1], 2, 2, 4)
    check(len(p) == 3 and "ids[0][1] = 4" in p[0] and "token 1" in p[1] and "2 routing weights" in p[2],
          f"routing problems: {p}")
    check("expected T*k = 4" in routing_problems([0, 1, 2], [0.1] * 3, 2, 2, 4)[0], "routing length")
    check(_first(["a", "b", "c", "d", "e"]) == "a; b; c; and 2 more", "first problems")
    # operands, as (shape, strides, data_ptr, element_size): A [M, K] rows, B a transposed [E, N, K]
    H, I2, E = 2048, 1536, 128
    a = ((40, H), (H, 1), 0x1000, 2)
    b = ((E, H, I2), (I2 * H, 1, H), 0x2000, 2)
    check(grouped_operand_problems(a, b, False) == [], "bf16 operands fine")
    check(grouped_operand_problems(((40, H), (H, 1), 0x1000, 1), ((E, H, I2), (I2 * H, 1, H), 0x2000, 1), True) == [],
          "fp8 operands fine")
    p = grouped_operand_problems(((40, H), (H, 1), 0x1008, 2), b, False)
    check(len(p) == 1 and "not 16-byte aligned" in p[0], f"misaligned A: {p}")
    p = grouped_operand_problems(((40, 2040), (2040, 1), 0x1000, 2), ((E, 2040, I2), (I2 * 2040, 1, 2040), 0, 2), False)
    check(len(p) == 0, f"bf16 H=2040 (4080 bytes, 16-multiple): {p}")
    p = grouped_operand_problems(((40, 2044), (2044, 1), 0x1000, 2), ((E, 2044, I2), (I2 * 2044, 1, 2044), 0, 2), False)
    check(len(p) == 2 and all("multiple of 16 bytes" in q for q in p), f"bf16 H=2044: {p}")
    p = grouped_operand_problems(a, ((E, 1024, I2), (I2 * 1024, 1, 1024), 0, 2), False)
    check(len(p) == 1 and "K differs" in p[0], f"K mismatch: {p}")
    p = grouped_operand_problems(((40, H), (H, 1), 0, 1), ((E, H, I2), (I2 * H, I2, 1), 0, 1), True)
    check(len(p) == 1 and "column-major" in p[0], f"scaled B row-major: {p}")
    p = grouped_operand_problems(((40, H), (H, 1), 0, 1), ((E, H, 40), (40 * H, 1, H), 0, 1), True)
    check(len(p) == 1 and "N = 40" in p[0], f"scaled N=40: {p}")
    p = grouped_operand_problems(((40, H), (1, 40), 0, 2), b, False)
    check(p == [], f"bf16 column-major A accepted by _grouped_mm's stride rule: {p}")
    p = grouped_operand_problems(((40, H, 1), (H, 1, 1), 0, 2), b, False)
    check(len(p) == 1 and "expected 2-D A" in p[0], "A dims")


def _selftest_writers(check):
    import tempfile
    dims = SHAPES["qwen3-30b-a3b"]
    r = make_row("qwen3-30b-a3b", dims, 4096, "moefuse", 1.0, 0.0031)
    check(list(r) == ROW_KEYS and r["dtype"] == "bf16", "row keys")
    check(abs(r["tflops"] - flops(4096, 8, 2048, 768) * 1e-9) < 1e-3 * r["tflops"], "row tflops")
    check(abs(r["gbps"] - floor_bytes(*dims, 4096) * 1e-6) < 1e-3 * r["gbps"], "row gbps")
    f = make_row("qwen3-30b-a3b", dims, 4096, "torch_grouped_mm", None, 0.5)
    check(f["ms"] is None and f["tflops"] is None and f["err"] == 0.5, "failed row")
    check(make_row("x", dims, 1, "moefuse", float("nan"), float("inf"))["ms"] is None, "non-finite -> null")
    r8 = make_row("qwen3-30b-a3b", dims, 4096, "moefuse-block128", 1.0, 0.02, "fp8")
    check(r8["dtype"] == "fp8" and abs(r8["gbps"] - floor_bytes(*dims, 4096, 1) * 1e-6) < 1e-3 * r8["gbps"],
          "fp8 row gbps: 1-byte weights")

    rows = [r, f, make_row("qwen3-30b-a3b", dims, 4096, "torch_loop", 20.0, 0.004),
            make_row("qwen3-30b-a3b", dims, 4096, DENSE, 0.5, 0.002),
            make_row("qwen3-30b-a3b", dims, 16384, "moefuse", 4.0, 0.003),
            make_row("qwen3-30b-a3b", dims, 16384, "torch_grouped_mm", 6.0, 0.003)]
    ceil = {"read_TBps": 4.19, "bf16_TFLOPs": 751.0, "fp8_TFLOPs": 1335.0, "copy_TBps": 4.19}
    doc = result_doc("NVIDIA H200", "abc123", ceil, rows, ["a note"],
                     {"skipped": [("qwen3-30b-a3b", 16384, "torch_loop")]})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sub", "run.json")
        md = write_outputs(doc, path, ["qwen3-30b-a3b"], [4096, 16384])
        with open(path) as fh:
            back = json.load(fh)
        check(set(back) == {"gpu", "date", "commit", "ceilings", "rows", "notes"}, f"json keys {sorted(back)}")
        check(back["rows"] == rows and back["date"] == utc_date() and back["commit"] == "abc123", "json rows")
        check(all(list(x) == ROW_KEYS for x in back["rows"]), "json row key order")
        check(os.path.exists(os.path.join(tmp, "sub", "run.md")), "md beside json")
        check(not any(n.endswith(".tmp") for n in os.listdir(os.path.join(tmp, "sub"))), "no .tmp left")
    lines = [ln for ln in md.splitlines() if ln.startswith("| qwen3")]
    check(len(lines) == 2, f"md rows {len(lines)}")
    check("| torch_loop | torch_grouped_mm | dense_equiv | vs grouped_mm | vs best peer | vs dense-equiv | err |" in md,
          "bf16 md header")
    t4096 = lines[0].split(" | ")
    # moefuse 1.0 ms; grouped_mm FAILED -> '-' ratio; best peer = loop 20 ms -> 20x; dense 0.5 -> 0.50x
    check("FAIL" in t4096 and "20.00x" in t4096 and "0.50x" in t4096, f"md 4096 row: {lines[0]}")
    check(t4096[6] == "30%", f"% mem floor {t4096[6]}")  # memory floor 0.296 ms / 1.0 ms (0.412 is compute)
    t16k = lines[1].split(" | ")
    check("skipped" in t16k and t16k.count("1.50x") == 2, f"md 16384 row: {lines[1]}")
    check("a note" in md, "notes in md")

    # fp8: one table per moefuse scheme, the scaled peer, floors with 1-byte weights and the fp8 ceiling
    rows8 = [r8, make_row("qwen3-30b-a3b", dims, 4096, "moefuse-tensor", None, None, "fp8"),
             make_row("qwen3-30b-a3b", dims, 4096, "torch_scaled_grouped_mm", 3.0, 0.02, "fp8"),
             make_row("qwen3-30b-a3b", dims, 4096, DENSE, 0.25, 0.02, "fp8")]
    md8 = markdown(result_doc("g", "c", ceil, rows8, []), ["qwen3-30b-a3b"], [4096], "fp8")
    check(md8.count("| shape | T |") == 2 and "| moefuse-block128 |" in md8 and "| moefuse-tensor |" in md8,
          "fp8 md: a table per scheme")
    check("| torch_scaled_grouped_mm | dense_equiv | vs scaled_grouped_mm | vs dense-equiv | err |" in md8,
          "fp8 md header")
    l8 = [ln for ln in md8.splitlines() if ln.startswith("| qwen3")]
    c8 = l8[0].split(" | ")
    mem, comp = floors_ms(*dims, 4096, 4.19, 1335.0, 1)
    check(c8[2] == _fmt(mem) and c8[3] == _fmt(comp) and "3.00x" in c8 and "0.25x" in c8, f"fp8 md row: {l8[0]}")
    check("FAIL" in l8[1].split(" | "), f"fp8 failed scheme: {l8[1]}")
    check(markdown(result_doc("g", "c", ceil, rows8, []), ["qwen3-30b-a3b"], [4096], "bf16").count("| qwen3") == 0,
          "bf16 table ignores fp8 rows")


def _selftest_captured(check):
    """The first H200 run's bug: a captured graph outlived the function (and a tensor it
    named) it was captured from. Captured keeps the function, so nothing it names is freed."""
    import weakref

    class Buffer:  # stands in for the `ones` tensor
        pass

    def make_fn():
        ones = Buffer()
        return (lambda: ones), weakref.ref(ones)

    fn, ref = make_fn()
    c = Captured("graph", fn(), fn)
    del fn
    gc.collect()
    check(ref() is not None, "Captured keeps what the captured fn names alive")
    del c
    gc.collect()
    check(ref() is None, "and lets it go with the graph")


def _selftest_torch(check):
    """The torch side on the CPU: input checks, the grouped peers (FP8 with an emulated
    _scaled_grouped_mm whose arguments torch's own meta checks see), the quantisers, the
    reference, and moefuse's CPU backend through the binding when the library loads."""
    import torch
    args = parse_args(["--quick"])
    gpu = Gpu(args, device="cpu")
    E, H, I, k = 8, 256, 128, 2
    torch.manual_seed(5)

    # quantisers: e4m3 keeps 3 mantissa bits, round to nearest: |q*s - w| <= 2^-4 |w| (normal range)
    w = torch.randn(E, 2 * I, H, dtype=torch.bfloat16)
    for scheme, sshape in (("rowwise", (E, 2 * I)), ("block128", (E, 2, 2)), ("tensor", (E,))):
        q, s = gpu.quantise_weights(w, scheme)
        check(q.dtype == torch.float8_e4m3fn and tuple(s.shape) == sshape and s.dtype == torch.float32,
              f"{scheme}: codes {q.dtype}, scales {tuple(s.shape)}")
        d = torch.stack([gpu.dequant_expert(q, s, scheme, e) for e in range(E)])
        big = w.double().abs() > 1e-2
        rel = ((d - w.double()).abs()[big] / w.double().abs()[big]).max().item()
        check(rel <= 2**-4 + 1e-6, f"{scheme} round trip: max rel {rel:.3g}")
        check(abs(q.float().abs().amax().item() - FP8_MAX) < 1e-6, f"{scheme}: the largest code is 448")
    x = torch.randn(33, 200, dtype=torch.bfloat16)
    for rule in ("rowwise", "row128", "tensor"):
        d = gpu.act_roundtrip(x, rule)
        rel = ((d - x.double()).norm() / x.double().norm()).item()
        check(tuple(d.shape) == (33, 200) and 1e-3 < rel < 5e-2, f"act {rule}: rel {rel:.3g}")
    check(torch.equal(gpu.act_roundtrip(x, "rowwise"), gpu.act_roundtrip(x, "row128")) is False,
          "row128 differs from rowwise for H > 128")
    check(bool((gpu.quant_rows(torch.zeros(2, 16))[1] == 1).all()), "all-zero rows get scale 1")

    for T in (1, 5, 40):
        nsets = 2
        sets = [gpu.input_set(E, H, k, T, 100 + T * 7 + i) for i in range(nsets)]
        for s in sets:
            gpu.check_inputs(s, E, k)
        check(True, f"T={T}: inputs pass their check")
        W = ShapeWeights(gpu, "bf16", E, H, I, 7, [])
        w13, w2 = W.bf16
        b13, b2 = w13.transpose(1, 2), w2.transpose(1, 2)
        gpu.check_grouped(sets[0], b13, b2, E, False)
        idx, refs = gpu.reference(sets, lambda e: W.expert(None, e), I)
        for i, s in enumerate(sets):
            y = gpu.grouped_mm_fn(s, b13, b2, E, I, k)()
            err = gpu.check(y, idx, refs[i], "grouped_mm", 1e-2)
            check(err < 1e-2, f"T={T} grouped_mm err {err:.3g}")
            err = gpu.check(gpu.loop_forward(s, w13, w2, E, I), idx, refs[i], "loop", 1e-2)
            check(err < 1e-2, f"T={T} loop err {err:.3g}")

        # FP8 peer: rowwise weights; the emulated op first lets torch's meta kernel check the arguments
        W8 = ShapeWeights(gpu, "fp8", E, H, I, 7, ["rowwise", "block128", "tensor"])
        q13, s13, q2, s2 = W8.q["rowwise"]
        q13t, q2t = q13.transpose(1, 2), q2.transpose(1, 2)
        gpu.check_grouped(sets[0], q13t, q2t, E, True, (s13, s2))
        calls = []

        def emu_sgmm(a, b, sa, sb, offs, out_dtype):
            meta = [t.to("meta") for t in (a, b, sa, sb, offs)]
            torch._scaled_grouped_mm(*meta[:4], offs=meta[4], out_dtype=out_dtype)  # raises on a bad argument
            calls.append(1)
            out, start = [], 0
            for g, end in enumerate(offs.tolist()):
                out.append((a[start:end].float() * sa[start:end, None]) @ (b[g].float() * sb[g][None, :]))
                start = end
            return torch.cat(out).to(out_dtype)

        idx8, refs8 = gpu.reference(sets, lambda e: W8.expert("rowwise", e), I,
                                    lambda s, i: gpu.act_roundtrip(s["x"], "rowwise")[i],
                                    lambda a: gpu.act_roundtrip(a, "rowwise"))
        for i, s in enumerate(sets):
            y = gpu.scaled_grouped_mm_fn(s, q13t, s13, q2t, s2, E, I, k, mm=emu_sgmm)()
            err = gpu.check(y, idx8, refs8[i], "scaled_grouped_mm", 5e-2)
            check(err < 5e-2 and len(calls) == 2 * (i + 1), f"T={T} scaled_grouped_mm err {err:.3g}")

        def emu_smm(a, b, scale_a, scale_b, out_dtype):
            check(a.stride(-1) == 1 and b.stride(0) == 1 and tuple(scale_a.shape) == (a.shape[0], 1)
                  and tuple(scale_b.shape) == (1, b.shape[1]), "dense fp8 operands: A rows, B columns, scales")
            return ((a.float() * scale_a) @ (b.float() * scale_b)).to(out_dtype)

        xr = torch.randn(T * k, H, dtype=torch.bfloat16)
        y = gpu.dense_fp8_fn(xr, q13[0], s13[0], q2[0], s2[0], I, mm=emu_smm)()
        w1e, w2e = W8.expert("rowwise", 0)
        di, dref = gpu.dense_reference(xr, w1e, w2e, I, lambda xx, ii: gpu.act_roundtrip(xx, "rowwise")[ii],
                                       lambda a: gpu.act_roundtrip(a, "rowwise"))
        err = gpu.check(y, di, dref, "dense fp8", 5e-2)
        check(err < 5e-2, f"T={T} dense fp8 err {err:.3g}")
        _selftest_moefuse_cpu(check, gpu, sets, W, W8, E, I, T)

    # bad inputs become a BenchError naming them, before anything would run
    s = gpu.input_set(E, H, k, 4, 1)
    s["ids64"][2, 1] = E
    s["ids"] = s["ids64"].to(torch.int32)
    try:
        gpu.check_inputs(s, E, k)
        check(False, "an id == E passed check_inputs")
    except BenchError as e:
        check("ids[2][1] = 8" in str(e), f"bad id message: {e}")
    s = gpu.input_set(E, H, k, 4, 1)
    s["ids"][0, 0] += 1
    try:
        gpu.check_inputs(s, E, k)
        check(False, "ids != ids64 passed check_inputs")
    except BenchError as e:
        check("differ" in str(e), f"ids/ids64 message: {e}")
    W = ShapeWeights(gpu, "bf16", E, 200, I, 7, [])  # H = 200: fine for bf16 (400 bytes)
    gpu.check_grouped(gpu.input_set(E, 200, k, 3, 1), W.bf16[0].transpose(1, 2), W.bf16[1].transpose(1, 2), E, False)
    check(True, "H=200 bf16 operands pass")
    try:
        W8 = ShapeWeights(gpu, "fp8", E, 200, 72, 7, ["rowwise"])  # N = 2I = 144 ok, K = 200 % 16 = 8: refused
        q13, s13, q2, s2 = W8.q["rowwise"]
        gpu.check_grouped(gpu.input_set(E, 200, k, 3, 1), q13.transpose(1, 2), q2.transpose(1, 2), E, True, (s13, s2))
        check(False, "fp8 K=200 passed check_grouped")
    except BenchError as e:
        check("K = 200" in str(e), f"fp8 K=200 message: {e}")


def _selftest_moefuse_cpu(check, gpu, sets, W, W8, E, I, T):
    """moefuse.torch.fused_experts on the CPU backend with this bench's arguments and
    references: bf16, and the FP8 API the GPU rows assume (use_fp8_w8a8, w1_scale/w2_scale,
    block_shape [128, 128] or None). Skipped when the library does not load."""
    try:
        import_moefuse()
        import moefuse.torch as mft
        mft.clear_cache()
    except Exception as e:
        print(f"skipped: moefuse on the CPU ({type(e).__name__}: {e})")
        return
    s = sets[0]
    try:
        idx, refs = gpu.reference(sets[:1], lambda e: W.expert(None, e), I)
        y = mft.fused_experts(s["x"], W.bf16[0], W.bf16[1], s["wts"], s["ids"])
        err = gpu.check(y, idx, refs[0], "moefuse bf16", 1e-2)
        check(err < 1e-2, f"T={T} moefuse bf16 err {err:.3g}")
        for scheme, rule in (("block128", "row128"), ("tensor", "tensor")):
            q13, s13, q2, s2 = W8.q[scheme]
            y = mft.fused_experts(s["x"], q13, q2, s["wts"], s["ids"], use_fp8_w8a8=True, w1_scale=s13, w2_scale=s2,
                                  block_shape=FP8_SCHEMES[scheme][0])
            idx, refs = gpu.reference(sets[:1], lambda e: W8.expert(scheme, e), I,
                                      lambda st, ii: gpu.act_roundtrip(st["x"], rule)[ii],
                                      (lambda a: gpu.act_roundtrip(a, rule)) if rule == "row128" else None)
            err = gpu.check(y, idx, refs[0], f"moefuse {scheme}", 5e-2)
            check(err < 5e-2, f"T={T} moefuse fp8 {scheme} err {err:.3g}")
    except Exception as e:
        check(False, f"T={T} moefuse on the CPU: {type(e).__name__}: {e}")


class CpuStandIn(Gpu):
    """--selftest only: run() on the CPU. A "graph" calls its function again and copies the
    result into the captured output; events are the host clock; the ceilings are PERF.md's."""

    class Graph:
        def __init__(self, fn, out):
            self.fn, self.out = fn, out

        def replay(self):
            self.out.copy_(self.fn())

        def pool(self):
            return None

    def __init__(self, args):
        super().__init__(args, device="cpu")

    def capture(self, fn, pool=None):
        fn()
        out = fn()
        return Captured(self.Graph(fn, out), out, fn)

    def clock(self, launch):
        def once(i):
            t = time.perf_counter()
            launch(i)
            return (time.perf_counter() - t) * 1e3

        return once

    def sync(self):
        pass

    def device_name(self):
        return "cpu (selftest stand-in)"

    def empty_cache(self):
        pass

    def ceilings(self):
        return {"read_TBps": 4.19, "bf16_TFLOPs": 751.0, "fp8_TFLOPs": 1335.0, "copy_TBps": 4.19}


def _emulated_scaled_ops(torch):
    """CPU stand-ins for torch._scaled_grouped_mm / torch._scaled_mm (rowwise), each first
    handing its arguments to torch's meta kernel, which makes the CUDA op's own checks."""
    real_sgmm, real_smm = torch._scaled_grouped_mm, torch._scaled_mm

    def sgmm(a, b, sa, sb, offs=None, out_dtype=None):
        meta = [t.to("meta") for t in (a, b, sa, sb, offs)]
        real_sgmm(*meta[:4], offs=meta[4], out_dtype=out_dtype)
        out, start = [], 0
        for g, end in enumerate(offs.tolist()):
            out.append((a[start:end].float() * sa[start:end, None]) @ (b[g].float() * sb[g][None, :]))
            start = end
        return torch.cat(out).to(out_dtype)

    def smm(a, b, scale_a, scale_b, out_dtype=None):
        real_smm(*[t.to("meta") for t in (a, b)], scale_a=scale_a.to("meta"), scale_b=scale_b.to("meta"),
                 out_dtype=out_dtype)
        return ((a.float() * scale_a) @ (b.float() * scale_b)).to(out_dtype)

    return sgmm, smm


def _selftest_dry_run(check):
    """run() end to end on the CPU stand-in, tiny shapes, both dtypes, every impl (moefuse
    through its CPU backend when the library loads): rows, checks, skips, outputs, exit code."""
    import contextlib
    import io
    import tempfile
    import torch
    saved = dict(SHAPES), torch._scaled_grouped_mm, torch._scaled_mm
    SHAPES["tiny-a"], SHAPES["tiny-b"] = (8, 256, 128, 2), (4, 128, 192, 3)
    torch._scaled_grouped_mm, torch._scaled_mm = _emulated_scaled_ops(torch)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for dtype in ("bf16", "fp8"):
                out = os.path.join(tmp, f"{dtype}.json")
                args = parse_args(["--dtype", dtype, "--shapes", "tiny-a,tiny-b", "--tokens", "1,40", "--out", out,
                                   "--target-s", "0.001", "--max-reps", "20"])
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    rc = run(args, CpuStandIn(args))
                with open(out) as fh:
                    doc = json.load(fh)
                rows = doc["rows"]
                want = 2 * 2 * (len(args.impls) + (1 if dtype == "fp8" else 0))  # fp8: two moefuse schemes
                moefuse_failed = [r for r in rows if r["impl"].startswith("moefuse") and r["ms"] is None]
                others = [r for r in rows if r not in moefuse_failed]
                check(len(rows) == want and all(r["dtype"] == dtype for r in rows), f"dry run {dtype}: {len(rows)} rows")
                check(all(r["ms"] is not None and r["err"] <= DTYPES[dtype]["tol"] for r in others),
                      f"dry run {dtype}: the peers pass: {[(r['impl'], r['err']) for r in others]}")
                check(rc == (1 if moefuse_failed else 0), f"dry run {dtype}: exit {rc}")
                if moefuse_failed:
                    print(f"note: dry run {dtype}: moefuse rows failed (library not loaded?): "
                          + next((n for n in doc["notes"] if "moefuse" in n and "FAILED" in n), "?"))
                check(os.path.exists(os.path.splitext(out)[0] + ".md"), f"dry run {dtype}: markdown written")
            # a bad input: one FAILED row per impl with the message, nothing captured
            args = parse_args(["--shapes", "tiny-a", "--tokens", "3", "--out", os.path.join(tmp, "bad.json"),
                               "--impls", "torch_grouped_mm,dense_equiv_cublas", "--target-s", "0.001"])
            gpu = CpuStandIn(args)
            real = gpu.input_set

            def bad_set(E, H, k, T, seed):
                s = real(E, H, k, T, seed)
                s["ids64"][1, 0] = E + 5
                s["ids"] = s["ids64"].to(torch.int32)
                return s

            gpu.input_set = bad_set
            with contextlib.redirect_stdout(io.StringIO()):
                rc = run(args, gpu)
            with open(os.path.join(tmp, "bad.json")) as fh:
                doc = json.load(fh)
            failed = [r for r in doc["rows"] if r["ms"] is None]
            check(rc == 1 and len(failed) == 1 and failed[0]["impl"] == "torch_grouped_mm",
                  f"bad ids: grouped_mm fails, dense (its own inputs) runs: {doc['rows']}")
            check(any("ids[1][0] = 13" in n for n in doc["notes"]), "bad ids: the note names the id")
            # out of memory capturing the second impl: the first is timed and freed, the second retried
            args = parse_args(["--shapes", "tiny-a", "--tokens", "40", "--out", os.path.join(tmp, "oom.json"),
                               "--impls", "torch_grouped_mm,dense_equiv_cublas", "--target-s", "0.001"])
            gpu = CpuStandIn(args)
            real_capture, calls = gpu.capture, []

            class OutOfMemoryError(RuntimeError):
                pass

            def capture_once_oom(fn, pool=None):
                calls.append(1)
                if len(calls) == 4:  # grouped_mm's 3 sets are captured; dense's first capture fails once
                    raise OutOfMemoryError("CUDA out of memory (stand-in)")
                return real_capture(fn, pool)

            gpu.capture = capture_once_oom
            with contextlib.redirect_stdout(io.StringIO()):
                rc = run(args, gpu)
            with open(os.path.join(tmp, "oom.json")) as fh:
                doc = json.load(fh)
            check(rc == 0 and [r["impl"] for r in doc["rows"]] == ["torch_grouped_mm", DENSE] and
                  all(r["ms"] is not None for r in doc["rows"]), f"out of memory: both rows timed: {doc['rows']}")
            check(any("out of memory capturing dense_equiv_cublas" in n for n in doc["notes"]),
                  f"out of memory: noted: {doc['notes']}")
    finally:
        SHAPES.clear()
        SHAPES.update(saved[0])
        torch._scaled_grouped_mm, torch._scaled_mm = saved[1], saved[2]


def selftest():
    check = _Checks()
    _selftest_args(check)
    _selftest_left_out(check)
    _selftest_presets(check)
    _selftest_formulas(check)
    _selftest_input_checks(check)
    _selftest_writers(check)
    _selftest_captured(check)
    try:
        import torch  # noqa: F401
        have_torch = hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_grouped_mm")
    except ImportError:
        have_torch = False
    if have_torch:
        _selftest_torch(check)
        _selftest_dry_run(check)
    else:
        print("skipped: the torch checks (no torch with float8_e4m3fn and _grouped_mm here)")
    print(f"{check.passed} passed, {check.failed} failed")
    return 1 if check.failed else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--selftest" in argv:
        return selftest()
    args = parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
