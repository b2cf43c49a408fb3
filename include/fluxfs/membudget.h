/* One global memory budget for read buffers (io layer; later write buffers and the in-memory
 * content cache draw from it too). Admission, not accounting after the fact: a caller asks
 * for bytes before allocating them, and either gets them, waits, or is refused and falls back
 * to something smaller (a shorter readahead window, a direct read into the reply buffer).
 * Nothing ever crashes or over-commits on exhaustion.
 *
 * Threads: every function may be called from any thread except that membudget_acquire (which
 * may wait) must not be called from a gcs callback. All fields are protected by the budget's
 * own lock. Ownership: the caller releases exactly what it acquired. */
#ifndef FLUXFS_MEMBUDGET_H
#define FLUXFS_MEMBUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct membudget;

struct membudget_stats {
    size_t limit;
    size_t used;
    size_t peak;
    uint64_t waits;              /* acquisitions that had to wait */
    uint64_t refusals;           /* try/timed acquisitions that gave up */
    size_t pooled;               /* bytes of free buffers kept for reuse (part of used) */
    uint64_t reclaims;           /* admissions that asked the reclaimer for room */
    uint64_t reclaimed;          /* bytes it reported freed */
    uint64_t buffers_reused;     /* membudget_alloc served from the pool */
    uint64_t buffers_fresh;      /* membudget_alloc with new memory (faulted in as filled) */
    uint64_t buffer_fresh_bytes; /* their bytes */
};

/* A cache that holds budget bytes it can give back (the shared read chunks, reader.h):
 * called by an admission that does not fit even after emptying the pool, without the budget's
 * lock, from whatever thread asked (which may hold its own locks: the reclaimer must only
 * trylock). Frees up to about `wanted` bytes through this budget; returns how many. urgent:
 * the admission is a demand (a read waiting for its bytes, a write buffer), not speculation
 * (readahead, admitted with a reserve), which should not displace bytes still in use. */
typedef size_t (*membudget_reclaim_fn)(void *user, size_t wanted, bool urgent);
/* Installs (or with fn NULL removes, waiting for calls in progress) the reclaimer. */
void membudget_set_reclaimer(struct membudget *budget, membudget_reclaim_fn fn, void *user);

/* limit 0 is treated as 1 MiB. */
struct membudget *membudget_new(size_t limit);
void membudget_free(struct membudget *budget); /* accepts NULL */

/* Takes bytes if they fit now; true on success. */
bool membudget_try_acquire(struct membudget *budget, size_t bytes);
/* Waits up to timeout_ms (negative = forever) for bytes to fit; true on success. A request
 * larger than the whole limit is refused at once. */
bool membudget_acquire(struct membudget *budget, size_t bytes, int timeout_ms);
/* Takes bytes only if, after taking them, at least `reserve` bytes stay free: speculative
 * users (readahead) leave room for demand reads. */
bool membudget_try_acquire_reserving(struct membudget *budget, size_t bytes, size_t reserve);
void membudget_release(struct membudget *budget, size_t bytes);
void membudget_get_stats(struct membudget *budget, struct membudget_stats *out);

/* Buffers with the budget built in. Freed buffers are kept (still counted as used, up to a
 * quarter of the limit) and handed out again for the same size, so multi-megabyte read
 * buffers do not cost a fresh mmap and a page fault per 4 KiB each time; admission that would
 * fail empties that pool first. demand = false leaves `reserve` bytes free (readahead).
 * NULL when refused. */
void *membudget_alloc(struct membudget *budget, size_t bytes, bool demand, size_t reserve);
void membudget_free_buffer(struct membudget *budget, void *buffer, size_t bytes); /* NULL ok */

#endif
