/* Inside the gcs layer: the client struct and the pure helpers (URLs, JSON, status -> errno)
 * that the unit tests call directly. Not for other layers: they use fluxfs/gcs.h. */
#ifndef FLUXFS_GCS_INTERNAL_H
#define FLUXFS_GCS_INTERNAL_H

#include <stdatomic.h>

#include <yajl/yajl_parse.h>

#include "fluxfs/auth.h"
#include "fluxfs/gcs.h"
#include "fluxfs/http.h"
#include "fluxfs/wait_group.h"

/* Immutable after gcs_client_new except the atomic counters. */
/* gcs_cost.c: what the mount has cost (gcs_get_cost). */
enum gcs_op_class { GCS_OP_CLASS_A, GCS_OP_CLASS_B, GCS_OP_FREE, GCS_OP_CLASS_COUNT };
struct gcs_cost {
    _Atomic uint64_t ops[GCS_OP_CLASS_COUNT];
    GMutex lock;            /* guards the fields below */
    char *temporary_prefix; /* NULL = nothing tracked */
    GHashTable *live;       /* name -> struct temporary (gcs_cost.c) */
    int64_t soft_delete_seconds;
    bool versioning; /* a deleted temporary stays as a noncurrent version */
    double ended_gib_seconds, soft_deleted_gib_seconds;
    uint64_t temporaries_deleted, noncurrent_bytes;
};
void gcs_cost_init(struct gcs_cost *cost);
void gcs_cost_clear(struct gcs_cost *cost);
enum gcs_op_class gcs_op_class_of(enum metrics_gcs_method method);
struct gcs_client;
/* An attempt the server answered (the observer). */
void gcs_cost_count(struct gcs_client *client, enum metrics_gcs_method method);
/* An object created or deleted (the calls that learn it); only temporaries are kept. */
void gcs_cost_note_created(struct gcs_client *client, const char *name, uint64_t size);
void gcs_cost_note_deleted(struct gcs_client *client, const char *name);
void gcs_cost_note_soft_delete(struct gcs_client *client, int64_t seconds);
void gcs_cost_note_versioning(struct gcs_client *client, bool versioning);

struct gcs_client {
    struct http_engine *engine;
    struct auth_provider *auth;
    char *endpoint;        /* "scheme://host[:port]", no trailing slash */
    char *billing_project; /* requester pays: userProject on every request; NULL = none */
    char *bucket;
    unsigned max_retries;
    double deadline_s;
    double stall_s;
    bool log_requests; /* --debug_gcs */
    _Atomic uint64_t list_calls, get_calls, media_calls, write_calls;
    _Atomic uint64_t rate_limited_reads, rate_limited_writes; /* attempts answered 429 */
    /* What each XML multipart upload's parts were (length, crc32c), by upload id, so that a
     * complete can know the whole object's crc32c (gcs_multipart.c). part_lock guards it. */
    GMutex part_lock;
    GHashTable *part_records;
    /* Threads that parse list replies (gcs_list_parse_run) and run their callbacks. */
    GThreadPool *parse_pool;
    struct gcs_cost cost;                /* gcs_cost.c */
    _Atomic bool hierarchical_namespace; /* learnt from gcs_bucket_get_config: listings with a
                                          * delimiter include the folders as prefixes */
};

/* ---- gcs_observe.c ---- */

/* Which call a request is, from its method and URL; *object (g_malloc'd, or NULL) is the
 * decoded object name. METRICS_GCS_METHOD_COUNT for a URL outside the endpoint (the token
 * endpoint). */
enum metrics_gcs_method gcs_classify_request(const char *endpoint, enum http_method method,
                                             const char *url, char **object);
enum metrics_retry_cause gcs_retry_cause(long status, int curl_code, bool stalled);
/* The engine observer (user = the client): metrics and request logs. */
void gcs_observe_attempt(const struct http_attempt_report *report, void *user);
/* A 412 on a retry of an upload, compose or copy (rewrite), or a 404 on a retry of an XML
 * multipart complete, may answer a commit whose first reply was lost: the call reads the object
 * back and decides. The observer counts such a final reply as no failure; the call counts it
 * (gcs_count_deferred_failure) only when the object is not its own. A 404 on a retried delete
 * is the delete done (the retry is only made for a pinned generation): never a failure. */
bool gcs_failure_deferred(enum metrics_gcs_method method, long status, unsigned attempt);
void gcs_count_deferred_failure(enum metrics_gcs_method method);

/* gcs_objects.c: the parse pool's function. */
void gcs_list_parse_run(gpointer job, gpointer pool_user);

/* ---- gcs_url.c ---- */

/* "host:port" (STORAGE_EMULATOR_HOST style) -> "http://host:port"; drops a trailing '/' and a
 * trailing "/storage/v1" (gcsfuse's --custom-endpoint form). g_malloc'd. */
char *gcs_endpoint_normalize(const char *endpoint);
/* ENDPOINT/storage/v1/b/BUCKET/o/NAME with both percent-encoded (RFC 3986 unreserved kept). */
char *gcs_url_object(const char *endpoint, const char *bucket, const char *name);
/* The media URL: object URL + ?alt=media[&generation=G] (G > 0). */
char *gcs_url_media(const char *endpoint, const char *bucket, const char *name, int64_t generation);
/* A partial response (the `fields` parameter): only what gcs_json_parse_list reads, about a
 * quarter of a full object resource's bytes to send and parse. */
#define GCS_OBJECT_FIELDS                                                                          \
    "name,size,generation,metageneration,updated,crc32c,contentEncoding,metadata"
#define GCS_LIST_FIELDS "nextPageToken,prefixes,items(" GCS_OBJECT_FIELDS ")"
/* ENDPOINT/storage/v1/b/BUCKET/o?maxResults=N[&prefix=..][&delimiter=..]...&fields=... */
char *gcs_url_list(const char *endpoint, const char *bucket, const struct gcs_list_params *params);

/* ENDPOINT/upload/storage/v1/b/BUCKET/o?uploadType=TYPE */
char *gcs_url_upload(const char *endpoint, const char *bucket, const char *upload_type);
/* The XML API's path-style URL ENDPOINT/BUCKET/NAME: each segment of the name percent-encoded,
 * the '/' between segments kept. */
char *gcs_url_xml_object(const char *endpoint, const char *bucket, const char *name);
/* The url with "userProject=P" appended (requester pays) when project is set; a copy of url
 * otherwise. Upload session URLs (upload_id=) are left as the server gave them. */
char *gcs_url_billed(const char *url, const char *project);
/* Appends ifGenerationMatch / ifMetagenerationMatch ('?' or '&' as the URL needs). */
void gcs_url_append_preconditions(GString *url, const struct gcs_write_preconditions *pre);

/* ---- gcs_json.c ---- */

#define GCS_JSON_CAP (32u << 20) /* the largest reply body parsed */

/* Each parser takes NUL-terminated text of len bytes. 0, -EIO (malformed or a required field
 * missing), -EMSGSIZE (over GCS_JSON_CAP). Out-params set only on success. */
int gcs_json_parse_object(const char *json, size_t len, struct gcs_object *out);
int gcs_json_parse_list(const char *json, size_t len, struct gcs_list_page *out);
/* Frees a page's storage: its objects' own members, the blocks, the names (accepts NULL). */
void gcs_list_storage_free(struct gcs_list_storage *storage);
/* The same parse driven by yajl_parse instead of gcs_json_scan: the reference the unit tests
 * compare gcs_json_parse_list with. */
int gcs_json_parse_list_yajl(const char *json, size_t len, struct gcs_list_page *out);
/* gcs_json_list.c parses list pages with a streaming parser that keeps only what fluxfs reads;
 * this is the same parse over yajl's tree, kept as the reference the unit tests compare with
 * (results equal, except that a name or prefix holding a NUL is refused by the streaming one). */
int gcs_json_parse_list_tree(const char *json, size_t len, struct gcs_list_page *out);
/* ---- gcs_json_scan.c ---- */

/* Scans the whole JSON text json[0..len) and calls yajl's callbacks for it, accepting,
 * rejecting and decoding exactly what yajl_parse + yajl_complete_parse do with
 * yajl_allow_comments (strings without escapes are passed straight from json). Numbers go to
 * yajl_number as text (yajl_integer and yajl_double are not used); NULL callbacks are skipped.
 * Returns GCS_JSON_SCAN_OK, _ERROR (not JSON) or _CANCELED (a callback returned 0). */
#define GCS_JSON_SCAN_OK       0
#define GCS_JSON_SCAN_ERROR    (-1)
#define GCS_JSON_SCAN_CANCELED (-2)
int gcs_json_scan(const char *json, size_t len, const yajl_callbacks *callbacks, void *ctx);

/* error.message of a Cloud Storage error reply, or NULL. g_malloc'd. */
char *gcs_json_error_message(const char *json, size_t len);
/* RFC 3339 ("2024-05-01T12:00:00.123456789Z", offsets "+02:00") -> ns since the epoch.
 * 0 or -EINVAL. */
int gcs_parse_rfc3339(const char *text, int64_t *ns);
/* Go's time.RFC3339Nano of a UTC time, as gcsfuse writes its mtime: "2024-05-01T12:00:00Z",
 * "2024-05-01T12:00:00.1234Z" (trailing zeros of the fraction dropped). */
#define GCS_RFC3339_MAX 48
void gcs_format_rfc3339_nano(int64_t ns, char out[GCS_RFC3339_MAX]);
/* The POSIX attributes other tools keep in custom metadata, read into obj (whose
 * symlink_target is already set from GCS_META_SYMLINK): mtime from gcsfuse's RFC 3339
 * GCS_META_MTIME_RFC first (nanoseconds), else gcloud's and older gcsfuse's seconds in
 * GCS_META_MTIME, else "updated"; a gcloud symlink (GCS_META_IS_SYMLINK "true", target as the
 * object's bytes) when there is no gcsfuse target. Any argument may be NULL. */
void gcs_object_apply_posix_metadata(struct gcs_object *obj, const char *mtime_s,
                                     const char *mtime_rfc, const char *is_symlink);

/* Replies of the write calls: objects.rewrite ({done, rewriteToken, resource}) and
 * buckets.testIamPermissions ({permissions: [...]}; *granted is a GPtrArray of g_free'd names). */
int gcs_json_parse_rewrite(const char *json, size_t len, bool *done, char **token,
                           struct gcs_object *resource);
int gcs_json_parse_permissions(const char *json, size_t len, GPtrArray **granted);
/* A buckets.get reply: the settings of struct gcs_bucket_config (absent ones: 0/false). */
int gcs_json_parse_bucket_config(const char *json, size_t len, struct gcs_bucket_config *out);
/* A storage#operation (folders.rename): done, the id (the name's last segment, g_malloc'd),
 * and its error (google.rpc.Status code, 0 = none; message g_malloc'd or NULL). */
int gcs_json_parse_operation(const char *json, size_t len, bool *done, char **id,
                             int64_t *error_code, char **error_message);

/* ---- gcs_write_format.c: pure builders and parsers of the write calls ---- */

#define GCS_DEFAULT_CONTENT_TYPE "application/octet-stream"
#define GCS_META_MTIME           "goog-reserved-file-mtime" /* seconds: gcloud's key (gcsfuse's once) */
#define GCS_META_MTIME_RFC       "gcsfuse_mtime" /* RFC 3339 with nanoseconds: gcsfuse's key */
#define GCS_META_SYMLINK         "gcsfuse_symlink_target"        /* gcsfuse's key */
#define GCS_META_IS_SYMLINK      "goog-reserved-file-is-symlink" /* gcloud's: "true", target = bytes */
#define GCS_MAX_PARTS            10000
#define GCS_MIN_PART_SIZE        (5u << 20)
#define GCS_MAX_COMPOSE_SOURCES  32
#define GCS_RESUMABLE_UNIT       (256u << 10)
#define GCS_XML_CAP              (1u << 20) /* XML replies of begin/complete/errors */
#define GCS_XML_LIST_CAP         (8u << 20) /* one ListMultipartUploadsResult page */
#define GCS_XML_TEXT_CAP         8192       /* one element's raw text (names: <= 1024 bytes) */
#define GCS_UPLOAD_LIST_PAGE_CAP 10000      /* entries in one list page */
#define GCS_UPLOAD_LIST_CAP      100000     /* entries in all pages of gcs_multipart_list */

/* Object resource members: name (when not NULL), contentType (always for a new object, the
 * default when attrs has none; for a patch only when given), crc32c (base64, big-endian) when
 * has_crc32c, metadata {goog-reserved-file-mtime: seconds, gcsfuse_symlink_target} for what
 * attrs gives. *first tracks the comma. */
void gcs_append_object_fields(GString *out, bool *first, const char *name,
                              const struct gcs_write_attrs *attrs, bool is_patch, bool has_crc32c,
                              uint32_t crc32c);
/* The same members as one JSON object. g_malloc'd. */
char *gcs_object_metadata_json(const char *name, const struct gcs_write_attrs *attrs, bool is_patch,
                               bool has_crc32c, uint32_t crc32c);
/* objects.compose body: sourceObjects (name, generation when > 0) and destination attrs. */
char *gcs_compose_body_json(const struct gcs_compose_source *sources, int count,
                            const struct gcs_write_attrs *attrs);

/* The framing of a multipart/related upload around the media bytes, which are sent between
 * preamble and epilogue without being copied. */
struct gcs_related_frame {
    char *preamble; /* boundary, JSON part, boundary, media part headers */
    size_t preamble_len;
    char *epilogue; /* CRLF, closing boundary */
    size_t epilogue_len;
    char *content_type_header; /* "Content-Type: multipart/related; boundary=..." */
};
void gcs_related_frame_build(const char *metadata_json, const char *media_type,
                             const char *boundary, struct gcs_related_frame *out);
void gcs_related_frame_clear(struct gcs_related_frame *frame); /* accepts NULL */
char *gcs_related_boundary_new(void);

/* XML replies. Each takes len bytes (no NUL needed), rejects embedded NULs, documents over its cap
 * (-EMSGSIZE), a missing root element, unterminated elements, unknown entities and markup inside
 * a leaf (-EIO). Out-params set only on success. */
int gcs_xml_parse_initiate(const char *xml, size_t len, char **upload_id);
struct gcs_upload_list {
    GPtrArray *names;      /* char *, g_free */
    GPtrArray *upload_ids; /* char *, g_free, parallel to names */
    GArray *initiated_ns;  /* int64_t, parallel: <Initiated>; 0 when absent or malformed */
    bool truncated;
    char *next_key_marker; /* set when truncated */
    char *next_upload_id_marker;
};
int gcs_xml_parse_upload_list(const char *xml, size_t len, struct gcs_upload_list *out);
void gcs_upload_list_clear(struct gcs_upload_list *list); /* accepts zeroed lists */
/* <Error><Code>..</Code><Message>..</Message></Error>: *code, and *message (NULL when absent;
 * message may be NULL to skip it). */
int gcs_xml_parse_error(const char *xml, size_t len, char **code, char **message);
/* CompleteMultipartUpload document. -EINVAL for no parts, more than 10,000, numbers out of
 * 1..10000 or not ascending, missing ETags. */
int gcs_xml_complete_body(const struct gcs_completed_part *parts, int count, char **out,
                          size_t *out_len);

/* The Range header of a resumable upload's 308 ("bytes=0-N" -> N + 1; NULL -> 0). 0 or -EIO. */
int gcs_parse_resumable_range(const char *header, uint64_t *persisted);

/* ---- gcs_request.c: sending write requests ---- */

/* What a finished request left, copied so that it outlives the completion. */
struct gcs_reply {
    int err; /* 0 or the errno (gcs_errno_from_write_response, auth errors) */
    long status;
    int curl_code;
    unsigned attempts;
    bool transient; /* the last attempt failed in a way worth trying again */
    char *body;     /* 2xx body or the error reply; NUL-terminated, "" when none */
    size_t body_len;
    char *error_text;                                  /* curl's message, or the credential error */
    char *location, *range, *etag, *generation_header; /* reply headers, NULL when absent */
    bool has_crc32c;                                   /* x-goog-hash crc32c of the reply */
    uint32_t crc32c;
    char *retry_after;
    bool rate_limited_to_deadline; /* http_response's: 429s until the deadline */
};
void gcs_reply_clear(struct gcs_reply *reply); /* accepts zeroed replies */

/* A request with the client's deadline, stall timeout and retry budget. idempotent decides
 * whether the engine retries it. */
struct http_request *gcs_request_new(struct gcs_client *client, enum http_method method,
                                     const char *url, bool idempotent);
/* Adds the Authorization header, submits, and calls done on the engine thread (or on this
 * thread when credentials fail at once) with the reply, which done owns (gcs_reply_clear). */
typedef void (*gcs_reply_fn)(struct gcs_reply *reply, void *user);
void gcs_send(struct gcs_client *client, struct http_request *request, gcs_reply_fn done,
              void *user);
/* Blocking form: 0 (the call completed, whatever its status, *reply filled) or -EDEADLK on the
 * engine thread (request freed). */
int gcs_perform(struct gcs_client *client, struct http_request *request, struct gcs_reply *reply);
/* One blocking call: counts it in *counter (the client's list/get/media/write calls),
 * performs it and returns the reply's error (0, or a negative errno; *reply is then filled
 * and the caller clears it), or the error of sending it (*reply zeroed: clearing is a
 * no-op). The request is taken. */
int gcs_call(struct gcs_client *client, struct http_request *request, _Atomic uint64_t *counter,
             struct gcs_reply *reply);
/* The blocking forms of the async calls: the callback stores what it was handed in a
 * gcs_wait, which the caller waits on (wait_group.h) and then reads. */
struct gcs_wait {
    struct wait_group group;
    int err;
    struct gcs_object *obj;     /* owned until taken */
    struct gcs_list_page *page; /* owned until taken */
    size_t got;
    char *etag; /* owned until taken */
};
void gcs_wait_init(struct gcs_wait *wait);                            /* one call pending */
void gcs_wait_on_object(int err, struct gcs_object *obj, void *user); /* a gcs_stat_cb */
void gcs_wait_on_done(int err, void *user);                           /* a gcs_done_cb */
void gcs_wait_on_page(int err, struct gcs_list_page *page, void *user);
void gcs_wait_on_read(int err, size_t got, void *user);
void gcs_wait_on_part(int err, const char *etag, void *user);
/* Waits for the call; hands its object to *out when it succeeded and out is given, else frees
 * it. Returns the call's error. */
int gcs_wait_object(struct gcs_wait *wait, struct gcs_object *out);
/* The crc32c the server states in x-goog-hash (one header may carry "crc32c=...,md5=..." or
 * each may come alone). True and *crc set when present and well-formed. */
bool gcs_response_crc32c(const struct http_response *response, uint32_t *crc);

/* ---- gcs_writes.c ---- */

/* objects.get of one generation (0 = live), blocking, no log line: for the write calls that
 * must learn what they created. */
int gcs_stat_generation(struct gcs_client *client, const char *name, int64_t generation,
                        struct gcs_object *out);

/* ---- gcs_errors.c: the one status -> errno map ---- */

int gcs_errno_from_status(long status);
/* The errno of a finished call (see gcs.h for the table). */
int gcs_errno_from_response(const struct http_response *response);
/* For messages at mount time: the errno of a transport failure (-EHOSTUNREACH when the host does
 * not resolve, -ECONNREFUSED when nothing listens, -ETIMEDOUT, else -EIO). */
int gcs_errno_from_transport(int curl_code);
/* One log line for a call that failed for good: call, gs://bucket/name, status, attempts, the
 * server's message. Expected outcomes (ENOENT, ERANGE, EAGAIN, ECANCELED) log at debug. */
void gcs_log_failure(const struct gcs_client *client, const char *call, const char *name, int err,
                     const struct http_response *response, const char *detail);
/* The errno of a finished write request: gcs_errno_from_response, except that a request body
 * that could not be read gives its -errno, and a 400 saying the checksum did not match (JSON
 * "... CRC32C/checksum ... match ...", XML BadDigest / InvalidDigest) gives -EIO. */
int gcs_errno_from_write_response(const struct http_response *response);
/* The server's explanation in an error reply (JSON error.message, or XML "Code: Message"). */
char *gcs_error_reply_message(const char *body, size_t len);
/* gcs_log_failure for a copied reply (NULL = no request was made). */
void gcs_log_reply_failure(const struct gcs_client *client, const char *call, const char *name,
                           int err, const struct gcs_reply *reply, const char *detail);
/* The same line at debug level: for a failure its caller handles and reports itself (a compose
 * temporary refused for the bucket's rate, a temporary's delete the caller sends again). */
void gcs_log_reply_failure_handled(const struct gcs_client *client, const char *call,
                                   const char *name, int err, const struct gcs_reply *reply,
                                   const char *detail);

#endif
