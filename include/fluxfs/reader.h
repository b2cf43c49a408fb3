/* The reader (io layer): serves reads of one open file from Cloud Storage, pinned to the
 * generation that was opened.
 *
 * - Objects up to small_file_threshold are fetched whole on the first read (one GET, CRC32C
 *   verified by the gcs layer) and served from that buffer until the file is closed.
 * - Larger objects: readahead.h decides. Sequential readers get chunk-aligned ranged GETs
 *   covering the read plus a window that doubles up to window_max, many in flight at once;
 *   random reads fetch what is asked, at least random_min bytes. Their readers are shared per
 *   object version (reader_pool below): chunks stay until memory is needed, and readahead
 *   does not fetch again ranges served whole and then dropped (the page cache holds them).
 * - End-to-end check of large objects: the CRC32C of every byte served is kept (the prefix
 *   served front to back, plus ranges served ahead of it, combined with crc32c_combine); the
 *   read that completes the object (normally the one reaching EOF) fails with -EBADMSG when
 *   the total does not match the object's CRC32C (logged with the name), and so does every
 *   later read of the handles sharing that reader (a new open gets a new reader and fetches
 *   again). Reads that leave a gap (random
 *   access, a header skip) detect nothing; more than READER_CRC_MAX_PIECES (256) ranges ahead
 *   of the gap end the check. Ranged GETs carry no per-range checksum, so that is all a
 *   partial reader can have.
 * - Every buffer is admitted by the global membudget. Readahead only takes memory while
 *   demand_reserve bytes stay free; when even a demand read finds no memory, it reads straight
 *   into the caller's buffer (no buffering), so memory exhaustion slows reads but never fails
 *   or deadlocks them.
 * - A pinned read that finds the generation gone (-ENOENT from gcs) fails with -ESTALE, logged
 *   once per open file: the bytes of the version that was opened no longer exist, and mixing
 *   versions in one open file would be silent corruption; reopening gives the new version
 *   (close-to-open). -ESTALE rather than -EIO because it tells the application exactly that.
 *
 * Content cache (issue 5, config.cache): before the whole-object fetch of a small object the
 * cache is asked for (name, generation); a hit fills the chunk without a request, a fill in
 * progress (a prefetch batch) is waited for, and a miss is fetched and then put into it.
 * With config.batcher, that miss fetch goes through miss_batch.h (concurrent misses of other
 * files may share one compose batch; it never waits longer than the batcher's window).
 *
 * Threads: reader_read may be called by many threads at once for one reader; it blocks until
 * its bytes are there (never on a gcs callback thread). One lock per reader protects the chunk
 * list and the readahead state; completions take it briefly. reader_free waits for requests
 * still in flight. Ownership: the reader copies the object name; dst belongs to the caller. */
#ifndef FLUXFS_READER_H
#define FLUXFS_READER_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fluxfs/content_cache.h"
#include "fluxfs/gcs.h"
#include "fluxfs/membudget.h"
#include "fluxfs/miss_batch.h"
#include "fluxfs/readahead.h"

struct reader_config {
    size_t small_file_threshold;
    size_t chunk;                 /* readahead chunk (one ranged GET) */
    size_t window_max;            /* largest readahead window */
    size_t random_min;            /* smallest fetch for random access */
    size_t demand_reserve;        /* budget bytes readahead leaves free for demand reads */
    struct content_cache *cache;  /* not owned; NULL = none. Whole small objects are looked up
                                     here first and put here after a fetch (issue 5) */
    struct miss_batcher *batcher; /* not owned; NULL = none. Whole-object misses of small
                                    objects go through it (concurrent ones compose-batched) */
};

/* The object version an open file reads. */
struct reader_object {
    const char *name; /* full object name */
    int64_t generation;
    uint64_t size;
    bool has_crc32c;
    uint32_t crc32c;
};

struct reader_stats {
    uint64_t requests; /* ranged GETs issued */
    uint64_t bytes_fetched;
    uint64_t direct_reads;    /* demand reads served unbuffered for lack of memory */
    uint64_t crc_checks;      /* large objects served completely and CRC32C-checked */
    uint64_t crc_mismatches;  /* of those, the ones that did not match (the read got EIO) */
    uint64_t refetched_bytes; /* bytes fetched again after they were served and their
                                 buffer freed: the kernel asked for them again (its page
                                 cache dropped them: memory pressure, drop_caches; O_DIRECT)
                                 or readahead fetched them beside such a read */
};

struct reader;

struct reader *reader_new(struct gcs_client *client, struct membudget *budget,
                          const struct reader_config *config, const struct reader_object *object);
/* Reads up to len bytes at offset into dst; *got is short only at the end of the object.
 * 0 or a negative errno (-ESTALE, -EIO, ...). */
int reader_read(struct reader *reader, uint64_t offset, size_t len, void *dst, size_t *got);
void reader_get_stats(struct reader *reader, struct reader_stats *out);

/* Zero-copy form of reader_read: on success view->parts[0..count) point at the bytes (total
 * of them, short only at the end of the object) inside the reader's buffers, which stay
 * valid until reader_view_release (call it on success and on failure). The fs layer hands
 * the parts to fuse_reply_iov. */
#define READER_VIEW_MAX_PARTS 32
struct reader_view {
    struct iovec parts[READER_VIEW_MAX_PARTS];
    int count;
    size_t total;
    /* private */
    struct reader *reader;
    GPtrArray *pinned;
    void *owned;
    uint64_t offset;
};
/* ra: the handle's own sequential-detection state (protected by the reader's lock; NULL =
 * the reader's), so that handles sharing a reader do not confuse each other's streams. */
int reader_read_view(struct reader *reader, struct readahead_state *ra, uint64_t offset, size_t len,
                     struct reader_view *view);
void reader_view_release(struct reader_view *view);
void reader_free(struct reader *reader); /* accepts NULL; waits for requests in flight */

/* Readers shared per object version (issue 11). Every open of (name, generation) above the
 * small-file threshold gets the same reader, so bytes one handle fetched (a zip reader's
 * header reads, readahead not consumed before close) serve the others (the mmap that follows,
 * other ranks) instead of being fetched again. Each handle keeps its own readahead state
 * (reader_read_view's ra). A failed chunk is dropped, and chunks served whole beyond the
 * most recent window_max bytes of them (the page cache has them; their buffers are reused);
 * the others stay, also after the last handle closes, until memory is needed: reader_pool_reclaim
 * is the budget's reclaimer (membudget_set_reclaimer), and a reader that finds no memory for a new
 * chunk first gives back idle chunks of its own, those served whole first (the kernel's page cache
 * has them). Readahead displaces only chunks served whole, or anything of readers no handle uses;
 * demand reads and write buffers anything idle. The generation in the key means a hit never
 * serves bytes of another version.
 * reader_pool_open returns a user of the shared reader; reader_free drops it. */
struct reader_pool;
struct reader_pool_stats {
    uint64_t opens;        /* opens that made a new shared reader */
    uint64_t shared_opens; /* opens that found one (with whatever bytes it held) */
    uint64_t reclaimed_bytes;
    uint64_t readers;    /* readers in the pool now */
    uint64_t held_bytes; /* bytes of their chunks now */
};
/* config: not copied (read at each open), must outlive the pool. */
struct reader_pool *reader_pool_new(struct gcs_client *client, struct membudget *budget,
                                    const struct reader_config *config);
struct reader *reader_pool_open(struct reader_pool *pool, const struct reader_object *object);
/* membudget_reclaim_fn: frees idle chunks of the least recently used readers (trylocks only). */
size_t reader_pool_reclaim(void *pool, size_t wanted, bool urgent);
void reader_pool_get_stats(struct reader_pool *pool, struct reader_pool_stats *out);
void reader_pool_free(struct reader_pool *pool); /* accepts NULL; no handle may still use it */

#endif
