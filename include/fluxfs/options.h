/* Mount options: everything the command line and -o options set, in one struct that the main
 * layer fills (src/main/options.c) and the fs/core/io layers read. Strings are owned by the
 * struct (g_free'd by fluxfs_options_clear). Sizes are bytes, times are seconds. The defaults
 * noted below are those of the option table (src/main/option_table.c, .def), which
 * fluxfs_options_init applies; the table is what counts. */
#ifndef FLUXFS_OPTIONS_H
#define FLUXFS_OPTIONS_H

/* --shutdown-grace when not given and fluxfs runs in a container (docker/podman stop wait
 * 10 s, then SIGKILL): 5 s to let writers close, the rest for the commit and the unmount. */
#define FLUXFS_CONTAINER_GRACE_S 5

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fluxfs/gcs.h"
#include "fluxfs/log.h"

struct fluxfs_options {
    /* What to mount. */
    char *bucket;
    char *prefix;                /* "" or a prefix ending in '/', e.g. "datasets/imagenet/" */
    char *mountpoint;            /* absolute path */
    bool mountpoint_unreachable; /* stat gave ENOTCONN (a stale mount?): main decides */
    int handover_fd;             /* >= 0: a connection to the daemon serving mountpoint, which
                                    hands the mount over (main sets it; fs_run uses it) */
    double handover_wait_s;      /* --handover-wait: how long the serving daemon waits for
                                    files open for writing to close before refusing */
    bool unmount_stale;          /* --unmount-stale (default on): lazily unmount a dead fluxfs
                                    mount there first */
    bool crash_restart;          /* --crash-restart: a supervisor restarts a serving process
                                    that dies by a signal (src/main/supervisor.c) */
    int crash_memfd;             /* the supervisor sets these in the serving process: the shared */
    int crash_sock;              /* state, the socket for the /dev/fuse descriptor, the kept */
    int crash_device_fd;         /* descriptor after a crash (-1 before), restarts so far, and */
    uint64_t crash_restarts;     /* the supervisor's pid (systemd's main process) */
    long supervisor_pid;
    uint64_t crash_tmp_id; /* the supervisor's random id for the temporary objects: the
                              same in every serving process it starts (0: none) */

    /* Cloud Storage client (endpoint, credentials, connection cap, retries, deadlines).
     * The strings it points at are owned by the fields below. */
    struct gcs_client_config gcs;
    char *endpoint;
    char *key_file;
    char *token_url;
    char *ca_file;         /* --ca-file, else $SSL_CERT_FILE */
    char *ca_dir;          /* $SSL_CERT_DIR */
    char *billing_project; /* --billing-project: userProject on every request */
    char *app_name;        /* --app-name: appended to the User-Agent */
    char *user_agent;      /* built from app_name; the gcs config points at it */

    /* Presentation. */
    bool foreground;
    double shutdown_grace_s;     /* SIGTERM/SIGINT: files open for writing are served this long
                                    before they are committed as fsync would; 30; forever: -1 */
    bool shutdown_grace_default; /* not given: main makes it FLUXFS_CONTAINER_GRACE_S in a
                                    container, so grace + commit fit a 10 s container stop */
    bool read_only;
    bool skip_open; /* read-only mounts: the kernel skips OPEN/RELEASE/FLUSH */
    bool allow_other;
    bool implicit_dirs; /* default true */
    uid_t uid;          /* default: the mounting user */
    gid_t gid;
    mode_t file_mode; /* default 0644 */
    mode_t dir_mode;  /* default 0755 */

    /* Metadata caching. */
    double stat_ttl_s;        /* object metadata (size, generation); default 60 */
    double type_ttl_s;        /* file-or-directory knowledge of a name; default 60 */
    double negative_ttl_s;    /* "no such name"; default 5 */
    double list_ttl_s;        /* directory listing contents; default 60 */
    double entry_timeout_s;   /* kernel dentry cache; default = stat_ttl_s */
    double attr_timeout_s;    /* kernel attribute cache; default = stat_ttl_s */
    bool prefetch_metadata;   /* list the whole prefix recursively at mount */
    double kernel_list_ttl_s; /* gcsfuse's --kernel-list-cache-ttl-secs: how long the kernel may
                               * keep a directory's readdir pages; 0 = not at all (default) */
    size_t max_cached_names;  /* bound of the stat/type/negative cache; 0 = the default */
    int kernel_readahead_kb;  /* -o read_ahead_kb: the mount's bdi read_ahead_kb; 0 = 1024 */

    /* Reads and memory. */
    size_t memory_limit; /* one budget for every buffer and cache; default 1536 MiB */
    size_t
        small_file_threshold; /* objects up to this size are fetched whole on first read; 4 MiB */
    size_t readahead_chunk;   /* size of one ranged GET in sequential readahead; 8 MiB */
    size_t readahead_max;     /* largest readahead window per open file; 64 MiB */
    size_t random_read_min;   /* smallest GET for random access; 1 MiB */
    int list_parallelism;     /* concurrent list requests for one directory; default 32 */

    /* Writes (include/fluxfs/writer.h). */
    char *temp_dir;         /* staging files of files being written; default $TMPDIR or /tmp */
    size_t write_part_size; /* streaming upload part; default 16 MiB */
    size_t write_small_threshold;  /* files up to this size upload in one request; 16 MiB */
    int write_parts_in_flight;     /* per file; default 16 */
    int write_max_parts_in_flight; /* all files together; default 64 */
    size_t write_buffer_size;      /* memory buffers of files being written, all together; inside
                                    * memory_limit (a third of it, at most 512 MiB, by default);
                                    * 0 = every file through a staging file */
    char *upload_mode;             /* "auto" (default), "multipart", "composite", "resumable" */
    int rename_dir_limit;          /* most objects a directory rename copies; default 1000 */
    char *chmod_policy;            /* "ignore" (default) or "refuse" chmod/chown */
    double upload_cleanup_age_s;   /* temp objects older than this are removed at mount; 3600 */

    /* Content cache and prefetch (issue 5; include/fluxfs/prefetch.h). */
    char *cache_dir;                /* disk tier of the content cache; NULL = memory only */
    size_t cache_size;              /* cap of the disk tier; default 10 GiB */
    size_t memory_cache_size;       /* cap of the memory tier (inside memory_limit); 256 MiB */
    bool compose;                   /* compose-batched prefetch; default on (--compose on|off) */
    bool compose_auto;              /* --compose auto (the default): the bucket's settings decide
                                       (cost_model.h); compose is then true until they are read */
    char *compose_mode;             /* the --compose text, folded into compose by the parser */
    int prefetch_lookahead;         /* hinted files fetched ahead of the reader; default 1024 */
    int prefetch_workers;           /* prefetch batches in flight at once; default 8 */
    int compose_max_objects;        /* sources per compose, 2..32; default 32 */
    size_t compose_object_max_size; /* larger objects are fetched alone; default 2 MiB */
    size_t compose_batch_max_bytes; /* cap on one composite; default 32 MiB */
    int batch_misses_us;            /* window gathering concurrent demand misses into one compose;
                                       0 = off (--batch-misses DURATION) */
    int batch_misses_min;           /* fewest misses worth a compose; default 4 */

    /* Logging. */
    enum flog_level log_level;
    bool log_json;
    char *log_file;
    bool debug_gcs; /* gcsfuse's --debug_gcs: request log lines at info */

    /* Metrics (--prometheus-port): 0 = off. */
    int prometheus_port;
    char *prometheus_address; /* default "127.0.0.1" */

    /* gcsfuse compatibility: one line per accepted flag that changes nothing here (or a value
     * mapped with a caveat), for main to log at warn once logging is set up. */
    char **warnings; /* NULL-terminated, may be NULL */
    bool debug_fuse; /* libfuse's request trace (gcsfuse's --debug_fuse) */

    /* FUSE options passed through (e.g. "-o" values libfuse understands), owned. */
    char **fuse_args; /* NULL-terminated, may be NULL */
};

/* Fills defaults (also reads STORAGE_EMULATOR_HOST into the gcs config). */
void fluxfs_options_init(struct fluxfs_options *opts);
void fluxfs_options_clear(struct fluxfs_options *opts);

/* What --memory-limit leaves for read buffers and the memory cache: all of it less the write
 * buffers' share (all of it when the write buffers are unbounded, gcsfuse's
 * write-global-max-blocks -1; the parser checked the share leaves enough). */
static inline size_t fluxfs_options_read_budget(const struct fluxfs_options *opts)
{
    return opts->write_buffer_size >= opts->memory_limit
               ? opts->memory_limit
               : opts->memory_limit - opts->write_buffer_size;
}

#endif
