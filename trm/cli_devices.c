/* cli_devices.c — `trm devices`: backends compiled in and the devices they see. */
#include "commands.h"

int cmd_devices(int argc, char **argv, const trm_globals *g) {
    (void)argc; (void)argv; (void)g;
    fprintf(stderr, "trm devices: the backend registry is not part of this build yet "
                    "(it comes with the CPU trainer); nothing was listed\n");
    return 2;
}
