/* What the mount has cost so far, in list-price dollars (issue 21, "dollars in the open"):
 * every request that reached the server counted by its billing class, as Cloud Storage bills
 * it (and as the emulator's /_emulator/bill counts it: an attempt answered with an error is an
 * operation too; a resumable upload is one Class A operation, its initiation, whatever the
 * number of chunks: "a completed resumable upload is considered one Class A operation",
 * https://cloud.google.com/storage/docs/resumable-uploads), plus the storage of
 * the mount's temporary objects (composites of the small-file prefetcher, parts of buffered
 * writes): their bytes for as long as they lived, and for a bucket with soft delete, the soft
 * delete period after their delete, which Cloud Storage bills whether or not anyone restores them;
 * for a bucket with versioning, the delete keeps a noncurrent version instead, billed until a
 * lifecycle rule deletes it: the estimate counts one month of it (bench/cost.py does the same).
 * An estimate at the list prices in gcs.h, not a bill: network egress and storage of the user's own
 * objects are not counted.
 *
 * Threads: any. Counters are atomic; the table of live temporaries has its own lock. */
#include <string.h>

#include "fluxfs/log.h"
#include "gcs-internal.h"

struct temporary {
    uint64_t size;
    gint64 created_us; /* monotonic */
};

void gcs_cost_init(struct gcs_cost *cost)
{
    memset(cost, 0, sizeof(*cost));
    g_mutex_init(&cost->lock);
    cost->live = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

void gcs_cost_clear(struct gcs_cost *cost)
{
    g_hash_table_destroy(cost->live);
    g_free(cost->temporary_prefix);
    g_mutex_clear(&cost->lock);
}

enum gcs_op_class gcs_op_class_of(enum metrics_gcs_method method)
{
    switch (method) {
    case METRICS_GCS_LIST_OBJECTS:
    case METRICS_GCS_CREATE_OBJECT:
    case METRICS_GCS_CREATE_OBJECT_CHUNK_WRITER:
    case METRICS_GCS_COMPOSE_OBJECTS:
    case METRICS_GCS_COPY_OBJECT:
    case METRICS_GCS_UPDATE_OBJECT:
    case METRICS_GCS_MULTIPART_CREATE:
    case METRICS_GCS_MULTIPART_PART:
    case METRICS_GCS_MULTIPART_COMPLETE:
    case METRICS_GCS_MULTIPART_LIST:
    case METRICS_GCS_CREATE_FOLDER:
    case METRICS_GCS_RENAME_FOLDER:
        return GCS_OP_CLASS_A;
    case METRICS_GCS_STAT_OBJECT:
    case METRICS_GCS_NEW_READER:
    case METRICS_GCS_GET_BUCKET:
    case METRICS_GCS_TEST_PERMISSIONS:
    case METRICS_GCS_GET_OPERATION:
        return GCS_OP_CLASS_B;
    case METRICS_GCS_UPLOAD_CHUNK: /* the upload's one Class A is its initiation (above) */
    case METRICS_GCS_CANCEL_UPLOAD:
    case METRICS_GCS_DELETE_OBJECT:
    case METRICS_GCS_MULTIPART_ABORT:
    case METRICS_GCS_DELETE_FOLDER:
        return GCS_OP_FREE;
    case METRICS_GCS_OTHERS:
    case METRICS_GCS_METHOD_COUNT:
        break;
    }
    return GCS_OP_CLASS_A; /* what is not known is counted at the higher price */
}

void gcs_cost_count(struct gcs_client *client, enum metrics_gcs_method method)
{
    atomic_fetch_add(&client->cost.ops[gcs_op_class_of(method)], 1);
}

static bool is_temporary(struct gcs_cost *cost, const char *name)
{
    return cost->temporary_prefix && name && g_str_has_prefix(name, cost->temporary_prefix);
}

void gcs_set_temporary_prefix(struct gcs_client *client, const char *prefix)
{
    g_mutex_lock(&client->cost.lock);
    g_free(client->cost.temporary_prefix);
    client->cost.temporary_prefix = prefix && *prefix ? g_strdup(prefix) : NULL;
    g_mutex_unlock(&client->cost.lock);
}

void gcs_cost_note_soft_delete(struct gcs_client *client, int64_t seconds)
{
    g_mutex_lock(&client->cost.lock);
    client->cost.soft_delete_seconds = seconds > 0 ? seconds : 0;
    g_mutex_unlock(&client->cost.lock);
}

void gcs_cost_note_versioning(struct gcs_client *client, bool versioning)
{
    g_mutex_lock(&client->cost.lock);
    client->cost.versioning = versioning;
    g_mutex_unlock(&client->cost.lock);
}

void gcs_cost_note_created(struct gcs_client *client, const char *name, uint64_t size)
{
    struct gcs_cost *cost = &client->cost;
    g_mutex_lock(&cost->lock);
    if (is_temporary(cost, name)) {
        struct temporary *t = g_new(struct temporary, 1);
        t->size = size;
        t->created_us = g_get_monotonic_time();
        g_hash_table_replace(cost->live, g_strdup(name), t); /* an overwrite: the newer one */
    }
    g_mutex_unlock(&cost->lock);
}

void gcs_cost_note_deleted(struct gcs_client *client, const char *name)
{
    struct gcs_cost *cost = &client->cost;
    g_mutex_lock(&cost->lock);
    struct temporary *t = is_temporary(cost, name) ? g_hash_table_lookup(cost->live, name) : NULL;
    if (t) {
        double gib = (double)t->size / (double)(1ull << 30);
        cost->ended_gib_seconds += gib * (double)(g_get_monotonic_time() - t->created_us) / 1e6;
        /* Versioning keeps the deleted version as noncurrent; soft delete comes only when
         * that version is deleted in turn. */
        if (cost->versioning)
            cost->noncurrent_bytes += t->size;
        else
            cost->soft_deleted_gib_seconds += gib * (double)cost->soft_delete_seconds;
        cost->temporaries_deleted++;
        g_hash_table_remove(cost->live, name);
    }
    g_mutex_unlock(&cost->lock);
}

void gcs_get_cost(struct gcs_client *client, struct gcs_cost_stats *out)
{
    struct gcs_cost *cost = &client->cost;
    memset(out, 0, sizeof(*out));
    out->class_a = atomic_load(&cost->ops[GCS_OP_CLASS_A]);
    out->class_b = atomic_load(&cost->ops[GCS_OP_CLASS_B]);
    out->free_ops = atomic_load(&cost->ops[GCS_OP_FREE]);
    g_mutex_lock(&cost->lock);
    gint64 now = g_get_monotonic_time();
    double live = 0;
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, cost->live);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        const struct temporary *t = value;
        live += (double)t->size / (double)(1ull << 30) * (double)(now - t->created_us) / 1e6;
    }
    out->temporaries_live = g_hash_table_size(cost->live);
    out->temporaries_deleted = cost->temporaries_deleted;
    out->temporary_gib_seconds = cost->ended_gib_seconds + live;
    out->soft_deleted_gib_seconds = cost->soft_deleted_gib_seconds;
    out->noncurrent_bytes = cost->noncurrent_bytes;
    g_mutex_unlock(&cost->lock);
    double storage = (out->temporary_gib_seconds + out->soft_deleted_gib_seconds) *
                     GCS_PRICE_STANDARD_PER_GIB_MONTH / GCS_PRICE_MONTH_SECONDS;
    storage += (double)out->noncurrent_bytes / (double)(1ull << 30) *
               GCS_PRICE_STANDARD_PER_GIB_MONTH; /* one month kept */
    out->dollars = (double)out->class_a / 1000.0 * GCS_PRICE_CLASS_A_PER_1000 +
                   (double)out->class_b / 1000.0 * GCS_PRICE_CLASS_B_PER_1000 + storage;
}
