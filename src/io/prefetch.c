/* The prefetcher: hint, automatic and warm-up queues served by worker threads that fetch small
 * objects compose-batched into the content cache (see include/fluxfs/prefetch.h). */
#include "fluxfs/prefetch.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "fluxfs/aimd.h"
#include "fluxfs/cost_model.h"
#include "fluxfs/log.h"
#include "fluxfs/temp_reaper.h"
#include "fluxfs/wait_group.h"

#define PREFETCH_MAX_HINTS        (10u * 1000 * 1000)
#define PREFETCH_MAX_QUEUED       (10u * 1000 * 1000)
#define PREFETCH_RANGE            (8u << 20)  /* parallel range size of a large composite */
#define PREFETCH_DIRECT_IN_FLIGHT 8           /* plain GETs one worker keeps in flight */
#define PREFETCH_SWEEP_AGE_S      (24 * 3600) /* temporaries of other hosts older than this go */
#define PREFETCH_MEMORY_WAIT_MS   2000
#define PREFETCH_TAKE_MAX         COMPOSE_MAX_SOURCES
#define HINT_LOOKAHEAD_MIN        8 /* hints fetched ahead whatever the cache (see hint_gate_locked) */
#define HINT_LIVENESS_CHECK_US    G_USEC_PER_SEC /* how often the lists' writers are looked for */
/* AIMD under 429s (rate_feedback): the compose share halves down to 1/16 and climbs back by
 * 1/50 per compose-worthy batch; the batches in flight halve down to 1 and climb by 1/2 per
 * round of batches (1/2 divided by the limit per batch: aimd_on_window_success). A worker over the
 * limit looks again after THROTTLED_RECHECK_US. */
#define COMPOSE_SHARE_MIN    (1.0 / 16)
#define COMPOSE_SHARE_STEP   (1.0 / 50)
#define CONCURRENCY_STEP     0.5
#define THROTTLED_RECHECK_US (20 * 1000)
#define THROTTLE_LOG_US      (60 * G_USEC_PER_SEC) /* at most one warning a minute about 429s */

/* SOURCE_RETRY: a hint taken again to be probed (counted done the first time). */
enum work_source { SOURCE_HINT, SOURCE_AUTO, SOURCE_WARMUP, SOURCE_RETRY };

/* What became of a warm-up item: only FETCHED and CACHED count as warmed. */
enum warm_outcome {
    WARM_MISSING,
    WARM_FETCHED,
    WARM_CACHED,
    WARM_NO_ROOM,
    WARM_TOO_LARGE,
    WARM_FAILED
};

struct work_item {
    char *path;
    enum work_source source;
    uint64_t list_id;              /* SOURCE_HINT: the list it was taken from */
    size_t index;                  /* SOURCE_HINT: its entry there */
    struct prefetch_object object; /* after resolve */
    bool resolved;
    bool marked;               /* we hold the cache's pending mark */
    enum warm_outcome outcome; /* SOURCE_WARMUP: what became of it */
};

/* A queued warm-up path and the session (control handle) that asked for it; 0: none. */
struct warm_entry {
    char *path;
    uint64_t session;
};

/* One writer's hint list. The work items taken from it name it by id: a list replaced or
 * dropped meanwhile is not found, and their results count nowhere. */
struct hint_list {
    uint64_t id;
    struct prefetch_hint_owner owner;
    GPtrArray *paths;   /* char * */
    GHashTable *index;  /* path -> index + 1 (first occurrence); keys in paths */
    size_t next;        /* next entry to take */
    size_t position;    /* highest opened entry + 1 */
    GByteArray *opened; /* one bit per entry, set once it was opened */
    size_t opened_count;
    uint64_t bytes_seen, items_seen; /* sizes of the entries resolved so far, how many */
    uint64_t done, missing;          /* see prefetch_stats */
    bool kernel_evicts;              /* the kernel was seen evicting pages it held (a READ
                                      * came) since this list began: its kernel_cached
                                      * objects are probed from then on */
    GArray *retry;                   /* size_t: entries taken before that, not opened then
                                      * (passed over as held without a probe): probed now */
};

struct prefetcher {
    GMutex lock;
    GCond work_ready;              /* new work, the hint gate moved, or stopping */
    GCond temps_changed;           /* a temporary delete finished */
    struct prefetch_config config; /* immutable; strings owned below */
    char *temp_prefix;             /* immutable */
    char *mount_id;                /* immutable */
    char *host;                    /* immutable */
    GPtrArray *workers;            /* GThread *, immutable after prefetch_new */

    bool stopping;        /* lock */
    bool compose_enabled; /* lock */
    /* Sharing the bucket's rate (aimd.h): composes are writes, so on 429s to writes the share
     * of batches composed falls first; on 429s to reads, the batches in flight. */
    struct aimd compose_share;    /* lock */
    struct aimd concurrency;      /* lock: batches in flight allowed, 1..workers */
    unsigned busy_workers;        /* lock: workers between a take and its next lock */
    unsigned idle_workers;        /* lock: workers waiting for work (not over the limit) */
    gint64 throttle_logged_us;    /* lock: when the last 429 warning was logged */
    struct temp_reaper *reaper;   /* deletes temporaries until they are gone; immutable */
    uint64_t temp_seq;            /* lock */
    GPtrArray *lists;             /* lock: struct hint_list *, oldest first */
    uint64_t next_list_id;        /* lock */
    size_t hint_entries;          /* lock: entries of all lists together */
    guint list_turn;              /* lock: the list served first at the next take */
    gint64 next_liveness_check;   /* lock: monotonic us */
    uint64_t lists_dropped;       /* lock */
    bool drop_stored;             /* lock: what content_cache_set_drop_demoted was told */
    GQueue auto_queue;            /* lock: char * */
    GQueue warm_queue;            /* lock: struct warm_entry * */
    uint64_t warm_bytes_admitted; /* lock: warm-up bytes taken so far (capacity check) */
    struct prefetch_stats stats;  /* lock */
    struct buffer_pool *pool;     /* immutable pointer; see buffer_pool */
};

const char *prefetch_mount_id(struct prefetcher *p)
{
    return p->mount_id;
}

static void work_item_clear(struct work_item *item)
{
    g_free(item->path);
    g_free(item->object.name);
    memset(item, 0, sizeof(*item));
}

/* ---- temporary objects ---- */

struct temp_delete {
    struct prefetcher *p;
    char *name;
};

static void on_temp_deleted(int err, void *user)
{
    struct temp_delete *job = user;
    struct prefetcher *p = job->p;
    if (err < 0 && err != -ENOENT)
        flog_warn("prefetch",
                  "could not delete temporary object '%s': %s (swept at unmount "
                  "or the next mount)",
                  job->name, g_strerror(-err));
    g_mutex_lock(&p->lock);
    p->stats.temps_live--;
    if (err == 0)
        p->stats.temps_deleted++;
    g_cond_broadcast(&p->temps_changed);
    g_mutex_unlock(&p->lock);
    g_free(job->name);
    g_free(job);
}

/* Deletes a temporary object without waiting (generation 0: whatever is there), again and
 * again while the bucket refuses (temp_reaper.h). The caller counted it in temps_live. */
static void delete_temp_async(struct prefetcher *p, const char *name, int64_t generation)
{
    struct temp_delete *job = g_new0(struct temp_delete, 1);
    job->p = p;
    job->name = g_strdup(name);
    temp_reaper_delete(p->reaper, name, generation, on_temp_deleted, job);
}

/* Whether a temporary object named ...compose/HOST-PID-RANDOM/SEQ belongs to a mount that is
 * gone: same host and the process no longer exists, or older than a day. */
static bool temp_is_orphan(struct prefetcher *p, const struct gcs_object *obj)
{
    const char *rest = obj->name + strlen(p->temp_prefix);
    const char *slash = strchr(rest, '/');
    int64_t now_ns = g_get_real_time() * 1000;
    bool old = obj->updated_ns > 0 &&
               now_ns - obj->updated_ns > (int64_t)PREFETCH_SWEEP_AGE_S * 1000000000;
    if (!slash)
        return old;
    char *id = g_strndup(rest, (gsize)(slash - rest));
    bool orphan = old;
    if (strcmp(id, p->mount_id) != 0) {
        char *random_dash = strrchr(id, '-');
        if (random_dash) {
            *random_dash = '\0';
            char *pid_dash = strrchr(id, '-');
            if (pid_dash) {
                *pid_dash = '\0';
                long pid = strtol(pid_dash + 1, NULL, 10);
                bool same_host = strcmp(id, p->host) == 0;
                if (same_host && pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
                    orphan = true;
            }
        }
    }
    g_free(id);
    return orphan;
}

/* Deletes the temporaries of crashed mounts (or, with own_only, this mount's leftovers). */
static void sweep_temps(struct prefetcher *p, bool own_only)
{
    char *prefix =
        own_only ? g_strconcat(p->temp_prefix, p->mount_id, "/", NULL) : g_strdup(p->temp_prefix);
    char *token = NULL;
    unsigned deleted = 0;
    for (int page_count = 0; page_count < 1000; page_count++) {
        struct gcs_list_params params = {.prefix = prefix, .page_token = token};
        struct gcs_list_page page = {0};
        int rc = gcs_list(p->config.client, &params, &page);
        g_free(token);
        token = NULL;
        if (rc < 0)
            break;
        for (guint i = 0; i < page.objects->len; i++) {
            struct gcs_object *obj = g_ptr_array_index(page.objects, i);
            if ((own_only || temp_is_orphan(p, obj)) &&
                gcs_delete(p->config.client, obj->name, obj->generation, NULL) == 0)
                deleted++;
        }
        token = g_strdup(page.next_page_token);
        gcs_list_page_clear(&page);
        if (!token)
            break;
    }
    g_free(token);
    g_free(prefix);
    if (deleted > 0) {
        flog_info("prefetch", "deleted %u temporary compose objects %s", deleted,
                  own_only ? "of this mount" : "left by mounts that no longer run");
        g_mutex_lock(&p->lock);
        p->stats.temps_swept += deleted;
        g_mutex_unlock(&p->lock);
    }
}

/* ---- memory ---- */

/* The buffers prefetched bodies land in. The content cache keeps them (pieces of a composite
 * are cached in place, content_block) until their last piece is evicted; then they come back
 * here and the next fetch of the same rounded size reuses them. A fresh buffer costs the daemon
 * a page fault and a page zeroing per 4 KiB (more than the copy into it), so with a cache full
 * of an epoch larger than it, reuse saves most of that. Plain malloc memory, not membudget's
 * huge-page buffers: fresh huge pages cost far more to fault in here (daemon CPU 2.2 -> 8.8 s
 * for 2,000 x 1 MiB). Charged to the budget while allocated, pooled ones included (at most the
 * demand reserve of them; the pool is dropped when the budget refuses a prefetch buffer).
 * Reference-counted: blocks in the cache outlive the prefetcher. */
struct buffer_pool {
    gint refs; /* atomic: the prefetcher's and one per live buffer */
    GMutex lock;
    struct membudget *budget; /* not owned; outlives the cache */
    size_t reserve;
    size_t max_bytes;        /* free buffers kept: at most this many bytes (the demand
                                reserve: they stay charged to the budget, which a demand
                                read cannot take back from here) */
    size_t pooled_bytes;     /* lock */
    bool closed;             /* lock: the prefetcher is gone; freed buffers are not kept */
    GPtrArray *free_buffers; /* lock: struct pool_buffer * */
    uint64_t reused, fresh;  /* lock: allocations served from the pool / with new memory */
};

struct pool_buffer {
    void *data;
    size_t capacity;
};

#define POOL_ROUND ((size_t)1 << 20) /* capacities are multiples of this */

static struct buffer_pool *buffer_pool_new(struct membudget *budget, size_t reserve,
                                           size_t max_bytes)
{
    struct buffer_pool *pool = g_new0(struct buffer_pool, 1);
    pool->refs = 1;
    g_mutex_init(&pool->lock);
    pool->budget = budget;
    pool->reserve = reserve;
    pool->max_bytes = max_bytes;
    pool->free_buffers = g_ptr_array_new();
    return pool;
}

/* Frees the pooled buffers (and their budget). Returns how many bytes. */
static size_t buffer_pool_drain(struct buffer_pool *pool)
{
    g_mutex_lock(&pool->lock);
    GPtrArray *drained = pool->free_buffers;
    pool->free_buffers = g_ptr_array_new();
    pool->pooled_bytes = 0;
    g_mutex_unlock(&pool->lock);
    size_t bytes = 0;
    for (guint i = 0; i < drained->len; i++) {
        struct pool_buffer *buffer = g_ptr_array_index(drained, i);
        g_free(buffer->data);
        membudget_release(pool->budget, buffer->capacity);
        bytes += buffer->capacity;
        g_free(buffer);
    }
    g_ptr_array_free(drained, TRUE);
    return bytes;
}

static void buffer_pool_unref(struct buffer_pool *pool)
{
    if (!g_atomic_int_dec_and_test(&pool->refs))
        return;
    buffer_pool_drain(pool);
    g_ptr_array_free(pool->free_buffers, TRUE);
    g_mutex_clear(&pool->lock);
    g_free(pool);
}

static size_t pool_capacity(size_t bytes)
{
    return bytes <= POOL_ROUND ? MAX(bytes, (size_t)1)
                               : (bytes + POOL_ROUND - 1) / POOL_ROUND * POOL_ROUND;
}

/* A speculative buffer of at least `bytes` (*capacity set), waiting a little for memory when
 * the budget is short; NULL when there is none. */
static void *pool_alloc(struct buffer_pool *pool, size_t bytes, size_t *capacity)
{
    size_t cap = pool_capacity(bytes);
    void *data = NULL;
    g_mutex_lock(&pool->lock);
    for (guint i = 0; i < pool->free_buffers->len; i++) {
        struct pool_buffer *buffer = g_ptr_array_index(pool->free_buffers, i);
        if (buffer->capacity == cap) {
            data = buffer->data;
            pool->pooled_bytes -= cap;
            g_ptr_array_remove_index_fast(pool->free_buffers, i);
            g_free(buffer);
            break;
        }
    }
    if (data)
        pool->reused++;
    else
        pool->fresh++;
    g_mutex_unlock(&pool->lock);
    if (!data) {
        gint64 deadline = g_get_monotonic_time() + PREFETCH_MEMORY_WAIT_MS * 1000;
        while (!membudget_try_acquire_reserving(pool->budget, cap, pool->reserve)) {
            if (buffer_pool_drain(pool) > 0)
                continue;
            if (g_get_monotonic_time() > deadline)
                return NULL;
            g_usleep(2000);
        }
        data = g_try_malloc(cap);
        if (!data) {
            membudget_release(pool->budget, cap);
            return NULL;
        }
    }
    g_atomic_int_inc(&pool->refs);
    *capacity = cap;
    return data;
}

/* Gives a buffer from pool_alloc back (content_block_free_fn; user is the pool). */
static void pool_free(void *data, size_t capacity, void *user)
{
    struct buffer_pool *pool = user;
    if (!data)
        return;
    g_mutex_lock(&pool->lock);
    bool keep = !pool->closed && pool->pooled_bytes + capacity <= pool->max_bytes;
    if (keep) {
        pool->pooled_bytes += capacity;
        struct pool_buffer *buffer = g_new(struct pool_buffer, 1);
        buffer->data = data;
        buffer->capacity = capacity;
        g_ptr_array_add(pool->free_buffers, buffer);
    }
    g_mutex_unlock(&pool->lock);
    if (!keep) {
        g_free(data);
        membudget_release(pool->budget, capacity);
    }
    buffer_pool_unref(pool);
}

/* ---- fetching ---- */

struct read_job {
    struct wait_group *group;
    int err;
    size_t got;
};

static void on_read_done(int err, size_t got, void *user)
{
    struct read_job *job = user;
    job->err = err;
    job->got = got;
    wait_group_done(job->group);
}

/* Reads a whole composite, in parallel ranges when large. pieces_checked: every piece has a
 * crc32c that compose_split_check will verify, so every byte is checked there and the
 * composite's own crc32c pass is skipped (one pass over the bytes instead of two; a piece
 * that does not match falls back to plain GETs of the objects). 0 or a negative errno. */
static int read_composite(struct prefetcher *p, const struct gcs_object *obj, void *buf,
                          bool pieces_checked)
{
    if (obj->size <= PREFETCH_RANGE) {
        struct gcs_read_request request = {
            .read_type = METRICS_READ_PARALLEL,
            .name = obj->name,
            .generation = obj->generation,
            .offset = 0,
            .len = (size_t)obj->size,
            .buf = buf,
            .has_expected_crc32c = obj->has_crc32c,
            .expected_crc32c = obj->crc32c,
            .object_size = obj->size,
            .whole_object = true,
            .caller_checks_bytes = pieces_checked,
        };
        size_t got = 0;
        int rc = gcs_read(p->config.client, &request, &got);
        return rc < 0 ? rc : got == obj->size ? 0 : -EIO;
    }
    size_t ranges = (size_t)((obj->size + PREFETCH_RANGE - 1) / PREFETCH_RANGE);
    struct wait_group group;
    wait_group_init(&group, (unsigned)ranges);
    struct read_job *jobs = g_new0(struct read_job, ranges);
    for (size_t i = 0; i < ranges; i++) {
        uint64_t offset = (uint64_t)i * PREFETCH_RANGE;
        struct gcs_read_request request = {
            .read_type = METRICS_READ_PARALLEL,
            .name = obj->name,
            .generation = obj->generation,
            .offset = offset,
            .len = (size_t)MIN((uint64_t)PREFETCH_RANGE, obj->size - offset),
            .buf = (char *)buf + offset,
            .object_size = obj->size,
        };
        jobs[i].group = &group;
        gcs_read_async(p->config.client, &request, on_read_done, &jobs[i]);
    }
    wait_group_finish(&group);
    int rc = 0;
    for (size_t i = 0; i < ranges && rc == 0; i++) {
        uint64_t want = MIN((uint64_t)PREFETCH_RANGE, obj->size - (uint64_t)i * PREFETCH_RANGE);
        if (jobs[i].err < 0)
            rc = jobs[i].err;
        else if (jobs[i].got != want)
            rc = -EIO;
    }
    g_free(jobs);
    return rc;
}

static void count_result(struct prefetcher *p, struct work_item *item, int rc)
{
    g_mutex_lock(&p->lock);
    if (rc == 0) {
        p->stats.files_fetched++;
        p->stats.bytes_fetched += item->object.size;
    } else {
        p->stats.files_failed++;
    }
    item->outcome = rc == 0 ? WARM_FETCHED : WARM_FAILED;
    g_mutex_unlock(&p->lock);
}

static void finish_item(struct prefetcher *p, struct work_item *item)
{
    if (item->marked)
        content_cache_clear_pending(p->config.cache, item->object.name, item->object.generation);
    item->marked = false;
}

/* The plain GETs of one fetch_direct call: each completion queues its index for the worker. */
struct direct_window {
    GMutex lock;
    GCond cond;
    size_t finished[PREFETCH_TAKE_MAX]; /* lock: indices completed, not yet taken */
    size_t finished_count;              /* lock */
};

struct direct_job {
    struct direct_window *window;
    size_t index;
    int err; /* written before the index is queued; read after it is taken */
    size_t got;
};

static void on_direct_done(int err, size_t got, void *user)
{
    struct direct_job *job = user;
    struct direct_window *window = job->window;
    g_mutex_lock(&window->lock);
    job->err = err;
    job->got = got;
    window->finished[window->finished_count++] = job->index;
    g_cond_signal(&window->cond);
    g_mutex_unlock(&window->lock); /* the completion's last touch of the window */
}

/* Plain GETs (pinned by generation) of items, PREFETCH_DIRECT_IN_FLIGHT in flight at once: as
 * each completes, its file is cached (a reader waiting for it goes on) and the next GET starts.
 * They once went in waves of 8, each waiting for its slowest: under a bucket's rate limit one
 * GET refused (waiting its Retry-After, 1-2 s) held the 7 done beside it and the rest of the
 * batch, and a reader waiting for any of them stalled for seconds (bench/fleet.py). */
static void fetch_direct(struct prefetcher *p, struct work_item **items, size_t count)
{
    if (count > PREFETCH_TAKE_MAX) {
        fetch_direct(p, items, PREFETCH_TAKE_MAX);
        fetch_direct(p, items + PREFETCH_TAKE_MAX, count - PREFETCH_TAKE_MAX);
        return;
    }
    struct direct_window window = {.finished_count = 0};
    g_mutex_init(&window.lock);
    g_cond_init(&window.cond);
    struct direct_job jobs[PREFETCH_TAKE_MAX];
    void *bufs[PREFETCH_TAKE_MAX];
    size_t caps[PREFETCH_TAKE_MAX];
    size_t next = 0, in_flight = 0, handled = 0;
    while (handled < count) {
        for (; next < count && in_flight < PREFETCH_DIRECT_IN_FLIGHT; next++) {
            struct work_item *item = items[next];
            jobs[next] = (struct direct_job){.window = &window, .index = next};
            bufs[next] = pool_alloc(p->pool, (size_t)item->object.size, &caps[next]);
            if (!bufs[next]) {
                on_direct_done(-ENOMEM, 0, &jobs[next]);
                continue;
            }
            struct gcs_read_request request = {
                .read_type = METRICS_READ_PARALLEL,
                .name = item->object.name,
                .generation = item->object.generation,
                .offset = 0,
                .len = (size_t)item->object.size,
                .buf = bufs[next],
                .has_expected_crc32c = item->object.has_crc32c,
                .expected_crc32c = item->object.crc32c,
                .object_size = item->object.size,
                .whole_object = true,
            };
            in_flight++;
            gcs_read_async(p->config.client, &request, on_direct_done, &jobs[next]);
        }
        size_t taken[PREFETCH_TAKE_MAX];
        size_t n;
        g_mutex_lock(&window.lock);
        while (window.finished_count == 0)
            g_cond_wait(&window.cond, &window.lock);
        n = window.finished_count;
        memcpy(taken, window.finished, n * sizeof(taken[0]));
        window.finished_count = 0;
        g_mutex_unlock(&window.lock);
        for (size_t k = 0; k < n; k++) {
            size_t i = taken[k];
            struct work_item *item = items[i];
            int rc = jobs[i].err;
            if (bufs[i])
                in_flight--;
            if (rc == 0 && jobs[i].got != item->object.size)
                rc = -EIO;
            struct content_block *block =
                bufs[i] ? content_block_new(bufs[i], caps[i], pool_free, p->pool) : NULL;
            if (rc == 0)
                rc = content_cache_insert_block(p->config.cache, item->object.name,
                                                item->object.generation, block, 0,
                                                (size_t)item->object.size);
            content_block_unref(block); /* the cache keeps its own reference */
            count_result(p, item, rc);
            finish_item(p, item);
        }
        handled += n;
        g_mutex_lock(&p->lock);
        p->stats.direct_gets += n;
        g_mutex_unlock(&p->lock);
    }
    g_cond_clear(&window.cond);
    g_mutex_clear(&window.lock);
}

/* One compose batch: compose, GET, delete, split. Falls back to plain GETs on failure. */
static void fetch_composed(struct prefetcher *p, struct work_item **items, size_t count)
{
    struct gcs_compose_source sources[COMPOSE_MAX_SOURCES];
    struct compose_item pieces[COMPOSE_MAX_SOURCES];
    uint64_t offsets[COMPOSE_MAX_SOURCES];
    bool pieces_checked = true;
    for (size_t i = 0; i < count; i++) {
        pieces_checked = pieces_checked && items[i]->object.has_crc32c;
        sources[i] =
            (struct gcs_compose_source){items[i]->object.name, items[i]->object.generation};
        pieces[i] = (struct compose_item){.name = items[i]->object.name,
                                          .generation = items[i]->object.generation,
                                          .size = items[i]->object.size,
                                          .has_crc32c = items[i]->object.has_crc32c,
                                          .crc32c = items[i]->object.crc32c};
    }
    g_mutex_lock(&p->lock);
    uint64_t seq = ++p->temp_seq;
    p->stats.temps_live++;
    g_mutex_unlock(&p->lock);
    char *temp = g_strdup_printf("%s%s/%" PRIu64, p->temp_prefix, p->mount_id, seq);
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .if_generation_match = 0};
    struct gcs_object composite;
    memset(&composite, 0, sizeof(composite));
    int rc;
    for (unsigned refusals = 0;;) {
        rc = gcs_compose(p->config.client, temp, sources, (int)count, &gcs_temporary_attrs, &pre,
                         &composite);
        if (rc != -EBUSY)
            break;
        /* Refused for the write rate: with reads tight, slow the composes rather than turn
         * the batch into plain GETs (aimd_compose_retry_ms). Each refusal is in the client's
         * rate_limited_writes; composes_throttled counts the compose once, if refused at last. */
        g_mutex_lock(&p->lock);
        unsigned pause_ms = p->stopping ? 0
                                        : aimd_compose_retry_ms(aimd_below_max(&p->concurrency),
                                                                ++refusals, g_random_double());
        if (pause_ms > 0) {
            gint64 until = g_get_monotonic_time() + (gint64)pause_ms * 1000;
            while (!p->stopping && g_cond_wait_until(&p->work_ready, &p->lock, until))
                ;
        }
        g_mutex_unlock(&p->lock);
        if (pause_ms == 0)
            break;
        memset(&composite, 0, sizeof(composite));
    }
    g_mutex_lock(&p->lock);
    p->stats.composes++;
    if (rc == -EBUSY) {
        /* Refused for the bucket's rate at its only attempt: nothing was made, so nothing to
         * delete (a delete is one more write the bucket would refuse). */
        p->stats.composes_throttled++;
        p->stats.temps_live--;
        g_cond_broadcast(&p->temps_changed);
    }
    if (rc < 0) {
        p->stats.compose_failures++;
        if (rc == -EACCES && p->compose_enabled) {
            p->compose_enabled = false;
            flog_warn("prefetch", "compose refused (permission denied): prefetching with plain "
                                  "GETs from now on");
        }
    }
    g_mutex_unlock(&p->lock);
    if (rc < 0) {
        /* A compose whose reply was lost may still have made the object: delete it anyway. */
        if (rc != -EBUSY)
            delete_temp_async(p, temp, 0);
        g_free(temp);
        fetch_direct(p, items, count);
        return;
    }
    size_t capacity = 0;
    void *buf = pool_alloc(p->pool, (size_t)composite.size, &capacity);
    rc = buf ? read_composite(p, &composite, buf, pieces_checked) : -ENOMEM;
    delete_temp_async(p, temp, composite.generation); /* read or not, it goes now */
    g_free(temp);
    g_mutex_lock(&p->lock);
    p->stats.composite_gets++;
    g_mutex_unlock(&p->lock);
    size_t bad = 0;
    if (rc == 0)
        rc = compose_split_check(pieces, count, buf, composite.size, offsets, &bad);
    if (rc < 0) {
        if (rc == -EIO)
            flog_warn("prefetch",
                      "composite of %zu objects (first '%s') was not usable; "
                      "fetching them one by one",
                      count, pieces[0].name);
        pool_free(buf, capacity, p->pool);
        gcs_object_clear(&composite);
        fetch_direct(p, items, count);
        return;
    }
    /* The pieces stay in the composite's buffer (no copy): the cache holds it while it holds
     * any of them. */
    struct content_block *block = content_block_new(buf, capacity, pool_free, p->pool);
    for (size_t i = 0; i < count; i++) {
        int insert_rc =
            content_cache_insert_block(p->config.cache, pieces[i].name, pieces[i].generation, block,
                                       (size_t)offsets[i], (size_t)pieces[i].size);
        count_result(p, items[i], insert_rc);
        finish_item(p, items[i]);
    }
    content_block_unref(block);
    gcs_object_clear(&composite);
}

/* ---- hint lists ---- */

static struct hint_list *hint_list_new(uint64_t id, const struct prefetch_hint_owner *owner)
{
    struct hint_list *list = g_new0(struct hint_list, 1);
    list->id = id;
    list->owner = *owner;
    list->paths = g_ptr_array_new_with_free_func(g_free);
    list->index = g_hash_table_new(g_str_hash, g_str_equal);
    list->opened = g_byte_array_new();
    list->retry = g_array_new(FALSE, FALSE, sizeof(size_t));
    return list;
}

static void hint_list_free(struct hint_list *list)
{
    if (!list)
        return;
    g_hash_table_destroy(list->index);
    g_ptr_array_free(list->paths, TRUE);
    g_byte_array_free(list->opened, TRUE);
    g_array_free(list->retry, TRUE);
    g_free(list);
}

/* The start time of pid (field 22 of /proc/PID/stat). 0, -ESRCH when there is no such process
 * or it has exited (a zombie), or -EINVAL. */
static int read_proc_start_time(int pid, uint64_t *start_time)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    gchar *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -ESRCH;
    /* comm may hold spaces and parentheses: the fields start after the last ')'. */
    const char *rest = strrchr(text, ')');
    int rc = -EINVAL;
    if (rest && (rest[1] == '\0' || rest[2] == 'Z' || rest[2] == 'X')) {
        rc = -ESRCH; /* exited, not reaped yet */
    } else if (rest) {
        rest++;
        /* rest starts at field 3 (state); field 22 is 19 fields later. */
        for (int field = 3; field < 22 && rest; field++) {
            rest = strchr(rest + 1, ' ');
        }
        if (rest) {
            *start_time = g_ascii_strtoull(rest + 1, NULL, 10);
            rc = 0;
        }
    }
    g_free(text);
    return rc;
}

static int read_proc_tgid(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    gchar *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return pid;
    int tgid = pid;
    const char *line = strstr(text, "\nTgid:");
    if (line) {
        long value = strtol(line + 6, NULL, 10);
        if (value > 0)
            tgid = (int)value;
    }
    g_free(text);
    return tgid;
}

void prefetch_hint_owner_of(int pid, struct prefetch_hint_owner *out)
{
    out->pid = pid > 0 ? read_proc_tgid(pid) : 0;
    out->start_time = 0;
    if (out->pid > 0 && read_proc_start_time(out->pid, &out->start_time) < 0)
        out->start_time = 0;
}

bool prefetch_hint_owner_alive(const struct prefetch_hint_owner *owner)
{
    if (owner->pid <= 0)
        return true;
    uint64_t start_time = 0;
    int rc = read_proc_start_time(owner->pid, &start_time);
    if (rc == 0)
        return owner->start_time == 0 || start_time == owner->start_time;
    if (rc == -ESRCH && g_file_test("/proc/self/stat", G_FILE_TEST_EXISTS))
        return false;
    /* No /proc: the signal check answers for the pid alone. */
    return kill((pid_t)owner->pid, 0) == 0 || errno == EPERM;
}

static bool same_owner(const struct prefetch_hint_owner *a, const struct prefetch_hint_owner *b)
{
    return a->pid == b->pid && a->start_time == b->start_time;
}

/* Removes the list at i. Lock held. */
static void remove_list_locked(struct prefetcher *p, guint i)
{
    struct hint_list *list = g_ptr_array_index(p->lists, i);
    p->hint_entries -= list->paths->len;
    g_ptr_array_remove_index(p->lists, i); /* frees it */
}

/* Drops the lists whose writers have exited. /proc is read without the lock. */
static void drop_dead_lists(struct prefetcher *p)
{
    g_mutex_lock(&p->lock);
    guint count = p->lists->len;
    struct prefetch_hint_owner *owners = g_new(struct prefetch_hint_owner, count ? count : 1);
    uint64_t *ids = g_new(uint64_t, count ? count : 1);
    for (guint i = 0; i < count; i++) {
        struct hint_list *list = g_ptr_array_index(p->lists, i);
        owners[i] = list->owner;
        ids[i] = list->id;
    }
    g_mutex_unlock(&p->lock);
    for (guint i = 0; i < count; i++) {
        if (prefetch_hint_owner_alive(&owners[i]))
            continue;
        g_mutex_lock(&p->lock);
        for (guint j = 0; j < p->lists->len; j++) {
            struct hint_list *list = g_ptr_array_index(p->lists, j);
            if (list->id == ids[i]) {
                flog_debug("prefetch",
                           "hint list of process %d dropped: it has exited "
                           "(%u of %u entries taken)",
                           list->owner.pid, (unsigned)list->next, list->paths->len);
                remove_list_locked(p, j);
                p->lists_dropped++;
                break;
            }
        }
        g_mutex_unlock(&p->lock);
    }
    g_free(owners);
    g_free(ids);
}

/* The list of owner, or NULL. Lock held. */
static struct hint_list *
find_owner_list_locked(struct prefetcher *p, const struct prefetch_hint_owner *owner, guint *index)
{
    for (guint i = 0; i < p->lists->len; i++) {
        struct hint_list *list = g_ptr_array_index(p->lists, i);
        if (same_owner(&list->owner, owner)) {
            if (index)
                *index = i;
            return list;
        }
    }
    return NULL;
}

static struct hint_list *find_list_locked(struct prefetcher *p, uint64_t id)
{
    for (guint i = 0; i < p->lists->len; i++) {
        struct hint_list *list = g_ptr_array_index(p->lists, i);
        if (list->id == id)
            return list;
    }
    return NULL;
}

/* ---- the work queues ---- */

/* Whether entry index of list was opened. Lock held. */
static bool hint_opened_locked(const struct hint_list *list, size_t index)
{
    if (index / 8 >= list->opened->len)
        return false;
    return (list->opened->data[index / 8] >> (index % 8)) & 1u;
}

/* How many lists are not read to their end: they share the cache. Lock held. */
static size_t lists_reading_locked(struct prefetcher *p)
{
    size_t reading = 0;
    for (guint i = 0; i < p->lists->len; i++) {
        struct hint_list *list = g_ptr_array_index(p->lists, i);
        if (list->opened_count < list->paths->len)
            reading++;
    }
    return reading ? reading : 1;
}

/* A list's gate: its entries below it may be fetched. The configured lookahead past the
 * highest entry opened, but no more than the list's share of three quarters of the cache's
 * capacity (at its objects' average size) past the number of entries opened so far. The
 * second bound counts what is fetched and not read yet: with 8 DataLoader workers each going
 * through its own batch, the highest opened entry runs about 8 batches ahead of the slowest
 * worker, and a lookahead measured from it alone held more than the cache, so objects fetched
 * ahead were evicted before they were read and fetched a second time. Several lists (DDP
 * ranks) divide the cache among them for the same reason. Objects read (stored in the page
 * cache) are the cache's first to go (content_cache_demote). Lock held. */
static size_t hint_gate_locked(struct prefetcher *p, const struct hint_list *list, size_t reading)
{
    size_t lookahead = p->config.lookahead;
    if (list->items_seen == 0 || list->bytes_seen == 0)
        return list->position + MIN(lookahead, (size_t)HINT_LOOKAHEAD_MIN); /* sizes unknown */
    uint64_t average = list->bytes_seen / list->items_seen;
    uint64_t fit =
        content_cache_capacity(p->config.cache) / 4 * 3 / (average ? average : 1) / reading;
    if (fit < HINT_LOOKAHEAD_MIN)
        fit = HINT_LOOKAHEAD_MIN;
    return MIN(list->position + lookahead, list->opened_count + (size_t)fit);
}

static bool list_has_work_locked(struct prefetcher *p, const struct hint_list *list, size_t reading)
{
    return list->retry->len > 0 ||
           (list->next < list->paths->len && list->next < hint_gate_locked(p, list, reading));
}

/* Takes up to max items: hints inside their lists' gates, one of each list in turn (the list
 * served first moves on at every take), then automatic, then warm-up. Lock held. */
static size_t take_work_locked(struct prefetcher *p, struct work_item *out, size_t max)
{
    size_t n = 0;
    guint lists = p->lists->len;
    size_t reading = lists_reading_locked(p);
    bool took = lists > 0;
    while (n < max && took) {
        took = false;
        for (guint k = 0; k < lists && n < max; k++) {
            struct hint_list *list = g_ptr_array_index(p->lists, (p->list_turn + k) % lists);
            if (list->retry->len > 0) {
                size_t index = g_array_index(list->retry, size_t, list->retry->len - 1);
                g_array_set_size(list->retry, list->retry->len - 1);
                took = true;
                if (hint_opened_locked(list, index))
                    continue; /* opened meanwhile: its reader fetched it */
                out[n].path = g_strdup(g_ptr_array_index(list->paths, index));
                out[n].source = SOURCE_RETRY;
                out[n].list_id = list->id;
                out[n].index = index;
                n++;
                continue;
            }
            if (!list_has_work_locked(p, list, reading))
                continue;
            out[n].path = g_strdup(g_ptr_array_index(list->paths, list->next));
            out[n].source = SOURCE_HINT;
            out[n].list_id = list->id;
            out[n].index = list->next;
            list->next++;
            n++;
            took = true;
        }
    }
    if (lists > 0)
        p->list_turn = (p->list_turn + 1) % lists;
    char *path;
    while (n < max && (path = g_queue_pop_head(&p->auto_queue))) {
        out[n].path = path;
        out[n].source = SOURCE_AUTO;
        n++;
    }
    struct warm_entry *entry;
    while (n < max && (entry = g_queue_pop_head(&p->warm_queue))) {
        out[n].path = entry->path;
        out[n].source = SOURCE_WARMUP;
        out[n].outcome = WARM_MISSING;
        g_free(entry);
        n++;
    }
    return n;
}

static bool has_work_locked(struct prefetcher *p)
{
    if (p->auto_queue.length > 0 || p->warm_queue.length > 0)
        return true;
    size_t reading = lists_reading_locked(p);
    for (guint i = 0; i < p->lists->len; i++)
        if (list_has_work_locked(p, g_ptr_array_index(p->lists, i), reading))
            return true;
    return false;
}

/* Bookkeeping once an item is done with (fetched, cached already, skipped or failed; for a
 * hint, one that resolved to nothing is missing instead). */
static void account_done(struct prefetcher *p, struct work_item *item)
{
    g_mutex_lock(&p->lock);
    if (item->source == SOURCE_HINT) {
        struct hint_list *list = find_list_locked(p, item->list_id);
        if (list && item->resolved)
            list->done++;
        else if (list)
            list->missing++;
    } else if (item->source == SOURCE_WARMUP) {
        p->stats.warmup_done++;
        switch (item->outcome) {
        case WARM_FETCHED:
            p->stats.warmup_fetched++;
            p->stats.warmup_bytes += item->object.size;
            break;
        case WARM_CACHED:
            p->stats.warmup_cached++;
            p->stats.warmup_bytes += item->object.size;
            break;
        case WARM_NO_ROOM:
            p->stats.warmup_skipped++;
            break;
        case WARM_TOO_LARGE:
            p->stats.warmup_too_large++;
            break;
        case WARM_FAILED:
            p->stats.warmup_failed++;
            break;
        case WARM_MISSING:
            p->stats.warmup_missing++;
            break;
        }
    }
    g_mutex_unlock(&p->lock);
}

/* Whether a hinted item that the kernel held is to be probed: once its list saw the kernel
 * evict. Before that (a warm epoch so far) it is taken as held: starting at once fetched far
 * ahead of readers going through the page cache, and what was fetched was evicted again. */
static bool hint_probed(struct prefetcher *p, const struct work_item *item)
{
    if (item->source == SOURCE_RETRY)
        return true;
    if (item->source != SOURCE_HINT)
        return false;
    g_mutex_lock(&p->lock);
    struct hint_list *list = find_list_locked(p, item->list_id);
    bool probe = list && list->kernel_evicts;
    g_mutex_unlock(&p->lock);
    return probe;
}

static bool hint_was_opened(struct prefetcher *p, const struct work_item *item)
{
    g_mutex_lock(&p->lock);
    struct hint_list *list = find_list_locked(p, item->list_id);
    bool opened = list && hint_opened_locked(list, item->index);
    g_mutex_unlock(&p->lock);
    return opened;
}

/* Notes a hinted object's size; tells the cache to drop objects the page cache holds while
 * hint lists are being read: an object stored in the kernel's page cache at its open leaves
 * the content cache at once, and a composite's buffer goes back to the pool when the last of
 * its objects has (reused by the next compose: no fresh memory, no page faults). Keeping a
 * second copy of what the page cache holds cost as much memory as the dataset (393 MiB of
 * RSS for 3,000 x 128 KiB) and a fifth of the daemon's CPU in page faults on fresh buffers;
 * dropping it: 103 MiB, 0.34 instead of 0.39 CPU s per 1,000 files, 1.42x the files/s
 * (bench/README.md). When the kernel does evict, its READ marks the lists (kernel_evicts) and
 * the next epoch's hinted objects are probed and fetched again. (Before, they were dropped
 * only when the hinted epochs together were larger than the cache.) */
static void note_hint_size(struct prefetcher *p, const struct work_item *item)
{
    g_mutex_lock(&p->lock);
    struct hint_list *list = find_list_locked(p, item->list_id);
    if (list) {
        /* The first size seen opens the list's gate past its first HINT_LOOKAHEAD_MIN
         * entries: the other workers are told, or they would sleep until the next liveness
         * check (a second) while this one fetched the list batch after batch alone. */
        bool gate_opens = list->items_seen == 0 && item->object.size > 0;
        list->bytes_seen += item->object.size;
        list->items_seen++;
        if (gate_opens)
            g_cond_broadcast(&p->work_ready);
    }
    bool changed = !p->drop_stored;
    p->drop_stored = true;
    g_mutex_unlock(&p->lock);
    if (changed)
        content_cache_set_drop_demoted(p->config.cache, true);
}

/* What a batch saw when it began: the mount's 429 counters and how often each limit had been
 * lowered. */
struct rate_sample {
    uint64_t reads, writes;
    uint64_t share_cuts, concurrency_cuts;
};

/* Lock held. */
static void rate_sample_locked(struct prefetcher *p, struct rate_sample *out)
{
    gcs_rate_limited(p->config.client, &out->reads, &out->writes);
    out->share_cuts = p->compose_share.throttles;
    out->concurrency_cuts = p->concurrency.throttles;
}

/* AIMD after one batch, the two limits weighed (aimd_weigh): 429s to writes (composes,
 * deletes) since it began lower the compose share while reads have room, else the batches in
 * flight (reads and writes back off jointly: plain GETs in place of composes would need ~31x
 * the reads); 429s to reads lower the batches in flight and double the share back (undoing a
 * cut); a batch without
 * 429s raises both. The counters are the mount's: another batch's 429s count too, which is
 * what a shared limit calls for. As TCP cuts its window once per round trip, not per lost
 * packet, a limit is lowered at most once per batch's time: not when another batch already
 * lowered it since this one began (the batches in flight together saw one burst). */
static void rate_feedback(struct prefetcher *p, bool compose_worthy,
                          const struct rate_sample *before)
{
    uint64_t reads, writes;
    g_mutex_lock(&p->lock);
    gcs_rate_limited(p->config.client, &reads, &writes);
    struct aimd_signals signals = {.write_refused = writes > before->writes && p->compose_enabled,
                                   .read_refused = reads > before->reads,
                                   .compose_worthy = compose_worthy,
                                   .reads_tight = aimd_below_max(&p->concurrency),
                                   .share_at_min = p->compose_share.value <= p->compose_share.min};
    struct aimd_weighed step = aimd_weigh(&signals);
    if (step.share == AIMD_CUT) {
        if (p->compose_share.throttles == before->share_cuts)
            aimd_on_throttle(&p->compose_share);
    } else if (step.share == AIMD_RAISE) {
        aimd_on_success(&p->compose_share);
    } else if (step.share == AIMD_RESTORE) {
        aimd_on_restore(&p->compose_share);
    }
    if (step.concurrency == AIMD_CUT) {
        if (p->concurrency.throttles == before->concurrency_cuts)
            aimd_on_throttle(&p->concurrency);
    } else if (step.concurrency == AIMD_RAISE) {
        aimd_on_window_success(&p->concurrency);
    }
    uint64_t writes_before = before->writes, reads_before = before->reads;
    bool warn = false;
    double share = p->compose_share.value;
    unsigned limit = aimd_limit(&p->concurrency);
    gint64 now = g_get_monotonic_time();
    if ((writes > writes_before || reads > reads_before) &&
        (p->throttle_logged_us == 0 || now - p->throttle_logged_us >= THROTTLE_LOG_US)) {
        p->throttle_logged_us = now;
        warn = true;
    }
    g_mutex_unlock(&p->lock);
    if (warn)
        flog_warn("prefetch",
                  "the bucket refuses requests for its rate (HTTP 429: %" PRIu64 " writes, %" PRIu64
                  " reads so far): composing %.0f%% of batches, %u in "
                  "flight (of %u); raised again while none are refused",
                  writes, reads, share * 100, limit, p->config.workers);
}

static void process_items(struct prefetcher *p, struct work_item *items, size_t count)
{
    struct work_item *todo[PREFETCH_TAKE_MAX];
    bool kernel_holds[PREFETCH_TAKE_MAX];
    size_t todo_count = 0;
    uint64_t capacity = content_cache_capacity(p->config.cache);
    /* First resolve and probe everything: no pending mark is held while a probe waits for
     * the kernel (a reader waiting on one would hold a FUSE thread the probe's reply needs). */
    for (size_t i = 0; i < count; i++) {
        struct work_item *item = &items[i];
        kernel_holds[i] = false;
        if (p->config.resolve(item->path, p->config.resolve_user, &item->object) < 0)
            continue;
        item->resolved = true;
        if (item->source == SOURCE_HINT)
            note_hint_size(p, item);
        if (item->object.kernel_cached && item->object.size <= p->config.max_object_size) {
            kernel_holds[i] = true;
            if (p->config.probe && hint_probed(p, item)) {
                kernel_holds[i] = p->config.probe(&item->object, p->config.resolve_user);
                g_mutex_lock(&p->lock);
                p->stats.kernel_probes++;
                p->stats.kernel_probe_misses += kernel_holds[i] ? 0 : 1;
                g_mutex_unlock(&p->lock);
            }
        }
    }
    for (size_t i = 0; i < count; i++) {
        struct work_item *item = &items[i];
        if (!item->resolved)
            continue;
        if (item->object.size > p->config.max_object_size) {
            item->outcome = WARM_TOO_LARGE;
            continue;
        }
        if ((item->source == SOURCE_HINT || item->source == SOURCE_RETRY) &&
            hint_was_opened(p, item)) {
            /* Its reader got there first (while this batch was resolved and probed): the
             * reader fetches it, or has. */
            g_mutex_lock(&p->lock);
            p->stats.files_already_cached++;
            g_mutex_unlock(&p->lock);
            continue;
        }
        if (item->source == SOURCE_WARMUP) {
            g_mutex_lock(&p->lock);
            bool fits = p->warm_bytes_admitted + item->object.size <= capacity;
            if (fits)
                p->warm_bytes_admitted += item->object.size;
            g_mutex_unlock(&p->lock);
            if (!fits) {
                item->outcome = WARM_NO_ROOM;
                continue;
            }
        }
        if (kernel_holds[i] || !content_cache_mark_pending(p->config.cache, item->object.name,
                                                           item->object.generation)) {
            item->outcome = WARM_CACHED;
            g_mutex_lock(&p->lock);
            p->stats.files_already_cached++;
            g_mutex_unlock(&p->lock);
            continue;
        }
        item->marked = true;
        todo[todo_count++] = item;
    }

    struct compose_item plan_items[PREFETCH_TAKE_MAX];
    struct compose_batch batches[PREFETCH_TAKE_MAX];
    for (size_t i = 0; i < todo_count; i++)
        plan_items[i] = (struct compose_item){.name = todo[i]->object.name,
                                              .generation = todo[i]->object.generation,
                                              .size = todo[i]->object.size};
    size_t batch_count = compose_plan(&p->config.plan, plan_items, todo_count, batches);
    for (size_t b = 0; b < batch_count; b++) {
        struct compose_batch *batch = &batches[b];
        struct work_item **group = &todo[batch->first];
        struct rate_sample sample;
        g_mutex_lock(&p->lock);
        rate_sample_locked(p, &sample);
        bool compose = p->compose_enabled;
        if (compose && batch->kind == BATCH_COMPOSE && p->config.compose_extra_per_gib > 0 &&
            !compose_cheaper(batch->count, batch->bytes, p->config.compose_extra_per_gib)) {
            compose = false; /* soft delete bills its bytes: the GETs cost less */
            p->stats.batches_cheaper_direct++;
        }
        if (compose && batch->kind == BATCH_COMPOSE && !aimd_allowed(&p->compose_share)) {
            compose = false;
            p->stats.batches_not_composed++;
        }
        g_mutex_unlock(&p->lock);
        if (batch->kind == BATCH_EMPTY) {
            int rc = content_cache_insert(p->config.cache, group[0]->object.name,
                                          group[0]->object.generation, "", 0);
            count_result(p, group[0], rc);
            finish_item(p, group[0]);
        } else if (batch->kind == BATCH_COMPOSE && compose) {
            fetch_composed(p, group, batch->count);
        } else {
            fetch_direct(p, group, batch->count);
        }
        if (batch->kind != BATCH_EMPTY)
            rate_feedback(p, batch->kind == BATCH_COMPOSE, &sample);
    }
    for (size_t i = 0; i < count; i++) {
        finish_item(p, &items[i]);
        account_done(p, &items[i]);
        work_item_clear(&items[i]);
    }
}

static gpointer worker_main(gpointer data)
{
    struct prefetcher *p = data;
    size_t max = MIN((size_t)MAX(p->config.plan.max_objects, 1u), (size_t)PREFETCH_TAKE_MAX);
    struct work_item items[PREFETCH_TAKE_MAX];
    bool busy = false;
    for (;;) {
        g_mutex_lock(&p->lock);
        if (busy) {
            p->busy_workers--;
            busy = false;
        }
        bool check_owners = false;
        for (;;) {
            /* About once a second while lists exist, one worker looks for exited writers. */
            gint64 now = g_get_monotonic_time();
            if (p->lists->len > 0 && now >= p->next_liveness_check) {
                p->next_liveness_check = now + HINT_LIVENESS_CHECK_US;
                check_owners = true;
                break;
            }
            /* Over the concurrency limit the worker looks again shortly: no one is woken
             * when a batch ends, so the hot path gains no broadcast. */
            bool over_limit = p->busy_workers >= aimd_limit(&p->concurrency);
            if (p->stopping || (!over_limit && has_work_locked(p)))
                break;
            if (over_limit)
                g_cond_wait_until(&p->work_ready, &p->lock, now + THROTTLED_RECHECK_US);
            else {
                p->idle_workers++;
                if (p->lists->len > 0)
                    g_cond_wait_until(&p->work_ready, &p->lock, p->next_liveness_check);
                else
                    g_cond_wait(&p->work_ready, &p->lock);
                p->idle_workers--;
            }
        }
        if (p->stopping) {
            g_mutex_unlock(&p->lock);
            break;
        }
        if (check_owners) {
            g_mutex_unlock(&p->lock);
            drop_dead_lists(p);
            continue;
        }
        memset(items, 0, sizeof(items));
        size_t n = take_work_locked(p, items, max);
        p->busy_workers++;
        busy = true;
        g_mutex_unlock(&p->lock);
        process_items(p, items, n);
    }
    return NULL;
}

static gpointer sweeper_main(gpointer data)
{
    sweep_temps(data, false);
    return NULL;
}

/* ---- public ---- */

int prefetch_new(const struct prefetch_config *config, struct prefetcher **out)
{
    if (!config->client || !config->cache || !config->budget || !config->resolve ||
        !config->temp_prefix)
        return -EINVAL;
    struct prefetcher *p = g_new0(struct prefetcher, 1);
    g_mutex_init(&p->lock);
    g_cond_init(&p->work_ready);
    g_cond_init(&p->temps_changed);
    p->config = *config;
    if (p->config.lookahead == 0)
        p->config.lookahead = 1024;
    if (p->config.workers == 0)
        p->config.workers = 8;
    if (p->config.plan.max_objects > COMPOSE_MAX_SOURCES)
        p->config.plan.max_objects = COMPOSE_MAX_SOURCES;
    p->temp_prefix = g_strdup(config->temp_prefix);
    p->config.temp_prefix = p->temp_prefix;
    char hostname[256] = "host";
    if (gethostname(hostname, sizeof(hostname) - 1) < 0)
        g_strlcpy(hostname, "host", sizeof(hostname));
    hostname[sizeof(hostname) - 1] = '\0';
    g_strdelimit(hostname, "/-", '_');
    p->host = g_strdup(hostname);
    p->mount_id = g_strdup_printf("%s-%d-%08x", p->host, (int)getpid(), g_random_int());
    p->lists = g_ptr_array_new_with_free_func((GDestroyNotify)hint_list_free);
    g_queue_init(&p->auto_queue);
    g_queue_init(&p->warm_queue);
    p->compose_enabled = config->compose;
    aimd_init(&p->compose_share, COMPOSE_SHARE_MIN, 1.0, COMPOSE_SHARE_STEP, 0.5);
    aimd_init(&p->concurrency, 1.0, (double)p->config.workers, CONCURRENCY_STEP, 0.5);
    p->pool = buffer_pool_new(config->budget, config->reserve, config->reserve);
    p->reaper = temp_reaper_new(config->client);

    if (p->compose_enabled) {
        const char *const permissions[] = {"storage.objects.create", "storage.objects.delete"};
        bool granted[2] = {false, false};
        int rc = gcs_test_permissions(p->config.client, permissions, 2, granted);
        if (rc == 0 && !(granted[0] && granted[1])) {
            p->compose_enabled = false;
            flog_warn("prefetch", "no permission to create and delete objects: compose-batched "
                                  "prefetch is off, plain GETs instead");
        }
    }
    p->stats.compose_enabled = p->compose_enabled;
    p->workers = g_ptr_array_new();
    /* The sweep lists and deletes: in the background, so the mount does not wait for it. */
    g_ptr_array_add(p->workers, g_thread_new("fluxfs-sweep", sweeper_main, p));
    for (unsigned i = 0; i < p->config.workers; i++)
        g_ptr_array_add(p->workers, g_thread_new("fluxfs-prefetch", worker_main, p));
    flog_info("prefetch", "prefetcher: mount id %s, compose %s, lookahead %u, %u workers",
              p->mount_id, p->compose_enabled ? "on" : "off", p->config.lookahead,
              p->config.workers);
    *out = p;
    return 0;
}

void prefetch_free(struct prefetcher *p)
{
    if (!p)
        return;
    g_mutex_lock(&p->lock);
    p->stopping = true;
    g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
    for (guint i = 0; i < p->workers->len; i++)
        g_thread_join(g_ptr_array_index(p->workers, i));
    g_ptr_array_free(p->workers, TRUE);
    temp_reaper_stop(p->reaper); /* deletes paused for the rate go now, for the last time */
    /* Deletes in flight finish (each has a deadline: the engine ends every request), then
     * anything left is listed away. Their callbacks lock p: no giving up on them (freeing p
     * under a late callback was a use-after-free); a slow end is logged every 30 s. */
    g_mutex_lock(&p->lock);
    gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (p->stats.temps_live > 0)
        if (!g_cond_wait_until(&p->temps_changed, &p->lock, deadline)) {
            flog_warn("prefetch",
                      "unmount: still waiting for %" PRIu64 " temporary object "
                      "deletes",
                      (uint64_t)p->stats.temps_live);
            deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
        }
    bool used_temps = p->temp_seq > 0;
    g_mutex_unlock(&p->lock);
    if (used_temps)
        sweep_temps(p, true);
    temp_reaper_free(p->reaper);
    struct prefetch_stats s = p->stats;
    flog_info("prefetch",
              "prefetched %" PRIu64 " files (%" PRIu64 " bytes): %" PRIu64 " composes (%" PRIu64
              " failed), %" PRIu64 " composite GETs, %" PRIu64 " plain GETs, %" PRIu64
              " temporaries deleted",
              s.files_fetched, s.bytes_fetched, s.composes, s.compose_failures, s.composite_gets,
              s.direct_gets, s.temps_deleted);
    g_mutex_lock(&p->pool->lock);
    p->pool->closed = true; /* blocks the cache still holds are freed, not pooled */
    g_mutex_unlock(&p->pool->lock);
    buffer_pool_drain(p->pool);
    buffer_pool_unref(p->pool);
    g_ptr_array_free(p->lists, TRUE);
    char *path;
    while ((path = g_queue_pop_head(&p->auto_queue)))
        g_free(path);
    struct warm_entry *entry;
    while ((entry = g_queue_pop_head(&p->warm_queue))) {
        g_free(entry->path);
        g_free(entry);
    }
    g_free(p->temp_prefix);
    g_free(p->mount_id);
    g_free(p->host);
    g_cond_clear(&p->work_ready);
    g_cond_clear(&p->temps_changed);
    g_mutex_clear(&p->lock);
    g_free(p);
}

/* The list of owner for a new list or an append: made when there is none (dead owners' lists
 * are dropped first when the table is full). NULL when PREFETCH_MAX_HINT_LISTS live lists
 * exist. Lock held; may drop it to look at /proc. */
static struct hint_list *owner_list_locked(struct prefetcher *p,
                                           const struct prefetch_hint_owner *owner, bool fresh)
{
    guint index = 0;
    struct hint_list *list = find_owner_list_locked(p, owner, &index);
    if (list && !fresh)
        return list;
    if (list)
        remove_list_locked(p, index);
    if (p->lists->len >= PREFETCH_MAX_HINT_LISTS) {
        g_mutex_unlock(&p->lock);
        drop_dead_lists(p);
        g_mutex_lock(&p->lock);
        if (p->lists->len >= PREFETCH_MAX_HINT_LISTS)
            return NULL;
    }
    list = hint_list_new(++p->next_list_id, owner);
    g_ptr_array_add(p->lists, list);
    return list;
}

int prefetch_hints_reset(struct prefetcher *p, const struct prefetch_hint_owner *owner)
{
    g_mutex_lock(&p->lock);
    struct hint_list *list = owner_list_locked(p, owner, true);
    g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
    return list ? 0 : -ENOSPC;
}

int prefetch_hints_append(struct prefetcher *p, const struct prefetch_hint_owner *owner,
                          const char *const *paths, size_t count)
{
    g_mutex_lock(&p->lock);
    struct hint_list *list = owner_list_locked(p, owner, false);
    if (!list) {
        g_mutex_unlock(&p->lock);
        return -ENOSPC;
    }
    for (size_t i = 0; i < count && p->hint_entries < PREFETCH_MAX_HINTS; i++) {
        char *copy = g_strdup(paths[i]);
        g_ptr_array_add(list->paths, copy);
        p->hint_entries++;
        if (!g_hash_table_contains(list->index, copy))
            g_hash_table_insert(list->index, copy, GSIZE_TO_POINTER(list->paths->len));
    }
    size_t old_bytes = list->opened->len;
    g_byte_array_set_size(list->opened, (list->paths->len + 7) / 8);
    memset(list->opened->data + old_bytes, 0, list->opened->len - old_bytes);
    g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
    return 0;
}

bool prefetch_note_open(struct prefetcher *p, const char *path)
{
    bool hinted = false, moved = false;
    g_mutex_lock(&p->lock);
    for (guint i = 0; i < p->lists->len; i++) {
        struct hint_list *list = g_ptr_array_index(p->lists, i);
        size_t position = GPOINTER_TO_SIZE(g_hash_table_lookup(list->index, path));
        if (position == 0)
            continue;
        hinted = true;
        if (!hint_opened_locked(list, position - 1)) {
            list->opened->data[(position - 1) / 8] |= (guint8)(1u << ((position - 1) % 8));
            list->opened_count++;
            moved = true;
        }
        if (position > list->position) {
            list->position = position;
            moved = true;
        }
    }
    /* Woken only when an idle worker would find work: once a list is fetched to its end (the
     * rest of an epoch; all of a cached one) an open used to wake every worker for nothing,
     * 8 futex wakes and context switches per file (bench/README.md, issue 23). */
    if (moved && p->idle_workers > 0 && has_work_locked(p))
        g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
    return hinted;
}

void prefetch_note_kernel_eviction(struct prefetcher *p)
{
    g_mutex_lock(&p->lock);
    p->stats.kernel_evictions++;
    bool queued = false;
    for (guint i = 0; i < p->lists->len; i++) {
        struct hint_list *list = g_ptr_array_index(p->lists, i);
        if (list->kernel_evicts)
            continue;
        list->kernel_evicts = true;
        /* Taken so far and not opened: perhaps passed over as held; probed now, lowest
         * first (the readers are nearest to them; the array is taken from its end). */
        for (size_t j = list->next; j-- > 0;) {
            if (!hint_opened_locked(list, j)) {
                g_array_append_val(list->retry, j);
                queued = true;
            }
        }
    }
    if (queued)
        g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
}

static void add_to_queue(struct prefetcher *p, GQueue *queue, const char *const *paths,
                         size_t count, uint64_t *counter)
{
    g_mutex_lock(&p->lock);
    for (size_t i = 0; i < count && queue->length < PREFETCH_MAX_QUEUED; i++) {
        g_queue_push_tail(queue, g_strdup(paths[i]));
        (*counter)++;
    }
    g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
}

void prefetch_add_auto(struct prefetcher *p, const char *const *paths, size_t count)
{
    add_to_queue(p, &p->auto_queue, paths, count, &p->stats.auto_queued);
}

void prefetch_add_warmup(struct prefetcher *p, uint64_t session, const char *const *paths,
                         size_t count)
{
    g_mutex_lock(&p->lock);
    for (size_t i = 0; i < count && p->warm_queue.length < PREFETCH_MAX_QUEUED; i++) {
        struct warm_entry *entry = g_new(struct warm_entry, 1);
        entry->path = g_strdup(paths[i]);
        entry->session = session;
        g_queue_push_tail(&p->warm_queue, entry);
        p->stats.warmup_total++;
    }
    g_cond_broadcast(&p->work_ready);
    g_mutex_unlock(&p->lock);
}

size_t prefetch_cancel_warmup(struct prefetcher *p, uint64_t session)
{
    size_t cancelled = 0;
    if (session == 0)
        return 0;
    g_mutex_lock(&p->lock);
    for (GList *link = p->warm_queue.head; link;) {
        GList *next = link->next;
        struct warm_entry *entry = link->data;
        if (entry->session == session) {
            g_queue_delete_link(&p->warm_queue, link);
            g_free(entry->path);
            g_free(entry);
            cancelled++;
        }
        link = next;
    }
    p->stats.warmup_cancelled += cancelled;
    g_mutex_unlock(&p->lock);
    return cancelled;
}

void prefetch_get_stats(struct prefetcher *p, struct prefetch_stats *out)
{
    drop_dead_lists(p); /* the counters cover live lists only */
    g_mutex_lock(&p->lock);
    *out = p->stats;
    out->compose_enabled = p->compose_enabled;
    out->compose_share = p->compose_share.value;
    out->compose_share_decreases = p->compose_share.throttles;
    out->concurrency_limit = aimd_limit(&p->concurrency);
    out->concurrency_max = p->config.workers;
    out->concurrency_decreases = p->concurrency.throttles;
    gcs_rate_limited(p->config.client, &out->rate_limited_reads, &out->rate_limited_writes);
    struct temp_reaper_stats reaper;
    temp_reaper_get_stats(p->reaper, &reaper);
    out->temps_delete_resent = reaper.resent;
    out->temps_delete_waiting = reaper.waiting;
    out->hint_lists = p->lists->len;
    out->hint_lists_dropped = p->lists_dropped;
    for (guint i = 0; i < p->lists->len; i++) {
        const struct hint_list *list = g_ptr_array_index(p->lists, i);
        out->hints_total += list->paths->len;
        out->hints_done += list->done;
        out->hints_missing += list->missing;
        out->hint_position += list->position;
        out->hints_opened += list->opened_count;
    }
    g_mutex_lock(&p->pool->lock);
    out->buffers_reused = p->pool->reused;
    out->buffers_fresh = p->pool->fresh;
    g_mutex_unlock(&p->pool->lock);
    g_mutex_unlock(&p->lock);
}

void prefetch_get_hint_lists(struct prefetcher *p, struct prefetch_hint_list_stats **out,
                             size_t *count)
{
    g_mutex_lock(&p->lock);
    *count = p->lists->len;
    *out = g_new0(struct prefetch_hint_list_stats, p->lists->len ? p->lists->len : 1);
    for (guint i = 0; i < p->lists->len; i++) {
        const struct hint_list *list = g_ptr_array_index(p->lists, i);
        (*out)[i] = (struct prefetch_hint_list_stats){.owner = list->owner,
                                                      .total = list->paths->len,
                                                      .done = list->done,
                                                      .missing = list->missing,
                                                      .opened = list->opened_count,
                                                      .position = list->position};
    }
    g_mutex_unlock(&p->lock);
}
