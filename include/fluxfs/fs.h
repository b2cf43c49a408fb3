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
 * unmounted (fusermount3 -u) or SIGTERM/SIGINT/SIGHUP arrives, then unmounts and returns 0.
 * Failures before serving return a negative errno with a message in *error (caller frees).
 * The client must outlive the call. */
int fs_run(const struct fluxfs_options *opts, struct gcs_client *client, fs_mounted_cb on_mounted,
           void *user, char **error);

#endif
