/* Directory listings (core layer): immutable, reference-counted snapshots of a directory's
 * entries, cached by path for list_ttl, with single-flight filling so that concurrent opendirs
 * of one directory share one listing.
 *
 * A snapshot never changes after it is built, so readdir serves it with stable offsets (entry
 * index + 1) to any number of concurrent readers without a lock; a newer listing replaces the
 * cache entry, not the snapshot open directory handles hold.
 *
 * Threads: dircache functions are thread-safe (one lock around the table and the in-flight
 * markers); the fill function runs without the lock. Ownership: every dir_listing pointer
 * handed out carries a reference the receiver drops with dir_listing_unref. */
#ifndef FLUXFS_DIRCACHE_H
#define FLUXFS_DIRCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#include "fluxfs/metacache.h"

struct dir_entry {
    char *name;              /* child name (a valid segment) */
    enum meta_kind kind;     /* META_FILE, META_SYMLINK or META_DIR */
    struct meta_attrs attrs; /* files and symlinks */
};

struct dir_listing {
    gint refcount;             /* atomic */
    struct dir_entry *entries; /* sorted by name (strcmp), unique */
    size_t count;
    /* NULL: every entry owns its name. Else every entry's name lives in this chunk (a listing
     * of a million names makes two allocations for them, not a million), freed with the
     * listing. */
    GStringChunk *names;
    gint64 taken_us; /* monotonic time the listing was made (edits keep their base's) */
    /* What the listing is known to hold (edits keep their base's): every change made through
     * the mount before the dircache epoch dir_epoch (to the directory) and the metacache epoch
     * meta_epoch (to each child's path) is in it; a later one may not be (readdirplus checks
     * with namespace_listing_changed and namespace_entry_changed). 0 = unknown (nothing is
     * assumed). */
    uint64_t dir_epoch;
    uint64_t meta_epoch;
};

/* Takes ownership of the entries array (count items, sorted, unique). */
struct dir_listing *dir_listing_new(struct dir_entry *entries, size_t count);
struct dir_listing *dir_listing_ref(struct dir_listing *listing);
void dir_listing_unref(struct dir_listing *listing); /* accepts NULL */
const struct dir_entry *dir_listing_find(const struct dir_listing *listing, const char *name);

/* Builds a listing from unsorted entries: sorts, and for duplicate names keeps the directory
 * (rule 2 of name_map.h) or else the first. Takes ownership of the array and its entries. */
struct dir_listing *dir_listing_from_array(GArray *entries /* struct dir_entry */);
/* The same for entries whose names all live in names (or point into them): the listing takes
 * both over and frees no name on its own. */
struct dir_listing *dir_listing_from_array_names(GArray *entries, GStringChunk *names);

/* Changes and listings in flight. A listing that was requested before a change of its
 * directory made through this mount (a name removed or renamed, or a listing put) and comes
 * back after it must not be cached over the change: it would bring the removed name back
 * for the TTL. Each change takes a new epoch of the cache; a fill of dircache_get records the
 * epoch when it starts, and its result goes to its callers but not into the cache when the
 * path was invalidated since (notes are applied to it instead: a create made meanwhile is not
 * undone). A listing fetched outside dircache_get (the metadata prefetch) takes
 * dircache_epoch() before its requests and is stored with dircache_put_since. */
struct dircache;
typedef int (*dircache_fill_fn)(const char *path, void *user, struct dir_listing **out);

struct dircache *dircache_new(double ttl_s, size_t max_dirs);
void dircache_free(struct dircache *cache); /* accepts NULL */

/* A fresh cached listing (new reference) or NULL. */
struct dir_listing *dircache_peek(struct dircache *cache, const char *path);
/* A fresh cached listing, or the result of fill (called by one caller; concurrent callers for
 * the same path wait for it and share the result or its error). */
int dircache_get(struct dircache *cache, const char *path, dircache_fill_fn fill, void *user,
                 struct dir_listing **out);
/* Caches what the caller knows the directory holds now (a change: a fill in flight does not
 * replace it). */
void dircache_put(struct dircache *cache, const char *path, struct dir_listing *listing);
/* The current epoch: taken before the requests of a listing stored with dircache_put_since. */
uint64_t dircache_epoch(struct dircache *cache);
/* Caches a listing whose requests started at epoch since, unless path changed after that
 * (then false: the listing may hold what a change removed). */
bool dircache_put_since(struct dircache *cache, const char *path, struct dir_listing *listing,
                        uint64_t since);
/* Whether the directory at path changed through the mount (a child removed, renamed, created
 * or committed, or a listing put) after epoch since: true when it did, or when that is no
 * longer known (its mark was evicted). One hash lookup under the cache lock. */
bool dircache_changed_since(struct dircache *cache, const char *path, uint64_t since);
/* Caches an empty listing for path (a directory just created). */
void dircache_put_empty(struct dircache *cache, const char *path);
/* A change of the directory at path made through this mount (a child removed or renamed, the
 * directory itself removed or renamed): drops the cached listing, and a listing in flight
 * for path is not cached when it comes back. */
void dircache_invalidate(struct dircache *cache, const char *path);
/* Drops the cached listing only (it is older than wanted; nothing changed through the mount):
 * a listing in flight is still cached. */
void dircache_expire(struct dircache *cache, const char *path);
/* A change this process made in the directory at path (a file created or committed, a
 * directory made): a fresh cached listing is replaced by a copy with the entry added (or
 * replaced by name), keeping its expiry, so that absence stays known from it (issue 11:
 * creates in a listed directory need no lookup round trip); a listing in flight gets the entry
 * too before it is cached. 0, -ENOENT when no fresh listing is cached and none is in flight,
 * -E2BIG when it was too large to copy (it is dropped then). */
int dircache_note_entry(struct dircache *cache, const char *path, const char *name,
                        enum meta_kind kind, const struct meta_attrs *attrs);

#endif
