/* Parsing Cloud Storage JSON replies (object resources, list pages, error replies) with yajl's
 * tree API. int64 fields arrive as strings ("size": "123"); numbers are accepted too. */
#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "fluxfs/base64.h"
#include "fluxfs/crc32c.h"
#include "fluxfs/json_depth.h"
#include "fluxfs/timens.h"
#include "gcs-internal.h"

/* ---- RFC 3339 ---- */

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t year, unsigned month, unsigned day)
{
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    unsigned year_of_era = (unsigned)(year - era * 400);
    unsigned day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + (int64_t)day_of_era - 719468;
}

static bool read_digits(const char **cursor, int count, int *value)
{
    int result = 0;
    for (int i = 0; i < count; i++) {
        char c = (*cursor)[i];
        if (c < '0' || c > '9')
            return false;
        result = result * 10 + (c - '0');
    }
    *cursor += count;
    *value = result;
    return true;
}

static bool expect_char(const char **cursor, char a, char b)
{
    if (**cursor != a && **cursor != b)
        return false;
    (*cursor)++;
    return true;
}

int gcs_parse_rfc3339(const char *text, int64_t *ns)
{
    const char *p = text;
    int year, month, day, hour, minute, second;
    if (!read_digits(&p, 4, &year) || !expect_char(&p, '-', '-') || !read_digits(&p, 2, &month) ||
        !expect_char(&p, '-', '-') || !read_digits(&p, 2, &day) || !expect_char(&p, 'T', 't') ||
        !read_digits(&p, 2, &hour) || !expect_char(&p, ':', ':') || !read_digits(&p, 2, &minute) ||
        !expect_char(&p, ':', ':') || !read_digits(&p, 2, &second))
        return -EINVAL;
    static const int days_in_month[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month < 1 || month > 12 || day < 1 || day > days_in_month[month - 1] || hour > 23 ||
        minute > 59 || second > 60)
        return -EINVAL;
    int64_t fraction_ns = 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        int64_t scale = TIMENS_PER_S / 10;
        while (*p >= '0' && *p <= '9') {
            fraction_ns += (*p - '0') * scale;
            scale /= 10;
            digits++;
            p++;
        }
        if (digits == 0)
            return -EINVAL;
    }
    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;
        p++;
        int offset_hours, offset_minutes;
        if (!read_digits(&p, 2, &offset_hours) || !expect_char(&p, ':', ':') ||
            !read_digits(&p, 2, &offset_minutes) || offset_hours > 23 || offset_minutes > 59)
            return -EINVAL;
        offset_s = sign * (offset_hours * 3600 + offset_minutes * 60);
    } else {
        return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    if (second == 60)
        second = 59; /* a leap second: close enough for a file time */
    int64_t seconds = days_from_civil(year, (unsigned)month, (unsigned)day) * 86400 + hour * 3600 +
                      minute * 60 + second - offset_s;
    /* int64 nanoseconds end in 1677 and 2262: later or earlier times are clamped to the
     * nearest representable second (found by the fuzzer: 2390-... overflowed, UB). */
    *ns = timens_from_parts(seconds, fraction_ns);
    return 0;
}

/* ---- helpers over yajl values ---- */

static yajl_val member(yajl_val object, const char *key)
{
    if (!YAJL_IS_OBJECT(object))
        return NULL;
    for (size_t i = 0; i < object->u.object.len; i++) {
        if (strcmp(object->u.object.keys[i], key) == 0)
            return object->u.object.values[i];
    }
    return NULL;
}

static const char *member_string(yajl_val object, const char *key)
{
    yajl_val value = member(object, key);
    return YAJL_IS_STRING(value) ? YAJL_GET_STRING(value) : NULL;
}

/* An int64 that may come as a decimal string or a JSON integer. -EIO when present but not one. */
static int member_int64(yajl_val object, const char *key, int64_t *out)
{
    yajl_val value = member(object, key);
    if (!value || YAJL_IS_NULL(value))
        return -ENOENT;
    if (YAJL_IS_INTEGER(value)) {
        *out = YAJL_GET_INTEGER(value);
        return 0;
    }
    if (!YAJL_IS_STRING(value))
        return -EIO;
    const char *text = YAJL_GET_STRING(value);
    gint64 parsed;
    if (!g_ascii_string_to_signed(text, 10, INT64_MIN, INT64_MAX, &parsed, NULL))
        return -EIO;
    *out = parsed;
    return 0;
}

static int parse_object_value(yajl_val value, struct gcs_object *out)
{
    const char *name = member_string(value, "name");
    if (!name)
        return -EIO;
    struct gcs_object obj = {0};
    int64_t number = 0;
    int err = member_int64(value, "size", &number);
    if (err == -EIO || (err == 0 && number < 0))
        return -EIO;
    obj.size = err == 0 ? (uint64_t)number : 0;
    if (member_int64(value, "generation", &obj.generation) == -EIO ||
        member_int64(value, "metageneration", &obj.metageneration) == -EIO)
        return -EIO;
    const char *updated = member_string(value, "updated");
    if (updated && gcs_parse_rfc3339(updated, &obj.updated_ns) < 0)
        return -EIO;
    obj.mtime_ns = obj.updated_ns;
    if (member_int64(value, "componentCount", &obj.component_count) == -EIO ||
        obj.component_count < 0)
        return -EIO;
    const char *crc_text = member_string(value, "crc32c");
    if (crc_text) {
        if (crc32c_from_base64(crc_text, &obj.crc32c) < 0)
            return -EIO;
        obj.has_crc32c = true;
    }
    yajl_val metadata = member(value, "metadata");
    if (YAJL_IS_OBJECT(metadata)) {
        obj.symlink_target = g_strdup(member_string(metadata, GCS_META_SYMLINK));
        gcs_object_apply_posix_metadata(&obj, member_string(metadata, GCS_META_MTIME),
                                        member_string(metadata, GCS_META_MTIME_RFC),
                                        member_string(metadata, GCS_META_IS_SYMLINK));
    }
    const char *encoding = member_string(value, "contentEncoding");
    obj.content_encoding = encoding && *encoding ? g_strdup(encoding) : NULL;
    obj.name = g_strdup(name);
    *out = obj;
    return 0;
}

void gcs_object_apply_posix_metadata(struct gcs_object *obj, const char *mtime_s,
                                     const char *mtime_rfc, const char *is_symlink)
{
    gint64 seconds;
    int64_t ns;
    if (mtime_rfc && gcs_parse_rfc3339(mtime_rfc, &ns) == 0)
        obj->mtime_ns = ns;
    else if (mtime_s && g_ascii_string_to_signed(mtime_s, 10, INT64_MIN, INT64_MAX, &seconds, NULL))
        obj->mtime_ns = timens_from_parts(seconds, 0); /* clamped past 2262 */
    obj->symlink_in_content =
        !obj->symlink_target && is_symlink && g_ascii_strcasecmp(is_symlink, "true") == 0;
}

void gcs_format_rfc3339_nano(int64_t ns, char out[GCS_RFC3339_MAX])
{
    int64_t seconds, fraction;
    timens_split(ns, &seconds, &fraction);
    GDateTime *when = g_date_time_new_from_unix_utc(seconds);
    if (!when) { /* beyond glib's years 1..9999: the seconds key still carries it */
        g_strlcpy(out, "", GCS_RFC3339_MAX);
        return;
    }
    char *text = g_date_time_format(when, "%Y-%m-%dT%H:%M:%S");
    g_date_time_unref(when);
    size_t used = (size_t)g_snprintf(out, GCS_RFC3339_MAX, "%s", text);
    g_free(text);
    if (fraction > 0) {
        char digits[16];
        g_snprintf(digits, sizeof(digits), ".%09" G_GINT64_FORMAT, fraction);
        size_t len = strlen(digits);
        while (digits[len - 1] == '0')
            digits[--len] = '\0';
        used += (size_t)g_snprintf(out + used, GCS_RFC3339_MAX - used, "%s", digits);
    }
    g_snprintf(out + used, GCS_RFC3339_MAX - used, "Z");
}

static yajl_val parse_tree(const char *json, size_t len, int *err)
{
    if (len > GCS_JSON_CAP) {
        *err = -EMSGSIZE;
        return NULL;
    }
    if (!json || strlen(json) != len) { /* embedded NUL or no terminator at len */
        *err = -EIO;
        return NULL;
    }
    if (!json_depth_within(json, len, JSON_DEPTH_MAX)) { /* yajl_tree_free recurses per level */
        *err = -EIO;
        return NULL;
    }
    char parse_error[128];
    yajl_val root = yajl_tree_parse(json, parse_error, sizeof(parse_error));
    if (!root || !YAJL_IS_OBJECT(root)) {
        yajl_tree_free(root);
        *err = -EIO;
        return NULL;
    }
    *err = 0;
    return root;
}

/* ---- public (layer-internal) parsers ---- */

int gcs_json_parse_object(const char *json, size_t len, struct gcs_object *out)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return err;
    err = parse_object_value(root, out);
    /* MD5 only here (listings do not carry it for fluxfs): an extra check where present, so an
     * undecodable one is left out rather than failing the object. */
    const char *md5_text = err == 0 ? member_string(root, "md5Hash") : NULL;
    size_t md5_len = 0;
    if (md5_text &&
        base64_decode_into(md5_text, strlen(md5_text), out->md5, sizeof(out->md5), &md5_len) == 0)
        out->has_md5 = md5_len == sizeof(out->md5);
    yajl_tree_free(root);
    return err;
}

/* The reference for gcs_json_parse_list (gcs_json_list.c), which the unit tests compare with it. */
int gcs_json_parse_list_tree(const char *json, size_t len, struct gcs_list_page *out)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return err;
    struct gcs_list_page page = {
        .objects = g_ptr_array_new_with_free_func((GDestroyNotify)gcs_object_free),
        .prefixes = g_ptr_array_new_with_free_func(g_free),
    };
    yajl_val items = member(root, "items");
    if (items && !YAJL_IS_ARRAY(items) && !YAJL_IS_NULL(items)) {
        err = -EIO;
        goto fail;
    }
    for (size_t i = 0; YAJL_IS_ARRAY(items) && i < items->u.array.len; i++) {
        struct gcs_object *obj = g_new0(struct gcs_object, 1);
        err = parse_object_value(items->u.array.values[i], obj);
        if (err < 0) {
            g_free(obj);
            goto fail;
        }
        g_ptr_array_add(page.objects, obj);
    }
    yajl_val prefixes = member(root, "prefixes");
    if (prefixes && !YAJL_IS_ARRAY(prefixes) && !YAJL_IS_NULL(prefixes)) {
        err = -EIO;
        goto fail;
    }
    for (size_t i = 0; YAJL_IS_ARRAY(prefixes) && i < prefixes->u.array.len; i++) {
        yajl_val prefix = prefixes->u.array.values[i];
        if (!YAJL_IS_STRING(prefix)) {
            err = -EIO;
            goto fail;
        }
        g_ptr_array_add(page.prefixes, g_strdup(YAJL_GET_STRING(prefix)));
    }
    const char *token = member_string(root, "nextPageToken");
    page.next_page_token = token && *token ? g_strdup(token) : NULL;
    yajl_tree_free(root);
    *out = page;
    return 0;
fail:
    yajl_tree_free(root);
    gcs_list_page_clear(&page);
    return err;
}

int gcs_json_parse_rewrite(const char *json, size_t len, bool *done, char **token,
                           struct gcs_object *resource)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return err;
    yajl_val done_value = member(root, "done");
    bool is_done = YAJL_IS_TRUE(done_value);
    struct gcs_object obj = {0};
    char *next = NULL;
    err = 0;
    if (done_value && !YAJL_IS_TRUE(done_value) && !YAJL_IS_FALSE(done_value)) {
        err = -EIO;
    } else if (is_done) {
        yajl_val object = member(root, "resource");
        err = YAJL_IS_OBJECT(object) ? parse_object_value(object, &obj) : -EIO;
    } else {
        const char *text = member_string(root, "rewriteToken");
        if (!text || !*text)
            err = -EIO; /* not done and no way on */
        else
            next = g_strdup(text);
    }
    yajl_tree_free(root);
    if (err < 0)
        return err;
    *done = is_done;
    *token = next;
    if (is_done)
        *resource = obj;
    return 0;
}

int gcs_json_parse_permissions(const char *json, size_t len, GPtrArray **granted)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return err;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    yajl_val list = member(root, "permissions");
    if (list && !YAJL_IS_ARRAY(list) && !YAJL_IS_NULL(list))
        err = -EIO;
    for (size_t i = 0; err == 0 && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++) {
        yajl_val item = list->u.array.values[i];
        if (!YAJL_IS_STRING(item))
            err = -EIO;
        else
            g_ptr_array_add(names, g_strdup(YAJL_GET_STRING(item)));
    }
    yajl_tree_free(root);
    if (err < 0) {
        g_ptr_array_unref(names);
        return err;
    }
    *granted = names;
    return 0;
}

static bool member_true(yajl_val object, const char *name)
{
    yajl_val value = member(object, name);
    return value && YAJL_IS_TRUE(value);
}

int gcs_json_parse_bucket_config(const char *json, size_t len, struct gcs_bucket_config *out)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return err;
    if (!YAJL_IS_OBJECT(root)) {
        yajl_tree_free(root);
        return -EIO;
    }
    struct gcs_bucket_config config = {0};
    const char *storage_class = member_string(root, "storageClass");
    g_strlcpy(config.storage_class, storage_class ? storage_class : "STANDARD",
              sizeof(config.storage_class));
    yajl_val soft_delete = member(root, "softDeletePolicy");
    yajl_val retention = member(root, "retentionPolicy");
    if ((soft_delete && member_int64(soft_delete, "retentionDurationSeconds",
                                     &config.soft_delete_seconds) == -EIO) ||
        (retention &&
         member_int64(retention, "retentionPeriod", &config.retention_seconds) == -EIO)) {
        yajl_tree_free(root);
        return -EIO;
    }
    config.versioning = member_true(member(root, "versioning"), "enabled");
    config.default_event_based_hold = member_true(root, "defaultEventBasedHold");
    config.autoclass = member_true(member(root, "autoclass"), "enabled");
    config.hierarchical_namespace = member_true(member(root, "hierarchicalNamespace"), "enabled");
    yajl_tree_free(root);
    if (config.soft_delete_seconds < 0)
        config.soft_delete_seconds = 0;
    if (config.retention_seconds < 0)
        config.retention_seconds = 0;
    *out = config;
    return 0;
}

int gcs_json_parse_operation(const char *json, size_t len, bool *done, char **id,
                             int64_t *error_code, char **error_message)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return err;
    const char *name = YAJL_IS_OBJECT(root) ? member_string(root, "name") : NULL;
    const char *last = name ? strrchr(name, '/') : NULL;
    if (!last || last[1] == '\0') {
        yajl_tree_free(root);
        return -EIO;
    }
    *done = member_true(root, "done");
    *id = g_strdup(last + 1);
    *error_code = 0;
    *error_message = NULL;
    yajl_val error = member(root, "error");
    if (error && YAJL_IS_OBJECT(error)) {
        if (member_int64(error, "code", error_code) < 0 || *error_code == 0)
            *error_code = 2; /* UNKNOWN */
        *error_message = g_strdup(member_string(error, "message"));
    }
    yajl_tree_free(root);
    return 0;
}

char *gcs_json_error_message(const char *json, size_t len)
{
    int err;
    yajl_val root = parse_tree(json, len, &err);
    if (!root)
        return NULL;
    const char *message = member_string(member(root, "error"), "message");
    if (!message)
        message = member_string(root, "error_description");
    char *copy = g_strdup(message);
    yajl_tree_free(root);
    return copy;
}

/* ---- ownership helpers of gcs.h ---- */

void gcs_object_clear(struct gcs_object *obj)
{
    if (!obj)
        return;
    g_free(obj->name);
    g_free(obj->content_encoding);
    g_free(obj->symlink_target);
    memset(obj, 0, sizeof(*obj));
}

void gcs_object_free(struct gcs_object *obj)
{
    gcs_object_clear(obj);
    g_free(obj);
}

struct gcs_object *gcs_object_copy(const struct gcs_object *obj)
{
    struct gcs_object *copy = g_new(struct gcs_object, 1);
    *copy = *obj;
    copy->name = g_strdup(obj->name);
    copy->content_encoding = g_strdup(obj->content_encoding);
    copy->symlink_target = g_strdup(obj->symlink_target);
    return copy;
}

void gcs_list_page_clear(struct gcs_list_page *page)
{
    if (!page)
        return;
    if (page->objects)
        g_ptr_array_unref(page->objects);
    gcs_list_storage_free(page->storage);
    if (page->prefixes)
        g_ptr_array_unref(page->prefixes);
    g_free(page->next_page_token);
    memset(page, 0, sizeof(*page));
}
