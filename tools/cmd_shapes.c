/* moefuse shapes: every weight GEMM of one step of a model, as M x K x N. Also holds the option
 * parsing the analysis commands share (shapes, roofline, advise). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "moefuse_analysis.h"

/* ---- shared by cmd_shapes.c, cmd_roofline.c, cmd_advise.c ---------------------------- */

/* Options of the step and the model, common to the analysis commands. */
int analysis_common_option(int argc, char **argv, int *i, moe_context_t *ctx, moe_shape_options *opt,
                           const char **model, const char **config, unsigned *seen, int *rc);
void analysis_format_dim(double v, char *buf, size_t size);
void analysis_format_si(double v, char *buf, size_t size);
void analysis_format_layers(const moe_gemm_row *r, char *buf, size_t size);
void analysis_print_header(FILE *f, const moe_shape_list *l);
void analysis_json_notes(FILE *f, const moe_shape_list *l);
void analysis_json_number(FILE *f, double v);
int analysis_require_step(unsigned seen, const char *command);

/* Bits of *seen, so a command can tell what was given. */
enum { SEEN_BATCH = 1, SEEN_SEQ = 2, SEEN_MODE = 4, SEEN_CONTEXT = 8 };

/* Returns 1 when argv[*i] was one of the common options (with *rc != 0 if it was bad), 0 when
 * it is not one of them. */
int analysis_common_option(int argc, char **argv, int *i, moe_context_t *ctx, moe_shape_options *opt,
                           const char **model, const char **config, unsigned *seen, int *rc) {
    static const struct {
        const char *flag, *name;
        unsigned bit;
    } flags[] = {{"--batch", "batch", SEEN_BATCH}, {"--seq", "seq", SEEN_SEQ}, {"--mode", "mode", SEEN_MODE},
                 {"--context", "context", SEEN_CONTEXT}, {"--tp", "tp", 0}, {"--ep", "ep", 0},
                 {"--dtype", "dtype", 0}};
    const char *value = NULL;
    *rc = 0;
    if (cli_option(argc, argv, i, "--model", &value)) {
        if (!value) *rc = 2;
        else *model = value;
        return 1;
    }
    if (cli_option(argc, argv, i, "--config", &value)) {
        if (!value) *rc = 2;
        else *config = value;
        return 1;
    }
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        if (!cli_option(argc, argv, i, flags[f].flag, &value)) continue;
        if (!value) {
            *rc = 2;
            return 1;
        }
        moe_status st = moe_shape_options_set(ctx, opt, flags[f].name, value);
        if (st != MOE_STATUS_OK) *rc = cli_fail(2, "%s", moe_last_error(ctx));
        *seen |= flags[f].bit;
        return 1;
    }
    return 0;
}

/* A JSON number that reads back to the same double (null when not finite). */
void analysis_json_number(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}

/* --batch, --seq and --mode are required by shapes and roofline: 0, or the exit code after
 * one line naming the first missing. */
int analysis_require_step(unsigned seen, const char *command) {
    if (!(seen & SEEN_BATCH)) return cli_fail(2, "%s: --batch B is required", command);
    if (!(seen & SEEN_SEQ)) return cli_fail(2, "%s: --seq S is required", command);
    if (!(seen & SEEN_MODE)) return cli_fail(2, "%s: --mode train|prefill|decode is required", command);
    return 0;
}

/* 4096 -> "4096", 0.03125 -> "0.03125", 255.999 -> "256" (4 significant digits past 1e4). */
void analysis_format_dim(double v, char *buf, size_t size) {
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, "%.4g", v);
}

/* 1.23e12 -> "1.23T"; SI prefixes, 3 significant digits. */
void analysis_format_si(double v, char *buf, size_t size) {
    static const char *prefix[] = {"", "k", "M", "G", "T", "P", "E"};
    int p = 0;
    while (fabs(v) >= 999.5 && p < 6) {
        v /= 1000.0;
        p++;
    }
    if (v != 0 && fabs(v) < 0.01) snprintf(buf, size, "%.2e", v);
    else snprintf(buf, size, "%.3g%s", v, prefix[p]);
}

/* "0-60", "1-47/2", "5", "-" (no layer: the LM head). */
void analysis_format_layers(const moe_gemm_row *r, char *buf, size_t size) {
    if (r->layer_count <= 0) snprintf(buf, size, "-");
    else if (r->layer_count == 1) snprintf(buf, size, "%lld", (long long)r->layer_first);
    else if (r->layer_step == 1) snprintf(buf, size, "%lld-%lld", (long long)r->layer_first, (long long)r->layer_last);
    else
        snprintf(buf, size, "%lld-%lld/%lld", (long long)r->layer_first, (long long)r->layer_last,
                 (long long)r->layer_step);
}

static const char *const CONVENTION =
    "GEMMs as M x K x N (Transformer Engine): Fprop M=T K=in N=out; Dgrad M=T K=out N=in; Wgrad M=in K=T N=out";
static const char *const SCOPE =
    "weight GEMMs only: attention score/softmax matmuls (Q.K^T, P.V) are not weight GEMMs and are left out";

void analysis_print_header(FILE *f, const moe_shape_list *l) {
    const moe_shape_options *o = &l->options;
    fprintf(f, "%s: %s, batch %lld, seq %lld", l->config.name, moe_step_mode_name(o->mode), (long long)o->batch,
            (long long)o->seq);
    if (o->mode == MOE_STEP_DECODE) fprintf(f, ", context %lld", (long long)o->context);
    fprintf(f, " -> T = %lld tokens; tp %lld, ep %lld; %s operands; per GPU\n", (long long)l->tokens,
            (long long)o->tp, (long long)o->ep, o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16");
    fprintf(f, "%s\n%s\n", CONVENTION, SCOPE);
    fprintf(f, "tp splits heads, intermediates and vocab (MLA q_a/kv_a and the router are replicated); "
               "ep splits the routed experts (E/ep per GPU)\n");
    for (int i = 0; i < l->num_notes; i++) fprintf(f, "note: %s\n", l->notes[i]);
}

void analysis_json_notes(FILE *f, const moe_shape_list *l) {
    fputs("\"convention\": ", f);
    cli_json_string(f, CONVENTION);
    fputs(", \"scope\": ", f);
    cli_json_string(f, SCOPE);
    fputs(", \"notes\": [", f);
    for (int i = 0; i < l->num_notes; i++) {
        if (i) fputs(", ", f);
        cli_json_string(f, l->notes[i]);
    }
    fputs("]", f);
}

/* ---- moefuse shapes ------------------------------------------------------------------ */

static void usage(FILE *f) {
    fputs("usage: moefuse shapes (--model NAME | --config PATH) --batch B --seq S --mode train|prefill|decode\n"
          "                      [--context C] [--tp N] [--ep N] [--dtype bf16|fp8] [--json | --csv]\n"
          "Every weight GEMM of one step of the whole model, per GPU, as M x K x N in Transformer Engine's\n"
          "convention (Fprop M=T K=in N=out, Dgrad M=T K=out N=in, Wgrad M=in K=T N=out), with FLOPs, bytes\n"
          "and arithmetic intensity. train lists Fprop, Dgrad and Wgrad; prefill and decode Fprop only.\n"
          "decode: T = batch (one new token per sequence), --context (default --seq) is the KV length.\n"
          "Routed experts carry the expected tokens per expert T*k/E (uniform routing).\n",
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
    if (moe_context_create(MOE_BACKEND_CPU, 0, &ctx) != MOE_STATUS_OK)
        return cli_fail(1, "cannot create a context: %s", moe_last_error(NULL));
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
