/* The content cache (io layer): whole object bodies keyed by (object name, generation), in two
 * tiers, each an LRU with a byte cap:
 *
 * - memory: buffers admitted by the global membudget (speculative admission: the cache leaves
 *   `reserve` bytes free for demand reads, and gives its own least recently used entries back
 *   before it is refused), capped by memory_bytes;
 * - disk (optional, dir set): one file per entry under DIR/fluxfs-content-v1/, named
 *   sha256(cache_scope + "\n" + object name) + "-" + generation, with a header holding the
 *   length and the CRC32C of the body. The directory is indexed again at startup, so entries
 *   survive a remount and are served while the object's generation still matches (a new
 *   generation has another file name, so a changed object can never be served stale). A file
 *   whose length or CRC32C does not match its header is deleted, never served. Files are
 *   written to a temporary name and renamed, so a crash leaves no torn entry.
 *
 * Pending fills: whoever is about to fetch an object (a prefetch batch, a reader's demand fetch)
 * marks it pending; other readers of the same (name, generation) may wait for that fill
 * instead of fetching the object a second time. Every successful mark is matched by exactly
 * one content_cache_clear_pending (after the insert, or on failure).
 *
 * Threads: every function is thread-safe. One lock (cache->lock) protects both indexes, the
 * LRU lists, the byte counters, the pending set and the statistics; file I/O and copies run
 * outside it. Ownership: content_cache_insert copies the bytes; reads copy into the caller's
 * buffer. */
#ifndef FLUXFS_CONTENT_CACHE_H
#define FLUXFS_CONTENT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/uio.h>

#include "fluxfs/membudget.h"

struct content_cache_config {
    size_t memory_bytes;      /* cap of the memory tier; 0 = no memory tier */
    const char *dir;          /* disk tier directory (created when missing); NULL = none */
    uint64_t disk_bytes;      /* cap of the disk tier (headers included); 0 = 10 GiB */
    const char *scope;        /* e.g. "BUCKET": keeps two buckets' entries apart on disk */
    struct membudget *budget; /* not owned; required when memory_bytes > 0 */
    size_t reserve;           /* budget bytes the memory tier leaves free */
    uint64_t max_object_size; /* larger objects are not cached; 0 = 64 MiB */
};

struct content_cache_stats {
    uint64_t memory_hits, disk_hits, misses, inserts, evictions, corrupt_files;
    uint64_t pending_waits;
    uint64_t dropped_stored;  /* entries content_cache_demote dropped */
    uint64_t large_hits;      /* opens of large objects served from the disk tier */
    uint64_t large_fills;     /* large objects stored from what was read of them */
    uint64_t large_abandoned; /* fills given up (not read to the end, bad CRC32C, disk) */
    size_t memory_used;       /* bytes of bodies in the memory tier */
    uint64_t disk_used;       /* bytes of files in the disk tier */
    size_t memory_entries, disk_entries;
};

struct content_cache;

/* 0 and *out, or a negative errno (the disk directory cannot be created or read). */
int content_cache_new(const struct content_cache_config *config, struct content_cache **out);
void content_cache_free(struct content_cache *cache); /* accepts NULL */

/* Copies the whole body of (name, generation), which is `size` bytes, into buf. 0 on a hit;
 * -ENOENT on a miss. When a fill of that object is pending, waits up to wait_ms for it first
 * (0 = do not wait). */
int content_cache_read(struct content_cache *cache, const char *name, int64_t generation,
                       uint64_t size, void *buf, int wait_ms);
/* True when the object is in either tier (no copy, no LRU update). */
bool content_cache_contains(struct content_cache *cache, const char *name, int64_t generation);
/* Stores a copy of the body. 0, or a negative errno when no tier took it (too large, no
 * memory tier room and no disk tier, disk error). Replaces nothing: an entry already present
 * stays. */
int content_cache_insert(struct content_cache *cache, const char *name, int64_t generation,
                         const void *data, size_t len);

/* A reference-counted buffer the memory tier can hold pieces of without copying them (a
 * prefetched composite: its pieces are cached in place). free_fn(data, bytes, user) runs when
 * the last reference goes; the memory tier counts a block's whole size against its cap while
 * it holds any piece of it. */
struct content_block;
typedef void (*content_block_free_fn)(void *data, size_t bytes, void *user);
/* Takes ownership of data (refs = 1). */
struct content_block *content_block_new(void *data, size_t bytes, content_block_free_fn free_fn,
                                        void *user);
struct content_block *content_block_ref(struct content_block *block);
void content_block_unref(struct content_block *block); /* accepts NULL */

/* Like content_cache_insert, but the memory tier keeps a reference to block's bytes
 * [offset, offset + len) instead of a copy (it copies when the block is large for its cap).
 * The caller keeps its own reference. */
int content_cache_insert_block(struct content_cache *cache, const char *name, int64_t generation,
                               struct content_block *block, size_t offset, size_t len);
/* Zero-copy read of the memory tier: on a hit, *data points at the whole body (size bytes),
 * kept valid by the reference *block that the caller drops with content_block_unref. -ENOENT
 * when the memory tier does not hold it (after waiting up to wait_ms for a pending fill). */
int content_cache_borrow(struct content_cache *cache, const char *name, int64_t generation,
                         uint64_t size, int wait_ms, struct content_block **block,
                         const void **data);

/* Marks a fill of (name, generation) as under way. false when it is cached already or another
 * fill is pending (then the caller does not fetch it). */
bool content_cache_mark_pending(struct content_cache *cache, const char *name, int64_t generation);
void content_cache_clear_pending(struct content_cache *cache, const char *name, int64_t generation);

/* Moves the memory tier's entry of (name, generation), if any, to the cold end of its LRU:
 * the next entry to be evicted. For bodies the kernel's page cache holds now, so that the
 * memory tier keeps the ones still to be read (prefetched ahead) longer. */
void content_cache_demote(struct content_cache *cache, const char *name, int64_t generation);
/* From now on content_cache_demote drops the memory entry instead (its memory comes back at
 * once): for a working set larger than the cache, where a demoted entry would be evicted
 * before it is asked for again anyway, and keeping it only costs fresh memory for the next
 * fetches. Off at start. */
void content_cache_set_drop_demoted(struct content_cache *cache, bool drop);

/* ---- large objects (the disk tier only), as gcsfuse's file cache holds them ----
 * A large object read through the mount is written to a cache file as its bytes are served
 * (any order: each piece goes to its offset, and the CRC32C of the pieces is combined), and
 * becomes an entry once every byte was seen and the CRC32C matches the object's: so a second
 * epoch over shards, or a checkpoint loaded again, after a remount too, reads local disk. */

/* Opens the cached body of (name, generation), `size` bytes, for reading: *fd reads the body
 * at CONTENT_CACHE_BODY_OFFSET + offset (the caller closes it). The first open in this process
 * checks the whole file's CRC32C against its header (a damaged file is deleted); -ENOENT on a
 * miss. */
#define CONTENT_CACHE_BODY_OFFSET 32
int content_cache_large_open(struct content_cache *cache, const char *name, int64_t generation,
                             uint64_t size, int *fd);

struct content_fill;
/* A fill of (name, generation), shared by every caller asking for the same one (a reference
 * each); NULL when there is no disk tier, the object does not fit its cap, or it is cached. */
struct content_fill *content_cache_fill_begin(struct content_cache *cache, const char *name,
                                              int64_t generation, uint64_t size, bool has_crc32c,
                                              uint32_t crc32c);
struct content_fill *content_fill_ref(struct content_fill *fill);
/* The bytes [offset, offset + total of iov) of the object, as served to a reader. Bytes seen
 * before are skipped. The last missing piece commits the entry. */
void content_fill_add(struct content_fill *fill, uint64_t offset, const struct iovec *iov,
                      int count);
/* Drops a reference; the last one of an incomplete fill removes its file. Accepts NULL. */
void content_fill_unref(struct content_fill *fill);

/* Bytes the cache can hold in all (the larger tier's cap): what a warm-up may fill. */
uint64_t content_cache_capacity(struct content_cache *cache);
void content_cache_get_stats(struct content_cache *cache, struct content_cache_stats *out);

#endif
