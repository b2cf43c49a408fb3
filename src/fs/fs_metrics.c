/* What the mount did, for operators: every FUSE request counted by kind with its latency and
 * error (fs_ops_* metrics), the --prometheus-port listener and its fs-level families, and the
 * lines this adds to MOUNT/.fluxfs/status (fluxfs status reads them).
 *
 * Counting: fs_metrics_wrap_ops wraps the whole operations table (outside the control wrapper,
 * so requests about .fluxfs count too). Every kind the kernel can send is wrapped: an operation
 * fluxfs leaves unset is answered ENOSYS here, as libfuse would, except the ones whose mere
 * presence changes what libfuse negotiates at INIT (write_buf, getlk/setlk, flock, readdirplus)
 * or whose absence libfuse answers with success (open, opendir, release, releasedir, statfs,
 * forget): those are wrapped only when set. Every fs operation replies on the thread that runs
 * it, so the wrapper keeps a thread-local frame: the request is counted as it is received, the
 * error reply (fs_reply_err, fs_base.c) counts its errno before the kernel hears
 * it (a scrape after the syscall returns sees both), the latency is the operation's run time.
 * INTERRUPT, which libfuse handles by itself, is counted where libfuse reads the device. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fluxfs-config.h"
#include "fluxfs/content_cache.h"
#include "fluxfs/invariant.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics.h"
#include "fluxfs/metrics_server.h"
#include "fluxfs/prefetch.h"
#include "fs-internal.h"

/* ---- the process's resident memory (issue 22, item 11) ---- */

struct process_memory {
    uint64_t rss, peak; /* bytes: VmRSS, VmHWM */
};

static void process_memory_read(struct process_memory *out)
{
    *out = (struct process_memory){0};
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return;
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            out->rss = (uint64_t)kb * 1024;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            out->peak = (uint64_t)kb * 1024;
    }
    fclose(f);
}

static struct fuse_lowlevel_ops inner; /* filled once before mounting */
static int64_t started_us;             /* monotonic, at fs_metrics_start */

static int64_t monotonic_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
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

/* A wrapper per operation: run the inner one in a frame, or answer ENOSYS. */
#define METERED(op, field, params, args)                                                           \
    static void metered_##field params                                                             \
    {                                                                                              \
        struct op_frame frame;                                                                     \
        op_begin(op, &frame);                                                                      \
        if (inner.field)                                                                           \
            inner.field args;                                                                      \
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
METERED(METRICS_FS_GETATTR, getattr, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
        (req, ino, fi))
METERED(METRICS_FS_SETATTR, setattr,
        (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi),
        (req, ino, attr, to_set, fi))
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
METERED(METRICS_FS_READ, read,
        (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
        (req, ino, size, off, fi))
METERED(METRICS_FS_WRITE, write,
        (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
         struct fuse_file_info *fi),
        (req, ino, buf, size, off, fi))
METERED(METRICS_FS_WRITE, write_buf,
        (fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
         struct fuse_file_info *fi),
        (req, ino, bufv, off, fi))
METERED(METRICS_FS_FLUSH, flush, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
        (req, ino, fi))
METERED(METRICS_FS_RELEASE, release, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
        (req, ino, fi))
METERED(METRICS_FS_FSYNC, fsync,
        (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
        (req, ino, datasync, fi))
METERED(METRICS_FS_OPENDIR, opendir, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
        (req, ino, fi))
METERED(METRICS_FS_READDIR, readdir,
        (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
        (req, ino, size, off, fi))
METERED(METRICS_FS_READDIRPLUS, readdirplus,
        (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
        (req, ino, size, off, fi))
METERED(METRICS_FS_RELEASEDIR, releasedir,
        (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), (req, ino, fi))
METERED(METRICS_FS_FSYNCDIR, fsyncdir,
        (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
        (req, ino, datasync, fi))
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
METERED(METRICS_FS_GETLK, getlk,
        (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock),
        (req, ino, fi, lock))
METERED(METRICS_FS_SETLK, setlk,
        (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
         int sleep),
        (req, ino, fi, lock, sleep))
METERED(METRICS_FS_FLOCK, flock, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op),
        (req, ino, fi, op))
METERED(METRICS_FS_BMAP, bmap, (fuse_req_t req, fuse_ino_t ino, size_t blocksize, uint64_t idx),
        (req, ino, blocksize, idx))
METERED(METRICS_FS_IOCTL, ioctl,
        (fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi,
         unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz),
        (req, ino, cmd, arg, fi, flags, in_buf, in_bufsz, out_bufsz))
METERED(METRICS_FS_POLL, poll,
        (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct fuse_pollhandle *ph),
        (req, ino, fi, ph))
METERED(METRICS_FS_FALLOCATE, fallocate,
        (fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
         struct fuse_file_info *fi),
        (req, ino, mode, offset, length, fi))
METERED(METRICS_FS_COPY_FILE_RANGE, copy_file_range,
        (fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
         fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags),
        (req, ino_in, off_in, fi_in, ino_out, off_out, fi_out, len, flags))
METERED(METRICS_FS_LSEEK, lseek,
        (fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi),
        (req, ino, off, whence, fi))

/* INIT and DESTROY carry no request to reply to: counted with their run time. */
static void metered_init(void *userdata, struct fuse_conn_info *conn)
{
    int64_t start = monotonic_us();
    if (inner.init)
        inner.init(userdata, conn);
    metrics_fs_op_done(METRICS_FS_INIT, 0, (uint64_t)MAX(monotonic_us() - start, 0));
}

static void metered_destroy(void *userdata)
{
    int64_t start = monotonic_us();
    if (inner.destroy)
        inner.destroy(userdata);
    metrics_fs_op_done(METRICS_FS_DESTROY, 0, (uint64_t)MAX(monotonic_us() - start, 0));
}

/* INTERRUPT never reaches an operation: libfuse's own handler marks the request it names
 * (fuse_req_interrupted, the interrupt callback) and answers nothing. libfuse 3.14 has no hook
 * for it, but reads every request through the session's custom I/O when one is set (cloned
 * descriptors too): this read counts the INTERRUPTs (no latency: libfuse deals with them at
 * once). Splice is off (fs.c), so a request's header always arrives in buf. */
static ssize_t device_read(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    ssize_t got = read(fd, buf, len);
    if (got >= (ssize_t)sizeof(struct fuse_in_header) &&
        ((const struct fuse_in_header *)buf)->opcode == FUSE_INTERRUPT)
        metrics_fs_op_done(METRICS_FS_INTERRUPT, 0, 0);
    return got;
}

static ssize_t device_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    return writev(fd, iov, count);
}

int fs_metrics_count_interrupts(struct fuse_session *session)
{
    static const struct fuse_custom_io device_io = {
        .read = device_read,
        .writev = device_writev,
    };
    int rc = fuse_session_custom_io(session, &device_io, fuse_session_fd(session));
    return rc < 0 ? rc : 0;
}

void fs_metrics_wrap_ops(struct fuse_lowlevel_ops *ops)
{
    inner = *ops;
    ops->init = metered_init;
    ops->destroy = metered_destroy;
#define ALWAYS(field) ops->field = metered_##field
#define WHEN_SET(field)                                                                            \
    if (inner.field)                                                                               \
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

/* ---- what the mount is: shared by the status file and /metrics ---- */

static double uptime_s(void)
{
    return started_us ? (double)(monotonic_us() - started_us) / 1e6 : 0.0;
}

static void append_line(GString *out, const char *key, uint64_t value)
{
    g_string_append_printf(out, "%s: %" PRIu64 "\n", key, value);
}

void fs_metrics_status_append(struct fs *fs, GString *out)
{
    const struct fluxfs_options *opts = fs->opts;
    g_string_append_printf(out, "version: %s\nbucket: %s\nprefix: %s\nmountpoint: %s\npid: %ld\n"
                           "uptime_s: %.1f\n", FLUXFS_VERSION, opts->bucket,
                           opts->prefix ? opts->prefix : "", opts->mountpoint, (long)getpid(),
                           uptime_s());
    if (opts->prometheus_port > 0)
        g_string_append_printf(out, "metrics_url: http://%s:%d/metrics\n",
                               opts->prometheus_address, opts->prometheus_port);
    uint64_t requests = 0, errors = 0, unsupported = 0;
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        requests += metrics_fs_op_count(op);
        errors += metrics_fs_op_errors(op);
        unsupported += metrics_fs_op_unsupported(op);
    }
    append_line(out, "fuse_requests", requests);
    append_line(out, "fuse_errors", errors);
    append_line(out, "fuse_unsupported", unsupported); /* ENOTTY to ioctls: not errors */
    /* Every kind, always (stable keys for scripts): count and errors. */
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        char key[64];
        g_snprintf(key, sizeof(key), "fuse_op_%s", metrics_fs_op_key(op));
        append_line(out, key, metrics_fs_op_count(op));
        g_snprintf(key, sizeof(key), "fuse_op_%s_errors", metrics_fs_op_key(op));
        append_line(out, key, metrics_fs_op_errors(op));
    }
    uint64_t gcs_requests = 0, gcs_failures = 0, retries = 0;
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        gcs_requests += metrics_gcs_request_count(m);
        gcs_failures += metrics_gcs_request_failures(m);
    }
    for (int c = 0; c < METRICS_RETRY_CAUSE_COUNT; c++)
        retries += metrics_gcs_retries(c);
    append_line(out, "gcs_requests", gcs_requests);
    append_line(out, "gcs_request_failures", gcs_failures);
    append_line(out, "gcs_retries", retries);
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        uint64_t count = metrics_gcs_request_count(m);
        if (count > 0)
            g_string_append_printf(out, "gcs_method_%s: %" PRIu64 "\n",
                                   metrics_gcs_method_label(m), count);
    }
    for (int c = 0; c < METRICS_RETRY_CAUSE_COUNT; c++) {
        uint64_t count = metrics_gcs_retries(c);
        if (count > 0)
            g_string_append_printf(out, "gcs_retries_%s: %" PRIu64 "\n",
                                   metrics_retry_cause_label(c), count);
    }
    append_line(out, "gcs_read_bytes", metrics_get(METRICS_GCS_READ_BYTES));
    append_line(out, "gcs_received_bytes", metrics_get(METRICS_GCS_BYTES_DOWNLOADED));
    append_line(out, "gcs_sent_bytes", metrics_get(METRICS_GCS_BYTES_UPLOADED));
    append_line(out, "download_bytes_sequential", metrics_download_bytes_get(METRICS_READ_SEQUENTIAL));
    append_line(out, "download_bytes_random", metrics_download_bytes_get(METRICS_READ_RANDOM));
    append_line(out, "download_bytes_parallel", metrics_download_bytes_get(METRICS_READ_PARALLEL));
    append_line(out, "upload_parts", metrics_get(METRICS_UPLOAD_PARTS));
    append_line(out, "upload_bytes", metrics_get(METRICS_UPLOAD_BYTES));
    append_line(out, "upload_commits", metrics_get(METRICS_UPLOAD_COMMITS));
    append_line(out, "upload_retries", metrics_get(METRICS_UPLOAD_RETRIES));
    append_line(out, "upload_failures", metrics_get(METRICS_UPLOAD_FAILURES));
    append_line(out, "list_pages", metrics_get(METRICS_LIST_PAGES));
    append_line(out, "list_parallel_ranges", metrics_get(METRICS_LIST_PARALLEL_RANGES));
    append_line(out, "prefetch_dir_lists", metrics_get(METRICS_PREFETCH_DIR_LISTS));
    append_line(out, "refetched_bytes", metrics_get(METRICS_REFETCHED_BYTES));
    struct membudget_stats budget;
    membudget_get_stats(fs->budget, &budget);
    struct process_memory rss;
    process_memory_read(&rss);
    append_line(out, "memory_limit", fs->opts->memory_limit);
    append_line(out, "memory_read_limit", budget.limit);
    append_line(out, "memory_rss", rss.rss);
    append_line(out, "memory_rss_peak", rss.peak);
    append_line(out, "memory_used", budget.used);
    append_line(out, "memory_peak", budget.peak);
    append_line(out, "memory_waits", budget.waits);
    append_line(out, "memory_buffers_reused", budget.buffers_reused);
    append_line(out, "memory_buffers_fresh", budget.buffers_fresh);
    append_line(out, "memory_buffer_fresh_bytes", budget.buffer_fresh_bytes);
    append_line(out, "open_writers", fs_write_open_count(fs));
    struct writer_buffer_stats write_buffers;
    fs_write_buffer_stats(fs, &write_buffers);
    append_line(out, "write_buffer_used", write_buffers.used);
    append_line(out, "write_buffer_peak", write_buffers.peak);
    append_line(out, "write_buffer_limit", write_buffers.limit);
    struct gcs_stats gcs;
    gcs_get_stats(fs->client, &gcs);
    append_line(out, "limit_op_waits", gcs.limit_op_waits);
    append_line(out, "limit_op_wait_ms", gcs.limit_op_wait_us / 1000);
    append_line(out, "limit_byte_pauses", gcs.limit_byte_pauses);
    append_line(out, "limit_byte_wait_ms", gcs.limit_byte_wait_us / 1000);
    append_line(out, "http_connections_opened", gcs.connections);
    append_line(out, "invariant_failures", fluxfs_invariant_failures());
    struct gcs_cost_stats cost;
    gcs_get_cost(fs->client, &cost);
    append_line(out, "cost_class_a_ops", cost.class_a);
    append_line(out, "cost_class_b_ops", cost.class_b);
    append_line(out, "cost_free_ops", cost.free_ops);
    append_line(out, "cost_temporaries_live", cost.temporaries_live);
    append_line(out, "cost_temporaries_deleted", cost.temporaries_deleted);
    g_string_append_printf(out, "cost_temporary_gib_seconds: %.6f\n", cost.temporary_gib_seconds);
    g_string_append_printf(out, "cost_soft_deleted_gib_seconds: %.6f\n",
                           cost.soft_deleted_gib_seconds);
    g_string_append_printf(out, "cost_dollars: %.6f\n", cost.dollars);
}

/* ---- /metrics: the registry plus the fs-level families ---- */

static void gauge(GString *out, const char *name, const char *help, uint64_t value)
{
    metrics_render_family(out, name, "gauge", help);
    metrics_render_sample(out, name, NULL, value);
}

static void counter(GString *out, const char *name, const char *help, uint64_t value)
{
    metrics_render_family(out, name, "counter", help);
    metrics_render_sample(out, name, NULL, value);
}

static void render(GString *out, void *user)
{
    struct fs *fs = user;
    metrics_render(out);
    metrics_render_family(out, "fluxfs_build_info", "gauge",
                          "fluxfs version and the mounted bucket.");
    g_string_append_printf(out, "fluxfs_build_info{version=\"%s\",bucket=\"%s\"} 1\n",
                           FLUXFS_VERSION, fs->opts->bucket); /* bucket names need no escape */
    g_string_append_printf(out, "# HELP fluxfs_uptime_seconds Seconds since the mount started.\n"
                                "# TYPE fluxfs_uptime_seconds gauge\nfluxfs_uptime_seconds %.3f\n",
                           uptime_s());
    struct membudget_stats budget;
    membudget_get_stats(fs->budget, &budget);
    struct process_memory rss;
    process_memory_read(&rss);
    struct gcs_cost_stats cost;
    gcs_get_cost(fs->client, &cost);
    metrics_render_family(out, "fluxfs_cost_operations_total", "counter",
                          "Requests the server answered, by billing class (list prices in gcs.h).");
    g_string_append_printf(out, "fluxfs_cost_operations_total{class=\"A\"} %" PRIu64 "\n"
                                "fluxfs_cost_operations_total{class=\"B\"} %" PRIu64 "\n"
                                "fluxfs_cost_operations_total{class=\"free\"} %" PRIu64 "\n",
                           cost.class_a, cost.class_b, cost.free_ops);
    metrics_render_family(out, "fluxfs_cost_dollars", "gauge",
                          "Estimated list-price dollars of the mount's operations and temporary "
                          "storage (soft delete included) so far.");
    g_string_append_printf(out, "fluxfs_cost_dollars %.6f\n", cost.dollars);
    counter(out, "fluxfs_invariant_failures_total",
            "Broken invariants logged (bugs in fluxfs; release builds go on).",
            fluxfs_invariant_failures());
    gauge(out, "fluxfs_memory_limit_bytes",
          "--memory-limit: read buffers, the memory cache and write buffers together.",
          fs->opts->memory_limit);
    gauge(out, "fluxfs_memory_budget_limit_bytes",
          "The read budget: --memory-limit less the write buffers' share.", budget.limit);
    gauge(out, "fluxfs_process_resident_bytes", "The daemon's resident memory (VmRSS).",
          rss.rss);
    gauge(out, "fluxfs_process_resident_peak_bytes", "The daemon's peak resident memory (VmHWM).",
          rss.peak);
    gauge(out, "fluxfs_memory_budget_used_bytes", "Bytes of the memory budget in use.",
          budget.used);
    gauge(out, "fluxfs_memory_budget_peak_bytes", "Most bytes of the budget ever in use.",
          budget.peak);
    gauge(out, "fluxfs_memory_budget_pooled_bytes",
          "Free buffers kept for reuse (part of the used bytes).", budget.pooled);
    struct writer_buffer_stats write_buffers;
    fs_write_buffer_stats(fs, &write_buffers);
    gauge(out, "fluxfs_write_buffer_bytes",
          "Bytes of files being written held in memory (their share of --memory-limit).",
          write_buffers.used);
    gauge(out, "fluxfs_write_buffer_peak_bytes", "Most bytes ever held in write buffers.",
          write_buffers.peak);
    gauge(out, "fluxfs_write_buffer_limit_bytes", "The write buffers' cap (--write-buffer-size).",
          write_buffers.limit);
    counter(out, "fluxfs_memory_budget_waits_count", "Acquisitions that had to wait.",
            budget.waits);
    gauge(out, "fluxfs_open_writers", "Files open for writing.", fs_write_open_count(fs));
    struct gcs_stats gcs;
    gcs_get_stats(fs->client, &gcs);
    counter(out, "fluxfs_rate_limit_op_waits_count",
            "Cloud Storage calls that waited for --limit-ops-per-sec.", gcs.limit_op_waits);
    counter(out, "fluxfs_rate_limit_op_wait_microseconds_count",
            "Total time calls waited for --limit-ops-per-sec.", gcs.limit_op_wait_us);
    counter(out, "fluxfs_rate_limit_byte_pauses_count",
            "Transfers paused for --limit-bytes-per-sec.", gcs.limit_byte_pauses);
    counter(out, "fluxfs_rate_limit_byte_wait_microseconds_count",
            "Total time transfers were paused for --limit-bytes-per-sec.",
            gcs.limit_byte_wait_us);
    struct namespace_stats ns;
    namespace_get_stats(fs->ns, &ns);
    counter(out, "fluxfs_listings_count", "Directory listings fetched.", ns.listings);
    counter(out, "fluxfs_name_resolutions_count", "Name lookups that needed requests.",
            ns.resolve_network);
    fs_control_render_metrics(fs, out);
}

int fs_metrics_start(struct fs *fs, char **error)
{
    started_us = monotonic_us();
    const struct fluxfs_options *opts = fs->opts;
    if (opts->prometheus_port <= 0)
        return 0;
    int err = metrics_server_start(opts->prometheus_address, opts->prometheus_port, render, fs,
                                   &fs->metrics_server, error);
    if (err == 0)
        flog_info("fs", "serving metrics at http://%s:%d/metrics", opts->prometheus_address,
                  opts->prometheus_port);
    return err;
}

void fs_metrics_stop(struct fs *fs)
{
    metrics_server_stop(fs->metrics_server);
    fs->metrics_server = NULL;
}
