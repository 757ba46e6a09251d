"""moefuse against its PyTorch peers, in one process on the same tensors (PERF.md's protocol).

Per PERF.md shape and token count T, on the same random bf16 tensors and the same routing
(softmax + top-k over random logits, drawn once with torch; routing itself is not timed):

  moefuse             moefuse.torch.fused_experts, CUDA graph replay (packed at warm-up);
                      "moefuse-<v>" when $MOEFUSE_GEMM=<v> is set (the library reads it);
                      --moefuse-gemm v1,hopper times each value in turn
  torch_loop          Hugging Face style loop over the hit experts (index / index_add_);
                      eager (it syncs on the host per expert), skipped above T=4096
  torch_grouped_mm    sort by expert, gather, torch._grouped_mm, SiLU(gate)*up,
                      torch._grouped_mm, weight, unpermute, sum over slots; CUDA graph
  dense_equiv_cublas  all T*k rows through expert 0 with torch.matmul: GEMM1, SiLU*up, GEMM2
  ceilings            device copy, streaming read, bf16 GEMM 8192^3 (and FP8 if torch can)

Every impl's output (the graph's own output, after one replay) is compared with an fp64
torch reference on a sample of tokens before it is timed; a result with a relative
Frobenius error above ERR_TOL, a non-finite value or a raised error makes the row "failed"
(ms null) and the process exits 1 after writing everything. All shapes use the SiLU GLU
without biases, as PERF.md's peers do (gpt-oss-120b's shapes, not its clamped activation).

Timing: warm-up, then per row at least --min-reps (20) CUDA-event-timed replays, more until
--target-s (0.5 s) of replays, at most --max-reps (200); the median is reported. When one input set
(x and routing) fits in L2 (60 MB) the replays rotate among 3 sets, each its own graph.

Output: the JSON of PERF.md's results format to --out, a markdown table beside it (same
stem, .md). Both are rewritten after every T, so a run cut short still leaves its rows;
--budget-s stops starting new rows (noted as skipped) once that many seconds have passed.

    python3 bench/bench_moe.py [--shapes a,b] [--tokens 1,8,64] [--quick] [--out F.json]
    python3 bench/bench_moe.py --selftest        # no torch, no GPU: parsing, formulas, writers
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

# PERF.md's shapes: name -> (E, H, I, k). Checked against moefuse.preset(name) at run time.
SHAPES = {
    "qwen3-30b-a3b": (128, 2048, 768, 8),
    "gpt-oss-120b": (128, 2880, 2880, 4),
    "mixtral-8x7b": (8, 4096, 14336, 2),
    "deepseek-v3": (256, 7168, 2048, 8),
}
DEFAULT_TOKENS = [1, 8, 64, 512, 4096, 16384]
QUICK_TOKENS = [1, 64, 4096]
IMPLS = ["moefuse", "torch_loop", "torch_grouped_mm", "dense_equiv_cublas"]
PEERS = ["torch_loop", "torch_grouped_mm"]  # "best peer" is the faster of these
LOOP_MAX_T = 4096
L2_BYTES = 60 * 10**6
ROTATE_SETS = 3
ERR_TOL = 1e-2  # relative Frobenius error vs fp64: bf16 output rounding alone is ~1e-3
SAMPLE_TOKENS = 32
CEILING_COPY_ELEMS = 1 << 30  # 2 GiB of bf16 for the copy and read ceilings
CEILING_GEMM_N = 8192
ROW_KEYS = ["shape", "E", "H", "I", "k", "T", "dtype", "pass", "impl", "ms", "tflops", "gbps", "err"]


class BenchError(RuntimeError):
    """A row that must not be reported as a pass (wrong output, failed call)."""


# ---------------------------------------------------------------------------------------
# Pure helpers (no torch): arguments, formulas, writers. --selftest covers them.
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
    unknown = [n for n in names if n not in IMPLS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown impl(s) {unknown or text!r}; expected some of {', '.join(IMPLS)}")
    return names


def gemm_list(text):
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or any(not re.fullmatch(r"[A-Za-z0-9_.]+", v) for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected distinct names like v1,hopper, got {text!r}")
    return values


def moefuse_variants(gemm_values, env=None):
    """[(impl name, MOEFUSE_GEMM value or None for the environment as it is)] to time."""
    if not gemm_values:
        return [(moefuse_impl_name(env), None)]
    return [(moefuse_impl_name({"MOEFUSE_GEMM": v}), v) for v in gemm_values]


def utc_date():
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def parse_args(argv):
    p = argparse.ArgumentParser(description="moefuse vs PyTorch peers on PERF.md's shapes (one process, one GPU)")
    p.add_argument("--shapes", type=name_list, default=list(SHAPES), help="comma list (default: all four)")
    p.add_argument("--tokens", type=int_list, default=None,
                   help=f"comma list of T (default {','.join(map(str, DEFAULT_TOKENS))}; "
                        f"--quick: {','.join(map(str, QUICK_TOKENS))})")
    p.add_argument("--impls", type=impl_list, default=list(IMPLS), help="comma list (default: all)")
    p.add_argument("--quick", action="store_true", help="short run: fewer T, 0.1 s of replays per row")
    p.add_argument("--moefuse-gemm", type=gemm_list, default=None,
                   help="time moefuse once per MOEFUSE_GEMM value in this comma list (e.g. v1,hopper), rows "
                        "moefuse-<value>; default: one moefuse row with the environment as it is")
    p.add_argument("--out", default=None, help="JSON path (default bench/results/<date>-h200-bench.json)")
    p.add_argument("--min-reps", type=int, default=20, help="replays per row at least (>= 20 per PERF.md)")
    p.add_argument("--target-s", type=float, default=None, help="seconds of replays per row (0.5; --quick 0.1)")
    p.add_argument("--max-reps", type=int, default=200)
    p.add_argument("--budget-s", type=float, default=0.0,
                   help="stop starting new rows after this many seconds (0: no limit); the rest are noted as skipped")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--selftest", action="store_true", help="test the parts that need no torch, then exit")
    a = p.parse_args(argv)
    if a.tokens is None:
        a.tokens = list(QUICK_TOKENS if a.quick else DEFAULT_TOKENS)
    if a.target_s is None:
        a.target_s = 0.1 if a.quick else 0.5
    if a.min_reps < 20:
        p.error(f"--min-reps {a.min_reps}: PERF.md's protocol wants at least 20")
    if a.max_reps < a.min_reps:
        p.error(f"--max-reps {a.max_reps} is below --min-reps {a.min_reps}")
    if a.out is None:
        a.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{utc_date()}-h200-bench.json")
    return a


def moefuse_impl_name(env=None):
    """"moefuse", or "moefuse-<v>" when MOEFUSE_GEMM=<v> (only [A-Za-z0-9_.] kept)."""
    env = os.environ if env is None else env
    v = env.get("MOEFUSE_GEMM", "")
    v = re.sub(r"[^A-Za-z0-9_.]+", "_", v).strip("_")
    return f"moefuse-{v}" if v else "moefuse"


def flops(T, k, H, I):
    return 6.0 * T * k * H * I


def active_experts(E, k, T):
    """Expected number of distinct experts T tokens touch (PERF.md: E*(1-(1-k/E)^T))."""
    return E * (1.0 - (1.0 - k / E) ** T)


def floor_bytes(E, H, I, k, T):
    """Bytes of PERF.md's memory floor: touched expert weights (3*H*I bf16 each) plus x and y."""
    return active_experts(E, k, T) * 3 * H * I * 2 + 2 * T * H * 2


def dense_bytes(H, I, k, T):
    """Bytes dense-equiv must move at least: one expert's weights, T*k rows in and out."""
    return 3 * H * I * 2 + 2 * T * k * H * 2


def floors_ms(E, H, I, k, T, read_tbps, gemm_tflops):
    """(memory floor, compute floor) in ms at the measured ceilings."""
    mem = floor_bytes(E, H, I, k, T) / (read_tbps * 1e9) if read_tbps else None
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


def median_timed(run_once, min_reps, target_s, max_reps):
    """Median of run_once() results (ms each), replayed per replays_needed; (median, count)."""
    times = []
    while replays_needed(len(times), sum(times), min_reps, target_s, max_reps):
        times.append(run_once(len(times)))
    return statistics.median(times), len(times)


def _round(v, digits=6):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return float(f"{v:.{digits}g}")


def make_row(shape, dims, T, impl, ms, err):
    """A results row in PERF.md's format; ms None = failed (tflops and gbps None too)."""
    E, H, I, k = dims
    if ms is not None:
        nbytes = dense_bytes(H, I, k, T) if impl == "dense_equiv_cublas" else floor_bytes(E, H, I, k, T)
        tflops, gbps = flops(T, k, H, I) / ms * 1e-9, nbytes / ms * 1e-6
    else:
        tflops = gbps = None
    return {"shape": shape, "E": E, "H": H, "I": I, "k": k, "T": T, "dtype": "bf16", "pass": "forward",
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


def markdown(doc, shapes, tokens):
    """The per-(shape, T) table: times, floors and moefuse's ratios to each peer."""
    c = doc["ceilings"]
    rows = doc["rows"]
    by = {(r["shape"], r["T"], r["impl"]): r for r in rows}
    skipped = {tuple(s) for s in doc.get("skipped", [])}
    named = [r["impl"] for r in rows] + [s[2] for s in doc.get("skipped", [])]
    moe = list(dict.fromkeys(n for n in named if n.startswith("moefuse"))) or ["moefuse"]  # in run order
    lines = [f"# bench_moe: {doc['gpu']}, {doc['date']}, commit {doc['commit'] or '?'}", "",
             f"Ceilings measured in this run: read {_fmt(c.get('read_TBps'))} TB/s, copy (read+written) "
             f"{_fmt(c.get('copy_TBps'))} TB/s, bf16 GEMM 8192^3 {_fmt(c.get('bf16_TFLOPs'))} TFLOP/s, "
             f"fp8 GEMM {_fmt(c.get('fp8_TFLOPs'))} TFLOP/s.",
             "Times in ms (median of CUDA-event-timed graph replays; torch_loop eager). Ratios are peer ms / "
             "moefuse ms (> 1: moefuse faster). 'best peer' = the faster of torch_loop and torch_grouped_mm. "
             "'% mem floor' = memory floor / moefuse ms. FAIL = output check failed or error (not timed).", ""]
    for m in moe:
        lines += [f"| shape | T | mem floor | compute floor | {m} | TFLOP/s | % mem floor | torch_loop | "
                  f"torch_grouped_mm | dense_equiv | vs grouped_mm | vs best peer | vs dense-equiv | err |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name in shapes:
            E, H, I, k = SHAPES[name]
            for T in tokens:
                present = [i for i in [m] + IMPLS[1:] if (name, T, i) in by]
                if not present and not any((name, T, i) in skipped for i in [m] + IMPLS[1:]):
                    continue
                mem, comp = floors_ms(E, H, I, k, T, c.get("read_TBps"), c.get("bf16_TFLOPs"))

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
                ratio = lambda other: f"{other / mms:.2f}x" if other and mms else "-"
                peer_ms = [ms_of(p) for p in PEERS if ms_of(p)]
                best = min(peer_ms) if peer_ms else None
                lines.append(
                    f"| {name} | {T} | {_fmt(mem)} | {_fmt(comp)} | {cell(m)} | "
                    f"{_fmt(mr['tflops'] if mr else None)} | {f'{100 * mem / mms:.0f}%' if mem and mms else '-'} | "
                    f"{cell('torch_loop')} | {cell('torch_grouped_mm')} | {cell('dense_equiv_cublas')} | "
                    f"{ratio(ms_of('torch_grouped_mm'))} | {ratio(best)} | {ratio(ms_of('dense_equiv_cublas'))} | "
                    f"{_fmt(mr['err'], 2) if mr and mr['err'] is not None else '-'} |")
        lines.append("")
    if doc.get("notes"):
        lines += ["Notes:", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(lines)


def write_outputs(doc, path, shapes, tokens):
    """JSON to path, markdown to the same stem + .md; returns the markdown."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    clean = {k: v for k, v in doc.items() if k != "skipped"}
    clean["rows"] = [{key: r[key] for key in ROW_KEYS} for r in doc["rows"]]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(clean, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    md = markdown(doc, shapes, tokens)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(md + "\n")
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
# The GPU part (torch imported only here).
# ---------------------------------------------------------------------------------------


def log(msg):
    print(msg, flush=True)


class Gpu:
    """Graph capture, event timing, the ceilings, the peers and the fp64 reference."""

    def __init__(self, args):
        try:
            import torch
            import torch.nn.functional as F
        except ImportError as e:
            raise SystemExit(f"bench_moe: FATAL: PyTorch is not importable here ({e}); this bench needs torch with CUDA")
        self.torch, self.F, self.args = torch, F, args
        if not torch.cuda.is_available():
            raise SystemExit("bench_moe: FATAL: torch sees no CUDA device")
        self.dev = torch.device("cuda", torch.cuda.current_device())
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp64/fp32 reference must not use TF32
        self.stream = torch.cuda.Stream()  # warm-up and capture both run here (moefuse's workspace is per stream)

    # -- timing ------------------------------------------------------------------------
    def capture(self, fn, pool=None):
        """fn() warmed up twice, then captured; (graph, its output)."""
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
        return g, out

    def timed(self, launch):
        """launch(i) timed per call with CUDA events on the current stream (ms), median and count."""
        torch = self.torch
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def once(i):
            start.record()
            launch(i)
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop)

        a = self.args
        return median_timed(once, a.min_reps, a.target_s, a.max_reps)

    def time_graphs(self, graphs):
        for _ in range(3):  # warm replays of every set
            for g in graphs:
                g.replay()
        self.torch.cuda.synchronize()
        return self.timed(lambda i: graphs[i % len(graphs)].replay())

    # -- ceilings ------------------------------------------------------------------------
    def ceilings(self):
        torch = self.torch
        out = {"read_TBps": None, "bf16_TFLOPs": None, "fp8_TFLOPs": None, "copy_TBps": None}
        n = CEILING_COPY_ELEMS
        src = torch.randn(n, device=self.dev, dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        g, _ = self.capture(lambda: dst.copy_(src))
        ms, _ = self.time_graphs([g])
        out["copy_TBps"] = 2 * n * 2 / ms * 1e-9
        g, _ = self.capture(lambda: src.sum(dtype=torch.float32))
        ms, _ = self.time_graphs([g])
        out["read_TBps"] = n * 2 / ms * 1e-9
        g = src = dst = None  # (not del: the lambdas above name them)
        m = CEILING_GEMM_N
        a = torch.randn(m, m, device=self.dev, dtype=torch.bfloat16)
        b = torch.randn(m, m, device=self.dev, dtype=torch.bfloat16)
        g, _ = self.capture(lambda: a @ b)
        ms, _ = self.time_graphs([g])
        out["bf16_TFLOPs"] = 2 * m**3 / ms * 1e-9
        del g
        try:  # FP8 e4m3, per-tensor scales; b column-major as _scaled_mm wants
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=self.dev, dtype=torch.float32)
            g, _ = self.capture(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            ms, _ = self.time_graphs([g])
            out["fp8_TFLOPs"] = 2 * m**3 / ms * 1e-9
            g = a8 = b8 = None
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
        """x [T, H] bf16, ids [T, k] int32, ids64, weights [T, k] fp32 (softmax + top-k)."""
        torch = self.torch
        gen = torch.Generator(device=self.dev).manual_seed(seed)
        x = torch.randn(T, H, device=self.dev, dtype=torch.bfloat16, generator=gen)
        logits = torch.randn(T, E, device=self.dev, dtype=torch.float32, generator=gen)
        wts, ids64 = torch.softmax(logits, dim=-1).topk(k, dim=-1)
        return {"x": x, "ids": ids64.to(torch.int32).contiguous(), "ids64": ids64.contiguous(),
                "wts": wts.contiguous()}

    def sample_index(self, T):
        torch = self.torch
        n = min(T, SAMPLE_TOKENS)
        return torch.linspace(0, T - 1, n, device=self.dev).round().long().unique()

    # -- the fp64 reference ----------------------------------------------------------------
    def reference(self, sets, w13, w2, I):
        """[n, H] float64 outputs of each set's sampled tokens: sum_j w_j * W2 (silu(g) * u)."""
        torch, F = self.torch, self.F
        idx = self.sample_index(sets[0]["x"].shape[0])
        xs = [s["x"][idx].double() for s in sets]
        ids = [s["ids64"][idx] for s in sets]
        wts = [s["wts"][idx].double() for s in sets]
        outs = [torch.zeros(x.shape[0], w2.shape[1], device=self.dev, dtype=torch.float64) for x in xs]
        for e in torch.cat([i.flatten() for i in ids]).unique().tolist():
            w1e, w2e = w13[e].double(), w2[e].double()
            for i in range(len(sets)):
                rows, slots = (ids[i] == e).nonzero(as_tuple=True)
                if rows.numel() == 0:
                    continue
                h = xs[i][rows] @ w1e.T
                o = (F.silu(h[:, :I]) * h[:, I:]) @ w2e.T
                outs[i].index_add_(0, rows, o * wts[i][rows, slots][:, None])
        return idx, outs

    def check(self, y, idx, ref, what):
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
        if not err <= ERR_TOL:
            e = BenchError(f"{what}: rel Frobenius error {err:.3g} > {ERR_TOL} on {len(idx)} sampled tokens")
            e.err = err  # recorded in the failed row
            raise e
        return err

    # -- the implementations ---------------------------------------------------------------
    def grouped_mm_fn(self, s, w13t, w2t, E, I, k):
        torch, F = self.torch, self.F
        x, ids64, wts = s["x"], s["ids64"], s["wts"]
        T, H = x.shape
        ones = torch.ones(T * k, device=self.dev, dtype=torch.int32)

        def fwd():
            flat = ids64.flatten()
            order = flat.argsort(stable=True)
            counts = torch.zeros(E, device=self.dev, dtype=torch.int32).scatter_add_(0, flat, ones)
            offs = counts.cumsum(0, dtype=torch.int32)
            xs = x.index_select(0, order // k)
            h = torch._grouped_mm(xs, w13t, offs=offs)
            a = F.silu(h[:, :I]) * h[:, I:]
            o = torch._grouped_mm(a, w2t, offs=offs).float() * wts.flatten()[order].unsqueeze(1)
            out = torch.empty_like(o).index_copy_(0, order, o)
            return out.view(T, k, H).sum(1).to(torch.bfloat16)

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

    def dense_reference(self, xr, w1e, w2e, I):
        idx = self.sample_index(xr.shape[0])
        h = xr[idx].double() @ w1e.double().T
        return idx, (self.F.silu(h[:, :I]) * h[:, I:]) @ w2e.double().T


def run(args):
    t_start = time.time()
    gpu = Gpu(args)
    torch = gpu.torch
    variants = moefuse_variants(args.moefuse_gemm)
    notes = [f"torch {torch.__version__}; all shapes use the SiLU GLU without biases; routing softmax + top-k "
             f"(not renormalised), identical for every impl; err = rel Frobenius vs fp64 on <= {SAMPLE_TOKENS} "
             f"sampled tokens per input set, pass <= {ERR_TOL}",
             f"replays per row: >= {args.min_reps}, until {args.target_s} s (<= {args.max_reps}); "
             f"{ROTATE_SETS} rotated input sets when one set (x + routing) is <= {L2_BYTES // 10**6} MB",
             "gbps = PERF.md's memory-floor bytes / ms (dense_equiv: one expert's weights + T*k rows in and out)",
             f"torch_loop is eager (host sync per expert) and skipped above T={LOOP_MAX_T}; the other impls are "
             f"CUDA graph replays"]
    if args.moefuse_gemm:
        notes.append(f"moefuse timed once per MOEFUSE_GEMM in {','.join(args.moefuse_gemm)} (set before each capture)")
    elif os.environ.get("MOEFUSE_GEMM"):
        notes.append(f"MOEFUSE_GEMM={os.environ['MOEFUSE_GEMM']} (impl {variants[0][0]})")
    failures = []
    run_impls = [n for i in args.impls for n in ([v[0] for v in variants] if i == "moefuse" else [i])]
    doc = result_doc(torch.cuda.get_device_name(), git_commit(), {}, [], notes, {"skipped": []})

    mf = None
    if "moefuse" in args.impls:
        try:
            try:
                import moefuse
            except ImportError:  # not on PYTHONPATH: this repository's python/
                sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
                import moefuse
            import moefuse.torch as mft
            notes.append(f"moefuse {moefuse.version()} ({os.path.dirname(moefuse.__file__)}), "
                         f"MOEFUSE_LIB={os.environ.get('MOEFUSE_LIB', '(unset)')}")
            mf = (moefuse, mft)
        except Exception as e:
            msg = f"moefuse could not be loaded: {type(e).__name__}: {e}"
            log("!" * 80 + f"\nbench_moe: ERROR: {msg}\n" + "!" * 80)
            notes.append(msg)
            failures.append(msg)

    log(f"bench_moe: {doc['gpu']}, commit {doc['commit'] or '?'}, impls {','.join(args.impls)}, "
        f"shapes {','.join(args.shapes)}, T {','.join(map(str, args.tokens))}")
    try:
        c = gpu.ceilings()
    except Exception as e:  # the rows can still be compared with each other
        c = {"read_TBps": None, "bf16_TFLOPs": None, "fp8_TFLOPs": None, "copy_TBps": None}
        msg = f"ceilings FAILED: {type(e).__name__}: {e}"
        log("bench_moe: ERROR: " + msg)
        failures.append(msg)
        notes.append(msg)
    doc["ceilings"] = c
    log(f"ceilings: read {c['read_TBps']} TB/s, copy {c['copy_TBps']} TB/s, bf16 {c['bf16_TFLOPs']} TFLOP/s, "
        f"fp8 {c['fp8_TFLOPs']} TFLOP/s ({time.time() - t_start:.0f} s)")

    def over_budget(reserve_s=0.0):
        """True when the budget (less reserve_s, what the next step is expected to take) is spent."""
        return args.budget_s > 0 and time.time() - t_start > args.budget_s - reserve_s

    def shape_rows(name, dims, t0):
        """Every row of one shape; its weights are freed when this returns."""
        E, H, I, k = dims
        w13, w2 = gpu.weights(E, H, I, args.seed + E * H + I)
        w13t, w2t = w13.transpose(1, 2), w2.transpose(1, 2)  # [E, H, 2I], [E, I, H] for _grouped_mm
        torch.cuda.synchronize()
        log(f"\n== {name}: E={E} H={H} I={I} k={k}; weights drawn in {time.time() - t0:.1f} s")
        packed = False
        for T in args.tokens:
            if over_budget():
                msg = f"{name} T={T}: skipped, over the {args.budget_s:g} s budget"
                log(msg)
                notes.append(msg)
                doc["skipped"] += [(name, T, i) for i in run_impls]
                continue
            set_bytes = T * H * 2 + T * k * 8
            nsets = rotation_sets(set_bytes)
            try:
                sets = [gpu.input_set(E, H, k, T, args.seed * 1000003 + T * 7 + i) for i in range(nsets)]
                for s in sets:
                    s["wts_bf16"] = s["wts"].to(torch.bfloat16)
                idx, refs = gpu.reference(sets, w13, w2, I)
            except Exception as e:  # no inputs or no reference: no row of this T can be checked
                msg = f"{name} T={T}: FAILED drawing the inputs or the fp64 reference: {type(e).__name__}: {e}"
                log("bench_moe: ERROR: " + msg)
                failures.append(msg)
                notes.append(msg)
                sets = refs = idx = None
                continue

            def record(impl, fn):
                """fn() -> (ms, err) or raises; appends the row, passed or failed."""
                label = f"{name:14s} T={T:6d} {impl:20s}"
                t1 = time.time()
                try:
                    ms, err, reps = fn()
                    doc["rows"].append(make_row(name, dims, T, impl, ms, err))
                    log(f"{label} {ms:10.4f} ms  {flops(T, k, H, I) / ms * 1e-9:7.1f} TFLOP/s  err {err:.2e}  "
                        f"({reps} reps, {nsets} set{'s' if nsets > 1 else ''}, {time.time() - t1:.1f} s)")
                except Exception as e:  # a failing impl is reported and the run goes on
                    err = getattr(e, "err", None)
                    doc["rows"].append(make_row(name, dims, T, impl, None, err))
                    msg = f"{name} T={T} {impl}: FAILED: {type(e).__name__}: {e}"
                    failures.append(msg)
                    notes.append(msg)
                    log(f"{label} FAILED: {type(e).__name__}: {e}")
                    try:
                        torch.cuda.synchronize()
                    except Exception as e2:  # sticky: the rows after this fail too, each saying why
                        log(f"bench_moe: ERROR: CUDA is broken after {impl}: {e2}")

            def graph_impl(make_fn, what):
                def go():
                    graphs, outs = [], []
                    for s in sets:
                        g, y = gpu.capture(make_fn(s), pool=graphs[0].pool() if graphs else None)
                        graphs.append(g)
                        outs.append(y)
                    for g in graphs:
                        g.replay()
                    torch.cuda.synchronize()
                    errs = [gpu.check(y, idx, r, f"{what} set {i}") for i, (y, r) in enumerate(zip(outs, refs))]
                    ms, reps = gpu.time_graphs(graphs)
                    del graphs, outs
                    return ms, max(errs), reps
                return go

            if "moefuse" in args.impls:
                if mf is None:
                    doc["rows"] += [make_row(name, dims, T, impl, None, None) for impl, _ in variants]
                else:
                    mft = mf[1]
                    if not packed:
                        t1 = time.time()
                        s = sets[0]
                        try:
                            mft.fused_experts(s["x"], w13, w2, s["wts"], s["ids"])
                            torch.cuda.synchronize()
                            log(f"{name}: moefuse packed the weights in {time.time() - t1:.1f} s")
                        except Exception:
                            pass  # the row below fails with the same error and records it
                        packed = True
                    for impl, gemm in variants:
                        saved = os.environ.get("MOEFUSE_GEMM")
                        if gemm is not None:  # the library reads it when the forward is captured
                            os.environ["MOEFUSE_GEMM"] = gemm
                        try:
                            record(impl, graph_impl(
                                lambda s: (lambda: mft.fused_experts(s["x"], w13, w2, s["wts"], s["ids"])), impl))
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
                        y = gpu.loop_forward(sets[0], w13, w2, E, I)
                        torch.cuda.synchronize()
                        err = gpu.check(y, idx, refs[0], "torch_loop")
                        for _ in range(2):
                            for s in sets:
                                gpu.loop_forward(s, w13, w2, E, I)
                        ms, reps = gpu.timed(lambda i: gpu.loop_forward(sets[i % len(sets)], w13, w2, E, I))
                        return ms, err, reps
                    record("torch_loop", loop)
            if "torch_grouped_mm" in args.impls:
                record("torch_grouped_mm", graph_impl(lambda s: gpu.grouped_mm_fn(s, w13t, w2t, E, I, k),
                                                      "torch_grouped_mm"))
            if "dense_equiv_cublas" in args.impls:
                def dense():
                    n_d = rotation_sets(T * k * H * 2)
                    xrs = [torch.randn(T * k, H, device=gpu.dev, dtype=torch.bfloat16) for _ in range(n_d)]
                    graphs, outs, errs = [], [], []
                    for xr in xrs:
                        g, y = gpu.capture(gpu.dense_fn(xr, w13[0], w2[0], I),
                                           pool=graphs[0].pool() if graphs else None)
                        graphs.append(g)
                        outs.append(y)
                    for g in graphs:
                        g.replay()
                    torch.cuda.synchronize()
                    for i, (xr, y) in enumerate(zip(xrs, outs)):
                        d_idx, d_ref = gpu.dense_reference(xr, w13[0], w2[0], I)
                        errs.append(gpu.check(y, d_idx, d_ref, f"dense_equiv_cublas set {i}"))
                    ms, reps = gpu.time_graphs(graphs)
                    del graphs, outs, xrs
                    return ms, max(errs), reps
                record("dense_equiv_cublas", dense)
            sets = refs = idx = None  # free this T's inputs (not del: the closures name them)
            gc.collect()
            write_outputs(doc, args.out, args.shapes, args.tokens)  # a run cut short keeps its rows

    for name in args.shapes:
        dims = SHAPES[name]
        E, H, I, k = dims
        # Drawing and packing the weights (through the host) before any row: ~1.5 GB/s, guessed.
        if over_budget(reserve_s=5 + 3 * E * H * I * 2 / 1.5e9):
            msg = f"{name}: skipped, the {args.budget_s:g} s budget would be spent on its weights"
            log(msg)
            notes.append(msg)
            doc["skipped"] += [(name, T, i) for T in args.tokens for i in run_impls]
            continue
        if mf is not None:
            try:
                layer = mf[0].preset(name).layer
                got = (layer.num_experts, layer.hidden, layer.intermediate, layer.top_k)
                if got != dims:
                    raise BenchError(f"moefuse.preset({name!r}) has (E, H, I, k) = {got}, PERF.md says {dims}")
            except Exception as e:
                log(f"bench_moe: ERROR: {e}")
                failures.append(str(e))
                notes.append(str(e))
        t0 = time.time()
        try:
            shape_rows(name, dims, t0)
        except Exception as e:  # outside any row (drawing weights, inputs, the reference): note, go on
            msg = f"{name}: FAILED outside a row: {type(e).__name__}: {e}"
            log("bench_moe: ERROR: " + msg)
            failures.append(msg)
            notes.append(msg)
        # Free the shape before the next: graphs are gone, so the packed weights may go too.
        if mf is not None:
            mf[1].clear_cache()
        gc.collect()
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception as e:  # a sticky CUDA error: every later row fails and says so
            log(f"bench_moe: ERROR: CUDA after {name}: {type(e).__name__}: {e}")
        write_outputs(doc, args.out, args.shapes, args.tokens)
        log(f"== {name} done in {time.time() - t0:.0f} s (total {time.time() - t_start:.0f} s); wrote {args.out}")

    md = write_outputs(doc, args.out, args.shapes, args.tokens)
    log(f"\nbench_moe: {len(doc['rows'])} rows in {time.time() - t_start:.0f} s -> {args.out} and .md\n")
    if failures:
        log("FAILURES:\n  " + "\n  ".join(failures))
    log(md)
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------
# --selftest: everything above that needs no torch.
# ---------------------------------------------------------------------------------------


def selftest():
    import tempfile
    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print(f"FAIL: {what}")

    a = parse_args([])
    check(a.tokens == DEFAULT_TOKENS and a.shapes == list(SHAPES) and a.impls == IMPLS, "defaults")
    check(a.target_s == 0.5 and a.min_reps == 20, "default replays")
    check(a.out.endswith(f"results/{utc_date()}-h200-bench.json"), f"default out {a.out}")
    a = parse_args(["--quick", "--shapes", "deepseek-v3,qwen3-30b-a3b", "--tokens", "3,5", "--out", "x.json"])
    check(a.tokens == [3, 5] and a.shapes == ["deepseek-v3", "qwen3-30b-a3b"] and a.target_s == 0.1, "overrides")
    check(parse_args(["--quick"]).tokens == QUICK_TOKENS, "quick tokens")
    for bad in (["--shapes", "llama"], ["--tokens", "1,x"], ["--tokens", "0"], ["--min-reps", "5"],
                ["--impls", "triton"], ["--moefuse-gemm", "v1,v1"], ["--moefuse-gemm", "a b"]):
        try:
            import contextlib
            import io
            with contextlib.redirect_stderr(io.StringIO()):
                parse_args(bad)
            check(False, f"{bad} accepted")
        except SystemExit as e:
            check(e.code == 2, f"{bad} exit code {e.code}")

    check(moefuse_impl_name({}) == "moefuse", "impl name")
    check(moefuse_impl_name({"MOEFUSE_GEMM": "hopper"}) == "moefuse-hopper", "impl suffix")
    check(moefuse_impl_name({"MOEFUSE_GEMM": "a b/c"}) == "moefuse-a_b_c", "impl suffix sanitised")
    check(moefuse_variants(None, {}) == [("moefuse", None)], "variants default")
    check(moefuse_variants(None, {"MOEFUSE_GEMM": "v1"}) == [("moefuse-v1", None)], "variants from env")
    check(moefuse_variants(parse_args(["--moefuse-gemm", "v1,hopper"]).moefuse_gemm) ==
          [("moefuse-v1", "v1"), ("moefuse-hopper", "hopper")], "variants from --moefuse-gemm")

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

    check(rotation_sets(60 * 10**6) == 3 and rotation_sets(60 * 10**6 + 1) == 1, "rotation")
    check(not replays_needed(20, 600.0, 20, 0.5, 200) and replays_needed(19, 1e9, 20, 0.5, 200), "min reps")
    check(replays_needed(20, 100.0, 20, 0.5, 200) and not replays_needed(200, 100.0, 20, 0.5, 200), "target/max")
    med, n = median_timed(lambda i: 0.01 * (i % 7), 20, 0.5, 200)
    check(n == 200 and abs(med - 0.03) < 1e-12, f"median_timed short rows: {n} {med}")
    med, n = median_timed(lambda i: 40.0 + i, 20, 0.5, 200)
    check(n == 20 and med == 49.5, f"median_timed long rows: {n} {med}")

    dims = SHAPES["qwen3-30b-a3b"]
    r = make_row("qwen3-30b-a3b", dims, 4096, "moefuse", 1.0, 0.0031)
    check(list(r) == ROW_KEYS, "row keys")
    check(abs(r["tflops"] - flops(4096, 8, 2048, 768) * 1e-9) < 1e-3 * r["tflops"], "row tflops")
    check(abs(r["gbps"] - floor_bytes(*dims, 4096) * 1e-6) < 1e-3 * r["gbps"], "row gbps")
    f = make_row("qwen3-30b-a3b", dims, 4096, "torch_grouped_mm", None, 0.5)
    check(f["ms"] is None and f["tflops"] is None and f["err"] == 0.5, "failed row")
    check(make_row("x", dims, 1, "moefuse", float("nan"), float("inf"))["ms"] is None, "non-finite -> null")

    rows = [r, f, make_row("qwen3-30b-a3b", dims, 4096, "torch_loop", 20.0, 0.004),
            make_row("qwen3-30b-a3b", dims, 4096, "dense_equiv_cublas", 0.5, 0.002),
            make_row("qwen3-30b-a3b", dims, 16384, "moefuse", 4.0, 0.003),
            make_row("qwen3-30b-a3b", dims, 16384, "torch_grouped_mm", 6.0, 0.003)]
    doc = result_doc("NVIDIA H200", "abc123", {"read_TBps": 4.19, "bf16_TFLOPs": 751.0, "fp8_TFLOPs": None,
                                               "copy_TBps": 4.19}, rows, ["a note"],
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
    lines = [ln for ln in md.splitlines() if ln.startswith("| qwen3")]
    check(len(lines) == 2, f"md rows {len(lines)}")
    t4096 = lines[0].split(" | ")
    # moefuse 1.0 ms; grouped_mm FAILED -> '-' ratio; best peer = loop 20 ms -> 20x; dense 0.5 -> 0.50x
    check("FAIL" in t4096 and "20.00x" in t4096 and "0.50x" in t4096, f"md 4096 row: {lines[0]}")
    check(t4096[6] == "30%", f"% mem floor {t4096[6]}")  # memory floor 0.296 ms / 1.0 ms (0.412 is compute)
    t16k = lines[1].split(" | ")
    check("skipped" in t16k and t16k.count("1.50x") == 2, f"md 16384 row: {lines[1]}")
    check("a note" in md, "notes in md")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--selftest" in argv:
        return selftest()
    args = parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
