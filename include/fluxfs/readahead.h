/* Readahead window logic (io layer): decides, for each read of an open file, which byte range
 * should be fetched or in flight. Pure: no locks (the reader holds its own lock around it),
 * no I/O.
 *
 * Sequential access (a read starting at or near where the previous one ended; the first read
 * at offset 0 counts) opens a window of one chunk and doubles it on every further sequential
 * read up to window_max; the plan then covers the read plus the window after it. Any other read
 * is random: the plan covers the read, at least random_min bytes, and the window halves (a
 * stream that resumes after a skip gets it back at once; steady random reads decay it to
 * nothing). Random reads that skip forward by a steady stride (within a quarter) also plan
 * the neighbourhood of each of the next skips (from random_min before where it should land
 * to 2 x random_min after): two skips ahead at the first repeat of the stride, two more at
 * each further one, up to window_max bytes of neighbourhoods. A reader that read no more than a neighbourhood after its previous
 * skip is touching (safetensors' first pass faults the first page of each tensor through its
 * mmap; the kernel reads around it): its reads that continue the skip within the
 * neighbourhood open no window, so touching every tensor does not fetch every tensor whole
 * (into fresh memory, long before the reader wants it). A reader that streams after its
 * skips gets its window as before.
 * Reads near the previous end tolerate reordering, because the kernel issues several
 * asynchronous reads of one file at once and they can arrive out of order: backwards by up to
 * one chunk, forwards by up to one chunk but never by more than the run has read so far. A
 * forward jump larger than what was read is a skip, not a stream (a zip reader reading record
 * headers 4-31 MiB apart, DCP jumping over items): it is random, so readahead does not roll on
 * to the end of the file.
 *
 * Columnar readers (Parquet through pyarrow, Hugging Face datasets) read the column chunks they
 * want with one positional read each; the kernel splits such a read into FUSE reads of at most
 * 1 MiB that arrive in order. So that reading 2 columns of 10 fetches about those columns:
 * - the random fetch minimum adapts per handle (random_fetch): when the bytes a random fetch
 *   got beyond its read were never read before the next skip, it shrinks to what the run
 *   used (not below RANDOM_FETCH_FLOOR); it doubles back towards random_min only when a run
 *   of reads smaller than it went past its end (a small-read streamer that it saves requests);
 * - a run after a skip opens no window until it has read YOUNG_RUN_FACTOR x random_min: its
 *   reads fetch what they ask (the tail piece of a split read, smaller than the piece before
 *   it, exactly; a same-size read at least random_fetch), one request per read. A window the
 *   handle had before the skip (halved) resumes at once as before; a run from offset 0 opens
 *   its window at once as before. */
#ifndef FLUXFS_READAHEAD_H
#define FLUXFS_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct readahead_config {
    size_t chunk;        /* size of one ranged GET in the window */
    size_t window_max;   /* largest window beyond the read */
    size_t random_min;   /* smallest fetch for a random read */
};

struct readahead_state {
    uint64_t next_offset;  /* where a sequential reader would read next */
    size_t window;         /* current window; 0 = random mode */
    uint64_t run_bytes;    /* bytes read since the run began (the last random read) */
    uint64_t last_skip;    /* offset of the last random read */
    uint64_t skip_stride;  /* distance from the one before to it (0: none, or backwards) */
    unsigned skip_depth;   /* skips ahead prefetched while the stride holds (0: no pattern) */
    uint64_t touch_end;    /* a toucher's skip: sequential reads ending by here open no
                              window (0: none) */
    size_t random_fetch;   /* adaptive least fetch of a random read (0: random_min) */
    uint64_t random_fetch_end; /* end of the last random read's fetch (0: none) */
    size_t last_len;       /* length of the previous read */
    size_t run_max_len;    /* largest read since the run began */
    bool skip_started;
    bool started;
};

/* Smallest adaptive random fetch, and how long (x random_min) a run after a skip reads before
 * it opens a window. */
#define RANDOM_FETCH_FLOOR (64u << 10)
#define YOUNG_RUN_FACTOR 4u

struct readahead_plan {
    bool sequential;
    uint64_t fetch_start;  /* == the read's offset */
    uint64_t fetch_end;    /* exclusive, <= object size */
    size_t demand_min;     /* least bytes the read's own GET should fetch from its offset */
    /* Random reads skipping forward by a steady stride: prefetch_count neighbourhoods of
     * prefetch_len bytes, at prefetch_start + i * prefetch_stride (where the next skips should
     * land), to fetch speculatively; the last may reach past the object's end (clip it).
     * prefetch_count 0: nothing. */
    uint64_t prefetch_start, prefetch_len, prefetch_stride;
    unsigned prefetch_count;
};

void readahead_init(struct readahead_state *state);
void readahead_on_read(const struct readahead_config *config, struct readahead_state *state,
                       uint64_t offset, size_t len, uint64_t object_size,
                       struct readahead_plan *plan);

#endif
