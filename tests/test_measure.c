/* The measurement entry points of roofline --measure (moe_analysis_measure_gemm, _dense,
 * _grouped) without a GPU: what they must do on a CPU context and with bad arguments. Every
 * case checks the status AND that the message names the culprit. In a build without CUDA all
 * three say so (UNSUPPORTED); in a CUDA build the arguments are checked before the context, so
 * each bad argument gets its own status here too, with a CPU context and no GPU. The timing
 * itself runs only on the GPU (tests/gpu/measure_on_device.sh). */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "moefuse_analysis.h"

static moe_context_t *cpu;
static int cuda_build; /* the library has the CUDA backend (with or without a GPU here) */

static void check_status(moe_status got, moe_status want, const char *substring, const char *what) {
    const char *msg = moe_last_error(cpu);
    CHECK(got == want, "%s: status %s, expected %s (message: %s)", what, moe_status_string(got),
          moe_status_string(want), msg);
    CHECK(strstr(msg, substring) != NULL, "%s: message '%s' does not name '%s'", what, msg, substring);
}

/* A GEMM1 launch the way roofline --measure describes deepseek-v3 at T=4096. */
static moe_grouped_measure valid_launch(void) {
    moe_grouped_measure g;
    memset(&g, 0, sizeof g);
    g.down = 0;
    g.num_experts = 256;
    g.experts = 256;
    g.tokens = 4096;
    g.top_k = 8;
    g.hidden = 7168;
    g.intermediate = 2048;
    g.activation = MOE_ACT_SWIGLU;
    g.act_alpha = 1.702f;
    return g;
}

/* A CPU context cannot time anything; the outputs are reset, never left as they were. */
static void case_cpu_context(void) {
    double ms = 123.0;
    const char *no_cuda = cuda_build ? "expected a cuda one" : "no CUDA backend";
    check_status(moe_analysis_measure_gemm(cpu, 256, 256, 256, MOE_DTYPE_BF16, 5, &ms), MOE_STATUS_UNSUPPORTED,
                 no_cuda, "gemm on a cpu context");
    CHECK(ms == 0.0, "gemm: ms %g left, expected 0", ms);
    ms = 123.0;
    check_status(moe_analysis_measure_dense(cpu, 256, 256, 256, MOE_DTYPE_E4M3, 5, &ms), MOE_STATUS_UNSUPPORTED,
                 no_cuda, "dense on a cpu context");
    CHECK(ms == 0.0, "dense: ms %g left, expected 0", ms);
    moe_grouped_measure g = valid_launch();
    g.ms = 123.0;
    g.path = 7;
    g.block = 9;
    g.plan_rows = 11;
    snprintf(g.path_name, sizeof g.path_name, "stale");
    check_status(moe_analysis_measure_grouped(cpu, MOE_DTYPE_BF16, 5, &g), MOE_STATUS_UNSUPPORTED, no_cuda,
                 "grouped on a cpu context");
    CHECK(g.ms == 0.0 && g.path == -1 && g.path_name[0] == '\0' && g.block == 0 && g.plan_rows == 0,
          "grouped: outputs not reset (ms %g, path %d '%s', block %lld, plan_rows %lld)", g.ms, g.path, g.path_name,
          (long long)g.block, (long long)g.plan_rows);
    /* the inputs are the caller's and stay as given */
    CHECK(g.experts == 256 && g.tokens == 4096 && g.hidden == 7168, "grouped: inputs changed");
}

static void case_null_pointers(void) {
    check_status(moe_analysis_measure_grouped(cpu, MOE_DTYPE_BF16, 5, NULL), MOE_STATUS_NULL_POINTER, "g is NULL",
                 "grouped with g NULL");
    if (!cuda_build) return; /* the stubs report the missing backend first */
    check_status(moe_analysis_measure_dense(cpu, 256, 256, 256, MOE_DTYPE_BF16, 5, NULL), MOE_STATUS_NULL_POINTER,
                 "ms is NULL", "dense with ms NULL");
    check_status(moe_analysis_measure_gemm(cpu, 256, 256, 256, MOE_DTYPE_BF16, 5, NULL), MOE_STATUS_NULL_POINTER,
                 "ms is NULL", "gemm with ms NULL");
}

/* CUDA build: each bad argument by name, before the context is looked at. */
static void case_bad_arguments(void) {
    if (!cuda_build) return;
    double ms;
    check_status(moe_analysis_measure_dense(cpu, 256, 0, 256, MOE_DTYPE_BF16, 5, &ms), MOE_STATUS_INVALID_ARGUMENT,
                 "k: got 0", "dense k = 0");
    check_status(moe_analysis_measure_dense(cpu, 256, 256, 256, MOE_DTYPE_F32, 5, &ms), MOE_STATUS_INVALID_ARGUMENT,
                 "dtype", "dense f32");
    check_status(moe_analysis_measure_dense(cpu, 256, 256, 256, MOE_DTYPE_BF16, 0, &ms), MOE_STATUS_INVALID_ARGUMENT,
                 "reps: got 0", "dense reps 0");
    /* TMA rows: 16-byte multiples (bf16: k % 8, fp8: k % 16) */
    check_status(moe_analysis_measure_dense(cpu, 256, 260, 256, MOE_DTYPE_BF16, 5, &ms), MOE_STATUS_UNSUPPORTED,
                 "multiple of 8", "dense bf16 k = 260");
    check_status(moe_analysis_measure_dense(cpu, 256, 264, 256, MOE_DTYPE_E4M3, 5, &ms), MOE_STATUS_UNSUPPORTED,
                 "multiple of 16", "dense fp8 k = 264");
    /* the cuBLAS path's own rule is unchanged: n % 8 for fp8 */
    check_status(moe_analysis_measure_gemm(cpu, 256, 256, 252, MOE_DTYPE_E4M3, 5, &ms), MOE_STATUS_UNSUPPORTED,
                 "n of 8", "gemm fp8 n = 252");

    struct {
        const char *what, *names;
        moe_status want;
        moe_dtype dtype;
    } cases[] = { /* each mutates valid_launch() in the switch below, by index */
        {"down = 2", "down: got 2", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_BF16},
        {"experts > num_experts", "experts", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_BF16},
        {"top_k > experts", "top_k", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_BF16},
        {"tokens 0", "tokens", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_BF16},
        {"hidden 0", "hidden", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_BF16},
        {"H = 100 bf16", "hidden = 100", MOE_STATUS_UNSUPPORTED, MOE_DTYPE_BF16},
        {"I = 2056 fp8", "intermediate = 2056", MOE_STATUS_UNSUPPORTED, MOE_DTYPE_E4M3},
        {"dtype f16", "dtype", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_F16},
        {"activation 9", "activation", MOE_STATUS_INVALID_ARGUMENT, MOE_DTYPE_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moe_grouped_measure g = valid_launch();
        switch (i) {
        case 0: g.down = 2; break;
        case 1: g.experts = 257; break;
        case 2: g.experts = 4, g.top_k = 8; break;
        case 3: g.tokens = 0; break;
        case 4: g.hidden = 0; break;
        case 5: g.hidden = 100; break;
        case 6: g.intermediate = 2056; break; /* a multiple of 8, not of 16 */
        case 7: break;
        case 8: g.activation = (moe_activation)9; break;
        }
        check_status(moe_analysis_measure_grouped(cpu, cases[i].dtype, 5, &g), cases[i].want, cases[i].names,
                     cases[i].what);
        CHECK(g.path == -1, "%s: path %d chosen before the arguments were accepted", cases[i].what, g.path);
    }
    /* 2056 is a multiple of 8: bf16 accepts it, and only the cpu context is left to refuse */
    moe_grouped_measure g = valid_launch();
    g.intermediate = 2056;
    check_status(moe_analysis_measure_grouped(cpu, MOE_DTYPE_BF16, 5, &g), MOE_STATUS_UNSUPPORTED,
                 "expected a cuda one", "grouped bf16 I = 2056 on a cpu context");
}

int main(void) {
    harness_seed("test_measure"); /* nothing random here; printed as every test does */
    cuda_build = moe__cuda_device_count() >= 0;
    printf("library built %s the CUDA backend\n", cuda_build ? "with" : "without");
    if (moe_context_create(MOE_BACKEND_CPU, 0, &cpu) != MOE_STATUS_OK) {
        printf("cannot create a cpu context: %s\n", moe_last_error(NULL));
        return harness_finish(0, 1);
    }
    harness_run_case("cpu context: UNSUPPORTED, outputs reset", case_cpu_context);
    harness_run_case("NULL pointers", case_null_pointers);
    harness_run_case("bad arguments named (CUDA build)", case_bad_arguments);
    moe_context_free(cpu);
    return harness_finish(cases_passed, cases_failed);
}
