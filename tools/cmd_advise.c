/* moefuse advise (being written). */
#include "cli.h"

int cmd_advise(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(1, "advise: not written yet");
}
