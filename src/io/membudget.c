/* The global memory budget (see include/fluxfs/membudget.h). */
#include "fluxfs/membudget.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#define MEMBUDGET_MIN_LIMIT (1024 * 1024)
#define HUGE_PAGE_SIZE      ((size_t)2 << 20)

struct membudget {
    GMutex lock;
    GCond released;
    size_t limit; /* immutable */
    size_t used;  /* lock */
    size_t peak;  /* lock */
    uint64_t waits;
    uint64_t refusals;
    GPtrArray *pool;              /* lock: struct pooled_buffer *, free buffers counted in used */
    size_t pooled;                /* lock: their bytes */
    membudget_reclaim_fn reclaim; /* lock */
    void *reclaim_user;           /* lock */
    unsigned reclaiming;          /* lock: reclaimer calls in progress */
    uint64_t reclaims;            /* lock */
    uint64_t reclaimed;           /* lock */
    uint64_t buffers_reused;      /* lock */
    uint64_t buffers_fresh;       /* lock */
    uint64_t buffer_fresh_bytes;  /* lock */
};

struct pooled_buffer {
    void *data;
    size_t bytes;
};

static void buffer_free(void *buffer, size_t bytes);

struct membudget *membudget_new(size_t limit)
{
    struct membudget *budget = g_new0(struct membudget, 1);
    g_mutex_init(&budget->lock);
    g_cond_init(&budget->released);
    budget->limit = limit ? limit : MEMBUDGET_MIN_LIMIT;
    budget->pool = g_ptr_array_new();
    return budget;
}

void membudget_free(struct membudget *budget)
{
    if (!budget)
        return;
    for (guint i = 0; i < budget->pool->len; i++) {
        struct pooled_buffer *entry = g_ptr_array_index(budget->pool, i);
        buffer_free(entry->data, entry->bytes);
        g_free(entry);
    }
    g_ptr_array_free(budget->pool, TRUE);
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

static GPtrArray *drain_pool_locked(struct membudget *budget);
static void free_drained(GPtrArray *drained);

/* Buffers of at least a huge page are their own anonymous mappings, aligned to a huge page,
 * with transparent huge pages asked for over their whole huge pages (never beyond their end,
 * so they cost no more memory than their size): a read reply's gather (fuse_reply_iov) pins
 * and copies pages with far fewer page walks than over 4 KiB pages, and filling one faults
 * once per 2 MiB. Smaller ones come from malloc.
 *
 * A mapping is whole pages: the length mapped, trimmed and unmapped is the size rounded up to
 * a page (munmap of the tail at an unaligned address fails with EINVAL and would leave up to
 * 2 MiB of address space and a mapping behind for every buffer of an odd size). */
static size_t mapped_length(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

static void *buffer_alloc(size_t bytes)
{
    if (bytes < HUGE_PAGE_SIZE)
        return malloc(bytes ? bytes : 1);
    size_t length = mapped_length(bytes);
    size_t mapped = length + HUGE_PAGE_SIZE;
    char *map = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)map + HUGE_PAGE_SIZE - 1) & ~(uintptr_t)(HUGE_PAGE_SIZE - 1);
    size_t head = start - (uintptr_t)map;
    size_t tail = mapped - head - length;
    if (head)
        munmap(map, head);
    if (tail)
        munmap((char *)start + length, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)start, bytes & ~(HUGE_PAGE_SIZE - 1), MADV_HUGEPAGE);
#endif
    return (void *)start;
}

static void buffer_free(void *buffer, size_t bytes)
{
    if (bytes < HUGE_PAGE_SIZE)
        free(buffer);
    else
        munmap(buffer, mapped_length(bytes));
}

/* Moves the pool's buffers into *drained (freed by the caller once the lock is dropped). */
static void collect_pool_locked(struct membudget *budget, GPtrArray **drained)
{
    if (budget->pooled == 0)
        return;
    GPtrArray *more = drain_pool_locked(budget);
    if (!*drained) {
        *drained = more;
        return;
    }
    for (guint i = 0; i < more->len; i++)
        g_ptr_array_add(*drained, g_ptr_array_index(more, i));
    g_ptr_array_free(more, TRUE);
}

/* Whether bytes fit (leaving reserve free) after emptying the pool and, failing that, asking
 * the reclaimer to drop bytes held only as a cache. Lock held; dropped around the reclaimer
 * (which frees buffers through this budget). */
static bool make_room_locked(struct membudget *budget, size_t bytes, size_t reserve, bool urgent,
                             GPtrArray **drained)
{
    if (fits_locked(budget, bytes, reserve))
        return true;
    collect_pool_locked(budget, drained);
    if (fits_locked(budget, bytes, reserve) || !budget->reclaim || bytes > budget->limit)
        return fits_locked(budget, bytes, reserve);
    size_t free_now = budget->used < budget->limit ? budget->limit - budget->used : 0;
    size_t wanted = bytes + reserve > free_now ? bytes + reserve - free_now : bytes;
    membudget_reclaim_fn fn = budget->reclaim;
    void *user = budget->reclaim_user;
    budget->reclaiming++;
    budget->reclaims++;
    g_mutex_unlock(&budget->lock);
    if (*drained) {
        free_drained(*drained);
        *drained = NULL;
    }
    size_t freed = fn(user, wanted, urgent);
    g_mutex_lock(&budget->lock);
    budget->reclaimed += freed;
    if (--budget->reclaiming == 0)
        g_cond_broadcast(&budget->released);
    collect_pool_locked(budget, drained);
    return fits_locked(budget, bytes, reserve);
}

void membudget_set_reclaimer(struct membudget *budget, membudget_reclaim_fn fn, void *user)
{
    g_mutex_lock(&budget->lock);
    budget->reclaim = fn;
    budget->reclaim_user = user;
    while (!fn && budget->reclaiming > 0)
        g_cond_wait(&budget->released, &budget->lock);
    g_mutex_unlock(&budget->lock);
}

bool membudget_try_acquire_reserving(struct membudget *budget, size_t bytes, size_t reserve)
{
    GPtrArray *drained = NULL;
    g_mutex_lock(&budget->lock);
    bool ok = make_room_locked(budget, bytes, reserve, reserve == 0, &drained);
    if (ok)
        take_locked(budget, bytes);
    else
        budget->refusals++;
    g_mutex_unlock(&budget->lock);
    if (drained)
        free_drained(drained);
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
    GPtrArray *drained = NULL;
    (void)make_room_locked(budget, bytes, 0, true, &drained);
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
                if (drained)
                    free_drained(drained);
                return false;
            }
        }
    }
    take_locked(budget, bytes);
    g_mutex_unlock(&budget->lock);
    if (drained)
        free_drained(drained);
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
    out->pooled = budget->pooled;
    out->reclaims = budget->reclaims;
    out->reclaimed = budget->reclaimed;
    out->buffers_reused = budget->buffers_reused;
    out->buffers_fresh = budget->buffers_fresh;
    out->buffer_fresh_bytes = budget->buffer_fresh_bytes;
    g_mutex_unlock(&budget->lock);
}

/* Frees every pooled buffer (their bytes become available). Lock held; the frees happen
 * after the caller drops it. */
static GPtrArray *drain_pool_locked(struct membudget *budget)
{
    GPtrArray *drained = budget->pool;
    budget->pool = g_ptr_array_new();
    budget->used -= budget->pooled;
    budget->pooled = 0;
    return drained;
}

static void free_drained(GPtrArray *drained)
{
    for (guint i = 0; i < drained->len; i++) {
        struct pooled_buffer *entry = g_ptr_array_index(drained, i);
        buffer_free(entry->data, entry->bytes);
        g_free(entry);
    }
    g_ptr_array_free(drained, TRUE);
}

void *membudget_alloc(struct membudget *budget, size_t bytes, bool demand, size_t reserve)
{
    void *reused = NULL;
    GPtrArray *drained = NULL;
    size_t needed_reserve = demand ? 0 : reserve;
    g_mutex_lock(&budget->lock);
    for (guint i = 0; i < budget->pool->len; i++) {
        struct pooled_buffer *entry = g_ptr_array_index(budget->pool, i);
        if (entry->bytes == bytes) {
            reused = entry->data;
            budget->pooled -= bytes; /* stays in used: now it is in use */
            g_ptr_array_remove_index_fast(budget->pool, i);
            g_free(entry);
            budget->buffers_reused++;
            break;
        }
    }
    if (!reused) {
        bool ok = make_room_locked(budget, bytes, needed_reserve, demand, &drained);
        if (ok) {
            take_locked(budget, bytes);
            budget->buffers_fresh++;
            budget->buffer_fresh_bytes += bytes;
        } else {
            budget->refusals++;
        }
        g_mutex_unlock(&budget->lock);
        if (drained)
            free_drained(drained);
        if (!ok)
            return NULL;
        void *fresh = buffer_alloc(bytes);
        if (!fresh)
            membudget_release(budget, bytes);
        return fresh;
    }
    g_mutex_unlock(&budget->lock);
    return reused;
}

void membudget_free_buffer(struct membudget *budget, void *buffer, size_t bytes)
{
    if (!buffer)
        return;
    g_mutex_lock(&budget->lock);
    if (budget->pooled + bytes <= budget->limit / 4) {
        struct pooled_buffer *entry = g_new(struct pooled_buffer, 1);
        entry->data = buffer;
        entry->bytes = bytes;
        g_ptr_array_add(budget->pool, entry);
        budget->pooled += bytes;
        g_mutex_unlock(&budget->lock);
        return;
    }
    g_mutex_unlock(&budget->lock);
    buffer_free(buffer, bytes);
    membudget_release(budget, bytes);
}
