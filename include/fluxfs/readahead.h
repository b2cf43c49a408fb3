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
 * each further one, up to window_max bytes of neighbourhoods. A reader that read no more than a
 * neighbourhood after its previous skip is touching (safetensors' first pass faults the first page
 * of each tensor through its mmap; the kernel reads around it): its reads that continue the skip
 * within the neighbourhood open no window, so touching every tensor does not fetch every tensor
 * whole (into fresh memory, long before the reader wants it). A reader that streams after its skips
 * gets its window as before. Reads near the previous end tolerate reordering, because the kernel
 * issues several asynchronous reads of one file at once and they can arrive out of order: backwards
 * by up to one chunk, forwards by up to one chunk but never by more than the run has read so far. A
 * forward jump larger than what was read is a skip, not a stream (a zip reader reading record
 * headers 4-31 MiB apart, DCP jumping over items): it is random, so readahead does not roll on
 * to the end of the file.
 *
 * Columnar readers (Parquet, ORC: the footer first, then the column chunks wanted, skipping the
 * others) are told by their first reads: a handle whose first read was the file's tail (within
 * random_min of its end) and that then jumps, before any jump to offset 0, to more than
 * 4 x random_min before that read (or whose caller says the file's first read, through
 * another handle, was its tail). A zip reader (torch.load) reads its tail, then its central
 * directory just before it, then jumps to offset 0: it is not one. In a columnar handle every
 * stream that began with a jump ramps its window from what it has read since the jump: at most
 * a RA_JUMP_DIVISOR-th of it, the plan clipped to fetch_end (exact), so a stream that stops at
 * the end of its column chunk leaves at most 1/RA_JUMP_DIVISOR of it fetched for nothing. pyarrow
 * reads several chunks at once from parallel threads through one handle, so their reads
 * interleave: the last RA_STREAMS runs left behind by a jump are remembered, and a read that
 * continues one of them (within random_min of where it ended) continues that stream with its
 * own ramp instead of counting as another jump. Other handles (checkpoint loads hopping from
 * record to record) keep the windows described above. */
#ifndef FLUXFS_READAHEAD_H
#define FLUXFS_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Streams remembered beside the current run (interleaved column chunks). */
#define RA_STREAMS 8
/* A stream that began with a jump reads ahead at most 1/RA_JUMP_DIVISOR of what it has read. */
#define RA_JUMP_DIVISOR 32

struct readahead_config {
    size_t chunk;      /* size of one ranged GET in the window */
    size_t window_max; /* largest window beyond the read */
    size_t random_min; /* smallest fetch for a random read */
};

struct readahead_state {
    uint64_t next_offset; /* where a sequential reader would read next */
    size_t window;        /* current window; 0 = random mode */
    uint64_t run_bytes;   /* bytes read since the run began (the last random read) */
    uint64_t last_skip;   /* offset of the last random read */
    uint64_t skip_stride; /* distance from the one before to it (0: none, or backwards) */
    unsigned skip_depth;  /* skips ahead prefetched while the stride holds (0: no pattern) */
    uint64_t touch_end;   /* a toucher's skip: sequential reads ending by here open no
                             window (0: none) */
    bool skip_started;
    bool started;
    bool jumped;         /* the current run began with a jump (not at offset 0) */
    bool columnar;       /* read footer first, then jumped into the file: remembered
                            streams are followed, each that began with a jump ramps from
                            its length */
    uint64_t tail_first; /* the first read was the file's tail, at this offset, and no jump
                            to offset 0 came since (0: not so); the caller may set it before
                            the first read (another handle read the tail first) */
    struct {
        uint64_t next_offset; /* where it would read next; 0: slot unused */
        uint64_t run_bytes;
    } streams[RA_STREAMS]; /* runs left behind by a jump, most recent at streams_head - 1 */
    unsigned streams_head;
};

struct readahead_plan {
    bool sequential;
    bool exact; /* the window must end at fetch_end: no GET rounded up to a chunk boundary */
    uint64_t fetch_start; /* == the read's offset */
    uint64_t fetch_end;   /* exclusive, <= object size */
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
