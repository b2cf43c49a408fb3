/* Upload sessions: one interface, a table of functions per protocol (see
 * include/fluxfs/upload.h). The generic part keeps the parts, the caps on parts in flight and
 * the order of commit and abort; each protocol says how a part is sent and how the object is
 * made and removed. */
#include "fluxfs/upload.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/wait_group.h"

#define UPLOAD_DEFAULT_POOL_IN_FLIGHT    64
#define UPLOAD_DEFAULT_SESSION_IN_FLIGHT 16
#define COMPOSE_MAX_SOURCES              32 /* objects.compose takes 1..32 sources */

/* One part: a byte range of the object. */
struct upload_part {
    struct upload_session *session;
    int number; /* 1-based */
    uint64_t offset, len;
    struct gcs_body body;
    char *buffer; /* pool->lock: the part's own memory, given back when answered */
    /* pool->lock: */
    bool done;
    int err;
    char *etag;      /* multipart */
    char *temp_name; /* composite: immutable once set when sent */
    int64_t temp_generation;
};

struct upload_protocol {
    const char *name;
    bool parallel; /* parts go out at once, several in flight, answered by part_answered */
    int (*begin)(struct upload_session *session, const struct upload_begin_args *args);
    /* parallel: starts the part's request; else sends (or keeps) it and returns its error */
    int (*send_part)(struct upload_session *session, struct upload_part *part);
    /* The parts are answered, none failed: makes the object. */
    int (*complete)(struct upload_session *session, const struct gcs_write_attrs *attrs,
                    const struct gcs_write_preconditions *pre, struct gcs_object *out);
    /* The parts are answered, none failed, there is one at least; NULL = not readable. */
    int (*read_back)(struct upload_session *session, upload_fetch_fn fetch, void *user);
    /* The parts are answered: removes what the upload made and frees the protocol's state
     * (after a complete too: then only what remains besides the object). */
    void (*discard)(struct upload_session *session);
};

struct upload_session {
    struct upload_pool *pool;               /* not owned */
    struct upload_session_config config;    /* strings owned */
    const struct upload_protocol *protocol; /* NULL: no upload open */
    void *state;                            /* the protocol's, while open */
    GPtrArray *parts;                       /* struct upload_part *; added under pool->lock */
    unsigned parts_in_flight;               /* pool->lock */
    unsigned deletes_in_flight; /* pool->lock: deletes sent without waiting (free waits) */
    uint64_t sent;              /* bytes appended */
};

/* ---- the pool ---- */

void upload_pool_init(struct upload_pool *pool, struct gcs_client *client, unsigned max_in_flight)
{
    memset(pool, 0, sizeof(*pool));
    pool->client = client;
    g_mutex_init(&pool->lock);
    g_cond_init(&pool->drained);
    pool->max_in_flight = max_in_flight ? max_in_flight : UPLOAD_DEFAULT_POOL_IN_FLIGHT;
}

void upload_pool_clear(struct upload_pool *pool)
{
    g_mutex_clear(&pool->lock);
    g_cond_clear(&pool->drained);
}

/* ---- helpers of the protocols ---- */

static struct gcs_client *client_of(struct upload_session *session)
{
    return session->pool->client;
}

static char *unique_temp_name(struct upload_session *session, const char *kind)
{
    guint64 n = __atomic_add_fetch(&session->pool->unique, 1, __ATOMIC_RELAXED);
    return g_strdup_printf("%s%s-%" G_GUINT64_FORMAT "-%08x", session->config.tmp_prefix, kind, n,
                           g_random_int());
}

/* A part answered (caller holds pool->lock). */
static void part_answered(struct upload_part *part, int err)
{
    struct upload_session *session = part->session;
    struct upload_pool *pool = session->pool;
    part->done = true;
    part->err = err;
    if (part->buffer) { /* its bytes are the server's now, or lost */
        if (session->config.buffer_done)
            session->config.buffer_done(part->buffer, part->len, session->config.buffer_user);
        part->buffer = NULL;
    }
    session->parts_in_flight--;
    pool->in_flight--;
    g_cond_broadcast(&pool->drained);
}

static void part_free(gpointer data)
{
    struct upload_part *part = data;
    g_free(part->etag);
    g_free(part->temp_name);
    g_free(part);
}

static void wait_parts(struct upload_session *session)
{
    struct upload_pool *pool = session->pool;
    g_mutex_lock(&pool->lock);
    while (session->parts_in_flight > 0)
        g_cond_wait(&pool->drained, &pool->lock);
    g_mutex_unlock(&pool->lock);
}

static int first_part_error(struct upload_session *session)
{
    int err = 0;
    g_mutex_lock(&session->pool->lock);
    for (guint i = 0; i < session->parts->len && !err; i++) {
        struct upload_part *part = g_ptr_array_index(session->parts, i);
        err = part->err;
    }
    g_mutex_unlock(&session->pool->lock);
    return err;
}

struct temp_delete {
    struct upload_session *session;
    char *name;
};

static void on_temp_deleted(int err, void *user)
{
    struct temp_delete *del = user;
    struct upload_pool *pool = del->session->pool;
    (void)err; /* best effort: what is left behind is removed by a later mount's cleanup */
    g_mutex_lock(&pool->lock);
    del->session->deletes_in_flight--;
    g_cond_broadcast(&pool->drained);
    g_mutex_unlock(&pool->lock);
    g_free(del->name);
    g_free(del);
}

/* Deletes a temporary object (taking its name; generation 0 = live) without waiting;
 * upload_session_free waits for the answer. */
static void temp_delete_async(struct upload_session *session, char *name, int64_t generation)
{
    struct temp_delete *del = g_new0(struct temp_delete, 1);
    del->session = session;
    del->name = name;
    g_mutex_lock(&session->pool->lock);
    session->deletes_in_flight++;
    g_mutex_unlock(&session->pool->lock);
    gcs_delete_async(client_of(session), del->name, generation, on_temp_deleted, del);
}

/* The generation of a temporary object whose upload failed or went unanswered (it may exist
 * all the same: a reply lost after the server stored it); 0 when there is none. The delete
 * is then pinned to it, so it is retried like every other temporary delete. */
static int64_t temp_generation_of(struct gcs_client *client, const char *name)
{
    struct gcs_object obj;
    memset(&obj, 0, sizeof(obj));
    if (gcs_stat(client, name, &obj) < 0)
        return 0;
    int64_t generation = obj.generation;
    gcs_object_clear(&obj);
    return generation;
}

static void on_deleted(int err, void *user)
{
    (void)err; /* best effort, as above */
    wait_group_done(user);
}

/* Deletes temporary objects, generations[i] (int64_t) pinning names[i]; 0 = not known: asked
 * first. A delete of a pinned generation is retried (503, lost reply) and a 404 on a retry
 * counts as done: a clean unmount leaves nothing under the temp prefix, faults or not. */
static void delete_temp_objects(struct gcs_client *client, GPtrArray *names, GArray *generations)
{
    struct wait_group wait;
    wait_group_init(&wait, 0);
    for (guint i = 0; i < names->len; i++) {
        int64_t generation = g_array_index(generations, int64_t, i);
        if (generation <= 0)
            generation = temp_generation_of(client, g_ptr_array_index(names, i));
        if (generation <= 0)
            continue;
        wait_group_add(&wait, 1);
        gcs_delete_async(client, g_ptr_array_index(names, i), generation, on_deleted, &wait);
    }
    wait_group_finish(&wait);
}

/* ---- XML multipart ---- */

struct multipart_state {
    char *stream_name; /* the object the upload writes: a temporary when readable */
    char *upload_id;   /* NULL once completed: nothing left to abort */
    bool readable;
    char *marker_name;
    char *marker_body; /* the marker upload's request body (async) */
    /* pool->lock: the marker upload in flight, whether it landed, its generation */
    bool marker_in_flight, marker_ok;
    int64_t marker_generation;
};

static void on_marker_uploaded(int err, struct gcs_object *obj, void *user)
{
    struct upload_session *session = user;
    struct multipart_state *state = session->state;
    g_mutex_lock(&session->pool->lock);
    state->marker_in_flight = false;
    state->marker_ok = err == 0;
    state->marker_generation = err == 0 && obj ? obj->generation : 0;
    g_cond_broadcast(&session->pool->drained);
    g_mutex_unlock(&session->pool->lock);
    gcs_object_free(obj);
}

/* Waits for the marker upload; true when the marker exists. */
static bool marker_wait(struct upload_session *session)
{
    struct multipart_state *state = session->state;
    struct upload_pool *pool = session->pool;
    g_mutex_lock(&pool->lock);
    while (state->marker_in_flight)
        g_cond_wait(&pool->drained, &pool->lock);
    bool ok = state->marker_ok;
    g_mutex_unlock(&pool->lock);
    g_free(state->marker_body);
    state->marker_body = NULL;
    return ok;
}

static int multipart_begin(struct upload_session *session, const struct upload_begin_args *args)
{
    struct gcs_client *client = client_of(session);
    char *upload_id = NULL;
    /* Readable: a temporary object, readable once completed (a spill needs the bytes back);
     * the commit composes it onto the object name. */
    char *stream_name = args->readable ? unique_temp_name(session, "upload")
                                       : g_strdup(session->config.object_name);
    int rc = gcs_multipart_begin(client, stream_name, args->attrs, &upload_id);
    if (rc < 0) {
        g_free(stream_name);
        return rc;
    }
    flog_debug("writer", "'%s': multipart upload to '%s' begun", session->config.object_name,
               stream_name);
    struct multipart_state *state = g_new0(struct multipart_state, 1);
    state->stream_name = stream_name;
    state->upload_id = upload_id;
    state->readable = args->readable;
    session->state = state;
    /* A marker under the temp prefix names the upload, so a crashed daemon's upload is
     * aborted by the next mount (upload_cleanup.c). Best effort: the commit does not need it.
     * Sent asynchronously, overlapped with the first parts; awaited before the upload is
     * completed or aborted (marker_wait), so it never outlives the upload it names. */
    state->marker_name = unique_temp_name(session, "mpu");
    state->marker_body = g_strdup_printf("%s\n%s\n", upload_id, stream_name);
    struct gcs_body body = {
        .data = state->marker_body, .fd = -1, .len = strlen(state->marker_body)};
    body.has_crc32c = true;
    body.crc32c = crc32c_update(0, state->marker_body, body.len);
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    g_mutex_lock(&session->pool->lock);
    state->marker_in_flight = true;
    state->marker_ok = false;
    g_mutex_unlock(&session->pool->lock);
    gcs_upload_async(client, state->marker_name, &body, NULL, &pre, on_marker_uploaded, session);
    return 0;
}

static void on_part_uploaded(int err, const char *etag, void *user)
{
    struct upload_part *part = user;
    g_mutex_lock(&part->session->pool->lock);
    if (!err && etag)
        part->etag = g_strdup(etag);
    else if (!err)
        err = -EIO;
    part_answered(part, err);
    g_mutex_unlock(&part->session->pool->lock);
}

static int multipart_send_part(struct upload_session *session, struct upload_part *part)
{
    struct multipart_state *state = session->state;
    gcs_multipart_put_part_async(client_of(session), state->stream_name, state->upload_id,
                                 part->number, &part->body, on_part_uploaded, part);
    return 0;
}

static int multipart_complete_upload(struct upload_session *session,
                                     const struct gcs_write_preconditions *pre,
                                     struct gcs_object *out)
{
    struct multipart_state *state = session->state;
    guint count = session->parts->len;
    struct gcs_completed_part *done = g_new0(struct gcs_completed_part, count);
    for (guint i = 0; i < count; i++) {
        struct upload_part *part = g_ptr_array_index(session->parts, i);
        done[i].part_number = part->number;
        done[i].etag = part->etag;
    }
    int rc = gcs_multipart_complete(client_of(session), state->stream_name, state->upload_id, done,
                                    (int)count, pre, out);
    g_free(done);
    if (rc == 0) {
        g_free(state->upload_id);
        state->upload_id = NULL; /* nothing left to abort */
    }
    return rc;
}

static int multipart_complete(struct upload_session *session, const struct gcs_write_attrs *attrs,
                              const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    struct multipart_state *state = session->state;
    marker_wait(session); /* the marker exists (or failed) before the upload completes */
    if (!state->readable)
        return multipart_complete_upload(session, pre, out);
    struct gcs_write_preconditions new_only = {.has_if_generation_match = true};
    struct gcs_object temp;
    memset(&temp, 0, sizeof(temp));
    int rc = multipart_complete_upload(session, &new_only, &temp);
    flog_debug("writer", "'%s': temporary upload completed: %s", session->config.object_name,
               rc == 0 ? "composing" : g_strerror(-rc));
    if (rc == 0) {
        struct gcs_compose_source source = {.name = state->stream_name,
                                            .generation = temp.generation};
        rc = gcs_compose(client_of(session), session->config.object_name, &source, 1, attrs, pre,
                         out);
        temp_delete_async(session, g_strdup(state->stream_name), temp.generation);
    }
    gcs_object_clear(&temp);
    return rc;
}

static int multipart_read_back(struct upload_session *session, upload_fetch_fn fetch, void *user)
{
    struct multipart_state *state = session->state;
    if (!state->readable || !state->upload_id)
        return -EOPNOTSUPP;
    marker_wait(session);
    struct gcs_write_preconditions new_only = {.has_if_generation_match = true};
    struct gcs_object temp;
    memset(&temp, 0, sizeof(temp));
    int rc = multipart_complete_upload(session, &new_only, &temp);
    if (rc == 0) {
        rc = fetch(state->stream_name, temp.generation, session->sent, 0, session->sent, user);
        temp_delete_async(session, g_strdup(state->stream_name), temp.generation);
    }
    gcs_object_clear(&temp);
    return rc;
}

static void multipart_discard(struct upload_session *session)
{
    struct multipart_state *state = session->state;
    struct gcs_client *client = client_of(session);
    bool landed = marker_wait(session); /* settled before the upload it names goes */
    if (state->upload_id)
        gcs_multipart_abort(client, state->stream_name, state->upload_id);
    /* The upload is completed or aborted: its marker goes, asynchronously (nothing needs the
     * answer; upload_session_free waits for it). */
    g_mutex_lock(&session->pool->lock);
    int64_t generation = state->marker_generation;
    g_mutex_unlock(&session->pool->lock);
    if (!landed) /* a failed upload may have stored it all the same */
        generation = temp_generation_of(client, state->marker_name);
    if (generation > 0)
        temp_delete_async(session, state->marker_name, generation);
    else
        g_free(state->marker_name);
    g_free(state->upload_id);
    g_free(state->stream_name);
    g_free(state->marker_body);
    g_free(state);
    session->state = NULL;
}

const struct upload_protocol upload_multipart = {
    .name = "multipart",
    .parallel = true,
    .begin = multipart_begin,
    .send_part = multipart_send_part,
    .complete = multipart_complete,
    .read_back = multipart_read_back,
    .discard = multipart_discard,
};

/* ---- parallel composite ---- */

static int composite_begin(struct upload_session *session, const struct upload_begin_args *args)
{
    (void)session;
    (void)args;
    return 0;
}

static void on_temp_part_uploaded(int err, struct gcs_object *obj, void *user)
{
    struct upload_part *part = user;
    g_mutex_lock(&part->session->pool->lock);
    if (!err && obj)
        part->temp_generation = obj->generation;
    else if (!err)
        err = -EIO;
    part_answered(part, err);
    g_mutex_unlock(&part->session->pool->lock);
    gcs_object_free(obj);
}

static int composite_send_part(struct upload_session *session, struct upload_part *part)
{
    part->temp_name = unique_temp_name(session, "part");
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    gcs_upload_async(client_of(session), part->temp_name, &part->body, NULL, &pre,
                     on_temp_part_uploaded, part);
    return 0;
}

/* Composes the temporary parts into the object, <= 32 sources a call; intermediate composites
 * are temporary objects too and are deleted here (the parts: by composite_discard). */
static int composite_complete(struct upload_session *session, const struct gcs_write_attrs *attrs,
                              const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    struct gcs_client *client = client_of(session);
    GPtrArray *level_names = g_ptr_array_new_with_free_func(g_free);
    GArray *level_gens = g_array_new(FALSE, FALSE, sizeof(int64_t));
    GPtrArray *intermediates = g_ptr_array_new_with_free_func(g_free);
    GArray *intermediate_gens = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < session->parts->len; i++) {
        struct upload_part *part = g_ptr_array_index(session->parts, i);
        g_ptr_array_add(level_names, g_strdup(part->temp_name));
        g_array_append_val(level_gens, part->temp_generation);
    }
    int rc = 0;
    while (rc == 0 && level_names->len > COMPOSE_MAX_SOURCES) {
        GPtrArray *next_names = g_ptr_array_new_with_free_func(g_free);
        GArray *next_gens = g_array_new(FALSE, FALSE, sizeof(int64_t));
        for (guint start = 0; rc == 0 && start < level_names->len; start += COMPOSE_MAX_SOURCES) {
            guint n = MIN(COMPOSE_MAX_SOURCES, level_names->len - start);
            struct gcs_compose_source sources[COMPOSE_MAX_SOURCES];
            for (guint k = 0; k < n; k++) {
                sources[k].name = g_ptr_array_index(level_names, start + k);
                sources[k].generation = g_array_index(level_gens, int64_t, start + k);
            }
            char *name = unique_temp_name(session, "compose");
            struct gcs_write_preconditions new_only = {.has_if_generation_match = true};
            struct gcs_object obj;
            memset(&obj, 0, sizeof(obj));
            rc = gcs_compose(client, name, sources, (int)n, NULL, &new_only, &obj);
            /* A failed compose may have landed (a lost reply): deleted too, asked for first. */
            int64_t landed = rc == 0 ? obj.generation : 0;
            g_ptr_array_add(intermediates, g_strdup(name));
            g_array_append_val(intermediate_gens, landed);
            if (rc == 0) {
                g_ptr_array_add(next_names, name);
                g_array_append_val(next_gens, obj.generation);
                gcs_object_clear(&obj);
            } else {
                g_free(name);
            }
        }
        g_ptr_array_free(level_names, TRUE);
        g_array_free(level_gens, TRUE);
        level_names = next_names;
        level_gens = next_gens;
    }
    if (rc == 0) {
        struct gcs_compose_source sources[COMPOSE_MAX_SOURCES];
        for (guint k = 0; k < level_names->len; k++) {
            sources[k].name = g_ptr_array_index(level_names, k);
            sources[k].generation = g_array_index(level_gens, int64_t, k);
        }
        rc = gcs_compose(client, session->config.object_name, sources, (int)level_names->len, attrs,
                         pre, out);
    }
    if (intermediates->len > 0)
        delete_temp_objects(client, intermediates, intermediate_gens);
    g_ptr_array_free(intermediates, TRUE);
    g_array_free(intermediate_gens, TRUE);
    g_ptr_array_free(level_names, TRUE);
    g_array_free(level_gens, TRUE);
    return rc;
}

static int composite_read_back(struct upload_session *session, upload_fetch_fn fetch, void *user)
{
    int rc = 0;
    for (guint i = 0; rc == 0 && i < session->parts->len; i++) {
        struct upload_part *part = g_ptr_array_index(session->parts, i);
        rc =
            fetch(part->temp_name, part->temp_generation, part->len, part->offset, part->len, user);
    }
    return rc;
}

static void composite_discard(struct upload_session *session)
{
    GPtrArray *names = g_ptr_array_new();
    GArray *generations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < session->parts->len; i++) {
        struct upload_part *part = g_ptr_array_index(session->parts, i);
        /* A part that failed may still have landed (its reply lost): asked for, then. */
        if (part->temp_name && (part->temp_generation > 0 || part->err < 0)) {
            g_ptr_array_add(names, part->temp_name);
            g_array_append_val(generations, part->temp_generation);
        }
    }
    if (names->len > 0)
        delete_temp_objects(client_of(session), names, generations);
    g_ptr_array_free(names, TRUE);
    g_array_free(generations, TRUE);
}

const struct upload_protocol upload_composite = {
    .name = "composite",
    .parallel = true,
    .begin = composite_begin,
    .send_part = composite_send_part,
    .complete = composite_complete,
    .read_back = composite_read_back,
    .discard = composite_discard,
};

/* ---- resumable ---- */

struct resumable_state {
    char *session_url;
    int64_t total_size;       /* < 0: not known, the commit finalizes */
    bool finished;            /* the last part finalized the object */
    struct gcs_object object; /* what it made */
};

static int resumable_begin(struct upload_session *session, const struct upload_begin_args *args)
{
    char *url = NULL;
    int rc = gcs_resumable_begin(client_of(session), session->config.object_name, args->attrs,
                                 args->pre, args->total_size, &url);
    if (rc < 0)
        return rc;
    struct resumable_state *state = g_new0(struct resumable_state, 1);
    state->session_url = url;
    state->total_size = args->total_size;
    session->state = state;
    return 0;
}

static int resumable_send_part(struct upload_session *session, struct upload_part *part)
{
    struct resumable_state *state = session->state;
    if (state->finished)
        return -EINVAL; /* a part after the last */
    bool final = state->total_size >= 0 && part->offset + part->len == (uint64_t)state->total_size;
    int rc = gcs_resumable_put(client_of(session), state->session_url, part->offset, &part->body,
                               final, final ? &state->object : NULL);
    if (rc == 0 && final)
        state->finished = true;
    return rc;
}

static int resumable_complete(struct upload_session *session, const struct gcs_write_attrs *attrs,
                              const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    (void)attrs; /* given at begin */
    (void)pre;
    struct resumable_state *state = session->state;
    if (!state->finished) { /* the total was not known: an empty last request states it */
        struct gcs_body none = {.fd = -1, .has_crc32c = true};
        int rc = gcs_resumable_put(client_of(session), state->session_url, session->sent, &none,
                                   true, &state->object);
        if (rc < 0)
            return rc;
        state->finished = true;
    }
    if (out) {
        *out = state->object;
        memset(&state->object, 0, sizeof(state->object));
    }
    return 0;
}

static void resumable_discard(struct upload_session *session)
{
    struct resumable_state *state = session->state;
    if (!state->finished)
        gcs_resumable_cancel(client_of(session), state->session_url);
    gcs_object_clear(&state->object);
    g_free(state->session_url);
    g_free(state);
    session->state = NULL;
}

const struct upload_protocol upload_resumable = {
    .name = "resumable",
    .parallel = false,
    .begin = resumable_begin,
    .send_part = resumable_send_part,
    .complete = resumable_complete,
    .read_back = NULL,
    .discard = resumable_discard,
};

/* ---- one request ---- */

static int single_begin(struct upload_session *session, const struct upload_begin_args *args)
{
    (void)session;
    (void)args;
    return 0;
}

static int single_send_part(struct upload_session *session, struct upload_part *part)
{
    (void)part;
    return session->parts->len == 1 ? 0 : -EINVAL; /* kept for the commit: one part only */
}

static int single_complete(struct upload_session *session, const struct gcs_write_attrs *attrs,
                           const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    if (session->parts->len != 1)
        return -EINVAL;
    struct upload_part *part = g_ptr_array_index(session->parts, 0);
    return gcs_upload(client_of(session), session->config.object_name, &part->body, attrs, pre,
                      out);
}

static void single_discard(struct upload_session *session)
{
    (void)session; /* a failed one-request upload made nothing */
}

const struct upload_protocol upload_single = {
    .name = "single",
    .parallel = false,
    .begin = single_begin,
    .send_part = single_send_part,
    .complete = single_complete,
    .read_back = NULL,
    .discard = single_discard,
};

/* ---- the session ---- */

const char *upload_protocol_name(const struct upload_protocol *protocol)
{
    return protocol ? protocol->name : "none";
}

struct upload_session *upload_session_new(struct upload_pool *pool,
                                          const struct upload_session_config *config)
{
    struct upload_session *session = g_new0(struct upload_session, 1);
    session->pool = pool;
    session->config = *config;
    session->config.object_name = g_strdup(config->object_name);
    session->config.tmp_prefix = g_strdup(config->tmp_prefix ? config->tmp_prefix : "");
    if (session->config.max_parts_in_flight == 0)
        session->config.max_parts_in_flight = UPLOAD_DEFAULT_SESSION_IN_FLIGHT;
    session->parts = g_ptr_array_new_with_free_func(part_free);
    return session;
}

void upload_session_free(struct upload_session *session)
{
    if (!session)
        return;
    upload_abort(session);
    struct upload_pool *pool = session->pool;
    g_mutex_lock(&pool->lock);
    while (session->deletes_in_flight > 0) /* deletes sent by earlier commits and aborts */
        g_cond_wait(&pool->drained, &pool->lock);
    g_mutex_unlock(&pool->lock);
    g_ptr_array_free(session->parts, TRUE);
    g_free((char *)session->config.object_name);
    g_free((char *)session->config.tmp_prefix);
    g_free(session);
}

int upload_begin(struct upload_session *session, const struct upload_protocol *protocol,
                 const struct upload_begin_args *args)
{
    if (session->protocol)
        return -EBUSY;
    static const struct upload_begin_args none = {.total_size = -1};
    int rc = protocol->begin(session, args ? args : &none);
    if (rc < 0)
        return rc;
    session->protocol = protocol;
    session->sent = 0;
    return 0;
}

bool upload_is_open(struct upload_session *session)
{
    return session->protocol != NULL;
}

unsigned upload_part_count(struct upload_session *session)
{
    return session->parts->len;
}

int upload_append(struct upload_session *session, uint64_t offset, const struct gcs_body *body,
                  char *buffer)
{
    const struct upload_protocol *protocol = session->protocol;
    if (!protocol || (buffer && !protocol->parallel))
        return -EINVAL;
    struct upload_pool *pool = session->pool;
    struct upload_part *part = g_new0(struct upload_part, 1);
    part->session = session;
    part->number = (int)session->parts->len + 1;
    part->offset = offset;
    part->len = body->len;
    part->body = *body;
    part->buffer = buffer;
    g_mutex_lock(&pool->lock);
    if (protocol->parallel) {
        while (session->parts_in_flight >= session->config.max_parts_in_flight ||
               pool->in_flight >= pool->max_in_flight)
            g_cond_wait(&pool->drained, &pool->lock);
        session->parts_in_flight++;
        pool->in_flight++;
    }
    g_ptr_array_add(session->parts, part);
    g_mutex_unlock(&pool->lock);
    session->sent = offset + body->len;
    int rc = protocol->send_part(session, part);
    if (!protocol->parallel) {
        g_mutex_lock(&pool->lock);
        part->done = true;
        part->err = rc;
        g_mutex_unlock(&pool->lock);
    }
    return protocol->parallel ? 0 : rc;
}

/* Ends the upload: its parts answered, the protocol's discard done. */
static void upload_end(struct upload_session *session)
{
    session->protocol->discard(session);
    g_ptr_array_set_size(session->parts, 0);
    session->protocol = NULL;
    session->state = NULL;
    session->sent = 0;
}

int upload_commit(struct upload_session *session, const struct gcs_write_attrs *attrs,
                  const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    if (!session->protocol)
        return -EINVAL;
    wait_parts(session);
    int rc = first_part_error(session);
    if (rc == 0)
        rc = session->protocol->complete(session, attrs, pre, out);
    upload_end(session); /* removes what did not complete; deletes temporary objects */
    return rc;
}

void upload_abort(struct upload_session *session)
{
    if (!session->protocol)
        return;
    wait_parts(session);
    upload_end(session);
}

int upload_read_back(struct upload_session *session, upload_fetch_fn fetch, void *user)
{
    if (!session->protocol)
        return -EINVAL;
    wait_parts(session);
    int rc = first_part_error(session);
    if (rc == 0 && session->parts->len > 0)
        rc = session->protocol->read_back ? session->protocol->read_back(session, fetch, user)
                                          : -EOPNOTSUPP;
    return rc;
}
