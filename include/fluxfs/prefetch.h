/* The prefetcher (io layer): fills the content cache with small objects before they are read,
 * compose-batched (compose_plan.h) so that up to 32 objects cost one compose, one GET and one
 * delete instead of 32 GETs.
 *
 * Work comes from three queues, taken in this order by a fixed set of worker threads:
 *   1. order hints (prefetch_hints_*): the exact upcoming read order. Item i is fetched only
 *      while i < (highest hinted item opened so far) + lookahead, and while fewer than three
 *      quarters of the cache's capacity are fetched and not opened yet, so a shuffled epoch
 *      reads at bulk speed without caching the whole dataset or evicting what it fetched;
 *   2. automatic: the next files in listing order, queued by the fs layer when it sees files
 *      opened in that order (prefetch_add_auto);
 *   3. warm-up (prefetch_add_warmup): a whole tree, as fast as possible, within the cache's
 *      capacity (items beyond it are counted as skipped).
 * Paths are relative to the mount; the resolve callback (the fs layer's namespace) turns one
 * into the object version to fetch, so the io layer never sees the namespace.
 *
 * One batch: sources pinned by generation are composed into a temporary object
 * TEMP_PREFIX MOUNT_ID/SEQ (ifGenerationMatch=0), fetched with one GET (8 MiB ranges in parallel
 * when larger), deleted at once (also when the GET failed), then split by the pinned sizes,
 * each piece checked against its CRC32C, into the cache. A piece never carries another
 * generation's bytes: the composite is built from the pinned generations or not at all.
 * Compose answered 403 (or testIamPermissions at start showing no objects.create/delete)
 * turns compose off for the mount; 412, 429/5xx, a missing source or a bad split fall back to
 * plain GETs of that batch (pinned too). At start the temporary objects of crashed mounts
 * (same host, process gone; or any older than a day) are deleted; at prefetch_free this
 * mount's own are (requests in flight are waited for, then what is left under MOUNT_ID).
 *
 * Demand reads go first: workers take memory only while `reserve` budget bytes stay free and
 * keep few requests in flight each; a demand reader finding an object pending in the cache
 * waits for it rather than fetching it twice.
 *
 * Threads: every function is thread-safe and may block briefly on the prefetcher's lock
 * (p->lock protects the queues, the counters and the set of live temporary objects);
 * prefetch_free joins the workers. Ownership: paths are copied. */
#ifndef FLUXFS_PREFETCH_H
#define FLUXFS_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fluxfs/compose_plan.h"
#include "fluxfs/content_cache.h"
#include "fluxfs/gcs.h"
#include "fluxfs/membudget.h"

/* The object version a path names (resolve callback's answer); name is g_malloc'd. */
struct prefetch_object {
    char *name;
    int64_t generation;
    uint64_t size;
    bool has_crc32c;
    uint32_t crc32c;
    bool kernel_cached;   /* the kernel's page cache holds this version (opened before): no
                             fetch, as for an object in the content cache */
};
/* 0 and *out for a regular file, else a negative errno (the path is skipped). Called from
 * worker threads; may block on the network. */
typedef int (*prefetch_resolve_fn)(const char *path, void *user, struct prefetch_object *out);

struct prefetch_config {
    struct gcs_client *client;       /* not owned */
    struct content_cache *cache;     /* not owned */
    struct membudget *budget;        /* not owned */
    size_t reserve;                  /* budget bytes left free for demand reads */
    const char *temp_prefix;         /* e.g. MOUNT_PREFIX ".fluxfs/compose/" */
    bool compose;                    /* --compose */
    struct compose_plan_config plan;
    uint64_t max_object_size;        /* larger objects are not prefetched (the reader does not
                                        serve them from the cache) */
    unsigned lookahead;              /* hinted files ahead of the reader; 0 = 1024 */
    unsigned workers;                /* 0 = 8 */
    prefetch_resolve_fn resolve;
    void *resolve_user;
};

struct prefetch_stats {
    bool compose_enabled;
    uint64_t hints_total, hints_done, hint_position;   /* position: highest opened + 1 */
    uint64_t hints_opened;                             /* distinct hinted paths opened */
    uint64_t warmup_total, warmup_done, warmup_bytes, warmup_skipped;
    uint64_t auto_queued;
    uint64_t files_fetched, bytes_fetched;             /* put into the cache by prefetch */
    uint64_t files_already_cached, files_failed;
    uint64_t composes, compose_failures, composite_gets, direct_gets;
    uint64_t temps_deleted, temps_live, temps_swept;
    uint64_t buffers_reused, buffers_fresh;            /* fetch buffers from the pool / new */
    uint64_t kernel_evictions;  /* READs of small objects the kernel held (pages evicted) */
    uint64_t hints_retried;     /* hints looked at again after the first of those */
};

struct prefetcher;

int prefetch_new(const struct prefetch_config *config, struct prefetcher **out);
/* Stops the workers (work in progress finishes) and deletes this mount's temporary objects. */
void prefetch_free(struct prefetcher *p); /* accepts NULL */

/* Starts a new hint list (drops what is left of the previous one). */
void prefetch_hints_reset(struct prefetcher *p);
/* Appends paths to the hint list (capped at 10 million entries; more are dropped). */
void prefetch_hints_append(struct prefetcher *p, const char *const *paths, size_t count);
/* A file was opened for reading (advances the hint position when it is a hinted path). true
 * when the path is in the hint list. */
bool prefetch_note_open(struct prefetcher *p, const char *path);
/* The kernel evicted pages of an object it held (a READ came for it): until the next hint
 * list, hinted objects marked kernel_cached are fetched like any other (the page cache is
 * under pressure, so "opened before" no longer means "still there"), and the hints taken but
 * not opened yet are looked at again. */
void prefetch_note_kernel_eviction(struct prefetcher *p);
void prefetch_add_auto(struct prefetcher *p, const char *const *paths, size_t count);
void prefetch_add_warmup(struct prefetcher *p, const char *const *paths, size_t count);

void prefetch_get_stats(struct prefetcher *p, struct prefetch_stats *out);
/* The mount id in temporary object names (owned by p). */
const char *prefetch_mount_id(struct prefetcher *p);

#endif
