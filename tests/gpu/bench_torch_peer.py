"""torch._grouped_mm peer for PERF.md's shapes, and the merge of bench_gpu_forward's rows.

Times the same forward (routing excluded: ids and weights given; bf16 weights W13 [E, 2I, H]
with gate rows first, W2 [E, H, I]) written with torch: sort rows by expert, gather x,
grouped GEMM, SiLU(gate) * up, grouped GEMM, weight, scatter back, sum over slots. Captured
in a CUDA graph; median of 30 event-timed replays after warm-up (PERF.md's protocol).
Measures the two ceilings (device copy, bf16 8192^3 GEMM) too.

Not in the same process as moefuse (the Python binding does not exist yet): the moefuse rows
come from bench_gpu_forward's JSON lines, run on the same machine just before.

usage: python3 bench_torch_peer.py MOEFUSE_ROWS.jsonl OUT.json OUT.md [tokens] [shapes]
"""
import datetime
import json
import subprocess
import sys

import torch

SHAPES = {
    "qwen3-30b-a3b": (128, 2048, 768, 8),
    "gpt-oss-120b": (128, 2880, 2880, 4),
    "mixtral-8x7b": (8, 4096, 14336, 2),
    "deepseek-v3": (256, 7168, 2048, 8),
}


def time_graph(fn, reps=30, warmup=5):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return 0.5 * (times[reps // 2 - 1] + times[reps // 2])


def ceilings():
    n = 1 << 30  # 2 GiB of bf16
    src = torch.randn(n // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = time_graph(lambda: dst.copy_(src), reps=20)
    copy_tbps = 2 * src.numel() * 2 / ms * 1e-9
    del src, dst
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = time_graph(lambda: a @ b, reps=20)
    return copy_tbps, 2 * 8192**3 / ms * 1e-9


def make_weights(E, H, I):
    g = torch.Generator(device="cuda").manual_seed(E * H + I)
    w13 = (torch.rand(E, 2 * I, H, device="cuda", generator=g, dtype=torch.bfloat16) * 2 - 1) * (3 / H**0.5)
    w2 = (torch.rand(E, H, I, device="cuda", generator=g, dtype=torch.bfloat16) * 2 - 1) * (3 / I**0.5)
    return w13, w2


def grouped_mm_forward(w13, w2, k, T):
    E, I2, H = w13.shape
    I = I2 // 2
    g = torch.Generator(device="cuda").manual_seed(T)
    x = (torch.rand(T, H, device="cuda", generator=g) * 2 - 1).bfloat16()
    ids = torch.rand(T, E, device="cuda", generator=g).topk(k, dim=1).indices
    wts = torch.rand(T, k, device="cuda", generator=g) * 0.5 + 0.25
    w13t, w2t = w13.transpose(1, 2), w2.transpose(1, 2)  # [E, H, 2I], [E, I, H]
    y = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
    ones = torch.ones(T * k, device="cuda", dtype=torch.int32)

    def fwd():
        flat = ids.flatten()
        order = flat.argsort(stable=True)
        counts = torch.zeros(E, device="cuda", dtype=torch.int32).scatter_add_(0, flat, ones)
        offs = counts.cumsum(0, dtype=torch.int32)
        xs = x[order // k]
        h = torch._grouped_mm(xs, w13t, offs=offs)
        a = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
        o = torch._grouped_mm(a, w2t, offs=offs).float() * wts.flatten()[order, None]
        out = torch.empty_like(o)
        out[order] = o
        y.copy_(out.view(T, k, H).sum(1))

    fwd()
    torch.cuda.synchronize()
    assert torch.isfinite(y).all() and y.float().abs().sum() > 0, "torch peer produced a bad y"
    return time_graph(fwd)


def main():
    rows_path, out_json, out_md = sys.argv[1:4]
    tokens = [int(t) for t in (sys.argv[4] if len(sys.argv) > 4 else "1,8,64,512,4096,16384").split(",")]
    names = sys.argv[5].split(",") if len(sys.argv) > 5 else list(SHAPES)
    read_tbps, bf16_tflops = ceilings()
    print(f"ceilings: copy {read_tbps:.2f} TB/s, bf16 GEMM {bf16_tflops:.0f} TFLOP/s", flush=True)
    rows = []
    try:
        with open(rows_path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        print(f"no moefuse rows: {e}")
    for name in names:
        E, H, I, k = SHAPES[name]
        w13, w2 = make_weights(E, H, I)
        for T in tokens:
            try:
                ms = grouped_mm_forward(w13, w2, k, T)
            except Exception as e:  # report and go on: one failing peer must not lose the run
                print(f"{name} T={T}: torch._grouped_mm failed: {e}", flush=True)
                torch.cuda.empty_cache()
                continue
            flops = 6.0 * T * k * H * I
            e_act = E * (1 - (1 - k / E) ** T)
            gbytes = e_act * 3 * H * I * 2 + 2 * T * H * 2
            rows.append({"shape": name, "E": E, "H": H, "I": I, "k": k, "T": T, "dtype": "bf16",
                         "pass": "forward", "impl": "torch_grouped_mm", "ms": round(ms, 5),
                         "tflops": round(flops / ms * 1e-9, 2), "gbps": round(gbytes / ms * 1e-6, 1), "err": None})
            print(f"{name:14s} T={T:6d} torch_grouped_mm {ms:9.4f} ms", flush=True)
            torch.cuda.empty_cache()
        del w13, w2
        torch.cuda.empty_cache()
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    result = {"gpu": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(), "commit": commit,
              "ceilings": {"read_TBps": round(read_tbps, 3), "bf16_TFLOPs": round(bf16_tflops, 1), "fp8_TFLOPs": None},
              "rows": rows}
    with open(out_json, "w") as f:
        json.dump(result, f, indent=1)
    by = {(r["shape"], r["T"], r["impl"]): r["ms"] for r in rows}
    lines = ["| shape | T | moefuse-v1 ms | moefuse-hopper ms | torch._grouped_mm ms | torch / best moefuse |",
             "|---|---|---|---|---|---|"]
    for name in names:
        for T in tokens:
            m, h = by.get((name, T, "moefuse-v1")), by.get((name, T, "moefuse-hopper"))
            t = by.get((name, T, "torch_grouped_mm"))
            best = min(v for v in (m, h) if v) if (m or h) else None
            ratio = f"{t / best:.2f}x" if best and t else "-"
            lines.append(f"| {name} | {T} | {m if m else '-'} | {h if h else '-'} | {t if t else '-'} | {ratio} |")
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
