/* The crash supervisor (--crash-restart): see supervisor.c. */
#ifndef FLUXFS_MAIN_SUPERVISOR_H
#define FLUXFS_MAIN_SUPERVISOR_H

#include "options.h"

/* Forks the serving process and returns in it, with opts' crash fields set; the calling
 * process becomes the supervisor and never returns (it exits with the serving process's
 * status). *notify_fd (the detached parent's pipe) is left to the serving process; quiet is
 * called in the supervisor when it is detached (stdio to /dev/null). -1 when the supervisor
 * cannot be set up (the caller serves unsupervised). */
int supervise(struct fluxfs_options *opts, int *notify_fd, void (*quiet)(void *user), void *user);

#endif
