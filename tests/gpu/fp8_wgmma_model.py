# The numbers behind gpu_test_fp8.c's stage-wise FP8 bounds for the Hopper path (A2_FLIP_FRACTION,
# A2_NEAR_Q, A2_SCALE_REL, Y_GIVEN_A2_*): a model of the wgmma e4m3 accumulator on the test's data
# model, GEMM1 -> A2 -> quantised A2 codes compared with the exact (fp64) path, then GEMM2 on the same
# A2 codes with and without the model.
#
# The accumulator model: within one 128-K block (the kernel promotes each block's partial into fp32)
# wgmma adds 32 e4m3 products at a time to the running sum; each step aligns the running sum and the 32
# products to the largest exponent among them and keeps BITS bits below it (truncating toward zero);
# the sum of what is kept is exact. BITS = 15 reproduces tests/gpu/fp8_a2_probe.c's H200 measurement
# of the relu2 case (A2 error relative to sum |x w|: median 4.3e-6 vs 4.6e-6 measured, max 1.0e-4 vs
# 0.65-1.1e-4; flips 0.12-0.22% of the codes vs 0.07-0.35%; tensor scale off by <= 3.7e-4 vs 6.4e-4);
# BITS = 14 doubles the error, the margin the bounds are set against.
# Data model as the GPU suite (gpu_test_data.c): weights uniform +-3/sqrt(K) times a power of two in [1/4, 4] per
# 128x128 block, quantised fp8-block128 (or fp8-tensor); x uniform +-1 times a power of two per 1x128
# group, quantised as the activations (row128 or tensor); bias +-0.1.
#
# Usage: python3 fp8_wgmma_model.py SEED BITS TRIALS [small|big|huge]
#   small: the suite's Hopper FP8 shapes (~2-3 min); big: qwen3's H, I; huge: deepseek-v3's (minutes).
# Per shape: the fraction of A2 codes that differ from the exact path's ("flips"), the largest
# distance in e4m3 steps, the codes more than one step apart with their largest |q - q_exact| (q =
# A2 / scale, 448 at the top) and the largest |q| they occur at, the largest relative scale
# difference, and y's relative error from GEMM2's accumulation on identical A2 codes.
import sys
import numpy as np

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
BITS = int(sys.argv[2]) if len(sys.argv) > 2 else 15


def e4m3(q):
    """Quotients -> (signed position on the e4m3 grid, e4m3 value), round to nearest even."""
    a = np.abs(q)
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), -6.0)
    m = np.minimum(np.round(a / 2.0 ** (e - 3)) * 2.0 ** (e - 3), 448.0)
    em = np.floor(np.log2(np.where(m > 0, m, 1.0)))
    code = np.where(m < 2.0 ** -6, np.round(m * 512), (em + 7) * 8 + np.round((m / 2.0 ** em - 1) * 8))
    return (np.sign(q) * code).astype(np.int64), np.sign(q) * m


def act_scales(v, fmt):
    """Each element's scale: amax / 448 of the tensor, or of its row's 128-column group."""
    if fmt == 'tensor':
        s = np.abs(v).max() / 448.0
        return np.full(v.shape, s if s > 0 else 1.0)
    out = np.empty_like(v)
    for g in range(0, v.shape[1], 128):
        s = np.abs(v[:, g:g + 128]).max(axis=1, keepdims=True) / 448.0
        s[s == 0] = 1.0
        out[:, g:g + 128] = s
    return out


def factors(shape):
    return rng.choice([0.25, 0.5, 1, 2, 4], size=shape)


def weights(E, N, K, fmt):
    W = rng.uniform(-1, 1, (E, N, K)) * 3 / np.sqrt(K)
    W *= np.repeat(np.repeat(factors((E, (N + 127) // 128, (K + 127) // 128)), 128, 1), 128, 2)[:, :N, :K]
    for e in range(E):
        blocks = [(0, N, 0, K)] if fmt == 'tensor' else \
            [(r, r + 128, c, c + 128) for r in range(0, N, 128) for c in range(0, K, 128)]
        for r0, r1, c0, c1 in blocks:
            b = W[e, r0:r1, c0:c1]
            s = np.abs(b).max() / 448.0
            W[e, r0:r1, c0:c1] = e4m3(b / s)[1] * s
    return W


def wgmma_block(P):
    """The partial of one 128-K block of products P [..., 128], as the model above sums it."""
    acc = np.zeros(P.shape[:-1])
    for c in range(0, P.shape[-1], 32):
        terms = np.concatenate([acc[..., None], P[..., c:c + 32]], axis=-1)
        mx = np.abs(terms).max(axis=-1, keepdims=True)
        ulp = 2.0 ** (np.floor(np.log2(np.where(mx > 0, mx, 1.0))) - BITS)
        acc = (np.sign(terms) * np.floor(np.abs(terms) / ulp) * ulp).sum(axis=-1)
    return acc


def gemm(A, W, model):
    """Row r of A [rows, K] times its weights W [rows, N, K]: exact, or with the model per 128-K block."""
    if not model:
        return np.einsum('rnk,rk->rn', W, A)
    out = np.zeros(W.shape[:2])
    for c in range(0, W.shape[2], 128):
        P = W[:, :, c:c + 128] * A[:, None, c:c + 128]
        if P.shape[-1] < 128:  # the K tail: TMA fills zeros
            P = np.concatenate([P, np.zeros(P.shape[:-1] + (128 - P.shape[-1],))], -1)
        out += wgmma_block(P)
    return out


def case(E, H, I, k, T, act, wfmt, afmt, bias, trials):
    glu = act != 'relu2'
    N13 = 2 * I if glu else I
    W13, W2 = weights(E, N13, H, wfmt), weights(E, H, I, wfmt)
    b13 = rng.uniform(-.1, .1, (E, N13)) if bias else np.zeros((E, N13))
    rows = []
    for _ in range(trials):
        x = rng.uniform(-1, 1, (T, H)) * np.repeat(factors((T, (H + 127) // 128)), 128, 1)[:, :H]
        xs = act_scales(x, afmt)
        xq = e4m3(x / xs)[1] * xs
        ids = np.array([rng.choice(E, k, replace=False) for _ in range(T)]).reshape(-1)
        tok = np.repeat(np.arange(T), k)

        def a2(g):
            g = g + b13[ids]
            if not glu:
                return np.maximum(g, 0) ** 2
            return g[:, :I] / (1 + np.exp(-g[:, :I])) * g[:, I:]

        A_ex, A_hw = a2(gemm(xq[tok], W13[ids], False)), a2(gemm(xq[tok], W13[ids], True))
        s_ex, s_hw = act_scales(A_ex, afmt), act_scales(A_hw, afmt)
        (p_ex, q_ex), (p_hw, q_hw) = e4m3(A_ex / s_ex), e4m3(A_hw / s_hw)
        steps, dq = np.abs(p_ex - p_hw), np.abs(q_ex - q_hw)
        far = steps > 1
        A = q_hw * s_hw  # y given the model's A2: GEMM2 exact vs modelled on the same codes
        y_ex, y_hw = gemm(A, W2[ids], False), gemm(A, W2[ids], True)
        rows.append(((steps > 0).mean(), steps.max(), far.sum(), dq[far].max() if far.any() else 0.0,
                     np.abs(q_ex[far]).max() if far.any() else 0.0, np.abs(s_hw / s_ex - 1).max(),
                     np.sqrt(((y_hw - y_ex) ** 2).sum() / (y_ex ** 2).sum()), steps.size))
    return np.array(rows)


SHAPES = {
    'small': [("relu2 tensor T=33 (stale-rows)", (8, 256, 144, 2, 33, 'relu2', 'block', 'tensor', False)),
              ("relu2-bias row128 T=33", (8, 256, 144, 2, 33, 'relu2', 'block', 'row128', True)),
              ("relu2-bias tensor T=300", (8, 256, 144, 2, 300, 'relu2', 'block', 'tensor', True)),
              ("tails block/row128 T=1", (8, 320, 208, 2, 1, 'swiglu', 'block', 'row128', True)),
              ("tails block/row128 T=3", (8, 320, 208, 2, 3, 'swiglu', 'block', 'row128', True)),
              ("tails block/row128 T=512", (8, 320, 208, 2, 512, 'swiglu', 'block', 'row128', True)),
              ("tails tensor/tensor T=129", (8, 320, 208, 2, 129, 'swiglu', 'tensor', 'tensor', False)),
              ("x-strided row128 T=45", (16, 256, 128, 4, 45, 'swiglu', 'block', 'row128', False))],
    'big': [("qwen3 H, I row128 T=2", (8, 2048, 768, 8, 2, 'swiglu', 'block', 'row128', False)),
            ("qwen3 H, I tensor T=2", (8, 2048, 768, 8, 2, 'swiglu', 'tensor', 'tensor', False))],
    'huge': [("deepseek-v3 H, I row128 T=2", (8, 7168, 2048, 8, 2, 'swiglu', 'block', 'row128', False))],
}

if __name__ == '__main__':
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    for name, shape in SHAPES[sys.argv[4] if len(sys.argv) > 4 else 'small']:
        r = case(*shape, trials)
        print(f"{name:30s} bits {BITS}: flips mean {r[:, 0].mean():.2e} max {r[:, 0].max():.2e} | max steps "
              f"{int(r[:, 1].max())}; {int(r[:, 2].sum())} of {int(r[:, 7].sum())} codes > 1 step, within "
              f"{r[:, 3].max():.3g} of q_exact, at |q| <= {r[:, 4].max():.3g} | scale max rel diff {r[:, 5].max():.1e}"
              f" | y given A2 (GEMM2) max {r[:, 6].max():.1e}", flush=True)
