/* Shared pieces of the moefuse command-line tool. Each command lives in tools/cmd_<name>.c. */
#ifndef MOEFUSE_CLI_H
#define MOEFUSE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "moefuse.h"

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

#endif
