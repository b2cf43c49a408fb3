/* Additive increase, multiplicative decrease of one limit, for sharing a bucket's request rate
 * with other mounts: on a throttle (429) the limit is multiplied by a factor below 1, on a
 * success it grows by a fixed step, within [min, max]. Pure: no clock, no randomness, no lock
 * (the owner's lock protects it).
 *
 * Two uses in the prefetcher: the compose share (the fraction of compose-worthy batches that are
 * composed, the rest fetched with plain GETs: composes are object writes, which a bucket admits
 * at a far lower rate than reads) and the number of prefetch batches in flight. aimd_allowed
 * spreads a fractional share evenly and deterministically: with share 0.25 every fourth call
 * answers true. */
#ifndef FLUXFS_AIMD_H
#define FLUXFS_AIMD_H

#include <stdbool.h>
#include <stdint.h>

struct aimd {
    double value; /* the limit now, in [min, max] */
    double min, max;
    double increase; /* added on a success */
    double decrease; /* factor in (0, 1) applied on a throttle */
    double credit;   /* aimd_allowed's accumulator, in [0, 1) after a call */
    uint64_t throttles, successes;
};

/* Starts at max. Requires 0 <= min <= max, 0 < decrease < 1, increase > 0. */
void aimd_init(struct aimd *state, double min, double max, double increase, double decrease);
void aimd_on_success(struct aimd *state);
/* For a count of requests in flight, one of which succeeded: the limit grows by increase / value
 * (at least 1 in the divisor), so by about increase per round of value successes: TCP's
 * congestion avoidance. aimd_on_success grows by increase per success, and a mount with more in
 * flight finishes more batches a second, so its limit grew faster the higher it was: mounts
 * sharing a bucket drifted apart (one at 7 of 8 in flight, the others at 1: bench/fleet.py)
 * where the per-round increase brings them together (equal steps up, proportional cuts). */
void aimd_on_window_success(struct aimd *state);
void aimd_on_throttle(struct aimd *state);
/* The inverse of a throttle: the limit divided by the factor, up to max (not counted). */
void aimd_on_restore(struct aimd *state);
/* For a share in [0, 1]: whether this one of a run of calls is inside the share (true for a
 * fraction value of the calls, spread evenly). Always true at 1. */
bool aimd_allowed(struct aimd *state);
/* For a count: the whole limit now, at least 1 when max >= 1. */
unsigned aimd_limit(const struct aimd *state);

/* Weighing a bucket's two limits after one batch. A composed batch of n objects costs two
 * writes (the compose, the temporary's delete) and one read; fetched with plain GETs it costs n
 * reads and no write. Cutting the compose share on write 429s is right only while the read
 * budget has room: once reads are refused too, each batch moved off compose needs ~31x the
 * reads, and the mount that composes least falls behind under the read limit (the fleet of
 * bench/fleet.py, ratio 2-20). So, with reads tight, write 429s lower the batches in flight
 * instead (reads and writes back off jointly, the share held), and read 429s undo a cut of the
 * share (AIMD_RESTORE: composing saves reads, so the share goes back as fast as it fell). */
enum aimd_step { AIMD_HOLD, AIMD_RAISE, AIMD_RESTORE, AIMD_CUT };

struct aimd_weighed {
    enum aimd_step share, concurrency;
};

struct aimd_signals {
    bool write_refused;  /* 429s to writes (composes, deletes) while the batch ran */
    bool read_refused;   /* 429s to reads while the batch ran */
    bool compose_worthy; /* the batch was one to compose (planned as a compose batch) */
    bool reads_tight;    /* the batches in flight are below their max (cut for reads, not
                          * grown back yet): the read budget has no room to take work from
                          * composes */
    bool share_at_min;   /* the compose share cannot fall further */
};

/* Pure: the step for each limit. */
struct aimd_weighed aimd_weigh(const struct aimd_signals *signals);
/* A compose of a temporary refused for the write rate (its only attempt: nothing made). With
 * reads to spare its batch comes by plain GETs at once (0); with reads tight those ~31 GETs
 * would each meet the read limit, so the compose is sent again after a pause (the compose rate
 * falls, the batch keeps its size): about 100, 200, 400 ms after the 1st..3rd refusal, 800 ms
 * after the 4th..AIMD_COMPOSE_RETRIES-th, then 0 (plain GETs after all). Each pause is spread
 * over half to one and a half times its value by random_unit (in [0, 1)): the composes of many
 * mounts refused in one burst would otherwise all be sent again at one instant. The batches
 * that fall back cost the bucket ~31 reads each under a read limit already met, and take
 * seconds: with 4 tries, 3 to 10 batches in 94 fell back per mount and the unluckiest mounts
 * fetched half the files of the luckiest (bench/fleet.py, 8 mounts all at 1 batch in flight:
 * the write rate is a lottery per attempt, the fallback a heavy penalty). Pure. */
#define AIMD_COMPOSE_RETRIES 8
unsigned aimd_compose_retry_ms(bool reads_tight, unsigned refusals, double random_unit);
/* Whether the batches in flight are below their max: aimd_signals.reads_tight. */
bool aimd_below_max(const struct aimd *state);

#endif
