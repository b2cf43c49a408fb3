/* What every Cloud Storage request did, seen from the engine's observer (engine thread): which
 * call it was (gcsfuse's gcs_method, from the method and URL), the metrics it moves, and the
 * request log (--log-level trace, or --debug_gcs at info): one line per attempt with the
 * operation, object, range, status, attempt, latency and bytes. The log line is built from the
 * URL's path and the Range header only: the Authorization header and token replies never reach
 * it. */
#include <curl/curl.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/log.h"
#include "fluxfs/metrics.h"
#include "gcs-internal.h"

/* Whether the '&'-separated query has a parameter named key ("key" or "key=..."). */
static bool query_has(const char *query, const char *key)
{
    size_t key_len = strlen(key);
    for (const char *item = query; item && *item;) {
        if (strncmp(item, key, key_len) == 0 &&
            (item[key_len] == '=' || item[key_len] == '&' || item[key_len] == '\0'))
            return true;
        item = strchr(item, '&');
        if (item)
            item++;
    }
    return false;
}

static bool query_value_is(const char *query, const char *key, const char *value)
{
    char *wanted = g_strconcat(key, "=", value, NULL);
    size_t len = strlen(wanted);
    bool found = false;
    for (const char *item = query; item && *item && !found;) {
        found = strncmp(item, wanted, len) == 0 && (item[len] == '&' || item[len] == '\0');
        item = strchr(item, '&');
        if (item)
            item++;
    }
    g_free(wanted);
    return found;
}

/* The decoded segment at *cursor (up to '/' or the end); advances past it and its '/'. */
static char *take_segment(const char **cursor)
{
    const char *start = *cursor;
    const char *end = strchr(start, '/');
    size_t len = end ? (size_t)(end - start) : strlen(start);
    char *raw = g_strndup(start, len);
    char *decoded = g_uri_unescape_string(raw, NULL);
    g_free(raw);
    *cursor = end ? end + 1 : start + len;
    return decoded ? decoded : g_strdup("");
}

enum metrics_gcs_method gcs_classify_request(const char *endpoint, enum http_method method,
                                             const char *url, char **object)
{
    *object = NULL;
    size_t endpoint_len = strlen(endpoint);
    if (strncmp(url, endpoint, endpoint_len) != 0 || url[endpoint_len] != '/')
        return METRICS_GCS_METHOD_COUNT; /* not Cloud Storage: the token endpoint */
    const char *query_start = strchr(url + endpoint_len, '?');
    char *path = query_start
                     ? g_strndup(url + endpoint_len, (gsize)(query_start - url) - endpoint_len)
                     : g_strdup(url + endpoint_len);
    const char *query = query_start ? query_start + 1 : "";
    enum metrics_gcs_method result = METRICS_GCS_OTHERS;
    const char *rest = NULL;
    bool media = false, upload = false;
    if (g_str_has_prefix(path, "/storage/v1/b/")) {
        rest = path + strlen("/storage/v1/b/");
    } else if (g_str_has_prefix(path, "/download/storage/v1/b/")) {
        rest = path + strlen("/download/storage/v1/b/");
        media = true;
    } else if (g_str_has_prefix(path, "/upload/storage/v1/b/")) {
        rest = path + strlen("/upload/storage/v1/b/");
        upload = true;
    }
    if (rest) { /* the JSON API: BUCKET[/o[/NAME[/verb...]]] or BUCKET/iam/testPermissions */
        g_free(take_segment(&rest));
        if (*rest == '\0') {
            result = METRICS_GCS_GET_BUCKET;
        } else if (g_str_has_prefix(rest, "iam/")) {
            result = METRICS_GCS_TEST_PERMISSIONS;
        } else if (strcmp(rest, "folders") == 0) {
            result = method == HTTP_POST ? METRICS_GCS_CREATE_FOLDER : METRICS_GCS_OTHERS;
        } else if (g_str_has_prefix(rest, "folders/")) {
            result = strstr(rest, "/renameTo/") ? METRICS_GCS_RENAME_FOLDER
                     : method == HTTP_DELETE    ? METRICS_GCS_DELETE_FOLDER
                                                : METRICS_GCS_OTHERS;
        } else if (g_str_has_prefix(rest, "operations/")) {
            result = METRICS_GCS_GET_OPERATION;
        } else if (strcmp(rest, "o") == 0 || strcmp(rest, "o/") == 0) {
            if (upload)
                result = method == HTTP_POST ? (query_value_is(query, "uploadType", "resumable") &&
                                                        !query_has(query, "upload_id")
                                                    ? METRICS_GCS_CREATE_OBJECT_CHUNK_WRITER
                                                    : METRICS_GCS_CREATE_OBJECT)
                         : method == HTTP_DELETE ? METRICS_GCS_CANCEL_UPLOAD
                                                 : METRICS_GCS_UPLOAD_CHUNK;
            else
                result = method == HTTP_POST ? METRICS_GCS_CREATE_OBJECT : METRICS_GCS_LIST_OBJECTS;
        } else if (g_str_has_prefix(rest, "o/")) {
            rest += 2;
            *object = take_segment(&rest);
            if (method == HTTP_POST)
                result = g_str_has_prefix(rest, "compose") ? METRICS_GCS_COMPOSE_OBJECTS
                                                           : METRICS_GCS_COPY_OBJECT;
            else if (method == HTTP_DELETE)
                result = METRICS_GCS_DELETE_OBJECT;
            else if (method == HTTP_PATCH || method == HTTP_PUT)
                result = METRICS_GCS_UPDATE_OBJECT;
            else
                result = media || query_value_is(query, "alt", "media") ? METRICS_GCS_NEW_READER
                                                                        : METRICS_GCS_STAT_OBJECT;
        }
    } else if (path[1] != '\0') { /* the XML API: /BUCKET[/NAME] */
        const char *cursor = path + 1;
        g_free(take_segment(&cursor));
        if (*cursor != '\0') {
            /* The name keeps its slashes: decode the rest as one. */
            char *decoded = g_uri_unescape_string(cursor, NULL);
            *object = decoded ? decoded : g_strdup(cursor);
        }
        if (query_has(query, "uploadId")) {
            result = method == HTTP_PUT      ? METRICS_GCS_MULTIPART_PART
                     : method == HTTP_POST   ? METRICS_GCS_MULTIPART_COMPLETE
                     : method == HTTP_DELETE ? METRICS_GCS_MULTIPART_ABORT
                                             : METRICS_GCS_MULTIPART_LIST;
        } else if (query_has(query, "uploads")) {
            result =
                method == HTTP_POST ? METRICS_GCS_MULTIPART_CREATE : METRICS_GCS_MULTIPART_LIST;
        } else if (*object) {
            result = method == HTTP_GET      ? METRICS_GCS_NEW_READER
                     : method == HTTP_HEAD   ? METRICS_GCS_STAT_OBJECT
                     : method == HTTP_DELETE ? METRICS_GCS_DELETE_OBJECT
                     : method == HTTP_PUT    ? METRICS_GCS_CREATE_OBJECT
                                             : METRICS_GCS_OTHERS;
        } else {
            result = method == HTTP_GET ? METRICS_GCS_LIST_OBJECTS : METRICS_GCS_OTHERS;
        }
    }
    if (!*object && query_has(query, "name")) { /* a resumable upload's start */
        const char *value = strstr(query, "name=");
        while (value && value != query && value[-1] != '&')
            value = strstr(value + 1, "name=");
        if (value) {
            value += 5;
            char *raw = g_strndup(value, strcspn(value, "&"));
            *object = g_uri_unescape_string(raw, NULL);
            g_free(raw);
        }
    }
    g_free(path);
    return result;
}

enum metrics_retry_cause gcs_retry_cause(long status, int curl_code, bool stalled)
{
    if (stalled)
        return METRICS_RETRY_STALLED;
    switch (curl_code) {
    case CURLE_OK:
        break;
    case CURLE_OPERATION_TIMEDOUT:
        return METRICS_RETRY_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return METRICS_RETRY_CONNECTION;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
        return METRICS_RETRY_GARBLED;
    default:
        return METRICS_RETRY_OTHER;
    }
    if (status == 429)
        return METRICS_RETRY_RATE_LIMITED;
    if (status >= 500 || status == 408)
        return METRICS_RETRY_SERVER_ERROR;
    return METRICS_RETRY_OTHER;
}

static const char *const method_names[] = {
    [HTTP_GET] = "GET", [HTTP_HEAD] = "HEAD",   [HTTP_POST] = "POST",
    [HTTP_PUT] = "PUT", [HTTP_PATCH] = "PATCH", [HTTP_DELETE] = "DELETE",
};

/* The name as the log shows it: quotes, backslashes and control characters escaped (one
 * record per line whatever the name holds), UTF-8 kept. */
static char *loggable_name(const char *name)
{
    char high_bytes[129];
    for (int i = 0; i < 128; i++)
        high_bytes[i] = (char)(0x80 + i);
    high_bytes[128] = '\0';
    return g_strescape(name, high_bytes);
}

static void log_attempt(struct gcs_client *client, const struct http_attempt_report *report,
                        enum metrics_gcs_method method, const char *object)
{
    enum flog_level level = client->log_requests ? FLOG_INFO : FLOG_TRACE;
    if (!flog_enabled(level))
        return;
    const char *verb =
        report->method < G_N_ELEMENTS(method_names) ? method_names[report->method] : "?";
    const char *outcome = report->retrying ? "retrying" : report->success ? "ok" : "failed";
    char error_part[CURL_ERROR_SIZE + 16] = "";
    if (report->curl_code != CURLE_OK ||
        (report->error_text && *report->error_text && !report->success))
        g_snprintf(error_part, sizeof(error_part), " error=\"%s\"",
                   report->error_text ? report->error_text : "");
    if (method == METRICS_GCS_METHOD_COUNT) {
        /* The token endpoint: neither its URL's query nor its reply is logged. */
        flog_write(level, "gcs",
                   "request op=FetchToken %s status=%ld attempt=%u "
                   "latency_ms=%.1f %s%s",
                   verb, report->status, report->attempt, report->attempt_s * 1000.0, outcome,
                   error_part);
        return;
    }
    char *shown = loggable_name(object ? object : "");
    flog_write(level, "gcs",
               "request op=%s %s bucket=%s object=\"%s\" range=%s status=%ld attempt=%u "
               "latency_ms=%.1f call_ms=%.1f bytes_down=%" PRIu64 " bytes_up=%" PRIu64 " %s%s",
               metrics_gcs_method_label(method), verb, client->bucket, shown,
               report->range ? report->range : "-", report->status, report->attempt,
               report->attempt_s * 1000.0, report->call_s * 1000.0, report->bytes_down,
               report->bytes_up, outcome, error_part);
    g_free(shown);
}

bool gcs_failure_deferred(enum metrics_gcs_method method, long status, unsigned attempt)
{
    if (attempt < 2)
        return false;
    switch (method) {
    case METRICS_GCS_CREATE_OBJECT:
    case METRICS_GCS_COMPOSE_OBJECTS:
    case METRICS_GCS_COPY_OBJECT:
        return status == 412;
    case METRICS_GCS_MULTIPART_COMPLETE:
        return status == 404;
    case METRICS_GCS_DELETE_OBJECT:
        /* Only deletes of a pinned generation (or under ifGenerationMatch) are retried, and
         * gcs_delete answers their 404 on a retry as done: never a failure to count later. */
        return status == 404;
    default:
        return false;
    }
}

void gcs_count_deferred_failure(enum metrics_gcs_method method)
{
    metrics_gcs_request_failed(method);
    if (metrics_gcs_method_uploads(method))
        metrics_add(METRICS_UPLOAD_FAILURES, 1);
}

void gcs_observe_attempt(const struct http_attempt_report *report, void *user)
{
    struct gcs_client *client = user;
    char *object = NULL;
    if (report->status == 429 && report->curl_code == 0) {
        bool read = report->method == HTTP_GET || report->method == HTTP_HEAD;
        atomic_fetch_add(read ? &client->rate_limited_reads : &client->rate_limited_writes, 1);
    }
    enum metrics_gcs_method method =
        gcs_classify_request(client->endpoint, report->method, report->url, &object);
    if (!object && report->object_name)
        object = g_strdup(report->object_name);
    if (method < METRICS_GCS_METHOD_COUNT) {
        if (report->status > 0) /* the server answered: an operation it bills */
            gcs_cost_count(client, method);
        metrics_add(METRICS_GCS_BYTES_DOWNLOADED, report->bytes_down);
        metrics_add(METRICS_GCS_BYTES_UPLOADED, report->bytes_up);
        bool got_body = report->status >= 200 && report->status <= 299;
        if (method == METRICS_GCS_NEW_READER && got_body)
            metrics_add(METRICS_GCS_READ_BYTES, report->bytes_down);
        bool uploads = metrics_gcs_method_uploads(method);
        if (report->retrying) {
            metrics_gcs_retry(method,
                              gcs_retry_cause(report->status, report->curl_code, report->stalled));
            if (uploads)
                metrics_add(METRICS_UPLOAD_RETRIES, 1);
        }
        if (report->final) {
            bool failed =
                !report->success && !gcs_failure_deferred(method, report->status, report->attempt);
            metrics_gcs_request_done(method, failed, (uint64_t)(report->call_s * 1000.0 + 0.5));
            if (uploads && report->success) {
                metrics_add(METRICS_UPLOAD_PARTS, 1);
                metrics_add(METRICS_UPLOAD_BYTES, report->bytes_up);
            } else if (uploads && failed) {
                metrics_add(METRICS_UPLOAD_FAILURES, 1);
            }
            if (method == METRICS_GCS_LIST_OBJECTS && report->success)
                metrics_add(METRICS_LIST_PAGES, 1);
        }
    }
    log_attempt(client, report, method, object);
    g_free(object);
}
