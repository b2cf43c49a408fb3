/* Sending the requests of the write calls: the client's deadline and retry budget, the
 * Authorization header (cached token or an asynchronous refresh), and a copy of the reply
 * (status, errno, body, the headers the write calls read) that outlives the engine's completion,
 * so multi-step calls (complete then stat, resumable recovery, rewrite loops) can run their
 * steps on the caller's thread. */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "gcs-internal.h"

struct send_state {
    struct gcs_client *client;
    struct http_request *request; /* until submitted */
    gcs_reply_fn done;
    void *user;
};

void gcs_reply_clear(struct gcs_reply *reply)
{
    if (!reply)
        return;
    g_free(reply->body);
    g_free(reply->error_text);
    g_free(reply->location);
    g_free(reply->range);
    g_free(reply->etag);
    g_free(reply->generation_header);
    g_free(reply->retry_after);
    memset(reply, 0, sizeof(*reply));
}

struct http_request *gcs_request_new(struct gcs_client *client, enum http_method method,
                                     const char *url, bool idempotent)
{
    char *billed = gcs_url_billed(url, client->billing_project);
    struct http_request *request = http_request_new(method, billed);
    g_free(billed);
    http_request_set_idempotent(request, idempotent);
    http_request_set_deadline(request, client->deadline_s);
    http_request_set_stall_timeout(request, client->stall_s);
    http_request_set_max_retries(request, client->max_retries);
    /* Write replies are small JSON or XML documents (never object bytes). */
    http_request_set_growable_sink(request, GCS_JSON_CAP);
    return request;
}

bool gcs_response_crc32c(const struct http_response *response, uint32_t *crc)
{
    const char *value;
    for (unsigned i = 0; (value = http_response_header_nth(response, "x-goog-hash", i)); i++) {
        char **parts = g_strsplit(value, ",", -1);
        bool found = false;
        for (char **part = parts; *part && !found; part++) {
            const char *text = g_strstrip(*part);
            if (g_str_has_prefix(text, "crc32c="))
                found = crc32c_from_base64(text + 7, crc) == 0;
        }
        g_strfreev(parts);
        if (found)
            return true;
    }
    return false;
}

static void capture(const struct http_response *response, struct gcs_reply *reply)
{
    reply->err = gcs_errno_from_write_response(response);
    reply->status = response->status;
    reply->curl_code = response->curl_code;
    reply->attempts = response->attempts;
    reply->rate_limited_to_deadline = response->rate_limited_to_deadline;
    reply->body = g_strndup(response->body ? response->body : "", response->body_len);
    reply->body_len = response->body_len;
    if (strlen(reply->body) != reply->body_len)
        reply->body_len = strlen(reply->body); /* an embedded NUL: keep what parses */
    reply->error_text = g_strdup(response->error_text ? response->error_text : "");
    reply->location = g_strdup(http_response_header(response, "Location"));
    reply->range = g_strdup(http_response_header(response, "Range"));
    reply->etag = g_strdup(http_response_header(response, "ETag"));
    reply->generation_header = g_strdup(http_response_header(response, "x-goog-generation"));
    reply->retry_after = g_strdup(http_response_header(response, "Retry-After"));
    reply->has_crc32c = gcs_response_crc32c(response, &reply->crc32c);
    reply->transient =
        !response->cancelled && !response->deadline_exceeded && response->body_read_error == 0 &&
        !response->out_of_memory &&
        (response->curl_code != CURLE_OK ? http_curl_code_is_transient(response->curl_code)
                                         : http_status_is_transient(response->status));
}

static void on_complete(const struct http_response *response, void *user)
{
    struct send_state *state = user;
    struct gcs_reply reply = {0};
    capture(response, &reply);
    gcs_reply_fn done = state->done;
    void *done_user = state->user;
    g_free(state);
    done(&reply, done_user);
}

static void on_auth_header(int err, const char *header_line, const char *error_message, void *user)
{
    struct send_state *state = user;
    struct http_request *request = state->request;
    state->request = NULL;
    if (err < 0) {
        http_request_free(request);
        struct gcs_reply reply = {
            .err = err,
            .body = g_strdup(""),
            .error_text = g_strdup_printf("no access token: %s",
                                          error_message ? error_message : g_strerror(-err)),
        };
        gcs_reply_fn done = state->done;
        void *done_user = state->user;
        g_free(state);
        done(&reply, done_user);
        return;
    }
    if (header_line)
        http_request_add_header(request, header_line);
    http_request_set_completion(request, on_complete, state);
    http_submit(state->client->engine, request);
}

void gcs_send(struct gcs_client *client, struct http_request *request, gcs_reply_fn done,
              void *user)
{
    struct send_state *state = g_new0(struct send_state, 1);
    state->client = client;
    state->request = request;
    state->done = done;
    state->user = user;
    auth_get_header_async(client->auth, on_auth_header, state);
}

struct perform_wait {
    struct wait_group group;
    struct gcs_reply reply;
};

static void on_perform_done(struct gcs_reply *reply, void *user)
{
    struct perform_wait *wait = user;
    wait->reply = *reply; /* takes the strings */
    wait_group_done(&wait->group);
}

int gcs_call(struct gcs_client *client, struct http_request *request, _Atomic uint64_t *counter,
             struct gcs_reply *reply)
{
    memset(reply, 0, sizeof(*reply));
    atomic_fetch_add(counter, 1);
    int err = gcs_perform(client, request, reply);
    return err < 0 ? err : reply->err;
}

int gcs_perform(struct gcs_client *client, struct http_request *request, struct gcs_reply *reply)
{
    if (http_engine_is_engine_thread(client->engine)) {
        http_request_free(request);
        return -EDEADLK;
    }
    struct perform_wait wait;
    wait_group_init(&wait.group, 1);
    gcs_send(client, request, on_perform_done, &wait);
    wait_group_finish(&wait.group);
    *reply = wait.reply;
    return 0;
}

void gcs_wait_init(struct gcs_wait *wait)
{
    memset(wait, 0, sizeof(*wait));
    wait_group_init(&wait->group, 1);
}

void gcs_wait_on_object(int err, struct gcs_object *obj, void *user)
{
    struct gcs_wait *wait = user;
    wait->err = err;
    wait->obj = obj;
    wait_group_done(&wait->group);
}

void gcs_wait_on_done(int err, void *user)
{
    gcs_wait_on_object(err, NULL, user);
}

void gcs_wait_on_page(int err, struct gcs_list_page *page, void *user)
{
    struct gcs_wait *wait = user;
    wait->err = err;
    wait->page = page;
    wait_group_done(&wait->group);
}

void gcs_wait_on_read(int err, size_t got, void *user)
{
    struct gcs_wait *wait = user;
    wait->err = err;
    wait->got = got;
    wait_group_done(&wait->group);
}

void gcs_wait_on_part(int err, const char *etag, void *user)
{
    struct gcs_wait *wait = user;
    wait->err = err;
    wait->etag = g_strdup(etag);
    wait_group_done(&wait->group);
}

int gcs_wait_object(struct gcs_wait *wait, struct gcs_object *out)
{
    wait_group_finish(&wait->group);
    if (wait->err == 0 && out && wait->obj) {
        *out = *wait->obj;
        g_free(wait->obj);
    } else {
        gcs_object_free(wait->obj);
    }
    wait->obj = NULL;
    return wait->err;
}
