/* Upload sessions of the emulator: JSON API resumable uploads and XML API multipart uploads.
 * Received bytes stay as separate content segments (one per chunk or part) and are published
 * through the store as one concatenation, without copying.
 *
 * Threading: every function is thread-safe (a registry lock plus one lock per session).
 * Sessions are found by their id; bucket and name given with an id must match the session's. */
#ifndef EMU_UPLOADS_H
#define EMU_UPLOADS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

#define EMU_RESUMABLE_UNIT     (256u * 1024u) /* non-final chunks persist whole units of this */
#define EMU_MPU_MIN_PART       (5u * 1024u * 1024u)
#define EMU_MPU_MAX_PARTS      10000
#define EMU_UPLOADS_MAX_ACTIVE 100000 /* sessions in progress (each holds memory) */

struct emu_uploads;

struct emu_uploads *emu_uploads_new(void);
void emu_uploads_free(struct emu_uploads *uploads); /* accepts NULL */
/* Drops every session (POST /_emulator/reset). */
void emu_uploads_reset(struct emu_uploads *uploads);

/* Deep copy of object attributes (strings and metadata duplicated); free with attrs_clear. */
void emu_attrs_copy(struct emu_object_attrs *dst, const struct emu_object_attrs *src);
void emu_attrs_clear(struct emu_object_attrs *attrs);

/* --- Content-Range of resumable chunks: "bytes A-B/T" or "bytes A-B/" followed by "*";
 *     the status-query forms put "*" in place of A-B. --- */
struct emu_content_range {
    bool has_range; /* false for the "*" forms (status query) */
    uint64_t first;
    uint64_t last; /* inclusive */
    bool has_total;
    uint64_t total;
};
/* 0 or -EINVAL (out untouched on error). */
int emu_parse_content_range(const char *header, struct emu_content_range *out);

/* --- resumable uploads --- */

/* Creates a session; returns its id (g_free) or NULL when too many sessions are active. */
char *emu_resumable_create(struct emu_uploads *uploads, const char *bucket, const char *name,
                           const struct emu_object_attrs *attrs,
                           const struct emu_preconditions *pre);

struct emu_resumable_status {
    bool done;          /* finalized: object is set (a reference) */
    uint64_t persisted; /* bytes persisted so far (when not done) */
    struct emu_object *object;
};

/* Applies one chunk PUT (range NULL = the whole object in one request). Bytes before the
 * persisted offset are skipped; a non-final chunk persists only whole 256 KiB units of its
 * length (the odd tail is dropped, and the persisted offset says so); a request
 * whose total is reached finalizes via the store (its errors are returned: -EPROTO 412, ...).
 * Returns 0 with *out filled, -ENOENT (no such session), -EINVAL (inconsistent range, body or
 * total; *message says why), or a store error. Takes ownership of body. */
int emu_resumable_put(struct emu_uploads *uploads, struct emu_store *store, const char *id,
                      const struct emu_content_range *range, GBytes *body,
                      struct emu_resumable_status *out, const char **message);
/* Cancels and forgets a session: 0 or -ENOENT. */
int emu_resumable_cancel(struct emu_uploads *uploads, const char *id);

/* --- XML multipart uploads --- */

enum emu_mpu_error {
    EMU_MPU_OK = 0,
    EMU_MPU_NO_SUCH_UPLOAD,   /* 404 NoSuchUpload */
    EMU_MPU_INVALID_PART,     /* 400 InvalidPart: missing part or ETag mismatch */
    EMU_MPU_INVALID_ORDER,    /* 400 InvalidPartOrder */
    EMU_MPU_TOO_SMALL,        /* 400 EntityTooSmall */
    EMU_MPU_INVALID_ARGUMENT, /* 400 InvalidArgument: bad part number, no parts, ... */
    EMU_MPU_STORE_ERROR,      /* see the errno returned with it */
};

struct emu_mpu_part_info {
    int number;
    uint64_t size;
    char etag[35]; /* "\"<md5 hex>\"" */
    uint32_t crc32c;
    uint8_t md5[16];
    int64_t uploaded_us;
};

char *emu_mpu_create(struct emu_uploads *uploads, const char *bucket, const char *name,
                     const struct emu_object_attrs *attrs);
/* Stores part number (1..10000), replacing an earlier upload of it; takes ownership of data.
 * known_crc32c (may be NULL): data's CRC32C when the caller has computed it already. */
enum emu_mpu_error emu_mpu_put_part(struct emu_uploads *uploads, const char *id, const char *bucket,
                                    const char *name, int number, GBytes *data,
                                    const uint32_t *known_crc32c, struct emu_mpu_part_info *out);

struct emu_mpu_complete_part {
    int number;
    const char *etag; /* quotes optional */
};
/* Publishes the listed parts (ascending, ETags matching, all but the last >= 5 MiB) as one
 * object; on success the session is gone. *err is the store errno for EMU_MPU_STORE_ERROR. */
enum emu_mpu_error emu_mpu_complete(struct emu_uploads *uploads, struct emu_store *store,
                                    const char *id, const char *bucket, const char *name,
                                    const struct emu_mpu_complete_part *parts, size_t count,
                                    const struct emu_preconditions *pre, struct emu_object **out,
                                    int *err);
enum emu_mpu_error emu_mpu_abort(struct emu_uploads *uploads, const char *id, const char *bucket,
                                 const char *name);
/* Fills parts (GArray of emu_mpu_part_info, ascending). */
enum emu_mpu_error emu_mpu_list_parts(struct emu_uploads *uploads, const char *id,
                                      const char *bucket, const char *name, GArray *parts);

/* One multipart upload in progress (ListMultipartUploads). */
struct emu_mpu_upload_info {
    char *name; /* g_free */
    char *id;   /* g_free */
    int64_t initiated_us;
};
/* Multipart uploads in progress in bucket whose names start with prefix (NULL = all), sorted by
 * name, then by initiation time and id. Returns a GArray of emu_mpu_upload_info; free it with
 * emu_mpu_upload_list_free. */
GArray *emu_mpu_list_uploads(struct emu_uploads *uploads, const char *bucket, const char *prefix);
void emu_mpu_upload_list_free(GArray *list);

/* "\"<hex md5>\"" of a part or a whole object. */
void emu_format_etag(const uint8_t md5[16], char out[35]);

#endif
