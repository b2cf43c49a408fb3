/* The FUSE operations that change things: create, write, flush/fsync (commit), release of
 * written handles, setattr (truncate, utimens, chmod/chown), mknod, mkdir, rmdir, unlink,
 * symlink, rename. Files being written are struct fs_open_writer, one per inode, shared by
 * every handle of that inode (so reads of any handle see what was written); the writer
 * (io/writer.h) holds the bytes and uploads them.
 *
 * The ownership, lock and commit model of the write path is written above struct
 * fs_open_writer below; the man page (COMMITS) and docs/semantics.md say the same for users.
 * The kernel's caches: changes made through the mount are known to the kernel, except that
 * a renamed inode keeps its old path here; the new name's dentry is invalidated by the
 * notifier thread after the reply (fs_notify.c: no handler notifies the kernel).
 *
 * A commit that fails for good (412: another writer won; 5xx past the retries) leaves the
 * name as the bucket has it, not as this mount last saw it: the writer leaves by_ino (its
 * handles keep it; a new open starts from the bucket), the name's cached metadata and the
 * inode's attributes are dropped, and the kernel's attributes, pages and dentry, which may
 * hold the failed writer's size and bytes, are invalidated (drop_failed_commit). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fluxfs/log.h"
#include "fluxfs/mime.h"
#include "fluxfs/name_map.h"
#include "fluxfs/writer.h"
#include "fluxfs/timens.h"
#include "fluxfs/crc32c.h"
#include "fs-internal.h"

#define FS_WRITE_READ_MAX (16u << 20)

/* ==== The write path's model: ownership, locks, commits ====
 *
 * Shared objects and their owners
 * - struct fs_open_writer: one per inode being written, shared by every handle of it. Counted
 *   (refs): the by_ino table's entry holds one while it is attached, each handle
 *   (struct fs_file.writer) one, and each lookup in progress one (open_writer_find). The last
 *   reference frees it (open_writer_unref), never earlier: every lookup of the table returns
 *   a reference, released by the caller, and no pointer found in the table is used after
 *   writes->lock is dropped without one.
 * - struct writer (io/writer.h): owned by its fs_open_writer, freed with it. Its own lock
 *   serializes every writer_* call; a commit holds it for the whole upload. writer_size,
 *   writer_dirty and writer_unlinked read atomics and never wait.
 * - struct fs_file (a kernel handle): owned by the kernel's handle until RELEASE (or the
 *   session's end, fs.c); the kernel never sends RELEASE while another request of the same
 *   handle runs. Its commit-rights fields (owners, last_change) are atomics.
 * - struct inode: counted by the inode table (inode_get/inode_put); attr_lock guards its
 *   attributes and kernel_cache_generation.
 * - struct dir_listing: immutable once made, counted (dir_listing_ref/unref).
 *
 * Locks of the write path, in the only order they may be taken (an earlier one may be held
 * while taking a later one, never the reverse; the whole daemon's order: docs/locking.md):
 *   1. writer->lock (io/writer.c)        one file's content and upload; held across I/O
 *   2. fs_writes.lock                    by_ino, renamed, every fs_open_writer's refs,
 *                                        handles and attached; held for table work only
 *   3. inode table / namespace / metadata cache locks (core)   short, no I/O
 *   4. inode->attr_lock                  short, no I/O
 *   5. writer_shared->lock (io/writer.c) parts in flight, buffer budget; gcs callbacks
 * Rules: fs_writes.lock (mount-wide) is never held while calling anything that may block: no
 * writer_* call except the three lock-free readers, no I/O, no wait on a per-file lock, no
 * kernel notification. writer->lock is the only lock of this list held across I/O: a commit,
 * the start or abandonment of a stream, a fetch of the object into the staging file, and
 * waits for upload slots or buffer budget that other files' parts release (writer_shared's
 * condition; its lock is not held meanwhile). So one file's upload may slow another file's
 * writes (they share the caps), but it never delays a lookup, stat or listing of another file
 * (nor a stat of itself: its size is an atomic). The last reference to an fs_open_writer is
 * dropped wherever it happens to be (a LOOKUP may hold one), but the writer is freed on the
 * reaper thread: writer_free waits for aborts and deletes, which no request handler may.
 *
 * Kernel notifications: never from a request handler (FLUSH, RENAME, READ...): the kernel may
 * hold the very locks they need for a request that waits on us. They are queued to the
 * notifier thread (fs_notify.c). Exceptions: an attributes-only invalidation (offset -1: the
 * kernel takes no inode, page or directory lock for it), and the store of a small object at
 * OPEN (fs_ops.c: no page or directory lock is held during OPEN).
 *
 * Commits (which close uploads)
 * - The kernel sends FLUSH for every close() of every duplicate of a descriptor, including a
 *   forked child's exit and a subprocess's. A FLUSH commits only when it comes from a process
 *   that opened the handle for writing or wrote through it, and the handle has changes that no
 *   commit covered yet (last_change > committed_change); other FLUSHes do nothing.
 * - A FLUSH from a process that is being killed by a signal (its exit in progress, its exit
 *   status a signal: SIGKILL, an unhandled SIGTERM) commits nothing: the writer is abandoned
 *   (detached like a failed commit, its changes dropped at the last RELEASE): a killed
 *   torch.save leaves the previous version, never a torn one.
 * - fsync commits what is pending, whoever asks.
 * - The last RELEASE of a file commits what is still pending (changes whose FLUSH did not
 *   commit them, e.g. a non-writer's close came last); an error is logged (nobody waits).
 * - A commit that fails detaches the writer (drop_failed_commit): no later close turns it
 *   into an object behind the application's back.
 * - At the end of the shutdown grace, every file still open is committed and sealed in one
 *   hold of its writer lock (writer_commit_sealed): later writes fail with EIO, so none is
 *   acknowledged and then lost.
 * The bucket only ever holds whole versions: every commit is one atomic object write with
 * ifGenerationMatch. */
struct fs_open_writer {
    uint64_t ino;                 /* immutable */
    struct inode *inode;          /* immutable, counted reference */
    char *path;                   /* immutable */
    struct writer *writer;        /* immutable; its own lock */
    unsigned refs;                /* fs_writes.lock: table entry + handles + lookups */
    unsigned handles;             /* fs_writes.lock: kernel handles using it */
    bool attached;                /* fs_writes.lock: the entry of by_ino */
    int64_t change_seq;           /* atomic: changes made through handles (1, 2, ...) */
    int64_t committed_seq;        /* atomic: change_seq covered by the last commit */
    int abandoned;                /* atomic: its writer process was killed: no close commits */
};

struct fs_writes {
    GMutex lock;
    GHashTable *by_ino;           /* uint64_t* -> struct fs_open_writer * (one reference) */
    struct writer_shared *shared;
    struct writer_config config;  /* strings below */
    char *tmp_prefix;
    char *temp_root;
    bool chmod_refuse;
    GHashTable *renamed;          /* lock: inode numbers whose path was renamed away */
    GThreadPool *reaper;          /* one thread: frees fs_open_writers (open_writer_unref) */
};

static struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* The kernel's dentry of path (when its parent has an inode here), from the notifier. */
static void invalidate_path_entry(struct fs *fs, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *parent_path = slash ? g_strndup(path, (gsize)(slash - path)) : g_strdup("");
    uint64_t parent = *parent_path ? inode_table_find_path(fs->inodes, parent_path)
                                   : FUSE_ROOT_ID;
    const char *name = slash ? slash + 1 : path;
    if (parent)
        fs_notify_inval_entry(fs, parent, name);
    g_free(parent_path);
}

static void open_writer_free(gpointer data, gpointer user);

static enum writer_upload_mode parse_upload_mode(const char *text)
{
    if (!text || strcmp(text, "auto") == 0)
        return WRITER_UPLOAD_AUTO;
    if (strcmp(text, "multipart") == 0)
        return WRITER_UPLOAD_MULTIPART;
    if (strcmp(text, "composite") == 0)
        return WRITER_UPLOAD_COMPOSITE;
    return WRITER_UPLOAD_RESUMABLE;
}

void fs_writes_init(struct fs *fs)
{
    const struct fluxfs_options *opts = fs->opts;
    struct fs_writes *writes = g_new0(struct fs_writes, 1);
    g_mutex_init(&writes->lock);
    writes->by_ino = g_hash_table_new(g_int64_hash, g_int64_equal);
    writes->renamed = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    const char *prefix = opts->prefix ? opts->prefix : "";
    writes->temp_root = g_strdup_printf("%s%s/tmp/", prefix, NAME_MAP_RESERVED_ROOT_NAME);
    writes->tmp_prefix = g_strdup_printf("%s%08x%08x/", writes->temp_root, g_random_int(),
                                         (unsigned)g_get_real_time());
    writes->shared = writer_shared_new(fs->client, opts->write_max_parts_in_flight > 0
                                                       ? (unsigned)opts->write_max_parts_in_flight
                                                       : 64,
                                       opts->write_buffer_size);
    writes->config.part_size = opts->write_part_size ? opts->write_part_size : 16u << 20;
    writes->config.small_threshold = opts->write_small_threshold;
    writes->config.max_parts_in_flight =
        opts->write_parts_in_flight > 0 ? (unsigned)opts->write_parts_in_flight : 16;
    writes->config.mode = parse_upload_mode(opts->upload_mode);
    writes->config.temp_dir = opts->temp_dir;
    writes->config.no_memory_buffers = opts->write_buffer_size == 0;
    writes->config.tmp_prefix = writes->tmp_prefix;
    writes->chmod_refuse = opts->chmod_policy && strcmp(opts->chmod_policy, "refuse") == 0;
    writes->reaper = g_thread_pool_new(open_writer_free, fs, 1, FALSE, NULL);
    fs->writes = writes;
    if (!opts->read_only) {
        int rc = writer_cleanup_stale(fs->client, prefix, writes->temp_root,
                                      opts->upload_cleanup_age_s);
        if (rc < 0)
            flog_warn("fs", "cleanup of stale uploads under '%s' failed: %s", writes->temp_root,
                      g_strerror(-rc));
        /* Before the mount serves anything: no listing shows a file of an interrupted
         * directory rename twice. One list request when there is none. */
        fs_rename_recover(fs->client, prefix);
    }
}

void fs_writes_clear(struct fs *fs)
{
    struct fs_writes *writes = fs->writes;
    if (!writes)
        return;
    g_thread_pool_free(writes->reaper, FALSE, TRUE); /* what was dropped is freed first */
    /* A directory rename of this mount stopped part way: finish it now if the bucket lets
     * us, so a clean unmount leaves nothing for the next mount to do. */
    if (g_atomic_int_get(&fs->renames_unfinished) && !fs->opts->read_only)
        fs_rename_recover(fs->client, fs->opts->prefix ? fs->opts->prefix : "");
    /* Every handle was released by now (FUSE destroy frees those the kernel never released,
     * committing what they had pending), so only the table's own references are left. */
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, writes->by_ino);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct fs_open_writer *open_writer = value;
        g_assert(open_writer->refs == 1 && open_writer->handles == 0);
        writer_free(open_writer->writer);
        inode_put(fs->inodes, open_writer->inode);
        g_free(open_writer->path);
        g_free(open_writer);
    }
    g_hash_table_destroy(writes->by_ino);
    g_hash_table_destroy(writes->renamed);
    writer_shared_free(writes->shared);
    g_free(writes->tmp_prefix);
    g_free(writes->temp_root);
    g_mutex_clear(&writes->lock);
    g_free(writes);
    fs->writes = NULL;
}

size_t fs_write_open_count(struct fs *fs)
{
    struct fs_writes *writes = fs->writes;
    if (!writes)
        return 0;
    g_mutex_lock(&writes->lock);
    size_t count = g_hash_table_size(writes->by_ino);
    g_mutex_unlock(&writes->lock);
    return count;
}

void fs_write_buffer_stats(struct fs *fs, struct writer_buffer_stats *out)
{
    *out = (struct writer_buffer_stats){0};
    if (fs->writes)
        writer_shared_get_buffer_stats(fs->writes->shared, out);
}

/* ---- the table of files being written ---- */

/* The writer of ino with a reference for the caller (open_writer_unref), and one handle more
 * when add_handle; NULL when ino is not being written. */
static struct fs_open_writer *open_writer_find(struct fs *fs, uint64_t ino, bool add_handle)
{
    g_mutex_lock(&fs->writes->lock);
    struct fs_open_writer *open_writer = g_hash_table_lookup(fs->writes->by_ino, &ino);
    if (open_writer) {
        open_writer->refs++;
        if (add_handle)
            open_writer->handles++;
    }
    g_mutex_unlock(&fs->writes->lock);
    return open_writer;
}

/* On the reaper thread: writer_free may wait for an abort and temporary deletes. */
static void open_writer_free(gpointer data, gpointer user)
{
    struct fs_open_writer *open_writer = data;
    struct fs *fs = user;
    writer_free(open_writer->writer);
    inode_put(fs->inodes, open_writer->inode);
    g_free(open_writer->path);
    g_free(open_writer);
}

static void open_writer_unref(struct fs *fs, struct fs_open_writer *open_writer)
{
    if (!open_writer)
        return;
    g_mutex_lock(&fs->writes->lock);
    g_assert(open_writer->refs > 0);
    bool last = --open_writer->refs == 0;
    g_mutex_unlock(&fs->writes->lock);
    if (!last)
        return;
    g_assert(!open_writer->attached && open_writer->handles == 0);
    g_thread_pool_push(fs->writes->reaper, open_writer, NULL);
}

/* Takes open_writer out of by_ino (its handles keep it; a new open starts from the bucket).
 * Caller holds fs_writes.lock and a reference of its own. */
static void open_writer_detach_locked(struct fs *fs, struct fs_open_writer *open_writer)
{
    if (!open_writer->attached)
        return;
    if (g_hash_table_lookup(fs->writes->by_ino, &open_writer->ino) == open_writer)
        g_hash_table_remove(fs->writes->by_ino, &open_writer->ino);
    open_writer->attached = false;
    g_assert(open_writer->refs > 1);
    open_writer->refs--; /* the table's */
}

bool fs_write_active(struct fs *fs, uint64_t ino)
{
    if (!fs->writes)
        return false;
    g_mutex_lock(&fs->writes->lock);
    bool active = g_hash_table_contains(fs->writes->by_ino, &ino);
    g_mutex_unlock(&fs->writes->lock);
    return active;
}

static bool was_renamed(struct fs *fs, uint64_t ino);

int fs_write_resolve(struct fs *fs, const char *path, enum meta_kind *kind,
                     struct meta_attrs *attrs)
{
    uint64_t ino = fs->writes ? inode_table_find_path(fs->inodes, path) : 0;
    struct fs_open_writer *open_writer = ino ? open_writer_find(fs, ino, false) : NULL;
    if (open_writer && !writer_unlinked(open_writer->writer) && !was_renamed(fs, ino)) {
        struct inode *inode = inode_table_get(fs->inodes, ino);
        if (inode) {
            if (attrs) {
                inode_get_attrs(inode, attrs, NULL);
                attrs->size = writer_size(open_writer->writer);
            }
            inode_put(fs->inodes, inode);
            open_writer_unref(fs, open_writer);
            *kind = META_FILE;
            return 0;
        }
    }
    open_writer_unref(fs, open_writer);
    return namespace_resolve(fs->ns, path, kind, attrs);
}

/* Gets or makes the writer of inode with one handle counted. The inode reference is the
 * caller's (the table takes its own). known_absent: the caller just found no object at the
 * path (a negative entry, a cached listing or a probe): it is a new object, committed with
 * ifGenerationMatch=0, with no objects.get to ask again (a race with another creator fails
 * that commit: close reports ESTALE). */
static int writer_for_inode(struct fs *fs, struct inode *inode, bool truncate,
                            bool known_absent, struct fs_open_writer **out)
{
    struct fs_open_writer *open_writer = open_writer_find(fs, inode->ino, true);
    if (open_writer && known_absent && writer_unlinked(open_writer->writer)) {
        /* A create of a name whose previous file was unlinked while open and whose last
         * RELEASE (asynchronous) has not come yet: the name is a new file now, not that one
         * (whose commits do nothing). A reopen of the unlinked file itself (/proc/PID/fd)
         * keeps it. */
        g_mutex_lock(&fs->writes->lock);
        open_writer->handles--;
        open_writer_detach_locked(fs, open_writer);
        g_mutex_unlock(&fs->writes->lock);
        open_writer_unref(fs, open_writer);
        open_writer = NULL;
    }
    if (open_writer) {
        int rc = truncate ? writer_truncate(open_writer->writer, 0) : 0;
        if (rc < 0) {
            fs_write_release(fs, &(struct fs_file){.writer = open_writer});
            return rc;
        }
        *out = open_writer;
        return 0;
    }
    struct writer_base base = {0};
    enum meta_kind kind;
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    int rc = known_absent ? -ENOENT : namespace_stat_file(fs->ns, inode->path, &kind, &attrs);
    if (rc == 0) {
        base.exists = true;
        base.generation = attrs.generation;
        base.size = attrs.size;
        meta_attrs_clear(&attrs);
    } else if (rc != -ENOENT) {
        return rc;
    }
    char *object_name = namespace_object_name(fs->ns, inode->path);
    struct writer *writer = NULL;
    rc = writer_new(fs->writes->shared, &fs->writes->config, object_name, &base, truncate,
                    &writer);
    g_free(object_name);
    if (rc < 0)
        return rc;
    struct fs_open_writer *made = g_new0(struct fs_open_writer, 1);
    made->ino = inode->ino;
    made->path = g_strdup(inode->path);
    made->writer = writer;
    made->handles = 1;
    made->refs = 2; /* the table's and the handle's */
    made->attached = true;
    g_mutex_lock(&fs->writes->lock);
    open_writer = g_hash_table_lookup(fs->writes->by_ino, &inode->ino);
    if (open_writer) {
        open_writer->handles++; /* another open won the race */
        open_writer->refs++;
    } else {
        made->inode = inode_table_get(fs->inodes, inode->ino);
        g_hash_table_insert(fs->writes->by_ino, &made->ino, made);
    }
    g_mutex_unlock(&fs->writes->lock);
    if (open_writer) {
        writer_free(made->writer);
        g_free(made->path);
        g_free(made);
        made = open_writer;
        if (truncate && (rc = writer_truncate(made->writer, 0)) < 0) {
            fs_write_release(fs, &(struct fs_file){.writer = made});
            return rc;
        }
    }
    *out = made;
    return 0;
}

/* After a commit that failed: nothing here may go on showing the name as this mount last saw
 * it or as the failed writer made it. The bucket holds the previous version or another
 * writer's object, and the next open or stat must ask it: the writer leaves by_ino (open
 * handles keep reading and writing it; a later commit of it may still succeed and publish),
 * the name's cached metadata and listing entry go, the inode's attributes are marked old and
 * the kernel's pages suspect (the next open drops them), and the kernel's attributes (which
 * follow the failed writer's size) and dentry are invalidated (from the notifier thread). The
 * caller holds a reference. */
static void drop_failed_commit(struct fs *fs, struct fs_open_writer *open_writer)
{
    g_mutex_lock(&fs->writes->lock);
    open_writer_detach_locked(fs, open_writer);
    g_mutex_unlock(&fs->writes->lock);
    namespace_invalidate(fs->ns, open_writer->path);
    struct inode *inode = open_writer->inode;
    if (inode) {
        struct meta_attrs attrs;
        inode_get_attrs(inode, &attrs, NULL);
        inode_set_attrs(inode, &attrs, 0); /* fetched long ago: the next use asks again */
        meta_attrs_clear(&attrs);
        g_mutex_lock(&inode->attr_lock);
        inode->kernel_cache_generation = FS_KERNEL_CACHE_SUSPECT;
        g_mutex_unlock(&inode->attr_lock);
    }
    /* The attributes at once (attributes only: no lock the kernel could hold for a request
     * is needed), so a stat right after the failed close() asks again; pages and dentry from
     * the notifier. */
    if (fs->session)
        fuse_lowlevel_notify_inval_inode(fs->session, open_writer->ino, -1, 0);
    fs_notify_inval_inode(fs, open_writer->ino, 0, 0);
    invalidate_path_entry(fs, open_writer->path);
}

/* Commits and makes every cache show the new object; a failure makes them show the bucket
 * (drop_failed_commit). sealed: for shutdown (writer_commit_sealed). The caller holds a
 * reference and no lock. */
static int commit_and_publish_from(struct fs *fs, struct fs_open_writer *open_writer,
                                   bool sealed)
{
    struct gcs_object obj;
    memset(&obj, 0, sizeof(obj));
    bool committed = false;
    /* Changes made before this point are in the commit (a write's sequence number is taken
     * after its bytes are in the writer); later ones may be too, which only costs a FLUSH
     * that finds nothing dirty. */
    int64_t covered = __atomic_load_n(&open_writer->change_seq, __ATOMIC_ACQUIRE);
    int rc = sealed ? writer_commit_sealed(open_writer->writer, &obj, &committed)
                    : writer_commit(open_writer->writer, &obj, &committed);
    if (rc < 0)
        drop_failed_commit(fs, open_writer);
    if (rc == 0) {
        int64_t before = __atomic_load_n(&open_writer->committed_seq, __ATOMIC_ACQUIRE);
        while (before < covered &&
               !__atomic_compare_exchange_n(&open_writer->committed_seq, &before, covered, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
    }
    if (rc < 0 || !committed)
        return rc;
    struct meta_attrs attrs;
    meta_attrs_from_object(&attrs, &obj);
    gcs_object_clear(&obj);
    namespace_note_file(fs->ns, open_writer->path, META_FILE, &attrs);
    struct inode *inode = open_writer->inode;
    if (inode) {
        inode_set_attrs(inode, &attrs, g_get_monotonic_time());
        /* The kernel's pages are the bytes just written: they may stay. */
        g_mutex_lock(&inode->attr_lock);
        inode->kernel_cache_generation = attrs.generation;
        g_mutex_unlock(&inode->attr_lock);
    }
    writer_content_published(open_writer->writer); /* the inode shows the new generation */
    meta_attrs_clear(&attrs);
    return 0;
}

static int commit_and_publish(struct fs *fs, struct fs_open_writer *open_writer)
{
    return commit_and_publish_from(fs, open_writer, false);
}

static void put_open_writer(struct fs *fs, struct fs_open_writer *open_writer);

void fs_write_release(struct fs *fs, struct fs_file *file)
{
    struct fs_open_writer *open_writer = file->writer;
    if (!open_writer)
        return;
    file->writer = NULL;
    put_open_writer(fs, open_writer);
}

int fs_write_commit_all(struct fs *fs, size_t *committed, size_t *failed)
{
    *committed = 0;
    *failed = 0;
    if (!fs->writes)
        return 0;
    /* Each is pinned (a reference) while it is committed: a RELEASE meanwhile leaves it. */
    GPtrArray *pinned = g_ptr_array_new();
    g_mutex_lock(&fs->writes->lock);
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, fs->writes->by_ino);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct fs_open_writer *open_writer = value;
        open_writer->refs++;
        g_ptr_array_add(pinned, open_writer);
    }
    g_mutex_unlock(&fs->writes->lock);
    int first_error = 0;
    for (guint i = 0; i < pinned->len; i++) {
        struct fs_open_writer *open_writer = g_ptr_array_index(pinned, i);
        /* Sealed: a write after this commit fails (EIO) instead of being acknowledged and
         * then lost with the session. */
        int rc = commit_and_publish_from(fs, open_writer, true);
        if (rc < 0) {
            flog_error("fs", "committing '%s' at shutdown failed: %s", open_writer->path,
                       g_strerror(-rc));
            (*failed)++;
            if (first_error == 0)
                first_error = rc;
        } else {
            flog_info("fs", "committed '%s' at shutdown (still open for writing)",
                      open_writer->path);
            (*committed)++;
        }
        open_writer_unref(fs, open_writer);
    }
    g_ptr_array_free(pinned, TRUE);
    return first_error;
}

/* Drops one handle's hold on open_writer. The last handle commits what no FLUSH committed
 * (the model above: a non-writer's close came last, or a writer's close found nothing new
 * then), unless the writer was detached (a failed commit) or abandoned (its writer killed);
 * then the writer leaves the table, unless a new open took it meanwhile. */
static void put_open_writer(struct fs *fs, struct fs_open_writer *open_writer)
{
    g_mutex_lock(&fs->writes->lock);
    g_assert(open_writer->handles > 0);
    bool last = --open_writer->handles == 0;
    bool attached = open_writer->attached;
    g_mutex_unlock(&fs->writes->lock);
    if (last && attached && writer_dirty(open_writer->writer) &&
        !__atomic_load_n(&open_writer->abandoned, __ATOMIC_ACQUIRE)) {
        int rc = commit_and_publish(fs, open_writer);
        if (rc < 0)
            flog_error("fs", "'%s': the commit at its last close failed: %s; the bucket keeps "
                       "its previous version", open_writer->path, g_strerror(-rc));
        else
            flog_debug("fs", "'%s': committed at its last close", open_writer->path);
    }
    bool detached = false;
    if (last) {
        g_mutex_lock(&fs->writes->lock);
        if (open_writer->handles == 0 && open_writer->attached) {
            open_writer_detach_locked(fs, open_writer);
            detached = true;
        }
        g_mutex_unlock(&fs->writes->lock);
    }
    /* A new file that never got committed leaves no name behind (no lock held: the writer
     * is out of the table and has no handle, nothing else changes it). */
    if (detached && writer_dirty(open_writer->writer) && !writer_has_object(open_writer->writer)) {
        namespace_invalidate(fs->ns, open_writer->path);
        invalidate_path_entry(fs, open_writer->path); /* the kernel's dentry too */
    }
    open_writer_unref(fs, open_writer);
}

void fs_write_patch_stat(struct fs *fs, uint64_t ino, struct stat *st)
{
    if (!fs->writes)
        return;
    /* writer_size is lock-free: no wait for a commit of this file in progress. */
    g_mutex_lock(&fs->writes->lock);
    struct fs_open_writer *open_writer = g_hash_table_lookup(fs->writes->by_ino, &ino);
    if (open_writer) {
        st->st_size = (off_t)writer_size(open_writer->writer);
        st->st_blocks = (st->st_size + 511) / 512;
    }
    g_mutex_unlock(&fs->writes->lock);
}

struct dir_listing *fs_write_merge_listing(struct fs *fs, const char *dir_path,
                                           struct dir_listing *listing)
{
    if (!fs->writes)
        return listing;
    size_t dir_len = strlen(dir_path);
    GArray *extra = NULL;
    g_mutex_lock(&fs->writes->lock);
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, fs->writes->by_ino);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        struct fs_open_writer *open_writer = value;
        const char *path = open_writer->path;
        if (dir_len > 0 && (strncmp(path, dir_path, dir_len) != 0 || path[dir_len] != '/'))
            continue;
        const char *name = path + (dir_len > 0 ? dir_len + 1 : 0);
        if (*name == '\0' || strchr(name, '/') || dir_listing_find(listing, name) ||
            g_hash_table_contains(fs->writes->renamed, &open_writer->ino) ||
            writer_unlinked(open_writer->writer))
            continue;
        if (!extra)
            extra = g_array_new(FALSE, TRUE, sizeof(struct dir_entry));
        struct dir_entry entry = {.name = g_strdup(name), .kind = META_FILE};
        entry.attrs.size = writer_size(open_writer->writer); /* lock-free */
        entry.attrs.mtime_ns = g_get_real_time() * 1000;
        g_array_append_val(extra, entry);
    }
    g_mutex_unlock(&fs->writes->lock);
    if (!extra)
        return listing;
    for (size_t i = 0; i < listing->count; i++) {
        struct dir_entry copy = {.name = g_strdup(listing->entries[i].name),
                                 .kind = listing->entries[i].kind};
        meta_attrs_copy(&copy.attrs, &listing->entries[i].attrs);
        g_array_append_val(extra, copy);
    }
    dir_listing_unref(listing);
    return dir_listing_from_array(extra);
}

/* ---- commit rights: which process's FLUSH commits (the model above) ---- */

/* The thread group (process) of the thread tid as /proc shows it; tid itself when /proc
 * cannot tell (another pid namespace: the caller then treats every thread as its own
 * process, which only makes FLUSHes commit less and the last RELEASE more). */
static int process_of_thread(int tid)
{
    char path[48], text[1024];
    snprintf(path, sizeof(path), "/proc/%d/status", tid);
    FILE *file = fopen(path, "re");
    if (!file)
        return tid;
    int tgid = tid;
    while (fgets(text, sizeof(text), file)) {
        if (strncmp(text, "Tgid:", 5) == 0) {
            tgid = atoi(text + 5);
            break;
        }
    }
    fclose(file);
    return tgid > 0 ? tgid : tid;
}

#define PROCESS_FLAG_EXITING 0x4 /* PF_EXITING in /proc/PID/stat's flags */

/* The signal that is killing thread tid (its exit in progress, its exit status a signal), or 0
 * (alive, exiting normally, or unknown). /proc/PID/stat: the fields after the command's ')'
 * start with the state (field 3); flags is field 9, exit_code field 52. */
static int killing_signal(int tid)
{
    char path[48];
    snprintf(path, sizeof(path), "/proc/%d/stat", tid);
    gchar *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    int signal = 0;
    const char *rest = strrchr(text, ')');
    if (rest) {
        gchar **fields = g_strsplit_set(rest + 1, " \n", -1);
        /* fields[0] is empty (the space after ')'); fields[k] is field k + 2. */
        if (g_strv_length(fields) > 50) {
            unsigned long flags = strtoul(fields[7], NULL, 10);
            int exit_code = atoi(fields[50]);
            if ((flags & PROCESS_FLAG_EXITING) && (exit_code & 0x7f) != 0)
                signal = exit_code & 0x7f;
        }
        g_strfreev(fields);
    }
    g_free(text);
    return signal;
}

/* Records the process of thread tid as one that may commit through file. */
static void file_add_owner(struct fs_file *file, int tid)
{
    if (tid <= 0 || __atomic_load_n(&file->last_writer_tid, __ATOMIC_RELAXED) == tid)
        return;
    int tgid = process_of_thread(tid);
    for (int i = 0; i < FS_FILE_OWNERS; i++) {
        int seen = __atomic_load_n(&file->owners[i], __ATOMIC_ACQUIRE);
        if (seen == tgid)
            goto recorded;
        int expected = 0;
        if (seen == 0 && __atomic_compare_exchange_n(&file->owners[i], &expected, tgid, false,
                                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            goto recorded;
        if (expected == tgid)
            goto recorded;
    }
    __atomic_store_n(&file->owners_overflow, 1, __ATOMIC_RELEASE);
recorded:
    __atomic_store_n(&file->last_writer_tid, tid, __ATOMIC_RELAXED);
}

/* Whether thread tid's process opened file for writing or wrote through it. A request with
 * no pid (one from outside the daemon's pid namespace) may. */
static bool file_owned_by(struct fs_file *file, int tid)
{
    if (tid <= 0 || __atomic_load_n(&file->owners_overflow, __ATOMIC_ACQUIRE))
        return true;
    int tgid = process_of_thread(tid);
    for (int i = 0; i < FS_FILE_OWNERS; i++)
        if (__atomic_load_n(&file->owners[i], __ATOMIC_ACQUIRE) == tgid)
            return true;
    return false;
}

/* A change made through file (after its bytes reached the writer): numbered, so a FLUSH can
 * tell whether a commit since covered it. */
static void note_change(struct fs_file *file)
{
    int64_t seq = __atomic_add_fetch(&file->writer->change_seq, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&file->last_change, seq, __ATOMIC_RELEASE);
}

static bool file_has_uncommitted_change(struct fs_file *file)
{
    return __atomic_load_n(&file->last_change, __ATOMIC_ACQUIRE) >
           __atomic_load_n(&file->writer->committed_seq, __ATOMIC_ACQUIRE);
}

/* ---- open, read, write, flush ---- */

static struct reader *reader_for_inode(struct fs *fs, struct inode *inode)
{
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, NULL);
    char *object_name = namespace_object_name(fs->ns, inode->path);
    struct reader_object object = {.name = object_name, .generation = attrs.generation,
                                   .size = attrs.size, .has_crc32c = attrs.has_crc32c,
                                   .crc32c = attrs.crc32c};
    struct reader *reader = reader_new(fs->client, fs->budget, &fs->reader_config, &object);
    g_free(object_name);
    meta_attrs_clear(&attrs);
    return reader;
}

/* The kernel moved the source dentry onto the new name, with the source's inode, whose path
 * here is the old one: opening it answers ESTALE, and the kernel then looks the name up again
 * (LOOKUP_REVAL) and gets the inode of the new path. */
#define FS_RENAMED_MAX 100000

static void note_renamed(struct fs *fs, const char *old_path)
{
    /* Detached from old_path too: until the kernel forgets it (after the new name's dentry is
     * invalidated, from the notifier thread, which a slow request may hold up for seconds), a
     * create or lookup of old_path must make a new inode, not give this one out again under
     * the old name, where every open of it would answer ESTALE. */
    /* A directory's children too: the kernel reaches them below the new name with their old
     * paths (a write to new/x must not commit to old/x). */
    GArray *inos = inode_table_detach_tree(fs->inodes, old_path);
    g_mutex_lock(&fs->writes->lock);
    if (g_hash_table_size(fs->writes->renamed) + inos->len >= FS_RENAMED_MAX)
        g_hash_table_remove_all(fs->writes->renamed);
    for (guint i = 0; i < inos->len; i++) {
        uint64_t ino = g_array_index(inos, uint64_t, i);
        g_hash_table_add(fs->writes->renamed, g_memdup2(&ino, sizeof(ino)));
    }
    g_mutex_unlock(&fs->writes->lock);
    g_array_free(inos, TRUE);
}

static bool was_renamed(struct fs *fs, uint64_t ino)
{
    g_mutex_lock(&fs->writes->lock);
    bool renamed = g_hash_table_contains(fs->writes->renamed, &ino);
    g_mutex_unlock(&fs->writes->lock);
    return renamed;
}

bool fs_write_renamed(struct fs *fs, uint64_t ino)
{
    return fs->writes && was_renamed(fs, ino);
}

bool fs_write_open(fuse_req_t req, struct fs *fs, struct inode *inode, struct fuse_file_info *fi)
{
    if (was_renamed(fs, inode->ino)) {
        flog_info("fs", "open of inode %" PRIu64 " ('%s'): that name was renamed away (the "
                  "kernel reached the inode under its new name); answering ESTALE (the kernel "
                  "looks the name up again)", inode->ino, inode->path);
        inode_put(fs->inodes, inode);
        fs_reply_err(req, ESTALE);
        return true;
    }
    int accmode = fi->flags & O_ACCMODE;
    bool wants_write = accmode != O_RDONLY || (fi->flags & O_TRUNC);
    if (!wants_write && !fs_write_active(fs, inode->ino))
        return false;
    if (wants_write && fs->opts->read_only) {
        inode_put(fs->inodes, inode);
        fs_reply_err(req, EROFS);
        return true;
    }
    struct fs_open_writer *open_writer = NULL;
    int rc = writer_for_inode(fs, inode, (fi->flags & O_TRUNC) != 0, false, &open_writer);
    if (rc < 0) {
        inode_put(fs->inodes, inode);
        fs_reply_err(req, -rc);
        return true;
    }
    struct fs_file *file = g_new0(struct fs_file, 1);
    file->inode = inode;
    file->writer = open_writer;
    file->writable = wants_write;
    if (wants_write)
        file_add_owner(file, (int)fuse_req_ctx(req)->pid);
    if (fi->flags & O_TRUNC)
        note_change(file); /* the truncation is this handle's change: its close commits it */
    if (!writer_has_content(open_writer->writer)) /* reads come from the object, as for any open */
        file->reader = reader_for_inode(fs, inode);
    fi->keep_cache = 0;
    fi->fh = (uint64_t)(uintptr_t)file;
    fs_handle_opened(fs, file, FS_HANDLE_FILE);
    if (fuse_reply_open(req, fi) != 0) {
        if (fs_handle_closed(fs, file))
            fs_file_free(fs, file);
    }
    return true;
}

bool fs_write_read(fuse_req_t req, struct fs_file *file, size_t size, off_t off)
{
    if (!file->writer)
        return false;
    struct writer *writer = file->writer->writer;
    if (!writer_has_content(writer)) {
        /* The content is the object's (before the first change, or committed from memory):
         * a reader of the version the inode now has, made once per handle. */
        if (!g_atomic_pointer_get(&file->reader)) {
            struct reader *made = reader_for_inode(fs_of(req), file->inode);
            if (!g_atomic_pointer_compare_and_exchange(&file->reader, NULL, made))
                reader_free(made);
        }
        return false;
    }
    if (size > FS_WRITE_READ_MAX)
        size = FS_WRITE_READ_MAX;
    char *buffer = g_malloc(size ? size : 1);
    size_t got = 0;
    int rc = writer_read(writer, (uint64_t)off, size, buffer, &got);
    if (rc < 0)
        fs_reply_err(req, -rc);
    else
        fuse_reply_buf(req, buffer, got);
    g_free(buffer);
    return true;
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    struct fs_file *file = (struct fs_file *)(uintptr_t)fi->fh;
    if (!file || !file->writer || !file->writable || off < 0) {
        fs_reply_err(req, EBADF);
        return;
    }
    file_add_owner(file, (int)fuse_req_ctx(req)->pid);
    int rc = writer_write(file->writer->writer, (uint64_t)off, buf, size);
    if (rc == 0)
        note_change(file);
    if (rc < 0)
        fs_reply_err(req, -rc);
    else
        fuse_reply_write(req, size);
}

/* A writer killed mid-write: its file is not committed by any close (the model above). The
 * writer leaves the table as after a failed commit; the last RELEASE drops its changes. */
static void abandon_writer(struct fs *fs, struct fs_file *file, int tid, int signal)
{
    struct fs_open_writer *open_writer = file->writer;
    if (__atomic_exchange_n(&open_writer->abandoned, 1, __ATOMIC_ACQ_REL))
        return;
    flog_warn("fs", "'%s': the process writing it (pid %d) was killed by signal %d before "
              "closing it: its %" PRIu64 " bytes are not committed; the bucket keeps the "
              "previous version", open_writer->path, tid, signal,
              writer_size(open_writer->writer));
    drop_failed_commit(fs, open_writer);
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct fs_file *file = (struct fs_file *)(uintptr_t)fi->fh;
    int rc = 0;
    if (file && file->writer && file->writable && file_has_uncommitted_change(file) &&
        !__atomic_load_n(&file->writer->abandoned, __ATOMIC_ACQUIRE)) {
        int tid = (int)fuse_req_ctx(req)->pid;
        int signal = tid > 0 ? killing_signal(tid) : 0;
        if (signal != 0 && file_owned_by(file, tid))
            abandon_writer(fs, file, tid, signal);
        else if (file_owned_by(file, tid))
            rc = commit_and_publish(fs, file->writer);
        else
            flog_debug("fs", "'%s': FLUSH from pid %d, which neither opened it for writing "
                       "nor wrote through it (a forked child's close?): nothing committed",
                       file->writer->path, tid);
    }
    fs_reply_err(req, -rc);
}

/* fsync commits what is pending, whoever asks. */
static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct fs_file *file = (struct fs_file *)(uintptr_t)fi->fh;
    int rc = 0;
    if (file && file->writer && file->writable)
        rc = commit_and_publish(fs_of(req), file->writer);
    fs_reply_err(req, -rc);
}

/* ---- attributes ---- */

/* Clamped to int64 nanoseconds (touch -d 2400-01-01 stores 2262-04-11): include/fluxfs/timens.h */
static int64_t timespec_ns(const struct timespec *ts)
{
    return timens_from_parts((int64_t)ts->tv_sec, (int64_t)ts->tv_nsec);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return timespec_ns(&ts);
}

/* Truncate of a file no handle writes: a short-lived writer. */
static int truncate_unopened(struct fs *fs, struct inode *inode, uint64_t size)
{
    struct fs_open_writer *open_writer = NULL;
    int rc = writer_for_inode(fs, inode, size == 0, false, &open_writer);
    if (rc < 0)
        return rc;
    rc = writer_truncate(open_writer->writer, size);
    if (rc == 0)
        rc = commit_and_publish(fs, open_writer);
    struct fs_file handle = {.writer = open_writer};
    fs_write_release(fs, &handle);
    return rc;
}

/* open_writer: the inode's writer (a reference the caller holds), or NULL. */
static int set_mtime_of(struct fs *fs, struct inode *inode, struct fs_open_writer *open_writer,
                        int64_t mtime_ns)
{
    if (open_writer && writer_dirty(open_writer->writer)) {
        /* Stored with the next commit; stat shows it now. */
        writer_set_mtime(open_writer->writer, mtime_ns);
        struct meta_attrs attrs;
        int64_t fetched_us;
        inode_get_attrs(inode, &attrs, &fetched_us);
        attrs.mtime_ns = mtime_ns;
        inode_set_attrs(inode, &attrs, fetched_us);
        meta_attrs_clear(&attrs);
        return 0;
    }
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, NULL);
    char *object_name = namespace_object_name(fs->ns, inode->path);
    struct gcs_write_attrs change = {.has_mtime = true, .mtime_ns = mtime_ns,
                                     .symlink_target = attrs.symlink_target};
    struct gcs_object obj;
    memset(&obj, 0, sizeof(obj));
    int rc = gcs_patch(fs->client, object_name, &change, NULL, &obj);
    g_free(object_name);
    meta_attrs_clear(&attrs);
    if (rc < 0)
        return rc;
    if (open_writer)
        writer_set_mtime(open_writer->writer, mtime_ns);
    struct meta_attrs updated;
    meta_attrs_from_object(&updated, &obj);
    inode_set_attrs(inode, &updated, g_get_monotonic_time());
    namespace_note_file(fs->ns, inode->path, meta_kind_of_object(&obj), &updated);
    meta_attrs_clear(&updated);
    gcs_object_clear(&obj);
    return 0;
}

static int set_mtime(struct fs *fs, struct inode *inode, int64_t mtime_ns)
{
    struct fs_open_writer *open_writer = open_writer_find(fs, inode->ino, false);
    int rc = set_mtime_of(fs, inode, open_writer, mtime_ns);
    open_writer_unref(fs, open_writer);
    return rc;
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct inode *inode = inode_table_get_request(fs->inodes, ino, "setattr");
    if (!inode) {
        fs_reply_err(req, ESTALE);
        return;
    }
    int rc = 0;
    if (fs->opts->read_only) {
        rc = -EROFS;
        goto out;
    }
    if (!fi && fs_write_renamed(fs, ino)) {
        /* truncate/utimes/chmod by path reached the inode of a name renamed away (its path
         * here is the old one): ESTALE makes the kernel look the path up again. */
        flog_info("fs", "setattr of inode %" PRIu64 " ('%s'): that name was renamed away; "
                  "answering ESTALE (the kernel looks the name up again)", inode->ino,
                  inode->path);
        rc = -ESTALE;
        goto out;
    }
    if ((to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
        fs->writes->chmod_refuse) {
        rc = -EPERM;
        goto out;
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (inode->kind != META_FILE) {
            rc = inode->kind == META_DIR ? -EISDIR : -EINVAL;
            goto out;
        }
        /* ftruncate comes with its handle (valid for the whole request: the kernel sends no
         * RELEASE while it runs); truncate(path) finds the writer, if any, by reference. */
        struct fs_file *file = fi ? (struct fs_file *)(uintptr_t)fi->fh : NULL;
        if (file && file->writer && file->writable) {
            file_add_owner(file, (int)fuse_req_ctx(req)->pid);
            rc = writer_truncate(file->writer->writer, (uint64_t)attr->st_size);
            if (rc == 0)
                note_change(file);
        } else {
            struct fs_open_writer *open_writer = open_writer_find(fs, ino, false);
            if (open_writer) {
                /* A truncate(path) of a file open elsewhere (a reader's handle keeps its
                 * writer): with nothing else pending it is committed now, as truncate of a
                 * file nobody has open is; else with the pending changes, at their close. */
                bool pending = writer_dirty(open_writer->writer);
                rc = writer_truncate(open_writer->writer, (uint64_t)attr->st_size);
                if (rc == 0 && !pending)
                    rc = commit_and_publish(fs, open_writer);
            } else {
                rc = truncate_unopened(fs, inode, (uint64_t)attr->st_size);
            }
            open_writer_unref(fs, open_writer);
        }
        if (rc < 0)
            goto out;
    }
    if ((to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) && inode->kind != META_DIR) {
        int64_t mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? now_ns()
                                                           : timespec_ns(&attr->st_mtim);
        rc = set_mtime(fs, inode, mtime);
        if (rc < 0)
            goto out;
    }
out:
    if (rc < 0)
        fs_reply_err(req, -rc);
    else
        fs_reply_attr(req, fs, inode);
    inode_put(fs->inodes, inode);
}

/* ---- names ---- */

/* The path of a new child name of parent; 0 or a positive errno for the reply. */
static int child_path(struct fs *fs, fuse_ino_t parent, const char *name, char **out)
{
    if (fs->opts->read_only)
        return EROFS;
    struct inode *dir = inode_table_get_request(fs->inodes, parent, "a change in directory");
    if (!dir)
        return ESTALE;
    int err = 0;
    if (dir->kind != META_DIR)
        err = ENOTDIR;
    else if (strlen(name) > NAME_MAP_NAME_MAX)
        err = ENAMETOOLONG;
    else if (name_map_is_reserved(dir->path, name) || !name_map_segment_valid(name, strlen(name)))
        err = EINVAL;
    if (!err)
        *out = name_map_join(dir->path, name);
    inode_put(fs->inodes, dir);
    /* Refused here, before any byte is accepted: Cloud Storage would refuse the name at the
     * commit, and the data written would be lost. */
    if (!err && !name_map_object_name_fits(fs->opts->prefix, *out, false)) {
        g_free(*out);
        *out = NULL;
        err = ENAMETOOLONG;
    }
    return err;
}

static void reply_new_entry(fuse_req_t req, struct fs *fs, const char *path, enum meta_kind kind,
                            const struct meta_attrs *attrs)
{
    struct inode *inode = inode_table_lookup(fs->inodes, path, kind,
                                             kind == META_DIR ? NULL : attrs,
                                             g_get_monotonic_time());
    struct fuse_entry_param entry;
    fs_fill_entry(fs, inode, &entry);
    inode_put(fs->inodes, inode);
    fs_reply_entry(req, &entry);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    char *path = NULL;
    int err = child_path(fs, parent, name, &path);
    if (err) {
        fs_reply_err(req, err);
        return;
    }
    enum meta_kind kind;
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    int rc = fs_write_resolve(fs, path, &kind, &attrs);
    bool absent = rc == -ENOENT;
    if (rc == 0 && kind == META_DIR)
        rc = -EISDIR;
    else if (rc == 0 && (fi->flags & O_EXCL))
        rc = -EEXIST;
    else if (rc == -ENOENT || rc == 0)
        rc = 0;
    meta_attrs_clear(&attrs);
    if (rc < 0) {
        fs_reply_err(req, -rc);
        g_free(path);
        return;
    }
    struct meta_attrs fresh = {.mtime_ns = now_ns()};
    struct inode *inode = inode_table_lookup(fs->inodes, path, META_FILE, &fresh,
                                             g_get_monotonic_time());
    struct fs_open_writer *open_writer = NULL;
    rc = writer_for_inode(fs, inode, true, absent, &open_writer);
    if (rc < 0) {
        inode_table_forget(fs->inodes, inode->ino, 1);
        inode_put(fs->inodes, inode);
        fs_reply_err(req, -rc);
        g_free(path);
        return;
    }
    namespace_note_file(fs->ns, path, META_FILE, &fresh);
    struct fs_file *file = g_new0(struct fs_file, 1);
    file->inode = inode;
    file->writer = open_writer;
    file->writable = true;
    file_add_owner(file, (int)fuse_req_ctx(req)->pid);
    note_change(file); /* the file's creation (or truncation): its close commits it */
    fi->fh = (uint64_t)(uintptr_t)file;
    fi->keep_cache = 0;
    struct fuse_entry_param entry;
    fs_fill_entry(fs, inode, &entry);
    fs_handle_opened(fs, file, FS_HANDLE_FILE);
    if (fuse_reply_create(req, &entry, fi) != 0) {
        if (fs_handle_closed(fs, file))
            fs_file_free(fs, file);
    }
    g_free(path);
}

/* Creates an empty object (mknod of a regular file, directory placeholder) or a symlink, whose
 * bytes are its target as gcloud and gcsfuse store them (with gcsfuse's and gcloud's metadata,
 * so both read it as a link). */
static int create_empty_object(struct fs *fs, const char *object_name, const char *target,
                               struct meta_attrs *attrs)
{
    const char *bytes = target ? target : "";
    size_t len = strlen(bytes);
    struct gcs_body body = {.data = bytes, .fd = -1, .len = len, .has_crc32c = true,
                            .crc32c = crc32c_update(0, bytes, len)};
    struct gcs_write_attrs write_attrs = {
        .has_mtime = true, .mtime_ns = now_ns(), .symlink_target = target,
        .content_type = !target && attrs ? mime_type_for_name(object_name) : NULL};
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    struct gcs_object obj;
    memset(&obj, 0, sizeof(obj));
    int rc = gcs_upload(fs->client, object_name, &body, &write_attrs, &pre, &obj);
    if (rc == -ESTALE)
        return -EEXIST;
    if (rc < 0)
        return rc;
    if (attrs)
        meta_attrs_from_object(attrs, &obj);
    gcs_object_clear(&obj);
    return 0;
}

/* regular_node false: mknod of a FIFO, socket or device: EEXIST when the name exists (POSIX,
 * pjdfstest), EPERM otherwise. */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, enum meta_kind kind,
                      const char *target, bool regular_node)
{
    struct fs *fs = fs_of(req);
    char *path = NULL;
    int err = child_path(fs, parent, name, &path);
    if (err) {
        fs_reply_err(req, err);
        return;
    }
    enum meta_kind existing;
    int rc = fs_write_resolve(fs, path, &existing, NULL);
    if (rc == 0)
        rc = -EEXIST;
    else if (rc == -ENOENT)
        rc = 0;
    if (rc == 0 && kind == META_DIR && !name_map_object_name_fits(fs->opts->prefix, path, true))
        rc = -ENAMETOOLONG; /* the placeholder "path/" is one byte longer */
    if (rc == 0 && !regular_node)
        rc = -EPERM; /* mknod of a FIFO, socket or device where nothing is: objects are none */
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    if (rc == 0) {
        char *object_name = kind == META_DIR ? namespace_dir_prefix(fs->ns, path)
                                             : namespace_object_name(fs->ns, path);
        rc = create_empty_object(fs, object_name, target, kind == META_DIR ? NULL : &attrs);
        g_free(object_name);
    }
    if (rc < 0) {
        fs_reply_err(req, -rc);
    } else {
        if (kind == META_DIR)
            namespace_note_new_dir(fs->ns, path);
        else
            namespace_note_file(fs->ns, path, kind, &attrs);
        reply_new_entry(req, fs, path, kind, &attrs);
    }
    meta_attrs_clear(&attrs);
    g_free(path);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
    make_node(req, parent, name, META_FILE, NULL, S_ISREG(mode));
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    make_node(req, parent, name, META_DIR, NULL, true);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    make_node(req, parent, name, META_SYMLINK, link, true);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    fs_reply_err(req, EPERM); /* objects have no hard links */
}

#define FS_UNLINK_TRIES 3 /* a name replaced behind the mount between the read and the delete */

/* Deletes the object of a file whose generation was just read (0 = not known: asked first).
 * The delete carries ifGenerationMatch, which makes it safe to retry (a 503, a lost reply:
 * the gcs layer takes a 404 on a retry as done); a delete with no precondition is sent once
 * and a single 503 would fail the rm. A generation replaced meanwhile (412) is read again and
 * the new one deleted, as an unconditional delete would have. 0 or -errno (-ENOENT: gone). */
static int delete_file_object(struct fs *fs, const char *path, int64_t generation)
{
    char *object_name = namespace_object_name(fs->ns, path);
    int rc = -ESTALE;
    for (int attempt = 0; attempt < FS_UNLINK_TRIES && rc == -ESTALE; attempt++) {
        if (generation <= 0 || attempt > 0) {
            enum meta_kind kind;
            struct meta_attrs fresh;
            rc = namespace_stat_file(fs->ns, path, &kind, &fresh);
            if (rc < 0)
                break;
            generation = fresh.generation;
            meta_attrs_clear(&fresh);
            if (generation <= 0) {
                rc = -ENOENT; /* nothing stored under the name (a file not committed yet) */
                break;
            }
        }
        struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                              .if_generation_match = generation};
        rc = gcs_delete(fs->client, object_name, 0, &pre);
    }
    if (rc == -ESTALE)
        flog_warn("fs", "unlink of '%s': the object was replaced behind the mount at each of %d "
                  "tries (HTTP 412 to a delete of the generation just read); answering ESTALE",
                  path, FS_UNLINK_TRIES);
    g_free(object_name);
    return rc;
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    char *path = NULL;
    int err = child_path(fs, parent, name, &path);
    if (err) {
        fs_reply_err(req, err == EINVAL ? ENOENT : err);
        return;
    }
    enum meta_kind kind;
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    int rc = fs_write_resolve(fs, path, &kind, &attrs);
    if (rc == 0 && kind == META_DIR)
        rc = -EISDIR;
    bool writing = false;
    if (rc == 0) {
        uint64_t ino = inode_table_find_path(fs->inodes, path);
        struct fs_open_writer *open_writer = ino ? open_writer_find(fs, ino, false) : NULL;
        if (open_writer) {
            /* Its handles go on with it (reads, fstat and reopens through /proc see the
             * writer); a create of the name meanwhile leaves it (writer_for_inode). */
            writer_mark_unlinked(open_writer->writer);
            writing = true;
        }
        open_writer_unref(fs, open_writer);
        rc = delete_file_object(fs, path, attrs.generation);
        if (rc == -ENOENT && writing)
            rc = 0; /* never committed */
    }
    meta_attrs_clear(&attrs);
    namespace_invalidate(fs->ns, path);
    fs_reply_err(req, -rc);
    g_free(path);
}

/* Whether the directory at dir_prefix holds anything but its own placeholder; *placeholder
 * (optional) gets the placeholder object's generation, 0 when there is none. */
static int dir_has_children(struct fs *fs, const char *dir_prefix, bool *out,
                            int64_t *placeholder)
{
    struct gcs_list_params params = {.prefix = dir_prefix, .max_results = 2};
    struct gcs_list_page page;
    memset(&page, 0, sizeof(page));
    int rc = gcs_list(fs->client, &params, &page);
    if (rc < 0)
        return rc;
    bool children = false;
    int64_t placeholder_generation = 0;
    for (guint i = 0; i < page.objects->len; i++) {
        const struct gcs_object *obj = g_ptr_array_index(page.objects, i);
        if (strcmp(obj->name, dir_prefix) != 0)
            children = true;
        else
            placeholder_generation = obj->generation;
    }
    gcs_list_page_clear(&page);
    *out = children;
    if (placeholder)
        *placeholder = placeholder_generation;
    return 0;
}

/* Deletes a directory's placeholder object of a generation just listed (0 = none: an implicit
 * directory, nothing to delete). Pinned, so the delete is retried and a 404 on a retry is done. */
static int delete_placeholder(struct fs *fs, const char *dir_prefix, int64_t generation)
{
    if (generation <= 0)
        return 0;
    int rc = gcs_delete(fs->client, dir_prefix, generation, NULL);
    return rc == -ENOENT ? 0 : rc; /* gone already: what was asked */
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    char *path = NULL;
    int err = child_path(fs, parent, name, &path);
    if (err) {
        fs_reply_err(req, err == EINVAL ? ENOENT : err);
        return;
    }
    enum meta_kind kind;
    int rc = namespace_resolve(fs->ns, path, &kind, NULL);
    if (rc == 0 && kind != META_DIR)
        rc = -ENOTDIR;
    char *dir_prefix = namespace_dir_prefix(fs->ns, path);
    bool children = false;
    int64_t placeholder = 0;
    if (rc == 0)
        rc = dir_has_children(fs, dir_prefix, &children, &placeholder);
    if (rc == 0 && children)
        rc = -ENOTEMPTY;
    if (rc == 0)
        rc = delete_placeholder(fs, dir_prefix, placeholder);
    if (rc == 0 && fs->hierarchical_namespace) {
        rc = gcs_folder_delete(fs->client, dir_prefix); /* the folder itself */
        if (rc == -ENOENT)
            rc = 0;
    }
    namespace_invalidate(fs->ns, path);
    fs_reply_err(req, -rc);
    g_free(dir_prefix);
    g_free(path);
}

/* Renames one object: copy pinned to the source generation (destination precondition:
 * dest_generation, 0 = must not exist), then delete of that source generation. */
static int rename_object(struct fs *fs, const char *src_name, int64_t src_generation,
                         const char *dest_name, int64_t dest_generation)
{
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .if_generation_match = dest_generation};
    int rc = gcs_copy(fs->client, src_name, src_generation, dest_name, &pre, NULL);
    if (rc < 0)
        return rc;
    rc = gcs_delete(fs->client, src_name, src_generation, NULL);
    return rc == -ENOENT ? 0 : rc;
}

static int rename_file(struct fs *fs, const char *src, const char *dest, bool dest_exists)
{
    /* A file still being written commits first, so what moves is what was written. */
    uint64_t ino = inode_table_find_path(fs->inodes, src);
    struct fs_open_writer *open_writer = ino ? open_writer_find(fs, ino, false) : NULL;
    if (open_writer) {
        int rc = commit_and_publish(fs, open_writer);
        open_writer_unref(fs, open_writer);
        if (rc < 0)
            return rc;
    }
    enum meta_kind kind;
    struct meta_attrs src_attrs, dest_attrs;
    int rc = namespace_stat_file(fs->ns, src, &kind, &src_attrs);
    if (rc < 0)
        return rc;
    int64_t dest_generation = 0;
    if (dest_exists) {
        rc = namespace_stat_file(fs->ns, dest, &kind, &dest_attrs);
        if (rc == 0) {
            dest_generation = dest_attrs.generation;
            meta_attrs_clear(&dest_attrs);
        } else if (rc != -ENOENT) {
            meta_attrs_clear(&src_attrs);
            return rc;
        }
    }
    char *src_name = namespace_object_name(fs->ns, src);
    char *dest_name = namespace_object_name(fs->ns, dest);
    rc = rename_object(fs, src_name, src_attrs.generation, dest_name, dest_generation);
    g_free(src_name);
    g_free(dest_name);
    meta_attrs_clear(&src_attrs);
    return rc;
}

/* On a hierarchical-namespace bucket: one folders.rename moves the folder and everything
 * below it, atomically and whatever its size (no --rename-dir-limit). An empty destination
 * directory was checked by the caller; its placeholder is gone, its folder is removed here.
 * -ENOENT when src has no folder (the caller then renames object by object). */
static int rename_folder(struct fs *fs, const char *src_prefix, const char *dest_prefix,
                         bool dest_exists)
{
    if (dest_exists) {
        int rc = gcs_folder_delete(fs->client, dest_prefix);
        if (rc < 0 && rc != -ENOENT)
            return rc;
    }
    int rc = gcs_folder_rename(fs->client, src_prefix, dest_prefix);
    if (rc == 0)
        flog_debug("fs", "renamed folder '%s' to '%s'", src_prefix, dest_prefix);
    return rc;
}

static int rename_dir(struct fs *fs, const char *src, const char *dest, bool dest_exists)
{
    char *src_prefix = namespace_dir_prefix(fs->ns, src);
    char *dest_prefix = namespace_dir_prefix(fs->ns, dest);
    if (fs->hierarchical_namespace) {
        int rc = rename_folder(fs, src_prefix, dest_prefix, dest_exists);
        if (rc != -ENOENT) {
            g_free(src_prefix);
            g_free(dest_prefix);
            return rc;
        }
    }
    GPtrArray *objects = g_ptr_array_new_with_free_func((GDestroyNotify)gcs_object_free);
    size_t limit = (size_t)fs->opts->rename_dir_limit;
    char *token = NULL;
    int rc = 0;
    do {
        struct gcs_list_params params = {.prefix = src_prefix, .page_token = token};
        struct gcs_list_page page;
        memset(&page, 0, sizeof(page));
        rc = gcs_list(fs->client, &params, &page);
        g_free(token);
        token = NULL;
        if (rc < 0)
            break;
        while (page.objects->len > 0)
            g_ptr_array_add(objects, g_ptr_array_steal_index(page.objects, 0));
        token = g_strdup(page.next_page_token);
        gcs_list_page_clear(&page);
        if (objects->len > limit)
            rc = -EXDEV; /* too many: mv falls back to copying file by file */
    } while (rc == 0 && token);
    g_free(token);
    if (rc == 0 && objects->len == 0)
        rc = -ENOENT;
    /* Not atomic: each object is copied, then deleted, under an intent record that the next
     * mount follows to finish a rename cut short (fs_rename.c). */
    if (rc == 0)
        rc = fs_rename_dir_objects(fs, src_prefix, dest_prefix, objects);
    g_ptr_array_free(objects, TRUE);
    g_free(src_prefix);
    g_free(dest_prefix);
    return rc;
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    struct fs *fs = fs_of(req);
    char *src = NULL, *dest = NULL;
    int err = child_path(fs, parent, name, &src);
    if (!err)
        err = child_path(fs, newparent, newname, &dest);
    if (!err && (flags & RENAME_EXCHANGE))
        err = EINVAL;
    if (err) {
        fs_reply_err(req, err);
        g_free(src);
        g_free(dest);
        return;
    }
    enum meta_kind src_kind, dest_kind = META_ABSENT;
    int rc = fs_write_resolve(fs, src, &src_kind, NULL);
    bool dest_exists = false;
    if (rc == 0) {
        int dest_rc = fs_write_resolve(fs, dest, &dest_kind, NULL);
        if (dest_rc == 0)
            dest_exists = true;
        else if (dest_rc != -ENOENT)
            rc = dest_rc;
    }
    if (rc == 0 && dest_exists && (flags & RENAME_NOREPLACE))
        rc = -EEXIST;
    if (rc == 0 && strcmp(src, dest) == 0)
        goto reply;
    if (rc == 0 && src_kind != META_DIR) {
        if (dest_exists && dest_kind == META_DIR)
            rc = -EISDIR;
        else
            rc = rename_file(fs, src, dest, dest_exists);
        if (rc == 0)
            note_renamed(fs, src);
    } else if (rc == 0) {
        char *dest_prefix = namespace_dir_prefix(fs->ns, dest);
        bool children = false;
        int64_t placeholder = 0;
        if (dest_exists && dest_kind != META_DIR)
            rc = -ENOTDIR;
        else if (g_str_has_prefix(dest, src) && dest[strlen(src)] == '/')
            rc = -EINVAL;
        else if (dest_exists &&
                 (rc = dir_has_children(fs, dest_prefix, &children, &placeholder)) == 0 &&
                 children)
            rc = -ENOTEMPTY;
        if (rc == 0 && dest_exists)
            rc = delete_placeholder(fs, dest_prefix, placeholder);
        if (rc == 0)
            rc = rename_dir(fs, src, dest, dest_exists);
        if (rc == 0)
            note_renamed(fs, src); /* the kernel's dentry of dest has src's inode for now */
        g_free(dest_prefix);
        namespace_invalidate(fs->ns, src);
        namespace_invalidate(fs->ns, dest);
    }
    namespace_invalidate(fs->ns, src);
    namespace_invalidate(fs->ns, dest);
    if (rc == 0)
        fs_notify_inval_entry(fs, newparent, newname);
reply:
    fs_reply_err(req, -rc);
    g_free(src);
    g_free(dest);
}

void fs_write_ops_fill(struct fuse_lowlevel_ops *ops)
{
    ops->create = fs_create;
    ops->write = fs_write;
    ops->flush = fs_flush;
    ops->fsync = fs_fsync;
    ops->setattr = fs_setattr;
    ops->mknod = fs_mknod;
    ops->mkdir = fs_mkdir;
    ops->rmdir = fs_rmdir;
    ops->unlink = fs_unlink;
    ops->symlink = fs_symlink;
    ops->rename = fs_rename;
    ops->link = fs_link;
}
