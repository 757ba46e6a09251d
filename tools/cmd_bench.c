/* moefuse bench: one model's MoE layer timed at several batch sizes, from the CLI alone.
 *
 * The layer is built once (weights drawn and packed once, by the code `run` uses); then for
 * each T: x is drawn, the forward runs with routing computed from the router weights, warms
 * up, and is timed (median of --reps). On CUDA each rep is a CUDA-graph replay of the forward
 * between two events, or an eager forward between two events if the capture fails; on the
 * CPU, a forward between two readings of the monotonic clock. Output: a table, or PERF.md's
 * results JSON (--json on stdout, --out FILE). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_TOKENS (INT64_C(1) << 31)
#define MAX_POINTS 64
#define MAX_REPS 100000
#define DEFAULT_READ_TBPS 4.19 /* PERF.md: the H200's measured streaming read */

typedef struct bench_options {
    const char *model, *config, *out_path;
    int64_t tokens[MAX_POINTS];
    int num_points;
    const cli_dtype *dtype;
    moe_backend backend;
    int64_t reps, threads; /* reps 0: the backend's default */
    uint64_t seed, mem_limit;
    double read_tbps, bf16_tflops, fp8_tflops; /* NAN when not given */
    int json, print_config;
} bench_options;

/* One timed batch size. */
typedef struct bench_row {
    int64_t tokens;
    double ms, tflops, gbps, floor_ms, checksum;
    int64_t touched;
    int graph; /* timed as CUDA-graph replays */
    char config[MOE_FORWARD_CONFIG_MAX]; /* moe_forward_config's line for this T */
} bench_row;

static void usage(FILE *f) {
    fprintf(f,
            "usage: moefuse bench (--model NAME | --config PATH) [--tokens LIST] [--dtype D] [--backend B]\n"
            "                     [--reps N] [--seed S] [--threads N] [--mem-limit SIZE] [--read-tbps X]\n"
            "                     [--bf16-tflops X] [--fp8-tflops X] [--json] [--out FILE]\n"
            "                     [--print-config]\n\n"
            "Times a model's MoE layer (moe_forward) at each batch size of --tokens. The weights are\n"
            "drawn (seeded, as `moefuse run` draws them) and packed once; for each T, x is drawn, the\n"
            "forward warms up, then runs --reps times and the median is reported.\n\n"
            "Routing is part of every timed forward: logits = x W_r^T from the router weights, then\n"
            "score and top-k, all inside moe_forward (no ids or logits are given to it).\n"
            "Timing: on CUDA, CUDA events around a CUDA-graph replay of the forward (eager forwards\n"
            "between events if the capture fails; the output says which); on the CPU, a monotonic clock.\n\n"
            "  --model NAME       a built-in preset (moefuse models lists them)\n"
            "  --config PATH      a Hugging Face config.json, or a directory holding one\n"
            "  --tokens LIST      batch sizes, comma-separated, each 1..2^31 (default 1,8,64,512,4096,16384)\n"
            "  --dtype D          bf16 (default), f16, f32, fp8, fp8-tensor, mxfp8, mxfp4, nvfp4 (moefuse run --help)\n"
            "  --backend B        auto (default), cpu, cuda\n"
            "  --reps N           timed forwards per T, 1..%d (default 20 on cuda, 3 on cpu)\n"
            "  --seed S           seed of the weights and inputs (default 0)\n"
            "  --threads N        CPU threads (default 0: the library's default). The library runs at most\n"
            "                     64; the JSON's \"threads\" is this option, \"config\" says how many ran\n"
            "  --mem-limit SIZE   host memory to stay within (default: MemAvailable); checked for the largest T\n"
            "  --read-tbps X      read bandwidth of the memory floor, TB/s (default %.2f on cuda, PERF.md's\n"
            "                     measured H200; on cpu no floor unless given)\n"
            "  --bf16-tflops X    measured GEMM ceilings, written to the JSON's \"ceilings\" (default null)\n"
            "  --fp8-tflops X\n"
            "  --json             print PERF.md's results JSON instead of the table\n"
            "  --out FILE         also write that JSON to FILE\n"
            "  --print-config     print, for each T before timing it, what the forward runs (path, tiles,\n"
            "                     plan block, workspace: moe_forward_config's line) to stderr; also\n"
            "                     MOEFUSE_PRINT_CONFIG=1. The JSON rows always carry it as \"config\"\n\n"
            "TFLOP/s counts 2*T*k*H*(R13 + I) (R13 = 2I gated, I for relu2) plus the shared expert.\n"
            "GB/s counts the packed weights of the experts the batch touched, plus x and y.\n"
            "The memory floor (PERF.md) reads E*(1-(1-k/E)^T) experts' packed weights (plus the shared\n"
            "expert) and x and y at --read-tbps; %% floor = floor time / measured time.\n"
            "A progress bar goes to stderr only when stderr is a terminal.\n",
            MAX_REPS, DEFAULT_READ_TBPS);
}

/* "1,8,64": each entry an integer in 1..MAX_TOKENS. */
static int parse_tokens(const char *text, bench_options *o) {
    o->num_points = 0;
    if (!text[0]) return cli_fail(2, "--tokens: empty list (example: 1,8,64)");
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0) return cli_fail(2, "--tokens: empty entry in '%s' (example: 1,8,64)", text);
        if (o->num_points == MAX_POINTS)
            return cli_fail(2, "--tokens: more than %d entries in '%s'", MAX_POINTS, text);
        char item[32];
        if (n >= sizeof item) return cli_fail(2, "--tokens: '%.*s' is not an integer", (int)n, p);
        memcpy(item, p, n);
        item[n] = '\0';
        if (cli_parse_int64("--tokens", item, 1, MAX_TOKENS, &o->tokens[o->num_points])) return 2;
        o->num_points++;
        if (!comma) return 0;
        p = comma + 1;
    }
}

/* A positive finite number (TB/s, TFLOP/s). */
static int parse_positive(const char *opt, const char *text, double *out) {
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || v <= 0)
        return cli_fail(2, "%s: '%s' is not a positive number", opt, text);
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv, bench_options *o) {
    memset(o, 0, sizeof *o);
    static const int64_t default_tokens[] = {1, 8, 64, 512, 4096, 16384};
    o->num_points = (int)(sizeof default_tokens / sizeof default_tokens[0]);
    memcpy(o->tokens, default_tokens, sizeof default_tokens);
    cli_parse_dtype("bf16", &o->dtype);
    o->backend = MOE_BACKEND_AUTO;
    o->read_tbps = o->bf16_tflops = o->fp8_tflops = NAN;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return -1;
        } else if (cli_option(argc, argv, &i, "--model", &v)) {
            if (!v) return 2;
            o->model = v;
        } else if (cli_option(argc, argv, &i, "--config", &v)) {
            if (!v) return 2;
            o->config = v;
        } else if (cli_option(argc, argv, &i, "--tokens", &v)) {
            if (!v || parse_tokens(v, o)) return 2;
        } else if (cli_option(argc, argv, &i, "--dtype", &v)) {
            if (!v || cli_parse_dtype(v, &o->dtype)) return 2;
        } else if (cli_option(argc, argv, &i, "--backend", &v)) {
            if (!v || cli_parse_backend(v, &o->backend)) return 2;
        } else if (cli_option(argc, argv, &i, "--reps", &v)) {
            if (!v || cli_parse_int64("--reps", v, 1, MAX_REPS, &o->reps)) return 2;
        } else if (cli_option(argc, argv, &i, "--seed", &v)) {
            if (!v || cli_parse_uint64("--seed", v, &o->seed)) return 2;
        } else if (cli_option(argc, argv, &i, "--threads", &v)) {
            if (!v || cli_parse_int64("--threads", v, 0, 4096, &o->threads)) return 2;
        } else if (cli_option(argc, argv, &i, "--mem-limit", &v)) {
            if (!v || cli_parse_size("--mem-limit", v, &o->mem_limit)) return 2;
            if (o->mem_limit == 0) return cli_fail(2, "--mem-limit: %s is zero", v);
        } else if (cli_option(argc, argv, &i, "--read-tbps", &v)) {
            if (!v || parse_positive("--read-tbps", v, &o->read_tbps)) return 2;
        } else if (cli_option(argc, argv, &i, "--bf16-tflops", &v)) {
            if (!v || parse_positive("--bf16-tflops", v, &o->bf16_tflops)) return 2;
        } else if (cli_option(argc, argv, &i, "--fp8-tflops", &v)) {
            if (!v || parse_positive("--fp8-tflops", v, &o->fp8_tflops)) return 2;
        } else if (cli_option(argc, argv, &i, "--out", &v)) {
            if (!v) return 2;
            o->out_path = v;
        } else if (!strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if (!strcmp(argv[i], "--print-config")) {
            o->print_config = 1;
        } else {
            return cli_fail(2, "bench: unknown option '%s' (moefuse bench --help)", argv[i]);
        }
    }
    if (o->model && o->config) return cli_fail(2, "give --model or --config, not both");
    if (!o->model && !o->config) return cli_fail(2, "give --model NAME (moefuse models lists them) or --config PATH");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Progress: one line on stderr, redrawn in place; only on a terminal, so logs stay clean.
 * ------------------------------------------------------------------------------------- */
static void progress(int enabled, int point, int points, int64_t tokens, int rep, int reps) {
    if (!enabled) return;
    enum { WIDTH = 30 };
    double done = ((double)point + (double)rep / reps) / points;
    int filled = (int)(done * WIDTH);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    fprintf(stderr, "\r[%s] T=%lld (%d/%d) rep %d/%d   ", bar, (long long)tokens, point + 1, points, rep, reps);
    fflush(stderr);
}

static void progress_clear(int enabled) {
    if (!enabled) return;
    fprintf(stderr, "\r%80s\r", "");
    fflush(stderr);
}

/* ---------------------------------------------------------------------------------------
 * Timing.
 * ------------------------------------------------------------------------------------- */
typedef struct gpu_timer {
    void *stream, *start, *stop;
} gpu_timer;

static void gpu_timer_free(gpu_timer *g) {
    cli_event_destroy(g->start);
    cli_event_destroy(g->stop);
    cli_stream_destroy(g->stream);
    memset(g, 0, sizeof *g);
}

static int gpu_timer_create(gpu_timer *g) {
    memset(g, 0, sizeof *g);
    if (cli_stream_create(&g->stream) || cli_event_create(&g->start) || cli_event_create(&g->stop)) {
        gpu_timer_free(g);
        return cli_fail(1, "--backend cuda: %s", cli_device_error());
    }
    return 0;
}

static int forward(moe_context_t *ctx, const cli_layer *l, const cli_forward *f) {
    moe_status st = moe_forward(ctx, l->weights, &f->args);
    return st == MOE_STATUS_OK ? 0 : cli_fail_status(ctx, st, "moe_forward");
}

/* Captures one forward into a CUDA graph; NULL when the capture fails (then bench times
 * eager forwards). The warm-up before it has run the forward eagerly, so one-time setup
 * (module loading, kernel attributes) is not in the capture. */
static void *capture_forward(moe_context_t *ctx, const cli_layer *l, const cli_forward *f, gpu_timer *g, char *why,
                             size_t why_size) {
    if (cli_capture_begin(g->stream)) {
        snprintf(why, why_size, "%s", cli_device_error());
        return NULL;
    }
    moe_status st = moe_forward(ctx, l->weights, &f->args);
    if (st != MOE_STATUS_OK) snprintf(why, why_size, "moe_forward: %s", moe_last_error(ctx));
    void *graph = NULL;
    int ended = cli_capture_end(g->stream, &graph);
    if (ended && st == MOE_STATUS_OK) snprintf(why, why_size, "%s", cli_device_error());
    if (ended || st != MOE_STATUS_OK) {
        cli_graph_destroy(graph);
        return NULL;
    }
    return graph;
}

static int time_gpu(moe_context_t *ctx, const cli_layer *l, cli_forward *f, gpu_timer *g, int reps, double *times,
                    int *graph_used, char *why, size_t why_size, int show, int point, int points) {
    enum { WARMUP = 3 };
    f->args.stream = g->stream;
    /* x went up with a synchronous copy on the legacy stream, whose DMA may still be in
     * flight; our stream does not wait for that stream by itself. */
    if (cli_device_sync()) return cli_fail(1, "copying x to the GPU: %s", cli_device_error());
    int rc = 0;
    for (int i = 0; i < WARMUP && !rc; i++) rc = forward(ctx, l, f);
    if (rc) return rc;
    if (cli_stream_sync(g->stream)) return cli_fail(1, "moe_forward: %s", cli_device_error());
    void *graph = capture_forward(ctx, l, f, g, why, why_size);
    /* One replay before timing: the first launch of a graph uploads it. */
    if (graph && (cli_graph_launch(graph, g->stream) || cli_stream_sync(g->stream))) {
        cli_graph_destroy(graph);
        return cli_fail(1, "replaying the forward's CUDA graph: %s", cli_device_error());
    }
    *graph_used = graph != NULL;
    for (int r = 0; r < reps && !rc; r++) {
        progress(show, point, points, f->tokens, r, reps);
        if (cli_event_record(g->start, g->stream)) rc = cli_fail(1, "cuEventRecord: %s", cli_device_error());
        else if (graph && cli_graph_launch(graph, g->stream))
            rc = cli_fail(1, "replaying the forward's CUDA graph: %s", cli_device_error());
        else if (!graph && (rc = forward(ctx, l, f))) break;
        float ms = 0;
        if (!rc && (cli_event_record(g->stop, g->stream) || cli_event_elapsed_ms(g->start, g->stop, &ms)))
            rc = cli_fail(1, "timing the forward: %s", cli_device_error());
        times[r] = ms * 1e-3;
    }
    cli_graph_destroy(graph);
    if (!rc && cli_stream_sync(g->stream)) rc = cli_fail(1, "moe_forward: %s", cli_device_error());
    return rc;
}

static int time_cpu(moe_context_t *ctx, const cli_layer *l, cli_forward *f, int reps, double *times, int show,
                    int point, int points) {
    int rc = forward(ctx, l, f); /* warm-up: first touch of the workspace, thread start */
    for (int r = 0; r < reps && !rc; r++) {
        progress(show, point, points, f->tokens, r, reps);
        double t0 = cli_now_seconds();
        rc = forward(ctx, l, f);
        times[r] = cli_now_seconds() - t0;
    }
    return rc;
}

/* The memory floor of PERF.md: the expected number of distinct experts T tokens touch, their
 * packed weights (and the shared expert's), x and y, read at `tbps`. */
static double floor_ms(const cli_layer *l, int64_t tokens, double tbps) {
    const moe_layer_spec *s = &l->cfg->layer;
    double E = (double)s->num_experts, k = (double)s->top_k;
    double active = E * (1.0 - pow(1.0 - k / E, (double)tokens));
    double xy = 2.0 * (double)tokens * (double)s->hidden * moe_dtype_bits(l->dtype->io) / 8.0;
    return (active * l->plan.expert + l->plan.shared + xy) / (tbps * 1e12) * 1e3;
}

/* ---------------------------------------------------------------------------------------
 * Output.
 * ------------------------------------------------------------------------------------- */
typedef struct bench_run {
    const bench_options *o;
    const moe_model_config *cfg;
    const char *device; /* the GPU's name, or "cpu" */
    int gpu, reps;
    double read_tbps; /* NAN: no floor */
    bench_row rows[MAX_POINTS];
    int num_rows;
    char capture_error[256]; /* why the last failed graph capture failed */
} bench_run;

static const char *timing_name(const bench_run *b, const bench_row *r) {
    return !b->gpu ? "cpu-clock" : r->graph ? "cuda-graph" : "cuda-eager";
}

static void print_table(const bench_run *b) {
    const moe_layer_spec *s = &b->cfg->layer;
    printf("%s: E=%lld H=%lld I=%lld k=%lld, %s, %s", b->cfg->name, (long long)s->num_experts, (long long)s->hidden,
           (long long)s->intermediate, (long long)s->top_k, moe_score_name(s->score), moe_activation_name(s->activation));
    if (s->num_shared_experts > 0) printf(", shared %lld", (long long)s->shared_intermediate);
    printf("\n");
    printf("device   %s (%s backend), %s, random weights (seed %llu)\n", b->device, b->gpu ? "cuda" : "cpu",
           b->o->dtype->name, (unsigned long long)b->o->seed);
    printf("routing  computed in each timed forward from the router weights (x W_r^T, score, top-k)\n");
    int graphs = 0;
    for (int i = 0; i < b->num_rows; i++) graphs += b->rows[i].graph;
    if (!b->gpu) printf("timing   median of %d forward%s, monotonic clock, after 1 warm-up\n", b->reps, b->reps > 1 ? "s" : "");
    else if (graphs == b->num_rows)
        printf("timing   median of %d CUDA-graph replays between CUDA events, after warm-up\n", b->reps);
    else if (graphs == 0)
        printf("timing   median of %d eager forwards between CUDA events (graph capture failed), after warm-up\n",
               b->reps);
    else printf("timing   median of %d forwards between CUDA events; the timing column says graph or eager\n", b->reps);
    if (b->gpu && graphs != b->num_rows) printf("capture  failed: %s\n", b->capture_error);
    if (isfinite(b->read_tbps)) printf("floor    PERF.md's memory floor at %.2f TB/s read\n", b->read_tbps);
    printf("\n%8s %11s %10s %10s %8s", "T", "ms", "TFLOP/s", "GB/s", "experts");
    if (isfinite(b->read_tbps)) printf(" %10s %8s", "floor ms", "% floor");
    if (b->gpu && graphs != 0 && graphs != b->num_rows) printf("  %s", "timing");
    printf("\n");
    for (int i = 0; i < b->num_rows; i++) {
        const bench_row *r = &b->rows[i];
        printf("%8lld %11.4f %10.3f %10.1f %8lld", (long long)r->tokens, r->ms, r->tflops, r->gbps,
               (long long)r->touched);
        if (isfinite(b->read_tbps)) printf(" %10.4f %7.1f%%", r->floor_ms, r->floor_ms / r->ms * 100.0);
        if (b->gpu && graphs != 0 && graphs != b->num_rows) printf("  %s", r->graph ? "graph" : "eager");
        printf("\n");
    }
}

static void write_json(FILE *f, const bench_run *b) {
    const moe_layer_spec *s = &b->cfg->layer;
    char date[16] = "unknown";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d", &tm);
    const char *commit = getenv("MOEFUSE_COMMIT");
    fprintf(f, "{\"gpu\": ");
    cli_json_string(f, b->device);
    fprintf(f, ", \"date\": \"%s\", \"commit\": ", date);
    cli_json_string(f, commit && commit[0] ? commit : "unknown");
    fprintf(f, ",\n \"ceilings\": {\"read_TBps\": ");
    cli_json_number(f, b->read_tbps); /* null when not finite */
    fprintf(f, ", \"bf16_TFLOPs\": ");
    cli_json_number(f, b->o->bf16_tflops);
    fprintf(f, ", \"fp8_TFLOPs\": ");
    cli_json_number(f, b->o->fp8_tflops);
    fprintf(f, "},\n \"rows\": [");
    for (int i = 0; i < b->num_rows; i++) {
        const bench_row *r = &b->rows[i];
        fprintf(f, "%s\n  {\"shape\": ", i ? "," : "");
        cli_json_string(f, b->cfg->name);
        fprintf(f, ", \"E\": %lld, \"H\": %lld, \"I\": %lld, \"k\": %lld, \"T\": %lld, \"dtype\": ",
                (long long)s->num_experts, (long long)s->hidden, (long long)s->intermediate, (long long)s->top_k,
                (long long)r->tokens);
        cli_json_string(f, b->o->dtype->name);
        fprintf(f, ", \"pass\": \"forward\", \"impl\": \"%s\", \"ms\": ", b->gpu ? "moefuse" : "moefuse-cpu");
        cli_json_number(f, r->ms);
        fprintf(f, ", \"tflops\": ");
        cli_json_number(f, r->tflops);
        fprintf(f, ", \"gbps\": ");
        cli_json_number(f, r->gbps);
        /* err: bench does not compare against the fp64 oracle (moefuse run and the test suites do). */
        fprintf(f, ", \"err\": null, \"routing\": \"router\", \"timing\": \"%s\", \"reps\": %d", timing_name(b, r),
                b->reps);
        fprintf(f, ", \"floor_ms\": ");
        cli_json_number(f, r->floor_ms);
        fprintf(f, ", \"pct_floor\": ");
        cli_json_number(f, r->floor_ms / r->ms * 100.0);
        fprintf(f, ", \"experts_touched\": %lld, \"seed\": %llu, \"checksum\": ", (long long)r->touched,
                (unsigned long long)b->o->seed);
        cli_json_number(f, r->checksum);
        fprintf(f, ", \"config\": ");
        cli_json_string(f, r->config);
        fprintf(f, "}");
    }
    fprintf(f, "\n ]}\n");
}

/* ---------------------------------------------------------------------------------------
 * The command.
 * ------------------------------------------------------------------------------------- */
/* A time is worth nothing if the forward wrote garbage or nothing: y starts as NaN
 * (cli_forward_setup), so an unwritten element shows here too. An all-zero y is a valid output. */
static int check_output(int64_t tokens, const cli_work *work) {
    if (!isfinite(work->checksum))
        return cli_fail(1, "T=%lld: the forward's output holds NaN or Inf, or elements it did not write (checksum %g)",
                        (long long)tokens, work->checksum);
    return 0;
}

/* Times one T and fills `row`. */
static int bench_point(moe_context_t *ctx, const cli_layer *l, bench_run *b, gpu_timer *g, int point, int show,
                       double *times) {
    const bench_options *o = b->o;
    bench_row *row = &b->rows[point];
    memset(row, 0, sizeof *row);
    row->tokens = o->tokens[point];
    progress(show, point, o->num_points, row->tokens, 0, b->reps);
    cli_forward f;
    int rc = cli_forward_setup(ctx, l, row->tokens, o->seed, &f);
    if (rc) return rc;
    if ((rc = cli_forward_config(ctx, l, row->tokens, row->config, sizeof row->config))) {
        cli_forward_free(&f);
        return rc;
    }
    if (cli_print_config_wanted(o->print_config)) {
        progress_clear(show);
        fprintf(stderr, "config   %s\n", row->config);
    }
    if (b->gpu)
        rc = time_gpu(ctx, l, &f, g, b->reps, times, &row->graph, b->capture_error, sizeof b->capture_error, show,
                      point, o->num_points);
    else rc = time_cpu(ctx, l, &f, b->reps, times, show, point, o->num_points);
    cli_work work;
    if (!rc && !(rc = cli_forward_fetch(&f)) && !(rc = cli_forward_measure(l, &f, &work)) &&
        !(rc = check_output(row->tokens, &work))) {
        double seconds = cli_median(times, b->reps);
        row->ms = seconds * 1e3;
        row->tflops = seconds > 0 ? work.flops / seconds * 1e-12 : NAN;
        row->gbps = seconds > 0 ? work.bytes / seconds * 1e-9 : NAN;
        row->floor_ms = isfinite(b->read_tbps) ? floor_ms(l, row->tokens, b->read_tbps) : NAN;
        row->touched = work.touched;
        row->checksum = work.checksum;
    }
    cli_forward_free(&f);
    return rc;
}

/* A new file beside `path` (path.XXXXXX, with the permissions a created file gets), so that a
 * failed run never truncates or removes what --out names; the caller renames it over path. */
static FILE *open_beside(const char *path, char **tmp) {
    size_t n = strlen(path) + sizeof ".XXXXXX";
    if (!(*tmp = malloc(n))) return NULL;
    snprintf(*tmp, n, "%s.XXXXXX", path);
    int fd = mkstemp(*tmp);
    FILE *f = NULL;
    if (fd >= 0) {
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(fd, 0666 & ~mask) == 0) f = fdopen(fd, "w");
        if (!f) {
            int saved = errno;
            close(fd);
            unlink(*tmp);
            errno = saved;
        }
    }
    if (!f) {
        free(*tmp);
        *tmp = NULL;
    }
    return f;
}

int cmd_bench(int argc, char **argv) {
    bench_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;

    moe_context_t *ctx = NULL;
    cli_layer layer;
    memset(&layer, 0, sizeof layer);
    gpu_timer timer;
    memset(&timer, 0, sizeof timer);
    double *times = NULL;
    FILE *out = NULL;
    char *out_tmp = NULL; /* the results go here first, and to --out only by a rename once complete */
    moe_status st = moe_context_create(o.backend, 0, &ctx);
    if (st != MOE_STATUS_OK) return cli_fail_status(NULL, st, "--backend");
    if (o.threads > 0 && (st = moe_context_set_threads(ctx, (int)o.threads)) != MOE_STATUS_OK) {
        rc = cli_fail_status(ctx, st, "--threads");
        goto done;
    }
    bench_run b;
    memset(&b, 0, sizeof b);
    b.o = &o;
    b.gpu = moe_context_backend(ctx) == MOE_BACKEND_CUDA;
    b.reps = o.reps > 0 ? (int)o.reps : b.gpu ? 20 : 3;
    b.read_tbps = isfinite(o.read_tbps) ? o.read_tbps : b.gpu ? DEFAULT_READ_TBPS : NAN;
    char device[256] = "cpu";
    b.device = device;
    if (b.gpu) {
        if (cli_device_open(0) || cli_device_name(device, sizeof device)) {
            rc = cli_fail(1, "--backend cuda: %s", cli_device_error());
            goto done;
        }
        if ((rc = gpu_timer_create(&timer))) goto done;
    }
    moe_model_config cfg;
    if ((rc = cli_load_model(ctx, o.model, o.config, &cfg))) goto done;
    b.cfg = &cfg;
    if (o.out_path && !(out = open_beside(o.out_path, &out_tmp))) {
        rc = cli_fail(1, "--out %s: cannot write beside it: %s", o.out_path, strerror(errno));
        goto done;
    }
    if (!(times = malloc((size_t)b.reps * sizeof *times))) {
        rc = cli_fail(1, "out of host memory");
        goto done;
    }

    /* Weights drawn and packed once; the memory check is sized for the largest T. */
    int64_t max_tokens = 0;
    for (int i = 0; i < o.num_points; i++) max_tokens = o.tokens[i] > max_tokens ? o.tokens[i] : max_tokens;
    cli_layer_options lo = {.dtype = o.dtype, .max_tokens = max_tokens, .seed = o.seed, .mem_limit = o.mem_limit,
                            .threads = o.threads};
    if ((rc = cli_layer_build(ctx, &cfg, &lo, &layer))) goto done;

    const int show = isatty(STDERR_FILENO);
    for (int i = 0; i < o.num_points; i++) {
        rc = bench_point(ctx, &layer, &b, &timer, i, show, times);
        if (rc) break;
        b.num_rows++;
    }
    progress_clear(show);
    if (rc) goto done;

    if (o.json) write_json(stdout, &b);
    else print_table(&b);
    if (out) {
        write_json(out, &b);
        int failed = ferror(out);
        failed |= fclose(out) != 0;
        out = NULL;
        if (failed || rename(out_tmp, o.out_path) != 0)
            rc = cli_fail(1, "--out %s: write failed: %s", o.out_path, strerror(errno));
    }
done:
    if (out) fclose(out);
    if (out_tmp) { /* a run that failed leaves --out as it was, whatever it was */
        unlink(out_tmp);
        free(out_tmp);
    }
    free(times);
    gpu_timer_free(&timer);
    cli_layer_free(&layer);
    moe_context_free(ctx);
    return rc;
}
