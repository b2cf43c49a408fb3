/* Resumable uploads (the fallback where the XML API is missing): the session is opened with a
 * POST that carries the object's metadata and preconditions, chunks go with PUT and
 * Content-Range, and a chunk that fails in transit is never blindly resent: the session's
 * persisted offset is asked for ("Content-Range: bytes * / *", answered 308 with Range, or 200
 * when the upload is already final) and the chunk resent from there. */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/log.h"
#include "gcs-internal.h"

/* A GString holding text, which is freed. */
static GString *string_take(char *text)
{
    GString *string = g_string_new(text);
    g_free(text);
    return string;
}

#define SESSION_URL_CAP 8192

static const struct http_retry_policy recovery_policy = {
    .base_delay_s = 0.1,
    .max_delay_s = 10.0,
    .max_retry_after_s = 60.0,
};

int gcs_resumable_begin(struct gcs_client *client, const char *name,
                        const struct gcs_write_attrs *attrs,
                        const struct gcs_write_preconditions *pre, int64_t total_size,
                        char **session_url)
{
    if (!name || !*name)
        return -EINVAL;
    const char *content_type =
        attrs && attrs->content_type ? attrs->content_type : GCS_DEFAULT_CONTENT_TYPE;
    if (strpbrk(content_type, "\r\n"))
        return -EINVAL;
    GString *url = string_take(gcs_url_upload(client->endpoint, client->bucket, "resumable"));
    char *encoded = http_percent_encode(name);
    g_string_append_printf(url, "&name=%s", encoded);
    g_free(encoded);
    gcs_url_append_preconditions(url, pre);
    /* Retried: opening a session creates no object (preconditions apply at the last chunk). */
    struct http_request *request = gcs_request_new(client, HTTP_POST, url->str, true);
    g_string_free(url, TRUE);
    char *json = gcs_object_metadata_json(name, attrs, false, false, 0);
    http_request_add_header(request, "Content-Type: application/json; charset=UTF-8");
    char *line = g_strdup_printf("X-Upload-Content-Type: %s", content_type);
    http_request_add_header(request, line);
    g_free(line);
    if (total_size >= 0) {
        line = g_strdup_printf("X-Upload-Content-Length: %" PRId64, total_size);
        http_request_add_header(request, line);
        g_free(line);
    }
    http_request_set_body(request, json, strlen(json));
    g_free(json);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    const char *detail = NULL;
    if (err == 0 && (!reply.location || strlen(reply.location) > SESSION_URL_CAP ||
                     !(g_str_has_prefix(reply.location, "http://") ||
                       g_str_has_prefix(reply.location, "https://")))) {
        err = -EIO;
        detail = "no usable Location in the reply";
    }
    if (err < 0)
        gcs_log_reply_failure(client, "objects.insert(resumable)", name, err, &reply, detail);
    else
        *session_url = g_strdup(reply.location);
    gcs_reply_clear(&reply);
    return err;
}

/* One PUT to the session: a chunk [from, end) of the body, or a status query (body NULL). */
static int session_put(struct gcs_client *client, const char *session_url,
                       const struct gcs_body *body, uint64_t offset, uint64_t from, bool final,
                       double deadline_at, struct gcs_reply *reply)
{
    bool query = body == NULL;
    struct http_request *request = gcs_request_new(client, HTTP_PUT, session_url, query);
    http_request_set_deadline(request, MAX(0.001, deadline_at - http_now_s()));
    char line[128];
    if (query) {
        g_strlcpy(line, "Content-Range: bytes */*", sizeof(line));
    } else {
        uint64_t end = offset + body->len;
        if (from == end) /* only for a final request: nothing left to send but the total */
            g_snprintf(line, sizeof(line), "Content-Range: bytes */%" PRIu64, end);
        else if (final)
            g_snprintf(line, sizeof(line), "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
                       from, end - 1, end);
        else
            g_snprintf(line, sizeof(line), "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/*", from,
                       end - 1);
        uint64_t skip = from - offset;
        if (body->len > skip) {
            if (body->data)
                http_request_add_body_borrowed(request, (const uint8_t *)body->data + skip,
                                               (size_t)(body->len - skip));
            else
                http_request_add_body_fd(request, body->fd, body->fd_offset + skip,
                                         body->len - skip);
        }
    }
    http_request_add_header(request, line);
    if (!query)
        http_request_add_header(request, "Content-Type: application/octet-stream");
    atomic_fetch_add(&client->write_calls, 1);
    return gcs_perform(client, request, reply);
}

/* Reads a reply to a chunk or a status query. 0 with *finished (200/201, *obj set when asked)
 * or *persisted (308); else the errno. */
static int read_session_reply(const struct gcs_reply *reply, bool *finished, uint64_t *persisted,
                              struct gcs_object **obj, const char **detail)
{
    if (reply->status == 308 && reply->curl_code == 0) {
        if (gcs_parse_resumable_range(reply->range, persisted) < 0) {
            *detail = "malformed Range in a 308";
            return -EIO;
        }
        *finished = false;
        return 0;
    }
    if (reply->err < 0) {
        if (reply->err == -ENOENT || reply->status == 410) {
            *detail = "the upload session is gone";
            return -EIO;
        }
        return reply->err;
    }
    struct gcs_object *parsed = g_new0(struct gcs_object, 1);
    if (gcs_json_parse_object(reply->body, reply->body_len, parsed) < 0) {
        g_free(parsed);
        *detail = "malformed object resource";
        return -EIO;
    }
    *finished = true;
    *obj = parsed;
    return 0;
}

int gcs_resumable_put(struct gcs_client *client, const char *session_url, uint64_t offset,
                      const struct gcs_body *body, bool final, struct gcs_object *out)
{
    if (!session_url || !body || (body->len > 0 && !body->data && body->fd < 0) ||
        (!final && (body->len == 0 || body->len % GCS_RESUMABLE_UNIT != 0)))
        return -EINVAL;
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    const uint64_t end = offset + body->len;
    const double deadline_at = http_now_s() + client->deadline_s;
    uint64_t from = offset;
    unsigned failures = 0; /* retries spent from max_retries (rate limits spend none) */
    unsigned tries = 0;    /* chunk failures: the backoff's exponent */
    bool query_next = false;
    struct gcs_object *obj = NULL;
    int err = 0;
    const char *detail = NULL;
    struct gcs_reply reply = {0};
    for (;;) {
        gcs_reply_clear(&reply);
        err = session_put(client, session_url, query_next ? NULL : body, offset, from, final,
                          deadline_at, &reply);
        if (err < 0)
            break;
        bool was_query = query_next;
        query_next = false;
        if (!was_query && reply.transient) {
            /* The chunk's fate is unknown: wait, then ask the session where it stands. */
            tries++;
            double delay = 0;
            double remaining = deadline_at - http_now_s();
            enum http_retry_verdict verdict = http_retry_decide(
                &(struct http_retry_policy){.max_retries = client->max_retries,
                                            .base_delay_s = recovery_policy.base_delay_s,
                                            .max_delay_s = recovery_policy.max_delay_s,
                                            .max_retry_after_s = recovery_policy.max_retry_after_s},
                reply.status, reply.curl_code, tries, &failures, reply.retry_after, true, remaining,
                g_random_double(), &delay);
            if (verdict != HTTP_RETRY_YES) {
                err = verdict == HTTP_RETRY_DEADLINE ? -ETIMEDOUT : -EIO;
                detail = "chunk failed, retries spent";
                if (verdict == HTTP_RETRY_DEADLINE &&
                    http_outcome_is_rate_limit(reply.status, reply.curl_code)) {
                    err = -EIO;
                    detail = "chunk rate limited (429) on every retry until --request-deadline";
                }
                break;
            }
            flog_debug("gcs",
                       "resumable chunk at %" PRIu64 " failed (HTTP %ld, curl %d): "
                       "asking the session in %.3f s",
                       from, reply.status, reply.curl_code, delay);
            g_usleep((gulong)(delay * 1e6));
            query_next = true;
            continue;
        }
        bool finished = false;
        uint64_t persisted = 0;
        err = read_session_reply(&reply, &finished, &persisted, &obj, &detail);
        if (err < 0)
            break;
        if (finished) {
            if (!final) {
                err = -EIO;
                detail = "the upload was finalized before its last chunk";
            } else if (obj->size != end) {
                err = -EIO;
                detail = "the finalized object's size differs from the bytes sent";
            }
            break;
        }
        if (persisted < offset || persisted > end) {
            err = -EIO;
            detail = "the session's persisted offset is outside this chunk";
            break;
        }
        if (!final && persisted == end)
            break; /* this chunk is in */
        if (persisted <= from && !was_query) {
            /* A reply that persisted nothing new: do not spin. */
            if (++failures > client->max_retries) {
                err = -EIO;
                detail = "the session does not advance";
                break;
            }
        }
        from = persisted; /* resend from what the server has (body rewinds to it) */
    }
    if (err < 0)
        gcs_log_reply_failure(client, "objects.insert(resumable chunk)", session_url, err, &reply,
                              detail);
    gcs_reply_clear(&reply);
    if (err < 0) {
        gcs_object_free(obj);
        return err;
    }
    if (obj && obj->name)
        gcs_cost_note_created(client, obj->name, obj->size);
    if (out && obj) {
        *out = *obj;
        g_free(obj);
    } else {
        gcs_object_free(obj);
    }
    return 0;
}

int gcs_resumable_cancel(struct gcs_client *client, const char *session_url)
{
    if (!session_url)
        return -EINVAL;
    struct http_request *request = gcs_request_new(client, HTTP_DELETE, session_url, true);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    if (reply.status == 499 && reply.curl_code == 0)
        err = 0; /* Cloud Storage answers a cancel with 499 Client Closed Request */
    else if (err == -ENOENT && reply.attempts > 1)
        err = 0;
    if (err < 0)
        gcs_log_reply_failure(client, "objects.insert(resumable cancel)", session_url, err, &reply,
                              NULL);
    gcs_reply_clear(&reply);
    return err;
}
