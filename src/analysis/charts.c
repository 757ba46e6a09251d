/* The two charts: the roofline of a step's GEMMs and the decode curve of the advisor. */
#include "analysis_internal.h"
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char pass_letter[MOE_PASS_COUNT_] = {'F', 'D', 'W'};

/* A chart whose data a log axis cannot hold (zero, negative or non-finite: a GPU spec with
 * extreme or non-finite rates, or a row with none), named with its range. */
static moe_status undrawable(moe_context_t *ctx, const char *what, const moe__plot *p) {
    return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                      "%s: the data spans x %g..%g and y %g..%g, expected finite positive values for log axes "
                      "(non-finite or zero rates in the GPU spec?)",
                      what, p->xmin, p->xmax, p->ymin, p->ymax);
}

moe_status moe_roofline_svg(moe_context_t *ctx, const moe_shape_list *list, const moe_roofline *roof, char **svg) {
    moe__clear_error(ctx);
    if (!svg) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_roofline_svg: svg is NULL");
    *svg = NULL;
    if (!list || !roof)
        return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_roofline_svg: %s is NULL", !list ? "list" : "roof");
    moe_status st = moe__shape_list_check(ctx, list);
    if (st != MOE_STATUS_OK) return st;
    if (roof->num_rows != list->num_rows)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "roof: %lld rows, the list has %lld",
                          (long long)roof->num_rows, (long long)list->num_rows);
    int64_t n = list->num_rows;
    moe__plot_point *pts = calloc((size_t)(n > 0 ? n : 1), sizeof *pts);
    if (!pts) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "roofline chart: out of host memory");

    /* One point per row; rows of the same GEMM that land on the same spot share a label
     * ("o_proj F+D+W"). Names that repeat over several layer runs carry their layers. */
    int npts = 0;
    int *merged_into = calloc((size_t)(n > 0 ? n : 1), sizeof *merged_into);
    if (!merged_into) {
        free(pts);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "roofline chart: out of host memory");
    }
    double xmin = INFINITY, xmax = roof->ridge, ymin = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const moe_gemm_row *r = &list->rows[i];
        double x = r->intensity, y = roof->rows[i].achieved_flops / 1e12;
        merged_into[i] = -1;
        if (!(x > 0) || !(y > 0)) continue;
        xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y);
        for (int64_t j = 0; j < i; j++) {
            const moe_gemm_row *q = &list->rows[j];
            if (merged_into[j] < 0 || strcmp(q->name, r->name) || q->layer_first != r->layer_first) continue;
            moe__plot_point *pt = &pts[merged_into[j]];
            if (fabs(log(pt->x / x)) < 0.01 && fabs(log(pt->y / y)) < 0.01) {
                size_t len = strlen(pt->label);
                snprintf(pt->label + len, sizeof pt->label - len, "+%c", pass_letter[r->pass]);
                merged_into[i] = merged_into[j];
                break;
            }
        }
        if (merged_into[i] >= 0) continue;
        int repeats = 0;
        for (int64_t j = 0; j < n; j++)
            repeats += !strcmp(list->rows[j].name, r->name) && list->rows[j].pass == r->pass;
        moe__plot_point *pt = &pts[npts];
        pt->x = x, pt->y = y, pt->color = (int)r->pass;
        if (repeats > 1 && r->layer_count > 0)
            snprintf(pt->label, sizeof pt->label, "%s L%lld-%lld %c", r->name, (long long)r->layer_first,
                     (long long)r->layer_last, pass_letter[r->pass]);
        else
            snprintf(pt->label, sizeof pt->label, "%s %c", r->name, pass_letter[r->pass]);
        merged_into[i] = npts++;
    }
    free(merged_into);
    if (npts == 0) xmin = 1, ymin = 1;

    moe__plot p;
    memset(&p, 0, sizeof p);
    const moe_shape_options *o = &list->options;
    const char *dtype = o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16";
    snprintf(p.title, sizeof p.title, "Roofline: %s %s, T = %lld tokens, on %s", list->config.name,
             moe_step_mode_name(o->mode), (long long)list->tokens, roof->gpu.name);
    snprintf(p.subtitle, sizeof p.subtitle,
             "%s; %.0f TFLOP/s peak, %.2f TB/s read (%s); tp %lld ep %lld; predicted step %.4g ms", dtype,
             roof->peak_flops / 1e12, roof->gpu.read_bw / 1e12, roof->gpu.source, (long long)o->tp, (long long)o->ep,
             roof->total_time_s * 1e3);
    snprintf(p.xlabel, sizeof p.xlabel, "arithmetic intensity [FLOP/byte]");
    snprintf(p.ylabel, sizeof p.ylabel, "predicted throughput [TFLOP/s]");
    double peak_t = roof->peak_flops / 1e12, bw_t = roof->gpu.read_bw / 1e12; /* TFLOP/s, TB/s */
    double other_t = (o->dtype == MOE_DTYPE_E4M3 ? roof->gpu.bf16_flops : roof->gpu.fp8_flops) / 1e12;
    p.xmin = xmin / 1.6, p.xmax = xmax * 2.5;
    p.ymin = ymin / 1.6, p.ymax = fmax(peak_t, other_t) * 1.8;
    p.points = pts;
    p.npoints = npts;
    double x_lo = p.xmin, x_hi = p.xmax;
    double ridge = roof->ridge, ridge_other = other_t / bw_t;
    p.lines[p.nlines++] = (moe__plot_line){x_lo, bw_t * x_lo, ridge, peak_t, 5, 0, "", 0.5};
    snprintf(p.lines[0].label, sizeof p.lines[0].label, "read %.2f TB/s", bw_t);
    p.lines[p.nlines++] = (moe__plot_line){ridge, peak_t, x_hi, peak_t, 5, 0, "", 0.55};
    snprintf(p.lines[1].label, sizeof p.lines[1].label, "%s peak %.0f TFLOP/s (ridge %.0f FLOP/B)", dtype, peak_t,
             ridge);
    p.lines[p.nlines++] = (moe__plot_line){ridge_other, other_t, x_hi, other_t, 5, 1, "", 0.55};
    snprintf(p.lines[2].label, sizeof p.lines[2].label, "%s peak %.0f TFLOP/s",
             o->dtype == MOE_DTYPE_E4M3 ? "bf16" : "fp8", other_t);
    const char *passes[3] = {"F: fprop", "D: dgrad", "W: wgrad"};
    int np = o->mode == MOE_STEP_TRAIN ? 3 : 1;
    for (int i = 0; i < np; i++) {
        snprintf(p.legend[i].text, sizeof p.legend[i].text, "%s", passes[i]);
        p.legend[i].color = i;
    }
    p.nlegend = np;
    snprintf(p.notes[p.nnotes++], sizeof p.notes[0],
             "Each point: one GEMM of the step (M x K x N as in moefuse shapes) at its predicted time with tile and wave "
             "quantisation.");
    snprintf(p.notes[p.nnotes++], sizeof p.notes[0],
             "Routed experts: expected tokens per expert %.4g (Binomial routing), padded to the tile height.",
             list->tokens_per_expert);
    if (!moe__plot_drawable(&p)) {
        free(pts);
        return undrawable(ctx, "roofline chart", &p);
    }
    *svg = moe__plot_svg(&p);
    free(pts);
    if (!*svg) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "roofline chart: out of host memory");
    return MOE_STATUS_OK;
}

moe_status moe_advice_svg(moe_context_t *ctx, const moe_advice *a, char **svg) {
    moe__clear_error(ctx);
    if (!svg) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_advice_svg: svg is NULL");
    *svg = NULL;
    if (!a) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_advice_svg: advice is NULL");
    if (a->num_decode < 1 || a->num_decode > MOE_ADVICE_POINTS_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "advice: num_decode = %lld, expected 1..%d",
                          (long long)a->num_decode, MOE_ADVICE_POINTS_MAX);
    moe__plot_point pts[MOE_ADVICE_POINTS_MAX];
    moe__plot p;
    memset(&p, 0, sizeof p);
    memset(pts, 0, sizeof pts);
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
    for (int64_t i = 0; i < a->num_decode; i++) {
        const moe_decode_point *d = &a->decode[i];
        pts[i].x = d->tokens_per_s_user;
        pts[i].y = d->tokens_per_s_gpu;
        pts[i].color = d->memory_bound ? 0 : 1;
        snprintf(pts[i].label, sizeof pts[i].label, "B=%lld", (long long)d->batch);
        xmin = fmin(xmin, pts[i].x), xmax = fmax(xmax, pts[i].x);
        ymin = fmin(ymin, pts[i].y), ymax = fmax(ymax, pts[i].y);
    }
    const moe_shape_options *o = &a->options;
    snprintf(p.title, sizeof p.title, "Decode: %s on %s, context %lld tokens", a->model, a->gpu.name,
             (long long)o->context);
    snprintf(p.subtitle, sizeof p.subtitle,
             "%s weights and KV cache; tp %lld ep %lld (%lld GPUs); %.2f TB/s read, %.0f TFLOP/s (%s)",
             o->dtype == MOE_DTYPE_E4M3 ? "fp8" : "bf16", (long long)o->tp, (long long)o->ep,
             (long long)(o->tp * o->ep), a->gpu.read_bw / 1e12,
             (o->dtype == MOE_DTYPE_E4M3 ? a->gpu.fp8_flops : a->gpu.bf16_flops) / 1e12, a->gpu.source);
    snprintf(p.xlabel, sizeof p.xlabel, "interactivity: tokens/s per user");
    snprintf(p.ylabel, sizeof p.ylabel, "throughput: tokens/s per GPU");
    p.xmin = xmin / 1.5, p.xmax = xmax * 1.5, p.ymin = ymin / 1.5, p.ymax = ymax * 2;
    p.points = pts;
    p.npoints = (int)a->num_decode;
    p.connect = 1;
    int bound_seen[2] = {0, 0}; /* legend entries only for the kinds of step present */
    for (int64_t i = 0; i < a->num_decode; i++) bound_seen[a->decode[i].memory_bound ? 0 : 1] = 1;
    for (int k = 0; k < 2; k++) {
        if (!bound_seen[k]) continue;
        snprintf(p.legend[p.nlegend].text, sizeof p.legend[0].text, "%s", k ? "compute-bound step" : "memory-bound step");
        p.legend[p.nlegend++].color = k;
    }
    snprintf(p.notes[p.nnotes++], sizeof p.notes[0],
             "B = decode batch (sequences). Step time = max((GEMM operand bytes, experts touched only, + KV cache) / "
             "read bandwidth, FLOPs / peak).");
    snprintf(p.notes[p.nnotes++], sizeof p.notes[0],
             "A model, not a measurement: no launch overheads, no communication between GPUs.");
    if (!moe__plot_drawable(&p)) return undrawable(ctx, "advice chart", &p);
    *svg = moe__plot_svg(&p);
    if (!*svg) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "advice chart: out of host memory");
    return MOE_STATUS_OK;
}
