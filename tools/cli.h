/* Shared pieces of the moefuse command-line tool. Each command lives in tools/cmd_<name>.c. */
#ifndef MOEFUSE_CLI_H
#define MOEFUSE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "moefuse.h"
#include "moefuse_analysis.h"

/* A command: argv[0] is the command's name. Returns the process exit code. */
typedef int (*cli_command_fn)(int argc, char **argv);

typedef struct cli_command {
    const char *name;
    const char *summary;
    cli_command_fn run;
} cli_command;

/* Prints "moefuse: <message>" on stderr (one line) and returns exit code 2 (usage) or 1. */
int cli_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- Helpers shared by the commands (tools/cli_common.c). ---- */

/* The commands of tools/cmd_run.c, cmd_info.c, cmd_models.c. */
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_models(int argc, char **argv);
/* The analysis commands: tools/cmd_shapes.c, cmd_roofline.c, cmd_advise.c. */
int cmd_shapes(int argc, char **argv);
int cmd_roofline(int argc, char **argv);
int cmd_advise(int argc, char **argv);
/* moefuse bench: tools/cmd_bench.c. */
int cmd_bench(int argc, char **argv);

/* 1 for "--help" and "-h". */
int cli_is_help(const char *arg);

/* Matches argv[*i] against an option that takes a value, written "--name VALUE" or
 * "--name=VALUE". Returns 0 if argv[*i] is not this option. Otherwise returns 1 and sets
 * *value (advancing *i past a separate value), or sets *value = NULL after printing
 * "moefuse: --name needs a value" when there is none: the caller then exits with 2. */
int cli_option(int argc, char **argv, int *i, const char *name, const char **value);

/* Strict number parsing for option `opt` (named in the message): the whole text must be a
 * base-10 integer in [min, max]. Returns 0, or prints one line and returns 2. */
int cli_parse_int64(const char *opt, const char *text, int64_t min, int64_t max, int64_t *out);
/* The same for an unsigned 64-bit value (seeds). */
int cli_parse_uint64(const char *opt, const char *text, uint64_t *out);
/* A byte size: a number with an optional binary suffix K, M, G, T (also KiB, GB, ...):
 * "24G", "512M", "1.5G", "1000000". Returns 0, or prints one line and returns 2. */
int cli_parse_size(const char *opt, const char *text, uint64_t *out);

/* Host memory free for a new process: MemAvailable of /proc/meminfo, else free physical
 * pages from sysconf; 0 if neither is known. */
uint64_t cli_memory_available(void);

/* "47.3 GiB", "512.0 MiB", "12 B" into buf. Returns buf. */
char *cli_format_bytes(double bytes, char *buf, size_t size);

/* Writes s as a JSON string literal (quotes included, control characters escaped). */
void cli_json_string(FILE *f, const char *s);
/* Writes a double as JSON (%.9g; null when not finite, as JSON has no NaN). */
void cli_json_number(FILE *f, double v);

/* A float as JSON with 7 significant digits (null when not finite). */
void cli_json_float(FILE *f, float v);

/* Device memory for --backend cuda (the CUDA driver, loaded at run time). Each returns 0 on
 * success (alloc: non-NULL); on failure cli_device_error() says why. open() makes device
 * `device`'s primary context current, the one libmoefuse's CUDA runtime uses. */
int cli_device_open(int device);
const char *cli_device_error(void);
uint64_t cli_device_free_memory(void); /* 0 if unknown */
void *cli_device_alloc(size_t bytes);
void cli_device_release(void *p); /* NULL is fine */
int cli_copy_to_device(void *dst, const void *src, size_t bytes);
int cli_copy_to_host(void *dst, const void *src, size_t bytes);
int cli_device_sync(void);
/* For timing on the GPU (bench), after cli_device_open; handles are CUstream, CUevent and
 * CUgraphExec (a CUstream is a cudaStream_t). Each returns 0 on success. */
int cli_device_name(char *buf, size_t size);
int cli_stream_create(void **stream); /* non-blocking */
void cli_stream_destroy(void *stream);
int cli_stream_sync(void *stream);
int cli_capture_begin(void *stream); /* thread-local capture mode */
int cli_capture_end(void *stream, void **graph_exec); /* ends the capture and instantiates */
int cli_graph_launch(void *graph_exec, void *stream);
void cli_graph_destroy(void *graph_exec);
int cli_event_create(void **event);
int cli_event_record(void *event, void *stream);
int cli_event_elapsed_ms(void *start, void *stop, float *ms); /* waits for stop */
void cli_event_destroy(void *event);

/* Prints a library failure as one line "moefuse: <what>: <status>: <detail>" and returns 1. */
int cli_fail_status(const moe_context_t *ctx, moe_status status, const char *what);

/* Loads the model named by exactly one of --model (a preset) or --config (a config.json or
 * a directory holding one). On failure prints one line and returns the exit code (2 for
 * usage errors: both or neither given, unknown preset; 1 for a file that cannot be read). */
int cli_load_model(moe_context_t *ctx, const char *model, const char *config, moe_model_config *out);

/* Layers as compressed runs: "0-2 dense, 3-60 MoE" (or "all 48 MoE"). Returns buf. */
char *cli_layer_runs(const moe_model_config *cfg, char *buf, size_t size);

/* ---- Shared by run and bench (tools/cmd_run.c): the layer, its input, the timing. ---- */

/* What --dtype means: the packed weight format, the activation quantisation, the dtype the
 * routed expert weights are drawn in, and the dtype of x, y and the other float tensors. */
typedef struct cli_dtype {
    const char *name;
    moe_format weights;
    moe_format acts;
    moe_dtype source; /* E4M3: drawn as FP8 codes with 128x128 block scales (DeepSeek's checkpoints) */
    moe_dtype io;
    const char *what;
} cli_dtype;

/* --dtype NAME and --backend NAME. Return 0, or print one line and return 2. */
int cli_parse_dtype(const char *text, const cli_dtype **out);
int cli_parse_backend(const char *text, moe_backend *out);

/* What a run needs, in bytes, before anything big is allocated. */
typedef struct cli_memory_plan {
    double source;    /* weights as drawn (or read), freed once packed */
    double packed;    /* the packed weights (moe_weights_bytes) */
    double expert;    /* packed bytes of one routed expert (W13 + W2 + biases) */
    double shared;    /* packed bytes of the shared expert */
    double io;        /* x, y, routing outputs */
    double workspace; /* an estimate until the weights exist to ask */
    double total;     /* host peak: packed + max(source + packing scratch, io + workspace) */
    double device;    /* GPU memory (cuda backend): packed + io + workspace */
} cli_memory_plan;

typedef struct cli_layer_options {
    const cli_dtype *dtype;
    int64_t max_tokens; /* the memory check is sized for this many tokens */
    uint64_t seed, mem_limit; /* mem_limit 0: MemAvailable */
    int64_t threads;          /* 0: one per CPU while drawing */
    const char *weights_path; /* NULL: random weights drawn from seed */
    int64_t layer;            /* checkpoint layer, with weights_path */
} cli_layer_options;

/* One MoE layer, packed for the context's backend. */
typedef struct cli_layer {
    const moe_model_config *cfg;
    const cli_dtype *dtype;
    moe_weights_t *weights;
    cli_memory_plan plan;
    double available; /* host bytes the run may use */
    int threads, gpu;
} cli_layer;

/* --print-config, or MOEFUSE_PRINT_CONFIG=1 in the environment: print moe_forward_config's
 * line to stderr before timing. `flag` is whether the option was given. */
int cli_print_config_wanted(int flag);
/* moe_forward_config's line for `tokens` tokens on the layer into buf (MOE_FORWARD_CONFIG_MAX
 * bytes suffice). 0, or one line printed and exit code 1. */
int cli_forward_config(moe_context_t *ctx, const cli_layer *l, int64_t tokens, char *buf, size_t size);

/* Validates the spec, checks host (and GPU) memory, asks the backend whether it packs the
 * dtype, then loads or draws and packs the weights. 0, or one line printed and the exit code. */
int cli_layer_build(moe_context_t *ctx, const moe_model_config *cfg, const cli_layer_options *o, cli_layer *out);
void cli_layer_free(cli_layer *l);

/* One forward's buffers and arguments: x drawn from a seed, routing from the router weights
 * (no ids or logits given), ids and weights written to out_topk_*. Device memory on CUDA,
 * with host copies of x, y and the ids. */
typedef struct cli_forward {
    int gpu;
    int64_t tokens;
    double x_bytes, ids_bytes;
    size_t workspace_size;
    void *x, *y, *ids, *weights, *workspace; /* where the backend reads and writes */
    void *host_x, *host_y;
    int32_t *host_ids;
    moe_forward_args args;
} cli_forward;

/* 0, or one line printed and the exit code (the buffers are then already freed). */
int cli_forward_setup(moe_context_t *ctx, const cli_layer *l, int64_t tokens, uint64_t seed, cli_forward *f);
void cli_forward_free(cli_forward *f);
/* Copies y and the ids back to the host copies (nothing to do on the CPU). */
int cli_forward_fetch(cli_forward *f);

/* The work of one forward, after cli_forward_fetch: FLOPs of the routed and shared experts,
 * bytes of the touched experts' packed weights plus x and y, and a checksum of y. */
typedef struct cli_work {
    double flops, bytes, checksum;
    int64_t touched;
} cli_work;
int cli_forward_measure(const cli_layer *l, const cli_forward *f, cli_work *out);

/* A monotonic clock in seconds, and the median of n values (sorts them). */
double cli_now_seconds(void);
double cli_median(double *values, int n);

/* ---- Shared by the analysis commands: shapes, roofline, advise (tools/cli_analysis.c). ---- */

/* A CPU context for an analysis command. 0, or prints one line and returns 1. */
int analysis_context_create(moe_context_t **ctx);

/* Bits of *seen (analysis_common_option), so a command can tell what was given. */
enum { SEEN_BATCH = 1, SEEN_SEQ = 2, SEEN_MODE = 4, SEEN_CONTEXT = 8 };

/* The options of the step and the model: --model, --config, --batch, --seq, --mode, --context,
 * --tp, --ep, --dtype. Returns 1 when argv[*i] was one of them (with *rc != 0 if it was bad),
 * 0 when it is not one of them. */
int analysis_common_option(int argc, char **argv, int *i, moe_context_t *ctx, moe_shape_options *opt,
                           const char **model, const char **config, unsigned *seen, int *rc);
/* --gpu NAME and --svg FILE (roofline, advise): returns 1 when argv[*i] was one of them (with
 * *rc = 2 when its value is missing), 0 otherwise. */
int analysis_gpu_svg_option(int argc, char **argv, int *i, const char **gpu_name, const char **svg_path, int *rc);
/* --batch, --seq and --mode are required by shapes and roofline: 0, or the exit code after
 * one line naming the first missing. */
int analysis_require_step(unsigned seen, const char *command);
/* --gpu: a built-in name, or a JSON file. Prints one line and returns the exit code on failure. */
int analysis_load_gpu(moe_context_t *ctx, const char *name, moe_gpu_spec *gpu);
/* Writes text to path (the SVGs). 0, or prints one line and returns 1. */
int analysis_write_file(const char *path, const char *text);

/* Output: a dimension ("4096", "0.03125"), an SI number ("1.23T"), a row's layers ("0-60",
 * "1-47/2", "-"), the text header of a shape list, its JSON convention/scope/notes fields,
 * and a JSON number that reads back to the same double (%.17g; null when not finite). */
void analysis_format_dim(double v, char *buf, size_t size);
void analysis_format_si(double v, char *buf, size_t size);
void analysis_format_layers(const moe_gemm_row *r, char *buf, size_t size);
void analysis_print_header(FILE *f, const moe_shape_list *l);
void analysis_json_notes(FILE *f, const moe_shape_list *l);
void analysis_json_number(FILE *f, double v);

#endif
