/* Crash recovery (issue 24): under the supervisor (src/main/supervisor.c) the serving process
 * keeps, in a memfd the supervisor holds, what a successor needs when this process dies by a
 * signal (SIGKILL, abort, OOM kill). The supervisor keeps the /dev/fuse descriptor open, so the
 * kernel keeps the connection and the requests this process read and did not answer (they stay
 * on the descriptor's processing list: one descriptor, no clone_fd, see fs.c); the successor
 * answers them.
 *
 * The memfd (MAP_SHARED), written only by the serving process:
 *   header   magic, the INIT request and its reply (fs_gate.c captured them), counters, how
 *            many journal bytes are committed (a release store after each record)
 *   slots    the requests read and not answered: a hash of the request's unique (the kernel
 *            numbers them in steps of 2) with linear probing; a slot is claimed with a CAS
 *            (SLOT_BUSY), filled (the header and up to SLOT_BYTES of the request) and published
 *            with a release store of the unique; the reply clears it. A process killed between
 *            read(2) and the publication would lose that request, so each thread reads the
 *            request's first SLOT_BYTES into its own landing in the map (readv: the kernel
 *            copies them there), cleared once the slot holds the request; recovery takes the
 *            landings' requests that no slot holds
 *   journal  records of the inode table's membership (NEW ino kind path, DETACH, GONE: the
 *            table's observer, under its lock, so in the table's order) and of open handles
 *            (OPEN fh ino ...: under handles_lock, before the kernel hears of them; a close
 *            marks its OPEN dead in place, and the next OPEN takes that place: the journal
 *            grows with the handles open at once, not with every open; handles are matched
 *            with their inodes after the whole journal is read, so an OPEN may sit before
 *            its inode's NEW). A DETACH sets its NEW's detached flag in place, a GONE marks
 *            its NEW dead. When the dead records outweigh the live ones (past
 *            COMPACT_MIN_BYTES), the live ones are copied to the start of the journal area's
 *            other half and one release store of the header's journal word (half, bytes)
 *            switches to them; the old half is then freed (MADV_REMOVE). A kill before that
 *            store leaves the old half named and untouched, after it the new one whole: the
 *            journal stays under about twice its live records, whatever the inode churn
 *
 * Recovery (the successor, single-threaded before its session loop): replays the journal into
 * the hand-over's state (fs_handover.c builds and adopts it: one adoption code path), with a
 * lookup count no FORGET can bring to 0 (the true count is not kept: an inode known at the
 * crash stays until unmount), starts a fresh journal from what it adopted (in the other half,
 * named by the header only once whole), then for each
 * request left in the slots: LOOKUP, GETATTR, READ, READDIR(PLUS), OPEN/OPENDIR without write
 * flags, STATFS, READLINK, ACCESS, xattrs, and RELEASE/RELEASEDIR/FLUSH of an adopted handle are
 * served again; RELEASE/RELEASEDIR of a handle already closed are answered 0; everything else
 * (writes, creates, renames...) is answered EIO. Files open for writing are adopted lost: their
 * bytes lived in the dead process; their next write, flush, fsync fails with EIO (fs_write.c),
 * so no close ever reports a short object as written. */
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

#include "fluxfs/fd_pass.h"
#include "fluxfs/log.h"
#include "fs-internal.h"
#include "crash_state.h"

void fs_crash_start(struct fs *fs)
{
    if (!fs->crash)
        return;
    inode_table_set_observer(fs->inodes, crash_state_observe, fs->crash);
    fs_gate_set_crash(fs->gate, fs->crash);
    for (int after_reply = 0; after_reply <= 1; after_reply++) {
        const char *name =
            after_reply ? "FLUXFS_TEST_KILL_AFTER_REPLY" : "FLUXFS_TEST_KILL_AFTER_READ";
        const char *hook = g_getenv(name);
        unsigned opcode = 0;
        unsigned long long nth = 0;
        if (!hook || fs->cfg->crash_restarts != 0 || sscanf(hook, "%u:%llu", &opcode, &nth) != 2 ||
            opcode == 0 || nth == 0)
            continue;
        flog_warn("fs",
                  "test hook: this process kills itself after %s request %llu of opcode %u "
                  "(%s)",
                  after_reply ? "answering" : "reading", nth, opcode, name);
        if (after_reply)
            fs_gate_set_kill_after_reply(fs->gate, opcode, nth);
        else
            fs_gate_set_kill_after_read(fs->gate, opcode, nth);
    }
    const char *hook = g_getenv("FLUXFS_TEST_KILL_IN_COMPACTION");
    unsigned long long nth = 0;
    unsigned phase = 0;
    if (hook && fs->cfg->crash_restarts == 0 && sscanf(hook, "%llu:%u", &nth, &phase) == 2 &&
        nth > 0 && phase >= 1 && phase <= 3) {
        flog_warn("fs",
                  "test hook: this process kills itself in journal compaction %llu, phase %u "
                  "(FLUXFS_TEST_KILL_IN_COMPACTION)",
                  nth, phase);
        fs->crash->kill_compaction = nth;
        fs->crash->kill_phase = phase;
    }
}

/* The gate reads it non-blocking (fs_gate.c: a killed thread must not take a request). */
int fs_crash_device_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int fs_crash_serving(struct fs *fs, int sock)
{
    if (!fs->crash)
        return 0;
    fs->crash->map->header.handovers = fs->handovers;
    if (sock < 0)
        return 0;
    /* The supervisor keeps the descriptor: the connection outlives this process. */
    int fd = fuse_session_fd(fs->session);
    char byte = 'D';
    ssize_t sent = fd_pass_send(sock, &byte, 1, fd);
    if (sent < 0) {
        flog_warn("fs",
                  "cannot pass the FUSE descriptor to the supervisor: %s (a crash of "
                  "this process ends the mount)",
                  g_strerror((int)-sent));
        return (int)sent;
    }
    return 0;
}

/* ---- recovery ---- */

struct known_inode {
    uint32_t kind;
    bool detached;
    char *path;
};

static void known_inode_free(gpointer data)
{
    struct known_inode *k = data;
    g_free(k->path);
    g_free(k);
}

static bool safe_again(const struct fuse_in_header *in, const void *arg, size_t arg_len)
{
    switch (in->opcode) {
    case FUSE_LOOKUP:
    case FUSE_GETATTR:
    case FUSE_READ:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
    case FUSE_OPENDIR:
    case FUSE_STATFS:
    case FUSE_READLINK:
    case FUSE_ACCESS:
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
        return true;
    case FUSE_OPEN:
        return arg_len >= sizeof(struct fuse_open_in) &&
               (((const struct fuse_open_in *)arg)->flags & (O_ACCMODE | O_TRUNC)) == O_RDONLY;
    default:
        return false;
    }
}

/* The handle number a RELEASE/RELEASEDIR/FLUSH names, or 0. */
static uint64_t request_fh(const struct fuse_in_header *in, const void *arg, size_t arg_len)
{
    if ((in->opcode == FUSE_RELEASE || in->opcode == FUSE_RELEASEDIR) &&
        arg_len >= sizeof(struct fuse_release_in))
        return ((const struct fuse_release_in *)arg)->fh;
    if (in->opcode == FUSE_FLUSH && arg_len >= sizeof(struct fuse_flush_in))
        return ((const struct fuse_flush_in *)arg)->fh;
    return 0;
}

static bool handle_adopted(struct fs *fs, uint64_t fh)
{
    g_mutex_lock(&fs->handles_lock);
    bool known = fs->handle_aliases && g_hash_table_contains(fs->handle_aliases, &fh);
    g_mutex_unlock(&fs->handles_lock);
    return known;
}

static void answer(struct fs *fs, uint64_t unique, int error)
{
    struct fuse_out_header out = {.len = sizeof(out), .error = error, .unique = unique};
    struct iovec iov = {.iov_base = &out, .iov_len = sizeof(out)};
    fs_gate_writev(fs->gate, fuse_session_fd(fs->session), &iov, 1);
}

struct pending {
    uint64_t len;
    uint8_t bytes[SLOT_BYTES]; /* 8-aligned: read as struct fuse_in_header */
};

struct replay {
    struct fs *fs;
    struct pending *request;
    bool counted; /* in fs->crash->replays: a RELEASE waits for it */
};

/* A request served again may be one the dead process had answered already (killed between
 * its reply and clearing the slot): its caller has gone on and may close the handle the
 * request names while it is served again here. The RELEASE/RELEASEDIR that frees the handle
 * waits for such requests (fs_crash_release_wait, crash_state.c); ASan saw a READDIRPLUS served
 * again read a directory handle that a RELEASEDIR had freed. */
static gpointer replay_main(gpointer data)
{
    struct replay *replay = data;
    struct fuse_buf buf = {.mem = replay->request->bytes, .size = replay->request->len};
    fuse_session_process_buf(replay->fs->session, &buf);
    if (replay->counted)
        fs_crash_replay_end(replay->fs->crash);
    g_free(replay->request);
    g_free(replay);
    return NULL;
}

/* Journals what was adopted (the journal restarts from it). */
static void journal_adopted(struct fs *fs)
{
    g_mutex_lock(&fs->handles_lock);
    GHashTableIter iter;
    gpointer handle, kind;
    g_hash_table_iter_init(&iter, fs->open_handles);
    while (g_hash_table_iter_next(&iter, &handle, &kind))
        fs_crash_handle_opened(fs, handle, GPOINTER_TO_INT(kind),
                               fs_handle_number_locked(fs, handle));
    g_mutex_unlock(&fs->handles_lock);
}

int fs_crash_recover(struct fs *fs, char **error)
{
    struct crash_map *map = fs->crash->map;
    struct crash_header *h = &map->header;
    if (h->journal_full) {
        *error = g_strdup("the crash journal had filled up");
        return -ENOSPC;
    }
    if (h->init_reply_len == 0) {
        *error = g_strdup("the process before died before the kernel's INIT was answered");
        return -EPROTO;
    }
    /* The journal, replayed. */
    GHashTable *inodes =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, known_inode_free);
    GHashTable *handles = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    /* The half the header names (version 2: the one journal, at half 0's place). */
    uint64_t word = __atomic_load_n(&h->journal, __ATOMIC_ACQUIRE);
    uint64_t half = (word & JOURNAL_HALF_BIT) ? 1 : 0;
    const uint8_t *journal = map->journal + half * JOURNAL_HALF;
    uint64_t used = MIN(word & ~JOURNAL_HALF_BIT, JOURNAL_BYTES - half * JOURNAL_HALF);
    uint64_t next_ino = INODE_ROOT_ID + 1, next_alias = 1;
    for (uint64_t at = 0; at + sizeof(struct record) <= used;) {
        const struct record *rec = (const void *)(journal + at);
        if (rec->len < sizeof(*rec) || at + rec->len > used)
            break;
        at += rec->len;
        uint64_t key = rec->a;
        switch (rec->type) {
        case REC_NEW: {
            struct known_inode *k = g_new0(struct known_inode, 1);
            k->kind = rec->e;
            k->detached = rec->f;
            k->path = g_strndup((const char *)(rec + 1), rec->len - sizeof(*rec));
            g_hash_table_replace(inodes, g_memdup2(&key, sizeof(key)), k);
            next_ino = MAX(next_ino, key + 1);
            break;
        }
        case REC_DETACH: {
            struct known_inode *k = g_hash_table_lookup(inodes, &key);
            if (k)
                k->detached = true;
            break;
        }
        case REC_GONE:
            g_hash_table_remove(inodes, &key);
            break;
        case REC_OPEN:
            g_hash_table_replace(handles, g_memdup2(&key, sizeof(key)),
                                 g_memdup2(rec, sizeof(*rec)));
            if (key & 1)
                next_alias = MAX(next_alias, key + 2);
            break;
        case REC_CLOSE:
            g_hash_table_remove(handles, &key);
            break;
        case REC_DEAD: /* a closed handle's OPEN */
            break;
        }
    }
    GVariantBuilder vi, vf, vd;
    fs_handover_builders_init(&vi, &vf, &vd);
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, inodes);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct known_inode *k = value;
        fs_handover_add_inode(&vi, *(uint64_t *)key, k->kind, k->path, k->detached,
                              NLOOKUP_ADOPTED);
    }
    size_t files = 0, dirs = 0, lost = 0;
    g_hash_table_iter_init(&iter, handles);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const struct record *rec = value;
        if (!g_hash_table_contains(inodes, &rec->b))
            continue;
        if (rec->e == FS_HANDLE_DIR) {
            fs_handover_add_dir(&vd, rec->a, rec->b);
            dirs++;
        } else {
            fs_handover_add_file(&vf, rec->a, rec->b, rec->f != 0, (int64_t)rec->c, rec->d,
                                 rec->h != 0, rec->g);
            files++;
            lost += rec->f != 0;
        }
    }
    /* The requests in flight, copied out before the slots are reused. */
    GArray *pending = g_array_new(FALSE, FALSE, sizeof(struct pending));
    for (size_t i = 0; i < SLOT_COUNT; i++) {
        struct crash_slot *slot = &map->slots[i];
        uint64_t unique = slot->unique;
        if (unique != 0 && unique != SLOT_BUSY && slot->stored >= sizeof(struct fuse_in_header)) {
            struct pending p = {.len = slot->stored < slot->len ? 0 : slot->len};
            memcpy(p.bytes, slot->bytes, slot->stored);
            if (p.len == 0) /* not all kept: only its header, for the EIO */
                memcpy(p.bytes, slot->bytes, sizeof(struct fuse_in_header));
            g_array_append_val(pending, p);
        }
        slot->unique = 0;
    }
    /* Requests read into a thread's landing and not yet in a slot when the process died (a
     * kill between read(2) and the slot's publication). One already in a slot is there twice:
     * the slot's copy counts. */
    size_t landed = 0;
    for (size_t i = 0; i < LANDING_COUNT; i++) {
        struct crash_landing *landing = &map->landings[i];
        struct fuse_in_header *in = (void *)landing->bytes;
        bool known = in->unique == 0;
        for (guint j = 0; !known && j < pending->len; j++)
            known = ((const struct fuse_in_header *)g_array_index(pending, struct pending, j).bytes)
                        ->unique == in->unique;
        if (landing->owner && !known && in->len >= sizeof(*in) && in->opcode != FUSE_INIT &&
            fs_gate_needs_reply(in->opcode)) {
            struct pending p = {.len = in->len <= SLOT_BYTES ? in->len : 0};
            memcpy(p.bytes, landing->bytes, p.len ? p.len : sizeof(*in));
            g_array_append_val(pending, p);
            landed++;
        }
        in->unique = 0;
        landing->owner = 0;
    }
    GBytes *init_request = g_bytes_new(h->init_request, h->init_request_len);
    GBytes *init_reply = g_bytes_new(h->init_reply, h->init_reply_len);
    struct fs_handover_state *state = fs_handover_state_build(
        fs, init_request, init_reply, h->handovers, next_ino, next_alias, &vi, &vf, &vd);
    g_bytes_unref(init_request);
    g_bytes_unref(init_reply);
    size_t adopted_inodes = g_hash_table_size(inodes);
    g_hash_table_destroy(inodes);
    g_hash_table_destroy(handles);
    /* A fresh journal in the other half: the adoption below writes its NEWs, then the
     * handles, and the header names it once it is whole (fs_crash_publish); a process killed
     * before leaves the dead one's journal to its successor. */
    fs_crash_stage(fs->crash);
    fs_crash_start(fs);
    uint64_t handovers = h->handovers;
    int rc = fs_handover_restore(fs, state, error);
    fs_handover_state_free(state);
    fs->handovers = handovers;
    if (rc == 0) {
        journal_adopted(fs);
        fs_crash_publish(fs->crash);
        fs_control_adopt_inodes(fs);
    }
    size_t again = 0, failed = 0;
    GPtrArray *replays = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; rc == 0 && i < pending->len; i++) {
        struct pending *p = &g_array_index(pending, struct pending, i);
        const struct fuse_in_header *in = (const void *)p->bytes;
        const void *arg = p->bytes + sizeof(*in);
        size_t arg_len = p->len > sizeof(*in) ? p->len - sizeof(*in) : 0;
        uint64_t fh = request_fh(in, arg, arg_len);
        bool serve =
            p->len > 0 && (safe_again(in, arg, arg_len) || (fh != 0 && handle_adopted(fs, fh)));
        fs_gate_expect(fs->gate); /* each is answered once below */
        if (!serve && p->len > 0 && fh != 0 &&
            (in->opcode == FUSE_RELEASE || in->opcode == FUSE_RELEASEDIR)) {
            answer(fs, in->unique, 0); /* closed already: journaled before it was answered */
            continue;
        }
        if (!serve) {
            flog_info("fs",
                      "request %" G_GUINT64_FORMAT " (opcode %u) taken by the dead process: "
                      "answered EIO",
                      (guint64)in->unique, in->opcode);
            answer(fs, in->unique, -EIO);
            failed++;
            continue;
        }
        fs_crash_request_read(fs->crash, p->bytes, p->len); /* carried if this one dies too */
        g_ptr_array_add(replays, g_memdup2(p, sizeof(*p)));
        again++;
    }
    /* Served again beside the session loop, not before it: an answer may wait on a page lock
     * that a reader holds until a request still queued is answered. */
    for (guint i = 0; i < replays->len; i++) {
        /* Each in its own thread: one may wait for another (a page lock a READ holds). */
        struct replay *replay = g_new0(struct replay, 1);
        replay->fs = fs;
        replay->request = g_ptr_array_steal_index_fast(replays, i--);
        uint32_t opcode = ((const struct fuse_in_header *)replay->request->bytes)->opcode;
        replay->counted = opcode != FUSE_RELEASE && opcode != FUSE_RELEASEDIR;
        if (replay->counted)
            fs_crash_replay_begin(fs->crash);
        g_ptr_array_add(fs->crash->replay_threads,
                        g_thread_new("fluxfs-replay", replay_main, replay));
    }
    g_ptr_array_free(replays, TRUE);
    if (rc == 0)
        flog_warn("fs",
                  "took over %s after the serving process died: %zu inodes, %zu open files "
                  "(%zu open for writing, now failing with EIO), %zu directories carried; "
                  "%zu requests served again, %zu answered EIO (%zu of them read and not yet "
                  "recorded)",
                  fs->cfg->mountpoint, adopted_inodes, files, lost, dirs, again, failed, landed);
    g_array_free(pending, TRUE);
    return rc;
}
