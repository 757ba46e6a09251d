/* What the files of test_gpu_forward share. The suite itself (what it checks, why those
 * tolerances, its flags) is described at the top of test_gpu_forward.c. One file per concern:
 *   test_gpu_forward.c  the driver: flags, one case (eager run, graph capture, replays), one
 *                       model on each GEMM path, the order of the case groups, the totals
 *   gpu_test_data.c     models, inputs and routing kinds, device buffers, the CPU oracle's forward
 *   gpu_test_check.c    a forward's outputs and its dispatch plan against the CPU
 *   gpu_test_fp8.c      FP8 tolerances, the Hopper FP8 stage-wise checks, --selftest
 *   gpu_test_cases.c    the model case table (bf16/f16, FP8, PERF.md's shapes, --big)
 *   gpu_test_parts.c    parts checked on their own: dispatch plan, FP8 quantiser, FP8 refusals,
 *                       the GEMM selection rule
 *   gpu_test_dense.c    the Hopper engine's dense GEMMs (bf16, FP8 block-scaled and per tensor)
 *                       against a double oracle, and their refusals
 * tests/gpu/fp8_a2_probe.c builds on gpu_test_data.c alone. */
#ifndef MOEFUSE_GPU_TEST_H
#define MOEFUSE_GPU_TEST_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_backend.h"
#include "moefuse.h"

/* ---- checks ------------------------------------------------------------------------------ */
/* A failed check prints (the first 8 of a case) and counts in case_failures; the case's line
 * then reads FAIL. Its "line N" is of the file the check is in; its text says which check. */
#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            if (case_failures < 8) {                                                        \
                printf("    check failed at line %d: %s: ", __LINE__, #cond);               \
                printf(__VA_ARGS__);                                                        \
                printf("\n");                                                               \
            }                                                                               \
            case_failures++;                                                                \
        }                                                                                   \
    } while (0)

/* A CUDA runtime failure ends the run: nothing after it could be trusted. */
#define CUDA_OK(call)                                                                       \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                          \
            printf("FATAL: %s failed at line %d: %s\n", #call, __LINE__, cudaGetErrorString(err_)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define MOE_OK(ctx, call)                                                                   \
    do {                                                                                    \
        moe_status st_ = (call);                                                            \
        if (st_ != MOE_STATUS_OK) {                                                         \
            printf("FATAL: %s: %s: %s\n", #call, moe_status_string(st_), moe_last_error(ctx)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* ---- run state (test_gpu_forward.c) -------------------------------------------------------- */
extern int case_failures, cases_passed, cases_failed; /* the running case's failed checks; totals */
extern int cases_skipped; /* --big's case when its device buffers exceed the free memory (said, not run) */
extern int case_path;                                 /* the running case's GEMM path (MOE__CUDA_GEMM_*) */
extern bool perf_only;                                /* --perf: PERF.md's shapes only */
extern int64_t perf_T_arg[8];                         /* --perf's T list, n_perf_T_arg of them */
extern int n_perf_T_arg;
extern int replay_x_shift; /* the next replays' x scaled by 2^-replay_x_shift (the stale-rows case) */
bool selected(const char *name); /* --filter */

/* ---- gpu_test_data.c: models, inputs, device buffers, the CPU oracle ------------------------- */
extern uint64_t rng_state;
extern moe_context_t *cpu_ctx, *gpu_ctx;
extern cudaStream_t stream;
extern const char *gemm_paths[2]; /* MOEFUSE_GEMM's value for MOE__CUDA_GEMM_V1, _HOPPER */

void *xmalloc(size_t n); /* malloc or a FATAL exit */
/* An environment variable as it was before a case overrode it (env_save), and putting it back
 * (env_restore: its old value, or unset if it had none). */
typedef struct {
    const char *name;
    bool had;
    char value[64];
} saved_env;
saved_env env_save(const char *name);
void env_restore(const saved_env *s);
uint64_t rng_next(void);
float rng_uniform(float lo, float hi);
void fill_uniform(float *p, int64_t n, float amp);

/* A model: spec, host weights, packed on both contexts. */
typedef struct model {
    char name[64];
    moe_layer_spec spec;
    moe_format format;
    moe_gate_up_layout layout;
    moe_dtype x_dtype, y_dtype;
    int64_t x_pad, y_pad; /* extra elements per row of x / y (strided rows) */
    float *arrays[24];
    int narrays;
    moe_weights_desc desc;
    moe_weights_t *w_cpu, *w_gpu;
    float *correction_bias; /* a copy kept for moe_route, or NULL */
    moe_format act_format;  /* F32, or FP8_ROW128 / FP8_TENSOR with FP8 weights (w8a8) */
    uint64_t salt;          /* of the block magnitudes of an FP8 model's weights and x */
} model;

bool is_fp8_format(moe_format f);
float block_factor(uint64_t salt, int64_t a, int64_t b, int64_t c, int64_t d);
void model_init(model *m, const char *name, const moe_layer_spec *spec, moe_format format, moe_gate_up_layout layout,
                moe_dtype x_dtype, moe_dtype y_dtype);
void model_build(model *m);
void model_free(model *m);

/* Routing inputs. */
enum routing {
    R_ROUTER,      /* neither ids nor logits: logits = x . Wr^T inside */
    R_LOGITS,      /* random logits given */
    R_LOGITS_TIES, /* logits from {-1, -0.5, 0, 0.5, 1}: many exact ties (lower index wins) */
    R_IDS,         /* random distinct ids and weights given */
    R_IDS_ONE,     /* every token on experts 0..k-1: expert 0 gets all T rows */
    R_IDS_FEW,     /* ids from the first max(k, E/4) experts only: the others are empty */
    R_IDS_NONE     /* R_IDS with every third slot -1 (no expert: another rank's) at a NaN weight,
                    * and token 1 with no expert at all (bf16 cases only: the FP8 stage checks
                    * expect a plan row for every oracle (token, slot)) */
};
const char *routing_name(int r);
bool routing_has_ids(int r);
int routing_kind(int r); /* 0 router, 1 logits, 2 ids: a graph replay keeps the kind */

/* One forward's host inputs. */
typedef struct inputs {
    int64_t T;
    int routing;
    uint16_t *x16; /* x in bf16/f16 [T, H + x_pad] */
    float *x32;    /* or f32 */
    float *logits; /* [T, E] */
    int32_t *ids;  /* [T, k] */
    float *weights;
} inputs;

void inputs_draw(const model *m, inputs *in, int64_t T, int routing);
void inputs_free(inputs *in);
float x_at(const model *m, const inputs *in, int64_t t, int64_t h);
void scale_x(const model *m, inputs *in, int shift);

/* One forward's device buffers and the moe_forward_args that point at them. */
typedef struct device_buffers {
    void *x, *y, *logits, *ids, *weights, *out_ids, *out_weights, *workspace;
    size_t workspace_size;
    moe_forward_args args;
} device_buffers;

size_t y_bytes(const model *m, int64_t T);
size_t device_alloc_bytes(const model *m, int64_t T); /* what device_alloc allocates, workspace included */
void device_alloc(const model *m, device_buffers *b, int64_t T, int routing);
void device_free(device_buffers *b);
void device_upload(const model *m, device_buffers *b, const inputs *in);
void cpu_forward_a2(const model *m, const inputs *in, const int64_t *tok, int64_t S, float *y, int32_t *ids,
                    float *weights, const moe__cpu_a2_exchange *xa);
void cpu_forward(const model *m, const inputs *in, const int64_t *tok, int64_t S, float *y, int32_t *ids,
                 float *weights);
float y_at(const model *m, const void *y, int64_t t, int64_t h);

/* ---- gpu_test_check.c ---------------------------------------------------------------------- */
double y_rel_err(const model *m, const void *y, const int64_t *tok, int64_t S, const float *y_ref);
double check_outputs(const model *m, const device_buffers *b, const inputs *in, int64_t oracle_limit,
                     const char *what);
void check_plan(const int32_t *d_ids, int64_t T, int64_t k, int64_t E, int64_t block, int64_t shared_rows,
                const char *what);
void check_plan_left_out(const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t block);

/* ---- gpu_test_fp8.c -------------------------------------------------------------------------- */
/* The oracle's A2 of one run, before quantisation (moe__cpu_forward_a2's a2_out). */
typedef struct oracle_a2 {
    float *routed; /* [S*k, I] */
    float *shared; /* [S, Is] or NULL */
} oracle_a2;
oracle_a2 oracle_a2_alloc(const model *m, int64_t S);
void oracle_a2_free(oracle_a2 *o);
double fp8_tolerance(const model *m, int64_t S);
void fp8_stage_checks(const model *m, const device_buffers *b, const inputs *in, const int64_t *tok, int64_t S,
                      const void *y, const oracle_a2 *o, const char *what, bool wgmma);
int stage_selftest(void);

/* ---- one case: a model at T tokens (test_gpu_forward.c) ---------------------------------------- */
typedef struct run_spec {
    int64_t T;
    int routing, replay_routing; /* the replay's routing is of the same kind, new values */
    int64_t oracle_limit;
    bool graph;
} run_spec;
void run_model(model *m, const run_spec *runs, int nruns); /* on each GEMM path --gemm asks for */

/* ---- gpu_test_cases.c, gpu_test_parts.c: the case groups, in the order main runs them ------------ */
void selection_cases(void);
void plan_cases(bool quick);
void fp8_quantizer_cases(bool quick);
void fp8_refusal_cases(void);
void dense_engine_cases(bool quick); /* gpu_test_dense.c */
int dense_refusals_host(void);       /* gpu_test_dense.c: the same refusals without a device (--selftest) */
void model_cases(bool quick);
void fp8_model_cases(bool quick);
void big_model_case(void);

#endif
