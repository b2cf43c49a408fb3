/* The JSON API write calls: one-request uploads (uploadType=multipart, media streamed between a
 * copied preamble and epilogue), compose, copy through rewriteTo, delete, patch and
 * testIamPermissions. Retry rule (Cloud Storage's "conditionally idempotent"): uploads, compose
 * and rewrite retry only with ifGenerationMatch, delete only with a pinned generation or
 * ifGenerationMatch; patch (it sets the fields it names to given values: idempotent) and
 * reads (testIamPermissions, stat) always. */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics.h"
#include "gcs-internal.h"

/* A GString holding text, which is freed. */
static GString *string_take(char *text)
{
    GString *string = g_string_new(text);
    g_free(text);
    return string;
}

#define REWRITE_MAX_CALLS 100000 /* a 5 TiB object at 64 MiB per call is 81,920 */

static bool retry_with_generation_match(const struct gcs_write_preconditions *pre)
{
    return pre && pre->has_if_generation_match;
}

static int check_body(const struct gcs_body *body)
{
    if (!body || (body->len > 0 && !body->data && body->fd < 0))
        return -EINVAL;
    return 0;
}

static void add_body(struct http_request *request, const struct gcs_body *body, uint64_t skip)
{
    if (body->len <= skip)
        return;
    if (body->data)
        http_request_add_body_borrowed(request, (const uint8_t *)body->data + skip,
                                       (size_t)(body->len - skip));
    else
        http_request_add_body_fd(request, body->fd, body->fd_offset + skip, body->len - skip);
}

/* Parses an object resource reply into a new gcs_object. 0 or -EIO. */
static int parse_object_reply(const struct gcs_reply *reply, struct gcs_object **out)
{
    struct gcs_object *obj = g_new0(struct gcs_object, 1);
    if (gcs_json_parse_object(reply->body, reply->body_len, obj) < 0) {
        g_free(obj);
        return -EIO;
    }
    *out = obj;
    return 0;
}

/* ---- calls answered with an object resource (upload, compose) ---- */

struct object_call {
    struct gcs_client *client;
    const char *call_name;
    enum metrics_gcs_method method; /* for a failure the observer left to this call */
    char *name;
    bool has_crc32c; /* what the upload sent: the reply must agree */
    uint32_t crc32c;
    gcs_stat_cb cb;
    void *user;
    /* A 412 on a retry of a call with ifGenerationMatch (its first reply lost): the live object
     * is read back and accepted when it is what this call sent (see gcs.h). */
    bool verify_lost_reply;
    bool temporary;                     /* compose: attrs->temporary (gcs.h) */
    uint64_t sent_len;                  /* upload: the body's length */
    struct gcs_compose_source *sources; /* compose: names owned, generation 0 = live */
    int source_count;
    /* the read-backs in flight (dest + sources), their results */
    int verify_pending;
    GMutex verify_lock;
    struct gcs_object *verify_dest;
    struct gcs_object **verify_sources;
    bool verify_failed;
    struct gcs_reply lost_reply; /* the 412, for the failure line when not accepted */
};

static void object_call_free(struct object_call *call)
{
    for (int i = 0; i < call->source_count; i++)
        g_free((char *)call->sources[i].name);
    g_free(call->sources);
    if (call->verify_sources) {
        for (int i = 0; i < call->source_count; i++)
            gcs_object_free(call->verify_sources[i]);
        g_free(call->verify_sources);
    }
    gcs_object_free(call->verify_dest);
    g_mutex_clear(&call->verify_lock);
    g_free(call->name);
    g_free(call);
}

/* Whether the live object read back is what this call sent; detail says why not. */
static bool lost_reply_matches(struct object_call *call, const char **detail)
{
    const struct gcs_object *dest = call->verify_dest;
    if (call->verify_failed || !dest) {
        *detail = "412 on a retry; the object could not be read back";
        return false;
    }
    uint64_t size = 0;
    uint32_t crc = 0;
    bool has_crc = true;
    int64_t components = 0;
    if (call->source_count == 0) {
        size = call->sent_len;
        crc = call->crc32c;
        has_crc = call->has_crc32c;
    } else {
        for (int i = 0; i < call->source_count; i++) {
            const struct gcs_object *src = call->verify_sources[i];
            if (call->sources[i].generation > 0 && src->generation != call->sources[i].generation) {
                *detail = "412 on a retry; a compose source changed since";
                return false;
            }
            has_crc = has_crc && src->has_crc32c;
            crc = i == 0 ? src->crc32c : crc32c_combine(crc, src->crc32c, src->size);
            size += src->size;
            components += src->component_count > 0 ? src->component_count : 1;
        }
    }
    bool same = dest->size == size && has_crc && dest->has_crc32c && dest->crc32c == crc &&
                (call->source_count == 0 || dest->component_count == 0 ||
                 dest->component_count == components);
    if (!same)
        *detail = "412 on a retry; the live object is not what this call sent";
    return same;
}

static void finish_lost_reply_check(struct object_call *call)
{
    const char *detail = NULL;
    int err = -ESTALE;
    struct gcs_object *obj = NULL;
    if (lost_reply_matches(call, &detail)) {
        err = 0;
        obj = call->verify_dest;
        call->verify_dest = NULL;
        flog_info("gcs",
                  "%s gs://%s/%s: 412 on a retry, and the object holds what was sent: "
                  "the first attempt's reply was lost; done",
                  call->call_name, call->client->bucket, call->name);
    } else {
        gcs_log_reply_failure(call->client, call->call_name, call->name, err, &call->lost_reply,
                              detail);
        gcs_count_deferred_failure(call->method);
    }
    gcs_reply_clear(&call->lost_reply);
    if (err == 0 && obj)
        gcs_cost_note_created(call->client, obj->name ? obj->name : call->name, obj->size);
    gcs_stat_cb cb = call->cb;
    void *cb_user = call->user;
    object_call_free(call);
    cb(err, obj, cb_user);
}

/* One read-back answered: index -1 = the destination, else a source. */
struct verify_slot {
    struct object_call *call;
    int index;
};

static void on_verify_stat(int err, struct gcs_object *obj, void *user)
{
    struct verify_slot *slot = user;
    struct object_call *call = slot->call;
    g_mutex_lock(&call->verify_lock);
    if (err < 0)
        call->verify_failed = true;
    else if (slot->index < 0)
        call->verify_dest = obj;
    else
        call->verify_sources[slot->index] = obj;
    if (err < 0)
        gcs_object_free(obj);
    bool last = --call->verify_pending == 0;
    g_mutex_unlock(&call->verify_lock);
    g_free(slot);
    if (last)
        finish_lost_reply_check(call);
}

static void start_lost_reply_check(struct object_call *call, struct gcs_reply *reply)
{
    call->lost_reply = *reply; /* taken over: cleared when the check ends */
    memset(reply, 0, sizeof(*reply));
    if (call->source_count > 0)
        call->verify_sources = g_new0(struct gcs_object *, call->source_count);
    call->verify_pending = 1 + call->source_count;
    for (int i = -1; i < call->source_count; i++) {
        struct verify_slot *slot = g_new0(struct verify_slot, 1);
        slot->call = call;
        slot->index = i;
        gcs_stat_async(call->client, i < 0 ? call->name : call->sources[i].name, on_verify_stat,
                       slot);
    }
}

static void on_object_reply(struct gcs_reply *reply, void *user)
{
    struct object_call *call = user;
    int err = reply->err;
    struct gcs_object *obj = NULL;
    const char *detail = NULL;
    if (err == -ESTALE && reply->attempts > 1 && call->verify_lost_reply) {
        /* Not an error yet: the object may be this call's, its first reply lost. */
        flog_debug("gcs",
                   "%s gs://%s/%s: precondition failed on retry (HTTP 412); checking "
                   "whether our earlier attempt committed",
                   call->call_name, call->client->bucket, call->name);
        start_lost_reply_check(call, reply);
        return;
    }
    if (err == -ESTALE && gcs_failure_deferred(call->method, reply->status, reply->attempts))
        gcs_count_deferred_failure(call->method); /* nothing to read back: a failure */
    if (err == 0 && parse_object_reply(reply, &obj) < 0) {
        err = -EIO;
        detail = "malformed object resource";
    }
    if (err == 0 && call->has_crc32c && obj->has_crc32c && obj->crc32c != call->crc32c) {
        err = -EIO;
        detail = "the stored crc32c differs from the one sent";
        gcs_object_free(obj);
        obj = NULL;
    }
    /* A temporary refused for the bucket's rate at its only attempt: nothing was made. */
    bool throttled = call->temporary && reply->status == 429 && reply->curl_code == 0;
    if (throttled && reply->attempts == 1)
        err = -EBUSY;
    if (err < 0 && throttled)
        gcs_log_reply_failure_handled(call->client, call->call_name, call->name, err, reply,
                                      detail);
    else if (err < 0)
        gcs_log_reply_failure(call->client, call->call_name, call->name, err, reply, detail);
    if (err == 0 && obj)
        gcs_cost_note_created(call->client, obj->name ? obj->name : call->name, obj->size);
    gcs_reply_clear(reply);
    gcs_stat_cb cb = call->cb;
    void *cb_user = call->user;
    object_call_free(call);
    cb(err, obj, cb_user);
}

static struct object_call *object_call_new(struct gcs_client *client, const char *call_name,
                                           enum metrics_gcs_method method, const char *name,
                                           gcs_stat_cb cb, void *user)
{
    struct object_call *call = g_new0(struct object_call, 1);
    call->client = client;
    call->call_name = call_name;
    call->method = method;
    call->name = g_strdup(name);
    call->cb = cb;
    call->user = user;
    g_mutex_init(&call->verify_lock);
    return call;
}

/* ---- gcs_upload ---- */

void gcs_upload_async(struct gcs_client *client, const char *name, const struct gcs_body *body,
                      const struct gcs_write_attrs *attrs,
                      const struct gcs_write_preconditions *pre, gcs_stat_cb cb, void *user)
{
    /* The content type goes into the media part's headers: one line only. */
    if (check_body(body) < 0 || !name || !*name ||
        (attrs && attrs->content_type && strpbrk(attrs->content_type, "\r\n"))) {
        cb(-EINVAL, NULL, user);
        return;
    }
    GString *url = string_take(gcs_url_upload(client->endpoint, client->bucket, "multipart"));
    gcs_url_append_preconditions(url, pre);
    struct http_request *request =
        gcs_request_new(client, HTTP_POST, url->str, retry_with_generation_match(pre));
    g_string_free(url, TRUE);
    http_request_set_object_name(request, name);

    char *metadata = gcs_object_metadata_json(name, attrs, false, body->has_crc32c, body->crc32c);
    char *boundary = gcs_related_boundary_new();
    struct gcs_related_frame frame;
    gcs_related_frame_build(metadata, attrs ? attrs->content_type : NULL, boundary, &frame);
    http_request_add_header(request, frame.content_type_header);
    http_request_add_body_copy(request, frame.preamble, frame.preamble_len);
    add_body(request, body, 0);
    http_request_add_body_copy(request, frame.epilogue, frame.epilogue_len);
    gcs_related_frame_clear(&frame);
    g_free(boundary);
    g_free(metadata);

    struct object_call *call =
        object_call_new(client, "objects.insert", METRICS_GCS_CREATE_OBJECT, name, cb, user);
    call->has_crc32c = body->has_crc32c;
    call->crc32c = body->crc32c;
    call->sent_len = body->len;
    call->verify_lost_reply = retry_with_generation_match(pre) && body->has_crc32c;
    atomic_fetch_add(&client->write_calls, 1);
    gcs_send(client, request, on_object_reply, call);
}

int gcs_upload(struct gcs_client *client, const char *name, const struct gcs_body *body,
               const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
               struct gcs_object *out)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    gcs_upload_async(client, name, body, attrs, pre, gcs_wait_on_object, &wait);
    return gcs_wait_object(&wait, out);
}

/* ---- gcs_compose ---- */

void gcs_compose_async(struct gcs_client *client, const char *dest_name,
                       const struct gcs_compose_source *sources, int source_count,
                       const struct gcs_write_attrs *attrs,
                       const struct gcs_write_preconditions *pre, gcs_stat_cb cb, void *user)
{
    bool valid = dest_name && *dest_name && sources && source_count >= 1 &&
                 source_count <= GCS_MAX_COMPOSE_SOURCES;
    for (int i = 0; valid && i < source_count; i++)
        valid = sources[i].name && *sources[i].name && sources[i].generation >= 0;
    if (!valid) {
        cb(-EINVAL, NULL, user);
        return;
    }
    GString *url = string_take(gcs_url_object(client->endpoint, client->bucket, dest_name));
    g_string_append(url, "/compose");
    gcs_url_append_preconditions(url, pre);
    struct http_request *request =
        gcs_request_new(client, HTTP_POST, url->str, retry_with_generation_match(pre));
    g_string_free(url, TRUE);
    bool temporary = attrs && attrs->temporary;
    if (temporary)
        http_request_set_retry_throttled(request, false);
    char *json = gcs_compose_body_json(sources, source_count, attrs);
    http_request_add_header(request, "Content-Type: application/json; charset=UTF-8");
    http_request_set_body(request, json, strlen(json));
    g_free(json);
    struct object_call *call = object_call_new(client, "objects.compose",
                                               METRICS_GCS_COMPOSE_OBJECTS, dest_name, cb, user);
    call->verify_lost_reply = retry_with_generation_match(pre);
    call->temporary = temporary;
    call->sources = g_new0(struct gcs_compose_source, source_count);
    call->source_count = source_count;
    for (int i = 0; i < source_count; i++) {
        call->sources[i].name = g_strdup(sources[i].name);
        call->sources[i].generation = sources[i].generation;
    }
    atomic_fetch_add(&client->write_calls, 1);
    gcs_send(client, request, on_object_reply, call);
}

int gcs_compose(struct gcs_client *client, const char *dest_name,
                const struct gcs_compose_source *sources, int source_count,
                const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
                struct gcs_object *out)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    gcs_compose_async(client, dest_name, sources, source_count, attrs, pre, gcs_wait_on_object,
                      &wait);
    return gcs_wait_object(&wait, out);
}

/* ---- gcs_delete ---- */

struct delete_call {
    struct gcs_client *client;
    bool temporary; /* gcs_delete_temporary_async */
    char *name;
    gcs_done_cb cb;
    void *user;
};

static void on_delete_reply(struct gcs_reply *reply, void *user)
{
    struct delete_call *call = user;
    int err = reply->err;
    /* A retried delete that finds nothing: the lost reply was ours (the generation is pinned,
     * so whatever is gone is what was asked). */
    if (err == -ENOENT && reply->attempts > 1)
        err = 0;
    /* A 412 answers a delete under ifGenerationMatch of a generation replaced since: the caller
     * reads the name again and decides (fs_unlink deletes the new one), so it is no failure. */
    if (err < 0 && call->temporary)
        gcs_log_reply_failure_handled(call->client, "objects.delete", call->name, err, reply, NULL);
    else if (err < 0 && (err != -ESTALE || flog_enabled(FLOG_DEBUG)))
        gcs_log_reply_failure(call->client, "objects.delete", call->name, err, reply, NULL);
    gcs_reply_clear(reply);
    if (err == 0)
        gcs_cost_note_deleted(call->client, call->name);
    gcs_done_cb cb = call->cb;
    void *cb_user = call->user;
    g_free(call->name);
    g_free(call);
    cb(err, cb_user);
}

static void delete_start(struct gcs_client *client, const char *name, int64_t generation,
                         const struct gcs_write_preconditions *pre, bool temporary, gcs_done_cb cb,
                         void *user)
{
    if (!name || !*name || generation < 0) {
        cb(-EINVAL, user);
        return;
    }
    GString *url = string_take(gcs_url_object(client->endpoint, client->bucket, name));
    if (generation > 0)
        g_string_append_printf(url, "?generation=%" PRId64, generation);
    gcs_url_append_preconditions(url, pre);
    bool idempotent = temporary || generation > 0 || retry_with_generation_match(pre);
    struct http_request *request = gcs_request_new(client, HTTP_DELETE, url->str, idempotent);
    g_string_free(url, TRUE);
    struct delete_call *call = g_new0(struct delete_call, 1);
    call->client = client;
    call->temporary = temporary;
    call->name = g_strdup(name);
    call->cb = cb;
    call->user = user;
    atomic_fetch_add(&client->write_calls, 1);
    gcs_send(client, request, on_delete_reply, call);
}

void gcs_delete_async(struct gcs_client *client, const char *name, int64_t generation,
                      gcs_done_cb cb, void *user)
{
    delete_start(client, name, generation, NULL, false, cb, user);
}

void gcs_delete_temporary_async(struct gcs_client *client, const char *name, int64_t generation,
                                gcs_done_cb cb, void *user)
{
    delete_start(client, name, generation, NULL, true, cb, user);
}

int gcs_delete(struct gcs_client *client, const char *name, int64_t generation,
               const struct gcs_write_preconditions *pre)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    delete_start(client, name, generation, pre, false, gcs_wait_on_done, &wait);
    return gcs_wait_object(&wait, NULL);
}

/* ---- blocking single-request calls ---- */

/* One JSON GET of url (taken and freed here), counted as a get call: gcs_call. */
static int get_json(struct gcs_client *client, char *url, struct gcs_reply *reply)
{
    struct http_request *request = gcs_request_new(client, HTTP_GET, url, true);
    g_free(url);
    return gcs_call(client, request, &client->get_calls, reply);
}

int gcs_stat_generation(struct gcs_client *client, const char *name, int64_t generation,
                        struct gcs_object *out)
{
    char *object_url = gcs_url_object(client->endpoint, client->bucket, name);
    char *url = generation > 0 ? g_strdup_printf("%s?generation=%" PRId64, object_url, generation)
                               : g_strdup(object_url);
    g_free(object_url);
    struct gcs_reply reply;
    int err = get_json(client, url, &reply);
    struct gcs_object *obj = NULL;
    if (err == 0 && parse_object_reply(&reply, &obj) < 0)
        err = -EIO;
    gcs_reply_clear(&reply);
    if (err == 0) {
        *out = *obj;
        g_free(obj);
    }
    return err;
}

int gcs_patch(struct gcs_client *client, const char *name, const struct gcs_write_attrs *attrs,
              const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    if (!name || !*name || !attrs)
        return -EINVAL;
    GString *url = string_take(gcs_url_object(client->endpoint, client->bucket, name));
    gcs_url_append_preconditions(url, pre);
    /* Always retried. The body sets the fields it names to given values (mtime, symlink
     * target, content type), never relative to what is there, so a repeat leaves the object
     * as one application does: a repeat after a lost reply lands the same metadata (and bumps
     * the metageneration once more, which nothing reads as a content change), and a repeat
     * after another client's patch in between is that patch then ours, an order the caller
     * could have seen anyway since its call had not returned. It cannot touch the bytes or
     * the generation, and a name deleted meanwhile answers 404 whichever attempt sees it.
     * With ifMetagenerationMatch a repeat whose first attempt landed answers 412 (-ESTALE),
     * as before. */
    struct http_request *request = gcs_request_new(client, HTTP_PATCH, url->str, true);
    g_string_free(url, TRUE);
    char *json = gcs_object_metadata_json(NULL, attrs, true, false, 0);
    http_request_add_header(request, "Content-Type: application/json; charset=UTF-8");
    http_request_set_body(request, json, strlen(json));
    g_free(json);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    struct gcs_object *obj = NULL;
    const char *detail = NULL;
    if (err == 0 && parse_object_reply(&reply, &obj) < 0) {
        err = -EIO;
        detail = "malformed object resource";
    }
    if (err < 0)
        gcs_log_reply_failure(client, "objects.patch", name, err, &reply, detail);
    gcs_reply_clear(&reply);
    if (err == 0 && out) {
        *out = *obj;
        g_free(obj);
    } else {
        gcs_object_free(obj);
    }
    return err;
}

/* After a 412 on a retried rewrite: whether the destination is the copy our earlier attempt
 * made (its reply lost). Cloud Storage records no source generation on the copy, so the test is
 * the content: the source generation pinned (0 = live) and the live destination must agree on
 * size, CRC32C, MD5 (when both carry one) and the metadata fluxfs reads (symlink target,
 * content encoding). Another writer's object with the same bytes passes, which leaves the name
 * as the rename wants it. 0 with *out set (the destination), else -ESTALE and *detail. */
static int recover_lost_copy(struct gcs_client *client, const char *src_name,
                             int64_t src_generation, const char *dest_name, struct gcs_object *out,
                             const char **detail)
{
    struct gcs_object src = {0}, dest = {0};
    int err = gcs_stat_generation(client, dest_name, 0, &dest);
    if (err == 0)
        err = gcs_stat_generation(client, src_name, src_generation, &src);
    if (err < 0) {
        *detail = "412 on a retry; the objects could not be read back";
        gcs_object_clear(&dest);
        return -ESTALE;
    }
    bool same_md5 =
        !dest.has_md5 || !src.has_md5 || memcmp(dest.md5, src.md5, sizeof(src.md5)) == 0;
    bool same = dest.size == src.size && dest.has_crc32c && src.has_crc32c &&
                dest.crc32c == src.crc32c && same_md5 &&
                g_strcmp0(dest.symlink_target, src.symlink_target) == 0 &&
                dest.symlink_in_content == src.symlink_in_content &&
                g_strcmp0(dest.content_encoding, src.content_encoding) == 0;
    gcs_object_clear(&src);
    if (!same) {
        *detail = "412 on a retry; the destination is not a copy of the source";
        gcs_object_clear(&dest);
        return -ESTALE;
    }
    *out = dest;
    return 0;
}

int gcs_copy(struct gcs_client *client, const char *src_name, int64_t src_generation,
             const char *dest_name, const struct gcs_write_preconditions *pre,
             struct gcs_object *out)
{
    if (!src_name || !*src_name || !dest_name || !*dest_name || src_generation < 0)
        return -EINVAL;
    char *src_url = gcs_url_object(client->endpoint, client->bucket, src_name);
    char *bucket_encoded = http_percent_encode(client->bucket);
    char *dest_encoded = http_percent_encode(dest_name);
    char *base = g_strdup_printf("%s/rewriteTo/b/%s/o/%s", src_url, bucket_encoded, dest_encoded);
    g_free(src_url);
    g_free(bucket_encoded);
    g_free(dest_encoded);
    char *token = NULL;
    int64_t pinned = src_generation;
    int err = 0;
    struct gcs_object result = {0};
    bool done = false;
    for (unsigned calls = 0; !done; calls++) {
        if (calls == REWRITE_MAX_CALLS) {
            err = -EIO;
            flog_error("gcs", "objects.rewrite gs://%s/%s failed: no end after %u calls",
                       client->bucket, dest_name, calls);
            break;
        }
        GString *url = g_string_new(base);
        /* The source generation is pinned from the first call: a token never follows a newer
         * source. */
        if (pinned > 0)
            g_string_append_printf(url, "?sourceGeneration=%" PRId64, pinned);
        gcs_url_append_preconditions(url, pre);
        if (token) {
            char *encoded = http_percent_encode(token);
            g_string_append_printf(url, "%crewriteToken=%s", strchr(url->str, '?') ? '&' : '?',
                                   encoded);
            g_free(encoded);
        }
        struct http_request *request =
            gcs_request_new(client, HTTP_POST, url->str, retry_with_generation_match(pre));
        g_string_free(url, TRUE);
        http_request_add_header(request, "Content-Type: application/json; charset=UTF-8");
        http_request_set_body(request, "{}", 2);
        struct gcs_reply reply;
        err = gcs_call(client, request, &client->write_calls, &reply);
        char *next = NULL;
        const char *detail = NULL;
        if (err == -ESTALE && reply.attempts > 1 && retry_with_generation_match(pre)) {
            /* Not an error yet: the copy may be ours, the first attempt's reply lost. */
            flog_debug("gcs",
                       "objects.rewrite gs://%s/%s: precondition failed on retry (HTTP "
                       "412); checking whether our earlier attempt committed",
                       client->bucket, dest_name);
            gcs_object_clear(&result);
            err = recover_lost_copy(client, src_name, pinned, dest_name, &result, &detail);
            if (err == 0) {
                done = true;
                flog_info("gcs",
                          "objects.rewrite gs://%s/%s: 412 on a retry, and the object is "
                          "a copy of gs://%s/%s: the first attempt's reply was lost; done",
                          client->bucket, dest_name, client->bucket, src_name);
            } else {
                gcs_count_deferred_failure(METRICS_GCS_COPY_OBJECT);
            }
        } else if (err == 0 &&
                   gcs_json_parse_rewrite(reply.body, reply.body_len, &done, &next, &result) < 0) {
            err = -EIO;
            detail = "malformed rewrite reply";
        }
        if (err < 0)
            gcs_log_reply_failure(client, "objects.rewrite", dest_name, err, &reply, detail);
        gcs_reply_clear(&reply);
        if (err < 0)
            break;
        g_free(token);
        token = next;
    }
    g_free(token);
    g_free(base);
    if (err == 0 && out)
        *out = result;
    else
        gcs_object_clear(&result);
    return err;
}

int gcs_test_permissions(struct gcs_client *client, const char *const *permissions, int count,
                         bool *granted)
{
    if (count < 0 || (count > 0 && (!permissions || !granted)))
        return -EINVAL;
    if (count == 0)
        return 0;
    char *bucket_encoded = http_percent_encode(client->bucket);
    GString *url = g_string_new(NULL);
    g_string_printf(url, "%s/storage/v1/b/%s/iam/testPermissions", client->endpoint,
                    bucket_encoded);
    g_free(bucket_encoded);
    for (int i = 0; i < count; i++) {
        char *encoded = http_percent_encode(permissions[i]);
        g_string_append_printf(url, "%cpermissions=%s", i == 0 ? '?' : '&', encoded);
        g_free(encoded);
    }
    struct gcs_reply reply;
    int err = get_json(client, g_string_free(url, FALSE), &reply);
    GPtrArray *held = NULL;
    const char *detail = NULL;
    if (err == 0 && gcs_json_parse_permissions(reply.body, reply.body_len, &held) < 0) {
        err = -EIO;
        detail = "malformed testIamPermissions reply";
    }
    if (err < 0)
        gcs_log_reply_failure(client, "buckets.testIamPermissions", "", err, &reply, detail);
    gcs_reply_clear(&reply);
    if (err < 0)
        return err;
    for (int i = 0; i < count; i++) {
        granted[i] = false;
        for (guint j = 0; j < held->len && !granted[i]; j++)
            granted[i] = strcmp(g_ptr_array_index(held, j), permissions[i]) == 0;
    }
    g_ptr_array_unref(held);
    return 0;
}

int gcs_bucket_get_config(struct gcs_client *client, struct gcs_bucket_config *out)
{
    char *bucket_encoded = http_percent_encode(client->bucket);
    char *url = g_strdup_printf("%s/storage/v1/b/%s?fields=storageClass,softDeletePolicy,"
                                "versioning,retentionPolicy,defaultEventBasedHold,autoclass,"
                                "hierarchicalNamespace",
                                client->endpoint, bucket_encoded);
    g_free(bucket_encoded);
    struct gcs_reply reply;
    int err = get_json(client, url, &reply);
    struct gcs_bucket_config config;
    const char *detail = NULL;
    if (err == 0 && gcs_json_parse_bucket_config(reply.body, reply.body_len, &config) < 0) {
        err = -EIO;
        detail = "malformed buckets.get reply";
    }
    /* 403 is expected without storage.buckets.get: the caller says what it assumes. */
    if (err < 0 && err != -EACCES)
        gcs_log_reply_failure(client, "buckets.get", "", err, &reply, detail);
    gcs_reply_clear(&reply);
    if (err == 0) {
        gcs_cost_note_soft_delete(client, config.soft_delete_seconds);
        gcs_cost_note_versioning(client, config.versioning);
        atomic_store(&client->hierarchical_namespace, config.hierarchical_namespace);
        *out = config;
    }
    return err;
}
