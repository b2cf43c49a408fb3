/* The warm-up subcommand `fluxfs prefetch PATH...` (main layer, private): see prefetch_cmd.c.
 * It talks to a running mount only through its control files (.fluxfs/warmup, .fluxfs/status). */
#ifndef FLUXFS_MAIN_PREFETCH_CMD_H
#define FLUXFS_MAIN_PREFETCH_CMD_H

#include <stdbool.h>

/* Runs the warm-up; returns the exit status (0; 1: a path not on a fluxfs mount, or
 * a download failed; 2: bad usage; 128 + N: cancelled by signal N). */
int fluxfs_prefetch_command(int argc, char **argv);

#endif
