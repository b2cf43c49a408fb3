/* The emulator's object store: buckets, objects, generations, preconditions, listing, compose
 * and synthetic content. Pure logic, no HTTP: the server (server.c and the api_*.c files)
 * translates requests into these calls and results into Cloud Storage's JSON/XML replies.
 *
 * Threading: every function here is safe to call from any thread (one store lock inside;
 * content reads run outside it because contents are immutable and reference counted).
 *
 * Ownership: functions that return a struct emu_object * return a new reference; release it
 * with emu_object_unref(). An object is immutable once published: an overwrite publishes a new
 * object (new generation) and readers holding the old one keep reading old bytes. Metadata
 * changes (patch) also publish a new object struct with metageneration + 1.
 *
 * Errors are negative errno values, mapped by the server to Cloud Storage statuses:
 *   -ENOENT   404 (no such bucket / object / generation)
 *   -EEXIST   409 (bucket already exists)
 *   -EINVAL   400 (bad argument: bad name, too many compose sources, ...)
 *   -EPROTO   412 (a precondition failed)
 *   -EALREADY 304 (a read-side ifGenerationNotMatch/ifMetagenerationNotMatch did not match;
 *                  only emu_store_get_object returns it, and only when for_read is true)
 *   -ERANGE   416 (unsatisfiable range)
 *   -EFBIG    413 (object too large)
 *   -EIO      500 (persistence failure)
 *   -ENOTEMPTY 409 (bucket not empty: emu_store_bucket_delete only; added)
 *   -EPERM    403 (the live object is under a temporary or event-based hold: it cannot be
 *                  deleted or overwritten)
 */
#ifndef EMU_STORE_H
#define EMU_STORE_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct emu_store;
struct emu_content; /* immutable byte sequence: segments of memory, synthetic or on-disk data */

/* One object version. Read-only after publication. */
struct emu_object {
    char *bucket;
    char *name;             /* UTF-8, 1..1024 bytes */
    int64_t generation;     /* > 0, strictly increasing per bucket over time */
    int64_t metageneration; /* starts at 1 */
    uint64_t size;
    int64_t time_created_us; /* microseconds since the epoch */
    int64_t updated_us;
    uint32_t crc32c;
    bool has_md5; /* composites have no md5 */
    uint8_t md5[16];
    int component_count; /* 0 unless composed; then the sum of the sources' counts (min 1 each) */
    char *content_type;  /* never NULL; default "application/octet-stream" */
    char *content_encoding;    /* may be NULL */
    char *cache_control;       /* may be NULL */
    char *content_disposition; /* may be NULL */
    char *content_language;    /* may be NULL */
    char *storage_class;       /* "STANDARD" unless set */
    GHashTable *metadata;      /* custom metadata, char* -> char*, may be empty, never NULL */
    int64_t custom_time_us;    /* customTime, microseconds since the epoch; 0 = not set */
    bool temporary_hold;       /* a held object cannot be deleted or overwritten (-EPERM) */
    bool event_based_hold;
    struct emu_content *content;
    gint refcount;
};

struct emu_object *emu_object_ref(struct emu_object *obj);
/* A copy of obj's resource (every attribute, size included) without its bytes: what a finished
 * upload session answers with, which must not keep a deleted object's bytes alive. */
struct emu_object *emu_object_metadata_only(const struct emu_object *obj);
void emu_object_unref(struct emu_object *obj); /* accepts NULL */

/* Copies up to len bytes starting at offset into buf; returns the number copied (0 at or past
 * the end). Works for every kind of content (memory, synthetic, disk). Thread-safe. */
size_t emu_object_read(const struct emu_object *obj, uint64_t offset, void *buf, size_t len);

/* Generation/metageneration preconditions, each optional (has_* false = absent). */
struct emu_preconditions {
    bool has_if_generation_match;
    int64_t if_generation_match; /* 0 = the object must not exist */
    bool has_if_generation_not_match;
    int64_t if_generation_not_match;
    bool has_if_metageneration_match;
    int64_t if_metageneration_match;
    bool has_if_metageneration_not_match;
    int64_t if_metageneration_not_match;
};

/* Checks conditions against the live object (NULL when absent). Returns 0, -EPROTO (412), or,
 * when for_read, -EALREADY for the *_not_match cases (304 on reads per Cloud Storage). */
int emu_preconditions_check(const struct emu_preconditions *pre, const struct emu_object *live,
                            bool for_read);

/* --- store lifecycle --- */

/* data_dir NULL: memory only. Otherwise objects persist there and are loaded at open. */
int emu_store_open(const char *data_dir, struct emu_store **out);
void emu_store_close(struct emu_store *store); /* accepts NULL */
/* Drops every bucket and object (POST /_emulator/reset). */
void emu_store_reset(struct emu_store *store);
/* Whether writes (put, compose, copy) into a bucket that does not exist create it: on by default
 * (convenient for the core's unit tests); off, they fail with -ENOENT as Cloud Storage answers
 * 404. The server turns it off. */
void emu_store_set_implicit_buckets(struct emu_store *store, bool on);

/* --- buckets (created implicitly on first use by the other calls when auto_create) --- */

/* Cloud Storage's storage classes (MULTI_REGIONAL, REGIONAL and DURABLE_REDUCED_AVAILABILITY
 * count as STANDARD), and the states an object version is billed in. */
enum emu_storage_class {
    EMU_STORAGE_STANDARD,
    EMU_STORAGE_NEARLINE,
    EMU_STORAGE_COLDLINE,
    EMU_STORAGE_ARCHIVE,
    EMU_STORAGE_CLASS_COUNT
};
enum emu_object_state {
    EMU_STATE_LIVE,
    EMU_STATE_NONCURRENT,   /* an older generation kept by versioning */
    EMU_STATE_SOFT_DELETED, /* deleted or overwritten, kept while the soft delete policy holds */
    EMU_STATE_COUNT
};
/* -1 for a name that is no storage class. */
int emu_storage_class_parse(const char *name);
const char *emu_storage_class_name(enum emu_storage_class cls);
const char *emu_object_state_name(enum emu_object_state state);
/* Minimum storage duration of a class in seconds (0, 30, 90, 365 days). */
int64_t emu_storage_class_minimum_s(enum emu_storage_class cls);

/* A bucket's configuration, as buckets.insert/patch/update set it and buckets.get shows it. */
struct emu_bucket_config {
    char storage_class[16];      /* canonical name, default "STANDARD" */
    char location[32];           /* upper case, default "US" */
    char location_type[16];      /* "multi-region", "dual-region" or "region" */
    int64_t soft_delete_seconds; /* 0 = off; the store's default for new buckets */
    int64_t soft_delete_effective_us;
    bool versioning;
    int64_t retention_seconds; /* 0 = no retention policy */
    int64_t retention_effective_us;
    bool default_event_based_hold;
    bool hierarchical_namespace; /* fixed at creation */
    bool autoclass;
    int64_t autoclass_toggle_us;
};

struct emu_bucket_info {
    char *name;
    int64_t time_created_us;
    int64_t metageneration;
    int64_t updated_us;
    struct emu_bucket_config config;
};
void emu_bucket_info_clear(struct emu_bucket_info *info);

int emu_store_bucket_insert(struct emu_store *store, const char *bucket); /* -EEXIST if exists */
/* The configuration a bucket created now gets by default. */
void emu_store_bucket_config_defaults(struct emu_store *store, struct emu_bucket_config *out);
/* buckets.insert with a configuration (NULL = the defaults). -EEXIST if it exists. */
int emu_store_bucket_insert_config(struct emu_store *store, const char *bucket,
                                   const struct emu_bucket_config *config);
/* Replaces the configuration (patch/update build it from buckets.get's), metageneration + 1;
 * has_if_metageneration_match: -EPROTO (412) on a mismatch. Effective times are stamped here
 * when a policy changes. */
int emu_store_bucket_configure(struct emu_store *store, const char *bucket,
                               const struct emu_bucket_config *config,
                               bool has_if_metageneration_match, int64_t if_metageneration_match,
                               struct emu_bucket_info *out);
/* Soft delete retention of buckets created from now on (Cloud Storage's default: 7 days). */
int64_t emu_store_bucket_config_defaults_soft_delete(struct emu_store *store);
void emu_store_set_default_soft_delete(struct emu_store *store, int64_t seconds);
/* The store's clock (soft delete expiry, retention periods, the ledger): real time plus what
 * emu_store_advance_clock added, so tests can pass days without waiting. */
int64_t emu_store_now_us(struct emu_store *store);
void emu_store_advance_clock(struct emu_store *store, int64_t us);
/* Long-running operations (folders.rename) answer done=false at their start and for the first
 * `polls` operations.get of each (the config's operation_polls; 0, the default: done at once,
 * as before). The work itself is done at the start either way (all or nothing under the store
 * lock): only what the operation reports is delayed, so a client's polling is exercised.
 * emu_store_operation_poll: started = the rename's own reply; returns whether to say done. */
void emu_store_set_operation_polls(struct emu_store *store, unsigned polls);
unsigned emu_store_operation_polls(struct emu_store *store);
bool emu_store_operation_poll(struct emu_store *store, const char *id, bool started);
/* What emu_store_advance_clock added so far (exact: not a difference of two clock readings). */
int64_t emu_store_clock_offset_us(struct emu_store *store);
int emu_store_bucket_get(struct emu_store *store, const char *bucket, struct emu_bucket_info *out);
/* Added: deletes an empty bucket. -ENOENT when absent, -ENOTEMPTY when it holds objects. */
int emu_store_bucket_delete(struct emu_store *store, const char *bucket);
/* Returns every bucket, sorted by name: GPtrArray of struct emu_bucket_info * (free func set). */
GPtrArray *emu_store_bucket_list(struct emu_store *store);

/* --- object metadata given on writes ---
 * Strings: NULL = absent (a new object gets the default, a patch keeps the old value); ""
 * = cleared (the default again). */
struct emu_object_attrs {
    const char *content_type;     /* NULL = default */
    const char *content_encoding; /* NULL = none */
    const char *cache_control;
    const char *content_disposition;
    const char *content_language;
    const char *storage_class;
    GHashTable *metadata;    /* NULL = none; copied */
    bool has_custom_time;    /* customTime given: custom_time_us (0 = JSON null) */
    int64_t custom_time_us;  /* once set it can only move later (-EINVAL otherwise) */
    bool has_temporary_hold; /* given: temporary_hold; absent: false for new objects,
                              * unchanged on patch */
    bool temporary_hold;
    bool has_event_based_hold;
    bool event_based_hold;
    bool has_crc32c; /* client-supplied checksum to verify: mismatch -> -EBADMSG (400) */
    uint32_t crc32c;
    bool has_md5;
    uint8_t md5[16];
    bool no_md5;            /* added: publish without md5 (XML multipart uploads, as
                             * Cloud Storage does); skips hashing the bytes. Put only. */
    bool checksums_trusted; /* added: has_crc32c/has_md5 were computed by the server
                             * from the received bytes (e.g. per upload chunk); put takes
                             * them as they are instead of reading the bytes again
                             * (md5 costs ~1.4 s/GiB). Put only. */
};

/* --- objects --- */

/* Live object (generation 0) or a given generation: the live one or a noncurrent version kept
 * by versioning (soft-deleted versions only through emu_store_get_soft_deleted). */
int emu_store_get_object(struct emu_store *store, const char *bucket, const char *name,
                         int64_t generation, const struct emu_preconditions *pre, bool for_read,
                         struct emu_object **out);

/* Publishes data as a new object version. Takes ownership of content (also on error).
 * Preconditions are evaluated atomically with publication. */
int emu_store_put_object(struct emu_store *store, const char *bucket, const char *name,
                         struct emu_content *content, const struct emu_object_attrs *attrs,
                         const struct emu_preconditions *pre, struct emu_object **out);

int emu_store_delete_object(struct emu_store *store, const char *bucket, const char *name,
                            int64_t generation, const struct emu_preconditions *pre);

/* Patch: for each non-NULL field in attrs, set it; metadata keys with NULL value are removed
 * (JSON null), others set; clear_metadata drops all custom metadata first (update semantics).
 * Publishes metageneration + 1 with the same generation and content. */
int emu_store_patch_object(struct emu_store *store, const char *bucket, const char *name,
                           int64_t generation, const struct emu_object_attrs *attrs,
                           bool clear_metadata, const struct emu_preconditions *pre,
                           struct emu_object **out);

struct emu_compose_source {
    const char *name;
    int64_t generation; /* 0 = live */
    bool has_if_generation_match;
    int64_t if_generation_match;
};
/* 1..32 sources in the same bucket; the result's crc32c is combined without reading bytes and
 * component_count is summed. Source problems: -ENOENT (404), precondition -EPROTO (412). */
int emu_store_compose(struct emu_store *store, const char *bucket, const char *dest_name,
                      const struct emu_compose_source *sources, int source_count,
                      const struct emu_object_attrs *attrs,
                      const struct emu_preconditions *dest_pre, struct emu_object **out);

/* copyTo / rewriteTo: publishes a copy (shares content; new generation) at dest.
 * src_pre are the ifSource* preconditions, dest_pre the destination's. attrs NULL = copy the
 * source's metadata, else use attrs (Cloud Storage: metadata in the body replaces). */
int emu_store_copy_object(struct emu_store *store, const char *src_bucket, const char *src_name,
                          int64_t src_generation, const char *dest_bucket, const char *dest_name,
                          const struct emu_object_attrs *attrs,
                          const struct emu_preconditions *src_pre,
                          const struct emu_preconditions *dest_pre, struct emu_object **out);

/* objects.move: renames src_name to dest_name in one bucket, atomically (under one lock hold):
 * the destination is a new generation with the source's metadata and bytes, the source is gone
 * without being soft-deleted or kept as noncurrent (Cloud Storage moves are not deletes).
 * -ENOENT, -EPERM/-EACCES (held or retained source), -EEXIST (same name), precondition errors. */
int emu_store_move_object(struct emu_store *store, const char *bucket, const char *src_name,
                          const char *dest_name, const struct emu_preconditions *src_pre,
                          const struct emu_preconditions *dest_pre, struct emu_object **out);

/* --- folders of buckets with a hierarchical namespace (folders.c semantics in store.c) ---
 * A folder's name ends with '/'. Writing an object a/b/c creates folders a/ and a/b/. */
struct emu_folder_info {
    char *name;
    int64_t metageneration;
    int64_t created_us;
    int64_t updated_us;
};
void emu_folder_info_free(struct emu_folder_info *info); /* accepts NULL */
/* -ENOENT (bucket, or parent without recursive), -EEXIST, -EINVAL (name), -EOPNOTSUPP (the
 * bucket has no hierarchical namespace). *out (may be NULL) is a copy. */
int emu_store_folder_insert(struct emu_store *store, const char *bucket, const char *name,
                            bool recursive, struct emu_folder_info **out);
int emu_store_folder_get(struct emu_store *store, const char *bucket, const char *name,
                         struct emu_folder_info **out);
/* Folders whose names start with prefix, in name order; with delimiter "/" only those directly
 * below prefix. *out: struct emu_folder_info * (free func set). */
int emu_store_folder_list(struct emu_store *store, const char *bucket, const char *prefix,
                          bool direct_children_only, GPtrArray **out);
/* -ENOTEMPTY when an object or a folder is below it. */
int emu_store_folder_delete(struct emu_store *store, const char *bucket, const char *name);
/* Renames the folder, its subfolders and every object below, atomically. -EEXIST when the
 * destination folder exists, -ENOENT when the source does not or the destination's parent is
 * missing, -EINVAL for a destination inside the source, -EPERM/-EACCES for a held object. */
int emu_store_folder_rename(struct emu_store *store, const char *bucket, const char *src,
                            const char *dest, struct emu_folder_info **out);

/* --- versions that are not live: noncurrent (versioning) and soft-deleted --- */
struct emu_archived_info {
    struct emu_object *obj; /* a reference */
    enum emu_object_state state;
    int64_t since_us;       /* when it stopped being live (timeDeleted / softDeleteTime) */
    int64_t hard_delete_us; /* soft-deleted: when it goes for good; else 0 */
};
void emu_archived_info_clear(struct emu_archived_info *info);
/* Versions of one state whose names start with prefix (NULL = all), ordered by name then
 * generation: GPtrArray of struct emu_archived_info * (free func set). -ENOENT: no bucket. */
int emu_store_list_archived(struct emu_store *store, const char *bucket, const char *prefix,
                            enum emu_object_state state, GPtrArray **out);
/* A soft-deleted version. -ENOENT when there is none (or it has expired). */
int emu_store_get_soft_deleted(struct emu_store *store, const char *bucket, const char *name,
                               int64_t generation, struct emu_archived_info *out);
/* objects.restore: publishes a soft-deleted version again as a new generation (the live one, if
 * any, is retired as an overwrite would retire it). -ENOENT, -EPROTO (preconditions), -EPERM. */
int emu_store_restore(struct emu_store *store, const char *bucket, const char *name,
                      int64_t generation, const struct emu_preconditions *pre,
                      struct emu_object **out);

/* --- the ledger: what storage has cost since the store opened (or was reset) --- */
struct emu_ledger_report {
    double byte_seconds[EMU_STORAGE_CLASS_COUNT][EMU_STATE_COUNT];
    uint64_t bytes_now[EMU_STORAGE_CLASS_COUNT][EMU_STATE_COUNT];
    /* Early deletion: bytes x seconds short of the class's minimum duration, charged when a
     * version is gone for good (a soft-deleted version counts until its hard delete). */
    double early_byte_seconds[EMU_STORAGE_CLASS_COUNT];
    double elapsed_seconds;
};
void emu_store_ledger(struct emu_store *store, struct emu_ledger_report *out);

/* --- listing: O(log N + page), never a walk of the bucket --- */
struct emu_list_request {
    const char *prefix;       /* NULL = "" */
    const char *delimiter;    /* NULL = none; any non-empty string */
    const char *start_offset; /* inclusive, NULL = none */
    const char *end_offset;   /* exclusive, NULL = none */
    const char *page_token;   /* opaque token from a previous emu_list_result, NULL = first page */
    unsigned max_results;     /* 1..1000; 0 means 1000 */
    bool include_trailing_delimiter; /* objects named PREFIX/ are also returned as items */
    const char *match_glob;          /* NULL = none; only names matching it (emu_glob_match) are
                                      * listed, and roll up into prefixes */
};
struct emu_list_result {
    GPtrArray *items;      /* struct emu_object * (new references; free func unrefs) */
    GPtrArray *prefixes;   /* char * (free func g_free), in order, no duplicates across pages */
    char *next_page_token; /* NULL on the last page */
};
/* Items and prefixes together count toward max_results and paginate as Cloud Storage does:
 * the merged sequence in name order, each prefix once. A bad page token -> -EINVAL; a bucket
 * that does not exist -> -ENOENT (listing does not create buckets). */
int emu_store_list(struct emu_store *store, const char *bucket, const struct emu_list_request *req,
                   struct emu_list_result *out);
void emu_list_result_clear(struct emu_list_result *res);

/* matchGlob, Cloud Storage's glob syntax over the whole object name (glob.c):
 *   *        any run of characters except '/'
 *   **       any run of characters including '/'; a ** that is a whole path segment also
 *            stands for no segment at all ("a/", "**", "/b" together match "a/b")
 *   ?        one character except '/'
 *   [abc] [a-z]       one character of the set; [!a-z] or [^a-z]: one not in it (never '/')
 *   {x,y}    either alternative (nestable, at most 64 alternatives in all)
 *   \ + c    the character c itself
 * Characters are UTF-8 code points. emu_glob_valid: 0, or -EINVAL for an unclosed '[' or
 * '{', a trailing backslash, invalid UTF-8, or a pattern over 1024 bytes. */
int emu_glob_valid(const char *pattern);
bool emu_glob_match(const char *pattern, const char *name);

/* --- content --- */

/* Memory content; takes ownership of bytes. */
struct emu_content *emu_content_new_bytes(GBytes *bytes);
/* The same, with the CRC32C of bytes the caller already computed (not computed again). */
struct emu_content *emu_content_new_bytes_crc32c(GBytes *bytes, uint32_t crc32c);
/* Deterministic synthetic content (see synth.h) of the given size; no memory per byte. */
struct emu_content *emu_content_new_synthetic(const char *name, int64_t generation, uint64_t seed,
                                              uint64_t size);
/* Concatenation; takes references to the parts (used by compose, multipart complete, resumable
 * finalize): no byte copies. */
struct emu_content *emu_content_new_concat(struct emu_content *const *parts, int count);
struct emu_content *emu_content_ref(struct emu_content *content);
void emu_content_unref(struct emu_content *content); /* accepts NULL */
uint64_t emu_content_size(const struct emu_content *content);
size_t emu_content_read(const struct emu_content *content, uint64_t offset, void *buf, size_t len);
uint32_t emu_content_crc32c(struct emu_content *content); /* computed once, cached */

/* --- populate (--populate BUCKET/PREFIX:COUNT:SIZE[:SEED]) --- */
/* Inserts count synthetic objects named PREFIX + index formatted "%08u" (e.g. "train/00000042"),
 * each of size bytes. Their crc32c is computed (hardware CRC: fast); md5 lazily or not at all
 * (has_md5 false is acceptable for synthetic objects). */
int emu_store_populate(struct emu_store *store, const char *bucket, const char *prefix,
                       uint64_t count, uint64_t size, uint64_t seed);

/* --- Range header --- */
/* Parses a single-range "bytes=A-B", "bytes=A-", "bytes=-N" against size. Returns 0 with the
 * inclusive [*first, *last], -ERANGE when unsatisfiable (416), -EINVAL when the header is not
 * a single byte range (Cloud Storage then ignores it and serves the whole object: the server
 * does that). */
int emu_parse_range(const char *header, uint64_t size, uint64_t *first, uint64_t *last);

#endif
