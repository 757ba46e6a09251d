/* Shared pieces of the moefuse command-line tool. Each command lives in tools/cmd_<name>.c. */
#ifndef MOEFUSE_CLI_H
#define MOEFUSE_CLI_H

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

#endif
