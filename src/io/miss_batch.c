/* Concurrent demand misses gathered for a short window and fetched with one compose batch
 * (see include/fluxfs/miss_batch.h). */
#include "fluxfs/miss_batch.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <glib.h>

#include "fluxfs/log.h"
#include "fluxfs/temp_reaper.h"

#define MISS_BATCH_COMPOSITE_MAX (8u << 20) /* one GET per composite */

/* One waiting demand miss. */
struct miss {
    struct gcs_read_request request; /* name points at name below */
    char *name;
    gcs_read_cb cb;
    void *user;
};

/* One compose batch in flight; lives until its last completion. */
struct batch {
    struct miss_batcher *b;
    struct miss **misses;
    size_t count;
    struct compose_item pieces[COMPOSE_MAX_SOURCES];
    char *temp;
    struct gcs_object composite;
    void *buf;
    size_t buf_len;
};

struct miss_batcher {
    GMutex lock;
    GCond changed;                   /* a miss arrived, the window filled, a batch ended, stop */
    struct miss_batch_config config; /* immutable; strings owned below */
    char *temp_prefix;               /* immutable */
    char *mount_id;                  /* immutable */
    GThread *timer;                  /* immutable after miss_batch_new */
    struct temp_reaper *reaper;      /* immutable: deletes temporaries until they are gone */

    GPtrArray *waiting;            /* lock: struct miss * in arrival order */
    gint64 window_end_us;          /* lock: when the open window closes (monotonic) */
    bool stopping;                 /* lock */
    bool compose_enabled;          /* lock */
    uint64_t temp_seq;             /* lock */
    unsigned batches_live;         /* lock: compose batches not finished */
    struct miss_batch_stats stats; /* lock */
};

/* ---- the pure plan ---- */

size_t miss_batch_plan(const struct compose_plan_config *plan, unsigned min_count,
                       const struct compose_item *items, size_t count,
                       struct compose_batch *batches)
{
    if (min_count < 2)
        min_count = 2;
    size_t batch_count = compose_plan(plan, items, count, batches);
    for (size_t i = 0; i < batch_count; i++)
        if (batches[i].kind == BATCH_EMPTY ||
            (batches[i].kind == BATCH_COMPOSE && batches[i].count < min_count))
            batches[i].kind = BATCH_DIRECT;
    return batch_count;
}

/* ---- completing misses ---- */

static void miss_free(struct miss *miss)
{
    g_free(miss->name);
    g_free(miss);
}

/* Plain GET of one miss: the caller's callback gets the result directly. */
static void send_direct(struct miss_batcher *b, struct miss *miss)
{
    gcs_read_async(b->config.client, &miss->request, miss->cb, miss->user);
    miss_free(miss);
}

static void batch_finish(struct batch *batch)
{
    struct miss_batcher *b = batch->b;
    membudget_free_buffer(b->config.budget, batch->buf, batch->buf_len);
    gcs_object_clear(&batch->composite);
    g_free(batch->temp);
    g_free(batch->misses);
    g_free(batch);
    g_mutex_lock(&b->lock);
    b->batches_live--;
    g_cond_broadcast(&b->changed);
    g_mutex_unlock(&b->lock);
}

/* The batch failed somewhere: every miss becomes a plain GET of its pinned generation. */
static void batch_fall_back(struct batch *batch)
{
    struct miss_batcher *b = batch->b;
    g_mutex_lock(&b->lock);
    b->stats.fallbacks += batch->count;
    g_mutex_unlock(&b->lock);
    for (size_t i = 0; i < batch->count; i++)
        send_direct(b, batch->misses[i]);
    batch_finish(batch);
}

static void on_temp_deleted(int err, void *user)
{
    struct miss_batcher *b = user;
    g_mutex_lock(&b->lock);
    b->stats.temps_live--;
    if (err == 0)
        b->stats.temps_deleted++;
    g_cond_broadcast(&b->changed);
    g_mutex_unlock(&b->lock);
    if (err < 0 && err != -ENOENT)
        flog_warn("io",
                  "could not delete a temporary compose object: %s (swept at unmount or "
                  "the next mount)",
                  g_strerror(-err));
}

/* Deletes the batch's temporary object without waiting (generation 0: whatever is there),
 * again and again while the bucket refuses (temp_reaper.h). */
static void delete_temp(struct batch *batch, int64_t generation)
{
    temp_reaper_delete(batch->b->reaper, batch->temp, generation, on_temp_deleted, batch->b);
}

static void on_composite_read(int err, size_t got, void *user)
{
    struct batch *batch = user;
    struct miss_batcher *b = batch->b;
    delete_temp(batch, batch->composite.generation); /* read or not, it goes now */
    uint64_t offsets[COMPOSE_MAX_SOURCES];
    size_t bad = 0;
    int rc = err;
    if (rc == 0 && got != batch->composite.size)
        rc = -EIO;
    if (rc == 0)
        rc = compose_split_check(batch->pieces, batch->count, batch->buf, got, offsets, &bad);
    if (rc < 0) {
        flog_warn("io",
                  "composite of %zu demand misses (first '%s') was not usable (%s): "
                  "plain GETs instead",
                  batch->count, batch->pieces[0].name, g_strerror(-rc));
        batch_fall_back(batch);
        return;
    }
    g_mutex_lock(&b->lock);
    b->stats.composed += batch->count;
    g_mutex_unlock(&b->lock);
    for (size_t i = 0; i < batch->count; i++) {
        struct miss *miss = batch->misses[i];
        size_t size = (size_t)batch->pieces[i].size;
        memcpy(miss->request.buf, (char *)batch->buf + offsets[i], size);
        miss->cb(0, size, miss->user);
        miss_free(miss);
    }
    batch_finish(batch);
}

static void on_composed(int err, struct gcs_object *obj, void *user)
{
    struct batch *batch = user;
    struct miss_batcher *b = batch->b;
    g_mutex_lock(&b->lock);
    if (err == -EBUSY) {
        /* Refused for the bucket's rate at its only attempt: nothing made, nothing to delete. */
        b->stats.temps_live--;
        g_cond_broadcast(&b->changed);
    }
    if (err < 0) {
        b->stats.compose_failures++;
        if (err == -EACCES && b->compose_enabled) {
            b->compose_enabled = false;
            flog_warn("io", "compose refused (permission denied): demand misses are fetched "
                            "with plain GETs from now on");
        }
    } else {
        b->stats.composite_gets++;
    }
    g_mutex_unlock(&b->lock);
    if (err < 0) {
        /* A compose whose reply was lost may still have made the object: delete it anyway. */
        if (err != -EBUSY)
            delete_temp(batch, 0);
        batch_fall_back(batch);
        return;
    }
    batch->composite = *obj;
    g_free(obj);
    batch->buf_len = batch->composite.size ? (size_t)batch->composite.size : 1;
    batch->buf = batch->composite.size <= MISS_BATCH_COMPOSITE_MAX
                     ? membudget_alloc(b->config.budget, batch->buf_len, true, b->config.reserve)
                     : NULL;
    if (!batch->buf) {
        delete_temp(batch, batch->composite.generation);
        batch_fall_back(batch);
        return;
    }
    struct gcs_read_request request = {
        .read_type = METRICS_READ_PARALLEL,
        .name = batch->composite.name,
        .generation = batch->composite.generation,
        .offset = 0,
        .len = (size_t)batch->composite.size,
        .buf = batch->buf,
        .has_expected_crc32c = batch->composite.has_crc32c,
        .expected_crc32c = batch->composite.crc32c,
        .object_size = batch->composite.size,
        .whole_object = true,
    };
    /* Every piece with a crc32c: compose_split_check verifies every byte (one pass). */
    request.caller_checks_bytes = true;
    for (size_t i = 0; i < batch->count; i++)
        request.caller_checks_bytes = request.caller_checks_bytes && batch->pieces[i].has_crc32c;
    gcs_read_async(b->config.client, &request, on_composite_read, batch);
}

/* Composes misses[0 .. count) into a temporary object. */
static void send_compose(struct miss_batcher *b, struct miss **misses, size_t count)
{
    struct batch *batch = g_new0(struct batch, 1);
    batch->b = b;
    batch->count = count;
    batch->misses = g_memdup2(misses, count * sizeof(*misses));
    struct gcs_compose_source sources[COMPOSE_MAX_SOURCES];
    for (size_t i = 0; i < count; i++) {
        const struct gcs_read_request *r = &misses[i]->request;
        sources[i] = (struct gcs_compose_source){r->name, r->generation};
        batch->pieces[i] = (struct compose_item){.name = r->name,
                                                 .generation = r->generation,
                                                 .size = r->object_size,
                                                 .has_crc32c = r->has_expected_crc32c,
                                                 .crc32c = r->expected_crc32c};
    }
    g_mutex_lock(&b->lock);
    uint64_t seq = ++b->temp_seq;
    b->stats.composes++;
    b->stats.temps_live++; /* one delete per batch, whatever happens */
    b->batches_live++;
    g_mutex_unlock(&b->lock);
    batch->temp = g_strdup_printf("%s%s/m%" PRIu64, b->temp_prefix, b->mount_id, seq);
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .if_generation_match = 0};
    gcs_compose_async(b->config.client, batch->temp, sources, (int)count, &gcs_temporary_attrs,
                      &pre, on_composed, batch);
}

/* Sends the misses of one closed window. Called without the lock. */
static void dispatch(struct miss_batcher *b, GPtrArray *misses)
{
    size_t count = misses->len;
    struct compose_item *items = g_new0(struct compose_item, count ? count : 1);
    struct compose_batch *batches = g_new0(struct compose_batch, count ? count : 1);
    for (size_t i = 0; i < count; i++) {
        struct miss *miss = g_ptr_array_index(misses, i);
        items[i] = (struct compose_item){.name = miss->name,
                                         .generation = miss->request.generation,
                                         .size = miss->request.object_size};
    }
    g_mutex_lock(&b->lock);
    bool compose = b->compose_enabled;
    g_mutex_unlock(&b->lock);
    size_t batch_count =
        miss_batch_plan(&b->config.plan, b->config.min_count, items, count, batches);
    uint64_t direct = 0;
    for (size_t k = 0; k < batch_count; k++) {
        struct miss **group = (struct miss **)misses->pdata + batches[k].first;
        if (batches[k].kind == BATCH_COMPOSE && compose) {
            send_compose(b, group, batches[k].count);
        } else {
            direct += batches[k].count;
            for (size_t i = 0; i < batches[k].count; i++)
                send_direct(b, group[i]);
        }
    }
    g_mutex_lock(&b->lock);
    b->stats.direct += direct;
    g_mutex_unlock(&b->lock);
    g_free(items);
    g_free(batches);
}

/* ---- the window ---- */

static gpointer timer_main(gpointer data)
{
    struct miss_batcher *b = data;
    unsigned max = MAX(b->config.plan.max_objects, 2u);
    g_mutex_lock(&b->lock);
    for (;;) {
        while (!b->stopping && b->waiting->len == 0)
            g_cond_wait(&b->changed, &b->lock);
        if (b->waiting->len == 0)
            break; /* stopping, nothing left */
        while (!b->stopping && b->waiting->len < max &&
               g_cond_wait_until(&b->changed, &b->lock, b->window_end_us))
            ;
        GPtrArray *closed = b->waiting;
        b->waiting = g_ptr_array_new();
        b->stats.windows++;
        g_mutex_unlock(&b->lock);
        dispatch(b, closed);
        g_ptr_array_free(closed, TRUE);
        g_mutex_lock(&b->lock);
    }
    g_mutex_unlock(&b->lock);
    return NULL;
}

/* ---- public ---- */

int miss_batch_new(const struct miss_batch_config *config, struct miss_batcher **out)
{
    if (!config->client || !config->budget || !config->temp_prefix || !config->mount_id ||
        config->window_us == 0)
        return -EINVAL;
    struct miss_batcher *b = g_new0(struct miss_batcher, 1);
    g_mutex_init(&b->lock);
    g_cond_init(&b->changed);
    b->config = *config;
    if (b->config.min_count < 2)
        b->config.min_count = 2;
    if (b->config.plan.max_objects > COMPOSE_MAX_SOURCES)
        b->config.plan.max_objects = COMPOSE_MAX_SOURCES;
    if (b->config.plan.batch_max_bytes == 0 ||
        b->config.plan.batch_max_bytes > MISS_BATCH_COMPOSITE_MAX)
        b->config.plan.batch_max_bytes = MISS_BATCH_COMPOSITE_MAX;
    b->temp_prefix = g_strdup(config->temp_prefix);
    b->mount_id = g_strdup(config->mount_id);
    b->config.temp_prefix = b->temp_prefix;
    b->config.mount_id = b->mount_id;
    b->waiting = g_ptr_array_new();
    b->compose_enabled = true;
    b->reaper = temp_reaper_new(config->client);
    b->timer = g_thread_new("fluxfs-missbatch", timer_main, b);
    *out = b;
    return 0;
}

void miss_batch_free(struct miss_batcher *b)
{
    if (!b)
        return;
    g_mutex_lock(&b->lock);
    b->stopping = true;
    g_cond_broadcast(&b->changed);
    g_mutex_unlock(&b->lock);
    g_thread_join(b->timer);
    temp_reaper_stop(b->reaper); /* deletes paused for the rate go now, for the last time */
    g_mutex_lock(&b->lock);
    /* Batches and deletes in flight end (the engine ends every request); their callbacks
     * lock b, so b waits for them all (giving up after 30 s freed b under late callbacks). */
    gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (b->batches_live > 0 || b->stats.temps_live > 0)
        if (!g_cond_wait_until(&b->changed, &b->lock, deadline)) {
            flog_warn("io",
                      "unmount: still waiting for %u compose batches and %" PRIu64
                      " temporary deletes",
                      (unsigned)b->batches_live, (uint64_t)b->stats.temps_live);
            deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
        }
    struct miss_batch_stats s = b->stats;
    g_mutex_unlock(&b->lock);
    if (s.misses > 0)
        flog_info(
            "io",
            "demand misses: %" PRIu64 " in %" PRIu64 " windows, %" PRIu64 " composed in %" PRIu64
            " composes (%" PRIu64 " failed, %" PRIu64 " fell back to GETs), %" PRIu64 " plain GETs",
            s.misses, s.windows, s.composed, s.composes, s.compose_failures, s.fallbacks, s.direct);
    g_ptr_array_free(b->waiting, TRUE);
    temp_reaper_free(b->reaper);
    g_free(b->temp_prefix);
    g_free(b->mount_id);
    g_cond_clear(&b->changed);
    g_mutex_clear(&b->lock);
    g_free(b);
}

void miss_batch_submit(struct miss_batcher *b, const struct gcs_read_request *req, gcs_read_cb cb,
                       void *user)
{
    struct miss *miss = g_new0(struct miss, 1);
    miss->name = g_strdup(req->name);
    miss->request = *req;
    miss->request.name = miss->name;
    miss->cb = cb;
    miss->user = user;
    g_mutex_lock(&b->lock);
    b->stats.misses++;
    if (b->stopping) {
        g_mutex_unlock(&b->lock);
        send_direct(b, miss);
        return;
    }
    if (b->waiting->len == 0)
        b->window_end_us = g_get_monotonic_time() + b->config.window_us;
    g_ptr_array_add(b->waiting, miss);
    if (b->waiting->len == 1 || b->waiting->len >= MAX(b->config.plan.max_objects, 2u))
        g_cond_broadcast(&b->changed);
    g_mutex_unlock(&b->lock);
}

void miss_batch_get_stats(struct miss_batcher *b, struct miss_batch_stats *out)
{
    g_mutex_lock(&b->lock);
    *out = b->stats;
    out->compose_enabled = b->compose_enabled;
    g_mutex_unlock(&b->lock);
}
