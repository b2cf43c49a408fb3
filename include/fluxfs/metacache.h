/* Metadata caches of the namespace (core layer): what a path is (file, symlink, directory or
 * absent) and, for files, the object's metadata, each with a time to live from the mount
 * options. Stat (files and symlinks: stat_ttl), type (directories: type_ttl) and negative
 * (absent: negative_ttl) entries share one table keyed by path.
 *
 * Rules: a directory wins over a file of the same name (see name_map.h): putting a file where a
 * fresh directory is known is ignored. Entries are bounded by max_entries; when full, expired
 * entries are dropped, and if that is not enough the whole table is (a cache miss is only a
 * request, never an error).
 *
 * Fetches and forgets: what a request (objects.get, a listing) found must not be stored over
 * a change that this mount made to the path after the request started (a listing that
 * started before an unlink, stored after it, brought the removed name back for the TTL).
 * Each forget takes a new epoch of the cache and marks the path with it (the mark stays in
 * the table, as an expired entry, and is carried over by the entries put after it); a fetch
 * takes metacache_epoch() before its requests and stores with metacache_put_fetched or
 * metacache_put_children, which refuse a path forgotten since (and, for children, a directory
 * forgotten since). When marks are dropped for room, fetches older than them are refused
 * altogether (a cache miss, never a stale entry). The plain puts store what the caller knows
 * now (its own change) and are never refused.
 *
 * Threads: all functions are thread-safe (one lock around the table). Ownership: metacache_get
 * copies attrs out (meta_attrs_clear frees them). */
#ifndef FLUXFS_METACACHE_H
#define FLUXFS_METACACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fluxfs/gcs.h"

enum meta_kind { META_UNKNOWN = 0, META_ABSENT, META_FILE, META_SYMLINK, META_DIR };

/* Attributes of an object as the filesystem shows them. symlink_target is owned. The members
 * are ordered so that the struct has no holes (56 bytes): a listing of a million entries holds
 * one per entry. */
struct meta_attrs {
    uint64_t size;
    int64_t generation;
    int64_t metageneration;
    int64_t mtime_ns;
    int64_t fetched_us; /* when read from Cloud Storage (monotonic); 0 = not read from it.
                         * An inode filled from a cache or a listing keeps this time, so its
                         * attributes expire a TTL after they were read, not after the lookup */
    char *symlink_target;
    uint32_t crc32c;
    bool has_crc32c;
    bool symlink_in_content; /* a gcloud symlink: the target is the object's bytes (size long) */
};

void meta_attrs_from_object(struct meta_attrs *attrs, const struct gcs_object *obj);
/* The same with fetched_us given (one clock read for a whole page of a listing). */
void meta_attrs_from_object_at(struct meta_attrs *attrs, const struct gcs_object *obj,
                               int64_t fetched_us);
void meta_attrs_copy(struct meta_attrs *dst, const struct meta_attrs *src);
void meta_attrs_clear(struct meta_attrs *attrs); /* accepts NULL */
/* When attrs were read from Cloud Storage, or now when they were not (made locally). */
int64_t meta_attrs_fetched_us(const struct meta_attrs *attrs);
/* META_SYMLINK when the object carries a symlink target, else META_FILE. */
enum meta_kind meta_kind_of_object(const struct gcs_object *obj);

struct metacache;

struct metacache *metacache_new(double stat_ttl_s, double type_ttl_s, double negative_ttl_s,
                                size_t max_entries);
void metacache_free(struct metacache *cache); /* accepts NULL */

void metacache_put_file(struct metacache *cache, const char *path, enum meta_kind kind,
                        const struct meta_attrs *attrs);
void metacache_put_dir(struct metacache *cache, const char *path);
void metacache_put_absent(struct metacache *cache, const char *path);

/* An epoch no forget reaches: "what the caller knows now", for the since arguments below. */
#define METACACHE_CURRENT UINT64_MAX
/* The current epoch, taken before the requests of a fetch. */
uint64_t metacache_epoch(struct metacache *cache);
/* Puts what a fetch that started at epoch since found: kind META_FILE or META_SYMLINK (with
 * attrs), META_DIR or META_ABSENT, same rules as the plain puts. false when not stored
 * (forgotten since, a TTL of 0, a file over a fresh directory). */
bool metacache_put_fetched(struct metacache *cache, const char *path, enum meta_kind kind,
                           const struct meta_attrs *attrs, uint64_t since);
/* Supplies child index of a listing: its name (a segment), kind, and attrs (files only). */
typedef void (*metacache_child_fn)(const void *user, size_t index, const char **name,
                                   enum meta_kind *kind, const struct meta_attrs **attrs);
/* Puts count children of dir_path (as metacache_put_fetched would, same rules) listed by a
 * listing that started at epoch since, with one allocation per child and the lock taken once
 * per slice of children; none when dir_path was forgotten since. */
void metacache_put_children(struct metacache *cache, const char *dir_path, size_t count,
                            metacache_child_fn child, const void *user, uint64_t since);
/* Drops what is known of path (a change made through the mount): a fetch in flight that
 * started before it does not store its answer. */
void metacache_forget(struct metacache *cache, const char *path);

/* Whether path was forgotten (changed through the mount) after epoch since: true when it
 * was, or when that is no longer known (its mark was dropped for room). One hash lookup. */
bool metacache_changed_since(struct metacache *cache, const char *path, uint64_t since);

/* 0 with *kind (and *attrs for files, when attrs is not NULL) for a fresh entry; -ENOENT when
 * nothing fresh is known. */
int metacache_get(struct metacache *cache, const char *path, enum meta_kind *kind,
                  struct meta_attrs *attrs);
size_t metacache_size(struct metacache *cache);

#endif
