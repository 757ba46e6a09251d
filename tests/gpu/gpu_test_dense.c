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
 * refusals: each bad argument returns its status, names itself, and launches nothing; the same table
 * runs without a device in `test_gpu_forward --selftest` (CI), status and name only.
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
    int64_t ld_pad;  /* elements of A's and B's rows past K (rounded to whole 16 bytes), a multiple of 16 */
    int64_t ldc_pad; /* C's columns past N: they must stay as poisoned */
    bool quick;
} dense_shape;

/* Tails in every dimension, one k-block, a 32-k-block reduction (every ring wraps), an odd count
 * of row blocks (a cluster's second CTA past M), a single element; padded operand rows, and C's
 * rows padded by an odd count (no paired stores) and an even one. */
static const dense_shape SHAPES[] = {
    {1, 1, 16, 0, 0, true},           {130, 200, 1040, 32, 3, true},    {300, 520, 128, 0, 0, true},
    {256, 384, 4096, 0, 0, false},    {640, 1000, 512, 16, 8, false},
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

/* The element at `at` of out (bf16 or f32). */
static double out_value(const void *out, bool f32, int64_t at) {
    return f32 ? ((const float *)out)[at] : moe_bf16_to_float(((const uint16_t *)out)[at]);
}

/* out (row-major [m, ldc]; bf16 or f32) against ref [rows][n] on the checked rows: the relative
 * Frobenius error; *nonfinite counts the non-finite elements of the WHOLE m x n output, *written
 * the padding columns (n .. ldc) that are no longer the poison. */
static double dense_error(const void *out, bool f32, const double *ref, const int64_t *rows, int64_t nrows, int64_t m,
                          int64_t n, int64_t ldc, int64_t *nonfinite, int64_t *written) {
    *nonfinite = *written = 0;
    const size_t esize = f32 ? 4 : 2;
    for (int64_t r = 0; r < m; r++) {
        for (int64_t c = 0; c < n; c++)
            if (!isfinite(out_value(out, f32, r * ldc + c))) ++*nonfinite;
        for (int64_t c = n; c < ldc; c++) {
            const unsigned char *e = (const unsigned char *)out + (size_t)(r * ldc + c) * esize;
            for (size_t b = 0; b < esize; b++)
                if (e[b] != 0xFF) {
                    ++*written;
                    break;
                }
        }
    }
    double diff = 0.0, norm = 0.0, terms = 0.0;
    for (int64_t i = 0; i < nrows; i++)
        for (int64_t c = 0; c < n; c++) {
            const int64_t at = rows[i] * ldc + c;
            const double d = out_value(out, f32, at) - ref[i * n + c];
            diff += d * d;
            norm += ref[i * n + c] * ref[i * n + c];
            terms += ref[(nrows + i) * n + c];
        }
    /* A few outputs (1 x 1) can cancel to far below their terms: relative to the terms' size then. */
    if (norm < terms) norm = terms;
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ref[i][c] = sum_k a[rows[i]][k] * b[c][k] in double (a [m, k], b [n, k], fp32 values); then, at
 * ref[nrows + i][c], (sum_k |a b|)^2 / k, the square the sum has on average over random signs (x 0.56). */
static double *dense_oracle(const float *a, const float *b, const int64_t *rows, int64_t nrows, int64_t n, int64_t k) {
    double *ref = xmalloc((size_t)(2 * nrows * n) * sizeof(double));
    for (int64_t i = 0; i < nrows; i++)
        for (int64_t c = 0; c < n; c++) {
            double s = 0.0, abs_sum = 0.0;
            for (int64_t t = 0; t < k; t++) {
                const double p = (double)a[rows[i] * k + t] * (double)b[c * k + t];
                s += p;
                abs_sum += fabs(p);
            }
            ref[i * n + c] = s;
            ref[(nrows + i) * n + c] = abs_sum * abs_sum / (double)k;
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

/* "dense KIND MxNxK", with the padding of the leading dimensions where there is some. */
static void shape_name(char *name, size_t len, const char *kind, const dense_shape *s) {
    int at = snprintf(name, len, "dense %s %lldx%lldx%lld", kind, (long long)s->m, (long long)s->n, (long long)s->k);
    if ((s->ld_pad || s->ldc_pad) && at > 0 && (size_t)at < len)
        snprintf(name + at, len - (size_t)at, " (lda, ldb +%lld, ldc +%lld)", (long long)s->ld_pad,
                 (long long)s->ldc_pad);
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
                      int64_t n, int64_t ldc, double tol, bool graph) {
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
    int64_t nonfinite, written;
    const double err = dense_error(h_out, f32, ref, rows, nrows, m, n, ldc, &nonfinite, &written);
    CHECK(nonfinite == 0 && written == 0 && err <= tol,
          "%s: relative error %.3g (at most %.1g), %lld of %lld outputs not finite, %lld padding columns written", what,
          err, tol, (long long)nonfinite, (long long)(m * n), (long long)written);
}

static void *zeroed(size_t bytes) { return memset(xmalloc(bytes ? bytes : 1), 0, bytes); }
/* All-ones bytes: NaN as bf16 and as e4m3, for the operands' padding past K (never to be read). */
static void *poisoned(size_t bytes) { return memset(xmalloc(bytes ? bytes : 1), 0xFF, bytes); }

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
    *codes = poisoned((size_t)(rows * ld));
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
    shape_name(name, sizeof name, "fp8", s);
    if (!selected(name)) return;
    case_failures = 0;
    const int64_t m = s->m, n = s->n, k = s->k, ld = (k + 15) / 16 * 16 + s->ld_pad, kb = (k + 127) / 128;
    const int64_t ldc = n + s->ldc_pad;
    float *xa = xmalloc((size_t)(m * k) * sizeof(float)), *xb = xmalloc((size_t)(n * k) * sizeof(float));
    fill_blocks(xa, m, k, 1);
    fill_blocks(xb, n, k, 128);
    int64_t rows[48];
    const int64_t nrows = checked_rows(m, rows);
    uint16_t *h_out = xmalloc((size_t)(m * ldc) * 2);
    void *d_out;
    CUDA_OK(cudaMalloc(&d_out, (size_t)(m * ldc) * 2));
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
                a.c = d_out, a.ldc = ldc, a.m = m, a.n = n, a.k = k;
                a.block_n = configs[c][0], a.cluster_m = configs[c][1], a.tensor_scales = tensor;
                char what[96];
                snprintf(what, sizeof what, "%s%s block_n %d cluster_m %d", tensor ? "per tensor" : "block-scaled",
                         tensor ? "" : ring ? " (scale ring)" : " (scales by TMA)", a.block_n, a.cluster_m);
                dense_run(what, fp8_launch_fn, &a, d_out, h_out, (size_t)(m * ldc) * 2, false, ref, rows, nrows, m, n,
                          ldc, 5e-3, false);
                if (c == 0)
                    dense_run(what, fp8_launch_fn, &a, d_out, h_out, (size_t)(m * ldc) * 2, false, ref, rows, nrows, m,
                              n, ldc, 5e-3, true);
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
    shape_name(name, sizeof name, "bf16", s);
    if (!selected(name)) return;
    case_failures = 0;
    const int64_t m = s->m, n = s->n, k = s->k, ld = (k + 7) / 8 * 8 + s->ld_pad, ldc = n + s->ldc_pad;
    float *xa = xmalloc((size_t)(m * k) * sizeof(float)), *xb = xmalloc((size_t)(n * k) * sizeof(float));
    fill_blocks(xa, m, k, 1);
    fill_blocks(xb, n, k, 128);
    uint16_t *ha = poisoned((size_t)(m * ld) * 2), *hb = poisoned((size_t)(n * ld) * 2);
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
    CUDA_OK(cudaMalloc(&d_out, (size_t)(m * ldc) * 4));
    float *h_out = xmalloc((size_t)(m * ldc) * 4);
    /* {block_n, cluster_m}: the engine's choice first (also from a graph), then each forced; cluster_m 2
     * with block_n 0 takes 256-wide tiles. */
    static const int configs[][2] = {{0, 0}, {128, 1}, {256, 1}, {256, 2}, {0, 2}};
    for (int f32 = 0; f32 <= 1; f32++)
        for (int w = 0; w < 5; w++) {
            moe__hopper_gemm_args a;
            memset(&a, 0, sizeof a);
            a.a = d_a, a.lda = ld, a.b = d_b, a.ldb = ld, a.c = d_out, a.ldc = ldc;
            a.c_dtype = f32 ? MOE_DTYPE_F32 : MOE_DTYPE_BF16;
            a.m = m, a.n = n, a.k = k, a.block_n = configs[w][0], a.cluster_m = configs[w][1];
            char what[64];
            snprintf(what, sizeof what, "%s out, block_n %d cluster_m %d", f32 ? "f32" : "bf16", a.block_n, a.cluster_m);
            const size_t bytes = (size_t)(m * ldc) * (f32 ? 4 : 2);
            dense_run(what, bf16_launch_fn, &a, d_out, h_out, bytes, f32, ref, rows, nrows, m, n, ldc,
                      f32 ? 1e-4 : 5e-3, false);
            if (w == 0)
                dense_run(what, bf16_launch_fn, &a, d_out, h_out, bytes, f32, ref, rows, nrows, m, n, ldc,
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

/* The refusals: each row changes one argument of a valid call (256 x 256 x 1040; FP8 scale rows of
 * kb = 9 k-blocks, so lds 9 takes the scale ring) and names the status and the word the message must
 * hold. dense_refusals_host runs them without a device (CI: the checks come before any device
 * call; block_n is forced so that no row needs the device's SM count); on the device,
 * refusal_cases also checks that the poisoned output stays untouched. */
enum { REFUSE_M = 256, REFUSE_N = 256, REFUSE_K = 1040, REFUSE_KB = 9, REFUSE_LD = 1056 };

typedef struct {
    const char *what;
    bool fp8;
    void (*change)(void *args);
    moe_status want;
    const char *names;
} dense_refusal;

static void fp8_tensor_scales_2(void *a) { ((moe__hopper_gemm_fp8_args *)a)->tensor_scales = 2; }
static void fp8_block_n_160(void *a) { ((moe__hopper_gemm_fp8_args *)a)->block_n = 160; }
static void fp8_cluster_3(void *a) { ((moe__hopper_gemm_fp8_args *)a)->cluster_m = 3; }
static void fp8_cluster_2(void *a) { ((moe__hopper_gemm_fp8_args *)a)->cluster_m = 2; }
static void fp8_lds_a_short(void *a) { ((moe__hopper_gemm_fp8_args *)a)->lds_a = REFUSE_KB - 1; }
static void fp8_lda_odd(void *a) { ((moe__hopper_gemm_fp8_args *)a)->lda = 1048; }
static void fp8_b_scales_null(void *a) { ((moe__hopper_gemm_fp8_args *)a)->b_scales = NULL; }
static void fp8_k_0(void *a) { ((moe__hopper_gemm_fp8_args *)a)->k = 0; }
static void bf16_block_n_192(void *a) { ((moe__hopper_gemm_args *)a)->block_n = 192; }
static void bf16_c_f16(void *a) { ((moe__hopper_gemm_args *)a)->c_dtype = MOE_DTYPE_F16; }
static void bf16_ldc_short(void *a) { ((moe__hopper_gemm_args *)a)->ldc = REFUSE_N - 1; }
static void bf16_cluster_3(void *a) { ((moe__hopper_gemm_args *)a)->cluster_m = 3; }
static void bf16_cluster_2_narrow(void *a) {
    ((moe__hopper_gemm_args *)a)->cluster_m = 2;
    ((moe__hopper_gemm_args *)a)->block_n = 128;
}
static void bf16_lda_odd(void *a) { ((moe__hopper_gemm_args *)a)->lda = 1044; }

static const dense_refusal REFUSALS[] = {
    {"fp8 tensor_scales 2", true, fp8_tensor_scales_2, MOE_STATUS_INVALID_ARGUMENT, "tensor_scales"},
    {"fp8 block_n 160", true, fp8_block_n_160, MOE_STATUS_INVALID_ARGUMENT, "block_n"},
    {"fp8 cluster_m 3", true, fp8_cluster_3, MOE_STATUS_INVALID_ARGUMENT, "cluster_m"},
    /* lds 9: the scales cannot come by TMA, and the ring is per CTA */
    {"fp8 cluster_m 2 on the scale ring", true, fp8_cluster_2, MOE_STATUS_INVALID_ARGUMENT, "cluster_m"},
    {"fp8 lds_a below the k-blocks", true, fp8_lds_a_short, MOE_STATUS_INVALID_ARGUMENT, "lds_a"},
    {"fp8 lda not a multiple of 16", true, fp8_lda_odd, MOE_STATUS_INVALID_ARGUMENT, "lda"},
    {"fp8 b_scales NULL", true, fp8_b_scales_null, MOE_STATUS_NULL_POINTER, "b_scales"},
    {"fp8 k 0", true, fp8_k_0, MOE_STATUS_INVALID_ARGUMENT, "m, n, k"},
    {"bf16 block_n 192", false, bf16_block_n_192, MOE_STATUS_INVALID_ARGUMENT, "block_n"},
    {"bf16 c_dtype f16", false, bf16_c_f16, MOE_STATUS_DTYPE_MISMATCH, "c_dtype"},
    {"bf16 ldc below n", false, bf16_ldc_short, MOE_STATUS_INVALID_ARGUMENT, "ldc"},
    {"bf16 cluster_m 3", false, bf16_cluster_3, MOE_STATUS_INVALID_ARGUMENT, "cluster_m"},
    {"bf16 cluster_m 2 on 128-wide tiles", false, bf16_cluster_2_narrow, MOE_STATUS_INVALID_ARGUMENT, "cluster_m"},
    {"bf16 lda not a multiple of 8", false, bf16_lda_odd, MOE_STATUS_INVALID_ARGUMENT, "lda"},
};
enum { N_REFUSALS = sizeof REFUSALS / sizeof REFUSALS[0] };

/* A valid call on the given buffers (codes in a / b; scales in s; the output in c). */
static moe__hopper_gemm_fp8_args fp8_valid(void *a, void *b, float *s, void *c) {
    moe__hopper_gemm_fp8_args ok;
    memset(&ok, 0, sizeof ok);
    ok.a = a, ok.lda = REFUSE_LD, ok.a_scales = s, ok.lds_a = REFUSE_KB;
    ok.b = b, ok.ldb = REFUSE_LD, ok.b_scales = s, ok.lds_b = REFUSE_KB;
    ok.c = c, ok.ldc = REFUSE_N, ok.m = REFUSE_M, ok.n = REFUSE_N, ok.k = REFUSE_K, ok.block_n = 128;
    return ok;
}

static moe__hopper_gemm_args bf16_valid(void *a, void *b, void *c) {
    moe__hopper_gemm_args ok;
    memset(&ok, 0, sizeof ok);
    ok.a = a, ok.lda = REFUSE_LD, ok.b = b, ok.ldb = REFUSE_LD, ok.c = c, ok.ldc = REFUSE_N;
    ok.c_dtype = MOE_DTYPE_BF16, ok.m = REFUSE_M, ok.n = REFUSE_N, ok.k = REFUSE_K, ok.block_n = 256;
    return ok;
}

/* Row r applied to a valid call: its status, and the message in why. */
static moe_status refuse(const dense_refusal *r, void *a, void *b, float *s, void *c, char *why, size_t why_len) {
    why[0] = 0;
    if (r->fp8) {
        moe__hopper_gemm_fp8_args args = fp8_valid(a, b, s, c);
        r->change(&args);
        return fp8_launch_fn(&args, why, why_len);
    }
    moe__hopper_gemm_args args = bf16_valid(a, b, c);
    r->change(&args);
    return bf16_launch_fn(&args, why, why_len);
}

int dense_refusals_host(void) {
    static unsigned char buf[4][64] __attribute__((aligned(16))); /* never read: every row is refused first */
    int failed = 0;
    for (int i = 0; i < N_REFUSALS; i++) {
        char why[256];
        const moe_status st = refuse(&REFUSALS[i], buf[0], buf[1], (float *)buf[2], buf[3], why, sizeof why);
        const bool ok = st == REFUSALS[i].want && strstr(why, REFUSALS[i].names) != NULL;
        if (!ok) failed++;
        if (!ok)
            printf("FAIL dense refusal %s: got %s (\"%s\"), expected %s naming %s\n", REFUSALS[i].what,
                   moe_status_string(st), why, moe_status_string(REFUSALS[i].want), REFUSALS[i].names);
    }
    char why[128] = "";
    if (moe__hopper_gemm_fp8(NULL, NULL, why, sizeof why) != MOE_STATUS_NULL_POINTER || !strstr(why, "args")) {
        printf("FAIL dense refusal fp8 args NULL: \"%s\"\n", why);
        failed++;
    }
    if (moe__hopper_gemm_dense(NULL, NULL, why, sizeof why) != MOE_STATUS_NULL_POINTER || !strstr(why, "args")) {
        printf("FAIL dense refusal bf16 args NULL: \"%s\"\n", why);
        failed++;
    }
    printf("%s the dense engine's refusals on the host: %d checks, %d failed\n", failed ? "FAIL" : "ok  ",
           N_REFUSALS + 2, failed);
    return failed;
}

/* On the device: each refusal returns its status and names its argument, launches nothing (the
 * poisoned output stays so) and leaves no CUDA error. */
static void refusal_cases(void) {
    const char *name = "dense refusals";
    if (!selected(name)) return;
    case_failures = 0;
    void *d_a, *d_b, *d_s, *d_out;
    const size_t out_bytes = (size_t)(REFUSE_M * REFUSE_N) * 4;
    CUDA_OK(cudaMalloc(&d_a, (size_t)(REFUSE_M * REFUSE_LD) * 2));
    CUDA_OK(cudaMalloc(&d_b, (size_t)(REFUSE_N * REFUSE_LD) * 2));
    CUDA_OK(cudaMalloc(&d_s, (size_t)(REFUSE_M * 12) * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, out_bytes));
    CUDA_OK(cudaMemset(d_a, 0, (size_t)(REFUSE_M * REFUSE_LD) * 2));
    CUDA_OK(cudaMemset(d_b, 0, (size_t)(REFUSE_N * REFUSE_LD) * 2));
    CUDA_OK(cudaMemset(d_s, 0, (size_t)(REFUSE_M * 12) * sizeof(float)));
    unsigned char *h = xmalloc(out_bytes);
    for (int i = 0; i < N_REFUSALS; i++) {
        const dense_refusal *r = &REFUSALS[i];
        char why[256];
        CUDA_OK(cudaMemset(d_out, 0xFF, out_bytes));
        const moe_status st = refuse(r, d_a, d_b, (float *)d_s, d_out, why, sizeof why);
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(cudaGetLastError());
        CHECK(st == r->want && strstr(why, r->names) != NULL, "%s: got %s (\"%s\"), expected %s naming %s", r->what,
              moe_status_string(st), why, moe_status_string(r->want), r->names);
        CUDA_OK(cudaMemcpy(h, d_out, out_bytes, cudaMemcpyDeviceToHost));
        size_t changed = 0;
        for (size_t b = 0; b < out_bytes; b++) changed += h[b] != 0xFF;
        CHECK(changed == 0, "%s: refused, yet %zu output bytes changed", r->what, changed);
    }
    free(h);
    CUDA_OK(cudaFree(d_a));
    CUDA_OK(cudaFree(d_b));
    CUDA_OK(cudaFree(d_s));
    CUDA_OK(cudaFree(d_out));
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s %s: %d bad arguments refused with their status and name, nothing launched\n",
           case_failures ? "FAIL" : "ok  ", name, N_REFUSALS);
}

void dense_engine_cases(bool quick) {
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        if (quick && !SHAPES[i].quick) continue;
        bf16_shape_case(&SHAPES[i]);
        fp8_shape_case(&SHAPES[i]);
    }
    refusal_cases();
}
