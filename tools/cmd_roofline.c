/* moefuse roofline: per GEMM of a step, memory- or compute-bound, predicted time with tile and
 * wave quantisation on a GPU, MoE padding and load; a whole-step summary; an SVG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fputs("usage: moefuse roofline (--model NAME | --config PATH) --batch B --seq S --mode train|prefill|decode\n"
          "                        --gpu h200|h100|b200|FILE.json [--context C] [--tp N] [--ep N]\n"
          "                        [--dtype bf16|fp8] [--svg FILE] [--json] [--measure]\n"
          "Per GEMM of the step (moefuse shapes): memory- or compute-bound, predicted time with tile and wave\n"
          "quantisation over the tile menu (128x128, 128x256, 256x128, 64x128; the best tile wins), MoE padding\n"
          "waste with 128-row blocks, expected max load and experts touched (Binomial routing); a step summary.\n"
          "GPU file keys: bf16_tflops, fp8_tflops, read_tbps, sms (required), l2_mb, ctas_per_sm, launch_us, name.\n"
          "--measure times every shape on the GPU (needs the CUDA backend and moefuse's GPU kernels).\n",
          f);
}

static void print_table(const moe_shape_list *l, const moe_roofline *rf) {
    analysis_print_header(stdout, l);
    const moe_gpu_spec *g = &rf->gpu;
    printf("gpu %s (%s): bf16 %.0f TFLOP/s, fp8 %.0f TFLOP/s, read %.2f TB/s, %lld SMs, L2 %.0f MB; ridge %.0f "
           "FLOP/B\n",
           g->name, g->source, g->bf16_flops / 1e12, g->fp8_flops / 1e12, g->read_bw / 1e12, (long long)g->sms,
           g->l2_bytes / 1e6, rf->ridge);
    printf("time = max(waves x tile time, bytes / read bandwidth) per launch, best tile of the menu; ideal = "
           "max(FLOPs/peak, bytes/bandwidth)\n\n");
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
           "\"l2_mb\": %.6g, \"launch_us\": %.6g, \"ridge\": %.6g},\n",
           g->bf16_flops / 1e12, g->fp8_flops / 1e12, g->read_bw / 1e12, (long long)g->sms, (long long)g->ctas_per_sm,
           g->l2_bytes / 1e6, g->launch_s * 1e6, rf->ridge);
    analysis_json_notes(stdout, l);
    printf(",\n\"gemms\": [\n");
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        const moe_roofline_row *x = &rf->rows[i];
        char layers[32];
        analysis_format_layers(r, layers, sizeof layers);
        printf("  {\"layers\": \"%s\", \"name\": \"%s\", \"kind\": \"%s\", \"pass\": \"%s\", \"m\": %.17g, \"k\": %.17g, "
               "\"n\": %.17g, \"count\": %lld, \"flops\": %.17g, \"bytes\": %.17g, \"intensity\": %.17g, \"bound\": "
               "\"%s\", \"tile\": \"%dx%d\", \"split_k\": %d, \"tiles\": %.17g, \"waves\": %.17g, \"tile_efficiency\": %.6g, "
               "\"wave_efficiency\": %.6g, \"ideal_ms\": %.17g, \"predicted_ms\": %.17g, \"tflops\": %.6g",
               layers, r->name, moe_gemm_kind_name(r->kind), moe_gemm_pass_name(r->pass), r->m, r->k, r->n,
               (long long)r->count, r->flops, r->bytes, r->intensity, x->compute_bound ? "compute" : "memory",
               x->tile.m, x->tile.n, x->split_k, x->tiles, x->waves, x->tile_efficiency, x->wave_efficiency, x->ideal_s * 1e3,
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
    printf("}}\n");
}

/* --measure needs GPU kernels that are not written yet: refuse with the reason. */
static int refuse_measure(void) {
    moe_context_t *gpu = NULL;
    moe_status st = moe_context_create(MOE_BACKEND_CUDA, 0, &gpu);
    moe_context_free(gpu);
    if (st != MOE_STATUS_OK)
        return cli_fail(1, "roofline: --measure needs the CUDA backend; not available in this build/on this machine");
    return cli_fail(1, "roofline: --measure needs moefuse's GPU GEMM kernels, which this version does not have yet");
}

int cmd_roofline(int argc, char **argv) {
    moe_context_t *ctx = NULL;
    if (analysis_context_create(&ctx)) return 1;
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    const char *model = NULL, *config = NULL, *gpu_name = NULL, *svg_path = NULL;
    unsigned seen = 0;
    int json = 0, measure = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            moe_context_free(ctx);
            return 0;
        }
        if (analysis_common_option(argc, argv, &i, ctx, &opt, &model, &config, &seen, &rc)) continue;
        if (analysis_gpu_svg_option(argc, argv, &i, &gpu_name, &svg_path, &rc)) continue;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--measure")) {
            measure = 1;
        } else if (!strcmp(argv[i], "--csv")) {
            rc = cli_fail(2, "roofline: --csv is not offered here (moefuse shapes --csv lists the GEMMs); use --json");
        } else {
            rc = cli_fail(2, "roofline: unknown option '%s' (moefuse roofline --help)", argv[i]);
        }
    }
    if (!rc) rc = analysis_require_step(seen, "roofline");
    if (!rc && !gpu_name) rc = cli_fail(2, "roofline: --gpu h200|h100|b200|FILE.json is required");
    moe_model_config cfg;
    moe_gpu_spec gpu;
    if (!rc) rc = cli_load_model(ctx, model, config, &cfg);
    if (!rc) rc = analysis_load_gpu(ctx, gpu_name, &gpu);
    moe_shape_list *list = NULL;
    moe_roofline *roof = NULL;
    if (!rc && moe_shape_list_create(ctx, &cfg, &opt, &list) != MOE_STATUS_OK)
        rc = cli_fail(2, "roofline: %s", moe_last_error(ctx));
    if (!rc && measure) rc = refuse_measure();
    if (!rc && moe_roofline_create(ctx, list, &gpu, &roof) != MOE_STATUS_OK)
        rc = cli_fail(1, "roofline: %s", moe_last_error(ctx));
    if (!rc && svg_path) {
        char *svg = NULL;
        if (moe_roofline_svg(ctx, list, roof, &svg) != MOE_STATUS_OK) rc = cli_fail(1, "roofline: %s", moe_last_error(ctx));
        else rc = analysis_write_file(svg_path, svg);
        free(svg);
    }
    if (!rc) {
        if (json) print_json(list, roof);
        else print_table(list, roof);
    }
    moe_roofline_free(roof);
    moe_shape_list_free(list);
    moe_context_free(ctx);
    return rc;
}
