/* The metrics registry (see fluxfs/metrics.h): fixed arrays of atomics and their Prometheus
 * text rendering. */
#include "fluxfs/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static const uint64_t boundaries[METRICS_BOUNDARY_COUNT] = {
    1,   2,   3,   4,   5,   6,   8,   10,  13,  16,  20,   25,   30,   40,    50,    65,    80,
    100, 130, 160, 200, 250, 300, 400, 500, 650, 800, 1000, 2000, 5000, 10000, 20000, 50000, 100000,
};

struct fs_op_series {
    _Atomic uint64_t count;
    _Atomic uint64_t errors;
    _Atomic uint64_t error_by_category[METRICS_ERR_CATEGORY_COUNT];
    _Atomic uint64_t unsupported; /* ENOTTY to an ioctl: an answer, not an error */
    struct metrics_histogram latency_us;
};

struct gcs_method_series {
    _Atomic uint64_t count;
    _Atomic uint64_t failures;
    _Atomic uint64_t retries;
    struct metrics_histogram latency_ms;
};

static struct {
    struct fs_op_series fs[METRICS_FS_OP_COUNT];
    struct gcs_method_series gcs[METRICS_GCS_METHOD_COUNT];
    _Atomic uint64_t retries[METRICS_RETRY_CAUSE_COUNT];
    _Atomic uint64_t counters[METRICS_COUNTER_COUNT];
    _Atomic uint64_t download_bytes[METRICS_READ_TYPE_COUNT];
} registry;

static const struct {
    const char *label; /* gcsfuse's fs_op where it has one */
    const char *key;
} fs_op_names[METRICS_FS_OP_COUNT] = {
    [METRICS_FS_LOOKUP] = {"LookUpInode", "lookup"},
    [METRICS_FS_FORGET] = {"ForgetInode", "forget"},
    [METRICS_FS_BATCH_FORGET] = {"BatchForget", "batch_forget"},
    [METRICS_FS_GETATTR] = {"GetInodeAttributes", "getattr"},
    [METRICS_FS_SETATTR] = {"SetInodeAttributes", "setattr"},
    [METRICS_FS_READLINK] = {"ReadSymlink", "readlink"},
    [METRICS_FS_MKNOD] = {"MkNode", "mknod"},
    [METRICS_FS_MKDIR] = {"MkDir", "mkdir"},
    [METRICS_FS_UNLINK] = {"Unlink", "unlink"},
    [METRICS_FS_RMDIR] = {"RmDir", "rmdir"},
    [METRICS_FS_SYMLINK] = {"CreateSymlink", "symlink"},
    [METRICS_FS_RENAME] = {"Rename", "rename"},
    [METRICS_FS_LINK] = {"CreateLink", "link"},
    [METRICS_FS_OPEN] = {"OpenFile", "open"},
    [METRICS_FS_READ] = {"ReadFile", "read"},
    [METRICS_FS_WRITE] = {"WriteFile", "write"},
    [METRICS_FS_FLUSH] = {"FlushFile", "flush"},
    [METRICS_FS_RELEASE] = {"ReleaseFileHandle", "release"},
    [METRICS_FS_FSYNC] = {"SyncFile", "fsync"},
    [METRICS_FS_OPENDIR] = {"OpenDir", "opendir"},
    [METRICS_FS_READDIR] = {"ReadDir", "readdir"},
    [METRICS_FS_READDIRPLUS] = {"ReadDirPlus", "readdirplus"},
    [METRICS_FS_RELEASEDIR] = {"ReleaseDirHandle", "releasedir"},
    [METRICS_FS_FSYNCDIR] = {"SyncDir", "fsyncdir"},
    [METRICS_FS_STATFS] = {"StatFS", "statfs"},
    [METRICS_FS_SETXATTR] = {"SetXattr", "setxattr"},
    [METRICS_FS_GETXATTR] = {"GetXattr", "getxattr"},
    [METRICS_FS_LISTXATTR] = {"ListXattr", "listxattr"},
    [METRICS_FS_REMOVEXATTR] = {"RemoveXattr", "removexattr"},
    [METRICS_FS_ACCESS] = {"Access", "access"},
    [METRICS_FS_CREATE] = {"CreateFile", "create"},
    [METRICS_FS_GETLK] = {"GetLock", "getlk"},
    [METRICS_FS_SETLK] = {"SetLock", "setlk"},
    [METRICS_FS_FLOCK] = {"Flock", "flock"},
    [METRICS_FS_BMAP] = {"Bmap", "bmap"},
    [METRICS_FS_IOCTL] = {"Ioctl", "ioctl"},
    [METRICS_FS_POLL] = {"Poll", "poll"},
    [METRICS_FS_FALLOCATE] = {"Fallocate", "fallocate"},
    [METRICS_FS_COPY_FILE_RANGE] = {"CopyFileRange", "copy_file_range"},
    [METRICS_FS_LSEEK] = {"Lseek", "lseek"},
    [METRICS_FS_INIT] = {"Init", "init"},
    [METRICS_FS_DESTROY] = {"Destroy", "destroy"},
    [METRICS_FS_INTERRUPT] = {"Interrupt", "interrupt"},
    [METRICS_FS_OTHERS] = {"Others", "others"},
};

static const char *const category_labels[METRICS_ERR_CATEGORY_COUNT] = {
    [METRICS_ERR_DEVICE] = "DEVICE_ERROR",
    [METRICS_ERR_DIR_NOT_EMPTY] = "DIR_NOT_EMPTY",
    [METRICS_ERR_FILE_DIR] = "FILE_DIR_ERROR",
    [METRICS_ERR_FILE_EXISTS] = "FILE_EXISTS",
    [METRICS_ERR_INTERRUPT] = "INTERRUPT_ERROR",
    [METRICS_ERR_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [METRICS_ERR_INVALID_OPERATION] = "INVALID_OPERATION",
    [METRICS_ERR_IO] = "IO_ERROR",
    [METRICS_ERR_MISC] = "MISC_ERROR",
    [METRICS_ERR_NETWORK] = "NETWORK_ERROR",
    [METRICS_ERR_NOT_A_DIR] = "NOT_A_DIR",
    [METRICS_ERR_NOT_IMPLEMENTED] = "NOT_IMPLEMENTED",
    [METRICS_ERR_NO_FILE_OR_DIR] = "NO_FILE_OR_DIR",
    [METRICS_ERR_PERM] = "PERM_ERROR",
    [METRICS_ERR_RESOURCE] = "PROCESS_RESOURCE_MGMT_ERROR",
    [METRICS_ERR_TOO_MANY_OPEN_FILES] = "TOO_MANY_OPEN_FILES",
};

static const char *const gcs_method_labels[METRICS_GCS_METHOD_COUNT] = {
    [METRICS_GCS_LIST_OBJECTS] = "ListObjects",
    [METRICS_GCS_STAT_OBJECT] = "StatObject",
    [METRICS_GCS_NEW_READER] = "NewReader",
    [METRICS_GCS_CREATE_OBJECT] = "CreateObject",
    [METRICS_GCS_CREATE_OBJECT_CHUNK_WRITER] = "CreateObjectChunkWriter",
    [METRICS_GCS_UPLOAD_CHUNK] = "UploadChunk",
    [METRICS_GCS_CANCEL_UPLOAD] = "CancelUpload",
    [METRICS_GCS_COMPOSE_OBJECTS] = "ComposeObjects",
    [METRICS_GCS_COPY_OBJECT] = "CopyObject",
    [METRICS_GCS_DELETE_OBJECT] = "DeleteObject",
    [METRICS_GCS_UPDATE_OBJECT] = "UpdateObject",
    [METRICS_GCS_GET_BUCKET] = "GetBucket",
    [METRICS_GCS_TEST_PERMISSIONS] = "TestPermissions",
    [METRICS_GCS_MULTIPART_CREATE] = "MultipartUploadCreate",
    [METRICS_GCS_MULTIPART_PART] = "MultipartUploadPart",
    [METRICS_GCS_MULTIPART_COMPLETE] = "MultipartUploadComplete",
    [METRICS_GCS_MULTIPART_ABORT] = "MultipartUploadAbort",
    [METRICS_GCS_MULTIPART_LIST] = "ListMultipartUploads",
    [METRICS_GCS_CREATE_FOLDER] = "CreateFolder",
    [METRICS_GCS_RENAME_FOLDER] = "RenameFolder",
    [METRICS_GCS_DELETE_FOLDER] = "DeleteFolder",
    [METRICS_GCS_GET_OPERATION] = "GetOperation",
    [METRICS_GCS_OTHERS] = "Others",
};

static const char *const retry_cause_labels[METRICS_RETRY_CAUSE_COUNT] = {
    [METRICS_RETRY_RATE_LIMITED] = "rate_limited",
    [METRICS_RETRY_SERVER_ERROR] = "server_error",
    [METRICS_RETRY_TIMEOUT] = "timeout",
    [METRICS_RETRY_STALLED] = "stalled",
    [METRICS_RETRY_CONNECTION] = "connection",
    [METRICS_RETRY_GARBLED] = "garbled_reply",
    [METRICS_RETRY_OTHER] = "other",
};

static const char *const read_type_labels[METRICS_READ_TYPE_COUNT] = {
    [METRICS_READ_SEQUENTIAL] = "Sequential",
    [METRICS_READ_RANDOM] = "Random",
    [METRICS_READ_PARALLEL] = "Parallel",
};

static void add(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static uint64_t load(const _Atomic uint64_t *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

void metrics_histogram_observe(struct metrics_histogram *histogram, uint64_t value)
{
    /* Binary search for the first boundary >= value (Prometheus buckets are "le"). */
    size_t low = 0, high = METRICS_BOUNDARY_COUNT;
    while (low < high) {
        size_t mid = (low + high) / 2;
        if (boundaries[mid] < value)
            low = mid + 1;
        else
            high = mid;
    }
    add(&histogram->bucket[low], 1);
    add(&histogram->sum, value);
}

uint64_t metrics_histogram_count(const struct metrics_histogram *histogram)
{
    uint64_t total = 0;
    for (size_t i = 0; i <= METRICS_BOUNDARY_COUNT; i++)
        total += load(&histogram->bucket[i]);
    return total;
}

const char *metrics_fs_op_label(enum metrics_fs_op op)
{
    return op < METRICS_FS_OP_COUNT ? fs_op_names[op].label : "Others";
}

const char *metrics_fs_op_key(enum metrics_fs_op op)
{
    return op < METRICS_FS_OP_COUNT ? fs_op_names[op].key : "others";
}

enum metrics_error_category metrics_error_category_of(int err)
{
    switch (err) {
    case ENOENT:
        return METRICS_ERR_NO_FILE_OR_DIR;
    case EEXIST:
        return METRICS_ERR_FILE_EXISTS;
    case ENOTEMPTY:
        return METRICS_ERR_DIR_NOT_EMPTY;
    case ENOTDIR:
        return METRICS_ERR_NOT_A_DIR;
    case EISDIR:
        return METRICS_ERR_FILE_DIR;
    case EIO:
        return METRICS_ERR_IO;
    case EINVAL:
    case ERANGE:
    case ENAMETOOLONG:
    case E2BIG:
        return METRICS_ERR_INVALID_ARGUMENT;
    case ENOSYS:
    case ENOTSUP:
    case ENOTTY:
        return METRICS_ERR_NOT_IMPLEMENTED;
    case EPERM:
    case EACCES:
    case EROFS:
        return METRICS_ERR_PERM;
    case EINTR:
    case ECANCELED:
        return METRICS_ERR_INTERRUPT;
    case ENOMEM:
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EAGAIN:
        return METRICS_ERR_RESOURCE;
    case EMFILE:
    case ENFILE:
        return METRICS_ERR_TOO_MANY_OPEN_FILES;
    case ENETDOWN:
    case ENETUNREACH:
    case ENETRESET:
    case ECONNABORTED:
    case ECONNRESET:
    case ECONNREFUSED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case EHOSTDOWN:
        return METRICS_ERR_NETWORK;
    case ENODEV:
    case ENXIO:
        return METRICS_ERR_DEVICE;
    case EBADF:
    case ESTALE:
    case EXDEV:
    case EBUSY:
    case ENODATA:
    case EOVERFLOW:
        return METRICS_ERR_INVALID_OPERATION;
    default:
        return METRICS_ERR_MISC;
    }
}

const char *metrics_error_category_label(enum metrics_error_category category)
{
    return category < METRICS_ERR_CATEGORY_COUNT ? category_labels[category] : "MISC_ERROR";
}

static struct fs_op_series *fs_series(enum metrics_fs_op op)
{
    return &registry.fs[op < METRICS_FS_OP_COUNT ? op : METRICS_FS_OTHERS];
}

void metrics_fs_op_received(enum metrics_fs_op op)
{
    add(&fs_series(op)->count, 1);
}

void metrics_fs_op_failed(enum metrics_fs_op op, int err)
{
    if (err <= 0)
        return;
    struct fs_op_series *series = fs_series(op);
    if (op == METRICS_FS_IOCTL && err == ENOTTY) {
        /* "Not a terminal" (CPython's isatty at every open), an unknown command: what any
         * filesystem answers, not a failure. Counted apart so that errors mean trouble. */
        add(&series->unsupported, 1);
        return;
    }
    add(&series->errors, 1);
    add(&series->error_by_category[metrics_error_category_of(err)], 1);
}

void metrics_fs_op_latency(enum metrics_fs_op op, uint64_t latency_us)
{
    metrics_histogram_observe(&fs_series(op)->latency_us, latency_us);
}

void metrics_fs_op_done(enum metrics_fs_op op, int err, uint64_t latency_us)
{
    metrics_fs_op_received(op);
    metrics_fs_op_failed(op, err);
    metrics_fs_op_latency(op, latency_us);
}

uint64_t metrics_fs_op_count(enum metrics_fs_op op)
{
    return op < METRICS_FS_OP_COUNT ? load(&registry.fs[op].count) : 0;
}

uint64_t metrics_fs_op_errors(enum metrics_fs_op op)
{
    return op < METRICS_FS_OP_COUNT ? load(&registry.fs[op].errors) : 0;
}

uint64_t metrics_fs_op_unsupported(enum metrics_fs_op op)
{
    return op < METRICS_FS_OP_COUNT ? load(&registry.fs[op].unsupported) : 0;
}

const char *metrics_gcs_method_label(enum metrics_gcs_method method)
{
    return method < METRICS_GCS_METHOD_COUNT ? gcs_method_labels[method] : "Others";
}

bool metrics_gcs_method_uploads(enum metrics_gcs_method method)
{
    return method == METRICS_GCS_CREATE_OBJECT || method == METRICS_GCS_UPLOAD_CHUNK ||
           method == METRICS_GCS_MULTIPART_PART;
}

const char *metrics_retry_cause_label(enum metrics_retry_cause cause)
{
    return cause < METRICS_RETRY_CAUSE_COUNT ? retry_cause_labels[cause] : "other";
}

void metrics_gcs_request_done(enum metrics_gcs_method method, bool failed, uint64_t latency_ms)
{
    if (method >= METRICS_GCS_METHOD_COUNT)
        method = METRICS_GCS_OTHERS;
    struct gcs_method_series *series = &registry.gcs[method];
    add(&series->count, 1);
    metrics_histogram_observe(&series->latency_ms, latency_ms);
    if (failed)
        add(&series->failures, 1);
}

void metrics_gcs_request_failed(enum metrics_gcs_method method)
{
    if (method >= METRICS_GCS_METHOD_COUNT)
        method = METRICS_GCS_OTHERS;
    add(&registry.gcs[method].failures, 1);
}

void metrics_gcs_retry(enum metrics_gcs_method method, enum metrics_retry_cause cause)
{
    if (method >= METRICS_GCS_METHOD_COUNT)
        method = METRICS_GCS_OTHERS;
    if (cause >= METRICS_RETRY_CAUSE_COUNT)
        cause = METRICS_RETRY_OTHER;
    add(&registry.gcs[method].retries, 1);
    add(&registry.retries[cause], 1);
}

uint64_t metrics_gcs_request_count(enum metrics_gcs_method method)
{
    return method < METRICS_GCS_METHOD_COUNT ? load(&registry.gcs[method].count) : 0;
}

uint64_t metrics_gcs_request_failures(enum metrics_gcs_method method)
{
    return method < METRICS_GCS_METHOD_COUNT ? load(&registry.gcs[method].failures) : 0;
}

uint64_t metrics_gcs_retries(enum metrics_retry_cause cause)
{
    return cause < METRICS_RETRY_CAUSE_COUNT ? load(&registry.retries[cause]) : 0;
}

void metrics_add(enum metrics_counter counter, uint64_t n)
{
    if (counter < METRICS_COUNTER_COUNT && n > 0)
        add(&registry.counters[counter], n);
}

uint64_t metrics_get(enum metrics_counter counter)
{
    return counter < METRICS_COUNTER_COUNT ? load(&registry.counters[counter]) : 0;
}

void metrics_download_bytes(enum metrics_read_type type, uint64_t bytes)
{
    if (type < METRICS_READ_TYPE_COUNT && bytes > 0)
        add(&registry.download_bytes[type], bytes);
}

uint64_t metrics_download_bytes_get(enum metrics_read_type type)
{
    return type < METRICS_READ_TYPE_COUNT ? load(&registry.download_bytes[type]) : 0;
}

void metrics_reset(void)
{
    memset(&registry, 0, sizeof(registry));
}

/* ---- rendering ---- */

void metrics_render_family(GString *out, const char *name, const char *type, const char *help)
{
    g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_render_sample(GString *out, const char *name, const char *labels, uint64_t value)
{
    if (labels && *labels)
        g_string_append_printf(out, "%s{%s} %" PRIu64 "\n", name, labels, value);
    else
        g_string_append_printf(out, "%s %" PRIu64 "\n", name, value);
}

/* label_name="label_value" buckets of one histogram series, then _sum and _count. */
static void render_histogram(GString *out, const char *name, const char *label_name,
                             const char *label_value, const struct metrics_histogram *histogram)
{
    uint64_t cumulative = 0;
    for (size_t i = 0; i < METRICS_BOUNDARY_COUNT; i++) {
        cumulative += load(&histogram->bucket[i]);
        g_string_append_printf(out, "%s_bucket{%s=\"%s\",le=\"%" PRIu64 "\"} %" PRIu64 "\n", name,
                               label_name, label_value, boundaries[i], cumulative);
    }
    cumulative += load(&histogram->bucket[METRICS_BOUNDARY_COUNT]);
    g_string_append_printf(out, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, label_name,
                           label_value, cumulative);
    g_string_append_printf(out, "%s_sum{%s=\"%s\"} %" PRIu64 "\n", name, label_name, label_value,
                           load(&histogram->sum));
    g_string_append_printf(out, "%s_count{%s=\"%s\"} %" PRIu64 "\n", name, label_name, label_value,
                           cumulative);
}

static void render_fs(GString *out)
{
    metrics_render_family(out, "fs_ops_count", "counter",
                          "The cumulative number of ops processed by the file system.");
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        uint64_t count = load(&registry.fs[op].count);
        if (count > 0)
            g_string_append_printf(out, "fs_ops_count{fs_op=\"%s\"} %" PRIu64 "\n",
                                   fs_op_names[op].label, count);
    }
    metrics_render_family(out, "fs_ops_error_count", "counter",
                          "The cumulative number of errors generated by file system operations.");
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        if (load(&registry.fs[op].errors) == 0)
            continue;
        for (int category = 0; category < METRICS_ERR_CATEGORY_COUNT; category++) {
            uint64_t count = load(&registry.fs[op].error_by_category[category]);
            if (count > 0)
                g_string_append_printf(
                    out, "fs_ops_error_count{fs_error_category=\"%s\",fs_op=\"%s\"} %" PRIu64 "\n",
                    category_labels[category], fs_op_names[op].label, count);
        }
    }
    metrics_render_family(out, "fs_ops_unsupported_count", "counter",
                          "Requests answered as not supported (ENOTTY to an ioctl, e.g. isatty): "
                          "not errors, so not in fs_ops_error_count.");
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        uint64_t count = load(&registry.fs[op].unsupported);
        if (count > 0)
            g_string_append_printf(out, "fs_ops_unsupported_count{fs_op=\"%s\"} %" PRIu64 "\n",
                                   fs_op_names[op].label, count);
    }
    metrics_render_family(out, "fs_ops_latency", "histogram",
                          "The cumulative distribution of file system operation latencies "
                          "(microseconds).");
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        if (load(&registry.fs[op].count) > 0)
            render_histogram(out, "fs_ops_latency", "fs_op", fs_op_names[op].label,
                             &registry.fs[op].latency_us);
    }
}

static void render_gcs(GString *out)
{
    metrics_render_family(out, "gcs_request_count", "counter",
                          "The cumulative number of GCS requests processed along with the GCS "
                          "method.");
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        uint64_t count = load(&registry.gcs[m].count);
        if (count > 0)
            g_string_append_printf(out, "gcs_request_count{gcs_method=\"%s\"} %" PRIu64 "\n",
                                   gcs_method_labels[m], count);
    }
    metrics_render_family(out, "gcs_request_latencies", "histogram",
                          "The cumulative distribution of the GCS request latencies "
                          "(milliseconds, retries included).");
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        if (load(&registry.gcs[m].count) > 0)
            render_histogram(out, "gcs_request_latencies", "gcs_method", gcs_method_labels[m],
                             &registry.gcs[m].latency_ms);
    }
    metrics_render_family(out, "fluxfs_gcs_request_failure_count", "counter",
                          "GCS requests that failed after their retries, by GCS method.");
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        uint64_t count = load(&registry.gcs[m].failures);
        if (count > 0)
            g_string_append_printf(
                out, "fluxfs_gcs_request_failure_count{gcs_method=\"%s\"} %" PRIu64 "\n",
                gcs_method_labels[m], count);
    }
    metrics_render_family(out, "gcs_retry_count", "counter",
                          "The cumulative number of retry requests made to GCS.");
    uint64_t stalled = load(&registry.retries[METRICS_RETRY_STALLED]);
    uint64_t others = 0;
    for (int c = 0; c < METRICS_RETRY_CAUSE_COUNT; c++)
        if (c != METRICS_RETRY_STALLED)
            others += load(&registry.retries[c]);
    if (others > 0)
        metrics_render_sample(out, "gcs_retry_count", "retry_error_category=\"OTHER_ERRORS\"",
                              others);
    if (stalled > 0)
        metrics_render_sample(out, "gcs_retry_count",
                              "retry_error_category=\"STALLED_READ_REQUEST\"", stalled);
    metrics_render_family(out, "fluxfs_gcs_retry_count", "counter",
                          "Retried GCS request attempts by cause.");
    for (int c = 0; c < METRICS_RETRY_CAUSE_COUNT; c++) {
        char labels[64];
        g_snprintf(labels, sizeof(labels), "cause=\"%s\"", retry_cause_labels[c]);
        metrics_render_sample(out, "fluxfs_gcs_retry_count", labels, load(&registry.retries[c]));
    }
    metrics_render_family(out, "gcs_read_bytes_count", "counter",
                          "The cumulative number of bytes read from GCS objects.");
    metrics_render_sample(out, "gcs_read_bytes_count", "reader=\"Others\"",
                          metrics_get(METRICS_GCS_READ_BYTES));
    metrics_render_family(out, "gcs_download_bytes_count", "counter",
                          "The cumulative number of bytes downloaded from GCS along with type.");
    for (int t = 0; t < METRICS_READ_TYPE_COUNT; t++) {
        char labels[64];
        g_snprintf(labels, sizeof(labels), "read_type=\"%s\"", read_type_labels[t]);
        metrics_render_sample(out, "gcs_download_bytes_count", labels,
                              load(&registry.download_bytes[t]));
    }
    metrics_render_family(out, "gcs_reader_count", "counter",
                          "The cumulative number of GCS object readers opened or closed.");
    metrics_render_sample(out, "gcs_reader_count", "io_method=\"opened\"",
                          metrics_get(METRICS_GCS_READERS_OPENED));
    metrics_render_sample(out, "gcs_reader_count", "io_method=\"closed\"",
                          metrics_get(METRICS_GCS_READERS_CLOSED));
    static const struct {
        enum metrics_counter counter;
        const char *name;
        const char *help;
    } plain[] = {
        {METRICS_GCS_BYTES_DOWNLOADED, "fluxfs_gcs_received_bytes_count",
         "Body bytes received from GCS, listings and metadata included."},
        {METRICS_GCS_BYTES_UPLOADED, "fluxfs_gcs_sent_bytes_count", "Body bytes sent to GCS."},
        {METRICS_UPLOAD_PARTS, "fluxfs_upload_parts_count",
         "Upload requests carrying object bytes that succeeded (single uploads, resumable "
         "chunks, multipart parts)."},
        {METRICS_UPLOAD_BYTES, "fluxfs_upload_bytes_count",
         "Body bytes of those upload requests (object bytes and their framing)."},
        {METRICS_UPLOAD_RETRIES, "fluxfs_upload_retry_count",
         "Retried attempts of upload requests."},
        {METRICS_UPLOAD_FAILURES, "fluxfs_upload_failure_count",
         "Upload requests that failed after their retries."},
        {METRICS_UPLOAD_COMMITS, "fluxfs_upload_commit_count", "Objects created by uploads."},
        {METRICS_LIST_PAGES, "fluxfs_list_pages_count", "Listing pages received."},
        {METRICS_LIST_PARALLEL_RANGES, "fluxfs_list_parallel_ranges_count",
         "Key ranges listed in parallel by split listings."},
        {METRICS_PREFETCH_DIR_LISTS, "fluxfs_prefetch_dir_lists_count",
         "Hinted paths resolved through their directory's listing instead of a metadata "
         "request each."},
        {METRICS_REFETCHED_BYTES, "fluxfs_refetched_bytes_count",
         "Object bytes fetched again after fluxfs had served them and let them go, because "
         "the kernel asked for them again (its page cache dropped them)."},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(plain); i++) {
        metrics_render_family(out, plain[i].name, "counter", plain[i].help);
        metrics_render_sample(out, plain[i].name, NULL, metrics_get(plain[i].counter));
    }
}

void metrics_render(GString *out)
{
    render_fs(out);
    render_gcs(out);
}
