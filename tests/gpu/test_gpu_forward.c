/* The CUDA forward against the CPU oracle, through the public API on two contexts.
 *
 * For every case: the same host weights packed on a CPU and on a CUDA context; x and the
 * routing input in device buffers (cudaMalloc); y poisoned with NaN before each run; then
 *  - y vs the CPU's y: relative Frobenius error <= 1e-2 for bf16 weights (why: both sides
 *    use the same bf16 weights and inputs; the GPU rounds the GEMM1 output A2 to bf16,
 *    relative error <= 2^-9 per element, about 1e-3 in RMS, and y to bf16 once more; fp32
 *    instead of fp64 accumulation adds ~1e-6. 1e-2 leaves a 5x margin and still fails any
 *    indexing or epilogue bug, which gives errors of order 1). 2e-3 for f16 (2^-12 per
 *    rounding). Every y element must be finite (the poison must be overwritten);
 *  - the routing ids equal to the CPU's, weights to 1e-6 relative (both compute the scores
 *    in double from the same fp32 logits);
 *  - the device dispatch plan equal to moe_dispatch_plan_build's, element by element;
 *  - then the forward is captured in a CUDA graph, NEW inputs and routing are written into
 *    the same device buffers, y is poisoned again, the graph is replayed and checked again.
 * Large cases check the oracle on a subset of tokens (tokens are independent; the subset
 * takes the first, the last and evenly spaced ones), and use fewer experts than the real
 * model (the CPU packs and holds every expert); the GPU always runs all T tokens.
 *
 * Every model case runs once per grouped-GEMM path (MOEFUSE_GEMM=v1, then =hopper; the
 * weights are packed once): the Hopper engine only where moe__cuda_gemm_select allows it
 * (bf16, H and I multiples of 64, ...), elsewhere the forced run is v1 again. Each case line
 * names the path that ran; the last lines count the cases per path.
 *
 * FP8 (w8a8, fp8-tensor / fp8-block128 weights with fp8-tensor / fp8-row128 activations):
 * the device quantiser against moe_quantize bit for bit ("fp8 quantiser", double-rounding
 * traps included), the refusals of the pairs the cuda backend does not run ("fp8 refusals"),
 * and the forward cases "fp8-*" with weights and x at block-varying magnitudes (fp8_tolerance
 * says why y may differ by 4e-3 (bf16 y) or 1e-3 (f32, f16 y), plus one A2 code flip's worth).
 * FP8 models run on both paths too (the Hopper FP8 kernel where H and I are >= 128 and multiples
 * of 16); in the hopper pass a run that would take v1 again is skipped (it repeats the v1 pass).
 * An FP8 run is checked stage by stage (wgmma's accumulator flips a few A2 codes; on either path
 * a flip of a large A2 element can move y by more than an average flip's term): A2
 * codes and scales read back from the workspace against the oracle's, y against the oracle
 * given the GPU's own A2, y end to end only coarsely (see fp8_tolerance); one line per
 * check gives the stages' numbers. `--filter fp8` runs all of them and nothing else.
 *
 * The Hopper engine's dense GEMMs (E = 1; the library's measured ceilings run them) are checked on
 * their own ("dense bf16 ...", "dense fp8 ...", "dense refusals": gpu_test_dense.c): every tile
 * width, the FP8 scale paths (by TMA, the scale ring, per tensor), clusters of 1 and 2, one run from
 * a graph, against a double oracle; each bad argument refused by name.
 *
 * Usage: test_gpu_forward [--quick] [--big] [--gemm v1|hopper|both] [--filter SUBSTRING]
 *        test_gpu_forward --selftest   (no GPU needed: the stage-wise FP8 analysis on readbacks
 *                                       made from the oracle, clean and with planted bugs)
 *   --quick  a reduced case list (for compute-sanitizer)
 *   --big    adds T = 262144 on deepseek-v3's H and I (64-bit offsets; needs ~80 GB: where its
 *            buffers exceed the free device memory, it is skipped with a SKIP line saying how much)
 *   --gemm   the paths to run (default both)
 *   --perf [T,T,...]  only PERF.md's shapes, at the listed T (default all seven)
 * Exits 77 (ctest SKIP) without a CUDA device. Fresh random inputs each run; MOEFUSE_SEED
 * repeats one.
 *
 * This file is the driver; gpu_test.h says which file holds what (the FP8 tolerances and
 * stage-wise checks: gpu_test_fp8.c; the case list: gpu_test_cases.c, gpu_test_parts.c). */
#include "gpu_test.h"

/* ---- run state ------------------------------------------------------------------------ */
int case_failures, cases_passed, cases_failed, cases_skipped;
/* Per grouped-GEMM path that actually ran (MOE__CUDA_GEMM_V1 / _HOPPER); case_path: the
 * running case's. */
static int path_passed[2], path_failed[2];
int case_path;
static int first_path = 0, last_path = 1;
bool perf_only;
int64_t perf_T_arg[8];
int n_perf_T_arg;
/* The stale-rows case's replay x is scaled by 2^-replay_x_shift (0: as drawn; set around
 * one run_model call only). */
int replay_x_shift;
/* --filter: only the cases whose name contains it. */
static const char *filter;
bool selected(const char *name) { return !filter || strstr(name, filter); }

/* Whether the forward of T tokens runs its Hopper GEMMs on the decode kernel with the operands
 * swapped, as moe_forward_config names it (MOEFUSE_FP8_DECODE=swap|tiles forces one for FP8,
 * MOEFUSE_BF16_DECODE=swap|off for bf16). */
static bool swapped_decode(model *m, int64_t T) {
    char line[1024];
    MOE_OK(gpu_ctx, moe_forward_config(gpu_ctx, m->w_gpu, T, m->act_format, line, sizeof line));
    return strstr(line, "operands swapped") != NULL;
}

/* ---- one case: a model at T tokens ------------------------------------------------------ */
static void run_case(model *m, run_spec r) {
    char name[200];
    const char *forced = getenv("MOEFUSE_GEMM");
    const int path = moe__cuda_forward_gemm(m->w_gpu, r.T);
    case_path = path;
    /* The Hopper GEMMs' kernel (run_model runs both for FP8) */
    const bool swapped = path == MOE__CUDA_GEMM_HOPPER && swapped_decode(m, r.T);
    const char *kernel = "";
    if (path == MOE__CUDA_GEMM_HOPPER)
        kernel = is_fp8_format(m->format) ? (swapped ? " fp8 swap" : " fp8 tiles") : swapped ? " swap" : "";
    snprintf(name, sizeof name, "%s T=%lld %s/%s [MOEFUSE_GEMM=%s ran %s%s]", m->name, (long long)r.T,
             routing_name(r.routing), r.graph ? routing_name(r.replay_routing) : "-", forced ? forced : "auto",
             moe__cuda_gemm_name(path), kernel);
    case_failures = 0;
    const moe_layer_spec *s = &m->spec;
    /* The replay changes values, not the kind of routing input: the captured forward reads the
     * eager run's argument set (ids, logits, or neither), so a table entry mixing kinds would
     * check ids the graph never read. */
    CHECK(!r.graph || routing_kind(r.routing) == routing_kind(r.replay_routing),
          "case table: replay routing %s is not of the eager run's kind (%s)", routing_name(r.replay_routing),
          routing_name(r.routing));
    /* bf16 where Hopper can run these shapes (MOEFUSE_GEMM not v1): the swapped kernel exactly where
     * the rule says, written out here rather than read from the config line: from half a routed row
     * per expert (its stack's experts: a fused shared expert counts) up to 16, or with
     * MOEFUSE_BF16_DECODE=swap any T up to 16 rows per expert, never with =off. */
    if (m->format == MOE_FORMAT_BF16 && !(forced && !strcmp(forced, "v1")) &&
        moe__cuda_gemm_select(INT64_MAX, s->num_experts, s->hidden, s->intermediate, MOE_DTYPE_BF16) ==
            MOE__CUDA_GEMM_HOPPER) {
        const char *bf16_decode = getenv("MOEFUSE_BF16_DECODE");
        const bool on = bf16_decode && !strcmp(bf16_decode, "swap"), off = bf16_decode && !strcmp(bf16_decode, "off");
        const int64_t experts = s->num_experts + (s->num_shared_experts > 0 && s->shared_intermediate == s->intermediate);
        const int64_t rows = r.T * s->top_k;
        const bool want = !off && rows <= 16 * experts && (on || 2 * rows >= experts);
        CHECK(swapped == want, "bf16 T*k = %lld over %lld experts (MOEFUSE_BF16_DECODE=%s): swapped kernel %s, expected %s",
              (long long)rows, (long long)experts, bf16_decode ? bf16_decode : "unset", swapped ? "ran" : "not run",
              want ? "it" : "not");
    }
    /* --big's case, where its buffers cannot fit (an 80 GB card), is said and skipped rather than a
     * FATAL cudaMalloc at the end of the run. Only that one: any other case that outgrows the card
     * is a regression and must stay loud. */
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t need = strstr(m->name, "-big") ? device_alloc_bytes(m, r.T) : 0;
    if (need > free_bytes) {
        printf("SKIP %s: its device buffers need %.1f GiB, %.1f of the card's %.1f GiB are free\n", name,
               need / 1073741824.0, free_bytes / 1073741824.0, total_bytes / 1073741824.0);
        cases_skipped++;
        if (case_failures) cases_failed++; /* the checks above this point still count */
        return;
    }
    device_buffers b;
    device_alloc(m, &b, r.T, r.routing);
    inputs in = {0};
    inputs_draw(m, &in, r.T, r.routing);
    device_upload(m, &b, &in);

    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    CUDA_OK(cudaEventRecord(t0, stream));
    moe_status st = moe_forward(gpu_ctx, m->w_gpu, &b.args);
    CUDA_OK(cudaEventRecord(t1, stream));
    CHECK(st == MOE_STATUS_OK, "moe_forward: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaGetLastError());
    float ms = 0.0f;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    double err = st == MOE_STATUS_OK ? check_outputs(m, &b, &in, r.oracle_limit, "eager") : NAN;
    /* The plan with the block this forward used (64 on v1, 128 for the Hopper tiles, 32 for the
     * decode kernel with the operands swapped, either dtype). */
    const int64_t block = moe__cuda_forward_block_rows(m->w_gpu, r.T);
    const int64_t want_block = path != MOE__CUDA_GEMM_HOPPER ? 64 : swapped ? 32 : 128;
    CHECK(block == want_block, "moe__cuda_forward_block_rows = %lld on path %s%s, expected %lld", (long long)block,
          moe__cuda_gemm_name(path), kernel, (long long)want_block);
    check_plan((const int32_t *)b.out_ids, r.T, s->top_k, s->num_experts, block, 0, "plan");
    if (s->num_shared_experts > 0 && s->shared_intermediate == s->intermediate)
        check_plan((const int32_t *)b.out_ids, r.T, s->top_k, s->num_experts, block, r.T, "plan+shared");

    double gerr = NAN;
    if (r.graph && st == MOE_STATUS_OK) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        st = moe_forward(gpu_ctx, m->w_gpu, &b.args);
        CUDA_OK(cudaStreamEndCapture(stream, &graph));
        CHECK(st == MOE_STATUS_OK, "moe_forward under capture: %s: %s", moe_status_string(st), moe_last_error(gpu_ctx));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        /* New x and new routing in the same buffers; the graph must follow them. */
        inputs_free(&in);
        inputs_draw(m, &in, r.T, r.replay_routing);
        if (replay_x_shift) scale_x(m, &in, replay_x_shift);
        device_upload(m, &b, &in);
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        gerr = check_outputs(m, &b, &in, r.oracle_limit, "graph replay");
        check_plan((const int32_t *)b.out_ids, r.T, s->top_k, s->num_experts, block, 0, "replay plan");
        /* FP8: every step is deterministic (no float atomics; amax is an order-free atomicMax),
         * so y may depend on the inputs only: a second replay on the same inputs must give the
         * same bits. It fails when a run reads workspace words that the run itself rewrites
         * (an accumulator or amax not reset, a plan or A2 row left by the eager run's routing
         * that the first replay overwrote), however small the effect on the error. (Rows that
         * neither replay writes are the stale-rows case's job, fp8-relu2-stale-rows-tensor.) */
        if (m->act_format != MOE_FORMAT_F32) {
            void *y1 = xmalloc(y_bytes(m, r.T)), *y2 = xmalloc(y_bytes(m, r.T));
            CUDA_OK(cudaMemcpy(y1, b.y, y_bytes(m, r.T), cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemsetAsync(b.y, 0xFF, y_bytes(m, r.T), stream));
            CUDA_OK(cudaGraphLaunch(exec, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            CUDA_OK(cudaMemcpy(y2, b.y, y_bytes(m, r.T), cudaMemcpyDeviceToHost));
            CHECK(memcmp(y1, y2, y_bytes(m, r.T)) == 0,
                  "graph replay: y differs between two replays on the same inputs (workspace state leaks into y)");
            free(y1);
            free(y2);
        }
        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(graph));
    }
    CUDA_OK(cudaEventDestroy(t0));
    CUDA_OK(cudaEventDestroy(t1));
    inputs_free(&in);
    device_free(&b);
    if (case_failures == 0) cases_passed++, path_passed[path]++;
    else cases_failed++, path_failed[path]++;
    printf("%s %s: block %lld, err %.2e, graph err %.2e, first call %.3f ms\n", case_failures ? "FAIL" : "ok  ", name,
           (long long)block, err, gerr, ms);
    fflush(stdout);
}

/* moe_forward_workspace_size never shrinks as T grows (a workspace sized for the largest T runs
 * every smaller one), across every change of path: T = 1 .. past the swapped kernel's limit of
 * 16 rows per expert (the Hopper tiles after it, or v1's with MOEFUSE_BF16_DECODE=off or
 * MOEFUSE_GEMM=v1), and around 128 rows per expert (where the v1 -> Hopper switch was until
 * session 15; a cheap second range), under each override
 * of the path (MOEFUSE_GEMM, MOEFUSE_BF16_DECODE, MOEFUSE_FP8_DECODE), restored after. Host only. */
static int64_t workspace_first_shrink(model *m) {
    const int64_t k = m->spec.top_k, experts = m->spec.num_experts + 1;
    const int64_t swap_end = 16 * experts / k + 4, tiles_at = 128 * m->spec.num_experts / k;
    const int64_t ranges[2][2] = {{1, swap_end}, {tiles_at - 4, tiles_at + 4}};
    size_t prev = 0;
    for (int i = 0; i < 2; i++)
        for (int64_t T = ranges[i][0] > 1 ? ranges[i][0] : 1; T <= ranges[i][1]; T++) {
            size_t bytes = 0;
            MOE_OK(gpu_ctx, moe_forward_workspace_size(gpu_ctx, m->w_gpu, T, m->act_format, &bytes));
            if (bytes < prev) return T;
            prev = bytes;
        }
    return 0;
}

static void workspace_monotonic_case(model *m) {
    static const char *const names[3] = {"MOEFUSE_GEMM", "MOEFUSE_BF16_DECODE", "MOEFUSE_FP8_DECODE"};
    static const char *const values[3][3] = {{NULL, "hopper", "v1"}, {NULL, "swap", "off"}, {NULL, "swap", "tiles"}};
    saved_env saved[3];
    for (int v = 0; v < 3; v++) saved[v] = env_save(names[v]);
    case_failures = 0;
    for (int g = 0; g < 3; g++)
        for (int d = 0; d < 3; d++) {
            const int decode = is_fp8_format(m->format) ? 2 : 1;
            for (int v = 0; v < 3; v++) unsetenv(names[v]);
            if (values[0][g]) setenv(names[0], values[0][g], 1);
            if (values[decode][d]) setenv(names[decode], values[decode][d], 1);
            const int64_t bad_T = workspace_first_shrink(m);
            CHECK(!bad_T, "%s=%s %s=%s: moe_forward_workspace_size(T = %lld) < its value at a smaller T", names[0],
                  values[0][g] ? values[0][g] : "unset", names[decode], values[decode][d] ? values[decode][d] : "unset",
                  (long long)bad_T);
        }
    for (int v = 0; v < 3; v++) env_restore(&saved[v]);
    if (case_failures == 0) cases_passed++;
    else cases_failed++;
    printf("%s %s workspace never shrinks with T, under each path override\n", case_failures ? "FAIL" : "ok  ", m->name);
}

void run_model(model *m, const run_spec *runs, int nruns) {
    if (!selected(m->name)) return;
    MOE_OK(cpu_ctx, moe_layer_spec_validate(cpu_ctx, &m->spec));
    clock_t c0 = clock();
    model_build(m);
    printf("# %s: E=%lld H=%lld I=%lld k=%lld Is=%lld %s%s%s %s act=%s score=%s groups=%lld/%lld (weights packed in %.1f s cpu)\n",
           m->name, (long long)m->spec.num_experts, (long long)m->spec.hidden, (long long)m->spec.intermediate,
           (long long)m->spec.top_k, (long long)m->spec.shared_intermediate, moe_format_name(m->format),
           m->act_format != MOE_FORMAT_F32 ? " acts " : "",
           m->act_format != MOE_FORMAT_F32 ? moe_format_name(m->act_format) : "",
           moe_dtype_name(m->x_dtype), moe_activation_name(m->spec.activation), moe_score_name(m->spec.score),
           (long long)m->spec.n_group, (long long)m->spec.topk_group, (double)(clock() - c0) / CLOCKS_PER_SEC);
    workspace_monotonic_case(m);
    for (int g = first_path; g <= last_path; g++) {
        setenv("MOEFUSE_GEMM", gemm_paths[g], 1);
        for (int i = 0; i < nruns; i++) {
            /* FP8: a forced-hopper run that falls back to v1 would repeat the v1 pass's case
             * (the FP8 oracle is the expensive part of the suite). */
            if (is_fp8_format(m->format) && g == 1 && first_path == 0 &&
                moe__cuda_forward_gemm(m->w_gpu, runs[i].T) != MOE__CUDA_GEMM_HOPPER)
                continue;
            run_case(m, runs[i]);
            /* FP8 on Hopper: the case again on the other GEMM kernel (the swapped decode kernel
             * takes the small T by default, the 128 x 128 tiles the large; each must be right at
             * every T: an expert with more than 32 rows takes several 32-row blocks there). */
            if (is_fp8_format(m->format) && moe__cuda_forward_gemm(m->w_gpu, runs[i].T) == MOE__CUDA_GEMM_HOPPER) {
                const saved_env decode = env_save("MOEFUSE_FP8_DECODE");
                setenv("MOEFUSE_FP8_DECODE", swapped_decode(m, runs[i].T) ? "tiles" : "swap", 1);
                run_case(m, runs[i]);
                env_restore(&decode);
            }
        }
    }
    unsetenv("MOEFUSE_GEMM");
    model_free(m);
}

int main(int argc, char **argv) {
    bool quick = false, big = false;
    if (argc == 2 && !strcmp(argv[1], "--selftest")) { /* host only */
        const int stages = stage_selftest();
        return dense_refusals_host() || stages ? 1 : 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--big")) big = true;
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--perf")) {
            perf_only = true;
            if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9') {
                /* Token counts 1..2^24, comma-separated, at most 8: anything else is an error, not a
                 * shorter list. */
                for (const char *c = argv[++i];;) {
                    char *end;
                    const long long t = strtoll(c, &end, 10);
                    if (end == c || t < 1 || t > (1LL << 24) || (*end && *end != ',') || n_perf_T_arg == 8) {
                        printf("test_gpu_forward: --perf: got '%s', expected up to 8 token counts from 1 to 16777216, "
                               "comma-separated\n", argv[i]);
                        return 2;
                    }
                    perf_T_arg[n_perf_T_arg++] = t;
                    if (!*end) break;
                    c = end + 1;
                }
            }
        }
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc && !strcmp(argv[i + 1], "v1")) first_path = last_path = 0, i++;
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc && !strcmp(argv[i + 1], "hopper")) first_path = last_path = 1, i++;
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc && !strcmp(argv[i + 1], "both")) first_path = 0, last_path = 1, i++;
        else {
            printf("usage: %s [--quick] [--big] [--gemm v1|hopper|both] [--perf [T,...]] [--filter SUBSTRING] | "
                   "--selftest\n", argv[0]);
            return 2;
        }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("test_gpu_forward: no CUDA device: SKIP\n");
        return 77;
    }
    const char *env = getenv("MOEFUSE_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("test_gpu_forward: seed %llu (MOEFUSE_SEED=%llu repeats this run)%s\n", (unsigned long long)seed,
           (unsigned long long)seed, quick ? " --quick" : "");
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CPU, 0, &cpu_ctx));
    MOE_OK(NULL, moe_context_create(MOE_BACKEND_CUDA, 0, &gpu_ctx));
    CUDA_OK(cudaStreamCreate(&stream));

    selection_cases();
    if (!perf_only) plan_cases(quick);
    if (!perf_only) fp8_quantizer_cases(quick);
    if (!perf_only) fp8_refusal_cases();
    if (!perf_only) dense_engine_cases(quick);

    model_cases(quick);
    fp8_model_cases(quick);
    if (big && (!filter || strstr("deepseek-v3-big", filter))) big_model_case();

    CUDA_OK(cudaStreamDestroy(stream));
    moe_context_free(cpu_ctx);
    moe_context_free(gpu_ctx);
    printf("model cases that ran v1: %d passed, %d failed; ran hopper: %d passed, %d failed\n", path_passed[0],
           path_failed[0], path_passed[1], path_failed[1]);
    if (cases_skipped) printf("%d --big case(s) skipped: not enough free device memory (the SKIP line says how much)\n", cases_skipped);
    printf("%d passed, %d failed\n", cases_passed, cases_failed);
    if (cases_passed + cases_failed + cases_skipped == 0) { /* a filter that matched nothing checked nothing */
        printf("FAIL: no case ran%s%s%s\n", filter ? " (--filter '" : "", filter ? filter : "", filter ? "' matched none)" : "");
        return 1;
    }
    return cases_failed ? 1 : 0;
}
