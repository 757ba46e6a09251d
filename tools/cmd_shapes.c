/* moefuse shapes: every weight GEMM of one step of a model, as M x K x N. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fputs("usage: moefuse shapes (--model NAME | --config PATH) --batch B --seq S --mode train|prefill|decode\n"
          "                      [--context C] [--tp N] [--ep N] [--dtype bf16|fp8] [--json | --csv]\n"
          "Every weight GEMM of one step of the whole model, per GPU, as M x K x N in Transformer Engine's\n"
          "convention (Fprop M=T K=in N=out, Dgrad M=T K=out N=in, Wgrad M=in K=T N=out), with FLOPs, bytes\n"
          "and arithmetic intensity. train lists Fprop, Dgrad and Wgrad; prefill and decode Fprop only.\n"
          "decode: T = batch (one new token per sequence), --context (default --seq) is the KV length.\n"
          "Routed experts carry the expected tokens per expert T*k/E (uniform routing).\n"
          "FLOPs = 2*M*K*N (a multiply-add is 2 FLOPs); bytes: operands read once, output written once, weights\n"
          "of routed experts only for the experts expected to be touched, E*(1-(1-k/E)^T). Not counted: attention's\n"
          "score/value matmuls (not weight GEMMs), the embedding lookup (a row gather, not a GEMM), norms, biases,\n"
          "softmax and activations. The LM head is counted (tied to the embedding or not).\n",
          f);
}

static void print_table(const moe_shape_list *l) {
    analysis_print_header(stdout, l);
    printf("\n%-8s %-18s %-14s %-5s %9s %9s %9s %6s %9s %9s %8s\n", "layers", "name", "kind", "pass", "M", "K", "N",
           "count", "FLOP", "bytes", "FLOP/B");
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        char layers[32], m[24], k[24], n[24], fl[16], by[16];
        analysis_format_layers(r, layers, sizeof layers);
        analysis_format_dim(r->m, m, sizeof m);
        analysis_format_dim(r->k, k, sizeof k);
        analysis_format_dim(r->n, n, sizeof n);
        analysis_format_si(r->flops, fl, sizeof fl);
        analysis_format_si(r->bytes, by, sizeof by);
        printf("%-8s %-18s %-14s %-5s %9s %9s %9s %6lld %9s %9s %8.1f\n", layers, r->name,
               moe_gemm_kind_name(r->kind), moe_gemm_pass_name(r->pass), m, k, n, (long long)r->count, fl, by,
               r->intensity);
    }
    printf("\n");
    int passes = l->options.mode == MOE_STEP_TRAIN ? 3 : 1;
    for (int p = 0; p < passes; p++) {
        char fl[16], by[16];
        analysis_format_si(l->pass_flops[p], fl, sizeof fl);
        analysis_format_si(l->pass_bytes[p], by, sizeof by);
        printf("total %-6s %9sFLOP %9sB\n", moe_gemm_pass_name((moe_gemm_pass)p), fl, by);
    }
    char fl[16], by[16];
    analysis_format_si(l->total_flops, fl, sizeof fl);
    analysis_format_si(l->total_bytes, by, sizeof by);
    printf("total        %9sFLOP %9sB  (%lld GEMM rows; %.1f FLOP/B)\n", fl, by, (long long)l->num_rows,
           l->total_bytes > 0 ? l->total_flops / l->total_bytes : 0.0);
}

static void print_csv(const moe_shape_list *l) {
    printf("layers,layer_first,layer_last,layer_step,layer_count,name,kind,pass,m,k,n,count,touched,flops,bytes,"
           "intensity\n");
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        char layers[32];
        analysis_format_layers(r, layers, sizeof layers);
        printf("%s,%lld,%lld,%lld,%lld,%s,%s,%s,%.17g,%.17g,%.17g,%lld,%.17g,%.17g,%.17g,%.17g\n", layers,
               (long long)r->layer_first, (long long)r->layer_last, (long long)r->layer_step,
               (long long)r->layer_count, r->name, moe_gemm_kind_name(r->kind), moe_gemm_pass_name(r->pass), r->m,
               r->k, r->n, (long long)r->count, r->touched, r->flops, r->bytes, r->intensity);
    }
    printf("total,,,,,total,,,,,,,,%.17g,%.17g,%.17g\n", l->total_flops, l->total_bytes,
           l->total_bytes > 0 ? l->total_flops / l->total_bytes : 0.0);
}

static void print_json(const moe_shape_list *l) {
    const moe_shape_options *o = &l->options;
    printf("{\"model\": ");
    cli_json_string(stdout, l->config.name);
    printf(", \"mode\": \"%s\", \"batch\": %lld, \"seq\": %lld, \"context\": %lld, \"tokens\": %lld, \"tp\": %lld, "
           "\"ep\": %lld, \"dtype\": \"%s\", ",
           moe_step_mode_name(o->mode), (long long)o->batch, (long long)o->seq, (long long)o->context,
           (long long)l->tokens, (long long)o->tp, (long long)o->ep, o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16");
    printf("\"tokens_per_expert\": ");
    analysis_json_number(stdout, l->tokens_per_expert);
    printf(", \"experts_touched\": ");
    analysis_json_number(stdout, l->experts_touched);
    printf(", ");
    analysis_json_notes(stdout, l);
    printf(",\n\"gemms\": [\n");
    for (int64_t i = 0; i < l->num_rows; i++) {
        const moe_gemm_row *r = &l->rows[i];
        char layers[32];
        analysis_format_layers(r, layers, sizeof layers);
        printf("  {\"layers\": \"%s\", \"layer_first\": %lld, \"layer_last\": %lld, \"layer_step\": %lld, "
               "\"layer_count\": %lld, \"name\": \"%s\", \"kind\": \"%s\", \"pass\": \"%s\", \"m\": ",
               layers, (long long)r->layer_first, (long long)r->layer_last, (long long)r->layer_step,
               (long long)r->layer_count, r->name, moe_gemm_kind_name(r->kind), moe_gemm_pass_name(r->pass));
        analysis_json_number(stdout, r->m);
        printf(", \"k\": ");
        analysis_json_number(stdout, r->k);
        printf(", \"n\": ");
        analysis_json_number(stdout, r->n);
        printf(", \"count\": %lld, \"touched\": ", (long long)r->count);
        analysis_json_number(stdout, r->touched);
        printf(", \"flops\": ");
        analysis_json_number(stdout, r->flops);
        printf(", \"bytes\": ");
        analysis_json_number(stdout, r->bytes);
        printf(", \"intensity\": ");
        analysis_json_number(stdout, r->intensity);
        printf("}%s\n", i + 1 < l->num_rows ? "," : "");
    }
    printf("],\n\"totals\": {\"flops\": ");
    analysis_json_number(stdout, l->total_flops);
    printf(", \"bytes\": ");
    analysis_json_number(stdout, l->total_bytes);
    printf(", \"intensity\": ");
    analysis_json_number(stdout, l->total_bytes > 0 ? l->total_flops / l->total_bytes : 0.0);
    printf(", \"by_pass\": {");
    int passes = o->mode == MOE_STEP_TRAIN ? 3 : 1;
    for (int p = 0; p < passes; p++) {
        printf("%s\"%s\": {\"flops\": ", p ? ", " : "", moe_gemm_pass_name((moe_gemm_pass)p));
        analysis_json_number(stdout, l->pass_flops[p]);
        printf(", \"bytes\": ");
        analysis_json_number(stdout, l->pass_bytes[p]);
        printf("}");
    }
    printf("}}}\n");
}

int cmd_shapes(int argc, char **argv) {
    moe_context_t *ctx = NULL;
    if (analysis_context_create(&ctx)) return 1;
    moe_shape_options opt;
    moe_shape_options_init(&opt);
    const char *model = NULL, *config = NULL;
    unsigned seen = 0;
    int json = 0, csv = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            moe_context_free(ctx);
            return 0;
        }
        if (analysis_common_option(argc, argv, &i, ctx, &opt, &model, &config, &seen, &rc)) continue;
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--csv")) csv = 1;
        else rc = cli_fail(2, "shapes: unknown option '%s' (moefuse shapes --help)", argv[i]);
    }
    if (!rc && json && csv) rc = cli_fail(2, "shapes: --json and --csv contradict each other: give one");
    if (!rc) rc = analysis_require_step(seen, "shapes");
    moe_model_config cfg;
    if (!rc) rc = cli_load_model(ctx, model, config, &cfg);
    moe_shape_list *list = NULL;
    if (!rc) {
        moe_status st = moe_shape_list_create(ctx, &cfg, &opt, &list);
        if (st != MOE_STATUS_OK) rc = cli_fail(2, "shapes: %s", moe_last_error(ctx));
    }
    if (!rc) {
        if (json) print_json(list);
        else if (csv) print_csv(list);
        else print_table(list);
    }
    moe_shape_list_free(list);
    moe_context_free(ctx);
    return rc;
}
