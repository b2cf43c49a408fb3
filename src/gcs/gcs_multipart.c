/* XML API multipart upload: begin (POST ?uploads), parts (PUT ?partNumber&uploadId), complete
 * (POST ?uploadId with CompleteMultipartUpload), abort (DELETE ?uploadId) and the list of uploads
 * in progress (GET /BUCKET?uploads). URLs are path style on the JSON endpoint.
 *
 * The client remembers each part's length and crc32c by upload id (from the body's crc32c, or
 * the server's x-goog-hash of the part), so a complete knows the crc32c the object must have: it
 * verifies the committed object, and accepts a complete whose reply was lost and whose retry
 * found the upload gone (404 NoSuchUpload) only when the live object is new and has that
 * crc32c. */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/timens.h"
#include "gcs-internal.h"

#define MAX_TRACKED_UPLOADS 4096 /* uploads whose parts are remembered at once */
#define MAX_LIST_PAGES      1000

struct part_record {
    uint64_t len;
    uint32_t crc32c;
};

/* ---- part records ---- */

static GHashTable *part_table_new(void)
{
    return g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
}

static void records_start(struct gcs_client *client, const char *upload_id)
{
    g_mutex_lock(&client->part_lock);
    if (g_hash_table_size(client->part_records) < MAX_TRACKED_UPLOADS &&
        !g_hash_table_contains(client->part_records, upload_id))
        g_hash_table_insert(client->part_records, g_strdup(upload_id), part_table_new());
    g_mutex_unlock(&client->part_lock);
}

static void records_add(struct gcs_client *client, const char *upload_id, int part_number,
                        uint64_t len, uint32_t crc32c)
{
    g_mutex_lock(&client->part_lock);
    GHashTable *parts = g_hash_table_lookup(client->part_records, upload_id);
    if (!parts && g_hash_table_size(client->part_records) < MAX_TRACKED_UPLOADS) {
        parts = part_table_new();
        g_hash_table_insert(client->part_records, g_strdup(upload_id), parts);
    }
    if (parts) {
        struct part_record *record = g_new(struct part_record, 1);
        record->len = len;
        record->crc32c = crc32c;
        g_hash_table_replace(parts, GINT_TO_POINTER(part_number), record);
    }
    g_mutex_unlock(&client->part_lock);
}

/* A part whose crc32c is unknown makes the object's unknown: forget any earlier record of it. */
static void records_drop_part(struct gcs_client *client, const char *upload_id, int part_number)
{
    g_mutex_lock(&client->part_lock);
    GHashTable *parts = g_hash_table_lookup(client->part_records, upload_id);
    if (parts)
        g_hash_table_remove(parts, GINT_TO_POINTER(part_number));
    g_mutex_unlock(&client->part_lock);
}

static bool records_expected(struct gcs_client *client, const char *upload_id,
                             const struct gcs_completed_part *parts, int count, uint32_t *crc,
                             uint64_t *size)
{
    bool known = true;
    uint32_t whole = 0;
    uint64_t total = 0;
    g_mutex_lock(&client->part_lock);
    GHashTable *table = g_hash_table_lookup(client->part_records, upload_id);
    for (int i = 0; known && i < count; i++) {
        const struct part_record *record =
            table ? g_hash_table_lookup(table, GINT_TO_POINTER(parts[i].part_number)) : NULL;
        if (!record) {
            known = false;
            break;
        }
        whole = crc32c_combine(whole, record->crc32c, record->len);
        total += record->len;
    }
    g_mutex_unlock(&client->part_lock);
    if (known) {
        *crc = whole;
        *size = total;
    }
    return known;
}

static void records_forget(struct gcs_client *client, const char *upload_id)
{
    g_mutex_lock(&client->part_lock);
    g_hash_table_remove(client->part_records, upload_id);
    g_mutex_unlock(&client->part_lock);
}

/* ---- URLs ---- */

static char *upload_url(struct gcs_client *client, const char *name, const char *upload_id,
                        int part_number)
{
    char *object = gcs_url_xml_object(client->endpoint, client->bucket, name);
    char *id = http_percent_encode(upload_id);
    char *url = part_number > 0
                    ? g_strdup_printf("%s?partNumber=%d&uploadId=%s", object, part_number, id)
                    : g_strdup_printf("%s?uploadId=%s", object, id);
    g_free(id);
    g_free(object);
    return url;
}

/* A header value must be one line of visible ASCII or spaces. */
static bool header_value_ok(const char *value)
{
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (*p < 0x20 || *p > 0x7e)
            return false;
    }
    return true;
}

/* True when the reply says the server has no XML multipart API. */
static bool reply_means_unsupported(const struct gcs_reply *reply)
{
    if (reply->status == 404 || reply->status == 405 || reply->status == 501)
        return true;
    if (reply->status != 400)
        return false;
    char *lower = g_ascii_strdown(reply->body, (gssize)reply->body_len);
    bool unsupported = strstr(lower, "notimplemented") || strstr(lower, "not implemented");
    g_free(lower);
    return unsupported;
}

/* ---- begin ---- */

static void abort_lost_initiates(struct gcs_client *client, const char *name, const char *ours,
                                 int64_t call_ns);

int gcs_multipart_begin(struct gcs_client *client, const char *name,
                        const struct gcs_write_attrs *attrs, char **upload_id)
{
    if (!name || !*name)
        return -EINVAL;
    const char *content_type =
        attrs && attrs->content_type ? attrs->content_type : GCS_DEFAULT_CONTENT_TYPE;
    if (!header_value_ok(content_type) ||
        (attrs && attrs->symlink_target && !header_value_ok(attrs->symlink_target)))
        return -EINVAL;
    char *object = gcs_url_xml_object(client->endpoint, client->bucket, name);
    char *url = g_strconcat(object, "?uploads", NULL);
    g_free(object);
    /* Retried: a repeated begin creates no object, only an unused upload when an attempt's
     * reply was lost, which abort_lost_initiates removes (or the sweep of a later mount). */
    struct http_request *request = gcs_request_new(client, HTTP_POST, url, true);
    g_free(url);
    char *line = g_strdup_printf("Content-Type: %s", content_type);
    http_request_add_header(request, line);
    g_free(line);
    if (attrs && attrs->has_mtime) {
        int64_t seconds, nanoseconds;
        timens_split(attrs->mtime_ns, &seconds, &nanoseconds);
        line = g_strdup_printf("x-goog-meta-" GCS_META_MTIME ": %" PRId64, seconds);
        http_request_add_header(request, line);
        g_free(line);
        char rfc[GCS_RFC3339_MAX];
        gcs_format_rfc3339_nano(attrs->mtime_ns, rfc);
        if (rfc[0]) {
            line = g_strdup_printf("x-goog-meta-" GCS_META_MTIME_RFC ": %s", rfc);
            http_request_add_header(request, line);
            g_free(line);
        }
    }
    if (attrs && attrs->symlink_target) {
        line = g_strdup_printf("x-goog-meta-" GCS_META_SYMLINK ": %s", attrs->symlink_target);
        http_request_add_header(request, line);
        g_free(line);
        http_request_add_header(request, "x-goog-meta-" GCS_META_IS_SYMLINK ": true");
    }
    http_request_set_body(request, "", 0);
    struct gcs_reply reply;
    int64_t started_us = g_get_monotonic_time();
    int err = gcs_call(client, request, &client->write_calls, &reply);
    int64_t call_ns = (g_get_monotonic_time() - started_us) * 1000;
    unsigned attempts = reply.attempts;
    char *id = NULL;
    const char *detail = NULL;
    if (err < 0 && reply.status != 0 && reply_means_unsupported(&reply)) {
        err = -ENOSYS;
        detail = "the server has no XML multipart upload";
    } else if (err == 0 && gcs_xml_parse_initiate(reply.body, reply.body_len, &id) < 0) {
        err = -EIO;
        detail = "malformed InitiateMultipartUploadResult";
    }
    if (err < 0)
        gcs_log_reply_failure(client, "xml.multipart_initiate", name, err, &reply, detail);
    gcs_reply_clear(&reply);
    if (err < 0)
        return err;
    records_start(client, id);
    if (attempts > 1)
        abort_lost_initiates(client, name, id, call_ns);
    *upload_id = id;
    return 0;
}

/* ---- parts ---- */

struct part_call {
    struct gcs_client *client;
    char *name;
    char *upload_id;
    int part_number;
    uint64_t len;
    bool has_crc32c;
    uint32_t crc32c;
    gcs_part_cb cb;
    void *user;
};

static void on_part_reply(struct gcs_reply *reply, void *user)
{
    struct part_call *call = user;
    int err = reply->err;
    const char *detail = NULL;
    if (err == 0 && (!reply->etag || !*reply->etag)) {
        err = -EIO;
        detail = "no ETag in the reply";
    }
    if (err == 0 && call->has_crc32c && reply->has_crc32c && reply->crc32c != call->crc32c) {
        err = -EIO;
        detail = "the server's crc32c of the part differs from the one sent";
    }
    if (err == 0) {
        if (call->has_crc32c || reply->has_crc32c)
            records_add(call->client, call->upload_id, call->part_number, call->len,
                        call->has_crc32c ? call->crc32c : reply->crc32c);
        else
            records_drop_part(call->client, call->upload_id, call->part_number);
    }
    if (err < 0) {
        char *what = g_strdup_printf("part %d", call->part_number);
        gcs_log_reply_failure(call->client, "xml.multipart_upload_part", call->name, err, reply,
                              detail ? detail : what);
        g_free(what);
    }
    call->cb(err, err == 0 ? reply->etag : NULL, call->user);
    gcs_reply_clear(reply);
    g_free(call->name);
    g_free(call->upload_id);
    g_free(call);
}

void gcs_multipart_put_part_async(struct gcs_client *client, const char *name,
                                  const char *upload_id, int part_number,
                                  const struct gcs_body *body, gcs_part_cb cb, void *user)
{
    if (!name || !*name || !upload_id || !*upload_id || part_number < 1 ||
        part_number > GCS_MAX_PARTS || !body || (body->len > 0 && !body->data && body->fd < 0)) {
        cb(-EINVAL, NULL, user);
        return;
    }
    char *url = upload_url(client, name, upload_id, part_number);
    /* Idempotent: the same part number with the same bytes replaces itself. */
    struct http_request *request = gcs_request_new(client, HTTP_PUT, url, true);
    g_free(url);
    if (body->has_crc32c) {
        char text[9];
        crc32c_to_base64(body->crc32c, text);
        char *line = g_strdup_printf("x-goog-hash: crc32c=%s", text);
        http_request_add_header(request, line);
        g_free(line);
    }
    if (body->len > 0) {
        if (body->data)
            http_request_add_body_borrowed(request, body->data, (size_t)body->len);
        else
            http_request_add_body_fd(request, body->fd, body->fd_offset, body->len);
    }
    struct part_call *call = g_new0(struct part_call, 1);
    call->client = client;
    call->name = g_strdup(name);
    call->upload_id = g_strdup(upload_id);
    call->part_number = part_number;
    call->len = body->len;
    call->has_crc32c = body->has_crc32c;
    call->crc32c = body->crc32c;
    call->cb = cb;
    call->user = user;
    atomic_fetch_add(&client->write_calls, 1);
    gcs_send(client, request, on_part_reply, call);
}

int gcs_multipart_put_part(struct gcs_client *client, const char *name, const char *upload_id,
                           int part_number, const struct gcs_body *body, char **etag)
{
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    struct gcs_wait wait;
    gcs_wait_init(&wait);
    gcs_multipart_put_part_async(client, name, upload_id, part_number, body, gcs_wait_on_part,
                                 &wait);
    wait_group_finish(&wait.group);
    if (wait.err == 0)
        *etag = wait.etag;
    else
        g_free(wait.etag);
    return wait.err;
}

/* ---- complete ---- */

/* The object a complete created: the generation the reply named (x-goog-generation), else the
 * live one; checked against the crc32c the parts add up to. */
static int describe_completed(struct gcs_client *client, const char *name, int64_t generation,
                              bool has_expected, uint32_t expected_crc, uint64_t expected_size,
                              struct gcs_object *out, const char **detail)
{
    struct gcs_object obj;
    int err = gcs_stat_generation(client, name, generation, &obj);
    if (err < 0) {
        if (generation > 0 && has_expected) {
            /* Committed, but already replaced (or the stat failed): what we know suffices. */
            *out = (struct gcs_object){
                .name = g_strdup(name),
                .size = expected_size,
                .generation = generation,
                .metageneration = 1,
                .has_crc32c = true,
                .crc32c = expected_crc,
            };
            return 0;
        }
        *detail = "the committed object could not be read back";
        return err;
    }
    if (has_expected &&
        ((obj.has_crc32c && obj.crc32c != expected_crc) || obj.size != expected_size)) {
        gcs_object_clear(&obj);
        *detail = "the committed object's crc32c or size differs from its parts'";
        return -EIO;
    }
    *out = obj;
    return 0;
}

/* A retried complete found the upload gone: accept the live object only when it is new (not the
 * generation the precondition named) and has exactly the bytes of our parts. */
static int recover_lost_complete(struct gcs_client *client, const char *name,
                                 const struct gcs_write_preconditions *pre, bool has_expected,
                                 uint32_t expected_crc, uint64_t expected_size,
                                 struct gcs_object *out)
{
    if (!has_expected)
        return -EIO;
    struct gcs_object obj;
    if (gcs_stat_generation(client, name, 0, &obj) < 0)
        return -EIO;
    bool is_new = !pre->has_if_generation_match || obj.generation != pre->if_generation_match;
    if (is_new && obj.has_crc32c && obj.crc32c == expected_crc && obj.size == expected_size) {
        *out = obj;
        return 0;
    }
    gcs_object_clear(&obj);
    return -EIO;
}

int gcs_multipart_complete(struct gcs_client *client, const char *name, const char *upload_id,
                           const struct gcs_completed_part *parts, int part_count,
                           const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    if (!name || !*name || !upload_id || !*upload_id)
        return -EINVAL;
    char *xml = NULL;
    size_t xml_len = 0;
    int err = gcs_xml_complete_body(parts, part_count, &xml, &xml_len);
    if (err < 0)
        return err;
    uint32_t expected_crc = 0;
    uint64_t expected_size = 0;
    bool has_expected =
        records_expected(client, upload_id, parts, part_count, &expected_crc, &expected_size);
    char *url = upload_url(client, name, upload_id, 0);
    bool idempotent = pre && pre->has_if_generation_match;
    struct http_request *request = gcs_request_new(client, HTTP_POST, url, idempotent);
    g_free(url);
    http_request_add_header(request, "Content-Type: application/xml");
    char line[96];
    if (pre && pre->has_if_generation_match) {
        g_snprintf(line, sizeof(line), "x-goog-if-generation-match: %" PRId64,
                   pre->if_generation_match);
        http_request_add_header(request, line);
    }
    if (pre && pre->has_if_metageneration_match) {
        g_snprintf(line, sizeof(line), "x-goog-if-metageneration-match: %" PRId64,
                   pre->if_metageneration_match);
        http_request_add_header(request, line);
    }
    http_request_set_body(request, xml, xml_len);
    g_free(xml);
    struct gcs_reply reply;
    err = gcs_call(client, request, &client->write_calls, &reply);
    const char *detail = NULL;
    struct gcs_object result = {0};
    if (err == -ENOENT && reply.attempts > 1) {
        /* Our earlier attempt may have completed it, its reply lost: no error yet. */
        flog_debug("gcs",
                   "xml.multipart_complete gs://%s/%s: the upload is gone on retry "
                   "(HTTP 404); checking whether our earlier attempt committed",
                   client->bucket, name);
        err = recover_lost_complete(client, name, pre, has_expected, expected_crc, expected_size,
                                    &result);
        if (err < 0) {
            detail = "the upload is gone after a retry and the live object is not ours";
            gcs_count_deferred_failure(METRICS_GCS_MULTIPART_COMPLETE);
        } else
            flog_info("gcs",
                      "xml.multipart_complete gs://%s/%s: reply lost, the object with "
                      "the parts' crc32c is in place (generation %" PRId64 ")",
                      client->bucket, name, result.generation);
    } else if (err == -ENOENT) {
        err = -EIO; /* the upload is gone (aborted, expired): the commit failed */
        detail = "no such upload";
    } else if (err == 0) {
        char *code = NULL;
        int64_t generation = 0;
        const char *root_start = strstr(reply.body, "<CompleteMultipartUploadResult");
        if (gcs_xml_parse_error(reply.body, reply.body_len, &code, NULL) == 0) {
            /* An error document inside a 200 (the XML API may answer late errors so). */
            g_free(code);
            err = -EIO;
            detail = "error document in a 200 reply";
        } else if (!root_start) {
            err = -EIO;
            detail = "malformed CompleteMultipartUploadResult";
        } else if (reply.generation_header &&
                   !g_ascii_string_to_signed(reply.generation_header, 10, 1, INT64_MAX, &generation,
                                             NULL)) {
            err = -EIO;
            detail = "malformed x-goog-generation";
        } else if (out || has_expected) {
            err = describe_completed(client, name, generation, has_expected, expected_crc,
                                     expected_size, &result, &detail);
        }
    }
    if (err < 0)
        gcs_log_reply_failure(client, "xml.multipart_complete", name, err, &reply, detail);
    gcs_reply_clear(&reply);
    if (err == 0) {
        records_forget(client, upload_id);
        gcs_cost_note_created(client, name, has_expected ? expected_size : result.size);
    }
    if (err == 0 && out)
        *out = result;
    else
        gcs_object_clear(&result);
    return err;
}

/* ---- abort ---- */

int gcs_multipart_abort(struct gcs_client *client, const char *name, const char *upload_id)
{
    if (!name || !*name || !upload_id || !*upload_id)
        return -EINVAL;
    records_forget(client, upload_id);
    char *url = upload_url(client, name, upload_id, 0);
    struct http_request *request = gcs_request_new(client, HTTP_DELETE, url, true);
    g_free(url);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    if (err == -ENOENT && reply.attempts > 1)
        err = 0; /* our lost attempt aborted it */
    if (err < 0)
        gcs_log_reply_failure(client, "xml.multipart_abort", name, err, &reply, NULL);
    gcs_reply_clear(&reply);
    return err;
}

/* ---- list ---- */

/* gcs_multipart_list, with each upload's initiation time (int64 ns, 0 = not given). */
static int list_uploads(struct gcs_client *client, const char *prefix, GPtrArray **names,
                        GPtrArray **upload_ids, GArray **initiated_ns)
{
    GPtrArray *all_names = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *all_ids = g_ptr_array_new_with_free_func(g_free);
    GArray *all_initiated = g_array_new(FALSE, TRUE, sizeof(int64_t));
    char *key_marker = NULL, *id_marker = NULL;
    char *bucket_encoded = http_percent_encode(client->bucket);
    int err = 0;
    for (unsigned page = 0;; page++) {
        if (page == MAX_LIST_PAGES || all_names->len > GCS_UPLOAD_LIST_CAP) {
            err = -EMSGSIZE;
            flog_error("gcs", "xml.multipart_list gs://%s/%s failed: more than %u uploads",
                       client->bucket, prefix ? prefix : "", GCS_UPLOAD_LIST_CAP);
            break;
        }
        GString *url = g_string_new(NULL);
        g_string_printf(url, "%s/%s?uploads", client->endpoint, bucket_encoded);
        const char *params[][2] = {{"prefix", prefix && *prefix ? prefix : NULL},
                                   {"key-marker", key_marker},
                                   {"upload-id-marker", id_marker}};
        for (size_t i = 0; i < G_N_ELEMENTS(params); i++) {
            if (!params[i][1])
                continue;
            char *encoded = http_percent_encode(params[i][1]);
            g_string_append_printf(url, "&%s=%s", params[i][0], encoded);
            g_free(encoded);
        }
        struct http_request *request = gcs_request_new(client, HTTP_GET, url->str, true);
        g_string_free(url, TRUE);
        http_request_set_growable_sink(request, GCS_XML_LIST_CAP);
        struct gcs_reply reply;
        err = gcs_call(client, request, &client->list_calls, &reply);
        const char *detail = NULL;
        struct gcs_upload_list list = {0};
        if (err < 0 && (reply.status == 405 || reply.status == 501)) {
            err = -ENOSYS;
        } else if (err == 0 && gcs_xml_parse_upload_list(reply.body, reply.body_len, &list) < 0) {
            err = -EIO;
            detail = "malformed ListMultipartUploadsResult";
        }
        if (err < 0)
            gcs_log_reply_failure(client, "xml.multipart_list", prefix ? prefix : "", err, &reply,
                                  detail);
        gcs_reply_clear(&reply);
        if (err < 0)
            break;
        for (guint i = 0; i < list.names->len; i++) {
            g_ptr_array_add(all_names, g_strdup(g_ptr_array_index(list.names, i)));
            g_ptr_array_add(all_ids, g_strdup(g_ptr_array_index(list.upload_ids, i)));
            g_array_append_val(all_initiated, g_array_index(list.initiated_ns, int64_t, i));
        }
        bool more = list.truncated;
        bool advanced = more && (!key_marker || strcmp(key_marker, list.next_key_marker) != 0 ||
                                 g_strcmp0(id_marker, list.next_upload_id_marker) != 0);
        if (more) {
            g_free(key_marker);
            g_free(id_marker);
            key_marker = g_strdup(list.next_key_marker);
            id_marker = g_strdup(list.next_upload_id_marker);
        }
        gcs_upload_list_clear(&list);
        if (more && !advanced) {
            err = -EIO; /* the same page again: never loop */
            flog_error("gcs", "xml.multipart_list gs://%s/%s failed: the listing does not advance",
                       client->bucket, prefix ? prefix : "");
            break;
        }
        if (!more)
            break;
    }
    g_free(bucket_encoded);
    g_free(key_marker);
    g_free(id_marker);
    if (err < 0) {
        g_ptr_array_unref(all_names);
        g_ptr_array_unref(all_ids);
        g_array_unref(all_initiated);
        return err;
    }
    *names = all_names;
    *upload_ids = all_ids;
    if (initiated_ns)
        *initiated_ns = all_initiated;
    else
        g_array_unref(all_initiated);
    return 0;
}

int gcs_multipart_list(struct gcs_client *client, const char *prefix, GPtrArray **names,
                       GPtrArray **upload_ids)
{
    return list_uploads(client, prefix, names, upload_ids, NULL);
}

/* Seconds of slack around the window in which a lost initiate can have been answered. */
#define LOST_INITIATE_SLACK_NS (INT64_C(2) * 1000000000)

/* A begin that needed more than one attempt may have started an upload whose reply was lost
 * (the server made it; the connection died before the answer): nobody would ever use or abort
 * it. The uploads of exactly this name that are not ours, not known to this client, and were
 * initiated in the window of this call (before ours by at most the call's duration, by the
 * server's clock) are those: aborted. Best effort; an upload it misses is swept by the next
 * mount (gcs_multipart_list at cleanup). */
static void abort_lost_initiates(struct gcs_client *client, const char *name, const char *ours,
                                 int64_t call_ns)
{
    GPtrArray *names = NULL, *ids = NULL;
    GArray *initiated = NULL;
    if (list_uploads(client, name, &names, &ids, &initiated) < 0)
        return;
    int64_t our_initiated = 0;
    for (guint i = 0; i < ids->len; i++)
        if (strcmp(g_ptr_array_index(ids, i), ours) == 0)
            our_initiated = g_array_index(initiated, int64_t, i);
    for (guint i = 0; our_initiated > 0 && i < ids->len; i++) {
        const char *id = g_ptr_array_index(ids, i);
        int64_t when = g_array_index(initiated, int64_t, i);
        if (strcmp(g_ptr_array_index(names, i), name) != 0 || strcmp(id, ours) == 0 || when <= 0 ||
            when > our_initiated || when < our_initiated - call_ns - LOST_INITIATE_SLACK_NS)
            continue;
        g_mutex_lock(&client->part_lock);
        bool known = g_hash_table_contains(client->part_records, id);
        g_mutex_unlock(&client->part_lock);
        if (known)
            continue; /* another writer of this mount */
        int rc = gcs_multipart_abort(client, name, id);
        flog_info("gcs",
                  "xml.multipart_initiate gs://%s/%s: aborted upload %s, started by an "
                  "attempt whose reply was lost: %s",
                  client->bucket, name, id, rc == 0 ? "done" : g_strerror(-rc));
    }
    g_ptr_array_unref(names);
    g_ptr_array_unref(ids);
    g_array_unref(initiated);
}
