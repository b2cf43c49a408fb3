/* The fluxfs executable: parse the command line, check the bucket and credentials, mount, and
 * (without -f) detach only once the mount is live, so every failure before that reaches the
 * terminal with a non-zero exit status. */
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312 /* only fuse_pkgversion is used here */
#endif

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <glib.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fluxfs-config.h"
#include "fluxfs/fs.h"
#include "fluxfs/gcs.h"
#include "fluxfs/log.h"
#include "fluxfs/tsan.h"
#include "options.h"
#include "container.h"
#include "fs_config.h"
#include "prefetch_cmd.h"
#include "sd_notify.h"
#include "status_cmd.h"
#include "supervisor.h"

/* What the detached child tells the waiting parent through the pipe: one byte, then for a
 * failure the message text until the pipe closes. */
#define DAEMON_MOUNTED 'M'
#define DAEMON_FAILED  'E'

struct daemon_link {
    int notify_fd; /* write end of the pipe to the parent; -1 in the foreground or once used */
    const struct fluxfs_options *opts;
};

static void write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

/* Reports a failure before the mount: to the parent when detaching, else to the terminal; and
 * to the log file when there is one (the terminal copy is what the user sees first). */
static void report_failure(struct daemon_link *link, const char *message)
{
    if (link->notify_fd >= 0) {
        char tag = DAEMON_FAILED;
        write_all(link->notify_fd, &tag, 1);
        write_all(link->notify_fd, message, strlen(message));
        close(link->notify_fd);
        link->notify_fd = -1;
    } else {
        fprintf(stderr, "fluxfs: %s\n", message);
    }
    if (link->opts->log_file)
        flog_error("main", "%s", message);
}

static void redirect_standard_fds(void)
{
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return;
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    if (null_fd > STDERR_FILENO)
        close(null_fd);
}

/* In a container, a mount on a private (or slave) mount stays inside the container: say so
 * once, with the fix. A /dev/fd/N mount was made, and placed, by the caller. */
static void warn_private_propagation(const struct fluxfs_options *opts)
{
    const char *container = container_detect();
    if (!container || g_str_has_prefix(opts->mountpoint, "/dev/fd/"))
        return;
    char *mountinfo = NULL;
    if (!g_file_get_contents("/proc/self/mountinfo", &mountinfo, NULL, NULL))
        return;
    char *path = g_canonicalize_filename(opts->mountpoint, NULL);
    /* The FUSE mount itself is the longest match: it inherited its parent's propagation. */
    enum mount_propagation propagation = mountinfo_propagation(mountinfo, path);
    if (propagation == MOUNT_PROPAGATION_PRIVATE || propagation == MOUNT_PROPAGATION_SLAVE)
        flog_warn("main",
                  "running in a container (%s) on a %s mount: the mount on %s will not be "
                  "seen outside the container. To share it, bind a host directory that sits on a "
                  "shared mount with rshared propagation (-v /host/dir:%s:rshared; on the host: "
                  "mount --make-rshared /host/dir or /) or, in Kubernetes, mountPropagation: "
                  "Bidirectional (docs/containers.md)",
                  container, propagation == MOUNT_PROPAGATION_PRIVATE ? "private" : "slave", path,
                  path);
    g_free(path);
    g_free(mountinfo);
}

/* Opens and closes the FUSE device before libfuse does, to explain a missing one in terms of
 * containers (libfuse would say "try 'modprobe fuse' first"). Returns false after reporting. */
static bool check_fuse_device(struct daemon_link *link, const char *mountpoint)
{
    if (g_str_has_prefix(mountpoint, "/dev/fd/"))
        return true; /* the caller opened the device */
    const char *device = "/dev/fuse";
    int fd = open(device, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    char *advice = fuse_device_advice(device, errno, geteuid() == 0, container_detect());
    if (!advice)
        return true;
    report_failure(link, advice);
    g_free(advice);
    return false;
}

/* The supervisor of a detached mount: no terminal, the journal unless --log-file. */
static void quiet_supervisor(void *user)
{
    const struct fluxfs_options *opts = user;
    redirect_standard_fds();
    if (!opts->log_file)
        flog_use_syslog();
}

/* fs_run calls this once the kernel mount exists: let the parent exit 0 and drop the terminal. */
static void on_mounted(void *user)
{
    struct daemon_link *link = user;
    const struct fluxfs_options *opts = link->opts;
    if (link->notify_fd >= 0) {
        redirect_standard_fds();
        /* Detached without --log-file: stderr is /dev/null now, so syslog (the journal). */
        if (!opts->log_file)
            flog_use_syslog();
    }
    if (opts->handover_fd < 0 && opts->crash_device_fd < 0) /* else fs logged the take-over */
        flog_info("main", "mounted gs://%s/%s on %s", opts->bucket, opts->prefix, opts->mountpoint);
    warn_private_propagation(opts);
    /* systemd (Type=notify): dependents start once the mount is live. The detached child is
     * not the process systemd started: it names itself the main process. */
    char *state = g_strdup_printf("READY=1\nMAINPID=%ld\nSTATUS=serving gs://%s/%s on %s",
                                  opts->supervisor_pid > 0 ? opts->supervisor_pid : (long)getpid(),
                                  opts->bucket, opts->prefix, opts->mountpoint);
    int notify_err = fluxfs_sd_notify(state);
    g_free(state);
    if (notify_err < 0)
        flog_warn("main", "cannot notify systemd ($NOTIFY_SOCKET): %s", g_strerror(-notify_err));
    if (link->notify_fd >= 0) {
        char tag = DAEMON_MOUNTED;
        write_all(link->notify_fd, &tag, 1);
        close(link->notify_fd);
        link->notify_fd = -1;
    }
}

/* Creates the client, checks access, mounts and serves until unmounted. Returns an exit status. */
static int run_mount(struct fluxfs_options *opts, struct daemon_link *link)
{
    struct gcs_client *client = NULL;
    char *error = NULL;
    int status = FLUXFS_EXIT_FAILURE;

    int err = gcs_client_new(&opts->gcs, &client, &error);
    if (err < 0) {
        char *message = g_strdup_printf("cannot create the Cloud Storage client: %s",
                                        error ? error : g_strerror(-err));
        report_failure(link, message);
        g_free(message);
        goto out;
    }
    bool empty = false;
    err = gcs_check_access_prefix(client, opts->prefix, &empty, &error);
    if (err < 0) {
        char *message = g_strdup_printf("cannot access gs://%s at %s: %s", opts->bucket,
                                        opts->endpoint, error ? error : g_strerror(-err));
        report_failure(link, message);
        g_free(message);
        goto out;
    }
    if (empty && opts->prefix && *opts->prefix)
        flog_warn("main",
                  "gs://%s/%s holds no objects: the mount starts empty (a mistyped "
                  "prefix?)",
                  opts->bucket, opts->prefix);
    else if (empty)
        flog_warn("main", "bucket gs://%s holds no objects: the mount starts empty", opts->bucket);
    struct fs_config cfg;
    fs_config_from_options(&cfg, opts);
    err = fs_run(&cfg, client, on_mounted, link, &error);
    if (err < 0) {
        char *message =
            g_strdup_printf("%s %s failed: %s", opts->handover_fd >= 0 ? "taking over" : "mounting",
                            opts->mountpoint, error ? error : g_strerror(-err));
        if (link->notify_fd >= 0) {
            report_failure(link, message);
        } else {
            /* After detaching stderr is /dev/null: the log is the only witness. */
            fprintf(stderr, "fluxfs: %s\n", message);
            flog_error("main", "%s", message);
        }
        g_free(message);
        goto out;
    }
    fluxfs_sd_notify("STOPPING=1");
    /* A hand-over was logged by fs; a /dev/fd/N mount is its caller's to unmount. */
    if (err != FS_RUN_HANDED_OVER && g_str_has_prefix(opts->mountpoint, "/dev/fd/"))
        flog_info("main", "stopped serving %s (its caller mounted it and unmounts it)",
                  opts->mountpoint);
    else if (err != FS_RUN_HANDED_OVER)
        flog_info("main", "unmounted %s", opts->mountpoint);
    status = FLUXFS_EXIT_OK;
out:
    g_free(error);
    gcs_client_free(client);
    return status;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_octal(char *text)
{
    char *out = text;
    for (const char *in = text; *in; out++) {
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

/* The source (gs://...) of a fluxfs mount on mountpoint in this mount namespace, or NULL.
 * Read from mountinfo: nothing asks the filesystem (a hung daemon would hang the check). */
static char *fluxfs_mount_source(const char *mountpoint)
{
    char *text = NULL;
    if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
        return NULL;
    char *found = NULL;
    char **lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line; line++) {
        char **fields = g_strsplit(*line, " ", 6);
        const char *tail = g_strv_length(fields) >= 6 ? strstr(fields[5], " - ") : NULL;
        if (tail) {
            unescape_octal(fields[4]);
            char **rest = g_strsplit(tail + 3, " ", 3); /* type source options */
            if (g_strv_length(rest) >= 2 && strcmp(rest[0], "fuse.fluxfs") == 0 &&
                strcmp(fields[4], mountpoint) == 0) {
                g_free(found);
                unescape_octal(rest[1]);
                found = g_strdup(rest[1]);
            }
            g_strfreev(rest);
        }
        g_strfreev(fields);
    }
    g_strfreev(lines);
    g_free(text);
    return found;
}

/* Whether the FUSE mount on mountpoint has lost its daemon: the kernel answers statfs with
 * ENOTCONN at once on a dead connection, a live daemon answers. Asked from a child given 2 s,
 * so that a hung daemon cannot hang this process (it then counts as alive). Called before any
 * thread exists. */
static bool mount_is_dead(const char *mountpoint)
{
    pid_t child = fork();
    if (child == 0) {
        struct statfs info;
        _exit(statfs(mountpoint, &info) < 0 && errno == ENOTCONN ? 0 : 1);
    }
    if (child < 0)
        return false;
    for (int waited_ms = 0; waited_ms < 2000; waited_ms += 10) {
        int child_status = 0;
        if (waitpid(child, &child_status, WNOHANG) == child)
            return WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0;
        g_usleep(10 * 1000);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return false;
}

extern char **environ;

/* Detaches a dead mount (umount2 MNT_DETACH as root, else fusermount3 -u -z). 0 or -errno. */
static int unmount_lazily(const char *mountpoint)
{
    if (umount2(mountpoint, MNT_DETACH) == 0)
        return 0;
    int err = errno;
    char *const argv[] = {"fusermount3", "-u", "-z", (char *)mountpoint, NULL};
    pid_t child;
    if (posix_spawnp(&child, "fusermount3", NULL, NULL, argv, environ) != 0)
        return -err;
    int child_status = 0;
    while (waitpid(child, &child_status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? 0 : -err;
}

/* A mount already on the mountpoint: a live fluxfs mount is refused (a second daemon would
 * hide its files); a dead one (its daemon crashed: "transport endpoint is not connected") is
 * unmounted lazily (--unmount-stale, on by default; with --no-unmount-stale only named); another
 * filesystem's dead mount is left alone. Safe by construction: only a mount that mountinfo says
 * is fuse.fluxfs on exactly this path, and whose statfs the kernel answers ENOTCONN (the FUSE
 * connection is gone: no process holds its /dev/fuse descriptor), is removed; a live daemon,
 * even a hung one (no answer in 2 s), is never taken for dead. Dead mounts stacked by older
 * versions are removed one by one (at most STALE_STACK_MAX). Returns an exit status, or -1 to
 * go on mounting. */
#define STALE_STACK_MAX 16
static int check_existing_mount(struct fluxfs_options *opts)
{
    char *serving = fluxfs_mount_source(opts->mountpoint);
    if (!serving && !opts->mountpoint_unreachable)
        return -1;
    const char *mnt = opts->mountpoint;
    int status = -1;
    bool dead = mount_is_dead(mnt);
    int handover = serving && !dead ? fs_handover_connect(mnt) : -1;
    if (handover >= 0) {
        /* A live fluxfs daemon listens: it hands the mount over (fs_run) instead. */
        opts->handover_fd = handover;
        opts->mountpoint_unreachable = false;
    } else if (serving && !dead) {
        fprintf(stderr,
                "fluxfs: %s is already a fluxfs mount (of %s) whose daemon takes no hand-over; "
                "unmount it first (fusermount3 -u %s)\n",
                mnt, serving, mnt);
        status = FLUXFS_EXIT_FAILURE;
    } else if (!serving) {
        fprintf(stderr,
                "fluxfs: mountpoint '%s': %s: a stale mount that is not fluxfs's; "
                "unmount it first (fusermount3 -u -z %s, or umount -l %s)\n",
                mnt, g_strerror(ENOTCONN), mnt, mnt);
        status = FLUXFS_EXIT_USAGE;
    } else if (!opts->unmount_stale) {
        fprintf(stderr,
                "fluxfs: %s is a stale fluxfs mount (of %s): its daemon exited "
                "(%s); unmount it (fusermount3 -u -z %s) or leave out --no-unmount-stale\n",
                mnt, serving, g_strerror(ENOTCONN), mnt);
        status = FLUXFS_EXIT_USAGE;
    } else {
        unsigned removed = 0;
        int err = 0;
        struct stat info;
        bool reachable = false;
        while (status < 0 && removed < STALE_STACK_MAX) {
            err = unmount_lazily(mnt);
            if (err < 0) {
                fprintf(stderr, "fluxfs: cannot unmount the stale fluxfs mount on %s: %s\n", mnt,
                        g_strerror(-err));
                status = FLUXFS_EXIT_FAILURE;
                break;
            }
            removed++;
            reachable = stat(mnt, &info) == 0;
            if (reachable || errno != ENOTCONN)
                break;
            /* Another dead mount below: fluxfs's and dead, or left alone. */
            char *below = fluxfs_mount_source(mnt);
            bool again = below && mount_is_dead(mnt);
            g_free(below);
            if (!again)
                break;
        }
        if (status < 0 && (!reachable || !S_ISDIR(info.st_mode))) {
            fprintf(stderr,
                    "fluxfs: mountpoint '%s' is not a directory once the stale mount "
                    "is gone\n",
                    mnt);
            status = FLUXFS_EXIT_USAGE;
        }
        if (removed > 0)
            flog_warn("main",
                      "unmounted the stale fluxfs mount of %s on %s (its daemon had "
                      "exited)%s",
                      serving, mnt, removed > 1 ? "; and the dead ones below it" : "");
        if (status < 0)
            opts->mountpoint_unreachable = false;
    }
    g_free(serving);
    return status;
}

static volatile sig_atomic_t daemon_child_pid;

/* Ctrl-C while the parent waits must not leave a daemon that mounts unseen: pass it on. */
static void forward_signal_to_child(int sig)
{
    if (daemon_child_pid > 0)
        kill((pid_t)daemon_child_pid, sig == SIGINT ? SIGTERM : sig);
}

/* Parent side of the detach: waits for the child's verdict. */
static int wait_for_daemon(pid_t child, int read_fd)
{
    daemon_child_pid = child;
    struct sigaction action = {.sa_handler = forward_signal_to_child};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);

    GString *reply = g_string_new(NULL);
    char buffer[512];
    for (;;) {
        ssize_t n = read(read_fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        g_string_append_len(reply, buffer, n);
    }
    close(read_fd);

    int status = FLUXFS_EXIT_FAILURE;
    if (reply->len > 0 && reply->str[0] == DAEMON_MOUNTED) {
        status = FLUXFS_EXIT_OK; /* the child keeps serving */
    } else if (reply->len > 0 && reply->str[0] == DAEMON_FAILED) {
        fprintf(stderr, "fluxfs: %s\n", reply->str + 1);
        waitpid(child, NULL, 0);
    } else {
        int child_status = 0;
        waitpid(child, &child_status, 0);
        if (WIFSIGNALED(child_status))
            fprintf(stderr, "fluxfs: the daemon was killed by signal %d before mounting\n",
                    WTERMSIG(child_status));
        else
            fprintf(stderr, "fluxfs: the daemon exited with status %d before mounting\n",
                    WEXITSTATUS(child_status));
    }
    g_string_free(reply, TRUE);
    return status;
}

/* Forks; the parent waits and exits, the child returns with link->notify_fd set. The fork comes
 * before the client exists: its engine thread would not survive a fork. */
static int detach(struct daemon_link *link)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        fprintf(stderr, "fluxfs: pipe: %s\n", g_strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "fluxfs: fork: %s\n", g_strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (child > 0) {
        close(fds[1]);
        exit(wait_for_daemon(child, fds[0]));
    }
    close(fds[0]);
    link->notify_fd = fds[1];
    setsid();
    if (chdir("/") < 0) {
        /* Not fatal: every path in the options is absolute already. */
    }
    return 0;
}

static void print_version(void)
{
    const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);
    printf("fluxfs %s (libfuse %s, libcurl %s)\n", FLUXFS_VERSION, fuse_pkgversion(),
           curl ? curl->version : "?");
}

/* `fluxfs NAME ...`: each runs against a running mount and never mounts anything. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} subcommands[] = {
    {"prefetch", fluxfs_prefetch_command},
    {"status", fluxfs_status_command},
};

int main(int argc, char **argv)
{
    struct fluxfs_options opts;
    char *error = NULL;
    int status;

    /* A subcommand name in the first argument is always the subcommand, never a bucket. */
    for (size_t i = 0; i < G_N_ELEMENTS(subcommands); i++)
        if (argc >= 2 && strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].run(argc, argv);

    /* Buffers above a few MiB (readahead chunks, write parts) are mapped and unmapped rather
     * than carved from the heap: glibc's adaptive threshold would otherwise rise to 32 MiB
     * after the first such free and keep every freed part resident in an arena, so the RSS
     * stayed far above --memory-limit when idle (issue 22, item 11). Both the read budget and
     * the write buffers keep their own pools of reused buffers, so this costs no page faults
     * in steady state. Objects of the small-file path (<= 4 MiB) stay below it. */
    mallopt(M_MMAP_THRESHOLD, 6 * 1024 * 1024);

    fluxfs_options_init(&opts);
    switch (fluxfs_options_parse(&opts, argc, argv, &error)) {
    case OPTIONS_PARSE_HELP:
        fluxfs_options_print_help(stdout, "fluxfs");
        fluxfs_options_clear(&opts);
        return FLUXFS_EXIT_OK;
    case OPTIONS_PARSE_VERSION:
        print_version();
        fluxfs_options_clear(&opts);
        return FLUXFS_EXIT_OK;
    case OPTIONS_PARSE_ERROR:
        fprintf(stderr, "fluxfs: %s\nTry 'fluxfs --help' for more information.\n", error);
        g_free(error);
        fluxfs_options_clear(&opts);
        return FLUXFS_EXIT_USAGE;
    case OPTIONS_PARSE_MOUNT:
        break;
    }

    int err = flog_init(opts.log_level, opts.log_json, opts.log_file);
    if (err < 0) {
        fprintf(stderr, "fluxfs: cannot open log file '%s': %s\n", opts.log_file, g_strerror(-err));
        fluxfs_options_clear(&opts);
        return FLUXFS_EXIT_USAGE;
    }
    /* gcsfuse flags accepted without effect: one line each, while stderr is the terminal. */
    for (char **line = opts.warnings; line && *line; line++)
        flog_warn("options", "%s", *line);
    /* A peer closing a connection must be an error return, never a fatal signal. */
    signal(SIGPIPE, SIG_IGN);

    /* The daemon changes directory to /: a relative GOOGLE_APPLICATION_CREDENTIALS names a
     * file in the caller's directory, as a relative --key-file does. */
    const char *credentials = getenv("GOOGLE_APPLICATION_CREDENTIALS");
    if (credentials && credentials[0] != '\0' && !g_path_is_absolute(credentials)) {
        char *absolute = g_canonicalize_filename(credentials, NULL);
        setenv("GOOGLE_APPLICATION_CREDENTIALS", absolute, 1);
        g_free(absolute);
    }
    int existing = check_existing_mount(&opts);
    if (existing >= 0) {
        flog_close();
        fluxfs_options_clear(&opts);
        return existing;
    }
    /* A handed-over /dev/fuse (/dev/fd/N, checked by the options): in the TSan build only, a
     * FUSE reply must be ordered before the requests that follow it (fluxfs/tsan.h). */
    if (g_str_has_prefix(opts.mountpoint, "/dev/fd/"))
        tsan_adopt_fd((int)strtol(opts.mountpoint + strlen("/dev/fd/"), NULL, 10));
    /* A container stop (docker/podman: SIGTERM, SIGKILL 10 s later) must not cut the commit. */
    const char *container = container_detect();
    if (opts.shutdown_grace_default && container) {
        opts.shutdown_grace_s = FLUXFS_CONTAINER_GRACE_S;
        flog_debug("main", "running in a container (%s): --shutdown-grace %ds", container,
                   FLUXFS_CONTAINER_GRACE_S);
    }
    struct daemon_link link = {.notify_fd = -1, .opts = &opts};
    if (!check_fuse_device(&link, opts.mountpoint)) {
        status = FLUXFS_EXIT_FAILURE;
    } else if (!opts.foreground && detach(&link) < 0) {
        status = FLUXFS_EXIT_FAILURE;
    } else {
        /* --crash-restart: from here on this process supervises; the serving one returns.
         * On /dev/fd/N too: the caller mounted and unmounts; the supervisor ends with the
         * serving process once the kernel ends the connection (the caller's unmount). */
        if (opts.crash_restart)
            supervise(&opts, &link.notify_fd, quiet_supervisor, &opts);
        flog_info("main", "fluxfs %s: mounting gs://%s/%s on %s (endpoint %s%s)", FLUXFS_VERSION,
                  opts.bucket, opts.prefix, opts.mountpoint, opts.endpoint,
                  opts.gcs.anonymous ? ", anonymous" : "");
        status = run_mount(&opts, &link);
    }
    flog_close();
    fluxfs_options_clear(&opts);
    return status;
}
