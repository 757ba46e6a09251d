/* test_gpu_forward (gpu_test.h): the model case table. Each entry is a model (a layer spec, weight
 * format and layout, x and y dtypes) and its runs (T, the routing kinds of the eager run and the
 * replay, the oracle's token limit); run_model runs it on each GEMM path. */
#include "gpu_test.h"

/* A preset's routing and MLP options on small H and I (E, k and the grouping kept). */
static bool preset_small(const char *preset, moe_layer_spec *s) {
    moe_model_config cfg;
    if (moe_config_preset(cpu_ctx, preset, &cfg) != MOE_STATUS_OK) {
        printf("note: preset %s not found: %s\n", preset, moe_last_error(cpu_ctx));
        return false;
    }
    *s = cfg.layer;
    const bool fused = s->num_shared_experts > 0 && s->shared_intermediate == s->intermediate;
    s->hidden = 256;
    s->intermediate = 96; /* not a multiple of the 128-wide tile nor of BK = 64: tails covered */
    if (s->num_shared_experts > 0) s->shared_intermediate = fused ? 96 : 160;
    return true;
}

/* H and 2I multiples of 240 and not of 256 (gpt-oss's 2880 scaled down), GPT-OSS's clamped SwiGLU
 * with biases: the 240-wide tiles on the ticket schedule; ~75 rows an expert at T = 300, so GEMM2
 * meets half-padding blocks. */
static void spec_bn240_oai(moe_layer_spec *s) {
    moe_layer_spec_init(s, 8, 960, 960, 2);
    s->activation = MOE_ACT_SWIGLU_OAI;
    s->act_alpha = 1.702f;
    s->act_limit = 7.0f;
    s->expert_has_bias = 1;
}

/* weight_on_input (top_k 1) with a gated shared expert of I = Is, fused into the stacks as expert E. */
static void spec_woi_shared_fused(moe_layer_spec *s) {
    moe_layer_spec_init(s, 8, 128, 64, 1);
    s->weight_on_input = 1;
    s->num_shared_experts = 1;
    s->shared_intermediate = 64;
    s->shared_gate = 1;
    s->expert_has_bias = 1;
}

/* The models of a way of copying x into plan order for GEMM1 (MOEFUSE_HOPPER_A = a_mode, and
 * MOEFUSE_HOPPER_PERMUTE = permute_mode unless NULL; the ticket schedule forced): padding rows,
 * -1 slots, empty experts, x rows with a padded stride, 240-wide tiles, a fused shared expert (ids
 * past T*k), top_k 8 beside it over rows several warp passes wide. Each model's name starts with
 * `prefix`. */
static void a_copy_cases(const char *prefix, const char *a_mode, const char *permute_mode, bool quick) {
    const saved_env a = env_save("MOEFUSE_HOPPER_A"), permute = env_save("MOEFUSE_HOPPER_PERMUTE"),
                    schedule = env_save("MOEFUSE_HOPPER_SCHEDULE");
    setenv("MOEFUSE_HOPPER_A", a_mode, 1);
    if (permute_mode) setenv("MOEFUSE_HOPPER_PERMUTE", permute_mode, 1);
    else unsetenv("MOEFUSE_HOPPER_PERMUTE"); /* the default's cases test the default */
    setenv("MOEFUSE_HOPPER_SCHEDULE", "dyn", 1);
    moe_layer_spec s;
    model m;
    char name[64];
    moe_layer_spec_init(&s, 8, 128, 64, 2);
    s.expert_has_bias = 1;
    snprintf(name, sizeof name, "%s-swiglu-bias-xpad", prefix);
    model_init(&m, name, &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
    m.x_pad = 8; /* rows still 16-byte aligned, the stride not H */
    run_model(&m, (run_spec[]){{300, R_IDS, R_IDS_NONE, 96, true}, {700, R_IDS_FEW, R_IDS_FEW, 96, true}},
              quick ? 1 : 2);
    spec_bn240_oai(&s);
    snprintf(name, sizeof name, "%s-bn240-oai-bias", prefix);
    model_init(&m, name, &s, MOE_FORMAT_BF16, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
    run_model(&m, (run_spec[]){{300, R_IDS, R_IDS_ONE, 64, true}, {700, R_IDS_FEW, R_IDS_FEW, 64, true}},
              quick ? 1 : 2);
    spec_woi_shared_fused(&s);
    snprintf(name, sizeof name, "%s-woi-shared-fused", prefix);
    model_init(&m, name, &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
    run_model(&m, (run_spec[]){{500, R_ROUTER, R_ROUTER, 96, true}}, 1);
    /* top_k 8 and a fused shared expert (9 plan rows a token); rows of 264 16-byte pieces, so the
     * copies take three passes of a warp's 128, the last one partial. */
    moe_layer_spec_init(&s, 16, 2112, 64, 8);
    s.num_shared_experts = 1;
    s.shared_intermediate = 64;
    snprintf(name, sizeof name, "%s-k8-shared-h2112", prefix);
    model_init(&m, name, &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
    run_model(&m, (run_spec[]){{300, R_IDS, R_IDS_NONE, 48, true}}, 1);
    env_restore(&a);
    env_restore(&permute);
    env_restore(&schedule);
}

/* A PERF.md shape: the preset's options with its real H and I, and `experts` experts (the
 * CPU oracle packs and holds every expert; the GPU path is the same for any E). */
static bool preset_shape(const char *preset, int64_t experts, moe_layer_spec *s) {
    moe_model_config cfg;
    if (moe_config_preset(cpu_ctx, preset, &cfg) != MOE_STATUS_OK) return false;
    *s = cfg.layer;
    s->num_experts = experts;
    if (s->n_group > 1) {
        while (s->n_group > 1 && (experts % s->n_group != 0 || experts / s->n_group < 2)) s->n_group /= 2;
        if (s->topk_group > s->n_group) s->topk_group = s->n_group;
        while (s->topk_group * (experts / (s->n_group > 1 ? s->n_group : 1)) < s->top_k) s->topk_group++;
    }
    return moe_layer_spec_validate(cpu_ctx, s) == MOE_STATUS_OK;
}

/* The runs of a PERF.md shape: T = 1, 3, 8, 64, 129, 512, 4096 (or --perf's list), ids
 * given as in the benchmark, the router path at T = 64 and 512; the oracle on 48 tokens. */
static int perf_runs(run_spec r[8]) {
    static const int64_t perf_T[] = {1, 3, 8, 64, 129, 512, 4096};
    const int64_t *Ts = n_perf_T_arg ? perf_T_arg : perf_T;
    const int nT = n_perf_T_arg ? n_perf_T_arg : 7;
    for (int j = 0; j < nT; j++) {
        const int64_t T = Ts[j];
        const int routing = T == 64 || T == 512 ? R_ROUTER : R_IDS;
        const int replay = routing == R_ROUTER ? R_ROUTER : j % 2 ? R_IDS_ONE : R_IDS_FEW;
        r[j] = (run_spec){T, routing, replay, 48, true};
    }
    return nT;
}

/* The bf16 and f16 cases: synthetic edge cases, the Hopper path's shapes, every preset at small
 * H and I, PERF.md's shapes. */
void model_cases(bool quick) {
    model m;
    moe_layer_spec s;

    /* Synthetic edge cases. */
    if (!perf_only) {
        moe_layer_spec_init(&s, 4, 64, 32, 4); /* top_k == E */
        s.renormalize = 1;
        model_init(&m, "topk-eq-E", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r[] = {{0, R_IDS, R_IDS, 64, false}, {1, R_LOGITS, R_LOGITS_TIES, 64, true},
                        {100, R_ROUTER, R_ROUTER, 128, true}};
        run_model(&m, r, 3);

        moe_layer_spec_init(&s, 1, 128, 64, 1); /* E == 1: a dense MLP */
        model_init(&m, "dense-E1", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_F32);
        run_spec r2[] = {{1, R_IDS, R_IDS, 64, true}, {65, R_ROUTER, R_ROUTER, 128, true},
                         {300, R_IDS, R_IDS, 128, true}};
        run_model(&m, r2, 3);

        moe_layer_spec_init(&s, 8, 128, 40, 2);
        s.activation = MOE_ACT_RELU2;
        s.expert_has_bias = 1;
        model_init(&m, "relu2-bias", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r3[] = {{33, R_IDS, R_IDS_ONE, 64, true}, {300, R_LOGITS, R_LOGITS, 128, true},
                         {600, R_IDS_NONE, R_IDS_FEW, 128, true}};
        run_model(&m, r3, 3);

        const moe_activation acts[] = {MOE_ACT_GEGLU, MOE_ACT_GEGLU_TANH, MOE_ACT_REGLU};
        const char *act_names[] = {"geglu", "geglu-tanh", "reglu"};
        for (int a = 0; a < 3; a++) {
            moe_layer_spec_init(&s, 16, 192, 72, 3);
            s.activation = acts[a];
            s.renormalize = 1;
            model_init(&m, act_names[a], &s, MOE_FORMAT_BF16, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            run_spec ra[] = {{77, R_LOGITS, R_LOGITS_TIES, 128, true}};
            run_model(&m, ra, 1);
        }

        moe_layer_spec_init(&s, 32, 256, 64, 6); /* DeepSeek-V4-like: sqrt-softplus, clamp */
        s.score = MOE_SCORE_SQRTSOFTPLUS;
        s.act_limit = 7.0f;
        s.renormalize = 1;
        s.routed_scale = 1.5f;
        s.n_group = 4;
        s.topk_group = 2;
        model_init(&m, "sqrtsoftplus-swiglu-limit", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec r4[] = {{50, R_LOGITS, R_LOGITS_TIES, 128, true}};
        run_model(&m, r4, 1);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* shared expert of another width, gated */
        s.num_shared_experts = 1;
        s.shared_intermediate = 200;
        s.shared_gate = 1;
        s.expert_has_bias = 1;
        model_init(&m, "shared-separate-gate", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec r5[] = {{1, R_IDS, R_IDS_FEW, 64, true}, {130, R_ROUTER, R_ROUTER, 160, true},
                         {600, R_ROUTER, R_ROUTER, 128, true}};
        run_model(&m, r5, 3);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* f16 weights, f32 x with padded rows, f16 y */
        s.renormalize = 1;
        model_init(&m, "f16-x32-strided", &s, MOE_FORMAT_F16, MOE_LAYOUT_CONCAT, MOE_DTYPE_F32, MOE_DTYPE_F16);
        m.x_pad = 8;
        m.y_pad = 16;
        run_spec r6[] = {{70, R_ROUTER, R_ROUTER, 128, true}};
        run_model(&m, r6, 1);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* bf16 x rows padded by 4: not 16-byte aligned */
        model_init(&m, "x-unaligned-rows", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_F32);
        m.x_pad = 4;
        run_spec r7[] = {{45, R_IDS, R_IDS, 128, true}};
        run_model(&m, r7, 1);

        moe_layer_spec_init(&s, 16, 256, 64, 4); /* f16 weights with f16 x: the direct path */
        model_init(&m, "f16", &s, MOE_FORMAT_F16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_F16, MOE_DTYPE_F16);
        run_spec r8[] = {{200, R_LOGITS, R_LOGITS, 128, true}, {600, R_IDS, R_IDS_ONE, 128, true}};
        run_model(&m, r8, 2);
    }

    /* Shapes the Hopper path takes (H, I multiples of 64): every activation through its GLU
     * epilogue, biases, an expert with several 128-row blocks (ids-one-expert), empty experts
     * (ids-few-experts), and weight_on_input (top_k 1) with a fused gated shared expert. */
    if (!perf_only) {
        const moe_activation acts[] = {MOE_ACT_SWIGLU, MOE_ACT_GEGLU, MOE_ACT_GEGLU_TANH, MOE_ACT_REGLU,
                                       MOE_ACT_RELU2, MOE_ACT_SWIGLU_OAI};
        const char *act_names[] = {"tma-swiglu-bias", "tma-geglu", "tma-geglu-tanh", "tma-reglu", "tma-relu2-bias",
                                   "tma-swiglu-oai-bias"};
        for (int a = 0; a < 6; a++) {
            moe_layer_spec_init(&s, 8, 128, 64, 2);
            s.activation = acts[a];
            s.expert_has_bias = a == 0 || a == 4 || a == 5;
            if (acts[a] == MOE_ACT_SWIGLU_OAI) {
                s.act_alpha = 1.702f;
                s.act_limit = 7.0f;
            }
            model_init(&m, act_names[a], &s, MOE_FORMAT_BF16, a % 2 ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_CONCAT,
                       MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            /* (swiglu-bias: the replay with -1 slots, no expert) */
            run_spec ra[] = {{300, R_IDS, a == 0 ? R_IDS_NONE : R_IDS_ONE, 96, true},
                             {700, R_IDS_FEW, R_IDS_FEW, 96, true}};
            run_model(&m, ra, quick ? 1 : 2);
        }
        spec_bn240_oai(&s);
        model_init(&m, "tma-bn240-oai-bias", &s, MOE_FORMAT_BF16, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec rb[] = {{300, R_IDS, R_IDS_ONE, 64, true}, {700, R_IDS_FEW, R_IDS_FEW, 64, true}};
        run_model(&m, rb, quick ? 1 : 2);
        spec_woi_shared_fused(&s);
        model_init(&m, "tma-woi-shared-fused", &s, MOE_FORMAT_BF16, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec rw[] = {{500, R_ROUTER, R_ROUTER, 96, true}, {1, R_IDS, R_IDS, 1, true}};
        run_model(&m, rw, 2);

        /* GEMM1 copying x into plan order itself (MOEFUSE_HOPPER_A=fill, an A/B switch): its idle
         * producer warps copy the rows while the MMAs run (and GEMM1 never gathers; it needs the
         * ticket schedule, forced here too). */
        a_copy_cases("tma-fill", "fill", NULL, quick);
        /* The permute pass (MOEFUSE_HOPPER_A=permute: these small shapes would gather), token by
         * token (the default: each x row stored to its plan rows, then the padding rows zeroed),
         * and in plan order (MOEFUSE_HOPPER_PERMUTE=rows, the A/B arm). */
        a_copy_cases("tma-scatter", "permute", NULL, quick);
        a_copy_cases("tma-rows", "permute", "rows", quick);
    }

    /* Every preset's routing and MLP options at small T (small H and I). */
    for (int p = 0; p < moe_preset_count(); p++) {
        const char *name = moe_preset_name(p);
        if (perf_only || (quick && p % 3 != 0)) continue;
        if (!preset_small(name, &s)) continue;
        char mname[64];
        snprintf(mname, sizeof mname, "%s-small", name);
        model_init(&m, mname, &s, MOE_FORMAT_BF16, p % 2 ? MOE_LAYOUT_SEPARATE : MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16,
                   MOE_DTYPE_BF16);
        run_spec r[] = {{1, R_ROUTER, R_ROUTER, 64, true}, {37, R_ROUTER, R_ROUTER, 64, true},
                        {64, R_LOGITS_TIES, R_LOGITS, 64, true}, {17, R_IDS_ONE, R_IDS_FEW, 64, true}};
        run_model(&m, r, quick ? 2 : 4);
    }

    /* PERF.md's shapes: real H and I, fewer experts; ids given as in the benchmark, the
     * router path at two sizes; big T checked on an oracle subset. */
    static const struct {
        const char *preset;
        int64_t experts;
    } shapes[] = {{"qwen3-30b-a3b", 16}, {"gpt-oss-120b", 8}, {"mixtral-8x7b", 4}, {"deepseek-v3", 16}};
    for (int i = 0; i < 4 && !quick; i++) {
        if (!preset_shape(shapes[i].preset, shapes[i].experts, &s)) {
            printf("note: shape %s unavailable: %s\n", shapes[i].preset, moe_last_error(cpu_ctx));
            continue;
        }
        model_init(&m, shapes[i].preset, &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r[8];
        run_model(&m, r, perf_runs(r));
    }
}

/* The w8a8 forward against the CPU oracle: every weight/act format pair, K tails (H = 320 is
 * 2.5 blocks of 128, I = 208; the presets' I = 96 is one short block), the three W13 layouts,
 * x dtypes and strided rows, RELU2 (an unpaired W13), biases, every activation, the shared
 * expert fused (Is == I) and separate (Is != I, with its gate), weight_on_input, every
 * preset's routing and MLP options at small H and I, and PERF.md's shapes at T in
 * {1, 3, 8, 64, 129, 512, 4096}. Each case is also captured in a CUDA graph and replayed on
 * new inputs (run_case). Names start with "fp8-": --filter fp8 runs these alone. */
void fp8_model_cases(bool quick) {
    const moe_format BLK = MOE_FORMAT_FP8_BLOCK128, TEN = MOE_FORMAT_FP8_TENSOR, ROW = MOE_FORMAT_FP8_ROW128;
    model m;
    moe_layer_spec s;
    if (!perf_only) {
        static const struct {
            const char *name;
            moe_format wf, af;
            moe_gate_up_layout layout;
            moe_dtype x, y;
            int bias;
        } pairs[] = {
            {"fp8-block-row128-tails", MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16,
             MOE_DTYPE_BF16, 1},
            {"fp8-tensor-tensor-tails", MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_TENSOR, MOE_LAYOUT_INTERLEAVED,
             MOE_DTYPE_BF16, MOE_DTYPE_F32, 0},
            {"fp8-block-tensor-tails", MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_TENSOR, MOE_LAYOUT_SEPARATE,
             MOE_DTYPE_F32, MOE_DTYPE_F32, 1},
            {"fp8-tensor-row128-tails", MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_ROW128, MOE_LAYOUT_CONCAT, MOE_DTYPE_F16,
             MOE_DTYPE_F16, 0},
        };
        for (int i = 0; i < 4; i++) {
            moe_layer_spec_init(&s, 8, 320, 208, 2);
            s.renormalize = 1;
            s.expert_has_bias = pairs[i].bias;
            model_init(&m, pairs[i].name, &s, pairs[i].wf, pairs[i].layout, pairs[i].x, pairs[i].y);
            m.act_format = pairs[i].af;
            /* --quick runs the first two: decode (T = 1) and prefill (T = 512: 128 rows an
             * expert, the 128 x 192 tiles with both epilogues, by y's dtype) */
            run_spec r[] = {{1, R_IDS, R_IDS, 64, true}, {512, R_IDS, R_IDS_ONE, 96, true},
                            {3, R_LOGITS, R_LOGITS_TIES, 64, true}, {129, R_ROUTER, R_ROUTER, 64, true}};
            run_model(&m, r, quick ? 2 : 4);
        }

        moe_layer_spec_init(&s, 16, 256, 128, 4); /* x and y rows strided, x rows not 16-byte aligned */
        model_init(&m, "fp8-x-strided", &s, BLK, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = ROW;
        m.x_pad = 4;
        m.y_pad = 8;
        run_spec rx[] = {{45, R_IDS, R_IDS, 128, true}};
        run_model(&m, rx, 1);

        for (int a = 0; a < 2; a++) { /* RELU2: W13 is W1 alone, its blocks not paired */
            moe_layer_spec_init(&s, 8, 256, 144, 2);
            s.activation = MOE_ACT_RELU2;
            s.expert_has_bias = 1;
            model_init(&m, a ? "fp8-relu2-bias-tensor" : "fp8-relu2-bias-row128", &s, BLK, MOE_LAYOUT_SEPARATE,
                       MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            m.act_format = a ? TEN : ROW;
            run_spec r[] = {{33, R_IDS, R_IDS_ONE, 64, true}, {300, R_LOGITS, R_LOGITS, 128, true}};
            run_model(&m, r, quick ? 1 : 2);
        }

        /* Stale rows (regression case for the per-tensor A2 scale): the eager run routes 66
         * rows over all 8 experts (up to 8 plan blocks), the replay to experts 0 and 1 only (2
         * blocks) with x scaled by 2^-8. Without bias every step is homogeneous (relu(.)^2 of a
         * linear map; x's own tensor scale moves by exactly 2^-8), so the replay is the eager
         * computation 2^-16 smaller in A2 and must be as accurate; but the eager run's A2 rows
         * stay in the workspace as the replay's padding rows and rows past its live total (the
         * Hopper GEMM1 writes neither). An amax taken over any of them, or an amax word not
         * reset, makes the A2 scale 2^16 too large: every live code falls to a few subnormal
         * steps (448 / 2^16 < 2^-6), y off by O(0.1-1), far above any tolerance. */
        moe_layer_spec_init(&s, 8, 256, 144, 2);
        s.activation = MOE_ACT_RELU2;
        model_init(&m, "fp8-relu2-stale-rows-tensor", &s, BLK, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = TEN;
        run_spec rs[] = {{33, R_IDS, R_IDS_ONE, 64, true}};
        replay_x_shift = 8;
        run_model(&m, rs, 1);
        replay_x_shift = 0;

        if (!quick) {
            const moe_activation acts[] = {MOE_ACT_GEGLU, MOE_ACT_GEGLU_TANH, MOE_ACT_REGLU, MOE_ACT_SWIGLU_OAI};
            const char *act_names[] = {"fp8-geglu", "fp8-geglu-tanh", "fp8-reglu", "fp8-swiglu-oai-bias"};
            for (int a = 0; a < 4; a++) { /* I = 192: row128 can quantise A2 in GEMM1's epilogue */
                moe_layer_spec_init(&s, 16, 192, 192, 3);
                s.activation = acts[a];
                s.renormalize = 1;
                if (acts[a] == MOE_ACT_SWIGLU_OAI) {
                    s.act_alpha = 1.702f;
                    s.act_limit = 7.0f;
                    s.expert_has_bias = 1;
                }
                model_init(&m, act_names[a], &s, a % 2 ? TEN : BLK, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16,
                           MOE_DTYPE_BF16);
                m.act_format = a % 2 ? TEN : ROW;
                run_spec ra[] = {{77, R_LOGITS, R_LOGITS_TIES, 128, true}};
                run_model(&m, ra, 1);
            }
        }

        for (int a = 0; a < 2; a++) { /* a shared expert of another width (own A2 tensor), gated */
            moe_layer_spec_init(&s, 16, 256, 96, 4);
            s.num_shared_experts = 1;
            s.shared_intermediate = 160;
            s.shared_gate = 1;
            s.expert_has_bias = 1;
            model_init(&m, a ? "fp8-shared-separate-gate-tensor" : "fp8-shared-separate-gate-row128", &s, a ? TEN : BLK,
                       MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            m.act_format = a ? TEN : ROW;
            run_spec r[] = {{1, R_IDS, R_IDS_FEW, 64, true}, {130, R_ROUTER, R_ROUTER, 160, true},
                            {600, R_ROUTER, R_ROUTER, 128, true}};
            run_model(&m, r, quick ? 1 : 3);
        }

        /* weight_on_input, a fused gated shared expert (rows of its own tensor); I = 192 (H, I >=
         * 128: the Hopper path; 1.5 groups of 128: with MOEFUSE_FP8_A2=epilogue row128 quantises A2
         * in GEMM1's epilogue, the second group from one W13 tile) */
        for (int a = 0; a < 2; a++) {
            moe_layer_spec_init(&s, 8, 128, 192, 1);
            s.weight_on_input = 1;
            s.num_shared_experts = 1;
            s.shared_intermediate = 192;
            s.shared_gate = 1;
            s.expert_has_bias = 1;
            model_init(&m, a ? "fp8-woi-shared-fused-tensor" : "fp8-woi-shared-fused-row128", &s, BLK,
                       MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_F32);
            m.act_format = a ? TEN : ROW;
            run_spec r[] = {{500, R_ROUTER, R_ROUTER, 96, true}, {1, R_IDS, R_IDS, 1, true}};
            run_model(&m, r, quick ? 1 : 2);
        }

        /* The swapped decode kernel (Hopper, at most 16 routed rows an expert), block + row128:
         * W13 of 5 tiles of 128 rows and an expert of 40 rows (two plan blocks); RELU2; a fused
         * gated shared expert with weight_on_input; and 64 experts at T = 64 with K = 1024 (8
         * k-blocks a GEMM1 tile): ~320 GEMM1 units for 132 SMs, so CTAs run several units and the
         * 8-stage ring wraps, the case racecheck needs to see its stage hand-backs. */
        moe_layer_spec_init(&s, 16, 256, 320, 4);
        s.expert_has_bias = 1;
        s.renormalize = 1;
        model_init(&m, "fp8-swap-gated-row128", &s, BLK, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = ROW;
        run_spec rq[] = {{1, R_IDS, R_IDS, 64, true}, {40, R_IDS_ONE, R_IDS_FEW, 64, true}};
        run_model(&m, rq, 2);
        moe_layer_spec_init(&s, 8, 256, 256, 2);
        s.activation = MOE_ACT_RELU2;
        s.expert_has_bias = 1;
        model_init(&m, "fp8-swap-relu2-row128", &s, BLK, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = ROW;
        run_spec rr[] = {{33, R_LOGITS, R_LOGITS, 64, true}};
        run_model(&m, rr, 1);
        moe_layer_spec_init(&s, 8, 128, 256, 1);
        s.weight_on_input = 1;
        s.num_shared_experts = 1;
        s.shared_intermediate = 256;
        s.shared_gate = 1;
        s.expert_has_bias = 1;
        model_init(&m, "fp8-swap-woi-shared-row128", &s, BLK, MOE_LAYOUT_SEPARATE, MOE_DTYPE_BF16, MOE_DTYPE_F32);
        m.act_format = ROW;
        run_spec rw[] = {{20, R_ROUTER, R_ROUTER, 64, true}};
        run_model(&m, rw, 1);
        moe_layer_spec_init(&s, 64, 1024, 320, 4);
        s.expert_has_bias = 1;
        model_init(&m, "fp8-swap-ring-row128", &s, BLK, MOE_LAYOUT_INTERLEAVED, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = ROW;
        run_spec rg[] = {{64, R_IDS, R_IDS, 64, true}};
        run_model(&m, rg, 1);

        /* Every preset's options at small H and I (quick: every sixth): alternately block +
         * row128 and tensor + tensor. */
        for (int p = 0; p < moe_preset_count(); p++) {
            const char *name = moe_preset_name(p);
            if (quick && p % 6 != 0) continue;
            if (!preset_small(name, &s)) continue;
            char mname[64];
            snprintf(mname, sizeof mname, "fp8-%s-small", name);
            model_init(&m, mname, &s, p % 2 ? TEN : BLK, p % 2 ? MOE_LAYOUT_SEPARATE : MOE_LAYOUT_CONCAT,
                       MOE_DTYPE_BF16, MOE_DTYPE_BF16);
            m.act_format = p % 2 ? TEN : ROW;
            run_spec r[] = {{1, R_ROUTER, R_ROUTER, 64, true}, {37, R_ROUTER, R_ROUTER, 64, true},
                            {64, R_LOGITS_TIES, R_LOGITS, 64, true}, {17, R_IDS_ONE, R_IDS_FEW, 64, true}};
            run_model(&m, r, quick ? 2 : 4);
        }
    }

    /* PERF.md's shapes (real H and I, fewer experts: the CPU packs and holds every one), as the
     * bf16 list runs them; block + row128 (DeepSeek's recipe) on all, tensor + tensor on qwen3
     * (its oracle runs on all T tokens, see check_outputs: ~0.3 TFLOP of CPU work at T=4096).
     * Named fp8-perf-*, so that the bf16 filters of run_on_device.sh's sanitizer stages
     * (qwen3-30b-a3b) do not pick them up. */
    static const struct {
        const char *preset, *name;
        int64_t experts;
        moe_format wf, af;
    } shapes[] = {{"qwen3-30b-a3b", "fp8-perf-qwen3", 16, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128},
                  {"qwen3-30b-a3b", "fp8-perf-qwen3-tensor", 16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_TENSOR},
                  {"gpt-oss-120b", "fp8-perf-gpt-oss", 8, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128},
                  {"deepseek-v3", "fp8-perf-deepseek", 8, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_ROW128}};
    for (int i = 0; i < 4 && !quick; i++) {
        if (!preset_shape(shapes[i].preset, shapes[i].experts, &s)) {
            printf("note: shape %s unavailable: %s\n", shapes[i].preset, moe_last_error(cpu_ctx));
            continue;
        }
        model_init(&m, shapes[i].name, &s, shapes[i].wf, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        m.act_format = shapes[i].af;
        run_spec r[8];
        run_model(&m, r, perf_runs(r));
    }
}

/* --big: T = 262144 on deepseek-v3's H and I. */
void big_model_case(void) {
    model m;
    moe_layer_spec s;
    /* 64-bit offsets: T = 262144 on deepseek-v3's H and I (T*k*H = 1.5e10 fp32 rows > 2^32). */
    if (preset_shape("deepseek-v3", 16, &s)) {
        model_init(&m, "deepseek-v3-big", &s, MOE_FORMAT_BF16, MOE_LAYOUT_CONCAT, MOE_DTYPE_BF16, MOE_DTYPE_BF16);
        run_spec r[] = {{262144, R_IDS, R_IDS, 24, false}};
        run_model(&m, r, 1);
    }
}
