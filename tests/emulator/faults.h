/* Fault injection and rate limiting for the emulator: pure logic, no HTTP, unit-tested.
 *
 * A rule says "answer KIND to RATE of the requests whose operation is OP (any when empty)",
 * optionally only for the next COUNT matching requests. Rules are tried in order for every
 * non-control request; the first that fires decides. Random draws come from one seeded PRNG
 * so a run with the same seed and request order injects the same faults.
 *
 * Tests that must not depend on luck use a schedule instead of a rate: EVERY = N fires on
 * every Nth matching request, and PER_OBJECT = K never faults one object (its key: bucket/name,
 * or the request-target for requests whose URL names none) more than K times, a scheduled fault
 * passing on to the next matching request for another object. With K at most a client's retry
 * budget no call can run out of retries, however its requests interleave.
 *
 * Command-line form: KIND:RATE[:OP[:ARG]], ARG = seconds for stall, Retry-After for 429.
 *
 * Threading: struct emu_faults has its own lock; struct emu_token_bucket has none (the caller
 * holds one). */
#ifndef EMU_FAULTS_H
#define EMU_FAULTS_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum emu_fault_kind {
    EMU_FAULT_NONE = 0,
    EMU_FAULT_503,          /* 503 backendError */
    EMU_FAULT_429,          /* 429 rateLimitExceeded with Retry-After */
    EMU_FAULT_RESET_BEFORE, /* close the connection without a response */
    EMU_FAULT_RESET_MID,    /* send part of the body, then reset the connection */
    EMU_FAULT_TRUNCATE,     /* send fewer bytes than Content-Length, then close */
    EMU_FAULT_STALL,        /* pause for `seconds` in the middle of the response */
};

#define EMU_FAULT_OP_MAX 64

struct emu_fault_rule {
    enum emu_fault_kind kind;
    double rate;               /* probability in [0, 1]; unused when every > 0 */
    char op[EMU_FAULT_OP_MAX]; /* canonical operation name; "" = every operation */
    int64_t count;             /* matching requests left; -1 = unlimited */
    int64_t every;             /* > 0: fire on every Nth matching request, no draw */
    int64_t per_object;        /* > 0: fault one object at most this many times */
    int64_t since_fired;       /* matching requests since the last fault (for every) */
    double seconds;            /* stall duration */
    unsigned retry_after;      /* Retry-After seconds of 429 */
};

struct emu_fault_decision {
    enum emu_fault_kind kind; /* EMU_FAULT_NONE = serve normally */
    double seconds;
    unsigned retry_after;
};

const char *emu_fault_kind_name(enum emu_fault_kind kind);
/* Returns 0 or -EINVAL. */
int emu_fault_kind_from_name(const char *name, enum emu_fault_kind *out);
/* Parses KIND:RATE[:OP[:ARG]]; returns 0 or -EINVAL (out untouched on error). */
int emu_fault_parse_spec(const char *spec, struct emu_fault_rule *out);
/* Fills the defaults of a rule: unlimited count, no schedule, stall 5 s, Retry-After 1 s. */
void emu_fault_rule_init(struct emu_fault_rule *rule, enum emu_fault_kind kind, double rate);

/* --- PRNG (splitmix64): deterministic for a given seed --- */
uint64_t emu_prng_next(uint64_t *state);
/* Uniform in [0, 1). */
double emu_prng_unit(uint64_t *state);

/* --- rule set --- */
struct emu_faults;
struct emu_faults *emu_faults_new(uint64_t seed);
void emu_faults_free(struct emu_faults *faults); /* accepts NULL */
/* Replaces the whole rule list (copied) and forgets the objects the old rules faulted. */
void emu_faults_set_rules(struct emu_faults *faults, const struct emu_fault_rule *rules,
                          size_t count);
/* Returns a copy of the current rules (counts as they are now): GArray of emu_fault_rule. */
GArray *emu_faults_get_rules(struct emu_faults *faults);
/* Decides the fate of one request with operation op ("" or NULL = unnamed: only rules without
 * an op match) on object key (what per_object counts; NULL = none, never limited). Consumes a
 * count of every matching limited rule it examines. Returns true when a fault fires (out
 * filled), false otherwise (out->kind = EMU_FAULT_NONE). */
bool emu_faults_decide(struct emu_faults *faults, const char *op, const char *key,
                       struct emu_fault_decision *out);
/* Uniform jitter draw in [0, max_ms] from the same PRNG (thread-safe). */
unsigned emu_faults_jitter_ms(struct emu_faults *faults, unsigned max_ms);

/* --- QPS limit: token bucket holding at most one second of tokens --- */
struct emu_token_bucket {
    double rate; /* tokens per second; 0 = unlimited */
    double tokens;
    int64_t last_us;
};
void emu_token_bucket_init(struct emu_token_bucket *bucket, double rate, int64_t now_us);
/* Takes one token; false when none is left (answer 429). */
bool emu_token_bucket_take(struct emu_token_bucket *bucket, int64_t now_us);
/* Whole seconds until a token is available (at least 1), for Retry-After. */
unsigned emu_token_bucket_retry_after(const struct emu_token_bucket *bucket);

#endif
