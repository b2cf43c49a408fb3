/* Inside the fs layer's write path, shared by its two files only: fs_writes.c (the table of
 * files being written: struct fs_writes, the writers, commits, renamed inodes; what the other
 * fs files ask through fs-internal.h) and fs_write.c (the FUSE operations that change
 * things, which use the table through the functions below). */
#ifndef FLUXFS_FS_WRITES_H
#define FLUXFS_FS_WRITES_H

#include "fluxfs/writer.h"
#include "fs-internal.h"

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
 *   session's end, fs_ops.c); the kernel never sends RELEASE while another request of the same
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
 *   5. upload_pool.lock (io/upload.c)    parts in flight, buffer budget (writer_shared.uploads);
 *                                        gcs callbacks
 * Rules: fs_writes.lock (mount-wide) is never held while calling anything that may block: no
 * writer_* call except the three lock-free readers, no I/O, no wait on a per-file lock, no
 * kernel notification. writer->lock is the only lock of this list held across I/O: a commit,
 * the start or abandonment of a stream, a fetch of the object into the staging file, and
 * waits for upload slots or buffer budget that other files' parts release (the upload pool's
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
    uint64_t ino;          /* immutable */
    struct inode *inode;   /* immutable, counted reference */
    char *path;            /* immutable */
    struct writer *writer; /* immutable; its own lock */
    unsigned refs;         /* fs_writes.lock: table entry + handles + lookups */
    unsigned handles;      /* fs_writes.lock: kernel handles using it */
    bool attached;         /* fs_writes.lock: the entry of by_ino */
    int64_t change_seq;    /* atomic: changes made through handles (1, 2, ...) */
    int64_t committed_seq; /* atomic: change_seq covered by the last commit */
    int abandoned;         /* atomic: its writer process was killed: no close commits */
};

struct fs_writes {
    GMutex lock;
    GHashTable *by_ino; /* uint64_t* -> struct fs_open_writer * (one reference) */
    struct writer_shared *shared;
    struct writer_config config; /* strings below */
    char *tmp_prefix;
    char *temp_root;
    bool chmod_refuse;
    GHashTable *renamed; /* lock: inode numbers whose path was renamed away */
    GThreadPool *reaper; /* one thread: frees fs_open_writers (open_writer_unref) */
};

/* The writer of ino with a reference for the caller (fs_open_writer_unref), and one handle
 * more when add_handle; NULL when ino is not being written. */
struct fs_open_writer *fs_open_writer_find(struct fs *fs, uint64_t ino, bool add_handle);
void fs_open_writer_unref(struct fs *fs, struct fs_open_writer *open_writer);
/* Gets or makes the writer of inode with one handle counted (fs_writes.c says more). */
int fs_writer_for_inode(struct fs *fs, struct inode *inode, bool truncate, bool known_absent,
                        struct fs_open_writer **out);
/* A commit failed for good: the writer leaves the table (fs_writes.c says what else goes). The
 * caller holds a reference. */
void fs_drop_failed_commit(struct fs *fs, struct fs_open_writer *open_writer);
/* Commits the writer's pending changes and publishes the new version: 0 or -errno. */
int fs_commit_and_publish(struct fs *fs, struct fs_open_writer *open_writer);
/* old_path was renamed away: its inodes (a directory's children too) are detached and
 * remembered (fs_was_renamed) until the kernel looks the new name up again. */
void fs_note_renamed(struct fs *fs, const char *old_path);
bool fs_was_renamed(struct fs *fs, uint64_t ino);

#endif
