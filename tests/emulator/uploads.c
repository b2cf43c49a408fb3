/* Resumable upload sessions and XML multipart upload sessions (see uploads.h). */
#include "uploads.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fluxfs/crc32c.h"

/* Finalized resumable sessions are remembered (a re-sent final chunk answers with the object
 * again) but only the most recent ones, since each keeps its object's content alive. */
#define EMU_UPLOADS_MAX_FINALIZED 256

enum session_kind { SESSION_RESUMABLE, SESSION_MULTIPART };

struct mpu_part {
    struct emu_mpu_part_info info;
    struct emu_content *content;
};

struct session {
    gint refcount;
    GMutex lock;
    enum session_kind kind;
    char *id;
    char *bucket;
    char *name;
    struct emu_object_attrs attrs;
    /* resumable */
    struct emu_preconditions pre;
    GPtrArray *segments; /* struct emu_content * */
    uint64_t persisted;
    bool has_total;
    uint64_t total;
    struct emu_object *result; /* set once finalized */
    /* multipart */
    GTree *parts; /* int number -> struct mpu_part * */
    int64_t created_us;
};

struct emu_uploads {
    GMutex lock;
    GHashTable *sessions; /* id -> struct session * (a reference) */
    GQueue finalized;     /* ids of finalized resumable sessions, oldest first */
    guint active;
    uint64_t next_id;
};

void emu_attrs_copy(struct emu_object_attrs *dst, const struct emu_object_attrs *src)
{
    memset(dst, 0, sizeof(*dst));
    if (src == NULL)
        return;
    *dst = *src;
    dst->content_type = g_strdup(src->content_type);
    dst->content_encoding = g_strdup(src->content_encoding);
    dst->cache_control = g_strdup(src->cache_control);
    dst->content_disposition = g_strdup(src->content_disposition);
    dst->content_language = g_strdup(src->content_language);
    dst->storage_class = g_strdup(src->storage_class);
    dst->metadata = NULL;
    if (src->metadata != NULL) {
        dst->metadata = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, src->metadata);
        while (g_hash_table_iter_next(&iter, &key, &value))
            g_hash_table_insert(dst->metadata, g_strdup(key), g_strdup(value));
    }
}

void emu_attrs_clear(struct emu_object_attrs *attrs)
{
    g_free((char *)attrs->content_type);
    g_free((char *)attrs->content_encoding);
    g_free((char *)attrs->cache_control);
    g_free((char *)attrs->content_disposition);
    g_free((char *)attrs->content_language);
    g_free((char *)attrs->storage_class);
    if (attrs->metadata != NULL)
        g_hash_table_unref(attrs->metadata);
    memset(attrs, 0, sizeof(*attrs));
}

static void mpu_part_free(gpointer data)
{
    struct mpu_part *part = data;
    emu_content_unref(part->content);
    g_free(part);
}

static gint compare_part_numbers(gconstpointer a, gconstpointer b, gpointer unused)
{
    int x = GPOINTER_TO_INT(a), y = GPOINTER_TO_INT(b);
    return (x > y) - (x < y);
}

static void session_unref(struct session *s)
{
    if (s == NULL || !g_atomic_int_dec_and_test(&s->refcount))
        return;
    g_free(s->id);
    g_free(s->bucket);
    g_free(s->name);
    emu_attrs_clear(&s->attrs);
    if (s->segments != NULL)
        g_ptr_array_unref(s->segments);
    emu_object_unref(s->result);
    if (s->parts != NULL)
        g_tree_unref(s->parts);
    g_mutex_clear(&s->lock);
    g_free(s);
}

static void session_unref_cb(gpointer data)
{
    session_unref(data);
}

struct emu_uploads *emu_uploads_new(void)
{
    struct emu_uploads *uploads = g_new0(struct emu_uploads, 1);
    g_mutex_init(&uploads->lock);
    uploads->sessions = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, session_unref_cb);
    g_queue_init(&uploads->finalized);
    /* Ids must not repeat across emulator restarts with --data-dir either. */
    uploads->next_id = (uint64_t)g_get_real_time();
    return uploads;
}

void emu_uploads_reset(struct emu_uploads *uploads)
{
    g_mutex_lock(&uploads->lock);
    g_hash_table_remove_all(uploads->sessions);
    g_queue_clear_full(&uploads->finalized, g_free);
    uploads->active = 0;
    g_mutex_unlock(&uploads->lock);
}

void emu_uploads_free(struct emu_uploads *uploads)
{
    if (uploads == NULL)
        return;
    emu_uploads_reset(uploads);
    g_hash_table_unref(uploads->sessions);
    g_mutex_clear(&uploads->lock);
    g_free(uploads);
}

static struct session *session_new(struct emu_uploads *uploads, enum session_kind kind,
                                   const char *bucket, const char *name,
                                   const struct emu_object_attrs *attrs)
{
    g_mutex_lock(&uploads->lock);
    if (uploads->active >= EMU_UPLOADS_MAX_ACTIVE) {
        g_mutex_unlock(&uploads->lock);
        return NULL;
    }
    struct session *s = g_new0(struct session, 1);
    s->refcount = 2; /* the registry's and the caller's */
    g_mutex_init(&s->lock);
    s->kind = kind;
    /* Opaque and unguessable enough for a test server; unique per process. */
    s->id = g_strdup_printf("%s%016" PRIx64 "%08x", kind == SESSION_RESUMABLE ? "r" : "m",
                            uploads->next_id++, g_random_int());
    s->bucket = g_strdup(bucket);
    s->name = g_strdup(name);
    s->created_us = g_get_real_time();
    emu_attrs_copy(&s->attrs, attrs);
    if (kind == SESSION_RESUMABLE)
        s->segments = g_ptr_array_new_with_free_func((GDestroyNotify)emu_content_unref);
    else
        s->parts = g_tree_new_full(compare_part_numbers, NULL, NULL, mpu_part_free);
    g_hash_table_insert(uploads->sessions, s->id, s);
    uploads->active++;
    g_mutex_unlock(&uploads->lock);
    return s;
}

/* A new reference to the session with this id and kind (and bucket/name when given). */
static struct session *session_find(struct emu_uploads *uploads, const char *id,
                                    enum session_kind kind, const char *bucket, const char *name)
{
    if (id == NULL)
        return NULL;
    g_mutex_lock(&uploads->lock);
    struct session *s = g_hash_table_lookup(uploads->sessions, id);
    if (s != NULL && (s->kind != kind || (bucket != NULL && strcmp(bucket, s->bucket) != 0) ||
                      (name != NULL && strcmp(name, s->name) != 0)))
        s = NULL;
    if (s != NULL)
        g_atomic_int_inc(&s->refcount);
    g_mutex_unlock(&uploads->lock);
    return s;
}

static void session_forget(struct emu_uploads *uploads, struct session *s)
{
    g_mutex_lock(&uploads->lock);
    if (g_hash_table_lookup(uploads->sessions, s->id) == s) {
        if (s->result == NULL && uploads->active > 0)
            uploads->active--;
        g_hash_table_remove(uploads->sessions, s->id);
    }
    g_mutex_unlock(&uploads->lock);
}

/* Records a finalized session, evicting the oldest beyond the cap. Called without locks. */
static void session_finalized(struct emu_uploads *uploads, struct session *s)
{
    g_mutex_lock(&uploads->lock);
    if (uploads->active > 0)
        uploads->active--;
    g_queue_push_tail(&uploads->finalized, g_strdup(s->id));
    while (g_queue_get_length(&uploads->finalized) > EMU_UPLOADS_MAX_FINALIZED) {
        char *old = g_queue_pop_head(&uploads->finalized);
        g_hash_table_remove(uploads->sessions, old);
        g_free(old);
    }
    g_mutex_unlock(&uploads->lock);
}

static int parse_u64(const char *text, size_t len, uint64_t *out)
{
    if (len == 0 || len > 20)
        return -EINVAL;
    uint64_t value = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -EINVAL;
        uint64_t digit = (uint64_t)(text[i] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return -EINVAL;
        value = value * 10 + digit;
    }
    *out = value;
    return 0;
}

int emu_parse_content_range(const char *header, struct emu_content_range *out)
{
    if (header == NULL)
        return -EINVAL;
    while (*header == ' ')
        header++;
    if (g_ascii_strncasecmp(header, "bytes", 5) != 0)
        return -EINVAL;
    const char *p = header + 5;
    if (*p != ' ' && *p != '=')
        return -EINVAL;
    while (*p == ' ' || *p == '=')
        p++;
    const char *slash = strchr(p, '/');
    if (slash == NULL)
        return -EINVAL;
    struct emu_content_range range = {0};
    size_t range_len = (size_t)(slash - p);
    if (range_len == 1 && p[0] == '*') {
        range.has_range = false;
    } else {
        const char *dash = memchr(p, '-', range_len);
        if (dash == NULL)
            return -EINVAL;
        if (parse_u64(p, (size_t)(dash - p), &range.first) < 0 ||
            parse_u64(dash + 1, (size_t)(slash - dash - 1), &range.last) < 0 ||
            range.last < range.first)
            return -EINVAL;
        range.has_range = true;
    }
    const char *total = slash + 1;
    size_t total_len = strlen(total);
    while (total_len > 0 && total[total_len - 1] == ' ')
        total_len--;
    if (total_len == 1 && total[0] == '*') {
        range.has_total = false;
    } else {
        if (parse_u64(total, total_len, &range.total) < 0)
            return -EINVAL;
        range.has_total = true;
        if (range.has_range && range.last >= range.total)
            return -EINVAL;
    }
    *out = range;
    return 0;
}

char *emu_resumable_create(struct emu_uploads *uploads, const char *bucket, const char *name,
                           const struct emu_object_attrs *attrs,
                           const struct emu_preconditions *pre)
{
    struct session *s = session_new(uploads, SESSION_RESUMABLE, bucket, name, attrs);
    if (s == NULL)
        return NULL;
    if (pre != NULL)
        s->pre = *pre;
    char *id = g_strdup(s->id);
    session_unref(s);
    return id;
}

/* Publishes the session's segments; called with the session locked. */
static int resumable_finalize(struct session *s, struct emu_store *store)
{
    struct emu_content *content = emu_content_new_concat(
        (struct emu_content *const *)s->segments->pdata, (int)s->segments->len);
    if (content == NULL)
        return -ENOMEM;
    struct emu_object *obj = NULL;
    int ret = emu_store_put_object(store, s->bucket, s->name, content, &s->attrs, &s->pre, &obj);
    if (ret < 0)
        return ret;
    /* The session answers status queries with the object's resource until it is evicted
     * (EMU_UPLOADS_MAX_FINALIZED): it keeps that, not the bytes, which would otherwise stay
     * in memory after the object is deleted or overwritten. */
    s->result = emu_object_metadata_only(obj);
    emu_object_unref(obj);
    g_ptr_array_set_size(s->segments, 0);
    return 0;
}

int emu_resumable_put(struct emu_uploads *uploads, struct emu_store *store, const char *id,
                      const struct emu_content_range *range, GBytes *body,
                      struct emu_resumable_status *out, const char **message)
{
    struct session *s = session_find(uploads, id, SESSION_RESUMABLE, NULL, NULL);
    *message = NULL;
    if (s == NULL) {
        g_bytes_unref(body);
        return -ENOENT;
    }
    int ret = 0;
    bool finalized_now = false;
    gsize len = 0;
    g_bytes_get_data(body, &len);
    struct emu_content_range whole = {.has_range = len > 0,
                                      .first = 0,
                                      .last = len > 0 ? len - 1 : 0,
                                      .has_total = true,
                                      .total = len};
    if (range == NULL)
        range = &whole;

    g_mutex_lock(&s->lock);
    if (s->result != NULL)
        goto done;
    if (range->has_range && range->last - range->first + 1 != len) {
        *message = "The Content-Range does not match the number of bytes sent.";
        ret = -EINVAL;
        goto done;
    }
    if (!range->has_range && len != 0) {
        *message = "A request with a body must give its byte range in Content-Range.";
        ret = -EINVAL;
        goto done;
    }
    if (range->has_total) {
        if ((s->has_total && s->total != range->total) || range->total < s->persisted) {
            *message = "The total object size does not match the earlier requests.";
            ret = -EINVAL;
            goto done;
        }
    }
    if (range->has_range) {
        if (range->first > s->persisted) {
            *message = "The chunk starts after the bytes persisted so far.";
            ret = -EINVAL;
            goto done;
        }
        /* A non-final chunk counts in whole 256 KiB units of its own length (Cloud Storage's
         * chunk size rule); the odd tail is not persisted and the Range reply says so. */
        uint64_t end = range->last + 1;
        bool final = range->has_total && end == range->total;
        if (!final)
            end -= (end - range->first) % EMU_RESUMABLE_UNIT;
        if (end > s->persisted) {
            GBytes *slice = g_bytes_new_from_bytes(body, (gsize)(s->persisted - range->first),
                                                   (gsize)(end - s->persisted));
            g_ptr_array_add(s->segments, emu_content_new_bytes(slice));
            s->persisted = end;
        }
    }
    if (range->has_total) {
        s->has_total = true;
        s->total = range->total;
        if (s->persisted == s->total) {
            ret = resumable_finalize(s, store);
            finalized_now = ret == 0;
        }
    }
done:
    if (ret == 0) {
        memset(out, 0, sizeof(*out));
        out->persisted = s->persisted;
        if (s->result != NULL) {
            out->done = true;
            out->object = emu_object_ref(s->result);
        }
    }
    g_mutex_unlock(&s->lock);
    g_bytes_unref(body);
    if (finalized_now)
        session_finalized(uploads, s);
    session_unref(s);
    return ret;
}

int emu_resumable_cancel(struct emu_uploads *uploads, const char *id)
{
    struct session *s = session_find(uploads, id, SESSION_RESUMABLE, NULL, NULL);
    if (s == NULL)
        return -ENOENT;
    session_forget(uploads, s);
    session_unref(s);
    return 0;
}

void emu_format_etag(const uint8_t md5[16], char out[35])
{
    static const char hex[] = "0123456789abcdef";
    out[0] = '"';
    for (int i = 0; i < 16; i++) {
        out[1 + 2 * i] = hex[md5[i] >> 4];
        out[2 + 2 * i] = hex[md5[i] & 15];
    }
    out[33] = '"';
    out[34] = '\0';
}

char *emu_mpu_create(struct emu_uploads *uploads, const char *bucket, const char *name,
                     const struct emu_object_attrs *attrs)
{
    struct session *s = session_new(uploads, SESSION_MULTIPART, bucket, name, attrs);
    if (s == NULL)
        return NULL;
    char *id = g_strdup(s->id);
    session_unref(s);
    return id;
}

enum emu_mpu_error emu_mpu_put_part(struct emu_uploads *uploads, const char *id, const char *bucket,
                                    const char *name, int number, GBytes *data,
                                    const uint32_t *known_crc32c, struct emu_mpu_part_info *out)
{
    if (number < 1 || number > EMU_MPU_MAX_PARTS) {
        g_bytes_unref(data);
        return EMU_MPU_INVALID_ARGUMENT;
    }
    struct session *s = session_find(uploads, id, SESSION_MULTIPART, bucket, name);
    if (s == NULL) {
        g_bytes_unref(data);
        return EMU_MPU_NO_SUCH_UPLOAD;
    }
    gsize len = 0;
    const void *bytes = g_bytes_get_data(data, &len);
    struct mpu_part *part = g_new0(struct mpu_part, 1);
    part->info.number = number;
    part->info.size = len;
    part->info.crc32c = known_crc32c ? *known_crc32c : crc32c_update(0, bytes, len);
    unsigned int md5_len = 0;
    EVP_Digest(bytes, len, part->info.md5, &md5_len, EVP_md5(), NULL);
    emu_format_etag(part->info.md5, part->info.etag);
    part->info.uploaded_us = g_get_real_time();
    part->content = emu_content_new_bytes_crc32c(data, part->info.crc32c); /* once per byte */
    *out = part->info;
    g_mutex_lock(&s->lock);
    g_tree_replace(s->parts, GINT_TO_POINTER(number), part);
    g_mutex_unlock(&s->lock);
    session_unref(s);
    return EMU_MPU_OK;
}

/* Compares ETags ignoring surrounding quotes and case. */
static bool etag_equal(const char *given, const char *stored)
{
    size_t glen = strlen(given);
    while (glen > 0 && (*given == '"' || *given == ' ')) {
        given++;
        glen--;
    }
    while (glen > 0 && (given[glen - 1] == '"' || given[glen - 1] == ' '))
        glen--;
    return glen == 32 && g_ascii_strncasecmp(given, stored + 1, 32) == 0;
}

enum emu_mpu_error emu_mpu_complete(struct emu_uploads *uploads, struct emu_store *store,
                                    const char *id, const char *bucket, const char *name,
                                    const struct emu_mpu_complete_part *parts, size_t count,
                                    const struct emu_preconditions *pre, struct emu_object **out,
                                    int *err)
{
    *err = 0;
    struct session *s = session_find(uploads, id, SESSION_MULTIPART, bucket, name);
    if (s == NULL)
        return EMU_MPU_NO_SUCH_UPLOAD;
    if (count == 0 || count > EMU_MPU_MAX_PARTS) {
        session_unref(s);
        return EMU_MPU_INVALID_ARGUMENT;
    }
    enum emu_mpu_error result = EMU_MPU_OK;
    struct emu_content **contents = g_new0(struct emu_content *, count);
    g_mutex_lock(&s->lock);
    for (size_t i = 1; i < count && result == EMU_MPU_OK; i++) {
        if (parts[i].number <= parts[i - 1].number)
            result = EMU_MPU_INVALID_ORDER;
    }
    for (size_t i = 0; i < count && result == EMU_MPU_OK; i++) {
        struct mpu_part *part = g_tree_lookup(s->parts, GINT_TO_POINTER(parts[i].number));
        if (part == NULL || parts[i].etag == NULL || !etag_equal(parts[i].etag, part->info.etag))
            result = EMU_MPU_INVALID_PART;
        else if (i + 1 < count && part->info.size < EMU_MPU_MIN_PART)
            result = EMU_MPU_TOO_SMALL;
        else
            contents[i] = part->content;
    }
    if (result == EMU_MPU_OK) {
        struct emu_content *whole = emu_content_new_concat(contents, (int)count);
        struct emu_object *obj = NULL;
        int ret = emu_store_put_object(store, s->bucket, s->name, whole, &s->attrs, pre, &obj);
        if (ret < 0) {
            *err = ret;
            result = EMU_MPU_STORE_ERROR;
        } else {
            *out = obj;
        }
    }
    g_mutex_unlock(&s->lock);
    g_free(contents);
    if (result == EMU_MPU_OK)
        session_forget(uploads, s);
    session_unref(s);
    return result;
}

enum emu_mpu_error emu_mpu_abort(struct emu_uploads *uploads, const char *id, const char *bucket,
                                 const char *name)
{
    struct session *s = session_find(uploads, id, SESSION_MULTIPART, bucket, name);
    if (s == NULL)
        return EMU_MPU_NO_SUCH_UPLOAD;
    session_forget(uploads, s);
    session_unref(s);
    return EMU_MPU_OK;
}

static gboolean append_part_info(gpointer key, gpointer value, gpointer data)
{
    struct mpu_part *part = value;
    g_array_append_val((GArray *)data, part->info);
    return FALSE;
}

enum emu_mpu_error emu_mpu_list_parts(struct emu_uploads *uploads, const char *id,
                                      const char *bucket, const char *name, GArray *parts)
{
    struct session *s = session_find(uploads, id, SESSION_MULTIPART, bucket, name);
    if (s == NULL)
        return EMU_MPU_NO_SUCH_UPLOAD;
    g_mutex_lock(&s->lock);
    g_tree_foreach(s->parts, append_part_info, parts);
    g_mutex_unlock(&s->lock);
    session_unref(s);
    return EMU_MPU_OK;
}

static gint compare_upload_info(gconstpointer a, gconstpointer b)
{
    const struct emu_mpu_upload_info *x = a, *y = b;
    int by_name = strcmp(x->name, y->name);
    if (by_name != 0)
        return by_name;
    if (x->initiated_us != y->initiated_us)
        return x->initiated_us < y->initiated_us ? -1 : 1;
    return strcmp(x->id, y->id);
}

GArray *emu_mpu_list_uploads(struct emu_uploads *uploads, const char *bucket, const char *prefix)
{
    GArray *list = g_array_new(FALSE, TRUE, sizeof(struct emu_mpu_upload_info));
    size_t prefix_len = prefix != NULL ? strlen(prefix) : 0;
    g_mutex_lock(&uploads->lock);
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, uploads->sessions);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        const struct session *s = value;
        if (s->kind != SESSION_MULTIPART || strcmp(s->bucket, bucket) != 0 ||
            strncmp(s->name, prefix != NULL ? prefix : "", prefix_len) != 0)
            continue;
        struct emu_mpu_upload_info info = {
            .name = g_strdup(s->name),
            .id = g_strdup(s->id),
            .initiated_us = s->created_us,
        };
        g_array_append_val(list, info);
    }
    g_mutex_unlock(&uploads->lock);
    g_array_sort(list, compare_upload_info);
    return list;
}

void emu_mpu_upload_list_free(GArray *list)
{
    if (list == NULL)
        return;
    for (guint i = 0; i < list->len; i++) {
        struct emu_mpu_upload_info *info = &g_array_index(list, struct emu_mpu_upload_info, i);
        g_free(info->name);
        g_free(info->id);
    }
    g_array_free(list, TRUE);
}
