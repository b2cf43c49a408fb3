/* The fake gcs layer (see fake_gcs.h): gcs.h's functions that the io layer calls, over an
 * in-memory store, with faults, latency and counters. */
#include "fake_gcs.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/crc32c.h"

struct fake_object {
    char *name;
    GBytes *data;
    uint32_t crc32c;
    int64_t generation;
    int64_t updated_ns; /* real time of the write: a sweep by age must see it as new */
    int64_t component_count;
    int64_t mtime_ns;
    bool has_mtime;
    char *content_type;
    char *symlink_target;
};

struct fake_part {
    GBytes *data;
    uint32_t crc32c;
    char *etag;
};

struct fake_upload { /* a multipart upload or a resumable session */
    char *name;
    char *content_type;
    bool has_mtime;
    int64_t mtime_ns;
    char *symlink_target;
    GHashTable *parts;                  /* multipart: part number -> struct fake_part */
    GByteArray *bytes;                  /* resumable: what was sent so far */
    struct gcs_write_preconditions pre; /* resumable: checked at the final put */
    bool has_pre;
};

struct fault {
    enum fake_gcs_op op;
    char *name_contains;
    unsigned nth, count;
    int err;
    bool lost_reply; /* the call takes effect, then fails */
    unsigned seen;
};

struct job {
    gint64 due;
    enum fake_gcs_op op;
    int err;   /* decided at the call: a fault, or 0 */
    bool lost; /* ... whose call takes effect all the same */
    void (*run)(struct gcs_client *fake, struct job *job, int err);
    void *data;
};

struct gcs_client {
    GMutex lock;
    GCond changed;
    GTree *objects;      /* name -> struct fake_object (owned) */
    GHashTable *uploads; /* upload id / session url -> struct fake_upload */
    int64_t next_generation;
    uint64_t next_id;
    bool deny;
    GPtrArray *faults; /* struct fault * */
    unsigned latency_us[FAKE_GCS_OP_COUNT];
    uint64_t calls[FAKE_GCS_OP_COUNT], failures[FAKE_GCS_OP_COUNT];
    GHashTable *named; /* "op:name" -> uint64_t count (boxed in a pointer) */
    /* engine */
    GThread *engine;
    GList *queue; /* struct job *, by due time */
    unsigned queued, running, max_queued;
    bool held, stopping;
};

const struct gcs_write_attrs gcs_temporary_attrs = {.storage_class = "STANDARD"};

/* ---- store helpers (lock held) ---- */

static void fake_object_free(gpointer data)
{
    struct fake_object *obj = data;
    g_free(obj->name);
    g_bytes_unref(obj->data);
    g_free(obj->content_type);
    g_free(obj->symlink_target);
    g_free(obj);
}

static void fake_part_free(gpointer data)
{
    struct fake_part *part = data;
    g_bytes_unref(part->data);
    g_free(part->etag);
    g_free(part);
}

static void fake_upload_free(gpointer data)
{
    struct fake_upload *up = data;
    g_free(up->name);
    g_free(up->content_type);
    g_free(up->symlink_target);
    if (up->parts)
        g_hash_table_unref(up->parts);
    if (up->bytes)
        g_byte_array_unref(up->bytes);
    g_free(up);
}

static void fill_object(const struct fake_object *obj, struct gcs_object *out)
{
    memset(out, 0, sizeof(*out));
    out->name = g_strdup(obj->name);
    out->size = g_bytes_get_size(obj->data);
    out->generation = obj->generation;
    out->metageneration = 1;
    out->updated_ns = obj->updated_ns;
    out->mtime_ns = obj->has_mtime ? obj->mtime_ns : out->updated_ns;
    out->has_crc32c = true;
    out->crc32c = obj->crc32c;
    out->symlink_target = g_strdup(obj->symlink_target);
    out->component_count = obj->component_count;
}

static int check_pre(struct gcs_client *fake, const char *name,
                     const struct gcs_write_preconditions *pre)
{
    if (!pre)
        return 0;
    struct fake_object *live = g_tree_lookup(fake->objects, name);
    if (pre->has_if_generation_match && (live ? live->generation : 0) != pre->if_generation_match)
        return -ESTALE;
    if (pre->has_if_metageneration_match && (!live || pre->if_metageneration_match != 1))
        return -ESTALE;
    return 0;
}

/* Stores data (taken) as the live name: 0 or the precondition's -ESTALE. */
static int store_locked(struct gcs_client *fake, const char *name, GBytes *data, uint32_t crc,
                        int64_t components, const struct gcs_write_attrs *attrs,
                        const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    int rc = check_pre(fake, name, pre);
    if (rc < 0) {
        g_bytes_unref(data);
        return rc;
    }
    struct fake_object *obj = g_new0(struct fake_object, 1);
    obj->name = g_strdup(name);
    obj->data = data;
    obj->crc32c = crc;
    obj->generation = ++fake->next_generation;
    obj->updated_ns = g_get_real_time() * 1000;
    obj->component_count = components;
    if (attrs) {
        obj->content_type = g_strdup(attrs->content_type);
        obj->has_mtime = attrs->has_mtime;
        obj->mtime_ns = attrs->mtime_ns;
        obj->symlink_target = g_strdup(attrs->symlink_target);
    }
    g_tree_replace(fake->objects, obj->name, obj);
    if (out)
        fill_object(obj, out);
    return 0;
}

/* The object (name, generation 0 = live), or NULL. */
static struct fake_object *lookup(struct gcs_client *fake, const char *name, int64_t generation)
{
    struct fake_object *obj = g_tree_lookup(fake->objects, name);
    if (!obj || (generation != 0 && obj->generation != generation))
        return NULL;
    return obj;
}

/* Reads a request body (at completion time: the caller's buffer or file must still be
 * there) and checks its CRC32C. */
static int read_body(const struct gcs_body *body, GBytes **out, uint32_t *crc)
{
    char *bytes = g_malloc(body->len ? body->len : 1);
    if (body->data) {
        memcpy(bytes, body->data, body->len);
    } else {
        uint64_t done = 0;
        while (done < body->len) {
            ssize_t n =
                pread(body->fd, bytes + done, body->len - done, (off_t)(body->fd_offset + done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                int err = n < 0 ? -errno : -EIO;
                g_free(bytes);
                return err;
            }
            done += (uint64_t)n;
        }
    }
    *crc = crc32c_update(0, bytes, body->len);
    if (body->has_crc32c && body->crc32c != *crc) {
        g_free(bytes);
        return -EIO; /* the server rejects a body whose x-goog-hash does not match */
    }
    *out = g_bytes_new_take(bytes, body->len);
    return 0;
}

/* ---- counting, faults, latency ---- */

static void count_named_locked(struct gcs_client *fake, enum fake_gcs_op op, const char *name)
{
    char *key = g_strdup_printf("%d:%s", (int)op, name ? name : "");
    uint64_t n = GPOINTER_TO_SIZE(g_hash_table_lookup(fake->named, key));
    g_hash_table_replace(fake->named, key, GSIZE_TO_POINTER((gsize)(n + 1)));
}

/* Whether the fault the last enter() of this thread decided is a lost reply: read by the
 * call right after it (or by submit, which the async calls make right after it). */
static __thread bool entered_lost;

/* Counts a call and decides its fault (0 = none). */
static int enter(struct gcs_client *fake, enum fake_gcs_op op, const char *name)
{
    entered_lost = false;
    g_mutex_lock(&fake->lock);
    fake->calls[op]++;
    count_named_locked(fake, op, name);
    int err = 0;
    for (guint i = 0; i < fake->faults->len; i++) {
        struct fault *f = g_ptr_array_index(fake->faults, i);
        if (f->op != op)
            continue;
        bool any = !f->name_contains || !f->name_contains[0];
        if (!any && (!name || !strstr(name, f->name_contains)))
            continue;
        f->seen++;
        if (!err && f->seen >= f->nth && (f->count == 0 || f->seen < f->nth + f->count)) {
            err = f->err;
            entered_lost = f->lost_reply;
        }
    }
    if (err)
        fake->failures[op]++;
    g_mutex_unlock(&fake->lock);
    return err;
}

static void sync_latency(struct gcs_client *fake, enum fake_gcs_op op)
{
    g_mutex_lock(&fake->lock);
    unsigned us = fake->latency_us[op];
    g_mutex_unlock(&fake->lock);
    if (us)
        g_usleep(us);
}

static gint by_due(gconstpointer a, gconstpointer b)
{
    const struct job *x = a, *y = b;
    return x->due < y->due ? -1 : x->due > y->due ? 1 : 0;
}

static void submit(struct gcs_client *fake, enum fake_gcs_op op, int err,
                   void (*run)(struct gcs_client *, struct job *, int), void *data)
{
    struct job *job = g_new0(struct job, 1);
    job->op = op;
    job->err = err;
    job->lost = err && entered_lost;
    job->run = run;
    job->data = data;
    g_mutex_lock(&fake->lock);
    job->due = g_get_monotonic_time() + fake->latency_us[op];
    /* insert_sorted keeps equal due times in call order (inserted after their peers) */
    GList *at = fake->queue;
    while (at && by_due(at->data, job) <= 0)
        at = at->next;
    fake->queue = g_list_insert_before(fake->queue, at, job);
    fake->queued++;
    fake->max_queued = MAX(fake->max_queued, fake->queued + fake->running);
    g_cond_broadcast(&fake->changed);
    g_mutex_unlock(&fake->lock);
}

static gpointer engine_main(gpointer data)
{
    struct gcs_client *fake = data;
    g_mutex_lock(&fake->lock);
    for (;;) {
        if (!fake->queue) {
            if (fake->stopping)
                break;
            g_cond_wait(&fake->changed, &fake->lock);
            continue;
        }
        struct job *job = fake->queue->data;
        if (!fake->stopping) {
            if (fake->held) {
                g_cond_wait(&fake->changed, &fake->lock);
                continue;
            }
            if (job->due > g_get_monotonic_time()) {
                g_cond_wait_until(&fake->changed, &fake->lock, job->due);
                continue;
            }
        }
        fake->queue = g_list_delete_link(fake->queue, fake->queue);
        fake->queued--;
        fake->running++;
        int err = fake->stopping ? -ECANCELED : job->err;
        if (fake->stopping)
            job->lost = false;
        g_mutex_unlock(&fake->lock);
        job->run(fake, job, err); /* takes the lock for the store, calls back without it */
        g_free(job);
        g_mutex_lock(&fake->lock);
        fake->running--;
        g_cond_broadcast(&fake->changed);
    }
    g_mutex_unlock(&fake->lock);
    return NULL;
}

/* ---- public: the fake itself ---- */

static gint compare_names(gconstpointer a, gconstpointer b, gpointer user)
{
    (void)user;
    return strcmp(a, b);
}

struct gcs_client *fake_gcs_new(void)
{
    struct gcs_client *fake = g_new0(struct gcs_client, 1);
    g_mutex_init(&fake->lock);
    g_cond_init(&fake->changed);
    fake->objects = g_tree_new_full(compare_names, NULL, NULL, fake_object_free);
    fake->uploads = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, fake_upload_free);
    fake->faults = g_ptr_array_new();
    fake->named = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    fake->next_generation = 1700000000000000;
    fake->engine = g_thread_new("fake-gcs", engine_main, fake);
    return fake;
}

void fake_gcs_free(struct gcs_client *fake)
{
    if (!fake)
        return;
    g_mutex_lock(&fake->lock);
    fake->stopping = true;
    g_cond_broadcast(&fake->changed);
    g_mutex_unlock(&fake->lock);
    g_thread_join(fake->engine);
    fake_gcs_clear_faults(fake);
    g_ptr_array_free(fake->faults, TRUE);
    g_tree_destroy(fake->objects);
    g_hash_table_destroy(fake->uploads);
    g_hash_table_destroy(fake->named);
    g_cond_clear(&fake->changed);
    g_mutex_clear(&fake->lock);
    g_free(fake);
}

int64_t fake_gcs_put(struct gcs_client *fake, const char *name, const void *data, size_t len)
{
    g_mutex_lock(&fake->lock);
    struct gcs_object out;
    store_locked(fake, name, g_bytes_new(data, len), crc32c_update(0, data, len), 0, NULL, NULL,
                 &out);
    g_mutex_unlock(&fake->lock);
    int64_t generation = out.generation;
    gcs_object_clear(&out);
    return generation;
}

int fake_gcs_get(struct gcs_client *fake, const char *name, GBytes **data, struct gcs_object *meta)
{
    g_mutex_lock(&fake->lock);
    struct fake_object *obj = lookup(fake, name, 0);
    if (obj && data)
        *data = g_bytes_ref(obj->data);
    if (obj && meta)
        fill_object(obj, meta);
    g_mutex_unlock(&fake->lock);
    return obj ? 0 : -ENOENT;
}

struct count_ctx {
    const char *prefix;
    unsigned n;
};

static gboolean count_one(gpointer key, gpointer value, gpointer user)
{
    struct count_ctx *ctx = user;
    (void)value;
    if (!ctx->prefix || g_str_has_prefix(key, ctx->prefix))
        ctx->n++;
    return FALSE;
}

unsigned fake_gcs_count(struct gcs_client *fake, const char *prefix)
{
    struct count_ctx ctx = {.prefix = prefix};
    g_mutex_lock(&fake->lock);
    g_tree_foreach(fake->objects, count_one, &ctx);
    g_mutex_unlock(&fake->lock);
    return ctx.n;
}

unsigned fake_gcs_open_uploads(struct gcs_client *fake)
{
    g_mutex_lock(&fake->lock);
    unsigned n = g_hash_table_size(fake->uploads);
    g_mutex_unlock(&fake->lock);
    return n;
}

void fake_gcs_deny_permissions(struct gcs_client *fake, bool deny)
{
    g_mutex_lock(&fake->lock);
    fake->deny = deny;
    g_mutex_unlock(&fake->lock);
}

static void add_fault(struct gcs_client *fake, enum fake_gcs_op op, const char *name_contains,
                      unsigned nth, unsigned count, int err, bool lost_reply)
{
    struct fault *f = g_new0(struct fault, 1);
    f->lost_reply = lost_reply;
    f->op = op;
    f->name_contains = g_strdup(name_contains);
    f->nth = nth ? nth : 1;
    f->count = count;
    f->err = err;
    g_mutex_lock(&fake->lock);
    g_ptr_array_add(fake->faults, f);
    g_mutex_unlock(&fake->lock);
}

void fake_gcs_fail(struct gcs_client *fake, enum fake_gcs_op op, const char *name_contains,
                   unsigned nth, unsigned count, int err)
{
    add_fault(fake, op, name_contains, nth, count, err, false);
}

void fake_gcs_lose_reply(struct gcs_client *fake, enum fake_gcs_op op, const char *name_contains,
                         unsigned nth, unsigned count, int err)
{
    add_fault(fake, op, name_contains, nth, count, err, true);
}

void fake_gcs_clear_faults(struct gcs_client *fake)
{
    g_mutex_lock(&fake->lock);
    for (guint i = 0; i < fake->faults->len; i++) {
        struct fault *f = g_ptr_array_index(fake->faults, i);
        g_free(f->name_contains);
        g_free(f);
    }
    g_ptr_array_set_size(fake->faults, 0);
    g_mutex_unlock(&fake->lock);
}

void fake_gcs_set_latency(struct gcs_client *fake, enum fake_gcs_op op, unsigned usec)
{
    g_mutex_lock(&fake->lock);
    fake->latency_us[op] = usec;
    g_mutex_unlock(&fake->lock);
}

void fake_gcs_hold(struct gcs_client *fake, bool hold)
{
    g_mutex_lock(&fake->lock);
    fake->held = hold;
    g_cond_broadcast(&fake->changed);
    g_mutex_unlock(&fake->lock);
}

bool fake_gcs_wait_queued(struct gcs_client *fake, unsigned n, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    g_mutex_lock(&fake->lock);
    bool ok = true;
    while (ok && fake->queued < n)
        ok = g_cond_wait_until(&fake->changed, &fake->lock, deadline) || fake->queued >= n;
    g_mutex_unlock(&fake->lock);
    return ok;
}

bool fake_gcs_wait_idle(struct gcs_client *fake, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    g_mutex_lock(&fake->lock);
    bool ok = true;
    while (ok && (fake->queued > 0 || fake->running > 0))
        ok = g_cond_wait_until(&fake->changed, &fake->lock, deadline) ||
             (fake->queued == 0 && fake->running == 0);
    g_mutex_unlock(&fake->lock);
    return ok;
}

uint64_t fake_gcs_calls(struct gcs_client *fake, enum fake_gcs_op op)
{
    g_mutex_lock(&fake->lock);
    uint64_t n = fake->calls[op];
    g_mutex_unlock(&fake->lock);
    return n;
}

uint64_t fake_gcs_failures(struct gcs_client *fake, enum fake_gcs_op op)
{
    g_mutex_lock(&fake->lock);
    uint64_t n = fake->failures[op];
    g_mutex_unlock(&fake->lock);
    return n;
}

uint64_t fake_gcs_calls_named(struct gcs_client *fake, enum fake_gcs_op op, const char *name)
{
    char *key = g_strdup_printf("%d:%s", (int)op, name ? name : "");
    g_mutex_lock(&fake->lock);
    uint64_t n = GPOINTER_TO_SIZE(g_hash_table_lookup(fake->named, key));
    g_mutex_unlock(&fake->lock);
    g_free(key);
    return n;
}

unsigned fake_gcs_max_queued(struct gcs_client *fake)
{
    g_mutex_lock(&fake->lock);
    unsigned n = fake->max_queued;
    g_mutex_unlock(&fake->lock);
    return n;
}

void fake_gcs_reset_counters(struct gcs_client *fake)
{
    g_mutex_lock(&fake->lock);
    memset(fake->calls, 0, sizeof(fake->calls));
    memset(fake->failures, 0, sizeof(fake->failures));
    g_hash_table_remove_all(fake->named);
    fake->max_queued = fake->queued + fake->running;
    g_mutex_unlock(&fake->lock);
}

/* ---- gcs.h: objects ---- */

void gcs_object_clear(struct gcs_object *obj)
{
    if (!obj)
        return;
    g_free(obj->name);
    g_free(obj->content_encoding);
    g_free(obj->symlink_target);
    memset(obj, 0, sizeof(*obj));
}

void gcs_object_free(struct gcs_object *obj)
{
    gcs_object_clear(obj);
    g_free(obj);
}

void gcs_list_page_clear(struct gcs_list_page *page)
{
    if (!page)
        return;
    if (page->objects)
        g_ptr_array_free(page->objects, TRUE);
    if (page->prefixes)
        g_ptr_array_free(page->prefixes, TRUE);
    g_free(page->next_page_token);
    memset(page, 0, sizeof(*page));
}

static int do_stat(struct gcs_client *fake, const char *name, struct gcs_object *out)
{
    g_mutex_lock(&fake->lock);
    struct fake_object *obj = lookup(fake, name, 0);
    if (obj)
        fill_object(obj, out);
    g_mutex_unlock(&fake->lock);
    return obj ? 0 : -ENOENT;
}

int gcs_stat(struct gcs_client *fake, const char *name, struct gcs_object *out)
{
    int err = enter(fake, FAKE_GCS_STAT, name);
    sync_latency(fake, FAKE_GCS_STAT);
    if (err)
        return err;
    struct gcs_object obj;
    int rc = do_stat(fake, name, &obj);
    if (rc == 0)
        *out = obj;
    return rc;
}

struct stat_job {
    char *name;
    gcs_stat_cb cb;
    void *user;
};

static void run_stat(struct gcs_client *fake, struct job *job, int err)
{
    struct stat_job *s = job->data;
    struct gcs_object *obj = NULL;
    if (!err) {
        obj = g_new0(struct gcs_object, 1);
        err = do_stat(fake, s->name, obj);
        if (err) {
            g_free(obj);
            obj = NULL;
        }
    }
    s->cb(err, obj, s->user);
    g_free(s->name);
    g_free(s);
}

void gcs_stat_async(struct gcs_client *fake, const char *name, gcs_stat_cb cb, void *user)
{
    struct stat_job *s = g_new0(struct stat_job, 1);
    s->name = g_strdup(name);
    s->cb = cb;
    s->user = user;
    submit(fake, FAKE_GCS_STAT, enter(fake, FAKE_GCS_STAT, name), run_stat, s);
}

/* ---- gcs.h: listing ---- */

struct list_ctx {
    const struct gcs_list_params *params;
    const char *from; /* inclusive */
    unsigned max;
    struct gcs_list_page *page;
    char *last_prefix;
    unsigned taken;
};

static gboolean list_one(gpointer key, gpointer value, gpointer user)
{
    struct list_ctx *ctx = user;
    const char *name = key;
    const struct gcs_list_params *params = ctx->params;
    const char *prefix = params->prefix ? params->prefix : "";
    if (strcmp(name, ctx->from) < 0)
        return FALSE;
    if (params->end_offset && strcmp(name, params->end_offset) >= 0)
        return TRUE;
    if (!g_str_has_prefix(name, prefix))
        return strcmp(name, prefix) > 0; /* past the prefix: done */
    if (ctx->taken == ctx->max) {
        ctx->page->next_page_token = g_strdup(name);
        return TRUE;
    }
    if (params->delimiter && params->delimiter[0]) {
        const char *rest = name + strlen(prefix);
        const char *cut = strstr(rest, params->delimiter);
        if (cut) {
            char *sub = g_strndup(name, (size_t)(cut - name) + strlen(params->delimiter));
            if (ctx->last_prefix && strcmp(sub, ctx->last_prefix) == 0) {
                g_free(sub);
                return FALSE;
            }
            g_free(ctx->last_prefix);
            ctx->last_prefix = g_strdup(sub);
            g_ptr_array_add(ctx->page->prefixes, sub);
            ctx->taken++;
            return FALSE;
        }
    }
    struct gcs_object *obj = g_new0(struct gcs_object, 1);
    fill_object(value, obj);
    obj->component_count = 0; /* not in listings */
    g_ptr_array_add(ctx->page->objects, obj);
    ctx->taken++;
    return FALSE;
}

int gcs_list(struct gcs_client *fake, const struct gcs_list_params *params,
             struct gcs_list_page *out)
{
    int err = enter(fake, FAKE_GCS_LIST, params->prefix);
    sync_latency(fake, FAKE_GCS_LIST);
    if (err)
        return err;
    struct gcs_list_page page = {0};
    page.objects = g_ptr_array_new_with_free_func((GDestroyNotify)gcs_object_free);
    page.prefixes = g_ptr_array_new_with_free_func(g_free);
    const char *from = params->start_offset ? params->start_offset : "";
    if (params->page_token && strcmp(params->page_token, from) > 0)
        from = params->page_token;
    struct list_ctx ctx = {.params = params,
                           .from = from,
                           .max = params->max_results ? params->max_results : 1000,
                           .page = &page};
    g_mutex_lock(&fake->lock);
    g_tree_foreach(fake->objects, list_one, &ctx);
    g_mutex_unlock(&fake->lock);
    g_free(ctx.last_prefix);
    *out = page;
    return 0;
}

/* ---- gcs.h: reads ---- */

static int do_read(struct gcs_client *fake, const struct gcs_read_request *req, size_t *got)
{
    g_mutex_lock(&fake->lock);
    struct fake_object *obj = lookup(fake, req->name, req->generation);
    if (!obj) {
        g_mutex_unlock(&fake->lock);
        return -ENOENT;
    }
    GBytes *data = g_bytes_ref(obj->data);
    g_mutex_unlock(&fake->lock);
    size_t size;
    const char *bytes = g_bytes_get_data(data, &size);
    size_t n = 0;
    if (req->offset < size)
        n = (size_t)MIN((uint64_t)req->len, size - req->offset);
    if (n > 0)
        memcpy(req->buf, bytes + req->offset, n);
    int rc = 0;
    if (req->offset == 0 && n == size && req->has_expected_crc32c && !req->caller_checks_bytes &&
        crc32c_update(0, bytes, size) != req->expected_crc32c)
        rc = -EIO;
    g_bytes_unref(data);
    if (rc == 0)
        *got = n;
    return rc;
}

int gcs_read(struct gcs_client *fake, const struct gcs_read_request *req, size_t *got)
{
    int err = enter(fake, FAKE_GCS_READ, req->name);
    sync_latency(fake, FAKE_GCS_READ);
    return err ? err : do_read(fake, req, got);
}

struct read_job {
    struct gcs_read_request req;
    char *name;
    gcs_read_cb cb;
    void *user;
};

static void run_read(struct gcs_client *fake, struct job *job, int err)
{
    struct read_job *r = job->data;
    size_t got = 0;
    if (!err)
        err = do_read(fake, &r->req, &got);
    r->cb(err, err ? 0 : got, r->user);
    g_free(r->name);
    g_free(r);
}

void gcs_read_async(struct gcs_client *fake, const struct gcs_read_request *req, gcs_read_cb cb,
                    void *user)
{
    struct read_job *r = g_new0(struct read_job, 1);
    r->req = *req;
    r->name = g_strdup(req->name);
    r->req.name = r->name;
    r->cb = cb;
    r->user = user;
    submit(fake, FAKE_GCS_READ, enter(fake, FAKE_GCS_READ, req->name), run_read, r);
}

/* ---- gcs.h: one-request uploads ---- */

struct attrs_copy {
    struct gcs_write_attrs attrs;
    bool has_attrs;
    struct gcs_write_preconditions pre;
    bool has_pre;
};

static void attrs_keep(struct attrs_copy *copy, const struct gcs_write_attrs *attrs,
                       const struct gcs_write_preconditions *pre)
{
    memset(copy, 0, sizeof(*copy));
    if (attrs) {
        copy->attrs = *attrs;
        copy->attrs.content_type = g_strdup(attrs->content_type);
        copy->attrs.symlink_target = g_strdup(attrs->symlink_target);
        copy->attrs.storage_class = g_strdup(attrs->storage_class);
        copy->has_attrs = true;
    }
    if (pre) {
        copy->pre = *pre;
        copy->has_pre = true;
    }
}

static void attrs_drop(struct attrs_copy *copy)
{
    g_free((char *)copy->attrs.content_type);
    g_free((char *)copy->attrs.symlink_target);
    g_free((char *)copy->attrs.storage_class);
}

static int do_upload(struct gcs_client *fake, const char *name, const struct gcs_body *body,
                     const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
                     struct gcs_object *out)
{
    GBytes *data = NULL;
    uint32_t crc = 0;
    int rc = read_body(body, &data, &crc);
    if (rc < 0)
        return rc;
    g_mutex_lock(&fake->lock);
    rc = store_locked(fake, name, data, crc, 0, attrs, pre, out);
    g_mutex_unlock(&fake->lock);
    return rc;
}

int gcs_upload(struct gcs_client *fake, const char *name, const struct gcs_body *body,
               const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
               struct gcs_object *out)
{
    int err = enter(fake, FAKE_GCS_UPLOAD, name);
    bool lost = entered_lost;
    sync_latency(fake, FAKE_GCS_UPLOAD);
    if (err && !lost)
        return err;
    struct gcs_object obj;
    int rc = do_upload(fake, name, body, attrs, pre, &obj);
    if (rc == 0 && err) {
        gcs_object_clear(&obj);
        return err;
    }
    if (rc == 0 && out)
        *out = obj;
    else if (rc == 0)
        gcs_object_clear(&obj);
    return rc;
}

struct upload_job {
    char *name;
    struct gcs_body body;
    struct attrs_copy a;
    gcs_stat_cb cb;
    void *user;
};

static void run_upload(struct gcs_client *fake, struct job *job, int err)
{
    struct upload_job *u = job->data;
    struct gcs_object *obj = NULL;
    if (!err || job->lost) {
        obj = g_new0(struct gcs_object, 1);
        int rc = do_upload(fake, u->name, &u->body, u->a.has_attrs ? &u->a.attrs : NULL,
                           u->a.has_pre ? &u->a.pre : NULL, obj);
        if (rc < 0 || err) {
            if (rc == 0)
                gcs_object_clear(obj); /* made, but the reply is lost */
            g_free(obj);
            obj = NULL;
            err = err ? err : rc;
        }
    }
    u->cb(err, obj, u->user);
    attrs_drop(&u->a);
    g_free(u->name);
    g_free(u);
}

void gcs_upload_async(struct gcs_client *fake, const char *name, const struct gcs_body *body,
                      const struct gcs_write_attrs *attrs,
                      const struct gcs_write_preconditions *pre, gcs_stat_cb cb, void *user)
{
    struct upload_job *u = g_new0(struct upload_job, 1);
    u->name = g_strdup(name);
    u->body = *body;
    attrs_keep(&u->a, attrs, pre);
    u->cb = cb;
    u->user = user;
    submit(fake, FAKE_GCS_UPLOAD, enter(fake, FAKE_GCS_UPLOAD, name), run_upload, u);
}

/* ---- gcs.h: XML multipart uploads ---- */

int gcs_multipart_begin(struct gcs_client *fake, const char *name,
                        const struct gcs_write_attrs *attrs, char **upload_id)
{
    int err = enter(fake, FAKE_GCS_MULTIPART_BEGIN, name);
    sync_latency(fake, FAKE_GCS_MULTIPART_BEGIN);
    if (err)
        return err;
    struct fake_upload *up = g_new0(struct fake_upload, 1);
    up->name = g_strdup(name);
    if (attrs) {
        up->content_type = g_strdup(attrs->content_type);
        up->has_mtime = attrs->has_mtime;
        up->mtime_ns = attrs->mtime_ns;
        up->symlink_target = g_strdup(attrs->symlink_target);
    }
    up->parts = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, fake_part_free);
    g_mutex_lock(&fake->lock);
    char *id = g_strdup_printf("upload-%" G_GUINT64_FORMAT, ++fake->next_id);
    g_hash_table_insert(fake->uploads, g_strdup(id), up);
    g_mutex_unlock(&fake->lock);
    *upload_id = id;
    return 0;
}

static int do_put_part(struct gcs_client *fake, const char *upload_id, int part_number,
                       const struct gcs_body *body, char **etag)
{
    if (part_number < 1 || part_number > 10000)
        return -EINVAL;
    GBytes *data = NULL;
    uint32_t crc = 0;
    int rc = read_body(body, &data, &crc);
    if (rc < 0)
        return rc;
    g_mutex_lock(&fake->lock);
    struct fake_upload *up = g_hash_table_lookup(fake->uploads, upload_id);
    if (!up || !up->parts) {
        g_mutex_unlock(&fake->lock);
        g_bytes_unref(data);
        return -EIO; /* NoSuchUpload */
    }
    struct fake_part *part = g_new0(struct fake_part, 1);
    part->data = data;
    part->crc32c = crc;
    part->etag = g_strdup_printf("\"%08x-%" G_GUINT64_FORMAT "\"", crc, ++fake->next_id);
    *etag = g_strdup(part->etag);
    g_hash_table_replace(up->parts, GINT_TO_POINTER(part_number), part);
    g_mutex_unlock(&fake->lock);
    return 0;
}

int gcs_multipart_put_part(struct gcs_client *fake, const char *name, const char *upload_id,
                           int part_number, const struct gcs_body *body, char **etag)
{
    int err = enter(fake, FAKE_GCS_PUT_PART, name);
    bool lost = entered_lost;
    sync_latency(fake, FAKE_GCS_PUT_PART);
    if (err && !lost)
        return err;
    char *got = NULL;
    int rc = do_put_part(fake, upload_id, part_number, body, &got);
    if (rc == 0 && err) {
        g_free(got);
        return err;
    }
    if (rc == 0)
        *etag = got;
    return rc;
}

struct part_job {
    char *upload_id;
    int part_number;
    struct gcs_body body;
    gcs_part_cb cb;
    void *user;
};

static void run_put_part(struct gcs_client *fake, struct job *job, int err)
{
    struct part_job *p = job->data;
    char *etag = NULL;
    if (!err || job->lost) {
        int rc = do_put_part(fake, p->upload_id, p->part_number, &p->body, &etag);
        err = err ? err : rc;
    }
    p->cb(err, err ? NULL : etag, p->user);
    g_free(etag);
    g_free(p->upload_id);
    g_free(p);
}

void gcs_multipart_put_part_async(struct gcs_client *fake, const char *name, const char *upload_id,
                                  int part_number, const struct gcs_body *body, gcs_part_cb cb,
                                  void *user)
{
    struct part_job *p = g_new0(struct part_job, 1);
    p->upload_id = g_strdup(upload_id);
    p->part_number = part_number;
    p->body = *body;
    p->cb = cb;
    p->user = user;
    submit(fake, FAKE_GCS_PUT_PART, enter(fake, FAKE_GCS_PUT_PART, name), run_put_part, p);
}

int gcs_multipart_complete(struct gcs_client *fake, const char *name, const char *upload_id,
                           const struct gcs_completed_part *parts, int part_count,
                           const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    int err = enter(fake, FAKE_GCS_MULTIPART_COMPLETE, name);
    bool lost = entered_lost;
    sync_latency(fake, FAKE_GCS_MULTIPART_COMPLETE);
    if (err && !lost)
        return err;
    g_mutex_lock(&fake->lock);
    struct fake_upload *up = g_hash_table_lookup(fake->uploads, upload_id);
    int rc = 0;
    if (!up || !up->parts || strcmp(up->name, name) != 0)
        rc = -EIO;
    if (rc == 0 && part_count < 1)
        rc = -EINVAL;
    GByteArray *all = g_byte_array_new();
    uint32_t crc = 0;
    for (int i = 0; rc == 0 && i < part_count; i++) {
        struct fake_part *part =
            g_hash_table_lookup(up->parts, GINT_TO_POINTER(parts[i].part_number));
        if (!part || !parts[i].etag || strcmp(part->etag, parts[i].etag) != 0 ||
            (i > 0 && parts[i].part_number <= parts[i - 1].part_number)) {
            rc = -EINVAL; /* InvalidPart / InvalidPartOrder */
            break;
        }
        size_t len;
        const void *bytes = g_bytes_get_data(part->data, &len);
        g_byte_array_append(all, bytes, (guint)len);
        crc = crc32c_combine(crc, part->crc32c, len);
    }
    struct gcs_object obj;
    if (rc == 0) {
        struct gcs_write_attrs attrs = {.content_type = up->content_type,
                                        .has_mtime = up->has_mtime,
                                        .mtime_ns = up->mtime_ns,
                                        .symlink_target = up->symlink_target};
        rc = store_locked(fake, name, g_byte_array_free_to_bytes(all), crc, 0, &attrs, pre, &obj);
        all = NULL;
    }
    if (all)
        g_byte_array_unref(all);
    if (rc == 0)
        g_hash_table_remove(fake->uploads, upload_id);
    g_mutex_unlock(&fake->lock);
    if (rc == 0 && err) {
        gcs_object_clear(&obj);
        return err;
    }
    if (rc == 0 && out)
        *out = obj;
    else if (rc == 0)
        gcs_object_clear(&obj);
    return rc;
}

int gcs_multipart_abort(struct gcs_client *fake, const char *name, const char *upload_id)
{
    int err = enter(fake, FAKE_GCS_MULTIPART_ABORT, name);
    sync_latency(fake, FAKE_GCS_MULTIPART_ABORT);
    if (err)
        return err;
    g_mutex_lock(&fake->lock);
    bool had = g_hash_table_remove(fake->uploads, upload_id);
    g_mutex_unlock(&fake->lock);
    return had ? 0 : -ENOENT;
}

int gcs_multipart_list(struct gcs_client *fake, const char *prefix, GPtrArray **names,
                       GPtrArray **upload_ids)
{
    int err = enter(fake, FAKE_GCS_MULTIPART_LIST, prefix);
    sync_latency(fake, FAKE_GCS_MULTIPART_LIST);
    if (err)
        return err;
    GPtrArray *n = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&fake->lock);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, fake->uploads);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        struct fake_upload *up = value;
        if (up->parts && (!prefix || g_str_has_prefix(up->name, prefix))) {
            g_ptr_array_add(n, g_strdup(up->name));
            g_ptr_array_add(ids, g_strdup(key));
        }
    }
    g_mutex_unlock(&fake->lock);
    *names = n;
    *upload_ids = ids;
    return 0;
}

/* ---- gcs.h: resumable uploads ---- */

int gcs_resumable_begin(struct gcs_client *fake, const char *name,
                        const struct gcs_write_attrs *attrs,
                        const struct gcs_write_preconditions *pre, int64_t total_size,
                        char **session_url)
{
    (void)total_size;
    int err = enter(fake, FAKE_GCS_RESUMABLE_BEGIN, name);
    sync_latency(fake, FAKE_GCS_RESUMABLE_BEGIN);
    if (err)
        return err;
    struct fake_upload *up = g_new0(struct fake_upload, 1);
    up->name = g_strdup(name);
    if (attrs) {
        up->content_type = g_strdup(attrs->content_type);
        up->has_mtime = attrs->has_mtime;
        up->mtime_ns = attrs->mtime_ns;
        up->symlink_target = g_strdup(attrs->symlink_target);
    }
    if (pre) {
        up->pre = *pre;
        up->has_pre = true;
    }
    up->bytes = g_byte_array_new();
    g_mutex_lock(&fake->lock);
    char *url = g_strdup_printf("fake://session/%" G_GUINT64_FORMAT, ++fake->next_id);
    g_hash_table_insert(fake->uploads, g_strdup(url), up);
    g_mutex_unlock(&fake->lock);
    *session_url = url;
    return 0;
}

int gcs_resumable_put(struct gcs_client *fake, const char *session_url, uint64_t offset,
                      const struct gcs_body *body, bool final, struct gcs_object *out)
{
    g_mutex_lock(&fake->lock);
    struct fake_upload *up = g_hash_table_lookup(fake->uploads, session_url);
    char *name = up ? g_strdup(up->name) : NULL;
    g_mutex_unlock(&fake->lock);
    int err = enter(fake, FAKE_GCS_RESUMABLE_PUT, name);
    g_free(name);
    sync_latency(fake, FAKE_GCS_RESUMABLE_PUT);
    if (err)
        return err;
    GBytes *data = NULL;
    uint32_t crc = 0;
    int rc = read_body(body, &data, &crc);
    if (rc < 0)
        return rc;
    g_mutex_lock(&fake->lock);
    up = g_hash_table_lookup(fake->uploads, session_url);
    if (!up || !up->bytes)
        rc = -EIO; /* a vanished session */
    else if (offset != up->bytes->len)
        rc = -EINVAL;
    struct gcs_object obj;
    if (rc == 0) {
        size_t len;
        const void *bytes = g_bytes_get_data(data, &len);
        g_byte_array_append(up->bytes, bytes, (guint)len);
        if (final) {
            struct gcs_write_attrs attrs = {.content_type = up->content_type,
                                            .has_mtime = up->has_mtime,
                                            .mtime_ns = up->mtime_ns,
                                            .symlink_target = up->symlink_target};
            GBytes *all = g_bytes_new(up->bytes->data, up->bytes->len);
            rc =
                store_locked(fake, up->name, all, crc32c_update(0, up->bytes->data, up->bytes->len),
                             0, &attrs, up->has_pre ? &up->pre : NULL, &obj);
            g_hash_table_remove(fake->uploads, session_url);
        }
    }
    g_mutex_unlock(&fake->lock);
    g_bytes_unref(data);
    if (rc == 0 && final && out)
        *out = obj;
    else if (rc == 0 && final)
        gcs_object_clear(&obj);
    return rc;
}

int gcs_resumable_cancel(struct gcs_client *fake, const char *session_url)
{
    int err = enter(fake, FAKE_GCS_RESUMABLE_CANCEL, NULL);
    sync_latency(fake, FAKE_GCS_RESUMABLE_CANCEL);
    if (err)
        return err;
    g_mutex_lock(&fake->lock);
    bool had = g_hash_table_remove(fake->uploads, session_url);
    g_mutex_unlock(&fake->lock);
    return had ? 0 : -ENOENT;
}

/* ---- gcs.h: compose and delete ---- */

static int do_compose(struct gcs_client *fake, const char *dest_name,
                      const struct gcs_compose_source *sources, int source_count,
                      const struct gcs_write_attrs *attrs,
                      const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    if (source_count < 1 || source_count > 32)
        return -EINVAL;
    g_mutex_lock(&fake->lock);
    GByteArray *all = g_byte_array_new();
    uint32_t crc = 0;
    int64_t components = 0;
    int rc = 0;
    for (int i = 0; i < source_count; i++) {
        struct fake_object *src = lookup(fake, sources[i].name, sources[i].generation);
        if (!src) {
            rc = -ENOENT;
            break;
        }
        size_t len;
        const void *bytes = g_bytes_get_data(src->data, &len);
        g_byte_array_append(all, bytes, (guint)len);
        crc = crc32c_combine(crc, src->crc32c, len);
        components += src->component_count ? src->component_count : 1;
    }
    if (rc == 0)
        rc = store_locked(fake, dest_name, g_byte_array_free_to_bytes(all), crc, components, attrs,
                          pre, out);
    else
        g_byte_array_unref(all);
    g_mutex_unlock(&fake->lock);
    return rc;
}

static int compose_enter(struct gcs_client *fake, const char *dest_name,
                         const struct gcs_compose_source *sources, int source_count)
{
    int err = enter(fake, FAKE_GCS_COMPOSE, dest_name);
    g_mutex_lock(&fake->lock);
    for (int i = 0; i < source_count; i++) {
        fake->calls[FAKE_GCS_COMPOSE_SOURCE]++;
        count_named_locked(fake, FAKE_GCS_COMPOSE_SOURCE, sources[i].name);
    }
    g_mutex_unlock(&fake->lock);
    return err;
}

int gcs_compose(struct gcs_client *fake, const char *dest_name,
                const struct gcs_compose_source *sources, int source_count,
                const struct gcs_write_attrs *attrs, const struct gcs_write_preconditions *pre,
                struct gcs_object *out)
{
    int err = compose_enter(fake, dest_name, sources, source_count);
    bool lost = entered_lost;
    sync_latency(fake, FAKE_GCS_COMPOSE);
    if (err && !lost)
        return err;
    struct gcs_object obj;
    int rc = do_compose(fake, dest_name, sources, source_count, attrs, pre, &obj);
    if (rc == 0 && err) {
        gcs_object_clear(&obj);
        return err;
    }
    if (rc == 0 && out)
        *out = obj;
    else if (rc == 0)
        gcs_object_clear(&obj);
    return rc;
}

struct compose_job {
    char *dest;
    struct gcs_compose_source *sources;
    int count;
    struct attrs_copy a;
    gcs_stat_cb cb;
    void *user;
};

static void run_compose(struct gcs_client *fake, struct job *job, int err)
{
    struct compose_job *c = job->data;
    struct gcs_object *obj = NULL;
    if (!err || job->lost) {
        obj = g_new0(struct gcs_object, 1);
        int rc =
            do_compose(fake, c->dest, c->sources, c->count, c->a.has_attrs ? &c->a.attrs : NULL,
                       c->a.has_pre ? &c->a.pre : NULL, obj);
        if (rc < 0 || err) {
            if (rc == 0)
                gcs_object_clear(obj); /* made, but the reply is lost */
            g_free(obj);
            obj = NULL;
            err = err ? err : rc;
        }
    }
    c->cb(err, obj, c->user);
    for (int i = 0; i < c->count; i++)
        g_free((char *)c->sources[i].name);
    g_free(c->sources);
    attrs_drop(&c->a);
    g_free(c->dest);
    g_free(c);
}

void gcs_compose_async(struct gcs_client *fake, const char *dest_name,
                       const struct gcs_compose_source *sources, int source_count,
                       const struct gcs_write_attrs *attrs,
                       const struct gcs_write_preconditions *pre, gcs_stat_cb cb, void *user)
{
    struct compose_job *c = g_new0(struct compose_job, 1);
    c->dest = g_strdup(dest_name);
    c->count = MAX(source_count, 0);
    c->sources = g_new0(struct gcs_compose_source, c->count + 1);
    for (int i = 0; i < c->count; i++) {
        c->sources[i].name = g_strdup(sources[i].name);
        c->sources[i].generation = sources[i].generation;
    }
    attrs_keep(&c->a, attrs, pre);
    c->cb = cb;
    c->user = user;
    submit(fake, FAKE_GCS_COMPOSE, compose_enter(fake, dest_name, sources, source_count),
           run_compose, c);
}

static int do_delete(struct gcs_client *fake, const char *name, int64_t generation,
                     const struct gcs_write_preconditions *pre)
{
    g_mutex_lock(&fake->lock);
    int rc = lookup(fake, name, generation) ? check_pre(fake, name, pre) : -ENOENT;
    if (rc == 0)
        g_tree_remove(fake->objects, name);
    g_mutex_unlock(&fake->lock);
    return rc;
}

int gcs_delete(struct gcs_client *fake, const char *name, int64_t generation,
               const struct gcs_write_preconditions *pre)
{
    int err = enter(fake, FAKE_GCS_DELETE, name);
    bool lost = entered_lost;
    sync_latency(fake, FAKE_GCS_DELETE);
    if (err && !lost)
        return err;
    int rc = do_delete(fake, name, generation, pre);
    return err ? err : rc;
}

struct delete_job {
    char *name;
    int64_t generation;
    gcs_done_cb cb;
    void *user;
};

static void run_delete(struct gcs_client *fake, struct job *job, int err)
{
    struct delete_job *d = job->data;
    if (!err || job->lost) {
        int rc = do_delete(fake, d->name, d->generation, NULL);
        err = err ? err : rc;
    }
    d->cb(err, d->user);
    g_free(d->name);
    g_free(d);
}

void gcs_delete_async(struct gcs_client *fake, const char *name, int64_t generation, gcs_done_cb cb,
                      void *user)
{
    struct delete_job *d = g_new0(struct delete_job, 1);
    d->name = g_strdup(name);
    d->generation = generation;
    d->cb = cb;
    d->user = user;
    submit(fake, FAKE_GCS_DELETE, enter(fake, FAKE_GCS_DELETE, name), run_delete, d);
}

/* The delete of a temporary (temp_reaper.c): the same as any delete here; the fake has no
 * retries to differ in. */
void gcs_delete_temporary_async(struct gcs_client *fake, const char *name, int64_t generation,
                                gcs_done_cb cb, void *user)
{
    gcs_delete_async(fake, name, generation, cb, user);
}

/* The fake never answers 429. */
void gcs_rate_limited(struct gcs_client *fake, uint64_t *reads, uint64_t *writes)
{
    (void)fake;
    *reads = 0;
    *writes = 0;
}

/* ---- gcs.h: permissions ---- */

int gcs_test_permissions(struct gcs_client *fake, const char *const *permissions, int count,
                         bool *granted)
{
    (void)permissions;
    int err = enter(fake, FAKE_GCS_TEST_PERMISSIONS, NULL);
    sync_latency(fake, FAKE_GCS_TEST_PERMISSIONS);
    if (err)
        return err;
    g_mutex_lock(&fake->lock);
    for (int i = 0; i < count; i++)
        granted[i] = !fake->deny;
    g_mutex_unlock(&fake->lock);
    return 0;
}
