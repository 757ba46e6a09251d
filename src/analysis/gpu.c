/* GPU ceilings: a small built-in table, or a JSON file. */
#include "analysis_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* H200: the figures measured on the project's machine (shared/PERF.md): cuBLAS bf16 8192^3,
 * torch._scaled_mm fp8 8192^3, streaming read of a 2 GiB tensor. H100 SXM and B200: vendor
 * datasheet figures (dense, no sparsity), not measured here: real kernels reach less.
 *
 * The two H200 terms for small GEMMs, from tests/gpu/logs/2026-12-02-measure-h200 (roofline
 * --measure, cuBLAS / cuBLASLt, 14 runs):
 *  - launch_s 5.5 us: the fixed cost of one GEMM call, as timed there (one call between two
 *    events). It is the 128x128x128 probe's measured time: 5.33-5.74 us over the 28 probe
 *    timings (14 runs x bf16/fp8), median 5.5. Measured directly, not fitted to the shapes. The
 *    probe's own math (0.4-0.7 us at the per-SM peak) is left in: a one-tile GEMM is latency-
 *    bound, not at the peak. (Was 2.5 us: the median of measured minus math over the lab's one-
 *    and two-wave shapes of lab/results/2026-12-02-h200*, which the probe contradicts.)
 *  - epilogue_exposed 1: each wave's output tiles are stored after its mainloop at the full
 *    read bandwidth shared by the wave, not overlapped. Not fitted: the physical worst case;
 *    the data agree (the K = 128..512 shapes, whose time is mostly the output store: e.g.
 *    4096x256x7168 bf16 measured 39.5 us, 26.1 us with launch 5.5 and no store term, 40.6 with it).
 *
 * The sustained rates of moefuse's kernel families (the routed experts' grouped launches and the
 * Hopper dense engine, moe_dense_launch_time), each the kernel's speed relative to cuBLAS /
 * cuBLASLt timed in the same process on the same GPU, times the library peak above (so that
 * they share its clock and timing conventions). All three were measured before, and apart from,
 * the roofline --measure runs they are checked on (docs/roofline_model.md):
 *  - hopper bf16 724 TFLOP/s: lab/results/2026-12-02-h200/lab_engine.log (commit 334a62e), 8192^3
 *    on the dense engine, whose 128x256x64 persistent mainloop the grouped kernel shares: 1.6900 ms
 *    vs cuBLAS 1.6288 ms -> 751 x 0.9638.
 *  - hopper fp8 834 TFLOP/s: lab/results/2026-12-02-h200-fp8/lab_fp8.json (commit a28ef12), 4096^3
 *    on the dense FP8 engine (fp8engine), the 128x128x128 mainloop of the grouped FP8 kernel:
 *    0.166354 ms vs cuBLASLt 0.103954 ms -> 1335 x 0.6249. Still the grouped kernel's; the dense
 *    engine itself has run faster since session 17 took its scales by TMA (4096^3 0.701x, 8192^3
 *    0.804x cuBLASLt: bench/results/2026-12-04-h200-session17/callS5), so moe_dense_launch_time's
 *    FP8 times are now 14-19% long for the dense engine (949 and 996 TFLOP/s there against 834).
 *    The grouped prefill kernel itself has taken 128x192 tiles since session 18 (3-12% faster per
 *    GEMM in the lab: bench/results/2026-12-04-h200-session18/callS1/out/glab); not re-fitted yet.
 *  - v1 224 TFLOP/s: bench/results/2026-12-02-h200-cuda-v1-vs-hopper.json (commit 9d016dd), the
 *    mixtral-8x7b T = 16384 layer forward on the v1 path, 235.45 TFLOP/s against that run's
 *    cuBLAS 8192^3 ceiling of 788.5 -> 751 x 0.2986. A whole layer (routing, permute and combine
 *    included), so a lower bound of the GEMMs' rate; v1's 64x128 mainloop is unchanged since.
 *    v1's FP8 kernel takes the same rate: ptxas runs its e4m3 MMAs as f16 ones (forward.cu).
 *
 * stream_power_share 0.5 (session 12): the power bound of moefuse's kernel families (roofline.c,
 * power_bound). Their bf16 launches that keep both the weight stream and the MMAs busy (one or two
 * row blocks per expert at T = 4096: intensity near the ridge) ran 1.17-1.29x the max of the two
 * times in every --measure run, with the SM clock at 1.32-1.62 GHz and DRAM 74-81% busy under ncu
 * (session 7, call H2): the board at its power limit. Fitted, not measured: of 0.3-0.7 in steps of
 * 0.1 over the grouped launches of the runs in tests/gpu/logs (0.4-0.7 put all 28 in +-25% in each),
 * 0.5 has the smallest rms log ratio (0.080, 0.136 without the bound; run 13's power_share_sweep.txt):
 * calibration on that data, validated only by later runs. cuBLAS shapes of
 * the same intensity do not show it (4096 x 7168 x 576 runs faster than its 8192^3 rate), so the
 * library model keeps the plain roofline. */
static const moe_gpu_spec builtin[] = {
    {"h200", "measured on the project's H200 (PERF.md, lab/results, tests/gpu/logs/2026-12-02-measure-h200)",
     751e12, 1335e12, 4.19e12, 132, 1, 60e6, 5.5e-6, 1.0, 724e12, 834e12, 224e12, 0.5},
    {"h100", "H100 SXM datasheet (dense peaks; not measured)", 989.4e12, 1978.9e12, 3.35e12, 132, 1, 50e6, 0.0, 0.0,
     0.0, 0.0, 0.0, 0.0},
    {"b200", "B200 datasheet (dense peaks; not measured; approximate)", 2250e12, 4500e12, 8.0e12, 148, 1, 126e6,
     0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
};
#define BUILTIN_COUNT ((int)(sizeof builtin / sizeof builtin[0]))

int moe_gpu_builtin_count(void) { return BUILTIN_COUNT; }
const char *moe_gpu_builtin_name(int index) { return index >= 0 && index < BUILTIN_COUNT ? builtin[index].name : NULL; }

moe_status moe_gpu_builtin(moe_context_t *ctx, const char *name, moe_gpu_spec *out) {
    moe__clear_error(ctx);
    if (!name || !out)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_gpu_builtin: %s is NULL", !name ? "name" : "out");
    for (int i = 0; i < BUILTIN_COUNT; i++)
        if (!strcasecmp(name, builtin[i].name)) {
            *out = builtin[i];
            return MOE_STATUS_OK;
        }
    return moe__error(ctx, MOE_STATUS_NOT_FOUND, "unknown GPU '%.64s' (built in: h200, h100, b200; or a JSON file)",
                      name);
}

/* A required (or optional, with a default) positive number. */
static moe_status get_number(moe_context_t *ctx, const cJSON *root, const char *key, int required, double dflt,
                             double *out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item) {
        if (required)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "GPU file: key \"%s\" missing (needs bf16_tflops, fp8_tflops, read_tbps, sms)", key);
        *out = dflt;
        return MOE_STATUS_OK;
    }
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
        (required && item->valuedouble <= 0))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "GPU file: \"%s\" must be a %s number", key,
                          required ? "positive" : "non-negative");
    *out = item->valuedouble;
    return MOE_STATUS_OK;
}

moe_status moe__gpu_check(moe_context_t *ctx, const moe_gpu_spec *gpu) {
    if (!(gpu->bf16_flops >= 1 && isfinite(gpu->bf16_flops)) || !(gpu->fp8_flops >= 1 && isfinite(gpu->fp8_flops)) ||
        !(gpu->read_bw >= 1 && isfinite(gpu->read_bw)) || gpu->sms < 1 || gpu->ctas_per_sm < 1 ||
        gpu->ctas_per_sm > 64 || !(gpu->launch_s >= 0 && isfinite(gpu->launch_s)) ||
        !(gpu->l2_bytes >= 0 && isfinite(gpu->l2_bytes)) ||
        !(gpu->epilogue_exposed >= 0 && gpu->epilogue_exposed <= 1) ||
        !(gpu->stream_power_share >= 0 && gpu->stream_power_share <= 1))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "gpu: ceilings must be finite and at least 1 (bf16 %g, fp8 %g FLOP/s, read %g B/s), %lld SMs "
                          ">= 1, %lld CTAs/SM in 1..64, launch_s finite >= 0 (%g), l2_bytes finite >= 0 (%g), "
                          "epilogue_exposed and stream_power_share in 0..1 (%g, %g)",
                          gpu->bf16_flops, gpu->fp8_flops, gpu->read_bw, (long long)gpu->sms,
                          (long long)gpu->ctas_per_sm, gpu->launch_s, gpu->l2_bytes, gpu->epilogue_exposed,
                          gpu->stream_power_share);
    const struct {
        const char *name, *peak_name;
        double rate, peak;
    } rates[] = {{"hopper_bf16_flops", "bf16_flops", gpu->hopper_bf16_flops, gpu->bf16_flops},
                 {"hopper_fp8_flops", "fp8_flops", gpu->hopper_fp8_flops, gpu->fp8_flops},
                 {"v1_flops", "bf16_flops", gpu->v1_flops, gpu->bf16_flops}};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if (!(rates[i].rate >= 0 && rates[i].rate <= rates[i].peak))
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "gpu: %s = %g FLOP/s, expected 0 (the dtype's peak) to %s (%g): a kernel cannot run "
                              "above its dtype's peak",
                              rates[i].name, rates[i].rate, rates[i].peak_name, rates[i].peak);
    return MOE_STATUS_OK;
}

/* The keys of a GPU file (the numbers get_number reads, the texts it may carry). */
static const char *const gpu_keys[] = {"name", "source", "kernels_source", "_comment", "bf16_tflops", "fp8_tflops",
                                       "read_tbps", "sms", "l2_mb", "ctas_per_sm", "launch_us", "epilogue_exposed",
                                       "hopper_bf16_tflops", "hopper_fp8_tflops", "v1_tflops", "stream_power_share"};

/* Unknown (a misspelt "launch_usec" would leave launch_us at 0 unnoticed) or repeated keys. */
static moe_status check_keys(moe_context_t *ctx, const cJSON *root) {
    const size_t n = sizeof gpu_keys / sizeof gpu_keys[0];
    for (const cJSON *a = root->child; a; a = a->next) {
        size_t k = 0;
        while (k < n && strcmp(a->string, gpu_keys[k]) != 0) k++;
        if (k == n) {
            char known[512] = "";
            for (size_t i = 0; i < n; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", gpu_keys[i]);
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "GPU file: unknown key \"%.60s\" (known: %s)",
                              a->string, known);
        }
    }
    const char *repeated = moe__json_repeated_key(root);
    if (repeated) return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "GPU file: key \"%.60s\" appears twice", repeated);
    return MOE_STATUS_OK;
}

moe_status moe_gpu_parse(moe_context_t *ctx, const char *json, size_t len, moe_gpu_spec *out) {
    moe__clear_error(ctx);
    if (!json || !out)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_gpu_parse: %s is NULL", !json ? "json" : "out");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "GPU file: malformed JSON");
    for (size_t at = (size_t)(end - json); at < len; at++)
        if (!moe__json_space(json[at])) {
            cJSON_Delete(root);
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "GPU file: text after the JSON object at byte %zu", at);
        }
    moe_status st = MOE_STATUS_OK;
    moe_gpu_spec g;
    memset(&g, 0, sizeof g);
    double bf16 = 0, fp8 = 0, read = 0, sms = 0, l2 = 0, ctas = 1, launch = 0, exposed = 0;
    double hopper_bf16 = 0, hopper_fp8 = 0, v1 = 0, power_share = 0;
    if (!cJSON_IsObject(root)) {
        st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "GPU file: expected a JSON object");
        goto done;
    }
    if ((st = check_keys(ctx, root)) != MOE_STATUS_OK) goto done;
    if ((st = get_number(ctx, root, "bf16_tflops", 1, 0, &bf16)) || (st = get_number(ctx, root, "fp8_tflops", 1, 0, &fp8)) ||
        (st = get_number(ctx, root, "read_tbps", 1, 0, &read)) || (st = get_number(ctx, root, "sms", 1, 0, &sms)) ||
        (st = get_number(ctx, root, "l2_mb", 0, 0, &l2)) || (st = get_number(ctx, root, "ctas_per_sm", 0, 1, &ctas)) ||
        (st = get_number(ctx, root, "launch_us", 0, 0, &launch)) ||
        (st = get_number(ctx, root, "epilogue_exposed", 0, 0, &exposed)) ||
        (st = get_number(ctx, root, "hopper_bf16_tflops", 0, 0, &hopper_bf16)) ||
        (st = get_number(ctx, root, "hopper_fp8_tflops", 0, 0, &hopper_fp8)) ||
        (st = get_number(ctx, root, "v1_tflops", 0, 0, &v1)) ||
        (st = get_number(ctx, root, "stream_power_share", 0, 0, &power_share)))
        goto done;
    if (exposed > 1 || power_share > 1) {
        st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "GPU file: \"%s\" must be in 0..1, got %g",
                        exposed > 1 ? "epilogue_exposed" : "stream_power_share", exposed > 1 ? exposed : power_share);
        goto done;
    }
    if (sms != floor(sms) || sms > 100000 || ctas != floor(ctas) || ctas < 1 || ctas > 64) {
        st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                        "GPU file: sms (%g) and ctas_per_sm (%g) must be whole numbers (ctas_per_sm 1..64)", sms, ctas);
        goto done;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    snprintf(g.name, sizeof g.name, "%s", cJSON_IsString(name) && name->valuestring ? name->valuestring : "custom");
    snprintf(g.source, sizeof g.source, "GPU file");
    g.bf16_flops = bf16 * 1e12;
    g.fp8_flops = fp8 * 1e12;
    /* 4.19 * 1e12 is one ulp off the literal 4.19e12: whole MB/s (exact in a double) make a
     * file equal to a built-in entry give its exact value */
    g.read_bw = round(read * 1e6) * 1e6;
    g.sms = (int64_t)sms;
    g.ctas_per_sm = (int64_t)ctas;
    g.l2_bytes = l2 * 1e6;
    /* / 1e6, not * 1e-6 (inexact): a file equal to a built-in entry must give its exact value */
    g.launch_s = launch / 1e6;
    g.epilogue_exposed = exposed;
    g.hopper_bf16_flops = hopper_bf16 * 1e12;
    g.hopper_fp8_flops = hopper_fp8 * 1e12;
    g.v1_flops = v1 * 1e12;
    g.stream_power_share = power_share;
    /* The rates as the models read them: a value that overflows, or rounds to nothing once scaled
     * (read_tbps below 5e-7 is 0 B/s), is named by its key. */
    const struct {
        const char *key;
        double scaled, given;
    } scaled[] = {{"bf16_tflops", g.bf16_flops, bf16}, {"fp8_tflops", g.fp8_flops, fp8}, {"read_tbps", g.read_bw, read}};
    for (size_t i = 0; i < sizeof scaled / sizeof scaled[0]; i++)
        if (!(scaled[i].scaled >= 1 && isfinite(scaled[i].scaled))) {
            st = moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "GPU file: %s = %g is %s", scaled[i].key, scaled[i].given,
                            isfinite(scaled[i].scaled) ? "below 1 FLOP/s or 1 B/s (1e-12 TFLOP/s, 1e-6 TB/s)"
                                                       : "too large for a double once scaled");
            goto done;
        }
    if ((st = moe__gpu_check(ctx, &g)) != MOE_STATUS_OK) goto done;
    *out = g;
done:
    cJSON_Delete(root);
    return st;
}

moe_status moe_gpu_load(moe_context_t *ctx, const char *path, moe_gpu_spec *out) {
    moe__clear_error(ctx);
    if (!path || !out)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_gpu_load: %s is NULL", !path ? "path" : "out");
    struct stat info; /* a FIFO would block fopen until a writer came */
    if (stat(path, &info) == 0 && !S_ISREG(info.st_mode))
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "GPU file %.512s: not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return moe__error(ctx, MOE_STATUS_IO_ERROR, "GPU file %.512s: cannot open", path);
    char *text = NULL;
    size_t len = 0;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || size > (1 << 20) || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "GPU file %.512s: not a readable file under 1 MiB", path);
    }
    text = malloc((size_t)size + 1);
    if (!text) {
        fclose(f);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "GPU file %.512s: out of host memory", path);
    }
    len = fread(text, 1, (size_t)size, f);
    fclose(f);
    if (len != (size_t)size) {
        free(text);
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "GPU file %.512s: read failed", path);
    }
    moe_status st = moe_gpu_parse(ctx, text, len, out);
    free(text);
    if (st != MOE_STATUS_OK) return st;
    if (!strcmp(out->name, "custom")) {
        const char *base = strrchr(path, '/');
        snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : path);
    }
    snprintf(out->source, sizeof out->source, "file %.110s", path);
    return MOE_STATUS_OK;
}
