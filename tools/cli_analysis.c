/* Helpers the analysis commands (moefuse shapes, roofline, advise) share: the step and model
 * options, the GPU and file arguments, and the number and header formatting of their output.
 * Declared in cli.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

int analysis_context_create(moe_context_t **ctx) {
    *ctx = NULL;
    if (moe_context_create(MOE_BACKEND_CPU, 0, ctx) != MOE_STATUS_OK)
        return cli_fail(1, "cannot create a context: %s", moe_last_error(NULL));
    return 0;
}

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

int analysis_gpu_svg_option(int argc, char **argv, int *i, const char **gpu_name, const char **svg_path, int *rc) {
    const char *value = NULL;
    const char **target = NULL;
    if (cli_option(argc, argv, i, "--gpu", &value)) target = gpu_name;
    else if (cli_option(argc, argv, i, "--svg", &value)) target = svg_path;
    else return 0;
    if (!value) *rc = 2;
    *target = value;
    return 1;
}

/* A built-in name, or a JSON file. Prints one line and returns the exit code on failure. */
int analysis_load_gpu(moe_context_t *ctx, const char *name, moe_gpu_spec *gpu) {
    if (moe_gpu_builtin(ctx, name, gpu) == MOE_STATUS_OK) return 0;
    struct stat sb;
    if (stat(name, &sb) != 0)
        return cli_fail(2, "unknown --gpu '%s' (built in: h200, h100, b200; or a JSON file)", name);
    moe_status st = moe_gpu_load(ctx, name, gpu);
    if (st != MOE_STATUS_OK) return cli_fail(2, "--gpu %s: %s", name, moe_last_error(ctx));
    return 0;
}

int analysis_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return cli_fail(1, "cannot write %s", path);
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad) return cli_fail(1, "writing %s failed", path);
    return 0;
}
