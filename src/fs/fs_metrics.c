/* The metrics decorator: every FUSE request counted by kind with its latency and error
 * (fs_ops_* metrics, in the util layer's registry; fs_status.c renders them).
 *
 * Counting: fs_metrics_decorate wraps the whole operations table (fs_table.c puts it outside
 * the control decorator, so requests about .fluxfs count too). Every kind the kernel can send
 * is wrapped: an operation fluxfs leaves unset is answered ENOSYS here, as libfuse would,
 * except the ones whose mere presence changes what libfuse negotiates at INIT (write_buf,
 * getlk/setlk, flock, readdirplus) or whose absence libfuse answers with success (open,
 * opendir, release, releasedir, statfs, forget): those are wrapped only when set. Every fs
 * operation replies on the thread that runs it, so the wrapper enters a thread-local request
 * (struct fs_request, fs_base.c): the request is counted as it is received, the error reply
 * (fs_reply_err) counts its errno before the kernel hears it (a scrape after the syscall
 * returns sees both), the latency is the operation's run time. INTERRUPT, which libfuse handles
 * by itself, is counted where libfuse reads the device. */
#include <errno.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fluxfs/metrics.h"
#include "fs-internal.h"

static int64_t monotonic_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

/* The operations this decorator wraps: the table fs_table.c handed to it, kept in struct fs. */
static const struct fuse_lowlevel_ops *inner_of(void *userdata)
{
    return &((struct fs *)userdata)->metrics_layer.inner;
}

static const struct fuse_lowlevel_ops *inner(fuse_req_t req)
{
    return inner_of(fuse_req_userdata(req));
}

/* A request's run: counted as received, its error reply counted by fs_reply_err (fs_base.c),
 * its latency the operation's run time. */
struct op_frame {
    struct fs_request request;
    int64_t start_us;
};

static void op_begin(enum metrics_fs_op op, struct op_frame *frame)
{
    metrics_fs_op_received(op);
    fs_request_enter(&frame->request, op);
    frame->start_us = monotonic_us();
}

static void op_end(enum metrics_fs_op op, struct op_frame *frame)
{
    int64_t elapsed = monotonic_us() - frame->start_us;
    fs_request_leave(&frame->request);
    metrics_fs_op_latency(op, elapsed > 0 ? (uint64_t)elapsed : 0);
}

/* A wrapper per operation: run the inner one in a frame, or answer ENOSYS. Handle numbers
 * from the kernel are turned back into handles first (fs_handle_resolve: only after a
 * hand-over carried handles, else nothing); RESOLVE names the file infos of the request. */
#define RESOLVE(fi)                      fs_handle_resolve(fuse_req_userdata(req), fi)
#define NO_HANDLE                        true
#define METERED(op, field, params, args) METERED_RESOLVED(op, field, params, args, NO_HANDLE)
#define METERED_RESOLVED(op, field, params, args, resolve)                                         \
    static void metered_##field params                                                             \
    {                                                                                              \
        struct op_frame frame;                                                                     \
        op_begin(op, &frame);                                                                      \
        if (!(resolve))                                                                            \
            fs_reply_err(req, EBADF); /* a dead process's handle (fs_crash.c) */                   \
        else if (inner(req)->field)                                                                \
            inner(req)->field args;                                                                \
        else                                                                                       \
            fs_reply_err(req, ENOSYS);                                                             \
        op_end(op, &frame);                                                                        \
    }

METERED(METRICS_FS_LOOKUP, lookup, (fuse_req_t req, fuse_ino_t parent, const char *name),
        (req, parent, name))
METERED(METRICS_FS_FORGET, forget, (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup),
        (req, ino, nlookup))
METERED(METRICS_FS_BATCH_FORGET, forget_multi,
        (fuse_req_t req, size_t count, struct fuse_forget_data *forgets), (req, count, forgets))
METERED_RESOLVED(METRICS_FS_GETATTR, getattr,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), (req, ino, fi),
                 RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_SETATTR, setattr,
                 (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                  struct fuse_file_info *fi),
                 (req, ino, attr, to_set, fi), RESOLVE(fi))
METERED(METRICS_FS_READLINK, readlink, (fuse_req_t req, fuse_ino_t ino), (req, ino))
METERED(METRICS_FS_MKNOD, mknod,
        (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev),
        (req, parent, name, mode, rdev))
METERED(METRICS_FS_MKDIR, mkdir, (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode),
        (req, parent, name, mode))
METERED(METRICS_FS_UNLINK, unlink, (fuse_req_t req, fuse_ino_t parent, const char *name),
        (req, parent, name))
METERED(METRICS_FS_RMDIR, rmdir, (fuse_req_t req, fuse_ino_t parent, const char *name),
        (req, parent, name))
METERED(METRICS_FS_SYMLINK, symlink,
        (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name),
        (req, link, parent, name))
METERED(METRICS_FS_RENAME, rename,
        (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
         const char *newname, unsigned int flags),
        (req, parent, name, newparent, newname, flags))
METERED(METRICS_FS_LINK, link,
        (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname),
        (req, ino, newparent, newname))
METERED(METRICS_FS_OPEN, open, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
        (req, ino, fi))
METERED_RESOLVED(METRICS_FS_READ, read,
                 (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  struct fuse_file_info *fi),
                 (req, ino, size, off, fi), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_WRITE, write,
                 (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                  struct fuse_file_info *fi),
                 (req, ino, buf, size, off, fi), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_WRITE, write_buf,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
                  struct fuse_file_info *fi),
                 (req, ino, bufv, off, fi), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_FLUSH, flush,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), (req, ino, fi),
                 RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_RELEASE, release,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), (req, ino, fi),
                 RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_FSYNC, fsync,
                 (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
                 (req, ino, datasync, fi), RESOLVE(fi))
METERED(METRICS_FS_OPENDIR, opendir, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
        (req, ino, fi))
METERED_RESOLVED(METRICS_FS_READDIR, readdir,
                 (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  struct fuse_file_info *fi),
                 (req, ino, size, off, fi), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_READDIRPLUS, readdirplus,
                 (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  struct fuse_file_info *fi),
                 (req, ino, size, off, fi), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_RELEASEDIR, releasedir,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), (req, ino, fi),
                 RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_FSYNCDIR, fsyncdir,
                 (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
                 (req, ino, datasync, fi), RESOLVE(fi))
METERED(METRICS_FS_STATFS, statfs, (fuse_req_t req, fuse_ino_t ino), (req, ino))
METERED(METRICS_FS_SETXATTR, setxattr,
        (fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
         int flags),
        (req, ino, name, value, size, flags))
METERED(METRICS_FS_GETXATTR, getxattr,
        (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size), (req, ino, name, size))
METERED(METRICS_FS_LISTXATTR, listxattr, (fuse_req_t req, fuse_ino_t ino, size_t size),
        (req, ino, size))
METERED(METRICS_FS_REMOVEXATTR, removexattr, (fuse_req_t req, fuse_ino_t ino, const char *name),
        (req, ino, name))
METERED(METRICS_FS_ACCESS, access, (fuse_req_t req, fuse_ino_t ino, int mask), (req, ino, mask))
METERED(METRICS_FS_CREATE, create,
        (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
         struct fuse_file_info *fi),
        (req, parent, name, mode, fi))
METERED_RESOLVED(METRICS_FS_GETLK, getlk,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock),
                 (req, ino, fi, lock), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_SETLK, setlk,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
                  int sleep),
                 (req, ino, fi, lock, sleep), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_FLOCK, flock,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op),
                 (req, ino, fi, op), RESOLVE(fi))
METERED(METRICS_FS_BMAP, bmap, (fuse_req_t req, fuse_ino_t ino, size_t blocksize, uint64_t idx),
        (req, ino, blocksize, idx))
METERED_RESOLVED(METRICS_FS_IOCTL, ioctl,
                 (fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                  struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
                  size_t out_bufsz),
                 (req, ino, cmd, arg, fi, flags, in_buf, in_bufsz, out_bufsz), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_POLL, poll,
                 (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                  struct fuse_pollhandle *ph),
                 (req, ino, fi, ph), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_FALLOCATE, fallocate,
                 (fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  struct fuse_file_info *fi),
                 (req, ino, mode, offset, length, fi), RESOLVE(fi))
METERED_RESOLVED(METRICS_FS_COPY_FILE_RANGE, copy_file_range,
                 (fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                  fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                  int flags),
                 (req, ino_in, off_in, fi_in, ino_out, off_out, fi_out, len, flags),
                 (RESOLVE(fi_in), RESOLVE(fi_out)))
METERED_RESOLVED(METRICS_FS_LSEEK, lseek,
                 (fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi),
                 (req, ino, off, whence, fi), RESOLVE(fi))

/* INIT and DESTROY carry no request to reply to: counted with their run time. */
static void metered_init(void *userdata, struct fuse_conn_info *conn)
{
    int64_t start = monotonic_us();
    if (inner_of(userdata)->init)
        inner_of(userdata)->init(userdata, conn);
    metrics_fs_op_done(METRICS_FS_INIT, 0, (uint64_t)MAX(monotonic_us() - start, 0));
}

static void metered_destroy(void *userdata)
{
    int64_t start = monotonic_us();
    if (inner_of(userdata)->destroy)
        inner_of(userdata)->destroy(userdata);
    metrics_fs_op_done(METRICS_FS_DESTROY, 0, (uint64_t)MAX(monotonic_us() - start, 0));
}

/* INTERRUPT never reaches an operation: libfuse's own handler marks the request it names
 * (fuse_req_interrupted, the interrupt callback) and answers nothing. libfuse 3.14 has no hook
 * for it, but reads every request through the session's custom I/O when one is set (cloned
 * descriptors too): this read counts the INTERRUPTs (no latency: libfuse deals with them at
 * once). Splice is off (fs_init, fs_ops.c), so a request's header always arrives in buf. */
static ssize_t device_read(int fd, void *buf, size_t len, void *userdata)
{
    struct fs *fs = userdata;
    ssize_t got = fs_gate_read(fs->gate, fd, buf, len);
    if (got >= (ssize_t)sizeof(struct fuse_in_header) &&
        ((const struct fuse_in_header *)buf)->opcode == FUSE_INTERRUPT)
        metrics_fs_op_done(METRICS_FS_INTERRUPT, 0, 0);
    return got;
}

static ssize_t device_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    struct fs *fs = userdata;
    return fs_gate_writev(fs->gate, fd, iov, count);
}

int fs_metrics_attach(struct fuse_session *session, int fd)
{
    static const struct fuse_custom_io device_io = {
        .read = device_read,
        .writev = device_writev,
    };
    int rc = fuse_session_custom_io(session, &device_io, fd);
    return rc < 0 ? rc : 0;
}

int fs_metrics_count_interrupts(struct fuse_session *session)
{
    return fs_metrics_attach(session, fuse_session_fd(session));
}

void fs_metrics_decorate(struct fs_layer *layer, struct fuse_lowlevel_ops *ops)
{
    layer->inner = *ops;
    ops->init = metered_init;
    ops->destroy = metered_destroy;
#define ALWAYS(field) ops->field = metered_##field
#define WHEN_SET(field)                                                                            \
    if (layer->inner.field)                                                                        \
    ops->field = metered_##field
    ALWAYS(lookup);
    WHEN_SET(forget);
    WHEN_SET(forget_multi);
    ALWAYS(getattr);
    ALWAYS(setattr);
    ALWAYS(readlink);
    ALWAYS(mknod);
    ALWAYS(mkdir);
    ALWAYS(unlink);
    ALWAYS(rmdir);
    ALWAYS(symlink);
    ALWAYS(rename);
    ALWAYS(link);
    WHEN_SET(open);
    ALWAYS(read);
    ALWAYS(write);
    WHEN_SET(write_buf);
    ALWAYS(flush);
    WHEN_SET(release);
    ALWAYS(fsync);
    WHEN_SET(opendir);
    ALWAYS(readdir);
    WHEN_SET(readdirplus);
    WHEN_SET(releasedir);
    ALWAYS(fsyncdir);
    WHEN_SET(statfs);
    ALWAYS(setxattr);
    ALWAYS(getxattr);
    ALWAYS(listxattr);
    ALWAYS(removexattr);
    ALWAYS(access);
    ALWAYS(create);
    WHEN_SET(getlk);
    WHEN_SET(setlk);
    WHEN_SET(flock);
    ALWAYS(bmap);
    ALWAYS(ioctl);
    ALWAYS(poll);
    ALWAYS(fallocate);
    ALWAYS(copy_file_range);
    ALWAYS(lseek);
#undef ALWAYS
#undef WHEN_SET
}
