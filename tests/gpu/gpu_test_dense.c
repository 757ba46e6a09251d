/* test_gpu_forward (gpu_test.h): the Hopper engine's dense mode (E = 1) on its own, the GEMMs of
 * src/cuda/hopper/gemm_dense.h and gemm_fp8.h (the library's measured ceilings run them; until
 * session 30 only the kernel labs checked them). Per shape, against a double oracle on the host
 * over sampled rows (every column of each; all rows of a small output):
 *   - bf16 x bf16 -> bf16 and f32, tile width and cluster by the rule, 128 and 256 wide, clusters of 1
 *     and 2 (B multicast; the odd row-block counts leave a cluster's second CTA past M);
 *   - FP8 block-scaled (FP8_ROW128 A, FP8_BLOCK128 B): the scales by TMA (scale rows padded to 4
 *     k-blocks) and through the scale ring (a row stride that is not), 128 and 192 wide, clusters
 *     of 1 and 2 where the scales come by TMA, and the engine's own choice;
 *   - FP8 per tensor (tensor_scales = 1, FP8_TENSOR operands, lds 0: unused), the same widths and
 *     clusters.
 * Every output is poisoned with NaN first and must be finite everywhere (an unwritten element
 * fails); the engine's own choice runs once more from a captured graph, poisoned again. Then the
 * refusals: each bad argument returns its status, names itself, and launches nothing.
 * Tolerances (relative Frobenius over the checked rows): bf16 output 5e-3 (one bf16 rounding,
 * 2^-9 relative at most, ~1e-3 in RMS); f32 output 1e-4 (fp32 accumulation over K <= 4096);
 * FP8 5e-3 (bf16 output; the promotion every 128 of K keeps the tensor core's reduced-precision
 * accumulation at ~1e-4: gemm_fp8_lab.cu says why). A wrong fragment, scale or k-block gives
 * errors of order 1e-1 and more. */
#include "gpu_test.h"
#include "hopper/gemm_dense.h"
#include "hopper/gemm_fp8.h"

typedef struct {
    int64_t m, n, k;
    bool quick;
} dense_shape;

/* Tails in every dimension, one k-block, a 32-k-block reduction (every ring wraps), an odd count
 * of row blocks (a cluster's second CTA past M), a single element. */
static const dense_shape SHAPES[] = {
    {1, 1, 16, true}, {130, 200, 1040, true}, {300, 520, 128, true}, {256, 384, 4096, false}, {640, 1000, 512, false},
};

/* The rows the oracle checks: all of a small output, else 48 (first, last, both sides of every
 * 128-row tile boundary that fits, the rest spread). */
static int64_t checked_rows(int64_t m, int64_t *rows) {
    if (m <= 48) {
        for (int64_t r = 0; r < m; r++) rows[r] = r;
        return m;
    }
    int64_t n = 0;
    rows[n++] = 0;
    rows[n++] = m - 1;
    for (int64_t b = 128; b < m && n < 24; b += 128) rows[n++] = b - 1, rows[n++] = b;
    while (n < 48) rows[n++] = (int64_t)(rng_next() % (uint64_t)m);
    return n;
}

/* out (row-major, ldc = n; bf16 or f32) against ref [rows][n] on the checked rows: the relative
 * Frobenius error; *nonfinite counts the non-finite elements of the WHOLE output. */
static double dense_error(const void *out, bool f32, const double *ref, const int64_t *rows, int64_t nrows, int64_t m,
                          int64_t n, int64_t *nonfinite) {
    *nonfinite = 0;
    for (int64_t i = 0; i < m * n; i++) {
        const float v = f32 ? ((const float *)out)[i] : moe_bf16_to_float(((const uint16_t *)out)[i]);
        if (!isfinite(v)) ++*nonfinite;
    }
    double diff = 0.0, norm = 0.0;
    for (int64_t i = 0; i < nrows; i++)
        for (int64_t c = 0; c < n; c++) {
            const int64_t at = rows[i] * n + c;
            const double v = f32 ? ((const float *)out)[at] : moe_bf16_to_float(((const uint16_t *)out)[at]);
            const double d = v - ref[i * n + c];
            diff += d * d;
            norm += ref[i * n + c] * ref[i * n + c];
        }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ref[i][c] = sum_k a[rows[i]][k] * b[c][k] in double (a [m, k], b [n, k], fp32 values). */
static double *dense_oracle(const float *a, const float *b, const int64_t *rows, int64_t nrows, int64_t n, int64_t k) {
    double *ref = xmalloc((size_t)(nrows * n) * sizeof(double));
    for (int64_t i = 0; i < nrows; i++)
        for (int64_t c = 0; c < n; c++) {
            double s = 0.0;
            for (int64_t t = 0; t < k; t++) s += (double)a[rows[i] * k + t] * (double)b[c * k + t];
            ref[i * n + c] = s;
        }
    return ref;
}

/* Fills x [rows, cols] uniformly at a magnitude per (row block of block_rows, 128 columns), 2^-2..2^2
 * (block_factor): the block scales differ from block to block. */
static void fill_blocks(float *x, int64_t rows, int64_t cols, int64_t block_rows) {
    const uint64_t salt = rng_next();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const float amp = block_factor(salt, r / block_rows, c / 128, 0, 0);
            x[r * cols + c] = rng_uniform(-amp, amp);
        }
}

/* Runs launch(args) into out (poisoned first), syncs, copies back; the status, and the message in why. */
typedef moe_status (*dense_launch_fn)(const void *args, char *why, size_t why_len);

static moe_status fp8_launch_fn(const void *args, char *why, size_t why_len) {
    return moe__hopper_gemm_fp8((const moe__hopper_gemm_fp8_args *)args, stream, why, why_len);
}
static moe_status bf16_launch_fn(const void *args, char *why, size_t why_len) {
    return moe__hopper_gemm_dense((const moe__hopper_gemm_args *)args, stream, why, why_len);
}

/* One run checked: poison, launch (eagerly, or captured in a graph and replayed), compare. */
static void dense_run(const char *what, dense_launch_fn launch, const void *args, void *d_out, void *h_out,
                      size_t out_bytes, bool f32, const double *ref, const int64_t *rows, int64_t nrows, int64_t m,
                      int64_t n, double tol, bool graph) {
    char why[256] = "";
    CUDA_OK(cudaMemset(d_out, 0xFF, out_bytes)); /* NaN in bf16 and f32 */
    moe_status st;
    if (graph) {
        cudaGraph_t g;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        st = launch(args, why, sizeof why);
        CUDA_OK(cudaStreamEndCapture(stream, &g));
        CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(g));
    } else {
        st = launch(args, why, sizeof why);
        CUDA_OK(cudaStreamSynchronize(stream));
    }
    CUDA_OK(cudaGetLastError());
    CHECK(st == MOE_STATUS_OK, "%s: %s: %s", what, moe_status_string(st), why);
    if (st != MOE_STATUS_OK) return;
    CUDA_OK(cudaMemcpy(h_out, d_out, out_bytes, cudaMemcpyDeviceToHost));
    int64_t nonfinite;
    const double err = dense_error(h_out, f32, ref, rows, nrows, m, n, &nonfinite);
    CHECK(nonfinite == 0 && err <= tol, "%s: relative error %.3g (at most %.1g), %lld of %lld outputs not finite", what,
          err, tol, (long long)nonfinite, (long long)(m * n));
}

static void *zeroed(size_t bytes) { return memset(xmalloc(bytes ? bytes : 1), 0, bytes); }

static void *upload(const void *p, size_t bytes) {
    void *d;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) CUDA_OK(cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* Quantises x [rows, cols] into fmt; codes in rows of ld bytes (ld >= cols, a multiple of 16);
 * scales with row stride lds floats (>= the layout's scale_cols; extra columns zero); deq gets
 * the dequantised values (the oracle's operand). Returns the scale rows. */
static int64_t fp8_operand(moe_format fmt, const float *x, int64_t rows, int64_t cols, int64_t ld, int64_t lds,
                           uint8_t **codes, float **scales, float *deq) {
    moe_format_layout lay;
    MOE_OK(NULL, moe_format_layout_get(fmt, rows, cols, &lay));
    uint8_t *packed = xmalloc(lay.code_bytes);
    float *sc = xmalloc((size_t)(lay.scale_rows * lay.scale_cols) * sizeof(float));
    MOE_OK(NULL, moe_quantize(fmt, x, rows, cols, cols, packed, sc, NULL));
    MOE_OK(NULL, moe_dequantize(fmt, packed, sc, 1.0f, rows, cols, deq, cols));
    *codes = zeroed((size_t)(rows * ld));
    for (int64_t r = 0; r < rows; r++) memcpy(*codes + r * ld, packed + r * cols, (size_t)cols);
    const int64_t stride = lds > lay.scale_cols ? lds : lay.scale_cols;
    *scales = zeroed((size_t)(lay.scale_rows * stride) * sizeof(float));
    for (int64_t r = 0; r < lay.scale_rows; r++)
        memcpy(*scales + r * stride, sc + r * lay.scale_cols, (size_t)lay.scale_cols * sizeof(float));
    free(packed);
    free(sc);
    return lay.scale_rows;
}

static void fp8_shape_case(const dense_shape *s) {
    char name[128];
    snprintf(name, sizeof name, "dense fp8 %lldx%lldx%lld", (long long)s->m, (long long)s->n, (long long)s->k);
    if (!selected(name)) return;
    case_failures = 0;
    const int64_t m = s->m, n = s->n, k = s->k, ld = (k + 15) / 16 * 16, kb = (k + 127) / 128;
    float *xa = xmalloc((size_t)(m * k) * sizeof(float)), *xb = xmalloc((size_t)(n * k) * sizeof(float));
    fill_blocks(xa, m, k, 1);
    fill_blocks(xb, n, k, 128);
    int64_t rows[48];
    const int64_t nrows = checked_rows(m, rows);
    uint16_t *h_out = xmalloc((size_t)(m * n) * 2);
    void *d_out;
    CUDA_OK(cudaMalloc(&d_out, (size_t)(m * n) * 2));
    float *deq_a = xmalloc((size_t)(m * k) * sizeof(float)), *deq_b = xmalloc((size_t)(n * k) * sizeof(float));
    for (int tensor = 0; tensor <= 1; tensor++) {
        /* Block scales: rows padded to 4 k-blocks (by TMA), or to one past that (the ring). */
        const int64_t lds_boxes = (kb + 3) / 4 * 4, lds_ring = lds_boxes + 1;
        for (int ring = 0; ring <= (tensor ? 0 : 1); ring++) {
            const int64_t lds = tensor ? 0 : ring ? lds_ring : lds_boxes;
            const moe_format fa = tensor ? MOE_FORMAT_FP8_TENSOR : MOE_FORMAT_FP8_ROW128;
            const moe_format fb = tensor ? MOE_FORMAT_FP8_TENSOR : MOE_FORMAT_FP8_BLOCK128;
            uint8_t *ca, *cb;
            float *sa, *sb;
            const int64_t sa_rows = fp8_operand(fa, xa, m, k, ld, lds, &ca, &sa, deq_a);
            const int64_t sb_rows = fp8_operand(fb, xb, n, k, ld, lds, &cb, &sb, deq_b);
            const int64_t sa_ld = tensor ? 1 : lds, sb_ld = tensor ? 1 : lds;
            void *d_a = upload(ca, (size_t)(m * ld)), *d_b = upload(cb, (size_t)(n * ld));
            void *d_sa = upload(sa, (size_t)(sa_rows * sa_ld) * sizeof(float));
            void *d_sb = upload(sb, (size_t)(sb_rows * sb_ld) * sizeof(float));
            double *ref = dense_oracle(deq_a, deq_b, rows, nrows, n, k);
            /* {block_n, cluster_m}: the engine's choice first (also from a graph), then each forced. */
            static const int configs[][2] = {{0, 0}, {128, 1}, {192, 1}, {128, 2}, {192, 2}};
            for (int c = 0; c < 5; c++) {
                if (ring && configs[c][1] == 2) continue; /* refused: the refusal cases check that */
                moe__hopper_gemm_fp8_args a;
                memset(&a, 0, sizeof a);
                a.a = d_a, a.lda = ld, a.a_scales = d_sa, a.lds_a = lds;
                a.b = d_b, a.ldb = ld, a.b_scales = d_sb, a.lds_b = lds;
                a.c = d_out, a.ldc = n, a.m = m, a.n = n, a.k = k;
                a.block_n = configs[c][0], a.cluster_m = configs[c][1], a.tensor_scales = tensor;
                char what[96];
                snprintf(what, sizeof what, "%s%s block_n %d cluster_m %d", tensor ? "per tensor" : "block-scaled",
                         tensor ? "" : ring ? " (scale ring)" : " (scales by TMA)", a.block_n, a.cluster_m);
                dense_run(what, fp8_launch_fn, &a, d_out, h_out, (size_t)(m * n) * 2, false, ref, rows, nrows, m, n,
                          5e-3, false);
                if (c == 0)
                    dense_run(what, fp8_launch_fn, &a, d_out, h_out, (size_t)(m * n) * 2, false, ref, rows, nrows, m, n,
                              5e-3, true);
            }
            free(ref);
            free(ca), free(cb), free(sa), free(sb);
            CUDA_OK(cudaFree(d_a));
            CUDA_OK(cudaFree(d_b));
            CUDA_OK(cudaFree(d_sa));
            CUDA_OK(cudaFree(d_sb));
        }
    }
    free(xa), free(xb), free(deq_a), free(deq_b), free(h_out);
    CUDA_OK(cudaFree(d_out));
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s %s: block-scaled (TMA scales, scale ring) and per tensor, 128 / 192 wide, clusters of 1 / 2, graph\n",
           case_failures ? "FAIL" : "ok  ", name);
}

static void bf16_shape_case(const dense_shape *s) {
    char name[128];
    snprintf(name, sizeof name, "dense bf16 %lldx%lldx%lld", (long long)s->m, (long long)s->n, (long long)s->k);
    if (!selected(name)) return;
    case_failures = 0;
    const int64_t m = s->m, n = s->n, k = s->k, ld = (k + 7) / 8 * 8;
    float *xa = xmalloc((size_t)(m * k) * sizeof(float)), *xb = xmalloc((size_t)(n * k) * sizeof(float));
    fill_blocks(xa, m, k, 1);
    fill_blocks(xb, n, k, 128);
    uint16_t *ha = zeroed((size_t)(m * ld) * 2), *hb = zeroed((size_t)(n * ld) * 2);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < k; c++) {
            ha[r * ld + c] = moe_float_to_bf16(xa[r * k + c]);
            xa[r * k + c] = moe_bf16_to_float(ha[r * ld + c]); /* the values the device reads */
        }
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            hb[r * ld + c] = moe_float_to_bf16(xb[r * k + c]);
            xb[r * k + c] = moe_bf16_to_float(hb[r * ld + c]);
        }
    int64_t rows[48];
    const int64_t nrows = checked_rows(m, rows);
    double *ref = dense_oracle(xa, xb, rows, nrows, n, k);
    void *d_a = upload(ha, (size_t)(m * ld) * 2), *d_b = upload(hb, (size_t)(n * ld) * 2), *d_out;
    CUDA_OK(cudaMalloc(&d_out, (size_t)(m * n) * 4));
    float *h_out = xmalloc((size_t)(m * n) * 4);
    /* {block_n, cluster_m}: the engine's choice first (also from a graph), then each forced; cluster_m 2
     * with block_n 0 takes 256-wide tiles. */
    static const int configs[][2] = {{0, 0}, {128, 1}, {256, 1}, {256, 2}, {0, 2}};
    for (int f32 = 0; f32 <= 1; f32++)
        for (int w = 0; w < 5; w++) {
            moe__hopper_gemm_args a;
            memset(&a, 0, sizeof a);
            a.a = d_a, a.lda = ld, a.b = d_b, a.ldb = ld, a.c = d_out, a.ldc = n;
            a.c_dtype = f32 ? MOE_DTYPE_F32 : MOE_DTYPE_BF16;
            a.m = m, a.n = n, a.k = k, a.block_n = configs[w][0], a.cluster_m = configs[w][1];
            char what[64];
            snprintf(what, sizeof what, "%s out, block_n %d cluster_m %d", f32 ? "f32" : "bf16", a.block_n, a.cluster_m);
            const size_t bytes = (size_t)(m * n) * (f32 ? 4 : 2);
            dense_run(what, bf16_launch_fn, &a, d_out, h_out, bytes, f32, ref, rows, nrows, m, n, f32 ? 1e-4 : 5e-3,
                      false);
            if (w == 0)
                dense_run(what, bf16_launch_fn, &a, d_out, h_out, bytes, f32, ref, rows, nrows, m, n,
                          f32 ? 1e-4 : 5e-3, true);
        }
    free(xa), free(xb), free(ha), free(hb), free(ref), free(h_out);
    CUDA_OK(cudaFree(d_a));
    CUDA_OK(cudaFree(d_b));
    CUDA_OK(cudaFree(d_out));
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s %s: bf16 and f32 out, the rule / 128 / 256 wide, clusters of 1 / 2, graph\n", case_failures ? "FAIL" : "ok  ",
           name);
}

/* A refusal: the status expected, the argument's name in the message, and no launch (the
 * output, poisoned, stays so). */
static void expect_refusal(const char *what, dense_launch_fn launch, const void *args, moe_status want,
                           const char *names, void *d_out, size_t out_bytes) {
    char why[256] = "";
    CUDA_OK(cudaMemset(d_out, 0xFF, out_bytes));
    const moe_status st = launch(args, why, sizeof why);
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaGetLastError());
    CHECK(st == want && strstr(why, names) != NULL, "%s: got %s (\"%s\"), expected %s naming %s", what,
          moe_status_string(st), why, moe_status_string(want), names);
    unsigned char *h = xmalloc(out_bytes);
    CUDA_OK(cudaMemcpy(h, d_out, out_bytes, cudaMemcpyDeviceToHost));
    size_t changed = 0;
    for (size_t i = 0; i < out_bytes; i++) changed += h[i] != 0xFF;
    CHECK(changed == 0, "%s: refused, yet %zu output bytes changed", what, changed);
    free(h);
}

static void refusal_cases(void) {
    const char *name = "dense refusals";
    if (!selected(name)) return;
    case_failures = 0;
    const int64_t m = 256, n = 256, k = 1040, kb = 9; /* kb % 4 != 0: lds_a = 9 takes the ring */
    void *d_a, *d_b, *d_s, *d_out;
    CUDA_OK(cudaMalloc(&d_a, (size_t)(m * 1056)));
    CUDA_OK(cudaMalloc(&d_b, (size_t)(n * 1056) * 2));
    CUDA_OK(cudaMalloc(&d_s, (size_t)(m * 12) * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, (size_t)(m * n) * 4));
    CUDA_OK(cudaMemset(d_a, 0, (size_t)(m * 1056)));
    CUDA_OK(cudaMemset(d_b, 0, (size_t)(n * 1056) * 2));
    CUDA_OK(cudaMemset(d_s, 0, (size_t)(m * 12) * sizeof(float)));
    moe__hopper_gemm_fp8_args ok;
    memset(&ok, 0, sizeof ok);
    ok.a = d_a, ok.lda = 1056, ok.a_scales = d_s, ok.lds_a = kb;
    ok.b = d_a, ok.ldb = 1056, ok.b_scales = d_s, ok.lds_b = kb;
    ok.c = d_out, ok.ldc = n, ok.m = m, ok.n = n, ok.k = k;
    const size_t fp8_out = (size_t)(m * n) * 2;
    moe__hopper_gemm_fp8_args a = ok;
    a.tensor_scales = 2;
    expect_refusal("fp8 tensor_scales 2", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "tensor_scales", d_out, fp8_out);
    a = ok, a.block_n = 160;
    expect_refusal("fp8 block_n 160", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "block_n", d_out, fp8_out);
    a = ok, a.cluster_m = 3;
    expect_refusal("fp8 cluster_m 3", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "cluster_m", d_out, fp8_out);
    a = ok, a.cluster_m = 2; /* lds 9: the scales cannot come by TMA, and the ring is per CTA */
    expect_refusal("fp8 cluster_m 2 on the scale ring", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "cluster_m",
                   d_out, fp8_out);
    a = ok, a.lds_a = kb - 1;
    expect_refusal("fp8 lds_a below the k-blocks", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "lds_a", d_out,
                   fp8_out);
    a = ok, a.lda = 1048;
    expect_refusal("fp8 lda not a multiple of 16", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "lda", d_out,
                   fp8_out);
    a = ok, a.b_scales = NULL;
    expect_refusal("fp8 b_scales NULL", fp8_launch_fn, &a, MOE_STATUS_NULL_POINTER, "b_scales", d_out, fp8_out);
    a = ok, a.k = 0;
    expect_refusal("fp8 k 0", fp8_launch_fn, &a, MOE_STATUS_INVALID_ARGUMENT, "m, n, k", d_out, fp8_out);
    char why[128];
    CHECK(moe__hopper_gemm_fp8(NULL, stream, why, sizeof why) == MOE_STATUS_NULL_POINTER && strstr(why, "args"),
          "fp8 args NULL: \"%s\"", why);

    moe__hopper_gemm_args okb;
    memset(&okb, 0, sizeof okb);
    okb.a = d_b, okb.lda = 1056, okb.b = d_b, okb.ldb = 1056, okb.c = d_out, okb.ldc = n;
    okb.c_dtype = MOE_DTYPE_BF16, okb.m = m, okb.n = n, okb.k = k;
    moe__hopper_gemm_args b = okb;
    b.block_n = 192;
    expect_refusal("bf16 block_n 192", bf16_launch_fn, &b, MOE_STATUS_INVALID_ARGUMENT, "block_n", d_out, fp8_out);
    b = okb, b.c_dtype = MOE_DTYPE_F16;
    expect_refusal("bf16 c_dtype f16", bf16_launch_fn, &b, MOE_STATUS_DTYPE_MISMATCH, "c_dtype", d_out, fp8_out);
    b = okb, b.ldc = n - 1;
    expect_refusal("bf16 ldc below n", bf16_launch_fn, &b, MOE_STATUS_INVALID_ARGUMENT, "ldc", d_out, fp8_out);
    b = okb, b.cluster_m = 3;
    expect_refusal("bf16 cluster_m 3", bf16_launch_fn, &b, MOE_STATUS_INVALID_ARGUMENT, "cluster_m", d_out, fp8_out);
    b = okb, b.cluster_m = 2, b.block_n = 128;
    expect_refusal("bf16 cluster_m 2 on 128-wide tiles", bf16_launch_fn, &b, MOE_STATUS_INVALID_ARGUMENT, "cluster_m",
                   d_out, fp8_out);
    b = okb, b.lda = 1044;
    expect_refusal("bf16 lda not a multiple of 8", bf16_launch_fn, &b, MOE_STATUS_INVALID_ARGUMENT, "lda", d_out,
                   fp8_out);
    CUDA_OK(cudaFree(d_a));
    CUDA_OK(cudaFree(d_b));
    CUDA_OK(cudaFree(d_s));
    CUDA_OK(cudaFree(d_out));
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s %s: each bad argument refused with its status and name, nothing launched\n",
           case_failures ? "FAIL" : "ok  ", name);
}

void dense_engine_cases(bool quick) {
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        if (quick && !SHAPES[i].quick) continue;
        bf16_shape_case(&SHAPES[i]);
        fp8_shape_case(&SHAPES[i]);
    }
    refusal_cases();
}
