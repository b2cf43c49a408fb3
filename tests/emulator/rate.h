/* A rate model like Cloud Storage's, for tests of clients that share one bucket: pure logic, no
 * HTTP, unit-tested.
 *
 * Per bucket, object writes (uploads, composes, copies, rewrites, metadata updates, deletes) and
 * object reads (metadata and media GETs, HEADs) each draw from a token bucket that starts at
 * write_rate / read_rate per second and holds at most one second of tokens. A class under
 * sustained load scales up: once it has refused a request, every scale_up_s seconds during
 * which it keeps refusing (no lull longer than EMU_RATE_LULL_S between refusals) doubles its
 * rate, as Cloud Storage's autoscaling does (about every 20 minutes). A rate once reached stays.
 * Writes that create or change one object name (not deletes) are also limited to
 * per_object_rate per second per name.
 *
 * Threading: none of its own; the caller holds one lock around every call. */
#ifndef EMU_RATE_H
#define EMU_RATE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define EMU_RATE_LULL_S 10.0

enum emu_rate_class { EMU_RATE_NONE = 0, EMU_RATE_READ, EMU_RATE_WRITE, EMU_RATE_NAME_WRITE };

enum emu_rate_verdict {
    EMU_RATE_OK = 0,
    EMU_RATE_REFUSED_READ,   /* the bucket's read rate */
    EMU_RATE_REFUSED_WRITE,  /* the bucket's write rate */
    EMU_RATE_REFUSED_OBJECT, /* one write per second to one object name */
};

struct emu_rate_config {
    double write_rate;      /* per bucket, per second, at the start; 0 = unlimited */
    double read_rate;       /* likewise */
    double scale_up_s;      /* sustained load that doubles a rate; 0 = never */
    double per_object_rate; /* writes per second to one name; 0 = unlimited */
};

struct emu_rate_counters {
    uint64_t refused_reads, refused_writes, refused_object_writes;
    uint64_t scale_ups; /* doublings, all buckets and classes together */
};

struct emu_rate_model;
/* NULL when every rate is 0 (the model is off). */
struct emu_rate_model *emu_rate_model_new(const struct emu_rate_config *config);
void emu_rate_model_free(struct emu_rate_model *model); /* accepts NULL */
/* Decides one request at now_us on bucket (NULL: not limited) of class klass; name is the object
 * a NAME_WRITE creates or changes. On a refusal *retry_after_s is the whole seconds (>= 1) until
 * a retry could pass. Accepts a NULL model (always OK). */
enum emu_rate_verdict emu_rate_decide(struct emu_rate_model *model, const char *bucket,
                                      const char *name, enum emu_rate_class klass, int64_t now_us,
                                      unsigned *retry_after_s);
void emu_rate_counters(const struct emu_rate_model *model, struct emu_rate_counters *out);
/* The current rates of one bucket (the starting rates when it has seen no request). */
void emu_rate_current(const struct emu_rate_model *model, const char *bucket, double *write_rate,
                      double *read_rate);

#endif
