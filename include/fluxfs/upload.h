/* Uploads (io layer): one session interface over the upload protocols of the gcs layer, so
 * that the writer (writer.h) says what to upload and never which protocol does it. As curl's
 * connection filters or gcsfuse's Writer: a table of functions per protocol (begin, send a
 * part, complete, read back, discard) behind five calls:
 *
 *   upload_begin(session, protocol, args)   opens an upload of the session's object
 *   upload_append(session, offset, body)    the next part (parallel protocols: sent at once,
 *                                           answered later; the others: sent or kept in order)
 *   upload_commit(session, attrs, pre, out) waits for the parts, makes the object, ends
 *   upload_abort(session)                   waits for the parts, removes everything the
 *                                           upload made (temporaries, the upload itself), ends
 *   upload_read_back(session, fetch, user)  hands back the bytes sent so far (a spill)
 *
 * The protocols:
 *   upload_multipart  XML multipart upload: parts in parallel, completed with the
 *                     precondition. A crash marker (a small temporary naming the upload) is
 *                     uploaded beside the first parts and awaited before the upload is
 *                     completed or aborted, then deleted without waiting (a later mount's
 *                     cleanup aborts the upload of a crashed daemon: upload_cleanup.c).
 *                     args.readable: the upload goes to a temporary object (readable once
 *                     completed, for upload_read_back) that the commit completes, composes
 *                     onto the object name with the precondition, and deletes.
 *   upload_composite  parallel composite upload: each part a temporary object, composed
 *                     (<= 32 sources a call, temporaries for the levels between) onto the
 *                     object name with the precondition; every temporary deleted after.
 *   upload_resumable  one resumable session: begun with the precondition and the total size,
 *                     parts sent in order (each waits for its answer), the last finalizes.
 *   upload_single     one request at commit (JSON multipart/related): one part, kept until
 *                     then; nothing to remove when it fails.
 *
 * A session is one object's uploads, one after the other (begin ... commit or abort, then
 * begin again). Threads: the session's calls come from one thread at a time (the writer holds
 * its lock); they block (never call them from a gcs callback). The gcs callbacks of parts,
 * markers and deletes take only pool->lock, which also guards every part's state and the
 * counters below; its owner may guard fields of its own with it and wait on pool->drained (a
 * part's answer gives its buffer back: the writer's memory budget). Ownership: a session
 * copies the names it is given; upload_session_free aborts an open upload and waits for the
 * deletes it sent without waiting. */
#ifndef FLUXFS_UPLOAD_H
#define FLUXFS_UPLOAD_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "fluxfs/gcs.h"

/* What every upload of a mount shares. Embedded by its owner (the writers' shared state). */
struct upload_pool {
    struct gcs_client *client; /* immutable */
    GMutex lock;
    GCond drained;          /* broadcast when a part, a marker upload or a delete is answered */
    unsigned in_flight;     /* lock: parts in flight, every session */
    unsigned max_in_flight; /* immutable; 0 at init = 64 */
    guint64 unique;         /* atomic: temporary object names */
};
void upload_pool_init(struct upload_pool *pool, struct gcs_client *client, unsigned max_in_flight);
void upload_pool_clear(struct upload_pool *pool);

/* A part's buffer answered (its request done, well or not): the bytes are the caller's again.
 * Called with pool->lock held, on a gcs callback's thread or the caller's. */
typedef void (*upload_buffer_done_fn)(char *buffer, uint64_t len, void *user);

struct upload_session_config {
    const char *object_name;           /* what a commit makes */
    const char *tmp_prefix;            /* temporary objects ("<prefix>.fluxfs/tmp/<mount id>/") */
    unsigned max_parts_in_flight;      /* parallel protocols, this session; 0 = 16 */
    upload_buffer_done_fn buffer_done; /* may be NULL when no part gets a buffer */
    void *buffer_user;
};

struct upload_session;
struct upload_session *upload_session_new(struct upload_pool *pool,
                                          const struct upload_session_config *config);
void upload_session_free(struct upload_session *session); /* accepts NULL */

struct upload_protocol;
extern const struct upload_protocol upload_multipart;
extern const struct upload_protocol upload_composite;
extern const struct upload_protocol upload_resumable;
extern const struct upload_protocol upload_single;
const char *upload_protocol_name(const struct upload_protocol *protocol);

struct upload_begin_args {
    const struct gcs_write_attrs *attrs;       /* multipart, resumable: stored at begin */
    const struct gcs_write_preconditions *pre; /* resumable: applies at its last part */
    int64_t total_size;                        /* resumable: < 0 = not known */
    bool readable;                             /* multipart: through a temporary object */
};
/* 0, or the protocol's error (nothing open then; multipart: -ENOSYS when the server has no
 * XML API). -EBUSY when an upload is open already. */
int upload_begin(struct upload_session *session, const struct upload_protocol *protocol,
                 const struct upload_begin_args *args);
/* Whether an upload is open (begun, neither committed nor aborted). */
bool upload_is_open(struct upload_session *session);
unsigned upload_part_count(struct upload_session *session);

/* The next part: body->len bytes that go at offset of the object (parts in order, each
 * following the last), body->has_crc32c set. The body's bytes are read when the request
 * goes: they must stay valid until the part is answered (parallel protocols) or the upload
 * ends. buffer (parallel protocols only; NULL = none): the memory body->data points into,
 * taken by the part and given to config.buffer_done when the part is answered. A parallel
 * protocol first waits for room (this session's and the pool's caps); its part's failure
 * shows at upload_commit. 0, or the error of a part sent at once (resumable). */
int upload_append(struct upload_session *session, uint64_t offset, const struct gcs_body *body,
                  char *buffer);

/* Waits for the parts, then makes the object (attrs and pre apply where the protocol
 * applies them: resumable took them at begin; multipart's attrs are begin's); the upload
 * ends, and what it made besides the object is removed. 0 with *out (optional) set, or the
 * first failed part's error, or the completion's (-ESTALE: the precondition failed). */
int upload_commit(struct upload_session *session, const struct gcs_write_attrs *attrs,
                  const struct gcs_write_preconditions *pre, struct gcs_object *out);
/* Waits for the parts and removes what the upload made. No-op when nothing is open. */
void upload_abort(struct upload_session *session);

/* Copies len bytes at 0 of object name (generation pinned, object_size bytes) to dest. */
typedef int (*upload_fetch_fn)(const char *name, int64_t generation, uint64_t object_size,
                               uint64_t dest, uint64_t len, void *user);
/* Waits for the parts and hands back the bytes they hold, in pieces, to fetch: the temporary
 * part objects (composite), or the temporary object, completed (multipart with readable).
 * The upload stays open (it can only be aborted after). 0, the first failed part's error, or
 * fetch's; -EOPNOTSUPP for a protocol whose parts cannot be read. */
int upload_read_back(struct upload_session *session, upload_fetch_fn fetch, void *user);

#endif
