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

void readahead_on_read(const struct readahead_config *config, struct readahead_state *state,
                       uint64_t offset, size_t len, uint64_t object_size,
                       struct readahead_plan *plan)
{
    bool sequential = looks_sequential(config, state, offset);
    plan->prefetch_start = plan->prefetch_end = 0;
    uint64_t end = offset + len;
    if (sequential) {
        size_t grown = state->window == 0 ? config->chunk : state->window * 2;
        state->window = grown > config->window_max ? config->window_max : grown;
        plan->fetch_end = end + state->window;
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
        state->run_bytes = len;
        uint64_t wanted = len > config->random_min ? len : config->random_min;
        plan->fetch_end = offset + wanted;
        state->next_offset = end;
        /* Skips forward by a steady stride (a reader touching tensor after tensor of equal
         * size): the next skip's neighbourhood is fetched ahead, so that hop costs no round
         * trip. Two strides within a quarter of each other make a pattern; anything else
         * only records the stride. */
        uint64_t stride = state->skip_started && offset > state->last_skip
                              ? offset - state->last_skip : 0;
        uint64_t tolerance = state->skip_stride / 4;
        if (stride > 0 && state->skip_stride > 0 && stride + tolerance >= state->skip_stride &&
            stride <= state->skip_stride + tolerance) {
            plan->prefetch_start = offset + stride;
            plan->prefetch_end = plan->prefetch_start + 2 * (uint64_t)config->random_min;
        }
        state->skip_stride = stride;
        state->last_skip = offset;
        state->skip_started = true;
    }
    if (plan->prefetch_end > object_size)
        plan->prefetch_end = object_size;
    if (plan->prefetch_start >= plan->prefetch_end)
        plan->prefetch_start = plan->prefetch_end = 0;
    state->started = true;
    plan->sequential = sequential;
    plan->fetch_start = offset;
    if (plan->fetch_end > object_size)
        plan->fetch_end = object_size;
    if (plan->fetch_start > plan->fetch_end)
        plan->fetch_start = plan->fetch_end;
}
