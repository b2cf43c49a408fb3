/* Crash recovery's shared state, written on the hot path by the serving process: the INIT,
 * the requests in flight, the journal (the layout and the protocol: fs_crash.c's comment). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
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
    g_mutex_init(&crash->replay_lock);
    g_cond_init(&crash->replay_done);
    crash->replay_threads = g_ptr_array_new();
    if (crash->map->header.magic != CRASH_MAGIC) {
        crash->map->header.version = CRASH_VERSION;
        __atomic_store_n(&crash->map->header.magic, CRASH_MAGIC, __ATOMIC_RELEASE);
    }
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

/* Under crash->lock. The record's offset, or NO_RECORD when the journal is full. */
static uint64_t append_locked(struct fs_crash *crash, const struct record *rec, const char *path)
{
    size_t path_len = path ? strlen(path) + 1 : 0;
    size_t len = (sizeof(*rec) + path_len + 7) & ~(size_t)7;
    struct crash_header *h = &crash->map->header;
    uint64_t used = h->journal_used;
    if (used + len > JOURNAL_BYTES) {
        if (!h->journal_full)
            flog_warn("fs",
                      "crash state: the journal is full (%llu bytes); a crash of this "
                      "process now ends the mount",
                      (unsigned long long)JOURNAL_BYTES);
        h->journal_full = 1;
        return NO_RECORD;
    }
    uint8_t *at = crash->map->journal + used;
    memcpy(at, rec, sizeof(*rec));
    ((struct record *)at)->len = (uint32_t)len;
    if (path_len)
        memcpy(at + sizeof(*rec), path, path_len);
    __atomic_store_n(&h->journal_used, used + len, __ATOMIC_RELEASE);
    return used;
}

static void append(struct fs_crash *crash, const struct record *rec, const char *path)
{
    g_mutex_lock(&crash->lock);
    append_locked(crash, rec, path);
    g_mutex_unlock(&crash->lock);
}

void crash_state_observe(void *user, enum inode_event event, const struct inode *inode)
{
    struct fs_crash *crash = user;
    struct record rec = {.a = inode->ino};
    switch (event) {
    case INODE_EVENT_NEW:
        rec.type = REC_NEW;
        rec.e = (uint32_t)inode->kind;
        rec.f = inode->detached;
        append(crash, &rec, inode->path);
        break;
    case INODE_EVENT_DETACH:
        rec.type = REC_DETACH;
        append(crash, &rec, NULL);
        break;
    case INODE_EVENT_GONE:
        rec.type = REC_GONE;
        append(crash, &rec, NULL);
        break;
    }
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
    struct record *at = (struct record *)(crash->map->journal + offset);
    __atomic_store_n(&at->type, (uint32_t)REC_DEAD, __ATOMIC_RELEASE);
    g_array_append_val(crash->free_records, offset);
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
        struct record *at = (struct record *)(crash->map->journal + offset);
        rec.len = at->len;
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
    g_mutex_unlock(&crash->lock);
}
