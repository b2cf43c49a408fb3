/* The content cache: memory and disk LRU tiers of whole object bodies keyed by (name,
 * generation) (see include/fluxfs/content_cache.h for the rules and the on-disk format). */
#include "fluxfs/content_cache.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <glib.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"

#define CACHE_SUBDIR           "fluxfs-content-v1"
#define CACHE_MAGIC            "FLXCACH1"
#define CACHE_HEADER_SIZE      32 /* magic[8], length u64, crc32c u32, padding */
#define CACHE_MAX_DISK_ENTRIES (4u << 20)
/* Free space the disk tier leaves on its filesystem: 5% of it, within these bounds. */
#define CACHE_HEADROOM_MIN (UINT64_C(1) << 20)
#define CACHE_HEADROOM_MAX (UINT64_C(256) << 20)

struct content_block {
    gint refs; /* atomic */
    void *data;
    size_t bytes;
    content_block_free_fn free_fn;
    void *user;
    unsigned cached_entries; /* cache->lock: memory entries holding it */
};

/* An entry of either tier; `key` is the memory key or the disk file name. */
struct cache_entry {
    char *key;
    struct content_block *block; /* memory tier only: holds the body (a reference) */
    const char *data;            /* memory tier only: the body, inside block */
    uint64_t bytes;              /* body length (memory) or file length (disk) */
    GList *lru_link;             /* in the tier's LRU queue, head = most recent */
};

struct tier {
    GHashTable *index; /* key -> struct cache_entry * (owned) */
    GQueue lru;        /* struct cache_entry *, most recent first */
    uint64_t used;
    uint64_t cap;
};

struct content_cache {
    GMutex lock;
    GCond filled;                       /* a pending fill ended */
    struct content_cache_config config; /* immutable; strings below */
    char *dir;                          /* immutable: DIR/fluxfs-content-v1, NULL without disk */
    char *scope;                        /* immutable */
    struct tier memory;                 /* lock */
    struct tier disk;                   /* lock */
    GHashTable *pending;                /* lock: memory keys being filled */
    uint64_t temp_counter;              /* lock */
    struct content_cache_stats stats;   /* lock (the size fields are computed on demand) */
    bool drop_demoted;                  /* lock: content_cache_demote drops the entry */
    GHashTable *fills;                  /* lock: disk file name -> struct content_fill * */
    GHashTable *verified;               /* lock: large entries whose CRC32C was checked (names) */
    uint64_t headroom;                  /* immutable: free bytes left on the disk tier's fs */
    uint64_t disk_writing;              /* lock: bytes reserved by writes not indexed yet */
    bool disk_full_logged;              /* lock: "no room" said once, until a write succeeds */
};

struct content_block *content_block_new(void *data, size_t bytes, content_block_free_fn free_fn,
                                        void *user)
{
    struct content_block *block = g_new0(struct content_block, 1);
    block->refs = 1;
    block->data = data;
    block->bytes = bytes;
    block->free_fn = free_fn;
    block->user = user;
    return block;
}

struct content_block *content_block_ref(struct content_block *block)
{
    g_atomic_int_inc(&block->refs);
    return block;
}

void content_block_unref(struct content_block *block)
{
    if (!block || !g_atomic_int_dec_and_test(&block->refs))
        return;
    if (block->free_fn)
        block->free_fn(block->data, block->bytes, block->user);
    g_free(block);
}

static void entry_free(struct cache_entry *entry)
{
    if (!entry)
        return;
    g_free(entry->key);
    content_block_unref(entry->block);
    g_free(entry);
}

static void tier_init(struct tier *tier, uint64_t cap)
{
    tier->index = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, NULL);
    g_queue_init(&tier->lru);
    tier->used = 0;
    tier->cap = cap;
}

static void tier_clear(struct tier *tier)
{
    struct cache_entry *entry;
    while ((entry = g_queue_pop_head(&tier->lru)))
        entry_free(entry);
    g_hash_table_destroy(tier->index);
}

static void tier_add(struct tier *tier, struct cache_entry *entry)
{
    g_queue_push_head(&tier->lru, entry);
    entry->lru_link = tier->lru.head;
    g_hash_table_insert(tier->index, entry->key, entry);
    tier->used += entry->bytes;
}

static void tier_remove(struct tier *tier, struct cache_entry *entry)
{
    g_hash_table_remove(tier->index, entry->key);
    g_queue_delete_link(&tier->lru, entry->lru_link);
    tier->used -= entry->bytes;
}

static void tier_touch(struct tier *tier, struct cache_entry *entry)
{
    g_queue_unlink(&tier->lru, entry->lru_link);
    g_queue_push_head_link(&tier->lru, entry->lru_link);
}

static char *memory_key(const char *name, int64_t generation)
{
    return g_strdup_printf("%" PRId64 "/%s", generation, name);
}

static char *disk_file_name(const struct content_cache *cache, const char *name, int64_t generation)
{
    char *scoped = g_strconcat(cache->scope, "\n", name, NULL);
    char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, scoped, -1);
    char *file = g_strdup_printf("%s-%" PRId64, digest, generation);
    g_free(digest);
    g_free(scoped);
    return file;
}

static char *disk_path(const struct content_cache *cache, const char *file)
{
    return g_build_filename(cache->dir, file, NULL);
}

/* The memory tier counts blocks, not entries: pieces of one composite share its buffer, which
 * is held (and counted in `used`) while any of them is cached. Lock held. */
static void memory_add_locked(struct content_cache *cache, struct cache_entry *entry)
{
    g_queue_push_head(&cache->memory.lru, entry);
    entry->lru_link = cache->memory.lru.head;
    g_hash_table_insert(cache->memory.index, entry->key, entry);
    if (entry->block->cached_entries++ == 0)
        cache->memory.used += entry->block->bytes;
}

/* Drops one memory entry (its block's memory goes back to the budget with the block's last
 * reference). Lock held. */
static void memory_drop_locked(struct content_cache *cache, struct cache_entry *victim)
{
    g_hash_table_remove(cache->memory.index, victim->key);
    g_queue_delete_link(&cache->memory.lru, victim->lru_link);
    if (--victim->block->cached_entries == 0)
        cache->memory.used -= victim->block->bytes;
    cache->stats.evictions++;
    entry_free(victim);
}

/* Drops the memory tier's least recently used entries until `block` (needed bytes more when
 * none of its entries is cached yet) fits under the cap. Lock held. */
static void memory_evict_locked(struct content_cache *cache, const struct content_block *block)
{
    while (cache->memory.used + (block->cached_entries ? 0 : block->bytes) > cache->memory.cap &&
           cache->memory.lru.tail)
        memory_drop_locked(cache, cache->memory.lru.tail->data);
}

static void budget_block_free(void *data, size_t bytes, void *user)
{
    g_free(data);
    membudget_release(user, bytes);
}

/* Drops the disk tier's least recently used files until `needed` more bytes fit; the paths
 * of the files to unlink go into doomed (unlinked by the caller without the lock). */
static void disk_evict_locked(struct content_cache *cache, uint64_t needed, GPtrArray *doomed)
{
    while ((cache->disk.used + needed > cache->disk.cap ||
            g_hash_table_size(cache->disk.index) >= CACHE_MAX_DISK_ENTRIES) &&
           cache->disk.lru.tail) {
        struct cache_entry *victim = cache->disk.lru.tail->data;
        tier_remove(&cache->disk, victim);
        cache->stats.evictions++;
        g_ptr_array_add(doomed, disk_path(cache, victim->key));
        entry_free(victim);
    }
}

/* Free bytes on the disk tier's filesystem for an unprivileged writer; false when unknown. */
static bool disk_free_bytes(const struct content_cache *cache, uint64_t *free_bytes,
                            uint64_t *total_bytes)
{
    struct statvfs info;
    if (statvfs(cache->dir, &info) < 0)
        return false;
    *free_bytes = (uint64_t)info.f_bavail * info.f_frsize;
    if (total_bytes)
        *total_bytes = (uint64_t)info.f_blocks * info.f_frsize;
    return true;
}

/* Drops least recently used files until at least `amount` bytes are given back (or none is
 * left): the filesystem is short of space although the cap is not reached. */
static void disk_evict_bytes_locked(struct content_cache *cache, uint64_t amount, GPtrArray *doomed)
{
    uint64_t freed = 0;
    while (freed < amount && cache->disk.lru.tail) {
        struct cache_entry *victim = cache->disk.lru.tail->data;
        tier_remove(&cache->disk, victim);
        cache->stats.evictions++;
        freed += victim->bytes;
        g_ptr_array_add(doomed, disk_path(cache, victim->key));
        entry_free(victim);
    }
}

static void unlink_all(GPtrArray *paths)
{
    for (guint i = 0; i < paths->len; i++)
        unlink(g_ptr_array_index(paths, i));
    g_ptr_array_free(paths, TRUE);
}

/* Makes room for a file of `bytes` before it is written: evicts for the cap, then for the
 * free space of the filesystem (keeping the headroom, and counting what other writes under
 * way still take). On success the bytes stay reserved (disk_writing) until disk_release;
 * -ENOSPC when even an empty cache would not leave room (nothing reserved, logged once). */
static int disk_reserve(struct content_cache *cache, uint64_t bytes)
{
    uint64_t free_bytes = 0;
    bool known = disk_free_bytes(cache, &free_bytes, NULL);
    GPtrArray *doomed = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&cache->lock);
    disk_evict_locked(cache, bytes + cache->disk_writing, doomed);
    uint64_t wanted = bytes + cache->disk_writing + cache->headroom;
    uint64_t releasable = cache->disk.used;
    int rc = 0;
    if (known && free_bytes < wanted) {
        if (free_bytes + releasable < wanted)
            rc = -ENOSPC; /* other data fill the filesystem: keep what we have */
        else
            disk_evict_bytes_locked(cache, wanted - free_bytes, doomed);
    }
    bool say = rc < 0 && !cache->disk_full_logged;
    if (rc < 0)
        cache->disk_full_logged = true;
    else
        cache->disk_writing += bytes;
    g_mutex_unlock(&cache->lock);
    unlink_all(doomed);
    if (say)
        flog_warn("cache",
                  "disk cache %s: its filesystem is nearly full (%" PRIu64
                  " bytes free); not caching until there is room",
                  cache->dir, free_bytes);
    return rc;
}

/* Ends a reservation (lock held); `written` when the file is now an entry. */
static void disk_release_locked(struct content_cache *cache, uint64_t bytes, bool written)
{
    assert(cache->disk_writing >= bytes);
    cache->disk_writing -= bytes;
    if (written)
        cache->disk_full_logged = false;
}

/* After ENOSPC although the reservation saw room (other writers, block rounding): gives back
 * `bytes` and the headroom from the least recently used files, for one more try. */
static void disk_evict_after_enospc(struct content_cache *cache, uint64_t bytes)
{
    GPtrArray *doomed = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&cache->lock);
    disk_evict_bytes_locked(cache, bytes + cache->headroom, doomed);
    g_mutex_unlock(&cache->lock);
    unlink_all(doomed);
}

struct scanned_file {
    char *name;
    uint64_t bytes;
    int64_t used_ns;
};

static gint compare_scanned_newest_first(gconstpointer a, gconstpointer b)
{
    const struct scanned_file *fa = a, *fb = b;
    return fa->used_ns < fb->used_ns ? 1 : fa->used_ns > fb->used_ns ? -1 : 0;
}

/* Indexes the files a previous mount left, most recently used first (mtime is refreshed on
 * every hit); leftovers of interrupted writes are removed. */
static int disk_scan(struct content_cache *cache)
{
    DIR *dir = opendir(cache->dir);
    if (!dir)
        return -errno;
    GArray *files = g_array_new(FALSE, FALSE, sizeof(struct scanned_file));
    struct dirent *item;
    while ((item = readdir(dir))) {
        if (item->d_name[0] == '.')
            continue;
        char *path = disk_path(cache, item->d_name);
        struct stat info;
        if (g_str_has_prefix(item->d_name, "tmp-")) {
            unlink(path);
        } else if (stat(path, &info) == 0 && S_ISREG(info.st_mode) &&
                   info.st_size >= CACHE_HEADER_SIZE) {
            struct scanned_file file = {
                .name = g_strdup(item->d_name),
                .bytes = (uint64_t)info.st_size,
                .used_ns = (int64_t)info.st_mtim.tv_sec * 1000000000 + info.st_mtim.tv_nsec,
            };
            g_array_append_val(files, file);
        }
        g_free(path);
    }
    closedir(dir);
    g_array_sort(files, compare_scanned_newest_first);
    GPtrArray *doomed = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < files->len; i++) {
        struct scanned_file *file = &g_array_index(files, struct scanned_file, i);
        if (cache->disk.used + file->bytes > cache->disk.cap) {
            g_ptr_array_add(doomed, disk_path(cache, file->name));
            g_free(file->name);
            continue;
        }
        struct cache_entry *entry = g_new0(struct cache_entry, 1);
        entry->key = file->name;
        entry->bytes = file->bytes;
        /* Sorted newest first: appending at the tail keeps that order. */
        g_queue_push_tail(&cache->disk.lru, entry);
        entry->lru_link = cache->disk.lru.tail;
        g_hash_table_insert(cache->disk.index, entry->key, entry);
        cache->disk.used += entry->bytes;
    }
    g_array_free(files, TRUE);
    if (doomed->len > 0)
        flog_info("cache", "%u cached files over --cache-size removed", doomed->len);
    unlink_all(doomed);
    flog_info("cache", "disk cache %s: %u entries, %" PRIu64 " bytes reused", cache->dir,
              g_hash_table_size(cache->disk.index), cache->disk.used);
    return 0;
}

/* The disk tier can never hold more than its files plus the free space of its filesystem, less
 * a headroom: its cap comes down to that at start (writes check the free space again). */
static void disk_bound_by_filesystem(struct content_cache *cache)
{
    uint64_t free_bytes, total_bytes;
    if (!disk_free_bytes(cache, &free_bytes, &total_bytes))
        return;
    cache->headroom = CLAMP(total_bytes / 20, CACHE_HEADROOM_MIN, CACHE_HEADROOM_MAX);
    uint64_t room = free_bytes > cache->headroom ? free_bytes - cache->headroom : 0;
    uint64_t bound = cache->disk.used + room;
    if (bound < cache->disk.cap) {
        flog_info("cache",
                  "disk cache %s: limited to %" PRIu64 " bytes by the free space of its "
                  "filesystem (--cache-size %" PRIu64 ")",
                  cache->dir, bound, cache->disk.cap);
        cache->disk.cap = bound;
    }
}

int content_cache_new(const struct content_cache_config *config, struct content_cache **out)
{
    struct content_cache *cache = g_new0(struct content_cache, 1);
    g_mutex_init(&cache->lock);
    g_cond_init(&cache->filled);
    cache->config = *config;
    if (cache->config.max_object_size == 0)
        cache->config.max_object_size = 64u << 20;
    if (!cache->config.budget)
        cache->config.memory_bytes = 0;
    cache->scope = g_strdup(config->scope ? config->scope : "");
    cache->config.scope = cache->scope;
    tier_init(&cache->memory, cache->config.memory_bytes);
    tier_init(&cache->disk, config->disk_bytes ? config->disk_bytes : (UINT64_C(10) << 30));
    cache->pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    cache->fills = g_hash_table_new(g_str_hash, g_str_equal);
    cache->verified = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    cache->config.dir = NULL;
    if (config->dir) {
        cache->dir = g_build_filename(config->dir, CACHE_SUBDIR, NULL);
        cache->config.dir = cache->dir;
        int rc = 0;
        if (g_mkdir_with_parents(cache->dir, 0700) < 0)
            rc = -errno;
        if (rc == 0)
            rc = disk_scan(cache);
        if (rc == 0)
            disk_bound_by_filesystem(cache);
        if (rc < 0) {
            content_cache_free(cache);
            return rc;
        }
    }
    *out = cache;
    return 0;
}

void content_cache_free(struct content_cache *cache)
{
    if (!cache)
        return;
    while (cache->memory.lru.tail)
        memory_drop_locked(cache, cache->memory.lru.tail->data);
    tier_clear(&cache->memory);
    tier_clear(&cache->disk);
    g_hash_table_destroy(cache->pending);
    g_hash_table_destroy(cache->fills); /* every fill holds... none outlives its readers */
    g_hash_table_destroy(cache->verified);
    g_free(cache->dir);
    g_free(cache->scope);
    g_cond_clear(&cache->filled);
    g_mutex_clear(&cache->lock);
    g_free(cache);
}

/* Puts a copy into the memory tier when the cap and the budget allow. Lock held. */
static bool memory_insert_locked(struct content_cache *cache, const char *key, const void *data,
                                 size_t len)
{
    if (cache->memory.cap == 0 || len > cache->memory.cap)
        return false;
    if (g_hash_table_contains(cache->memory.index, key))
        return true;
    struct content_block sized = {.bytes = len};
    memory_evict_locked(cache, &sized);
    bool admitted =
        membudget_try_acquire_reserving(cache->config.budget, len, cache->config.reserve);
    while (!admitted && cache->memory.lru.tail) {
        /* The budget is short: give back our own oldest entries before refusing. */
        memory_drop_locked(cache, cache->memory.lru.tail->data);
        admitted =
            membudget_try_acquire_reserving(cache->config.budget, len, cache->config.reserve);
    }
    if (!admitted)
        return false;
    void *copy = g_try_malloc(len ? len : 1);
    if (!copy) {
        membudget_release(cache->config.budget, len);
        return false;
    }
    memcpy(copy, data, len);
    struct cache_entry *entry = g_new0(struct cache_entry, 1);
    entry->key = g_strdup(key);
    entry->block = content_block_new(copy, len, budget_block_free, cache->config.budget);
    entry->data = copy;
    entry->bytes = len;
    memory_add_locked(cache, entry);
    return true;
}

/* Puts a reference to block's bytes [offset, offset + len) into the memory tier when the cap
 * allows (the block's memory is charged to the budget already). Lock held. */
static bool memory_insert_block_locked(struct content_cache *cache, const char *key,
                                       struct content_block *block, size_t offset, size_t len)
{
    if (g_hash_table_contains(cache->memory.index, key))
        return true;
    memory_evict_locked(cache, block);
    if (cache->memory.used + (block->cached_entries ? 0 : block->bytes) > cache->memory.cap)
        return false;
    struct cache_entry *entry = g_new0(struct cache_entry, 1);
    entry->key = g_strdup(key);
    entry->block = content_block_ref(block);
    entry->data = (const char *)block->data + offset;
    entry->bytes = len;
    memory_add_locked(cache, entry);
    return true;
}

static int write_all_fd(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes the body to a new cache file (temporary name, then rename). */
static int disk_insert(struct content_cache *cache, const char *file, const void *data, size_t len)
{
    g_mutex_lock(&cache->lock);
    bool present = g_hash_table_contains(cache->disk.index, file);
    uint64_t counter = ++cache->temp_counter;
    g_mutex_unlock(&cache->lock);
    if (present)
        return 0;
    uint64_t bytes = CACHE_HEADER_SIZE + len;
    if (disk_reserve(cache, bytes) < 0)
        return -ENOSPC;
    char *temp_name = g_strdup_printf("tmp-%d-%" PRIu64, (int)getpid(), counter);
    char *temp_path = disk_path(cache, temp_name);
    char *final_path = disk_path(cache, file);
    g_free(temp_name);
    unsigned char header[CACHE_HEADER_SIZE];
    memset(header, 0, sizeof(header));
    memcpy(header, CACHE_MAGIC, 8);
    uint64_t length = len;
    uint32_t crc = crc32c_update(0, data, len);
    memcpy(header + 8, &length, sizeof(length));
    memcpy(header + 16, &crc, sizeof(crc));
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            rc = -errno;
        } else {
            rc = write_all_fd(fd, header, sizeof(header));
            if (rc == 0)
                rc = write_all_fd(fd, data, len);
            if (close(fd) < 0 && rc == 0)
                rc = -errno;
        }
        if (rc == 0 && rename(temp_path, final_path) < 0)
            rc = -errno;
        if (rc == 0)
            break;
        unlink(temp_path);
        if ((rc != -ENOSPC && rc != -EDQUOT) || attempt > 0)
            break;
        disk_evict_after_enospc(cache, bytes); /* and once more */
    }
    if (rc < 0) {
        g_mutex_lock(&cache->lock);
        disk_release_locked(cache, bytes, false);
        bool no_space = rc == -ENOSPC || rc == -EDQUOT;
        bool say = !no_space || !cache->disk_full_logged;
        if (no_space)
            cache->disk_full_logged = true;
        g_mutex_unlock(&cache->lock);
        if (say)
            flog_warn("cache", "cannot write cache file %s: %s", final_path, g_strerror(-rc));
    } else {
        GPtrArray *doomed = g_ptr_array_new_with_free_func(g_free);
        g_mutex_lock(&cache->lock);
        disk_release_locked(cache, bytes, true);
        if (!g_hash_table_contains(cache->disk.index, file)) {
            /* (Present: another writer's identical bytes, replaced by the rename.) */
            disk_evict_locked(cache, bytes, doomed);
            struct cache_entry *entry = g_new0(struct cache_entry, 1);
            entry->key = g_strdup(file);
            entry->bytes = bytes;
            tier_add(&cache->disk, entry);
        }
        g_mutex_unlock(&cache->lock);
        unlink_all(doomed);
    }
    g_free(temp_path);
    g_free(final_path);
    return rc;
}

/* After a memory-tier insert: the disk tier's copy, when there is one that fits. 0 when the
 * object went into either tier. */
static int insert_disk_tier(struct content_cache *cache, const char *name, int64_t generation,
                            const void *data, size_t len, bool in_memory)
{
    int rc = in_memory ? 0 : -ENOSPC;
    if (cache->dir && len + CACHE_HEADER_SIZE <= cache->disk.cap) {
        char *file = disk_file_name(cache, name, generation);
        rc = disk_insert(cache, file, data, len);
        g_free(file);
    }
    return in_memory ? 0 : rc;
}

int content_cache_insert_block(struct content_cache *cache, const char *name, int64_t generation,
                               struct content_block *block, size_t offset, size_t len)
{
    /* A block much larger than the memory tier would evict most of it: copy the piece. */
    if (len > cache->config.max_object_size || block->bytes > cache->memory.cap / 4 ||
        offset + len > block->bytes)
        return content_cache_insert(cache, name, generation, (char *)block->data + offset, len);
    char *key = memory_key(name, generation);
    g_mutex_lock(&cache->lock);
    bool in_memory = memory_insert_block_locked(cache, key, block, offset, len);
    cache->stats.inserts++;
    g_mutex_unlock(&cache->lock);
    g_free(key);
    return insert_disk_tier(cache, name, generation, (char *)block->data + offset, len, in_memory);
}

int content_cache_insert(struct content_cache *cache, const char *name, int64_t generation,
                         const void *data, size_t len)
{
    if (len > cache->config.max_object_size)
        return -EFBIG;
    char *key = memory_key(name, generation);
    g_mutex_lock(&cache->lock);
    bool in_memory = memory_insert_locked(cache, key, data, len);
    cache->stats.inserts++;
    g_mutex_unlock(&cache->lock);
    g_free(key);
    return insert_disk_tier(cache, name, generation, data, len, in_memory);
}

/* Reads and checks one cache file; 0 when its body is exactly size bytes with a matching CRC,
 * -ENOENT when it is gone, -EIO when it is damaged. */
static int disk_read(const char *path, uint64_t size, void *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -ENOENT;
    unsigned char header[CACHE_HEADER_SIZE];
    int rc = -EIO;
    if (pread(fd, header, sizeof(header), 0) == (ssize_t)sizeof(header) &&
        memcmp(header, CACHE_MAGIC, 8) == 0) {
        uint64_t length;
        uint32_t crc;
        memcpy(&length, header + 8, sizeof(length));
        memcpy(&crc, header + 16, sizeof(crc));
        if (length == size) {
            size_t done = 0;
            while (done < size) {
                ssize_t n =
                    pread(fd, (char *)buf + done, size - done, (off_t)(CACHE_HEADER_SIZE + done));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0)
                    break;
                done += (size_t)n;
            }
            if (done == size && crc32c_update(0, buf, size) == crc)
                rc = 0;
        }
    }
    if (rc == 0)
        futimens(fd, NULL); /* mtime orders the LRU after a remount */
    close(fd);
    return rc;
}

static int read_once(struct content_cache *cache, const char *key, const char *name,
                     int64_t generation, uint64_t size, void *buf)
{
    g_mutex_lock(&cache->lock);
    struct cache_entry *entry = g_hash_table_lookup(cache->memory.index, key);
    if (entry && entry->bytes == size) {
        tier_touch(&cache->memory, entry);
        cache->stats.memory_hits++;
        /* The reference keeps the bytes while they are copied outside the lock. */
        struct content_block *block = content_block_ref(entry->block);
        const char *data = entry->data;
        g_mutex_unlock(&cache->lock);
        memcpy(buf, data, size);
        content_block_unref(block);
        return 0;
    }
    g_mutex_unlock(&cache->lock);
    if (!cache->dir)
        return -ENOENT;

    char *file = disk_file_name(cache, name, generation);
    g_mutex_lock(&cache->lock);
    entry = g_hash_table_lookup(cache->disk.index, file);
    bool on_disk = entry && entry->bytes == CACHE_HEADER_SIZE + size;
    if (on_disk)
        tier_touch(&cache->disk, entry);
    g_mutex_unlock(&cache->lock);
    int rc = -ENOENT;
    if (on_disk) {
        char *path = disk_path(cache, file);
        rc = disk_read(path, size, buf);
        g_mutex_lock(&cache->lock);
        if (rc == 0) {
            cache->stats.disk_hits++;
            memory_insert_locked(cache, key, buf, size);
        } else if (rc == -EIO) {
            cache->stats.corrupt_files++;
            entry = g_hash_table_lookup(cache->disk.index, file);
            if (entry) {
                tier_remove(&cache->disk, entry);
                entry_free(entry);
            }
            unlink(path);
            flog_warn("cache",
                      "cache file for '%s' generation %" PRId64 " failed its check; "
                      "removed",
                      name, generation);
            rc = -ENOENT;
        }
        g_mutex_unlock(&cache->lock);
        g_free(path);
    }
    g_free(file);
    return rc;
}

/* Waits up to wait_ms while a fill of key is pending; true if it was. Lock not held. */
static bool wait_pending(struct content_cache *cache, const char *key, int wait_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)wait_ms * 1000;
    bool waited = false;
    g_mutex_lock(&cache->lock);
    while (g_hash_table_contains(cache->pending, key)) {
        waited = true;
        if (!g_cond_wait_until(&cache->filled, &cache->lock, deadline))
            break;
    }
    if (waited)
        cache->stats.pending_waits++;
    g_mutex_unlock(&cache->lock);
    return waited;
}

int content_cache_read(struct content_cache *cache, const char *name, int64_t generation,
                       uint64_t size, void *buf, int wait_ms)
{
    char *key = memory_key(name, generation);
    int rc = read_once(cache, key, name, generation, size, buf);
    if (rc == -ENOENT && wait_ms > 0 && wait_pending(cache, key, wait_ms))
        rc = read_once(cache, key, name, generation, size, buf);
    if (rc == -ENOENT) {
        g_mutex_lock(&cache->lock);
        cache->stats.misses++;
        g_mutex_unlock(&cache->lock);
    }
    g_free(key);
    return rc;
}

static int borrow_once(struct content_cache *cache, const char *key, uint64_t size,
                       struct content_block **block, const void **data)
{
    g_mutex_lock(&cache->lock);
    struct cache_entry *entry = g_hash_table_lookup(cache->memory.index, key);
    if (!entry || entry->bytes != size) {
        g_mutex_unlock(&cache->lock);
        return -ENOENT;
    }
    tier_touch(&cache->memory, entry);
    cache->stats.memory_hits++;
    *block = content_block_ref(entry->block);
    *data = entry->data;
    g_mutex_unlock(&cache->lock);
    return 0;
}

int content_cache_borrow(struct content_cache *cache, const char *name, int64_t generation,
                         uint64_t size, int wait_ms, struct content_block **block,
                         const void **data)
{
    char *key = memory_key(name, generation);
    int rc = borrow_once(cache, key, size, block, data);
    if (rc == -ENOENT && wait_ms > 0) {
        wait_pending(cache, key, wait_ms);
        rc = borrow_once(cache, key, size, block, data);
    }
    g_free(key);
    return rc;
}

bool content_cache_contains(struct content_cache *cache, const char *name, int64_t generation)
{
    char *key = memory_key(name, generation);
    char *file = cache->dir ? disk_file_name(cache, name, generation) : NULL;
    g_mutex_lock(&cache->lock);
    bool found = g_hash_table_contains(cache->memory.index, key) ||
                 (file && g_hash_table_contains(cache->disk.index, file));
    g_mutex_unlock(&cache->lock);
    g_free(file);
    g_free(key);
    return found;
}

bool content_cache_mark_pending(struct content_cache *cache, const char *name, int64_t generation)
{
    if (content_cache_contains(cache, name, generation))
        return false;
    char *key = memory_key(name, generation);
    g_mutex_lock(&cache->lock);
    bool marked = !g_hash_table_contains(cache->pending, key);
    if (marked)
        g_hash_table_add(cache->pending, key);
    g_mutex_unlock(&cache->lock);
    if (!marked)
        g_free(key);
    return marked;
}

void content_cache_clear_pending(struct content_cache *cache, const char *name, int64_t generation)
{
    char *key = memory_key(name, generation);
    g_mutex_lock(&cache->lock);
    g_hash_table_remove(cache->pending, key);
    g_cond_broadcast(&cache->filled);
    g_mutex_unlock(&cache->lock);
    g_free(key);
}

void content_cache_demote(struct content_cache *cache, const char *name, int64_t generation)
{
    char *key = memory_key(name, generation);
    g_mutex_lock(&cache->lock);
    struct cache_entry *entry = g_hash_table_lookup(cache->memory.index, key);
    if (entry && cache->drop_demoted) {
        memory_drop_locked(cache, entry);
        cache->stats.evictions--; /* not for lack of room */
        cache->stats.dropped_stored++;
    } else if (entry) {
        g_queue_unlink(&cache->memory.lru, entry->lru_link);
        g_queue_push_tail_link(&cache->memory.lru, entry->lru_link);
    }
    g_mutex_unlock(&cache->lock);
    g_free(key);
}

void content_cache_set_drop_demoted(struct content_cache *cache, bool drop)
{
    g_mutex_lock(&cache->lock);
    cache->drop_demoted = drop;
    g_mutex_unlock(&cache->lock);
}

/* ---- large objects ---------------------------------------------------------------------- */

G_STATIC_ASSERT(CONTENT_CACHE_BODY_OFFSET == CACHE_HEADER_SIZE);

/* A run of bytes the fill has, [start, end), with their CRC32C. */
struct fill_range {
    uint64_t start, end;
    uint32_t crc;
};

struct content_fill {
    struct content_cache *cache;
    unsigned refs; /* cache->lock */
    GMutex lock;   /* the fields below */
    char *file;    /* the entry's file name (also the key in cache->fills) */
    char *temp_path;
    int fd; /* -1 once committed or given up */
    uint64_t size;
    bool has_crc32c;
    uint32_t crc32c;
    GArray *ranges;    /* struct fill_range, sorted, disjoint, touching ones merged */
    uint64_t reserved; /* cache->lock: bytes held in cache->disk_writing (0 = none) */
};

/* CRC32C of the whole file body, read back (the first open of a large entry in a process). */
static int file_body_crc(int fd, uint64_t size, uint32_t *crc)
{
    enum { CHUNK = 1 << 20 };
    char *buf = g_malloc(CHUNK);
    uint32_t value = 0;
    uint64_t done = 0;
    int rc = 0;
    while (done < size && rc == 0) {
        size_t want = (size_t)MIN((uint64_t)CHUNK, size - done);
        ssize_t n = pread(fd, buf, want, (off_t)(CACHE_HEADER_SIZE + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = -EIO;
        else {
            value = crc32c_update(value, buf, (size_t)n);
            done += (uint64_t)n;
        }
    }
    g_free(buf);
    *crc = value;
    return rc;
}

int content_cache_large_open(struct content_cache *cache, const char *name, int64_t generation,
                             uint64_t size, int *out_fd)
{
    if (!cache->dir)
        return -ENOENT;
    char *file = disk_file_name(cache, name, generation);
    g_mutex_lock(&cache->lock);
    struct cache_entry *entry = g_hash_table_lookup(cache->disk.index, file);
    bool present = entry && entry->bytes == CACHE_HEADER_SIZE + size;
    bool verified = present && g_hash_table_contains(cache->verified, file);
    if (present)
        tier_touch(&cache->disk, entry);
    g_mutex_unlock(&cache->lock);
    if (!present) {
        g_free(file);
        return -ENOENT;
    }
    char *path = disk_path(cache, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd < 0 ? -ENOENT : 0;
    unsigned char header[CACHE_HEADER_SIZE];
    uint64_t length = 0;
    uint32_t crc = 0, actual = 0;
    if (rc == 0) {
        if (pread(fd, header, sizeof(header), 0) != (ssize_t)sizeof(header) ||
            memcmp(header, CACHE_MAGIC, 8) != 0)
            rc = -EIO;
        memcpy(&length, header + 8, sizeof(length));
        memcpy(&crc, header + 16, sizeof(crc));
        if (rc == 0 && length != size)
            rc = -EIO;
        if (rc == 0 && !verified && (file_body_crc(fd, size, &actual) < 0 || actual != crc))
            rc = -EIO;
    }
    g_mutex_lock(&cache->lock);
    if (rc == 0) {
        cache->stats.large_hits++;
        if (!verified)
            g_hash_table_add(cache->verified, g_strdup(file));
    } else if (rc == -EIO) {
        cache->stats.corrupt_files++;
        entry = g_hash_table_lookup(cache->disk.index, file);
        if (entry) {
            tier_remove(&cache->disk, entry);
            entry_free(entry);
        }
        unlink(path);
        flog_warn("cache",
                  "cache file for '%s' generation %" PRId64 " failed its check; "
                  "removed",
                  name, generation);
    }
    g_mutex_unlock(&cache->lock);
    if (rc == 0) {
        futimens(fd, NULL); /* mtime orders the LRU after a remount */
        *out_fd = fd;
    } else if (fd >= 0) {
        close(fd);
    }
    g_free(path);
    g_free(file);
    return rc == 0 ? 0 : -ENOENT;
}

struct content_fill *content_cache_fill_begin(struct content_cache *cache, const char *name,
                                              int64_t generation, uint64_t size, bool has_crc32c,
                                              uint32_t crc32c)
{
    if (!cache->dir || size == 0 || size + CACHE_HEADER_SIZE > cache->disk.cap)
        return NULL;
    char *file = disk_file_name(cache, name, generation);
    g_mutex_lock(&cache->lock);
    struct content_fill *fill = g_hash_table_lookup(cache->fills, file);
    if (fill || g_hash_table_contains(cache->disk.index, file)) {
        if (fill)
            fill->refs++;
        g_mutex_unlock(&cache->lock);
        g_free(file);
        return fill;
    }
    uint64_t counter = ++cache->temp_counter;
    g_mutex_unlock(&cache->lock);
    uint64_t reserved = CACHE_HEADER_SIZE + size;
    if (disk_reserve(cache, reserved) < 0) {
        g_free(file);
        return NULL;
    }
    char *temp_name = g_strdup_printf("tmp-%d-%" PRIu64, (int)getpid(), counter);
    char *temp_path = disk_path(cache, temp_name);
    g_free(temp_name);
    int fd = open(temp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        flog_warn("cache", "cannot create a cache file in %s: %s", cache->dir, g_strerror(errno));
        g_mutex_lock(&cache->lock);
        disk_release_locked(cache, reserved, false);
        g_mutex_unlock(&cache->lock);
        g_free(temp_path);
        g_free(file);
        return NULL;
    }
    fill = g_new0(struct content_fill, 1);
    fill->cache = cache;
    fill->refs = 1;
    g_mutex_init(&fill->lock);
    fill->file = file;
    fill->temp_path = temp_path;
    fill->fd = fd;
    fill->size = size;
    fill->has_crc32c = has_crc32c;
    fill->crc32c = crc32c;
    fill->ranges = g_array_new(FALSE, FALSE, sizeof(struct fill_range));
    fill->reserved = reserved;
    g_mutex_lock(&cache->lock);
    struct content_fill *raced = g_hash_table_lookup(cache->fills, file);
    if (raced) {
        raced->refs++;
        disk_release_locked(cache, reserved, false);
        g_mutex_unlock(&cache->lock);
        close(fd);
        unlink(temp_path);
        g_array_free(fill->ranges, TRUE);
        g_mutex_clear(&fill->lock);
        g_free(fill->temp_path);
        g_free(fill->file);
        g_free(fill);
        return raced;
    }
    g_hash_table_insert(cache->fills, fill->file, fill);
    g_mutex_unlock(&cache->lock);
    return fill;
}

struct content_fill *content_fill_ref(struct content_fill *fill)
{
    g_mutex_lock(&fill->cache->lock);
    fill->refs++;
    g_mutex_unlock(&fill->cache->lock);
    return fill;
}

/* Gives up a fill (fill lock held): its file goes, it takes no more bytes. */
static void fill_abandon_locked(struct content_fill *fill, const char *why)
{
    if (fill->fd < 0)
        return;
    close(fill->fd);
    fill->fd = -1;
    unlink(fill->temp_path);
    g_mutex_lock(&fill->cache->lock);
    fill->cache->stats.large_abandoned++;
    disk_release_locked(fill->cache, fill->reserved, false);
    fill->reserved = 0;
    g_mutex_unlock(&fill->cache->lock);
    if (why)
        flog_warn("cache", "large object not cached: %s", why);
}

/* Every byte is there: header, rename, index (fill lock held). */
static void fill_commit_locked(struct content_fill *fill, uint32_t crc)
{
    struct content_cache *cache = fill->cache;
    if (fill->has_crc32c && crc != fill->crc32c) {
        fill_abandon_locked(fill, "the bytes read did not match the object's CRC32C");
        return;
    }
    unsigned char header[CACHE_HEADER_SIZE];
    memset(header, 0, sizeof(header));
    memcpy(header, CACHE_MAGIC, 8);
    memcpy(header + 8, &fill->size, sizeof(fill->size));
    memcpy(header + 16, &crc, sizeof(crc));
    char *final_path = disk_path(cache, fill->file);
    int rc = pwrite(fill->fd, header, sizeof(header), 0) == (ssize_t)sizeof(header) ? 0 : -EIO;
    if (close(fill->fd) < 0 && rc == 0)
        rc = -errno;
    fill->fd = -1;
    if (rc == 0 && rename(fill->temp_path, final_path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(fill->temp_path);
        flog_warn("cache", "cannot write cache file %s: %s", final_path, g_strerror(-rc));
        g_mutex_lock(&cache->lock);
        cache->stats.large_abandoned++;
        disk_release_locked(cache, fill->reserved, false);
        fill->reserved = 0;
        g_mutex_unlock(&cache->lock);
        g_free(final_path);
        return;
    }
    GPtrArray *doomed = g_ptr_array_new_with_free_func(g_free);
    uint64_t bytes = CACHE_HEADER_SIZE + fill->size;
    g_mutex_lock(&cache->lock);
    disk_release_locked(cache, fill->reserved, true);
    fill->reserved = 0;
    if (!g_hash_table_contains(cache->disk.index, fill->file)) {
        disk_evict_locked(cache, bytes, doomed);
        struct cache_entry *entry = g_new0(struct cache_entry, 1);
        entry->key = g_strdup(fill->file);
        entry->bytes = bytes;
        tier_add(&cache->disk, entry);
        g_hash_table_add(cache->verified, g_strdup(fill->file)); /* its CRC was just checked */
    }
    cache->stats.large_fills++;
    g_mutex_unlock(&cache->lock);
    unlink_all(doomed);
    g_free(final_path);
}

/* Writes piece bytes [from, to) (object offsets; the piece starts at `offset`) to the file and
 * returns their CRC32C. */
static int fill_write(struct content_fill *fill, uint64_t offset, const struct iovec *iov,
                      int count, uint64_t from, uint64_t to, uint32_t *crc)
{
    uint32_t value = 0;
    uint64_t at = offset;
    for (int i = 0; i < count && at < to; i++) {
        uint64_t part_end = at + iov[i].iov_len;
        uint64_t a = MAX(at, from), b = MIN(part_end, to);
        if (a < b) {
            const char *data = (const char *)iov[i].iov_base + (a - at);
            size_t len = (size_t)(b - a);
            value = crc32c_update(value, data, len);
            size_t done = 0;
            bool evicted = false;
            while (done < len) {
                ssize_t n = pwrite(fill->fd, data + done, len - done,
                                   (off_t)(CACHE_HEADER_SIZE + a + done));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0 && (errno == ENOSPC || errno == EDQUOT) && !evicted) {
                    evicted = true; /* make room once, then give up */
                    disk_evict_after_enospc(fill->cache, len - done);
                    continue;
                }
                if (n <= 0)
                    return n < 0 ? -errno : -EIO;
                done += (size_t)n;
            }
        }
        at = part_end;
    }
    *crc = value;
    return 0;
}

void content_fill_add(struct content_fill *fill, uint64_t offset, const struct iovec *iov,
                      int count)
{
    uint64_t total = 0;
    for (int i = 0; i < count; i++)
        total += iov[i].iov_len;
    g_mutex_lock(&fill->lock);
    uint64_t end = MIN(offset + total, fill->size);
    /* The gaps of [offset, end) between the runs the fill has, each written and added. */
    uint64_t cursor = offset;
    guint i = 0;
    while (cursor < end && fill->fd >= 0) {
        while (i < fill->ranges->len &&
               g_array_index(fill->ranges, struct fill_range, i).end <= cursor)
            i++;
        bool has_next = i < fill->ranges->len;
        uint64_t next_start =
            has_next ? g_array_index(fill->ranges, struct fill_range, i).start : UINT64_MAX;
        uint64_t next_end = has_next ? g_array_index(fill->ranges, struct fill_range, i).end : 0;
        uint64_t gap_end = MIN(end, next_start);
        if (cursor < gap_end) {
            struct fill_range added = {.start = cursor, .end = gap_end};
            int rc = fill_write(fill, offset, iov, count, cursor, gap_end, &added.crc);
            if (rc < 0) {
                fill_abandon_locked(fill, g_strerror(-rc));
                break;
            }
            g_array_insert_val(fill->ranges, i, added);
            i++; /* the run that was next moved one up */
        }
        if (!has_next)
            break;
        cursor = MAX(cursor, next_end);
    }
    /* Touching runs become one: their CRC32Cs combine. */
    for (guint k = 1; k < fill->ranges->len;) {
        struct fill_range *a = &g_array_index(fill->ranges, struct fill_range, k - 1);
        struct fill_range *b = &g_array_index(fill->ranges, struct fill_range, k);
        if (a->end == b->start) {
            a->crc = crc32c_combine(a->crc, b->crc, b->end - b->start);
            a->end = b->end;
            g_array_remove_index(fill->ranges, k);
        } else {
            k++;
        }
    }
    if (fill->fd >= 0 && fill->ranges->len == 1) {
        const struct fill_range *all = &g_array_index(fill->ranges, struct fill_range, 0);
        if (all->start == 0 && all->end == fill->size)
            fill_commit_locked(fill, all->crc);
    }
    g_mutex_unlock(&fill->lock);
}

void content_fill_unref(struct content_fill *fill)
{
    if (!fill)
        return;
    struct content_cache *cache = fill->cache;
    g_mutex_lock(&cache->lock);
    bool last = --fill->refs == 0;
    if (last)
        g_hash_table_remove(cache->fills, fill->file);
    g_mutex_unlock(&cache->lock);
    if (!last)
        return;
    g_mutex_lock(&fill->lock);
    fill_abandon_locked(fill, NULL); /* not read to the end: nothing kept */
    g_mutex_unlock(&fill->lock);
    g_array_free(fill->ranges, TRUE);
    g_mutex_clear(&fill->lock);
    g_free(fill->temp_path);
    g_free(fill->file);
    g_free(fill);
}

uint64_t content_cache_capacity(struct content_cache *cache)
{
    uint64_t disk = cache->dir ? cache->disk.cap : 0;
    return MAX(disk, (uint64_t)cache->memory.cap);
}

void content_cache_get_stats(struct content_cache *cache, struct content_cache_stats *out)
{
    g_mutex_lock(&cache->lock);
    *out = cache->stats;
    out->memory_used = (size_t)cache->memory.used;
    out->disk_used = cache->disk.used;
    out->memory_entries = g_hash_table_size(cache->memory.index);
    out->disk_entries = g_hash_table_size(cache->disk.index);
    g_mutex_unlock(&cache->lock);
}
