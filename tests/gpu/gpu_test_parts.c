/* test_gpu_forward (gpu_test.h): parts of the forward checked on their own, outside a model case:
 * the device dispatch plan on crafted ids, the FP8 activation quantiser bit for bit, what the FP8
 * path refuses, and moe__cuda_gemm_select's rule. */
#include "gpu_test.h"

void plan_cases(bool quick) {
    static const struct {
        int64_t T, k, E, block;
    } cases[] = {{0, 2, 8, 64},   {1, 1, 1, 64},     {1, 8, 256, 64},   {3, 4, 4, 1},     {129, 2, 8, 7},
                 {1000, 8, 128, 64}, {4096, 8, 256, 128}, {20000, 6, 64, 64}, {65536, 8, 512, 64}};
    const int n = quick ? 5 : (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < n; c++) {
        const int64_t T = cases[c].T, k = cases[c].k, E = cases[c].E, block = cases[c].block;
        for (int pattern = 0; pattern < 3; pattern++) {
            char name[128];
            snprintf(name, sizeof name, "plan T=%lld k=%lld E=%lld block=%lld %s", (long long)T, (long long)k,
                     (long long)E, (long long)block, pattern == 0 ? "random" : pattern == 1 ? "one-expert" : "few-experts");
            if (!selected(name)) continue;
            case_failures = 0;
            int32_t *ids = xmalloc((size_t)(T * k) * 4 + 4);
            for (int64_t t = 0; t < T; t++)
                for (int64_t j = 0; j < k; j++) {
                    int64_t pool = pattern == 2 ? (E / 4 > k ? E / 4 : k) : E;
                    /* distinctness is not required by the plan: duplicates are legal rows */
                    ids[t * k + j] = pattern == 1 ? (int32_t)j : (int32_t)(rng_next() % (uint64_t)pool);
                }
            int32_t *d_ids;
            CUDA_OK(cudaMalloc((void **)&d_ids, (size_t)(T * k) * 4 + 4));
            CUDA_OK(cudaMemcpy(d_ids, ids, (size_t)(T * k) * 4, cudaMemcpyHostToDevice));
            check_plan(d_ids, T, k, E, block, 0, "plan");
            check_plan(d_ids, T, k, E, block, T, "plan+shared");
            CUDA_OK(cudaFree(d_ids));
            free(ids);
            if (case_failures == 0) cases_passed++;
            else cases_failed++;
            printf("%s %s\n", case_failures ? "FAIL" : "ok  ", name);
        }
        /* About one id in eight outside [0, E) (-1 or E): left out of the device plan. */
        char name[128];
        snprintf(name, sizeof name, "plan T=%lld k=%lld E=%lld block=%lld left-out ids", (long long)T, (long long)k,
                 (long long)E, (long long)block);
        if (!selected(name) || T == 0) continue;
        case_failures = 0;
        int32_t *ids = xmalloc((size_t)(T * k) * 4 + 4);
        for (int64_t i = 0; i < T * k; i++) {
            const uint64_t u = rng_next();
            ids[i] = u % 8 == 0 ? (u % 16 == 0 ? -1 : (int32_t)E) : (int32_t)(u / 8 % (uint64_t)E);
        }
        check_plan_left_out(ids, T, k, E, block);
        free(ids);
        if (case_failures == 0) cases_passed++;
        else cases_failed++;
        printf("%s %s\n", case_failures ? "FAIL" : "ok  ", name);
    }
}

/* ---- FP8 (w8a8): the activation quantiser, the refusals ----------------------------------- */

/* An fp32 value whose quotient by s rounds, in fp32, onto an e4m3 rounding midpoint m (or
 * lands next to it): x = m * s rounded, then nudged by -2..2 ulps. Most such x have x / s !=
 * m exactly while fl32(x / s) == m: a quantiser that rounds the fp32 quotient again (double
 * rounding) then picks the wrong neighbour half of the time; moe_quantize forms the quotient in
 * double and never does. Magnitudes stay below amax. */
static float midpoint_trap(float s, float amax) {
    double m;
    if (rng_next() % 4 == 0) m = (double)(2 * (int)(rng_next() % 8) + 1) * 0x1p-10; /* subnormal midpoints */
    else m = ldexp(1.0 + ((double)(rng_next() % 8) + 0.5) / 8.0, (int)(rng_next() % 14) - 6);
    float x = (float)(m * s);
    for (int d = (int)(rng_next() % 5) - 2; d != 0; d += d > 0 ? -1 : 1) x = nextafterf(x, d > 0 ? INFINITY : 0.0f);
    if (x > amax) x = amax;
    return rng_next() & 1 ? -x : x;
}

/* Fills x [rows, cols] (fp32 values exact in `dtype`): pattern 0 uniform at a magnitude per
 * (row, 128-group), with zeros, -0, an all-zero group, +-inf and NaN sprinkled in; pattern 1
 * (f32 only) the midpoint traps against each group's scale (fp8-row128) or the matrix's
 * (fp8-tensor), the group's (matrix's) amax placed in its first element. */
static void fp8_fill(float *x, int64_t rows, int64_t cols, moe_dtype dtype, moe_format format, int pattern) {
    const uint64_t salt = rng_next();
    const float tensor_amax = rng_uniform(1.0f, 2.0f) * ldexpf(1.0f, (int)(rng_next() % 20) - 10);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < cols; c0 += 128) {
            const int64_t c1 = c0 + 128 < cols ? c0 + 128 : cols;
            const float amp = format == MOE_FORMAT_FP8_TENSOR ? tensor_amax
                                                              : rng_uniform(1.0f, 2.0f) * block_factor(salt, r, c0, 0, 0);
            for (int64_t c = c0; c < c1; c++) {
                float v = rng_uniform(-amp, amp);
                if (pattern == 1) v = c == c0 && (format != MOE_FORMAT_FP8_TENSOR || r == 0) ? amp
                                                                                         : midpoint_trap(amp / 448.0f, amp);
                x[r * cols + c] = v;
            }
        }
    if (pattern == 0) {
        for (int64_t i = 0; i < rows * cols; i += 37) x[i] = (i / 37) % 2 ? 0.0f : -0.0f;
        if (rows > 1) memset(x + cols, 0, (size_t)(cols < 128 ? cols : 128) * sizeof(float)); /* a zero group */
        if (rows * cols > 300) x[101] = INFINITY, x[202] = -INFINITY, x[299] = NAN;
    }
    for (int64_t i = 0; i < rows * cols; i++) /* the values the device reads */
        x[i] = dtype == MOE_DTYPE_BF16 ? moe_bf16_to_float(moe_float_to_bf16(x[i]))
               : dtype == MOE_DTYPE_F16 ? moe_f16_to_float(moe_float_to_f16(x[i])) : x[i];
}

/* The device activation quantiser (moe__cuda_fp8_quantize, the code moe_forward runs on x and
 * A2) against moe_quantize: codes and scales equal bit for bit. Before it, the encoder's host
 * build against moe_quantize on many trap groups (so a failure can be told apart: the rule, or
 * the device). */
void fp8_quantizer_cases(bool quick) {
    if (!selected("fp8 quantiser")) return;
    case_failures = 0;
    int64_t n = 0, bad = 0, traps = 0;
    float x[128], scale;
    uint8_t codes[128];
    for (int it = 0; it < (quick ? 2000 : 20000); it++) {
        const float amp = rng_uniform(1.0f, 2.0f) * ldexpf(1.0f, (int)(rng_next() % 40) - 20), s = amp / 448.0f;
        x[0] = amp;
        for (int i = 1; i < 128; i++) {
            x[i] = midpoint_trap(s, amp);
            traps += (double)(x[i] / s) != (double)x[i] / s;
        }
        MOE_OK(NULL, moe_quantize(MOE_FORMAT_FP8_ROW128, x, 1, 128, 128, codes, &scale, NULL));
        for (int i = 0; i < 128; i++, n++)
            if (moe__cuda_fp8_encode_host(x[i], scale) != codes[i] && bad++ == 0)
                printf("    host encoder: x = %a, scale = %a: %02x, moe_quantize %02x\n", x[i], scale,
                       moe__cuda_fp8_encode_host(x[i], scale), codes[i]);
    }
    CHECK(bad == 0, "the encoder's host build differs from moe_quantize on %lld of %lld codes", (long long)bad,
          (long long)n);
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s fp8 quantiser: encoder (host build) on %lld trap codes (%lld quotients inexact in fp32)\n",
           case_failures ? "FAIL" : "ok  ", (long long)n, (long long)traps);

    static const struct {
        int64_t rows, cols, pad;
    } shapes[] = {{1, 16, 0}, {3, 96, 8}, {5, 200, 0}, {64, 7168, 24},
                  {7, 130, 3},      /* columns and ld not whole 4-element words: row128's scalar form */
                  {2200, 1040, 16}, /* row128's 16-wide form: a 16-column last group, items across rows, padded ld */
                  {129, 2880, 0}, {4096, 2048, 0},
                  {12000, 1400, 8}}; /* the row128 launch's 4 groups a warp with a partial last quad and group */
    /* fp8-row128 twice: its default (the vector form where the rows are whole 4-element words)
     * and the scalar form forced by MOEFUSE_FP8_QUANT=scalar; fp8-tensor has one form. */
    const moe_format formats[] = {MOE_FORMAT_FP8_ROW128, MOE_FORMAT_FP8_ROW128, MOE_FORMAT_FP8_TENSOR};
    const char *forms[] = {NULL, "scalar", NULL};
    const saved_env quant = env_save("MOEFUSE_FP8_QUANT");
    const moe_dtype dtypes[] = {MOE_DTYPE_F32, MOE_DTYPE_BF16, MOE_DTYPE_F16};
    const int nshapes = quick ? 6 : (int)(sizeof shapes / sizeof shapes[0]);
    for (int f = 0; f < 3; f++)
        for (int di = 0; di < 3; di++)
            for (int si = 0; si < nshapes; si++)
                for (int pattern = 0; pattern < (dtypes[di] == MOE_DTYPE_F32 ? 2 : 1); pattern++) {
                    const int64_t rows = shapes[si].rows, cols = shapes[si].cols, ld = cols + shapes[si].pad;
                    const moe_format format = formats[f];
                    if (forms[f]) setenv("MOEFUSE_FP8_QUANT", forms[f], 1);
                    else unsetenv("MOEFUSE_FP8_QUANT");
                    const moe_dtype dtype = dtypes[di];
                    case_failures = 0;
                    moe_format_layout lay;
                    MOE_OK(NULL, moe_format_layout_get(format, rows, cols, &lay));
                    const int64_t nscales = lay.scale_rows * lay.scale_cols, esize = moe_dtype_bits(dtype) / 8;
                    float *xf = xmalloc((size_t)(rows * cols) * 4), *want_scales = xmalloc((size_t)nscales * 4);
                    float *got_scales = xmalloc((size_t)nscales * 4);
                    uint8_t *want = xmalloc((size_t)(rows * cols)), *got = xmalloc((size_t)(rows * cols));
                    uint8_t *xs = xmalloc((size_t)(rows * ld * esize));
                    fp8_fill(xf, rows, cols, dtype, format, pattern);
                    memset(xs, 0x55, (size_t)(rows * ld * esize)); /* row padding: never read */
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t c = 0; c < cols; c++) {
                            const float v = xf[r * cols + c];
                            const int64_t i = r * ld + c;
                            if (dtype == MOE_DTYPE_F32) memcpy(xs + i * 4, &v, 4);
                            else {
                                uint16_t h = dtype == MOE_DTYPE_BF16 ? moe_float_to_bf16(v) : moe_float_to_f16(v);
                                memcpy(xs + i * 2, &h, 2);
                            }
                        }
                    MOE_OK(NULL, moe_quantize(format, xf, rows, cols, cols, want, want_scales, NULL));
                    void *d_x, *d_codes, *d_scales, *d_amax;
                    CUDA_OK(cudaMalloc(&d_x, (size_t)(rows * ld * esize)));
                    CUDA_OK(cudaMalloc(&d_codes, (size_t)(rows * cols)));
                    CUDA_OK(cudaMalloc(&d_scales, (size_t)nscales * 4));
                    CUDA_OK(cudaMalloc(&d_amax, 4));
                    CUDA_OK(cudaMemcpy(d_x, xs, (size_t)(rows * ld * esize), cudaMemcpyHostToDevice));
                    CUDA_OK(cudaMemset(d_codes, 0xFF, (size_t)(rows * cols))); /* -NaN: never a wanted code here */
                    CUDA_OK(cudaMemset(d_scales, 0xFF, (size_t)nscales * 4));
                    CUDA_OK(cudaMemset(d_amax, 0x7F, 4)); /* the quantiser must zero it itself */
                    moe_status st = moe__cuda_fp8_quantize(gpu_ctx, format, d_x, dtype, rows, cols, ld, d_codes,
                                                           d_scales, d_amax, stream);
                    CHECK(st == MOE_STATUS_OK, "moe__cuda_fp8_quantize: %s", moe_last_error(gpu_ctx));
                    CUDA_OK(cudaStreamSynchronize(stream));
                    CUDA_OK(cudaMemcpy(got, d_codes, (size_t)(rows * cols), cudaMemcpyDeviceToHost));
                    CUDA_OK(cudaMemcpy(got_scales, d_scales, (size_t)nscales * 4, cudaMemcpyDeviceToHost));
                    int64_t code_bad = 0, scale_bad = 0;
                    for (int64_t i = 0; i < rows * cols; i++)
                        if (got[i] != want[i] && code_bad++ == 0)
                            printf("    code [%lld][%lld]: x = %a: %02x, moe_quantize %02x\n", (long long)(i / cols),
                                   (long long)(i % cols), xf[i], got[i], want[i]);
                    for (int64_t i = 0; i < nscales; i++)
                        if (memcmp(&got_scales[i], &want_scales[i], 4) != 0 && scale_bad++ == 0)
                            printf("    scale %lld: %a, moe_quantize %a\n", (long long)i, got_scales[i], want_scales[i]);
                    CHECK(code_bad == 0, "%lld of %lld codes differ", (long long)code_bad, (long long)(rows * cols));
                    CHECK(scale_bad == 0, "%lld of %lld scales differ", (long long)scale_bad, (long long)nscales);
                    CUDA_OK(cudaFree(d_x));
                    CUDA_OK(cudaFree(d_codes));
                    CUDA_OK(cudaFree(d_scales));
                    CUDA_OK(cudaFree(d_amax));
                    free(xf), free(want_scales), free(got_scales), free(want), free(got), free(xs);
                    if (case_failures == 0) cases_passed++;
                    else cases_failed++;
                    printf("%s fp8 quantiser %s%s %s [%lld x %lld, ld %lld] %s\n", case_failures ? "FAIL" : "ok  ",
                           moe_format_name(format), forms[f] ? " (scalar)" : "", moe_dtype_name(dtype),
                           (long long)rows, (long long)cols, (long long)ld,
                           pattern ? "midpoint traps" : "random + zeros/inf/NaN");
                }
    env_restore(&quant);
}

/* What the FP8 path refuses, by name, and what moe_forward_config says of it. */
void fp8_refusal_cases(void) {
    if (!selected("fp8 refusals")) return;
    case_failures = 0;
    moe_layer_spec s;
    moe_layer_spec_init(&s, 4, 128, 64, 2);
    model m;
    /* MXFP8 weights: not on the cuda backend. */
    model_init(&m, "fp8-refusal", &s, MOE_FORMAT_MXFP8_TE, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
    float *gu = xmalloc((size_t)(4 * 128 * 128) * 4), *dn = xmalloc((size_t)(4 * 128 * 64) * 4);
    fill_uniform(gu, 4 * 128 * 128, 0.1f);
    fill_uniform(dn, 4 * 128 * 64, 0.1f);
    moe_weights_desc d;
    memset(&d, 0, sizeof d);
    d.layout = MOE_LAYOUT_CONCAT;
    d.gate_up = moe_tensor_3d(gu, MOE_DTYPE_F32, 4, 128, 128);
    d.down = moe_tensor_3d(dn, MOE_DTYPE_F32, 4, 128, 64);
    moe_weights_t *w = NULL;
    moe_status st = moe_weights_create(gpu_ctx, &s, &d, MOE_FORMAT_MXFP8_TE, &w);
    CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(gpu_ctx), "mxfp8-te"),
          "mxfp8-te weights: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
    moe_weights_free(w);
    /* FP8 weights with H not a multiple of 16. */
    moe_layer_spec s2;
    moe_layer_spec_init(&s2, 4, 120, 64, 2);
    d.gate_up = moe_tensor_3d(gu, MOE_DTYPE_F32, 4, 128, 120);
    d.down = moe_tensor_3d(dn, MOE_DTYPE_F32, 4, 120, 64);
    w = NULL;
    st = moe_weights_create(gpu_ctx, &s2, &d, MOE_FORMAT_FP8_BLOCK128, &w);
    CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(gpu_ctx), "multiples of 16"),
          "fp8 weights with H = 120: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
    moe_weights_free(w);
    free(gu), free(dn);

    /* The mixed pairs the CPU runs: bf16 weights with fp8 activations, fp8 weights with f32. */
    const moe_format wf[] = {MOE_FORMAT_BF16, MOE_FORMAT_FP8_BLOCK128};
    const moe_format bad_act[] = {MOE_FORMAT_FP8_ROW128, MOE_FORMAT_F32};
    const moe_format good_act[] = {MOE_FORMAT_F32, MOE_FORMAT_FP8_ROW128};
    for (int i = 0; i < 2; i++) {
        model_init(&m, "fp8-refusal", &s, wf[i], MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = good_act[i];
        model_build(&m);
        device_buffers b;
        device_alloc(&m, &b, 8, R_IDS);
        inputs in = {0};
        inputs_draw(&m, &in, 8, R_IDS);
        device_upload(&m, &b, &in);
        b.args.act_format = bad_act[i];
        st = moe_forward(gpu_ctx, m.w_gpu, &b.args);
        CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(gpu_ctx), "act_format"),
              "%s weights with act_format %s: %s: %s", moe_format_name(wf[i]), moe_format_name(bad_act[i]),
              moe_status_string(st), moe_last_error(gpu_ctx));
        char line[MOE_FORWARD_CONFIG_MAX];
        MOE_OK(gpu_ctx, moe_forward_config(gpu_ctx, m.w_gpu, 8, bad_act[i], line, sizeof line));
        CHECK(strstr(line, "UNSUPPORTED") != NULL, "config of an unsupported pair: %s", line);
        MOE_OK(gpu_ctx, moe_forward_config(gpu_ctx, m.w_gpu, 8, good_act[i], line, sizeof line));
        CHECK(strstr(line, "UNSUPPORTED") == NULL, "config of a supported pair: %s", line);
        if (i == 1) {
            CHECK(strstr(line, "fp8 mma.sync") && strstr(line, "gemm=v1"), "config of the fp8 path: %s", line);
            printf("    %s\n", line);
        }
        inputs_free(&in);
        device_free(&b);
        model_free(&m);
    }
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s fp8 refusals: mxfp8 weights, H %% 16, bf16 weights + fp8 acts, fp8 weights + f32 acts\n",
           case_failures ? "FAIL" : "ok  ");
}

/* moe__cuda_gemm_select: the documented rule (cuda_backend.h), automatic and forced. */
void selection_cases(void) {
    case_failures = 0;
    const int V1 = MOE__CUDA_GEMM_V1, HOP = MOE__CUDA_GEMM_HOPPER;
    unsetenv("MOEFUSE_GEMM");
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_BF16) == HOP, "qwen3 T=16384 auto");
    CHECK(moe__cuda_gemm_select(512 * 8, 128, 2048, 768, MOE_DTYPE_BF16) == HOP, "qwen3 T=512 auto (32 rows/expert)");
    CHECK(moe__cuda_gemm_select(16 * 128, 128, 2048, 768, MOE_DTYPE_BF16) == V1, "16 rows/expert auto (the swap range)");
    CHECK(moe__cuda_gemm_select(128 * 8, 8, 4096, 14336, MOE_DTYPE_BF16) == HOP, "128 rows/expert auto");
    CHECK(moe__cuda_gemm_select(16384 * 4, 128, 2880, 2880, MOE_DTYPE_BF16) == HOP, "gpt-oss (2880 = 45 x 64)");
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_F16) == V1, "f16 stays on v1");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_BF16) == V1, "I = 96 is not a multiple of 64");
    CHECK(moe__cuda_gemm_select(16384, 1, 128, 64, MOE_DTYPE_BF16) == V1, "E*I = 64 < 256");
    setenv("MOEFUSE_GEMM", "hopper", 1);
    CHECK(moe__cuda_gemm_select(1, 128, 2048, 768, MOE_DTYPE_BF16) == HOP, "forced hopper at T*k = 1");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_BF16) == V1, "forced hopper where it cannot run");
    setenv("MOEFUSE_GEMM", "v1", 1);
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_BF16) == V1, "forced v1");
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == V1, "forced v1, fp8");
    unsetenv("MOEFUSE_GEMM");
    /* FP8 (e4m3) weights: the Hopper FP8 kernel takes K and N tails, so H, I >= 128 and % 16.
     * Automatic: Hopper at every T (v1's FP8 decode kernel measured slower: forward.cu). */
    CHECK(moe__cuda_gemm_select(16384 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 qwen3 T=16384 auto");
    CHECK(moe__cuda_gemm_select(512 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 qwen3 T=512 auto");
    CHECK(moe__cuda_gemm_select(1 * 8, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 qwen3 T=1 auto (every T)");
    CHECK(moe__cuda_gemm_select(64 * 2, 8, 4096, 14336, MOE_DTYPE_E4M3) == HOP, "fp8 mixtral T=64 auto (every T)");
    CHECK(moe__cuda_gemm_select(INT64_MAX, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 at INT64_MAX rows (no overflow)");
    CHECK(moe__cuda_gemm_select(16384 * 4, 128, 2880, 2880, MOE_DTYPE_E4M3) == HOP, "fp8 gpt-oss (2880 = 22.5 x 128)");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 320, 208, MOE_DTYPE_E4M3) == HOP, "fp8 H = 320, I = 208 (tails)");
    CHECK(moe__cuda_gemm_select(16384 * 8, 16, 256, 96, MOE_DTYPE_E4M3) == V1, "fp8 I = 96 < 128");
    setenv("MOEFUSE_GEMM", "hopper", 1);
    CHECK(moe__cuda_gemm_select(1, 128, 2048, 768, MOE_DTYPE_E4M3) == HOP, "fp8 forced hopper at T*k = 1");
    unsetenv("MOEFUSE_GEMM");
    /* The pure rules under this wrapper (moe__gemm_select, the decode and gather rules) are checked
     * on the CPU by tests/test_gemm_select.c. */
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s gemm selection rule\n", case_failures ? "FAIL" : "ok  ");
}
