/* The option table (see option_table.h): every option of the fluxfs executable, its help text,
 * its default and its gcsfuse config-file key. --help, the man page's option sections
 * (scripts/gen-man), fluxfs_options_init and the config-file reader all read it from here. */
#include "option_table.h"

#define DEFAULT_ENDPOINT "https://storage.googleapis.com"

const char *const option_topic_titles[] = {
    [TOPIC_MOUNTING] = "Mounting",
    [TOPIC_CREDENTIALS] = "Credentials and endpoint",
    [TOPIC_PRESENTATION] = "Presentation (owners, modes, directories)",
    [TOPIC_CACHING] = "Metadata caching (durations: 1.5, 30s, 500ms, 5m, 1h; -1 = forever)",
    [TOPIC_PERFORMANCE] = "Performance and requests (sizes: 512K, 64M, 1GiB)",
    [TOPIC_LOGGING] = "Logging",
    [TOPIC_GCSFUSE] = "gcsfuse compatibility (accepted; what fluxfs does with them)",
};

const struct option_spec option_table[] = {
    /* Mounting */
    {"foreground", 'f', KIND_FLAG, FIELD(foreground), 0, 0, TOPIC_MOUNTING, NULL,
     "stay in the foreground", NULL,
     .config = "foreground", .def_shown = "detach once the mount is live"},
    {"debug", 'd', KIND_DEBUG, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL,
     "foreground with debug logging", NULL},
    {"read-only", 0, KIND_FLAG, FIELD(read_only), 0, 0, TOPIC_MOUNTING, NULL,
     "mount read-only (-o ro)", NULL},
    {"allow-other", 0, KIND_FLAG, FIELD(allow_other), 0, 0, TOPIC_MOUNTING, NULL,
     "let other users access the mount (-o allow_other; needs user_allow_other in "
     "/etc/fuse.conf unless root)", NULL},
    {"only-dir", 0, KIND_PREFIX, NO_FIELD, 0, 0, TOPIC_MOUNTING, "PREFIX",
     "mount only this prefix of the bucket (same as BUCKET/PREFIX)", NULL,
     .config = "only-dir"},
    {"debug-fuse", 0, KIND_FLAG, FIELD(debug_fuse), 0, 0, TOPIC_MOUNTING, NULL,
     "print every FUSE request (libfuse's debug output; implies --foreground)", NULL,
     .config = "debug.fuse"},
    {"shutdown-grace", 0, KIND_TTL, FIELD(shutdown_grace_s), 0, 0, TOPIC_MOUNTING, "DURATION",
     "on SIGTERM/SIGINT (or an unmount by someone else), serve files open for writing until "
     "they are closed, at most this long, then commit them as fsync would (5s in a "
     "container, to fit its 10 s stop; -1 = no limit)", NULL, .def = "30s"},
    {"unmount-stale", 0, KIND_FLAG, FIELD(unmount_stale), 0, 0, TOPIC_MOUNTING, NULL,
     "when MOUNTPOINT is a fluxfs mount whose daemon died (\"transport endpoint is not "
     "connected\"), unmount it lazily and mount again (the systemd unit does); a live mount "
     "or another filesystem's is left alone", NULL},
    {"help", 'h', KIND_HELP, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL, "print this help and exit", NULL},
    {"version", 'V', KIND_VERSION, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL,
     "print the version and exit (also -v, as gcsfuse)", NULL},
    {"config-file", 0, KIND_CONFIG, NO_FIELD, 0, 0, TOPIC_MOUNTING, "FILE",
     "read gcsfuse's YAML configuration file (its keys and nesting, e.g. \"metadata-cache: "
     "{ttl-secs: 60}\"); options on the command line override it; unknown keys are warned "
     "about", NULL},
    {"ro", 0, KIND_FLAG, FIELD(read_only), 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    /* -o LIST (--help prints its line by hand): here for gcsfuse's config key. */
    {"o", 0, KIND_OPTION_LIST, NO_FIELD, 0, 0, TOPIC_HIDDEN, "OPT[,OPT...]", NULL, NULL,
     .config = "file-system.fuse-options"},
    {"skip-open", 0, KIND_FLAG, FIELD(skip_open), 0, 0, TOPIC_MOUNTING, NULL,
     "on read-only mounts, let the kernel open and close files with no request to the daemon "
     "(no OPEN, FLUSH, RELEASE; a replaced object is a new inode; --no-skip-open keeps "
     "the requests)", NULL, .def = "on"},

    /* Credentials */
    {"endpoint", 0, KIND_ENDPOINT, NO_FIELD, 0, 0, TOPIC_CREDENTIALS, "URL",
     "Cloud Storage endpoint; STORAGE_EMULATOR_HOST, when set, replaces the default and "
     "implies --anonymous", NULL, .def = DEFAULT_ENDPOINT},
    {"anonymous", 0, KIND_FLAG, FIELD(gcs.anonymous), 0, 0, TOPIC_CREDENTIALS, NULL,
     "send no credentials (public buckets, emulators)", NULL},
    {"key-file", 0, KIND_PATH, FIELD(key_file), 0, 0, TOPIC_CREDENTIALS, "PATH",
     "service-account or authorized_user JSON key", NULL,
     .config = "gcs-auth.key-file",
     .def_shown = "Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, the gcloud "
                  "ADC file, the metadata server"},
    {"token-url", 0, KIND_STRING, FIELD(token_url), 0, 0, TOPIC_CREDENTIALS, "URL",
     "without --key-file: get access tokens from this URL (GET, OAuth token JSON reply, as "
     "gcsfuse does); with --key-file: the key's token endpoint instead of its token_uri", NULL,
     .config = "gcs-auth.token-url"},
    {"billing-project", 0, KIND_STRING, FIELD(billing_project), 0, 0, TOPIC_CREDENTIALS,
     "PROJECT", "bill requests to this project (Requester Pays buckets: userProject on every "
     "request)", NULL,
     .config = "gcs-connection.billing-project"},
    {"app-name", 0, KIND_STRING, FIELD(app_name), 0, 0, TOPIC_CREDENTIALS, "NAME",
     "added to the User-Agent of every request", NULL,
     .config = "app-name"},
    {"ca-file", 0, KIND_PATH, FIELD(ca_file), 0, 0, TOPIC_CREDENTIALS, "FILE",
     "trust the certificate authorities in this PEM file instead of the system's bundle "
     "($SSL_CERT_DIR replaces the CA directory); "
     "certificates that do not verify are always refused", NULL,
     .def_shown = "$SSL_CERT_FILE when set"},
    {"custom-endpoint", 0, KIND_ENDPOINT, NO_FIELD, 0, 0, TOPIC_HIDDEN, "URL", NULL, "endpoint",
     .config = "gcs-connection.custom-endpoint"},
    {"anonymous-access", 0, KIND_FLAG, FIELD(gcs.anonymous), 0, 0, TOPIC_HIDDEN, NULL, NULL,
     "anonymous",
     .config = "gcs-auth.anonymous-access"},

    /* Presentation */
    {"uid", 0, KIND_UID, FIELD(uid), 0, 0, TOPIC_PRESENTATION, "UID",
     "owner of every file and directory, number or name", NULL,
     .config = "file-system.uid", .def = "-1", .def_shown = "the mounting user"},
    {"gid", 0, KIND_GID, FIELD(gid), 0, 0, TOPIC_PRESENTATION, "GID",
     "group of every file and directory, number or name", NULL,
     .config = "file-system.gid", .def = "-1", .def_shown = "the mounting user's group"},
    {"file-mode", 0, KIND_MODE, FIELD(file_mode), 0, 0, TOPIC_PRESENTATION, "MODE",
     "permission bits of files, octal", NULL,
     .config = "file-system.file-mode", .def = "0644"},
    {"dir-mode", 0, KIND_MODE, FIELD(dir_mode), 0, 0, TOPIC_PRESENTATION, "MODE",
     "permission bits of directories, octal", NULL,
     .config = "file-system.dir-mode", .def = "0755"},
    {"implicit-dirs", 0, KIND_FLAG, FIELD(implicit_dirs), 0, 0, TOPIC_PRESENTATION, NULL,
     "show prefixes without a placeholder object \"dir/\" as directories "
     "(--no-implicit-dirs turns it off)", NULL,
     .config = "implicit-dirs", .def = "on"},

    /* Caching */
    {"stat-ttl", 0, KIND_TTL, FIELD(stat_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long object metadata (size, generation) is trusted, from a listing too: bounds how "
     "soon a replaced file is seen by open/stat; 0: every open and stat by path "
     "asks Cloud Storage (reads of an open file do not)", NULL, .def = "60s"},
    {"type-ttl", 0, KIND_TTL, FIELD(type_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long \"file or directory\" knowledge of a name is trusted", NULL, .def = "60s"},
    {"negative-ttl", 0, KIND_TTL, FIELD(negative_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long \"no such name\" is remembered", NULL, .def = "5s"},
    {"list-ttl", 0, KIND_TTL, FIELD(list_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long a directory listing is reused by readdir; its entries answer "
     "lookups only within --stat-ttl/--type-ttl", NULL, .def = "60s"},
    {"entry-timeout", 0, KIND_TTL, FIELD(entry_timeout_s), 0, 0, TOPIC_CACHING, "DURATION",
     "kernel name cache timeout", NULL, .def_shown = "the stat TTL"},
    {"attr-timeout", 0, KIND_TTL, FIELD(attr_timeout_s), 0, 0, TOPIC_CACHING, "DURATION",
     "kernel attribute cache timeout", NULL, .def_shown = "the stat TTL"},
    {"prefetch-metadata", 0, KIND_FLAG, FIELD(prefetch_metadata), 0, 0, TOPIC_CACHING, NULL,
     "list the whole mounted prefix at mount time to warm the metadata cache", NULL},
    {"stat-cache-ttl", 0, KIND_TTL, FIELD(stat_ttl_s), 0, 0, TOPIC_HIDDEN, "DURATION", NULL,
     "stat-ttl",
     .config = "metadata-cache.deprecated-stat-cache-ttl"},
    {"type-cache-ttl", 0, KIND_TTL, FIELD(type_ttl_s), 0, 0, TOPIC_HIDDEN, "DURATION", NULL,
     "type-ttl",
     .config = "metadata-cache.deprecated-type-cache-ttl"},
    {"metadata-cache-ttl-secs", 0, KIND_METADATA_TTL, NO_FIELD, 0, 0, TOPIC_HIDDEN, "SECONDS",
     NULL, "stat-ttl and --type-ttl",
     .config = "metadata-cache.ttl-secs"},
    {"metadata-cache-negative-ttl-secs", 0, KIND_TTL_SECONDS, FIELD(negative_ttl_s), 0, 0,
     TOPIC_HIDDEN, "SECONDS", NULL, "negative-ttl",
     .config = "metadata-cache.negative-ttl-secs"},
    {"kernel-list-cache-ttl-secs", 0, KIND_COMPAT, FIELD(kernel_list_ttl_s), 0, 0,
     TOPIC_CACHING, "SECONDS", "how long the kernel may keep a directory's entries it read "
     "(readdir) and serve ls without asking fluxfs; 0 = ask every time, -1 = until "
     "invalidated (gcsfuse's meaning and units)", NULL,
     .config = "file-system.kernel-list-cache-ttl-secs", .def = "0"},

    /* Performance */
    {"max-connections", 0, KIND_INT, FIELD(gcs.max_connections), 0, 4096, TOPIC_PERFORMANCE, "N",
     "cap on connections to Cloud Storage", NULL, .def = "64"},
    {"read-ahead-kb", 0, KIND_INT, FIELD(kernel_readahead_kb), 1, 1 << 20, TOPIC_PERFORMANCE,
     "KB", "the kernel's readahead for the mount (its /sys/class/bdi read_ahead_kb; root "
     "only, else the kernel's default stays; the kernel caps it at 4096)",
     NULL, .def_shown = "1024"},
    {"list-parallelism", 0, KIND_INT, FIELD(list_parallelism), 1, 256, TOPIC_PERFORMANCE, "N",
     "concurrent list requests for one large directory", NULL, .def = "32"},
    {"memory-limit", 0, KIND_SIZE, FIELD(memory_limit), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "one budget for the daemon's buffers and caches: read buffers, the memory cache and "
     "(unless --write-buffer-size is given) a third of it, at most 512M, for write buffers", NULL,
     .def = "1536M"},
    {"small-file-threshold", 0, KIND_SIZE, FIELD(small_file_threshold), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "objects up to this size are fetched whole when first opened",
     NULL, .def = "4M"},
    {"readahead-chunk", 0, KIND_SIZE, FIELD(readahead_chunk), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "size of one ranged GET of sequential readahead", NULL, .def = "8M"},
    {"readahead-max", 0, KIND_SIZE, FIELD(readahead_max), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "largest readahead window per open file", NULL, .def = "64M"},
    {"random-read-min", 0, KIND_SIZE, FIELD(random_read_min), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "smallest GET for random access", NULL, .def = "1M"},
    {"temp-dir", 0, KIND_PATH, FIELD(temp_dir), 0, 0, TOPIC_PERFORMANCE, "DIR",
     "staging files (edits of existing objects, files that seek back after parts were sent)", NULL,
     .config = "file-system.temp-dir", .def_shown = "$TMPDIR or /tmp"},
    {"write-part-size", 0, KIND_SIZE, FIELD(write_part_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "part of a streaming upload, sent while the file is still written", NULL, .def = "16M"},
    {"write-small-threshold", 0, KIND_SIZE, FIELD(write_small_threshold), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "files up to this size upload in one request at close", NULL,
     .def = "16M"},
    {"write-parts-in-flight", 0, KIND_INT, FIELD(write_parts_in_flight), 1, 1024,
     TOPIC_PERFORMANCE, "N", "upload parts in flight per file", NULL, .def = "16"},
    {"write-max-parts-in-flight", 0, KIND_INT, FIELD(write_max_parts_in_flight), 1, 4096,
     TOPIC_PERFORMANCE, "N", "upload parts in flight for all files together",
     NULL, .def = "64"},
    {"write-buffer-size", 0, KIND_SIZE, FIELD(write_buffer_size), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "memory for the parts of new files being written, all files together, taken "
     "from --memory-limit (0 = every file through a staging file under --temp-dir)", NULL,
     .def_shown = "a third of --memory-limit in whole parts, at most 512M"},
    {"upload-mode", 0, KIND_STRING, FIELD(upload_mode), 0, 0, TOPIC_PERFORMANCE, "MODE",
     "auto (XML multipart, composite where missing), multipart, composite or resumable", NULL,
     .def = "auto"},
    {"rename-dir-limit", 0, KIND_INT, FIELD(rename_dir_limit), 0, 10000000, TOPIC_PERFORMANCE,
     "N", "most objects a directory rename copies; more gives EXDEV (renames of "
     "directories are not atomic)", NULL,
     .config = "file-system.rename-dir-limit", .def = "1000"},
    {"chmod-policy", 0, KIND_STRING, FIELD(chmod_policy), 0, 0, TOPIC_PRESENTATION, "POLICY",
     "ignore (chmod/chown succeed and change nothing) or refuse (EPERM)", NULL, .def = "ignore"},
    {"upload-cleanup-age", 0, KIND_TTL, FIELD(upload_cleanup_age_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "at mount, temporary upload objects older than this (left by a crashed daemon) "
     "are removed; 0 also aborts every multipart upload under the prefix", NULL, .def = "1h"},
    {"cache-dir", 0, KIND_NEW_PATH, FIELD(cache_dir), 0, 0, TOPIC_PERFORMANCE, "DIR",
     "keep a disk content cache here, by object name and generation, reused after a "
     "remount: small objects, and large ones once read through the mount (gcsfuse's file "
     "cache; any read order; kept when every byte was read and the CRC32C matches)", NULL,
     .config = "cache-dir", .def_shown = "memory only"},
    {"cache-size", 0, KIND_SIZE, FIELD(cache_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "cap of the disk content cache", NULL, .def = "10G"},
    {"memory-cache-size", 0, KIND_SIZE, FIELD(memory_cache_size), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "cap of the in-memory content cache, inside --memory-limit (0 = none)", NULL,
     .def = "256M"},
    {"compose", 0, KIND_STRING, FIELD(compose_mode), 0, 0, TOPIC_PERFORMANCE,
     "auto|on|off", "compose-batched prefetch of small objects (auto: on unless the "
     "bucket's retention policy, default event-based hold or unreadable settings make "
     "temporaries undeletable; off: plain GETs)", NULL, .def = "auto"},
    {"prefetch-lookahead", 0, KIND_INT, FIELD(prefetch_lookahead), 1, 1000000,
     TOPIC_PERFORMANCE, "N", "files of each hint list fetched ahead of its reader "
     "(fetched and not opened yet: at most 3/4 of the content cache at "
     "their average size, shared among the lists)", NULL, .def = "1024"},
    {"prefetch-workers", 0, KIND_INT, FIELD(prefetch_workers), 1, 256, TOPIC_PERFORMANCE, "N",
     "prefetch batches fetched at once (compose, GET, delete)", NULL, .def = "8"},
    {"compose-max-objects", 0, KIND_INT, FIELD(compose_max_objects), 2, 32, TOPIC_PERFORMANCE,
     "N", "objects per compose batch (32 is the most Cloud Storage allows)", NULL, .def = "32"},
    {"compose-object-max-size", 0, KIND_SIZE, FIELD(compose_object_max_size), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "objects up to this size are compose-batched",
     NULL, .def = "2M"},
    {"compose-batch-max-bytes", 0, KIND_SIZE, FIELD(compose_batch_max_bytes), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "cap on one composite object", NULL, .def = "32M"},
    {"batch-misses", 0, KIND_INT, FIELD(batch_misses_us), 0, 1000000, TOPIC_PERFORMANCE, "US",
     "gather concurrent small-file misses for up to US microseconds and fetch them with one "
     "compose (0 = off)", NULL, .def = "0"},
    {"batch-misses-min", 0, KIND_INT, FIELD(batch_misses_min), 2, 32, TOPIC_PERFORMANCE, "N",
     "fewest concurrent misses worth a compose (fewer are plain GETs)", NULL, .def = "4"},
    {"max-retries", 0, KIND_RETRIES, FIELD(gcs.max_retries), 0, 100, TOPIC_PERFORMANCE, "N",
     "retries of a failed request (408/429/5xx, resets, stalls); 0 = none", NULL, .def = "6"},
    {"request-deadline", 0, KIND_DURATION, FIELD(gcs.request_deadline_s), 0, 0,
     TOPIC_PERFORMANCE, "DURATION", "total time for one call including retries",
     NULL, .def = "120s"},
    {"stall-timeout", 0, KIND_DURATION, FIELD(gcs.stall_timeout_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "a body with no bytes for this long is retried", NULL, .def = "30s"},
    {"connect-timeout", 0, KIND_DURATION, FIELD(gcs.connect_timeout_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "TCP/TLS connect timeout", NULL, .def = "10s"},
    {"max-conns-per-host", 0, KIND_COMPAT, FIELD(gcs.max_connections), 0, 4096, TOPIC_HIDDEN,
     "N", NULL, "max-connections",
     .config = "gcs-connection.max-conns-per-host"},
    {"sequential-read-size-mb", 0, KIND_SIZE_MIB, FIELD(readahead_chunk), 0, 0, TOPIC_HIDDEN,
     "MB", NULL, "readahead-chunk",
     .config = "gcs-connection.sequential-read-size-mb"},
    {"http-client-timeout", 0, KIND_COMPAT, FIELD(gcs.request_deadline_s), 0, 0, TOPIC_HIDDEN,
     "DURATION", NULL, "request-deadline",
     .config = "gcs-connection.http-client-timeout"},

    /* Logging */
    {"log-level", 0, KIND_LOG_LEVEL, FIELD(log_level), 0, 0, TOPIC_LOGGING, "LEVEL",
     "error, warn, info, debug or trace", NULL, .def = "info"},
    {"log-format", 0, KIND_LOG_FORMAT, FIELD(log_json), 0, 0, TOPIC_LOGGING, "FORMAT",
     "text or json", NULL,
     .config = "logging.format", .def = "text"},
    {"log-file", 0, KIND_NEW_PATH, FIELD(log_file), 0, 0, TOPIC_LOGGING, "PATH",
     "append logs to this file", NULL,
     .config = "logging.file-path", .def_shown = "stderr; syslog once detached"},
    {"log-severity", 0, KIND_LOG_LEVEL, FIELD(log_level), 0, 0, TOPIC_HIDDEN, "LEVEL", NULL,
     "log-level",
     .config = "logging.severity"},
    {"debug-gcs", 0, KIND_FLAG, FIELD(debug_gcs), 0, 0, TOPIC_LOGGING, NULL,
     "log one line per Cloud Storage request at info (gcsfuse's --debug_gcs; --log-level "
     "trace logs them too)", NULL,
     .config = "debug.gcs"},
    {"prometheus-port", 0, KIND_INT, FIELD(prometheus_port), 0, 65535, TOPIC_LOGGING, "PORT",
     "serve Prometheus metrics at http://ADDRESS:PORT/metrics (0 = off)", NULL,
     .config = "metrics.prometheus-port", .def = "0"},
    {"prometheus-address", 0, KIND_STRING, FIELD(prometheus_address), 0, 0, TOPIC_LOGGING,
     "ADDRESS", "address the metrics listener binds", NULL, .def = "127.0.0.1"},

    /* gcsfuse v3 flags (cfg/params.yaml) that fluxfs maps onto its own settings. Their help
     * text is what fluxfs does with them (--help lists them under "gcsfuse compatibility"). */
#define GCSFUSE_MAP(name, config_key, metavar, what, ...)                                          \
    {name, 0, KIND_COMPAT, NO_FIELD, 0, 0, TOPIC_GCSFUSE, metavar, what, NULL, NULL,               \
     .config = config_key, __VA_ARGS__}
    GCSFUSE_MAP("file-cache-max-size-mb", "file-cache.max-size-mb",
                "MB", "--cache-size in MiB; -1 = no cap, 0 = no disk "
                "cache"),
    GCSFUSE_MAP("stat-cache-max-size-mb", "metadata-cache.stat-cache-max-size-mb",
                "MB", "bounds the metadata cache at MB MiB of ~1,700-"
                "byte entries; -1 = no bound, 0 = one entry"),
    GCSFUSE_MAP("stat-cache-capacity", "metadata-cache.deprecated-stat-cache-capacity",
                "N", "bounds the metadata cache at N names"),
    GCSFUSE_MAP("max-retry-attempts", "gcs-retries.max-retry-attempts",
                "N", "--max-retries N; 0 = no limit but --request-deadline"),
    GCSFUSE_MAP("experimental-metadata-prefetch-on-mount", "metadata-cache.experimental-metadata-prefetch-on-mount",
                "MODE", "disabled, or sync/async = "
                "--prefetch-metadata"),
    GCSFUSE_MAP("enable-metadata-prefetch", NULL, NULL, "--prefetch-metadata"),
    GCSFUSE_MAP("write-block-size-mb", "write.block-size-mb",
                "MB", "--write-part-size in MiB (at least 5)"),
    GCSFUSE_MAP("write-global-max-blocks", "write.global-max-blocks",
                "N", "--write-buffer-size = N parts; 0 = every file "
                "through a staging file, -1 = no cap"),
    GCSFUSE_MAP("write-max-blocks-per-file", "write.max-blocks-per-file",
                "N", "--write-parts-in-flight N; -1 = 1024"),
    GCSFUSE_MAP("limit-ops-per-sec", "gcs-connection.limit-ops-per-sec",
                "N", "at most N Cloud Storage calls start per second, "
                "all together (retries belong to their call); calls over the rate wait in order; "
                "bursts of N/10; -1 = no limit", .def = "-1"),
    GCSFUSE_MAP("limit-bytes-per-sec", "gcs-connection.limit-bytes-per-sec",
                "N", "reply bytes are received from Cloud Storage at "
                "most N per second, all transfers together (reads, listings; uploads are not "
                "limited); -1 = no limit", .def = "-1"),
    GCSFUSE_MAP("client-protocol", "gcs-connection.client-protocol",
                "PROTOCOL", "http1 (what fluxfs speaks); http2 and grpc are "
                "accepted with a warning"),
#undef GCSFUSE_MAP

    /* gcsfuse v3 flags with no meaning for fluxfs: accepted with one warning line (none when the
     * value given is what fluxfs does anyway). The text says why. */
#define GCSFUSE_FLAG(name, config_key, quiet, why)                                                 \
    {name, 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_GCSFUSE, NULL, why, NULL, quiet,                    \
     .config = config_key}
#define GCSFUSE_VALUE(name, config_key, metavar, quiet, why)                                       \
    {name, 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_GCSFUSE, metavar, why, NULL, quiet,                 \
     .config = config_key}
    GCSFUSE_FLAG("enable-hns", "enable-hns",
                 "false", "fluxfs uses the flat object namespace on every bucket "
                 "(folders are prefixes)"),
    GCSFUSE_FLAG("ignore-interrupts", "file-system.ignore-interrupts",
                 NULL, "fluxfs completes every request except a directory "
                 "listing whose caller was interrupted"),
    GCSFUSE_FLAG("enable-streaming-writes", "write.enable-streaming-writes",
                 "true", "fluxfs always streams new files in parts; "
                 "--write-buffer-size 0 stages them on disk instead"),
    GCSFUSE_FLAG("create-empty-file", "write.create-empty-file",
                 "false", "fluxfs creates a new object when the file is "
                 "closed (or its first part is sent), never an empty placeholder"),
    GCSFUSE_FLAG("enable-nonexistent-type-cache", "metadata-cache.enable-nonexistent-type-cache",
                 NULL, "fluxfs always remembers absent names "
                 "for --negative-ttl (gcsfuse: --metadata-cache-negative-ttl-secs)"),
    GCSFUSE_FLAG("reuse-token-from-url", "gcs-auth.reuse-token-from-url",
                 "true", "fluxfs reuses a token until shortly before "
                 "it expires"),
    GCSFUSE_FLAG("enable-buffered-read", "read.enable-buffered-read",
                 "true", "fluxfs always reads ahead into memory "
                 "buffers (--readahead-chunk, --readahead-max, --memory-limit)"),
    GCSFUSE_FLAG("enable-read-stall-retry", "gcs-retries.read-stall.enable",
                 "true", "fluxfs retries a body with no bytes for "
                 "--stall-timeout"),
    GCSFUSE_FLAG("enable-google-lib-auth", "enable-google-lib-auth",
                 "true", "fluxfs finds credentials in the order "
                 "Google's libraries use"),
    GCSFUSE_FLAG("enable-http-dns-cache", "gcs-connection.enable-http-dns-cache",
                 "true", "libcurl caches name lookups"),
    GCSFUSE_FLAG("enable-atomic-rename-object", "enable-atomic-rename-object",
                 "false", "renames are copy + delete (no HNS "
                 "atomic rename)"),
    GCSFUSE_FLAG("enable-new-reader", "enable-new-reader", NULL, "fluxfs has one reader"),
    GCSFUSE_FLAG("enable-unsupported-path-support", "enable-unsupported-path-support",
                 NULL, "fluxfs hides object names that are "
                 "not valid paths"),
    GCSFUSE_FLAG("enable-empty-managed-folders", "list.enable-empty-managed-folders",
                 "false", "managed folders are not listed"),
    GCSFUSE_FLAG("enable-rapid-appends", "write.enable-rapid-appends",
                 "true", "no Rapid storage appends"),
    GCSFUSE_FLAG("finalize-file-for-rapid", "write.finalize-file-for-rapid",
                 "false", "no Rapid storage appends"),
    GCSFUSE_FLAG("precondition-errors", "file-system.precondition-errors",
                 "true", "fluxfs writes with generation preconditions "
                 "and reports a lost race as ESTALE"),
    GCSFUSE_FLAG("disable-parallel-dirops", "file-system.disable-parallel-dirops",
                 "false", "lookups and listings always run in "
                 "parallel"),
    GCSFUSE_FLAG("experimental-enable-dentry-cache", "file-system.experimental-enable-dentry-cache",
                 NULL, "the kernel name cache follows "
                 "--entry-timeout"),
    GCSFUSE_FLAG("experimental-enable-readdirplus", "file-system.experimental-enable-readdirplus",
                 NULL, "fluxfs always answers readdirplus"),
    GCSFUSE_FLAG("o-direct", "file-system.o-direct",
                 "false", "reads and writes use the page cache"),
    GCSFUSE_FLAG("enable-kernel-reader", "file-system.enable-kernel-reader",
                 "false", "fluxfs reads with its own parallel "
                 "readahead (--readahead-chunk, --readahead-max)"),
    GCSFUSE_VALUE("fuse-max-request-size-kb", "file-system.fuse-max-request-size-kb",
                  "KB", "0", "the kernel's FUSE request size is "
                  "used"),
    GCSFUSE_FLAG("experimental-o-direct", "file-system.experimental-o-direct",
                 "false", "reads and writes use the page cache"),
    GCSFUSE_FLAG("experimental-enable-json-read", "gcs-connection.experimental-enable-json-read",
                 NULL, "fluxfs reads with JSON API media "
                 "downloads"),
    GCSFUSE_FLAG("file-cache-cache-file-for-range-read", "file-cache.cache-file-for-range-read",
                 NULL, "the disk cache keeps a large "
                 "object once all of it was read, in any order"),
    GCSFUSE_FLAG("file-cache-enable-parallel-downloads", "file-cache.enable-parallel-downloads",
                 NULL, "large reads are parallel "
                 "readahead GETs (--readahead-chunk, --readahead-max)"),
    GCSFUSE_FLAG("file-cache-enable-crc", "file-cache.enable-crc",
                 NULL, "whole-object reads are checked against the "
                 "object's CRC32C"),
    GCSFUSE_FLAG("file-cache-enable-o-direct", "file-cache.enable-o-direct",
                 "false", "the disk cache uses the page cache"),
    GCSFUSE_FLAG("file-cache-experimental-parallel-downloads-default-on", "file-cache.experimental-parallel-downloads-default-on",
                 NULL,
                 "large reads are parallel readahead GETs"),
    GCSFUSE_FLAG("file-cache-experimental-enable-chunk-cache", "file-cache.experimental-enable-chunk-cache",
                 NULL, "no chunk cache mode"),
    GCSFUSE_FLAG("file-cache-experimental-enable-block-cache", "file-cache.experimental-enable-block-cache",
                 NULL, "no block cache mode"),
    GCSFUSE_FLAG("disable-autoconfig", "disable-autoconfig",
                 "true", "fluxfs does not tune itself by machine type"),
    GCSFUSE_FLAG("enable-cloud-profiler", "cloud-profiler.enabled", "false", "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-cpu", "cloud-profiler.cpu", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-heap", "cloud-profiler.heap", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-allocated-heap", "cloud-profiler.allocated-heap",
                 NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-goroutines", "cloud-profiler.goroutines",
                 NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-mutex", "cloud-profiler.mutex", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("enable-grpc-metrics", "metrics.enable-grpc-metrics", "false", "no gRPC"),
    GCSFUSE_FLAG("metrics-use-new-names", "metrics.use-new-names",
                 NULL, "/metrics uses gcsfuse's metric names"),
    GCSFUSE_FLAG("enable-dummy-io", "dummy-io.enable", "false", "fluxfs always transfers data"),
    GCSFUSE_FLAG("visualize-workload-insight", "workload-insight.visualize",
                 "false", "no workload insight output"),
    GCSFUSE_FLAG("log-rotate-compress", "logging.log-rotate.compress",
                 NULL, "fluxfs reopens --log-file on SIGHUP; rotate it "
                 "with logrotate"),
    GCSFUSE_FLAG("debug-http", NULL, "false", "--log-level trace logs every request"),
    GCSFUSE_FLAG("debug-fs", NULL, "false", "gcsfuse: unused"),
    GCSFUSE_FLAG("debug-fuse-errors", NULL, NULL, "gcsfuse: unused; errors are logged at warn"),
    GCSFUSE_FLAG("debug-invariants", "debug.exit-on-invariant-violation",
                 "false", "no invariant checker"),
    GCSFUSE_FLAG("debug-mutex", "debug.log-mutex", "false", "no mutex timing"),
    GCSFUSE_VALUE("profile", "profile",
                  "NAME", NULL, "fluxfs's defaults serve training, serving and "
                  "checkpointing; set options explicitly"),
    GCSFUSE_VALUE("machine-type", "machine-type",
                  "TYPE", NULL, "fluxfs does not tune itself by machine type"),
    GCSFUSE_VALUE("max-idle-conns-per-host", "gcs-connection.max-idle-conns-per-host",
                  "N", NULL, "idle connections are kept up to "
                  "--max-connections"),
    GCSFUSE_VALUE("max-retry-sleep", "gcs-retries.max-retry-sleep",
                  "DURATION", NULL, "backoff is exponential with full "
                  "jitter, bounded by --request-deadline"),
    GCSFUSE_VALUE("retry-multiplier", "gcs-retries.multiplier",
                  "X", NULL, "backoff is exponential with full jitter"),
    GCSFUSE_VALUE("max-retry-duration", NULL, "DURATION", "0|0s", "gcsfuse: unused; see "
                  "--request-deadline"),
    GCSFUSE_VALUE("chunk-transfer-timeout-secs", "gcs-retries.chunk-transfer-timeout-secs",
                  "SECONDS", NULL, "an upload part with no "
                  "progress for --stall-timeout is retried"),
    GCSFUSE_VALUE("read-stall-initial-req-timeout", "gcs-retries.read-stall.initial-req-timeout",
                  "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-max-req-timeout", "gcs-retries.read-stall.max-req-timeout",
                  "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-min-req-timeout", "gcs-retries.read-stall.min-req-timeout",
                  "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-req-increase-rate", "gcs-retries.read-stall.req-increase-rate",
                  "X", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-req-target-percentile", "gcs-retries.read-stall.req-target-percentile",
                  "X", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-block-size-mb", "read.block-size-mb", "MB", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("read-global-max-blocks", "read.global-max-blocks",
                  "N", NULL, "readahead memory is bounded by "
                  "--memory-limit"),
    GCSFUSE_VALUE("read-max-blocks-per-handle", "read.max-blocks-per-handle",
                  "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("read-min-blocks-per-handle", "read.min-blocks-per-handle",
                  "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("read-start-blocks-per-handle", "read.start-blocks-per-handle",
                  "N", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("read-random-seek-threshold", "read.random-seek-threshold",
                  "N", NULL, "fluxfs detects random access "
                  "itself (--random-read-min)"),
    GCSFUSE_VALUE("read-inactive-stream-timeout", "read.inactive-stream-timeout",
                  "DURATION", NULL, "fluxfs uses ranged GETs "
                  "and keeps no idle streams"),
    GCSFUSE_VALUE("file-cache-download-chunk-size-mb", "file-cache.download-chunk-size-mb",
                  "MB", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("file-cache-parallel-downloads-per-file", "file-cache.parallel-downloads-per-file",
                  "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("file-cache-max-parallel-downloads", "file-cache.max-parallel-downloads",
                  "N", NULL, "see --max-connections"),
    GCSFUSE_VALUE("file-cache-write-buffer-size", "file-cache.write-buffer-size",
                  "BYTES", NULL, "no effect"),
    GCSFUSE_VALUE("file-cache-include-regex", "file-cache.include-regex",
                  "REGEX", "", "every object may be cached"),
    GCSFUSE_VALUE("file-cache-exclude-regex", "file-cache.exclude-regex",
                  "REGEX", "", "every object may be cached"),
    GCSFUSE_VALUE("type-cache-max-size-mb", "metadata-cache.type-cache-max-size-mb",
                  "MB", NULL, "types share the metadata cache "
                  "(--stat-cache-max-size-mb)"),
    GCSFUSE_VALUE("congestion-threshold", "file-system.congestion-threshold",
                  "N", "0", "the kernel's default is used"),
    GCSFUSE_VALUE("max-background", "file-system.max-background",
                  "N", "0", "the kernel's default is used"),
    GCSFUSE_VALUE("max-read-ahead-kb", "file-system.max-read-ahead-kb",
                  "KB", "0", "set read_ahead_kb in /sys/class/bdi"),
    GCSFUSE_VALUE("unused-mrd-cache-size", "file-system.unused-mrd-cache-size",
                  "N", NULL, "no Rapid storage readers"),
    GCSFUSE_VALUE("experimental-grpc-conn-pool-size", "gcs-connection.grpc-conn-pool-size",
                  "N", NULL, "no gRPC"),
    GCSFUSE_VALUE("experimental-local-socket-address", "gcs-connection.experimental-local-socket-address",
                  "ADDRESS", "", "connections use the "
                  "default route"),
    GCSFUSE_VALUE("experimental-tracing-mode", "monitoring.experimental-tracing-mode",
                  "MODE", "", "no tracing export (see "
                  "--debug-gcs)"),
    GCSFUSE_VALUE("experimental-tracing-project-id", "monitoring.experimental-tracing-project-id",
                  "PROJECT", "", "no tracing export"),
    GCSFUSE_VALUE("experimental-tracing-sampling-ratio", "monitoring.experimental-tracing-sampling-ratio",
                  "X", "0", "no tracing export"),
    GCSFUSE_VALUE("trace-sampling-ratio", NULL, "X", "0", "no tracing export"),
    GCSFUSE_VALUE("cloud-profiler-label", "cloud-profiler.label",
                  "LABEL", NULL, "no Cloud Profiler"),
    GCSFUSE_VALUE("cloud-metrics-export-interval-secs", "metrics.cloud-metrics-export-interval-secs",
                  "SECONDS", "0", "no Cloud Monitoring "
                  "export; use --prometheus-port"),
    GCSFUSE_VALUE("stackdriver-export-interval", "metrics.stackdriver-export-interval",
                  "DURATION", "0|0s", "no Cloud Monitoring "
                  "export; use --prometheus-port"),
    GCSFUSE_VALUE("metrics-buffer-size", "metrics.buffer-size",
                  "N", NULL, "metrics are lock-free counters"),
    GCSFUSE_VALUE("metrics-workers", "metrics.workers",
                  "N", NULL, "metrics are lock-free counters"),
    GCSFUSE_VALUE("dummy-io-per-mb-latency", "dummy-io.per-mb-latency",
                  "DURATION", NULL, "fluxfs always transfers data"),
    GCSFUSE_VALUE("dummy-io-reader-latency", "dummy-io.reader-latency",
                  "DURATION", NULL, "fluxfs always transfers data"),
    GCSFUSE_VALUE("workload-insight-forward-merge-threshold-mb", "workload-insight.forward-merge-threshold-mb",
                  "MB", NULL,
                  "no workload insight output"),
    GCSFUSE_VALUE("workload-insight-output-file", "workload-insight.output-file",
                  "PATH", NULL, "no workload insight output"),
    GCSFUSE_VALUE("log-rotate-backup-file-count", "logging.log-rotate.backup-file-count",
                  "N", NULL, "fluxfs reopens --log-file on "
                  "SIGHUP; rotate it with logrotate"),
    GCSFUSE_VALUE("log-rotate-max-file-size-mb", "logging.log-rotate.max-file-size-mb",
                  "MB", NULL, "fluxfs reopens --log-file on "
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

const size_t option_table_size = sizeof(option_table) / sizeof(option_table[0]);
