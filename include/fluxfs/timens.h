/* File times as int64 nanoseconds since the epoch, and the conversions to and from seconds +
 * nanoseconds that every layer uses.
 *
 * int64 nanoseconds reach from 1677-09-21 to 2262-04-11. A time outside that range (touch -d
 * 2400-01-01, an object's goog-reserved-file-mtime or gcsfuse_mtime written by another tool)
 * is clamped to the nearest representable whole second instead of overflowing (signed overflow
 * is undefined behaviour and stored negative times). Splitting rounds toward minus infinity,
 * so times before 1970 give a tv_nsec in [0, 1e9) as struct timespec requires. */
#ifndef FLUXFS_TIMENS_H
#define FLUXFS_TIMENS_H

#include <stdint.h>

#define TIMENS_PER_S INT64_C(1000000000)
/* The whole seconds whose nanoseconds (plus up to 999,999,999) fit in int64. */
#define TIMENS_MAX_S (INT64_MAX / TIMENS_PER_S - 1)
#define TIMENS_MIN_S (INT64_MIN / TIMENS_PER_S + 1)

/* seconds + nanoseconds (any sign; nanoseconds are folded in) as clamped nanoseconds. */
static inline int64_t timens_from_parts(int64_t seconds, int64_t nanoseconds)
{
    seconds += nanoseconds / TIMENS_PER_S; /* |nanoseconds / 1e9| < 1e10: no overflow below */
    nanoseconds %= TIMENS_PER_S;
    if (seconds > TIMENS_MAX_S)
        return TIMENS_MAX_S * TIMENS_PER_S;
    if (seconds < TIMENS_MIN_S)
        return TIMENS_MIN_S * TIMENS_PER_S;
    return seconds * TIMENS_PER_S + nanoseconds;
}

/* Whole seconds (rounded toward minus infinity) and the nanoseconds in [0, 1e9) after them. */
static inline void timens_split(int64_t ns, int64_t *seconds, int64_t *nanoseconds)
{
    int64_t s = ns / TIMENS_PER_S, rest = ns % TIMENS_PER_S;
    if (rest < 0) {
        s--;
        rest += TIMENS_PER_S;
    }
    *seconds = s;
    *nanoseconds = rest;
}

#endif
