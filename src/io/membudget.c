/* The global memory budget (see include/fluxfs/membudget.h). */
#include "fluxfs/membudget.h"

#include <glib.h>

#define MEMBUDGET_MIN_LIMIT (1024 * 1024)

struct membudget {
    GMutex lock;
    GCond released;
    size_t limit;   /* immutable */
    size_t used;    /* lock */
    size_t peak;    /* lock */
    uint64_t waits;
    uint64_t refusals;
};

struct membudget *membudget_new(size_t limit)
{
    struct membudget *budget = g_new0(struct membudget, 1);
    g_mutex_init(&budget->lock);
    g_cond_init(&budget->released);
    budget->limit = limit ? limit : MEMBUDGET_MIN_LIMIT;
    return budget;
}

void membudget_free(struct membudget *budget)
{
    if (!budget)
        return;
    g_mutex_clear(&budget->lock);
    g_cond_clear(&budget->released);
    g_free(budget);
}

static bool fits_locked(struct membudget *budget, size_t bytes, size_t reserve)
{
    return bytes <= budget->limit && budget->used <= budget->limit - bytes &&
           budget->limit - budget->used - bytes >= reserve;
}

static void take_locked(struct membudget *budget, size_t bytes)
{
    budget->used += bytes;
    if (budget->used > budget->peak)
        budget->peak = budget->used;
}

bool membudget_try_acquire_reserving(struct membudget *budget, size_t bytes, size_t reserve)
{
    g_mutex_lock(&budget->lock);
    bool ok = fits_locked(budget, bytes, reserve);
    if (ok)
        take_locked(budget, bytes);
    else
        budget->refusals++;
    g_mutex_unlock(&budget->lock);
    return ok;
}

bool membudget_try_acquire(struct membudget *budget, size_t bytes)
{
    return membudget_try_acquire_reserving(budget, bytes, 0);
}

bool membudget_acquire(struct membudget *budget, size_t bytes, int timeout_ms)
{
    g_mutex_lock(&budget->lock);
    if (bytes > budget->limit) {
        budget->refusals++;
        g_mutex_unlock(&budget->lock);
        return false;
    }
    gint64 deadline = timeout_ms < 0 ? 0 : g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    bool waited = false;
    while (!fits_locked(budget, bytes, 0)) {
        if (!waited) {
            budget->waits++;
            waited = true;
        }
        if (timeout_ms < 0) {
            g_cond_wait(&budget->released, &budget->lock);
        } else if (!g_cond_wait_until(&budget->released, &budget->lock, deadline)) {
            if (!fits_locked(budget, bytes, 0)) {
                budget->refusals++;
                g_mutex_unlock(&budget->lock);
                return false;
            }
        }
    }
    take_locked(budget, bytes);
    g_mutex_unlock(&budget->lock);
    return true;
}

void membudget_release(struct membudget *budget, size_t bytes)
{
    g_mutex_lock(&budget->lock);
    budget->used = bytes > budget->used ? 0 : budget->used - bytes;
    g_cond_broadcast(&budget->released);
    g_mutex_unlock(&budget->lock);
}

void membudget_get_stats(struct membudget *budget, struct membudget_stats *out)
{
    g_mutex_lock(&budget->lock);
    out->limit = budget->limit;
    out->used = budget->used;
    out->peak = budget->peak;
    out->waits = budget->waits;
    out->refusals = budget->refusals;
    g_mutex_unlock(&budget->lock);
}
