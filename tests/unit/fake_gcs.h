/* An in-process fake of the gcs layer (include/fluxfs/gcs.h) for unit tests of the layers
 * above it (the io layer: writer, reader, prefetch, miss batches), in the manner of
 * mountpoint-s3's MockClient and failure_client. It is a static library of its own
 * (libfake-gcs.a, tests/unit/meson.build) that stands in for libfluxfs-gcs.a at link time:
 * a test binary links the io layer, this fake and the util layer, and none of http, auth
 * or gcs.
 *
 * - Store: an in-memory bucket, object name -> generation, bytes, CRC32C, component count,
 *   content type, mtime, symlink target; plus multipart uploads and resumable sessions in
 *   progress. Preconditions, pinned generations, CRC32C of bodies and whole-object reads
 *   are checked as gcs.h describes (-ESTALE, -ENOENT, -EIO).
 * - Async calls (*_async) complete on the fake's own engine thread, as the real client's
 *   do; their effect on the store (and the copy into a read's buffer, the read of an upload's
 *   body) happens there, when the completion runs, not when the call is made.
 * - Faults: fake_gcs_fail makes chosen calls of one kind fail with an errno (the Nth call,
 *   N calls from the Nth on, or every call), optionally only for object names containing a
 *   string. A failed call has no effect on the store, unless its reply is lost
 *   (fake_gcs_lose_reply: the effect, then the error). Calls are counted (and faults
 *   decided) when the call is made, in the caller's thread.
 * - Latency: fake_gcs_set_latency delays each completion of a kind (async: on the engine
 *   thread, which goes on with other completions meanwhile; blocking calls: in the caller).
 *   fake_gcs_hold stops completions altogether until released, so a test can see what a
 *   layer has in flight (fake_gcs_wait_queued) without sleeping.
 * - Counters: calls and failures per kind, calls per (kind, object name), the most async
 *   calls ever queued at once.
 *
 * Threads: every function may be called from any thread; one lock protects the store, the
 * rules and the counters. Callbacks run without it. */
#ifndef FLUXFS_TESTS_FAKE_GCS_H
#define FLUXFS_TESTS_FAKE_GCS_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fluxfs/gcs.h"

/* Kinds of call: a blocking function and its *_async form are one kind. */
enum fake_gcs_op {
    FAKE_GCS_STAT,
    FAKE_GCS_LIST,
    FAKE_GCS_READ,
    FAKE_GCS_UPLOAD,
    FAKE_GCS_MULTIPART_BEGIN,
    FAKE_GCS_PUT_PART,
    FAKE_GCS_MULTIPART_COMPLETE,
    FAKE_GCS_MULTIPART_ABORT,
    FAKE_GCS_MULTIPART_LIST,
    FAKE_GCS_RESUMABLE_BEGIN,
    FAKE_GCS_RESUMABLE_PUT,
    FAKE_GCS_RESUMABLE_CANCEL,
    FAKE_GCS_COMPOSE,
    FAKE_GCS_COMPOSE_SOURCE, /* counted once per source of each compose (not a call) */
    FAKE_GCS_DELETE,
    FAKE_GCS_TEST_PERMISSIONS,
    FAKE_GCS_OP_COUNT
};

/* A new empty bucket and its engine thread. The result is the client handed to the layers. */
struct gcs_client *fake_gcs_new(void);
/* Runs what is still queued (with -ECANCELED), stops the engine, frees. Accepts NULL. */
void fake_gcs_free(struct gcs_client *fake);

/* ---- the store ---- */

/* Stores an object (replacing the live one) and returns its new generation. */
int64_t fake_gcs_put(struct gcs_client *fake, const char *name, const void *data, size_t len);
/* The live object: 0 with *data (g_bytes_unref it; may be NULL) and *meta (may be NULL;
 * gcs_object_clear it), or -ENOENT. */
int fake_gcs_get(struct gcs_client *fake, const char *name, GBytes **data, struct gcs_object *meta);
/* Objects whose names start with prefix (NULL = all). */
unsigned fake_gcs_count(struct gcs_client *fake, const char *prefix);
/* Multipart uploads and resumable sessions begun and neither completed nor aborted. */
unsigned fake_gcs_open_uploads(struct gcs_client *fake);
/* gcs_test_permissions answers false for every permission from now on. */
void fake_gcs_deny_permissions(struct gcs_client *fake, bool deny);

/* ---- faults and latency ---- */

/* Calls of op on an object whose name contains name_contains (NULL or "" = any; calls
 * without a name, such as gcs_test_permissions, match only that): counting the matching
 * calls from 1 after this rule was added, calls nth .. nth + count - 1 fail with err (a
 * negative errno); count 0 = every one from the nth on. Rules are checked in the order they
 * were added; the first that fails a call wins. */
void fake_gcs_fail(struct gcs_client *fake, enum fake_gcs_op op, const char *name_contains,
                   unsigned nth, unsigned count, int err);
/* The same, but the failing calls take effect first (the reply was lost): uploads, parts,
 * completes, composes and deletes change the bucket and then fail with err, as a request
 * whose reply a reset lost. Other kinds of call simply fail. */
void fake_gcs_lose_reply(struct gcs_client *fake, enum fake_gcs_op op, const char *name_contains,
                         unsigned nth, unsigned count, int err);
void fake_gcs_clear_faults(struct gcs_client *fake);
/* Each completion of op waits this long (0 = none, the default). */
void fake_gcs_set_latency(struct gcs_client *fake, enum fake_gcs_op op, unsigned usec);
/* While held, async completions are queued and not run. */
void fake_gcs_hold(struct gcs_client *fake, bool hold);
/* Waits until at least n async calls are queued and not completed (under fake_gcs_hold, the
 * layer's requests in flight); false after timeout_ms. */
bool fake_gcs_wait_queued(struct gcs_client *fake, unsigned n, int timeout_ms);
/* Waits until no async call is queued or running; false after timeout_ms. */
bool fake_gcs_wait_idle(struct gcs_client *fake, int timeout_ms);

/* ---- counters ---- */

uint64_t fake_gcs_calls(struct gcs_client *fake, enum fake_gcs_op op);
uint64_t fake_gcs_failures(struct gcs_client *fake, enum fake_gcs_op op);
/* Calls of op naming exactly this object (for compose: the destination; see
 * FAKE_GCS_COMPOSE_SOURCE for its sources). */
uint64_t fake_gcs_calls_named(struct gcs_client *fake, enum fake_gcs_op op, const char *name);
/* The most async calls ever queued at once. */
unsigned fake_gcs_max_queued(struct gcs_client *fake);
void fake_gcs_reset_counters(struct gcs_client *fake);

#endif
