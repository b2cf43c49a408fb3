/* objects.get (metadata), objects.list and media reads. Every call runs the same way: build the
 * request, obtain the Authorization header (cached, or after an asynchronous token refresh),
 * submit to the engine, map the reply to errno and parse it in the completion (engine thread;
 * list pages on the client's parse threads). Blocking functions are the async ones plus a
 * wait. */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics.h"
#include "gcs-internal.h"

#define STAT_REPLY_CAP (1u << 20)

enum call_kind { CALL_STAT, CALL_LIST, CALL_READ };

struct gcs_call {
    struct gcs_client *client;
    enum call_kind kind;
    const char *call_name;
    char *name;                   /* object name, or list prefix, for the log line */
    char *url;                    /* CALL_READ: to send the request again */
    unsigned body_retries;        /* CALL_READ: attempts repeated for a short or corrupt body */
    struct http_request *request; /* until submitted */
    struct gcs_read_request read; /* CALL_READ; read.name points at name */
    union {
        gcs_stat_cb stat;
        gcs_list_cb list;
        gcs_read_cb read;
    } cb;
    void *user;
};

static struct http_request *get_request_new(struct gcs_client *client, const char *url)
{
    char *billed = gcs_url_billed(url, client->billing_project);
    struct http_request *request = http_request_new(HTTP_GET, billed);
    g_free(billed);
    http_request_set_idempotent(request, true);
    http_request_set_deadline(request, client->deadline_s);
    http_request_set_stall_timeout(request, client->stall_s);
    http_request_set_max_retries(request, client->max_retries);
    return request;
}

static struct gcs_call *call_new(struct gcs_client *client, enum call_kind kind,
                                 const char *call_name, const char *name, const char *url)
{
    struct gcs_call *call = g_new0(struct gcs_call, 1);
    call->client = client;
    call->kind = kind;
    call->call_name = call_name;
    call->name = g_strdup(name ? name : "");
    call->request = get_request_new(client, url);
    return call;
}

static void call_free(struct gcs_call *call)
{
    http_request_free(call->request);
    g_free(call->url);
    g_free(call->name);
    g_free(call);
}

static void deliver_error(struct gcs_call *call, int err)
{
    switch (call->kind) {
    case CALL_STAT:
        call->cb.stat(err, NULL, call->user);
        break;
    case CALL_LIST:
        call->cb.list(err, NULL, call->user);
        break;
    case CALL_READ:
        metrics_add(METRICS_GCS_READERS_CLOSED, 1); /* before the caller sees the end */
        call->cb.read(err, 0, call->user);
        break;
    }
}

/* ---- completions (engine thread) ---- */

static void finish_stat(struct gcs_call *call, const struct http_response *response)
{
    int err = gcs_errno_from_response(response);
    struct gcs_object *obj = NULL;
    const char *detail = NULL;
    if (err == 0) {
        obj = g_new0(struct gcs_object, 1);
        err = gcs_json_parse_object(response->body, response->body_len, obj);
        if (err < 0) {
            g_free(obj);
            obj = NULL;
            err = -EIO;
            detail = "malformed object resource";
        }
    }
    if (err < 0)
        gcs_log_failure(call->client, call->call_name, call->name, err, response, detail);
    call->cb.stat(err, obj, call->user);
}

/* A list reply parsed off the engine thread: the body (copied) and what its callback and a
 * failure's log line need. */
struct list_parse_job {
    struct gcs_client *client;
    const char *call_name;
    char *name;
    gcs_list_cb cb;
    void *user;
    char *body; /* NUL-terminated */
    size_t body_len;
    long status;
    unsigned attempts;
};

void gcs_list_parse_run(gpointer data, gpointer pool_user)
{
    (void)pool_user;
    struct list_parse_job *job = data;
    struct gcs_list_page *page = g_new0(struct gcs_list_page, 1);
    int err = gcs_json_parse_list(job->body, job->body_len, page);
    g_clear_pointer(&job->body, g_free); /* before the callback: pages in flight hold little */
    if (err < 0) {
        g_free(page);
        page = NULL;
        err = -EIO;
        struct http_response response = {.status = job->status, .attempts = job->attempts};
        gcs_log_failure(job->client, job->call_name, job->name, err, &response,
                        "malformed list reply");
    } else if (page->impossible_names > 0) {
        flog_warn("gcs",
                  "%s gs://%s/%s: %u names holding a NUL left out of the page (no path "
                  "can name them)",
                  job->call_name, job->client->bucket, job->name, page->impossible_names);
    }
    job->cb(err, page, job->user);
    g_free(job->name);
    g_free(job);
}

static void finish_list(struct gcs_call *call, const struct http_response *response)
{
    int err = gcs_errno_from_response(response);
    const char *detail = NULL;
    if (err == 0) {
        /* Parsing a page costs about a millisecond: on the parse threads, many pages at once,
         * instead of holding up every other transfer of the engine thread. */
        struct list_parse_job *job = g_new0(struct list_parse_job, 1);
        job->client = call->client;
        job->call_name = call->call_name;
        job->name = g_strdup(call->name);
        job->cb = call->cb.list;
        job->user = call->user;
        /* The engine's buffer itself (a page is 150 KB; a copy of it was 1.5% of a listing). */
        job->body = http_response_take_body(response);
        if (!job->body) {
            job->body = g_malloc(response->body_len + 1);
            memcpy(job->body, response->body, response->body_len);
            job->body[response->body_len] = '\0';
        }
        job->body_len = response->body_len;
        job->status = response->status;
        job->attempts = response->attempts;
        g_thread_pool_push(call->client->parse_pool, job, NULL);
        return;
    }
    if (response->body_overflow)
        detail = "list reply over the size cap";
    gcs_log_failure(call->client, call->call_name, call->name, err, response, detail);
    call->cb.list(err, NULL, call->user);
}

/* The object's total size from "Content-Range: bytes A-B/TOTAL"; -1 when unknown. */
static int64_t content_range_total(const struct http_response *response)
{
    const char *range = http_response_header(response, "Content-Range");
    const char *slash = range ? strchr(range, '/') : NULL;
    gint64 total;
    if (!slash || !g_ascii_string_to_signed(slash + 1, 10, 0, INT64_MAX, &total, NULL))
        return -1;
    return total;
}

/* Verifies a reply that holds the whole object. 0, -EIO (corrupt) or -ENOENT (the object is no
 * longer the one whose checksum the caller knows: revalidate). */
static int verify_whole_object(struct gcs_call *call, const struct http_response *response,
                               size_t got, const char **detail)
{
    const struct gcs_read_request *read = &call->read;
    uint32_t server_crc = 0;
    bool has_server_crc = gcs_response_crc32c(response, &server_crc);
    if (read->has_expected_crc32c && has_server_crc && server_crc != read->expected_crc32c) {
        *detail = "the object changed (crc32c differs from the expected one)";
        return -ENOENT;
    }
    if ((!read->has_expected_crc32c && !has_server_crc) || read->caller_checks_bytes)
        return 0;
    uint32_t crc = crc32c_update(0, read->buf, got);
    uint32_t want = read->has_expected_crc32c ? read->expected_crc32c : server_crc;
    if (crc != want) {
        *detail = "crc32c mismatch on a whole-object read";
        return -EIO;
    }
    return 0;
}

/* "x-goog-stored-content-length": the size of the object the reply is from; -1 when absent. */
static int64_t stored_length(const struct http_response *response)
{
    const char *text = http_response_header(response, "x-goog-stored-content-length");
    gint64 length;
    if (!text || !g_ascii_string_to_signed(text, 10, 0, INT64_MAX, &length, NULL))
        return -1;
    return length;
}

/* Checks a 2xx media reply against what the request and the reply's own headers say the
 * object is. 0, or -EIO with *retry when sending the request again may cure it (a body cut
 * short, bytes changed in transit), or -ENOENT (the object is not the one asked for). */
static int check_read_reply(struct gcs_call *call, const struct http_response *response, size_t got,
                            bool *retry, const char **detail)
{
    const struct gcs_read_request *read = &call->read;
    int64_t total = response->status == 206 ? content_range_total(response) : (int64_t)got;
    int64_t stored = stored_length(response);
    *retry = false;
    if (response->status == 200 && read->offset > 0) {
        *detail = "the server ignored the Range header";
        return -EIO;
    }
    /* A body shorter than the range asked for must end where the object ends: by the reply's
     * Content-Range, its stored length and, for a pinned generation, the size the caller
     * knows (a generation's bytes never change). */
    if (got < read->len) {
        uint64_t end = read->offset + got;
        bool short_by_range = total >= 0 && end != (uint64_t)total;
        bool short_by_stored = stored >= 0 && end < (uint64_t)stored;
        bool short_by_size =
            read->generation != 0 && read->object_size > 0 && end < read->object_size;
        if (short_by_range || short_by_stored || short_by_size) {
            *retry = true;
            *detail = "the reply ended before the object did (short body)";
            return -EIO;
        }
    }
    if (read->offset == 0 && total >= 0 && (uint64_t)total == got) {
        if (read->whole_object && read->object_size > 0 && read->object_size != got &&
            read->has_expected_crc32c) {
            *detail = "the object changed size";
            return -ENOENT;
        }
        int err = verify_whole_object(call, response, got, detail);
        *retry = err == -EIO;
        return err;
    }
    return 0;
}

static void read_request_prepare(struct gcs_call *call);
static void call_start(struct gcs_call *call);

/* true when the call was sent again (it stays alive), false when it is finished. */
static bool finish_read(struct gcs_call *call, const struct http_response *response)
{
    const struct gcs_read_request *read = &call->read;
    int err = gcs_errno_from_response(response);
    size_t got = 0;
    const char *detail = NULL;
    bool retry = false;
    if (err == -ERANGE) {
        err = 0; /* offset at or past the end: 0 bytes */
    } else if (err == 0) {
        got = response->body_len;
        err = check_read_reply(call, response, got, &retry, &detail);
    } else if (response->body_overflow) {
        detail = "the reply was longer than the requested range";
    }
    if (err < 0 && retry && call->body_retries < call->client->max_retries) {
        /* The transfer itself went fine, so the engine did not retry it; a body that is
         * short or corrupt is as transient as a reset connection. */
        call->body_retries++;
        metrics_gcs_retry(METRICS_GCS_NEW_READER, METRICS_RETRY_GARBLED);
        flog_warn("gcs",
                  "%s gs://%s/%s: %s (HTTP %ld, %u bytes at %" PRIu64 "); sending it "
                  "again (%u of %u)",
                  call->call_name, call->client->bucket, call->name, detail, response->status,
                  (unsigned)got, read->offset, call->body_retries, call->client->max_retries);
        read_request_prepare(call);
        call_start(call);
        return true;
    }
    if (err < 0)
        gcs_log_failure(call->client, call->call_name, call->name, err, response, detail);
    else
        metrics_download_bytes(read->read_type, got);
    metrics_add(METRICS_GCS_READERS_CLOSED, 1); /* before the caller sees the end */
    call->cb.read(err, err == 0 ? got : 0, call->user);
    return false;
}

static void on_response(const struct http_response *response, void *user)
{
    struct gcs_call *call = user;
    switch (call->kind) {
    case CALL_STAT:
        finish_stat(call, response);
        break;
    case CALL_LIST:
        finish_list(call, response);
        break;
    case CALL_READ:
        if (finish_read(call, response))
            return;
        break;
    }
    call_free(call);
}

/* The ranged GET of call->read (again, for a retry: call->request is NULL once sent). */
static void read_request_prepare(struct gcs_call *call)
{
    const struct gcs_read_request *req = &call->read;
    if (!call->request)
        call->request = get_request_new(call->client, call->url);
    char range[96];
    g_snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-%" PRIu64, req->offset,
               req->offset + req->len - 1);
    http_request_add_header(call->request, range);
    /* Serve the stored bytes: no decompressive transcoding of gzip-encoded objects. */
    http_request_add_header(call->request, "Accept-Encoding: gzip");
    http_request_set_fixed_sink(call->request, req->buf, req->len);
}

static void on_auth_header(int err, const char *header_line, const char *error_message, void *user)
{
    struct gcs_call *call = user;
    if (err < 0) {
        if (err != -ECANCELED)
            flog_error("gcs", "%s gs://%s/%s failed: no access token: %s", call->call_name,
                       call->client->bucket, call->name, error_message);
        deliver_error(call, err);
        call_free(call);
        return;
    }
    struct http_request *request = call->request;
    call->request = NULL;
    if (header_line)
        http_request_add_header(request, header_line);
    http_request_set_completion(request, on_response, call);
    http_submit(call->client->engine, request);
}

static void call_start(struct gcs_call *call)
{
    auth_get_header_async(call->client->auth, on_auth_header, call);
}

/* ---- async API ---- */

void gcs_stat_async(struct gcs_client *client, const char *name, gcs_stat_cb cb, void *user)
{
    char *url = gcs_url_object(client->endpoint, client->bucket, name);
    struct gcs_call *call = call_new(client, CALL_STAT, "objects.get", name, url);
    g_free(url);
    http_request_set_growable_sink(call->request, STAT_REPLY_CAP);
    call->cb.stat = cb;
    call->user = user;
    atomic_fetch_add(&client->get_calls, 1);
    call_start(call);
}

void gcs_list_async(struct gcs_client *client, const struct gcs_list_params *params, gcs_list_cb cb,
                    void *user)
{
    struct gcs_list_params with = *params;
    with.include_folders_as_prefixes |= atomic_load(&client->hierarchical_namespace);
    char *url = gcs_url_list(client->endpoint, client->bucket, &with);
    struct gcs_call *call = call_new(client, CALL_LIST, "objects.list", params->prefix, url);
    g_free(url);
    http_request_set_growable_sink(call->request, GCS_JSON_CAP);
    call->cb.list = cb;
    call->user = user;
    atomic_fetch_add(&client->list_calls, 1);
    call_start(call);
}

void gcs_read_async(struct gcs_client *client, const struct gcs_read_request *req, gcs_read_cb cb,
                    void *user)
{
    if (req->len == 0) {
        cb(0, 0, user);
        return;
    }
    char *url = gcs_url_media(client->endpoint, client->bucket, req->name, req->generation);
    struct gcs_call *call = call_new(client, CALL_READ, "objects.get(media)", req->name, url);
    call->url = url;
    call->read = *req;
    call->read.name = call->name;
    read_request_prepare(call);
    call->cb.read = cb;
    call->user = user;
    atomic_fetch_add(&client->media_calls, 1);
    metrics_add(METRICS_GCS_READERS_OPENED, 1);
    call_start(call);
}

/* ---- blocking API ---- */

int gcs_stat(struct gcs_client *client, const char *name, struct gcs_object *out)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    gcs_stat_async(client, name, gcs_wait_on_object, &wait);
    return gcs_wait_object(&wait, out);
}

int gcs_list(struct gcs_client *client, const struct gcs_list_params *params,
             struct gcs_list_page *out)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    gcs_list_async(client, params, gcs_wait_on_page, &wait);
    wait_group_finish(&wait.group);
    if (wait.err == 0) {
        *out = *wait.page;
        g_free(wait.page);
    }
    return wait.err;
}

struct list_all {
    GPtrArray *objects;
    size_t added, max;
};

static int list_all_visit(const struct gcs_object *object, void *user)
{
    struct list_all *all = user;
    g_ptr_array_add(all->objects, gcs_object_copy(object));
    return ++all->added > all->max ? -EFBIG : 0;
}

int gcs_list_all(struct gcs_client *client, const char *prefix, size_t max, GPtrArray *objects)
{
    struct list_all all = {.objects = objects, .max = max};
    return gcs_list_each(client, prefix, list_all_visit, &all);
}

int gcs_read(struct gcs_client *client, const struct gcs_read_request *req, size_t *got)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    gcs_read_async(client, req, gcs_wait_on_read, &wait);
    wait_group_finish(&wait.group);
    if (wait.err == 0)
        *got = wait.got;
    return wait.err;
}
