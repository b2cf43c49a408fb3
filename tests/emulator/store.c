/* The emulator's object store (store.h): buckets, immutable object versions, generations,
 * preconditions, put/get/delete/patch/compose/copy and populate. One GRWLock guards the index;
 * objects are immutable once published and contents are read outside the lock. Listing lives in
 * list.c, contents in content.c, the data directory in persist.c. */
#include "store-internal.h"

#include <errno.h>
#include <string.h>

#include "fluxfs/crc32c.h"

#define DEFAULT_CONTENT_TYPE "application/octet-stream"
#define DEFAULT_STORAGE_CLASS "STANDARD"
#define MAX_BUCKET_NAME 222
#define MAX_COMPOSE_SOURCES 32

/* --- objects --- */

static GHashTable *shared_empty_metadata(void)
{
    static GHashTable *empty;
    if (g_once_init_enter(&empty)) {
        GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        g_once_init_leave(&empty, table);
    }
    return empty;
}

struct emu_object *emu_object_alloc(const struct emu_object_strings *strings, GHashTable *metadata,
                                    struct emu_content *content)
{
    const char *src[8] = {strings->bucket,           strings->name,
                          strings->content_type,     strings->content_encoding,
                          strings->cache_control,    strings->content_disposition,
                          strings->content_language, strings->storage_class};
    size_t total = sizeof(struct emu_object);
    for (int i = 0; i < 8; i++)
        if (src[i] != NULL)
            total += strlen(src[i]) + 1;
    struct emu_object *obj = g_malloc0(total);
    char *cursor = (char *)(obj + 1);
    char **dst[8] = {&obj->bucket,           &obj->name,
                     &obj->content_type,     &obj->content_encoding,
                     &obj->cache_control,    &obj->content_disposition,
                     &obj->content_language, &obj->storage_class};
    for (int i = 0; i < 8; i++) {
        if (src[i] == NULL)
            continue;
        size_t len = strlen(src[i]) + 1;
        memcpy(cursor, src[i], len);
        *dst[i] = cursor;
        cursor += len;
    }
    obj->metadata = g_hash_table_ref(metadata ? metadata : shared_empty_metadata());
    obj->content = content;
    obj->size = emu_content_size(content);
    obj->metageneration = 1;
    obj->refcount = 1;
    return obj;
}

static void strings_from_object(struct emu_object_strings *s, const struct emu_object *obj);

/* What describes the bytes (checksums, component count), from an object with the same bytes. */
static void copy_content_identity(struct emu_object *dst, const struct emu_object *src)
{
    dst->crc32c = src->crc32c;
    dst->has_md5 = src->has_md5;
    memcpy(dst->md5, src->md5, sizeof(dst->md5));
    dst->component_count = src->component_count;
}

struct emu_object *emu_object_metadata_only(const struct emu_object *obj)
{
    struct emu_object_strings strings;
    strings_from_object(&strings, obj);
    struct emu_object *copy = emu_object_alloc(&strings, obj->metadata, NULL);
    copy->generation = obj->generation;
    copy->metageneration = obj->metageneration;
    copy->size = obj->size;
    copy->time_created_us = obj->time_created_us;
    copy->updated_us = obj->updated_us;
    copy->custom_time_us = obj->custom_time_us;
    copy->temporary_hold = obj->temporary_hold;
    copy->event_based_hold = obj->event_based_hold;
    copy_content_identity(copy, obj);
    return copy;
}

struct emu_object *emu_object_ref(struct emu_object *obj)
{
    if (obj != NULL)
        g_atomic_int_inc(&obj->refcount);
    return obj;
}

void emu_object_unref(struct emu_object *obj)
{
    if (obj == NULL || !g_atomic_int_dec_and_test(&obj->refcount))
        return;
    emu_content_unref(obj->content);
    g_hash_table_unref(obj->metadata);
    g_free(obj); /* the strings live in the same allocation */
}

static GHashTable *metadata_copy(GHashTable *from)
{
    if (from == NULL || g_hash_table_size(from) == 0)
        return NULL;
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, from);
    while (g_hash_table_iter_next(&iter, &key, &value))
        if (value != NULL)
            g_hash_table_insert(table, g_strdup(key), g_strdup(value));
    return table;
}

static const char *or_default(const char *value, const char *fallback)
{
    return value != NULL && value[0] != '\0' ? value : fallback;
}

/* Strings for a new object from write attrs (NULL attrs = all defaults). */
static void strings_from_attrs(struct emu_object_strings *s, const char *bucket, const char *name,
                               const struct emu_object_attrs *attrs)
{
    static const struct emu_object_attrs none;
    if (attrs == NULL)
        attrs = &none;
    s->bucket = bucket;
    s->name = name;
    s->content_type = or_default(attrs->content_type, DEFAULT_CONTENT_TYPE);
    s->content_encoding = or_default(attrs->content_encoding, NULL);
    s->cache_control = or_default(attrs->cache_control, NULL);
    s->content_disposition = or_default(attrs->content_disposition, NULL);
    s->content_language = or_default(attrs->content_language, NULL);
    s->storage_class = or_default(attrs->storage_class, DEFAULT_STORAGE_CLASS);
}

static void strings_from_object(struct emu_object_strings *s, const struct emu_object *obj)
{
    s->bucket = obj->bucket;
    s->name = obj->name;
    s->content_type = obj->content_type;
    s->content_encoding = obj->content_encoding;
    s->cache_control = obj->cache_control;
    s->content_disposition = obj->content_disposition;
    s->content_language = obj->content_language;
    s->storage_class = obj->storage_class;
}

/* customTime and holds of a new object from write attrs. */
static void extras_from_attrs(struct emu_object *obj, const struct emu_object_attrs *attrs)
{
    if (attrs == NULL)
        return;
    if (attrs->has_custom_time)
        obj->custom_time_us = attrs->custom_time_us;
    obj->temporary_hold = attrs->has_temporary_hold && attrs->temporary_hold;
    obj->event_based_hold = attrs->has_event_based_hold && attrs->event_based_hold;
}

/* A live object under a hold cannot be deleted or overwritten. */
static int check_not_held(const struct emu_object *live)
{
    return live != NULL && (live->temporary_hold || live->event_based_hold) ? -EPERM : 0;
}

/* --- preconditions --- */

int emu_preconditions_check(const struct emu_preconditions *pre, const struct emu_object *live,
                            bool for_read)
{
    if (pre == NULL)
        return 0;
    /* The *_match conditions (412) are decided before the read-side *_not_match ones (304). */
    if (pre->has_if_generation_match) {
        if (pre->if_generation_match == 0 ? live != NULL
                                          : live == NULL || live->generation != pre->if_generation_match)
            return -EPROTO;
    }
    if (pre->has_if_metageneration_match &&
        (live == NULL || live->metageneration != pre->if_metageneration_match))
        return -EPROTO;
    /* Without a live object every not-match condition fails (Cloud Storage: "if no live object
     * exists, the precondition fails"; ifGenerationNotMatch=0 thus means "must exist"). */
    if (pre->has_if_generation_not_match) {
        if (live == NULL)
            return -EPROTO;
        if (live->generation == pre->if_generation_not_match)
            return for_read ? -EALREADY : -EPROTO;
    }
    if (pre->has_if_metageneration_not_match) {
        if (live == NULL)
            return -EPROTO;
        if (live->metageneration == pre->if_metageneration_not_match)
            return for_read ? -EALREADY : -EPROTO;
    }
    return 0;
}

/* --- store lifecycle --- */

static void bucket_free(gpointer data)
{
    struct emu_bucket *bucket = data;
    if (bucket == NULL)
        return;
    g_tree_unref(bucket->objects);
    g_free(bucket->name);
    g_free(bucket);
}

static gint compare_names(gconstpointer a, gconstpointer b, gpointer unused)
{
    return strcmp(a, b);
}

static GTree *new_bucket_tree(void)
{
    return g_tree_new_full(compare_names, NULL, g_free, bucket_free);
}

int emu_store_open(const char *data_dir, struct emu_store **out)
{
    struct emu_store *store = g_new0(struct emu_store, 1);
    g_rw_lock_init(&store->lock);
    store->buckets = new_bucket_tree();
    if (data_dir != NULL) {
        int rc = emu_persist_open(data_dir, &store->persist);
        if (rc == 0)
            rc = emu_persist_load(store->persist, store);
        if (rc < 0) {
            emu_store_close(store);
            return rc;
        }
    }
    *out = store;
    return 0;
}

void emu_store_close(struct emu_store *store)
{
    if (store == NULL)
        return;
    /* First stop contents from deleting their files, then drop everything. */
    emu_persist_close(store->persist);
    g_tree_unref(store->buckets);
    g_rw_lock_clear(&store->lock);
    g_free(store);
}

void emu_store_reset(struct emu_store *store)
{
    g_rw_lock_writer_lock(&store->lock);
    GTree *old = store->buckets;
    store->buckets = new_bucket_tree();
    emu_persist_reset(store->persist);
    g_rw_lock_writer_unlock(&store->lock);
    g_tree_unref(old); /* releases contents (and their files) outside the lock */
}

void emu_store_set_implicit_buckets(struct emu_store *store, bool on)
{
    g_rw_lock_writer_lock(&store->lock);
    store->no_implicit_buckets = !on;
    g_rw_lock_writer_unlock(&store->lock);
}

/* --- buckets --- */

/* The bucket a write goes to: created when implicit buckets are on. Caller holds the write
 * lock. */
static struct emu_bucket *write_bucket(struct emu_store *store, const char *name)
{
    return emu_store_find_bucket(store, name, !store->no_implicit_buckets);
}

static bool bucket_name_valid(const char *name)
{
    if (name == NULL)
        return false;
    size_t len = strlen(name);
    if (len == 0 || len > MAX_BUCKET_NAME || !g_utf8_validate_len(name, len, NULL))
        return false;
    for (const char *p = name; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20)
            return false;
    return true;
}

static struct emu_bucket *bucket_new(const char *name, int64_t time_created_us,
                                     int64_t metageneration)
{
    struct emu_bucket *bucket = g_new0(struct emu_bucket, 1);
    bucket->name = g_strdup(name);
    bucket->time_created_us = time_created_us;
    bucket->metageneration = metageneration;
    bucket->objects = g_tree_new_full(compare_names, NULL, NULL,
                                      (GDestroyNotify)emu_object_unref);
    return bucket;
}

struct emu_bucket *emu_store_find_bucket(struct emu_store *store, const char *name, bool create)
{
    struct emu_bucket *bucket = g_tree_lookup(store->buckets, name);
    if (bucket != NULL || !create)
        return bucket;
    bucket = bucket_new(name, g_get_real_time(), 1);
    g_tree_insert(store->buckets, g_strdup(name), bucket);
    /* A failed bucket record only costs the empty bucket after a restart: objects recreate it. */
    (void)emu_persist_save_bucket(store->persist, bucket);
    return bucket;
}

void emu_store_insert_loaded_bucket(struct emu_store *store, const char *name,
                                    int64_t time_created_us, int64_t metageneration)
{
    g_rw_lock_writer_lock(&store->lock);
    if (g_tree_lookup(store->buckets, name) == NULL)
        g_tree_insert(store->buckets, g_strdup(name),
                      bucket_new(name, time_created_us, metageneration));
    g_rw_lock_writer_unlock(&store->lock);
}

void emu_store_insert_loaded(struct emu_store *store, struct emu_object *obj)
{
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *bucket = g_tree_lookup(store->buckets, obj->bucket);
    if (bucket == NULL) {
        bucket = bucket_new(obj->bucket, obj->time_created_us, 1);
        g_tree_insert(store->buckets, g_strdup(obj->bucket), bucket);
    }
    if (obj->generation > store->last_generation)
        store->last_generation = obj->generation;
    g_tree_replace(bucket->objects, obj->name, obj);
    g_rw_lock_writer_unlock(&store->lock);
}

int emu_store_bucket_insert(struct emu_store *store, const char *name)
{
    if (!bucket_name_valid(name))
        return -EINVAL;
    g_rw_lock_writer_lock(&store->lock);
    int rc = 0;
    if (g_tree_lookup(store->buckets, name) != NULL)
        rc = -EEXIST;
    else
        (void)emu_store_find_bucket(store, name, true);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_bucket_delete(struct emu_store *store, const char *name)
{
    if (name == NULL)
        return -ENOENT;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *bucket = g_tree_lookup(store->buckets, name);
    int rc = 0;
    if (bucket == NULL)
        rc = -ENOENT;
    else if (g_tree_nnodes(bucket->objects) > 0)
        rc = -ENOTEMPTY;
    else if (emu_persist_remove_bucket(store->persist, name) < 0)
        rc = -EIO;
    else
        g_tree_remove(store->buckets, name);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

static void bucket_info_fill(struct emu_bucket_info *info, const struct emu_bucket *bucket)
{
    info->name = g_strdup(bucket->name);
    info->time_created_us = bucket->time_created_us;
    info->metageneration = bucket->metageneration;
}

int emu_store_bucket_get(struct emu_store *store, const char *name, struct emu_bucket_info *out)
{
    g_rw_lock_reader_lock(&store->lock);
    struct emu_bucket *bucket = name ? g_tree_lookup(store->buckets, name) : NULL;
    if (bucket != NULL)
        bucket_info_fill(out, bucket);
    g_rw_lock_reader_unlock(&store->lock);
    return bucket != NULL ? 0 : -ENOENT;
}

void emu_bucket_info_clear(struct emu_bucket_info *info)
{
    if (info == NULL)
        return;
    g_free(info->name);
    info->name = NULL;
}

static void bucket_info_free(gpointer data)
{
    emu_bucket_info_clear(data);
    g_free(data);
}

static gboolean collect_bucket(gpointer key, gpointer value, gpointer data)
{
    struct emu_bucket_info *info = g_new0(struct emu_bucket_info, 1);
    bucket_info_fill(info, value);
    g_ptr_array_add(data, info);
    return FALSE;
}

GPtrArray *emu_store_bucket_list(struct emu_store *store)
{
    GPtrArray *list = g_ptr_array_new_with_free_func(bucket_info_free);
    g_rw_lock_reader_lock(&store->lock);
    g_tree_foreach(store->buckets, collect_bucket, list);
    g_rw_lock_reader_unlock(&store->lock);
    return list;
}

/* --- objects --- */

/* Strictly increasing over the whole store; microseconds since the epoch while the clock runs
 * ahead of the writes. Caller holds the write lock. */
static int64_t next_generation(struct emu_store *store)
{
    int64_t now = g_get_real_time();
    store->last_generation = now > store->last_generation ? now : store->last_generation + 1;
    return store->last_generation;
}

int emu_store_get_object(struct emu_store *store, const char *bucket, const char *name,
                         int64_t generation, const struct emu_preconditions *pre, bool for_read,
                         struct emu_object **out)
{
    if (bucket == NULL || name == NULL)
        return -ENOENT;
    g_rw_lock_reader_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    struct emu_object *obj = b ? g_tree_lookup(b->objects, name) : NULL;
    int rc = 0;
    if (obj == NULL || (generation != 0 && obj->generation != generation))
        rc = -ENOENT;
    else
        rc = emu_preconditions_check(pre, obj, for_read);
    if (rc == 0 && out != NULL)
        *out = emu_object_ref(obj);
    g_rw_lock_reader_unlock(&store->lock);
    return rc;
}

/* Checksums of new content, verified against what the client said. */
static int content_checksums(struct emu_content *content, const struct emu_object_attrs *attrs,
                             bool want_md5, uint32_t *crc, uint8_t md5[16])
{
    bool trusted = attrs != NULL && attrs->checksums_trusted;
    if (trusted && attrs->has_crc32c) {
        *crc = attrs->crc32c;
        if (!g_atomic_int_get(&content->crc_known))
            emu_content_set_crc32c(content, *crc);
    } else {
        *crc = emu_content_crc32c(content);
    }
    if (attrs != NULL && attrs->has_crc32c && attrs->crc32c != *crc)
        return -EBADMSG;
    if (trusted && attrs->has_md5) {
        memcpy(md5, attrs->md5, 16);
    } else if (want_md5 || (attrs != NULL && attrs->has_md5)) {
        int rc = emu_content_md5(content, md5);
        if (rc < 0)
            return rc;
        if (attrs != NULL && attrs->has_md5 && memcmp(attrs->md5, md5, 16) != 0)
            return -EBADMSG;
    }
    return 0;
}

/* Publishes obj (generation, times assigned here) as the live version; caller holds the write
 * lock and passes its reference. On success *out (when out is not NULL) gets a new reference.
 * Returns 0 or -EIO (obj released). */
static int publish(struct emu_store *store, struct emu_bucket *bucket, struct emu_object *obj,
                   bool new_generation, struct emu_object **out)
{
    int64_t now = g_get_real_time();
    if (new_generation) {
        obj->generation = next_generation(store);
        obj->time_created_us = now;
    }
    obj->updated_us = now;
    if (emu_persist_save_object(store->persist, obj) < 0) {
        emu_object_unref(obj);
        return -EIO;
    }
    if (out != NULL)
        *out = emu_object_ref(obj);
    g_tree_replace(bucket->objects, obj->name, obj);
    return 0;
}

int emu_store_put_object(struct emu_store *store, const char *bucket, const char *name,
                         struct emu_content *content, const struct emu_object_attrs *attrs,
                         const struct emu_preconditions *pre, struct emu_object **out)
{
    if (content == NULL)
        content = emu_content_new_bytes(NULL);
    if (!bucket_name_valid(bucket) || !emu_object_name_valid(name)) {
        emu_content_unref(content);
        return -EINVAL;
    }
    if (emu_content_size(content) > EMU_MAX_OBJECT_SIZE) {
        emu_content_unref(content);
        return -EFBIG;
    }
    uint32_t crc = 0;
    uint8_t md5[16] = {0};
    bool want_md5 = attrs == NULL || !attrs->no_md5;
    int rc = content_checksums(content, attrs, want_md5, &crc, md5);
    struct emu_content *stored = NULL;
    if (rc == 0)
        rc = emu_persist_materialise(store->persist, content, &stored);
    emu_content_unref(content);
    if (rc < 0)
        return rc;

    struct emu_object_strings strings;
    strings_from_attrs(&strings, bucket, name, attrs);
    GHashTable *metadata = metadata_copy(attrs ? attrs->metadata : NULL);
    struct emu_object *obj = emu_object_alloc(&strings, metadata, stored);
    if (metadata != NULL)
        g_hash_table_unref(metadata); /* alloc took its own reference */
    obj->crc32c = crc;
    obj->has_md5 = want_md5 || attrs->has_md5;
    if (obj->has_md5)
        memcpy(obj->md5, md5, 16);
    extras_from_attrs(obj, attrs);

    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = write_bucket(store, bucket);
    struct emu_object *live = b != NULL ? g_tree_lookup(b->objects, name) : NULL;
    rc = b == NULL ? -ENOENT : emu_preconditions_check(pre, live, false);
    if (rc == 0)
        rc = check_not_held(live);
    if (rc == 0) {
        rc = publish(store, b, obj, true, out);
    } else {
        emu_object_unref(obj);
    }
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_delete_object(struct emu_store *store, const char *bucket, const char *name,
                            int64_t generation, const struct emu_preconditions *pre)
{
    if (bucket == NULL || name == NULL)
        return -ENOENT;
    struct emu_object *removed = NULL;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    struct emu_object *obj = b ? g_tree_lookup(b->objects, name) : NULL;
    int rc = 0;
    if (obj == NULL || (generation != 0 && obj->generation != generation))
        rc = -ENOENT;
    else
        rc = emu_preconditions_check(pre, obj, false);
    if (rc == 0)
        rc = check_not_held(obj);
    if (rc == 0)
        rc = emu_persist_remove_object(store->persist, bucket, name) < 0 ? -EIO : 0;
    if (rc == 0) {
        removed = emu_object_ref(obj);
        g_tree_remove(b->objects, name);
    }
    g_rw_lock_writer_unlock(&store->lock);
    emu_object_unref(removed); /* the last reference may free content: outside the lock */
    return rc;
}

static void apply_string(const char **field, const char *value, const char *fallback)
{
    if (value == NULL)
        return;
    *field = value[0] != '\0' ? value : fallback;
}

int emu_store_patch_object(struct emu_store *store, const char *bucket, const char *name,
                           int64_t generation, const struct emu_object_attrs *attrs,
                           bool clear_metadata, const struct emu_preconditions *pre,
                           struct emu_object **out)
{
    if (bucket == NULL || name == NULL)
        return -ENOENT;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    struct emu_object *old = b ? g_tree_lookup(b->objects, name) : NULL;
    int rc = 0;
    if (old == NULL || (generation != 0 && old->generation != generation))
        rc = -ENOENT;
    else
        rc = emu_preconditions_check(pre, old, false);
    /* customTime, once set, can neither be removed nor moved earlier. */
    if (rc == 0 && attrs != NULL && attrs->has_custom_time && old->custom_time_us != 0 &&
        attrs->custom_time_us < old->custom_time_us)
        rc = -EINVAL;
    if (rc < 0) {
        g_rw_lock_writer_unlock(&store->lock);
        return rc;
    }

    struct emu_object_strings s;
    strings_from_object(&s, old);
    if (attrs != NULL) {
        apply_string(&s.content_type, attrs->content_type, DEFAULT_CONTENT_TYPE);
        apply_string(&s.content_encoding, attrs->content_encoding, NULL);
        apply_string(&s.cache_control, attrs->cache_control, NULL);
        apply_string(&s.content_disposition, attrs->content_disposition, NULL);
        apply_string(&s.content_language, attrs->content_language, NULL);
        apply_string(&s.storage_class, attrs->storage_class, DEFAULT_STORAGE_CLASS);
    }
    GHashTable *metadata = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    if (!clear_metadata) {
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, old->metadata);
        while (g_hash_table_iter_next(&iter, &key, &value))
            g_hash_table_insert(metadata, g_strdup(key), g_strdup(value));
    }
    if (attrs != NULL && attrs->metadata != NULL) {
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, attrs->metadata);
        while (g_hash_table_iter_next(&iter, &key, &value)) {
            if (value == NULL)
                g_hash_table_remove(metadata, key);
            else
                g_hash_table_insert(metadata, g_strdup(key), g_strdup(value));
        }
    }
    if (g_hash_table_size(metadata) == 0) {
        g_hash_table_unref(metadata);
        metadata = NULL;
    }
    struct emu_object *obj = emu_object_alloc(&s, metadata, emu_content_ref(old->content));
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    obj->generation = old->generation;
    obj->metageneration = old->metageneration + 1;
    obj->time_created_us = old->time_created_us;
    obj->custom_time_us = old->custom_time_us;
    obj->temporary_hold = old->temporary_hold;
    obj->event_based_hold = old->event_based_hold;
    if (attrs != NULL && attrs->has_custom_time)
        obj->custom_time_us = attrs->custom_time_us;
    if (attrs != NULL && attrs->has_temporary_hold)
        obj->temporary_hold = attrs->temporary_hold;
    if (attrs != NULL && attrs->has_event_based_hold)
        obj->event_based_hold = attrs->event_based_hold;
    copy_content_identity(obj, old);
    rc = publish(store, b, obj, false, out);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_compose(struct emu_store *store, const char *bucket, const char *dest_name,
                      const struct emu_compose_source *sources, int source_count,
                      const struct emu_object_attrs *attrs, const struct emu_preconditions *dest_pre,
                      struct emu_object **out)
{
    if (source_count < 1 || source_count > MAX_COMPOSE_SOURCES || sources == NULL)
        return -EINVAL;
    if (!bucket_name_valid(bucket) || !emu_object_name_valid(dest_name))
        return -EINVAL;
    for (int i = 0; i < source_count; i++)
        if (sources[i].name == NULL || !emu_object_name_valid(sources[i].name))
            return -EINVAL;

    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = write_bucket(store, bucket);
    if (b == NULL) {
        g_rw_lock_writer_unlock(&store->lock);
        return -ENOENT;
    }
    struct emu_content *parts[MAX_COMPOSE_SOURCES];
    uint32_t crc = 0;
    uint64_t size = 0;
    int components = 0;
    int rc = 0;
    for (int i = 0; i < source_count && rc == 0; i++) {
        struct emu_object *src = g_tree_lookup(b->objects, sources[i].name);
        if (src == NULL || (sources[i].generation != 0 && src->generation != sources[i].generation))
            rc = -ENOENT;
        else if (sources[i].has_if_generation_match &&
                 src->generation != sources[i].if_generation_match)
            rc = -EPROTO;
        else {
            parts[i] = src->content;
            crc = crc32c_combine(crc, src->crc32c, src->size);
            size += src->size;
            components += src->component_count > 0 ? src->component_count : 1;
        }
    }
    if (rc == 0 && size > EMU_MAX_OBJECT_SIZE)
        rc = -EFBIG;
    if (rc == 0 && attrs != NULL && attrs->has_crc32c && attrs->crc32c != crc)
        rc = -EBADMSG;
    if (rc == 0)
        rc = emu_preconditions_check(dest_pre, g_tree_lookup(b->objects, dest_name), false);
    if (rc == 0)
        rc = check_not_held(g_tree_lookup(b->objects, dest_name));
    if (rc < 0) {
        g_rw_lock_writer_unlock(&store->lock);
        return rc;
    }
    struct emu_content *content = emu_content_new_concat(parts, source_count);
    if (!g_atomic_int_get(&content->crc_known))
        emu_content_set_crc32c(content, crc);
    struct emu_object_strings strings;
    strings_from_attrs(&strings, bucket, dest_name, attrs);
    GHashTable *metadata = metadata_copy(attrs ? attrs->metadata : NULL);
    struct emu_object *obj = emu_object_alloc(&strings, metadata, content);
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    obj->crc32c = crc;
    obj->has_md5 = false;
    obj->component_count = components;
    extras_from_attrs(obj, attrs);
    rc = publish(store, b, obj, true, out);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_copy_object(struct emu_store *store, const char *src_bucket, const char *src_name,
                          int64_t src_generation, const char *dest_bucket, const char *dest_name,
                          const struct emu_object_attrs *attrs, const struct emu_preconditions *src_pre,
                          const struct emu_preconditions *dest_pre, struct emu_object **out)
{
    if (src_bucket == NULL || src_name == NULL)
        return -ENOENT;
    if (!bucket_name_valid(dest_bucket) || !emu_object_name_valid(dest_name))
        return -EINVAL;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *sb = emu_store_find_bucket(store, src_bucket, false);
    struct emu_object *src = sb ? g_tree_lookup(sb->objects, src_name) : NULL;
    int rc = 0;
    if (src == NULL || (src_generation != 0 && src->generation != src_generation))
        rc = -ENOENT;
    else
        rc = emu_preconditions_check(src_pre, src, false);
    struct emu_bucket *db = NULL;
    if (rc == 0) {
        db = write_bucket(store, dest_bucket);
        struct emu_object *live = db != NULL ? g_tree_lookup(db->objects, dest_name) : NULL;
        rc = db == NULL ? -ENOENT : emu_preconditions_check(dest_pre, live, false);
        if (rc == 0)
            rc = check_not_held(live);
    }
    if (rc == 0 && attrs != NULL && attrs->has_crc32c && attrs->crc32c != src->crc32c)
        rc = -EBADMSG;
    if (rc == 0 && attrs != NULL && attrs->has_md5 &&
        (!src->has_md5 || memcmp(attrs->md5, src->md5, 16) != 0))
        rc = -EBADMSG;
    if (rc < 0) {
        g_rw_lock_writer_unlock(&store->lock);
        return rc;
    }
    struct emu_object_strings strings;
    GHashTable *metadata;
    if (attrs == NULL) {
        strings_from_object(&strings, src);
        strings.bucket = dest_bucket;
        strings.name = dest_name;
        metadata = g_hash_table_ref(src->metadata);
    } else {
        strings_from_attrs(&strings, dest_bucket, dest_name, attrs);
        metadata = metadata_copy(attrs->metadata);
    }
    struct emu_object *obj = emu_object_alloc(&strings, metadata, emu_content_ref(src->content));
    if (metadata != NULL)
        g_hash_table_unref(metadata);
    copy_content_identity(obj, src);
    if (attrs == NULL)
        obj->custom_time_us = src->custom_time_us; /* holds are not copied */
    else
        extras_from_attrs(obj, attrs);
    rc = publish(store, db, obj, true, out);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

/* --- populate --- */

/* Objects per lock hold: keeps readers responsive while a big bucket fills. */
#define POPULATE_BATCH 4096

int emu_store_populate(struct emu_store *store, const char *bucket, const char *prefix,
                       uint64_t count, uint64_t size, uint64_t seed)
{
    if (prefix == NULL)
        prefix = "";
    if (!bucket_name_valid(bucket) || size > EMU_MAX_OBJECT_SIZE || strlen(prefix) > 1000)
        return -EINVAL;
    if (count > 100000000ull)
        return -EINVAL; /* a cap: 10^8 objects is far beyond what a test needs */
    struct emu_object_strings strings = {.bucket = bucket,
                                         .content_type = DEFAULT_CONTENT_TYPE,
                                         .storage_class = DEFAULT_STORAGE_CLASS};
    char name[1100];
    struct emu_object *batch[POPULATE_BATCH];
    for (uint64_t done = 0; done < count;) {
        unsigned n = count - done < POPULATE_BATCH ? (unsigned)(count - done) : POPULATE_BATCH;
        /* Generations are taken up front so contents (a function of the generation) and their
         * crc32c are computed outside the lock. */
        g_rw_lock_writer_lock(&store->lock);
        int64_t first_generation = next_generation(store);
        store->last_generation += n - 1;
        g_rw_lock_writer_unlock(&store->lock);
        int64_t now = g_get_real_time();
        for (unsigned i = 0; i < n; i++) {
            g_snprintf(name, sizeof(name), "%s%08" G_GUINT64_FORMAT, prefix, done + i);
            if (!emu_object_name_valid(name)) {
                for (unsigned j = 0; j < i; j++)
                    emu_object_unref(batch[j]);
                return -EINVAL;
            }
            int64_t generation = first_generation + i;
            strings.name = name;
            struct emu_object *obj = emu_object_alloc(
                &strings, NULL, emu_content_new_synthetic(name, generation, seed, size));
            obj->generation = generation;
            obj->time_created_us = now;
            obj->updated_us = now;
            obj->crc32c = emu_content_crc32c(obj->content);
            batch[i] = obj;
        }
        g_rw_lock_writer_lock(&store->lock);
        struct emu_bucket *b = emu_store_find_bucket(store, bucket, true);
        for (unsigned i = 0; i < n; i++) {
            /* Populated objects are not recorded (--populate makes them at every start): a
             * recorded object they replace loses its record. */
            if (store->persist != NULL && g_tree_lookup(b->objects, batch[i]->name) != NULL)
                (void)emu_persist_remove_object(store->persist, bucket, batch[i]->name);
            g_tree_replace(b->objects, batch[i]->name, batch[i]);
        }
        g_rw_lock_writer_unlock(&store->lock);
        done += n;
    }
    return 0;
}
