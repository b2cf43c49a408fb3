/* Directory listing snapshots and their cache (see include/fluxfs/dircache.h). */
#include "fluxfs/dircache.h"

#include <errno.h>
#include <string.h>

struct dircache_slot {
    struct dir_listing *listing; /* NULL while the first fill is in flight */
    gint64 expires_us;
    bool filling;                /* a caller is running fill for this path */
    int fill_error;              /* error of the last fill, for its waiters */
    unsigned fill_round;         /* bumped when a fill finishes */
    unsigned waiters;            /* callers waiting on this slot; it is not freed meanwhile */
};

struct dircache {
    GMutex lock;
    GCond filled;
    GHashTable *slots;           /* char *path -> struct dircache_slot *; lock */
    gint64 ttl_us;               /* immutable */
    size_t max_dirs;             /* immutable */
};

static void dir_entry_clear(struct dir_entry *entry)
{
    g_free(entry->name);
    meta_attrs_clear(&entry->attrs);
}

struct dir_listing *dir_listing_new(struct dir_entry *entries, size_t count)
{
    struct dir_listing *listing = g_new0(struct dir_listing, 1);
    listing->refcount = 1;
    listing->entries = entries;
    listing->count = count;
    listing->taken_us = g_get_monotonic_time();
    return listing;
}

struct dir_listing *dir_listing_ref(struct dir_listing *listing)
{
    g_atomic_int_inc(&listing->refcount);
    return listing;
}

void dir_listing_unref(struct dir_listing *listing)
{
    if (!listing || !g_atomic_int_dec_and_test(&listing->refcount))
        return;
    for (size_t i = 0; i < listing->count; i++)
        dir_entry_clear(&listing->entries[i]);
    g_free(listing->entries);
    g_free(listing);
}

const struct dir_entry *dir_listing_find(const struct dir_listing *listing, const char *name)
{
    size_t lo = 0, hi = listing->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(listing->entries[mid].name, name);
        if (cmp == 0)
            return &listing->entries[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int compare_entries(gconstpointer a, gconstpointer b)
{
    const struct dir_entry *x = a, *y = b;
    int cmp = strcmp(x->name, y->name);
    if (cmp != 0)
        return cmp;
    /* Directories first among equal names, so de-duplication keeps them. */
    return (y->kind == META_DIR) - (x->kind == META_DIR);
}

struct dir_listing *dir_listing_from_array(GArray *entries)
{
    struct dir_entry *items = (struct dir_entry *)(void *)entries->data;
    /* Listings arrive sorted (one pass to check) unless prefixes mix with objects. */
    for (size_t i = 1; i < entries->len; i++) {
        if (compare_entries(&items[i - 1], &items[i]) > 0) {
            g_array_sort(entries, compare_entries);
            break;
        }
    }
    items = (struct dir_entry *)(void *)entries->data;
    size_t kept = 0;
    for (size_t i = 0; i < entries->len; i++) {
        if (kept > 0 && strcmp(items[kept - 1].name, items[i].name) == 0) {
            dir_entry_clear(&items[i]);
            continue;
        }
        items[kept++] = items[i];
    }
    size_t count = kept;
    struct dir_entry *owned = (struct dir_entry *)(void *)g_array_free(entries, FALSE);
    return dir_listing_new(owned, count);
}

static void slot_free(struct dircache_slot *slot)
{
    if (!slot)
        return;
    dir_listing_unref(slot->listing);
    g_free(slot);
}

struct dircache *dircache_new(double ttl_s, size_t max_dirs)
{
    struct dircache *cache = g_new0(struct dircache, 1);
    g_mutex_init(&cache->lock);
    g_cond_init(&cache->filled);
    cache->slots =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)slot_free);
    cache->ttl_us = ttl_s <= 0 ? 0 : (gint64)(ttl_s * 1e6);
    cache->max_dirs = max_dirs ? max_dirs : 1;
    return cache;
}

void dircache_free(struct dircache *cache)
{
    if (!cache)
        return;
    g_hash_table_destroy(cache->slots);
    g_cond_clear(&cache->filled);
    g_mutex_clear(&cache->lock);
    g_free(cache);
}

static gboolean slot_is_stale(gpointer key, gpointer value, gpointer now)
{
    const struct dircache_slot *slot = value;
    return !slot->filling && slot->waiters == 0 && slot->expires_us <= *(gint64 *)now;
}

static struct dircache_slot *slot_for_locked(struct dircache *cache, const char *path)
{
    struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    if (slot)
        return slot;
    if (g_hash_table_size(cache->slots) >= cache->max_dirs) {
        gint64 now = g_get_monotonic_time();
        g_hash_table_foreach_remove(cache->slots, slot_is_stale, &now);
    }
    slot = g_new0(struct dircache_slot, 1);
    g_hash_table_insert(cache->slots, g_strdup(path), slot);
    return slot;
}

struct dir_listing *dircache_peek(struct dircache *cache, const char *path)
{
    struct dir_listing *found = NULL;
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    if (slot && slot->listing && slot->expires_us > g_get_monotonic_time())
        found = dir_listing_ref(slot->listing);
    g_mutex_unlock(&cache->lock);
    return found;
}

static void store_locked(struct dircache *cache, struct dircache_slot *slot,
                         struct dir_listing *listing)
{
    dir_listing_unref(slot->listing);
    slot->listing = dir_listing_ref(listing);
    slot->expires_us = g_get_monotonic_time() + cache->ttl_us;
}

int dircache_get(struct dircache *cache, const char *path, dircache_fill_fn fill, void *user,
                 struct dir_listing **out)
{
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = slot_for_locked(cache, path);
    for (;;) {
        if (slot->listing && slot->expires_us > g_get_monotonic_time()) {
            *out = dir_listing_ref(slot->listing);
            g_mutex_unlock(&cache->lock);
            return 0;
        }
        if (!slot->filling)
            break;
        /* Someone else is listing this directory: share their result. */
        unsigned round = slot->fill_round;
        slot->waiters++;
        while (slot->filling && slot->fill_round == round)
            g_cond_wait(&cache->filled, &cache->lock);
        slot->waiters--;
        /* The lister's reader went away (-EINTR): this waiter still wants the listing. */
        if (slot->fill_error == -EINTR)
            continue;
        if (slot->fill_error) {
            int err = slot->fill_error;
            g_mutex_unlock(&cache->lock);
            return err;
        }
        if (slot->listing && cache->ttl_us == 0) {
            *out = dir_listing_ref(slot->listing);
            g_mutex_unlock(&cache->lock);
            return 0;
        }
    }
    slot->filling = true;
    g_mutex_unlock(&cache->lock);

    struct dir_listing *listing = NULL;
    int rc = fill(path, user, &listing);

    g_mutex_lock(&cache->lock);
    /* The slot may have been invalidated (removed) meanwhile; find or recreate it. */
    slot = slot_for_locked(cache, path);
    slot->filling = false;
    slot->fill_error = rc;
    slot->fill_round++;
    if (rc == 0)
        store_locked(cache, slot, listing);
    g_cond_broadcast(&cache->filled);
    g_mutex_unlock(&cache->lock);
    if (rc == 0)
        *out = listing;
    return rc;
}

void dircache_put(struct dircache *cache, const char *path, struct dir_listing *listing)
{
    g_mutex_lock(&cache->lock);
    store_locked(cache, slot_for_locked(cache, path), listing);
    g_mutex_unlock(&cache->lock);
}

void dircache_invalidate(struct dircache *cache, const char *path)
{
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    if (slot) {
        g_clear_pointer(&slot->listing, dir_listing_unref);
        slot->expires_us = 0;
    }
    g_mutex_unlock(&cache->lock);
}

/* Past this many entries a cached listing is dropped rather than copied with a change. */
#define DIRCACHE_EDIT_MAX 20000

int dircache_note_entry(struct dircache *cache, const char *path, const char *name,
                        enum meta_kind kind, const struct meta_attrs *attrs)
{
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    if (!slot || !slot->listing || slot->expires_us <= g_get_monotonic_time()) {
        g_mutex_unlock(&cache->lock);
        return -ENOENT;
    }
    const struct dir_listing *old = slot->listing;
    if (old->count >= DIRCACHE_EDIT_MAX) {
        g_clear_pointer(&slot->listing, dir_listing_unref);
        slot->expires_us = 0;
        g_mutex_unlock(&cache->lock);
        return -E2BIG;
    }
    /* A new snapshot: the old one may be served to open directory handles. */
    struct dir_entry *entries = g_new0(struct dir_entry, old->count + 1);
    size_t count = 0;
    bool placed = false;
    for (size_t i = 0; i <= old->count; i++) {
        int cmp = i < old->count ? strcmp(old->entries[i].name, name) : 1;
        if (!placed && cmp >= 0) {
            struct dir_entry *added = &entries[count++];
            added->name = g_strdup(name);
            added->kind = kind;
            if (attrs && kind != META_DIR)
                meta_attrs_copy(&added->attrs, attrs);
            placed = true;
            if (cmp == 0)
                continue; /* replaces the old entry of that name */
        }
        if (i == old->count)
            break;
        struct dir_entry *copy = &entries[count++];
        copy->name = g_strdup(old->entries[i].name);
        copy->kind = old->entries[i].kind;
        meta_attrs_copy(&copy->attrs, &old->entries[i].attrs);
    }
    struct dir_listing *updated = dir_listing_new(entries, count);
    updated->taken_us = old->taken_us;
    dir_listing_unref(slot->listing);
    slot->listing = updated; /* expiry unchanged: the listing is as old as its base */
    g_mutex_unlock(&cache->lock);
    return 0;
}

void dircache_put_empty(struct dircache *cache, const char *path)
{
    struct dir_listing *empty = dir_listing_new(NULL, 0);
    dircache_put(cache, path, empty);
    dir_listing_unref(empty);
}
