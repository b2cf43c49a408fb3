/* The one mapping from HTTP statuses and transport outcomes to errno (table in fluxfs/gcs.h),
 * and the one log line a call writes when it fails for good. */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>

#include "fluxfs/log.h"
#include "gcs-internal.h"

int gcs_errno_from_status(long status)
{
    if (status >= 200 && status <= 299)
        return 0;
    switch (status) {
    case 304:
        return -EAGAIN;
    case 400:
        return -EINVAL;
    case 401:
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 409:
        return -EEXIST;
    case 412:
        return -ESTALE;
    case 416:
        return -ERANGE;
    default:
        return -EIO; /* 408, 429, 5xx after the retry budget; anything unexpected */
    }
}

int gcs_errno_from_response(const struct http_response *response)
{
    if (response->cancelled)
        return -ECANCELED;
    if (response->out_of_memory)
        return -ENOMEM;
    if (response->deadline_exceeded)
        return -ETIMEDOUT;
    if (response->body_overflow)
        return -EIO;
    if (response->curl_code != CURLE_OK || response->status == 0)
        return -EIO;
    return gcs_errno_from_status(response->status);
}

int gcs_errno_from_transport(int curl_code)
{
    switch ((CURLcode)curl_code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    default:
        return -EIO;
    }
}

/* True when a 400 reply says the bytes did not match the checksum sent with them. */
static bool reply_is_digest_mismatch(const char *body, size_t len)
{
    if (!body || len == 0)
        return false;
    char *code = NULL;
    if (gcs_xml_parse_error(body, len, &code, NULL) == 0) {
        bool digest = strcmp(code, "BadDigest") == 0 || strcmp(code, "InvalidDigest") == 0;
        g_free(code);
        return digest;
    }
    char *message = gcs_json_error_message(body, len);
    if (!message)
        return false;
    char *lower = g_ascii_strdown(message, -1);
    /* Cloud Storage: "Provided CRC32C \"...\" doesn't match calculated CRC32C \"...\"."; the
     * emulator: "Provided checksum does not match the data received." */
    bool digest = (strstr(lower, "crc32c") || strstr(lower, "checksum") || strstr(lower, "md5")) &&
                  strstr(lower, "match");
    g_free(lower);
    g_free(message);
    return digest;
}

int gcs_errno_from_write_response(const struct http_response *response)
{
    if (response->body_read_error != 0)
        return -response->body_read_error;
    int err = gcs_errno_from_response(response);
    if (err == -EINVAL && response->status == 400 &&
        reply_is_digest_mismatch(response->body, response->body_len))
        return -EIO;
    return err;
}

char *gcs_error_reply_message(const char *body, size_t len)
{
    if (!body || len == 0)
        return NULL;
    char *code = NULL, *message = NULL;
    if (gcs_xml_parse_error(body, len, &code, &message) == 0) {
        char *text = g_strdup_printf("%s: %s", code, message ? message : "");
        g_free(code);
        g_free(message);
        return text;
    }
    return gcs_json_error_message(body, len);
}

static void log_failure_line(const struct gcs_client *client, const char *call, const char *name,
                             int err, long status, int curl_code, const char *error_text,
                             unsigned attempts, const char *server_message, const char *detail,
                             bool handled, bool rate_limited_to_deadline)
{
    bool expected =
        handled || err == -ENOENT || err == -ERANGE || err == -EAGAIN || err == -ECANCELED;
    if (expected && !flog_enabled(FLOG_DEBUG))
        return;
    char rate_limited[128] = "";
    if (rate_limited_to_deadline) /* 429s spend no --max-retries: the deadline ended it */
        g_snprintf(rate_limited, sizeof(rate_limited),
                   ", rate limited on every retry until --request-deadline (%g s) ran out",
                   client->deadline_s);
    char transport[CURL_ERROR_SIZE + 32] = "";
    if (curl_code != CURLE_OK && error_text)
        g_snprintf(transport, sizeof(transport), ", %s", error_text);
    flog_write(expected ? FLOG_DEBUG : FLOG_ERROR, "gcs",
               "%s gs://%s/%s failed: %s (HTTP %ld%s, %u attempt%s%s%s%s%s%s)", call,
               client->bucket, name ? name : "", g_strerror(-err), status, transport, attempts,
               attempts == 1 ? "" : "s", rate_limited, server_message ? ", server: " : "",
               server_message ? server_message : "", detail ? ", " : "", detail ? detail : "");
}

void gcs_log_failure(const struct gcs_client *client, const char *call, const char *name, int err,
                     const struct http_response *response, const char *detail)
{
    bool expected = err == -ENOENT || err == -ERANGE || err == -EAGAIN || err == -ECANCELED;
    if (expected && !flog_enabled(FLOG_DEBUG))
        return;
    char *server_message = NULL;
    if (response && response->status >= 300 && response->body_len > 0)
        server_message = gcs_json_error_message(response->body, response->body_len);
    log_failure_line(client, call, name, err, response ? response->status : 0,
                     response ? response->curl_code : CURLE_OK,
                     response ? response->error_text : NULL, response ? response->attempts : 0,
                     server_message, detail, false, response && response->rate_limited_to_deadline);
    g_free(server_message);
}

static void log_reply_failure(const struct gcs_client *client, const char *call, const char *name,
                              int err, const struct gcs_reply *reply, const char *detail,
                              bool handled)
{
    bool expected =
        handled || err == -ENOENT || err == -ERANGE || err == -EAGAIN || err == -ECANCELED;
    if (expected && !flog_enabled(FLOG_DEBUG))
        return;
    char *server_message = NULL;
    if (reply && reply->status >= 300 && reply->body_len > 0)
        server_message = gcs_error_reply_message(reply->body, reply->body_len);
    if (reply && reply->status == 0 && reply->curl_code == CURLE_OK && reply->error_text &&
        *reply->error_text && !detail)
        detail = reply->error_text; /* a credential failure: no request was made */
    log_failure_line(client, call, name, err, reply ? reply->status : 0,
                     reply ? reply->curl_code : CURLE_OK, reply ? reply->error_text : NULL,
                     reply ? reply->attempts : 0, server_message, detail, handled,
                     reply && reply->rate_limited_to_deadline);
    g_free(server_message);
}

void gcs_log_reply_failure(const struct gcs_client *client, const char *call, const char *name,
                           int err, const struct gcs_reply *reply, const char *detail)
{
    log_reply_failure(client, call, name, err, reply, detail, false);
}

void gcs_log_reply_failure_handled(const struct gcs_client *client, const char *call,
                                   const char *name, int err, const struct gcs_reply *reply,
                                   const char *detail)
{
    log_reply_failure(client, call, name, err, reply, detail, true);
}
