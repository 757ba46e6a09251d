/* moefuse advise: a co-design report on a model's shapes: dimension alignment and its tile
 * cost, MoE Wgrad reduction lengths, padding waste by batch size, and the decode curve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fputs("usage: moefuse advise (--model NAME | --config PATH) [--gpu h200|h100|b200|FILE.json] [--tp N] [--ep N]\n"
          "                      [--dtype bf16|fp8] [--context C] [--batch B --seq S] [--svg FILE] [--json]\n"
          "A co-design report: GEMM dimensions that are not multiples of 128/256/512 and their tile efficiency,\n"
          "with the nearest aligned alternatives; the K of the MoE Wgrad GEMMs (tokens per expert) at a training\n"
          "step of B x S tokens (default 1 x 4096); padding waste and load by tokens per step; and the decode\n"
          "curve, tokens/s per user against tokens/s per GPU for batch 1..1024 at context C (default S):\n"
          "step time = max((GEMM bytes with the experts touched + KV cache bytes) / bandwidth, FLOPs / peak).\n"
          "Decode FLOPs = the weight GEMMs (moefuse shapes --mode decode; a multiply-add is 2 FLOPs) plus attention's\n"
          "score and value products of each new token against the C cached tokens it attends (no causal halving at\n"
          "decode; at most the window in a sliding-window or chunked layer, as the config marks them):\n"
          "4*head_dim per query head and cached token; MLA on its cached latent, kv_b_proj absorbed:\n"
          "2*(kv_lora_rank+qk_rope_head_dim) + 2*kv_lora_rank. KV cache: attended tokens summed over the layers x batch\n"
          "x (GQA 2*kv_heads*head_dim, MLA kv_lora_rank+qk_rope_head_dim) elements of 2 bytes (also with --dtype fp8).\n"
          "--svg writes the decode curve. The GPU defaults to h200 (measured ceilings).\n",
          f);
}

static void print_table(const moe_advice *a) {
    const moe_shape_options *o = &a->options;
    printf("%s on %s (%s): tp %lld, ep %lld, %s\n\n", a->model, a->gpu.name, a->gpu.source, (long long)o->tp,
           (long long)o->ep, o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16");
    printf("GEMM dimensions per GPU and their tile efficiency (fraction of a tile row/column doing work)\n");
    printf("%-32s %7s %9s %8s %8s  %s\n", "dimension", "value", "multiple", "eff@128", "eff@256",
           "aligned alternatives");
    for (int64_t i = 0; i < a->num_dims; i++) {
        const moe_dim_advice *d = &a->dims[i];
        char mult[16], alt[96] = "-";
        if (d->multiple_of) snprintf(mult, sizeof mult, "%d", d->multiple_of);
        else snprintf(mult, sizeof mult, "none");
        if (d->multiple_of == 0)
            snprintf(alt, sizeof alt, "%lld or %lld (x128), %lld (x256)", (long long)d->below_128,
                     (long long)d->above_128, (long long)d->above_256);
        else if (d->multiple_of == 128)
            snprintf(alt, sizeof alt, "%lld (x256)", (long long)d->above_256);
        printf("%-32s %7lld %9s %7.1f%% %7.1f%%  %s\n", d->name, (long long)d->value, mult, 100 * d->efficiency_128,
               100 * d->efficiency_256, alt);
    }
    if (a->num_padding > 0) {
        printf("\nMoE Wgrad: K = tokens per expert = T*k/E = %.4g at a %lld-token training step; K reaches 128 at T = "
               "%lld, 256 at %lld, 512 at %lld\n",
               a->wgrad_k, (long long)a->wgrad_tokens, (long long)a->wgrad_tokens_for_k[0],
               (long long)a->wgrad_tokens_for_k[1], (long long)a->wgrad_tokens_for_k[2]);
        printf("\nPadding waste and load by tokens per step (uniform routing, n_e ~ Binomial(T, k/E))\n");
        printf("%8s %11s %9s %9s %9s %10s\n", "tokens", "per expert", "touched", "max load", "waste@64", "waste@128");
        for (int64_t i = 0; i < a->num_padding; i++) {
            const moe_padding_point *p = &a->padding[i];
            printf("%8lld %11.4g %9.4g %9.4g %8.1f%% %9.1f%%\n", (long long)p->tokens, p->tokens_per_expert,
                   p->experts_touched, p->expected_max_load, 100 * p->waste_64, 100 * p->waste_128);
        }
    }
    printf("\nDecode curve at context %lld (per step, per GPU; step = max(bytes/bandwidth, FLOPs/peak))\n",
           (long long)o->context);
    printf("%6s %9s %11s %11s %10s %9s %8s\n", "batch", "step_ms", "tok/s/user", "tok/s/GPU", "GEMM_GB", "KV_GB",
           "bound");
    for (int64_t i = 0; i < a->num_decode; i++) {
        const moe_decode_point *d = &a->decode[i];
        printf("%6lld %9.4f %11.1f %11.1f %10.3f %9.3f %8s\n", (long long)d->batch, d->step_s * 1e3,
               d->tokens_per_s_user, d->tokens_per_s_gpu, d->gemm_bytes / 1e9, d->kv_bytes / 1e9,
               d->memory_bound ? "memory" : "compute");
    }
    if (a->num_notes) printf("\n");
    for (int i = 0; i < a->num_notes; i++) printf("note: %s\n", a->notes[i]);
}

static void print_json(const moe_advice *a) {
    const moe_shape_options *o = &a->options;
    printf("{\"model\": ");
    cli_json_string(stdout, a->model);
    printf(", \"gpu\": ");
    cli_json_string(stdout, a->gpu.name);
    printf(", \"tp\": %lld, \"ep\": %lld, \"dtype\": \"%s\", \"context\": %lld,\n\"dimensions\": [\n", (long long)o->tp,
           (long long)o->ep, o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16", (long long)o->context);
    for (int64_t i = 0; i < a->num_dims; i++) {
        const moe_dim_advice *d = &a->dims[i];
        printf("  {\"name\": ");
        cli_json_string(stdout, d->name);
        printf(", \"value\": %lld, \"multiple_of\": %d, \"efficiency_128\": %.6g, \"efficiency_256\": %.6g, "
               "\"below_128\": %lld, \"above_128\": %lld, \"above_256\": %lld}%s\n",
               (long long)d->value, d->multiple_of, d->efficiency_128, d->efficiency_256, (long long)d->below_128,
               (long long)d->above_128, (long long)d->above_256, i + 1 < a->num_dims ? "," : "");
    }
    printf("],\n\"wgrad\": {\"tokens\": %lld, \"k\": %.17g, \"tokens_for_k_128\": %lld, \"tokens_for_k_256\": %lld, "
           "\"tokens_for_k_512\": %lld},\n\"padding\": [\n",
           (long long)a->wgrad_tokens, a->wgrad_k, (long long)a->wgrad_tokens_for_k[0],
           (long long)a->wgrad_tokens_for_k[1], (long long)a->wgrad_tokens_for_k[2]);
    for (int64_t i = 0; i < a->num_padding; i++) {
        const moe_padding_point *p = &a->padding[i];
        printf("  {\"tokens\": %lld, \"tokens_per_expert\": %.17g, \"experts_touched\": %.17g, \"expected_max_load\": "
               "%.17g, \"waste_64\": %.17g, \"waste_128\": %.17g}%s\n",
               (long long)p->tokens, p->tokens_per_expert, p->experts_touched, p->expected_max_load, p->waste_64,
               p->waste_128, i + 1 < a->num_padding ? "," : "");
    }
    printf("],\n\"decode\": [\n");
    for (int64_t i = 0; i < a->num_decode; i++) {
        const moe_decode_point *d = &a->decode[i];
        printf("  {\"batch\": %lld, \"step_ms\": %.17g, \"tokens_per_s_user\": %.17g, \"tokens_per_s_gpu\": %.17g, "
               "\"gemm_bytes\": %.17g, \"kv_bytes\": %.17g, \"flops\": %.17g, \"bound\": \"%s\"}%s\n",
               (long long)d->batch, d->step_s * 1e3, d->tokens_per_s_user, d->tokens_per_s_gpu, d->gemm_bytes,
               d->kv_bytes, d->flops, d->memory_bound ? "memory" : "compute", i + 1 < a->num_decode ? "," : "");
    }
    printf("],\n\"notes\": [");
    for (int i = 0; i < a->num_notes; i++) {
        if (i) printf(", ");
        cli_json_string(stdout, a->notes[i]);
    }
    printf("]}\n");
}

int cmd_advise(int argc, char **argv) {
    moe_context_t *ctx = NULL;
    if (analysis_context_create(&ctx)) return 1;
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    opt.seq = 4096; /* the training step of the Wgrad advice, and the default context */
    const char *model = NULL, *config = NULL, *gpu_name = "h200", *svg_path = NULL;
    unsigned seen = 0;
    int json = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            moe_context_free(ctx);
            return 0;
        }
        if (!strcmp(argv[i], "--mode") || !strncmp(argv[i], "--mode=", 7)) {
            rc = cli_fail(2, "advise: --mode does not apply (the report covers training and decode)");
            break;
        }
        if (analysis_common_option(argc, argv, &i, ctx, &opt, &model, &config, &seen, &rc)) continue;
        if (analysis_gpu_svg_option(argc, argv, &i, &gpu_name, &svg_path, &rc)) continue;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            rc = cli_fail(2, "advise: unknown option '%s' (moefuse advise --help)", argv[i]);
        }
    }
    moe_model_config cfg;
    moe_gpu_spec gpu;
    if (!rc) rc = cli_load_model(ctx, model, config, &cfg);
    if (!rc) rc = analysis_load_gpu(ctx, gpu_name, &gpu);
    moe_advice *advice = NULL;
    if (!rc && !(advice = malloc(sizeof *advice))) rc = cli_fail(1, "advise: out of host memory");
    if (!rc && moe_advice_compute(ctx, &cfg, &opt, &gpu, advice) != MOE_STATUS_OK)
        rc = cli_fail(2, "advise: %s", moe_last_error(ctx));
    if (!rc && svg_path) {
        char *svg = NULL;
        if (moe_advice_svg(ctx, advice, &svg) != MOE_STATUS_OK) rc = cli_fail(1, "advise: %s", moe_last_error(ctx));
        else rc = analysis_write_file(svg_path, svg);
        free(svg);
    }
    if (!rc) {
        if (json) print_json(advice);
        else print_table(advice);
    }
    free(advice);
    moe_context_free(ctx);
    return rc;
}
