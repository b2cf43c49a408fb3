/* The FUSE operations that change things: create, write, flush/fsync (commit), release of
 * written handles, setattr (truncate, utimens, chmod/chown), mknod, mkdir, rmdir, unlink,
 * symlink, rename. Files being written are struct fs_open_writer, one per inode, shared by
 * every handle of that inode (so reads of any handle see what was written); the writer
 * (io/writer.h) holds the bytes and uploads them.
 *
 * The table of files being written is fs_writes.c; the ownership, lock and commit model of
 * the write path is written above struct fs_open_writer in fs-writes.h; the man page
 * (COMMITS) and docs/semantics.md say the same for users.
 * The kernel's caches: changes made through the mount are known to the kernel, except that
 * a renamed inode keeps its old path here; the new name's dentry is invalidated by the
 * notifier thread after the reply (fs_notify.c: no handler notifies the kernel).
 *
 * A commit that fails for good (412: another writer won; 5xx past the retries) leaves the
 * name as the bucket has it, not as this mount last saw it: the writer leaves by_ino (its
 * handles keep it; a new open starts from the bucket), the name's cached metadata and the
 * inode's attributes are dropped, and the kernel's attributes, pages and dentry, which may
 * hold the failed writer's size and bytes, are invalidated (fs_drop_failed_commit). */
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
#include "fs-writes.h"

#define FS_WRITE_READ_MAX (16u << 20)

static struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
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
    struct reader_object object = {.name = object_name,
                                   .generation = attrs.generation,
                                   .size = attrs.size,
                                   .has_crc32c = attrs.has_crc32c,
                                   .crc32c = attrs.crc32c};
    struct reader *reader = reader_new(fs->client, fs->budget, &fs->reader_config, &object);
    g_free(object_name);
    meta_attrs_clear(&attrs);
    return reader;
}

bool fs_write_open(fuse_req_t req, struct fs *fs, struct inode *inode, struct fuse_file_info *fi)
{
    if (fs_was_renamed(fs, inode->ino)) {
        flog_info("fs",
                  "open of inode %" PRIu64 " ('%s'): that name was renamed away (the "
                  "kernel reached the inode under its new name); answering ESTALE (the kernel "
                  "looks the name up again)",
                  inode->ino, inode->path);
        inode_put(fs->inodes, inode);
        fs_reply_err(req, ESTALE);
        return true;
    }
    int accmode = fi->flags & O_ACCMODE;
    bool wants_write = accmode != O_RDONLY || (fi->flags & O_TRUNC);
    if (!wants_write && !fs_write_active(fs, inode->ino))
        return false;
    if (wants_write && fs->cfg->read_only) {
        inode_put(fs->inodes, inode);
        fs_reply_err(req, EROFS);
        return true;
    }
    struct fs_open_writer *open_writer = NULL;
    int rc = fs_writer_for_inode(fs, inode, (fi->flags & O_TRUNC) != 0, false, &open_writer);
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
    fs_handle_opened(fs, file, FS_HANDLE_FILE, fi);
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
    if (file && file->lost) {
        fs_reply_err(req, EIO); /* the serving process that had its bytes died */
        return;
    }
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
    flog_warn("fs",
              "'%s': the process writing it (pid %d) was killed by signal %d before "
              "closing it: its %" PRIu64 " bytes are not committed; the bucket keeps the "
              "previous version",
              open_writer->path, tid, signal, writer_size(open_writer->writer));
    fs_drop_failed_commit(fs, open_writer);
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct fs_file *file = (struct fs_file *)(uintptr_t)fi->fh;
    int rc = 0;
    if (file && file->lost)
        rc = -EIO;
    else if (file && file->writer && file->writable && file_has_uncommitted_change(file) &&
             !__atomic_load_n(&file->writer->abandoned, __ATOMIC_ACQUIRE)) {
        int tid = (int)fuse_req_ctx(req)->pid;
        int signal = tid > 0 ? killing_signal(tid) : 0;
        if (signal != 0 && file_owned_by(file, tid))
            abandon_writer(fs, file, tid, signal);
        else if (file_owned_by(file, tid))
            rc = fs_commit_and_publish(fs, file->writer);
        else
            flog_debug("fs",
                       "'%s': FLUSH from pid %d, which neither opened it for writing "
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
    if (file && file->lost)
        rc = -EIO;
    else if (file && file->writer && file->writable)
        rc = fs_commit_and_publish(fs_of(req), file->writer);
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
    int rc = fs_writer_for_inode(fs, inode, size == 0, false, &open_writer);
    if (rc < 0)
        return rc;
    rc = writer_truncate(open_writer->writer, size);
    if (rc == 0)
        rc = fs_commit_and_publish(fs, open_writer);
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
    struct gcs_write_attrs change = {
        .has_mtime = true, .mtime_ns = mtime_ns, .symlink_target = attrs.symlink_target};
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
    struct fs_open_writer *open_writer = fs_open_writer_find(fs, inode->ino, false);
    int rc = set_mtime_of(fs, inode, open_writer, mtime_ns);
    fs_open_writer_unref(fs, open_writer);
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
    if (fs->cfg->read_only) {
        rc = -EROFS;
        goto out;
    }
    if (!fi && fs_write_renamed(fs, ino)) {
        /* truncate/utimes/chmod by path reached the inode of a name renamed away (its path
         * here is the old one): ESTALE makes the kernel look the path up again. */
        flog_info("fs",
                  "setattr of inode %" PRIu64 " ('%s'): that name was renamed away; "
                  "answering ESTALE (the kernel looks the name up again)",
                  inode->ino, inode->path);
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
            struct fs_open_writer *open_writer = fs_open_writer_find(fs, ino, false);
            if (open_writer) {
                /* A truncate(path) of a file open elsewhere (a reader's handle keeps its
                 * writer): with nothing else pending it is committed now, as truncate of a
                 * file nobody has open is; else with the pending changes, at their close. */
                bool pending = writer_dirty(open_writer->writer);
                rc = writer_truncate(open_writer->writer, (uint64_t)attr->st_size);
                if (rc == 0 && !pending)
                    rc = fs_commit_and_publish(fs, open_writer);
            } else {
                rc = truncate_unopened(fs, inode, (uint64_t)attr->st_size);
            }
            fs_open_writer_unref(fs, open_writer);
        }
        if (rc < 0)
            goto out;
    }
    if ((to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) && inode->kind != META_DIR) {
        int64_t mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? now_ns() : timespec_ns(&attr->st_mtim);
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
    if (fs->cfg->read_only)
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
    if (!err && !name_map_object_name_fits(fs->cfg->prefix, *out, false)) {
        g_free(*out);
        *out = NULL;
        err = ENAMETOOLONG;
    }
    return err;
}

static void reply_new_entry(fuse_req_t req, struct fs *fs, const char *path, enum meta_kind kind,
                            const struct meta_attrs *attrs)
{
    struct inode *inode = inode_table_lookup(
        fs->inodes, path, kind, kind == META_DIR ? NULL : attrs, g_get_monotonic_time());
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
    struct inode *inode =
        inode_table_lookup(fs->inodes, path, META_FILE, &fresh, g_get_monotonic_time());
    struct fs_open_writer *open_writer = NULL;
    rc = fs_writer_for_inode(fs, inode, true, absent, &open_writer);
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
    fs_handle_opened(fs, file, FS_HANDLE_FILE, fi);
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
    struct gcs_body body = {.data = bytes,
                            .fd = -1,
                            .len = len,
                            .has_crc32c = true,
                            .crc32c = crc32c_update(0, bytes, len)};
    struct gcs_write_attrs write_attrs = {
        .has_mtime = true,
        .mtime_ns = now_ns(),
        .symlink_target = target,
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
    if (rc == 0 && kind == META_DIR && !name_map_object_name_fits(fs->cfg->prefix, path, true))
        rc = -ENAMETOOLONG; /* the placeholder "path/" is one byte longer */
    if (rc == 0 && !regular_node)
        rc = -EPERM; /* mknod of a FIFO, socket or device where nothing is: objects are none */
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    if (rc == 0 && kind == META_DIR && fs->hierarchical_namespace) {
        /* A real folder, not a placeholder object: it is what folders.rename moves and what
         * rmdir deletes, and it lists (includeFoldersAsPrefixes) while empty. */
        char *folder = namespace_dir_prefix(fs->ns, path);
        rc = gcs_folder_insert(fs->client, folder);
        g_free(folder);
    } else if (rc == 0) {
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

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
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
        flog_warn("fs",
                  "unlink of '%s': the object was replaced behind the mount at each of %d "
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
        struct fs_open_writer *open_writer = ino ? fs_open_writer_find(fs, ino, false) : NULL;
        if (open_writer) {
            /* Its handles go on with it (reads, fstat and reopens through /proc see the
             * writer); a create of the name meanwhile leaves it (fs_writer_for_inode). */
            writer_mark_unlinked(open_writer->writer);
            writing = true;
        }
        fs_open_writer_unref(fs, open_writer);
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
static int dir_has_children(struct fs *fs, const char *dir_prefix, bool *out, int64_t *placeholder)
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
    struct fs_open_writer *open_writer = ino ? fs_open_writer_find(fs, ino, false) : NULL;
    if (open_writer) {
        int rc = fs_commit_and_publish(fs, open_writer);
        fs_open_writer_unref(fs, open_writer);
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
    int rc = gcs_list_all(fs->client, src_prefix, (size_t)fs->cfg->rename_dir_limit, objects);
    if (rc == -EFBIG)
        rc = -EXDEV; /* too many: mv falls back to copying file by file */
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
            fs_note_renamed(fs, src);
    } else if (rc == 0) {
        char *dest_prefix = namespace_dir_prefix(fs->ns, dest);
        bool children = false;
        int64_t placeholder = 0;
        if (dest_exists && dest_kind != META_DIR)
            rc = -ENOTDIR;
        else if (g_str_has_prefix(dest, src) && dest[strlen(src)] == '/')
            rc = -EINVAL;
        else if (dest_exists &&
                 (rc = dir_has_children(fs, dest_prefix, &children, &placeholder)) == 0 && children)
            rc = -ENOTEMPTY;
        if (rc == 0 && dest_exists)
            rc = delete_placeholder(fs, dest_prefix, placeholder);
        if (rc == 0)
            rc = rename_dir(fs, src, dest, dest_exists);
        if (rc == 0)
            fs_note_renamed(fs, src); /* the kernel's dentry of dest has src's inode for now */
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
