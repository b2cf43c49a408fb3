/* Key-range arithmetic for parallel listing (core layer): split points between two object
 * names, so that pieces of a listing can be fetched concurrently with startOffset/endOffset.
 * Pure functions, no locks, no I/O.
 *
 * Cloud Storage orders names by their UTF-8 bytes, which is also code point order. A key space
 * turns a name into a number: the code points after a common base prefix, each mapped to a
 * digit through an alphabet learned from sample names (the first listing page), read as a
 * fixed-width number in radix 2*|alphabet|+3 (a digit for "end of name", one per alphabet
 * character and one per gap below or above each). Interpolating between two numbers and
 * turning the result back into a name gives split points spaced like the sample data, and
 * every point is built from real code points, so it is valid UTF-8 with no NUL byte.
 *
 * The mapping is approximate (the number has a fixed width), so every returned point is
 * checked exactly: lo < point < hi byte-wise and points strictly increasing. Ranges too narrow
 * to split give no points. Correctness of a parallel listing depends only on these checks;
 * the arithmetic only decides how balanced the pieces are. */
#ifndef FLUXFS_KEY_RANGE_H
#define FLUXFS_KEY_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef unsigned __int128 key_value;

struct key_space {
    char *base;         /* names are measured after this prefix (owned) */
    uint32_t *alphabet; /* sorted distinct code points > 0 (owned) */
    size_t alphabet_len;
    unsigned radix;  /* 2 * alphabet_len + 3 */
    unsigned digits; /* width of a value in digits; radix^digits <= 2^100 */
    key_value max;   /* radix^digits: the value of "beyond every name" */
};

/* Builds a key space measuring names after base, with an alphabet of the code points seen in
 * the samples after base (a default alphabet when there are none). Cleared with
 * key_space_clear (accepts zeroed structs). */
void key_space_init(struct key_space *space, const char *base, const char *const *samples,
                    size_t sample_count);
void key_space_clear(struct key_space *space);

/* The number for name; NULL means "no upper bound" (space->max). Names below base give 0,
 * names above every name starting with base give max. */
key_value key_space_value(const struct key_space *space, const char *name);
/* The name for a value (< max): base + code points. g_malloc'd. */
char *key_space_name(const struct key_space *space, key_value value);

/* Splits [lo, hi) (hi NULL = unbounded) into up to `pieces` pieces: writes at most pieces-1
 * split points (g_malloc'd, caller frees) to points[] and returns how many. Each point p
 * satisfies lo < p < hi byte-wise, they are strictly increasing, valid UTF-8, NUL-free.
 *
 * step_from: when not NULL, the start of the last page read up to lo; pieces are then no wider
 * than step_pages times that page's width (extrapolating the density of the names just seen),
 * or the even split when that is narrower. Listing names like "img00001234" then splits into
 * pieces holding a few pages each instead of one piece holding everything. */
size_t key_range_split(const struct key_space *space, const char *lo, const char *hi, size_t pieces,
                       const char *step_from, unsigned step_pages, char **points);
/* The same with the page's density sampled elsewhere: [sample_from, sample_to) held about one
 * page (key_range_split samples [step_from, lo)). Splitting ahead of a range nobody has read
 * yet uses the sample of the page it was extrapolated from. */
size_t key_range_split_sampled(const struct key_space *space, const char *lo, const char *hi,
                               size_t pieces, const char *sample_from, const char *sample_to,
                               unsigned step_pages, char **points);

/* Estimated width of [lo, hi) in the key space (comparable between ranges of one space). */
key_value key_range_width(const struct key_space *space, const char *lo, const char *hi);

#endif
