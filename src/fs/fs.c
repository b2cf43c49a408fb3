/* fs_run: builds the filesystem state, mounts, runs libfuse's multi-threaded low-level loop
 * until unmount or a signal, and tears everything down (see include/fluxfs/fs.h). */
#include "fluxfs/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fluxfs/log.h"
#include "fluxfs/metrics_server.h"
#include "fluxfs/name_map.h"
#include "fs-internal.h"

#define FS_MAX_THREADS  128
#define FS_IDLE_THREADS 10
/* The kernel readahead (and so FUSE READ size) for this mount: the kernel's default of 128 KiB
 * makes a sequential reader cost one READ request, one reply and one wakeup per 128 KiB; at
 * 1 MiB (the largest READ, max_pages from max_write) a 4 GiB sequential read costs the daemon
 * about 15% less CPU and the reader a little less. Larger gained nothing measurable. */
#define FS_KERNEL_READAHEAD_KB 1024

/* Undoes /proc/self/mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_mountinfo_path(char *path)
{
    char *out = path;
    for (const char *in = path; *in; out++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 4;
        } else {
            *out = *in++;
        }
    }
    *out = '\0';
}

/* The "major:minor" of the newest FUSE mount on mountpoint (its backing device info is
 * /sys/class/bdi/<that>), read from mountinfo so that nothing asks the not yet initialized
 * filesystem; NULL if not found. */
static char *mount_device_id(const char *mountpoint)
{
    char *text = NULL;
    if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
        return NULL;
    char *found = NULL;
    char **lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line; line++) {
        char **fields = g_strsplit(*line, " ", 6);
        if (g_strv_length(fields) >= 5) {
            unescape_mountinfo_path(fields[4]);
            /* Only a FUSE mount: after the optional fields, " - fuse.fluxfs ..." (or
             * "fuse"), so that something mounted over the path later is left alone. */
            const char *type = fields[5] ? strstr(fields[5], " - ") : NULL;
            bool fuse =
                type && strncmp(type + 3, "fuse", 4) == 0 && (type[7] == ' ' || type[7] == '.');
            if (fuse && strcmp(fields[4], mountpoint) == 0) {
                g_free(found);
                found = g_strdup(fields[2]);
            }
        }
        g_strfreev(fields);
    }
    g_strfreev(lines);
    g_free(text);
    return found;
}

/* Sets the mount's kernel readahead (-o read_ahead_kb, else FS_KERNEL_READAHEAD_KB) before
 * the kernel's INIT is answered (INIT only lowers it, to max_readahead). Needs root (sysfs):
 * otherwise the kernel's default stays, which costs CPU, not correctness (a warning when
 * read_ahead_kb was asked for). */
static void raise_kernel_readahead(const char *mountpoint, int readahead_kb)
{
    char *device = mount_device_id(mountpoint);
    if (!device) {
        flog_debug("fs", "kernel readahead: no mountinfo entry for %s", mountpoint);
        return;
    }
    char *path = g_strdup_printf("/sys/class/bdi/%s/read_ahead_kb", device);
    char value[16];
    snprintf(value, sizeof(value), "%d", readahead_kb > 0 ? readahead_kb : FS_KERNEL_READAHEAD_KB);
    GError *err = NULL;
    if (g_file_set_contents_full(path, value, -1, G_FILE_SET_CONTENTS_NONE, 0644, &err))
        flog_debug("fs", "kernel readahead %s KiB (%s)", value, path);
    else if (readahead_kb > 0)
        flog_warn("fs", "read_ahead_kb=%d not applied, the kernel's default stays: %s",
                  readahead_kb, err->message);
    else
        flog_debug("fs", "kernel readahead left as is: %s", err->message);
    g_clear_error(&err);
    g_free(path);
    g_free(device);
}

/* ---- stopping (SIGTERM/SIGINT, a lazy unmount by someone else) and SIGHUP ----
 *
 * The signal handlers only write the signal number to a pipe. A stopper thread reads it:
 * SIGHUP reopens the log file; SIGTERM/SIGINT (or finding the mount detached from the mount
 * table while the session goes on) start the stop: the session keeps serving until no file is
 * open for writing (each was closed, and so committed), at most --shutdown-grace; then the
 * files still open are committed as fsync would and the session loop is ended (the loop
 * thread's wait is interrupted by a signal), after which fs_run unmounts. A second
 * SIGTERM/SIGINT ends the grace at once. */

#define FS_GRACE_FOREVER_S   1e8 /* --shutdown-grace -1 is stored as 1e9 */
#define STOP_QUIT            0 /* written by fs_run when the loop ended by itself: the stopper returns */
#define STOP_HANDED_OVER     'H' /* written by the hand-over thread: end the loop, no grace */
#define STOP_POLL_MS         100
#define STOP_DETACH_CHECK_US G_USEC_PER_SEC

static int stop_pipe_write = -1;
/* The stopper has ended the loop. Set by the stopper thread, read by the signal handler on
 * whichever thread it runs: a lock-free atomic (async-signal-safe and race-free). */
static int stop_signals_done;

static void on_stop_signal(int sig)
{
    if (__atomic_load_n(&stop_signals_done, __ATOMIC_ACQUIRE))
        return; /* the wake-up of the loop thread */
    int saved = errno;
    char byte = (char)sig;
    ssize_t n = write(stop_pipe_write, &byte, 1);
    (void)n;
    errno = saved;
}

struct stopper {
    struct fs *fs;
    int read_fd, write_fd;
    pthread_t loop_thread;
    char *device; /* the mount's major:minor in mountinfo; NULL: not checked */
    GThread *thread;
};

/* Whether mountinfo still lists a mount with this major:minor. */
static bool device_mounted(const char *device)
{
    char *text = NULL;
    if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
        return true; /* cannot tell: assume so */
    bool found = false;
    char **lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line && !found; line++) {
        char **fields = g_strsplit(*line, " ", 4);
        found = g_strv_length(fields) >= 3 && strcmp(fields[2], device) == 0;
        g_strfreev(fields);
    }
    g_strfreev(lines);
    g_free(text);
    return found;
}

static gpointer stopper_main(gpointer data)
{
    struct stopper *st = data;
    struct fs *fs = st->fs;
    double grace = fs->cfg->shutdown_grace_s;
    bool stopping = false, forever = grace < 0 || grace >= FS_GRACE_FOREVER_S;
    gint64 deadline = 0, next_detach_check = g_get_monotonic_time() + STOP_DETACH_CHECK_US;
    for (;;) {
        struct pollfd pfd = {.fd = st->read_fd, .events = POLLIN};
        int n = poll(&pfd, 1, stopping ? STOP_POLL_MS : (int)(STOP_DETACH_CHECK_US / 1000));
        const char *reason = NULL;
        if (n > 0) {
            char bytes[16];
            ssize_t got = read(st->read_fd, bytes, sizeof(bytes));
            for (ssize_t i = 0; i < got; i++) {
                int sig = bytes[i];
                if (sig == STOP_QUIT)
                    return NULL;
                if (sig == STOP_HANDED_OVER)
                    goto end_loop;
                if (sig == SIGHUP) {
                    int rc = flog_reopen();
                    if (rc < 0)
                        flog_error("fs",
                                   "SIGHUP: cannot reopen the log file: %s (the old one "
                                   "stays in use)",
                                   g_strerror(-rc));
                    else
                        flog_info("fs", "SIGHUP: log file reopened");
                } else if (!stopping) {
                    reason = sig == SIGINT ? "SIGINT" : "SIGTERM";
                } else {
                    flog_warn("fs", "%s again: ending the shutdown grace now",
                              sig == SIGINT ? "SIGINT" : "SIGTERM");
                    forever = false;
                    deadline = 0;
                }
            }
        }
        gint64 now = g_get_monotonic_time();
        if (!stopping && !reason && st->device && now >= next_detach_check) {
            next_detach_check = now + STOP_DETACH_CHECK_US;
            if (!device_mounted(st->device))
                reason = "the mount was detached (lazy unmount)";
        }
        if (!stopping && reason) {
            stopping = true;
            deadline = now + (gint64)(forever ? 0 : grace * G_USEC_PER_SEC);
            size_t open = fs_write_open_count(fs);
            if (open > 0 && forever)
                flog_info("fs",
                          "%s: serving %zu files open for writing until they are closed "
                          "(no --shutdown-grace limit), then unmounting",
                          reason, open);
            else if (open > 0)
                flog_info("fs",
                          "%s: serving %zu files open for writing until they are closed, "
                          "at most %gs (--shutdown-grace), then unmounting",
                          reason, open, grace);
            else
                flog_info("fs", "%s: unmounting", reason);
        }
        if (!stopping)
            continue;
        size_t open = fs_write_open_count(fs);
        if (open == 0) {
            flog_info("fs", "no file open for writing: unmounting");
            break;
        }
        if (!forever && now >= deadline) {
            size_t committed = 0, failed = 0;
            fs_write_commit_all(fs, &committed, &failed);
            flog_warn("fs",
                      "shutdown grace over with %zu files still open for writing: "
                      "committed %zu as fsync would (%zu failed); their writers get ENOTCONN "
                      "from now on",
                      open, committed, failed);
            break;
        }
    }
end_loop:
    __atomic_store_n(&stop_signals_done, 1, __ATOMIC_RELEASE);
    fuse_session_exit(fs->session);
    pthread_kill(st->loop_thread, SIGTERM); /* interrupts the loop's wait; the handler ignores it */
    return NULL;
}

static int stopper_start(struct stopper *st, struct fs *fs, char **error)
{
    memset(st, 0, sizeof(*st));
    st->fs = fs;
    st->read_fd = st->write_fd = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        *error = g_strdup_printf("pipe: %s", g_strerror(errno));
        return -errno;
    }
    st->read_fd = fds[0];
    st->write_fd = fds[1];
    stop_pipe_write = fds[1];
    __atomic_store_n(&stop_signals_done, 0, __ATOMIC_RELAXED);
    struct sigaction action = {.sa_handler = on_stop_signal};
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    return 0;
}

/* After the mount: starts watching (the loop thread is the caller). */
static void stopper_run(struct stopper *st, const char *mountpoint)
{
    st->loop_thread = pthread_self();
    st->device = mount_device_id(mountpoint);
    st->thread = g_thread_new("fluxfs-stop", stopper_main, st);
}

/* The hand-over thread (fs_handover.c) gave the mount away: end the loop (no unmount). */
static void stopper_handed_over(void *user)
{
    struct stopper *st = user;
    char byte = STOP_HANDED_OVER;
    ssize_t n = write(st->write_fd, &byte, 1);
    (void)n;
}

static void stopper_finish(struct stopper *st)
{
    if (st->thread) {
        char quit = STOP_QUIT;
        ssize_t n = write(st->write_fd, &quit, 1);
        (void)n;
        g_thread_join(st->thread);
        st->thread = NULL;
    }
    if (st->read_fd >= 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        stop_pipe_write = -1;
        close(st->read_fd);
        close(st->write_fd);
    }
    g_free(st->device);
    st->read_fd = st->write_fd = -1;
}

static gpointer prefetch_main(gpointer data)
{
    struct fs *fs = data;
    int rc = namespace_prefetch_metadata(fs->ns);
    if (rc < 0)
        flog_warn("fs", "metadata prefetch failed: %s", g_strerror(-rc));
    return NULL;
}

static void add_option(struct fuse_args *args, const char *value)
{
    fuse_opt_add_arg(args, "-o");
    fuse_opt_add_arg(args, value);
}

static void fs_state_init(struct fs *fs, const struct fs_config *cfg, struct gcs_client *client)
{
    memset(fs, 0, sizeof(*fs));
    fs->cfg = cfg;
    fs->client = client;
    { /* what the mount creates under its reserved prefix is temporary: its storage is part
       * of the cost estimate (gcs_get_cost) */
        char *temporaries =
            g_strconcat(cfg->prefix ? cfg->prefix : "", NAME_MAP_RESERVED_ROOT_NAME "/", NULL);
        gcs_set_temporary_prefix(client, temporaries);
        g_free(temporaries);
    }
    struct namespace_config ns_config = {
        .mount_prefix = cfg->prefix ? cfg->prefix : "",
        .implicit_dirs = cfg->implicit_dirs,
        .list_parallelism = cfg->list_parallelism > 0 ? (unsigned)cfg->list_parallelism : 32,
        .stat_ttl_s = cfg->stat_ttl_s,
        .type_ttl_s = cfg->type_ttl_s,
        .negative_ttl_s = cfg->negative_ttl_s,
        .list_ttl_s = cfg->list_ttl_s,
        .max_cached_names = cfg->max_cached_names,
    };
    fs->ns = namespace_new(&ns_config, client);
    fs->inodes = inode_table_new();
    fs->budget = membudget_new(cfg->read_budget);
    fs->reader_config.small_file_threshold = cfg->small_file_threshold;
    fs->reader_config.chunk = cfg->readahead_chunk ? cfg->readahead_chunk : 8u << 20;
    fs->reader_config.window_max = cfg->readahead_max;
    fs->reader_config.random_min = cfg->random_read_min;
    fs->reader_config.demand_reserve = cfg->read_budget / 8;
    fs->readers = reader_pool_new(client, fs->budget, &fs->reader_config);
    membudget_set_reclaimer(fs->budget, reader_pool_reclaim, fs->readers);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    fs->mount_time_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    fs->entry_timeout_s = cfg->entry_timeout_s;
    fs->attr_timeout_s = cfg->attr_timeout_s;
    fs->negative_timeout_s = cfg->negative_ttl_s;
    fs->stat_ttl_us = (int64_t)(cfg->stat_ttl_s * 1e6);
    g_mutex_init(&fs->handles_lock);
    fs->open_handles = g_hash_table_new(g_direct_hash, g_direct_equal);
    fs->next_handle_alias = 1;
    fs->gate = fs_gate_new();
    fs_writes_init(fs);
    /* Read-only mounts: the kernel may open and close files without a request (fs_noopen.c). */
    fs->no_open = cfg->read_only && cfg->skip_open;
    if (fs->no_open) {
        inode_table_pin_generations(fs->inodes, true);
        fs_noopen_init(fs);
    }
}

/* A handed-over process's gate, kept to the exit (see fs_state_clear). */
static struct fs_gate *kept_gate __attribute__((used));

static void fs_state_clear(struct fs *fs)
{
    if (fs->prefetch_thread)
        g_thread_join(fs->prefetch_thread);
    fs_noopen_clear(fs); /* FUSE destroy did it, unless the session never got INIT */
    fs_notify_free(fs);
    fs_writes_clear(fs);
    g_hash_table_destroy(fs->open_handles);
    if (fs->handle_aliases) {
        g_hash_table_destroy(fs->handle_numbers);
        g_hash_table_destroy(fs->handle_aliases);
    }
    g_mutex_clear(&fs->handles_lock);
    /* After a hand-over a helper of the gate may still wait in statfs for the new daemon's
     * answer, and read the gate after it: the process is about to exit, keep it. */
    if (fs->handed_over) {
        kept_gate = fs->gate;
    } else {
        fs_gate_free(fs->gate);
        fs_crash_free(fs->crash);
    }
    membudget_set_reclaimer(fs->budget, NULL, NULL);
    reader_pool_free(fs->readers);
    inode_table_free(fs->inodes);
    namespace_free(fs->ns);
    membudget_free(fs->budget);
}

/* ---- /metrics (--prometheus-port): the registry and the fs figures (fs_status.c), then the
 * control layer's (fs_control.c) ---- */

static void render_metrics(GString *out, void *user)
{
    struct fs *fs = user;
    fs_status_render_metrics(fs, out);
    fs_control_render_metrics(fs, out);
}

/* Before mounting: notes the start time (uptime) and opens the listener; 0 or -errno with
 * *error. */
static int metrics_serve_start(struct fs *fs, char **error)
{
    if (fs->started_us == 0) /* a recovery notes it before its replay threads read it */
        fs->started_us = g_get_monotonic_time();
    const struct fs_config *cfg = fs->cfg;
    if (cfg->prometheus_port <= 0)
        return 0;
    int err = metrics_server_start(cfg->prometheus_address, cfg->prometheus_port, render_metrics,
                                   fs, &fs->metrics_server, error);
    if (err == 0)
        flog_info("fs", "serving metrics at http://%s:%d/metrics", cfg->prometheus_address,
                  cfg->prometheus_port);
    return err;
}

/* A daemon that took a live mount over serves on without its metrics listener rather than
 * give the mount up. */
static void metrics_serve_or_warn(struct fs *fs)
{
    char *error = NULL;
    if (metrics_serve_start(fs, &error) < 0) {
        flog_warn("fs", "%s (serving without metrics)", error);
        g_free(error);
    }
}

/* Before the session is destroyed: a scrape reads the fs state. */
static void metrics_serve_stop(struct fs *fs)
{
    metrics_server_stop(fs->metrics_server);
    fs->metrics_server = NULL;
}

/* Takes the mount from the daemon serving it (fs_handover.c): the state and descriptor, a
 * session on that descriptor brought to "INIT done", inodes and handles adopted. 0 or -errno
 * with *error; on failure the old daemon serves on. */
static int take_over(struct fs *fs, int sock, char **device, char **error)
{
    struct fs_handover_state *state = NULL;
    int fd = -1;
    int rc = fs_handover_receive(fs, sock, &state, &fd, error);
    if (rc < 0)
        return rc;
    rc = fs_metrics_attach(fs->session, fd);
    if (rc < 0) {
        close(fd);
        *error = g_strdup_printf("cannot serve the handed-over descriptor: %s", g_strerror(-rc));
    }
    if (rc == 0) {
        /* The descriptor is the session's now (fuse_session_destroy closes it). */
        *device = mount_device_id(fs->cfg->mountpoint);
        rc = fs_handover_restore(fs, state, error);
    }
    if (rc == 0) {
        fs_control_adopt_inodes(fs);
        rc = fs_handover_finish(fs, state, error);
    }
    fs_handover_state_free(state);
    return rc;
}

/* At the end of a mount this process took over: libfuse did not mount it, so it does not
 * unmount it either. The descriptor is closed already (the connection is gone); detach the
 * mount unless it is gone or something else is mounted there now. */
static void unmount_taken(const char *mountpoint, const char *device)
{
    if (g_str_has_prefix(mountpoint, "/dev/fd/"))
        return; /* the caller mounted it and unmounts it (a crash restart on /dev/fd/N) */
    char *now = mount_device_id(mountpoint);
    bool ours = now && device && strcmp(now, device) == 0;
    g_free(now);
    if (!ours)
        return;
    if (umount2(mountpoint, MNT_DETACH) == 0)
        return;
    int err = errno;
    char *argv[] = {"fusermount3", "-u", "-z", (char *)mountpoint, NULL};
    GError *gerr = NULL;
    int status = 0;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status,
                      &gerr) ||
        !g_spawn_check_wait_status(status, NULL))
        flog_warn("fs", "cannot unmount %s: %s", mountpoint,
                  gerr ? gerr->message : g_strerror(err));
    g_clear_error(&gerr);
}

int fs_run(const struct fs_config *cfg, struct gcs_client *client, fs_mounted_cb on_mounted,
           void *user, char **error)
{
    struct fs fs;
    fs_state_init(&fs, cfg, client);
    struct fuse_lowlevel_ops ops;
    fs_table_fill(&fs, &ops);

    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    fuse_opt_add_arg(&args, "fluxfs");
    /* findmnt and df show gs://BUCKET/PREFIX; libfuse's -o lists are split at commas, and
     * "\\," is a literal one. An fsname= among the user's options comes later and wins. */
    GString *fsname = g_string_new("fsname=gs://");
    char *source = g_strdup_printf("%s/%s", cfg->bucket, cfg->prefix ? cfg->prefix : "");
    size_t source_len = strlen(source);
    while (source_len > 0 && source[source_len - 1] == '/')
        source[--source_len] = '\0';
    for (const char *c = source; *c; c++) {
        if (*c == ',' || *c == '\\')
            g_string_append_c(fsname, '\\');
        g_string_append_c(fsname, *c);
    }
    g_free(source);
    add_option(&args, fsname->str);
    g_string_free(fsname, TRUE);
    add_option(&args, "subtype=fluxfs");
    add_option(&args, "default_permissions");
    if (cfg->read_only)
        add_option(&args, "ro");
    if (cfg->allow_other)
        add_option(&args, "allow_other");
    for (char **extra = cfg->fuse_args; extra && *extra; extra++)
        add_option(&args, *extra);

    int rc = 0;
    struct fuse_loop_config *loop_config = NULL;
    bool mounted = false, took_over = false;
    char *device = NULL; /* a taken mount's major:minor: unmounted only while still this */
    struct stopper stopper;
    stopper.read_fd = -1;
    stopper.thread = NULL;
    stopper.device = NULL;
    fs.session = fuse_session_new(&args, &ops, sizeof(ops), &fs);
    if (!fs.session) {
        rc = -EINVAL;
        *error = g_strdup("cannot create the FUSE session (bad FUSE options?)");
        goto cleanup;
    }
    rc = stopper_start(&stopper, &fs, error);
    if (rc < 0)
        goto cleanup;
    fs.crash = fs_crash_open(cfg->crash_memfd);
    fs.crash_restarts = cfg->crash_restarts;
    if (fs.crash && cfg->crash_device_fd >= 0) {
        /* The serving process before this one died: the supervisor's descriptor and the
         * state it left (fs_crash.c). */
        fs_crash_device_nonblocking(cfg->crash_device_fd);
        rc = fs_metrics_attach(fs.session, cfg->crash_device_fd);
        if (rc == 0) {
            device = mount_device_id(cfg->mountpoint);
            fs.started_us = g_get_monotonic_time();
            rc = fs_crash_recover(&fs, error);
        } else {
            *error = g_strdup_printf("cannot serve the kept descriptor: %s", g_strerror(-rc));
        }
        if (rc < 0)
            goto cleanup;
        took_over = true;
        metrics_serve_or_warn(&fs);
    } else if (cfg->handover_fd >= 0) {
        fs_crash_start(&fs);
        /* Taking the mount from the daemon serving it: no mount, no kernel INIT. */
        rc = take_over(&fs, cfg->handover_fd, &device, error);
        if (rc < 0)
            goto cleanup;
        if (fs.crash)
            fs_crash_device_nonblocking(fuse_session_fd(fs.session));
        took_over = true;
        metrics_serve_or_warn(&fs);
    } else {
        rc = metrics_serve_start(&fs, error);
        if (rc < 0)
            goto cleanup;
        fs_crash_start(&fs); /* before the kernel's INIT is read */
        if (fuse_session_mount(fs.session, cfg->mountpoint) != 0) {
            rc = -EIO;
            *error = g_strdup_printf("cannot mount on %s (see the message above)", cfg->mountpoint);
            goto cleanup;
        }
        mounted = true;
        fs_gate_expect_init(fs.gate); /* a /dev/fd/N connection set up before is refused */
        if (fs.crash)
            fs_crash_device_nonblocking(fuse_session_fd(fs.session));
        if (fs_metrics_count_interrupts(fs.session) < 0)
            flog_warn("fs", "cannot read the FUSE device through fluxfs: INTERRUPT requests "
                            "are not counted, and the mount cannot be handed over");
        raise_kernel_readahead(cfg->mountpoint, cfg->kernel_readahead_kb);
    }
    fs_crash_serving(&fs, cfg->crash_sock);
    if (cfg->prefetch_metadata)
        fs.prefetch_thread = g_thread_new("fluxfs-prefetch", prefetch_main, &fs);
    if (on_mounted)
        on_mounted(user);
    stopper_run(&stopper, cfg->mountpoint);
    if (fs_handover_listen(&fs, stopper_handed_over, &stopper, error) < 0) {
        flog_warn("fs", "%s", *error);
        g_clear_pointer(error, g_free);
    }

    loop_config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_idle_threads(loop_config, FS_IDLE_THREADS);
    fuse_loop_cfg_set_max_threads(loop_config, FS_MAX_THREADS);
    /* A /dev/fd/N mount (a container handed the descriptor) may have no /dev/fuse to clone. */
    /* Under the supervisor, one descriptor: requests read through a cloned one are failed by
     * the kernel when the process holding it dies, those on the supervisor's survive it. */
    fuse_loop_cfg_set_clone_fd(loop_config,
                               g_str_has_prefix(cfg->mountpoint, "/dev/fd/") || fs.crash ? 0 : 1);
    int loop_rc = fuse_session_loop_mt(fs.session, loop_config);
    if (loop_rc < 0)
        flog_warn("fs", "session loop ended with %s", g_strerror(-loop_rc));
    uint32_t refused = fs_gate_refused(fs.gate);
    if (refused != 0) {
        rc = -EPROTO;
        *error = g_strdup_printf(
            "the FUSE connection of %s was set up by an earlier daemon: its first request is "
            "opcode %u, not the kernel's INIT, whose state died with that daemon (only a "
            "--crash-restart supervisor keeps it). Nothing can serve this connection: end it "
            "(unmount, or close every copy of the descriptor) and mount again with a fresh "
            "/dev/fuse descriptor (docs/containers.md)",
            cfg->mountpoint, refused);
    }

cleanup:
    fs_handover_stop(&fs); /* before the stopper it may write to */
    stopper_finish(&stopper);
    metrics_serve_stop(&fs); /* before the session's destroy frees what a scrape reads */
    if (loop_config)
        fuse_loop_cfg_destroy(loop_config);
    if (mounted && !fs.handed_over)
        fuse_session_unmount(fs.session);
    fs_crash_join_replays(fs.crash); /* they use the session */
    if (fs.session)
        fuse_session_destroy(fs.session); /* closes the descriptor */
    if (took_over && !fs.handed_over)
        unmount_taken(cfg->mountpoint, device);
    g_free(device);
    if (fs.handed_over)
        rc = FS_RUN_HANDED_OVER;
    fuse_opt_free_args(&args);
    struct namespace_stats stats;
    namespace_get_stats(fs.ns, &stats);
    flog_info("fs",
              "listings %" G_GUINT64_FORMAT " (%" G_GUINT64_FORMAT " list requests), "
              "name probes %" G_GUINT64_FORMAT,
              stats.listings, stats.list_requests, stats.resolve_network);
    fs_state_clear(&fs);
    return rc;
}
