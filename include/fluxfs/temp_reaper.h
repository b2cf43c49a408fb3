/* Deleting compose temporaries until they are gone: fluxfs promises never to leave one behind,
 * and under a bucket's rate limit a delete can run out of the gcs layer's retries (429 after
 * 429). A delete that failed for a reason that may pass (-EIO: 429/5xx after the retries, a
 * reset; -ETIMEDOUT) is sent again after a pause that doubles from 1 s to 32 s (jittered, so a
 * fleet of mounts does not retry in step), until it succeeds or finds nothing (404). Other
 * errors (403, ...) end it: the unmount sweep and the next mount's sweep try again.
 *
 * Threads: temp_reaper_delete may be called from any thread, the engine thread included. The
 * done callback runs once per delete, on the engine thread (or the caller's when the client is
 * shutting down), with 0 (gone) or the last error; it must not block. One thread of the reaper's
 * own holds the pauses. Lock: reaper->lock, a leaf (nothing else is taken under it; done
 * callbacks and gcs calls run outside it). */
#ifndef FLUXFS_TEMP_REAPER_H
#define FLUXFS_TEMP_REAPER_H

#include <stdint.h>

#include "fluxfs/gcs.h"

struct temp_reaper;

struct temp_reaper_stats {
    uint64_t resent;   /* deletes sent again after a failure */
    uint64_t waiting;  /* deletes paused before their next try, now */
    uint64_t given_up; /* deletes ended by an error that retrying would not change */
};

struct temp_reaper *temp_reaper_new(struct gcs_client *client);
/* Deletes name (generation 0 = whatever is there) until it is gone; done(err, user) once. */
void temp_reaper_delete(struct temp_reaper *reaper, const char *name, int64_t generation,
                        gcs_done_cb done, void *user);
/* Ends the pauses: every delete waiting is sent at once, and from now on a failure is final
 * (the caller's unmount sweep follows). Call before waiting for the last done callbacks. */
void temp_reaper_stop(struct temp_reaper *reaper);
void temp_reaper_get_stats(struct temp_reaper *reaper, struct temp_reaper_stats *out);
/* After every done callback has run. Accepts NULL. */
void temp_reaper_free(struct temp_reaper *reaper);

/* The pause before try n+1 of a delete (n >= 1 failed tries), for random in [0, 1): half to
 * all of min(32, 2^(n-1)) seconds. Pure, unit-tested. */
double temp_reaper_pause_s(unsigned failed_tries, double random);

#endif
