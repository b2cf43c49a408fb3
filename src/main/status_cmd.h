/* The subcommand `fluxfs status MOUNT [--json]` (main layer, private): see status_cmd.c. It
 * reads a running mount's MOUNT/.fluxfs/status and prints a summary, or the figures as JSON. */
#ifndef FLUXFS_MAIN_STATUS_CMD_H
#define FLUXFS_MAIN_STATUS_CMD_H

#include <stdbool.h>

/* True when argv is "fluxfs status ...": a subcommand, never a mount of bucket "status". */
bool fluxfs_status_command_applies(int argc, char **argv);
/* Returns the exit status: 0, 1 = PATH is not on a fluxfs mount (or its status cannot be
 * read), 2 = bad command line. */
int fluxfs_status_command(int argc, char **argv);

#endif
