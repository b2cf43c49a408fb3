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
 * callback runs later on the engine thread and must not block (no waiting on other requests):
 * it copies what it needs, or wakes a waiter. Blocking functions wait for their own request and
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

struct gcs_client;

struct gcs_client_config {
    const char *endpoint;        /* e.g. "https://storage.googleapis.com"; NULL = that, or
                                    STORAGE_EMULATOR_HOST when set (which also implies anonymous) */
    const char *bucket;
    bool anonymous;              /* no Authorization header */
    const char *key_file;        /* service account or authorized_user JSON; NULL = ADC order */
    const char *token_url;       /* override of the token endpoint (tests); NULL = from key file */
    const char *user_agent;      /* NULL = "fluxfs/VERSION" */
    int max_connections;         /* total connection cap; 0 = default (e.g. 64) */
    int max_retries;             /* per request; 0 = default (e.g. 6); -1 = none */
    double request_deadline_s;   /* total time for one call including retries; 0 = default 120 */
    double stall_timeout_s;      /* no body bytes for this long -> retry; 0 = default 30 */
    double connect_timeout_s;    /* 0 = default 10 */
};

/* Creates the client and its engine thread; resolves credentials (a missing or unreadable key
 * file fails here with a message in *error, owned by the caller). No network traffic. */
int gcs_client_new(const struct gcs_client_config *config, struct gcs_client **out, char **error);
/* Cancels what is in flight (callbacks run with -ECANCELED), stops the engine. Accepts NULL. */
void gcs_client_free(struct gcs_client *client);

/* Checks at mount time that the bucket exists and credentials work (obtains a token, then a
 * one-item list of the bucket). 0, or a negative errno with a human-readable *error. */
int gcs_check_access(struct gcs_client *client, char **error);

/* Request counters by kind, for logs and benchmarks. */
struct gcs_stats {
    uint64_t requests, retries, failures, bytes_downloaded, bytes_uploaded;
    uint64_t list_calls, get_calls, media_calls, write_calls;
};
void gcs_get_stats(struct gcs_client *client, struct gcs_stats *out);

/* ---- object metadata ---- */

struct gcs_object {
    char *name;                /* full object name */
    uint64_t size;
    int64_t generation;
    int64_t metageneration;
    int64_t updated_ns;        /* "updated", nanoseconds since the epoch */
    int64_t mtime_ns;          /* custom metadata "goog-reserved-file-mtime" (seconds, gcsfuse's
                                  key) when present, else updated_ns */
    bool has_crc32c;
    uint32_t crc32c;
    char *content_encoding;    /* NULL when none */
    char *symlink_target;      /* custom metadata "gcsfuse_symlink_target", NULL when none */
};
void gcs_object_clear(struct gcs_object *obj); /* frees the members, accepts NULL */
void gcs_object_free(struct gcs_object *obj);  /* clear + free, accepts NULL */

/* objects.get (metadata). -ENOENT when absent. */
int gcs_stat(struct gcs_client *client, const char *name, struct gcs_object *out);
typedef void (*gcs_stat_cb)(int err, struct gcs_object *obj /* owned by cb, NULL on error */,
                            void *user);
void gcs_stat_async(struct gcs_client *client, const char *name, gcs_stat_cb cb, void *user);

/* ---- listing ---- */

struct gcs_list_params {
    const char *prefix;        /* NULL = "" */
    const char *delimiter;     /* NULL = recursive */
    const char *start_offset;  /* inclusive; NULL = none */
    const char *end_offset;    /* exclusive; NULL = none */
    const char *page_token;    /* NULL = first page */
    unsigned max_results;      /* 0 = 1000 */
    bool include_trailing_delimiter;
};
struct gcs_list_page {
    GPtrArray *objects;        /* struct gcs_object *, free func gcs_object_free */
    GPtrArray *prefixes;       /* char *, free func g_free */
    char *next_page_token;     /* NULL on the last page */
};
void gcs_list_page_clear(struct gcs_list_page *page); /* accepts zeroed pages */

int gcs_list(struct gcs_client *client, const struct gcs_list_params *params,
             struct gcs_list_page *out);
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
    void *buf;                  /* len bytes, owned by the caller, must outlive the request */
    bool has_expected_crc32c;
    uint32_t expected_crc32c;
    uint64_t object_size;       /* when known (> 0 or whole_object), lets the crc check happen */
    bool whole_object;          /* offset 0 and len >= size: verify crc32c when known */
};
int gcs_read(struct gcs_client *client, const struct gcs_read_request *req, size_t *got);
typedef void (*gcs_read_cb)(int err, size_t got, void *user);
void gcs_read_async(struct gcs_client *client, const struct gcs_read_request *req, gcs_read_cb cb,
                    void *user);

/* Writes (insert, XML multipart, compose, copy, delete, patch) are added by the writes issue. */

#endif
