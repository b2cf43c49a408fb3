/* The crash supervisor (--crash-restart, issue 24). The process started by the mount keeps
 * two things and runs the serving process as its child:
 *   - the /dev/fuse descriptor (each serving process sends it here over a socketpair once it
 *     serves): while one process holds it the kernel keeps the connection, and the requests
 *     read from it and not yet answered stay answerable;
 *   - the memfd the serving process keeps its state in (src/fs/fs_crash.c).
 * When the child dies by a signal (kill -9, abort, OOM kill) after it served, the supervisor
 * forks a new child that takes the descriptor and the state over (one log line); any other end
 * of the child (an unmount, a clean exit, a failure before serving, a death before it served)
 * ends the supervisor with the child's status. SIGTERM, SIGINT and SIGHUP are passed on.
 * A /dev/fd/N mount (the caller mounted it, e.g. a CSI driver) is supervised the same way; the
 * supervisor never unmounts anything: the caller's unmount ends the connection, the serving
 * process's loop ends (ENODEV) and it exits 0, and so does the supervisor.
 * Nothing here talks to the network or parses anything: a fork, a poll and a wait. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fluxfs/fd_pass.h"
#include "fluxfs/log.h"

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t stopping;
static int wake_pipe[2] = {-1, -1};

static void on_child(int sig)
{
    int saved = errno;
    char byte = 'c';
    ssize_t n = write(wake_pipe[1], &byte, 1);
    (void)n;
    errno = saved;
}

static void pass_on(int sig)
{
    stopping = 1;
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static void set_handler(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* A descriptor sent by the serving process (it serves): the one kept from now on. */
static bool receive_device(int sock, int *device, int flags)
{
    char byte;
    int fd;
    if (fd_pass_receive(sock, &byte, 1, flags, &fd) <= 0 || fd < 0)
        return false;
    if (*device >= 0)
        close(*device);
    *device = fd;
    return true;
}

int supervise(struct fluxfs_options *opts, int *notify_fd, void (*quiet)(void *user), void *user)
{
    int memfd = memfd_create("fluxfs-crash-state", MFD_CLOEXEC);
    int sv[2] = {-1, -1};
    if (memfd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
        pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        flog_warn("main", "cannot start the crash supervisor: %s (serving without it)",
                  g_strerror(errno));
        if (memfd >= 0)
            close(memfd);
        if (sv[0] >= 0) {
            close(sv[0]);
            close(sv[1]);
        }
        return -1;
    }
    set_handler(SIGCHLD, on_child);
    int device = -1;
    uint64_t restarts = 0;
    long self = (long)getpid();
    /* One id for the temporary objects of all the serving processes: the next one removes
     * what a killed one left (src/fs/fs_writes.c). */
    uint64_t tmp_id = ((uint64_t)g_random_int() << 32 | g_random_int()) | 1;
    for (;;) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            flog_error("main", "crash supervisor: fork: %s", g_strerror(errno));
            _exit(FLUXFS_EXIT_FAILURE);
        }
        if (pid == 0) {
            signal(SIGCHLD, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            close(wake_pipe[0]);
            close(wake_pipe[1]);
            close(sv[0]);
            opts->crash_memfd = memfd;
            opts->crash_sock = sv[1];
            opts->crash_device_fd = device;
            opts->crash_restarts = restarts;
            opts->supervisor_pid = self;
            opts->crash_tmp_id = tmp_id;
            return 0;
        }
        child_pid = pid;
        if (restarts == 0) {
            set_handler(SIGTERM, pass_on);
            set_handler(SIGINT, pass_on);
            set_handler(SIGHUP, pass_on);
            /* The serving process reports the mount to the waiting parent, and takes a
             * hand-over's connection: neither is the supervisor's. */
            if (*notify_fd >= 0) {
                close(*notify_fd);
                *notify_fd = -1;
                quiet(user);
            }
            if (opts->handover_fd >= 0) {
                close(opts->handover_fd);
                opts->handover_fd = -1;
            }
        }
        bool served = false;
        int status = 0;
        for (;;) {
            struct pollfd pfds[2] = {{.fd = sv[0], .events = POLLIN},
                                     {.fd = wake_pipe[0], .events = POLLIN}};
            if (poll(pfds, 2, -1) < 0 && errno != EINTR)
                break;
            if (pfds[0].revents & POLLIN)
                served |= receive_device(sv[0], &device, 0);
            char drain[16];
            while (read(wake_pipe[0], drain, sizeof(drain)) > 0) {
            }
            pid_t done = waitpid(pid, &status, WNOHANG);
            if (done == pid)
                break;
        }
        while (receive_device(sv[0], &device, MSG_DONTWAIT))
            served = true;
        child_pid = 0;
        if (WIFSIGNALED(status) && served && device >= 0 && !stopping) {
            restarts++;
            flog_warn("main",
                      "the serving process (pid %d) died by signal %d (%s); starting a new one "
                      "on the kept connection (crash restart %" G_GUINT64_FORMAT ")",
                      (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)), restarts);
            continue;
        }
        if (WIFSIGNALED(status) && !stopping)
            flog_error("main",
                       "the serving process (pid %d) died by signal %d (%s) before it served; "
                       "the supervisor gives up",
                       (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
        flog_close();
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : FLUXFS_EXIT_FAILURE);
    }
}
