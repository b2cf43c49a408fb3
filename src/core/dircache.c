/* Directory listing snapshots and their cache (see include/fluxfs/dircache.h). */
#include "fluxfs/dircache.h"

#include <errno.h>
#include <string.h>

/* Listings fetched before a change must not be stored over it (a racing listing brought a
 * removed name back): every change takes a new cache epoch and marks its path's slot with it.
 * A fill started at epoch E stores its result only when no invalidation came after E; notes
 * that came meanwhile are applied to the result (so a listing does not undo a create), and
 * dircache_put_since refuses a listing fetched before any change. A slot is kept (empty) for
 * the mark; when an evicted slot takes a mark with it, the cache's floor rises to that mark
 * and ticketed puts older than the floor are refused (a cache miss, never a stale entry). */
struct dircache_slot {
    struct dir_listing *listing; /* NULL while the first fill is in flight */
    gint64 expires_us;
    bool filling;         /* a caller is running fill for this path */
    int fill_error;       /* error of the last fill, for its waiters */
    unsigned fill_round;  /* bumped when a fill finishes */
    unsigned waiters;     /* callers waiting on this slot; it is not freed meanwhile */
    uint64_t invalidated; /* epoch of the last invalidation or put; 0 = none */
    uint64_t changed;     /* epoch of the last change of any kind (notes too) */
    GArray *notes;        /* struct dir_entry noted while filling; NULL when none */
};

struct dircache {
    GMutex lock;
    GCond filled;
    GHashTable *slots; /* char *path -> struct dircache_slot *; lock */
    uint64_t epoch;    /* lock: bumped by every change */
    uint64_t floor;    /* lock: marks up to here were evicted with their slots */
    gint64 ttl_us;     /* immutable */
    size_t max_dirs;   /* immutable */
};

static void dir_entry_clear(struct dir_entry *entry)
{
    g_free(entry->name);
    meta_attrs_clear(&entry->attrs);
}

/* An entry whose name belongs to a chunk (or to nobody). */
static void dir_entry_clear_attrs(struct dir_entry *entry)
{
    if (entry->attrs.symlink_target)
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
    if (listing->names) {
        for (size_t i = 0; i < listing->count; i++)
            dir_entry_clear_attrs(&listing->entries[i]);
        g_string_chunk_free(listing->names);
    } else {
        for (size_t i = 0; i < listing->count; i++)
            dir_entry_clear(&listing->entries[i]);
    }
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

/* Listings with fewer entries copy their names out of a chunk (dir_listing_from_array_names). */
#define DIR_LISTING_CHUNK_MIN_ENTRIES 256

static struct dir_listing *listing_from_array(GArray *entries, GStringChunk *names);

struct dir_listing *dir_listing_from_array(GArray *entries)
{
    return listing_from_array(entries, NULL);
}

struct dir_listing *dir_listing_from_array_names(GArray *entries, GStringChunk *names)
{
    return listing_from_array(entries, names);
}

static struct dir_listing *listing_from_array(GArray *entries, GStringChunk *names)
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
            if (names)
                dir_entry_clear_attrs(&items[i]);
            else
                dir_entry_clear(&items[i]);
            continue;
        }
        items[kept++] = items[i];
    }
    size_t count = kept;
    if (names && count < DIR_LISTING_CHUNK_MIN_ENTRIES) {
        /* A small listing: its own names cost less than the chunk's block (100,000 cached
         * directories of a few names each must not hold a block each). */
        for (size_t i = 0; i < count; i++)
            items[i].name = g_strdup(items[i].name);
        g_string_chunk_free(names);
        names = NULL;
    }
    struct dir_entry *owned = (struct dir_entry *)(void *)g_array_free(entries, FALSE);
    struct dir_listing *listing = dir_listing_new(owned, count);
    listing->names = names;
    return listing;
}

static void notes_free(GArray *notes)
{
    if (!notes)
        return;
    for (guint i = 0; i < notes->len; i++)
        dir_entry_clear(&g_array_index(notes, struct dir_entry, i));
    g_array_free(notes, TRUE);
}

static void slot_free(struct dircache_slot *slot)
{
    if (!slot)
        return;
    dir_listing_unref(slot->listing);
    notes_free(slot->notes);
    g_free(slot);
}

/* Orders notes by name, the later of two of the same name last (index breaks ties). */
struct indexed_note {
    const struct dir_entry *entry;
    size_t index;
};

static int compare_notes(gconstpointer a, gconstpointer b)
{
    const struct indexed_note *x = a, *y = b;
    int cmp = strcmp(x->entry->name, y->entry->name);
    if (cmp != 0)
        return cmp;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A new snapshot: base with each note added, or replacing base's entry of its name (of two
 * notes of one name the later wins). base keeps its time (the listing is as old as it). */
static struct dir_listing *listing_with_notes(const struct dir_listing *base,
                                              const struct dir_entry *notes, size_t n)
{
    struct indexed_note *sorted = g_new(struct indexed_note, n ? n : 1);
    for (size_t i = 0; i < n; i++)
        sorted[i] = (struct indexed_note){&notes[i], i};
    if (n > 1)
        qsort(sorted, n, sizeof(*sorted), compare_notes);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++) {
        if (unique > 0 && strcmp(sorted[unique - 1].entry->name, sorted[i].entry->name) == 0)
            sorted[unique - 1] = sorted[i]; /* the later note of that name */
        else
            sorted[unique++] = sorted[i];
    }
    struct dir_entry *entries = g_new0(struct dir_entry, base->count + unique + 1);
    size_t count = 0, b = 0, k = 0;
    while (b < base->count || k < unique) {
        int cmp = b == base->count ? 1
                  : k == unique    ? -1
                                   : strcmp(base->entries[b].name, sorted[k].entry->name);
        const struct dir_entry *from = cmp < 0 ? &base->entries[b] : sorted[k].entry;
        struct dir_entry *copy = &entries[count++];
        copy->name = g_strdup(from->name);
        copy->kind = from->kind;
        if (from->kind != META_DIR)
            meta_attrs_copy(&copy->attrs, &from->attrs);
        if (cmp <= 0)
            b++; /* replaced by the note when equal */
        if (cmp >= 0)
            k++;
    }
    g_free(sorted);
    struct dir_listing *updated = dir_listing_new(entries, count);
    updated->taken_us = base->taken_us;
    updated->dir_epoch = base->dir_epoch; /* the notes are in it, but maybe not all changes */
    updated->meta_epoch = base->meta_epoch;
    return updated;
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

struct eviction {
    struct dircache *cache;
    gint64 now;
};

static gboolean slot_is_stale(gpointer key, gpointer value, gpointer user)
{
    const struct dircache_slot *slot = value;
    struct eviction *eviction = user;
    if (slot->filling || slot->waiters > 0 || slot->expires_us > eviction->now)
        return FALSE;
    /* Its marks go with it: puts fetched before them are refused by the floor instead. */
    eviction->cache->floor = MAX(eviction->cache->floor, slot->changed);
    return TRUE;
}

static struct dircache_slot *slot_for_locked(struct dircache *cache, const char *path)
{
    struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    if (slot)
        return slot;
    if (g_hash_table_size(cache->slots) >= cache->max_dirs) {
        struct eviction eviction = {cache, g_get_monotonic_time()};
        g_hash_table_foreach_remove(cache->slots, slot_is_stale, &eviction);
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

/* A change at path: a new epoch, marked on its slot (made, empty, when there is none). */
static struct dircache_slot *mark_changed_locked(struct dircache *cache, const char *path,
                                                 bool invalidation)
{
    struct dircache_slot *slot = slot_for_locked(cache, path);
    slot->changed = ++cache->epoch;
    if (invalidation) {
        slot->invalidated = slot->changed;
        g_clear_pointer(&slot->notes, notes_free); /* the fill's result is not stored */
    }
    return slot;
}

uint64_t dircache_epoch(struct dircache *cache)
{
    g_mutex_lock(&cache->lock);
    uint64_t epoch = cache->epoch;
    g_mutex_unlock(&cache->lock);
    return epoch;
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
        /* Not stored (an invalidation came while it was listed): this waiter lists anew. */
    }
    slot->filling = true;
    uint64_t started = cache->epoch;
    g_mutex_unlock(&cache->lock);

    struct dir_listing *listing = NULL;
    int rc = fill(path, user, &listing);

    g_mutex_lock(&cache->lock);
    /* Still this path's slot: a filling slot is neither evicted nor removed. */
    slot->filling = false;
    slot->fill_error = rc;
    slot->fill_round++;
    GArray *notes = g_steal_pointer(&slot->notes);
    if (rc == 0 && slot->invalidated <= started) {
        if (notes && notes->len > 0) {
            /* Changes noted while it was listed: the listing gets them too. */
            struct dir_listing *updated = listing_with_notes(
                listing, (const struct dir_entry *)(void *)notes->data, notes->len);
            dir_listing_unref(listing);
            listing = updated;
        }
        store_locked(cache, slot, listing);
    }
    /* Else listed before the path changed: the caller gets it, the cache does not. */
    g_cond_broadcast(&cache->filled);
    g_mutex_unlock(&cache->lock);
    notes_free(notes);
    if (rc == 0)
        *out = listing;
    return rc;
}

void dircache_put(struct dircache *cache, const char *path, struct dir_listing *listing)
{
    g_mutex_lock(&cache->lock);
    /* What the caller knows now: a listing in flight must not replace it. */
    store_locked(cache, mark_changed_locked(cache, path, true), listing);
    g_mutex_unlock(&cache->lock);
}

bool dircache_put_since(struct dircache *cache, const char *path, struct dir_listing *listing,
                        uint64_t since)
{
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    bool stored = since >= cache->floor && (!slot || slot->changed <= since);
    if (stored) {
        slot = slot_for_locked(cache, path);
        store_locked(cache, slot, listing);
    }
    g_mutex_unlock(&cache->lock);
    return stored;
}

bool dircache_changed_since(struct dircache *cache, const char *path, uint64_t since)
{
    g_mutex_lock(&cache->lock);
    const struct dircache_slot *slot = g_hash_table_lookup(cache->slots, path);
    bool changed = since < cache->floor || (slot && slot->changed > since);
    g_mutex_unlock(&cache->lock);
    return changed;
}

void dircache_invalidate(struct dircache *cache, const char *path)
{
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = mark_changed_locked(cache, path, true);
    g_clear_pointer(&slot->listing, dir_listing_unref);
    slot->expires_us = 0;
    g_mutex_unlock(&cache->lock);
}

void dircache_expire(struct dircache *cache, const char *path)
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
    struct dir_entry note;
    memset(&note, 0, sizeof(note));
    note.name = (char *)name;
    note.kind = kind;
    if (attrs && kind != META_DIR)
        note.attrs = *attrs; /* borrowed: listing_with_notes copies */
    g_mutex_lock(&cache->lock);
    struct dircache_slot *slot = mark_changed_locked(cache, path, false);
    int rc = -ENOENT;
    if (slot->filling) {
        /* A listing in flight may predate the change: it is applied to its result. */
        if (!slot->notes)
            slot->notes = g_array_new(FALSE, TRUE, sizeof(struct dir_entry));
        struct dir_entry copy = {.name = g_strdup(name), .kind = kind};
        if (attrs && kind != META_DIR)
            meta_attrs_copy(&copy.attrs, attrs);
        g_array_append_val(slot->notes, copy);
        rc = 0;
    }
    if (!slot->listing || slot->expires_us <= g_get_monotonic_time()) {
        g_mutex_unlock(&cache->lock);
        return rc;
    }
    if (slot->listing->count >= DIRCACHE_EDIT_MAX) {
        g_clear_pointer(&slot->listing, dir_listing_unref);
        slot->expires_us = 0;
        g_mutex_unlock(&cache->lock);
        return -E2BIG;
    }
    /* A new snapshot: the old one may be served to open directory handles. */
    struct dir_listing *updated = listing_with_notes(slot->listing, &note, 1);
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
