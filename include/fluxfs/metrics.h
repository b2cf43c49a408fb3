/* Process-wide metrics of the fluxfs daemon, served in the Prometheus text format
 * (--prometheus-port) and summarised in MOUNT/.fluxfs/status.
 *
 * Every series lives in a fixed array indexed by its label values (enums below), so recording is
 * one relaxed atomic add (two or three for a histogram): no lock, no allocation, safe from any
 * thread, including the engine thread and FUSE workers. Rendering reads the same atomics; a
 * scrape sees each counter at some moment during the scrape (counters never go backwards).
 *
 * Names and labels follow gcsfuse where the meaning is the same (fs_ops_count{fs_op},
 * fs_ops_error_count{fs_op,fs_error_category}, fs_ops_latency{fs_op} in microseconds,
 * gcs_request_count{gcs_method}, gcs_request_latencies{gcs_method} in milliseconds,
 * gcs_read_bytes_count{reader}, gcs_download_bytes_count{read_type}, gcs_reader_count{io_method},
 * gcs_retry_count{retry_error_category}); fluxfs's own carry the prefix fluxfs_.
 *
 * The registry is one static object: one daemon serves one mount. metrics_reset (unit tests)
 * zeroes it. */
#ifndef FLUXFS_METRICS_H
#define FLUXFS_METRICS_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* gcsfuse's boundaries (its metrics.yaml "common_boundaries"), for both latency histograms. */
#define METRICS_BOUNDARY_COUNT 34

struct metrics_histogram {
    _Atomic uint64_t bucket[METRICS_BOUNDARY_COUNT + 1]; /* not cumulative; last = above all */
    _Atomic uint64_t sum;
};

void metrics_histogram_observe(struct metrics_histogram *histogram, uint64_t value);
uint64_t metrics_histogram_count(const struct metrics_histogram *histogram);

/* FUSE request kinds: every operation of the low-level API the kernel can send (SETLKW counts
 * as SETLK, RENAME2 as RENAME; INTERRUPT, which libfuse answers itself, is counted where
 * libfuse reads the device; NOTIFY_REPLY is libfuse's own business: fluxfs sends no
 * retrieve). */
enum metrics_fs_op {
    METRICS_FS_LOOKUP,
    METRICS_FS_FORGET,
    METRICS_FS_BATCH_FORGET,
    METRICS_FS_GETATTR,
    METRICS_FS_SETATTR,
    METRICS_FS_READLINK,
    METRICS_FS_MKNOD,
    METRICS_FS_MKDIR,
    METRICS_FS_UNLINK,
    METRICS_FS_RMDIR,
    METRICS_FS_SYMLINK,
    METRICS_FS_RENAME,
    METRICS_FS_LINK,
    METRICS_FS_OPEN,
    METRICS_FS_READ,
    METRICS_FS_WRITE,
    METRICS_FS_FLUSH,
    METRICS_FS_RELEASE,
    METRICS_FS_FSYNC,
    METRICS_FS_OPENDIR,
    METRICS_FS_READDIR,
    METRICS_FS_READDIRPLUS,
    METRICS_FS_RELEASEDIR,
    METRICS_FS_FSYNCDIR,
    METRICS_FS_STATFS,
    METRICS_FS_SETXATTR,
    METRICS_FS_GETXATTR,
    METRICS_FS_LISTXATTR,
    METRICS_FS_REMOVEXATTR,
    METRICS_FS_ACCESS,
    METRICS_FS_CREATE,
    METRICS_FS_GETLK,
    METRICS_FS_SETLK,
    METRICS_FS_FLOCK,
    METRICS_FS_BMAP,
    METRICS_FS_IOCTL,
    METRICS_FS_POLL,
    METRICS_FS_FALLOCATE,
    METRICS_FS_COPY_FILE_RANGE,
    METRICS_FS_LSEEK,
    METRICS_FS_INIT,
    METRICS_FS_DESTROY,
    METRICS_FS_INTERRUPT, /* the kernel asks to abandon a request its caller was signalled in */
    METRICS_FS_OTHERS,    /* an error reply outside any operation (none today) */
    METRICS_FS_OP_COUNT
};
/* gcsfuse's fs_op value (e.g. "LookUpInode"); its own name for kinds gcsfuse folds into
 * "Others" (e.g. "Ioctl", "StatFS"). */
const char *metrics_fs_op_label(enum metrics_fs_op op);
/* Short lower-case name for .fluxfs/status keys (e.g. "lookup", "ioctl"). */
const char *metrics_fs_op_key(enum metrics_fs_op op);

/* gcsfuse's fs_error_category values. */
enum metrics_error_category {
    METRICS_ERR_DEVICE,
    METRICS_ERR_DIR_NOT_EMPTY,
    METRICS_ERR_FILE_DIR,
    METRICS_ERR_FILE_EXISTS,
    METRICS_ERR_INTERRUPT,
    METRICS_ERR_INVALID_ARGUMENT,
    METRICS_ERR_INVALID_OPERATION,
    METRICS_ERR_IO,
    METRICS_ERR_MISC,
    METRICS_ERR_NETWORK,
    METRICS_ERR_NOT_A_DIR,
    METRICS_ERR_NOT_IMPLEMENTED,
    METRICS_ERR_NO_FILE_OR_DIR,
    METRICS_ERR_PERM,
    METRICS_ERR_RESOURCE,
    METRICS_ERR_TOO_MANY_OPEN_FILES,
    METRICS_ERR_CATEGORY_COUNT
};
enum metrics_error_category metrics_error_category_of(int err); /* err > 0, an errno */
const char *metrics_error_category_label(enum metrics_error_category category);

/* One FUSE request answered: err 0 for success, else the errno of the error reply. */
/* A request is counted when it is received and its error when the error reply is made (both
 * before the kernel hears the answer, so a scrape after the syscall returns sees them); its
 * latency when its handler returns. metrics_fs_op_done does all three at once. */
void metrics_fs_op_received(enum metrics_fs_op op);
void metrics_fs_op_failed(enum metrics_fs_op op, int err);
void metrics_fs_op_latency(enum metrics_fs_op op, uint64_t latency_us);
void metrics_fs_op_done(enum metrics_fs_op op, int err, uint64_t latency_us);
uint64_t metrics_fs_op_count(enum metrics_fs_op op);
uint64_t metrics_fs_op_errors(enum metrics_fs_op op);
/* ENOTTY replies to ioctls (isatty, unknown commands): counted here, not in the errors. */
uint64_t metrics_fs_op_unsupported(enum metrics_fs_op op);

/* Cloud Storage calls by gcsfuse's gcs_method (and fluxfs's own for calls gcsfuse does not
 * make, e.g. the XML multipart upload's). */
enum metrics_gcs_method {
    METRICS_GCS_LIST_OBJECTS,
    METRICS_GCS_STAT_OBJECT,
    METRICS_GCS_NEW_READER,
    METRICS_GCS_CREATE_OBJECT,
    METRICS_GCS_CREATE_OBJECT_CHUNK_WRITER,
    METRICS_GCS_UPLOAD_CHUNK,
    METRICS_GCS_CANCEL_UPLOAD,
    METRICS_GCS_COMPOSE_OBJECTS,
    METRICS_GCS_COPY_OBJECT,
    METRICS_GCS_DELETE_OBJECT,
    METRICS_GCS_UPDATE_OBJECT,
    METRICS_GCS_GET_BUCKET,
    METRICS_GCS_TEST_PERMISSIONS,
    METRICS_GCS_MULTIPART_CREATE,
    METRICS_GCS_MULTIPART_PART,
    METRICS_GCS_MULTIPART_COMPLETE,
    METRICS_GCS_MULTIPART_ABORT,
    METRICS_GCS_MULTIPART_LIST,
    METRICS_GCS_CREATE_FOLDER,
    METRICS_GCS_RENAME_FOLDER,
    METRICS_GCS_DELETE_FOLDER,
    METRICS_GCS_GET_OPERATION,
    METRICS_GCS_OTHERS,
    METRICS_GCS_METHOD_COUNT
};
const char *metrics_gcs_method_label(enum metrics_gcs_method method);
/* Whether the method uploads object bytes (fluxfs_upload_* counters). */
bool metrics_gcs_method_uploads(enum metrics_gcs_method method);

/* Why a request was retried (fluxfs_gcs_retries{cause}); gcsfuse's gcs_retry_count folds all
 * but STALLED into OTHER_ERRORS. */
enum metrics_retry_cause {
    METRICS_RETRY_RATE_LIMITED, /* 429 */
    METRICS_RETRY_SERVER_ERROR, /* 5xx, 408 */
    METRICS_RETRY_TIMEOUT,      /* curl timeout */
    METRICS_RETRY_STALLED,      /* no body byte for the stall timeout */
    METRICS_RETRY_CONNECTION,   /* connect, reset, send/receive errors */
    METRICS_RETRY_GARBLED,      /* a reply that was not valid HTTP, a short body */
    METRICS_RETRY_OTHER,
    METRICS_RETRY_CAUSE_COUNT
};
const char *metrics_retry_cause_label(enum metrics_retry_cause cause);

/* gcsfuse's read_type of gcs_download_bytes_count. gcsfuse counts a reader as Random once it
 * seeks and reads little per seek; fluxfs labels each fetch by what readahead judged the read
 * that caused it (readahead.h): a read that does not continue the previous one is Random. */
enum metrics_read_type {
    METRICS_READ_SEQUENTIAL, /* a sequential read of an open file and its readahead; whole
                                small objects */
    METRICS_READ_RANDOM,     /* a random read and the skips prefetched after it */
    METRICS_READ_PARALLEL,   /* prefetch and batched misses: many objects at once */
    METRICS_READ_TYPE_COUNT
};

/* A finished Cloud Storage call (all its attempts): latency from submission to completion. */
void metrics_gcs_request_done(enum metrics_gcs_method method, bool failed, uint64_t latency_ms);
/* A request counted done (not failed) whose caller found later that it failed after all. */
void metrics_gcs_request_failed(enum metrics_gcs_method method);
void metrics_gcs_retry(enum metrics_gcs_method method, enum metrics_retry_cause cause);
uint64_t metrics_gcs_request_count(enum metrics_gcs_method method);
uint64_t metrics_gcs_request_failures(enum metrics_gcs_method method);
uint64_t metrics_gcs_retries(enum metrics_retry_cause cause);

/* Plain counters and gauges of fluxfs's own (fluxfs_*), bumped where the work happens. */
enum metrics_counter {
    METRICS_GCS_READ_BYTES,     /* object bytes received by media reads (gcs_read_bytes_count) */
    METRICS_GCS_READERS_OPENED, /* media GETs started (gcs_reader_count{io_method="opened"}) */
    METRICS_GCS_READERS_CLOSED,
    METRICS_GCS_BYTES_DOWNLOADED, /* every body byte received, listings and metadata included */
    METRICS_GCS_BYTES_UPLOADED,   /* every body byte sent */
    METRICS_UPLOAD_PARTS,         /* upload requests that carried object bytes and succeeded */
    METRICS_UPLOAD_BYTES,         /* object bytes of those */
    METRICS_UPLOAD_RETRIES,       /* retried attempts of upload requests */
    METRICS_UPLOAD_FAILURES,      /* upload requests that failed after their retries */
    METRICS_UPLOAD_COMMITS,       /* objects created (single-request, finished resumable or
                                     multipart upload, compose of parts) */
    METRICS_LIST_PAGES,           /* list pages received */
    METRICS_LIST_PARALLEL_RANGES, /* key ranges listed in parallel (split listings) */
    METRICS_PREFETCH_DIR_LISTS,   /* hinted directories resolved with one listing (served
                                     from the listing cache or fetched) instead of a
                                     metadata request per file */
    METRICS_REFETCHED_BYTES,      /* object bytes fetched again after the reader served them
                                     and let them go (reader_stats.refetched_bytes): what
                                     the page cache dropped costs a second fetch */
    METRICS_COUNTER_COUNT
};
void metrics_add(enum metrics_counter counter, uint64_t n);
uint64_t metrics_get(enum metrics_counter counter);

void metrics_download_bytes(enum metrics_read_type type, uint64_t bytes);
uint64_t metrics_download_bytes_get(enum metrics_read_type type);

/* Appends the families above in the Prometheus text exposition format (version 0.0.4). */
void metrics_render(GString *out);

/* Helpers for families rendered elsewhere (the fs layer's snapshots of its modules' stats):
 * "# HELP" and "# TYPE" lines, then one sample. */
void metrics_render_family(GString *out, const char *name, const char *type, const char *help);
void metrics_render_sample(GString *out, const char *name, const char *labels, uint64_t value);

void metrics_reset(void);

#endif
