/* The gcs layer: one function per Cloud Storage call, over the http engine (http.h) and the
 * credential sources (auth.h). The only place that builds URLs, parses JSON/XML replies and
 * maps HTTP statuses and transport errors to errno:
 *
 *   200/206 -> 0           304 -> -EAGAIN (not modified)   400 -> -EINVAL
 *   401/403 -> -EACCES     404 -> -ENOENT                  409 -> -EEXIST
 *   412     -> -ESTALE     416 -> -ERANGE (callers treat reads past EOF as 0 bytes)
 *   429/5xx/timeouts/resets after the retry budget is spent -> -EIO
 *   deadline exceeded -> -ETIMEDOUT, cancelled -> -ECANCELED, out of memory -> -ENOMEM
 *
 * Every call has a deadline and retries idempotent requests (exponential backoff with jitter,
 * honouring Retry-After) on 408/429/5xx, resets, timeouts and stalled bodies. When a call fails
 * for good this layer logs one line naming the object, the call and the last status; callers
 * above do not log the same failure again.
 *
 * Threads: every function may be called from any thread. *_async functions return at once; their
 * callback runs later on the engine thread (gcs_list_async's: on one of the client's parse
 * threads, when the reply arrived) and must not block (no waiting on other requests): it copies
 * what it needs, or wakes a waiter. Blocking functions wait for their own request and
 * must not be called from a callback.
 *
 * Ownership: results handed to a callback are owned by the callback (free them with the
 * matching *_free or *_clear). Out-parameters of blocking calls are set only on success.
 * Object names are full names in the bucket (the mount prefix is added by the caller). */
#ifndef FLUXFS_GCS_H
#define FLUXFS_GCS_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fluxfs/metrics.h"

struct gcs_client;

struct gcs_client_config {
    const char *endpoint; /* e.g. "https://storage.googleapis.com"; NULL = that, or
                             STORAGE_EMULATOR_HOST when set (which also implies anonymous) */
    const char *bucket;
    bool anonymous;              /* no Authorization header */
    const char *key_file;        /* service account or authorized_user JSON; NULL = ADC order */
    const char *token_url;       /* override of the token endpoint of the key file; NULL = from
                                    the key file */
    bool token_url_is_source;    /* gcsfuse's --token-url without a key file: token_url itself
                                    hands out access tokens (GET, OAuth token JSON reply) */
    const char *billing_project; /* requester pays: userProject=P on every request; NULL = none */
    const char *user_agent;      /* NULL = "fluxfs/VERSION" */
    const char *ca_file;         /* trusted CAs (PEM) instead of the system bundle; NULL = it */
    const char *ca_dir;          /* a CA directory instead of the system one; NULL = it */
    int max_connections;         /* total connection cap; 0 = default (e.g. 64) */
    int max_retries;             /* per request; 0 = default (e.g. 6); -1 = none */
    double request_deadline_s;   /* total time for one call including retries; 0 = default 120 */
    double stall_timeout_s;      /* no body bytes for this long -> retry; 0 = default 30 */
    double connect_timeout_s;    /* 0 = default 10 */
    double limit_ops_per_sec;    /* calls started per second, all together; <= 0 = no limit */
    double limit_bytes_per_sec;  /* reply bytes received per second; <= 0 = no limit */
    bool log_requests;           /* gcsfuse's --debug_gcs: one info line per request attempt
                                    (at --log-level trace they are logged anyway) */
};

/* Creates the client and its engine thread; resolves credentials (a missing or unreadable key
 * file fails here with a message in *error, owned by the caller). No network traffic. */
int gcs_client_new(const struct gcs_client_config *config, struct gcs_client **out, char **error);
/* Cancels what is in flight (callbacks run with -ECANCELED), stops the engine. Accepts NULL. */
void gcs_client_free(struct gcs_client *client);

/* Checks at mount time that the bucket exists and credentials work (obtains a token, then a
 * one-item list of the bucket). 0, or a negative errno with a human-readable *error. */
int gcs_check_access(struct gcs_client *client, char **error);
/* The same check listing under prefix (NULL/"" = the whole bucket); *empty (may be NULL) is
 * set when the check passed and nothing lies under it. */
int gcs_check_access_prefix(struct gcs_client *client, const char *prefix, bool *empty,
                            char **error);

/* Request counters by kind, for logs and benchmarks. */
struct gcs_stats {
    uint64_t requests, retries, failures, bytes_downloaded, bytes_uploaded;
    uint64_t list_calls, get_calls, media_calls, write_calls;
    /* --limit-ops-per-sec / --limit-bytes-per-sec: calls that waited, transfers paused, and
     * their total waits in microseconds. */
    uint64_t limit_op_waits, limit_op_wait_us, limit_byte_pauses, limit_byte_wait_us;
    uint64_t connections; /* connections opened by the engine (TLS handshakes over HTTPS) */
};
void gcs_get_stats(struct gcs_client *client, struct gcs_stats *out);
/* Attempts answered 429 so far, retried or not: GETs and HEADs (reads), other methods (writes:
 * uploads, composes, deletes). Cheap (two atomic loads): callers sample it around their calls to
 * see whether the bucket is throttling them. */
void gcs_rate_limited(struct gcs_client *client, uint64_t *reads, uint64_t *writes);

/* Cloud Storage list prices, us-central1 Standard class, read 2025-06 from
 * cloud.google.com/storage/pricing: to check, not a quote (the emulator's README has the same
 * table, dated). A month is 30 days, as in Cloud Storage's pricing examples. */
#define GCS_PRICE_MONTH_SECONDS          (30.0 * 86400.0)
#define GCS_PRICE_STANDARD_PER_GIB_MONTH 0.020
#define GCS_PRICE_CLASS_A_PER_1000       0.005  /* insert, compose, copy, list, multipart parts */
#define GCS_PRICE_CLASS_B_PER_1000       0.0004 /* get, download, buckets.get */

/* What the mount has cost so far (gcs_cost.c): operations by billing class (every attempt the
 * server answered), the storage of its temporary objects (names under the prefix given to
 * gcs_set_temporary_prefix) while they lived and, on a soft-delete bucket, for the period
 * they stay soft-deleted, and the list-price dollars of both. */
struct gcs_cost_stats {
    uint64_t class_a, class_b, free_ops;
    uint64_t temporaries_live, temporaries_deleted;
    double temporary_gib_seconds;    /* live time of every temporary, ended or not */
    double soft_deleted_gib_seconds; /* deleted temporaries x the soft delete period */
    uint64_t noncurrent_bytes;       /* deleted temporaries kept by versioning (one month
                                      * of them is in dollars) */
    double dollars;
};
void gcs_get_cost(struct gcs_client *client, struct gcs_cost_stats *out);
/* Objects under prefix are the mount's temporaries (their storage is counted). */
void gcs_set_temporary_prefix(struct gcs_client *client, const char *prefix);

/* ---- object metadata ---- */

struct gcs_object {
    char *name; /* full object name */
    uint64_t size;
    int64_t generation;
    int64_t metageneration;
    int64_t updated_ns; /* "updated", nanoseconds since the epoch */
    int64_t mtime_ns;   /* custom metadata "gcsfuse_mtime" (RFC 3339, nanoseconds), else
                           "goog-reserved-file-mtime" (seconds), else updated_ns */
    bool has_crc32c;
    uint32_t crc32c;
    bool has_md5; /* "md5Hash" (object resource replies: get, insert, compose;
                     not from listings; composites have none) */
    uint8_t md5[16];
    char *content_encoding;  /* NULL when none */
    char *symlink_target;    /* custom metadata "gcsfuse_symlink_target", NULL when none */
    int64_t component_count; /* "componentCount" of a composite (objects.get/insert/compose
                                replies; not from listings); 0 when absent */
    bool symlink_in_content; /* gcloud's symlink ("goog-reserved-file-is-symlink": "true"): the
                                target is the object's bytes (only without symlink_target) */
};
void gcs_object_clear(struct gcs_object *obj); /* frees the members, accepts NULL */
void gcs_object_free(struct gcs_object *obj);  /* clear + free, accepts NULL */
/* A deep copy (g_new; gcs_object_free frees it). */
struct gcs_object *gcs_object_copy(const struct gcs_object *obj);

/* objects.get (metadata). -ENOENT when absent. */
int gcs_stat(struct gcs_client *client, const char *name, struct gcs_object *out);
typedef void (*gcs_stat_cb)(int err, struct gcs_object *obj /* owned by cb, NULL on error */,
                            void *user);
void gcs_stat_async(struct gcs_client *client, const char *name, gcs_stat_cb cb, void *user);

/* ---- listing ---- */

struct gcs_list_params {
    const char *prefix;       /* NULL = "" */
    const char *delimiter;    /* NULL = recursive */
    const char *start_offset; /* inclusive; NULL = none */
    const char *end_offset;   /* exclusive; NULL = none */
    const char *page_token;   /* NULL = first page */
    unsigned max_results;     /* 0 = 1000 */
    bool include_trailing_delimiter;
    bool include_folders_as_prefixes; /* with a delimiter: a hierarchical namespace's folders
                                       * (empty ones too) are prefixes; the client sets it
                                       * itself on such buckets (gcs_bucket_get_config) */
};
struct gcs_list_storage; /* where a parsed page keeps its objects (gcs layer only) */
struct gcs_list_page {
    /* struct gcs_object *. Owned by the page: a caller that keeps an object past
     * gcs_list_page_clear takes a copy (gcs_object_copy). The streaming parser keeps the
     * objects and their names in blocks of the page's storage (a few allocations a page, not
     * two per object); then the array has no free func. */
    GPtrArray *objects;
    struct gcs_list_storage *storage; /* NULL when each object is allocated on its own */
    GPtrArray *prefixes;              /* char *, free func g_free */
    char *next_page_token;            /* NULL on the last page */
    unsigned impossible_names;        /* entries left out: their names hold a NUL */
};
void gcs_list_page_clear(struct gcs_list_page *page); /* accepts zeroed pages */

int gcs_list(struct gcs_client *client, const struct gcs_list_params *params,
             struct gcs_list_page *out);
/* Calls visit for every object whose name starts with prefix (recursive, page after page; the
 * object is the page's, valid during the call). visit returns 0 to go on, > 0 to stop (the
 * listing's result is then 0), < 0 to stop with that error. Blocking: not from the engine
 * thread. */
typedef int (*gcs_list_visit)(const struct gcs_object *object, void *user);
int gcs_list_each(struct gcs_client *client, const char *prefix, gcs_list_visit visit, void *user);
/* Every object whose name starts with prefix (recursive, page after page), appended to
 * objects (struct gcs_object *, taken by the array's free func). max: more than this many
 * stops the listing with -EFBIG (SIZE_MAX: no cap). Blocking: not from the engine thread. */
int gcs_list_all(struct gcs_client *client, const char *prefix, size_t max, GPtrArray *objects);
typedef void (*gcs_list_cb)(int err, struct gcs_list_page *page /* owned by cb, NULL on error */,
                            void *user);
void gcs_list_async(struct gcs_client *client, const struct gcs_list_params *params, gcs_list_cb cb,
                    void *user);

/* ---- reads ---- */

/* Reads [offset, offset+len) of generation (0 = live) into buf with one ranged GET of the stored
 * bytes (Accept-Encoding: gzip, so no decompressive transcoding). Sets *got to the number of bytes
 * (short only at end of object; 0 when offset >= size). A changed generation gives -ENOENT
 * (the pinned generation is gone) so callers revalidate. When the read covers the whole object
 * and expected_crc32c is given (has_expected_crc32c), the bytes are verified (-EIO on mismatch).*/
struct gcs_read_request {
    const char *name;
    int64_t generation;
    uint64_t offset;
    size_t len;
    void *buf; /* len bytes, owned by the caller, must outlive the request */
    bool has_expected_crc32c;
    uint32_t expected_crc32c;
    uint64_t object_size;     /* when known (> 0 or whole_object), lets the crc check happen */
    bool whole_object;        /* offset 0 and len >= size: verify crc32c when known */
    bool caller_checks_bytes; /* the caller checks every byte itself (a composite's pieces
                               * against their objects' crc32c): no second pass over them
                               * here; a changed generation is still -ENOENT */
    enum metrics_read_type read_type; /* for gcs_download_bytes_count; default sequential */
};
int gcs_read(struct gcs_client *client, const struct gcs_read_request *req, size_t *got);
typedef void (*gcs_read_cb)(int err, size_t got, void *user);
void gcs_read_async(struct gcs_client *client, const struct gcs_read_request *req, gcs_read_cb cb,
                    void *user);

/* ---- writes ----
 *
 * Non-idempotent calls are retried only when a generation precondition makes a repeat safe
 * (Cloud Storage's rule); upload parts and deletes of a pinned generation are idempotent.
 * Request bodies are never copied: they are read from the caller's buffer, or with pread from
 * a file descriptor (staging files), and re-read from the start on a retry. A lost race on a
 * precondition is -ESTALE. Every upload carries the CRC32C the caller computed while writing
 * (x-goog-hash / crc32c in the metadata) so the server rejects corrupted bytes (-EIO).
 *
 * Retries, precisely (transient = 408/429/5xx except 501/505, resets, timeouts, stalls):
 *   gcs_upload, gcs_compose, gcs_copy, gcs_multipart_complete: only with has_if_generation_match,
 *     else one attempt (a 503 is -EIO at once);
 *   gcs_patch: always (it sets the fields it names to given values: idempotent);
 *   gcs_delete(_async): only with generation > 0 or has_if_generation_match; a retry answered
 *     404 counts as done (0);
 *   "a retry" includes curl's own resend of a request whose reused connection died before any
 *     byte of reply (the engine counts it as an attempt: the server may have acted on it);
 *   parts, begin (multipart and resumable), abort, cancel, list, permissions: always;
 *   resumable chunks: a failed chunk is followed by a status query and a resend from the offset
 *     the session persisted (never a blind resend).
 * Errors: 0; -EINVAL (bad arguments, checked before any request; 400); -EIO (checksum mismatch,
 * transient errors after the retries, malformed replies, a vanished multipart upload or
 * resumable session); -ESTALE (412); -ENOENT (a missing object or pinned source generation:
 * stat/delete/compose/copy/patch); -EACCES (401/403); -ETIMEDOUT (deadline); -ECANCELED
 * (client freed); -EBUSY (gcs_compose of a temporary only: refused for the rate, nothing made);
 * -ENOSYS (gcs_multipart_begin only: 404/405/501 or a 400 "not implemented");
 * -errno of a failed pread of a body fd. Each failure logs one line at the end of the call.
 * A multipart complete is checked against the CRC32C its parts add up to (from each part's
 * body crc32c or the server's x-goog-hash); a complete whose reply was lost and whose retry finds
 * NoSuchUpload succeeds only when the live object is new and has that CRC32C.
 * Likewise an upload or a compose with ifGenerationMatch whose reply was lost: the retry is
 * answered 412 (the first attempt made the object), so after a 412 on a retry the live object
 * is read and accepted (0, *out = it) when it is what this call sent: for an upload the size
 * and the CRC32C of the body; for a compose the sources' summed size, combined CRC32C and
 * summed component count (sources read back live; a source changed since means -ESTALE). */

struct gcs_write_preconditions {
    bool has_if_generation_match;
    int64_t if_generation_match; /* 0 = the object must not exist yet */
    bool has_if_metageneration_match;
    int64_t if_metageneration_match;
};

/* Attributes stored with a new object or set by a patch. */
struct gcs_write_attrs {
    const char *content_type; /* NULL = application/octet-stream */
    bool has_mtime;
    int64_t mtime_ns;           /* stored as gcsfuse does, "gcsfuse_mtime" (RFC 3339 with
                                   nanoseconds), and as gcloud does,
                                   "goog-reserved-file-mtime" (seconds) */
    const char *symlink_target; /* stored as gcsfuse does: "gcsfuse_symlink_target" and
                                   gcloud's "goog-reserved-file-is-symlink": "true" (the
                                   object's bytes must then be the target); NULL = none */
    const char *storage_class;  /* NULL = the bucket's default class */
    /* gcs_compose only: the destination is a temporary the caller can do without (it falls
     * back to plain GETs). A 429 is not retried: the call ends at once, leaving the bucket's
     * write rate to others, with -EBUSY when that first and only attempt was refused (the
     * server made nothing: there is nothing to delete), and the failure is logged at debug
     * (the caller counts it). Other transient failures are retried as usual. */
    bool temporary;
};

/* The destination resource of compose temporaries (prefetch, miss batches): STANDARD, so a
 * Nearline/Coldline/Archive bucket's default class adds no minimum storage duration to an
 * object that lives for one GET; temporary (see above). */
extern const struct gcs_write_attrs gcs_temporary_attrs;

/* Where a request body comes from: a buffer (data != NULL) or a file range (fd >= 0). */
struct gcs_body {
    const void *data; /* not copied: must stay valid until the call completes */
    int fd;           /* -1 when data is used */
    uint64_t fd_offset;
    uint64_t len;
    bool has_crc32c;
    uint32_t crc32c; /* of these len bytes */
};

/* One-request upload (JSON objects.insert, uploadType=multipart: metadata + bytes), for small
 * files. *out (optional) gets the new object's metadata. */
int gcs_upload(struct gcs_client *client, const char *name, const struct gcs_body *body,
               const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
               struct gcs_object *out);
void gcs_upload_async(struct gcs_client *client, const char *name, const struct gcs_body *body,
                      const struct gcs_write_attrs *attrs,
                      const struct gcs_write_preconditions *pre, gcs_stat_cb cb, void *user);

/* XML API multipart upload: parts 1..10000, each >= 5 MiB except the last. A 404/501 on begin
 * means the server lacks the API (-ENOSYS), so the writer can fall back. */
int gcs_multipart_begin(struct gcs_client *client, const char *name,
                        const struct gcs_write_attrs *attrs, char **upload_id);
typedef void (*gcs_part_cb)(int err, const char *etag /* valid during the call */, void *user);
void gcs_multipart_put_part_async(struct gcs_client *client, const char *name,
                                  const char *upload_id, int part_number,
                                  const struct gcs_body *body, gcs_part_cb cb, void *user);
int gcs_multipart_put_part(struct gcs_client *client, const char *name, const char *upload_id,
                           int part_number, const struct gcs_body *body, char **etag);
struct gcs_completed_part {
    int part_number;
    const char *etag;
};
/* Parts in ascending order. pre applies to the destination (x-goog-if-generation-match). */
int gcs_multipart_complete(struct gcs_client *client, const char *name, const char *upload_id,
                           const struct gcs_completed_part *parts, int part_count,
                           const struct gcs_write_preconditions *pre, struct gcs_object *out);
int gcs_multipart_abort(struct gcs_client *client, const char *name, const char *upload_id);
/* Multipart uploads in progress whose object names start with prefix (XML GET /B?uploads),
 * for cleanup after a crash: two parallel arrays of char * (free func g_free). */
int gcs_multipart_list(struct gcs_client *client, const char *prefix, GPtrArray **names,
                       GPtrArray **upload_ids);

/* Resumable upload (fallback where the XML API is missing). total_size < 0 = not known yet. */
int gcs_resumable_begin(struct gcs_client *client, const char *name,
                        const struct gcs_write_attrs *attrs,
                        const struct gcs_write_preconditions *pre, int64_t total_size,
                        char **session_url);
/* Sends body at offset (a multiple of 256 KiB unless final). When final, total = offset +
 * body->len and *out (optional) receives the object. Retries query the persisted offset. */
int gcs_resumable_put(struct gcs_client *client, const char *session_url, uint64_t offset,
                      const struct gcs_body *body, bool final, struct gcs_object *out);
int gcs_resumable_cancel(struct gcs_client *client, const char *session_url);

/* objects.compose: 1..32 sources (generation 0 = live), destination preconditions. */
struct gcs_compose_source {
    const char *name;
    int64_t generation;
};
int gcs_compose(struct gcs_client *client, const char *dest_name,
                const struct gcs_compose_source *sources, int source_count,
                const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
                struct gcs_object *out);
void gcs_compose_async(struct gcs_client *client, const char *dest_name,
                       const struct gcs_compose_source *sources, int source_count,
                       const struct gcs_write_attrs *attrs,
                       const struct gcs_write_preconditions *pre, gcs_stat_cb cb, void *user);

/* Server-side copy with objects.rewrite (loops on rewriteToken), source pinned by generation
 * (0 = live), pre on the destination. A 412 on a retry (with has_if_generation_match: the
 * first attempt's reply lost, the copy made) reads the destination and the source back and
 * succeeds (*out = the destination) when the destination holds the source's bytes: same
 * size, CRC32C, MD5 when both have one, symlink target and content encoding; else -ESTALE. */
int gcs_copy(struct gcs_client *client, const char *src_name, int64_t src_generation,
             const char *dest_name, const struct gcs_write_preconditions *pre,
             struct gcs_object *out);

/* objects.delete; generation 0 = live. -ENOENT when already gone. */
int gcs_delete(struct gcs_client *client, const char *name, int64_t generation,
               const struct gcs_write_preconditions *pre);
typedef void (*gcs_done_cb)(int err, void *user);
/* The delete of a compose temporary, a name only this mount ever writes: retried like a pinned
 * delete even with generation 0 (nothing else can be at the name; a retry answered 404 is
 * done), and a failure logged at debug: the caller sends it again later (temp_reaper.h). */
void gcs_delete_temporary_async(struct gcs_client *client, const char *name, int64_t generation,
                                gcs_done_cb cb, void *user);
void gcs_delete_async(struct gcs_client *client, const char *name, int64_t generation,
                      gcs_done_cb cb, void *user);

/* objects.patch of the attributes given (mtime, symlink target, content type): values, not
 * changes, so it is retried like a read. */
int gcs_patch(struct gcs_client *client, const char *name, const struct gcs_write_attrs *attrs,
              const struct gcs_write_preconditions *pre, struct gcs_object *out);

/* The bucket settings that decide what a temporary object costs (buckets.get). */
struct gcs_bucket_config {
    char storage_class[16];      /* default class of new objects, e.g. "STANDARD" */
    int64_t soft_delete_seconds; /* 0 = soft delete off */
    bool versioning;
    int64_t retention_seconds; /* retention policy's period; 0 = none */
    bool default_event_based_hold;
    bool autoclass;
    bool hierarchical_namespace; /* folders are real: renamed atomically (gcs_folder_rename) */
};
/* buckets.get, once, no retries beyond the usual; -EACCES when storage.buckets.get is not
 * held. *out is set only on success. */
int gcs_bucket_get_config(struct gcs_client *client, struct gcs_bucket_config *out);

/* Folders of a hierarchical-namespace bucket (names end in '/', relative to the bucket).
 * gcs_folder_insert: folders.insert (with its parents); -EEXIST when it exists.
 * gcs_folder_delete: folders.delete; -ENOENT when absent, -ENOTEMPTY when objects or folders
 * are below it. gcs_folder_rename: folders.rename, which moves the folder, its subfolders and
 * every object below at once (all or nothing), then waits for its long-running operation
 * (operations.get, polled) to finish; -ENOENT when src is absent, -EEXIST when dest exists,
 * the operation's error otherwise. Blocking: not from the engine thread. */
int gcs_folder_insert(struct gcs_client *client, const char *folder);
int gcs_folder_delete(struct gcs_client *client, const char *folder);
int gcs_folder_rename(struct gcs_client *client, const char *src, const char *dest);

/* buckets.testIamPermissions: granted[i] tells whether permissions[i] is held. */
int gcs_test_permissions(struct gcs_client *client, const char *const *permissions, int count,
                         bool *granted);

#endif
