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
    case 304: return -EAGAIN;
    case 400: return -EINVAL;
    case 401:
    case 403: return -EACCES;
    case 404: return -ENOENT;
    case 409: return -EEXIST;
    case 412: return -ESTALE;
    case 416: return -ERANGE;
    default: return -EIO; /* 408, 429, 5xx after the retry budget; anything unexpected */
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

void gcs_log_failure(const struct gcs_client *client, const char *call, const char *name, int err,
                     const struct http_response *response, const char *detail)
{
    bool expected = err == -ENOENT || err == -ERANGE || err == -EAGAIN || err == -ECANCELED;
    if (expected && !flog_enabled(FLOG_DEBUG))
        return;
    char *server_message = NULL;
    if (response && response->status >= 300 && response->body_len > 0)
        server_message = gcs_json_error_message(response->body, response->body_len);
    char transport[CURL_ERROR_SIZE + 32] = "";
    if (response && response->curl_code != CURLE_OK)
        g_snprintf(transport, sizeof(transport), ", %s", response->error_text);
    flog_write(expected ? FLOG_DEBUG : FLOG_ERROR, "gcs",
               "%s gs://%s/%s failed: %s (HTTP %ld%s, %u attempt%s%s%s%s%s)", call,
               client->bucket, name ? name : "", g_strerror(-err), response ? response->status : 0,
               transport, response ? response->attempts : 0,
               response && response->attempts == 1 ? "" : "s",
               server_message ? ", server: " : "", server_message ? server_message : "",
               detail ? ", " : "", detail ? detail : "");
    g_free(server_message);
}
