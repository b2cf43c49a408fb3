/* The emulator's object store (store.h): buckets, immutable object versions, generations,
 * preconditions, put/get/delete/patch/compose/copy and populate. One GRWLock guards the index;
 * objects are immutable once published and contents are read outside the lock. Listing lives in
 * list.c, contents in content.c, the data directory in persist.c. */
#include "store-internal.h"

#include <errno.h>
#include <string.h>

#include "fluxfs/crc32c.h"

#define DEFAULT_CONTENT_TYPE  "application/octet-stream"
#define DEFAULT_STORAGE_CLASS "STANDARD"
#define MAX_BUCKET_NAME       222
#define MAX_COMPOSE_SOURCES   32

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
    char **dst[8] = {&obj->bucket,           &obj->name,          &obj->content_type,
                     &obj->content_encoding, &obj->cache_control, &obj->content_disposition,
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

/* --- storage classes, the clock, the ledger, noncurrent and soft-deleted versions --- */

static const char *const storage_class_names[EMU_STORAGE_CLASS_COUNT] = {"STANDARD", "NEARLINE",
                                                                         "COLDLINE", "ARCHIVE"};

int emu_storage_class_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < EMU_STORAGE_CLASS_COUNT; i++)
        if (g_ascii_strcasecmp(name, storage_class_names[i]) == 0)
            return i;
    if (g_ascii_strcasecmp(name, "MULTI_REGIONAL") == 0 ||
        g_ascii_strcasecmp(name, "REGIONAL") == 0 ||
        g_ascii_strcasecmp(name, "DURABLE_REDUCED_AVAILABILITY") == 0)
        return EMU_STORAGE_STANDARD;
    return -1;
}

const char *emu_storage_class_name(enum emu_storage_class cls)
{
    return cls < EMU_STORAGE_CLASS_COUNT ? storage_class_names[cls] : "STANDARD";
}

const char *emu_object_state_name(enum emu_object_state state)
{
    static const char *const names[EMU_STATE_COUNT] = {"live", "noncurrent", "soft_deleted"};
    return state < EMU_STATE_COUNT ? names[state] : "live";
}

int64_t emu_storage_class_minimum_s(enum emu_storage_class cls)
{
    static const int64_t days[EMU_STORAGE_CLASS_COUNT] = {0, 30, 90, 365};
    return cls < EMU_STORAGE_CLASS_COUNT ? days[cls] * 86400 : 0;
}

int64_t emu_store_now_us(struct emu_store *store)
{
    return g_get_real_time() + __atomic_load_n(&store->clock_offset_us, __ATOMIC_RELAXED);
}

void emu_store_set_operation_polls(struct emu_store *store, unsigned polls)
{
    g_mutex_lock(&store->ops_lock);
    store->operation_polls = polls;
    g_mutex_unlock(&store->ops_lock);
}

unsigned emu_store_operation_polls(struct emu_store *store)
{
    g_mutex_lock(&store->ops_lock);
    unsigned polls = store->operation_polls;
    g_mutex_unlock(&store->ops_lock);
    return polls;
}

bool emu_store_operation_poll(struct emu_store *store, const char *id, bool started)
{
    g_mutex_lock(&store->ops_lock);
    bool done = store->operation_polls == 0;
    if (!done && started) {
        g_hash_table_replace(store->operation_gets, g_strdup(id), GUINT_TO_POINTER(0));
    } else if (!done) {
        unsigned gets = GPOINTER_TO_UINT(g_hash_table_lookup(store->operation_gets, id)) + 1;
        done = gets > store->operation_polls;
        if (done)
            g_hash_table_remove(store->operation_gets, id);
        else
            g_hash_table_replace(store->operation_gets, g_strdup(id), GUINT_TO_POINTER(gets));
    }
    g_mutex_unlock(&store->ops_lock);
    return done;
}

int64_t emu_store_clock_offset_us(struct emu_store *store)
{
    return __atomic_load_n(&store->clock_offset_us, __ATOMIC_RELAXED);
}

void emu_store_advance_clock(struct emu_store *store, int64_t us)
{
    if (us > 0)
        __atomic_add_fetch(&store->clock_offset_us, us, __ATOMIC_RELAXED);
}

static enum emu_storage_class object_class(const struct emu_object *obj)
{
    int cls = emu_storage_class_parse(obj->storage_class);
    return cls < 0 ? EMU_STORAGE_STANDARD : (enum emu_storage_class)cls;
}

/* The ledger integrates bytes x time; the caller holds the write lock. */
static void ledger_advance(struct emu_ledger *ledger, int64_t now)
{
    if (now <= ledger->last_us)
        return;
    double dt = (double)(now - ledger->last_us);
    for (int c = 0; c < EMU_STORAGE_CLASS_COUNT; c++)
        for (int st = 0; st < EMU_STATE_COUNT; st++)
            ledger->byte_us[c][st] += (double)ledger->bytes[c][st] * dt;
    ledger->last_us = now;
}

static void ledger_enter(struct emu_store *store, const struct emu_object *obj,
                         enum emu_object_state state, int64_t now)
{
    ledger_advance(&store->ledger, now);
    store->ledger.bytes[object_class(obj)][state] += obj->size;
}

/* gone: the version is deleted for good, so a class's minimum duration not yet served is
 * charged as early deletion. */
static void ledger_leave(struct emu_store *store, const struct emu_object *obj,
                         enum emu_object_state state, int64_t now, bool gone)
{
    ledger_advance(&store->ledger, now);
    enum emu_storage_class cls = object_class(obj);
    uint64_t *bytes = &store->ledger.bytes[cls][state];
    *bytes = *bytes >= obj->size ? *bytes - obj->size : 0;
    /* A soft-deleted version purged late (its hard delete passed while the ledger ran on)
     * was integrated past its end: take the excess back. */
    if (now < store->ledger.last_us) {
        double *integral = &store->ledger.byte_us[cls][state];
        *integral -= (double)obj->size * (double)(store->ledger.last_us - now);
        if (*integral < 0)
            *integral = 0;
    }
    int64_t minimum_us = emu_storage_class_minimum_s(cls) * G_USEC_PER_SEC;
    int64_t lived_us = now - obj->time_created_us;
    if (gone && lived_us < minimum_us)
        store->ledger.early_byte_us[cls] += (double)obj->size * (double)(minimum_us - lived_us);
}

static void ledger_reset(struct emu_store *store)
{
    memset(&store->ledger, 0, sizeof(store->ledger));
    store->ledger.started_us = store->ledger.last_us = emu_store_now_us(store);
}

void emu_archived_info_clear(struct emu_archived_info *info)
{
    if (info == NULL)
        return;
    emu_object_unref(info->obj);
    info->obj = NULL;
}

static void archived_free(gpointer data)
{
    emu_archived_info_clear(data);
    g_free(data);
}

static void archive(struct emu_store *store, struct emu_bucket *bucket, struct emu_object *obj,
                    enum emu_object_state state, int64_t now)
{
    struct emu_archived_info *info = g_new0(struct emu_archived_info, 1);
    info->obj = obj; /* takes the caller's reference */
    info->state = state;
    info->since_us = now;
    if (state == EMU_STATE_SOFT_DELETED)
        info->hard_delete_us = now + bucket->config.soft_delete_seconds * G_USEC_PER_SEC;
    g_ptr_array_add(bucket->archived, info);
    ledger_enter(store, obj, state, now);
}

/* A version leaves its state (live or noncurrent, deleted or overwritten): versioning keeps it
 * noncurrent, soft delete keeps it soft-deleted, else it is gone. Takes obj's reference. */
static void retire(struct emu_store *store, struct emu_bucket *bucket, struct emu_object *obj,
                   enum emu_object_state from, int64_t now)
{
    if (from == EMU_STATE_LIVE && bucket->config.versioning) {
        ledger_leave(store, obj, from, now, false);
        archive(store, bucket, obj, EMU_STATE_NONCURRENT, now);
    } else if (bucket->config.soft_delete_seconds > 0) {
        ledger_leave(store, obj, from, now, false);
        archive(store, bucket, obj, EMU_STATE_SOFT_DELETED, now);
    } else {
        ledger_leave(store, obj, from, now, true);
        emu_object_unref(obj);
    }
}

/* Soft-deleted versions whose time is up go for good. Caller holds the write lock. */
static void purge_expired(struct emu_store *store, struct emu_bucket *bucket, int64_t now)
{
    for (guint i = 0; i < bucket->archived->len;) {
        struct emu_archived_info *info = g_ptr_array_index(bucket->archived, i);
        if (info->state == EMU_STATE_SOFT_DELETED && info->hard_delete_us <= now) {
            ledger_leave(store, info->obj, info->state, info->hard_delete_us, true);
            g_ptr_array_remove_index(bucket->archived, i);
        } else {
            i++;
        }
    }
}

static struct emu_archived_info *find_archived(struct emu_bucket *bucket, const char *name,
                                               int64_t generation, enum emu_object_state state,
                                               guint *index)
{
    for (guint i = 0; i < bucket->archived->len; i++) {
        struct emu_archived_info *info = g_ptr_array_index(bucket->archived, i);
        if (info->state == state && info->obj->generation == generation &&
            strcmp(info->obj->name, name) == 0) {
            if (index != NULL)
                *index = i;
            return info;
        }
    }
    return NULL;
}

/* A live object under a hold, or younger than the bucket's retention period, cannot be deleted
 * or overwritten. */
static int check_protected(struct emu_store *store, const struct emu_bucket *bucket,
                           const struct emu_object *obj)
{
    if (obj == NULL)
        return 0;
    if (obj->temporary_hold || obj->event_based_hold)
        return -EPERM;
    if (bucket != NULL && bucket->config.retention_seconds > 0 &&
        obj->time_created_us + bucket->config.retention_seconds * G_USEC_PER_SEC >
            emu_store_now_us(store))
        return -EPERM;
    return 0;
}

/* --- preconditions --- */

int emu_preconditions_check(const struct emu_preconditions *pre, const struct emu_object *live,
                            bool for_read)
{
    if (pre == NULL)
        return 0;
    /* The *_match conditions (412) are decided before the read-side *_not_match ones (304). */
    if (pre->has_if_generation_match) {
        if (pre->if_generation_match == 0
                ? live != NULL
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
    g_tree_unref(bucket->folders);
    g_ptr_array_unref(bucket->archived);
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
    g_mutex_init(&store->ops_lock);
    store->operation_gets = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    store->buckets = new_bucket_tree();
    ledger_reset(store);
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
    g_hash_table_destroy(store->operation_gets);
    g_mutex_clear(&store->ops_lock);
    g_free(store);
}

void emu_store_reset(struct emu_store *store)
{
    g_rw_lock_writer_lock(&store->lock);
    GTree *old = store->buckets;
    store->buckets = new_bucket_tree();
    ledger_reset(store);
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

static void bucket_info_fill(struct emu_bucket_info *info, const struct emu_bucket *bucket);

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

void emu_store_bucket_config_defaults(struct emu_store *store, struct emu_bucket_config *out)
{
    memset(out, 0, sizeof(*out));
    g_strlcpy(out->storage_class, "STANDARD", sizeof(out->storage_class));
    g_strlcpy(out->location, "US", sizeof(out->location));
    g_strlcpy(out->location_type, "multi-region", sizeof(out->location_type));
    out->soft_delete_seconds = store->default_soft_delete_s;
}

int64_t emu_store_bucket_config_defaults_soft_delete(struct emu_store *store)
{
    return store->default_soft_delete_s;
}

void emu_store_set_default_soft_delete(struct emu_store *store, int64_t seconds)
{
    g_rw_lock_writer_lock(&store->lock);
    store->default_soft_delete_s = seconds > 0 ? seconds : 0;
    g_rw_lock_writer_unlock(&store->lock);
}

static struct emu_bucket *bucket_new(struct emu_store *store, const char *name,
                                     int64_t time_created_us, int64_t metageneration)
{
    struct emu_bucket *bucket = g_new0(struct emu_bucket, 1);
    bucket->name = g_strdup(name);
    bucket->time_created_us = time_created_us;
    bucket->updated_us = time_created_us;
    bucket->metageneration = metageneration;
    emu_store_bucket_config_defaults(store, &bucket->config);
    bucket->config.soft_delete_effective_us = time_created_us;
    bucket->archived = g_ptr_array_new_with_free_func(archived_free);
    bucket->objects = g_tree_new_full(compare_names, NULL, NULL, (GDestroyNotify)emu_object_unref);
    bucket->folders =
        g_tree_new_full(compare_names, NULL, NULL, (GDestroyNotify)emu_folder_info_free);
    return bucket;
}

struct emu_bucket *emu_store_find_bucket(struct emu_store *store, const char *name, bool create)
{
    struct emu_bucket *bucket = g_tree_lookup(store->buckets, name);
    if (bucket != NULL || !create)
        return bucket;
    bucket = bucket_new(store, name, emu_store_now_us(store), 1);
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
                      bucket_new(store, name, time_created_us, metageneration));
    g_rw_lock_writer_unlock(&store->lock);
}

void emu_store_insert_loaded(struct emu_store *store, struct emu_object *obj)
{
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *bucket = g_tree_lookup(store->buckets, obj->bucket);
    if (bucket == NULL) {
        bucket = bucket_new(store, obj->bucket, obj->time_created_us, 1);
        g_tree_insert(store->buckets, g_strdup(obj->bucket), bucket);
    }
    if (obj->generation > store->last_generation)
        store->last_generation = obj->generation;
    struct emu_object *old = g_tree_lookup(bucket->objects, obj->name);
    int64_t now = emu_store_now_us(store);
    if (old != NULL)
        ledger_leave(store, old, EMU_STATE_LIVE, now, false);
    ledger_enter(store, obj, EMU_STATE_LIVE, now);
    g_tree_replace(bucket->objects, obj->name, obj);
    g_rw_lock_writer_unlock(&store->lock);
}

int emu_store_bucket_insert(struct emu_store *store, const char *name)
{
    return emu_store_bucket_insert_config(store, name, NULL);
}

int emu_store_bucket_insert_config(struct emu_store *store, const char *name,
                                   const struct emu_bucket_config *config)
{
    if (!bucket_name_valid(name))
        return -EINVAL;
    g_rw_lock_writer_lock(&store->lock);
    int rc = 0;
    if (g_tree_lookup(store->buckets, name) != NULL) {
        rc = -EEXIST;
    } else {
        struct emu_bucket *bucket = emu_store_find_bucket(store, name, true);
        if (config != NULL) {
            bucket->config = *config;
            bucket->config.soft_delete_effective_us = bucket->time_created_us;
            if (config->retention_seconds > 0)
                bucket->config.retention_effective_us = bucket->time_created_us;
            if (config->autoclass)
                bucket->config.autoclass_toggle_us = bucket->time_created_us;
        }
    }
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_bucket_configure(struct emu_store *store, const char *name,
                               const struct emu_bucket_config *config,
                               bool has_if_metageneration_match, int64_t if_metageneration_match,
                               struct emu_bucket_info *out)
{
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *bucket = name ? g_tree_lookup(store->buckets, name) : NULL;
    int rc = 0;
    if (bucket == NULL)
        rc = -ENOENT;
    else if (has_if_metageneration_match && bucket->metageneration != if_metageneration_match)
        rc = -EPROTO;
    else if (config->hierarchical_namespace != bucket->config.hierarchical_namespace)
        rc = -EINVAL; /* fixed when the bucket is created */
    if (rc == 0) {
        int64_t now = emu_store_now_us(store);
        struct emu_bucket_config next = *config;
        const struct emu_bucket_config *old = &bucket->config;
        next.soft_delete_effective_us = next.soft_delete_seconds != old->soft_delete_seconds
                                            ? now
                                            : old->soft_delete_effective_us;
        next.retention_effective_us = next.retention_seconds == 0 ? 0
                                      : next.retention_seconds != old->retention_seconds
                                          ? now
                                          : old->retention_effective_us;
        next.autoclass_toggle_us =
            next.autoclass != old->autoclass ? now : old->autoclass_toggle_us;
        bucket->config = next;
        bucket->metageneration++;
        bucket->updated_us = now;
        if (out != NULL)
            bucket_info_fill(out, bucket);
    }
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
    if (rc == 0) {
        /* Soft-deleted and noncurrent versions go with the bucket. */
        int64_t now = emu_store_now_us(store);
        for (guint i = 0; i < bucket->archived->len; i++) {
            struct emu_archived_info *info = g_ptr_array_index(bucket->archived, i);
            ledger_leave(store, info->obj, info->state, now, true);
        }
        g_tree_remove(store->buckets, name);
    }
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

static void bucket_info_fill(struct emu_bucket_info *info, const struct emu_bucket *bucket)
{
    info->name = g_strdup(bucket->name);
    info->time_created_us = bucket->time_created_us;
    info->metageneration = bucket->metageneration;
    info->updated_us = bucket->updated_us;
    info->config = bucket->config;
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
    if (b != NULL && generation != 0 && (obj == NULL || obj->generation != generation)) {
        struct emu_archived_info *info =
            find_archived(b, name, generation, EMU_STATE_NONCURRENT, NULL);
        obj = info != NULL ? info->obj : NULL;
    }
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
void emu_folder_info_free(struct emu_folder_info *info)
{
    if (info == NULL)
        return;
    g_free(info->name);
    g_free(info);
}

static struct emu_folder_info *folder_copy(const struct emu_folder_info *info)
{
    struct emu_folder_info *copy = g_memdup2(info, sizeof(*info));
    copy->name = g_strdup(info->name);
    return copy;
}

static void folder_add(struct emu_bucket *bucket, const char *name, size_t len, int64_t now)
{
    struct emu_folder_info *folder = g_new0(struct emu_folder_info, 1);
    folder->name = g_strndup(name, len);
    folder->metageneration = 1;
    folder->created_us = folder->updated_us = now;
    g_tree_insert(bucket->folders, folder->name, folder);
}

/* Hierarchical namespace: every '/'-terminated ancestor of name (itself included when it ends
 * with '/') becomes a folder. Under the write lock. */
static void create_parent_folders(struct emu_bucket *bucket, const char *name, int64_t now)
{
    for (const char *slash = strchr(name, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        size_t len = (size_t)(slash - name) + 1;
        char *folder = g_strndup(name, len);
        bool known = g_tree_lookup(bucket->folders, folder) != NULL;
        g_free(folder);
        if (!known)
            folder_add(bucket, name, len, now);
    }
}

static int publish(struct emu_store *store, struct emu_bucket *bucket, struct emu_object *obj,
                   bool new_generation, struct emu_object **out);

/* Moves one live object to dest_name in the same bucket: the caller checked protections and
 * preconditions and holds the write lock. *removed gets the source's reference, to drop
 * outside the lock. */
static int move_locked(struct emu_store *store, struct emu_bucket *bucket, struct emu_object *src,
                       const char *dest_name, struct emu_object **out, struct emu_object **removed)
{
    struct emu_object_strings strings;
    strings_from_object(&strings, src);
    strings.name = dest_name;
    struct emu_object *obj =
        emu_object_alloc(&strings, g_hash_table_ref(src->metadata), emu_content_ref(src->content));
    g_hash_table_unref(src->metadata);
    copy_content_identity(obj, src);
    obj->custom_time_us = src->custom_time_us;
    int rc = publish(store, bucket, obj, true, out);
    if (rc < 0)
        return rc;
    if (emu_persist_remove_object(store->persist, bucket->name, src->name) < 0)
        rc = -EIO; /* the destination exists; the source's record may come back after restart */
    *removed = emu_object_ref(src);
    ledger_leave(store, src, EMU_STATE_LIVE, emu_store_now_us(store), false);
    g_tree_remove(bucket->objects, src->name);
    return rc;
}

int emu_store_move_object(struct emu_store *store, const char *bucket, const char *src_name,
                          const char *dest_name, const struct emu_preconditions *src_pre,
                          const struct emu_preconditions *dest_pre, struct emu_object **out)
{
    if (bucket == NULL || src_name == NULL)
        return -ENOENT;
    if (!emu_object_name_valid(dest_name))
        return -EINVAL;
    if (strcmp(src_name, dest_name) == 0)
        return -EEXIST;
    struct emu_object *removed = NULL;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    struct emu_object *src = b != NULL ? g_tree_lookup(b->objects, src_name) : NULL;
    int rc = src == NULL ? -ENOENT : emu_preconditions_check(src_pre, src, false);
    if (rc == 0)
        rc = check_protected(store, b, src);
    if (rc == 0) {
        struct emu_object *live = g_tree_lookup(b->objects, dest_name);
        rc = emu_preconditions_check(dest_pre, live, false);
        if (rc == 0)
            rc = check_protected(store, b, live);
    }
    if (rc == 0)
        rc = move_locked(store, b, src, dest_name, out, &removed);
    g_rw_lock_writer_unlock(&store->lock);
    emu_object_unref(removed);
    return rc;
}

static bool folder_name_valid(const char *name)
{
    size_t len = name != NULL ? strlen(name) : 0;
    return len >= 2 && len <= 1024 && name[len - 1] == '/' && name[0] != '/' &&
           strstr(name, "//") == NULL && g_utf8_validate(name, -1, NULL) &&
           emu_object_name_valid(name);
}

/* The bucket for a folder request, under the lock: -ENOENT or -EOPNOTSUPP (flat bucket). */
static int folder_bucket(struct emu_store *store, const char *bucket, struct emu_bucket **out)
{
    struct emu_bucket *b = bucket != NULL ? emu_store_find_bucket(store, bucket, false) : NULL;
    if (b == NULL)
        return -ENOENT;
    if (!b->config.hierarchical_namespace)
        return -EOPNOTSUPP;
    *out = b;
    return 0;
}

static char *parent_folder(const char *name)
{
    size_t len = strlen(name);
    for (size_t i = len - 1; i > 0; i--) {
        if (name[i - 1] == '/')
            return g_strndup(name, i);
    }
    return NULL; /* top level */
}

int emu_store_folder_insert(struct emu_store *store, const char *bucket, const char *name,
                            bool recursive, struct emu_folder_info **out)
{
    if (!folder_name_valid(name))
        return -EINVAL;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = NULL;
    int rc = folder_bucket(store, bucket, &b);
    if (rc == 0 && g_tree_lookup(b->folders, name) != NULL)
        rc = -EEXIST;
    if (rc == 0 && !recursive) {
        char *parent = parent_folder(name);
        if (parent != NULL && g_tree_lookup(b->folders, parent) == NULL)
            rc = -ENOENT;
        g_free(parent);
    }
    if (rc == 0) {
        create_parent_folders(b, name, emu_store_now_us(store));
        if (out != NULL)
            *out = folder_copy(g_tree_lookup(b->folders, name));
    }
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_folder_get(struct emu_store *store, const char *bucket, const char *name,
                         struct emu_folder_info **out)
{
    g_rw_lock_reader_lock(&store->lock);
    struct emu_bucket *b = NULL;
    int rc = folder_bucket(store, bucket, &b);
    const struct emu_folder_info *folder = NULL;
    if (rc == 0 && (folder = g_tree_lookup(b->folders, name)) == NULL)
        rc = -ENOENT;
    if (rc == 0)
        *out = folder_copy(folder);
    g_rw_lock_reader_unlock(&store->lock);
    return rc;
}

struct folder_walk {
    const char *prefix;
    size_t prefix_len;
    bool direct_children_only;
    GPtrArray *out; /* of struct emu_folder_info * or struct emu_object * (borrowed) */
    bool copy;
};

/* g_tree_foreach from the smallest key >= prefix would be ideal; GLib < 2.68 has no
 * lower-bound iterator, so the walk starts at the beginning and stops past the prefix. */
static gboolean folder_walk_step(gpointer key, gpointer value, gpointer data)
{
    struct folder_walk *walk = data;
    const char *name = key;
    int cmp = strncmp(name, walk->prefix, walk->prefix_len);
    if (cmp < 0)
        return FALSE;
    if (cmp > 0)
        return TRUE;
    if (walk->direct_children_only) {
        const char *rest = name + walk->prefix_len;
        const char *slash = strchr(rest, '/');
        if (slash == NULL || slash[1] != '\0')
            return FALSE;
    }
    g_ptr_array_add(walk->out, walk->copy ? folder_copy(value) : value);
    return FALSE;
}

int emu_store_folder_list(struct emu_store *store, const char *bucket, const char *prefix,
                          bool direct_children_only, GPtrArray **out)
{
    struct folder_walk walk = {.prefix = prefix != NULL ? prefix : "",
                               .direct_children_only = direct_children_only,
                               .copy = true};
    walk.prefix_len = strlen(walk.prefix);
    g_rw_lock_reader_lock(&store->lock);
    struct emu_bucket *b = NULL;
    int rc = folder_bucket(store, bucket, &b);
    if (rc == 0) {
        walk.out = g_ptr_array_new_with_free_func((GDestroyNotify)emu_folder_info_free);
        g_tree_foreach(b->folders, folder_walk_step, &walk);
        *out = walk.out;
    }
    g_rw_lock_reader_unlock(&store->lock);
    return rc;
}

/* Borrowed pointers to the objects / folders whose names start with prefix. */
static GPtrArray *names_below(GTree *tree, const char *prefix)
{
    struct folder_walk walk = {
        .prefix = prefix, .prefix_len = strlen(prefix), .out = g_ptr_array_new()};
    g_tree_foreach(tree, folder_walk_step, &walk);
    return walk.out;
}

int emu_store_folder_delete(struct emu_store *store, const char *bucket, const char *name)
{
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = NULL;
    int rc = folder_bucket(store, bucket, &b);
    if (rc == 0 && (name == NULL || g_tree_lookup(b->folders, name) == NULL))
        rc = -ENOENT;
    if (rc == 0) {
        GPtrArray *objects = names_below(b->objects, name);
        GPtrArray *folders = names_below(b->folders, name);
        if (objects->len > 0 || folders->len > 1) /* the folder itself is one */
            rc = -ENOTEMPTY;
        g_ptr_array_unref(objects);
        g_ptr_array_unref(folders);
    }
    if (rc == 0)
        g_tree_remove(b->folders, name);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_folder_rename(struct emu_store *store, const char *bucket, const char *src,
                            const char *dest, struct emu_folder_info **out)
{
    if (!folder_name_valid(dest) || src == NULL)
        return -EINVAL;
    if (g_str_has_prefix(dest, src))
        return -EINVAL;
    GPtrArray *removed = g_ptr_array_new_with_free_func((GDestroyNotify)emu_object_unref);
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = NULL;
    int rc = folder_bucket(store, bucket, &b);
    if (rc == 0 && g_tree_lookup(b->folders, src) == NULL)
        rc = -ENOENT;
    if (rc == 0 && g_tree_lookup(b->folders, dest) != NULL)
        rc = -EEXIST;
    if (rc == 0) {
        char *parent = parent_folder(dest);
        if (parent != NULL && g_tree_lookup(b->folders, parent) == NULL)
            rc = -ENOENT;
        g_free(parent);
    }
    GPtrArray *objects = rc == 0 ? names_below(b->objects, src) : g_ptr_array_new();
    GPtrArray *folders = rc == 0 ? names_below(b->folders, src) : g_ptr_array_new();
    size_t src_len = strlen(src);
    /* Everything is checked before anything changes, so the rename is all or nothing. */
    for (guint i = 0; rc == 0 && i < objects->len; i++) {
        const struct emu_object *obj = g_ptr_array_index(objects, i);
        char *target = g_strconcat(dest, obj->name + src_len, NULL);
        rc = check_protected(store, b, obj);
        if (rc == 0 && !emu_object_name_valid(target))
            rc = -EINVAL;
        if (rc == 0 && g_tree_lookup(b->objects, target) != NULL)
            rc = -EEXIST;
        g_free(target);
    }
    int64_t now = emu_store_now_us(store);
    for (guint i = 0; rc == 0 && i < objects->len; i++) {
        struct emu_object *obj = g_ptr_array_index(objects, i);
        char *target = g_strconcat(dest, obj->name + src_len, NULL);
        struct emu_object *gone = NULL;
        int moved = move_locked(store, b, obj, target, NULL, &gone);
        if (gone != NULL)
            g_ptr_array_add(removed, gone);
        g_free(target);
        if (moved == -EIO)
            rc = -EIO; /* persisted state may lag; the in-memory rename goes on */
    }
    if (rc == 0 || rc == -EIO) {
        for (guint i = 0; i < folders->len; i++) {
            struct emu_folder_info *folder = g_ptr_array_index(folders, i);
            char *target = g_strconcat(dest, folder->name + src_len, NULL);
            if (g_tree_lookup(b->folders, target) == NULL)
                folder_add(b, target, strlen(target), now);
            g_free(target);
        }
        for (guint i = 0; i < folders->len; i++) {
            struct emu_folder_info *folder = g_ptr_array_index(folders, i);
            g_tree_remove(b->folders, folder->name); /* frees folder */
        }
        struct emu_folder_info *renamed = g_tree_lookup(b->folders, dest);
        if (renamed != NULL && out != NULL)
            *out = folder_copy(renamed);
    }
    g_ptr_array_unref(objects);
    g_ptr_array_unref(folders);
    g_rw_lock_writer_unlock(&store->lock);
    g_ptr_array_unref(removed); /* the last references may free contents: outside the lock */
    return rc;
}

static int publish(struct emu_store *store, struct emu_bucket *bucket, struct emu_object *obj,
                   bool new_generation, struct emu_object **out)
{
    int64_t now = emu_store_now_us(store);
    if (new_generation) {
        obj->generation = next_generation(store);
        obj->time_created_us = now;
        if (bucket->config.default_event_based_hold)
            obj->event_based_hold = true;
    }
    obj->updated_us = now;
    if (emu_persist_save_object(store->persist, obj) < 0) {
        emu_object_unref(obj);
        return -EIO;
    }
    if (out != NULL)
        *out = emu_object_ref(obj);
    if (bucket->config.hierarchical_namespace)
        create_parent_folders(bucket, obj->name, now);
    struct emu_object *old = emu_object_ref(g_tree_lookup(bucket->objects, obj->name));
    g_tree_replace(bucket->objects, obj->name, obj);
    if (old != NULL && new_generation) {
        retire(store, bucket, old, EMU_STATE_LIVE, now);
    } else if (old != NULL) { /* a metadata update: the same version */
        ledger_leave(store, old, EMU_STATE_LIVE, now, false);
        emu_object_unref(old);
    }
    ledger_enter(store, obj, EMU_STATE_LIVE, now);
    return 0;
}

/* New objects without a storage class get the bucket's (the string is static). */
static void default_class(struct emu_object *obj, const struct emu_object_attrs *attrs,
                          const struct emu_bucket *bucket)
{
    if (attrs != NULL && attrs->storage_class != NULL && attrs->storage_class[0] != '\0')
        return;
    int cls = emu_storage_class_parse(bucket->config.storage_class);
    obj->storage_class = (char *)emu_storage_class_name(cls < 0 ? 0 : cls);
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
        rc = check_protected(store, b, live);
    if (rc == 0) {
        default_class(obj, attrs, b);
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
    guint noncurrent_index = 0;
    struct emu_archived_info *noncurrent = NULL;
    if (b != NULL && generation != 0 && (obj == NULL || obj->generation != generation))
        noncurrent = find_archived(b, name, generation, EMU_STATE_NONCURRENT, &noncurrent_index);
    int rc = 0;
    if (noncurrent != NULL) {
        /* Deleting a noncurrent version: soft delete may still keep it. */
        rc = emu_preconditions_check(pre, noncurrent->obj, false);
        if (rc == 0)
            rc = check_protected(store, b, noncurrent->obj);
        if (rc == 0) {
            struct emu_object *version = emu_object_ref(noncurrent->obj);
            g_ptr_array_remove_index(b->archived, noncurrent_index);
            retire(store, b, version, EMU_STATE_NONCURRENT, emu_store_now_us(store));
        }
        g_rw_lock_writer_unlock(&store->lock);
        return rc;
    }
    if (obj == NULL || (generation != 0 && obj->generation != generation))
        rc = -ENOENT;
    else
        rc = emu_preconditions_check(pre, obj, false);
    if (rc == 0)
        rc = check_protected(store, b, obj);
    if (rc == 0)
        rc = emu_persist_remove_object(store->persist, bucket, name) < 0 ? -EIO : 0;
    if (rc == 0) {
        struct emu_object *version = emu_object_ref(obj);
        g_tree_remove(b->objects, name);
        /* Kept (noncurrent, soft-deleted) or released; a released object's last reference is
         * dropped outside the lock below (it may free content). */
        emu_object_ref(version);
        removed = version;
        retire(store, b, version, EMU_STATE_LIVE, emu_store_now_us(store));
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
                      const struct emu_object_attrs *attrs,
                      const struct emu_preconditions *dest_pre, struct emu_object **out)
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
        rc = check_protected(store, b, g_tree_lookup(b->objects, dest_name));
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
    default_class(obj, attrs, b);
    rc = publish(store, b, obj, true, out);
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

int emu_store_copy_object(struct emu_store *store, const char *src_bucket, const char *src_name,
                          int64_t src_generation, const char *dest_bucket, const char *dest_name,
                          const struct emu_object_attrs *attrs,
                          const struct emu_preconditions *src_pre,
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
            rc = check_protected(store, db, live);
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
        int64_t now = emu_store_now_us(store);
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
            struct emu_object *old = g_tree_lookup(b->objects, batch[i]->name);
            if (old != NULL)
                ledger_leave(store, old, EMU_STATE_LIVE, now, false);
            ledger_enter(store, batch[i], EMU_STATE_LIVE, now);
            g_tree_replace(b->objects, batch[i]->name, batch[i]);
        }
        g_rw_lock_writer_unlock(&store->lock);
        done += n;
    }
    return 0;
}

/* --- noncurrent and soft-deleted versions, restore, the ledger --- */

static gint compare_archived(gconstpointer a, gconstpointer b)
{
    const struct emu_archived_info *x = *(struct emu_archived_info *const *)a;
    const struct emu_archived_info *y = *(struct emu_archived_info *const *)b;
    int by_name = strcmp(x->obj->name, y->obj->name);
    if (by_name != 0)
        return by_name;
    return x->obj->generation < y->obj->generation ? -1 : x->obj->generation > y->obj->generation;
}

static struct emu_archived_info *archived_copy(const struct emu_archived_info *info)
{
    struct emu_archived_info *copy = g_new(struct emu_archived_info, 1);
    *copy = *info;
    copy->obj = emu_object_ref(info->obj);
    return copy;
}

int emu_store_list_archived(struct emu_store *store, const char *bucket, const char *prefix,
                            enum emu_object_state state, GPtrArray **out)
{
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = bucket ? emu_store_find_bucket(store, bucket, false) : NULL;
    if (b == NULL) {
        g_rw_lock_writer_unlock(&store->lock);
        return -ENOENT;
    }
    purge_expired(store, b, emu_store_now_us(store));
    GPtrArray *list = g_ptr_array_new_with_free_func(archived_free);
    for (guint i = 0; i < b->archived->len; i++) {
        const struct emu_archived_info *info = g_ptr_array_index(b->archived, i);
        if (info->state == state && (prefix == NULL || g_str_has_prefix(info->obj->name, prefix)))
            g_ptr_array_add(list, archived_copy(info));
    }
    g_rw_lock_writer_unlock(&store->lock);
    g_ptr_array_sort(list, compare_archived);
    *out = list;
    return 0;
}

int emu_store_get_soft_deleted(struct emu_store *store, const char *bucket, const char *name,
                               int64_t generation, struct emu_archived_info *out)
{
    if (bucket == NULL || name == NULL)
        return -ENOENT;
    g_rw_lock_reader_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    struct emu_archived_info *info =
        b ? find_archived(b, name, generation, EMU_STATE_SOFT_DELETED, NULL) : NULL;
    if (info != NULL && info->hard_delete_us <= emu_store_now_us(store))
        info = NULL; /* expired, not yet purged */
    if (info != NULL) {
        *out = *info;
        out->obj = emu_object_ref(info->obj);
    }
    g_rw_lock_reader_unlock(&store->lock);
    return info != NULL ? 0 : -ENOENT;
}

int emu_store_restore(struct emu_store *store, const char *bucket, const char *name,
                      int64_t generation, const struct emu_preconditions *pre,
                      struct emu_object **out)
{
    if (bucket == NULL || name == NULL)
        return -ENOENT;
    g_rw_lock_writer_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    int64_t now = emu_store_now_us(store);
    if (b != NULL)
        purge_expired(store, b, now);
    guint index = 0;
    struct emu_archived_info *info =
        b ? find_archived(b, name, generation, EMU_STATE_SOFT_DELETED, &index) : NULL;
    int rc = info == NULL ? -ENOENT : 0;
    struct emu_object *live = b ? g_tree_lookup(b->objects, name) : NULL;
    if (rc == 0)
        rc = emu_preconditions_check(pre, live, false);
    if (rc == 0)
        rc = check_protected(store, b, live);
    if (rc == 0) {
        struct emu_object *old = info->obj;
        struct emu_object_strings strings;
        strings_from_object(&strings, old);
        struct emu_object *obj =
            emu_object_alloc(&strings, old->metadata, emu_content_ref(old->content));
        copy_content_identity(obj, old);
        obj->size = old->size;
        obj->custom_time_us = old->custom_time_us;
        /* The restored copy keeps its class; the soft-deleted version goes (it is live again). */
        ledger_leave(store, old, EMU_STATE_SOFT_DELETED, now, false);
        g_ptr_array_remove_index(b->archived, index);
        rc = publish(store, b, obj, true, out);
    }
    g_rw_lock_writer_unlock(&store->lock);
    return rc;
}

static gboolean purge_bucket(gpointer key, gpointer value, gpointer data)
{
    struct emu_store *store = data;
    purge_expired(store, value, emu_store_now_us(store));
    return FALSE;
}

void emu_store_ledger(struct emu_store *store, struct emu_ledger_report *out)
{
    g_rw_lock_writer_lock(&store->lock);
    g_tree_foreach(store->buckets, purge_bucket, store);
    int64_t now = emu_store_now_us(store);
    ledger_advance(&store->ledger, now);
    memset(out, 0, sizeof(*out));
    for (int c = 0; c < EMU_STORAGE_CLASS_COUNT; c++) {
        for (int st = 0; st < EMU_STATE_COUNT; st++) {
            out->byte_seconds[c][st] = store->ledger.byte_us[c][st] / G_USEC_PER_SEC;
            out->bytes_now[c][st] = store->ledger.bytes[c][st];
        }
        out->early_byte_seconds[c] = store->ledger.early_byte_us[c] / G_USEC_PER_SEC;
    }
    out->elapsed_seconds = (double)(now - store->ledger.started_us) / G_USEC_PER_SEC;
    g_rw_lock_writer_unlock(&store->lock);
}
