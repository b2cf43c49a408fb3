/* Crash recovery's shared state, written on the hot path by the serving process: the INIT,
 * the requests in flight, the journal (the layout and the protocol: fs_crash.c's comment). */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fluxfs/log.h"
#include "fs-internal.h"
#include "crash_state.h"

struct fs_crash *fs_crash_open(int memfd)
{
    if (memfd < 0)
        return NULL;
    struct stat st;
    if (fstat(memfd, &st) < 0)
        return NULL;
    if ((size_t)st.st_size < MAP_BYTES && ftruncate(memfd, (off_t)MAP_BYTES) < 0) {
        flog_warn("fs", "crash state: %s (crash recovery off)", g_strerror(errno));
        return NULL;
    }
    void *map = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED) {
        flog_warn("fs", "crash state: mmap: %s (crash recovery off)", g_strerror(errno));
        return NULL;
    }
    struct fs_crash *crash = g_new0(struct fs_crash, 1);
    crash->map = map;
    g_mutex_init(&crash->lock);
    crash->open_records = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    crash->free_records = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    G_STATIC_ASSERT(sizeof(gpointer) >= sizeof(uint64_t)); /* an inode number as the key */
    crash->live_records = g_hash_table_new(g_direct_hash, NULL);
    g_mutex_init(&crash->replay_lock);
    g_cond_init(&crash->replay_done);
    crash->replay_threads = g_ptr_array_new();
    if (crash->map->header.magic != CRASH_MAGIC) {
        crash->map->header.version = CRASH_VERSION;
        __atomic_store_n(&crash->map->header.magic, CRASH_MAGIC, __ATOMIC_RELEASE);
    }
    /* Appends go on where the process before left them (recovery moves them to the other
     * half: fs_crash_stage). */
    uint64_t word = crash->map->header.journal;
    crash->half = (word & JOURNAL_HALF_BIT) ? 1 : 0;
    crash->used = word & ~JOURNAL_HALF_BIT;
    return crash;
}

/* ---- requests served again (fs_crash.c's replays) and the RELEASEs that wait for them ---- */

void fs_crash_replay_begin(struct fs_crash *crash)
{
    g_mutex_lock(&crash->replay_lock);
    __atomic_add_fetch(&crash->replays, 1, __ATOMIC_SEQ_CST);
    g_mutex_unlock(&crash->replay_lock);
}

void fs_crash_replay_end(struct fs_crash *crash)
{
    g_mutex_lock(&crash->replay_lock);
    __atomic_sub_fetch(&crash->replays, 1, __ATOMIC_SEQ_CST);
    g_cond_broadcast(&crash->replay_done);
    g_mutex_unlock(&crash->replay_lock);
}

void fs_crash_join_replays(struct fs_crash *crash)
{
    if (!crash)
        return;
    for (guint i = 0; i < crash->replay_threads->len; i++)
        g_thread_join(g_ptr_array_index(crash->replay_threads, i));
    g_ptr_array_set_size(crash->replay_threads, 0);
}

void fs_crash_release_wait(struct fs_crash *crash)
{
    if (!crash || __atomic_load_n(&crash->replays, __ATOMIC_SEQ_CST) == 0)
        return;
    g_mutex_lock(&crash->replay_lock);
    while (__atomic_load_n(&crash->replays, __ATOMIC_SEQ_CST) > 0)
        g_cond_wait(&crash->replay_done, &crash->replay_lock);
    g_mutex_unlock(&crash->replay_lock);
}

void fs_crash_free(struct fs_crash *crash)
{
    if (!crash)
        return;
    /* The map stays mapped: a thread that ends later (the main thread at exit included) gives
     * its landing back through it (release_landing). It is the supervisor's memfd; the
     * process ends soon after. */
    fs_crash_join_replays(crash); /* none left: fs_run joined them before the session's end */
    g_mutex_clear(&crash->lock);
    g_hash_table_destroy(crash->open_records);
    g_array_free(crash->free_records, TRUE);
    g_hash_table_destroy(crash->live_records);
    g_mutex_clear(&crash->replay_lock);
    g_cond_clear(&crash->replay_done);
    g_ptr_array_free(crash->replay_threads, TRUE);
    g_free(crash);
}

/* ---- landings: where a request is read to ---- */

static void release_landing(gpointer data)
{
    struct crash_landing *landing = data;
    ((struct fuse_in_header *)landing->bytes)->unique = 0;
    __atomic_store_n(&landing->owner, 0, __ATOMIC_RELEASE);
}

static GPrivate landing_key = G_PRIVATE_INIT(release_landing);

uint8_t *fs_crash_landing(struct fs_crash *crash)
{
    struct crash_landing *landing = g_private_get(&landing_key);
    if (landing)
        return landing->bytes;
    for (size_t i = 0; i < LANDING_COUNT; i++) {
        uint32_t expected = 0;
        if (__atomic_compare_exchange_n(&crash->map->landings[i].owner, &expected, 1, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            landing = &crash->map->landings[i];
            ((struct fuse_in_header *)landing->bytes)->unique = 0;
            g_private_set(&landing_key, landing);
            return landing->bytes;
        }
    }
    return NULL; /* more threads than landings: this one reads unguarded */
}

void fs_crash_landing_done(uint8_t *landing)
{
    if (landing)
        __atomic_store_n(&((struct fuse_in_header *)landing)->unique, 0, __ATOMIC_RELEASE);
}

void fs_crash_set_init(struct fs_crash *crash, GBytes *request, GBytes *reply)
{
    gsize request_len = 0, reply_len = 0;
    const void *request_data = g_bytes_get_data(request, &request_len);
    const void *reply_data = g_bytes_get_data(reply, &reply_len);
    struct crash_header *h = &crash->map->header;
    if (request_len > INIT_MAX || reply_len > INIT_MAX)
        return;
    memcpy(h->init_request, request_data, request_len);
    memcpy(h->init_reply, reply_data, reply_len);
    h->init_request_len = (uint32_t)request_len;
    __atomic_store_n(&h->init_reply_len, (uint32_t)reply_len, __ATOMIC_RELEASE);
}

/* ---- requests in flight ---- */

void fs_crash_request_read(struct fs_crash *crash, const void *buf, size_t len)
{
    const struct fuse_in_header *in = buf;
    if (in->opcode == FUSE_INIT || in->unique == 0)
        return;
    size_t start = SLOT_INDEX(in->unique);
    for (size_t i = 0; i < SLOT_COUNT; i++) {
        struct crash_slot *slot = &crash->map->slots[(start + i) & (SLOT_COUNT - 1)];
        uint64_t expected = 0;
        if (!__atomic_compare_exchange_n(&slot->unique, &expected, SLOT_BUSY, false,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        slot->len = (uint32_t)len;
        slot->stored = (uint32_t)MIN(len, (size_t)SLOT_BYTES);
        memcpy(slot->bytes, buf, slot->stored);
        __atomic_store_n(&slot->unique, in->unique, __ATOMIC_RELEASE);
        if (i > __atomic_load_n(&crash->probe_max, __ATOMIC_RELAXED))
            __atomic_store_n(&crash->probe_max, i, __ATOMIC_RELAXED); /* grows only: racy ok */
        return;
    }
    /* Full (cannot happen below SLOT_COUNT requests in flight): this one is not carried. */
}

void fs_crash_request_answered(struct fs_crash *crash, uint64_t unique)
{
    size_t start = SLOT_INDEX(unique);
    /* Slots free in any order: probe as far as any request was ever placed. */
    size_t last = MIN(__atomic_load_n(&crash->probe_max, __ATOMIC_RELAXED) + 1, SLOT_COUNT);
    for (size_t i = 0; i < last; i++) {
        struct crash_slot *slot = &crash->map->slots[(start + i) & (SLOT_COUNT - 1)];
        if (__atomic_load_n(&slot->unique, __ATOMIC_ACQUIRE) == unique) {
            __atomic_store_n(&slot->unique, 0, __ATOMIC_RELEASE);
            return;
        }
    }
}

/* ---- the journal ---- */

#define NO_RECORD UINT64_MAX

static uint8_t *half_start(struct fs_crash *crash, uint32_t half)
{
    return crash->map->journal + (size_t)half * JOURNAL_HALF;
}

/* Under crash->lock: the record at offset in the half appends go to. */
static struct record *record_at(struct fs_crash *crash, uint64_t offset)
{
    return (struct record *)(half_start(crash, crash->half) + offset);
}

/* Under crash->lock: the header names what is written (one release store). */
static void publish_locked(struct fs_crash *crash)
{
    if (crash->staging)
        return;
    uint64_t word = (crash->half ? JOURNAL_HALF_BIT : 0) | crash->used;
    __atomic_store_n(&crash->map->header.journal, word, __ATOMIC_RELEASE);
}

/* The pages of a half nothing names any more go back to the system (MADV_REMOVE: shmem
 * frees them; the range reads as zeros). */
static void free_half(struct fs_crash *crash, uint32_t half)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)half_start(crash, half);
    uintptr_t end = start + JOURNAL_HALF;
    start = (start + page - 1) & ~(page - 1);
    end &= ~(page - 1);
    if (end > start && madvise((void *)start, end - start, MADV_REMOVE) < 0)
        flog_debug("fs", "crash state: madvise(MADV_REMOVE): %s", g_strerror(errno));
}

static void test_kill(struct fs_crash *crash, unsigned phase)
{
    if (crash->kill_compaction != 0 && crash->compactions + 1 == crash->kill_compaction &&
        crash->kill_phase == phase)
        raise(SIGKILL); /* the test hook: dead in the middle of a compaction */
}

/* Under crash->lock: the live records (NEWs of the inodes in the table, OPENs of the handles
 * open) copied to the start of the other half, in no particular order (recovery matches
 * handles with inodes after reading the whole journal), then one release store of the header
 * switches to them. Until that store a successor reads the old half, untouched; after it, the
 * new one, whole. The old half's pages are freed after the switch. */
static void compact_locked(struct fs_crash *crash)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    uint32_t from = crash->half, to = from ^ 1;
    uint8_t *src = half_start(crash, from), *dst = half_start(crash, to);
    guint live = g_hash_table_size(crash->live_records) + g_hash_table_size(crash->open_records);
    uint64_t used = 0;
    guint copied = 0;
    GHashTable *tables[2] = {crash->live_records, crash->open_records};
    for (int t = 0; t < 2; t++) {
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, tables[t]);
        while (g_hash_table_iter_next(&iter, &key, &value)) {
            uint64_t offset = (uint64_t)GPOINTER_TO_SIZE(value);
            const struct record *rec = (const struct record *)(src + offset);
            memcpy(dst + used, rec, rec->len);
            g_hash_table_iter_replace(&iter, GSIZE_TO_POINTER((gsize)used));
            used += rec->len;
            if (++copied == MAX(live / 2, 1))
                test_kill(crash, 1);
        }
    }
    test_kill(crash, 2);
    uint64_t before = crash->used;
    crash->half = to;
    crash->used = used;
    crash->dead = 0;
    g_array_set_size(crash->free_records, 0); /* dead OPENs stayed behind */
    publish_locked(crash);
    test_kill(crash, 3);
    free_half(crash, from);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    int64_t us = ((int64_t)t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
    __atomic_add_fetch(&crash->compaction_us, (uint64_t)MAX(us, 0), __ATOMIC_RELAXED);
    uint64_t done = __atomic_add_fetch(&crash->compactions, 1, __ATOMIC_RELAXED);
    flog_debug("fs",
               "crash journal compaction %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
               " bytes to %" G_GUINT64_FORMAT " (%u records), %" G_GINT64_FORMAT " us of CPU",
               (guint64)done, (guint64)before, (guint64)used, live, (gint64)us);
}

/* Under crash->lock, after a record died: compacts when the dead records outweigh the live
 * ones (so the journal stays under twice the live records' bytes, past COMPACT_MIN_BYTES, and
 * each compaction copies at most as many bytes as have died since the one before). Not while
 * recovery writes its journal: the other half is the one it adopts from. */
static void maybe_compact_locked(struct fs_crash *crash)
{
    if (!crash->staging && crash->used >= COMPACT_MIN_BYTES &&
        crash->dead > crash->used - crash->dead)
        compact_locked(crash);
}

/* Under crash->lock. The record's offset, or NO_RECORD when the journal is full. */
static uint64_t append_locked(struct fs_crash *crash, const struct record *rec, const char *path)
{
    size_t path_len = path ? strlen(path) + 1 : 0;
    size_t len = (sizeof(*rec) + path_len + 7) & ~(size_t)7;
    struct crash_header *h = &crash->map->header;
    if (crash->used + len > JOURNAL_HALF && crash->dead > 0 && !crash->staging)
        compact_locked(crash);
    if (crash->used + len > JOURNAL_HALF) {
        if (!h->journal_full)
            flog_warn("fs",
                      "crash state: the journal is full (%llu bytes of live records); a crash "
                      "of this process now ends the mount",
                      (unsigned long long)crash->used);
        h->journal_full = 1;
        return NO_RECORD;
    }
    uint64_t offset = crash->used;
    uint8_t *at = half_start(crash, crash->half) + offset;
    memcpy(at, rec, sizeof(*rec));
    ((struct record *)at)->len = (uint32_t)len;
    if (path_len)
        memcpy(at + sizeof(*rec), path, path_len);
    crash->used += len;
    publish_locked(crash);
    return offset;
}

/* Under crash->lock: the record at offset reads REC_DEAD from now on (a successor skips it). */
static void kill_record_locked(struct fs_crash *crash, uint64_t offset)
{
    struct record *at = record_at(crash, offset);
    __atomic_store_n(&at->type, (uint32_t)REC_DEAD, __ATOMIC_RELEASE);
    crash->dead += at->len;
}

void crash_state_observe(void *user, enum inode_event event, const struct inode *inode)
{
    struct fs_crash *crash = user;
    gpointer ino = GSIZE_TO_POINTER((gsize)inode->ino);
    g_mutex_lock(&crash->lock);
    gpointer value;
    bool known = g_hash_table_lookup_extended(crash->live_records, ino, NULL, &value);
    uint64_t offset = (uint64_t)GPOINTER_TO_SIZE(value);
    switch (event) {
    case INODE_EVENT_NEW: {
        if (known) { /* one live NEW per number */
            g_hash_table_remove(crash->live_records, ino);
            kill_record_locked(crash, offset);
        }
        struct record rec = {
            .type = REC_NEW, .a = inode->ino, .e = (uint32_t)inode->kind, .f = inode->detached};
        offset = append_locked(crash, &rec, inode->path);
        if (offset != NO_RECORD)
            g_hash_table_replace(crash->live_records, ino, GSIZE_TO_POINTER((gsize)offset));
        break;
    }
    case INODE_EVENT_DETACH:
        /* In place: a successor reads the inode detached or not, both true at some point. */
        if (known)
            __atomic_store_n(&record_at(crash, offset)->f, 1u, __ATOMIC_RELEASE);
        break;
    case INODE_EVENT_GONE:
        if (known) {
            g_hash_table_remove(crash->live_records, ino);
            kill_record_locked(crash, offset);
        }
        break;
    }
    maybe_compact_locked(crash);
    g_mutex_unlock(&crash->lock);
}

/* Under crash->lock: fh's OPEN record, if any, reads REC_DEAD from now on (a successor skips
 * it) and its place is free for the next OPEN. */
static void mark_dead_locked(struct fs_crash *crash, uint64_t fh)
{
    gpointer value;
    if (!g_hash_table_lookup_extended(crash->open_records, &fh, NULL, &value))
        return;
    uint64_t offset = (uint64_t)GPOINTER_TO_SIZE(value);
    g_hash_table_remove(crash->open_records, &fh);
    kill_record_locked(crash, offset);
    g_array_append_val(crash->free_records, offset);
}

/* Recovery's journal (written to the other half while the dead process's one is read) is
 * complete: the header names it, and the dead process's half is freed. */
void fs_crash_publish(struct fs_crash *crash)
{
    g_mutex_lock(&crash->lock);
    if (crash->staging) {
        crash->staging = false;
        publish_locked(crash);
        free_half(crash, crash->half ^ 1);
    }
    g_mutex_unlock(&crash->lock);
}

/* Before the recovery reads the journal: from now on, appends go to the other half and are
 * not published until fs_crash_publish. */
void fs_crash_stage(struct fs_crash *crash)
{
    g_mutex_lock(&crash->lock);
    crash->staging = true;
    crash->half ^= 1;
    crash->used = crash->dead = 0;
    g_hash_table_remove_all(crash->live_records);
    g_hash_table_remove_all(crash->open_records);
    g_array_set_size(crash->free_records, 0);
    g_mutex_unlock(&crash->lock);
}

uint64_t fs_crash_journal_bytes(struct fs_crash *crash, uint64_t *compactions,
                                uint64_t *compaction_us)
{
    *compactions = __atomic_load_n(&crash->compactions, __ATOMIC_RELAXED);
    *compaction_us = __atomic_load_n(&crash->compaction_us, __ATOMIC_RELAXED);
    return __atomic_load_n(&crash->map->header.journal, __ATOMIC_ACQUIRE) & ~JOURNAL_HALF_BIT;
}

void fs_crash_handle_opened(struct fs *fs, void *handle, int kind, uint64_t fh)
{
    struct record rec = {.type = REC_OPEN, .a = fh, .e = (uint32_t)kind};
    if (kind == FS_HANDLE_DIR) {
        rec.b = ((struct fs_dir *)handle)->ino;
    } else {
        struct fs_file *file = handle;
        rec.b = file->inode->ino;
        rec.c = (uint64_t)file->object.generation;
        rec.d = file->object.size;
        rec.f = file->writable || file->lost;
        rec.g = file->object.crc32c;
        rec.h = file->object.has_crc32c;
    }
    /* A dead OPEN's place first (all OPENs have one size): filled while it still reads
     * REC_DEAD, then published, so a successor sees the whole record or none. Without the
     * reuse each open and close appended 112 bytes for the process's life (issue 24). */
    struct fs_crash *crash = fs->crash;
    g_mutex_lock(&crash->lock);
    mark_dead_locked(crash, fh); /* one live OPEN per number, wherever it sits */
    uint64_t offset;
    if (crash->free_records->len > 0) {
        offset = g_array_index(crash->free_records, uint64_t, crash->free_records->len - 1);
        g_array_set_size(crash->free_records, crash->free_records->len - 1);
        struct record *at = record_at(crash, offset);
        rec.len = at->len;
        crash->dead -= at->len;
        rec.type = REC_DEAD;
        memcpy(at, &rec, sizeof(rec));
        __atomic_store_n(&at->type, (uint32_t)REC_OPEN, __ATOMIC_RELEASE);
    } else {
        offset = append_locked(crash, &rec, NULL);
    }
    if (offset != NO_RECORD)
        g_hash_table_replace(crash->open_records, g_memdup2(&fh, sizeof(fh)),
                             GSIZE_TO_POINTER((gsize)offset));
    g_mutex_unlock(&crash->lock);
}

void fs_crash_handle_closed(struct fs *fs, uint64_t fh)
{
    struct fs_crash *crash = fs->crash;
    g_mutex_lock(&crash->lock);
    mark_dead_locked(crash, fh);
    maybe_compact_locked(crash);
    g_mutex_unlock(&crash->lock);
}
