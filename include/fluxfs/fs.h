/* The fs layer: the FUSE low-level operations over the core (namespace, caches, listings) and
 * io (readers) layers. main calls fs_run once; it mounts, serves until unmounted or signalled,
 * and unmounts. */
#ifndef FLUXFS_FS_H
#define FLUXFS_FS_H

#include "fluxfs/gcs.h"
#include "fluxfs/options.h"

/* Called once the mount is live (after fuse_session_mount succeeded), before serving; main uses
 * it to let a waiting parent process exit 0 (daemonize only after the mount worked). */
typedef void (*fs_mounted_cb)(void *user);

/* Mounts opts->mountpoint and runs the multi-threaded session loop until the filesystem is
 * unmounted (fusermount3 -u) or SIGTERM/SIGINT/SIGHUP arrives, then unmounts and returns 0;
 * or, after handing the mount to a new process, returns FS_RUN_HANDED_OVER without
 * unmounting. With opts->handover_fd >= 0 it takes the mount from the daemon serving it
 * instead of mounting.
 * Failures before serving return a negative errno with a message in *error (caller frees).
 * The client must outlive the call. */
int fs_run(const struct fluxfs_options *opts, struct gcs_client *client, fs_mounted_cb on_mounted,
           void *user, char **error);

/* fs_run's return when this process handed the mount over to another (it did not unmount). */
#define FS_RUN_HANDED_OVER 1

/* A connection to the hand-over socket of the fluxfs daemon serving mountpoint (the new
 * command's side of fs_handover.c): the descriptor, or -errno (-ECONNREFUSED/-ENOENT: no
 * daemon there listens). fs_run takes the mount over through it when opts->handover_fd is it. */
int fs_handover_connect(const char *mountpoint);

#endif
