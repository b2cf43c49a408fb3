/* Reads of one open file: whole small objects, readahead windows of ranged GETs for large
 * ones, all buffers admitted by the global budget (see include/fluxfs/reader.h). */
#include "fluxfs/reader.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/readahead.h"

enum chunk_state { CHUNK_PENDING, CHUNK_READY, CHUNK_FAILED };

#define READER_SERVED_KEEP_CHUNKS 2 /* chunks served whole kept for the kernel's re-reads */

/* How long a demand read waits for a prefetch batch already fetching its object. */
#define READER_CACHE_WAIT_MS 10000
/* Served ranges kept (beyond the verified prefix) while waiting for the gap before them to be
 * served; more means the file is read at random and the end-to-end check is given up. */
#define READER_CRC_MAX_PIECES 256

/* A range [start, end) of the object served to the kernel, with its CRC32C. */
struct crc_piece {
    uint64_t start;
    uint64_t end;
    uint32_t crc;
};

/* Served bytes are tracked per granule of this size (a page: kernel reads are page-aligned). */
#define SERVED_GRANULE 4096u
/* Cap on the extents remembered as served and let go (a random reader leaves many): past it
 * the lowest are forgotten, so fetching those again goes uncounted. */
#define READER_DROPPED_MAX_EXTENTS 1024u

/* A pool sweeps readers nobody uses and that hold no bytes once it has more entries. */
#define POOL_SWEEP_ENTRIES 256

/* A byte range [start, end). */
struct extent {
    uint64_t start, end;
};

/* One buffered byte range [offset, offset + len) of the object. Chunks of one reader never
 * overlap. All fields except the immutable ones are protected by the reader's lock. */
struct chunk {
    struct reader *reader; /* immutable */
    uint64_t offset;       /* immutable */
    size_t len;            /* immutable */
    void *buf;             /* immutable pointer; written by the request, then read-only */
    enum chunk_state state;
    size_t got;       /* bytes present (short at the end of the object) */
    int err;          /* CHUNK_FAILED: the request's error */
    unsigned pins;    /* readers copying out of buf or waiting for it */
    unsigned waiters; /* readers blocked in gather_locked until it completes */
    GCond done;       /* broadcast on completion when waiters > 0 (a completion wakes
                         only the reads that need this chunk, not every read) */
    gint64 last_used_us;
    enum metrics_read_type read_type; /* immutable: Random when fetched for a read (or the
                                         skips after it) that readahead judged random */
    /* Which granules of the chunk went to a reply (the kernel's page cache has them unless
     * the handle was O_DIRECT): a chunk served whole is dropped, one not served yet (shared
     * readahead, another handle's random fetch) stays until memory is needed. */
    guint8 *served;
    size_t granules;
    size_t served_count;
};

struct reader {
    GMutex lock;
    GCond changed;                     /* the last request in flight completed */
    struct gcs_client *client;         /* immutable, not owned */
    struct membudget *budget;          /* immutable, not owned */
    struct reader_config config;       /* immutable */
    struct readahead_config ra_config; /* immutable */
    char *name;                        /* immutable */
    int64_t generation;                /* immutable */
    uint64_t size;                     /* immutable */
    bool has_crc32c;                   /* immutable */
    uint32_t crc32c;                   /* immutable */

    GPtrArray *chunks;         /* lock: struct chunk * */
    struct readahead_state ra; /* lock: for reads that bring no state of their own */
    unsigned in_flight;        /* lock */
    gint users;                /* atomic: open handles (until reader_free), live views, and
                                  the pool while the reader is in it */
    gint64 last_used_us;       /* atomic: the last read (the pool reclaims LRU first) */
    size_t held;               /* lock: bytes of the chunks */
    GArray *served;            /* lock: struct extent, sorted, disjoint: ranges of chunks
                                  dropped after being served whole (the page cache has
                                  them; readahead skips them) */
    bool stale;                /* lock: the pinned generation is gone */
    bool read_once;            /* lock: a read of a large object was planned */
    uint64_t tail_first;       /* lock: the object's first read was its tail, here (0: not) */
    bool cache_fill;           /* lock: we hold the cache's pending mark for this object */
    struct reader_stats stats; /* lock */

    /* End-to-end integrity of large objects read front to back (lock): the CRC32C of every
     * byte served, as the verified prefix [0, crc_end) plus pieces served beyond it (reads
     * may be answered out of order); when the prefix reaches the size it is compared with
     * the object's CRC32C. */
    bool crc_check; /* a large object with a known CRC32C, not settled yet */
    bool corrupt;   /* the check failed: every read of this open file fails */
    int retired;    /* atomic: stale || corrupt, read by reader_pool_open
                     * without this lock (the pool's lock is mount-wide) */
    uint64_t crc_end;
    uint32_t crc_prefix;
    GArray *crc_pieces; /* struct crc_piece, sorted, disjoint, all beyond crc_end */
    GArray *dropped;    /* struct extent, sorted, disjoint: bytes served to the
                           kernel whose chunks were freed since (lock) */
};

struct reader *reader_new(struct gcs_client *client, struct membudget *budget,
                          const struct reader_config *config, const struct reader_object *object)
{
    struct reader *reader = g_new0(struct reader, 1);
    g_mutex_init(&reader->lock);
    g_cond_init(&reader->changed);
    reader->client = client;
    reader->budget = budget;
    reader->config = *config;
    if (reader->config.chunk == 0)
        reader->config.chunk = 8 << 20;
    if (reader->config.window_max < reader->config.chunk)
        reader->config.window_max = reader->config.chunk;
    reader->ra_config.chunk = reader->config.chunk;
    reader->ra_config.window_max = reader->config.window_max;
    reader->ra_config.random_min = reader->config.random_min;
    reader->name = g_strdup(object->name);
    reader->generation = object->generation;
    reader->size = object->size;
    reader->has_crc32c = object->has_crc32c;
    reader->crc32c = object->crc32c;
    reader->chunks = g_ptr_array_new();
    reader->crc_check = object->has_crc32c && object->size > config->small_file_threshold;
    reader->crc_pieces = g_array_new(FALSE, FALSE, sizeof(struct crc_piece));
    reader->served = g_array_new(FALSE, FALSE, sizeof(struct extent));
    reader->dropped = g_array_new(FALSE, FALSE, sizeof(struct extent));
    reader->users = 1;
    readahead_init(&reader->ra);
    return reader;
}

static void chunk_free(struct reader *reader, struct chunk *chunk)
{
    reader->held -= chunk->len;
    membudget_free_buffer(reader->budget, chunk->buf, chunk->len);
    g_free(chunk->served);
    g_cond_clear(&chunk->done);
    g_free(chunk);
}

/* Frees the reader once nothing uses it. Called with the lock held by the last user; waits
 * for requests still in flight (their buffers belong to the chunks). */
static void destroy_locked(struct reader *reader)
{
    while (reader->in_flight > 0)
        g_cond_wait(&reader->changed, &reader->lock);
    if (reader->cache_fill) /* never finished: let other readers stop waiting */
        content_cache_clear_pending(reader->config.cache, reader->name, reader->generation);
    g_mutex_unlock(&reader->lock);
    for (guint i = 0; i < reader->chunks->len; i++)
        chunk_free(reader, g_ptr_array_index(reader->chunks, i));
    g_ptr_array_free(reader->chunks, TRUE);
    g_array_free(reader->crc_pieces, TRUE);
    g_array_free(reader->served, TRUE);
    g_array_free(reader->dropped, TRUE);
    g_free(reader->name);
    g_cond_clear(&reader->changed);
    g_mutex_clear(&reader->lock);
    g_free(reader);
}

/* Drops one user; the last one frees. Lock held on entry, released on return. */
static void drop_user_locked(struct reader *reader)
{
    if (g_atomic_int_dec_and_test(&reader->users))
        destroy_locked(reader);
    else
        g_mutex_unlock(&reader->lock);
}

void reader_free(struct reader *reader)
{
    if (!reader)
        return;
    /* A reply may still be gathering from the chunks (the kernel can release a file while a
     * read reply is on its way): the last view frees the reader then. */
    g_mutex_lock(&reader->lock);
    drop_user_locked(reader);
}

void reader_get_stats(struct reader *reader, struct reader_stats *out)
{
    g_mutex_lock(&reader->lock);
    *out = reader->stats;
    g_mutex_unlock(&reader->lock);
}

static struct chunk *find_chunk_locked(struct reader *reader, uint64_t pos)
{
    for (guint i = 0; i < reader->chunks->len; i++) {
        struct chunk *chunk = g_ptr_array_index(reader->chunks, i);
        if (pos >= chunk->offset && pos < chunk->offset + chunk->len)
            return chunk;
    }
    return NULL;
}

/* Start of the first chunk beyond pos, or the object size: where a new chunk must stop. */
static uint64_t next_chunk_start_locked(struct reader *reader, uint64_t pos)
{
    uint64_t next = reader->size;
    for (guint i = 0; i < reader->chunks->len; i++) {
        struct chunk *chunk = g_ptr_array_index(reader->chunks, i);
        if (chunk->offset > pos && chunk->offset < next)
            next = chunk->offset;
    }
    return next;
}

/* A new pending chunk, or NULL when the budget (or malloc) says no. */
static size_t shed_locked(struct reader *reader, size_t wanted, bool served_only);
static uint64_t extent_take(GArray *list, uint64_t start, uint64_t end);

static struct chunk *create_chunk_locked(struct reader *reader, uint64_t offset, size_t len,
                                         bool demand, GPtrArray *to_submit)
{
    void *buf = membudget_alloc(reader->budget, len, demand, reader->config.demand_reserve);
    /* The budget's reclaimer cannot take this reader's lock (held here): give back idle bytes
     * of our own, then ask again. Readahead gives back only chunks served whole (dropping
     * bytes fetched for another handle to fetch others would be a flood of speculation
     * fetching twice). */
    if (!buf && shed_locked(reader, len, !demand) > 0)
        buf = membudget_alloc(reader->budget, len, demand, reader->config.demand_reserve);
    if (!buf)
        return NULL;
    struct chunk *chunk = g_new0(struct chunk, 1);
    chunk->reader = reader;
    chunk->offset = offset;
    chunk->len = len;
    chunk->buf = buf;
    chunk->state = CHUNK_PENDING;
    g_cond_init(&chunk->done);
    chunk->last_used_us = g_get_monotonic_time();
    chunk->granules = (len + SERVED_GRANULE - 1) / SERVED_GRANULE;
    chunk->served = g_malloc0((chunk->granules + 7) / 8);
    reader->held += len;
    g_ptr_array_add(reader->chunks, chunk);
    reader->in_flight++;
    reader->stats.requests++;
    /* Bytes this reader served and let go, fetched again: the kernel asked for them again (its
     * page cache dropped them), or readahead fetches them beside such a read (the served list
     * was forgotten then: the kernel may have dropped all of it). */
    uint64_t again = extent_take(reader->dropped, offset, offset + len);
    if (again > 0) {
        reader->stats.refetched_bytes += again;
        metrics_add(METRICS_REFETCHED_BYTES, again);
    }
    g_ptr_array_add(to_submit, chunk);
    return chunk;
}

static void on_chunk_done(int err, size_t got, void *user)
{
    struct chunk *chunk = user;
    struct reader *reader = chunk->reader;
    g_mutex_lock(&reader->lock);
    if (err == -ERANGE) { /* nothing at that offset: the object is shorter than we knew */
        err = 0;
        got = 0;
    }
    chunk->state = err ? CHUNK_FAILED : CHUNK_READY;
    chunk->err = err;
    chunk->got = err ? 0 : got;
    reader->stats.bytes_fetched += chunk->got;
    reader->in_flight--;
    if (chunk->waiters > 0)
        g_cond_broadcast(&chunk->done);
    if (reader->in_flight == 0)
        g_cond_broadcast(&reader->changed); /* destroy_locked may be waiting */
    g_mutex_unlock(&reader->lock);
}

/* The content cache hook: fills a whole-object chunk from the cache (waiting for a fill in
 * progress) and completes it; true on a hit. On a miss, marks the object pending so that other
 * readers wait for this fetch (cache_fill, put into the cache by finish_cache_fill). */
static bool cache_lookup(struct reader *reader, struct chunk *chunk)
{
    struct content_cache *cache = reader->config.cache;
    if (content_cache_read(cache, reader->name, reader->generation, reader->size, chunk->buf, 0) ==
        0) {
        on_chunk_done(0, (size_t)reader->size, chunk);
        return true;
    }
    if (content_cache_mark_pending(cache, reader->name, reader->generation)) {
        g_mutex_lock(&reader->lock);
        reader->cache_fill = true;
        g_mutex_unlock(&reader->lock);
        return false;
    }
    /* Cached meanwhile, or a prefetch batch is fetching it: wait for that rather than fetch
     * the same bytes again (bounded; a slow batch costs at most this much). */
    if (content_cache_read(cache, reader->name, reader->generation, reader->size, chunk->buf,
                           READER_CACHE_WAIT_MS) == 0) {
        on_chunk_done(0, (size_t)reader->size, chunk);
        return true;
    }
    return false;
}

/* After the whole-object chunk this reader fetched completed: put it into the cache and drop
 * the pending mark. Called without the lock; chunk is pinned by the caller. */
static void finish_cache_fill(struct reader *reader, struct chunk *chunk)
{
    g_mutex_lock(&reader->lock);
    bool fill = reader->cache_fill && chunk->state != CHUNK_PENDING;
    bool ok = chunk->state == CHUNK_READY && chunk->got == reader->size;
    if (fill)
        reader->cache_fill = false;
    g_mutex_unlock(&reader->lock);
    if (!fill)
        return;
    if (ok)
        content_cache_insert(reader->config.cache, reader->name, reader->generation, chunk->buf,
                             (size_t)reader->size);
    content_cache_clear_pending(reader->config.cache, reader->name, reader->generation);
}

/* Issues the requests of new chunks; called without the lock (a callback may run inline). */
static void submit_chunks(struct reader *reader, GPtrArray *to_submit)
{
    for (guint i = 0; i < to_submit->len; i++) {
        struct chunk *chunk = g_ptr_array_index(to_submit, i);
        if (reader->config.cache && chunk->offset == 0 && chunk->len >= reader->size &&
            cache_lookup(reader, chunk))
            continue;
        struct gcs_read_request request = {
            .name = reader->name,
            .generation = reader->generation,
            .offset = chunk->offset,
            .len = chunk->len,
            .buf = chunk->buf,
            .object_size = reader->size,
            .read_type = chunk->read_type,
        };
        if (chunk->offset == 0 && chunk->len >= reader->size) {
            request.whole_object = true;
            request.has_expected_crc32c = reader->has_crc32c;
            request.expected_crc32c = reader->crc32c;
            if (reader->config.batcher && reader->size > 0) {
                /* Concurrent misses of other files may share one compose batch. */
                miss_batch_submit(reader->config.batcher, &request, on_chunk_done, chunk);
                continue;
            }
        }
        flog_debug("io", "GET '%s' [%" G_GUINT64_FORMAT ", +%zu)", reader->name, chunk->offset,
                   chunk->len);
        gcs_read_async(reader->client, &request, on_chunk_done, chunk);
    }
}

/* Maps a request error for the caller; logs the lost generation once. Lock held. */
static int map_error_locked(struct reader *reader, int err)
{
    if (err != -ENOENT)
        return err;
    if (!reader->stale) {
        reader->stale = true;
        __atomic_store_n(&reader->retired, 1, __ATOMIC_RELEASE);
        flog_warn("io",
                  "'%s' generation %" G_GINT64_FORMAT " changed or was deleted while open; "
                  "reads of this open file fail with ESTALE (reopen for the new version)",
                  reader->name, reader->generation);
    }
    return -ESTALE;
}

/* Marks [pos, pos + n) of chunk as served: the whole granules inside it, and when it reaches
 * the end of the bytes the chunk got, every granule from there on. Lock held. */
static void mark_served_locked(struct chunk *chunk, uint64_t pos, size_t n)
{
    uint64_t rel = pos - chunk->offset;
    uint64_t rel_end = rel + n;
    size_t first = (size_t)((rel + SERVED_GRANULE - 1) / SERVED_GRANULE);
    size_t last = rel_end >= chunk->got ? chunk->granules : (size_t)(rel_end / SERVED_GRANULE);
    for (size_t g = first; g < last; g++) {
        if (!(chunk->served[g / 8] & (1u << (g % 8)))) {
            chunk->served[g / 8] |= (guint8)(1u << (g % 8));
            chunk->served_count++;
        }
    }
}

/* Adds [start, end) to a sorted list of disjoint extents, merging with neighbours. */
static void extent_add(GArray *list, uint64_t start, uint64_t end)
{
    guint i = 0;
    while (i < list->len && g_array_index(list, struct extent, i).end < start)
        i++;
    /* list[i..] end at or after start: merge those that touch [start, end). */
    while (i < list->len && g_array_index(list, struct extent, i).start <= end) {
        struct extent *e = &g_array_index(list, struct extent, i);
        start = MIN(start, e->start);
        end = MAX(end, e->end);
        g_array_remove_index(list, i);
    }
    struct extent added = {start, end};
    g_array_insert_val(list, i, added);
}

/* Removes [start, end) from such a list; returns how many bytes of it the list held. */
static uint64_t extent_take(GArray *list, uint64_t start, uint64_t end)
{
    uint64_t taken = 0;
    for (guint i = 0; i < list->len && start < end;) {
        struct extent *e = &g_array_index(list, struct extent, i);
        if (e->end <= start) {
            i++;
            continue;
        }
        if (e->start >= end)
            break;
        uint64_t from = MAX(e->start, start), to = MIN(e->end, end);
        taken += to - from;
        struct extent after = {to, e->end};
        if (e->start < from) {
            e->end = from;
            i++;
        } else {
            g_array_remove_index(list, i);
        }
        if (after.start < after.end) {
            g_array_insert_val(list, i, after);
            i++;
        }
    }
    return taken;
}

/* Records [start, end) as served, merging with neighbours. Lock held. */
static void served_add_locked(struct reader *reader, uint64_t start, uint64_t end)
{
    extent_add(reader->served, start, end);
}

/* Before a chunk is freed: the granules it served go to the dropped list (fetching them
 * again is counted, see reader_stats.refetched_bytes). Lock held. */
static void note_dropped_locked(struct reader *reader, const struct chunk *chunk)
{
    if (chunk->state != CHUNK_READY || chunk->served_count == 0)
        return;
    uint64_t end = chunk->offset + chunk->got;
    for (size_t g = 0; g < chunk->granules;) {
        if (!(chunk->served[g / 8] & (1u << (g % 8)))) {
            g++;
            continue;
        }
        size_t run_end = g;
        while (run_end < chunk->granules && (chunk->served[run_end / 8] & (1u << (run_end % 8))))
            run_end++;
        uint64_t from = chunk->offset + (uint64_t)g * SERVED_GRANULE;
        uint64_t to = MIN(chunk->offset + (uint64_t)run_end * SERVED_GRANULE, end);
        if (from < to)
            extent_add(reader->dropped, from, to);
        g = run_end;
    }
    while (reader->dropped->len > READER_DROPPED_MAX_EXTENTS)
        g_array_remove_index(reader->dropped, 0);
}

/* *inside_end: the end of the served extent holding pos (0 if none); *next_start: the start
 * of the first served extent after pos (left alone if none). Lock held. */
static void served_lookup_locked(struct reader *reader, uint64_t pos, uint64_t *inside_end,
                                 uint64_t *next_start)
{
    for (guint i = 0; i < reader->served->len; i++) {
        const struct extent *e = &g_array_index(reader->served, struct extent, i);
        if (pos >= e->start && pos < e->end) {
            *inside_end = e->end;
            return;
        }
        if (e->start > pos) {
            *next_start = MIN(*next_start, e->start);
            return;
        }
    }
}

static bool idle(const struct chunk *chunk)
{
    return chunk->state != CHUNK_PENDING && chunk->pins == 0;
}

static bool served_whole(const struct chunk *chunk)
{
    return chunk->granules > 0 && chunk->served_count == chunk->granules;
}

/* Drops failed chunks (so a later read retries), and chunks served whole beyond the most
 * recently used READER_SERVED_KEEP_CHUNKS chunks of them (no more than window_max bytes;
 * their range goes to the served list; their buffers
 * back to the budget's pool, where the next chunks of a stream reuse them instead of faulting
 * in fresh memory: holding every served chunk of a 512 MiB load cost 1 CPU s of page faults).
 * The recent ones stay because the kernel can drop pages it was just given (it did, now and
 * then, in the middle of a torch.load(mmap=True): those were fetched twice). Keeping a whole
 * readahead window of them (64 MiB) as well made each sequential reader hold twice its window,
 * and every byte of that working set is fresh memory the kernel zeroes as it is first filled
 * (huge pages: 44% of the daemon's CPU in a 1 GiB read by 4 readers). The rest stays,
 * shared by every handle of this object version, until memory is needed (shed_locked,
 * reader_pool_reclaim). Lock held. */
static void evict_locked(struct reader *reader)
{
    size_t served_held = 0;
    for (guint i = 0; i < reader->chunks->len;) {
        struct chunk *chunk = g_ptr_array_index(reader->chunks, i);
        if (idle(chunk) && chunk->state == CHUNK_FAILED) {
            g_ptr_array_remove_index_fast(reader->chunks, i);
            chunk_free(reader, chunk);
            continue;
        }
        if (idle(chunk) && served_whole(chunk))
            served_held += chunk->len;
        i++;
    }
    bool small = reader->size <= reader->config.small_file_threshold;
    size_t keep =
        MIN(reader->config.window_max, (size_t)READER_SERVED_KEEP_CHUNKS * reader->config.chunk);
    while (!small && served_held > keep) {
        struct chunk *oldest = NULL;
        guint oldest_index = 0;
        for (guint i = 0; i < reader->chunks->len; i++) {
            struct chunk *chunk = g_ptr_array_index(reader->chunks, i);
            if (idle(chunk) && served_whole(chunk) &&
                (!oldest || chunk->last_used_us < oldest->last_used_us)) {
                oldest = chunk;
                oldest_index = i;
            }
        }
        if (!oldest)
            break;
        served_held -= oldest->len;
        if (oldest->state == CHUNK_READY)
            served_add_locked(reader, oldest->offset, oldest->offset + oldest->got);
        note_dropped_locked(reader, oldest);
        g_ptr_array_remove_index_fast(reader->chunks, oldest_index);
        chunk_free(reader, oldest);
    }
}

/* Frees idle chunks until about `wanted` bytes went back to the budget: the most served
 * first (the page cache has most of their bytes), then the least recently used; with
 * served_only, only chunks served whole (speculation may displace those, nothing a handle
 * still needs). A chunk served whole leaves its range in the served list (readahead does not
 * fetch it again while the kernel holds it). Returns the bytes freed. Lock held. */
static size_t shed_locked(struct reader *reader, size_t wanted, bool served_only)
{
    size_t freed = 0;
    while (freed < wanted) {
        struct chunk *victim = NULL;
        guint victim_index = 0;
        for (guint i = 0; i < reader->chunks->len; i++) {
            struct chunk *chunk = g_ptr_array_index(reader->chunks, i);
            if (!idle(chunk) || (served_only && !served_whole(chunk)))
                continue;
            /* served fractions compared without division: a/b > c/d <=> a*d > c*b */
            uint64_t mine = (uint64_t)chunk->served_count * (victim ? victim->granules : 1);
            uint64_t theirs = victim ? (uint64_t)victim->served_count * chunk->granules : 0;
            bool better = !victim || mine > theirs ||
                          (mine == theirs && chunk->last_used_us < victim->last_used_us);
            if (better) {
                victim = chunk;
                victim_index = i;
            }
        }
        if (!victim)
            break;
        flog_debug("io", "SHED '%s' [%" G_GUINT64_FORMAT ", +%zu) served %zu/%zu", reader->name,
                   victim->offset, victim->len, victim->served_count, victim->granules);
        freed += victim->len;
        if (victim->state == CHUNK_READY && served_whole(victim))
            served_add_locked(reader, victim->offset, victim->offset + victim->got);
        note_dropped_locked(reader, victim);
        g_ptr_array_remove_index_fast(reader->chunks, victim_index);
        chunk_free(reader, victim);
    }
    return freed;
}

/* Reads without buffering, straight into dst (no memory for a chunk). */
static int read_direct(struct reader *reader, uint64_t offset, size_t len, void *dst,
                       enum metrics_read_type read_type, size_t *got)
{
    struct gcs_read_request request = {
        .name = reader->name,
        .generation = reader->generation,
        .offset = offset,
        .len = len,
        .buf = dst,
        .object_size = reader->size,
        .read_type = read_type,
    };
    size_t read_bytes = 0;
    int rc = gcs_read(reader->client, &request, &read_bytes);
    g_mutex_lock(&reader->lock);
    reader->stats.direct_reads++;
    reader->stats.requests++;
    if (rc == -ERANGE) {
        rc = 0;
        read_bytes = 0;
    }
    if (rc < 0)
        rc = map_error_locked(reader, rc);
    else
        reader->stats.bytes_fetched += read_bytes;
    g_mutex_unlock(&reader->lock);
    if (rc == 0)
        *got = read_bytes;
    return rc;
}

/* Finds or creates the chunks covering [offset, end), pins them into `mine`, and plans
 * readahead. Returns false when a demand chunk could not be admitted. *read_type: how the
 * read's own fetches count in gcs_download_bytes_count (Random when readahead judged the read
 * random, as gcsfuse counts a reader that seeks). Lock held. */
static bool plan_chunks_locked(struct reader *reader, struct readahead_state *ra, uint64_t offset,
                               uint64_t end, GPtrArray *mine, GPtrArray *to_submit,
                               enum metrics_read_type *read_type)
{
    size_t chunk_size = reader->config.chunk;
    bool small = reader->size <= reader->config.small_file_threshold;
    struct readahead_plan plan = {.sequential = true, .fetch_start = 0, .fetch_end = reader->size};
    /* The kernel asks for bytes it was served before: it dropped pages (memory pressure,
     * drop_caches, an open that did not keep the cache). What else it was served may be gone
     * too: readahead stops skipping the served ranges. */
    for (guint i = 0; i < reader->served->len; i++) {
        const struct extent *e = &g_array_index(reader->served, struct extent, i);
        if (e->start < end && offset < e->end) {
            g_array_set_size(reader->served, 0);
            break;
        }
    }
    if (!small) {
        /* A footer-indexed file read through two handles (pq.read_table reads the footer
         * through one, the column chunks through another): the second inherits the fact that
         * the object's first read was its tail. */
        if (!ra->started && reader->tail_first > 0)
            ra->tail_first = reader->tail_first;
        readahead_on_read(&reader->ra_config, ra, offset, (size_t)(end - offset), reader->size,
                          &plan);
        if (!reader->read_once)
            reader->tail_first = ra->tail_first;
        reader->read_once = true;
    }
    *read_type = plan.sequential ? METRICS_READ_SEQUENTIAL : METRICS_READ_RANDOM;

    uint64_t pos = small ? 0 : offset;
    uint64_t demand_end = small ? reader->size : end;
    while (pos < demand_end) {
        struct chunk *chunk = find_chunk_locked(reader, pos);
        if (!chunk) {
            uint64_t limit = next_chunk_start_locked(reader, pos);
            uint64_t chunk_end;
            if (small) {
                chunk_end = limit;
            } else if (plan.sequential) {
                /* What the read needs (at least random_min) is a GET of its own, the rest
                 * of the chunk is readahead fetched beside it: the reader waits for the
                 * bytes it asked for, not for a whole chunk (each hop of a reader walking
                 * tensor after tensor would wait for 8 MiB). */
                uint64_t needed = MAX(end, pos + reader->config.random_min);
                if (plan.exact) /* a stream ramping from a jump: the read and its small
                                   window in one GET, nothing past the window */
                    needed = MAX(end, plan.fetch_end);
                chunk_end = MIN(MIN(pos - pos % chunk_size + chunk_size, limit), needed);
            } else {
                uint64_t wanted = MAX(end - pos, (uint64_t)reader->config.random_min);
                chunk_end = MIN(pos + wanted, limit);
            }
            chunk = create_chunk_locked(reader, pos, (size_t)(chunk_end - pos), true, to_submit);
            if (!chunk)
                return false;
            chunk->read_type = *read_type;
        }
        if (chunk->offset + chunk->len > offset && chunk->offset < end) {
            chunk->pins++;
            chunk->last_used_us = g_get_monotonic_time();
            g_ptr_array_add(mine, chunk);
        }
        pos = chunk->offset + chunk->len;
    }
    /* Where the next skips of a steady stride should land: speculative, like readahead (the
     * budget may say stop early); ranges the kernel was served are not fetched again. */
    for (unsigned i = 0; !small && i < plan.prefetch_count; i++) {
        uint64_t target = plan.prefetch_start + i * plan.prefetch_stride;
        uint64_t target_end = MIN(target + plan.prefetch_len, reader->size);
        bool refused = false;
        pos = target;
        while (pos < target_end) {
            uint64_t served_end = 0, served_next = reader->size;
            served_lookup_locked(reader, pos, &served_end, &served_next);
            if (served_end > pos) {
                pos = served_end;
                continue;
            }
            struct chunk *chunk = find_chunk_locked(reader, pos);
            if (!chunk) {
                uint64_t limit =
                    MIN(MIN(next_chunk_start_locked(reader, pos), served_next), target_end);
                chunk = create_chunk_locked(reader, pos, (size_t)(limit - pos), false, to_submit);
                if (!chunk) {
                    refused = true;
                    break;
                }
                chunk->read_type = METRICS_READ_RANDOM; /* the skips of a random reader */
            }
            pos = chunk->offset + chunk->len;
        }
        if (refused)
            break;
    }
    if (small || !plan.sequential)
        return true;
    /* Readahead: speculative chunks up to the window; the budget may say stop early. Ranges
     * already served to the kernel are in its page cache: not fetched again on speculation. */
    pos = end;
    while (pos < plan.fetch_end) {
        uint64_t served_end = 0, served_next = reader->size;
        served_lookup_locked(reader, pos, &served_end, &served_next);
        if (served_end > pos) {
            pos = served_end;
            continue;
        }
        struct chunk *chunk = find_chunk_locked(reader, pos);
        if (!chunk) {
            uint64_t limit = MIN(next_chunk_start_locked(reader, pos), served_next);
            if (plan.exact)
                limit = MIN(limit, plan.fetch_end);
            uint64_t chunk_end = MIN(pos - pos % chunk_size + chunk_size, limit);
            chunk = create_chunk_locked(reader, pos, (size_t)(chunk_end - pos), false, to_submit);
            if (!chunk)
                break;
        }
        pos = chunk->offset + chunk->len;
    }
    return true;
}

/* Plans and waits for the chunks covering [offset, end), which stay pinned in view->pinned.
 * Sets *admitted to false when a demand chunk found no memory (nothing is pinned then). */
static int gather_locked(struct reader *reader, struct readahead_state *ra, uint64_t offset,
                         uint64_t end, struct reader_view *view, bool *admitted,
                         enum metrics_read_type *read_type)
{
    GPtrArray *to_submit = g_ptr_array_new();
    *admitted = plan_chunks_locked(reader, ra, offset, end, view->pinned, to_submit, read_type);
    g_mutex_unlock(&reader->lock);
    submit_chunks(reader, to_submit);
    g_ptr_array_free(to_submit, TRUE);
    g_mutex_lock(&reader->lock);
    if (!*admitted)
        return 0;
    uint64_t pos = offset;
    for (guint i = 0; i < view->pinned->len && pos < end; i++) {
        struct chunk *chunk = g_ptr_array_index(view->pinned, i);
        chunk->waiters++;
        while (chunk->state == CHUNK_PENDING)
            g_cond_wait(&chunk->done, &reader->lock);
        chunk->waiters--;
        if (chunk->state == CHUNK_FAILED)
            return map_error_locked(reader, chunk->err);
        uint64_t in_chunk = pos - chunk->offset;
        if (in_chunk >= chunk->got)
            break; /* the object ended earlier than its size said */
        size_t n = (size_t)MIN(chunk->got - in_chunk, end - pos);
        if (view->count == READER_VIEW_MAX_PARTS)
            return -E2BIG;
        view->parts[view->count].iov_base = (char *)chunk->buf + in_chunk;
        view->parts[view->count].iov_len = n;
        mark_served_locked(chunk, pos, n);
        view->count++;
        view->total += n;
        pos += n;
        if (chunk->got < chunk->len)
            break;
    }
    return 0;
}

static void unpin_locked(struct reader_view *view)
{
    for (guint i = 0; i < view->pinned->len; i++)
        ((struct chunk *)g_ptr_array_index(view->pinned, i))->pins--;
    g_ptr_array_set_size(view->pinned, 0);
}

/* Serves the view from a private buffer filled by a direct (unbuffered) read. */
static int view_from_direct_read(struct reader *reader, struct reader_view *view, uint64_t offset,
                                 uint64_t end, enum metrics_read_type read_type)
{
    size_t len = (size_t)(end - offset);
    view->owned = g_try_malloc(len ? len : 1);
    if (!view->owned)
        return -ENOMEM;
    size_t got = 0;
    int rc = read_direct(reader, offset, len, view->owned, read_type, &got);
    if (rc < 0)
        return rc;
    view->parts[0].iov_base = view->owned;
    view->parts[0].iov_len = got;
    view->count = 1;
    view->total = got;
    return 0;
}

/* CRC32C of view bytes [from, to) (object offsets within the view). */
static uint32_t view_crc(const struct reader_view *view, uint64_t from, uint64_t to)
{
    uint32_t crc = 0;
    uint64_t pos = view->offset;
    for (int i = 0; i < view->count && pos < to; i++) {
        uint64_t part_end = pos + view->parts[i].iov_len;
        if (part_end > from) {
            uint64_t a = MAX(pos, from), b = MIN(part_end, to);
            crc = crc32c_update(crc, (const char *)view->parts[i].iov_base + (a - pos),
                                (size_t)(b - a));
        }
        pos = part_end;
    }
    return crc;
}

/* Extends the verified prefix by the pieces that now continue it. Lock held. */
static void absorb_pieces_locked(struct reader *reader)
{
    guint i = 0;
    while (i < reader->crc_pieces->len) {
        struct crc_piece *piece = &g_array_index(reader->crc_pieces, struct crc_piece, i);
        if (piece->start > reader->crc_end)
            break;
        if (piece->start == reader->crc_end) {
            reader->crc_prefix =
                crc32c_combine(reader->crc_prefix, piece->crc, piece->end - piece->start);
            reader->crc_end = piece->end;
        }
        /* (one starting inside the prefix overlaps what was just absorbed: its bytes were
         * counted already and it cannot be trimmed without them, so it goes) */
        g_array_remove_index(reader->crc_pieces, i);
    }
}

/* Records the bytes a successful view serves; when every byte of the object has been served
 * (front to back, or in any order that leaves no gap), compares their CRC32C with the
 * object's. 0, or -EBADMSG on a mismatch (logged once; the buffered chunks are dropped and
 * every further read of this open file fails too: the application was served bad bytes, and
 * a read that succeeded after this one would hide it). Lock held. */
static int note_served_locked(struct reader *reader, const struct reader_view *view,
                              const uint32_t *view_crc32c)
{
    if (!reader->crc_check || view->total == 0)
        return 0;
    uint64_t start = view->offset, end = view->offset + view->total;
    if (end <= reader->crc_end)
        return 0; /* served again */
    if (start < reader->crc_end)
        start = reader->crc_end;
    for (guint i = 0; i < reader->crc_pieces->len; i++) {
        const struct crc_piece *piece = &g_array_index(reader->crc_pieces, struct crc_piece, i);
        if (piece->start < end && start < piece->end)
            return 0; /* overlaps a piece kept: counted once, by that piece */
    }
    struct crc_piece piece = {start, end,
                              start == view->offset && view_crc32c ? *view_crc32c
                                                                   : view_crc(view, start, end)};
    guint at = 0;
    while (at < reader->crc_pieces->len &&
           g_array_index(reader->crc_pieces, struct crc_piece, at).start < start)
        at++;
    g_array_insert_val(reader->crc_pieces, at, piece);
    absorb_pieces_locked(reader);
    if (reader->crc_pieces->len > READER_CRC_MAX_PIECES) {
        /* Read at random: nothing to conclude (docs/reliability.md: what random reads detect). */
        reader->crc_check = false;
        g_array_set_size(reader->crc_pieces, 0);
        return 0;
    }
    if (reader->crc_end < reader->size)
        return 0;
    reader->stats.crc_checks++;
    if (reader->crc_prefix == reader->crc32c) {
        reader->crc_check = false; /* settled */
        return 0;
    }
    reader->stats.crc_mismatches++;
    flog_error("io",
               "'%s' generation %" G_GINT64_FORMAT ": the %" G_GUINT64_FORMAT " bytes read "
               "front to back have CRC32C %08x, the object's is %08x (corrupted in transit); "
               "reads of this open file fail with EIO (reopen to fetch again)",
               reader->name, reader->generation, reader->size, reader->crc_prefix, reader->crc32c);
    reader->corrupt = true;
    __atomic_store_n(&reader->retired, 1, __ATOMIC_RELEASE);
    reader->crc_check = false;
    g_array_set_size(reader->crc_pieces, 0);
    for (guint i = 0; i < reader->chunks->len; i++) {
        struct chunk *chunk = g_ptr_array_index(reader->chunks, i);
        if (chunk->state == CHUNK_READY) {
            chunk->state = CHUNK_FAILED; /* evicted once unpinned */
            chunk->err = -EIO;
        }
    }
    return -EBADMSG;
}

/* note_served_locked for a view, with the CRC32C of its bytes computed without the lock
 * (they are pinned and immutable): every read and completion of this object takes that lock,
 * and 1 MiB takes a tenth of a millisecond to checksum. */
static int note_served(struct reader *reader, const struct reader_view *view)
{
    g_mutex_lock(&reader->lock);
    bool wanted =
        reader->crc_check && view->total > 0 && view->offset + view->total > reader->crc_end;
    g_mutex_unlock(&reader->lock);
    uint32_t crc = wanted ? view_crc(view, view->offset, view->offset + view->total) : 0;
    g_mutex_lock(&reader->lock);
    int rc = note_served_locked(reader, view, wanted ? &crc : NULL);
    g_mutex_unlock(&reader->lock);
    return rc;
}

int reader_read_view(struct reader *reader, struct readahead_state *ra, uint64_t offset, size_t len,
                     struct reader_view *view)
{
    memset(view, 0, sizeof(*view));
    view->offset = offset;
    if (len == 0 || offset >= reader->size)
        return 0;
    view->reader = reader;
    view->pinned = g_ptr_array_new();
    uint64_t end = offset + len;
    if (end > reader->size || end < offset)
        end = reader->size;

    g_mutex_lock(&reader->lock);
    g_atomic_int_inc(&reader->users); /* dropped by reader_view_release */
    __atomic_store_n(&reader->last_used_us, g_get_monotonic_time(), __ATOMIC_RELAXED);
    if (reader->stale || reader->corrupt) {
        int err = reader->stale ? -ESTALE : -EBADMSG;
        g_mutex_unlock(&reader->lock);
        return err;
    }
    bool admitted = true;
    enum metrics_read_type read_type = METRICS_READ_SEQUENTIAL;
    int rc = gather_locked(reader, ra ? ra : &reader->ra, offset, end, view, &admitted, &read_type);
    bool check_fill = reader->cache_fill && view->pinned->len > 0;
    g_mutex_unlock(&reader->lock);
    if (check_fill && reader->size <= reader->config.small_file_threshold)
        finish_cache_fill(reader, g_ptr_array_index(view->pinned, 0));
    if (rc == -E2BIG) {
        /* Too many small pieces for one reply (FUSE takes no short reads): read the range
         * directly instead. Rare: chunks are megabytes, FUSE reads at most one. */
        g_mutex_lock(&reader->lock);
        unpin_locked(view);
        g_mutex_unlock(&reader->lock);
        view->count = 0;
        view->total = 0;
        rc = view_from_direct_read(reader, view, offset, end, read_type);
    } else if (rc == 0 && !admitted) {
        rc = view_from_direct_read(reader, view, offset, end, read_type);
    }
    if (rc == 0)
        rc = note_served(reader, view);
    if (rc < 0) {
        reader_view_release(view);
        memset(view->parts, 0, sizeof(view->parts));
        view->count = 0;
        view->total = 0;
    }
    return rc;
}

void reader_view_release(struct reader_view *view)
{
    if (!view || !view->reader)
        return;
    struct reader *reader = view->reader;
    g_clear_pointer(&view->owned, g_free);
    g_mutex_lock(&reader->lock);
    unpin_locked(view);
    g_ptr_array_free(view->pinned, TRUE);
    view->pinned = NULL;
    view->reader = NULL;
    evict_locked(reader);
    drop_user_locked(reader);
}

int reader_read(struct reader *reader, uint64_t offset, size_t len, void *dst, size_t *got)
{
    struct reader_view view;
    int rc = reader_read_view(reader, NULL, offset, len, &view);
    if (rc == 0) {
        size_t copied = 0;
        for (int i = 0; i < view.count; i++) {
            memcpy((char *)dst + copied, view.parts[i].iov_base, view.parts[i].iov_len);
            copied += view.parts[i].iov_len;
        }
        *got = copied;
    }
    reader_view_release(&view);
    return rc;
}

/* ---- readers shared per object version ---- */

struct reader_pool {
    GMutex lock;
    struct gcs_client *client;          /* immutable, not owned */
    struct membudget *budget;           /* immutable, not owned */
    const struct reader_config *config; /* immutable pointer, not owned: read at each open */
    GHashTable *readers;                /* lock: "generation/name" -> struct reader * (one
                                           user each) */
    struct reader_pool_stats stats;     /* lock */
};

struct reader_pool *reader_pool_new(struct gcs_client *client, struct membudget *budget,
                                    const struct reader_config *config)
{
    struct reader_pool *pool = g_new0(struct reader_pool, 1);
    g_mutex_init(&pool->lock);
    pool->client = client;
    pool->budget = budget;
    pool->config = config;
    pool->readers = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return pool;
}

static char *pool_key(const char *name, int64_t generation)
{
    return g_strdup_printf("%" G_GINT64_FORMAT "/%s", generation, name);
}

/* Drops the pool's user of each reader in `dropped` (taken out of the table). No pool lock. */
static void pool_drop(GPtrArray *dropped)
{
    for (guint i = 0; i < dropped->len; i++) {
        struct reader *reader = g_ptr_array_index(dropped, i);
        g_mutex_lock(&reader->lock);
        drop_user_locked(reader);
    }
    g_ptr_array_free(dropped, TRUE);
}

/* Takes out of the table readers only the pool uses that hold no bytes and have nothing in
 * flight. Pool lock held; the caller drops them after unlocking. */
static void pool_sweep_locked(struct reader_pool *pool, GPtrArray *dropped)
{
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, pool->readers);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct reader *reader = value;
        if (g_atomic_int_get(&reader->users) != 1 || !g_mutex_trylock(&reader->lock))
            continue;
        bool empty = reader->chunks->len == 0 && reader->in_flight == 0;
        g_mutex_unlock(&reader->lock);
        if (empty) {
            g_hash_table_iter_steal(&iter);
            g_free(key);
            g_ptr_array_add(dropped, reader);
        }
    }
}

struct reader *reader_pool_open(struct reader_pool *pool, const struct reader_object *object)
{
    char *key = pool_key(object->name, object->generation);
    GPtrArray *dropped = g_ptr_array_new();
    g_mutex_lock(&pool->lock);
    struct reader *reader = g_hash_table_lookup(pool->readers, key);
    bool retired = false;
    if (reader) /* no wait for the reader's lock under the mount-wide pool lock */
        retired = __atomic_load_n(&reader->retired, __ATOMIC_ACQUIRE);
    if (reader && (retired || reader->size != object->size)) {
        /* Same generation, another size: never mix; the new description wins. A reader whose
         * end-to-end check failed (or whose generation vanished) fails every read of the
         * handles that have it; a new open fetches again with a new one. */
        gpointer stored_key = NULL;
        g_hash_table_steal_extended(pool->readers, key, &stored_key, NULL);
        g_free(stored_key); /* a steal frees neither: the table's own copy of the key */
        g_ptr_array_add(dropped, reader);
        reader = NULL;
    }
    if (reader) {
        g_atomic_int_inc(&reader->users); /* the pool's user keeps it alive meanwhile */
        pool->stats.shared_opens++;
        g_free(key);
    } else {
        if (g_hash_table_size(pool->readers) >= POOL_SWEEP_ENTRIES)
            pool_sweep_locked(pool, dropped);
        /* Shared readers outlive the FUSE session's content cache and miss batcher (freed at
         * its end, before the pool): they use neither (both serve small objects). */
        struct reader_config config = *pool->config;
        config.cache = NULL;
        config.batcher = NULL;
        reader = reader_new(pool->client, pool->budget, &config, object);
        g_atomic_int_inc(&reader->users); /* the pool's */
        g_hash_table_insert(pool->readers, key, reader);
        pool->stats.opens++;
    }
    g_mutex_unlock(&pool->lock);
    pool_drop(dropped);
    return reader;
}

static GPtrArray *pool_values_locked(struct reader_pool *pool)
{
    GPtrArray *all = g_ptr_array_sized_new(g_hash_table_size(pool->readers));
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, pool->readers);
    while (g_hash_table_iter_next(&iter, NULL, &value))
        g_ptr_array_add(all, value);
    return all;
}

static gint by_last_use(gconstpointer a, gconstpointer b)
{
    const struct reader *x = *(struct reader *const *)a;
    const struct reader *y = *(struct reader *const *)b;
    gint64 ux = __atomic_load_n(&x->last_used_us, __ATOMIC_RELAXED);
    gint64 uy = __atomic_load_n(&y->last_used_us, __ATOMIC_RELAXED);
    return ux < uy ? -1 : ux > uy;
}

size_t reader_pool_reclaim(void *user, size_t wanted, bool urgent)
{
    struct reader_pool *pool = user;
    /* Trylocks only: the caller may hold a reader's lock (an admission inside it). */
    if (!g_mutex_trylock(&pool->lock))
        return 0;
    GPtrArray *all = pool_values_locked(pool);
    g_ptr_array_sort(all, by_last_use);
    size_t freed = 0;
    for (guint i = 0; i < all->len && freed < wanted; i++) {
        struct reader *reader = g_ptr_array_index(all, i);
        /* Speculation takes from readers a handle uses only chunks served whole; from the
         * others (the pool's user alone) anything. */
        bool in_use = g_atomic_int_get(&reader->users) > 1;
        if (!g_mutex_trylock(&reader->lock))
            continue;
        freed += shed_locked(reader, wanted - freed, !urgent && in_use);
        g_mutex_unlock(&reader->lock);
    }
    g_ptr_array_free(all, TRUE);
    pool->stats.reclaimed_bytes += freed;
    g_mutex_unlock(&pool->lock);
    return freed;
}

void reader_pool_get_stats(struct reader_pool *pool, struct reader_pool_stats *out)
{
    g_mutex_lock(&pool->lock);
    *out = pool->stats;
    out->readers = g_hash_table_size(pool->readers);
    out->held_bytes = 0;
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, pool->readers);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        struct reader *reader = value;
        g_mutex_lock(&reader->lock);
        out->held_bytes += reader->held;
        g_mutex_unlock(&reader->lock);
    }
    g_mutex_unlock(&pool->lock);
}

void reader_pool_free(struct reader_pool *pool)
{
    if (!pool)
        return;
    GPtrArray *dropped = pool_values_locked(pool);
    g_hash_table_destroy(pool->readers); /* frees the keys; the readers are in dropped */
    pool_drop(dropped);
    g_mutex_clear(&pool->lock);
    g_free(pool);
}
