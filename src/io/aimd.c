/* AIMD of one limit (see include/fluxfs/aimd.h). */
#include "fluxfs/aimd.h"

#include <assert.h>
#include <math.h>

void aimd_init(struct aimd *state, double min, double max, double increase, double decrease)
{
    assert(min >= 0 && min <= max);
    assert(decrease > 0 && decrease < 1 && increase > 0);
    *state = (struct aimd){
        .value = max, .min = min, .max = max, .increase = increase, .decrease = decrease};
}

void aimd_on_success(struct aimd *state)
{
    state->successes++;
    state->value += state->increase;
    if (state->value > state->max)
        state->value = state->max;
}

void aimd_on_window_success(struct aimd *state)
{
    state->successes++;
    state->value += state->increase / (state->value > 1.0 ? state->value : 1.0);
    if (state->value > state->max)
        state->value = state->max;
}

void aimd_on_throttle(struct aimd *state)
{
    state->throttles++;
    state->value *= state->decrease;
    if (state->value < state->min)
        state->value = state->min;
}

void aimd_on_restore(struct aimd *state)
{
    state->value /= state->decrease;
    if (state->value > state->max)
        state->value = state->max;
}

bool aimd_allowed(struct aimd *state)
{
    if (state->value >= 1.0)
        return true;
    state->credit += state->value;
    if (state->credit >= 1.0) {
        state->credit -= 1.0;
        return true;
    }
    return false;
}

unsigned aimd_limit(const struct aimd *state)
{
    double whole = floor(state->value);
    if (whole < 1 && state->max >= 1)
        whole = 1;
    return (unsigned)whole;
}

bool aimd_below_max(const struct aimd *state)
{
    return state->value < state->max;
}

struct aimd_weighed aimd_weigh(const struct aimd_signals *in)
{
    struct aimd_weighed out = {AIMD_HOLD, AIMD_HOLD};
    /* Write 429s cut the compose share only while reads have room: the plain GETs that replace
     * the composes would otherwise meet the read limit. */
    bool cut_share =
        in->write_refused && !in->read_refused && !in->reads_tight && !in->share_at_min;
    if (cut_share)
        out.share = AIMD_CUT;
    else if (!in->write_refused && in->read_refused)
        out.share = AIMD_RESTORE;
    else if (!in->write_refused && in->compose_worthy)
        out.share = AIMD_RAISE;
    /* The batches in flight fall on read 429s, and on write 429s the share did not take. */
    if (in->read_refused || (in->write_refused && !cut_share))
        out.concurrency = AIMD_CUT;
    else
        out.concurrency = AIMD_RAISE;
    return out;
}

unsigned aimd_compose_retry_ms(bool reads_tight, unsigned refusals, double random_unit)
{
    if (!reads_tight || refusals == 0 || refusals > AIMD_COMPOSE_RETRIES)
        return 0;
    if (random_unit < 0)
        random_unit = 0;
    if (random_unit >= 1)
        random_unit = nextafter(1.0, 0.0);
    unsigned base = 100u << (refusals < 4 ? refusals - 1 : 3);
    return base / 2 + (unsigned)(random_unit * base);
}
