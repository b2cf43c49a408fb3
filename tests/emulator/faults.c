/* Fault rules, their seeded scheduling, and the QPS token bucket (see faults.h). */
#include "faults.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct emu_faults {
    GMutex lock;
    GArray *rules;      /* struct emu_fault_rule */
    GPtrArray *faulted; /* per rule: key -> faults injected (GHashTable), NULL without per_object */
    uint64_t prng;
};

static const char *const kind_names[] = {
    [EMU_FAULT_NONE] = "none",
    [EMU_FAULT_503] = "503",
    [EMU_FAULT_429] = "429",
    [EMU_FAULT_RESET_BEFORE] = "reset-before",
    [EMU_FAULT_RESET_MID] = "reset-mid",
    [EMU_FAULT_TRUNCATE] = "truncate",
    [EMU_FAULT_STALL] = "stall",
};

const char *emu_fault_kind_name(enum emu_fault_kind kind)
{
    if ((size_t)kind >= G_N_ELEMENTS(kind_names))
        return "none";
    return kind_names[kind];
}

int emu_fault_kind_from_name(const char *name, enum emu_fault_kind *out)
{
    if (name == NULL)
        return -EINVAL;
    for (size_t i = 1; i < G_N_ELEMENTS(kind_names); i++) {
        if (strcmp(kind_names[i], name) == 0) {
            *out = (enum emu_fault_kind)i;
            return 0;
        }
    }
    return -EINVAL;
}

void emu_fault_rule_init(struct emu_fault_rule *rule, enum emu_fault_kind kind, double rate)
{
    memset(rule, 0, sizeof(*rule));
    rule->kind = kind;
    rule->rate = rate;
    rule->count = -1;
    rule->seconds = 5;
    rule->retry_after = 1;
}

static int parse_double(const char *text, double *out)
{
    if (text == NULL || text[0] == '\0')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(value))
        return -EINVAL;
    *out = value;
    return 0;
}

int emu_fault_parse_spec(const char *spec, struct emu_fault_rule *out)
{
    if (spec == NULL)
        return -EINVAL;
    int ret = -EINVAL;
    char **fields = g_strsplit(spec, ":", 5);
    guint n = g_strv_length(fields);
    struct emu_fault_rule rule;
    enum emu_fault_kind kind;
    double rate;
    if (n < 2 || n > 4)
        goto out;
    if (emu_fault_kind_from_name(fields[0], &kind) < 0)
        goto out;
    if (parse_double(fields[1], &rate) < 0 || rate < 0 || rate > 1)
        goto out;
    emu_fault_rule_init(&rule, kind, rate);
    if (n >= 3) {
        if (strlen(fields[2]) >= sizeof(rule.op))
            goto out;
        g_strlcpy(rule.op, fields[2], sizeof(rule.op));
    }
    if (n == 4) {
        double arg;
        if (parse_double(fields[3], &arg) < 0 || arg < 0 || arg > 86400)
            goto out;
        if (kind == EMU_FAULT_STALL)
            rule.seconds = arg;
        else if (kind == EMU_FAULT_429)
            rule.retry_after = (unsigned)arg;
        else
            goto out;
    }
    *out = rule;
    ret = 0;
out:
    g_strfreev(fields);
    return ret;
}

uint64_t emu_prng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double emu_prng_unit(uint64_t *state)
{
    return (double)(emu_prng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

static void free_tally(gpointer tally)
{
    if (tally != NULL)
        g_hash_table_destroy(tally);
}

struct emu_faults *emu_faults_new(uint64_t seed)
{
    struct emu_faults *faults = g_new0(struct emu_faults, 1);
    g_mutex_init(&faults->lock);
    faults->rules = g_array_new(FALSE, FALSE, sizeof(struct emu_fault_rule));
    faults->faulted = g_ptr_array_new_with_free_func(free_tally);
    faults->prng = seed;
    return faults;
}

void emu_faults_free(struct emu_faults *faults)
{
    if (faults == NULL)
        return;
    g_array_free(faults->rules, TRUE);
    g_ptr_array_free(faults->faulted, TRUE);
    g_mutex_clear(&faults->lock);
    g_free(faults);
}

void emu_faults_set_rules(struct emu_faults *faults, const struct emu_fault_rule *rules,
                          size_t count)
{
    g_mutex_lock(&faults->lock);
    g_array_set_size(faults->rules, 0);
    g_ptr_array_set_size(faults->faulted, 0);
    for (size_t i = 0; i < count; i++) {
        struct emu_fault_rule rule = rules[i];
        rule.since_fired = 0;
        g_array_append_val(faults->rules, rule);
        g_ptr_array_add(faults->faulted,
                        rule.per_object > 0
                            ? g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL)
                            : NULL);
    }
    g_mutex_unlock(&faults->lock);
}

GArray *emu_faults_get_rules(struct emu_faults *faults)
{
    GArray *copy = g_array_new(FALSE, FALSE, sizeof(struct emu_fault_rule));
    g_mutex_lock(&faults->lock);
    g_array_append_vals(copy, faults->rules->data, faults->rules->len);
    g_mutex_unlock(&faults->lock);
    return copy;
}

static bool rule_matches(const struct emu_fault_rule *rule, const char *op)
{
    if (rule->count == 0)
        return false;
    if (rule->op[0] == '\0')
        return true;
    return op != NULL && strcmp(rule->op, op) == 0;
}

/* A scheduled rule is due from the Nth matching request since its last fault; one that is due
 * but may not fault this object stays due, so the fault goes to the next object it may. */
static bool rule_fires(struct emu_faults *faults, guint index, struct emu_fault_rule *rule,
                       const char *key)
{
    if (rule->every > 0 && rule->since_fired < rule->every)
        rule->since_fired++;
    GHashTable *tally = g_ptr_array_index(faults->faulted, index);
    gsize faulted = 0;
    if (tally != NULL && key != NULL) {
        faulted = GPOINTER_TO_SIZE(g_hash_table_lookup(tally, key));
        if (faulted >= (gsize)rule->per_object)
            return false;
    }
    bool fire;
    if (rule->every > 0)
        fire = rule->since_fired >= rule->every;
    else /* Rate 1 never draws, so deterministic tests do not depend on the PRNG's sequence. */
        fire = rule->rate >= 1.0 || (rule->rate > 0 && emu_prng_unit(&faults->prng) < rule->rate);
    if (!fire)
        return false;
    rule->since_fired = 0;
    if (tally != NULL && key != NULL)
        g_hash_table_insert(tally, g_strdup(key), GSIZE_TO_POINTER(faulted + 1));
    return true;
}

bool emu_faults_decide(struct emu_faults *faults, const char *op, const char *key,
                       struct emu_fault_decision *out)
{
    bool fired = false;
    memset(out, 0, sizeof(*out));
    g_mutex_lock(&faults->lock);
    for (guint i = 0; i < faults->rules->len && !fired; i++) {
        struct emu_fault_rule *rule = &g_array_index(faults->rules, struct emu_fault_rule, i);
        if (!rule_matches(rule, op))
            continue;
        if (rule->count > 0)
            rule->count--;
        if (rule_fires(faults, i, rule, key)) {
            out->kind = rule->kind;
            out->seconds = rule->seconds;
            out->retry_after = rule->retry_after;
            fired = true;
        }
    }
    g_mutex_unlock(&faults->lock);
    return fired;
}

unsigned emu_faults_jitter_ms(struct emu_faults *faults, unsigned max_ms)
{
    if (max_ms == 0)
        return 0;
    g_mutex_lock(&faults->lock);
    uint64_t draw = emu_prng_next(&faults->prng);
    g_mutex_unlock(&faults->lock);
    return (unsigned)(draw % ((uint64_t)max_ms + 1));
}

void emu_token_bucket_init(struct emu_token_bucket *bucket, double rate, int64_t now_us)
{
    bucket->rate = rate > 0 ? rate : 0;
    bucket->tokens = bucket->rate > 1 ? bucket->rate : 1;
    bucket->last_us = now_us;
}

bool emu_token_bucket_take(struct emu_token_bucket *bucket, int64_t now_us)
{
    if (bucket->rate <= 0)
        return true;
    double capacity = bucket->rate > 1 ? bucket->rate : 1;
    if (now_us > bucket->last_us) {
        bucket->tokens += (double)(now_us - bucket->last_us) * bucket->rate / 1e6;
        if (bucket->tokens > capacity)
            bucket->tokens = capacity;
        bucket->last_us = now_us;
    }
    if (bucket->tokens >= 1.0) {
        bucket->tokens -= 1.0;
        return true;
    }
    return false;
}

unsigned emu_token_bucket_retry_after(const struct emu_token_bucket *bucket)
{
    if (bucket->rate <= 0)
        return 1;
    double wait = (1.0 - bucket->tokens) / bucket->rate;
    unsigned seconds = (unsigned)ceil(wait);
    return seconds < 1 ? 1 : seconds;
}
