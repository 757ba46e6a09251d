/* moefuse roofline (being written). */
#include "cli.h"

int cmd_roofline(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(1, "roofline: not written yet");
}
