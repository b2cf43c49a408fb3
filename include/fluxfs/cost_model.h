/* What compose costs on a given bucket, and whether `--compose auto` uses it.
 *
 * The small-file prefetcher composes up to 32 objects into a temporary object, GETs it once and
 * deletes it. On Cloud Storage that temporary is not free when the bucket keeps deleted objects
 * (soft delete, 7 days by default), forbids deleting them (a retention policy, a default
 * event-based hold), or bills a minimum storage duration (Nearline/Coldline/Archive; avoided
 * here by creating temporaries as STANDARD, gcs_temporary_attrs). The list prices used for the
 * estimate are here, in one place (the emulator's README has the same table, dated).
 *
 * compose_decide is pure: the caller reads the bucket's settings (gcs_bucket_get_config) and
 * logs the decision's reason once. */
#ifndef FLUXFS_COST_MODEL_H
#define FLUXFS_COST_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "fluxfs/gcs.h"

/* The list prices are gcs.h's (one table). */
#define COST_MONTH_SECONDS          GCS_PRICE_MONTH_SECONDS
#define COST_STANDARD_PER_GIB_MONTH GCS_PRICE_STANDARD_PER_GIB_MONTH
#define COST_CLASS_A_PER_1000       GCS_PRICE_CLASS_A_PER_1000
#define COST_CLASS_B_PER_1000       GCS_PRICE_CLASS_B_PER_1000

enum compose_mode { COMPOSE_MODE_AUTO, COMPOSE_MODE_ON, COMPOSE_MODE_OFF };

struct compose_decision {
    bool on;
    /* --compose auto on a bucket that bills deleted temporaries (soft delete): each batch is
     * composed only when compose_cheaper says so, at this many dollars per GiB composed. 0:
     * every batch may be composed (no soft delete, or --compose on). */
    double per_batch_extra_per_gib;
    char reason[384]; /* e.g. "soft delete 7 d: each temporary is billed ~7 days after its
                         delete, ~$0.0047 per GiB composed" */
};

/* Dollars one GiB of temporaries costs beyond the reads: soft-deleted STANDARD storage for the
 * bucket's soft delete period (0 without soft delete). */
double compose_extra_dollars_per_gib(int64_t soft_delete_seconds);

/* List-price dollars of reading a batch of count objects of bytes in all: composed (one
 * compose, class A; one GET of the temporary, class B; its delete is free; the temporary's
 * bytes kept at extra_per_gib after the delete) or by one GET each (class B). */
double compose_batch_dollars(uint64_t bytes, double extra_per_gib);
double direct_batch_dollars(size_t count);

/* Whether composing the batch costs fewer dollars than its GETs (never for one object). On a
 * 7-day soft delete bucket a batch of 32 is cheaper composed below about 52 KiB per object. */
bool compose_cheaper(size_t count, uint64_t bytes, double extra_per_gib);

/* config: the bucket's settings, or NULL when they could not be read (get_error: the negative
 * errno of buckets.get, e.g. -EACCES); then auto assumes the costly case (off). */
void compose_decide(enum compose_mode mode, const struct gcs_bucket_config *config, int get_error,
                    struct compose_decision *out);

#endif
