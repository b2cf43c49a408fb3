/* fluxfs command line: one table of options (long names, gcsfuse aliases, -o keys), value
 * parsers for sizes, durations and modes, fstab-style -o lists, and the checks that run before
 * anything touches the network (bucket name, conflicts, mountpoint). */
#include "options.h"

#include "config_file.h"

#include <ctype.h>
#include <errno.h>
#include <glib.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fluxfs-config.h"

#define DEFAULT_ENDPOINT "https://storage.googleapis.com"
#define MIB ((size_t)1 << 20)

enum option_kind {
    KIND_FLAG,          /* bool; "--x", "--x=false", "--no-x", "-o x", "-o no_x" */
    KIND_STRING,        /* char * field */
    KIND_PATH,          /* char * field, must exist, made absolute */
    KIND_NEW_PATH,      /* char * field, made absolute (may not exist yet, e.g. a log file) */
    KIND_ENDPOINT,      /* opts->endpoint, normalised URL */
    KIND_PREFIX,        /* --only-dir: opts->prefix */
    KIND_UID,
    KIND_GID,
    KIND_MODE,
    KIND_TTL,           /* double seconds, -1/inf = forever */
    KIND_TTL_SECONDS,   /* gcsfuse's *-secs: integer seconds, -1 = forever */
    KIND_METADATA_TTL,  /* gcsfuse's metadata-cache-ttl-secs: stat and type TTL together */
    KIND_DURATION,      /* double seconds > 0 */
    KIND_SIZE,          /* size_t bytes */
    KIND_SIZE_MIB,      /* size_t, a bare number means MiB (gcsfuse's *-mb flags) */
    KIND_INT,           /* int within [min, max] */
    KIND_RETRIES,       /* --max-retries N: 0 = no retries (stored as -1 in the gcs config) */
    KIND_LOG_LEVEL,
    KIND_LOG_FORMAT,
    KIND_DEBUG,         /* foreground + debug log */
    KIND_FUSE,          /* passed through to libfuse in fuse_args */
    KIND_IGNORED,       /* fstab-only keys, accepted and dropped */
    KIND_WARN,          /* a gcsfuse flag with no effect here: accepted, one warning line
                         * (help = why) unless the value is one of `quiet` ('|'-separated) */
    KIND_COMPAT,        /* a gcsfuse flag mapped onto fluxfs settings (apply_compat) */
    KIND_HELP,
    KIND_VERSION,
    KIND_CONFIG,        /* --config-file: read before the command line (read_config_file) */
};

enum option_topic {
    TOPIC_MOUNTING,
    TOPIC_CREDENTIALS,
    TOPIC_PRESENTATION,
    TOPIC_CACHING,
    TOPIC_PERFORMANCE,
    TOPIC_LOGGING,
    TOPIC_GCSFUSE,
    TOPIC_HIDDEN,
};

static const char *const topic_titles[] = {
    [TOPIC_MOUNTING] = "Mounting",
    [TOPIC_CREDENTIALS] = "Credentials and endpoint",
    [TOPIC_PRESENTATION] = "Presentation (owners, modes, directories)",
    [TOPIC_CACHING] = "Metadata caching (durations: 1.5, 30s, 500ms, 5m, 1h; -1 = forever)",
    [TOPIC_PERFORMANCE] = "Performance and requests (sizes: 512K, 64M, 1GiB)",
    [TOPIC_LOGGING] = "Logging",
    [TOPIC_GCSFUSE] = "gcsfuse compatibility (accepted; what fluxfs does with them)",
};

struct option_spec {
    const char *name;     /* long name with dashes; the -o key is the same with dashes or '_' */
    char short_name;      /* 0 = none */
    enum option_kind kind;
    size_t offset;        /* into struct fluxfs_options */
    int min, max;         /* KIND_INT */
    enum option_topic topic;
    const char *metavar;  /* NULL for flags */
    const char *help;     /* NULL for aliases (listed with their target) */
    const char *alias_of; /* the canonical name, for aliases */
    const char *quiet;    /* KIND_WARN: values that match what fluxfs does anyway: no warning */
};

#define FIELD(f) offsetof(struct fluxfs_options, f)
#define NO_FIELD 0

/* Canonical options first in each topic (help order), aliases after them. */
static const struct option_spec option_table[] = {
    /* Mounting */
    {"foreground", 'f', KIND_FLAG, FIELD(foreground), 0, 0, TOPIC_MOUNTING, NULL,
     "stay in the foreground (default: detach once the mount is live)", NULL},
    {"debug", 'd', KIND_DEBUG, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL,
     "foreground with debug logging", NULL},
    {"read-only", 0, KIND_FLAG, FIELD(read_only), 0, 0, TOPIC_MOUNTING, NULL,
     "mount read-only (-o ro)", NULL},
    {"allow-other", 0, KIND_FLAG, FIELD(allow_other), 0, 0, TOPIC_MOUNTING, NULL,
     "let other users access the mount (-o allow_other; needs user_allow_other in "
     "/etc/fuse.conf unless root)", NULL},
    {"only-dir", 0, KIND_PREFIX, NO_FIELD, 0, 0, TOPIC_MOUNTING, "PREFIX",
     "mount only this prefix of the bucket (same as BUCKET/PREFIX)", NULL},
    {"debug-fuse", 0, KIND_FLAG, FIELD(debug_fuse), 0, 0, TOPIC_MOUNTING, NULL,
     "print every FUSE request (libfuse's debug output; implies --foreground)", NULL},
    {"shutdown-grace", 0, KIND_TTL, FIELD(shutdown_grace_s), 0, 0, TOPIC_MOUNTING, "DURATION",
     "on SIGTERM/SIGINT (or an unmount by someone else), serve files open for writing until "
     "they are closed, at most this long, then commit them as fsync would (default 30s, "
     "5s in a container, to fit its 10 s stop; -1 = no limit)", NULL},
    {"unmount-stale", 0, KIND_FLAG, FIELD(unmount_stale), 0, 0, TOPIC_MOUNTING, NULL,
     "when MOUNTPOINT is a fluxfs mount whose daemon died (\"transport endpoint is not "
     "connected\"), unmount it lazily and mount again (default on; --no-unmount-stale only "
     "names it and exits 2); a live mount or another filesystem's is left alone", NULL},
    {"help", 'h', KIND_HELP, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL, "print this help and exit", NULL},
    {"version", 'V', KIND_VERSION, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL,
     "print the version and exit (also -v, as gcsfuse)", NULL},
    {"config-file", 0, KIND_CONFIG, NO_FIELD, 0, 0, TOPIC_MOUNTING, "FILE",
     "read gcsfuse's YAML configuration file (its keys and nesting, e.g. \"metadata-cache: "
     "{ttl-secs: 60}\"); options on the command line override it; unknown keys are warned "
     "about", NULL},
    {"ro", 0, KIND_FLAG, FIELD(read_only), 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"skip-open", 0, KIND_FLAG, FIELD(skip_open), 0, 0, TOPIC_MOUNTING, NULL,
     "on read-only mounts, let the kernel open and close files with no request to the daemon "
     "(no OPEN, FLUSH, RELEASE; a replaced object is a new inode) (default on; --no-skip-open "
     "keeps the requests)", NULL},

    /* Credentials */
    {"endpoint", 0, KIND_ENDPOINT, NO_FIELD, 0, 0, TOPIC_CREDENTIALS, "URL",
     "Cloud Storage endpoint (default " DEFAULT_ENDPOINT ", or STORAGE_EMULATOR_HOST, which "
     "also implies --anonymous)", NULL},
    {"anonymous", 0, KIND_FLAG, FIELD(gcs.anonymous), 0, 0, TOPIC_CREDENTIALS, NULL,
     "send no credentials (public buckets, emulators)", NULL},
    {"key-file", 0, KIND_PATH, FIELD(key_file), 0, 0, TOPIC_CREDENTIALS, "PATH",
     "service-account or authorized_user JSON key (default: Application Default Credentials: "
     "GOOGLE_APPLICATION_CREDENTIALS, the gcloud ADC file, the metadata server)", NULL},
    {"token-url", 0, KIND_STRING, FIELD(token_url), 0, 0, TOPIC_CREDENTIALS, "URL",
     "without --key-file: get access tokens from this URL (GET, OAuth token JSON reply, as "
     "gcsfuse does); with --key-file: the key's token endpoint instead of its token_uri", NULL},
    {"billing-project", 0, KIND_STRING, FIELD(billing_project), 0, 0, TOPIC_CREDENTIALS,
     "PROJECT", "bill requests to this project (Requester Pays buckets: userProject on every "
     "request)", NULL},
    {"app-name", 0, KIND_STRING, FIELD(app_name), 0, 0, TOPIC_CREDENTIALS, "NAME",
     "added to the User-Agent of every request", NULL},
    {"ca-file", 0, KIND_PATH, FIELD(ca_file), 0, 0, TOPIC_CREDENTIALS, "FILE",
     "trust the certificate authorities in this PEM file instead of the system's bundle "
     "(default: $SSL_CERT_FILE when set; $SSL_CERT_DIR replaces the CA directory); "
     "certificates that do not verify are always refused", NULL},
    {"custom-endpoint", 0, KIND_ENDPOINT, NO_FIELD, 0, 0, TOPIC_HIDDEN, "URL", NULL, "endpoint"},
    {"anonymous-access", 0, KIND_FLAG, FIELD(gcs.anonymous), 0, 0, TOPIC_HIDDEN, NULL, NULL,
     "anonymous"},

    /* Presentation */
    {"uid", 0, KIND_UID, FIELD(uid), 0, 0, TOPIC_PRESENTATION, "UID",
     "owner of every file and directory, number or name (default: the mounting user)", NULL},
    {"gid", 0, KIND_GID, FIELD(gid), 0, 0, TOPIC_PRESENTATION, "GID",
     "group of every file and directory, number or name", NULL},
    {"file-mode", 0, KIND_MODE, FIELD(file_mode), 0, 0, TOPIC_PRESENTATION, "MODE",
     "permission bits of files, octal (default 0644)", NULL},
    {"dir-mode", 0, KIND_MODE, FIELD(dir_mode), 0, 0, TOPIC_PRESENTATION, "MODE",
     "permission bits of directories, octal (default 0755)", NULL},
    {"implicit-dirs", 0, KIND_FLAG, FIELD(implicit_dirs), 0, 0, TOPIC_PRESENTATION, NULL,
     "show prefixes without a placeholder object \"dir/\" as directories (default on; "
     "--no-implicit-dirs turns it off)", NULL},

    /* Caching */
    {"stat-ttl", 0, KIND_TTL, FIELD(stat_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long object metadata (size, generation) is trusted, from a listing too: bounds how "
     "soon a replaced file is seen by open/stat (default 60s); 0: every open and stat by path "
     "asks Cloud Storage (reads of an open file do not)", NULL},
    {"type-ttl", 0, KIND_TTL, FIELD(type_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long \"file or directory\" knowledge of a name is trusted (default 60s)", NULL},
    {"negative-ttl", 0, KIND_TTL, FIELD(negative_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long \"no such name\" is remembered (default 5s)", NULL},
    {"list-ttl", 0, KIND_TTL, FIELD(list_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long a directory listing is reused by readdir (default 60s); its entries answer "
     "lookups only within --stat-ttl/--type-ttl", NULL},
    {"entry-timeout", 0, KIND_TTL, FIELD(entry_timeout_s), 0, 0, TOPIC_CACHING, "DURATION",
     "kernel name cache timeout (default: the stat TTL)", NULL},
    {"attr-timeout", 0, KIND_TTL, FIELD(attr_timeout_s), 0, 0, TOPIC_CACHING, "DURATION",
     "kernel attribute cache timeout (default: the stat TTL)", NULL},
    {"prefetch-metadata", 0, KIND_FLAG, FIELD(prefetch_metadata), 0, 0, TOPIC_CACHING, NULL,
     "list the whole mounted prefix at mount time to warm the metadata cache", NULL},
    {"stat-cache-ttl", 0, KIND_TTL, FIELD(stat_ttl_s), 0, 0, TOPIC_HIDDEN, "DURATION", NULL,
     "stat-ttl"},
    {"type-cache-ttl", 0, KIND_TTL, FIELD(type_ttl_s), 0, 0, TOPIC_HIDDEN, "DURATION", NULL,
     "type-ttl"},
    {"metadata-cache-ttl-secs", 0, KIND_METADATA_TTL, NO_FIELD, 0, 0, TOPIC_HIDDEN, "SECONDS",
     NULL, "stat-ttl and --type-ttl"},
    {"metadata-cache-negative-ttl-secs", 0, KIND_TTL_SECONDS, FIELD(negative_ttl_s), 0, 0,
     TOPIC_HIDDEN, "SECONDS", NULL, "negative-ttl"},
    {"kernel-list-cache-ttl-secs", 0, KIND_COMPAT, FIELD(kernel_list_ttl_s), 0, 0,
     TOPIC_CACHING, "SECONDS", "how long the kernel may keep a directory's entries it read "
     "(readdir) and serve ls without asking fluxfs; 0 = ask every time (default), -1 = until "
     "invalidated (gcsfuse's meaning and units)", NULL},

    /* Performance */
    {"max-connections", 0, KIND_INT, FIELD(gcs.max_connections), 0, 4096, TOPIC_PERFORMANCE, "N",
     "cap on connections to Cloud Storage (default 64)", NULL},
    {"read-ahead-kb", 0, KIND_INT, FIELD(kernel_readahead_kb), 1, 1 << 20, TOPIC_PERFORMANCE,
     "KB", "the kernel's readahead for the mount (its /sys/class/bdi read_ahead_kb; root "
     "only, else the kernel's default stays; the kernel caps it at 4096) (default 1024)",
     NULL},
    {"list-parallelism", 0, KIND_INT, FIELD(list_parallelism), 1, 256, TOPIC_PERFORMANCE, "N",
     "concurrent list requests for one large directory (default 32)", NULL},
    {"memory-limit", 0, KIND_SIZE, FIELD(memory_limit), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "one budget for the daemon's buffers and caches: read buffers, the memory cache and "
     "(unless --write-buffer-size is given) a third of it, at most 512M, for write buffers "
     "(default 1536M)", NULL},
    {"small-file-threshold", 0, KIND_SIZE, FIELD(small_file_threshold), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "objects up to this size are fetched whole when first opened (default 4M)",
     NULL},
    {"readahead-chunk", 0, KIND_SIZE, FIELD(readahead_chunk), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "size of one ranged GET of sequential readahead (default 8M)", NULL},
    {"readahead-max", 0, KIND_SIZE, FIELD(readahead_max), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "largest readahead window per open file (default 64M)", NULL},
    {"random-read-min", 0, KIND_SIZE, FIELD(random_read_min), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "smallest GET for random access (default 1M)", NULL},
    {"temp-dir", 0, KIND_PATH, FIELD(temp_dir), 0, 0, TOPIC_PERFORMANCE, "DIR",
     "staging files (edits of existing objects, files that seek back after parts were sent; "
     "default $TMPDIR or /tmp)", NULL},
    {"write-part-size", 0, KIND_SIZE, FIELD(write_part_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "part of a streaming upload, sent while the file is still written (default 16M)", NULL},
    {"write-small-threshold", 0, KIND_SIZE, FIELD(write_small_threshold), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "files up to this size upload in one request at close "
     "(default 16M)", NULL},
    {"write-parts-in-flight", 0, KIND_INT, FIELD(write_parts_in_flight), 1, 1024,
     TOPIC_PERFORMANCE, "N", "upload parts in flight per file (default 16)", NULL},
    {"write-max-parts-in-flight", 0, KIND_INT, FIELD(write_max_parts_in_flight), 1, 4096,
     TOPIC_PERFORMANCE, "N", "upload parts in flight for all files together (default 64)",
     NULL},
    {"write-buffer-size", 0, KIND_SIZE, FIELD(write_buffer_size), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "memory for the parts of new files being written, all files together, taken "
     "from --memory-limit (default a third of it in whole parts, at most 512M; 0 = every "
     "file through a staging file under --temp-dir)", NULL},
    {"upload-mode", 0, KIND_STRING, FIELD(upload_mode), 0, 0, TOPIC_PERFORMANCE, "MODE",
     "auto (XML multipart, composite where missing), multipart, composite or resumable", NULL},
    {"rename-dir-limit", 0, KIND_INT, FIELD(rename_dir_limit), 0, 10000000, TOPIC_PERFORMANCE,
     "N", "most objects a directory rename copies; more gives EXDEV (default 1000; renames of "
     "directories are not atomic)", NULL},
    {"chmod-policy", 0, KIND_STRING, FIELD(chmod_policy), 0, 0, TOPIC_PRESENTATION, "POLICY",
     "ignore (default: chmod/chown succeed and change nothing) or refuse (EPERM)", NULL},
    {"upload-cleanup-age", 0, KIND_TTL, FIELD(upload_cleanup_age_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "at mount, temporary upload objects older than this (left by a crashed daemon) "
     "are removed; 0 also aborts every multipart upload under the prefix (default 1h)", NULL},
    {"cache-dir", 0, KIND_NEW_PATH, FIELD(cache_dir), 0, 0, TOPIC_PERFORMANCE, "DIR",
     "keep a disk content cache here, by object name and generation, reused after a "
     "remount: small objects, and large ones once read through the mount (gcsfuse's file "
     "cache; any read order; kept when every byte was read and the CRC32C matches) "
     "(default: memory only)", NULL},
    {"cache-size", 0, KIND_SIZE, FIELD(cache_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "cap of the disk content cache (default 10G)", NULL},
    {"memory-cache-size", 0, KIND_SIZE, FIELD(memory_cache_size), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "cap of the in-memory content cache, inside --memory-limit (default 256M; 0 = "
     "none)", NULL},
    {"compose", 0, KIND_STRING, FIELD(compose_mode), 0, 0, TOPIC_PERFORMANCE,
     "auto|on|off", "compose-batched prefetch of small objects (default auto: on unless the "
     "bucket's retention policy, default event-based hold or unreadable settings make "
     "temporaries undeletable; off: plain GETs)", NULL},
    {"prefetch-lookahead", 0, KIND_INT, FIELD(prefetch_lookahead), 1, 1000000,
     TOPIC_PERFORMANCE, "N", "files of each hint list fetched ahead of its reader "
     "(default 1024; fetched and not opened yet: at most 3/4 of the content cache at "
     "their average size, shared among the lists)", NULL},
    {"prefetch-workers", 0, KIND_INT, FIELD(prefetch_workers), 1, 256, TOPIC_PERFORMANCE, "N",
     "prefetch batches fetched at once (compose, GET, delete; default 8)", NULL},
    {"compose-max-objects", 0, KIND_INT, FIELD(compose_max_objects), 2, 32, TOPIC_PERFORMANCE,
     "N", "objects per compose batch (default 32, the most Cloud Storage allows)", NULL},
    {"compose-object-max-size", 0, KIND_SIZE, FIELD(compose_object_max_size), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "objects up to this size are compose-batched (default 2M)",
     NULL},
    {"compose-batch-max-bytes", 0, KIND_SIZE, FIELD(compose_batch_max_bytes), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "cap on one composite object (default 32M)", NULL},
    {"batch-misses", 0, KIND_INT, FIELD(batch_misses_us), 0, 1000000, TOPIC_PERFORMANCE, "US",
     "gather concurrent small-file misses for up to US microseconds and fetch them with one "
     "compose (0 = off, the default)", NULL},
    {"batch-misses-min", 0, KIND_INT, FIELD(batch_misses_min), 2, 32, TOPIC_PERFORMANCE, "N",
     "fewest concurrent misses worth a compose (default 4; fewer are plain GETs)", NULL},
    {"max-retries", 0, KIND_RETRIES, FIELD(gcs.max_retries), 0, 100, TOPIC_PERFORMANCE, "N",
     "retries of a failed request (408/429/5xx, resets, stalls); 0 = none (default 6)", NULL},
    {"request-deadline", 0, KIND_DURATION, FIELD(gcs.request_deadline_s), 0, 0,
     TOPIC_PERFORMANCE, "DURATION", "total time for one call including retries (default 120s)",
     NULL},
    {"stall-timeout", 0, KIND_DURATION, FIELD(gcs.stall_timeout_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "a body with no bytes for this long is retried (default 30s)", NULL},
    {"connect-timeout", 0, KIND_DURATION, FIELD(gcs.connect_timeout_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "TCP/TLS connect timeout (default 10s)", NULL},
    {"max-conns-per-host", 0, KIND_COMPAT, FIELD(gcs.max_connections), 0, 4096, TOPIC_HIDDEN,
     "N", NULL, "max-connections"},
    {"sequential-read-size-mb", 0, KIND_SIZE_MIB, FIELD(readahead_chunk), 0, 0, TOPIC_HIDDEN,
     "MB", NULL, "readahead-chunk"},
    {"http-client-timeout", 0, KIND_COMPAT, FIELD(gcs.request_deadline_s), 0, 0, TOPIC_HIDDEN,
     "DURATION", NULL, "request-deadline"},

    /* Logging */
    {"log-level", 0, KIND_LOG_LEVEL, FIELD(log_level), 0, 0, TOPIC_LOGGING, "LEVEL",
     "error, warn, info (default), debug or trace", NULL},
    {"log-format", 0, KIND_LOG_FORMAT, FIELD(log_json), 0, 0, TOPIC_LOGGING, "FORMAT",
     "text (default) or json", NULL},
    {"log-file", 0, KIND_NEW_PATH, FIELD(log_file), 0, 0, TOPIC_LOGGING, "PATH",
     "append logs to this file (default: stderr; syslog once detached)", NULL},
    {"log-severity", 0, KIND_LOG_LEVEL, FIELD(log_level), 0, 0, TOPIC_HIDDEN, "LEVEL", NULL,
     "log-level"},
    {"debug-gcs", 0, KIND_FLAG, FIELD(debug_gcs), 0, 0, TOPIC_LOGGING, NULL,
     "log one line per Cloud Storage request at info (gcsfuse's --debug_gcs; --log-level "
     "trace logs them too)", NULL},
    {"prometheus-port", 0, KIND_INT, FIELD(prometheus_port), 0, 65535, TOPIC_LOGGING, "PORT",
     "serve Prometheus metrics at http://ADDRESS:PORT/metrics (default 0: off)", NULL},
    {"prometheus-address", 0, KIND_STRING, FIELD(prometheus_address), 0, 0, TOPIC_LOGGING,
     "ADDRESS", "address the metrics listener binds (default 127.0.0.1)", NULL},

    /* gcsfuse v3 flags (cfg/params.yaml) that fluxfs maps onto its own settings. Their help
     * text is what fluxfs does with them (--help lists them under "gcsfuse compatibility"). */
#define GCSFUSE_MAP(name, metavar, what)                                                           \
    {name, 0, KIND_COMPAT, NO_FIELD, 0, 0, TOPIC_GCSFUSE, metavar, what, NULL, NULL}
    GCSFUSE_MAP("file-cache-max-size-mb", "MB", "--cache-size in MiB; -1 = no cap, 0 = no disk "
                "cache"),
    GCSFUSE_MAP("stat-cache-max-size-mb", "MB", "bounds the metadata cache at MB MiB of ~1,700-"
                "byte entries; -1 = no bound, 0 = one entry"),
    GCSFUSE_MAP("stat-cache-capacity", "N", "bounds the metadata cache at N names"),
    GCSFUSE_MAP("max-retry-attempts", "N", "--max-retries N; 0 = no limit but --request-deadline"),
    GCSFUSE_MAP("experimental-metadata-prefetch-on-mount", "MODE", "disabled, or sync/async = "
                "--prefetch-metadata"),
    GCSFUSE_MAP("enable-metadata-prefetch", NULL, "--prefetch-metadata"),
    GCSFUSE_MAP("write-block-size-mb", "MB", "--write-part-size in MiB (at least 5)"),
    GCSFUSE_MAP("write-global-max-blocks", "N", "--write-buffer-size = N parts; 0 = every file "
                "through a staging file, -1 = no cap"),
    GCSFUSE_MAP("write-max-blocks-per-file", "N", "--write-parts-in-flight N; -1 = 1024"),
    GCSFUSE_MAP("limit-ops-per-sec", "N", "at most N Cloud Storage calls start per second, "
                "all together (retries belong to their call); calls over the rate wait in order; "
                "bursts of N/10; -1 (default) = no limit"),
    GCSFUSE_MAP("limit-bytes-per-sec", "N", "reply bytes are received from Cloud Storage at "
                "most N per second, all transfers together (reads, listings; uploads are not "
                "limited); -1 (default) = no limit"),
    GCSFUSE_MAP("client-protocol", "PROTOCOL", "http1 (what fluxfs speaks); http2 and grpc are "
                "accepted with a warning"),
#undef GCSFUSE_MAP

    /* gcsfuse v3 flags with no meaning for fluxfs: accepted with one warning line (none when the
     * value given is what fluxfs does anyway). The text says why. */
#define GCSFUSE_FLAG(name, quiet, why)                                                             \
    {name, 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_GCSFUSE, NULL, why, NULL, quiet}
#define GCSFUSE_VALUE(name, metavar, quiet, why)                                                   \
    {name, 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_GCSFUSE, metavar, why, NULL, quiet}
    GCSFUSE_FLAG("enable-hns", "false", "fluxfs uses the flat object namespace on every bucket "
                 "(folders are prefixes)"),
    GCSFUSE_FLAG("ignore-interrupts", NULL, "fluxfs completes every request except a directory "
                 "listing whose caller was interrupted"),
    GCSFUSE_FLAG("enable-streaming-writes", "true", "fluxfs always streams new files in parts; "
                 "--write-buffer-size 0 stages them on disk instead"),
    GCSFUSE_FLAG("create-empty-file", "false", "fluxfs creates a new object when the file is "
                 "closed (or its first part is sent), never an empty placeholder"),
    GCSFUSE_FLAG("enable-nonexistent-type-cache", NULL, "fluxfs always remembers absent names "
                 "for --negative-ttl (gcsfuse: --metadata-cache-negative-ttl-secs)"),
    GCSFUSE_FLAG("reuse-token-from-url", "true", "fluxfs reuses a token until shortly before "
                 "it expires"),
    GCSFUSE_FLAG("enable-buffered-read", "true", "fluxfs always reads ahead into memory "
                 "buffers (--readahead-chunk, --readahead-max, --memory-limit)"),
    GCSFUSE_FLAG("enable-read-stall-retry", "true", "fluxfs retries a body with no bytes for "
                 "--stall-timeout"),
    GCSFUSE_FLAG("enable-google-lib-auth", "true", "fluxfs finds credentials in the order "
                 "Google's libraries use"),
    GCSFUSE_FLAG("enable-http-dns-cache", "true", "libcurl caches name lookups"),
    GCSFUSE_FLAG("enable-atomic-rename-object", "false", "renames are copy + delete (no HNS "
                 "atomic rename)"),
    GCSFUSE_FLAG("enable-new-reader", NULL, "fluxfs has one reader"),
    GCSFUSE_FLAG("enable-unsupported-path-support", NULL, "fluxfs hides object names that are "
                 "not valid paths"),
    GCSFUSE_FLAG("enable-empty-managed-folders", "false", "managed folders are not listed"),
    GCSFUSE_FLAG("enable-rapid-appends", "true", "no Rapid storage appends"),
    GCSFUSE_FLAG("finalize-file-for-rapid", "false", "no Rapid storage appends"),
    GCSFUSE_FLAG("precondition-errors", "true", "fluxfs writes with generation preconditions "
                 "and reports a lost race as ESTALE"),
    GCSFUSE_FLAG("disable-parallel-dirops", "false", "lookups and listings always run in "
                 "parallel"),
    GCSFUSE_FLAG("experimental-enable-dentry-cache", NULL, "the kernel name cache follows "
                 "--entry-timeout"),
    GCSFUSE_FLAG("experimental-enable-readdirplus", NULL, "fluxfs always answers readdirplus"),
    GCSFUSE_FLAG("o-direct", "false", "reads and writes use the page cache"),
    GCSFUSE_FLAG("enable-kernel-reader", "false", "fluxfs reads with its own parallel "
                 "readahead (--readahead-chunk, --readahead-max)"),
    GCSFUSE_VALUE("fuse-max-request-size-kb", "KB", "0", "the kernel's FUSE request size is "
                  "used"),
    GCSFUSE_FLAG("experimental-o-direct", "false", "reads and writes use the page cache"),
    GCSFUSE_FLAG("experimental-enable-json-read", NULL, "fluxfs reads with JSON API media "
                 "downloads"),
    GCSFUSE_FLAG("file-cache-cache-file-for-range-read", NULL, "the disk cache keeps a large "
                 "object once all of it was read, in any order"),
    GCSFUSE_FLAG("file-cache-enable-parallel-downloads", NULL, "large reads are parallel "
                 "readahead GETs (--readahead-chunk, --readahead-max)"),
    GCSFUSE_FLAG("file-cache-enable-crc", NULL, "whole-object reads are checked against the "
                 "object's CRC32C"),
    GCSFUSE_FLAG("file-cache-enable-o-direct", "false", "the disk cache uses the page cache"),
    GCSFUSE_FLAG("file-cache-experimental-parallel-downloads-default-on", NULL,
                 "large reads are parallel readahead GETs"),
    GCSFUSE_FLAG("file-cache-experimental-enable-chunk-cache", NULL, "no chunk cache mode"),
    GCSFUSE_FLAG("file-cache-experimental-enable-block-cache", NULL, "no block cache mode"),
    GCSFUSE_FLAG("disable-autoconfig", "true", "fluxfs does not tune itself by machine type"),
    GCSFUSE_FLAG("enable-cloud-profiler", "false", "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-cpu", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-heap", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-allocated-heap", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-goroutines", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-mutex", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("enable-grpc-metrics", "false", "no gRPC"),
    GCSFUSE_FLAG("metrics-use-new-names", NULL, "/metrics uses gcsfuse's metric names"),
    GCSFUSE_FLAG("enable-dummy-io", "false", "fluxfs always transfers data"),
    GCSFUSE_FLAG("visualize-workload-insight", "false", "no workload insight output"),
    GCSFUSE_FLAG("log-rotate-compress", NULL, "fluxfs reopens --log-file on SIGHUP; rotate it "
                 "with logrotate"),
    GCSFUSE_FLAG("debug-http", "false", "--log-level trace logs every request"),
    GCSFUSE_FLAG("debug-fs", "false", "gcsfuse: unused"),
    GCSFUSE_FLAG("debug-fuse-errors", NULL, "gcsfuse: unused; errors are logged at warn"),
    GCSFUSE_FLAG("debug-invariants", "false", "no invariant checker"),
    GCSFUSE_FLAG("debug-mutex", "false", "no mutex timing"),
    GCSFUSE_VALUE("profile", "NAME", NULL, "fluxfs's defaults serve training, serving and "
                  "checkpointing; set options explicitly"),
    GCSFUSE_VALUE("machine-type", "TYPE", NULL, "fluxfs does not tune itself by machine type"),
    GCSFUSE_VALUE("max-idle-conns-per-host", "N", NULL, "idle connections are kept up to "
                  "--max-connections"),
    GCSFUSE_VALUE("max-retry-sleep", "DURATION", NULL, "backoff is exponential with full "
                  "jitter, bounded by --request-deadline"),
    GCSFUSE_VALUE("retry-multiplier", "X", NULL, "backoff is exponential with full jitter"),
    GCSFUSE_VALUE("max-retry-duration", "DURATION", "0|0s", "gcsfuse: unused; see "
                  "--request-deadline"),
    GCSFUSE_VALUE("chunk-transfer-timeout-secs", "SECONDS", NULL, "an upload part with no "
                  "progress for --stall-timeout is retried"),
    GCSFUSE_VALUE("read-stall-initial-req-timeout", "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-max-req-timeout", "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-min-req-timeout", "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-req-increase-rate", "X", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-req-target-percentile", "X", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-block-size-mb", "MB", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("read-global-max-blocks", "N", NULL, "readahead memory is bounded by "
                  "--memory-limit"),
    GCSFUSE_VALUE("read-max-blocks-per-handle", "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("read-min-blocks-per-handle", "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("read-start-blocks-per-handle", "N", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("read-random-seek-threshold", "N", NULL, "fluxfs detects random access "
                  "itself (--random-read-min)"),
    GCSFUSE_VALUE("read-inactive-stream-timeout", "DURATION", NULL, "fluxfs uses ranged GETs "
                  "and keeps no idle streams"),
    GCSFUSE_VALUE("file-cache-download-chunk-size-mb", "MB", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("file-cache-parallel-downloads-per-file", "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("file-cache-max-parallel-downloads", "N", NULL, "see --max-connections"),
    GCSFUSE_VALUE("file-cache-write-buffer-size", "BYTES", NULL, "no effect"),
    GCSFUSE_VALUE("file-cache-include-regex", "REGEX", "", "every object may be cached"),
    GCSFUSE_VALUE("file-cache-exclude-regex", "REGEX", "", "every object may be cached"),
    GCSFUSE_VALUE("type-cache-max-size-mb", "MB", NULL, "types share the metadata cache "
                  "(--stat-cache-max-size-mb)"),
    GCSFUSE_VALUE("congestion-threshold", "N", "0", "the kernel's default is used"),
    GCSFUSE_VALUE("max-background", "N", "0", "the kernel's default is used"),
    GCSFUSE_VALUE("max-read-ahead-kb", "KB", "0", "set read_ahead_kb in /sys/class/bdi"),
    GCSFUSE_VALUE("unused-mrd-cache-size", "N", NULL, "no Rapid storage readers"),
    GCSFUSE_VALUE("experimental-grpc-conn-pool-size", "N", NULL, "no gRPC"),
    GCSFUSE_VALUE("experimental-local-socket-address", "ADDRESS", "", "connections use the "
                  "default route"),
    GCSFUSE_VALUE("experimental-tracing-mode", "MODE", "", "no tracing export (see "
                  "--debug-gcs)"),
    GCSFUSE_VALUE("experimental-tracing-project-id", "PROJECT", "", "no tracing export"),
    GCSFUSE_VALUE("experimental-tracing-sampling-ratio", "X", "0", "no tracing export"),
    GCSFUSE_VALUE("trace-sampling-ratio", "X", "0", "no tracing export"),
    GCSFUSE_VALUE("cloud-profiler-label", "LABEL", NULL, "no Cloud Profiler"),
    GCSFUSE_VALUE("cloud-metrics-export-interval-secs", "SECONDS", "0", "no Cloud Monitoring "
                  "export; use --prometheus-port"),
    GCSFUSE_VALUE("stackdriver-export-interval", "DURATION", "0|0s", "no Cloud Monitoring "
                  "export; use --prometheus-port"),
    GCSFUSE_VALUE("metrics-buffer-size", "N", NULL, "metrics are lock-free counters"),
    GCSFUSE_VALUE("metrics-workers", "N", NULL, "metrics are lock-free counters"),
    GCSFUSE_VALUE("dummy-io-per-mb-latency", "DURATION", NULL, "fluxfs always transfers data"),
    GCSFUSE_VALUE("dummy-io-reader-latency", "DURATION", NULL, "fluxfs always transfers data"),
    GCSFUSE_VALUE("workload-insight-forward-merge-threshold-mb", "MB", NULL,
                  "no workload insight output"),
    GCSFUSE_VALUE("workload-insight-output-file", "PATH", NULL, "no workload insight output"),
    GCSFUSE_VALUE("log-rotate-backup-file-count", "N", NULL, "fluxfs reopens --log-file on "
                  "SIGHUP; rotate it with logrotate"),
    GCSFUSE_VALUE("log-rotate-max-file-size-mb", "MB", NULL, "fluxfs reopens --log-file on "
                  "SIGHUP; rotate it with logrotate"),
#undef GCSFUSE_FLAG
#undef GCSFUSE_VALUE

    /* libfuse options passed through, and mount/fstab keys with no meaning for fluxfs. */
    {"default-permissions", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"allow-root", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"auto-unmount", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"fsname", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, "NAME", NULL, NULL},
    {"subtype", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, "NAME", NULL, NULL},
    {"max-read", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, "N", NULL, NULL},
    {"nodev", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"nosuid", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"noexec", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"noatime", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    /* mount.fuse3 (type fuse.fluxfs) passes mount(8)'s defaults dev,suid as root: dropped, so
     * that every fluxfs mount is nosuid,nodev (libfuse's default), whichever type mounted it.
     * An object is no device node and no set-user-ID program. */
    {"dev", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"suid", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"exec", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"atime", 0, KIND_FUSE, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"rw", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"defaults", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"auto", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"noauto", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"user", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"nouser", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"users", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"owner", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"nofail", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    /* "_netdev": keys are looked up with '_' turned into '-'. */
    {"-netdev", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"relatime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"async", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"norelatime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"nodiratime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"diratime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"strictatime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"lazytime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"nolazytime", 0, KIND_IGNORED, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    {"sync", 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL,
     "files are uploaded when closed or fsync'd", NULL, NULL},
    {"dirsync", 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_HIDDEN, NULL,
     "directory changes are made in Cloud Storage before the call returns", NULL, "true"},
};

struct parse_state {
    struct fluxfs_options *opts;
    GPtrArray *fuse_args;       /* char *, owned */
    GPtrArray *positionals;     /* const char *, borrowed from argv */
    bool endpoint_given, anonymous_given, key_file_given, prefix_given;
    bool entry_timeout_given, attr_timeout_given, shutdown_grace_given;
    bool help, version;
    bool disk_cache_off;        /* --file-cache-max-size-mb 0 */
    bool write_blocks_given;    /* --write-global-max-blocks */
    bool write_buffer_given;    /* --write-buffer-size */
    long write_blocks;
    GPtrArray *warnings;        /* char *, owned: gcsfuse flags accepted without effect */
    const char *context;        /* prefix of errors and warnings ("config file F: ") or NULL */
    char *error;
};

/* ---- value parsers ---------------------------------------------------------------------- */

int options_parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < G_N_ELEMENTS(yes); i++) {
        if (g_ascii_strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (g_ascii_strcasecmp(text, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* Reads "123" or "1.25" (no sign, no exponent) at *p; advances *p. */
static int parse_decimal(const char **p, double *out)
{
    const char *s = *p;
    const char *start = s;
    double value = 0;
    bool digits = false;
    while (isdigit((unsigned char)*s)) {
        value = value * 10 + (*s - '0');
        s++;
        digits = true;
    }
    if (*s == '.') {
        s++;
        double scale = 0.1;
        while (isdigit((unsigned char)*s)) {
            value += (*s - '0') * scale;
            scale /= 10;
            s++;
            digits = true;
        }
    }
    if (!digits || s == start || !isfinite(value))
        return -EINVAL;
    *p = s;
    *out = value;
    return 0;
}

int options_parse_size(const char *text, size_t *out)
{
    static const struct {
        const char *suffix;
        double multiplier;
    } units[] = {
        {"", 1},          {"b", 1},
        {"k", 1024.0},    {"kb", 1024.0},    {"kib", 1024.0},
        {"m", 1048576.0}, {"mb", 1048576.0}, {"mib", 1048576.0},
        {"g", 1073741824.0}, {"gb", 1073741824.0}, {"gib", 1073741824.0},
        {"t", 1099511627776.0}, {"tb", 1099511627776.0}, {"tib", 1099511627776.0},
    };
    const char *p = text;
    double value;
    if (parse_decimal(&p, &value) < 0)
        return -EINVAL;
    for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
        if (g_ascii_strcasecmp(p, units[i].suffix) == 0) {
            double bytes = value * units[i].multiplier;
            /* 2^62: far beyond any memory size, safely below SIZE_MAX and int64 limits. */
            if (bytes > 4611686018427387904.0)
                return -EINVAL;
            *out = (size_t)llround(bytes);
            return 0;
        }
    }
    return -EINVAL;
}

int options_parse_duration(const char *text, bool allow_forever, double *out)
{
    static const struct {
        const char *unit;
        double seconds;
    } units[] = {
        /* Longest first so "ms" is not read as "m" followed by garbage. */
        {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3},
        {"s", 1},     {"m", 60},    {"h", 3600},         {"d", 86400},
    };
    if (allow_forever && (strcmp(text, "-1") == 0 || g_ascii_strcasecmp(text, "inf") == 0 ||
                          g_ascii_strcasecmp(text, "infinite") == 0 ||
                          g_ascii_strcasecmp(text, "forever") == 0)) {
        *out = FLUXFS_TTL_FOREVER;
        return 0;
    }
    const char *p = text;
    double total = 0;
    double value;
    if (parse_decimal(&p, &value) < 0)
        return -EINVAL;
    if (*p == '\0') { /* a bare number is seconds */
        total = value;
    } else {
        for (;;) {
            size_t matched = 0;
            double unit_seconds = 0;
            for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
                size_t len = strlen(units[i].unit);
                if (strncmp(p, units[i].unit, len) == 0 && len > matched) {
                    matched = len;
                    unit_seconds = units[i].seconds;
                }
            }
            if (matched == 0)
                return -EINVAL;
            total += value * unit_seconds;
            p += matched;
            if (*p == '\0')
                break;
            if (parse_decimal(&p, &value) < 0)
                return -EINVAL;
        }
    }
    if (!isfinite(total) || total > FLUXFS_TTL_FOREVER)
        return -EINVAL;
    *out = total;
    return 0;
}

int options_parse_mode(const char *text, mode_t *out)
{
    if (text[0] == '\0' || strlen(text) > 5)
        return -EINVAL;
    unsigned value = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '7')
            return -EINVAL;
        value = value * 8 + (unsigned)(*p - '0');
    }
    if (value > 07777)
        return -EINVAL;
    *out = (mode_t)value;
    return 0;
}

static int parse_int(const char *text, long min, long max, long *out)
{
    if (text[0] == '\0')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max)
        return -EINVAL;
    *out = value;
    return 0;
}

static bool is_ip_address_form(const char *name)
{
    int parts = 0;
    const char *p = name;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
        parts++;
        if (*p == '.')
            p++;
        else if (*p != '\0')
            return false;
    }
    return parts == 4;
}

int options_check_bucket_name(const char *name, const char **why)
{
    size_t len = strlen(name);
    bool has_dot = strchr(name, '.') != NULL;
    if (len < 3 || len > (has_dot ? 222u : 63u)) {
        *why = "must be 3 to 63 characters long (up to 222 with dots)";
        return -EINVAL;
    }
    for (const char *p = name; *p; p++) {
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '_' ||
              *p == '.')) {
            *why = "may contain only lowercase letters, digits, '-', '_' and '.'";
            return -EINVAL;
        }
    }
    if (!isalnum((unsigned char)name[0]) || !isalnum((unsigned char)name[len - 1])) {
        *why = "must start and end with a letter or digit";
        return -EINVAL;
    }
    size_t component = 0;
    for (const char *p = name; *p; p++) {
        if (*p == '.') {
            if (component == 0) {
                *why = "must not contain empty dot-separated parts";
                return -EINVAL;
            }
            component = 0;
        } else if (++component > 63) {
            *why = "each dot-separated part must be at most 63 characters";
            return -EINVAL;
        }
    }
    if (is_ip_address_form(name)) {
        *why = "must not look like an IP address";
        return -EINVAL;
    }
    if (g_str_has_prefix(name, "goog") || strstr(name, "google") || strstr(name, "g00gle")) {
        *why = "must not start with \"goog\" or contain \"google\"";
        return -EINVAL;
    }
    return 0;
}

char **options_split_list(const char *text)
{
    GPtrArray *items = g_ptr_array_new();
    GString *current = g_string_new(NULL);
    for (const char *p = text;; p++) {
        if (*p == '\\' && (p[1] == ',' || p[1] == '\\')) {
            g_string_append_c(current, p[1]);
            p++;
        } else if (*p == ',' || *p == '\0') {
            if (current->len > 0)
                g_ptr_array_add(items, g_strdup(current->str));
            g_string_truncate(current, 0);
            if (*p == '\0')
                break;
        } else {
            g_string_append_c(current, *p);
        }
    }
    g_string_free(current, TRUE);
    g_ptr_array_add(items, NULL);
    return (char **)g_ptr_array_free(items, FALSE);
}

/* ---- option application ----------------------------------------------------------------- */

static void *field_at(struct parse_state *st, const struct option_spec *spec)
{
    return (char *)st->opts + spec->offset;
}

static void set_string(char **field, const char *value)
{
    g_free(*field);
    *field = g_strdup(value);
}

/* "http://host:port[/]" or with a trailing "/storage/v1[/]" (gcsfuse's --custom-endpoint form);
 * a bare "host:port" gets "http://" like Google's libraries do for STORAGE_EMULATOR_HOST. */
static char *normalize_endpoint(const char *text, bool default_http)
{
    char *url;
    if (g_str_has_prefix(text, "http://") || g_str_has_prefix(text, "https://"))
        url = g_strdup(text);
    else if (default_http && text[0] != '\0' && !strstr(text, "://"))
        url = g_strconcat("http://", text, NULL);
    else
        return NULL;
    size_t host_start = (size_t)(strstr(url, "://") - url) + 3;
    size_t len = strlen(url);
    while (len > host_start && url[len - 1] == '/')
        url[--len] = '\0';
    if (g_str_has_suffix(url, "/storage/v1")) {
        len -= strlen("/storage/v1");
        url[len] = '\0';
    }
    if (len <= host_start || url[host_start] == '/') {
        g_free(url);
        return NULL;
    }
    return url;
}

/* Strips slashes at both ends and appends one; rejects empty, "." and ".." segments. */
static int normalize_prefix(const char *text, char **out, const char **why)
{
    while (*text == '/')
        text++;
    char *trimmed = g_strdup(text);
    size_t len = strlen(trimmed);
    while (len > 0 && trimmed[len - 1] == '/')
        trimmed[--len] = '\0';
    if (len == 0) {
        g_free(trimmed);
        *out = g_strdup("");
        return 0;
    }
    char **segments = g_strsplit(trimmed, "/", -1);
    int err = 0;
    for (char **s = segments; *s; s++) {
        if ((*s)[0] == '\0') {
            *why = "contains an empty segment (\"//\")";
            err = -EINVAL;
        } else if (strcmp(*s, ".") == 0 || strcmp(*s, "..") == 0) {
            *why = "contains a \".\" or \"..\" segment";
            err = -EINVAL;
        } else if (strlen(*s) > 255) {
            *why = "contains a segment longer than 255 bytes";
            err = -EINVAL;
        }
    }
    g_strfreev(segments);
    if (err == 0)
        *out = g_strconcat(trimmed, "/", NULL);
    g_free(trimmed);
    return err;
}

static int resolve_user(const char *text, uid_t *out)
{
    long number;
    if (strcmp(text, "-1") == 0) {
        *out = getuid();
        return 0;
    }
    if (parse_int(text, 0, UINT32_MAX - 1, &number) == 0) {
        *out = (uid_t)number;
        return 0;
    }
    struct passwd *pw = getpwnam(text);
    if (!pw)
        return -EINVAL;
    *out = pw->pw_uid;
    return 0;
}

static int resolve_group(const char *text, gid_t *out)
{
    long number;
    if (strcmp(text, "-1") == 0) {
        *out = getgid();
        return 0;
    }
    if (parse_int(text, 0, UINT32_MAX - 1, &number) == 0) {
        *out = (gid_t)number;
        return 0;
    }
    struct group *gr = getgrnam(text);
    if (!gr)
        return -EINVAL;
    *out = gr->gr_gid;
    return 0;
}

static char *absolute_path(const char *path)
{
    if (g_path_is_absolute(path))
        return g_strdup(path);
    char *cwd = g_get_current_dir();
    char *joined = g_build_filename(cwd, path, NULL);
    g_free(cwd);
    return joined;
}

static bool spec_takes_value(const struct option_spec *spec)
{
    switch (spec->kind) {
    case KIND_FLAG:
    case KIND_DEBUG:
    case KIND_IGNORED:
    case KIND_HELP:
    case KIND_VERSION:
        return false;
    case KIND_FUSE:
    case KIND_WARN:
    case KIND_COMPAT:
        return spec->metavar != NULL;
    default:
        return true;
    }
}

static void fail(struct parse_state *st, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void fail(struct parse_state *st, const char *fmt, ...)
{
    if (st->error)
        return; /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    st->error = st->context ? g_strconcat(st->context, text, NULL) : g_strdup(text);
    g_free(text);
}

static void warn(struct parse_state *st, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void warn(struct parse_state *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    char *line = st->context ? g_strconcat(st->context, text, NULL) : g_strdup(text);
    g_free(text);
    for (guint i = 0; i < st->warnings->len; i++) {
        if (strcmp(g_ptr_array_index(st->warnings, i), line) == 0) {
            g_free(line); /* one line per flag, however often it is given */
            return;
        }
    }
    g_ptr_array_add(st->warnings, line);
}

/* A gcsfuse switch's value: absent = true. */
static int flag_value(struct parse_state *st, const char *value, const char *shown, bool *on)
{
    *on = true;
    if (value && options_parse_bool(value, on) < 0) {
        fail(st, "option '%s': '%s' is not true or false", shown, value);
        return -EINVAL;
    }
    return 0;
}

static bool value_is_quiet(const struct option_spec *spec, const char *value)
{
    if (!spec->quiet)
        return false;
    char **quiet = g_strsplit(spec->quiet, "|", -1);
    bool match = false;
    for (char **q = quiet; *q && !match; q++) {
        bool a, b;
        if (options_parse_bool(*q, &a) == 0 && options_parse_bool(value, &b) == 0)
            match = a == b;
        else
            match = strcmp(*q, value) == 0;
    }
    g_strfreev(quiet);
    return match;
}

static int apply_warn(struct parse_state *st, const struct option_spec *spec, const char *value,
                      const char *shown)
{
    if (!spec->metavar) {
        bool on;
        if (flag_value(st, value, shown, &on) < 0)
            return -EINVAL;
        if (!value_is_quiet(spec, on ? "true" : "false"))
            warn(st, "%s=%s accepted for gcsfuse compatibility, no effect: %s", shown,
                 on ? "true" : "false", spec->help);
        return 0;
    }
    if (!value_is_quiet(spec, value))
        warn(st, "%s %s accepted for gcsfuse compatibility, no effect: %s", shown, value,
             spec->help);
    return 0;
}

/* gcsfuse's integer flags: a whole number >= min. */
static int compat_long(struct parse_state *st, const char *value, const char *shown, long min,
                       long *out)
{
    if (parse_int(value, min, LONG_MAX / 2, out) < 0) {
        fail(st, "option '%s': '%s' is not a whole number of at least %ld", shown, value, min);
        return -EINVAL;
    }
    return 0;
}

#define UNBOUNDED_SIZE ((size_t)1 << 62)
/* gcsfuse's stat cache entry, positive and negative together (its --stat-cache-capacity doc). */
#define GCSFUSE_STAT_ENTRY_BYTES 1688

/* gcsfuse flags mapped onto fluxfs settings, with gcsfuse's units and special values. */
static int apply_compat(struct parse_state *st, const struct option_spec *spec,
                        const char *value, const char *shown)
{
    struct fluxfs_options *opts = st->opts;
    const char *name = spec->name;
    long n;
    if (strcmp(name, "kernel-list-cache-ttl-secs") == 0) {
        if (parse_int(value, -1, 1000000000L, &n) < 0) {
            fail(st, "option '%s': '%s' is not a number of seconds (-1 = forever)", shown, value);
            return -EINVAL;
        }
        opts->kernel_list_ttl_s = n < 0 ? FLUXFS_TTL_FOREVER : (double)n;
    } else if (strcmp(name, "max-conns-per-host") == 0) {
        if (compat_long(st, value, shown, 0, &n) < 0)
            return -EINVAL;
        /* gcsfuse: 0 = no limit. fluxfs's engine needs a number: its highest cap. */
        if (n == 0 || n > 4096)
            opts->gcs.max_connections = 4096;
        else
            opts->gcs.max_connections = (int)n;
    } else if (strcmp(name, "http-client-timeout") == 0) {
        double seconds;
        if (options_parse_duration(value, false, &seconds) < 0) {
            fail(st, "option '%s': '%s' is not a duration (e.g. 30s, 2m; 0 = none)", shown, value);
            return -EINVAL;
        }
        /* gcsfuse: 0 = no timeout. A dead connection is still caught by --stall-timeout. */
        opts->gcs.request_deadline_s = seconds > 0 ? seconds : FLUXFS_TTL_FOREVER;
    } else if (strcmp(name, "file-cache-max-size-mb") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        st->disk_cache_off = n == 0;
        if (n != 0)
            opts->cache_size = n < 0 ? UNBOUNDED_SIZE : (size_t)n * MIB;
    } else if (strcmp(name, "stat-cache-max-size-mb") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        opts->max_cached_names = n < 0    ? UNBOUNDED_SIZE
                                 : n == 0 ? 1
                                          : MAX((size_t)n * MIB / GCSFUSE_STAT_ENTRY_BYTES, 1);
    } else if (strcmp(name, "stat-cache-capacity") == 0) {
        if (compat_long(st, value, shown, 0, &n) < 0)
            return -EINVAL;
        opts->max_cached_names = n > 0 ? (size_t)n : 1;
    } else if (strcmp(name, "max-retry-attempts") == 0) {
        if (compat_long(st, value, shown, 0, &n) < 0)
            return -EINVAL;
        /* gcsfuse: 0 = no limit; here the highest retry count, still bounded by the deadline. */
        opts->gcs.max_retries = n == 0 || n > 100 ? 100 : (int)n;
    } else if (strcmp(name, "experimental-metadata-prefetch-on-mount") == 0) {
        if (strcmp(value, "disabled") == 0) {
            opts->prefetch_metadata = false;
        } else if (strcmp(value, "sync") == 0 || strcmp(value, "async") == 0) {
            opts->prefetch_metadata = true;
        } else {
            fail(st, "option '%s': '%s' is not disabled, sync or async", shown, value);
            return -EINVAL;
        }
    } else if (strcmp(name, "enable-metadata-prefetch") == 0) {
        bool on;
        if (flag_value(st, value, shown, &on) < 0)
            return -EINVAL;
        opts->prefetch_metadata = on;
    } else if (strcmp(name, "write-block-size-mb") == 0) {
        if (compat_long(st, value, shown, 1, &n) < 0)
            return -EINVAL;
        if (n > 4096) {
            fail(st, "option '%s': %ld MiB is more than the 4096 MiB a part may have", shown, n);
            return -EINVAL;
        }
        opts->write_part_size = (size_t)n * MIB;
    } else if (strcmp(name, "write-global-max-blocks") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        st->write_blocks_given = true;
        st->write_blocks = n;
    } else if (strcmp(name, "write-max-blocks-per-file") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        opts->write_parts_in_flight = n < 0 || n > 1024 ? 1024 : MAX((int)n, 1);
    } else if (strcmp(name, "limit-ops-per-sec") == 0 ||
               strcmp(name, "limit-bytes-per-sec") == 0) {
        char *end = NULL;
        errno = 0;
        double rate = g_ascii_strtod(value, &end);
        if (errno != 0 || end == value || *end != '\0' || !isfinite(rate) || rate > 1e15) {
            fail(st, "option '%s': '%s' is not a number (-1 = no limit)", shown, value);
            return -EINVAL;
        }
        /* gcsfuse: any value that is not above 0 means no limit. */
        if (strcmp(name, "limit-ops-per-sec") == 0)
            opts->gcs.limit_ops_per_sec = rate > 0 ? rate : 0;
        else
            opts->gcs.limit_bytes_per_sec = rate > 0 ? rate : 0;
    } else if (strcmp(name, "client-protocol") == 0) {
        if (strcmp(value, "http2") == 0 || strcmp(value, "grpc") == 0) {
            warn(st, "%s %s accepted for gcsfuse compatibility: fluxfs speaks HTTP/1.1 to the "
                     "JSON and XML APIs", shown, value);
        } else if (strcmp(value, "http1") != 0) {
            fail(st, "option '%s': '%s' is not http1, http2 or grpc", shown, value);
            return -EINVAL;
        }
    }
    return 0;
}

/* shown: the option as the user wrote it, e.g. "--stat-ttl" or "-o stat_ttl". */
static int apply_option(struct parse_state *st, const struct option_spec *spec, bool negated,
                        const char *value, const char *shown)
{
    struct fluxfs_options *opts = st->opts;
    const char *why = NULL;

    if (negated && spec->kind != KIND_FLAG) {
        fail(st, "unknown option '%s'", shown);
        return -EINVAL;
    }
    bool flag_like = spec->kind == KIND_FLAG ||
                     ((spec->kind == KIND_WARN || spec->kind == KIND_COMPAT) && !spec->metavar);
    if (value && !spec_takes_value(spec) && !flag_like) {
        fail(st, "option '%s' takes no value", shown);
        return -EINVAL;
    }
    if ((!value || value[0] == '\0') && spec_takes_value(spec)) {
        fail(st, "option '%s' needs a value", shown);
        return -EINVAL;
    }

    switch (spec->kind) {
    case KIND_FLAG: {
        bool on = true;
        if (value && options_parse_bool(value, &on) < 0) {
            fail(st, "option '%s': '%s' is not true or false", shown, value);
            return -EINVAL;
        }
        *(bool *)field_at(st, spec) = negated ? !on : on;
        if (spec->offset == FIELD(gcs.anonymous))
            st->anonymous_given = true;
        return 0;
    }
    case KIND_STRING:
        set_string((char **)field_at(st, spec), value);
        return 0;
    case KIND_PATH: {
        char *path = absolute_path(value);
        struct stat info;
        const char *problem = NULL;
        bool want_dir = spec->offset == FIELD(temp_dir); /* the one directory-valued path */
        if (stat(path, &info) < 0)
            problem = g_strerror(errno);
        else if (!want_dir && S_ISDIR(info.st_mode))
            problem = "is a directory";
        else if (want_dir && !S_ISDIR(info.st_mode))
            problem = "is not a directory";
        if (problem) {
            fail(st, "option '%s': %s: %s", shown, value, problem);
            g_free(path);
            return -EINVAL;
        }
        g_free(*(char **)field_at(st, spec));
        *(char **)field_at(st, spec) = path;
        if (spec->offset == FIELD(key_file))
            st->key_file_given = true;
        return 0;
    }
    case KIND_NEW_PATH:
        g_free(*(char **)field_at(st, spec));
        *(char **)field_at(st, spec) = absolute_path(value);
        return 0;
    case KIND_ENDPOINT: {
        char *url = normalize_endpoint(value, false);
        if (!url) {
            fail(st, "option '%s': '%s' is not an http:// or https:// URL with a host", shown, value);
            return -EINVAL;
        }
        g_free(opts->endpoint);
        opts->endpoint = url;
        st->endpoint_given = true;
        return 0;
    }
    case KIND_PREFIX: {
        char *prefix = NULL;
        if (normalize_prefix(value, &prefix, &why) < 0) {
            fail(st, "option '%s': prefix '%s' %s", shown, value, why);
            return -EINVAL;
        }
        g_free(opts->prefix);
        opts->prefix = prefix;
        st->prefix_given = true;
        return 0;
    }
    case KIND_UID:
        if (resolve_user(value, (uid_t *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not a user id or name", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_GID:
        if (resolve_group(value, (gid_t *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not a group id or name", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_MODE:
        if (options_parse_mode(value, (mode_t *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not an octal mode (e.g. 0644)", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_TTL:
        if (options_parse_duration(value, true, (double *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not a duration (e.g. 30s, 1.5, 5m, -1)", shown, value);
            return -EINVAL;
        }
        if (spec->offset == FIELD(entry_timeout_s))
            st->entry_timeout_given = true;
        if (spec->offset == FIELD(attr_timeout_s))
            st->attr_timeout_given = true;
        if (spec->offset == FIELD(shutdown_grace_s))
            st->shutdown_grace_given = true;
        return 0;
    case KIND_TTL_SECONDS:
    case KIND_METADATA_TTL: {
        long seconds;
        if (parse_int(value, -1, 1000000000L, &seconds) < 0) {
            fail(st, "option '%s': '%s' is not a number of seconds (-1 = forever)", shown, value);
            return -EINVAL;
        }
        double ttl = seconds < 0 ? FLUXFS_TTL_FOREVER : (double)seconds;
        if (spec->kind == KIND_METADATA_TTL) {
            opts->stat_ttl_s = ttl;
            opts->type_ttl_s = ttl;
        } else {
            *(double *)field_at(st, spec) = ttl;
        }
        return 0;
    }
    case KIND_DURATION: {
        double seconds;
        if (options_parse_duration(value, false, &seconds) < 0 || seconds <= 0) {
            fail(st, "option '%s': '%s' is not a positive duration (e.g. 30s, 2m)", shown, value);
            return -EINVAL;
        }
        *(double *)field_at(st, spec) = seconds;
        return 0;
    }
    case KIND_SIZE:
    case KIND_SIZE_MIB: {
        size_t bytes;
        long mib;
        if (spec->kind == KIND_SIZE_MIB && parse_int(value, 1, 1 << 20, &mib) == 0) {
            bytes = (size_t)mib * MIB;
        } else if (options_parse_size(value, &bytes) < 0) {
            fail(st, "option '%s': '%s' is not a size (e.g. 512K, 64M, 1GiB)", shown, value);
            return -EINVAL;
        }
        if (bytes == 0 && spec->offset != FIELD(memory_cache_size) &&
            spec->offset != FIELD(write_buffer_size)) { /* 0 is documented for these two */
            fail(st, "option '%s': size must be greater than 0", shown);
            return -EINVAL;
        }
        *(size_t *)field_at(st, spec) = bytes;
        if (spec->offset == FIELD(write_buffer_size))
            st->write_buffer_given = true;
        return 0;
    }
    case KIND_INT:
    case KIND_RETRIES: {
        long number;
        if (parse_int(value, spec->min, spec->max, &number) < 0) {
            fail(st, "option '%s': '%s' is not a whole number from %d to %d", shown, value,
                 spec->min, spec->max);
            return -EINVAL;
        }
        if (spec->kind == KIND_RETRIES && number == 0)
            number = -1; /* the gcs config's "no retries" */
        *(int *)field_at(st, spec) = (int)number;
        return 0;
    }
    case KIND_LOG_LEVEL:
        if (flog_parse_level(value, (enum flog_level *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not one of error, warn, info, debug, trace", shown,
                 value);
            return -EINVAL;
        }
        return 0;
    case KIND_LOG_FORMAT:
        if (g_ascii_strcasecmp(value, "json") == 0) {
            opts->log_json = true;
        } else if (g_ascii_strcasecmp(value, "text") == 0) {
            opts->log_json = false;
        } else {
            fail(st, "option '%s': '%s' is not text or json", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_DEBUG:
        opts->foreground = true;
        opts->log_level = FLOG_DEBUG;
        return 0;
    case KIND_FUSE: {
        char *key = g_strdelimit(g_strdup(spec->name), "-", '_');
        g_ptr_array_add(st->fuse_args,
                        value ? g_strdup_printf("%s=%s", key, value) : g_strdup(key));
        g_free(key);
        return 0;
    }
    case KIND_IGNORED:
        return 0;
    case KIND_WARN:
        return apply_warn(st, spec, value, shown);
    case KIND_COMPAT:
        return apply_compat(st, spec, value, shown);
    case KIND_HELP:
        st->help = true;
        return 0;
    case KIND_VERSION:
        st->version = true;
        return 0;
    case KIND_CONFIG:
        return 0; /* read before the command line (read_config_file) */
    }
    return 0;
}

/* Looks up a name with dashes or underscores; a "no-" prefix negates a flag. */
static const struct option_spec *find_option(const char *name, bool *negated)
{
    char *key = g_strdelimit(g_strdup(name), "_", '-');
    const struct option_spec *found = NULL;
    *negated = false;
    for (size_t i = 0; i < G_N_ELEMENTS(option_table) && !found; i++) {
        if (strcmp(option_table[i].name, key) == 0)
            found = &option_table[i];
    }
    if (!found && g_str_has_prefix(key, "no-")) {
        for (size_t i = 0; i < G_N_ELEMENTS(option_table) && !found; i++) {
            if (option_table[i].kind == KIND_FLAG && strcmp(option_table[i].name, key + 3) == 0) {
                found = &option_table[i];
                *negated = true;
            }
        }
    }
    g_free(key);
    return found;
}

bool options_known(const char *name)
{
    bool negated;
    return find_option(name, &negated) != NULL;
}

static bool is_ignored_mount_key(const char *key)
{
    return g_str_has_prefix(key, "x-") || g_str_has_prefix(key, "comment=");
}

static void apply_setting(struct parse_state *st, const struct config_setting *setting,
                          const char *shown);
static int apply_list(struct parse_state *st, const char *list);

/* One item of an -o list: "key", "key=value", or a gcsfuse config key as the GKE CSI driver
 * passes it ("file-cache:max-size-mb:-1"), applied exactly as the config file's key. */
static int apply_list_item(struct parse_state *st, const char *item)
{
    if (is_ignored_mount_key(item))
        return 0;
    struct config_setting setting = {0};
    char *config_error = NULL;
    int form = config_option_setting(item, &setting, &config_error);
    if (form < 0) {
        fail(st, "%s", config_error);
        g_free(config_error);
        return -EINVAL;
    }
    if (form > 0) {
        char *shown = g_strdup_printf("-o %s", setting.key);
        for (char *c = shown; *c; c++)
            if (*c == '.')
                *c = ':';
        apply_setting(st, &setting, shown);
        g_free(shown);
        config_setting_clear(&setting);
        return st->error ? -EINVAL : 0;
    }
    const char *eq = strchr(item, '=');
    if (eq && eq - item == 1 && item[0] == 'o')
        return apply_list(st, eq + 1); /* "-o o=ro": gcsfuse's "--o ro" as an -o item */
    char *key = eq ? g_strndup(item, (size_t)(eq - item)) : g_strdup(item);
    char *shown = g_strdup_printf("-o %s", key);
    bool negated;
    const struct option_spec *spec = find_option(key, &negated);
    int err;
    if (!spec || spec->kind == KIND_HELP || spec->kind == KIND_VERSION) {
        fail(st, "unknown option '%s'", shown);
        err = -EINVAL;
    } else {
        err = apply_option(st, spec, negated, eq ? eq + 1 : NULL, shown);
    }
    g_free(shown);
    g_free(key);
    return err;
}

static int apply_list(struct parse_state *st, const char *list)
{
    char **items = options_split_list(list);
    int err = 0;
    for (char **item = items; *item && err == 0; item++)
        err = apply_list_item(st, *item);
    g_strfreev(items);
    return err;
}

/* "--name", "--name=value" or "--name value" at argv[*index]; advances *index past a value. */
static int apply_long(struct parse_state *st, int argc, char **argv, int *index)
{
    const char *arg = argv[*index] + 2;
    const char *eq = strchr(arg, '=');
    char *name = eq ? g_strndup(arg, (size_t)(eq - arg)) : g_strdup(arg);
    char *shown = g_strdup_printf("--%s", name);
    bool negated;
    const struct option_spec *spec = find_option(name, &negated);
    int err;
    if (strcmp(name, "o") == 0) { /* gcsfuse's "--o ro" */
        const char *list = eq ? eq + 1 : (*index + 1 < argc ? argv[++*index] : NULL);
        if (list)
            err = apply_list(st, list);
        else
            fail(st, "option '--o' needs a value");
        err = list ? err : -EINVAL;
    } else if (!spec || spec->kind == KIND_IGNORED) {
        fail(st, "unknown option '%s'", shown);
        err = -EINVAL;
    } else {
        const char *value = eq ? eq + 1 : NULL;
        if (!value && !negated && spec_takes_value(spec)) {
            if (*index + 1 >= argc) {
                fail(st, "option '%s' needs a value", shown);
                g_free(shown);
                g_free(name);
                return -EINVAL;
            }
            value = argv[++*index];
        }
        err = apply_option(st, spec, negated, value, shown);
    }
    g_free(shown);
    g_free(name);
    return err;
}

/* "-f", "-fd", "-o LIST", "-oLIST" at argv[*index]. */
static int apply_short(struct parse_state *st, int argc, char **argv, int *index)
{
    const char *arg = argv[*index];
    for (const char *p = arg + 1; *p; p++) {
        if (*p == 'o') {
            const char *list = p[1] ? p + 1 : NULL;
            if (!list) {
                if (*index + 1 >= argc) {
                    fail(st, "option '-o' needs a value");
                    return -EINVAL;
                }
                list = argv[++*index];
            }
            return apply_list(st, list);
        }
        const struct option_spec *spec = NULL;
        char letter = *p == 'v' ? 'V' : *p; /* gcsfuse's -v is the version too */
        for (size_t i = 0; i < G_N_ELEMENTS(option_table) && !spec; i++) {
            if (option_table[i].short_name == letter)
                spec = &option_table[i];
        }
        if (!spec) {
            fail(st, "unknown option '-%c'", *p);
            return -EINVAL;
        }
        char shown[3] = {'-', *p, '\0'};
        int err = apply_option(st, spec, false, NULL, shown);
        if (err < 0)
            return err;
    }
    return 0;
}

/* "BUCKET", "BUCKET/PREFIX" or "gs://BUCKET[/PREFIX]". */
static int apply_bucket_argument(struct parse_state *st, const char *text)
{
    struct fluxfs_options *opts = st->opts;
    const char *why = NULL;
    if (g_str_has_prefix(text, "gs://"))
        text += strlen("gs://");
    const char *slash = strchr(text, '/');
    char *bucket = slash ? g_strndup(text, (size_t)(slash - text)) : g_strdup(text);
    if (bucket[0] == '\0') {
        fail(st, "missing bucket name in '%s'", text);
        g_free(bucket);
        return -EINVAL;
    }
    if (options_check_bucket_name(bucket, &why) < 0) {
        fail(st, "invalid bucket name '%s': %s", bucket, why);
        g_free(bucket);
        return -EINVAL;
    }
    g_free(opts->bucket);
    opts->bucket = bucket;
    if (slash) {
        char *prefix = NULL;
        if (normalize_prefix(slash + 1, &prefix, &why) < 0) {
            fail(st, "invalid prefix in '%s': %s", text, why);
            return -EINVAL;
        }
        if (prefix[0] != '\0' && st->prefix_given) {
            fail(st, "both BUCKET/PREFIX ('%s') and --only-dir given; use one", text);
            g_free(prefix);
            return -EINVAL;
        }
        if (prefix[0] != '\0') {
            g_free(opts->prefix);
            opts->prefix = prefix;
        } else {
            g_free(prefix);
        }
    }
    return 0;
}

/* "/dev/fd/N": a /dev/fuse descriptor inherited from the caller, which mounted it with fd=N
 * (the GKE Cloud Storage FUSE CSI driver's hand-off). libfuse serves it as is. 1 when text is
 * such a path (checked: an open descriptor of /dev/fuse), 0 when it is not, -EINVAL. */
static int apply_fd_mountpoint(struct parse_state *st, const char *text)
{
    if (!g_str_has_prefix(text, "/dev/fd/"))
        return 0;
    const char *digits = text + strlen("/dev/fd/");
    char *end = NULL;
    errno = 0;
    long fd = strtol(digits, &end, 10);
    if (!*digits || *end || errno || fd < 0 || fd > INT_MAX)
        return 0;
    struct stat info;
    if (fd <= STDERR_FILENO) {
        fail(st, "mountpoint '%s': descriptors 0-2 become /dev/null when fluxfs detaches; pass "
             "the /dev/fuse descriptor as 3 or above", text);
        return -EINVAL;
    }
    if (fstat((int)fd, &info) < 0) {
        fail(st, "mountpoint '%s': descriptor %ld is not open (%s): the caller must pass the "
             "/dev/fuse descriptor it mounted with fd=%ld", text, fd, g_strerror(errno), fd);
        return -EINVAL;
    }
    if (!S_ISCHR(info.st_mode) || major(info.st_rdev) != 10 || minor(info.st_rdev) != 229) {
        fail(st, "mountpoint '%s': descriptor %ld is not /dev/fuse", text, fd);
        return -EINVAL;
    }
    g_free(st->opts->mountpoint);
    st->opts->mountpoint = g_strdup(text);
    return 1;
}

static int apply_mountpoint_argument(struct parse_state *st, const char *text)
{
    struct fluxfs_options *opts = st->opts;
    int fd_rc = apply_fd_mountpoint(st, text);
    if (fd_rc != 0)
        return fd_rc < 0 ? fd_rc : 0;
    struct stat info;
    if (stat(text, &info) < 0) {
        int err = errno;
        if (err == ENOTCONN) {
            /* A mount whose daemon is gone: main removes it when it is fluxfs's (names it
             * with --no-unmount-stale). realpath cannot walk it: made absolute by its text. */
            g_free(opts->mountpoint);
            opts->mountpoint = g_canonicalize_filename(text, NULL);
            opts->mountpoint_unreachable = true;
            return 0;
        }
        fail(st, "mountpoint '%s': %s", text, g_strerror(err));
        return -EINVAL;
    }
    if (!S_ISDIR(info.st_mode)) {
        fail(st, "mountpoint '%s' is not a directory", text);
        return -EINVAL;
    }
    char *resolved = realpath(text, NULL);
    if (!resolved) {
        fail(st, "mountpoint '%s': %s", text, g_strerror(errno));
        return -EINVAL;
    }
    g_free(opts->mountpoint);
    opts->mountpoint = g_strdup(resolved);
    free(resolved);
    return 0;
}

/* Cross-option rules and derived fields, once everything is read. */
static int finish_options(struct parse_state *st)
{
    struct fluxfs_options *opts = st->opts;
    const char *emulator_host = getenv("STORAGE_EMULATOR_HOST");
    bool emulator_env = emulator_host && emulator_host[0] != '\0';

    if (st->positionals->len < 2) {
        fail(st, st->positionals->len == 0 ? "missing BUCKET[/PREFIX] and MOUNTPOINT"
                                           : "missing MOUNTPOINT");
        return -EINVAL;
    }
    if (st->positionals->len > 2) {
        fail(st, "unexpected argument '%s' (expected BUCKET[/PREFIX] MOUNTPOINT)",
             (const char *)g_ptr_array_index(st->positionals, 2));
        return -EINVAL;
    }
    if (apply_bucket_argument(st, g_ptr_array_index(st->positionals, 0)) < 0 ||
        apply_mountpoint_argument(st, g_ptr_array_index(st->positionals, 1)) < 0)
        return -EINVAL;

    /* STORAGE_EMULATOR_HOST implies anonymous access only while it also picks the endpoint. */
    if (emulator_env && !st->anonymous_given && (st->endpoint_given || st->key_file_given))
        opts->gcs.anonymous = false;
    if (opts->gcs.anonymous && st->key_file_given) {
        fail(st, "--anonymous and --key-file conflict: choose one");
        return -EINVAL;
    }
    if (!st->entry_timeout_given)
        opts->entry_timeout_s = opts->stat_ttl_s;
    if (!st->attr_timeout_given)
        opts->attr_timeout_s = opts->stat_ttl_s;
    opts->shutdown_grace_default = !st->shutdown_grace_given;
    if (opts->readahead_max < opts->readahead_chunk)
        opts->readahead_max = opts->readahead_chunk;
    if (opts->memory_limit < 2 * opts->readahead_chunk) {
        fail(st, "--memory-limit (%zu bytes) must be at least twice --readahead-chunk "
                 "(%zu bytes)", opts->memory_limit, opts->readahead_chunk);
        return -EINVAL;
    }

    if (opts->write_part_size < 5 * MIB || opts->write_part_size % (256 * 1024) != 0) {
        fail(st, "--write-part-size must be at least 5M and a multiple of 256K");
        return -EINVAL;
    }
    if (opts->write_buffer_size != 0 && opts->write_buffer_size < opts->write_part_size) {
        fail(st, "--write-buffer-size must be 0 or at least --write-part-size");
        return -EINVAL;
    }
    if (opts->upload_mode && !g_strv_contains((const char *const[]){"auto", "multipart",
                                                                    "composite", "resumable",
                                                                    NULL}, opts->upload_mode)) {
        fail(st, "--upload-mode must be auto, multipart, composite or resumable");
        return -EINVAL;
    }
    if (opts->chmod_policy && !g_strv_contains((const char *const[]){"ignore", "refuse", NULL},
                                               opts->chmod_policy)) {
        fail(st, "--chmod-policy must be ignore or refuse");
        return -EINVAL;
    }

    if (opts->compose_mode && g_ascii_strcasecmp(opts->compose_mode, "auto") == 0) {
        opts->compose = true;
        opts->compose_auto = true;
    } else if (opts->compose_mode) {
        if (options_parse_bool(opts->compose_mode, &opts->compose) < 0) {
            fail(st, "--compose must be auto, on or off");
            return -EINVAL;
        }
        opts->compose_auto = false;
    }
    if (opts->debug_fuse) {
        opts->foreground = true; /* libfuse writes its trace to stderr */
        g_ptr_array_add(st->fuse_args, g_strdup("debug"));
    }
    if (st->disk_cache_off) {
        g_free(opts->cache_dir);
        opts->cache_dir = NULL;
    }
    if (st->write_blocks_given) {
        /* gcsfuse's write blocks are the parts of a streaming upload. */
        if (st->write_blocks < 0)
            opts->write_buffer_size = UNBOUNDED_SIZE;
        else if ((size_t)st->write_blocks > UNBOUNDED_SIZE / opts->write_part_size)
            opts->write_buffer_size = UNBOUNDED_SIZE;
        else
            opts->write_buffer_size = (size_t)st->write_blocks * opts->write_part_size;
    }
    /* --memory-limit is one figure for every buffer and cache (issue 22, item 11): the write
     * buffers take their share (a third by default, whole parts, at most 512 MiB; 0 parts =
     * staging files), read buffers and the memory cache the rest. Only gcsfuse's unbounded
     * write-global-max-blocks (-1) leaves the write buffers outside it. */
    if (!st->write_buffer_given && !st->write_blocks_given) {
        size_t share = MIN(opts->memory_limit / 3, (size_t)512 * MIB);
        opts->write_buffer_size = share / opts->write_part_size * opts->write_part_size;
    }
    if (opts->write_buffer_size >= UNBOUNDED_SIZE) {
        opts->read_budget = opts->memory_limit;
    } else if (opts->memory_limit < opts->write_buffer_size ||
               opts->memory_limit - opts->write_buffer_size < 2 * opts->readahead_chunk) {
        fail(st, "--write-buffer-size (%zu bytes) must leave at least twice --readahead-chunk "
                 "(%zu bytes) of --memory-limit (%zu bytes) for reads",
             opts->write_buffer_size, opts->readahead_chunk, opts->memory_limit);
        return -EINVAL;
    } else {
        opts->read_budget = opts->memory_limit - opts->write_buffer_size;
    }
    /* The memory cache lives inside the read budget and leaves at least half to read buffers. */
    if (opts->memory_cache_size > opts->read_budget / 2)
        opts->memory_cache_size = opts->read_budget / 2;

    if (st->fuse_args->len > 0) {
        g_ptr_array_add(st->fuse_args, NULL);
        g_strfreev(opts->fuse_args);
        opts->fuse_args = (char **)g_ptr_array_free(st->fuse_args, FALSE);
        st->fuse_args = NULL;
    }

    /* The gcs config points into the strings this struct owns. */
    opts->gcs.endpoint = opts->endpoint;
    opts->gcs.bucket = opts->bucket;
    opts->gcs.key_file = opts->key_file;
    opts->gcs.token_url = opts->token_url;
    /* gcsfuse: "a url for getting an access token when the key-file is absent". */
    opts->gcs.token_url_is_source = opts->token_url && !st->key_file_given &&
                                    !opts->gcs.anonymous;
    opts->gcs.billing_project = opts->billing_project;
    if (opts->app_name && opts->app_name[0] != '\0') {
        g_free(opts->user_agent);
        opts->user_agent = g_strdup_printf("fluxfs/%s %s", FLUXFS_VERSION, opts->app_name);
        opts->gcs.user_agent = opts->user_agent;
    }
    if (st->warnings->len > 0) {
        g_ptr_array_add(st->warnings, NULL);
        g_strfreev(opts->warnings);
        opts->warnings = (char **)g_ptr_array_free(st->warnings, FALSE);
        st->warnings = NULL;
    }
    /* TLS trust as OpenSSL and Go programs take it from the environment; --ca-file first. */
    const char *cert_file = getenv("SSL_CERT_FILE");
    const char *cert_dir = getenv("SSL_CERT_DIR");
    if (!opts->ca_file && cert_file && cert_file[0] != '\0')
        opts->ca_file = g_strdup(cert_file);
    if (!opts->ca_dir && cert_dir && cert_dir[0] != '\0')
        opts->ca_dir = g_strdup(cert_dir);
    opts->gcs.ca_file = opts->ca_file;
    opts->gcs.ca_dir = opts->ca_dir;
    opts->gcs.log_requests = opts->debug_gcs;
    if (!opts->prometheus_address || opts->prometheus_address[0] == '\0') {
        g_free(opts->prometheus_address);
        opts->prometheus_address = g_strdup("127.0.0.1");
    }
    return 0;
}

/* ---- --config-file ------------------------------------------------------------------------ */

static int apply_list(struct parse_state *st, const char *list);

/* One gcsfuse config key, as its flag (config_file.c maps gcsfuse's keys to gcsfuse's flags),
 * from the config file or an -o option; shown names it in errors and warnings. */
static void apply_setting(struct parse_state *st, const struct config_setting *setting,
                          const char *shown)
{
    if (st->error)
        return;
    /* No setting holds a line break (a multi-line YAML scalar): refused before it can reach a
     * message or a path. */
    for (const char *c = setting->value; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            fail(st, "key '%s': the value holds a control character (a line break?)",
                 setting->key);
            return;
        }
    }
    if (strcmp(setting->flag, "o") == 0) {
        apply_list(st, setting->value);
        return;
    }
    bool negated;
    const struct option_spec *spec = find_option(setting->flag, &negated);
    if (!spec) { /* every flag of the key table is in the option table (unit-tested) */
        fail(st, "key '%s' has no option", setting->key);
        return;
    }
    apply_option(st, spec, false, setting->value, shown);
}

static void apply_config_setting(const struct config_setting *setting, void *user)
{
    apply_setting(user, setting, setting->key);
}

/* The last --config-file (or -o config_file=FILE) on the command line, or NULL (g_free). */
static char *config_file_argument(int argc, char **argv)
{
    char *found = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0)
            break;
        const char *value = NULL;
        if (g_str_has_prefix(arg, "--config-file") || g_str_has_prefix(arg, "--config_file")) {
            const char *rest = arg + strlen("--config-file");
            if (*rest == '=')
                value = rest + 1;
            else if (*rest == '\0' && i + 1 < argc)
                value = argv[++i];
            if (value) {
                g_free(found);
                found = g_strdup(value);
            }
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--o") == 0 ||
                   (arg[0] == '-' && arg[1] == 'o' && arg[2] != '\0')) {
            const char *list = arg[1] == 'o' && arg[2] ? arg + 2 : (i + 1 < argc ? argv[++i] : "");
            char **items = options_split_list(list);
            for (char **item = items; *item; item++) {
                if (g_str_has_prefix(*item, "config_file=") ||
                    g_str_has_prefix(*item, "config-file=")) {
                    g_free(found);
                    found = g_strdup(*item + strlen("config-file="));
                }
            }
            g_strfreev(items);
        }
    }
    return found;
}

enum options_parse_result fluxfs_options_parse(struct fluxfs_options *opts, int argc, char **argv,
                                               char **error)
{
    struct parse_state st = {
        .opts = opts,
        .fuse_args = g_ptr_array_new_with_free_func(g_free),
        .positionals = g_ptr_array_new(),
        .warnings = g_ptr_array_new_with_free_func(g_free),
    };
    /* gcsfuse's --config-file first, so that the command line overrides it. */
    char *config_path = config_file_argument(argc, argv);
    if (config_path) {
        char *context = g_strdup_printf("config file %s: ", config_path);
        char *config_error = NULL;
        st.context = context;
        if (config_file_read(config_path, apply_config_setting, &st, (void **)&st.warnings,
                             &config_error) < 0) {
            g_free(st.error);
            st.error = config_error; /* a malformed file: its error comes first */
        }
        st.context = NULL;
        g_free(context);
    }
    bool only_positionals = false;
    for (int i = 1; i < argc && !st.error; i++) {
        const char *arg = argv[i];
        if (only_positionals || arg[0] != '-' || arg[1] == '\0')
            g_ptr_array_add(st.positionals, (void *)arg);
        else if (strcmp(arg, "--") == 0)
            only_positionals = true;
        else if (arg[1] == '-')
            apply_long(&st, argc, argv, &i);
        else
            apply_short(&st, argc, argv, &i);
    }

    enum options_parse_result result = OPTIONS_PARSE_MOUNT;
    if (!st.error && st.help)
        result = OPTIONS_PARSE_HELP;
    else if (!st.error && st.version)
        result = OPTIONS_PARSE_VERSION;
    else if (!st.error) {
        finish_options(&st);
        if (st.error && config_path) {
            /* The checks of the whole set: its values may come from the file. */
            char *whole = g_strdup_printf("%s (options from the command line and config file "
                                          "%s)", st.error, config_path);
            g_free(st.error);
            st.error = whole;
        }
    }
    g_free(config_path);

    if (st.error) {
        *error = st.error;
        result = OPTIONS_PARSE_ERROR;
    }
    if (st.fuse_args)
        g_ptr_array_free(st.fuse_args, TRUE);
    g_ptr_array_free(st.positionals, TRUE);
    if (st.warnings)
        g_ptr_array_free(st.warnings, TRUE);
    return result;
}

/* ---- help ---------------------------------------------------------------------------------- */

#define HELP_INDENT 32
#define HELP_WIDTH 80

/* Prints text word-wrapped into the help column; the cursor is at column `column`. */
static void print_wrapped(FILE *out, int column, const char *text)
{
    if (column > HELP_INDENT) {
        fputc('\n', out);
        column = 0;
    }
    fprintf(out, "%*s", HELP_INDENT - column, "");
    column = HELP_INDENT;
    char **words = g_strsplit(text, " ", -1);
    for (char **w = words; *w; w++) {
        int len = (int)strlen(*w);
        if (column > HELP_INDENT && column + 1 + len > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_INDENT, "");
            column = HELP_INDENT;
        }
        if (column > HELP_INDENT) {
            fputc(' ', out);
            column++;
        }
        fputs(*w, out);
        column += len;
    }
    fputc('\n', out);
    g_strfreev(words);
}

static void print_option_help(FILE *out, const struct option_spec *spec)
{
    GString *left = g_string_new("  ");
    if (spec->short_name)
        g_string_append_printf(left, "-%c, ", spec->short_name);
    else
        g_string_append(left, "    ");
    g_string_append_printf(left, "--%s", spec->name);
    if (spec->metavar && spec_takes_value(spec))
        g_string_append_printf(left, " %s", spec->metavar);
    g_string_append_c(left, ' ');
    fputs(left->str, out);

    GString *text = g_string_new(spec->help);
    bool first_alias = true;
    for (size_t i = 0; i < G_N_ELEMENTS(option_table); i++) {
        const char *target = option_table[i].alias_of;
        size_t name_len = strlen(spec->name);
        if (target && strncmp(target, spec->name, name_len) == 0 &&
            (target[name_len] == '\0' || target[name_len] == ' ')) {
            g_string_append_printf(text, "%s--%s", first_alias ? " (gcsfuse: " : ", ",
                                   option_table[i].name);
            first_alias = false;
        }
    }
    if (!first_alias)
        g_string_append_c(text, ')');
    print_wrapped(out, (int)left->len, text->str);
    g_string_free(text, TRUE);
    g_string_free(left, TRUE);
}

void fluxfs_options_print_help(FILE *out, const char *program)
{
    fprintf(out,
            "Usage: %s [OPTIONS] BUCKET[/PREFIX] MOUNTPOINT\n"
            "Mounts a Cloud Storage bucket (or a prefix of it) as a directory.\n"
            "\n"
            "Every --long-option can also be given as -o long_option[=VALUE] (dashes or\n"
            "underscores), so fstab and mount -t fuse.fluxfs work; boolean options accept\n"
            "--no-NAME and --NAME=false. fstab-only keys (rw, auto, noauto, user, nofail,\n"
            "_netdev, x-systemd.*) are ignored. The gcsfuse spellings shown below are\n"
            "accepted too, as is gcsfuse's form \"BUCKET MOUNTPOINT --only-dir PREFIX\".\n",
            program);
    for (int topic = TOPIC_MOUNTING; topic < TOPIC_HIDDEN; topic++) {
        fprintf(out, "\n%s:\n", topic_titles[topic]);
        if (topic == TOPIC_MOUNTING) {
            fputs("  -o OPT[,OPT...] ", out);
            print_wrapped(out, 18,
                          "any long option as key[=value], comma-separated (\\, for a literal "
                          "comma); also ro, allow_other, default_permissions, fsname=, subtype=");
        }
        for (size_t i = 0; i < G_N_ELEMENTS(option_table); i++) {
            if ((int)option_table[i].topic == topic && option_table[i].help)
                print_option_help(out, &option_table[i]);
        }
    }
    fprintf(out,
            "\nEnvironment:\n"
            "  STORAGE_EMULATOR_HOST         use this endpoint with anonymous access (as\n"
            "                                Google's client libraries do), unless --endpoint\n"
            "                                is given\n"
            "  GOOGLE_APPLICATION_CREDENTIALS\n"
            "                                service-account or authorized_user key file\n"
            "\nExit status: 0 mounted (or unmounted cleanly with -f), 1 the mount failed,\n"
            "2 bad command line.\n");
}

/* ---- struct lifecycle (include/fluxfs/options.h) -------------------------------------------- */

void fluxfs_options_init(struct fluxfs_options *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->prefix = g_strdup("");
    opts->endpoint = g_strdup(DEFAULT_ENDPOINT);
    const char *emulator_host = getenv("STORAGE_EMULATOR_HOST");
    if (emulator_host && emulator_host[0] != '\0') {
        char *url = normalize_endpoint(emulator_host, true);
        if (url) {
            g_free(opts->endpoint);
            opts->endpoint = url;
            opts->gcs.anonymous = true;
        }
    }
    opts->implicit_dirs = true;
    opts->skip_open = true;
    opts->uid = getuid();
    opts->gid = getgid();
    opts->file_mode = 0644;
    opts->dir_mode = 0755;
    opts->stat_ttl_s = 60;
    opts->type_ttl_s = 60;
    opts->negative_ttl_s = 5;
    opts->list_ttl_s = 60;
    opts->entry_timeout_s = 60;
    opts->attr_timeout_s = 60;
    opts->memory_limit = 1536 * MIB;
    opts->small_file_threshold = 4 * MIB;
    opts->readahead_chunk = 8 * MIB;
    opts->readahead_max = 64 * MIB;
    opts->random_read_min = 1 * MIB;
    opts->list_parallelism = 32;
    opts->write_part_size = 16 * MIB;
    opts->write_small_threshold = 16 * MIB;
    opts->write_parts_in_flight = 16;
    opts->write_max_parts_in_flight = 64;
    opts->write_buffer_size = 512 * MIB;
    opts->rename_dir_limit = 1000;
    opts->upload_cleanup_age_s = 3600;
    opts->shutdown_grace_s = 30;
    opts->unmount_stale = true;
    opts->cache_size = 10240 * MIB;
    opts->memory_cache_size = 256 * MIB;
    opts->compose = true;
    opts->compose_auto = true;
    opts->prefetch_lookahead = 1024;
    opts->prefetch_workers = 8;
    opts->compose_max_objects = 32;
    opts->compose_object_max_size = 2 * MIB;
    opts->compose_batch_max_bytes = 32 * MIB;
    opts->batch_misses_min = 4;
    opts->log_level = FLOG_INFO;
    opts->gcs.endpoint = opts->endpoint;
}

void fluxfs_options_clear(struct fluxfs_options *opts)
{
    if (!opts)
        return;
    g_free(opts->bucket);
    g_free(opts->prefix);
    g_free(opts->mountpoint);
    g_free(opts->endpoint);
    g_free(opts->key_file);
    g_free(opts->token_url);
    g_free(opts->ca_file);
    g_free(opts->ca_dir);
    g_free(opts->log_file);
    g_free(opts->prometheus_address);
    g_free(opts->cache_dir);
    g_free(opts->compose_mode);
    g_free(opts->temp_dir);
    g_free(opts->upload_mode);
    g_free(opts->chmod_policy);
    g_free(opts->billing_project);
    g_free(opts->app_name);
    g_free(opts->user_agent);
    g_strfreev(opts->warnings);
    g_strfreev(opts->fuse_args);
    memset(opts, 0, sizeof(*opts));
}
