/* The prefetcher (io layer): fills the content cache with small objects before they are read,
 * compose-batched (compose_plan.h) so that up to 32 objects cost one compose, one GET and one
 * delete instead of 32 GETs.
 *
 * Work comes from three queues, taken in this order by a fixed set of worker threads:
 *   1. order hints (prefetch_hints_*): the exact upcoming read order, one list per writing
 *      process (an owner: a DDP rank's main process each). Lists are served round-robin, one
 *      item of each list with work per turn. Item i of a list is fetched only while
 *      i < (highest item of that list opened so far) + lookahead, and while fewer than that
 *      list's share (three quarters of the cache's capacity divided among the lists not read
 *      to their end) is fetched and not opened yet, so shuffled epochs read at bulk speed
 *      without caching the whole dataset or evicting what was fetched. A list whose owner has
 *      exited is dropped (checked about once a second and at every stats snapshot);
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
    bool kernel_cached; /* the kernel's page cache held this version (opened before): the
                           probe callback is asked whether it still does */
    uint64_t inode;     /* the resolver's own handle for the probe (an inode number) */
};
/* 0 and *out for a regular file, else a negative errno (the path is skipped). Called from
 * worker threads; may block on the network. */
typedef int (*prefetch_resolve_fn)(const char *path, void *user, struct prefetch_object *out);
/* Whether the kernel still holds the pages of a kernel_cached object (its first page: reclaim
 * takes a file's oldest pages first). Called from worker threads before any cache entry is
 * marked pending; may block briefly. NULL: kernel_cached objects are never fetched. */
typedef bool (*prefetch_probe_fn)(const struct prefetch_object *object, void *user);

/* The process that wrote a hint list: its thread-group id and start time (clock ticks after
 * boot, field 22 of /proc/PID/stat; 0 when unknown), so a reused pid is not taken for it.
 * pid 0: a writer the kernel could not name (its list lives until replaced). */
struct prefetch_hint_owner {
    int pid;
    uint64_t start_time;
};
/* The owner of the process (or thread) pid, as /proc shows it. Always fills *out. */
void prefetch_hint_owner_of(int pid, struct prefetch_hint_owner *out);
/* Whether owner still runs: the same process (start time), not a reused pid, not a zombie. */
bool prefetch_hint_owner_alive(const struct prefetch_hint_owner *owner);

struct prefetch_config {
    struct gcs_client *client;   /* not owned */
    struct content_cache *cache; /* not owned */
    struct membudget *budget;    /* not owned */
    size_t reserve;              /* budget bytes left free for demand reads */
    const char *temp_prefix;     /* e.g. MOUNT_PREFIX ".fluxfs/compose/" */
    bool compose;                /* --compose */
    /* --compose auto on a soft delete bucket: a batch is composed only when compose_cheaper
     * (cost_model.h) at these dollars per GiB composed; 0: no per-batch cost check. */
    double compose_extra_per_gib;
    struct compose_plan_config plan;
    uint64_t max_object_size; /* larger objects are not prefetched (the reader does not
                                 serve them from the cache) */
    unsigned lookahead;       /* hinted files ahead of the reader; 0 = 1024 */
    unsigned workers;         /* 0 = 8 */
    prefetch_resolve_fn resolve;
    prefetch_probe_fn probe; /* may be NULL */
    void *resolve_user;      /* for resolve and probe */
};

struct prefetch_stats {
    bool compose_enabled;
    /* Hint counters, summed over the live lists: entries, entries processed (fetched, found
     * cached or held, skipped as too large, failed), entries that resolved to nothing (no such
     * file, a directory, an invalid name); done + missing <= total. position: each list's
     * highest opened entry + 1; opened: distinct hinted entries opened. */
    uint64_t hint_lists;
    uint64_t hints_total, hints_done, hints_missing, hint_position;
    uint64_t hints_opened;
    uint64_t hint_lists_dropped; /* lists dropped because their writer exited */
    /* Warm-up: paths queued, paths handled; of those, fetched or found cached (warmed; bytes:
     * theirs only), skipped for want of room in the cache, too large for it
     * (--small-file-threshold), failed, resolving to no file; paths dropped from the queue
     * because the session that asked for them ended (prefetch_cancel_warmup). */
    uint64_t warmup_total, warmup_done, warmup_bytes, warmup_skipped;
    uint64_t warmup_fetched, warmup_cached, warmup_too_large, warmup_failed, warmup_missing;
    uint64_t warmup_cancelled;
    uint64_t auto_queued;
    uint64_t files_fetched, bytes_fetched; /* put into the cache by prefetch */
    uint64_t files_already_cached, files_failed;
    uint64_t composes, compose_failures, composite_gets, direct_gets;
    uint64_t temps_deleted, temps_live, temps_swept;
    uint64_t buffers_reused, buffers_fresh; /* fetch buffers from the pool / new */
    uint64_t kernel_evictions;    /* READs of small objects the kernel held (pages evicted) */
    uint64_t kernel_probes;       /* kernel_cached objects the probe was asked about */
    uint64_t kernel_probe_misses; /* ... and found evicted (fetched again) */
    /* Sharing the bucket's rate with other mounts (AIMD, aimd.h): the share of compose-worthy
     * batches composed now (0..1) and how often it was lowered, the batches in flight allowed
     * now (1..concurrency_max) and how often that was lowered, the compose-worthy batches
     * fetched with plain GETs because of the share, and the mount's attempts answered 429
     * (reads: GET/HEAD; writes: the rest), retried or not. */
    double compose_share;
    uint64_t compose_share_decreases;
    unsigned concurrency_limit, concurrency_max;
    uint64_t concurrency_decreases;
    uint64_t batches_not_composed;
    uint64_t batches_cheaper_direct; /* not composed: their GETs cost fewer dollars */
    uint64_t rate_limited_reads, rate_limited_writes;
    /* Composes refused with 429 at their last attempt (the first, or with reads tight the
     * last of up to 5 spaced 100-800 ms apart: aimd_compose_retry_ms; the batch was then
     * fetched with plain GETs; nothing to delete), and temporaries' deletes sent again after they
     * ran out of retries (temp_reaper.h), in all and paused now. */
    uint64_t composes_throttled;
    uint64_t temps_delete_resent, temps_delete_waiting;
};

/* One live hint list, for the status file. */
struct prefetch_hint_list_stats {
    struct prefetch_hint_owner owner;
    uint64_t total, done, missing, opened, position;
};

struct prefetcher;

int prefetch_new(const struct prefetch_config *config, struct prefetcher **out);
/* Stops the workers (work in progress finishes) and deletes this mount's temporary objects. */
void prefetch_free(struct prefetcher *p); /* accepts NULL */

/* Starts a new, empty hint list for owner, replacing that owner's previous list only (other
 * owners' lists go on). -ENOSPC when PREFETCH_MAX_HINT_LISTS lists of live owners exist. */
int prefetch_hints_reset(struct prefetcher *p, const struct prefetch_hint_owner *owner);
/* Appends paths to owner's list (made when there is none). All lists together hold at most
 * 10 million entries; more are dropped. -ENOSPC as above. */
int prefetch_hints_append(struct prefetcher *p, const struct prefetch_hint_owner *owner,
                          const char *const *paths, size_t count);
#define PREFETCH_MAX_HINT_LISTS 1024
/* A file was opened for reading (advances the position of every list holding the path). true
 * when some list holds it. */
bool prefetch_note_open(struct prefetcher *p, const char *path);
/* The kernel evicted pages of an object it held (a READ came for it). From then on, until
 * they are replaced, the live lists' kernel_cached objects are probed (prefetch_probe_fn)
 * before being passed over, and the entries taken before and not opened yet are taken again
 * to be probed: only what the kernel no longer holds is fetched again. */
void prefetch_note_kernel_eviction(struct prefetcher *p);
void prefetch_add_auto(struct prefetcher *p, const char *const *paths, size_t count);
/* Queues paths to warm; session (non-zero) names the asker for prefetch_cancel_warmup. */
void prefetch_add_warmup(struct prefetcher *p, uint64_t session, const char *const *paths,
                         size_t count);
/* Drops the paths session queued that no worker has taken yet; returns how many. */
size_t prefetch_cancel_warmup(struct prefetcher *p, uint64_t session);

void prefetch_get_stats(struct prefetcher *p, struct prefetch_stats *out);
/* The live hint lists (oldest first): a g_malloc'd array in *out, *count entries. */
void prefetch_get_hint_lists(struct prefetcher *p, struct prefetch_hint_list_stats **out,
                             size_t *count);
/* The mount id in temporary object names (owned by p). */
const char *prefetch_mount_id(struct prefetcher *p);

#endif
