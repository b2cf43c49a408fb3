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

void aimd_on_throttle(struct aimd *state)
{
    state->throttles++;
    state->value *= state->decrease;
    if (state->value < state->min)
        state->value = state->min;
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
