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

/* Prints a library failure as one line "moefuse: <what>: <status>: <detail>" and returns 1. */
int cli_fail_status(const moe_context_t *ctx, moe_status status, const char *what);

/* Loads the model named by exactly one of --model (a preset) or --config (a config.json or
 * a directory holding one). On failure prints one line and returns the exit code (2 for
 * usage errors: both or neither given, unknown preset; 1 for a file that cannot be read). */
int cli_load_model(moe_context_t *ctx, const char *model, const char *config, moe_model_config *out);

/* Layers as compressed runs: "0-2 dense, 3-60 MoE" (or "all 48 MoE"). Returns buf. */
char *cli_layer_runs(const moe_model_config *cfg, char *buf, size_t size);

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
