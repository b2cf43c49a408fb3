/* Batching of concurrent demand misses (io layer, issue 5 "What to prefetch" item 3): when many
 * readers miss small objects at about the same time (DataLoader workers opening different files
 * with no hints), their whole-object GETs are gathered for a short window and, when enough of
 * them arrive, fetched as one compose batch (sources pinned by generation) into a temporary
 * object, one GET of it, a delete, and a split into the readers' buffers.
 *
 * - The window opens at the first miss and closes after window_us, or at once when
 *   max_objects misses are waiting: a demand read never waits longer than the window before
 *   its request leaves.
 * - At the close, miss_batch_plan cuts the waiting misses (arrival order) into compose batches
 *   (compose_plan.h limits) and plain GETs: a batch of fewer than min_count objects is not
 *   worth a compose (compose + GET costs two round trips and three requests where the plain
 *   GETs cost one round trip), nor is a 0-byte object or one over the compose size limit.
 * - Failures fall back to plain GETs of the same pinned generations: a compose refused or
 *   failed, a composite GET failed, a split that does not check (length or CRC32C), or no
 *   memory for the composite. 403 turns compose off for this batcher.
 * - Temporary objects are named TEMP_PREFIX MOUNT_ID/mSEQ (the prefetcher's mount id, so a
 *   crashed mount's are swept by the next mount's prefetcher), created with
 *   ifGenerationMatch=0 and deleted as soon as their GET finished (or failed); miss_batch_free
 *   waits for batches and deletes in flight.
 *
 * Threads: miss_batch_submit may be called from any thread except the http engine thread; one
 * timer thread closes windows; compose, GET and delete completions run on the engine thread.
 * b->lock protects the waiting misses, the counters and the live-temporary count.
 * Ownership: the request's buf belongs to the caller and must stay valid until cb ran (exactly
 * once, like gcs_read_async); the name is copied. */
#ifndef FLUXFS_MISS_BATCH_H
#define FLUXFS_MISS_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fluxfs/compose_plan.h"
#include "fluxfs/gcs.h"
#include "fluxfs/membudget.h"

#define MISS_BATCH_MIN_COUNT_DEFAULT 4

struct miss_batch_config {
    struct gcs_client *client;       /* not owned */
    struct membudget *budget;        /* not owned: composite buffers (demand admission) */
    size_t reserve;                  /* passed to membudget_alloc */
    const char *temp_prefix;         /* e.g. MOUNT_PREFIX ".fluxfs/compose/" (copied) */
    const char *mount_id;            /* HOST-PID-RANDOM (copied) */
    unsigned window_us;              /* gathering window; > 0 */
    unsigned min_count;              /* fewest objects worth a compose; < 2 = 2 */
    struct compose_plan_config plan; /* batch_max_bytes is capped at 8 MiB (one GET) */
};

struct miss_batch_stats {
    uint64_t misses;    /* requests submitted */
    uint64_t windows;   /* windows closed */
    uint64_t composed;  /* misses served from a composite */
    uint64_t direct;    /* misses sent as plain GETs (too few, or not composable) */
    uint64_t fallbacks; /* misses fetched with plain GETs after a batch failed */
    uint64_t composes, compose_failures, composite_gets, temps_deleted, temps_live;
    bool compose_enabled;
};

struct miss_batcher;

/* 0 and *out, or -EINVAL. */
int miss_batch_new(const struct miss_batch_config *config, struct miss_batcher **out);
/* Sends what is waiting, waits for batches and temporary deletes in flight, frees. NULL ok. */
void miss_batch_free(struct miss_batcher *b);

/* Queues a whole-object read (req->offset 0, req->len >= size of a small object, pinned by
 * generation); cb(err, got, user) runs once, as for gcs_read_async. */
void miss_batch_submit(struct miss_batcher *b, const struct gcs_read_request *req, gcs_read_cb cb,
                       void *user);

void miss_batch_get_stats(struct miss_batcher *b, struct miss_batch_stats *out);

/* Pure: cuts count misses (arrival order) into batches (an array of at least count elements)
 * and returns how many: compose_plan's batches, with every BATCH_COMPOSE of fewer than
 * min_count objects and every BATCH_EMPTY turned into BATCH_DIRECT (each object a plain GET). */
size_t miss_batch_plan(const struct compose_plan_config *plan, unsigned min_count,
                       const struct compose_item *items, size_t count,
                       struct compose_batch *batches);

#endif
