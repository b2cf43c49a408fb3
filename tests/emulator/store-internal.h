/* Internals shared by the emulator core's files (content.c, store.c, list.c, persist.c) and its
 * unit tests; the server uses store.h only.
 *
 * Contents are trees of immutable, reference-counted nodes: leaves are memory (a GBytes slice),
 * synthetic (a key and a start offset) or a file range (a path; the file is removed when the
 * last reference goes and the owning persist area is still live), inner nodes concatenate.
 * Concatenations flatten nested concatenations while the leaf count stays small, so a read
 * finds its segment with one binary search. */
#ifndef EMU_STORE_INTERNAL_H
#define EMU_STORE_INTERNAL_H

#include "store.h"

enum emu_content_kind {
    EMU_CONTENT_BYTES,
    EMU_CONTENT_SYNTH,
    EMU_CONTENT_FILE,
    EMU_CONTENT_CONCAT,
};

/* Shared by file contents of one data directory: while live is set, the last unref of a file
 * content deletes its file; emu_store_close clears it so shutdown keeps the data. */
struct emu_file_owner {
    gint refcount;
    gint live;
};

struct emu_content {
    gint refcount;
    enum emu_content_kind kind;
    uint64_t size;
    gint crc_known; /* set (release) after crc32c is stored */
    uint32_t crc32c;
    union {
        struct {
            GBytes *bytes;
            const uint8_t *data;
        } mem;
        struct {
            uint64_t key;
            uint64_t start; /* offset of this content's first byte in the synthetic stream */
        } synth;
        struct {
            char *path;
            uint64_t start;
            struct emu_file_owner *owner; /* NULL: never delete the file */
            gint fd; /* atomic: descriptor kept open for reads, -1 until the first read */
        } file;
        struct {
            int count;
            struct emu_content **parts; /* never concats once flattened, never empty */
            uint64_t *starts;           /* starts[i] = offset of parts[i]; ascending */
        } concat;
    } u;
};

/* A concatenation keeps at most this many leaves flat; above it, nested concats stay nested. */
#define EMU_CONCAT_FLATTEN_MAX 4096
/* Cloud Storage's object size limit (5 TiB). */
#define EMU_MAX_OBJECT_SIZE (5ull << 40)

/* File content: bytes [start, start + size) of path. owner may be NULL; a reference is taken. */
struct emu_content *emu_content_new_file(const char *path, uint64_t start, uint64_t size,
                                         struct emu_file_owner *owner);
/* Synthetic content from a raw key and stream offset (persisted descriptions). */
struct emu_content *emu_content_new_synth_key(uint64_t key, uint64_t start, uint64_t size);
/* Records a crc32c known from elsewhere (compose, a sidecar) so it is never recomputed. */
void emu_content_set_crc32c(struct emu_content *content, uint32_t crc32c);
/* MD5 of all bytes (OpenSSL EVP). Returns 0 or -EIO. */
int emu_content_md5(const struct emu_content *content, uint8_t out[16]);
/* Calls fn for each leaf in order; stops early when fn returns non-zero and returns that. */
typedef int (*emu_content_leaf_fn)(const struct emu_content *leaf, void *data);
int emu_content_foreach_leaf(const struct emu_content *content, emu_content_leaf_fn fn, void *data);

struct emu_file_owner *emu_file_owner_new(void);
struct emu_file_owner *emu_file_owner_ref(struct emu_file_owner *owner);
void emu_file_owner_unref(struct emu_file_owner *owner);

/* --- the store --- */

struct emu_persist; /* persist.c: the data directory */

struct emu_bucket {
    char *name;
    int64_t time_created_us;
    int64_t metageneration;
    int64_t updated_us;
    struct emu_bucket_config config;
    GTree *objects;      /* obj->name (strcmp order) -> struct emu_object * (the tree owns a ref) */
    GPtrArray *archived; /* struct emu_archived_info *: noncurrent and soft-deleted versions */
    GTree *folders;      /* hierarchical namespace: name ("a/b/") -> struct emu_folder_info * */
};

/* Storage over time: bytes held per class and state, integrated at every change. */
struct emu_ledger {
    int64_t started_us;
    int64_t last_us;
    double byte_us[EMU_STORAGE_CLASS_COUNT][EMU_STATE_COUNT];
    uint64_t bytes[EMU_STORAGE_CLASS_COUNT][EMU_STATE_COUNT];
    double early_byte_us[EMU_STORAGE_CLASS_COUNT];
};

struct emu_store {
    GRWLock lock;   /* protects buckets, last_generation and every bucket's tree */
    GTree *buckets; /* name -> struct emu_bucket * */
    int64_t last_generation;
    struct emu_persist *persist;   /* NULL: memory only */
    guint64 list_steps;            /* atomic: see emu_store_debug_list_steps */
    bool no_implicit_buckets;      /* writes into a missing bucket fail (-ENOENT) */
    int64_t default_soft_delete_s; /* of new buckets */
    gint64 clock_offset_us;        /* atomic: emu_store_advance_clock */
    struct emu_ledger ledger;      /* under the write lock */
    /* Long-running operations (folders.rename): how many operations.get of each answer
     * done=false first (0: every operation is done at once, the default); ops_lock. */
    GMutex ops_lock;
    unsigned operation_polls;
    GHashTable *operation_gets; /* operation id -> gets so far (GUINT_TO_POINTER) */
};

/* Finds a bucket; the caller holds the lock (write lock when create). */
struct emu_bucket *emu_store_find_bucket(struct emu_store *store, const char *name, bool create);

/* A new object (refcount 1) with every string copied into one allocation; metadata NULL means
 * none (a shared empty table), else a reference is taken; content's reference is taken over.
 * The caller fills the numeric fields. */
struct emu_object_strings {
    const char *bucket, *name, *content_type, *content_encoding, *cache_control,
        *content_disposition, *content_language, *storage_class;
};
struct emu_object *emu_object_alloc(const struct emu_object_strings *strings, GHashTable *metadata,
                                    struct emu_content *content);
/* Inserts a loaded object (persist.c at open): no preconditions, generation kept. */
void emu_store_insert_loaded(struct emu_store *store, struct emu_object *obj);
void emu_store_insert_loaded_bucket(struct emu_store *store, const char *name,
                                    int64_t time_created_us, int64_t metageneration);

/* --- persistence (persist.c); every function is a no-op success when persist is NULL --- */
int emu_persist_open(const char *dir, struct emu_persist **out);
/* Keeps the files: contents released after this do not delete theirs. Accepts NULL. */
void emu_persist_close(struct emu_persist *persist);
/* Loads buckets and objects into store (called by emu_store_open, store empty, no lock held),
 * then deletes data files no object refers to. */
int emu_persist_load(struct emu_persist *persist, struct emu_store *store);
/* Returns (new reference) a content with the same bytes whose memory leaves now live in files
 * of the data directory; called outside the store lock. *out = content ref when persist NULL. */
int emu_persist_materialise(struct emu_persist *persist, struct emu_content *content,
                            struct emu_content **out);
/* Atomically (write + rename) records obj as the live version of its name. Under the lock. */
int emu_persist_save_object(struct emu_persist *persist, const struct emu_object *obj);
int emu_persist_remove_object(struct emu_persist *persist, const char *bucket, const char *name);
int emu_persist_save_bucket(struct emu_persist *persist, const struct emu_bucket *bucket);
int emu_persist_remove_bucket(struct emu_persist *persist, const char *name);
/* Removes every record (reset); data files go when their contents are released. */
void emu_persist_reset(struct emu_persist *persist);

/* Object names as Cloud Storage accepts them: 1..1024 bytes of UTF-8, no CR or LF, not "." or
 * "..". */
bool emu_object_name_valid(const char *name);

/* Number of tree steps (seeks and node visits) all listings of this store have taken: lets the
 * tests assert that a page costs O(log N + page) without timing anything. */
uint64_t emu_store_debug_list_steps(struct emu_store *store);

/* Page tokens: a kind byte and the last emitted name, base64 (URL-safe). */
enum emu_token_kind {
    EMU_TOKEN_ITEM = 'I',     /* resume after this item name */
    EMU_TOKEN_PREFIX = 'P',   /* resume after every name under this prefix */
    EMU_TOKEN_TRAILING = 'T', /* this name was emitted as an item; its prefix is still due */
};
char *emu_page_token_encode(enum emu_token_kind kind, const char *name);
int emu_page_token_decode(const char *token, enum emu_token_kind *kind, char **name);

#endif
