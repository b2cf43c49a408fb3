/* The fs layer: the FUSE low-level operations over the core (namespace, caches, listings) and
 * io (readers) layers. main calls fs_run once; it mounts, serves until unmounted or signalled,
 * and unmounts. */
#ifndef FLUXFS_FS_H
#define FLUXFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fluxfs/gcs.h"
#include "fluxfs/writer.h"

/* What the fs layer needs of the mount's configuration, already resolved (main fills it from
 * the command line in fs_config_from_options, src/main/fs_config.c; the fs layer never sees the
 * command line's struct fluxfs_options). The strings are borrowed: they belong to the caller
 * and outlive fs_run. Defaults and meanings are those of the options (include/fluxfs/options.h,
 * `fluxfs --help`). */
struct fs_config {
    /* What to mount. */
    const char *bucket;
    const char *prefix;      /* "" or a prefix ending in '/'; may be NULL (= "") */
    const char *mountpoint;  /* absolute path, or /dev/fd/N */
    int handover_fd;         /* >= 0: take the mount over from the daemon serving mountpoint */
    double handover_wait_s;  /* how long this daemon waits for writers before handing over */
    double shutdown_grace_s; /* SIGTERM/SIGINT: writers are served this long; forever: -1 */
    /* Crash recovery (src/main/supervisor.c, src/fs/fs_crash.c): the shared state's memfd (-1:
     * off), the socket the /dev/fuse descriptor goes to the supervisor on, and in a process
     * started after a crash: the inherited descriptor, restarts so far. */
    int crash_memfd;
    int crash_sock;
    int crash_device_fd;
    uint64_t crash_restarts;
    uint64_t crash_tmp_id; /* != 0: names this mount's temporaries in every serving process, so
                            * that one started after a crash removes what the dead one left */

    /* Presentation. */
    bool read_only;
    bool skip_open; /* read-only mounts: the kernel skips OPEN/RELEASE/FLUSH */
    bool allow_other;
    bool implicit_dirs;
    uid_t uid;
    gid_t gid;
    mode_t file_mode;
    mode_t dir_mode;
    bool chmod_refuse; /* chmod/chown fail (--chmod-policy refuse); else they are ignored */

    /* Metadata caching (seconds). */
    double stat_ttl_s;
    double type_ttl_s;
    double negative_ttl_s;
    double list_ttl_s;
    double entry_timeout_s;   /* kernel dentry cache */
    double attr_timeout_s;    /* kernel attribute cache */
    double kernel_list_ttl_s; /* how long the kernel may keep readdir pages; 0 = not at all */
    bool prefetch_metadata;   /* list the whole prefix recursively at mount */
    size_t max_cached_names;  /* 0 = the default */
    int kernel_readahead_kb;  /* the mount's bdi read_ahead_kb; 0 = 1024 */

    /* Reads and memory. */
    size_t memory_limit; /* one budget for every buffer and cache */
    size_t read_budget;  /* memory_limit less the write buffers (the readers' budget) */
    size_t small_file_threshold;
    size_t readahead_chunk;
    size_t readahead_max;
    size_t random_read_min;
    int list_parallelism;

    /* Writes (include/fluxfs/writer.h). */
    const char *temp_dir; /* NULL = g_get_tmp_dir() */
    size_t write_part_size;
    size_t write_small_threshold;
    int write_parts_in_flight;
    int write_max_parts_in_flight;
    size_t write_buffer_size; /* 0 = every file through a staging file */
    enum writer_upload_mode upload_mode;
    int rename_dir_limit;
    double upload_cleanup_age_s;

    /* Content cache and prefetch (include/fluxfs/prefetch.h). */
    const char *cache_dir; /* NULL = memory only */
    size_t cache_size;
    size_t memory_cache_size;
    bool compose;      /* compose-batched prefetch */
    bool compose_auto; /* the bucket's settings decide (cost_model.h) */
    int prefetch_lookahead;
    int prefetch_workers;
    int compose_max_objects;
    size_t compose_object_max_size;
    size_t compose_batch_max_bytes;
    int batch_misses_us; /* 0 = off */
    int batch_misses_min;

    /* Metrics: prometheus_port 0 = off. */
    int prometheus_port;
    const char *prometheus_address;

    /* FUSE options passed through to libfuse (NULL-terminated, may be NULL); fixed at mount
     * time, so a hand-over compares them. */
    char **fuse_args;
};

/* Called once the mount is live (after fuse_session_mount succeeded), before serving; main uses
 * it to let a waiting parent process exit 0 (daemonize only after the mount worked). */
typedef void (*fs_mounted_cb)(void *user);

/* Mounts cfg->mountpoint and runs the multi-threaded session loop until the filesystem is
 * unmounted (fusermount3 -u) or SIGTERM/SIGINT/SIGHUP arrives, then unmounts and returns 0;
 * or, after handing the mount to a new process, returns FS_RUN_HANDED_OVER without
 * unmounting. With cfg->handover_fd >= 0 it takes the mount from the daemon serving it
 * instead of mounting.
 * Failures before serving return a negative errno with a message in *error (caller frees).
 * The client must outlive the call. */
int fs_run(const struct fs_config *cfg, struct gcs_client *client, fs_mounted_cb on_mounted,
           void *user, char **error);

/* fs_run's return when this process handed the mount over to another (it did not unmount). */
#define FS_RUN_HANDED_OVER 1

/* A connection to the hand-over socket of the fluxfs daemon serving mountpoint (the new
 * command's side of fs_handover.c): the descriptor, or -errno (-ECONNREFUSED/-ENOENT: no
 * daemon there listens). fs_run takes the mount over through it when cfg->handover_fd is it. */
int fs_handover_connect(const char *mountpoint);

#endif
