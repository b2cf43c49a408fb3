/* Stat, type and negative caches keyed by path (see include/fluxfs/metacache.h). */
#include "fluxfs/metacache.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

/* One allocation per entry: the path (the table's key) lives at the end of its entry, so the
 * table frees only values (and a replaced entry takes its old key with it). */
struct meta_entry {
    enum meta_kind kind;
    struct meta_attrs attrs;  /* files and symlinks only */
    gint64 expires_us;        /* monotonic */
    char path[];
};

/* Listings are fed in slices so that the lock is never held for a whole huge directory. */
#define PUT_BATCH_SLICE 1024

struct metacache {
    GMutex lock;
    GHashTable *entries;      /* char *path -> struct meta_entry *; lock */
    gint64 stat_ttl_us, type_ttl_us, negative_ttl_us;  /* immutable */
    size_t max_entries;                                 /* immutable */
};

void meta_attrs_from_object(struct meta_attrs *attrs, const struct gcs_object *obj)
{
    memset(attrs, 0, sizeof(*attrs));
    attrs->size = obj->size;
    attrs->generation = obj->generation;
    attrs->metageneration = obj->metageneration;
    attrs->mtime_ns = obj->mtime_ns ? obj->mtime_ns : obj->updated_ns;
    attrs->has_crc32c = obj->has_crc32c;
    attrs->crc32c = obj->crc32c;
    attrs->symlink_target = g_strdup(obj->symlink_target);
    attrs->symlink_in_content = obj->symlink_in_content;
    attrs->fetched_us = g_get_monotonic_time();
}

void meta_attrs_copy(struct meta_attrs *dst, const struct meta_attrs *src)
{
    *dst = *src;
    dst->symlink_target = g_strdup(src->symlink_target);
}

int64_t meta_attrs_fetched_us(const struct meta_attrs *attrs)
{
    return attrs->fetched_us > 0 ? attrs->fetched_us : g_get_monotonic_time();
}

void meta_attrs_clear(struct meta_attrs *attrs)
{
    if (!attrs)
        return;
    g_free(attrs->symlink_target);
    memset(attrs, 0, sizeof(*attrs));
}

enum meta_kind meta_kind_of_object(const struct gcs_object *obj)
{
    return obj->symlink_target || obj->symlink_in_content ? META_SYMLINK : META_FILE;
}

static void meta_entry_free(struct meta_entry *entry)
{
    if (!entry)
        return;
    meta_attrs_clear(&entry->attrs);
    g_free(entry);
}

static gint64 seconds_to_us(double seconds)
{
    return seconds <= 0 ? 0 : (gint64)(seconds * 1e6);
}

struct metacache *metacache_new(double stat_ttl_s, double type_ttl_s, double negative_ttl_s,
                                size_t max_entries)
{
    struct metacache *cache = g_new0(struct metacache, 1);
    g_mutex_init(&cache->lock);
    cache->entries =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)meta_entry_free);
    cache->stat_ttl_us = seconds_to_us(stat_ttl_s);
    cache->type_ttl_us = seconds_to_us(type_ttl_s);
    cache->negative_ttl_us = seconds_to_us(negative_ttl_s);
    cache->max_entries = max_entries ? max_entries : 1;
    return cache;
}

void metacache_free(struct metacache *cache)
{
    if (!cache)
        return;
    g_hash_table_destroy(cache->entries);
    g_mutex_clear(&cache->lock);
    g_free(cache);
}

static gboolean is_expired(gpointer key, gpointer value, gpointer now)
{
    const struct meta_entry *entry = value;
    return entry->expires_us <= *(gint64 *)now;
}

static void make_room_locked(struct metacache *cache, gint64 now)
{
    if (g_hash_table_size(cache->entries) < cache->max_entries)
        return;
    g_hash_table_foreach_remove(cache->entries, is_expired, &now);
    if (g_hash_table_size(cache->entries) >= cache->max_entries)
        g_hash_table_remove_all(cache->entries);
}

static struct meta_entry *entry_new(const char *path, size_t path_len, enum meta_kind kind)
{
    struct meta_entry *entry = g_malloc(sizeof(*entry) + path_len + 1);
    memset(entry, 0, sizeof(*entry));
    entry->kind = kind;
    memcpy(entry->path, path, path_len);
    entry->path[path_len] = '\0';
    return entry;
}

static void put_locked(struct metacache *cache, struct meta_entry *entry, gint64 now)
{
    make_room_locked(cache, now);
    g_hash_table_replace(cache->entries, entry->path, entry);
}

void metacache_put_file(struct metacache *cache, const char *path, enum meta_kind kind,
                        const struct meta_attrs *attrs)
{
    if (cache->stat_ttl_us == 0)
        return;
    gint64 now = g_get_monotonic_time();
    g_mutex_lock(&cache->lock);
    const struct meta_entry *known = g_hash_table_lookup(cache->entries, path);
    if (known && known->kind == META_DIR && known->expires_us > now) {
        g_mutex_unlock(&cache->lock); /* the directory wins */
        return;
    }
    struct meta_entry *entry = entry_new(path, strlen(path), kind);
    meta_attrs_copy(&entry->attrs, attrs);
    entry->expires_us = now + cache->stat_ttl_us;
    put_locked(cache, entry, now);
    g_mutex_unlock(&cache->lock);
}

static void put_simple(struct metacache *cache, const char *path, enum meta_kind kind,
                       gint64 ttl_us)
{
    if (ttl_us == 0)
        return;
    struct meta_entry *entry = entry_new(path, strlen(path), kind);
    gint64 now = g_get_monotonic_time();
    entry->expires_us = now + ttl_us;
    g_mutex_lock(&cache->lock);
    put_locked(cache, entry, now);
    g_mutex_unlock(&cache->lock);
}

void metacache_put_dir(struct metacache *cache, const char *path)
{
    put_simple(cache, path, META_DIR, cache->type_ttl_us);
}

void metacache_put_children(struct metacache *cache, const char *dir_path, size_t count,
                            metacache_child_fn child, const void *user)
{
    size_t dir_len = strlen(dir_path);
    GString *path = g_string_sized_new(dir_len + 64);
    gint64 now = g_get_monotonic_time();
    struct meta_entry *slice[PUT_BATCH_SLICE];
    for (size_t start = 0; start < count; start += PUT_BATCH_SLICE) {
        size_t n = MIN(count - start, (size_t)PUT_BATCH_SLICE);
        size_t kept = 0;
        /* Build the slice's entries outside the lock. */
        for (size_t i = 0; i < n; i++) {
            const char *name;
            enum meta_kind kind;
            const struct meta_attrs *attrs;
            child(user, start + i, &name, &kind, &attrs);
            gint64 ttl_us = kind == META_DIR ? cache->type_ttl_us : cache->stat_ttl_us;
            if (ttl_us == 0)
                continue;
            g_string_truncate(path, 0);
            if (dir_len > 0) {
                g_string_append_len(path, dir_path, (gssize)dir_len);
                g_string_append_c(path, '/');
            }
            g_string_append(path, name);
            struct meta_entry *entry = entry_new(path->str, path->len, kind);
            if (kind != META_DIR && attrs)
                meta_attrs_copy(&entry->attrs, attrs);
            entry->expires_us = now + ttl_us;
            slice[kept++] = entry;
        }
        g_mutex_lock(&cache->lock);
        for (size_t i = 0; i < kept; i++) {
            struct meta_entry *entry = slice[i];
            if (entry->kind != META_DIR) {
                const struct meta_entry *known = g_hash_table_lookup(cache->entries, entry->path);
                if (known && known->kind == META_DIR && known->expires_us > now)
                    continue; /* the directory wins; freed below, outside the lock */
            }
            put_locked(cache, entry, now);
            slice[i] = NULL;
        }
        g_mutex_unlock(&cache->lock);
        for (size_t i = 0; i < kept; i++)
            meta_entry_free(slice[i]);
    }
    g_string_free(path, TRUE);
}

void metacache_put_absent(struct metacache *cache, const char *path)
{
    put_simple(cache, path, META_ABSENT, cache->negative_ttl_us);
}

void metacache_forget(struct metacache *cache, const char *path)
{
    g_mutex_lock(&cache->lock);
    g_hash_table_remove(cache->entries, path);
    g_mutex_unlock(&cache->lock);
}

int metacache_get(struct metacache *cache, const char *path, enum meta_kind *kind,
                  struct meta_attrs *attrs)
{
    int rc = -ENOENT;
    g_mutex_lock(&cache->lock);
    const struct meta_entry *entry = g_hash_table_lookup(cache->entries, path);
    if (entry && entry->expires_us > g_get_monotonic_time()) {
        *kind = entry->kind;
        if (attrs)
            meta_attrs_copy(attrs, &entry->attrs);
        rc = 0;
    }
    g_mutex_unlock(&cache->lock);
    return rc;
}

size_t metacache_size(struct metacache *cache)
{
    g_mutex_lock(&cache->lock);
    size_t n = g_hash_table_size(cache->entries);
    g_mutex_unlock(&cache->lock);
    return n;
}
