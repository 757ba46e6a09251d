/* moefuse: the command-line front end. `moefuse COMMAND --help` documents each command. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Commands, one file each (tools/cmd_<name>.c). */
static const cli_command commands[] = {
    {"run", "run a model's MoE layer (random or checkpoint weights), timed", cmd_run},
    {"bench", "time a model's MoE layer at several batch sizes (table or results JSON)", cmd_bench},
    {"info", "show the MoE layer spec and layer structure of a model", cmd_info},
    {"models", "list the built-in model presets", cmd_models},
    {"shapes", "every weight GEMM of one step of a model, as M x K x N", cmd_shapes},
    {"roofline", "predicted time of each GEMM on a GPU: roofline, tiles, waves", cmd_roofline},
    {"advise", "co-design report: dimension alignment, MoE padding, decode curve", cmd_advise},
    {NULL, NULL, NULL},
};

int cli_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("moefuse: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

static void usage(FILE *f) {
    fprintf(f, "moefuse %s: the Mixture-of-Experts MLP block, fast on Hopper, exact on the CPU\n\n", moe_version());
    fprintf(f, "usage: moefuse COMMAND [options]   (moefuse COMMAND --help for each)\n\ncommands:\n");
    for (const cli_command *c = commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("moefuse %s\n", moe_version());
        return 0;
    }
    for (const cli_command *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
    return cli_fail(2, "unknown command '%s' (moefuse --help lists the commands)", argv[1]);
}
