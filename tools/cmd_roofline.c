/* moefuse roofline: per GEMM of a step, memory- or compute-bound, predicted time with tile and
 * wave quantisation on a GPU, MoE padding and load; a whole-step summary; an SVG. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "moefuse_analysis.h"

static void usage(FILE *f) {
    fputs("usage: moefuse roofline (--model NAME | --config PATH) --batch B --seq S --mode train|prefill|decode\n"
          "                        --gpu h200|h100|b200|FILE.json [--context C] [--tp N] [--ep N]\n"
          "                        [--dtype bf16|fp8] [--svg FILE] [--json] [--measure]\n"
          "       moefuse roofline --gemm MxKxN[,MxKxN...] --gpu h200|h100|b200|FILE.json [--dtype bf16|fp8|both]\n"
          "       moefuse roofline --grouped ROWSxKxN/EXPERTS[:v1|:hopper|:decode][,...] --gpu ... [--dtype ...]\n"
          "       moefuse roofline --dense MxKxN[,MxKxN...] --gpu ... [--dtype bf16|fp8|both]\n"
          "Per GEMM of the step (moefuse shapes): memory- or compute-bound, predicted time with tile and wave\n"
          "quantisation over the tile menu (128x128, 128x256, 256x128; the best tile wins), MoE padding\n"
          "waste with 128-row blocks, expected max load and experts touched (Binomial routing); a step summary.\n"
          "ideal = max(FLOPs / peak, bytes / read bandwidth) per row (FLOPs and bytes as moefuse shapes counts them).\n"
          "decode: the KV cache read, layers x batch x context x (GQA 2*kv_heads*head_dim, MLA kv_lora_rank +\n"
          "qk_rope_head_dim) elements of 2 bytes (also with --dtype fp8), is reported beside the totals, not in them.\n"
          "Routed-expert Fprop rows run on moefuse's grouped kernel the forward picks (hopper 128x256 bf16,\n"
          "hopper-fp8 128x128, or v1 64x128 with 2 CTAs per SM), at that kernel's sustained rate.\n"
          "GPU file keys: bf16_tflops, fp8_tflops, read_tbps, sms (required), l2_mb, ctas_per_sm, launch_us,\n"
          "epilogue_exposed, hopper_bf16_tflops, hopper_fp8_tflops, v1_tflops, stream_power_share, name.\n"
          "--gemm: the model's time for plain GEMMs (no model needed), one line each: M K N dtype predicted_ms,\n"
          "as --measure predicts them (tools/check_measured.py re-checks committed --measure JSONs with it).\n"
          "--grouped: the same for moefuse's grouped launches as --measure times them (ROWS spread evenly over\n"
          "EXPERTS, K x N each; kernel v1, hopper or decode (the swapped decode kernel), default the forward's rule):\n"
          "rows k n experts dtype kernel ms.\n"
          "--dense: the same for moefuse's Hopper dense engine (its tile, persistent, one CTA per SM, its kernel\n"
          "family's rate; no split-K or stream-K): M K N dtype predicted_ms, as --gemm.\n"
          "--measure times each distinct GEMM shape (fractional expert token counts rounded up) on the GPU with\n"
          "cuBLAS (bf16: cublasGemmEx, fp32 compute; fp8: cublasLtMatmul, per-tensor scales), median of 20 after\n"
          "warm-up, and prints predicted vs measured per shape, and a 128x128x128 probe (about a launch's fixed\n"
          "cost); --dtype both (with --measure only) times bf16 and fp8 and gives the FP8-over-BF16 speedup,\n"
          "theoretical (the model) and achieved. A shape or dtype that cannot be timed is reported with its reason\n"
          "(JSON: \"error\") and the others go on; the exit status is then 1. Beside cuBLAS, moefuse's own\n"
          "kernels: a routed-expert shape (fprop) as one grouped launch of GEMM1 (gate_up, with the model's\n"
          "activation) or GEMM2 (down, routing weights) over the experts touched per layer, each with its share\n"
          "of the expected rows, on the path the forward picks (v1 or hopper; MOEFUSE_GEMM forces one), set\n"
          "against the model's time for that grouped launch (as timed: rows spread evenly, on the kernel that\n"
          "ran); any other shape on the Hopper dense engine (bf16, and fp8 with 128-blocks of scales), against\n"
          "the model's time for that engine (as --dense). Routed Dgrad/Wgrad shapes: no moefuse kernel (null).\n"
          "Needs the CUDA backend and a GPU.\n",
          f);
}

static void print_table(const moe_shape_list *l, const moe_roofline *rf) {
    analysis_print_header(stdout, l);
    const moe_gpu_spec *g = &rf->gpu;
    printf("gpu %s (%s): bf16 %.0f TFLOP/s, fp8 %.0f TFLOP/s, read %.2f TB/s, %lld SMs, L2 %.0f MB; ridge %.0f "
           "FLOP/B\n",
           g->name, g->source, g->bf16_flops / 1e12, g->fp8_flops / 1e12, g->read_bw / 1e12, (long long)g->sms,
           g->l2_bytes / 1e6, rf->ridge);
    printf("time = max(waves x tile time, bytes / read bandwidth[, power bound]) + launch per launch, best tile; "
           "ideal = max(FLOPs/peak, bytes/bandwidth)\n\n");
    printf("%-8s %-18s %-5s %7s %7s %7s %6s %7s %-3s %-10s %7s %5s %5s %5s %9s %9s %7s %5s %7s %7s\n", "layers", "name",
           "pass", "M", "K", "N", "count", "FLOP/B", "bnd", "tile", "tiles", "waves", "tile%", "wave%", "ideal_ms",
           "pred_ms", "TFLOP/s", "pad%", "maxload", "touched");
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        const moe_roofline_row *o = &rf->rows[i];
        char layers[32], m[24], k[24], n[24], tile[16], pad[16] = "", maxl[16] = "", touched[16] = "";
        analysis_format_layers(r, layers, sizeof layers);
        analysis_format_dim(r->m, m, sizeof m);
        analysis_format_dim(r->k, k, sizeof k);
        analysis_format_dim(r->n, n, sizeof n);
        if (o->split_k > 1) snprintf(tile, sizeof tile, "%dx%d/k%d", o->tile.m, o->tile.n, o->split_k);
        else snprintf(tile, sizeof tile, "%dx%d", o->tile.m, o->tile.n);
        if (r->kind == MOE_GEMM_EXPERT_GATE_UP || r->kind == MOE_GEMM_EXPERT_DOWN) {
            snprintf(pad, sizeof pad, "%.1f", 100 * o->padding_waste);
            snprintf(maxl, sizeof maxl, "%.4g", o->expected_max_load);
            snprintf(touched, sizeof touched, "%.4g", o->experts_touched);
        }
        printf("%-8s %-18s %-5s %7s %7s %7s %6lld %7.1f %-3s %-10s %7.0f %5.0f %5.1f %5.1f %9.4f %9.4f %7.1f %5s %7s "
               "%7s\n",
               layers, r->name, moe_gemm_pass_name(r->pass), m, k, n, (long long)r->count, r->intensity,
               o->compute_bound ? "C" : "M", tile, o->tiles, o->waves, 100 * o->tile_efficiency,
               100 * o->wave_efficiency, o->ideal_s * 1e3, o->time_s * 1e3, o->achieved_flops / 1e12, pad, maxl,
               touched);
    }
    printf("\nbnd: C compute-bound, M memory-bound (plain roofline). tiles, waves: per launch (routed experts: one\n"
           "grouped launch per layer, expected tiles). pad%%: padding waste with 128-row blocks.\n\n");
    printf("step summary on %s:\n", g->name);
    printf("  predicted %.4f ms, ideal roofline %.4f ms (tiles and waves cost %.1f%%)\n", rf->total_time_s * 1e3,
           rf->ideal_time_s * 1e3, rf->ideal_time_s > 0 ? 100 * (rf->total_time_s / rf->ideal_time_s - 1) : 0.0);
    printf("  %.1f TFLOP/s on average = %.1f%% of peak; compute-bound GEMMs %.4f ms, memory-bound %.4f ms\n",
           rf->total_time_s > 0 ? l->total_flops / rf->total_time_s / 1e12 : 0.0,
           rf->total_time_s > 0 ? 100 * l->total_flops / rf->total_time_s / rf->peak_flops : 0.0,
           rf->compute_bound_time_s * 1e3, rf->memory_bound_time_s * 1e3);
    int passes = l->options.mode == MOE_STEP_TRAIN ? 3 : 1;
    printf("  by pass:");
    for (int p = 0; p < passes; p++) printf(" %s %.4f ms", moe_gemm_pass_name((moe_gemm_pass)p), rf->pass_time_s[p] * 1e3);
    printf("\n  by kind:");
    for (int k = 0; k < MOE_GEMM_KIND_COUNT_; k++)
        if (rf->kind_time_s[k] > 0) printf(" %s %.4f ms", moe_gemm_kind_name((moe_gemm_kind)k), rf->kind_time_s[k] * 1e3);
    printf("\n");
    if (l->options.mode == MOE_STEP_DECODE)
        printf("  KV cache read (attention, not a GEMM; not in the totals): %.4g GB, %.4f ms at %.2f TB/s\n",
               rf->kv_cache_bytes / 1e9, rf->kv_cache_s * 1e3, g->read_bw / 1e12);
}

static void print_json(const moe_shape_list *l, const moe_roofline *rf) {
    const moe_gpu_spec *g = &rf->gpu;
    const moe_shape_options *o = &l->options;
    printf("{\"model\": ");
    cli_json_string(stdout, l->config.name);
    printf(", \"mode\": \"%s\", \"batch\": %lld, \"seq\": %lld, \"context\": %lld, \"tokens\": %lld, \"tp\": %lld, "
           "\"ep\": %lld, \"dtype\": \"%s\",\n\"gpu\": {\"name\": ",
           moe_step_mode_name(o->mode), (long long)o->batch, (long long)o->seq, (long long)o->context,
           (long long)l->tokens, (long long)o->tp, (long long)o->ep, o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16");
    cli_json_string(stdout, g->name);
    printf(", \"source\": ");
    cli_json_string(stdout, g->source);
    printf(", \"bf16_tflops\": %.6g, \"fp8_tflops\": %.6g, \"read_tbps\": %.6g, \"sms\": %lld, \"ctas_per_sm\": %lld, "
           "\"l2_mb\": %.6g, \"launch_us\": %.6g, \"epilogue_exposed\": %.6g, \"hopper_bf16_tflops\": %.6g, "
           "\"hopper_fp8_tflops\": %.6g, \"v1_tflops\": %.6g, \"stream_power_share\": %.6g, \"ridge\": %.6g},\n",
           g->bf16_flops / 1e12, g->fp8_flops / 1e12, g->read_bw / 1e12, (long long)g->sms, (long long)g->ctas_per_sm,
           g->l2_bytes / 1e6, g->launch_s * 1e6, g->epilogue_exposed, g->hopper_bf16_flops / 1e12,
           g->hopper_fp8_flops / 1e12, g->v1_flops / 1e12, g->stream_power_share, rf->ridge);
    analysis_json_notes(stdout, l);
    printf(",\n\"gemms\": [\n");
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        const moe_roofline_row *x = &rf->rows[i];
        char layers[32];
        analysis_format_layers(r, layers, sizeof layers);
        printf("  {\"layers\": \"%s\", \"name\": \"%s\", \"kind\": \"%s\", \"pass\": \"%s\", \"m\": %.17g, \"k\": %.17g, "
               "\"n\": %.17g, \"count\": %lld, \"flops\": %.17g, \"bytes\": %.17g, \"intensity\": %.17g, \"bound\": "
               "\"%s\", \"kernel\": \"%s\", \"tile\": \"%dx%d\", \"split_k\": %d, \"tiles\": %.17g, \"waves\": %.17g, \"tile_efficiency\": %.6g, "
               "\"wave_efficiency\": %.6g, \"ideal_ms\": %.17g, \"predicted_ms\": %.17g, \"tflops\": %.6g",
               layers, r->name, moe_gemm_kind_name(r->kind), moe_gemm_pass_name(r->pass), r->m, r->k, r->n,
               (long long)r->count, r->flops, r->bytes, r->intensity, x->compute_bound ? "compute" : "memory",
               moe_kernel_family_name(x->kernel), x->tile.m, x->tile.n, x->split_k, x->tiles, x->waves, x->tile_efficiency, x->wave_efficiency, x->ideal_s * 1e3,
               x->time_s * 1e3, x->achieved_flops / 1e12);
        if (r->kind == MOE_GEMM_EXPERT_GATE_UP || r->kind == MOE_GEMM_EXPERT_DOWN)
            printf(", \"padding_waste\": %.6g, \"expected_max_load\": %.6g, \"experts_touched\": %.6g", x->padding_waste,
                   x->expected_max_load, x->experts_touched);
        printf("}%s\n", i + 1 < l->num_rows ? "," : "");
    }
    printf("],\n\"summary\": {\"predicted_ms\": %.17g, \"ideal_ms\": %.17g, \"compute_bound_ms\": %.17g, "
           "\"memory_bound_ms\": %.17g, \"flops\": %.17g, \"bytes\": %.17g, \"tflops\": %.6g, \"by_pass_ms\": {",
           rf->total_time_s * 1e3, rf->ideal_time_s * 1e3, rf->compute_bound_time_s * 1e3,
           rf->memory_bound_time_s * 1e3, l->total_flops, l->total_bytes,
           rf->total_time_s > 0 ? l->total_flops / rf->total_time_s / 1e12 : 0.0);
    int passes = o->mode == MOE_STEP_TRAIN ? 3 : 1;
    for (int p = 0; p < passes; p++)
        printf("%s\"%s\": %.17g", p ? ", " : "", moe_gemm_pass_name((moe_gemm_pass)p), rf->pass_time_s[p] * 1e3);
    printf("}, \"by_kind_ms\": {");
    int first = 1;
    for (int k = 0; k < MOE_GEMM_KIND_COUNT_; k++)
        if (rf->kind_time_s[k] > 0) {
            printf("%s\"%s\": %.17g", first ? "" : ", ", moe_gemm_kind_name((moe_gemm_kind)k), rf->kind_time_s[k] * 1e3);
            first = 0;
        }
    printf("}");
    if (o->mode == MOE_STEP_DECODE)
        printf(", \"kv_cache_bytes\": %.17g, \"kv_cache_ms\": %.17g", rf->kv_cache_bytes, rf->kv_cache_s * 1e3);
    printf("}"); /* the caller closes the object (after the measurements, if any) */
}

/* --- --measure: time each distinct shape with cuBLAS and set it beside the model ----------- */

#define MEASURE_REPS 20
#define MEASURE_ERROR_LEN 240
#define PROBE_DIM 128 /* the probe: one 128x128 output tile, K 128: little beyond a launch's fixed cost */
enum { MEASURE_BF16 = 0, MEASURE_FP8 = 1, MEASURE_DTYPES = 2 };
static const moe_dtype measure_dtype[MEASURE_DTYPES] = {MOE_DTYPE_BF16, MOE_DTYPE_E4M3};
static const char *const measure_dtype_name[MEASURE_DTYPES] = {"bf16", "fp8"};

/* Which of moefuse's kernels a shape is timed on. */
enum { MOEFUSE_NONE = 0, MOEFUSE_DENSE = 1, MOEFUSE_GROUPED = 2 };
static const char *const moefuse_kind_name[] = {"none", "dense", "grouped"};

/* One distinct GEMM shape (m, k, n rounded up to whole numbers) and the rows that have it. */
typedef struct measured_shape {
    int64_t m, k, n;
    int64_t first_row, num_rows;
    int routed; /* some row is a routed expert (moefuse's grouped path would apply) */
    int wanted[MEASURE_DTYPES];
    double predicted_ms[MEASURE_DTYPES]; /* the model for one plain GEMM of exactly this shape */
    double measured_ms[MEASURE_DTYPES];  /* 0 when not measured */
    char error[MEASURE_DTYPES][MEASURE_ERROR_LEN];
    /* moefuse's kernel: the grouped launch of a routed-expert fprop row (grouped_row), the
     * Hopper dense engine for a shape with no routed row, or none (routed Dgrad/Wgrad) */
    int moefuse;
    int64_t grouped_row;
    moe_grouped_measure launch; /* grouped: the launch's inputs */
    char moefuse_note[MEASURE_ERROR_LEN]; /* why there is no moefuse kernel (MOEFUSE_NONE) */
    double moefuse_predicted_ms[MEASURE_DTYPES]; /* the model's grouped launch, or dense engine launch */
    double moefuse_ms[MEASURE_DTYPES];           /* 0 when not measured */
    char moefuse_kernel[MEASURE_DTYPES][48];     /* "grouped hopper, block 128", "hopper dense engine" */
    char moefuse_error[MEASURE_DTYPES][MEASURE_ERROR_LEN];
} measured_shape;

typedef struct measurement {
    int64_t num_shapes;
    measured_shape *shapes;
    int64_t *shape_of_row; /* list row -> shape index */
    int both;              /* bf16 and fp8 timed */
    int wanted[MEASURE_DTYPES];
    measured_shape probe;  /* PROBE_DIM^3: the fixed cost of a launch, beside the GPU's launch_us */
} measurement;

static void measurement_free(measurement *me) {
    free(me->shapes);
    free(me->shape_of_row);
    memset(me, 0, sizeof *me);
}

static int is_routed(const moe_gemm_row *r) {
    return r->kind == MOE_GEMM_EXPERT_GATE_UP || r->kind == MOE_GEMM_EXPERT_DOWN;
}

/* The roofline's time for one plain GEMM m x k x n in `dtype`: a one-row list of the same
 * model and step, so that the same ceilings, tile menu and split-K rule apply. */
static int predict_plain(moe_context_t *ctx, const moe_shape_list *list, const moe_gpu_spec *gpu, int64_t m,
                         int64_t k, int64_t n, moe_dtype dtype, double *ms) {
    moe_gemm_row row;
    memset(&row, 0, sizeof row);
    row.layer_first = 0;
    row.layer_last = 0;
    row.layer_step = 1;
    row.layer_count = 1;
    snprintf(row.name, sizeof row.name, "measured");
    row.kind = MOE_GEMM_ATTN_O; /* any kind that is not a routed expert: a plain GEMM */
    row.pass = MOE_PASS_FPROP;
    row.m = (double)m;
    row.k = (double)k;
    row.n = (double)n;
    row.count = 1;
    row.touched = 1;
    row.flops = 2.0 * row.m * row.k * row.n;
    double operand = dtype == MOE_DTYPE_E4M3 ? 1.0 : 2.0, output = 2.0; /* as the shape list counts them */
    row.bytes = (row.m * row.k + row.k * row.n) * operand + row.m * row.n * output;
    row.intensity = row.flops / row.bytes;
    moe_shape_list one = *list;
    one.options.dtype = dtype;
    one.options.mode = MOE_STEP_PREFILL; /* no KV-cache term: not a GEMM */
    one.num_rows = 1;
    one.rows = &row;
    moe_roofline *rf = NULL;
    if (moe_roofline_create(ctx, &one, gpu, &rf) != MOE_STATUS_OK)
        return cli_fail(1, "roofline: predicting %lld x %lld x %lld: %s", (long long)m, (long long)k, (long long)n,
                        moe_last_error(ctx));
    *ms = rf->rows[0].time_s * 1e3;
    moe_roofline_free(rf);
    return 0;
}

/* Distinct shapes of the list, in order of first appearance. */
static int collect_shapes(const moe_shape_list *list, measurement *me) {
    size_t n = (size_t)(list->num_rows > 0 ? list->num_rows : 1);
    me->shapes = calloc(n, sizeof *me->shapes);
    me->shape_of_row = calloc(n, sizeof *me->shape_of_row);
    if (!me->shapes || !me->shape_of_row) return cli_fail(1, "roofline: out of memory");
    for (int64_t i = 0; i < list->num_rows; i++) {
        const moe_gemm_row *r = &list->rows[i];
        int64_t m = (int64_t)ceil(r->m), k = (int64_t)ceil(r->k), nn = (int64_t)ceil(r->n);
        int64_t s = 0;
        while (s < me->num_shapes && !(me->shapes[s].m == m && me->shapes[s].k == k && me->shapes[s].n == nn)) s++;
        if (s == me->num_shapes) {
            measured_shape *x = &me->shapes[me->num_shapes++];
            x->m = m;
            x->k = k;
            x->n = nn;
            x->first_row = i;
        }
        measured_shape *x = &me->shapes[s];
        x->num_rows++;
        x->routed |= is_routed(r);
        me->shape_of_row[i] = s;
        /* a routed fprop row makes it a grouped launch; else any plain row, the dense engine */
        if (is_routed(r) && r->pass == MOE_PASS_FPROP && x->moefuse != MOEFUSE_GROUPED) {
            x->moefuse = MOEFUSE_GROUPED;
            x->grouped_row = i;
        } else if (!is_routed(r) && x->moefuse == MOEFUSE_NONE) {
            x->moefuse = MOEFUSE_DENSE;
        }
    }
    for (int64_t s = 0; s < me->num_shapes; s++)
        if (me->shapes[s].moefuse == MOEFUSE_NONE)
            snprintf(me->shapes[s].moefuse_note, sizeof me->shapes[s].moefuse_note,
                     "routed-expert %s only: moefuse has no grouped backward kernel",
                     moe_gemm_pass_name(list->rows[me->shapes[s].first_row].pass));
    return 0;
}

/* The grouped launch the forward runs for routed row `row` (one layer, this GPU): the experts
 * expected to be touched, E_here·(1-(1-k/E)^T), sharing the expected T·k·E_here/E routed rows
 * (E_here = E/ep), the row's H and I, the model's activation and biases. */
static void describe_grouped(const moe_shape_list *list, const moe_gemm_row *r, moe_grouped_measure *g) {
    const moe_layer_spec *spec = &list->config.layer;
    const int64_t E = spec->num_experts, ep = list->options.ep > 0 ? list->options.ep : 1;
    const int64_t here = E / ep > 0 ? E / ep : 1;
    memset(g, 0, sizeof *g);
    g->down = r->kind == MOE_GEMM_EXPERT_DOWN;
    g->num_experts = here;
    int64_t touched = llround(list->experts_touched * (double)here / (double)E);
    g->experts = touched < 1 ? 1 : touched > here ? here : touched;
    g->top_k = spec->top_k < g->experts ? spec->top_k : g->experts;
    double rows = ceil((double)list->tokens * (double)spec->top_k * (double)here / (double)E - 1e-9);
    if (rows < 1) rows = 1;
    g->tokens = (int64_t)ceil(rows / (double)g->top_k);
    const int gated = moe_activation_is_gated(spec->activation);
    const int64_t k = (int64_t)ceil(r->k), n = (int64_t)ceil(r->n);
    g->hidden = g->down ? n : k;
    g->intermediate = g->down ? k : (gated ? n / 2 : n);
    g->activation = spec->activation;
    g->act_alpha = spec->act_alpha;
    g->act_limit = spec->act_limit;
    g->has_bias = spec->expert_has_bias;
}

/* The kernel family of a grouped launch on the path named ("v1", "hopper", "decode": the swapped
 * kernel of either dtype), or, with no path, the forward's rule for routed rows over
 * experts of hidden h and intermediate i. */
static moe_kernel_family path_family(const char *path, moe_dtype dtype, int64_t rows, int64_t experts, int64_t h,
                                     int64_t i) {
    const int fp8 = dtype == MOE_DTYPE_E4M3;
    if (!strcmp(path, "v1")) return MOE_KERNEL_V1;
    if (!strcmp(path, "decode")) return fp8 ? MOE_KERNEL_HOPPER_FP8_DECODE : MOE_KERNEL_HOPPER_BF16_DECODE;
    if (!strcmp(path, "hopper")) return fp8 ? MOE_KERNEL_HOPPER_FP8 : MOE_KERNEL_HOPPER_BF16;
    return moe_grouped_kernel_select(dtype, rows, experts, h, i);
}

/* The kernel family of a timed grouped launch: the path it ran on (g->path_name), or, when the
 * timing failed before the choice, the forward's rule. */
static moe_kernel_family grouped_family(const moe_grouped_measure *g, moe_dtype dtype) {
    return path_family(g->path_name, dtype, g->tokens * g->top_k, g->num_experts, g->hidden, g->intermediate);
}

/* The roofline's time for the grouped launch g as it is timed (its tokens x top_k rows spread
 * evenly over its experts, on its kernel), in `dtype`. */
static int predict_grouped(moe_context_t *ctx, const moe_gpu_spec *gpu, const moe_grouped_measure *g, moe_dtype dtype,
                           double *ms) {
    const int gated = moe_activation_is_gated(g->activation);
    const int64_t n = g->down ? g->hidden : (gated ? 2 * g->intermediate : g->intermediate);
    const int64_t k = g->down ? g->intermediate : g->hidden;
    double s = 0;
    if (moe_grouped_launch_time(ctx, gpu, dtype, grouped_family(g, dtype), g->experts, g->tokens * g->top_k, k, n, &s) !=
        MOE_STATUS_OK)
        return cli_fail(1, "roofline: predicting the grouped launch: %s", moe_last_error(ctx));
    *ms = s * 1e3;
    return 0;
}

/* The roofline's time for one plain GEMM m x k x n on moefuse's Hopper dense engine, in `dtype`. */
static int predict_dense(moe_context_t *ctx, const moe_gpu_spec *gpu, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                         double *ms) {
    double s = 0;
    if (moe_dense_launch_time(ctx, gpu, dtype, m, k, n, &s) != MOE_STATUS_OK)
        return cli_fail(1, "roofline: predicting the dense engine's %lld x %lld x %lld: %s", (long long)m, (long long)k,
                        (long long)n, moe_last_error(ctx));
    *ms = s * 1e3;
    return 0;
}

/* moefuse's kernel on shape x in dtype d: the grouped launch or the dense engine, with its
 * prediction. A timing that fails keeps its reason in x->moefuse_error; only a failed
 * prediction returns non-zero. */
static int measure_moefuse(moe_context_t *ctx, moe_context_t *dev, const moe_gpu_spec *gpu, int d,
                           measured_shape *x) {
    moe_status st;
    double ms = 0.0;
    if (x->moefuse == MOEFUSE_DENSE) {
        if (predict_dense(ctx, gpu, x->m, x->k, x->n, measure_dtype[d], &x->moefuse_predicted_ms[d])) return 1;
        snprintf(x->moefuse_kernel[d], sizeof x->moefuse_kernel[d], "hopper dense engine");
        st = moe_analysis_measure_dense(dev, x->m, x->k, x->n, measure_dtype[d], MEASURE_REPS, &ms);
    } else if (x->moefuse == MOEFUSE_GROUPED) {
        moe_grouped_measure g = x->launch;
        st = moe_analysis_measure_grouped(dev, measure_dtype[d], MEASURE_REPS, &g);
        ms = g.ms;
        if (predict_grouped(ctx, gpu, &g, measure_dtype[d], &x->moefuse_predicted_ms[d])) return 1;
        if (g.path >= 0)
            snprintf(x->moefuse_kernel[d], sizeof x->moefuse_kernel[d], "grouped %s, block %lld%s", g.path_name,
                     (long long)g.block, g.down ? (g.rows_bf16 ? ", bf16 rows" : ", fp32 rows") : "");
        else
            snprintf(x->moefuse_kernel[d], sizeof x->moefuse_kernel[d], "grouped");
    } else {
        return 0;
    }
    if (st == MOE_STATUS_OK) x->moefuse_ms[d] = ms;
    else snprintf(x->moefuse_error[d], sizeof x->moefuse_error[d], "%s", moe_last_error(dev));
    return 0;
}

/* Predicts and times one shape in each wanted dtype. A dtype that cannot be timed keeps its
 * reason in x->error and the caller goes on; only a failed prediction returns non-zero. */
static int measure_shape(moe_context_t *ctx, moe_context_t *dev, const moe_shape_list *list, const moe_gpu_spec *gpu,
                         const int wanted[MEASURE_DTYPES], measured_shape *x) {
    for (int d = 0; d < MEASURE_DTYPES; d++) {
        x->wanted[d] = wanted[d];
        if (!wanted[d]) continue;
        if (predict_plain(ctx, list, gpu, x->m, x->k, x->n, measure_dtype[d], &x->predicted_ms[d])) return 1;
        double ms = 0.0;
        if (moe_analysis_measure_gemm(dev, x->m, x->k, x->n, measure_dtype[d], MEASURE_REPS, &ms) == MOE_STATUS_OK)
            x->measured_ms[d] = ms;
        else
            snprintf(x->error[d], sizeof x->error[d], "%s", moe_last_error(dev));
        if (measure_moefuse(ctx, dev, gpu, d, x)) return 1;
    }
    return 0;
}

/* Predicts and times every distinct shape, and the probe. A shape or dtype that cannot be
 * timed (no FP8 algorithm, too large for the GPU, a cuBLAS error) keeps its reason and the
 * others go on; only a missing GPU stops all. */
static int run_measurement(moe_context_t *ctx, const moe_shape_list *list, const moe_gpu_spec *gpu, int both,
                           measurement *me) {
    memset(me, 0, sizeof *me);
    me->both = both;
    me->wanted[MEASURE_BF16] = both || list->options.dtype == MOE_DTYPE_BF16;
    me->wanted[MEASURE_FP8] = both || list->options.dtype == MOE_DTYPE_E4M3;
    moe_context_t *dev = NULL;
    moe_status st = moe_context_create(MOE_BACKEND_CUDA, 0, &dev);
    if (st != MOE_STATUS_OK) {
        moe_context_free(dev);
        return cli_fail(1, "roofline: --measure needs a GPU and the CUDA backend: %s", moe_last_error(NULL));
    }
    int rc = collect_shapes(list, me);
    for (int64_t s = 0; s < me->num_shapes && !rc; s++)
        if (me->shapes[s].moefuse == MOEFUSE_GROUPED)
            describe_grouped(list, &list->rows[me->shapes[s].grouped_row], &me->shapes[s].launch);
    me->probe.m = me->probe.k = me->probe.n = PROBE_DIM;
    me->probe.moefuse = MOEFUSE_DENSE;
    if (!rc) rc = measure_shape(ctx, dev, list, gpu, me->wanted, &me->probe);
    for (int64_t s = 0; s < me->num_shapes && !rc; s++)
        rc = measure_shape(ctx, dev, list, gpu, me->wanted, &me->shapes[s]);
    moe_context_free(dev);
    return rc;
}

/* One stderr line per shape and dtype not timed; the count (0: all timed). */
static int report_failures(const measurement *me) {
    int failed = 0;
    for (int64_t s = -1; s < me->num_shapes; s++) {
        const measured_shape *x = s < 0 ? &me->probe : &me->shapes[s];
        for (int d = 0; d < MEASURE_DTYPES; d++) {
            if (x->wanted[d] && x->error[d][0]) {
                cli_fail(1, "roofline: --measure: %lld x %lld x %lld %s%s not timed: %s", (long long)x->m,
                         (long long)x->k, (long long)x->n, measure_dtype_name[d], s < 0 ? " (probe)" : "",
                         x->error[d]);
                failed++;
            }
            if (x->wanted[d] && x->moefuse_error[d][0]) {
                cli_fail(1, "roofline: --measure: %lld x %lld x %lld %s%s not timed on moefuse's %s: %s",
                         (long long)x->m, (long long)x->k, (long long)x->n, measure_dtype_name[d],
                         s < 0 ? " (probe)" : "", x->moefuse_kernel[d], x->moefuse_error[d]);
                failed++;
            }
        }
    }
    if (failed) cli_fail(1, "roofline: --measure: %d timing(s) failed (the others are in the output)", failed);
    return failed;
}

static double ratio_or_nan(double a, double b) { return a > 0 && b > 0 ? a / b : NAN; }

/* Shapes measured in `d` whose measured/predicted ratio is within 1 +- 0.25: cuBLAS's, or
 * (moefuse) moefuse's kernel's against its own prediction. */
static void count_within(const measurement *me, int d, int moefuse, int *within, int *measured) {
    *within = *measured = 0;
    for (int64_t s = 0; s < me->num_shapes; s++) {
        const measured_shape *x = &me->shapes[s];
        double r = moefuse ? ratio_or_nan(x->moefuse_ms[d], x->moefuse_predicted_ms[d])
                           : ratio_or_nan(x->measured_ms[d], x->predicted_ms[d]);
        if (isnan(r)) continue;
        ++*measured;
        if (fabs(r - 1.0) <= 0.25) ++*within;
    }
}

static void format_ms(double ms, char *buf, size_t size) {
    if (ms > 0) snprintf(buf, size, "%.4f", ms);
    else snprintf(buf, size, "-");
}

static void format_ratio(double r, char *buf, size_t size) {
    if (isnan(r)) snprintf(buf, size, "-");
    else snprintf(buf, size, "%.2f", r);
}

static void print_measured_row(const char *label, const char *rows, const measured_shape *x) {
    char col[6][24], th[16], ach[16], mf[6][24], kernel[48];
    for (int d = 0; d < MEASURE_DTYPES; d++) {
        format_ms(x->wanted[d] ? x->predicted_ms[d] : 0.0, col[3 * d], sizeof col[0]);
        if (x->wanted[d] && x->error[d][0]) snprintf(col[3 * d + 1], sizeof col[0], "failed");
        else format_ms(x->measured_ms[d], col[3 * d + 1], sizeof col[0]);
        format_ratio(ratio_or_nan(x->measured_ms[d], x->predicted_ms[d]), col[3 * d + 2], sizeof col[0]);
        format_ms(x->wanted[d] ? x->moefuse_predicted_ms[d] : 0.0, mf[3 * d], sizeof mf[0]);
        if (x->wanted[d] && x->moefuse_error[d][0]) snprintf(mf[3 * d + 1], sizeof mf[0], "failed");
        else format_ms(x->moefuse_ms[d], mf[3 * d + 1], sizeof mf[0]);
        format_ratio(ratio_or_nan(x->moefuse_ms[d], x->moefuse_predicted_ms[d]), mf[3 * d + 2], sizeof mf[0]);
    }
    format_ratio(ratio_or_nan(x->predicted_ms[MEASURE_BF16], x->predicted_ms[MEASURE_FP8]), th, sizeof th);
    format_ratio(ratio_or_nan(x->measured_ms[MEASURE_BF16], x->measured_ms[MEASURE_FP8]), ach, sizeof ach);
    const int d = x->wanted[MEASURE_BF16] ? MEASURE_BF16 : MEASURE_FP8; /* the kernel named: bf16's if timed */
    snprintf(kernel, sizeof kernel, "%s", x->moefuse == MOEFUSE_NONE ? "none" : x->moefuse_kernel[d]);
    printf("%5s %7lld %7lld %7lld %-30s %10s %10s %6s %10s %10s %6s %7s %8s | %10s %10s %6s %10s %10s %6s %s\n", label,
           (long long)x->m, (long long)x->k, (long long)x->n, rows, col[0], col[1], col[2], col[3], col[4], col[5], th,
           ach, mf[0], mf[1], mf[2], mf[3], mf[4], mf[5], kernel);
}

static void print_measurement_table(const moe_shape_list *l, const moe_gpu_spec *g, const measurement *me) {
    printf("\nmeasured on the GPU: %lld distinct shapes (m, k, n rounded up), one plain GEMM y = x W^T each, cuBLAS "
           "(bf16: cublasGemmEx, fp32 compute; fp8: cublasLtMatmul, per-tensor scales, cuBLASLt's default promoting "
           "accumulation; bf16 output), median of %d after warm-up, fresh random inputs, rotated when they fit in L2.\n"
           "pred = the model for that one GEMM (best tile, waves, split-K, + launch %.2f us). ratio = measured / "
           "predicted. fp8x = bf16 time / fp8 time: theory (model), achieved (cuBLAS).\n"
           "probe: a %dx%dx%d GEMM, about the fixed cost of one launch.\n"
           "After |: moefuse's own kernel (mf_): routed-expert fprop shapes as one grouped launch per layer (GEMM1 "
           "gate_up with the activation, GEMM2 down with routing weights) over the touched experts sharing the "
           "expected rows, A rows already in plan order, against the model's time for that grouped launch; other "
           "shapes on the Hopper dense engine, against the model's time for that engine (its tile, persistent, its "
           "kernel family's rate). Routed Dgrad/Wgrad: none.\n\n",
           (long long)me->num_shapes, MEASURE_REPS, g->launch_s * 1e6, PROBE_DIM, PROBE_DIM, PROBE_DIM);
    printf("%5s %7s %7s %7s %-30s %10s %10s %6s %10s %10s %6s %7s %8s | %10s %10s %6s %10s %10s %6s %s\n", "#", "M", "K",
           "N", "rows (first, count)", "pred_bf16", "meas_bf16", "ratio", "pred_fp8", "meas_fp8", "ratio", "fp8x_th",
           "fp8x_ach", "mfpred_bf16", "mf_bf16", "ratio", "mfpred_fp8", "mf_fp8", "ratio", "moefuse kernel");
    print_measured_row("probe", "(not in the step)", &me->probe);
    for (int64_t s = 0; s < me->num_shapes; s++) {
        const measured_shape *x = &me->shapes[s];
        const moe_gemm_row *r = &l->rows[x->first_row];
        char label[24], rows[64];
        snprintf(label, sizeof label, "%lld", (long long)s);
        snprintf(rows, sizeof rows, "%.18s.%s x%lld", r->name, moe_gemm_pass_name(r->pass), (long long)x->num_rows);
        print_measured_row(label, rows, x);
    }
    for (int64_t s = 0; s < me->num_shapes; s++) {
        const measured_shape *x = &me->shapes[s];
        if (x->moefuse == MOEFUSE_GROUPED)
            printf("shape %lld: moefuse's grouped %s launch: %lld experts of %lld, %lld tokens x top-%lld, H %lld, I "
                   "%lld, %s%s\n",
                   (long long)s, x->launch.down ? "GEMM2 (down)" : "GEMM1 (gate_up)", (long long)x->launch.experts,
                   (long long)x->launch.num_experts, (long long)x->launch.tokens, (long long)x->launch.top_k,
                   (long long)x->launch.hidden, (long long)x->launch.intermediate,
                   moe_activation_name(x->launch.activation), x->launch.has_bias ? ", biases" : "");
    }
    for (int64_t s = -1; s < me->num_shapes; s++) {
        const measured_shape *x = s < 0 ? &me->probe : &me->shapes[s];
        for (int d = 0; d < MEASURE_DTYPES; d++) {
            if (x->wanted[d] && x->error[d][0])
                printf("%s %lld %s not timed: %s\n", s < 0 ? "probe" : "shape", (long long)(s < 0 ? 0 : s),
                       measure_dtype_name[d], x->error[d]);
            if (x->wanted[d] && x->moefuse_error[d][0])
                printf("%s %lld %s not timed on moefuse's %s: %s\n", s < 0 ? "probe" : "shape",
                       (long long)(s < 0 ? 0 : s), measure_dtype_name[d], x->moefuse_kernel[d], x->moefuse_error[d]);
        }
    }
    for (int d = 0; d < MEASURE_DTYPES; d++) {
        int within, measured, mf_within, mf_measured;
        count_within(me, d, 0, &within, &measured);
        count_within(me, d, 1, &mf_within, &mf_measured);
        if (measured || mf_measured)
            printf("%s: %d of %d measured shapes within +-25%% of the prediction (cuBLAS); moefuse's kernels: %d of "
                   "%d\n", measure_dtype_name[d], within, measured, mf_within, mf_measured);
    }
}

static void json_ms_or_null(double ms) {
    if (ms > 0) analysis_json_number(stdout, ms);
    else fputs("null", stdout);
}

/* The per-dtype members of one shape: "bf16": {...}, "fp8": {...}, the speedups. */
static void print_measured_json(const measurement *me, const measured_shape *x) {
    for (int d = 0; d < MEASURE_DTYPES; d++) {
        if (!x->wanted[d]) continue;
        printf(", \"%s\": {\"predicted_ms\": ", measure_dtype_name[d]);
        json_ms_or_null(x->predicted_ms[d]);
        printf(", \"measured_ms\": ");
        json_ms_or_null(x->measured_ms[d]);
        printf(", \"ratio\": ");
        analysis_json_number(stdout, ratio_or_nan(x->measured_ms[d], x->predicted_ms[d]));
        if (x->error[d][0]) {
            printf(", \"error\": ");
            cli_json_string(stdout, x->error[d]);
        }
        /* moefuse's kernel (null where the shape has none or its timing failed) */
        printf(", \"moefuse_predicted_ms\": ");
        json_ms_or_null(x->moefuse_predicted_ms[d]);
        printf(", \"moefuse_ms\": ");
        json_ms_or_null(x->moefuse_ms[d]);
        printf(", \"moefuse_ratio\": ");
        analysis_json_number(stdout, ratio_or_nan(x->moefuse_ms[d], x->moefuse_predicted_ms[d]));
        if (x->moefuse != MOEFUSE_NONE) {
            printf(", \"moefuse_kernel\": ");
            cli_json_string(stdout, x->moefuse_kernel[d]);
        }
        if (x->moefuse_error[d][0]) {
            printf(", \"moefuse_error\": ");
            cli_json_string(stdout, x->moefuse_error[d]);
        }
        printf("}");
    }
    if (me->both) {
        printf(", \"fp8_speedup_theoretical\": ");
        analysis_json_number(stdout, ratio_or_nan(x->predicted_ms[MEASURE_BF16], x->predicted_ms[MEASURE_FP8]));
        printf(", \"fp8_speedup_achieved\": ");
        analysis_json_number(stdout, ratio_or_nan(x->measured_ms[MEASURE_BF16], x->measured_ms[MEASURE_FP8]));
    }
}

static void print_measurement_json(const moe_shape_list *l, const measurement *me) {
    printf(",\n\"measured\": {\"method\": \"one plain GEMM y = x W^T per distinct shape (m, k, n rounded up); bf16: "
           "cublasGemmEx fp32 compute; fp8: cublasLtMatmul e4m3 per-tensor scales, cuBLASLt's default promoting "
           "accumulation; bf16 output; median of reps after warm-up; fresh random inputs rotated when they fit in "
           "L2\", \"reps\": %d, \"predicted\": \"the roofline model of that one plain GEMM\", \"moefuse\": "
           "\"per dtype moefuse_ms, moefuse_predicted_ms, moefuse_ratio, moefuse_kernel (moefuse_error when it failed): "
           "a routed-expert fprop shape as one grouped launch per layer, as moe_forward runs it (GEMM1 gate_up with the "
           "model's activation into A2, GEMM2 down with routing weights; over the touched experts sharing the "
           "expected routed rows; host-built plan; A rows already in plan order; path by moe__cuda_gemm_select; fp8: "
           "row128 activation and block128 weight scales), predicted by the model's grouped launch of that row for "
           "one layer; any other shape on the Hopper dense engine (fp8: row128 x and block128 W scales), predicted "
           "as that engine's launch (its tile, persistent, its kernel family's rate); routed Dgrad/Wgrad shapes: none (null)\",\n\"probe\": {\"m\": %d, \"k\": %d, \"n\": %d, \"what\": \"about the fixed cost of one "
           "launch, beside the GPU's launch_us\"",
           MEASURE_REPS, PROBE_DIM, PROBE_DIM, PROBE_DIM);
    print_measured_json(me, &me->probe);
    printf("},\n\"shapes\": [\n");
    for (int64_t s = 0; s < me->num_shapes; s++) {
        const measured_shape *x = &me->shapes[s];
        printf("  {\"m\": %lld, \"k\": %lld, \"n\": %lld, \"routed_expert\": %s, \"rows\": [", (long long)x->m,
               (long long)x->k, (long long)x->n, x->routed ? "true" : "false");
        int first = 1;
        for (int64_t i = 0; i < l->num_rows; i++)
            if (me->shape_of_row[i] == s) {
                printf("%s%lld", first ? "" : ", ", (long long)i);
                first = 0;
            }
        printf("], \"names\": [");
        first = 1;
        for (int64_t i = 0; i < l->num_rows; i++)
            if (me->shape_of_row[i] == s) {
                char name[MOE_GEMM_NAME_MAX + 16];
                snprintf(name, sizeof name, "%s.%s", l->rows[i].name, moe_gemm_pass_name(l->rows[i].pass));
                if (!first) fputs(", ", stdout);
                cli_json_string(stdout, name);
                first = 0;
            }
        printf("]");
        print_measured_json(me, x);
        printf(", \"moefuse\": {\"kernel\": \"%s\"", moefuse_kind_name[x->moefuse]);
        if (x->moefuse == MOEFUSE_GROUPED) {
            const moe_grouped_measure *g = &x->launch;
            printf(", \"gemm\": \"%s\", \"row\": %lld, \"experts\": %lld, \"num_experts\": %lld, \"tokens\": "
                   "%lld, \"top_k\": %lld, \"hidden\": %lld, \"intermediate\": %lld, \"activation\": \"%s\", "
                   "\"bias\": %s",
                   g->down ? "GEMM2" : "GEMM1", (long long)x->grouped_row, (long long)g->experts,
                   (long long)g->num_experts, (long long)g->tokens, (long long)g->top_k, (long long)g->hidden,
                   (long long)g->intermediate, moe_activation_name(g->activation), g->has_bias ? "true" : "false");
        }
        if (x->moefuse_note[0]) {
            printf(", \"note\": ");
            cli_json_string(stdout, x->moefuse_note);
        }
        printf("}}%s\n", s + 1 < me->num_shapes ? "," : "");
    }
    printf("]");
    for (int mf = 0; mf < 2; mf++) { /* cuBLAS's counts, then moefuse's kernels' */
        printf(", \"%s\": {", mf ? "moefuse_within_25_percent" : "within_25_percent");
        int first = 1;
        for (int d = 0; d < MEASURE_DTYPES; d++) {
            int within, measured;
            count_within(me, d, mf, &within, &measured);
            if (!me->wanted[d]) continue;
            printf("%s\"%s\": {\"within\": %d, \"measured\": %d}", first ? "" : ", ", measure_dtype_name[d],
                   within, measured);
            first = 0;
        }
        printf("}");
    }
    printf("}");
}

/* One item of --gemm or --dense (`option`) at *p: MxKxN. Advances *p past the item and its comma;
 * returns 0, or 2 (with the message) when malformed. */
static int parse_gemm_item(const char **p, long long v[3], const char *option) {
    int used = 0;
    if (sscanf(*p, "%lldx%lldx%lld%n", &v[0], &v[1], &v[2], &used) != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1 ||
        v[0] > INT32_MAX || v[1] > INT32_MAX || v[2] > INT32_MAX || ((*p)[used] && (*p)[used] != ','))
        return cli_fail(2, "roofline: %s: '%.40s' is not MxKxN with whole numbers in 1..2^31-1", option, *p);
    *p += used;
    if (**p == ',') (*p)++;
    return 0;
}

/* --gemm MxKxN[,MxKxN...]: the model's time for each plain GEMM, in bf16 and/or fp8, exactly as
 * --measure predicts it (predict_plain), so that committed measurements can be re-checked
 * against the current model without a GPU. --dense (dense = 1): the same GEMMs on moefuse's
 * Hopper dense engine (predict_dense), as --measure predicts its timings of that engine. The
 * whole list is checked before anything is printed. */
static int predict_gemm_list(moe_context_t *ctx, const char *spec, const moe_gpu_spec *gpu, int both, moe_dtype dtype,
                             int dense) {
    const char *option = dense ? "--dense" : "--gemm";
    long long v[3];
    for (const char *p = spec; *p;)
        if (parse_gemm_item(&p, v, option)) return 2;
    moe_shape_list list;
    memset(&list, 0, sizeof list);
    moe_shape_options_init(&list.options);
    printf("# m k n dtype predicted_ms (gpu %s, launch %.6g us, epilogue_exposed %.6g%s)\n", gpu->name, gpu->launch_s * 1e6,
           gpu->epilogue_exposed, dense ? "; moefuse's Hopper dense engine" : "");
    for (const char *p = spec; *p;) {
        parse_gemm_item(&p, v, option);
        for (int d = 0; d < MEASURE_DTYPES; d++) {
            if (!both && measure_dtype[d] != dtype) continue;
            double ms = 0;
            if (dense ? predict_dense(ctx, gpu, v[0], v[1], v[2], measure_dtype[d], &ms)
                      : predict_plain(ctx, &list, gpu, v[0], v[1], v[2], measure_dtype[d], &ms))
                return 1;
            printf("%lld %lld %lld %s %.17g\n", v[0], v[1], v[2], measure_dtype_name[d], ms);
        }
    }
    return 0;
}

/* One item of --grouped at *p: ROWSxKxN/EXPERTS[:v1|:hopper|:decode]; path "" when no kernel is named.
 * Advances *p past the item and its comma; returns 0, or 2 (with the message) when malformed. */
static int parse_grouped_item(const char **p, long long v[4], char path[8]) {
    int used = 0;
    path[0] = '\0';
    if (sscanf(*p, "%lldx%lldx%lld/%lld%n", &v[0], &v[1], &v[2], &v[3], &used) != 4 || v[0] < 1 || v[1] < 1 ||
        v[2] < 1 || v[3] < 1 || v[0] > INT32_MAX || v[1] > INT32_MAX || v[2] > INT32_MAX || v[3] > INT32_MAX)
        return cli_fail(2, "roofline: --grouped: '%.40s' is not ROWSxKxN/EXPERTS with whole numbers in 1..2^31-1", *p);
    const char *q = *p + used;
    if (*q == ':') {
        size_t len = strcspn(q + 1, ",");
        if (!((len == 2 && !strncmp(q + 1, "v1", 2)) || (len == 6 && !strncmp(q + 1, "hopper", 6)) ||
              (len == 6 && !strncmp(q + 1, "decode", 6))))
            return cli_fail(2, "roofline: --grouped: kernel '%.*s' is not v1, hopper or decode",
                            (int)(len < 16 ? len : 16), q + 1);
        memcpy(path, q + 1, len);
        path[len] = '\0';
        q += 1 + len;
    }
    if (*q && *q != ',')
        return cli_fail(2, "roofline: --grouped: '%.40s' is not ROWSxKxN/EXPERTS[:v1|:hopper|:decode]", *p);
    *p = *q == ',' ? q + 1 : q;
    return 0;
}

/* --grouped ROWSxKxN/EXPERTS[:v1|:hopper|:decode][,...]: the model's time for grouped launches as
 * --measure times them (ROWS routed rows spread evenly over EXPERTS experts, K x N each), on the
 * kernel named (default: the forward's rule, with K and N standing in for H and I in its size
 * checks; decode: the kernel with the operands swapped, FP8 or bf16),
 * so that committed moefuse timings can be re-checked against the current model without a GPU.
 * The whole list is checked before anything is printed. */
static int predict_grouped_list(moe_context_t *ctx, const char *spec, const moe_gpu_spec *gpu, int both,
                                moe_dtype dtype) {
    long long v[4];
    char path[8];
    for (const char *p = spec; *p;)
        if (parse_grouped_item(&p, v, path)) return 2;
    printf("# rows k n experts dtype kernel predicted_ms (gpu %s)\n", gpu->name);
    for (const char *p = spec; *p;) {
        parse_grouped_item(&p, v, path);
        for (int d = 0; d < MEASURE_DTYPES; d++) {
            const moe_dtype dt = measure_dtype[d];
            if (!both && dt != dtype) continue;
            const moe_kernel_family kernel = path_family(path, dt, v[0], v[3], v[1], v[2]);
            double s = 0;
            if (moe_grouped_launch_time(ctx, gpu, dt, kernel, v[3], v[0], v[1], v[2], &s) != MOE_STATUS_OK)
                return cli_fail(1, "roofline: --grouped: %s", moe_last_error(ctx));
            printf("%lld %lld %lld %lld %s %s %.17g\n", v[0], v[1], v[2], v[3], measure_dtype_name[d],
                   moe_kernel_family_name(kernel), s * 1e3);
        }
    }
    return 0;
}

int cmd_roofline(int argc, char **argv) {
    moe_context_t *ctx = NULL;
    if (analysis_context_create(&ctx)) return 1;
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    const char *model = NULL, *config = NULL, *gpu_name = NULL, *svg_path = NULL, *gemm = NULL, *grouped = NULL,
               *dense = NULL;
    unsigned seen = 0;
    int json = 0, measure = 0, both = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            moe_context_free(ctx);
            return 0;
        }
        /* --dtype both: bf16 for the list, both dtypes for --measure (checked below) */
        if ((!strcmp(argv[i], "--dtype") && i + 1 < argc && !strcmp(argv[i + 1], "both")) ||
            !strcmp(argv[i], "--dtype=both")) {
            both = 1;
            opt.dtype = MOE_DTYPE_BF16;
            i += strcmp(argv[i], "--dtype=both") != 0;
            continue;
        }
        if (analysis_common_option(argc, argv, &i, ctx, &opt, &model, &config, &seen, &rc)) continue;
        if (analysis_gpu_svg_option(argc, argv, &i, &gpu_name, &svg_path, &rc)) continue;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--measure")) {
            measure = 1;
        } else if (cli_option(argc, argv, &i, "--gemm", &gemm)) {
            if (!gemm) rc = 2;
        } else if (cli_option(argc, argv, &i, "--grouped", &grouped)) {
            if (!grouped) rc = 2;
        } else if (cli_option(argc, argv, &i, "--dense", &dense)) {
            if (!dense) rc = 2;
        } else if (!strcmp(argv[i], "--csv")) {
            rc = cli_fail(2, "roofline: --csv is not offered here (moefuse shapes --csv lists the GEMMs); use --json");
        } else {
            rc = cli_fail(2, "roofline: unknown option '%s' (moefuse roofline --help)", argv[i]);
        }
    }
    if (!rc && (gemm || grouped || dense)) {
        if (model || config || seen || measure || json || svg_path || !!gemm + !!grouped + !!dense > 1)
            rc = cli_fail(2, "roofline: --gemm, --grouped and --dense take only --gpu and --dtype (no model, step, "
                             "--measure, --json, --svg, nor each other)");
        if (!rc && !gpu_name) rc = cli_fail(2, "roofline: --gpu h200|h100|b200|FILE.json is required");
        moe_gpu_spec gpu;
        if (!rc) rc = analysis_load_gpu(ctx, gpu_name, &gpu);
        if (!rc) rc = grouped ? predict_grouped_list(ctx, grouped, &gpu, both, opt.dtype)
                              : predict_gemm_list(ctx, gemm ? gemm : dense, &gpu, both, opt.dtype, !gemm);
        moe_context_free(ctx);
        return rc;
    }
    if (!rc) rc = analysis_require_step(seen, "roofline");
    if (!rc && !gpu_name) rc = cli_fail(2, "roofline: --gpu h200|h100|b200|FILE.json is required");
    if (!rc && both && !measure) rc = cli_fail(2, "roofline: --dtype both needs --measure (it times bf16 and fp8)");
    moe_model_config cfg;
    moe_gpu_spec gpu;
    if (!rc) rc = cli_load_model(ctx, model, config, &cfg);
    if (!rc) rc = analysis_load_gpu(ctx, gpu_name, &gpu);
    moe_shape_list *list = NULL;
    moe_roofline *roof = NULL;
    if (!rc && moe_shape_list_create(ctx, &cfg, &opt, &list) != MOE_STATUS_OK)
        rc = cli_fail(2, "roofline: %s", moe_last_error(ctx));
    measurement me;
    memset(&me, 0, sizeof me);
    if (!rc && measure) rc = run_measurement(ctx, list, &gpu, both, &me);
    if (!rc && moe_roofline_create(ctx, list, &gpu, &roof) != MOE_STATUS_OK)
        rc = cli_fail(1, "roofline: %s", moe_last_error(ctx));
    if (!rc && svg_path) {
        char *svg = NULL;
        if (moe_roofline_svg(ctx, list, roof, &svg) != MOE_STATUS_OK) rc = cli_fail(1, "roofline: %s", moe_last_error(ctx));
        else rc = analysis_write_file(svg_path, svg);
        free(svg);
    }
    if (!rc) {
        if (json) {
            print_json(list, roof);
            if (measure) print_measurement_json(list, &me);
            printf("}\n");
        } else {
            print_table(list, roof);
            if (measure) print_measurement_table(list, &gpu, &me);
        }
        /* a shape or dtype not timed: the output above has it (with its reason); exit 1 */
        if (measure && report_failures(&me)) rc = 1;
    }
    measurement_free(&me);
    moe_roofline_free(roof);
    moe_shape_list_free(list);
    moe_context_free(ctx);
    return rc;
}
