/* The warm-up subcommand `fluxfs prefetch PATH...` (main layer, private): see prefetch_cmd.c.
 * It talks to a running mount only through its control files (.fluxfs/warmup, .fluxfs/status). */
#ifndef FLUXFS_MAIN_PREFETCH_CMD_H
#define FLUXFS_MAIN_PREFETCH_CMD_H

#include <stdbool.h>

/* True when argv is "fluxfs prefetch PATH..." with PATH on a fluxfs mount (otherwise
 * "prefetch" is a bucket name and argv is a mount command line). */
bool fluxfs_prefetch_command_applies(int argc, char **argv);
/* Runs the warm-up; returns the exit status (0, 1 = failure, 2 = a path not on a mount). */
int fluxfs_prefetch_command(int argc, char **argv);

#endif
