/* Sequential detection and window growth (see include/fluxfs/readahead.h). */
#include "fluxfs/readahead.h"

#include <string.h>

#include <glib.h>

void readahead_init(struct readahead_state *state)
{
    memset(state, 0, sizeof(*state));
}

static bool looks_sequential(const struct readahead_config *config,
                             const struct readahead_state *state, uint64_t offset)
{
    if (!state->started)
        return offset == 0;
    uint64_t slack = config->chunk ? config->chunk : 1;
    uint64_t low = state->next_offset > slack ? state->next_offset - slack : 0;
    /* Forward, a gap no larger than what this run has read is reordering; a larger one is a
     * skip (a zip reader hopping from one record header to the next), not a stream. */
    uint64_t ahead = MIN(slack, state->run_bytes);
    return offset >= low && offset <= state->next_offset + ahead;
}

/* The window of a stream that began with a jump, having read run bytes since. */
static uint64_t jumped_window(const struct readahead_config *config, size_t window, uint64_t run)
{
    uint64_t most = run / RA_JUMP_DIVISOR;
    (void)config;
    return window < most ? window : most;
}

/* The remembered stream that a read at [offset, offset + len) continues, or -1. */
static int continued_stream(const struct readahead_config *config,
                            const struct readahead_state *state, uint64_t offset)
{
    uint64_t slack = config->random_min ? config->random_min : 1;
    for (unsigned i = 0; i < RA_STREAMS; i++) {
        uint64_t next = state->streams[i].next_offset;
        if (next == 0)
            continue;
        uint64_t low = next > slack ? next - slack : 0;
        uint64_t ahead = MIN(slack, state->streams[i].run_bytes);
        if (offset >= low && offset <= next + ahead)
            return (int)i;
    }
    return -1;
}

/* Remembers the run a jump leaves behind (replacing the oldest). */
static void remember_stream(struct readahead_state *state)
{
    if (!state->started || state->next_offset == 0)
        return;
    for (unsigned i = 0; i < RA_STREAMS; i++) {
        if (state->streams[i].next_offset == state->next_offset) {
            state->streams[i].run_bytes = MAX(state->streams[i].run_bytes, state->run_bytes);
            return;
        }
    }
    unsigned slot = state->streams_head % RA_STREAMS;
    state->streams[slot].next_offset = state->next_offset;
    state->streams[slot].run_bytes = state->run_bytes;
    state->streams_head = (slot + 1) % RA_STREAMS;
}

static void finish_plan(struct readahead_state *state, uint64_t offset, uint64_t object_size,
                        struct readahead_plan *plan);

void readahead_on_read(const struct readahead_config *config, struct readahead_state *state,
                       uint64_t offset, size_t len, uint64_t object_size,
                       struct readahead_plan *plan)
{
    bool sequential = looks_sequential(config, state, offset);
    plan->sequential = sequential;
    plan->prefetch_start = plan->prefetch_len = plan->prefetch_stride = 0;
    plan->prefetch_count = 0;
    plan->exact = false;
    uint64_t end = offset + len;
    if (!state->started && offset > 0 && end + config->random_min >= object_size)
        state->tail_first = offset;
    int stream = sequential || !state->columnar ? -1 : continued_stream(config, state, offset);
    if (stream >= 0) {
        /* Another stream of this handle goes on (interleaved column chunks): its own ramp;
         * the current run, its stride and window are left as they are. */
        uint64_t run = state->streams[stream].run_bytes + len;
        state->streams[stream].run_bytes = run;
        if (end > state->streams[stream].next_offset)
            state->streams[stream].next_offset = end;
        plan->sequential = true;
        plan->exact = true;
        plan->fetch_end = end + jumped_window(config, config->window_max, run);
        finish_plan(state, offset, object_size, plan);
        return;
    }
    if (sequential && end <= state->touch_end) {
        /* Still inside the neighbourhood of a skip that a toucher made (the mmap read-around
         * of a page it touched): no window. Rolling one on would fetch each tensor whole at
         * the touch, hundreds of MiB into fresh memory long before the reader wants them. */
        plan->fetch_end = end;
        if (end > state->next_offset)
            state->next_offset = end;
        state->run_bytes += len;
    } else if (sequential) {
        size_t grown = state->window == 0 ? config->chunk : state->window * 2;
        state->window = grown > config->window_max ? config->window_max : grown;
        plan->fetch_end = end + state->window;
        if (state->jumped && state->columnar) {
            plan->fetch_end = end + jumped_window(config, state->window, state->run_bytes + len);
            plan->exact = true;
        }
        state->touch_end = 0;
        if (end > state->next_offset || !state->started)
            state->next_offset = end;
        state->run_bytes += len;
    } else {
        /* Halved, not dropped: a reader hopping from header to header and streaming a little
         * after each (a zip reader, mmap faults of tensors in turn) gets its window back at
         * the next sequential read instead of ramping from one chunk at every hop (a round
         * trip per hop on the application's critical path); a reader that stays random
         * decays to nothing within a few reads. The skip itself plans no readahead. */
        state->window /= 2;
        uint64_t previous_run = state->run_bytes; /* what was read after the previous skip */
        remember_stream(state);
        state->run_bytes = len;
        state->jumped = offset != 0;
        /* A footer-indexed file (Parquet, ORC): the first read was its tail, and a jump
         * after it, before any jump to offset 0, lands more than 4 x random_min before that
         * read (a column chunk). A zip reader (torch.load) jumps from its tail to offset 0,
         * perhaps by its central directory just before the tail: it does not count. */
        if (state->tail_first > 0 && offset == 0)
            state->tail_first = 0;
        else if (state->tail_first > 0 &&
                 offset + 4 * (uint64_t)config->random_min < state->tail_first)
            state->columnar = true;
        uint64_t wanted = len > config->random_min ? len : config->random_min;
        plan->fetch_end = offset + wanted;
        state->next_offset = end;
        state->touch_end = 0;
        /* Skips forward by a steady stride (a reader touching tensor after tensor of equal
         * size): the neighbourhoods of the next skips are fetched ahead, so those hops cost
         * no round trip. Two strides within a quarter of each other make a pattern; each
         * further one in it looks two skips further ahead (up to window_max bytes of
         * neighbourhoods: a toucher outruns one round trip by many hops); anything else
         * only records the stride. */
        uint64_t stride =
            state->skip_started && offset > state->last_skip ? offset - state->last_skip : 0;
        uint64_t tolerance = state->skip_stride / 4;
        if (stride > 0 && state->skip_stride > 0 && stride + tolerance >= state->skip_stride &&
            stride <= state->skip_stride + tolerance) {
            /* A reader that read no more than a quarter of the stride (and 4 x random_min)
             * after its previous skip touches rather than streams (safetensors' first pass:
             * the kernel's 2 MiB read-around of each tensor's first page;
             * torch.load(mmap=True): 3 MiB of readahead at each record header). Its
             * neighbourhood is what it read then; a streamer's is 2 x random_min, the start
             * of its stream. */
            bool touched =
                previous_run <= stride / 4 && previous_run <= 4 * (uint64_t)config->random_min;
            bool ahead = state->skip_depth > 0; /* this skip's neighbourhood was prefetched */
            uint64_t neighbourhood = 2 * (uint64_t)config->random_min;
            if (touched && previous_run > neighbourhood)
                neighbourhood = (previous_run + config->random_min - 1) / config->random_min *
                                config->random_min;
            /* From a random_min before the landing point: the kernel's read-around of a
             * touched page arrives as two reads in either order, so the skip the stride is
             * measured from is the first or the second half of the neighbourhood. */
            uint64_t span = neighbourhood + config->random_min;
            uint64_t most = config->window_max / span;
            if (most < 1)
                most = 1;
            state->skip_depth =
                state->skip_depth + 2 > most ? (unsigned)most : state->skip_depth + 2;
            if (state->skip_depth > 1 && stride < span)
                state->skip_depth = 1; /* the spans would overlap: one covers it */
            uint64_t lands = offset + stride;
            plan->prefetch_start = lands > config->random_min ? lands - config->random_min : 0;
            plan->prefetch_len = span;
            plan->prefetch_stride = stride;
            plan->prefetch_count = state->skip_depth;
            if (touched && ahead)
                state->touch_end = offset + neighbourhood;
        } else {
            state->skip_depth = 0;
        }
        state->skip_stride = stride;
        state->last_skip = offset;
        state->skip_started = true;
    }
    finish_plan(state, offset, object_size, plan);
}

static void finish_plan(struct readahead_state *state, uint64_t offset, uint64_t object_size,
                        struct readahead_plan *plan)
{
    /* Targets past the end of the object are dropped, the last one clipped. */
    while (plan->prefetch_count > 0 &&
           plan->prefetch_start + (plan->prefetch_count - 1) * plan->prefetch_stride >= object_size)
        plan->prefetch_count--;
    if (plan->prefetch_count == 0)
        plan->prefetch_start = plan->prefetch_len = plan->prefetch_stride = 0;
    state->started = true;
    plan->fetch_start = offset;
    if (plan->fetch_end > object_size)
        plan->fetch_end = object_size;
    if (plan->fetch_start > plan->fetch_end)
        plan->fetch_start = plan->fetch_end;
}
