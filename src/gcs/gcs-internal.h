/* Inside the gcs layer: the client struct and the pure helpers (URLs, JSON, status -> errno)
 * that the unit tests call directly. Not for other layers: they use fluxfs/gcs.h. */
#ifndef FLUXFS_GCS_INTERNAL_H
#define FLUXFS_GCS_INTERNAL_H

#include <stdatomic.h>

#include "fluxfs/auth.h"
#include "fluxfs/gcs.h"
#include "fluxfs/http.h"

/* Immutable after gcs_client_new except the atomic counters. */
struct gcs_client {
    struct http_engine *engine;
    struct auth_provider *auth;
    char *endpoint;          /* "scheme://host[:port]", no trailing slash */
    char *bucket;
    unsigned max_retries;
    double deadline_s;
    double stall_s;
    _Atomic uint64_t list_calls, get_calls, media_calls, write_calls;
};

/* ---- gcs_url.c ---- */

/* "host:port" (STORAGE_EMULATOR_HOST style) -> "http://host:port"; drops a trailing '/' and a
 * trailing "/storage/v1" (gcsfuse's --custom-endpoint form). g_malloc'd. */
char *gcs_endpoint_normalize(const char *endpoint);
/* ENDPOINT/storage/v1/b/BUCKET/o/NAME with both percent-encoded (RFC 3986 unreserved kept). */
char *gcs_url_object(const char *endpoint, const char *bucket, const char *name);
/* The media URL: object URL + ?alt=media[&generation=G] (G > 0). */
char *gcs_url_media(const char *endpoint, const char *bucket, const char *name,
                    int64_t generation);
/* ENDPOINT/storage/v1/b/BUCKET/o?maxResults=N[&prefix=..][&delimiter=..]... */
char *gcs_url_list(const char *endpoint, const char *bucket,
                   const struct gcs_list_params *params);

/* ---- gcs_json.c ---- */

#define GCS_JSON_CAP (32u << 20) /* the largest reply body parsed */

/* Each parser takes NUL-terminated text of len bytes. 0, -EIO (malformed or a required field
 * missing), -EMSGSIZE (over GCS_JSON_CAP). Out-params set only on success. */
int gcs_json_parse_object(const char *json, size_t len, struct gcs_object *out);
int gcs_json_parse_list(const char *json, size_t len, struct gcs_list_page *out);
/* error.message of a Cloud Storage error reply, or NULL. g_malloc'd. */
char *gcs_json_error_message(const char *json, size_t len);
/* RFC 3339 ("2024-05-01T12:00:00.123456789Z", offsets "+02:00") -> ns since the epoch.
 * 0 or -EINVAL. */
int gcs_parse_rfc3339(const char *text, int64_t *ns);

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

#endif
