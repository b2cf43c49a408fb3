/* Stat, type and negative caches keyed by path (see include/fluxfs/metacache.h). */
#include "fluxfs/metacache.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

/* One allocation per entry: the path (the table's key) lives at the end of its entry, so the
 * table frees only values (and a replaced entry takes its old key with it). */
struct meta_entry {
    enum meta_kind kind;     /* META_UNKNOWN: a forgotten path, kept for its mark */
    struct meta_attrs attrs; /* files and symlinks only */
    gint64 expires_us;       /* monotonic */
    uint64_t forgotten;      /* epoch of the last forget of this path (0 = none); kept by the
                              * entries that replace it */
    char path[];
};

/* Listings are fed in slices so that the lock is never held for a whole huge directory. */
#define PUT_BATCH_SLICE 1024

struct metacache {
    GMutex lock;
    GHashTable *entries; /* char *path -> struct meta_entry *; lock */
    uint64_t epoch;      /* lock: bumped by every forget */
    uint64_t floor;      /* lock: forgets up to here were dropped with their entries */
    gint64 stat_ttl_us, type_ttl_us, negative_ttl_us; /* immutable */
    size_t max_entries;                               /* immutable */
};

void meta_attrs_from_object(struct meta_attrs *attrs, const struct gcs_object *obj)
{
    meta_attrs_from_object_at(attrs, obj, g_get_monotonic_time());
}

void meta_attrs_from_object_at(struct meta_attrs *attrs, const struct gcs_object *obj,
                               int64_t fetched_us)
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
    attrs->fetched_us = fetched_us;
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

struct eviction {
    struct metacache *cache;
    gint64 now;
};

static gboolean is_expired(gpointer key, gpointer value, gpointer user)
{
    const struct meta_entry *entry = value;
    struct eviction *eviction = user;
    if (entry->expires_us > eviction->now)
        return FALSE;
    /* Its mark goes with it: fetches that started before it are refused by the floor. */
    eviction->cache->floor = MAX(eviction->cache->floor, entry->forgotten);
    return TRUE;
}

static void make_room_locked(struct metacache *cache, gint64 now)
{
    if (g_hash_table_size(cache->entries) < cache->max_entries)
        return;
    struct eviction eviction = {cache, now};
    g_hash_table_foreach_remove(cache->entries, is_expired, &eviction);
    if (g_hash_table_size(cache->entries) >= cache->max_entries) {
        g_hash_table_remove_all(cache->entries);
        cache->floor = cache->epoch;
    }
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

/* Whether what a fetch that started at epoch since found may be stored over known (the
 * entry of its path, or NULL): not when the path was forgotten after it started. */
static bool fetch_current_locked(const struct metacache *cache, const struct meta_entry *known,
                                 uint64_t since)
{
    return since >= cache->floor && !(known && known->forgotten > since);
}

/* Stores entry (the table owns it then), or returns false (the caller still does): not when
 * a fetch that started at epoch since is older than a forget of the path, nor a file or
 * symlink over a fresh directory. */
static bool put_locked(struct metacache *cache, struct meta_entry *entry, gint64 now,
                       uint64_t since)
{
    make_room_locked(cache, now);
    const struct meta_entry *known = g_hash_table_lookup(cache->entries, entry->path);
    bool dir_wins = entry->kind != META_DIR && entry->kind != META_ABSENT && known &&
                    known->kind == META_DIR && known->expires_us > now;
    if (dir_wins || !fetch_current_locked(cache, known, since))
        return false;
    if (known)
        entry->forgotten = known->forgotten;
    g_hash_table_replace(cache->entries, entry->path, entry);
    return true;
}

static bool put_one(struct metacache *cache, const char *path, enum meta_kind kind,
                    const struct meta_attrs *attrs, uint64_t since)
{
    gint64 ttl_us = kind == META_DIR      ? cache->type_ttl_us
                    : kind == META_ABSENT ? cache->negative_ttl_us
                                          : cache->stat_ttl_us;
    if (ttl_us == 0)
        return false;
    gint64 now = g_get_monotonic_time();
    struct meta_entry *entry = entry_new(path, strlen(path), kind);
    if (attrs && kind != META_DIR && kind != META_ABSENT)
        meta_attrs_copy(&entry->attrs, attrs);
    entry->expires_us = now + ttl_us;
    g_mutex_lock(&cache->lock);
    bool stored = put_locked(cache, entry, now, since);
    g_mutex_unlock(&cache->lock);
    if (!stored)
        meta_entry_free(entry);
    return stored;
}

void metacache_put_file(struct metacache *cache, const char *path, enum meta_kind kind,
                        const struct meta_attrs *attrs)
{
    put_one(cache, path, kind, attrs, METACACHE_CURRENT);
}

void metacache_put_dir(struct metacache *cache, const char *path)
{
    put_one(cache, path, META_DIR, NULL, METACACHE_CURRENT);
}

uint64_t metacache_epoch(struct metacache *cache)
{
    g_mutex_lock(&cache->lock);
    uint64_t epoch = cache->epoch;
    g_mutex_unlock(&cache->lock);
    return epoch;
}

bool metacache_put_fetched(struct metacache *cache, const char *path, enum meta_kind kind,
                           const struct meta_attrs *attrs, uint64_t since)
{
    return put_one(cache, path, kind, attrs, since);
}

void metacache_put_children(struct metacache *cache, const char *dir_path, size_t count,
                            metacache_child_fn child, const void *user, uint64_t since)
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
        /* The directory forgotten since the listing started (removed, renamed): none of it. */
        const struct meta_entry *dir = g_hash_table_lookup(cache->entries, dir_path);
        bool dir_current = fetch_current_locked(cache, dir, since);
        for (size_t i = 0; dir_current && i < kept; i++) {
            if (put_locked(cache, slice[i], now, since))
                slice[i] = NULL; /* else freed below, outside the lock */
        }
        g_mutex_unlock(&cache->lock);
        for (size_t i = 0; i < kept; i++)
            meta_entry_free(slice[i]);
    }
    g_string_free(path, TRUE);
}

void metacache_put_absent(struct metacache *cache, const char *path)
{
    put_one(cache, path, META_ABSENT, NULL, METACACHE_CURRENT);
}

void metacache_forget(struct metacache *cache, const char *path)
{
    gint64 now = g_get_monotonic_time();
    g_mutex_lock(&cache->lock);
    uint64_t epoch = ++cache->epoch;
    struct meta_entry *known = g_hash_table_lookup(cache->entries, path);
    if (known) {
        /* Kept as a mark: expired, so never an answer, and the first dropped for room. */
        meta_attrs_clear(&known->attrs);
        known->kind = META_UNKNOWN;
        known->expires_us = 0;
        known->forgotten = epoch;
    } else {
        make_room_locked(cache, now);
        struct meta_entry *mark = entry_new(path, strlen(path), META_UNKNOWN);
        mark->forgotten = epoch;
        g_hash_table_replace(cache->entries, mark->path, mark);
    }
    g_mutex_unlock(&cache->lock);
}

bool metacache_changed_since(struct metacache *cache, const char *path, uint64_t since)
{
    g_mutex_lock(&cache->lock);
    bool changed = !fetch_current_locked(cache, g_hash_table_lookup(cache->entries, path), since);
    g_mutex_unlock(&cache->lock);
    return changed;
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
