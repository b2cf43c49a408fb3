/* Inside the fs layer: the mounted filesystem's state shared by the FUSE operations.
 *
 * Ownership: struct fs owns the namespace, the inode table and the memory budget; the mount's
 * configuration (struct fs_config, include/fluxfs/fs.h) and the gcs client belong to main and
 * outlive fs_run. Every field is set before the session starts and immutable afterwards, except
 * prefetch_thread (mount thread only). Open files and directories are struct fs_file /
 * struct fs_dir in fuse_file_info.fh, owned by the handle until release/releasedir.
 *
 * The files and who may call whom (no cycle; `meson test layers`, tests/check_layers.py
 * FS_LEVELS, checks it on the built objects). A file calls only files of lower rows, never
 * one of its own row or above:
 *
 *   fs.c            fs_run: state, mount, session loop, stop, /metrics listener
 *   fs_table.c      the operations table, assembled in this one place: base operations
 *                   (fs_ops_fill, fs_write_ops_fill), then the control decorator, then the
 *                   metrics decorator around it (as gcsfuse's NewServer stacks its wrappers)
 *   fs_control.c    decorator: .fluxfs, content cache, prefetcher (and its own figures)
 *   fs_metrics.c    decorator: counts every request (kind, errno, latency), INTERRUPTs
 *   fs_status.c     rendering: the status lines and /metrics families of the mount
 *   fs_handover.c   giving the mount to a new process / taking it (the socket, the state)
 *   fs_ops.c        base operations: names, reads, INIT/DESTROY, read-only stubs
 *   fs_write.c      base operations that change things (replace the stubs)
 *   fs_dir.c        directory operations     fs_noopen.c   handle-less reads
 *   fs_base.c       replies (fs_reply_err, fs_reply_entry: the only callers of libfuse's
 *                   fuse_reply_err/fuse_reply_entry), the request being served, stat and
 *                   entry replies, open file state, the handle record
 *   fs_writes.c     the table of files being written (state asked by the rows above)
 *   fs_notify.c     kernel notifications   fs_rename.c   crash-safe directory renames
 *   fs_gate.c       the device gate: requests read and answered (hand-over's drain)
 *   rename_record.c, hint_lines.c   pure helpers
 *
 * A decorator keeps the table it wraps in its struct fs_layer in struct fs (filled by
 * fs_table_fill), never in a file-static. libfuse's names are only ever libfuse's: no file
 * redefines one. fs-writes.h is the write path's own header (fs_write.c, fs_writes.c). */
#ifndef FLUXFS_FS_INTERNAL_H
#define FLUXFS_FS_INTERNAL_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "fluxfs/fs.h"
#include "fluxfs/gcs.h"
#include "fluxfs/inode.h"
#include "fluxfs/membudget.h"
#include "fluxfs/metrics.h"
#include "fluxfs/namespace.h"
#include "fluxfs/reader.h"
#include "fluxfs/writer.h"

/* inode->kernel_cache_generation after bytes that failed the end-to-end CRC32C check were
 * served: no generation is negative, so the next open drops the kernel's pages. */
#define FS_KERNEL_CACHE_SUSPECT INT64_C(-2)

/* FUSE requests the daemon answered (counted by the control wrapper, fs_control.c, for
 * everything but the control files) and what was put into the kernel's page cache; shown in
 * MOUNT/.fluxfs/status. Atomics. */
struct fs_counters {
    uint64_t lookups, getattrs, opens, reads, flushes, releases;
    uint64_t kernel_stores, kernel_store_bytes;
};

/* A decorator of the operations table (fs_table.c): the table it wraps. */
struct fs_layer {
    struct fuse_lowlevel_ops inner;
};

struct fs {
    const struct fs_config *cfg; /* not owned */
    struct gcs_client *client;   /* not owned */
    struct namespace *ns;
    struct inode_table *inodes;
    struct membudget *budget;
    struct reader_config reader_config;
    struct reader_pool *readers; /* readers of large objects shared per version (the
                                    budget's reclaimer) */
    struct fuse_session *session;
    bool hierarchical_namespace; /* the bucket's folders are real (read at mount,
                                    immutable after): directory renames and rmdir use
                                    the folders API */
    int64_t mount_time_ns;       /* times shown for directories */
    double entry_timeout_s;
    double attr_timeout_s;
    double negative_timeout_s;
    int64_t stat_ttl_us;
    GThread *prefetch_thread;              /* --prefetch-metadata, joined at unmount */
    struct fs_control *control;            /* .fluxfs, content cache, prefetcher (fs_control.c):
                                              set at FUSE init, cleared at FUSE destroy */
    struct prefetcher *prefetcher;         /* control's prefetcher (NULL: none), with control:
                                              fs_read tells it of kernel evictions */
    struct fs_layer control_layer;         /* what the decorators wrap (fs_table.c): set before */
    struct fs_layer metrics_layer;         /* the session starts, read-only after */
    struct fs_writes *writes;              /* files being written (fs_writes.c) */
    int renames_unfinished;                /* atomic: a directory rename stopped part way and
                                              left its intent record (fs_rename.c) */
    struct fs_counters counters;           /* atomics */
    struct metrics_server *metrics_server; /* --prometheus-port; mount thread only */
    int64_t started_us;                    /* monotonic, before mounting: the uptime shown */
    /* Open handles (struct fs_file / struct fs_dir -> enum fs_handle_kind), under
     * handles_lock: the kernel sends RELEASE/RELEASEDIR asynchronously, and one queued when the
     * session ends is never read; what is left is freed at FUSE destroy (before the content
     * cache their state refers to goes). */
    GMutex handles_lock;
    GHashTable *open_handles;
    /* Read-only mounts whose kernel opens files without asking (fs_init): set before the
     * session starts, cleared by fs_init when the kernel cannot. READs then come without
     * handles (fs_noopen.c). */
    bool no_open;
    struct fs_noopen *noopen;
    /* Kernel notifications (fs_notify.c): started at FUSE init, stopped at FUSE destroy. */
    struct fs_notifier *notifier;         /* atomic pointer */
    struct fs_notifier *notifier_retired; /* stopped, freed with the fs state */
    /* Hand-over (fs_handover.c, fs_gate.c). Handles carried from the process before keep the
     * numbers the kernel knows: handle_aliases maps such a number (or an odd alias given to a
     * new handle whose address equals one of them) to the handle, handle_numbers the other way
     * (both under handles_lock; handle_alias_count atomic, 0: no lookups at all). */
    GHashTable *handle_aliases; /* uint64_t * -> handle */
    GHashTable *handle_numbers; /* handle -> uint64_t * (the key above) */
    int handle_alias_count;
    uint64_t next_handle_alias;   /* odd; handles_lock */
    int control_handles_open;     /* atomic: .fluxfs files open (cannot be carried) */
    struct fs_gate *gate;         /* the device I/O gate; NULL: no custom I/O */
    struct fs_handover *handover; /* the listener (old side); NULL: none */
    uint64_t handovers;           /* hand-overs this mount has had (carried along) */
    struct fs_crash *crash;       /* crash-recovery state (fs_crash.c); NULL: unsupervised */
    uint64_t crash_restarts;      /* serving processes this mount lost and replaced */
    bool handed_over;             /* this process gave the mount away: no unmount */
};

/* ---- the device gate (fs_gate.c) ----
 * Every request read and reply written: see the file's comment. close stops new reads and
 * waits (until deadline_us, monotonic) until every request read is answered and every thread
 * is back (0), or reopens and returns -ETIMEDOUT. The kernel's first INIT and its answer are
 * kept (init_request/init_reply return references or NULL); a new process is given them
 * (set_init), and swallow(unique) keeps the answer to a synthesized INIT from the kernel
 * (take_swallowed returns it). */
struct fs_gate;
struct fs_gate *fs_gate_new(void);
void fs_gate_free(struct fs_gate *gate);
void fs_gate_set_crash(struct fs_gate *gate, struct fs_crash *crash);
/* A test hook (FLUXFS_TEST_KILL_AFTER_READ=OPCODE:N, read by fs_crash_start in the first
 * serving process of a --crash-restart mount): the process kills itself right after reading
 * the Nth request of that opcode, before recording it, the window the landings cover. */
void fs_gate_set_kill_after_read(struct fs_gate *gate, uint32_t opcode, uint64_t nth);
/* FLUXFS_TEST_KILL_AFTER_REPLY=OPCODE:N: dies right after answering that request, before its
 * slot is cleared (the next process serves it again: an answer the kernel then refuses). */
void fs_gate_set_kill_after_reply(struct fs_gate *gate, uint32_t opcode, uint64_t nth);
void fs_gate_expect(struct fs_gate *gate); /* a request given to the session by hand */
/* A connection this process mounted or was given fresh (/dev/fd/N): a first request other than
 * INIT is refused (fs_gate_refused returns its opcode; the session loop ends). */
void fs_gate_expect_init(struct fs_gate *gate);
uint32_t fs_gate_refused(struct fs_gate *gate);
bool fs_gate_needs_reply(uint32_t opcode); /* FORGETs and INTERRUPTs get no answer */
ssize_t fs_gate_read(struct fs_gate *gate, int fd, void *buf, size_t len);
ssize_t fs_gate_writev(struct fs_gate *gate, int fd, struct iovec *iov, int count);
int fs_gate_close(struct fs_gate *gate, const char *mountpoint, int64_t deadline_us);
void fs_gate_open(struct fs_gate *gate);
GBytes *fs_gate_init_request(struct fs_gate *gate);
GBytes *fs_gate_init_reply(struct fs_gate *gate);
void fs_gate_set_init(struct fs_gate *gate, GBytes *request, GBytes *reply);
void fs_gate_swallow(struct fs_gate *gate, uint64_t unique);
GBytes *fs_gate_take_swallowed(struct fs_gate *gate);

/* ---- hand-over (fs_handover.c) ----
 * Old side: listen starts a thread that answers hand-over requests on the mount's socket;
 * when one succeeds it calls loop_exit (the session loop must end without unmounting).
 * New side: receive reads the old process's state and the /dev/fuse descriptor (*fd) from
 * sock; restore (after fs_metrics_attach on that descriptor) brings the session to "INIT
 * done", checks that it negotiates what the kernel has, and adopts inodes and handles;
 * finish tells the old process and waits until it let go. Each 0 or -errno with *error. */
struct fs_handover_state;
int fs_handover_listen(struct fs *fs, void (*loop_exit)(void *user), void *user, char **error);
void fs_handover_stop(struct fs *fs);
int fs_handover_receive(struct fs *fs, int sock, struct fs_handover_state **out, int *fd,
                        char **error);
int fs_handover_restore(struct fs *fs, struct fs_handover_state *state, char **error);
int fs_handover_finish(struct fs *fs, struct fs_handover_state *state, char **error);
void fs_handover_state_free(struct fs_handover_state *state);
/* The same state built by crash recovery (fs_crash.c) from its shared memory, for
 * fs_handover_restore (no socket). A file added lost fails its next write/flush with EIO. */
void fs_handover_builders_init(GVariantBuilder *inodes, GVariantBuilder *files,
                               GVariantBuilder *dirs);
void fs_handover_add_inode(GVariantBuilder *inodes, uint64_t ino, uint32_t kind, const char *path,
                           bool detached, uint64_t nlookup);
void fs_handover_add_file(GVariantBuilder *files, uint64_t fh, uint64_t ino, bool lost,
                          int64_t generation, uint64_t size, bool has_crc32c, uint32_t crc32c);
void fs_handover_add_dir(GVariantBuilder *dirs, uint64_t fh, uint64_t ino);
struct fs_handover_state *fs_handover_state_build(struct fs *fs, GBytes *init_request,
                                                  GBytes *init_reply, uint64_t handovers,
                                                  uint64_t next_ino, uint64_t next_alias,
                                                  GVariantBuilder *inodes, GVariantBuilder *files,
                                                  GVariantBuilder *dirs);

/* ---- crash recovery (fs_crash.c) ----
 * Under the supervisor (src/main/supervisor.c) the serving process keeps in a shared memfd
 * what a successor needs if it dies: the INIT, a journal of the inode table's membership and
 * of open handles, and the requests read and not yet answered. open maps the memfd (NULL:
 * recovery off); start hooks the inode table; the gate calls request_read/answered and
 * set_init; fs_handle_opened/closed call handle_opened/closed. recover, in the successor,
 * after fs_metrics_attach on the inherited descriptor: adopts the state and serves again the
 * requests that are safe to repeat, answers the others EIO. */
struct fs_crash;
struct fs_crash *fs_crash_open(int memfd);
void fs_crash_free(struct fs_crash *crash);
void fs_crash_start(struct fs *fs);
int fs_crash_serving(struct fs *fs, int sock);
int fs_crash_device_nonblocking(int fd);
void fs_crash_set_init(struct fs_crash *crash, GBytes *request, GBytes *reply);
void fs_crash_stage(struct fs_crash *crash);
void fs_crash_publish(struct fs_crash *crash);
/* The journal's committed bytes now; how many compactions this process made, their CPU time. */
uint64_t fs_crash_journal_bytes(struct fs_crash *crash, uint64_t *compactions,
                                uint64_t *compaction_us);
void fs_crash_request_read(struct fs_crash *crash, const void *buf, size_t len);
/* The calling thread's landing (SLOT_BYTES in the shared map; NULL: none left): the first
 * bytes of each request are read there (readv), so a request read and not yet in a slot when
 * the process dies is still found; landing_done clears it once the slot holds the request. */
uint8_t *fs_crash_landing(struct fs_crash *crash);
void fs_crash_landing_done(uint8_t *landing);
void fs_crash_request_answered(struct fs_crash *crash, uint64_t unique);
void fs_crash_handle_opened(struct fs *fs, void *handle, int kind, uint64_t fh);
void fs_crash_handle_closed(struct fs *fs, uint64_t fh);
int fs_crash_recover(struct fs *fs, char **error);
/* Called by RELEASE and RELEASEDIR before they free a handle: waits until the requests served
 * again after a crash (begin/end around each, fs_crash.c) are answered, one may use that
 * handle. An atomic load when there are none, or no crash state (NULL). In crash_state.c. */
void fs_crash_replay_begin(struct fs_crash *crash);
void fs_crash_replay_end(struct fs_crash *crash);
void fs_crash_release_wait(struct fs_crash *crash);
/* Joins the threads serving requests again after a crash (they use the session: called before
 * it is destroyed; a replay ends once its answer is written). NULL: nothing. */
void fs_crash_join_replays(struct fs_crash *crash);

/* Kernel notifications go out from the notifier thread, never from a request handler (see
 * fs_notify.c and the lock model above struct fs_open_writer in fs-writes.h): each call queues and
 * returns at once. offset/len as fuse_lowlevel_notify_inval_inode's (0, 0: attributes and all
 * pages; -1: attributes only). */
void fs_notify_start(struct fs *fs);
void fs_notify_stop(struct fs *fs);
void fs_notify_free(struct fs *fs);
void fs_notify_inval_inode(struct fs *fs, uint64_t ino, int64_t offset, int64_t len);
void fs_notify_inval_entry(struct fs *fs, uint64_t parent, const char *name);

/* Handle-less reads (fs_noopen.c): the state of a file read with handle 0, per inode.
 * acquire returns 0 and an entry to give back with release (served_whole: a small object's
 * end went to the kernel, which now holds all of it), or -errno. */
struct fs_noopen_entry;
void fs_noopen_init(struct fs *fs);
void fs_noopen_clear(struct fs *fs); /* at FUSE destroy */
int fs_noopen_acquire(struct fs *fs, uint64_t ino, struct fs_noopen_entry **out);
struct fs_file *fs_noopen_file(struct fs_noopen_entry *entry);
void fs_noopen_release(struct fs *fs, struct fs_noopen_entry *entry, bool served_whole);

/* ---- base (fs_base.c) ---- */

/* The request being served on this thread: the metrics decorator (fs_metrics.c) enters one
 * around every operation it runs and leaves it when the operation returns. */
struct fs_request {
    int err; /* errno of the error reply; 0 = success or none yet */
    enum metrics_fs_op op;
    struct fs_request *previous;
};
void fs_request_enter(struct fs_request *request, enum metrics_fs_op op);
void fs_request_leave(struct fs_request *request);

/* The fs layer's error and entry replies (never libfuse's fuse_reply_err/fuse_reply_entry
 * directly): each counts the errno for the request being served on this thread (the
 * fs_ops_error_count metric; a negative entry, ino 0, cached by the kernel, is the caller's
 * ENOENT), or for METRICS_FS_OTHERS outside one, then replies through libfuse. */
int fs_reply_err(fuse_req_t req, int err);
int fs_reply_entry(fuse_req_t req, const struct fuse_entry_param *entry);

struct fs_file;
struct fs_dir;
enum fs_handle_kind { FS_HANDLE_FILE = 1, FS_HANDLE_DIR = 2 };
/* Records a handle given to the kernel / forgets one it released (fs_base.c): true when it was
 * still recorded, and the caller frees it (false: the session's end freed it already). */
void fs_handle_opened(struct fs *fs, void *handle, enum fs_handle_kind kind,
                      struct fuse_file_info *fi);
bool fs_handle_closed(struct fs *fs, void *handle);
/* The number the kernel is given for a handle (fi->fh): its address, or an alias when that
 * address is the number of a handle carried from the process before (fs_handover.c).
 * fs_handle_opened does it for files and directories; .fluxfs files call expose/unexpose
 * themselves. resolve turns a number from the kernel back into the handle (the metrics
 * decorator, outermost, for every request with a handle). alias_locked records a number
 * (handles_lock held); number_locked gives a handle's number (handles_lock held). */
void fs_handle_expose(struct fs *fs, void *handle, struct fuse_file_info *fi);
void fs_handle_unexpose(struct fs *fs, void *handle);
bool fs_handle_resolve(struct fs *fs, struct fuse_file_info *fi);
void fs_handle_alias_locked(struct fs *fs, uint64_t fh, void *handle);
uint64_t fs_handle_number_locked(struct fs *fs, void *handle);
/* Frees an open file's or directory's state (what RELEASE / RELEASEDIR free). */
void fs_file_free(struct fs *fs, struct fs_file *file);
void fs_dir_free(struct fs_dir *dir);

/* An open file. */
#define FS_FILE_OWNERS 4
struct fs_file {
    struct inode *inode; /* counted reference */
    struct reader *reader;
    struct readahead_state ra;     /* this handle's sequential detection (reader's lock) */
    struct fs_open_writer *writer; /* counted reference when opened for writing (fs_writes.c) */
    bool writable;                 /* opened for writing: flush may commit */
    /* Commit rights of a writable handle (fs_write.c; the model above struct fs_open_writer
     * in fs-writes.h): the processes (thread group ids) that opened it or wrote through it,
     * and the writer's change number of this handle's last change. Atomics. */
    int owners[FS_FILE_OWNERS]; /* 0: a free slot */
    int owners_overflow;        /* more processes than slots: any one's FLUSH commits */
    int last_writer_tid;        /* the last writing thread, already recorded */
    int64_t last_change;
    bool kernel_held; /* atomic: a small object whose pages the kernel should
                       * hold (kept or stored at open): a READ means it evicted
                       * them (fs_read tells the prefetcher) */
    /* A small object (NULL name otherwise): name, generation and size, to demote its content
     * cache entry once READs gave the kernel all of it. */
    char *small_name;
    int64_t small_generation;
    uint64_t small_size;
    /* A large object (gcsfuse's file cache, --cache-dir): served from its disk cache file
     * (from_cache, cache_fd, no reader), or stored there as it is read (fill, a reference). */
    bool from_cache;
    int cache_fd;
    uint64_t cache_size;
    struct content_fill *fill;
    /* Open for writing in a serving process that died (fs_crash.c): its unwritten bytes are
     * gone; write, flush and fsync fail with EIO. */
    bool lost;
    /* The version this handle reads (fs_file_new; object.name is object_name). */
    char *object_name;
    struct reader_object object;
};

/* A handle's state for inode (whose counted reference it takes) at the version attrs
 * describes: its reader, or its disk cache file. */
struct fs_file *fs_file_new(struct fs *fs, struct inode *inode, const struct meta_attrs *attrs,
                            int open_flags);

/* An open directory: a snapshot served with offsets = entry index + 1. */
struct fs_dir {
    GMutex lock;                 /* guards a late fill of listing */
    struct dir_listing *listing; /* counted reference; NULL until the first readdir when the
                                    kernel was told to keep its cached entries */
    uint64_t ino;
    char *path;
};

/* The operations table (fs_table.c): the base operations (fs_ops_fill, then
 * fs_write_ops_fill over its read-only stubs), wrapped by the control decorator, wrapped by
 * the metrics decorator. Before the session starts. */
void fs_table_fill(struct fs *fs, struct fuse_lowlevel_ops *ops);
/* The base operations: names, reads, directories, INIT/DESTROY, read-only stubs (fs_ops.c). */
void fs_ops_fill(struct fuse_lowlevel_ops *ops);

/* Attributes of an inode as stat shows them. */
void fs_fill_stat(const struct fs *fs, uint64_t ino, enum meta_kind kind,
                  const struct meta_attrs *attrs, struct stat *st);

/* Directory operations (fs_dir.c). */
void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* Writes: state made at mount (crash cleanup runs there) and freed at unmount, and the hooks
 * the read operations call for files being written (fs_writes.c); the write operations,
 * fs_write_open and fs_write_read (fs_write.c). */
void fs_writes_init(struct fs *fs);
void fs_writes_clear(struct fs *fs);
void fs_write_ops_fill(struct fuse_lowlevel_ops *ops);
/* open with write flags, or of a file being written: handled (true) or not (false). */
bool fs_write_open(fuse_req_t req, struct fs *fs, struct inode *inode, struct fuse_file_info *fi);
/* read of a handle whose file is being written: handled (true) or not. */
bool fs_write_read(fuse_req_t req, struct fs_file *file, size_t size, off_t off);
/* Drops the handle's writer reference (release). */
void fs_write_release(struct fs *fs, struct fs_file *file);
/* Size and mtime of a file being written override st's. */
void fs_write_patch_stat(struct fs *fs, uint64_t ino, struct stat *st);
/* Whether ino is being written (its attributes come from the writer, not Cloud Storage). */
bool fs_write_active(struct fs *fs, uint64_t ino);
/* Whether ino's path was renamed away: the kernel may still reach it under the new name until
 * its dentry is invalidated; opens, opendirs and lookups below it answer ESTALE, and the kernel
 * then looks the name up again (LOOKUP_REVAL) and gets the inode of the new path. */
bool fs_write_renamed(struct fs *fs, uint64_t ino);
/* namespace_resolve, except that a file being written at path (not unlinked, not renamed
 * away) is a file with its writer's size even before its first commit and after the stat TTL:
 * lookups, unlink and rename see it while it is open. */
int fs_write_resolve(struct fs *fs, const char *path, enum meta_kind *kind,
                     struct meta_attrs *attrs);
/* Adds to a listing of dir_path the files open for writing there that it lacks (not committed
 * yet, or listed before they were): a file being written stays visible by name after the stat
 * TTL. Takes the caller's reference to listing and returns one to the result. */
struct dir_listing *fs_write_merge_listing(struct fs *fs, const char *dir_path,
                                           struct dir_listing *listing);

/* Directory renames that survive a crash (fs_rename.c). fs_rename_dir_objects moves objects
 * (just listed below src_prefix; the destination prefix holds nothing) to dest_prefix under an
 * intent record in MOUNT_PREFIX/.fluxfs/renames/: 0, -ENOTEMPTY when someone wrote below the
 * new name meanwhile (those sources stay), or the first error (the record stays; the next
 * mount finishes the rename). fs_rename_recover (at mount, read-write mounts, before serving)
 * rolls every record there forward, one log line each: the number of records found, or
 * -errno when they could not be listed. fs_rename_record_root: "PREFIX.fluxfs/renames/". */
int fs_rename_dir_objects(struct fs *fs, const char *src_prefix, const char *dest_prefix,
                          const GPtrArray *objects);
int fs_rename_recover(struct gcs_client *client, const char *mount_prefix);
char *fs_rename_record_root(const char *mount_prefix);

/* Decorators (called by fs_table_fill only): each copies ops, the table below it, into layer
 * and replaces ops' entries by its own, which call layer->inner's. The control directory
 * .fluxfs, the content cache and the prefetcher (fs_control.c). */
void fs_control_decorate(struct fs_layer *layer, struct fuse_lowlevel_ops *ops);

/* The metrics decorator (fs_metrics.c) wraps the whole table (outside control) to count
 * every FUSE request by kind, with its errno (fs_reply_err) and latency. */
void fs_metrics_decorate(struct fs_layer *layer, struct fuse_lowlevel_ops *ops);
/* After mounting, before the session loop: libfuse reads the device through fs_metrics, which
 * counts INTERRUPT requests (libfuse answers those itself). 0 or -errno (then uncounted). */
int fs_metrics_count_interrupts(struct fuse_session *session);
/* The same on a descriptor given by the process before (a hand-over): the session reads fd. */
int fs_metrics_attach(struct fuse_session *session, int fd);

/* Rendering (fs_status.c): status_append adds the mount's identity, per-kind request counts
 * and request/upload/memory/cost figures to .fluxfs/status; render_metrics writes the
 * registry and the fs-level families of /metrics. */
void fs_status_append(struct fs *fs, GString *out);
void fs_status_render_metrics(struct fs *fs, GString *out);
/* The control layer's families for /metrics: prefetch, content cache, miss batches. */
void fs_control_render_metrics(struct fs *fs, GString *out);
/* After a hand-over: the .fluxfs inodes the kernel knows are the control layer's again. */
void fs_control_adopt_inodes(struct fs *fs);
/* Files open for writing now. */
size_t fs_write_open_count(struct fs *fs);
/* Bytes in the memory buffers of files being written (zeros before fs_write_init). */
void fs_write_buffer_stats(struct fs *fs, struct writer_buffer_stats *out);
/* Commits every file open for writing as fsync would (the shutdown grace is over); each
 * outcome is logged. Returns 0 or the first error; counts in *committed and *failed. */
int fs_write_commit_all(struct fs *fs, size_t *committed, size_t *failed);

/* Shared by lookup and readdirplus: an entry reply for a resolved child (adds a lookup). */
void fs_fill_entry(struct fs *fs, struct inode *inode, struct fuse_entry_param *entry);
/* Replies to getattr/setattr with inode's attributes (a file being written: its writer's size). */
void fs_reply_attr(fuse_req_t req, struct fs *fs, struct inode *inode);

#endif
