/* The rate model (see rate.h): per-bucket token buckets that scale up under sustained load, and
 * a per-name write limit. */
#include "rate.h"

#include "faults.h"

#include <math.h>

struct rate_class_state {
    struct emu_token_bucket tokens;
    double base_rate;
    int64_t loaded_since_us; /* first refusal of the current sustained load; 0 = none */
    int64_t last_refusal_us;
};

struct bucket_state {
    struct rate_class_state reads, writes;
};

struct emu_rate_model {
    struct emu_rate_config config;
    GHashTable *buckets;    /* bucket name -> struct bucket_state * */
    GHashTable *last_write; /* "bucket/name" -> int64_t * (monotonic us) */
    struct emu_rate_counters counters;
};

#define LAST_WRITE_PRUNE_AT 65536u

struct emu_rate_model *emu_rate_model_new(const struct emu_rate_config *config)
{
    if (config->write_rate <= 0 && config->read_rate <= 0 && config->per_object_rate <= 0)
        return NULL;
    struct emu_rate_model *model = g_new0(struct emu_rate_model, 1);
    model->config = *config;
    model->buckets = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    model->last_write = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    return model;
}

void emu_rate_model_free(struct emu_rate_model *model)
{
    if (model == NULL)
        return;
    g_hash_table_destroy(model->buckets);
    g_hash_table_destroy(model->last_write);
    g_free(model);
}

static void class_init(struct rate_class_state *state, double rate, int64_t now_us)
{
    state->base_rate = rate;
    emu_token_bucket_init(&state->tokens, rate, now_us);
}

static struct bucket_state *bucket_state(struct emu_rate_model *model, const char *bucket,
                                         int64_t now_us)
{
    struct bucket_state *state = g_hash_table_lookup(model->buckets, bucket);
    if (state == NULL) {
        state = g_new0(struct bucket_state, 1);
        class_init(&state->reads, model->config.read_rate, now_us);
        class_init(&state->writes, model->config.write_rate, now_us);
        g_hash_table_insert(model->buckets, g_strdup(bucket), state);
    }
    return state;
}

/* Raises the rate to base * 2^(whole scale-up periods of the current load); never lowers it. */
static void class_scale(struct emu_rate_model *model, struct rate_class_state *state,
                        int64_t now_us)
{
    if (model->config.scale_up_s <= 0 || state->loaded_since_us == 0)
        return;
    double periods =
        floor((double)(now_us - state->loaded_since_us) / (model->config.scale_up_s * 1e6));
    if (periods > 40)
        periods = 40;
    double target = state->base_rate * ldexp(1.0, (int)periods);
    while (state->tokens.rate < target) {
        state->tokens.rate *= 2; /* counted one doubling at a time */
        model->counters.scale_ups++;
    }
}

/* Takes a token of one class; false on a refusal (retry_after filled). */
static bool class_take(struct emu_rate_model *model, struct rate_class_state *state, int64_t now_us,
                       unsigned *retry_after_s)
{
    if (state->tokens.rate <= 0)
        return true;
    /* A lull ends the load: time without refusals does not count towards a scale-up. */
    if (state->loaded_since_us != 0 &&
        (double)(now_us - state->last_refusal_us) > EMU_RATE_LULL_S * 1e6)
        state->loaded_since_us = 0;
    class_scale(model, state, now_us);
    if (emu_token_bucket_take(&state->tokens, now_us))
        return true;
    if (state->loaded_since_us == 0)
        state->loaded_since_us = now_us;
    state->last_refusal_us = now_us;
    *retry_after_s = emu_token_bucket_retry_after(&state->tokens);
    return false;
}

static void prune_last_writes(struct emu_rate_model *model, int64_t now_us)
{
    double interval_us = 1e6 / model->config.per_object_rate;
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, model->last_write);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        if ((double)(now_us - *(int64_t *)value) >= interval_us)
            g_hash_table_iter_remove(&iter);
    }
}

/* Whether a write to bucket/name may pass now: one per 1/per_object_rate seconds. */
static bool name_check(struct emu_rate_model *model, const char *key, int64_t now_us,
                       unsigned *retry_after_s)
{
    const int64_t *last = g_hash_table_lookup(model->last_write, key);
    double interval_us = 1e6 / model->config.per_object_rate;
    if (last == NULL || (double)(now_us - *last) >= interval_us)
        return true;
    unsigned seconds = (unsigned)ceil((interval_us - (double)(now_us - *last)) / 1e6);
    *retry_after_s = seconds < 1 ? 1 : seconds;
    return false;
}

/* Records a write that passed (a refused one does not count). Takes key. */
static void name_record(struct emu_rate_model *model, char *key, int64_t now_us)
{
    if (g_hash_table_size(model->last_write) >= LAST_WRITE_PRUNE_AT)
        prune_last_writes(model, now_us);
    int64_t *last = g_new(int64_t, 1);
    *last = now_us;
    g_hash_table_replace(model->last_write, key, last);
}

enum emu_rate_verdict emu_rate_decide(struct emu_rate_model *model, const char *bucket,
                                      const char *name, enum emu_rate_class klass, int64_t now_us,
                                      unsigned *retry_after_s)
{
    if (model == NULL || bucket == NULL || klass == EMU_RATE_NONE)
        return EMU_RATE_OK;
    struct bucket_state *state = bucket_state(model, bucket, now_us);
    unsigned retry_after = 1;
    if (klass == EMU_RATE_READ) {
        if (class_take(model, &state->reads, now_us, &retry_after))
            return EMU_RATE_OK;
        model->counters.refused_reads++;
        *retry_after_s = retry_after;
        return EMU_RATE_REFUSED_READ;
    }
    /* The name first: a write it refuses takes no token of the bucket's rate, and a write
     * the bucket refuses does not count against the name. */
    char *key = klass == EMU_RATE_NAME_WRITE && name != NULL && model->config.per_object_rate > 0
                    ? g_strconcat(bucket, "/", name, NULL)
                    : NULL;
    if (key != NULL && !name_check(model, key, now_us, &retry_after)) {
        g_free(key);
        model->counters.refused_object_writes++;
        *retry_after_s = retry_after;
        return EMU_RATE_REFUSED_OBJECT;
    }
    if (!class_take(model, &state->writes, now_us, &retry_after)) {
        g_free(key);
        model->counters.refused_writes++;
        *retry_after_s = retry_after;
        return EMU_RATE_REFUSED_WRITE;
    }
    if (key != NULL)
        name_record(model, key, now_us);
    return EMU_RATE_OK;
}

void emu_rate_counters(const struct emu_rate_model *model, struct emu_rate_counters *out)
{
    *out = (struct emu_rate_counters){0};
    if (model != NULL)
        *out = model->counters;
}

void emu_rate_current(const struct emu_rate_model *model, const char *bucket, double *write_rate,
                      double *read_rate)
{
    *write_rate = model ? model->config.write_rate : 0;
    *read_rate = model ? model->config.read_rate : 0;
    struct bucket_state *state =
        model && bucket ? g_hash_table_lookup(model->buckets, bucket) : NULL;
    if (state != NULL) {
        *write_rate = state->writes.tokens.rate;
        *read_rate = state->reads.tokens.rate;
    }
}
