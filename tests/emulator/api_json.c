/* The Cloud Storage JSON API of the emulator: routing of /storage/v1, /upload/storage/v1 and
 * /download/storage/v1 paths, and one handler per operation translating query parameters,
 * headers and JSON bodies into store calls and the results into Cloud Storage's resources,
 * status codes and error bodies. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "fluxfs/base64.h"
#include "fields.h"
#include "fluxfs/crc32c.h"
#include "fluxfs/json_depth.h"
#include "server.h"
#include "uploads.h"

#define MAX_COMPOSE_SOURCES      32
#define REWRITE_DEFAULT_PER_CALL ((uint64_t)64 << 20)

/* ------------------------------------------------------------------ resources */

static void append_object_etag(GString *out, const struct emu_object *obj)
{
    uint8_t raw[16];
    for (int i = 0; i < 8; i++) {
        raw[i] = (uint8_t)((uint64_t)obj->generation >> (8 * i));
        raw[8 + i] = (uint8_t)((uint64_t)obj->metageneration >> (8 * i));
    }
    char *text = base64_encode(raw, sizeof(raw), false);
    json_append_string(out, text);
    g_free(text);
}

static void append_object_link(GString *out, const char *base, const char *prefix,
                               const struct emu_object *obj)
{
    g_string_append(out, base);
    g_string_append(out, prefix);
    emu_percent_encode(out, obj->bucket);
    g_string_append(out, "/o/");
    emu_percent_encode(out, obj->name);
}

static void append_field(GString *out, const char *key, const char *value)
{
    if (value == NULL)
        return;
    g_string_append_printf(out, ",\"%s\":", key);
    json_append_string(out, value);
}

/* ---- rendering without printf: a list page renders 1,000 objects ---- */

static void append_uint64(GString *out, uint64_t value)
{
    char digits[24];
    size_t n = sizeof(digits);
    do {
        digits[--n] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    g_string_append_len(out, digits + n, (gssize)(sizeof(digits) - n));
}

static void append_int64(GString *out, int64_t value)
{
    if (value < 0) {
        g_string_append_c(out, '-');
        append_uint64(out, (uint64_t)0 - (uint64_t)value);
    } else {
        append_uint64(out, (uint64_t)value);
    }
}

/* A JSON object written member by member under a `fields` selection (NULL = all members). */
struct json_members {
    GString *out;
    const struct emu_fields *fields;
    bool first;
};

/* Writes the member's key when it is selected; *child (optional) gets the inner selection. */
static bool member_begin(struct json_members *m, const char *key, const struct emu_fields **child)
{
    if (!emu_fields_select(m->fields, key, child))
        return false;
    if (!m->first)
        g_string_append_c(m->out, ',');
    m->first = false;
    g_string_append_c(m->out, '"');
    g_string_append(m->out, key); /* keys are plain identifiers */
    g_string_append_len(m->out, "\":", 2);
    return true;
}

static void member_string(struct json_members *m, const char *key, const char *value)
{
    if (value != NULL && member_begin(m, key, NULL))
        json_append_string(m->out, value);
}

/* int64 members are JSON strings in Cloud Storage's resources. */
static void member_int64_text(struct json_members *m, const char *key, int64_t value)
{
    if (!member_begin(m, key, NULL))
        return;
    g_string_append_c(m->out, '"');
    append_int64(m->out, value);
    g_string_append_c(m->out, '"');
}

/* Appends the storage#object resource, the members `fields` selects (NULL = all). */
static void append_object_json(GString *out, const struct emu_object *obj, const char *base,
                               const struct emu_fields *fields)
{
    char when[40];
    struct json_members m = {out, fields, true};
    g_string_append_c(out, '{');
    member_string(&m, "kind", "storage#object");
    GString *scratch = NULL;
    if (member_begin(&m, "id", NULL)) {
        scratch = g_string_new(obj->bucket);
        g_string_append_c(scratch, '/');
        g_string_append(scratch, obj->name);
        g_string_append_c(scratch, '/');
        append_int64(scratch, obj->generation);
        json_append_string(out, scratch->str);
    }
    if (member_begin(&m, "selfLink", NULL)) {
        scratch = scratch != NULL ? g_string_truncate(scratch, 0) : g_string_new(NULL);
        append_object_link(scratch, base, "/storage/v1/b/", obj);
        json_append_string(out, scratch->str);
    }
    if (member_begin(&m, "mediaLink", NULL)) {
        scratch = scratch != NULL ? g_string_truncate(scratch, 0) : g_string_new(NULL);
        append_object_link(scratch, base, "/download/storage/v1/b/", obj);
        g_string_append(scratch, "?generation=");
        append_int64(scratch, obj->generation);
        g_string_append(scratch, "&alt=media");
        json_append_string(out, scratch->str);
    }
    if (scratch != NULL)
        g_string_free(scratch, TRUE);
    member_string(&m, "name", obj->name);
    member_string(&m, "bucket", obj->bucket);
    member_int64_text(&m, "generation", obj->generation);
    member_int64_text(&m, "metageneration", obj->metageneration);
    if (member_begin(&m, "size", NULL)) {
        g_string_append_c(out, '"');
        append_uint64(out, obj->size);
        g_string_append_c(out, '"');
    }
    member_string(&m, "contentType", obj->content_type);
    member_string(&m, "contentEncoding", obj->content_encoding);
    member_string(&m, "cacheControl", obj->cache_control);
    member_string(&m, "contentDisposition", obj->content_disposition);
    member_string(&m, "contentLanguage", obj->content_language);
    member_string(&m, "storageClass", obj->storage_class != NULL ? obj->storage_class : "STANDARD");
    bool want_created = emu_fields_select(fields, "timeCreated", NULL);
    if (want_created || emu_fields_select(fields, "timeStorageClassUpdated", NULL)) {
        emu_format_rfc3339(obj->time_created_us, when);
        member_string(&m, "timeCreated", when);
        member_string(&m, "timeStorageClassUpdated", when);
    }
    if (emu_fields_select(fields, "updated", NULL)) {
        emu_format_rfc3339(obj->updated_us, when);
        member_string(&m, "updated", when);
    }
    if (member_begin(&m, "crc32c", NULL)) {
        char crc[9];
        crc32c_to_base64(obj->crc32c, crc);
        json_append_string(out, crc);
    }
    if (obj->has_md5 && member_begin(&m, "md5Hash", NULL)) {
        char *md5 = base64_encode(obj->md5, 16, false);
        json_append_string(out, md5);
        g_free(md5);
    }
    if (obj->component_count > 0 && member_begin(&m, "componentCount", NULL))
        append_int64(out, obj->component_count);
    if (obj->custom_time_us != 0 && emu_fields_select(fields, "customTime", NULL)) {
        emu_format_rfc3339(obj->custom_time_us, when);
        member_string(&m, "customTime", when);
    }
    if (obj->temporary_hold && member_begin(&m, "temporaryHold", NULL))
        g_string_append(out, "true");
    if (obj->event_based_hold && member_begin(&m, "eventBasedHold", NULL))
        g_string_append(out, "true");
    if (member_begin(&m, "etag", NULL))
        append_object_etag(out, obj);
    const struct emu_fields *metadata_fields = NULL;
    if (obj->metadata != NULL && g_hash_table_size(obj->metadata) > 0 &&
        member_begin(&m, "metadata", &metadata_fields)) {
        /* Sorted keys: stable output for tests and diffs. */
        GList *keys = g_list_sort(g_hash_table_get_keys(obj->metadata), (GCompareFunc)strcmp);
        struct json_members entries = {out, metadata_fields, true};
        g_string_append_c(out, '{');
        for (GList *k = keys; k != NULL; k = k->next) {
            if (!emu_fields_select(metadata_fields, k->data, NULL))
                continue;
            if (!entries.first)
                g_string_append_c(out, ',');
            entries.first = false;
            json_append_string(out, k->data);
            g_string_append_c(out, ':');
            json_append_string(out, g_hash_table_lookup(obj->metadata, k->data));
        }
        g_string_append_c(out, '}');
        g_list_free(keys);
    }
    g_string_append_c(out, '}');
}

/* The request's `fields` selection. false (a 400 reply made) when it does not parse. */
static bool parse_fields(struct emu_request *req, struct emu_reply *reply,
                         struct emu_fields **fields)
{
    const char *text = emu_query(req, "fields");
    if (emu_fields_parse(text, fields) == 0)
        return true;
    emu_reply_json_error(reply, 400, "invalidParameter", "Invalid field selection %s", text);
    return false;
}

/* Replies with an object resource. After a change has been made the reply honours a valid
 * `fields` and renders everything when it does not parse (the change cannot be taken back). */
static void reply_object(struct emu_request *req, struct emu_reply *reply, unsigned status,
                         const struct emu_object *obj)
{
    struct emu_fields *fields = NULL;
    if (emu_fields_parse(emu_query(req, "fields"), &fields) < 0)
        fields = NULL;
    GString *json = g_string_new(NULL);
    append_object_json(json, obj, req->base_url, fields);
    emu_fields_free(fields);
    emu_reply_json(reply, status, json);
}

static void append_bucket_json(GString *out, const struct emu_bucket_info *info, const char *base)
{
    char when[40];
    emu_format_rfc3339(info->time_created_us, when);
    g_string_append(out, "{\"kind\":\"storage#bucket\",\"id\":");
    json_append_string(out, info->name);
    g_string_append(out, ",\"selfLink\":");
    GString *link = g_string_new(base);
    g_string_append(link, "/storage/v1/b/");
    emu_percent_encode(link, info->name);
    json_append_string(out, link->str);
    g_string_free(link, TRUE);
    append_field(out, "name", info->name);
    const struct emu_bucket_config *c = &info->config;
    g_string_append_printf(out, ",\"projectNumber\":\"0\",\"metageneration\":\"%" PRId64 "\"",
                           info->metageneration > 0 ? info->metageneration : 1);
    append_field(out, "location", c->location[0] ? c->location : "US");
    append_field(out, "locationType", c->location_type[0] ? c->location_type : "multi-region");
    append_field(out, "storageClass", c->storage_class[0] ? c->storage_class : "STANDARD");
    g_string_append(out, ",\"etag\":\"CAE=\",\"iamConfiguration\":{\"uniformBucketLevelAccess\":"
                         "{\"enabled\":true}}");
    char effective[40];
    emu_format_rfc3339(c->soft_delete_effective_us, effective);
    g_string_append_printf(out,
                           ",\"softDeletePolicy\":{\"retentionDurationSeconds\":\"%" PRId64
                           "\",\"effectiveTime\":\"%s\"}",
                           c->soft_delete_seconds, effective);
    if (c->versioning)
        g_string_append(out, ",\"versioning\":{\"enabled\":true}");
    if (c->retention_seconds > 0) {
        emu_format_rfc3339(c->retention_effective_us, effective);
        g_string_append_printf(out,
                               ",\"retentionPolicy\":{\"retentionPeriod\":\"%" PRId64
                               "\",\"effectiveTime\":\"%s\"}",
                               c->retention_seconds, effective);
    }
    if (c->default_event_based_hold)
        g_string_append(out, ",\"defaultEventBasedHold\":true");
    if (c->hierarchical_namespace)
        g_string_append(out, ",\"hierarchicalNamespace\":{\"enabled\":true}");
    if (c->autoclass) {
        emu_format_rfc3339(c->autoclass_toggle_us, effective);
        g_string_append_printf(out,
                               ",\"autoclass\":{\"enabled\":true,\"toggleTime\":\"%s\","
                               "\"terminalStorageClass\":\"NEARLINE\"}",
                               effective);
    }
    append_field(out, "timeCreated", when);
    emu_format_rfc3339(info->updated_us > 0 ? info->updated_us : info->time_created_us, when);
    append_field(out, "updated", when);
    g_string_append_c(out, '}');
}

/* A version that is not live: its resource plus when it stopped being live (timeDeleted) and,
 * soft-deleted, softDeleteTime and hardDeleteTime. */
static void append_archived_json(GString *out, const struct emu_archived_info *info,
                                 const char *base, const struct emu_fields *fields)
{
    append_object_json(out, info->obj, base, fields);
    if (out->len == 0 || out->str[out->len - 1] != '}')
        return;
    g_string_truncate(out, out->len - 1);
    char when[40];
    emu_format_rfc3339(info->since_us, when);
    if (out->str[out->len - 1] != '{')
        g_string_append_c(out, ',');
    if (info->state == EMU_STATE_SOFT_DELETED) {
        g_string_append_printf(out, "\"softDeleteTime\":\"%s\"", when);
        emu_format_rfc3339(info->hard_delete_us, when);
        g_string_append_printf(out, ",\"hardDeleteTime\":\"%s\"", when);
    } else {
        g_string_append_printf(out, "\"timeDeleted\":\"%s\"", when);
    }
    g_string_append_c(out, '}');
}

static gint compare_versions(gconstpointer a, gconstpointer b)
{
    const struct emu_object *x = *(struct emu_object *const *)a;
    const struct emu_object *y = *(struct emu_object *const *)b;
    int by_name = strcmp(x->name, y->name);
    if (by_name != 0)
        return by_name;
    return x->generation < y->generation ? -1 : x->generation > y->generation;
}

/* ------------------------------------------------------------------ request parsing */

/* Parses the request body as JSON; *root is NULL for an empty body. Replies 400 on failure. */
static bool parse_json_body(struct emu_request *req, struct emu_reply *reply, yajl_val *root)
{
    GBytes *body = emu_request_take_body(req);
    gsize len = 0;
    const char *data = g_bytes_get_data(body, &len);
    *root = NULL;
    bool blank = true;
    for (gsize i = 0; i < len && blank; i++)
        blank = g_ascii_isspace(data[i]);
    if (blank) {
        g_bytes_unref(body);
        return true;
    }
    char *text = g_strndup(data, len);
    g_bytes_unref(body);
    if (strlen(text) != len) {
        g_free(text);
        emu_reply_json_error(reply, 400, "parseError", "Parse Error");
        return false;
    }
    if (!json_depth_within(text, len, JSON_DEPTH_MAX)) {
        g_free(text);
        emu_reply_json_error(reply, 400, "parseError",
                             "Invalid JSON payload received. Nesting is too deep.");
        return false;
    }
    char error[256] = "";
    *root = yajl_tree_parse(text, error, sizeof(error));
    g_free(text);
    if (*root != NULL && YAJL_IS_NULL(*root)) {
        /* A JSON null is no resource at all, like an empty body (rclone 1.60 sends it to
         * rewriteTo); Cloud Storage accepts it. */
        yajl_tree_free(*root);
        *root = NULL;
        return true;
    }
    if (*root == NULL || !YAJL_IS_OBJECT(*root)) {
        if (*root != NULL)
            yajl_tree_free(*root);
        *root = NULL;
        emu_reply_json_error(reply, 400, "parseError", "Parse Error");
        return false;
    }
    return true;
}

static yajl_val json_get(yajl_val obj, const char *key)
{
    if (obj == NULL || !YAJL_IS_OBJECT(obj))
        return NULL;
    for (size_t i = 0; i < obj->u.object.len; i++) {
        if (strcmp(obj->u.object.keys[i], key) == 0)
            return obj->u.object.values[i];
    }
    return NULL;
}

static const char *json_get_string(yajl_val obj, const char *key)
{
    yajl_val value = json_get(obj, key);
    return value != NULL && YAJL_IS_STRING(value) ? YAJL_GET_STRING(value) : NULL;
}

/* int64 given as a JSON string (Cloud Storage's form) or number. */
static int json_get_int64(yajl_val obj, const char *key, bool *present, int64_t *out)
{
    yajl_val value = json_get(obj, key);
    *present = value != NULL && !YAJL_IS_NULL(value);
    if (!*present)
        return 0;
    if (YAJL_IS_INTEGER(value)) {
        *out = YAJL_GET_INTEGER(value);
        return 0;
    }
    if (YAJL_IS_STRING(value))
        return emu_parse_int64(YAJL_GET_STRING(value), out);
    return -EINVAL;
}

/* Reads the object metadata fields of a JSON resource into attrs (pointers into the tree).
 * *metadata is created when the resource has "metadata" (NULL values kept as NULL, meaning
 * "remove" for patch). Returns NULL or an error message. */
static const char *attrs_from_json(yajl_val root, struct emu_object_attrs *attrs,
                                   GHashTable **metadata, bool *clear_metadata)
{
    static const struct {
        const char *key;
        size_t offset;
    } fields[] = {
        {"contentType", offsetof(struct emu_object_attrs, content_type)},
        {"contentEncoding", offsetof(struct emu_object_attrs, content_encoding)},
        {"cacheControl", offsetof(struct emu_object_attrs, cache_control)},
        {"contentDisposition", offsetof(struct emu_object_attrs, content_disposition)},
        {"contentLanguage", offsetof(struct emu_object_attrs, content_language)},
        {"storageClass", offsetof(struct emu_object_attrs, storage_class)},
    };
    *metadata = NULL;
    if (clear_metadata != NULL)
        *clear_metadata = false;
    if (root == NULL)
        return NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(fields); i++) {
        yajl_val value = json_get(root, fields[i].key);
        if (value == NULL)
            continue;
        if (YAJL_IS_NULL(value)) {
            /* null clears the field (patch); a new object gets the default */
            *(const char **)((char *)attrs + fields[i].offset) = "";
            continue;
        }
        if (!YAJL_IS_STRING(value))
            return "Invalid value for an object metadata field.";
        *(const char **)((char *)attrs + fields[i].offset) = YAJL_GET_STRING(value);
    }
    yajl_val custom_time = json_get(root, "customTime");
    if (custom_time != NULL) {
        attrs->has_custom_time = true;
        if (YAJL_IS_STRING(custom_time)) {
            if (emu_parse_rfc3339(YAJL_GET_STRING(custom_time), &attrs->custom_time_us) < 0 ||
                attrs->custom_time_us <= 0)
                return "Invalid value for customTime: it must be an RFC 3339 date-time.";
        } else if (!YAJL_IS_NULL(custom_time)) {
            return "Invalid value for customTime: it must be an RFC 3339 date-time.";
        }
    }
    static const struct {
        const char *key;
        size_t has, value;
    } holds[] = {
        {"temporaryHold", offsetof(struct emu_object_attrs, has_temporary_hold),
         offsetof(struct emu_object_attrs, temporary_hold)},
        {"eventBasedHold", offsetof(struct emu_object_attrs, has_event_based_hold),
         offsetof(struct emu_object_attrs, event_based_hold)},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(holds); i++) {
        yajl_val value = json_get(root, holds[i].key);
        if (value == NULL)
            continue;
        if (!YAJL_IS_TRUE(value) && !YAJL_IS_FALSE(value) && !YAJL_IS_NULL(value))
            return "Invalid value for a hold: it must be true or false.";
        *(bool *)((char *)attrs + holds[i].has) = true;
        *(bool *)((char *)attrs + holds[i].value) = YAJL_IS_TRUE(value);
    }
    const char *crc = json_get_string(root, "crc32c");
    if (crc != NULL) {
        if (crc32c_from_base64(crc, &attrs->crc32c) < 0)
            return "Invalid crc32c.";
        attrs->has_crc32c = true;
    }
    const char *md5 = json_get_string(root, "md5Hash");
    if (md5 != NULL) {
        size_t len = 0;
        uint8_t *raw = base64_decode(md5, strlen(md5), &len);
        if (raw == NULL || len != 16) {
            g_free(raw);
            return "Invalid md5Hash.";
        }
        memcpy(attrs->md5, raw, 16);
        attrs->has_md5 = true;
        g_free(raw);
    }
    yajl_val meta = json_get(root, "metadata");
    if (meta != NULL && YAJL_IS_NULL(meta)) {
        if (clear_metadata != NULL)
            *clear_metadata = true;
    } else if (meta != NULL) {
        if (!YAJL_IS_OBJECT(meta))
            return "Invalid value for metadata: it must be an object.";
        /* Patch merges metadata key by key: null removes a key, an empty object changes
         * nothing ("metadata": null clears them all). */
        *metadata = g_hash_table_new(g_str_hash, g_str_equal);
        for (size_t i = 0; i < meta->u.object.len; i++) {
            yajl_val value = meta->u.object.values[i];
            char *text = NULL;
            if (YAJL_IS_STRING(value))
                text = YAJL_GET_STRING(value);
            else if (YAJL_IS_NUMBER(value) || YAJL_IS_TRUE(value) || YAJL_IS_FALSE(value))
                text = YAJL_IS_NUMBER(value) ? value->u.number.r
                                             : (char *)(YAJL_IS_TRUE(value) ? "true" : "false");
            else if (!YAJL_IS_NULL(value))
                return "Invalid value for a metadata entry.";
            g_hash_table_insert(*metadata, (char *)meta->u.object.keys[i], text);
        }
        attrs->metadata = *metadata;
    }
    return NULL;
}

/* Metadata for writes: NULL values (removals) make no sense there and are dropped. */
static void drop_null_metadata(GHashTable *metadata)
{
    if (metadata == NULL)
        return;
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, metadata);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        if (value == NULL)
            g_hash_table_iter_remove(&iter);
    }
}

static int parse_query_int64(struct emu_request *req, const char *key, bool *present, int64_t *out)
{
    const char *text = emu_query(req, key);
    *present = text != NULL;
    if (text == NULL)
        return 0;
    return emu_parse_int64(text, out);
}

/* ifGenerationMatch & co (infix "" ) or ifSourceGenerationMatch & co (infix "Source"). */
static bool parse_preconditions(struct emu_request *req, struct emu_reply *reply, const char *infix,
                                struct emu_preconditions *pre)
{
    struct {
        const char *what;
        bool *has;
        int64_t *value;
    } items[] = {
        {"GenerationMatch", &pre->has_if_generation_match, &pre->if_generation_match},
        {"GenerationNotMatch", &pre->has_if_generation_not_match, &pre->if_generation_not_match},
        {"MetagenerationMatch", &pre->has_if_metageneration_match, &pre->if_metageneration_match},
        {"MetagenerationNotMatch", &pre->has_if_metageneration_not_match,
         &pre->if_metageneration_not_match},
    };
    memset(pre, 0, sizeof(*pre));
    for (size_t i = 0; i < G_N_ELEMENTS(items); i++) {
        char key[64];
        snprintf(key, sizeof(key), "if%s%s", infix, items[i].what);
        if (emu_query(req, key) == NULL && g_str_has_prefix(items[i].what, "Meta")) {
            /* Google's Python client spells ifMetaGenerationNotMatch on uploads. */
            snprintf(key, sizeof(key), "if%sMetaGeneration%s", infix, items[i].what + 14);
        }
        if (parse_query_int64(req, key, items[i].has, items[i].value) < 0) {
            emu_reply_json_error(reply, 400, "invalid", "Invalid argument for parameter %s.", key);
            return false;
        }
    }
    return true;
}

static bool parse_generation(struct emu_request *req, struct emu_reply *reply, const char *key,
                             int64_t *generation)
{
    bool present;
    *generation = 0;
    if (parse_query_int64(req, key, &present, generation) < 0 || *generation < 0) {
        emu_reply_json_error(reply, 400, "invalid", "Invalid argument for parameter %s.", key);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ buckets */

static void handle_buckets_list(struct emu_request *req, struct emu_reply *reply)
{
    const char *prefix = emu_query(req, "prefix");
    GPtrArray *buckets = emu_store_bucket_list(req->store);
    GString *json = g_string_new("{\"kind\":\"storage#buckets\"");
    bool first = true;
    for (guint i = 0; i < buckets->len; i++) {
        const struct emu_bucket_info *info = g_ptr_array_index(buckets, i);
        if (prefix != NULL && !g_str_has_prefix(info->name, prefix))
            continue;
        g_string_append(json, first ? ",\"items\":[" : ",");
        append_bucket_json(json, info, req->base_url);
        first = false;
    }
    if (!first)
        g_string_append_c(json, ']');
    g_string_append_c(json, '}');
    g_ptr_array_unref(buckets);
    emu_reply_json(reply, 200, json);
}

static bool valid_bucket_name(const char *name)
{
    size_t len = strlen(name);
    if (len < 3 || len > 222)
        return false;
    for (const char *p = name; *p != '\0'; p++) {
        if (!(g_ascii_islower(*p) || g_ascii_isdigit(*p) || *p == '-' || *p == '_' || *p == '.'))
            return false;
    }
    return g_ascii_isalnum(name[0]) && g_ascii_isalnum(name[len - 1]);
}

static bool json_enabled(yajl_val value)
{
    yajl_val enabled = json_get(value, "enabled");
    return enabled != NULL && YAJL_IS_TRUE(enabled);
}

/* Applies the configuration members of a bucket resource to *config (members left out keep
 * their value; null clears a policy). Returns NULL or an error message. */
static const char *bucket_config_from_json(yajl_val root, struct emu_bucket_config *config,
                                           bool creating)
{
    if (root == NULL)
        return NULL;
    yajl_val value;
    if ((value = json_get(root, "storageClass")) != NULL && !YAJL_IS_NULL(value)) {
        int cls = YAJL_IS_STRING(value) ? emu_storage_class_parse(YAJL_GET_STRING(value)) : -1;
        if (cls < 0)
            return "Invalid argument: storageClass.";
        g_strlcpy(config->storage_class, emu_storage_class_name(cls),
                  sizeof(config->storage_class));
    }
    const char *location = json_get_string(root, "location");
    if (location != NULL) {
        if (!creating)
            return "The location of a bucket cannot be changed.";
        if (location[0] == '\0' || strlen(location) >= sizeof(config->location))
            return "Invalid argument: location.";
        g_strlcpy(config->location, location, sizeof(config->location));
        for (char *p = config->location; *p != '\0'; p++)
            *p = g_ascii_toupper(*p);
        /* Cloud Storage's multi-regions and dual-regions by name; the rest are regions. */
        const char *type = "region";
        if (strcmp(config->location, "US") == 0 || strcmp(config->location, "EU") == 0 ||
            strcmp(config->location, "ASIA") == 0)
            type = "multi-region";
        else if (strcmp(config->location, "NAM4") == 0 || strcmp(config->location, "EUR4") == 0 ||
                 strcmp(config->location, "ASIA1") == 0 || json_get(root, "customPlacementConfig"))
            type = "dual-region";
        g_strlcpy(config->location_type, type, sizeof(config->location_type));
    }
    if ((value = json_get(root, "softDeletePolicy")) != NULL) {
        bool present = false;
        int64_t seconds = 0;
        if (!YAJL_IS_NULL(value) &&
            json_get_int64(value, "retentionDurationSeconds", &present, &seconds) < 0)
            return "Invalid argument: softDeletePolicy.retentionDurationSeconds.";
        /* 0 turns it off; otherwise 7 to 90 days. */
        if (present && seconds != 0 && (seconds < 7 * 86400 || seconds > 90 * 86400))
            return "The soft delete retention duration must be 0 or between 7 and 90 days.";
        config->soft_delete_seconds = present ? seconds : 0;
    }
    if ((value = json_get(root, "versioning")) != NULL)
        config->versioning = json_enabled(value);
    if ((value = json_get(root, "retentionPolicy")) != NULL) {
        bool present = false;
        int64_t seconds = 0;
        if (!YAJL_IS_NULL(value) &&
            json_get_int64(value, "retentionPeriod", &present, &seconds) < 0)
            return "Invalid argument: retentionPolicy.retentionPeriod.";
        if (present && (seconds <= 0 || seconds > INT64_C(3155760000)))
            return "Invalid argument: retentionPolicy.retentionPeriod.";
        config->retention_seconds = present ? seconds : 0;
    }
    if ((value = json_get(root, "defaultEventBasedHold")) != NULL)
        config->default_event_based_hold = YAJL_IS_TRUE(value);
    if ((value = json_get(root, "hierarchicalNamespace")) != NULL)
        config->hierarchical_namespace = json_enabled(value);
    if ((value = json_get(root, "autoclass")) != NULL)
        config->autoclass = json_enabled(value);
    if (config->versioning && config->retention_seconds > 0)
        return "A bucket cannot have both a retention policy and object versioning.";
    return NULL;
}

static void handle_buckets_insert(struct emu_request *req, struct emu_reply *reply)
{
    yajl_val root;
    if (!parse_json_body(req, reply, &root))
        return;
    const char *name = json_get_string(root, "name");
    struct emu_bucket_config config;
    emu_store_bucket_config_defaults(req->store, &config);
    const char *problem = bucket_config_from_json(root, &config, true);
    if (name == NULL) {
        emu_reply_json_error(reply, 400, "required", "Required parameter: name");
    } else if (!valid_bucket_name(name)) {
        emu_reply_json_error(reply, 400, "invalid", "Invalid bucket name: '%s'", name);
    } else if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
    } else {
        int ret = emu_store_bucket_insert_config(req->store, name, &config);
        struct emu_bucket_info info = {0};
        if (ret == 0)
            ret = emu_store_bucket_get(req->store, name, &info);
        if (ret < 0) {
            emu_reply_errno(req, reply, ret, name);
        } else {
            GString *json = g_string_new(NULL);
            append_bucket_json(json, &info, req->base_url);
            emu_reply_json(reply, 200, json);
        }
        emu_bucket_info_clear(&info);
    }
    if (root != NULL)
        yajl_tree_free(root);
}

static void handle_buckets_get(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, req->bucket);
    } else {
        GString *json = g_string_new(NULL);
        append_bucket_json(json, &info, req->base_url);
        emu_reply_json(reply, 200, json);
    }
    emu_bucket_info_clear(&info);
}

/* buckets.patch changes what the body names; buckets.update (PUT) resets the policies the body
 * leaves out (location and the hierarchical namespace cannot change either way). */
static void handle_buckets_patch(struct emu_request *req, struct emu_reply *reply)
{
    yajl_val root;
    if (!parse_json_body(req, reply, &root))
        return;
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, req->bucket);
        if (root != NULL)
            yajl_tree_free(root);
        return;
    }
    struct emu_bucket_config config = info.config;
    if (req->op == EMU_OP_BUCKETS_UPDATE) {
        config.soft_delete_seconds = emu_store_bucket_config_defaults_soft_delete(req->store);
        config.versioning = false;
        config.retention_seconds = 0;
        config.default_event_based_hold = false;
        config.autoclass = false;
    }
    const char *location = json_get_string(root, "location");
    const char *problem = NULL;
    if (location != NULL && g_ascii_strcasecmp(location, config.location) == 0) {
        /* the same location, as an update repeating the resource sends it */
    } else {
        problem = bucket_config_from_json(NULL, &config, false);
    }
    if (problem == NULL) {
        /* location checked above; bucket_config_from_json must not see an unchanged one */
        yajl_val saved = NULL;
        for (size_t i = 0; root != NULL && i < root->u.object.len; i++)
            if (strcmp(root->u.object.keys[i], "location") == 0 && location != NULL &&
                g_ascii_strcasecmp(location, config.location) == 0) {
                saved = root->u.object.values[i];
                root->u.object.values[i] = NULL;
            }
        problem = bucket_config_from_json(root, &config, false);
        for (size_t i = 0; saved != NULL && i < root->u.object.len; i++)
            if (root->u.object.values[i] == NULL)
                root->u.object.values[i] = saved;
    }
    bool has_meta = false;
    int64_t meta = 0;
    const char *text = emu_query(req, "ifMetagenerationMatch");
    if (text != NULL)
        has_meta = emu_parse_int64(text, &meta) == 0;
    struct emu_bucket_info updated = {0};
    if (problem == NULL)
        ret =
            emu_store_bucket_configure(req->store, req->bucket, &config, has_meta, meta, &updated);
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
    } else if (ret == -EINVAL) {
        emu_reply_json_error(reply, 400, "invalid",
                             "The hierarchical namespace of a bucket cannot be changed.");
    } else if (ret < 0) {
        emu_reply_errno(req, reply, ret, req->bucket);
    } else {
        GString *json = g_string_new(NULL);
        append_bucket_json(json, &updated, req->base_url);
        emu_reply_json(reply, 200, json);
    }
    emu_bucket_info_clear(&updated);
    emu_bucket_info_clear(&info);
    if (root != NULL)
        yajl_tree_free(root);
}

static void handle_buckets_delete(struct emu_request *req, struct emu_reply *reply)
{
    int ret = emu_store_bucket_delete(req->store, req->bucket);
    if (ret == -ENOTEMPTY)
        emu_reply_json_error(reply, 409, "conflict",
                             "The bucket you tried to delete is not empty.");
    else if (ret < 0)
        emu_reply_errno(req, reply, ret, req->bucket);
    else
        emu_reply_empty(reply, 204);
}

/* The bucket's storage layout (gcloud asks before mv, rm -r and cp -r, and accepts only a layout
 * or 403): a flat namespace, the location buckets.get reports. */
static void handle_buckets_storage_layout(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, req->bucket);
    } else {
        GString *json = g_string_new("{\"kind\":\"storage#storageLayout\",\"bucket\":");
        json_append_string(json, info.name);
        append_field(json, "location", info.config.location);
        append_field(json, "locationType", info.config.location_type);
        g_string_append_printf(json, ",\"hierarchicalNamespace\":{\"enabled\":%s}}",
                               info.config.hierarchical_namespace ? "true" : "false");
        emu_reply_json(reply, 200, json);
    }
    emu_bucket_info_clear(&info);
}

static void handle_buckets_test_iam(struct emu_request *req, struct emu_reply *reply)
{
    GString *json = g_string_new("{\"kind\":\"storage#testIamPermissionsResponse\"");
    bool first = true;
    for (guint i = 0; i + 1 < req->query->len; i += 2) {
        if (strcmp(g_ptr_array_index(req->query, i), "permissions") != 0)
            continue;
        g_string_append(json, first ? ",\"permissions\":[" : ",");
        json_append_string(json, g_ptr_array_index(req->query, i + 1));
        first = false;
    }
    if (!first)
        g_string_append_c(json, ']');
    g_string_append_c(json, '}');
    emu_reply_json(reply, 200, json);
}

/* ------------------------------------------------------------------ objects: reads */

static gint compare_prefix_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void handle_objects_list(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_fields *fields = NULL;
    if (!parse_fields(req, reply, &fields))
        return;
    struct emu_list_request list = {
        .prefix = emu_query(req, "prefix"),
        .delimiter = emu_query(req, "delimiter"),
        .start_offset = emu_query(req, "startOffset"),
        .end_offset = emu_query(req, "endOffset"),
        .page_token = emu_query(req, "pageToken"),
        .include_trailing_delimiter = emu_query_bool(req, "includeTrailingDelimiter"),
    };
    if (list.delimiter != NULL && list.delimiter[0] == '\0')
        list.delimiter = NULL;
    if (list.page_token != NULL && list.page_token[0] == '\0')
        list.page_token = NULL;
    if (list.start_offset != NULL && list.start_offset[0] == '\0')
        list.start_offset = NULL;
    if (list.end_offset != NULL && list.end_offset[0] == '\0')
        list.end_offset = NULL;
    bool present;
    int64_t max_results = 1000;
    if (parse_query_int64(req, "maxResults", &present, &max_results) < 0 || max_results < 0) {
        emu_reply_json_error(reply, 400, "invalid", "Invalid argument for parameter maxResults.");
        return;
    }
    list.max_results = max_results == 0 || max_results > 1000 ? 1000 : (unsigned)max_results;
    list.match_glob = emu_query(req, "matchGlob");
    if (list.match_glob != NULL && list.match_glob[0] == '\0')
        list.match_glob = NULL;
    if (list.match_glob != NULL && emu_glob_valid(list.match_glob) < 0) {
        emu_fields_free(fields);
        emu_reply_json_error(reply, 400, "invalid", "Invalid argument for parameter matchGlob.");
        return;
    }
    bool soft_deleted = emu_query_bool(req, "softDeleted");
    bool versions = emu_query_bool(req, "versions");
    GPtrArray *archived = NULL; /* soft-deleted or noncurrent versions of this page */
    if (soft_deleted && versions) {
        emu_fields_free(fields);
        emu_reply_json_error(reply, 400, "invalid",
                             "The softDeleted and versions parameters cannot be used together.");
        return;
    }
    struct emu_list_result result = {0};
    int ret;
    if (soft_deleted) {
        /* Soft-deleted versions: one page, ordered by name and generation. */
        ret = emu_store_list_archived(req->store, req->bucket, list.prefix, EMU_STATE_SOFT_DELETED,
                                      &archived);
        if (ret == 0) {
            result.items = g_ptr_array_new();
            result.prefixes = g_ptr_array_new();
        }
    } else {
        ret = emu_store_list(req->store, req->bucket, &list, &result);
        /* versions=true: noncurrent versions join the last page (names under a delimiter
         * are left to their prefix). */
        if (ret == 0 && versions && result.next_page_token == NULL) {
            GPtrArray *noncurrent = NULL;
            if (emu_store_list_archived(req->store, req->bucket, list.prefix, EMU_STATE_NONCURRENT,
                                        &noncurrent) == 0) {
                archived = g_ptr_array_new_with_free_func(g_free);
                size_t skip = list.prefix != NULL ? strlen(list.prefix) : 0;
                for (guint i = 0; i < noncurrent->len; i++) {
                    struct emu_archived_info *info = g_ptr_array_index(noncurrent, i);
                    if (list.delimiter != NULL &&
                        strstr(info->obj->name + skip, list.delimiter) != NULL)
                        continue;
                    struct emu_archived_info *copy = g_new(struct emu_archived_info, 1);
                    *copy = *info;
                    copy->obj = NULL;
                    g_ptr_array_add(result.items, emu_object_ref(info->obj));
                    copy->obj = info->obj; /* borrowed from result.items */
                    g_ptr_array_add(archived, copy);
                }
                g_ptr_array_unref(noncurrent);
                g_ptr_array_sort(result.items, compare_versions);
            }
        }
    }
    /* includeFoldersAsPrefixes=true with the delimiter "/" on a hierarchical-namespace
     * bucket: the folders directly below the prefix are prefixes too, empty ones included.
     * They join the last page (Cloud Storage interleaves them in name order: clients that
     * merge pages see the same set). */
    if (ret == 0 && !soft_deleted && result.next_page_token == NULL && list.delimiter != NULL &&
        strcmp(list.delimiter, "/") == 0 && emu_query_bool(req, "includeFoldersAsPrefixes")) {
        GPtrArray *folders = NULL;
        if (emu_store_folder_list(req->store, req->bucket, list.prefix ? list.prefix : "", true,
                                  &folders) == 0) {
            GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
            for (guint i = 0; i < result.prefixes->len; i++)
                g_hash_table_add(seen, g_ptr_array_index(result.prefixes, i));
            for (guint i = 0; i < folders->len; i++) {
                const struct emu_folder_info *f = g_ptr_array_index(folders, i);
                if (!g_hash_table_contains(seen, f->name))
                    g_ptr_array_add(result.prefixes, g_strdup(f->name));
            }
            g_hash_table_destroy(seen);
            g_ptr_array_sort(result.prefixes, compare_prefix_strings);
            g_ptr_array_unref(folders);
        }
    }
    if (ret == -EINVAL) {
        emu_fields_free(fields);
        emu_reply_json_error(reply, 400, "invalid", "Invalid argument: pageToken.");
        return;
    }
    if (ret < 0) {
        emu_fields_free(fields);
        emu_reply_errno(req, reply, ret, req->bucket);
        return;
    }
    GString *json = g_string_sized_new(256 + 700 * (gsize)result.items->len);
    struct json_members m = {json, fields, true};
    g_string_append_c(json, '{');
    member_string(&m, "kind", "storage#objects");
    if (result.next_page_token != NULL)
        member_string(&m, "nextPageToken", result.next_page_token);
    if (result.prefixes->len > 0 && member_begin(&m, "prefixes", NULL)) {
        g_string_append_c(json, '[');
        for (guint i = 0; i < result.prefixes->len; i++) {
            if (i > 0)
                g_string_append_c(json, ',');
            json_append_string(json, g_ptr_array_index(result.prefixes, i));
        }
        g_string_append_c(json, ']');
    }
    const struct emu_fields *item_fields = NULL;
    if (soft_deleted && archived->len > 0 && member_begin(&m, "items", &item_fields)) {
        g_string_append_c(json, '[');
        for (guint i = 0; i < archived->len; i++) {
            if (i > 0)
                g_string_append_c(json, ',');
            append_archived_json(json, g_ptr_array_index(archived, i), req->base_url, item_fields);
        }
        g_string_append_c(json, ']');
    } else if (result.items->len > 0 && member_begin(&m, "items", &item_fields)) {
        g_string_append_c(json, '[');
        for (guint i = 0; i < result.items->len; i++) {
            if (i > 0)
                g_string_append_c(json, ',');
            const struct emu_object *obj = g_ptr_array_index(result.items, i);
            const struct emu_archived_info *info = NULL;
            for (guint j = 0; archived != NULL && j < archived->len && info == NULL; j++)
                if (((struct emu_archived_info *)g_ptr_array_index(archived, j))->obj == obj)
                    info = g_ptr_array_index(archived, j);
            if (info != NULL)
                append_archived_json(json, info, req->base_url, item_fields);
            else
                append_object_json(json, obj, req->base_url, item_fields);
        }
        g_string_append_c(json, ']');
    }
    g_string_append_c(json, '}');
    emu_fields_free(fields);
    if (archived != NULL)
        g_ptr_array_unref(archived);
    emu_list_result_clear(&result);
    emu_reply_json(reply, 200, json);
}

/* Headers Cloud Storage sends with object media (shared with nothing else: the XML API has
 * its own set). */
static void add_media_headers(struct emu_request *req, struct emu_reply *reply,
                              const struct emu_object *obj)
{
    char crc[9];
    crc32c_to_base64(obj->crc32c, crc);
    emu_reply_header(reply, "Content-Type", obj->content_type);
    emu_reply_headerf(reply, "x-goog-generation", "%" PRId64, obj->generation);
    emu_reply_headerf(reply, "x-goog-metageneration", "%" PRId64, obj->metageneration);
    emu_reply_headerf(reply, "x-goog-stored-content-length", "%" PRIu64, obj->size);
    emu_reply_header(reply, "x-goog-stored-content-encoding",
                     obj->content_encoding != NULL ? obj->content_encoding : "identity");
    emu_reply_header(reply, "x-goog-storage-class",
                     obj->storage_class != NULL ? obj->storage_class : "STANDARD");
    if (obj->has_md5) {
        char *md5 = base64_encode(obj->md5, 16, false);
        emu_reply_headerf(reply, "x-goog-hash", "crc32c=%s,md5=%s", crc, md5);
        g_free(md5);
    } else {
        emu_reply_headerf(reply, "x-goog-hash", "crc32c=%s", crc);
    }
    GString *etag = g_string_new(NULL);
    append_object_etag(etag, obj);
    emu_reply_header(reply, "ETag", etag->str);
    g_string_free(etag, TRUE);
    char when[40];
    emu_format_http_date(obj->updated_us, when);
    emu_reply_header(reply, "Last-Modified", when);
    emu_reply_header(reply, "Accept-Ranges", "bytes");
    if (obj->content_encoding != NULL)
        emu_reply_header(reply, "Content-Encoding", obj->content_encoding);
    if (obj->cache_control != NULL)
        emu_reply_header(reply, "Cache-Control", obj->cache_control);
    if (obj->content_disposition != NULL)
        emu_reply_header(reply, "Content-Disposition", obj->content_disposition);
    if (obj->content_language != NULL)
        emu_reply_header(reply, "Content-Language", obj->content_language);
}

static void serve_media(struct emu_request *req, struct emu_reply *reply, struct emu_object *obj)
{
    const char *range = emu_header(req, "Range");
    uint64_t first = 0, last = 0;
    int ret = range != NULL ? emu_parse_range(range, obj->size, &first, &last) : -EINVAL;
    if (ret == -ERANGE) {
        emu_reply_json_error(reply, 416, "requestedRangeNotSatisfiable",
                             "The requested range cannot be satisfied.");
        emu_reply_headerf(reply, "Content-Range", "bytes */%" PRIu64, obj->size);
        return;
    }
    add_media_headers(req, reply, obj);
    if (ret == 0) {
        emu_reply_headerf(reply, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first,
                          last, obj->size);
        emu_reply_stream(reply, 206, obj, first, last - first + 1);
    } else {
        emu_reply_stream(reply, 200, obj, 0, obj->size);
    }
}

/* objects.restore: a soft-deleted generation becomes live again (as a new generation). */
static void handle_objects_restore(struct emu_request *req, struct emu_reply *reply)
{
    int64_t generation;
    struct emu_preconditions pre;
    if (!parse_generation(req, reply, "generation", &generation) ||
        !parse_preconditions(req, reply, "", &pre))
        return;
    if (generation == 0) {
        emu_reply_json_error(reply, 400, "required", "Required parameter: generation");
        return;
    }
    struct emu_object *obj = NULL;
    int ret = emu_store_restore(req->store, req->bucket, req->object, generation, &pre, &obj);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, req->object);
        return;
    }
    reply_object(req, reply, 200, obj);
    emu_object_unref(obj);
}

static void handle_objects_get(struct emu_request *req, struct emu_reply *reply)
{
    int64_t generation;
    struct emu_preconditions pre;
    struct emu_fields *fields = NULL;
    if (!parse_generation(req, reply, "generation", &generation) ||
        !parse_preconditions(req, reply, "", &pre) ||
        (req->op != EMU_OP_OBJECTS_DOWNLOAD && !parse_fields(req, reply, &fields)))
        return;
    emu_fields_free(fields); /* valid: reply_object applies it */
    if (emu_query_bool(req, "softDeleted")) {
        /* A soft-deleted version: by generation only, metadata only. */
        struct emu_archived_info info = {0};
        int found = generation != 0 && req->op != EMU_OP_OBJECTS_DOWNLOAD
                        ? emu_store_get_soft_deleted(req->store, req->bucket, req->object,
                                                     generation, &info)
                        : -ENOENT;
        if (found < 0) {
            emu_reply_json_error(reply, 404, "notFound", "No such object: %s/%s", req->bucket,
                                 req->object);
            return;
        }
        GString *json = g_string_new(NULL);
        append_archived_json(json, &info, req->base_url, NULL);
        emu_archived_info_clear(&info);
        emu_reply_json(reply, 200, json);
        return;
    }
    struct emu_object *obj = NULL;
    int ret =
        emu_store_get_object(req->store, req->bucket, req->object, generation, &pre, true, &obj);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, req->object);
        return;
    }
    const char *alt = emu_query(req, "alt");
    if (req->op == EMU_OP_OBJECTS_DOWNLOAD)
        serve_media(req, reply, obj);
    else if (alt != NULL && strcmp(alt, "json") != 0)
        emu_reply_json_error(reply, 400, "invalid", "Invalid argument for parameter alt.");
    else
        reply_object(req, reply, 200, obj);
    emu_object_unref(obj);
}

/* ------------------------------------------------------------------ objects: uploads */

static bool valid_object_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 1024 || !g_utf8_validate(name, (gssize)len, NULL))
        return false;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    return strchr(name, '\r') == NULL && strchr(name, '\n') == NULL;
}

static void put_and_reply(struct emu_request *req, struct emu_reply *reply, const char *name,
                          GBytes *data, const struct emu_object_attrs *attrs,
                          const struct emu_preconditions *pre)
{
    struct emu_object *obj = NULL;
    int ret = emu_store_put_object(req->store, req->bucket, name, emu_content_new_bytes(data),
                                   attrs, pre, &obj);
    if (ret < 0) {
        g_free(req->object);
        req->object = g_strdup(name);
        emu_reply_errno(req, reply, ret, name);
        return;
    }
    reply_object(req, reply, 200, obj);
    emu_object_unref(obj);
}

/* Value of a parameter in a Content-Type header, e.g. boundary; quotes removed. Double quotes
 * (RFC 2045) and single quotes (what Python's email package, and so apitools and gcloud, write)
 * are both accepted, as Cloud Storage does. */
static char *header_parameter(const char *header, const char *name)
{
    size_t name_len = strlen(name);
    const char *p = strchr(header, ';');
    while (p != NULL) {
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (g_ascii_strncasecmp(p, name, name_len) == 0 && p[name_len] == '=') {
            const char *value = p + name_len + 1;
            if (*value == '"' || *value == '\'') {
                const char *end = strchr(value + 1, *value);
                return end != NULL && end > value + 1
                           ? g_strndup(value + 1, (gsize)(end - value - 1))
                           : NULL;
            }
            size_t len = strcspn(value, "; \t");
            return len > 0 ? g_strndup(value, len) : NULL;
        }
        p = strchr(p, ';');
    }
    return NULL;
}

struct mime_part {
    const char *headers; /* not NUL-terminated */
    size_t headers_len;
    size_t body_offset; /* in the whole body */
    size_t body_len;
};

/* Splits a multipart/related body into its parts (binary-safe). Returns the number of parts
 * (at most max) or -EINVAL.
 *
 * Line breaks are CRLF (RFC 2046) or bare LF (Python's email generator, which apitools and so
 * gcloud use): the line after the first delimiter decides which, and the whole body is read
 * with that one: a part ends at that line break followed by the delimiter, its headers at an
 * empty line. Deciding once keeps a CR at the end of LF-style media (or an LF inside
 * CRLF-style media) part of the bytes. */
static int split_multipart(const uint8_t *data, size_t len, const char *boundary,
                           struct mime_part *parts, int max)
{
    char *delimiter = g_strdup_printf("--%s", boundary);
    size_t dlen = strlen(delimiter);
    int count = 0;
    const uint8_t *end = data + len;
    const uint8_t *p = memmem(data, len, delimiter, dlen);
    const char *eol = NULL; /* "\r\n" or "\n", from the first delimiter line */
    size_t eol_len = 0;
    char blank[5]; /* eol twice: the end of a part's headers */
    int ret = -EINVAL;
    while (p != NULL) {
        p += dlen;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
            ret = count; /* closing delimiter */
            break;
        }
        while (p < end && (*p == ' ' || *p == '\t'))
            p++; /* transport padding */
        if (eol == NULL) {
            if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
                eol = "\r\n";
            else if (p < end && *p == '\n')
                eol = "\n";
            else
                break;
            eol_len = strlen(eol);
            g_snprintf(blank, sizeof(blank), "%s%s", eol, eol);
        }
        if ((size_t)(end - p) < eol_len || memcmp(p, eol, eol_len) != 0)
            break;
        p += eol_len;
        const uint8_t *head_end;
        size_t sep = 2 * eol_len;
        if ((size_t)(end - p) >= eol_len && memcmp(p, eol, eol_len) == 0) {
            head_end = p; /* a part without headers: the blank line comes at once */
            sep = eol_len;
        } else {
            head_end = memmem(p, (size_t)(end - p), blank, 2 * eol_len);
        }
        if (head_end == NULL)
            break;
        const uint8_t *body = head_end + sep;
        /* The part ends at a line break + delimiter. */
        const uint8_t *next = body;
        const uint8_t *found = NULL;
        while (next < end) {
            found = memmem(next, (size_t)(end - next), delimiter, dlen);
            if (found == NULL)
                break;
            if ((size_t)(found - body) >= eol_len && memcmp(found - eol_len, eol, eol_len) == 0)
                break;
            next = found + 1;
            found = NULL;
        }
        if (found == NULL || count == max)
            break;
        parts[count].headers = (const char *)p;
        parts[count].headers_len = (size_t)(head_end - p);
        parts[count].body_offset = (size_t)(body - data);
        parts[count].body_len = (size_t)(found - eol_len - body);
        count++;
        p = found;
    }
    g_free(delimiter);
    return ret;
}

/* Content-Type header inside a MIME part's headers, or NULL. */
static char *part_content_type(const struct mime_part *part)
{
    char *headers = g_strndup(part->headers, part->headers_len);
    char **lines = g_strsplit(headers, "\n", -1);
    char *type = NULL;
    for (char **line = lines; *line != NULL && type == NULL; line++) {
        if (g_ascii_strncasecmp(*line, "content-type:", 13) == 0)
            type = g_strstrip(g_strdup(*line + 13));
    }
    g_strfreev(lines);
    g_free(headers);
    return type;
}

static void insert_multipart(struct emu_request *req, struct emu_reply *reply,
                             const struct emu_preconditions *pre)
{
    const char *content_type = emu_header(req, "Content-Type");
    char *boundary = content_type != NULL ? header_parameter(content_type, "boundary") : NULL;
    if (content_type == NULL || g_ascii_strncasecmp(content_type, "multipart/", 10) != 0 ||
        boundary == NULL || strlen(boundary) > 200) {
        g_free(boundary);
        emu_reply_json_error(reply, 400, "badContent",
                             "The multipart upload needs a multipart/related Content-Type with a "
                             "boundary.");
        return;
    }
    GBytes *body = emu_request_take_body(req);
    gsize len = 0;
    const uint8_t *data = g_bytes_get_data(body, &len);
    struct mime_part parts[3];
    int count = split_multipart(data != NULL ? data : (const uint8_t *)"", len, boundary, parts, 3);
    g_free(boundary);
    if (count != 2) {
        g_bytes_unref(body);
        emu_reply_json_error(reply, 400, "badContent",
                             "The multipart body must hold exactly a metadata part and a media "
                             "part.");
        return;
    }
    char *json_text = g_strndup((const char *)data + parts[0].body_offset, parts[0].body_len);
    char error[256] = "";
    yajl_val root = NULL;
    bool blank = strspn(json_text, " \t\r\n") == strlen(json_text);
    bool shallow = json_depth_within(json_text, parts[0].body_len, JSON_DEPTH_MAX);
    if (!blank && shallow && strlen(json_text) == parts[0].body_len)
        root = yajl_tree_parse(json_text, error, sizeof(error));
    g_free(json_text);
    if (!blank && (root == NULL || !YAJL_IS_OBJECT(root))) {
        if (root != NULL)
            yajl_tree_free(root);
        g_bytes_unref(body);
        emu_reply_json_error(reply, 400, "parseError", "Parse Error");
        return;
    }
    struct emu_object_attrs attrs = {0};
    GHashTable *metadata = NULL;
    const char *problem = attrs_from_json(root, &attrs, &metadata, NULL);
    drop_null_metadata(metadata);
    const char *name = emu_query(req, "name");
    if (name == NULL)
        name = json_get_string(root, "name");
    char *media_type = part_content_type(&parts[1]);
    if (attrs.content_type == NULL)
        attrs.content_type = media_type;
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
        g_bytes_unref(body);
    } else if (name == NULL) {
        emu_reply_json_error(reply, 400, "required", "Required parameter: name");
        g_bytes_unref(body);
    } else if (!valid_object_name(name)) {
        emu_reply_json_error(reply, 400, "invalid", "The specified object name is not valid.");
        g_bytes_unref(body);
    } else {
        GBytes *media = g_bytes_new_from_bytes(body, parts[1].body_offset, parts[1].body_len);
        g_bytes_unref(body);
        put_and_reply(req, reply, name, media, &attrs, pre);
    }
    g_free(media_type);
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    if (root != NULL)
        yajl_tree_free(root);
}

/* false after a 404 reply when the request's bucket does not exist. */
static bool bucket_exists(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    emu_bucket_info_clear(&info);
    if (ret < 0)
        emu_reply_errno(req, reply, ret, NULL);
    return ret == 0;
}

static void insert_resumable(struct emu_request *req, struct emu_reply *reply,
                             const struct emu_preconditions *pre)
{
    yajl_val root;
    if (!parse_json_body(req, reply, &root))
        return;
    struct emu_object_attrs attrs = {0};
    GHashTable *metadata = NULL;
    const char *problem = attrs_from_json(root, &attrs, &metadata, NULL);
    drop_null_metadata(metadata);
    const char *name = emu_query(req, "name");
    if (name == NULL)
        name = json_get_string(root, "name");
    if (attrs.content_type == NULL)
        attrs.content_type = emu_header(req, "X-Upload-Content-Type");
    if (attrs.content_encoding == NULL)
        attrs.content_encoding = emu_query(req, "contentEncoding");
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
    } else if (name == NULL) {
        emu_reply_json_error(reply, 400, "required", "Required parameter: name");
    } else if (!valid_object_name(name)) {
        emu_reply_json_error(reply, 400, "invalid", "The specified object name is not valid.");
    } else if (!bucket_exists(req, reply)) {
        /* a 404 now, not after the bytes were sent */
    } else {
        char *id = emu_resumable_create(req->uploads, req->bucket, name, &attrs, pre);
        if (id == NULL) {
            emu_reply_json_error(reply, 429, "rateLimitExceeded",
                                 "Too many resumable uploads in progress.");
        } else {
            GString *location = g_string_new(req->base_url);
            g_string_append(location, "/upload/storage/v1/b/");
            emu_percent_encode(location, req->bucket);
            g_string_append(location, "/o?uploadType=resumable&upload_id=");
            emu_percent_encode(location, id);
            emu_reply_header(reply, "Location", location->str);
            emu_reply_header(reply, "X-GUploader-UploadID", id);
            g_string_free(location, TRUE);
            g_free(id);
            emu_reply_text(reply, 200, "text/plain; charset=utf-8", g_string_new(NULL));
        }
    }
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    if (root != NULL)
        yajl_tree_free(root);
}

static void handle_objects_insert(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_preconditions pre;
    if (!parse_preconditions(req, reply, "", &pre))
        return;
    const char *type = emu_query(req, "uploadType");
    if (type == NULL || strcmp(type, "media") == 0) {
        const char *name = emu_query(req, "name");
        if (name == NULL) {
            emu_reply_json_error(reply, 400, "required", "Required parameter: name");
            return;
        }
        if (!valid_object_name(name)) {
            emu_reply_json_error(reply, 400, "invalid", "The specified object name is not valid.");
            return;
        }
        struct emu_object_attrs attrs = {
            .content_type = emu_header(req, "Content-Type"),
            .content_encoding = emu_query(req, "contentEncoding"),
        };
        put_and_reply(req, reply, name, emu_request_take_body(req), &attrs, &pre);
    } else if (strcmp(type, "multipart") == 0) {
        insert_multipart(req, reply, &pre);
    } else if (strcmp(type, "resumable") == 0) {
        insert_resumable(req, reply, &pre);
    } else {
        emu_reply_json_error(reply, 400, "invalid", "Invalid upload type: %s", type);
    }
}

static void handle_resumable_chunk(struct emu_request *req, struct emu_reply *reply)
{
    const char *id = emu_query(req, "upload_id");
    if (strcmp(req->method, "DELETE") == 0) {
        if (emu_resumable_cancel(req->uploads, id) < 0)
            emu_reply_json_error(reply, 404, "notFound", "No such upload session.");
        else
            emu_reply_text(reply, 499, "text/plain; charset=utf-8", g_string_new(NULL));
        return;
    }
    const char *header = emu_header(req, "Content-Range");
    struct emu_content_range range;
    if (header != NULL && emu_parse_content_range(header, &range) < 0) {
        emu_reply_json_error(reply, 400, "invalid", "Invalid Content-Range header: %s", header);
        return;
    }
    struct emu_resumable_status status;
    const char *message = NULL;
    int ret = emu_resumable_put(req->uploads, req->store, id, header != NULL ? &range : NULL,
                                emu_request_take_body(req), &status, &message);
    if (ret == -ENOENT) {
        emu_reply_json_error(reply, 404, "notFound", "No such upload session.");
    } else if (ret == -EINVAL) {
        emu_reply_json_error(reply, 400, "invalid", "%s",
                             message != NULL ? message : "Invalid upload request.");
    } else if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
    } else if (status.done) {
        reply_object(req, reply, 200, status.object);
        emu_object_unref(status.object);
    } else {
        if (status.persisted > 0)
            emu_reply_headerf(reply, "Range", "bytes=0-%" PRIu64, status.persisted - 1);
        /* Go's client asks for 200 + an override header instead (its HTTP stack would treat
         * a 308 without Location as a redirect); Cloud Storage obliges. */
        const char *no_308 = emu_header(req, "X-GUploader-No-308");
        if (no_308 != NULL && g_ascii_strcasecmp(no_308, "yes") == 0) {
            emu_reply_header(reply, "X-Http-Status-Code-Override", "308");
            emu_reply_text(reply, 200, "text/plain; charset=utf-8", g_string_new(NULL));
        } else {
            emu_reply_text(reply, 308, "text/plain; charset=utf-8", g_string_new(NULL));
        }
    }
}

/* ------------------------------------------------------------------ objects: writes */

static void handle_objects_compose(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_preconditions pre;
    if (!parse_preconditions(req, reply, "", &pre))
        return;
    yajl_val root;
    if (!parse_json_body(req, reply, &root))
        return;
    struct emu_compose_source sources[MAX_COMPOSE_SOURCES];
    struct emu_object_attrs attrs = {0};
    GHashTable *metadata = NULL;
    yajl_val list = json_get(root, "sourceObjects");
    int count = 0;
    const char *problem = NULL;
    const char *reason = "invalid";
    if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0) {
        problem = "Required field: sourceObjects";
        reason = "required";
    } else if (list->u.array.len > MAX_COMPOSE_SOURCES) {
        problem = "The number of source components provided exceeds the maximum (32).";
    }
    for (size_t i = 0; problem == NULL && i < list->u.array.len; i++) {
        yajl_val item = list->u.array.values[i];
        struct emu_compose_source *src = &sources[count];
        memset(src, 0, sizeof(*src));
        src->name = json_get_string(item, "name");
        bool present;
        if (src->name == NULL) {
            problem = "Required field: sourceObjects[].name";
            reason = "required";
        } else if (json_get_int64(item, "generation", &present, &src->generation) < 0) {
            problem = "Invalid value for sourceObjects[].generation.";
        } else {
            yajl_val cond = json_get(item, "objectPreconditions");
            if (json_get_int64(cond, "ifGenerationMatch", &src->has_if_generation_match,
                               &src->if_generation_match) < 0)
                problem = "Invalid value for objectPreconditions.ifGenerationMatch.";
        }
        count++;
    }
    if (problem == NULL) {
        yajl_val dest = json_get(root, "destination");
        problem = attrs_from_json(dest, &attrs, &metadata, NULL);
        drop_null_metadata(metadata);
    }
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, reason, "%s", problem);
    } else {
        attrs.has_crc32c = attrs.has_md5 = false;
        struct emu_object *obj = NULL;
        int ret = emu_store_compose(req->store, req->bucket, req->object, sources, count, &attrs,
                                    &pre, &obj);
        if (ret < 0) {
            emu_reply_errno(req, reply, ret, NULL);
        } else {
            reply_object(req, reply, 200, obj);
            emu_object_unref(obj);
        }
    }
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    if (root != NULL)
        yajl_tree_free(root);
}

/* Parses what copyTo and rewriteTo share. Returns false after replying an error. */
static bool parse_copy_request(struct emu_request *req, struct emu_reply *reply, yajl_val *root,
                               struct emu_preconditions *src_pre,
                               struct emu_preconditions *dest_pre, int64_t *src_generation,
                               struct emu_object_attrs *attrs, GHashTable **metadata,
                               bool *has_attrs)
{
    if (!parse_preconditions(req, reply, "Source", src_pre) ||
        !parse_preconditions(req, reply, "", dest_pre) ||
        !parse_generation(req, reply, "sourceGeneration", src_generation) ||
        !parse_json_body(req, reply, root))
        return false;
    memset(attrs, 0, sizeof(*attrs));
    const char *problem = attrs_from_json(*root, attrs, metadata, NULL);
    drop_null_metadata(*metadata);
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
        return false;
    }
    attrs->has_crc32c = attrs->has_md5 = false;
    /* A resource in the body replaces the source's metadata; an empty body copies it. */
    *has_attrs = *root != NULL && (*root)->u.object.len > 0;
    if (!valid_object_name(req->dest_object)) {
        emu_reply_json_error(reply, 400, "invalid", "The specified object name is not valid.");
        return false;
    }
    return true;
}

static void handle_objects_copy(struct emu_request *req, struct emu_reply *reply)
{
    yajl_val root = NULL;
    struct emu_preconditions src_pre, dest_pre;
    int64_t src_generation;
    struct emu_object_attrs attrs;
    GHashTable *metadata = NULL;
    bool has_attrs = false;
    if (parse_copy_request(req, reply, &root, &src_pre, &dest_pre, &src_generation, &attrs,
                           &metadata, &has_attrs)) {
        struct emu_object *obj = NULL;
        int ret = emu_store_copy_object(req->store, req->bucket, req->object, src_generation,
                                        req->dest_bucket, req->dest_object,
                                        has_attrs ? &attrs : NULL, &src_pre, &dest_pre, &obj);
        if (ret < 0) {
            emu_reply_errno(req, reply, ret, NULL);
        } else {
            reply_object(req, reply, 200, obj);
            emu_object_unref(obj);
        }
    }
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    if (root != NULL)
        yajl_tree_free(root);
}

/* A rewrite token carries the pinned source generation and the bytes "rewritten" so far; it
 * is bound to source and destination so it cannot be replayed elsewhere. */
static char *rewrite_token_make(struct emu_request *req, int64_t generation, uint64_t done)
{
    char *plain =
        g_strdup_printf("v1:%" PRId64 ":%" PRIu64 ":%08x", generation, done, g_str_hash(req->path));
    char *token = base64_encode(plain, strlen(plain), true);
    g_free(plain);
    return token;
}

static int rewrite_token_parse(struct emu_request *req, const char *token, int64_t *generation,
                               uint64_t *done)
{
    size_t len = 0;
    uint8_t *plain = base64_decode(token, strlen(token), &len);
    if (plain == NULL)
        return -EINVAL;
    int64_t gen = 0;
    uint64_t bytes = 0;
    unsigned hash = 0;
    int used = 0;
    int ret = -EINVAL;
    if (strlen((char *)plain) == len &&
        sscanf((char *)plain, "v1:%" SCNd64 ":%" SCNu64 ":%8x%n", &gen, &bytes, &hash, &used) ==
            3 &&
        (size_t)used == len && hash == g_str_hash(req->path) && gen > 0) {
        *generation = gen;
        *done = bytes;
        ret = 0;
    }
    g_free(plain);
    return ret;
}

static void handle_objects_rewrite(struct emu_request *req, struct emu_reply *reply)
{
    yajl_val root = NULL;
    struct emu_preconditions src_pre, dest_pre;
    int64_t src_generation;
    struct emu_object_attrs attrs;
    GHashTable *metadata = NULL;
    bool has_attrs = false;
    struct emu_object *src = NULL;
    if (!parse_copy_request(req, reply, &root, &src_pre, &dest_pre, &src_generation, &attrs,
                            &metadata, &has_attrs))
        goto out;
    bool present;
    int64_t per_call = 0;
    if (parse_query_int64(req, "maxBytesRewrittenPerCall", &present, &per_call) < 0 ||
        (present && per_call <= 0)) {
        emu_reply_json_error(reply, 400, "invalid",
                             "Invalid argument for parameter maxBytesRewrittenPerCall.");
        goto out;
    }
    uint64_t done = 0;
    const char *token = emu_query(req, "rewriteToken");
    if (token != NULL && token[0] != '\0') {
        if (rewrite_token_parse(req, token, &src_generation, &done) < 0) {
            emu_reply_json_error(reply, 400, "invalid", "Invalid rewrite token.");
            goto out;
        }
    }
    int ret = emu_store_get_object(req->store, req->bucket, req->object, src_generation, &src_pre,
                                   false, &src);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
        goto out;
    }
    uint64_t step =
        present ? (uint64_t)per_call
                : (src->size > REWRITE_DEFAULT_PER_CALL ? REWRITE_DEFAULT_PER_CALL : src->size);
    uint64_t now_done = done + step >= src->size ? src->size : done + step;
    GString *json = g_string_new("{\"kind\":\"storage#rewriteResponse\"");
    g_string_append_printf(
        json, ",\"totalBytesRewritten\":\"%" PRIu64 "\",\"objectSize\":\"%" PRIu64 "\"", now_done,
        src->size);
    if (now_done < src->size) {
        char *next = rewrite_token_make(req, src->generation, now_done);
        g_string_append(json, ",\"done\":false,\"rewriteToken\":");
        json_append_string(json, next);
        g_string_append_c(json, '}');
        g_free(next);
        emu_reply_json(reply, 200, json);
        goto out;
    }
    struct emu_object *obj = NULL;
    ret = emu_store_copy_object(req->store, req->bucket, req->object, src->generation,
                                req->dest_bucket, req->dest_object, has_attrs ? &attrs : NULL,
                                &src_pre, &dest_pre, &obj);
    if (ret < 0) {
        g_string_free(json, TRUE);
        emu_reply_errno(req, reply, ret, NULL);
        goto out;
    }
    g_string_append(json, ",\"done\":true,\"resource\":");
    append_object_json(json, obj, req->base_url, NULL);
    g_string_append_c(json, '}');
    emu_object_unref(obj);
    emu_reply_json(reply, 200, json);
out:
    emu_object_unref(src);
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    if (root != NULL)
        yajl_tree_free(root);
}

static void handle_objects_patch(struct emu_request *req, struct emu_reply *reply)
{
    int64_t generation;
    struct emu_preconditions pre;
    if (!parse_generation(req, reply, "generation", &generation) ||
        !parse_preconditions(req, reply, "", &pre))
        return;
    yajl_val root;
    if (!parse_json_body(req, reply, &root))
        return;
    bool update = req->op == EMU_OP_OBJECTS_UPDATE;
    struct emu_object_attrs attrs = {0};
    GHashTable *metadata = NULL;
    bool clear = false;
    const char *problem = attrs_from_json(root, &attrs, &metadata, &clear);
    if (update) {
        /* objects.update replaces the writable metadata: what the body leaves out is cleared
         * (customTime excepted: once set it cannot be removed). */
        drop_null_metadata(metadata);
        const char **strings[] = {&attrs.content_type, &attrs.content_encoding,
                                  &attrs.cache_control, &attrs.content_disposition,
                                  &attrs.content_language};
        for (size_t i = 0; i < G_N_ELEMENTS(strings); i++)
            if (*strings[i] == NULL)
                *strings[i] = "";
        attrs.has_temporary_hold = attrs.has_event_based_hold = true;
    }
    attrs.has_crc32c = attrs.has_md5 = false;
    attrs.storage_class = NULL; /* changes only through rewrite */
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
    } else {
        struct emu_object *obj = NULL;
        int ret = emu_store_patch_object(req->store, req->bucket, req->object, generation, &attrs,
                                         update || clear, &pre, &obj);
        if (ret == -EINVAL && attrs.has_custom_time) {
            emu_reply_json_error(reply, 400, "invalid",
                                 "customTime cannot be removed or set to an earlier time once it "
                                 "is set.");
        } else if (ret < 0) {
            emu_reply_errno(req, reply, ret, NULL);
        } else {
            reply_object(req, reply, 200, obj);
            emu_object_unref(obj);
        }
    }
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    if (root != NULL)
        yajl_tree_free(root);
}

static void handle_objects_delete(struct emu_request *req, struct emu_reply *reply)
{
    int64_t generation;
    struct emu_preconditions pre;
    if (!parse_generation(req, reply, "generation", &generation) ||
        !parse_preconditions(req, reply, "", &pre))
        return;
    int ret = emu_store_delete_object(req->store, req->bucket, req->object, generation, &pre);
    if (ret < 0)
        emu_reply_errno(req, reply, ret, NULL);
    else
        emu_reply_empty(reply, 204);
}

/* objects.move: POST /b/B/o/SRC/moveTo/o/DST, one bucket, atomic (flat and HNS buckets). */
static void handle_objects_move(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_preconditions src_pre, dest_pre;
    if (!parse_preconditions(req, reply, "Source", &src_pre) ||
        !parse_preconditions(req, reply, "", &dest_pre))
        return;
    if (!valid_object_name(req->dest_object)) {
        emu_reply_json_error(reply, 400, "invalid", "The specified object name is not valid.");
        return;
    }
    struct emu_object *obj = NULL;
    int ret = emu_store_move_object(req->store, req->bucket, req->object, req->dest_object,
                                    &src_pre, &dest_pre, &obj);
    if (ret == -EEXIST) {
        emu_reply_json_error(reply, 400, "invalid",
                             "The source and destination object names must differ.");
    } else if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
    } else {
        reply_object(req, reply, 200, obj);
        emu_object_unref(obj);
    }
}

/* managedFolders.list: the emulator has no managed folders, so every bucket has none. */
static void handle_managed_folders_list(struct emu_request *req, struct emu_reply *reply)
{
    if (!bucket_exists(req, reply))
        return;
    emu_reply_json(reply, 200, g_string_new("{\"kind\":\"storage#managedFolders\"}"));
}

static void append_folder_json(GString *out, const char *bucket,
                               const struct emu_folder_info *folder, const char *base)
{
    char created[40], updated[40];
    emu_format_rfc3339(folder->created_us, created);
    emu_format_rfc3339(folder->updated_us, updated);
    g_string_append(out, "{\"kind\":\"storage#folder\",\"id\":");
    char *id = g_strconcat(bucket, "/", folder->name, NULL);
    json_append_string(out, id);
    g_free(id);
    g_string_append(out, ",\"selfLink\":");
    GString *link = g_string_new(base);
    g_string_append(link, "/storage/v1/b/");
    emu_percent_encode(link, bucket);
    g_string_append(link, "/folders/");
    emu_percent_encode(link, folder->name);
    json_append_string(out, link->str);
    g_string_free(link, TRUE);
    append_field(out, "name", folder->name);
    append_field(out, "bucket", bucket);
    g_string_append_printf(out, ",\"metageneration\":\"%" PRId64 "\"", folder->metageneration);
    append_field(out, "createTime", created);
    append_field(out, "updateTime", updated);
    g_string_append_c(out, '}');
}

static void reply_folder_errno(struct emu_request *req, struct emu_reply *reply, int ret,
                               const char *name)
{
    if (ret == -EOPNOTSUPP)
        emu_reply_json_error(reply, 400, "invalid",
                             "The bucket does not have hierarchical namespace enabled.");
    else if (ret == -EEXIST)
        emu_reply_json_error(reply, 409, "conflict", "The folder %s already exists.", name);
    else if (ret == -ENOTEMPTY)
        emu_reply_json_error(reply, 409, "failedPrecondition", "The folder %s is not empty.", name);
    else if (ret == -EINVAL)
        emu_reply_json_error(reply, 400, "invalid", "Invalid folder name: %s.", name);
    else if (ret == -ENOENT && !bucket_exists(req, reply))
        return;
    else if (ret == -ENOENT)
        emu_reply_json_error(reply, 404, "notFound", "The folder %s was not found.", name);
    else
        emu_reply_errno(req, reply, ret, name);
}

static void handle_folders_insert(struct emu_request *req, struct emu_reply *reply)
{
    yajl_val root = NULL;
    if (!parse_json_body(req, reply, &root))
        return;
    const char *name = json_get_string(root, "name");
    if (name == NULL) {
        emu_reply_json_error(reply, 400, "required", "Required field: name.");
    } else {
        struct emu_folder_info *folder = NULL;
        int ret = emu_store_folder_insert(req->store, req->bucket, name,
                                          emu_query_bool(req, "recursive"), &folder);
        if (ret < 0) {
            reply_folder_errno(req, reply, ret, name);
        } else {
            GString *json = g_string_new(NULL);
            append_folder_json(json, req->bucket, folder, req->base_url);
            emu_folder_info_free(folder);
            emu_reply_json(reply, 200, json);
        }
    }
    if (root != NULL)
        yajl_tree_free(root);
}

static void handle_folders_get(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_folder_info *folder = NULL;
    int ret = emu_store_folder_get(req->store, req->bucket, req->object, &folder);
    if (ret < 0) {
        reply_folder_errno(req, reply, ret, req->object);
        return;
    }
    GString *json = g_string_new(NULL);
    append_folder_json(json, req->bucket, folder, req->base_url);
    emu_folder_info_free(folder);
    emu_reply_json(reply, 200, json);
}

static void handle_folders_list(struct emu_request *req, struct emu_reply *reply)
{
    const char *delimiter = emu_query(req, "delimiter");
    if (delimiter != NULL && strcmp(delimiter, "/") != 0) {
        emu_reply_json_error(reply, 400, "invalid", "The delimiter must be \"/\".");
        return;
    }
    GPtrArray *folders = NULL;
    int ret = emu_store_folder_list(req->store, req->bucket, emu_query(req, "prefix"),
                                    delimiter != NULL, &folders);
    if (ret < 0) {
        reply_folder_errno(req, reply, ret, "");
        return;
    }
    GString *json = g_string_new("{\"kind\":\"storage#folders\"");
    if (folders->len > 0) {
        g_string_append(json, ",\"items\":[");
        for (guint i = 0; i < folders->len; i++) {
            if (i > 0)
                g_string_append_c(json, ',');
            append_folder_json(json, req->bucket, g_ptr_array_index(folders, i), req->base_url);
        }
        g_string_append_c(json, ']');
    }
    g_string_append_c(json, '}');
    g_ptr_array_unref(folders);
    emu_reply_json(reply, 200, json);
}

static void handle_folders_delete(struct emu_request *req, struct emu_reply *reply)
{
    int ret = emu_store_folder_delete(req->store, req->bucket, req->object);
    if (ret < 0)
        reply_folder_errno(req, reply, ret, req->object);
    else
        emu_reply_empty(reply, 204);
}

/* A rename finishes before its answer, so its long-running operation is done at once; the
 * operation's id carries source and destination, which GET .../operations/ID shows again. */
static void append_rename_operation(GString *out, const char *bucket, const char *id,
                                    const char *src, const char *dest, const char *base,
                                    const struct emu_folder_info *folder, bool done)
{
    g_string_append(out, "{\"kind\":\"storage#operation\",\"name\":");
    char *name = g_strconcat("projects/_/buckets/", bucket, "/operations/", id, NULL);
    json_append_string(out, name);
    g_free(name);
    g_string_append(out, ",\"metadata\":{\"@type\":"
                         "\"type.googleapis.com/google.storage.control.v2.RenameFolderMetadata\"");
    append_field(out, "sourceFolderId", src);
    append_field(out, "destinationFolderId", dest);
    g_string_append_printf(out,
                           ",\"commonMetadata\":{\"type\":\"rename-folder\","
                           "\"progressPercent\":%d}}",
                           done ? 100 : 0);
    g_string_append(out, done ? ",\"done\":true" : ",\"done\":false");
    if (done && folder != NULL) {
        g_string_append(out, ",\"response\":");
        append_folder_json(out, bucket, folder, base);
    }
    g_string_append_c(out, '}');
}

static void handle_folders_rename(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_folder_info *folder = NULL;
    int ret =
        emu_store_folder_rename(req->store, req->bucket, req->object, req->dest_object, &folder);
    if (ret < 0) {
        emu_folder_info_free(folder);
        reply_folder_errno(req, reply, ret, ret == -EEXIST ? req->dest_object : req->object);
        return;
    }
    char *plain = g_strconcat(req->object, "\n", req->dest_object, NULL);
    char *id = base64_encode(plain, strlen(plain), true);
    g_free(plain);
    GString *json = g_string_new(NULL);
    bool done = emu_store_operation_poll(req->store, id, true);
    append_rename_operation(json, req->bucket, id, req->object, req->dest_object, req->base_url,
                            folder, done);
    g_free(id);
    emu_folder_info_free(folder);
    emu_reply_json(reply, 200, json);
}

static void handle_operations_get(struct emu_request *req, struct emu_reply *reply)
{
    size_t len = 0;
    uint8_t *plain = base64_decode(req->object, strlen(req->object), &len);
    char *newline = plain != NULL ? memchr(plain, '\n', len) : NULL;
    if (newline == NULL || strlen((char *)plain) != len) {
        g_free(plain);
        emu_reply_json_error(reply, 404, "notFound", "The operation %s was not found.",
                             req->object);
        return;
    }
    *newline = '\0';
    struct emu_folder_info *folder = NULL;
    (void)emu_store_folder_get(req->store, req->bucket, newline + 1, &folder);
    GString *json = g_string_new(NULL);
    bool done = emu_store_operation_poll(req->store, req->object, false);
    append_rename_operation(json, req->bucket, req->object, (char *)plain, newline + 1,
                            req->base_url, folder, done);
    emu_folder_info_free(folder);
    g_free(plain);
    emu_reply_json(reply, 200, json);
}

static void handle_not_implemented(struct emu_request *req, struct emu_reply *reply)
{
    emu_reply_json_error(reply, 501, "notImplemented",
                         "The emulator does not implement this request.");
}

/* ------------------------------------------------------------------ routing */

static void route(struct emu_request *req, enum emu_op op, emu_handler_fn handler,
                  uint64_t body_limit)
{
    req->op = op;
    req->handler = handler;
    req->body_limit = body_limit;
}

/* seg[first..end) joined with '/'. */
static char *join_segments(char **seg, guint first, guint end)
{
    GString *out = g_string_new(NULL);
    for (guint i = first; i < end; i++) {
        if (i > first)
            g_string_append_c(out, '/');
        g_string_append(out, seg[i]);
    }
    return g_string_free(out, FALSE);
}

/* Decodes a path segment into a name; NULL (and early_message) when it is not valid. */
static char *decode_segment(struct emu_request *req, const char *segment)
{
    char *name = emu_percent_decode(segment, strlen(segment), false);
    if (name == NULL || name[0] == '\0' || !g_utf8_validate(name, -1, NULL)) {
        g_free(name);
        req->early_message = "The request path holds an invalid name.";
        return NULL;
    }
    return name;
}

unsigned api_json_route(struct emu_request *req)
{
    const char *path = req->path;
    enum { ROOT_STORAGE, ROOT_UPLOAD, ROOT_DOWNLOAD, ROOT_BATCH } root;
    if (g_str_has_prefix(path, "/storage/v1")) {
        root = ROOT_STORAGE;
        path += strlen("/storage/v1");
    } else if (g_str_has_prefix(path, "/upload/storage/v1")) {
        root = ROOT_UPLOAD;
        path += strlen("/upload/storage/v1");
    } else if (g_str_has_prefix(path, "/resumable/upload/storage/v1")) {
        /* The discovery document's resumable path (apitools, gcloud): the same uploads. */
        root = ROOT_UPLOAD;
        path += strlen("/resumable/upload/storage/v1");
    } else if (g_str_has_prefix(path, "/download/storage/v1")) {
        root = ROOT_DOWNLOAD;
        path += strlen("/download/storage/v1");
    } else {
        root = ROOT_BATCH;
    }
    const char *method = req->method;
    bool get = strcmp(method, "GET") == 0 || req->head;
    bool post = strcmp(method, "POST") == 0;
    bool put = strcmp(method, "PUT") == 0;
    bool patch = strcmp(method, "PATCH") == 0;
    bool del = strcmp(method, "DELETE") == 0;
    if (root == ROOT_BATCH) {
        route(req, EMU_OP_NONE, handle_not_implemented, EMU_JSON_BODY_MAX);
        return 0;
    }
    if (*path == '/')
        path++;
    char **seg = g_strsplit(path, "/", -1);
    guint n = g_strv_length(seg);
    if (n > 0 && seg[n - 1][0] == '\0')
        n--; /* trailing slash */
    unsigned status = 0;
    req->early_message = "Not Found";
    if (n == 0 || strcmp(seg[0], "b") != 0) {
        status = 404;
        goto out;
    }
    if (n >= 2 && (req->bucket = decode_segment(req, seg[1])) == NULL) {
        status = 400;
        goto out;
    }
    if (n >= 4 && strcmp(seg[2], "o") == 0) {
        /* Object names must have '/' encoded; tolerate clients that leave it raw by joining
         * the remaining segments unless they spell a known sub-resource. */
        guint name_end = n;
        if (n == 5 && (strcmp(seg[4], "compose") == 0 || strcmp(seg[4], "restore") == 0))
            name_end = 4;
        else if (n == 9 && (strcmp(seg[4], "copyTo") == 0 || strcmp(seg[4], "rewriteTo") == 0) &&
                 strcmp(seg[5], "b") == 0 && strcmp(seg[7], "o") == 0)
            name_end = 4;
        else if (n == 7 && strcmp(seg[4], "moveTo") == 0 && strcmp(seg[5], "o") == 0)
            name_end = 4;
        char *joined = name_end == 4 ? g_strdup(seg[3]) : g_strjoinv("/", seg + 3);
        req->object = decode_segment(req, joined);
        g_free(joined);
        if (req->object == NULL) {
            status = 400;
            goto out;
        }
        if (name_end == 4 && n == 7) {
            req->dest_object = decode_segment(req, seg[6]);
            if (req->dest_object == NULL) {
                status = 400;
                goto out;
            }
        }
        if (name_end == 4 && n == 9) {
            req->dest_bucket = decode_segment(req, seg[6]);
            req->dest_object = decode_segment(req, seg[8]);
            if (req->dest_bucket == NULL || req->dest_object == NULL) {
                status = 400;
                goto out;
            }
        }
        if (root == ROOT_DOWNLOAD) {
            if (get && name_end == n)
                route(req, EMU_OP_OBJECTS_DOWNLOAD, handle_objects_get, 0);
            else
                status = get ? 404 : 405;
        } else if (root == ROOT_UPLOAD) {
            status = 404;
        } else if (name_end == 4 && n == 7) {
            if (post)
                route(req, EMU_OP_OBJECTS_MOVE, handle_objects_move, EMU_JSON_BODY_MAX);
            else
                status = 405;
        } else if (name_end == 4 && n == 5 && strcmp(seg[4], "restore") == 0) {
            if (post)
                route(req, EMU_OP_OBJECTS_RESTORE, handle_objects_restore, EMU_JSON_BODY_MAX);
            else
                status = 405;
        } else if (name_end == 4 && n == 5) {
            if (post)
                route(req, EMU_OP_OBJECTS_COMPOSE, handle_objects_compose, EMU_JSON_BODY_MAX);
            else
                status = 405;
        } else if (name_end == 4 && n == 9) {
            bool copy = strcmp(seg[4], "copyTo") == 0;
            if (post)
                route(req, copy ? EMU_OP_OBJECTS_COPY : EMU_OP_OBJECTS_REWRITE,
                      copy ? handle_objects_copy : handle_objects_rewrite, EMU_JSON_BODY_MAX);
            else
                status = 405;
        } else if (get) {
            const char *alt = emu_query(req, "alt");
            if (alt != NULL && strcmp(alt, "media") == 0)
                route(req, EMU_OP_OBJECTS_DOWNLOAD, handle_objects_get, 0);
            else
                route(req, EMU_OP_OBJECTS_GET, handle_objects_get, 0);
        } else if (patch) {
            route(req, EMU_OP_OBJECTS_PATCH, handle_objects_patch, EMU_JSON_BODY_MAX);
        } else if (put) {
            route(req, EMU_OP_OBJECTS_UPDATE, handle_objects_patch, EMU_JSON_BODY_MAX);
        } else if (del) {
            route(req, EMU_OP_OBJECTS_DELETE, handle_objects_delete, 0);
        } else {
            status = 405;
        }
        goto out;
    }
    if (root == ROOT_UPLOAD) {
        if (n == 3 && strcmp(seg[2], "o") == 0) {
            const char *type = emu_query(req, "uploadType");
            bool resumable_session = emu_query(req, "upload_id") != NULL;
            if (resumable_session && (put || post || del))
                route(req, EMU_OP_OBJECTS_RESUMABLE_CHUNK, handle_resumable_chunk,
                      EMU_UPLOAD_BODY_MAX);
            else if (post && type != NULL && strcmp(type, "resumable") == 0)
                route(req, EMU_OP_OBJECTS_INSERT, handle_objects_insert, EMU_JSON_BODY_MAX);
            else if (post)
                route(req, EMU_OP_OBJECTS_INSERT, handle_objects_insert, EMU_UPLOAD_BODY_MAX);
            else
                status = 405;
        } else {
            status = 404;
        }
        goto out;
    }
    if (root == ROOT_DOWNLOAD) {
        status = 404;
        goto out;
    }
    if (n == 1) {
        if (get)
            route(req, EMU_OP_BUCKETS_LIST, handle_buckets_list, 0);
        else if (post)
            route(req, EMU_OP_BUCKETS_INSERT, handle_buckets_insert, EMU_JSON_BODY_MAX);
        else
            status = 405;
    } else if (n == 2) {
        if (get)
            route(req, EMU_OP_BUCKETS_GET, handle_buckets_get, 0);
        else if (del)
            route(req, EMU_OP_BUCKETS_DELETE, handle_buckets_delete, 0);
        else if (patch)
            route(req, EMU_OP_BUCKETS_PATCH, handle_buckets_patch, EMU_JSON_BODY_MAX);
        else if (put)
            route(req, EMU_OP_BUCKETS_UPDATE, handle_buckets_patch, EMU_JSON_BODY_MAX);
        else
            status = 405;
    } else if (n == 3 && strcmp(seg[2], "o") == 0) {
        if (get)
            route(req, EMU_OP_OBJECTS_LIST, handle_objects_list, 0);
        else if (post)
            route(req, EMU_OP_OBJECTS_INSERT, handle_objects_insert, EMU_UPLOAD_BODY_MAX);
        else
            status = 405;
    } else if (n == 3 && strcmp(seg[2], "managedFolders") == 0) {
        if (get)
            route(req, EMU_OP_MANAGED_FOLDERS_LIST, handle_managed_folders_list, 0);
        else
            status = 405;
    } else if (n == 3 && strcmp(seg[2], "folders") == 0) {
        if (get)
            route(req, EMU_OP_FOLDERS_LIST, handle_folders_list, 0);
        else if (post)
            route(req, EMU_OP_FOLDERS_INSERT, handle_folders_insert, EMU_JSON_BODY_MAX);
        else
            status = 405;
    } else if (n >= 4 && (strcmp(seg[2], "folders") == 0 || strcmp(seg[2], "operations") == 0)) {
        /* Folder names hold '/': Google's clients encode it (%2F); a raw one is joined. */
        bool rename = n >= 7 && strcmp(seg[n - 3], "renameTo") == 0 &&
                      strcmp(seg[n - 2], "folders") == 0 && strcmp(seg[2], "folders") == 0;
        guint name_end = rename ? n - 3 : n;
        char *joined = join_segments(seg, 3, name_end);
        req->object = decode_segment(req, joined);
        g_free(joined);
        if (rename && req->object != NULL)
            req->dest_object = decode_segment(req, seg[n - 1]);
        if (req->object == NULL || (rename && req->dest_object == NULL)) {
            status = 400;
        } else if (strcmp(seg[2], "operations") == 0) {
            if (get)
                route(req, EMU_OP_OPERATIONS_GET, handle_operations_get, 0);
            else
                status = 405;
        } else if (rename) {
            if (post)
                route(req, EMU_OP_FOLDERS_RENAME, handle_folders_rename, EMU_JSON_BODY_MAX);
            else
                status = 405;
        } else if (get) {
            route(req, EMU_OP_FOLDERS_GET, handle_folders_get, 0);
        } else if (del) {
            route(req, EMU_OP_FOLDERS_DELETE, handle_folders_delete, 0);
        } else {
            status = 405;
        }
    } else if (n == 3 && strcmp(seg[2], "storageLayout") == 0) {
        if (get)
            route(req, EMU_OP_BUCKETS_GET_STORAGE_LAYOUT, handle_buckets_storage_layout, 0);
        else
            status = 405;
    } else if (n == 4 && strcmp(seg[2], "iam") == 0 && strcmp(seg[3], "testPermissions") == 0) {
        if (get)
            route(req, EMU_OP_BUCKETS_TEST_IAM, handle_buckets_test_iam, 0);
        else
            status = 405;
    } else {
        status = 404;
    }
out:
    g_strfreev(seg);
    if (status == 405)
        req->early_message = "The method is not allowed for this resource.";
    if (status == 0)
        req->early_message = NULL;
    return status;
}
