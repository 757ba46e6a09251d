/* Roofline with tile and wave quantisation, per GEMM row of a shape list. */
#include "analysis_internal.h"
#include "../cuda/hopper/gemm_dense.h" /* the dense engine's tile-width rule (plain C, inline) */
#include "../cuda/hopper/gemm_fp8.h"   /* the same for its FP8 block-scaled GEMM */

#include <math.h>
#include <stdlib.h>
#include <string.h>

int moe_tile_menu(moe_dtype dtype, moe_tile *tiles, int32_t *tile_k) {
    /* The CTA tiles of Hopper wgmma kernels with two consumer warpgroups of 64-row wgmma (128 rows,
     * N 128 or 256; cuBLAS's cooperative kernels also 256 x 128). A one-warpgroup 64-row tile is
     * left out: it cannot keep an SM's tensor cores as busy (no second warpgroup to cover its waits
     * and epilogue), and at the full per-SM rate it predicted the H200's one-wave cuBLAS times
     * 1.4-3.5x too fast (lab/results/2026-12-02-h200*: 1000^3 bf16, 1000x1040x1000 fp8), which
     * 128-row tiles match. */
    static const moe_tile menu[] = {{128, 128}, {128, 256}, {256, 128}};
    int n = (int)(sizeof menu / sizeof menu[0]);
    if (tiles)
        for (int i = 0; i < n; i++) tiles[i] = menu[i];
    if (tile_k) *tile_k = dtype == MOE_DTYPE_E4M3 ? 128 : 64;
    return n;
}

const char *moe_kernel_family_name(moe_kernel_family kernel) {
    switch (kernel) {
    case MOE_KERNEL_LIBRARY: return "library";
    case MOE_KERNEL_HOPPER_BF16: return "hopper";
    case MOE_KERNEL_HOPPER_FP8: return "hopper-fp8";
    case MOE_KERNEL_V1: return "v1";
    case MOE_KERNEL_HOPPER_FP8_DECODE: return "hopper-fp8-decode";
    case MOE_KERNEL_HOPPER_BF16_DECODE: return "hopper-bf16-decode";
    }
    return "unknown";
}

moe_kernel_family moe_grouped_kernel_select(moe_dtype dtype, int64_t routed_rows, int64_t experts, int64_t hidden,
                                            int64_t intermediate) {
    if (dtype != MOE_DTYPE_BF16 && dtype != MOE_DTYPE_E4M3) return MOE_KERNEL_LIBRARY;
    /* the forward's own rule (src/core/gemm_select.c), as it runs without MOEFUSE_GEMM */
    if (moe__gemm_select(routed_rows, experts, hidden, intermediate, dtype, MOE__GEMM_AUTO) == MOE__CUDA_GEMM_V1) {
        /* bf16 at decode on the swapped kernel, where Hopper can run these shapes (forward.cu's swap_path) */
        const int hopper_can = moe__gemm_select(INT64_MAX, experts, hidden, intermediate, dtype, MOE__GEMM_AUTO) ==
                               MOE__CUDA_GEMM_HOPPER;
        return dtype == MOE_DTYPE_BF16 && hopper_can && moe__bf16_swap_select(routed_rows, experts)
                   ? MOE_KERNEL_HOPPER_BF16_DECODE
                   : MOE_KERNEL_V1;
    }
    if (dtype == MOE_DTYPE_BF16) return MOE_KERNEL_HOPPER_BF16;
    return moe__fp8_swap_select(routed_rows, experts) ? MOE_KERNEL_HOPPER_FP8_DECODE : MOE_KERNEL_HOPPER_FP8;
}

double moe_attended_tokens(const moe_model_config *cfg, int64_t context) {
    if (!cfg || context <= 0) return 0.0;
    double sum = 0.0;
    for (int64_t l = 0; l < cfg->num_layers && l < MOE_MAX_LAYERS; l++)
        sum += (double)(cfg->layer_is_windowed[l] && cfg->attention_window > 0 && cfg->attention_window < context
                            ? cfg->attention_window
                            : context);
    return sum;
}

double moe_kv_bytes_per_token_layer(const moe_model_config *cfg, int64_t tp) {
    if (!cfg) return 0.0;
    if (tp < 1) tp = 1;
    if (cfg->kv_lora_rank > 0) /* MLA caches the latent and the rope key, shared by all heads */
        return 2.0 * (double)(cfg->kv_lora_rank + cfg->qk_rope_head_dim);
    int64_t hd = cfg->head_dim > 0 ? cfg->head_dim : (cfg->num_heads > 0 ? cfg->layer.hidden / cfg->num_heads : 0);
    int64_t kv = cfg->num_kv_heads >= tp ? cfg->num_kv_heads / tp : 1;
    return 2.0 * 2.0 * (double)kv * (double)hd; /* k and v, 2 bytes each */
}

static double ceil_div(double a, double b) { return ceil(a / b); }

/* One launch of the row (one layer: for routed experts, the grouped GEMM over this GPU's
 * experts), for one tile: fills time, tiles, waves and efficiencies. */
typedef struct launch_model {
    double time, compute, tiles, waves, tile_eff, wave_eff;
} launch_model;

/* The kernel a launch is modelled on: its tiles (the library's menu, or a moefuse kernel's one),
 * k step, concurrent CTAs and sustained rate; library kernels may also split K or run stream-K. */
typedef struct engine {
    moe_kernel_family kernel;
    const moe_tile *tiles;
    int ntiles;
    int32_t tile_k;
    double rate;       /* FLOP/s over the whole GPU */
    double power_rate; /* the dtype's peak: the tensor cores' rate at the power limit (power_bound) */
    double slots;      /* concurrent CTAs: SMs x CTAs per SM */
} engine;

/* How a routed row's tokens fall on the experts of one launch. */
typedef struct row_context {
    const moe_gpu_spec *gpu;
    int64_t tokens;         /* T (Binomial) */
    double experts_here, p; /* routed experts on this GPU, k/E */
    int64_t even_rows;      /* > 0: exactly these rows spread evenly over experts_here (a timed launch) */
} row_context;

/* The tiles of moefuse's grouped kernels (src/cuda/hopper/grouped_kernel.cuh BM x GBN x BK,
 * grouped_fp8_kernel.cuh FP8_BM x FP8_BN x FP8_BK, both persistent with one CTA per SM;
 * src/cuda/gemm.cuh GEMM_BM x GEMM_BN x GEMM_BK and gemm_fp8_v1.cuh's 64 x 128 x 128, whose
 * 96 KB of stages let 2 CTAs share an SM; decode_swap_kernel.cuh's unit of a 32-row plan block
 * by 128 weight rows). The plan block is the tile's rows. */
static const moe_tile hopper_bf16_tile = {128, 256}, hopper_fp8_tile = {128, 128}, v1_tile = {64, 128},
                      swap_decode_tile = {MOE__FP8_SWAP_BLOCK_ROWS, 128};

static engine make_engine(const moe_gpu_spec *g, moe_dtype dtype, moe_kernel_family kernel, const moe_tile *menu,
                          int nmenu) {
    const double peak = dtype == MOE_DTYPE_E4M3 ? g->fp8_flops : g->bf16_flops, sms = (double)g->sms;
    engine e = {kernel, menu, nmenu, dtype == MOE_DTYPE_E4M3 ? 128 : 64, peak, peak, sms * (double)g->ctas_per_sm};
    double rate = 0.0;
    switch (kernel) {
    case MOE_KERNEL_HOPPER_BF16:
        e.tiles = &hopper_bf16_tile, e.ntiles = 1, e.slots = sms, rate = g->hopper_bf16_flops;
        break;
    case MOE_KERNEL_HOPPER_FP8:
        e.tiles = &hopper_fp8_tile, e.ntiles = 1, e.slots = sms, rate = g->hopper_fp8_flops;
        break;
    case MOE_KERNEL_HOPPER_FP8_DECODE: /* the same wgmma rate: at decode the weight stream binds */
        e.tiles = &swap_decode_tile, e.ntiles = 1, e.slots = sms, rate = g->hopper_fp8_flops;
        break;
    case MOE_KERNEL_HOPPER_BF16_DECODE:
        e.tiles = &swap_decode_tile, e.ntiles = 1, e.slots = sms, rate = g->hopper_bf16_flops;
        break;
    case MOE_KERNEL_V1: /* its e4m3 MMAs run as f16 ones (forward.cu): the bf16 power rate */
        e.tiles = &v1_tile, e.ntiles = 1, e.slots = 2.0 * sms, rate = g->v1_flops, e.power_rate = g->bf16_flops;
        break;
    case MOE_KERNEL_LIBRARY:
        break;
    }
    if (rate > 0) e.rate = rate;
    return e;
}

/* E[Σ_e ⌈n_e/block⌉] over this GPU's experts: Binomial counts, or the timed launch's even spread. */
static double routed_blocks(const row_context *rc, double block) {
    if (rc->even_rows > 0) {
        double base = floor((double)rc->even_rows / rc->experts_here);
        double extra = (double)rc->even_rows - base * rc->experts_here; /* experts with one row more */
        return (rc->experts_here - extra) * ceil_div(base, block) + extra * ceil_div(base + 1, block);
    }
    return rc->experts_here * moe_binomial_expected_ceil(rc->tokens, rc->p, (int64_t)block);
}

/* The power limit: the MMAs a launch executes (padded tiles included) at the rate the tensor cores
 * reach alone at the power limit, plus the share of the power its memory stream takes
 * (moe_gpu_spec.stream_power_share). It binds only where both are busy; 0 with no share. */
static double power_bound(const row_context *rc, const engine *e, double executed_flops, double memory_s) {
    if (e->kernel == MOE_KERNEL_LIBRARY || !(rc->gpu->stream_power_share > 0)) return 0.0;
    return executed_flops / e->power_rate + rc->gpu->stream_power_share * memory_s;
}

static launch_model model_launch(const row_context *rc, const engine *e, const moe_gemm_row *r, moe_tile t, int split,
                                 double launch_bytes) {
    launch_model lm;
    double tm = t.m, tn = t.n, tk = e->tile_k, tile_rate = e->rate / e->slots;
    int routed = r->kind == MOE_GEMM_EXPERT_GATE_UP || r->kind == MOE_GEMM_EXPERT_DOWN;
    double k_eff; /* reduction length per tile */
    if (routed && r->pass != MOE_PASS_WGRAD) {
        /* rows of each expert padded to the tile height (the plan block) */
        lm.tiles = routed_blocks(rc, tm) * ceil_div(r->n, tn);
        k_eff = ceil_div(r->k, tk) * tk;
        lm.tile_eff = lm.tiles > 0 ? (r->m * rc->experts_here * r->n) / (lm.tiles * tm * tn) * (r->k / k_eff) : 1.0;
    } else if (routed) {
        /* Wgrad: a fixed output grid per touched expert, reduction over its n_e tokens */
        double touched = r->touched / (double)(r->layer_count > 0 ? r->layer_count : 1);
        double grid = ceil_div(r->m, tm) * ceil_div(r->n, tn);
        lm.tiles = touched * grid;
        double k_sum = routed_blocks(rc, tk) * tk; /* Σ ⌈n_e/tk⌉tk */
        k_eff = touched > 0 ? k_sum / touched : 0.0;
        lm.tile_eff = (r->m * r->n) / (grid * tm * tn) * (k_sum > 0 ? r->k * rc->experts_here / k_sum : 1.0);
    } else {
        /* split-K: `split` CTAs share an output tile, each reducing a slice of K; their fp32
         * partials are written and read back once by the reduction */
        double out_tiles = ceil_div(r->m, tm) * ceil_div(r->n, tn);
        lm.tiles = out_tiles * split;
        k_eff = ceil_div(ceil_div(r->k, split), tk) * tk;
        lm.tile_eff = (r->m * r->n * r->k) / (lm.tiles * tm * tn * k_eff);
        if (split > 1) launch_bytes += 2.0 * split * r->m * r->n * 4.0;
    }
    lm.waves = ceil(lm.tiles / e->slots - 1e-9);
    if (lm.waves < 1) lm.waves = 1;
    lm.wave_eff = lm.tiles / (lm.waves * e->slots);
    /* the wave's output store after its mainloop (epilogue_exposed of it not overlapped): its
     * tiles' outputs (bf16, or split-K's fp32 partials) at the read bandwidth they share */
    double out_bytes = split > 1 ? 4.0 : 2.0;
    double store = rc->gpu->epilogue_exposed * fmin(lm.tiles, e->slots) * tm * tn * out_bytes / rc->gpu->read_bw;
    lm.compute = lm.waves * (2.0 * tm * tn * k_eff / tile_rate + store);
    double memory = launch_bytes / rc->gpu->read_bw;
    double power = power_bound(rc, e, lm.tiles * 2.0 * tm * tn * k_eff, memory);
    lm.time = fmax(fmax(lm.compute, memory), power) + rc->gpu->launch_s;
    return lm;
}

/* Greatest common divisor of two whole numbers held in doubles (each < 2^63). */
static double gcd64(double a, double b) {
    int64_t x = (int64_t)a, y = (int64_t)b;
    while (y) {
        int64_t r = x % y;
        x = y;
        y = r;
    }
    return (double)x;
}

/* Stream-K, a plain GEMM's other way to fill the GPU (assumed of cuBLAS's Hopper kernels, as
 * CUTLASS's SM90 scheduler has it: cuBLAS ran N = 576 and M = 512 GEMMs with no wave loss, see
 * docs/roofline_model.md): the output tiles' k-steps, laid end to end, are dealt out in equal
 * runs of ⌈tiles·ksteps/slots⌉ to the CTAs, so no wave is left part empty. A tile whose k-steps fall in several CTAs' runs is finished by one of them (its owner),
 * which adds its peers' fp32 partials. Returns the launch with tiles = output tiles, waves = one
 * CTA's k-steps in tiles (fractional). */
static launch_model model_stream_k(const row_context *rc, const engine *e, const moe_gemm_row *r, moe_tile t,
                                   double launch_bytes) {
    launch_model lm;
    double tm = t.m, tn = t.n, tk = e->tile_k, tile_rate = e->rate / e->slots;
    double out_tiles = ceil_div(r->m, tm) * ceil_div(r->n, tn), ksteps = ceil_div(r->k, tk);
    double total = out_tiles * ksteps; /* < 2^61 (T <= 2^32): whole numbers, exact below 2^53 */
    if (!(total >= 1)) { /* an empty GEMM: nothing to deal out (the grid model handles it) */
        memset(&lm, 0, sizeof lm);
        lm.time = INFINITY;
        return lm;
    }
    double per_cta = ceil(total / e->slots), ctas = ceil(total / per_cta);
    /* runs start every per_cta k-steps, tiles every ksteps: a tile boundary inside a run splits it */
    double aligned_every = per_cta / gcd64(ksteps, per_cta); /* every so many tiles the two coincide */
    double segments = ctas + (out_tiles - 1) - floor((out_tiles - 1) / aligned_every);
    double partials = segments - out_tiles; /* (run, tile) pieces that are not their tile's owner */
    /* CTAs sharing one tile, at most: its k-steps over a run's, plus one for a run boundary inside */
    double sharers = fmin(ctas, ceil(ksteps / per_cta) + (fmod(ksteps, per_cta) != 0));
    double partial_bytes = tm * tn * 4.0;
    /* a peer stores its partial when its piece ends, overlapped with the rest of its run; the owner
     * reads them after its own piece, one after another, and the owners do so together at the end
     * of their runs, each at its SM's share of the read bandwidth (pessimistic when a few owners
     * read many partials: then split-K's grid wins, as it does in the libraries) */
    double fixup = partials > 0 ? (sharers - 1) * partial_bytes / (rc->gpu->read_bw / e->slots) : 0.0;
    /* each tile's output is stored once, by its owner, after its mainloop (as in model_launch) */
    double store = rc->gpu->epilogue_exposed * out_tiles * tm * tn * 2.0 / rc->gpu->read_bw;
    lm.tiles = out_tiles;
    lm.waves = per_cta / ksteps;
    lm.wave_eff = total / (per_cta * e->slots);
    lm.tile_eff = (r->m * r->n * r->k) / (out_tiles * tm * tn * ksteps * tk);
    lm.compute = per_cta * 2.0 * tm * tn * tk / tile_rate + store + fixup;
    /* the partials are written and read back once each */
    double memory = (launch_bytes + 2.0 * partials * partial_bytes) / rc->gpu->read_bw;
    double power = power_bound(rc, e, total * 2.0 * tm * tn * tk, memory);
    lm.time = fmax(fmax(lm.compute, memory), power) + rc->gpu->launch_s;
    return lm;
}

/* The best launch of row r on engine e: each of its tiles; a library kernel also split-K (2..32
 * CTAs per tile, at least two k-steps a slice) and, for plain rows, stream-K. */
static launch_model best_launch(const row_context *rc, const engine *e, const moe_gemm_row *r, double launch_bytes,
                                moe_tile *tile, int32_t *split_k) {
    int routed = r->kind == MOE_GEMM_EXPERT_GATE_UP || r->kind == MOE_GEMM_EXPERT_DOWN;
    int library = e->kernel == MOE_KERNEL_LIBRARY;
    launch_model best = {INFINITY, 0, 0, 0, 0, 0};
    for (int t = 0; t < e->ntiles; t++)
        for (int split = 1; split <= (routed || !library ? 1 : 32); split *= 2) {
            if (split > 1 && r->k / split < 2.0 * e->tile_k) break;
            launch_model lm = model_launch(rc, e, r, e->tiles[t], split, launch_bytes);
            /* ties go to the earlier tile (the menu lists the preferred first) and no split */
            if (lm.time < best.time * (1.0 - 1e-9)) {
                best = lm;
                *tile = e->tiles[t];
                *split_k = split;
            }
        }
    if (!routed && library) /* moefuse's grouped expert kernels have no stream-K schedule */
        for (int t = 0; t < e->ntiles; t++) {
            launch_model lm = model_stream_k(rc, e, r, e->tiles[t], launch_bytes);
            if (lm.time < best.time * (1.0 - 1e-9)) { /* ties keep the data-parallel or split-K grid */
                best = lm;
                *tile = e->tiles[t];
                *split_k = 0;
            }
        }
    return best;
}

void moe_roofline_free(moe_roofline *roof) {
    if (!roof) return;
    free(roof->rows);
    free(roof);
}

/* The checks every one-launch prediction (fn) starts with: a public call, its pointers, the GPU,
 * the dtype (bf16 or e4m3); *seconds is 0 until the prediction. */
static moe_status check_launch(moe_context_t *ctx, const char *fn, const moe_gpu_spec *gpu, moe_dtype dtype,
                               double *seconds) {
    moe__clear_error(ctx);
    if (!gpu || !seconds) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: %s is NULL", fn, !gpu ? "gpu" : "seconds");
    *seconds = 0.0;
    moe_status st = moe__gpu_check(ctx, gpu);
    if (st != MOE_STATUS_OK) return st;
    if (dtype != MOE_DTYPE_BF16 && dtype != MOE_DTYPE_E4M3)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: dtype %s, expected bf16 or e4m3", fn,
                          moe_dtype_name(dtype));
    return MOE_STATUS_OK;
}

moe_status moe_grouped_launch_time(moe_context_t *ctx, const moe_gpu_spec *gpu, moe_dtype dtype,
                                   moe_kernel_family kernel, int64_t experts, int64_t rows, int64_t k, int64_t n,
                                   double *seconds) {
    moe_status st = check_launch(ctx, "moe_grouped_launch_time", gpu, dtype, seconds);
    if (st != MOE_STATUS_OK) return st;
    if (kernel != MOE_KERNEL_HOPPER_BF16 && kernel != MOE_KERNEL_HOPPER_FP8 && kernel != MOE_KERNEL_V1 &&
        !(kernel == MOE_KERNEL_HOPPER_FP8_DECODE && dtype == MOE_DTYPE_E4M3) &&
        !(kernel == MOE_KERNEL_HOPPER_BF16_DECODE && dtype == MOE_DTYPE_BF16))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_grouped_launch_time: kernel %d (dtype %s) is not one of moefuse's grouped kernels "
                          "(hopper-fp8-decode runs e4m3 only, hopper-bf16-decode bf16 only)",
                          (int)kernel, moe_dtype_name(dtype));
    if (experts < 1 || rows < 1 || k < 1 || n < 1 || experts > MOE__ANALYSIS_TOKENS_MAX ||
        rows > MOE__ANALYSIS_TOKENS_MAX || k > INT32_MAX || n > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_grouped_launch_time: experts %lld, rows %lld, k %lld, n %lld: expected experts and rows in "
                          "1..2^32, k and n in 1..2^31-1",
                          (long long)experts, (long long)rows, (long long)k, (long long)n);
    /* the launch as one routed Fprop row of one layer: `experts` instances of rows/experts x k x n */
    moe_gemm_row r;
    memset(&r, 0, sizeof r);
    r.kind = MOE_GEMM_EXPERT_GATE_UP;
    r.pass = MOE_PASS_FPROP;
    r.layer_count = 1;
    r.m = (double)rows / (double)experts, r.k = (double)k, r.n = (double)n;
    const double operand = moe__operand_bytes(dtype), output = moe__output_bytes(dtype);
    const double bytes = (double)rows * r.k * operand + (double)rows * r.n * output + (double)experts * r.k * r.n * operand;
    row_context rc = {gpu, 0, (double)experts, 0.0, rows};
    engine e = make_engine(gpu, dtype, kernel, NULL, 0);
    moe_tile tile;
    int32_t split;
    *seconds = best_launch(&rc, &e, &r, bytes, &tile, &split).time;
    return MOE_STATUS_OK;
}

moe_status moe_dense_launch_time(moe_context_t *ctx, const moe_gpu_spec *gpu, moe_dtype dtype, int64_t m, int64_t k,
                                 int64_t n, double *seconds) {
    moe_status st = check_launch(ctx, "moe_dense_launch_time", gpu, dtype, seconds);
    if (st != MOE_STATUS_OK) return st;
    if (m < 1 || k < 1 || n < 1 || m > INT32_MAX || k > INT32_MAX || n > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_dense_launch_time: m %lld, k %lld, n %lld: expected each in 1..2^31-1", (long long)m,
                          (long long)k, (long long)n);
    moe_gemm_row r;
    memset(&r, 0, sizeof r);
    r.kind = MOE_GEMM_ATTN_O; /* any kind that is not a routed expert: one plain GEMM */
    r.pass = MOE_PASS_FPROP;
    r.layer_count = 1;
    r.m = (double)m, r.k = (double)k, r.n = (double)n;
    const double bytes = (r.m * r.k + r.k * r.n) * moe__operand_bytes(dtype) + r.m * r.n * moe__output_bytes(dtype);
    const int fp8 = dtype == MOE_DTYPE_E4M3;
    /* the engine's tile: the width its rule picks on this GPU's SMs (FP8: 128 as the grouped FP8
     * kernel, or 192 on large outputs, at the same family rate) */
    const moe_tile tile = fp8 ? (moe_tile){MOE__HOPPER_FP8_BM, moe__hopper_gemm_fp8_block_n(m, n, gpu->sms)}
                              : (moe_tile){MOE__HOPPER_DENSE_BM, moe__hopper_gemm_dense_block_n(m, n, gpu->sms)};
    engine e = make_engine(gpu, dtype, fp8 ? MOE_KERNEL_HOPPER_FP8 : MOE_KERNEL_HOPPER_BF16, NULL, 0);
    e.tiles = &tile;
    row_context rc = {gpu, 0, 0.0, 0.0, 0};
    moe_tile chosen;
    int32_t split;
    *seconds = best_launch(&rc, &e, &r, bytes, &chosen, &split).time;
    return MOE_STATUS_OK;
}

moe_status moe__shape_list_check(moe_context_t *ctx, const moe_shape_list *list) {
    if (list->num_rows < 0 || (list->num_rows > 0 && !list->rows))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "list: num_rows = %lld with rows %s, expected >= 0 rows",
                          (long long)list->num_rows, list->rows ? "given" : "NULL");
    for (int64_t i = 0; i < list->num_rows; i++)
        if ((unsigned)list->rows[i].pass >= MOE_PASS_COUNT_ || (unsigned)list->rows[i].kind >= MOE_GEMM_KIND_COUNT_)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                              "list: rows[%lld] has pass %d and kind %d, expected 0..%d and 0..%d", (long long)i,
                              (int)list->rows[i].pass, (int)list->rows[i].kind, MOE_PASS_COUNT_ - 1,
                              MOE_GEMM_KIND_COUNT_ - 1);
    return MOE_STATUS_OK;
}

moe_status moe_roofline_create(moe_context_t *ctx, const moe_shape_list *list, const moe_gpu_spec *gpu,
                               moe_roofline **out) {
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_roofline_create: out is NULL");
    *out = NULL;
    if (!list || !gpu)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_roofline_create: %s is NULL", !list ? "list" : "gpu");
    moe_status st = moe__gpu_check(ctx, gpu);
    if (st != MOE_STATUS_OK) return st;
    if ((st = moe__shape_list_check(ctx, list)) != MOE_STATUS_OK) return st;
    moe_roofline *rf = calloc(1, sizeof *rf);
    if (rf) rf->rows = calloc((size_t)(list->num_rows > 0 ? list->num_rows : 1), sizeof *rf->rows);
    if (!rf || !rf->rows) {
        moe_roofline_free(rf);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "roofline: out of host memory");
    }
    rf->gpu = *gpu;
    rf->num_rows = list->num_rows;
    const moe_dtype dtype = list->options.dtype;
    rf->peak_flops = dtype == MOE_DTYPE_E4M3 ? gpu->fp8_flops : gpu->bf16_flops;
    rf->ridge = rf->peak_flops / gpu->read_bw;

    const moe_model_config *c = &list->config;
    row_context rc = {gpu, list->tokens, 0, 0, 0};
    moe_tile menu[MOE_TILE_MENU_MAX];
    const int ntiles = moe_tile_menu(dtype, menu, NULL);
    const engine library = make_engine(gpu, dtype, MOE_KERNEL_LIBRARY, menu, ntiles);
    engine grouped = library; /* routed Fprop: moefuse's grouped kernel, chosen as the forward does */
    moe_routing_stats stats;
    memset(&stats, 0, sizeof stats);
    if (c->is_moe && c->num_moe_layers > 0) {
        rc.experts_here = (double)(c->layer.num_experts / list->options.ep);
        rc.p = (double)c->layer.top_k / (double)c->layer.num_experts;
        st = moe_routing_stats_compute(ctx, list->tokens, c->layer.num_experts, c->layer.top_k, 128, &stats);
        if (st != MOE_STATUS_OK) {
            moe_roofline_free(rf);
            return st;
        }
        int64_t routed_rows; /* T·k, saturated: the rules only compare it with multiples of E */
        if (!moe__mul64(list->tokens, c->layer.top_k, &routed_rows)) routed_rows = INT64_MAX;
        /* The forward counts a shared expert fused into the stack (same intermediate size) among the
         * experts of its decode rules (forward.cu's swap_path); its 128·E rule counts the routed ones. */
        const moe_layer_spec *l = &c->layer;
        const int fused = l->num_shared_experts > 0 && l->shared_intermediate == l->intermediate;
        moe_kernel_family kernel = moe_grouped_kernel_select(dtype, routed_rows, l->num_experts + fused, l->hidden,
                                                             l->intermediate);
        if (moe_grouped_kernel_select(dtype, routed_rows, l->num_experts, l->hidden, l->intermediate) ==
            MOE_KERNEL_HOPPER_BF16)
            kernel = MOE_KERNEL_HOPPER_BF16; /* at or above 128 rows per routed expert: the tiles */
        grouped = make_engine(gpu, dtype, kernel, menu, ntiles);
    }

    for (int64_t i = 0; i < list->num_rows; i++) {
        const moe_gemm_row *r = &list->rows[i];
        moe_roofline_row *o = &rf->rows[i];
        int routed = r->kind == MOE_GEMM_EXPERT_GATE_UP || r->kind == MOE_GEMM_EXPERT_DOWN;
        /* one launch per instance; routed experts: one grouped launch per layer */
        double launches = routed ? (double)r->layer_count : (double)r->count;
        double launch_bytes = r->bytes / launches;
        double compute_ideal = r->flops / rf->peak_flops, memory_ideal = r->bytes / gpu->read_bw;
        o->ideal_s = fmax(compute_ideal, memory_ideal);
        o->compute_bound = compute_ideal > memory_ideal;
        const engine *e = routed && r->pass == MOE_PASS_FPROP ? &grouped : &library;
        o->kernel = e->kernel;
        launch_model best = best_launch(&rc, e, r, launch_bytes, &o->tile, &o->split_k);
        o->time_s = best.time * launches;
        o->tiles = best.tiles;
        o->waves = best.waves;
        o->tile_efficiency = best.tile_eff;
        o->wave_efficiency = best.wave_eff;
        o->achieved_flops = o->time_s > 0 ? r->flops / o->time_s : 0.0;
        if (routed) {
            o->padding_waste = stats.padding_waste;
            o->expected_max_load = stats.expected_max_load;
            o->experts_touched = stats.experts_touched;
        }
        rf->total_time_s += o->time_s;
        rf->ideal_time_s += o->ideal_s;
        if (o->compute_bound) rf->compute_bound_time_s += o->time_s;
        else rf->memory_bound_time_s += o->time_s;
        rf->pass_time_s[r->pass] += o->time_s;
        rf->kind_time_s[r->kind] += o->time_s;
    }
    if (list->options.mode == MOE_STEP_DECODE) {
        rf->kv_cache_bytes = moe_attended_tokens(c, list->options.context) * (double)list->options.batch *
                             moe_kv_bytes_per_token_layer(c, list->options.tp);
        rf->kv_cache_s = rf->kv_cache_bytes / gpu->read_bw;
    }
    *out = rf;
    return MOE_STATUS_OK;
}
