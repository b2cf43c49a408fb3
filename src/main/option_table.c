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
     "stay in the foreground", NULL, .config = "foreground",
     .def_shown = "detach once the mount is live",
     .man = "Stay in the foreground; logs go to standard error unless \\fB\\-\\-log\\-file\\fR is "
            "given."},
    {"debug", 'd', KIND_DEBUG, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL,
     "foreground with debug logging", NULL, .man = "Foreground with debug logging."},
    {"read-only", 0, KIND_FLAG, FIELD(read_only), 0, 0, TOPIC_MOUNTING, NULL,
     "mount read-only (-o ro)", NULL,
     .man =
         "Mount read-only (also gcsfuse's \\fB\\-\\-o ro\\fR and its \\-o form \\fB\\-o o=ro\\fR). "
         "Unless \\fB\\-\\-no\\-skip\\-open\\fR, the kernel then opens and closes files\n"
         "with no request to fluxfs (see \\fB\\-\\-skip\\-open\\fR). Hint files under "
         "\\fI.fluxfs/\\fR cannot be\n"
         "opened for writing on a read-only mount; the hints package sends hints by ioctls on the\n"
         "\\fI.fluxfs\\fR directory instead.",
     .man_head = ".BR \\-o \" ro, \" \\-\\-read\\-only"},
    {"allow-other", 0, KIND_FLAG, FIELD(allow_other), 0, 0, TOPIC_MOUNTING, NULL,
     "let other users access the mount (-o allow_other; needs user_allow_other in "
     "/etc/fuse.conf unless root)",
     NULL,
     .man = "Let other users access the mount (needs \\fBuser_allow_other\\fR in "
            "\\fI/etc/fuse.conf\\fR when not\n"
            "run as root).",
     .man_head = ".BR \\-o \" allow_other, \" \\-\\-allow\\-other"},
    {"only-dir", 0, KIND_PREFIX, NO_FIELD, 0, 0, TOPIC_MOUNTING, "PREFIX",
     "mount only this prefix of the bucket (same as BUCKET/PREFIX)", NULL, .config = "only-dir",
     .man =
         "Mount only this prefix; the same as \\fIBUCKET\\fB/\\fIPREFIX\\fR (gcsfuse's spelling)."},
    {"debug-fuse", 0, KIND_FLAG, FIELD(debug_fuse), 0, 0, TOPIC_MOUNTING, NULL,
     "print every FUSE request (libfuse's debug output; implies --foreground)", NULL,
     .config = "debug.fuse",
     .man = "Print every FUSE request (libfuse's debug output); implies \\fB\\-f\\fR."},
    {"shutdown-grace", 0, KIND_TTL, FIELD(shutdown_grace_s), 0, 0, TOPIC_MOUNTING, "DURATION",
     "on SIGTERM/SIGINT (or an unmount by someone else), serve files open for writing until "
     "they are closed, at most this long, then commit them as fsync would (5s in a "
     "container, to fit its 10 s stop; -1 = no limit)",
     NULL, .def = "30s",
     .man = "How long a stop (SIGTERM, SIGINT, a lazy unmount by someone else) keeps serving files "
            "open for\n"
            "writing before committing them as \\fBfsync\\fR would (default @DEFAULT@; "
            "\\fB\\-1\\fR: until they are\n"
            "closed). Set a pod's \\fBterminationGracePeriodSeconds\\fR or a unit's "
            "\\fBTimeoutStopSec\\fR\n"
            "above it."},
    {"unmount-stale", 0, KIND_FLAG, FIELD(unmount_stale), 0, 0, TOPIC_MOUNTING, NULL,
     "when MOUNTPOINT is a fluxfs mount whose daemon died (\"transport endpoint is not "
     "connected\"), unmount it lazily and mount again (--no-unmount-stale only names it and "
     "exits 2); a live mount or another filesystem's is left alone",
     NULL, .def = "on",
     .man = "When \\fIMOUNTPOINT\\fR is a fluxfs mount whose daemon died (every access fails with\n"
            "\"transport endpoint is not connected\"), unmount it lazily and mount again, with one "
            "log line.\n"
            "On by default, so a restart after \\fBkill \\-9\\fR (the systemd unit's\n"
            "\\fBRestart=on\\-failure\\fR) mounts cleanly; \\fB\\-\\-no\\-unmount\\-stale\\fR only "
            "names such a\n"
            "mount and exits 2. Only a mount that mountinfo lists as \\fBfuse.fluxfs\\fR on that "
            "path and\n"
            "whose \\fBstatfs\\fR the kernel answers \\fBENOTCONN\\fR is removed: a live fluxfs "
            "mount, even a\n"
            "hung one (exit 1), and another filesystem's dead mount (exit 2) are left alone."},
    {"crash-restart", 0, KIND_FLAG, FIELD(crash_restart), 0, 0, TOPIC_MOUNTING, NULL,
     "keep the mount through a crash: a small supervising process holds the FUSE connection "
     "and starts a new serving process when the one serving dies by a signal (kill -9, abort, "
     "OOM kill; --no-crash-restart serves without one)",
     NULL, .def = "on",
     .man = "A small supervising process keeps the FUSE connection (the \\fB/dev/fuse\\fR "
            "descriptor) and\n"
            "the serving process's state in shared memory, and runs the serving process as its "
            "child. When\n"
            "the child dies by a signal, a new one takes the connection and the state over, with "
            "one log\n"
            "line: lookups, reads and listings it had not answered are served again, other "
            "requests it had\n"
            "not answered fail with EIO, and files open for writing fail their next write and "
            "close with\n"
            "EIO (their unwritten bytes died with the process). An unmount or a clean exit ends "
            "the\n"
            "supervisor. A \\fB/dev/fd/\\fR\\fIN\\fR mount is supervised too; its caller "
            "unmounts it (the supervisor\n"
            "never does), which ends the supervisor; when the supervisor dies as well, the "
            "caller must mount\n"
            "again with a fresh descriptor (docs/containers.md). On by default;\n"
            "\\fB\\-\\-no\\-crash\\-restart\\fR serves without a supervisor (one process; libfuse then reads\n"
            "through one cloned descriptor per thread: docs/operations.md)."},
    {"handover-wait", 0, KIND_TTL, FIELD(handover_wait_s), 0, 0, TOPIC_MOUNTING, "DURATION",
     "when MOUNTPOINT is served by a live fluxfs, how long it may wait for its files open for "
     "writing to close before it refuses to hand the mount over to this command",
     NULL, .def = "10s",
     .man = "Running fluxfs on a mountpoint that a live fluxfs daemon serves (same bucket and "
            "prefix) hands\n"
            "the mount over to the new process without unmounting: the old daemon finishes the "
            "requests it\n"
            "took and passes the FUSE connection, its inode numbers and open handles on. Files "
            "open for\n"
            "writing cannot be carried: the old daemon waits this long (default @DEFAULT@) for "
            "them to close,\n"
            "else it refuses, keeps serving, and this command exits 1 saying why."},
    {"help", 'h', KIND_HELP, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL, "print this help and exit", NULL,
     .man = "Print the options grouped by topic."},
    {"version", 'V', KIND_VERSION, NO_FIELD, 0, 0, TOPIC_MOUNTING, NULL,
     "print the version and exit (also -v, as gcsfuse)", NULL,
     .man = "Print the version of fluxfs, libfuse and libcurl."},
    {"config-file", 0, KIND_CONFIG, NO_FIELD, 0, 0, TOPIC_MOUNTING, "FILE",
     "read gcsfuse's YAML configuration file (its keys and nesting, e.g. \"metadata-cache: "
     "{ttl-secs: 60}\"); options on the command line override it; unknown keys are warned "
     "about",
     NULL,
     .man = "Read gcsfuse's YAML configuration file (libyaml): gcsfuse's keys and nesting, each "
            "with the\n"
            "meaning of the flag gcsfuse documents for it (\\fBmetadata\\-cache: {ttl\\-secs: "
            "\\-1}\\fR is\n"
            "\\fB\\-\\-metadata\\-cache\\-ttl\\-secs \\-1\\fR; \\fBfile\\-system: {fuse\\-options: "
            "[ro]}\\fR is \\fB\\-o ro\\fR).\n"
            "Options on the command line override the file. An unknown key is logged as a warning; "
            "a bad\n"
            "value, a list or mapping where a value belongs, or malformed YAML is refused naming "
            "the file,\n"
            "the key or the line. Also \\fB\\-o config_file=\\fIFILE\\fR.\n"
            ".IP\n"
            "The same keys are accepted as mount options in the form the GKE Cloud Storage FUSE "
            "CSI driver\n"
            "passes them (its \\fBmountOptions\\fR): the key's levels joined by \\fB:\\fR, then "
            "\\fB:\\fR and the\n"
            "value, e.g. \\fB\\-o "
            "file\\-cache:max\\-size\\-mb:\\-1,metadata\\-cache:ttl\\-secs:30\\fR,\n"
            "\\fB\\-o gcs\\-connection:client\\-protocol:http1\\fR, \\fB\\-o "
            "logging:severity:trace\\fR,\n"
            "\\fB\\-o implicit\\-dirs:true\\fR (also \\fIsection\\fB:\\fIkey\\fB=\\fIvalue\\fR; a "
            "value may\n"
            "hold \\fB:\\fR). They go through the same mapping as the file (same values, same "
            "warnings) and\n"
            "work in fstab and with \\fBmount \\-t fluxfs\\fR. Unlike the file, an unknown key, a "
            "section\n"
            "given a value or a key without one is refused (exit 2)."},
    {"ro", 0, KIND_FLAG, FIELD(read_only), 0, 0, TOPIC_HIDDEN, NULL, NULL, NULL},
    /* -o LIST (--help prints its line by hand): here for gcsfuse's config key. */
    {"o", 0, KIND_OPTION_LIST, NO_FIELD, 0, 0, TOPIC_HIDDEN, "OPT[,OPT...]", NULL, NULL,
     .config = "file-system.fuse-options"},
    {"skip-open", 0, KIND_FLAG, FIELD(skip_open), 0, 0, TOPIC_MOUNTING, NULL,
     "on read-only mounts, let the kernel open and close files with no request to the daemon "
     "(no OPEN, FLUSH, RELEASE; a replaced object is a new inode; --no-skip-open keeps "
     "the requests)",
     NULL, .def = "on",
     .man =
         "On read-only mounts (default @DEFAULT@; \\fB\\-\\-no\\-skip\\-open\\fR turns it off), "
         "the first OPEN is\n"
         "answered ENOSYS, which tells the kernel (Linux 4.19 and later) to open and close every "
         "file of\n"
         "the mount with no OPEN, FLUSH or RELEASE request and to keep its pages: a cached epoch "
         "costs\n"
         "fluxfs no request per file (CPython's \\fBopen\\fR still sends one IOCTL, "
         "\\fBisatty\\fR, which the\n"
         "kernel forwards whatever the answer; an explicit buffer size avoids it). Consistency is "
         "kept by\n"
         "inode numbers: a file's inode is one generation of its object. A lookup or stat by path "
         "after\n"
         "the TTL that finds another generation gives the name a new inode number (a stat by path "
         "answers\n"
         "ESTALE once and the kernel looks the name up again), whose pages start empty; a file "
         "open on the\n"
         "old version reads the old bytes or fails with ESTALE, never the new ones. Writable "
         "mounts keep\n"
         "the requests: writes need handles, and the kernel's choice holds for the whole mount."},

    /* Credentials */
    {"endpoint", 0, KIND_ENDPOINT, NO_FIELD, 0, 0, TOPIC_CREDENTIALS, "URL",
     "Cloud Storage endpoint; STORAGE_EMULATOR_HOST, when set, replaces the default and "
     "implies --anonymous",
     NULL, .def = DEFAULT_ENDPOINT,
     .man = "Cloud Storage endpoint (default \\fB@DEFAULT@\\fR). A trailing\n"
            "\\fB/storage/v1\\fR is dropped, so gcsfuse's \\fB\\-\\-custom\\-endpoint\\fR value "
            "works as is."},
    {"anonymous", 0, KIND_FLAG, FIELD(gcs.anonymous), 0, 0, TOPIC_CREDENTIALS, NULL,
     "send no credentials (public buckets, emulators)", NULL,
     .man = "Send no credentials: public buckets and emulators. Conflicts with "
            "\\fB\\-\\-key\\-file\\fR."},
    {"key-file", 0, KIND_PATH, FIELD(key_file), 0, 0, TOPIC_CREDENTIALS, "PATH",
     "service-account or authorized_user JSON key", NULL, .config = "gcs-auth.key-file",
     .def_shown = "Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, the gcloud "
                  "ADC file, the metadata server",
     .man = "A service-account key (signed JWT exchanged at its \\fBtoken_uri\\fR) or an\n"
            "\\fBauthorized_user\\fR file (refresh token). Without it, Application Default "
            "Credentials are\n"
            "used in Google's order: \\fBGOOGLE_APPLICATION_CREDENTIALS\\fR, the gcloud ADC file, "
            "then the\n"
            "metadata server."},
    {"token-url", 0, KIND_STRING, FIELD(token_url), 0, 0, TOPIC_CREDENTIALS, "URL",
     "without --key-file: get access tokens from this URL (GET, OAuth token JSON reply, as "
     "gcsfuse does); with --key-file: the key's token endpoint instead of its token_uri",
     NULL, .config = "gcs-auth.token-url",
     .man = "Without \\fB\\-\\-key\\-file\\fR: get access tokens from \\fIURL\\fR (a GET answered "
            "with OAuth token\n"
            "JSON, \\fBaccess_token\\fR and \\fBexpires_in\\fR), as gcsfuse does; the Application "
            "Default\n"
            "Credentials are then not consulted. With \\fB\\-\\-key\\-file\\fR: the key's token "
            "endpoint instead\n"
            "of its \\fBtoken_uri\\fR."},
    {"billing-project", 0, KIND_STRING, FIELD(billing_project), 0, 0, TOPIC_CREDENTIALS, "PROJECT",
     "bill requests to this project (Requester Pays buckets: userProject on every "
     "request)",
     NULL, .config = "gcs-connection.billing-project",
     .man = "Bill requests to \\fIPROJECT\\fR: \\fBuserProject=\\fIPROJECT\\fR on every request, "
            "as Requester Pays\n"
            "buckets require (upload session URIs excepted: their session was billed when it was "
            "opened)."},
    {"app-name", 0, KIND_STRING, FIELD(app_name), 0, 0, TOPIC_CREDENTIALS, "NAME",
     "added to the User-Agent of every request", NULL, .config = "app-name",
     .man = "Added to the User-Agent of every request."},
    {"ca-file", 0, KIND_PATH, FIELD(ca_file), 0, 0, TOPIC_CREDENTIALS, "FILE",
     "trust the certificate authorities in this PEM file instead of the system's bundle "
     "($SSL_CERT_DIR replaces the CA directory); "
     "certificates that do not verify are always refused",
     NULL, .def_shown = "$SSL_CERT_FILE when set",
     .man =
         "Trust the certificate authorities in \\fIFILE\\fR (PEM) instead of the system's bundle, "
         "for\n"
         "an endpoint behind a private CA (a proxy, a private emulator). Also \\fB\\-o "
         "ca_file=\\fIFILE\\fR.\n"
         "Without it \\fBSSL_CERT_FILE\\fR is used when set. Certificates are always verified "
         "(chain and\n"
         "host name): an untrusted one fails the mount, and there is no option to turn that off."},
    {"custom-endpoint", 0, KIND_ENDPOINT, NO_FIELD, 0, 0, TOPIC_HIDDEN, "URL", NULL, "endpoint",
     .config = "gcs-connection.custom-endpoint"},
    {"anonymous-access", 0, KIND_FLAG, FIELD(gcs.anonymous), 0, 0, TOPIC_HIDDEN, NULL, NULL,
     "anonymous", .config = "gcs-auth.anonymous-access"},

    /* Presentation */
    {"uid", 0, KIND_UID, FIELD(uid), 0, 0, TOPIC_PRESENTATION, "UID",
     "owner of every file and directory, number or name", NULL, .config = "file-system.uid",
     .def = "-1", .def_shown = "the mounting user",
     .man = "Owner of every file and directory, as a number or a name (default: @DEFAULT@;\n"
            "\\fB\\-1\\fR also means the default)."},
    {"gid", 0, KIND_GID, FIELD(gid), 0, 0, TOPIC_PRESENTATION, "GID",
     "group of every file and directory, number or name", NULL, .config = "file-system.gid",
     .def = "-1", .def_shown = "the mounting user's group",
     .man = "Group of every file and directory, as a number or a name (default: @DEFAULT@;\n"
            "\\fB\\-1\\fR also means the default)."},
    {"file-mode", 0, KIND_MODE, FIELD(file_mode), 0, 0, TOPIC_PRESENTATION, "MODE",
     "permission bits of files, octal", NULL, .config = "file-system.file-mode", .def = "0644",
     .man = "Permission bits of files in octal (default \\fB@DEFAULT@\\fR)."},
    {"dir-mode", 0, KIND_MODE, FIELD(dir_mode), 0, 0, TOPIC_PRESENTATION, "MODE",
     "permission bits of directories, octal", NULL, .config = "file-system.dir-mode", .def = "0755",
     .man = "Permission bits of directories in octal (default \\fB@DEFAULT@\\fR)."},
    {"implicit-dirs", 0, KIND_FLAG, FIELD(implicit_dirs), 0, 0, TOPIC_PRESENTATION, NULL,
     "show prefixes without a placeholder object \"dir/\" as directories "
     "(--no-implicit-dirs turns it off)",
     NULL, .config = "implicit-dirs", .def = "on",
     .man = "Whether a prefix with no placeholder object is shown as a directory (default "
            "@DEFAULT@)."},

    /* Caching */
    {"stat-ttl", 0, KIND_TTL, FIELD(stat_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long object metadata (size, generation) is trusted, from a listing too: bounds how "
     "soon a replaced file is seen by open/stat; 0: every open and stat by path "
     "asks Cloud Storage (reads of an open file do not)",
     NULL, .def = "60s",
     .man =
         "How long object metadata (size, generation) is trusted before it is fetched again "
         "(default @DEFAULT@).\n"
         "After it passes, \\fBopen\\fR revalidates (close-to-open consistency), also when the "
         "name was\n"
         "answered from a directory listing younger than \\fB\\-\\-list\\-ttl\\fR: a listing's "
         "size and\n"
         "generation answer lookups only for the stat TTL. So this option bounds how soon a file "
         "replaced\n"
         "by another client is seen through \\fBopen\\fR and \\fBstat\\fR (plus the kernel's\n"
         "\\fB\\-\\-attr\\-timeout\\fR/\\fB\\-\\-entry\\-timeout\\fR, which default to it);\n"
         "\\fB\\-\\-list\\-ttl\\fR bounds what \\fBreaddir\\fR (\\fBls \\-l\\fR) shows.\n"
         "\\fB\\-\\-stat\\-ttl 0\\fR makes every \\fBopen\\fR and every \\fBstat\\fR by path ask "
         "Cloud\n"
         "Storage (one request each), and the kernel's attribute timeout 0 (unless\n"
         "\\fB\\-\\-attr\\-timeout\\fR is given): the kernel then asks fluxfs before every "
         "\\fBread\\fR.\n"
         "Those questions about an open file are answered with what its open revalidated, with no\n"
         "request (an open file reads the version it opened), so reads cost no more than with a "
         "TTL."},
    {"type-ttl", 0, KIND_TTL, FIELD(type_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long \"file or directory\" knowledge of a name is trusted", NULL, .def = "60s",
     .man = "How long \"file or directory\" knowledge of a name is trusted (default @DEFAULT@), "
            "from a directory\n"
            "listing too."},
    {"negative-ttl", 0, KIND_TTL, FIELD(negative_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long \"no such name\" is remembered", NULL, .def = "5s",
     .man = "How long a name known not to exist stays absent (default @DEFAULT@), in the daemon "
            "and in the kernel.\n"
            "A cached listing of a directory answers lookups by this rule: a name it holds is "
            "answered\n"
            "from it; a name it lacks is absent only while the listing is younger than the "
            "negative TTL;\n"
            "after that the lookup asks Cloud Storage (a stat and a one-item list, in parallel), "
            "and a name\n"
            "found drops the directory's cached listing so the next readdir lists again. In a "
            "directory\n"
            "the mount is creating files in, a stale listing is listed again instead (at most once "
            "per\n"
            "negative TTL; with 0 each new name is probed)."},
    {"list-ttl", 0, KIND_TTL, FIELD(list_ttl_s), 0, 0, TOPIC_CACHING, "DURATION",
     "how long a directory listing is reused by readdir; its entries answer "
     "lookups only within --stat-ttl/--type-ttl",
     NULL, .def = "60s",
     .man = "How long a directory listing is reused by the daemon for \\fBreaddir\\fR (default "
            "@DEFAULT@). Its\n"
            "entries answer lookups only while they are younger than \\fB\\-\\-stat\\-ttl\\fR "
            "(files) or\n"
            "\\fB\\-\\-type\\-ttl\\fR (directories)."},
    {"entry-timeout", 0, KIND_TTL, FIELD(entry_timeout_s), 0, 0, TOPIC_CACHING, "DURATION",
     "kernel name cache timeout", NULL, .def_shown = "the stat TTL",
     .man = "Kernel name cache timeout (default: @DEFAULT@)."},
    {"attr-timeout", 0, KIND_TTL, FIELD(attr_timeout_s), 0, 0, TOPIC_CACHING, "DURATION",
     "kernel attribute cache timeout", NULL, .def_shown = "the stat TTL",
     .man = "Kernel attribute cache timeout (default: @DEFAULT@)."},
    {"prefetch-metadata", 0, KIND_FLAG, FIELD(prefetch_metadata), 0, 0, TOPIC_CACHING, NULL,
     "list the whole mounted prefix at mount time to warm the metadata cache", NULL,
     .man = "List the whole mounted prefix at mount time, with the same parallel listing, to warm "
            "the\n"
            "metadata cache."},
    {"stat-cache-ttl", 0, KIND_TTL, FIELD(stat_ttl_s), 0, 0, TOPIC_HIDDEN, "DURATION", NULL,
     "stat-ttl", .config = "metadata-cache.deprecated-stat-cache-ttl"},
    {"type-cache-ttl", 0, KIND_TTL, FIELD(type_ttl_s), 0, 0, TOPIC_HIDDEN, "DURATION", NULL,
     "type-ttl", .config = "metadata-cache.deprecated-type-cache-ttl"},
    {"metadata-cache-ttl-secs", 0, KIND_METADATA_TTL, NO_FIELD, 0, 0, TOPIC_HIDDEN, "SECONDS", NULL,
     "stat-ttl and --type-ttl", .config = "metadata-cache.ttl-secs"},
    {"metadata-cache-negative-ttl-secs", 0, KIND_TTL_SECONDS, FIELD(negative_ttl_s), 0, 0,
     TOPIC_HIDDEN, "SECONDS", NULL, "negative-ttl", .config = "metadata-cache.negative-ttl-secs"},
    {"kernel-list-cache-ttl-secs", 0, KIND_COMPAT, FIELD(kernel_list_ttl_s), 0, 0, TOPIC_CACHING,
     "SECONDS",
     "how long the kernel may keep a directory's entries it read "
     "(readdir) and serve ls without asking fluxfs; 0 = ask every time, -1 = until "
     "invalidated (gcsfuse's meaning and units)",
     NULL, .config = "file-system.kernel-list-cache-ttl-secs", .def = "0",
     .man = "How long the kernel keeps the entries it read from a directory and serves \\fBls\\fR "
            "from them\n"
            "without asking fluxfs (gcsfuse's flag and meaning; default @DEFAULT@: not at all; "
            "\\-1: until the\n"
            "directory changes through the mount)."},

    /* Performance */
    {"max-connections", 0, KIND_INT, FIELD(gcs.max_connections), 0, 4096, TOPIC_PERFORMANCE, "N",
     "cap on connections to Cloud Storage", NULL, .def = "64",
     .man = "Cap on connections to Cloud Storage (default @DEFAULT@)."},
    {"read-ahead-kb", 0, KIND_INT, FIELD(kernel_readahead_kb), 1, 1 << 20, TOPIC_PERFORMANCE, "KB",
     "the kernel's readahead for the mount (its /sys/class/bdi read_ahead_kb; root "
     "only, else the kernel's default stays; the kernel caps it at 4096)",
     NULL, .def_shown = "1024",
     .man = "The kernel's readahead for the mount, written to its "
            "\\fI/sys/class/bdi/MAJOR:MINOR/read_ahead_kb\\fR\n"
            "before the mount is live (\\fB\\-o read_ahead_kb=\\fIKB\\fR, as GKE pod specs pass "
            "it). Needs root\n"
            "and a writable \\fI/sys\\fR; otherwise the kernel's default stays and a warning is "
            "logged. The\n"
            "kernel caps it at 4096 (fluxfs's largest FUSE readahead). Default @DEFAULT@."},
    {"list-parallelism", 0, KIND_INT, FIELD(list_parallelism), 1, 256, TOPIC_PERFORMANCE, "N",
     "concurrent list requests for one large directory", NULL, .def = "32",
     .man = "Concurrent list requests for one large directory (default @DEFAULT@)."},
    {"memory-limit", 0, KIND_SIZE, FIELD(memory_limit), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "one budget for the daemon's buffers and caches: read buffers, the memory cache and "
     "(unless --write-buffer-size is given) a third of it, at most 512M, for write buffers",
     NULL, .def = "1536M",
     .man = "One budget for the daemon's buffers and caches (default @DEFAULT@): the write buffers "
            "take a\n"
            "third of it in whole parts, at most 512M (or \\fB\\-\\-write\\-buffer\\-size\\fR when "
            "given), read\n"
            "buffers and the memory cache the rest, which must be at least twice the readahead "
            "chunk. The\n"
            "daemon's resident memory stays within it plus a fixed part (code, thread buffers, "
            "metadata;\n"
            "about 40\\(en50 MiB measured), shown beside it by \\fBfluxfs status\\fR."},
    {"small-file-threshold", 0, KIND_SIZE, FIELD(small_file_threshold), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "objects up to this size are fetched whole when first opened", NULL, .def = "4M",
     .man = "Objects up to this size are fetched whole when first opened, and their bytes put into "
            "the\n"
            "kernel's page cache with the open (default @DEFAULT@)."},
    {"readahead-chunk", 0, KIND_SIZE, FIELD(readahead_chunk), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "size of one ranged GET of sequential readahead", NULL, .def = "8M",
     .man = "Size of one ranged GET of sequential readahead (default @DEFAULT@)."},
    {"readahead-max", 0, KIND_SIZE, FIELD(readahead_max), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "largest readahead window per open file", NULL, .def = "64M",
     .man = "The largest readahead window per open file (default @DEFAULT@)."},
    {"random-read-min", 0, KIND_SIZE, FIELD(random_read_min), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "smallest GET for random access", NULL, .def = "1M",
     .man = "Smallest GET for random access (default @DEFAULT@)."},
    {"temp-dir", 0, KIND_PATH, FIELD(temp_dir), 0, 0, TOPIC_PERFORMANCE, "DIR",
     "staging files (edits of existing objects, files that seek back after parts were sent)", NULL,
     .config = "file-system.temp-dir", .def_shown = "$TMPDIR or /tmp",
     .man = "Where staging files are created (default \\fB$TMPDIR\\fR or \\fB/tmp\\fR; opened\n"
            "\\fBO_TMPFILE\\fR, so nothing is left behind)."},
    {"write-part-size", 0, KIND_SIZE, FIELD(write_part_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "part of a streaming upload, sent while the file is still written", NULL, .def = "16M",
     .man = "Part of a streaming upload (default @DEFAULT@; at least 5M, a multiple of 256K)."},
    {"write-small-threshold", 0, KIND_SIZE, FIELD(write_small_threshold), 0, 0, TOPIC_PERFORMANCE,
     "SIZE", "files up to this size upload in one request at close", NULL, .def = "16M",
     .man = "Files up to this size upload in one request at close (default @DEFAULT@)."},
    {"write-parts-in-flight", 0, KIND_INT, FIELD(write_parts_in_flight), 1, 1024, TOPIC_PERFORMANCE,
     "N", "upload parts in flight per file", NULL, .def = "16",
     .man = "Parts in flight per file (default @DEFAULT@)."},
    {"write-max-parts-in-flight", 0, KIND_INT, FIELD(write_max_parts_in_flight), 1, 4096,
     TOPIC_PERFORMANCE, "N", "upload parts in flight for all files together", NULL, .def = "64",
     .man = "Parts in flight for all files together (default @DEFAULT@)."},
    {"write-buffer-size", 0, KIND_SIZE, FIELD(write_buffer_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "memory for the parts of new files being written, all files together, taken "
     "from --memory-limit (0 = every file through a staging file under --temp-dir)",
     NULL, .def_shown = "a third of --memory-limit in whole parts, at most 512M",
     .man = "Memory for the part buffers of all files being written, taken from\n"
            "\\fB\\-\\-memory\\-limit\\fR (default a third of it in whole parts, at most 512M; 0 "
            "or at least\n"
            "\\fB\\-\\-write\\-part\\-size\\fR, leaving twice the readahead chunk for reads). A "
            "writer beyond it waits for parts to drain, or moves to a\n"
            "staging file. \\fB0\\fR sends every file through a staging file."},
    {"upload-mode", 0, KIND_STRING, FIELD(upload_mode), 0, 0, TOPIC_PERFORMANCE, "MODE",
     "auto (XML multipart, composite where missing), multipart, composite or resumable", NULL,
     .def = "auto",
     .man =
         "\\fBauto\\fR (XML multipart; parallel composite upload where the XML API is missing),\n"
         "\\fBmultipart\\fR, \\fBcomposite\\fR or \\fBresumable\\fR (one resumable upload at "
         "close, from a\n"
         "staging file)."},
    {"rename-dir-limit", 0, KIND_INT, FIELD(rename_dir_limit), 0, 10000000, TOPIC_PERFORMANCE, "N",
     "most objects a directory rename copies; more gives EXDEV (renames of "
     "directories are not atomic)",
     NULL, .config = "file-system.rename-dir-limit", .def = "1000",
     .man = "The most objects a directory rename copies (default @DEFAULT@); a larger directory "
            "gives\n"
            "\\fBEXDEV\\fR (so \\fBmv\\fR copies file by file). Directory renames are copies and "
            "deletes,\n"
            "not atomic, but they survive a crash: an intent record in "
            "\\fIPREFIX\\fR\\fB/.fluxfs/renames/\\fR\n"
            "(hidden from listings) names every object to move, and the next read-write mount "
            "rolls an\n"
            "interrupted rename forward before it serves anything (one log line per rename), so "
            "each file\n"
            "is then there once, under the new name. A new name written by someone else meanwhile "
            "keeps\n"
            "its bytes, and the old object stays (the rename answers \\fBENOTEMPTY\\fR)."},
    {"chmod-policy", 0, KIND_STRING, FIELD(chmod_policy), 0, 0, TOPIC_PRESENTATION, "POLICY",
     "ignore (chmod/chown succeed and change nothing) or refuse (EPERM)", NULL, .def = "ignore",
     .man = "\\fBignore\\fR: \\fBchmod\\fR, \\fBchown\\fR and \\fBchgrp\\fR succeed and change "
            "nothing\n"
            "(owners and modes come from \\fB\\-\\-uid\\fR, \\fB\\-\\-gid\\fR, "
            "\\fB\\-\\-file\\-mode\\fR and\n"
            "\\fB\\-\\-dir\\-mode\\fR), as gcsfuse does; \\fBrefuse\\fR: they fail with "
            "\\fBEPERM\\fR, for programs\n"
            "that must learn that permissions are not kept."},
    {"upload-cleanup-age", 0, KIND_TTL, FIELD(upload_cleanup_age_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION",
     "at mount, temporary upload objects older than this (left by a crashed daemon) "
     "are removed; 0 also aborts every multipart upload under the prefix",
     NULL, .def = "1h",
     .man = "At mount, temporary objects older than this (left by a crashed daemon) are removed, "
            "and the\n"
            "multipart uploads they name aborted (default @DEFAULT@)."},
    {"cache-dir", 0, KIND_NEW_PATH, FIELD(cache_dir), 0, 0, TOPIC_PERFORMANCE, "DIR",
     "keep a disk content cache here, by object name and generation, reused after a "
     "remount: small objects, and large ones once read through the mount (gcsfuse's file "
     "cache; any read order; kept when every byte was read and the CRC32C matches)",
     NULL, .config = "cache-dir", .def_shown = "memory only",
     .man =
         "A disk content cache in \\fIDIR\\fR (default: @DEFAULT@), bounded by "
         "\\fB\\-\\-cache\\-size\\fR\n"
         "(LRU) and by the free space of the filesystem holding \\fIDIR\\fR: it leaves 5% of\n"
         "that filesystem free (at least 1 MiB, at most 256 MiB), checked at start and before each "
         "file\n"
         "it writes, and evicts its least recently used files for room (also when a write fails "
         "with\n"
         "ENOSPC, then tries once more), so a small or shared filesystem keeps caching the newest\n"
         "objects. Keyed by object name and generation and reused after a remount. It holds\n"
         "small objects, and large objects once every byte of them was read through the mount (in "
         "any\n"
         "order) and their CRC32C matched the object's, as gcsfuse's file cache does; later opens "
         "of that\n"
         "generation read the file. The first open of a cached large object in a mount checks its\n"
         "CRC32C; a damaged file is removed and the object fetched again."},
    {"cache-size", 0, KIND_SIZE, FIELD(cache_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "cap of the disk content cache", NULL, .def = "10G",
     .man = "Cap of the disk content cache in \\fB\\-\\-cache\\-dir\\fR (default @DEFAULT@)."},
    {"memory-cache-size", 0, KIND_SIZE, FIELD(memory_cache_size), 0, 0, TOPIC_PERFORMANCE, "SIZE",
     "cap of the in-memory content cache, inside --memory-limit (0 = none)", NULL, .def = "256M",
     .man =
         "Cap of the in-memory content cache (default @DEFAULT@; \\fB0\\fR = none), counted "
         "inside\n"
         "\\fB\\-\\-memory\\-limit\\fR: prefetched and whole-fetched small objects are kept here.\n"
         "\\fBfluxfs prefetch\\fR warms within the content cache's capacity and reports the files "
         "that\n"
         "did not fit."},
    {"compose", 0, KIND_STRING, FIELD(compose_mode), 0, 0, TOPIC_PERFORMANCE, "auto|on|off",
     "compose-batched prefetch of small objects (auto: on unless the "
     "bucket's retention policy, default event-based hold or unreadable settings make "
     "temporaries undeletable; off: plain GETs)",
     NULL, .def = "auto",
     .man =
         "Compose-batched prefetch of small objects (default \\fB@DEFAULT@\\fR): up to\n"
         "\\fB\\-\\-compose\\-max\\-objects\\fR small objects are joined server-side into one "
         "temporary object\n"
         "under \\fI.fluxfs/compose/\\fR (created with storage class STANDARD), fetched with one "
         "GET and\n"
         "deleted. \\fBauto\\fR reads the bucket's settings once at mount (buckets.get) and "
         "composes\n"
         "unless a retention policy or a default event-based hold would keep the temporaries from "
         "being\n"
         "deleted, or the settings cannot be read (then it assumes that costly case and says so "
         "once in\n"
         "the log); with soft delete (Cloud Storage's default, 7 days) it composes and states what "
         "each\n"
         "GiB composed adds at list prices (soft-deleted temporaries are billed for the policy's\n"
         "duration). Where compose is off, hinted reads use plain GETs with the same lookahead. "
         "The\n"
         "decision and its reason are logged once and shown in \\fI.fluxfs/status\\fR\n"
         "(\\fBcompose_decision\\fR) and by \\fBfluxfs status\\fR. \\fBon\\fR and \\fBoff\\fR "
         "force it; \\fBoff\\fR\n"
         "for jobs near the bucket's request-rate limits or without the create/delete permission. "
         "A\n"
         "denied compose falls back to plain GETs by itself."},
    {"prefetch-lookahead", 0, KIND_INT, FIELD(prefetch_lookahead), 1, 1000000, TOPIC_PERFORMANCE,
     "N",
     "files of each hint list fetched ahead of its reader "
     "(fetched and not opened yet: at most 3/4 of the content cache at "
     "their average size, shared among the lists)",
     NULL, .def = "1024",
     .man = "Files of each hint list (\\fI.fluxfs/prefetch\\fR) fetched ahead of its reader "
            "(default @DEFAULT@).\n"
            "What is fetched and not opened yet stays under 3/4 of the content cache at the files' "
            "average\n"
            "size, shared among the lists."},
    {"prefetch-workers", 0, KIND_INT, FIELD(prefetch_workers), 1, 256, TOPIC_PERFORMANCE, "N",
     "prefetch batches fetched at once (compose, GET, delete)", NULL, .def = "8",
     .man =
         "Prefetch batches handled at once: composes, GETs and deletes of temporaries (1 to 256;\n"
         "default @DEFAULT@)."},
    {"compose-max-objects", 0, KIND_INT, FIELD(compose_max_objects), 2, 32, TOPIC_PERFORMANCE, "N",
     "objects per compose batch (32 is the most Cloud Storage allows)", NULL, .def = "32",
     .man =
         "Objects per compose batch (2 to 32; default @DEFAULT@, the most Cloud Storage allows)."},
    {"compose-object-max-size", 0, KIND_SIZE, FIELD(compose_object_max_size), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "objects up to this size are compose-batched", NULL, .def = "2M",
     .man = "Objects up to this size are compose-batched (default @DEFAULT@); larger ones are "
            "fetched with plain\n"
            "GETs."},
    {"compose-batch-max-bytes", 0, KIND_SIZE, FIELD(compose_batch_max_bytes), 0, 0,
     TOPIC_PERFORMANCE, "SIZE", "cap on one composite object", NULL, .def = "32M",
     .man = "Cap on one composite object (default @DEFAULT@)."},
    {"batch-misses", 0, KIND_INT, FIELD(batch_misses_us), 0, 1000000, TOPIC_PERFORMANCE, "US",
     "gather concurrent small-file misses for up to US microseconds and fetch them with one "
     "compose (0 = off)",
     NULL, .def = "0",
     .man = "Gather concurrent small-file misses (reads of objects not cached, from different "
            "files) for up\n"
            "to \\fIUS\\fR microseconds and fetch them with one compose (default @DEFAULT@: off). "
            "Helps many readers\n"
            "opening small files in shuffled order without hints."},
    {"batch-misses-min", 0, KIND_INT, FIELD(batch_misses_min), 2, 32, TOPIC_PERFORMANCE, "N",
     "fewest concurrent misses worth a compose (fewer are plain GETs)", NULL, .def = "4",
     .man = "Fewest concurrent misses worth a compose (2 to 32; default @DEFAULT@); fewer are "
            "plain GETs."},
    {"max-retries", 0, KIND_RETRIES, FIELD(gcs.max_retries), 0, 100, TOPIC_PERFORMANCE, "N",
     "retries of a failed request (408/429/5xx, resets, stalls); 0 = none", NULL, .def = "6",
     .man = "Retries of a failed request (408, 429, 5xx, connection resets, stalled bodies), with\n"
            "exponential backoff and jitter honouring \\fBRetry\\-After\\fR; \\fB0\\fR disables "
            "retries\n"
            "(default @DEFAULT@). When they are spent the operation fails with EIO."},
    {"request-deadline", 0, KIND_DURATION, FIELD(gcs.request_deadline_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "total time for one call including retries", NULL, .def = "120s",
     .man = "Total time for one call including its retries (default @DEFAULT@). The check at mount "
            "(one listing\n"
            "of the bucket) is given at most 10s, or this if shorter: an endpoint that takes the "
            "connection\n"
            "and never answers fails the mount with \"did not answer within N s\"."},
    {"stall-timeout", 0, KIND_DURATION, FIELD(gcs.stall_timeout_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "a body with no bytes for this long is retried", NULL, .def = "30s",
     .man = "A response body with no bytes for this long is retried (default @DEFAULT@)."},
    {"connect-timeout", 0, KIND_DURATION, FIELD(gcs.connect_timeout_s), 0, 0, TOPIC_PERFORMANCE,
     "DURATION", "TCP/TLS connect timeout", NULL, .def = "10s",
     .man = "TCP and TLS connect timeout (default @DEFAULT@)."},
    {"max-conns-per-host", 0, KIND_COMPAT, FIELD(gcs.max_connections), 0, 4096, TOPIC_HIDDEN, "N",
     NULL, "max-connections", .config = "gcs-connection.max-conns-per-host"},
    {"sequential-read-size-mb", 0, KIND_SIZE_MIB, FIELD(readahead_chunk), 0, 0, TOPIC_HIDDEN, "MB",
     NULL, "readahead-chunk", .config = "gcs-connection.sequential-read-size-mb"},
    {"http-client-timeout", 0, KIND_COMPAT, FIELD(gcs.request_deadline_s), 0, 0, TOPIC_HIDDEN,
     "DURATION", NULL, "request-deadline", .config = "gcs-connection.http-client-timeout"},

    /* Logging */
    {"log-level", 0, KIND_LOG_LEVEL, FIELD(log_level), 0, 0, TOPIC_LOGGING, "LEVEL",
     "error, warn, info, debug or trace", NULL, .def = "info",
     .man = "\\fBerror\\fR, \\fBwarn\\fR, \\fBinfo\\fR, \\fBdebug\\fR or \\fBtrace\\fR (gcsfuse's\n"
            "\\fBwarning\\fR and \\fBoff\\fR are accepted)."},
    {"log-format", 0, KIND_LOG_FORMAT, FIELD(log_json), 0, 0, TOPIC_LOGGING, "FORMAT",
     "text or json", NULL, .config = "logging.format", .def = "text",
     .man = "\\fBtext\\fR or \\fBjson\\fR (one object per line)."},
    {"log-file", 0, KIND_NEW_PATH, FIELD(log_file), 0, 0, TOPIC_LOGGING, "PATH",
     "append logs to this file", NULL, .config = "logging.file-path",
     .def_shown = "stderr; syslog once detached",
     .man =
         "Append logs to this file. Without it logs go to standard error, and to syslog (facility\n"
         "daemon, tag \\fBfluxfs\\fR; the journal under systemd) once the daemon has detached."},
    {"log-severity", 0, KIND_LOG_LEVEL, FIELD(log_level), 0, 0, TOPIC_HIDDEN, "LEVEL", NULL,
     "log-level", .config = "logging.severity"},
    {"debug-gcs", 0, KIND_FLAG, FIELD(debug_gcs), 0, 0, TOPIC_LOGGING, NULL,
     "log one line per Cloud Storage request at info (gcsfuse's --debug_gcs; --log-level "
     "trace logs them too)",
     NULL, .config = "debug.gcs",
     .man = "Log one line per Cloud Storage request attempt at \\fBinfo\\fR (gcsfuse's "
            "\\fB\\-\\-debug_gcs\\fR):\n"
            "operation, object, range, status, attempt, latency and bytes; never a token or an\n"
            "Authorization header. \\fB\\-\\-log\\-level trace\\fR logs the same lines."},
    {"prometheus-port", 0, KIND_INT, FIELD(prometheus_port), 0, 65535, TOPIC_LOGGING, "PORT",
     "serve Prometheus metrics at http://ADDRESS:PORT/metrics (0 = off)", NULL,
     .config = "metrics.prometheus-port", .def = "0",
     .man =
         "Serve metrics in the Prometheus text format at "
         "\\fBhttp://\\fIADDRESS\\fB:\\fIPORT\\fB/metrics\\fR\n"
         "(gcsfuse's flag; default @DEFAULT@: off). The mount fails if the port cannot be bound. "
         "Names follow\n"
         "gcsfuse where the meaning is the same: \\fBfs_ops_count\\fR, \\fBfs_ops_error_count\\fR "
         "and\n"
         "\\fBfs_ops_latency\\fR (microseconds) by \\fBfs_op\\fR (every FUSE request kind, IOCTL "
         "included;\n"
         "an ENOTTY answer to an ioctl the mount does not support, such as \\fBisatty\\fR, is no "
         "error: it\n"
         "is counted in \\fBfs_ops_unsupported_count\\fR;\n"
         "\\fBInterrupt\\fR counts the kernel's INTERRUPT requests, sent when a caller is "
         "signalled while\n"
         "its request waits on the daemon),\n"
         "\\fBgcs_request_count\\fR and \\fBgcs_request_latencies\\fR (milliseconds) by "
         "\\fBgcs_method\\fR,\n"
         "\\fBgcs_read_bytes_count\\fR, \\fBgcs_download_bytes_count\\fR (by \\fBread_type\\fR:\n"
         "\\fBSequential\\fR for sequential reads, their readahead and whole small objects, "
         "\\fBRandom\\fR\n"
         "for reads that do not continue the previous one and the skips prefetched after them,\n"
         "\\fBParallel\\fR for prefetch and batched misses), \\fBgcs_reader_count\\fR,\n"
         "\\fBgcs_retry_count\\fR; fluxfs's own start with \\fBfluxfs_\\fR (uploads, listings, "
         "retries by\n"
         "cause, prefetch, content cache, memory budget, write buffers "
         "(\\fBfluxfs_write_buffer_bytes\\fR,\n"
         "outside the memory budget); \\fBfluxfs_refetched_bytes_count\\fR: object bytes\n"
         "fetched a second time because the kernel asked again for bytes it had been served, after "
         "its\n"
         "page cache dropped them)."},
    {"prometheus-address", 0, KIND_STRING, FIELD(prometheus_address), 0, 0, TOPIC_LOGGING,
     "ADDRESS", "address the metrics listener binds", NULL, .def = "127.0.0.1",
     .man = "The address the metrics listener binds (default \\fB@DEFAULT@\\fR; \\fB0.0.0.0\\fR or "
            "\\fB::\\fR for\n"
            "every interface)."},

/* gcsfuse v3 flags (cfg/params.yaml) that fluxfs maps onto its own settings. Their help
 * text is what fluxfs does with them (--help lists them under "gcsfuse compatibility"). */
#define GCSFUSE_MAP(name, config_key, metavar, what, ...)                                          \
    {                                                                                              \
        name, 0, KIND_COMPAT, NO_FIELD, 0, 0, TOPIC_GCSFUSE, metavar, what, NULL, NULL,            \
            .config = config_key, __VA_ARGS__                                                      \
    }
    GCSFUSE_MAP("file-cache-max-size-mb", "file-cache.max-size-mb", "MB",
                "--cache-size in MiB; -1 = no cap, 0 = no disk "
                "cache"),
    GCSFUSE_MAP("stat-cache-max-size-mb", "metadata-cache.stat-cache-max-size-mb", "MB",
                "bounds the metadata cache at MB MiB of ~1,700-"
                "byte entries; -1 = no bound, 0 = one entry"),
    GCSFUSE_MAP("stat-cache-capacity", "metadata-cache.deprecated-stat-cache-capacity", "N",
                "bounds the metadata cache at N names"),
    GCSFUSE_MAP("max-retry-attempts", "gcs-retries.max-retry-attempts", "N",
                "--max-retries N; 0 = no limit but --request-deadline"),
    GCSFUSE_MAP("experimental-metadata-prefetch-on-mount",
                "metadata-cache.experimental-metadata-prefetch-on-mount", "MODE",
                "disabled, or sync/async = "
                "--prefetch-metadata"),
    GCSFUSE_MAP("enable-metadata-prefetch", NULL, NULL, "--prefetch-metadata"),
    GCSFUSE_MAP("write-block-size-mb", "write.block-size-mb", "MB",
                "--write-part-size in MiB (at least 5)"),
    GCSFUSE_MAP("write-global-max-blocks", "write.global-max-blocks", "N",
                "--write-buffer-size = N parts; 0 = every file "
                "through a staging file, -1 = no cap"),
    GCSFUSE_MAP("write-max-blocks-per-file", "write.max-blocks-per-file", "N",
                "--write-parts-in-flight N; -1 = 1024"),
    GCSFUSE_MAP("limit-ops-per-sec", "gcs-connection.limit-ops-per-sec", "N",
                "at most N Cloud Storage calls start per second, "
                "all together (retries belong to their call); calls over the rate wait in order; "
                "bursts of N/10; -1 = no limit",
                .def = "-1",
                .man = "at most \\fIN\\fR Cloud Storage calls start per second, all together "
                       "(retries belong to their\n"
                       "call); calls over the rate wait in order, in the request engine (no thread "
                       "sleeps); bursts of\n"
                       "\\fIN\\fR/10 (at least 1); \\-1, or any value not above 0 = no limit. "
                       "gcsfuse's flag,\n"
                       "which gcsfuse documents as measured over a 30\\-second window: fluxfs "
                       "keeps every window, down\n"
                       "to a tenth of a second, within one burst of the rate. Waits show as "
                       "\\fBlimit_op_waits\\fR and\n"
                       "\\fBlimit_op_wait_ms\\fR in \\fIMOUNT\\fB/.fluxfs/status\\fR and\n"
                       "\\fBfluxfs_rate_limit_op_*\\fR in the metrics. Also \\fB\\-o "
                       "gcs\\-connection:limit\\-ops\\-per\\-sec:\\fIN\\fR."),
    GCSFUSE_MAP(
        "limit-bytes-per-sec", "gcs-connection.limit-bytes-per-sec", "N",
        "reply bytes are received from Cloud Storage at "
        "most N per second, all transfers together (reads, listings; uploads are not "
        "limited); -1 = no limit",
        .def = "-1",
        .man = "reply bytes are received from Cloud Storage at most \\fIN\\fR per second, all "
               "transfers together\n"
               "(object reads, listings, metadata; uploads are not limited, as in gcsfuse, whose "
               "limit is on\n"
               "reading); a transfer that would go faster is paused until the bytes it took are "
               "paid for;\n"
               "\\-1 = no limit. A call still ends at \\fB\\-\\-request\\-deadline\\fR: a low "
               "limit needs\n"
               "a longer deadline for large reads. Pauses show as \\fBlimit_byte_pauses\\fR and\n"
               "\\fBlimit_byte_wait_ms\\fR in the status file and \\fBfluxfs_rate_limit_byte_*\\fR "
               "in the metrics."),
    GCSFUSE_MAP("client-protocol", "gcs-connection.client-protocol", "PROTOCOL",
                "http1 (what fluxfs speaks); http2 and grpc are "
                "accepted with a warning"),
#undef GCSFUSE_MAP

/* gcsfuse v3 flags with no meaning for fluxfs: accepted with one warning line (none when the
 * value given is what fluxfs does anyway). The text says why. */
#define GCSFUSE_FLAG(name, config_key, quiet, why)                                                 \
    {                                                                                              \
        name, 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_GCSFUSE, NULL, why, NULL, quiet,                 \
            .config = config_key                                                                   \
    }
#define GCSFUSE_VALUE(name, config_key, metavar, quiet, why)                                       \
    {                                                                                              \
        name, 0, KIND_WARN, NO_FIELD, 0, 0, TOPIC_GCSFUSE, metavar, why, NULL, quiet,              \
            .config = config_key                                                                   \
    }
    GCSFUSE_FLAG("enable-hns", "enable-hns", "false",
                 "fluxfs uses the flat object namespace on every bucket "
                 "(folders are prefixes)"),
    GCSFUSE_FLAG("ignore-interrupts", "file-system.ignore-interrupts", NULL,
                 "fluxfs completes every request except a directory "
                 "listing whose caller was interrupted"),
    GCSFUSE_FLAG("enable-streaming-writes", "write.enable-streaming-writes", "true",
                 "fluxfs always streams new files in parts; "
                 "--write-buffer-size 0 stages them on disk instead"),
    GCSFUSE_FLAG("create-empty-file", "write.create-empty-file", "false",
                 "fluxfs creates a new object when the file is "
                 "closed (or its first part is sent), never an empty placeholder"),
    GCSFUSE_FLAG("enable-nonexistent-type-cache", "metadata-cache.enable-nonexistent-type-cache",
                 NULL,
                 "fluxfs always remembers absent names "
                 "for --negative-ttl (gcsfuse: --metadata-cache-negative-ttl-secs)"),
    GCSFUSE_FLAG("reuse-token-from-url", "gcs-auth.reuse-token-from-url", "true",
                 "fluxfs reuses a token until shortly before "
                 "it expires"),
    GCSFUSE_FLAG("enable-buffered-read", "read.enable-buffered-read", "true",
                 "fluxfs always reads ahead into memory "
                 "buffers (--readahead-chunk, --readahead-max, --memory-limit)"),
    GCSFUSE_FLAG("enable-read-stall-retry", "gcs-retries.read-stall.enable", "true",
                 "fluxfs retries a body with no bytes for "
                 "--stall-timeout"),
    GCSFUSE_FLAG("enable-google-lib-auth", "enable-google-lib-auth", "true",
                 "fluxfs finds credentials in the order "
                 "Google's libraries use"),
    GCSFUSE_FLAG("enable-http-dns-cache", "gcs-connection.enable-http-dns-cache", "true",
                 "libcurl caches name lookups"),
    GCSFUSE_FLAG("enable-atomic-rename-object", "enable-atomic-rename-object", "false",
                 "renames are copy + delete (no HNS "
                 "atomic rename)"),
    GCSFUSE_FLAG("enable-new-reader", "enable-new-reader", NULL, "fluxfs has one reader"),
    GCSFUSE_FLAG("enable-unsupported-path-support", "enable-unsupported-path-support", NULL,
                 "fluxfs hides object names that are "
                 "not valid paths"),
    GCSFUSE_FLAG("enable-empty-managed-folders", "list.enable-empty-managed-folders", "false",
                 "managed folders are not listed"),
    GCSFUSE_FLAG("enable-rapid-appends", "write.enable-rapid-appends", "true",
                 "no Rapid storage appends"),
    GCSFUSE_FLAG("finalize-file-for-rapid", "write.finalize-file-for-rapid", "false",
                 "no Rapid storage appends"),
    GCSFUSE_FLAG("precondition-errors", "file-system.precondition-errors", "true",
                 "fluxfs writes with generation preconditions "
                 "and reports a lost race as ESTALE"),
    GCSFUSE_FLAG("disable-parallel-dirops", "file-system.disable-parallel-dirops", "false",
                 "lookups and listings always run in "
                 "parallel"),
    GCSFUSE_FLAG("experimental-enable-dentry-cache", "file-system.experimental-enable-dentry-cache",
                 NULL,
                 "the kernel name cache follows "
                 "--entry-timeout"),
    GCSFUSE_FLAG("experimental-enable-readdirplus", "file-system.experimental-enable-readdirplus",
                 NULL, "fluxfs always answers readdirplus"),
    GCSFUSE_FLAG("o-direct", "file-system.o-direct", "false",
                 "reads and writes use the page cache"),
    GCSFUSE_FLAG("enable-kernel-reader", "file-system.enable-kernel-reader", "false",
                 "fluxfs reads with its own parallel "
                 "readahead (--readahead-chunk, --readahead-max)"),
    GCSFUSE_VALUE("fuse-max-request-size-kb", "file-system.fuse-max-request-size-kb", "KB", "0",
                  "the kernel's FUSE request size is "
                  "used"),
    GCSFUSE_FLAG("experimental-o-direct", "file-system.experimental-o-direct", "false",
                 "reads and writes use the page cache"),
    GCSFUSE_FLAG("experimental-enable-json-read", "gcs-connection.experimental-enable-json-read",
                 NULL,
                 "fluxfs reads with JSON API media "
                 "downloads"),
    GCSFUSE_FLAG("file-cache-cache-file-for-range-read", "file-cache.cache-file-for-range-read",
                 NULL,
                 "the disk cache keeps a large "
                 "object once all of it was read, in any order"),
    GCSFUSE_FLAG("file-cache-enable-parallel-downloads", "file-cache.enable-parallel-downloads",
                 NULL,
                 "large reads are parallel "
                 "readahead GETs (--readahead-chunk, --readahead-max)"),
    GCSFUSE_FLAG("file-cache-enable-crc", "file-cache.enable-crc", NULL,
                 "whole-object reads are checked against the "
                 "object's CRC32C"),
    GCSFUSE_FLAG("file-cache-enable-o-direct", "file-cache.enable-o-direct", "false",
                 "the disk cache uses the page cache"),
    GCSFUSE_FLAG("file-cache-experimental-parallel-downloads-default-on",
                 "file-cache.experimental-parallel-downloads-default-on", NULL,
                 "large reads are parallel readahead GETs"),
    GCSFUSE_FLAG("file-cache-experimental-enable-chunk-cache",
                 "file-cache.experimental-enable-chunk-cache", NULL, "no chunk cache mode"),
    GCSFUSE_FLAG("file-cache-experimental-enable-block-cache",
                 "file-cache.experimental-enable-block-cache", NULL, "no block cache mode"),
    GCSFUSE_FLAG("disable-autoconfig", "disable-autoconfig", "true",
                 "fluxfs does not tune itself by machine type"),
    GCSFUSE_FLAG("enable-cloud-profiler", "cloud-profiler.enabled", "false", "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-cpu", "cloud-profiler.cpu", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-heap", "cloud-profiler.heap", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-allocated-heap", "cloud-profiler.allocated-heap", NULL,
                 "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-goroutines", "cloud-profiler.goroutines", NULL,
                 "no Cloud Profiler"),
    GCSFUSE_FLAG("cloud-profiler-mutex", "cloud-profiler.mutex", NULL, "no Cloud Profiler"),
    GCSFUSE_FLAG("enable-grpc-metrics", "metrics.enable-grpc-metrics", "false", "no gRPC"),
    GCSFUSE_FLAG("metrics-use-new-names", "metrics.use-new-names", NULL,
                 "/metrics uses gcsfuse's metric names"),
    GCSFUSE_FLAG("enable-dummy-io", "dummy-io.enable", "false", "fluxfs always transfers data"),
    GCSFUSE_FLAG("visualize-workload-insight", "workload-insight.visualize", "false",
                 "no workload insight output"),
    GCSFUSE_FLAG("log-rotate-compress", "logging.log-rotate.compress", NULL,
                 "fluxfs reopens --log-file on SIGHUP; rotate it "
                 "with logrotate"),
    GCSFUSE_FLAG("debug-http", NULL, "false", "--log-level trace logs every request"),
    GCSFUSE_FLAG("debug-fs", NULL, "false", "gcsfuse: unused"),
    GCSFUSE_FLAG("debug-fuse-errors", NULL, NULL, "gcsfuse: unused; errors are logged at warn"),
    GCSFUSE_FLAG("debug-invariants", "debug.exit-on-invariant-violation", "false",
                 "no invariant checker"),
    GCSFUSE_FLAG("debug-mutex", "debug.log-mutex", "false", "no mutex timing"),
    GCSFUSE_VALUE("profile", "profile", "NAME", NULL,
                  "fluxfs's defaults serve training, serving and "
                  "checkpointing; set options explicitly"),
    GCSFUSE_VALUE("machine-type", "machine-type", "TYPE", NULL,
                  "fluxfs does not tune itself by machine type"),
    GCSFUSE_VALUE("max-idle-conns-per-host", "gcs-connection.max-idle-conns-per-host", "N", NULL,
                  "idle connections are kept up to "
                  "--max-connections"),
    GCSFUSE_VALUE("max-retry-sleep", "gcs-retries.max-retry-sleep", "DURATION", NULL,
                  "backoff is exponential with full "
                  "jitter, bounded by --request-deadline"),
    GCSFUSE_VALUE("retry-multiplier", "gcs-retries.multiplier", "X", NULL,
                  "backoff is exponential with full jitter"),
    GCSFUSE_VALUE("max-retry-duration", NULL, "DURATION", "0|0s",
                  "gcsfuse: unused; see "
                  "--request-deadline"),
    GCSFUSE_VALUE("chunk-transfer-timeout-secs", "gcs-retries.chunk-transfer-timeout-secs",
                  "SECONDS", NULL,
                  "an upload part with no "
                  "progress for --stall-timeout is retried"),
    GCSFUSE_VALUE("read-stall-initial-req-timeout", "gcs-retries.read-stall.initial-req-timeout",
                  "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-max-req-timeout", "gcs-retries.read-stall.max-req-timeout",
                  "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-min-req-timeout", "gcs-retries.read-stall.min-req-timeout",
                  "DURATION", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-req-increase-rate", "gcs-retries.read-stall.req-increase-rate", "X",
                  NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-stall-req-target-percentile",
                  "gcs-retries.read-stall.req-target-percentile", "X", NULL, "see --stall-timeout"),
    GCSFUSE_VALUE("read-block-size-mb", "read.block-size-mb", "MB", NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("read-global-max-blocks", "read.global-max-blocks", "N", NULL,
                  "readahead memory is bounded by "
                  "--memory-limit"),
    GCSFUSE_VALUE("read-max-blocks-per-handle", "read.max-blocks-per-handle", "N", NULL,
                  "see --readahead-max"),
    GCSFUSE_VALUE("read-min-blocks-per-handle", "read.min-blocks-per-handle", "N", NULL,
                  "see --readahead-max"),
    GCSFUSE_VALUE("read-start-blocks-per-handle", "read.start-blocks-per-handle", "N", NULL,
                  "see --readahead-chunk"),
    GCSFUSE_VALUE("read-random-seek-threshold", "read.random-seek-threshold", "N", NULL,
                  "fluxfs detects random access "
                  "itself (--random-read-min)"),
    GCSFUSE_VALUE("read-inactive-stream-timeout", "read.inactive-stream-timeout", "DURATION", NULL,
                  "fluxfs uses ranged GETs "
                  "and keeps no idle streams"),
    GCSFUSE_VALUE("file-cache-download-chunk-size-mb", "file-cache.download-chunk-size-mb", "MB",
                  NULL, "see --readahead-chunk"),
    GCSFUSE_VALUE("file-cache-parallel-downloads-per-file",
                  "file-cache.parallel-downloads-per-file", "N", NULL, "see --readahead-max"),
    GCSFUSE_VALUE("file-cache-max-parallel-downloads", "file-cache.max-parallel-downloads", "N",
                  NULL, "see --max-connections"),
    GCSFUSE_VALUE("file-cache-write-buffer-size", "file-cache.write-buffer-size", "BYTES", NULL,
                  "no effect"),
    GCSFUSE_VALUE("file-cache-include-regex", "file-cache.include-regex", "REGEX", "",
                  "every object may be cached"),
    GCSFUSE_VALUE("file-cache-exclude-regex", "file-cache.exclude-regex", "REGEX", "",
                  "every object may be cached"),
    GCSFUSE_VALUE("type-cache-max-size-mb", "metadata-cache.type-cache-max-size-mb", "MB", NULL,
                  "types share the metadata cache "
                  "(--stat-cache-max-size-mb)"),
    GCSFUSE_VALUE("congestion-threshold", "file-system.congestion-threshold", "N", "0",
                  "the kernel's default is used"),
    GCSFUSE_VALUE("max-background", "file-system.max-background", "N", "0",
                  "the kernel's default is used"),
    GCSFUSE_VALUE("max-read-ahead-kb", "file-system.max-read-ahead-kb", "KB", "0",
                  "set read_ahead_kb in /sys/class/bdi"),
    GCSFUSE_VALUE("unused-mrd-cache-size", "file-system.unused-mrd-cache-size", "N", NULL,
                  "no Rapid storage readers"),
    GCSFUSE_VALUE("experimental-grpc-conn-pool-size", "gcs-connection.grpc-conn-pool-size", "N",
                  NULL, "no gRPC"),
    GCSFUSE_VALUE("experimental-local-socket-address",
                  "gcs-connection.experimental-local-socket-address", "ADDRESS", "",
                  "connections use the "
                  "default route"),
    GCSFUSE_VALUE("experimental-tracing-mode", "monitoring.experimental-tracing-mode", "MODE", "",
                  "no tracing export (see "
                  "--debug-gcs)"),
    GCSFUSE_VALUE("experimental-tracing-project-id", "monitoring.experimental-tracing-project-id",
                  "PROJECT", "", "no tracing export"),
    GCSFUSE_VALUE("experimental-tracing-sampling-ratio",
                  "monitoring.experimental-tracing-sampling-ratio", "X", "0", "no tracing export"),
    GCSFUSE_VALUE("trace-sampling-ratio", NULL, "X", "0", "no tracing export"),
    GCSFUSE_VALUE("cloud-profiler-label", "cloud-profiler.label", "LABEL", NULL,
                  "no Cloud Profiler"),
    GCSFUSE_VALUE("cloud-metrics-export-interval-secs",
                  "metrics.cloud-metrics-export-interval-secs", "SECONDS", "0",
                  "no Cloud Monitoring "
                  "export; use --prometheus-port"),
    GCSFUSE_VALUE("stackdriver-export-interval", "metrics.stackdriver-export-interval", "DURATION",
                  "0|0s",
                  "no Cloud Monitoring "
                  "export; use --prometheus-port"),
    GCSFUSE_VALUE("metrics-buffer-size", "metrics.buffer-size", "N", NULL,
                  "metrics are lock-free counters"),
    GCSFUSE_VALUE("metrics-workers", "metrics.workers", "N", NULL,
                  "metrics are lock-free counters"),
    GCSFUSE_VALUE("dummy-io-per-mb-latency", "dummy-io.per-mb-latency", "DURATION", NULL,
                  "fluxfs always transfers data"),
    GCSFUSE_VALUE("dummy-io-reader-latency", "dummy-io.reader-latency", "DURATION", NULL,
                  "fluxfs always transfers data"),
    GCSFUSE_VALUE("workload-insight-forward-merge-threshold-mb",
                  "workload-insight.forward-merge-threshold-mb", "MB", NULL,
                  "no workload insight output"),
    GCSFUSE_VALUE("workload-insight-output-file", "workload-insight.output-file", "PATH", NULL,
                  "no workload insight output"),
    GCSFUSE_VALUE("log-rotate-backup-file-count", "logging.log-rotate.backup-file-count", "N", NULL,
                  "fluxfs reopens --log-file on "
                  "SIGHUP; rotate it with logrotate"),
    GCSFUSE_VALUE("log-rotate-max-file-size-mb", "logging.log-rotate.max-file-size-mb", "MB", NULL,
                  "fluxfs reopens --log-file on "
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
