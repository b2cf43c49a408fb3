/* The device gate: every read of a request from /dev/fuse and every write of a reply goes
 * through here (fs_metrics.c installs it as the session's custom I/O), so that a hand-over
 * (fs_handover.c) can stop this process from taking new requests and know when the ones it took
 * are all answered; and so that the first kernel INIT and its answer can be kept (the next
 * process is given them instead of a new INIT).
 *
 * Counting, lock-free on the hot path (atomics):
 *   in_read     threads inside read(2) of the device, or about to enter it
 *   busy        threads that returned a request to libfuse and have not come back for the next
 *               (a thread that exits instead is counted out by its thread-private destructor)
 *   expected    requests read that the kernel expects an answer to (all but FORGET,
 *               BATCH_FORGET, INTERRUPT and NOTIFY_REPLY); answered: replies written
 * The gate is drained when it is closed and in_read, busy and expected - answered are all 0.
 *
 * Closing: closed is set, then threads blocked in read() are woken by giving each a request of
 * its own: statfs(2) on the mountpoint always reaches the daemon (the kernel caches nothing of
 * it), the kernel wakes one reader per request, and that reader answers it and parks at its
 * next entry here. No signal is used: a signal meant for read() could land in a request
 * handler's syscall instead. A statfs issued when no reader is left waits in the kernel's queue
 * for whoever reads next (the next process, or this one when the gate opens again): the helper
 * thread that issued it is never joined while it waits.
 *
 * Parking: parked threads poll(2) the read end of park_pipe, which holds a byte while the gate
 * is open; poll is a cancellation point, so libfuse's end of the loop (pthread_cancel) ends
 * parked threads too. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fluxfs/log.h"
#include "fs-internal.h"
#include "crash_state.h"

struct fs_gate {
    int closed;                  /* atomic */
    int in_read;                 /* atomic */
    int busy;                    /* atomic */
    uint64_t expected, answered; /* atomics */
    int park_pipe[2];            /* [0] readable while open */
    GMutex lock;                 /* the captured INIT and the swallowed reply below */
    GBytes *init_request;        /* the kernel's INIT: header and argument */
    uint64_t init_unique;
    GBytes *init_reply;           /* its answer (fuse_out_header + fuse_init_out) */
    uint64_t swallow_unique;      /* a synthesized INIT's answer to keep from the kernel */
    GBytes *swallowed_reply;      /* that answer */
    struct fs_crash *crash;       /* set before the session starts: requests in flight kept there */
    uint32_t kill_opcode;         /* test hook (fs_gate_set_kill_after_read): 0 none */
    uint64_t kill_nth, kill_seen; /* kill_seen atomic */
    uint64_t kill_reply_unique;   /* atomic: the test hook's request to die after answering */
    bool kill_after_reply;        /* the hook kills after the reply, not after the read */
    bool expect_init;             /* a fresh connection: its first request must be INIT */
    uint32_t refused_opcode;      /* atomic: the first request of a connection set up before */
    int epoll;                    /* atomic: gate_epoll's instance; -1 none yet, -2 none made */
};

void fs_gate_set_crash(struct fs_gate *gate, struct fs_crash *crash)
{
    gate->crash = crash;
}

void fs_gate_set_kill_after_read(struct fs_gate *gate, uint32_t opcode, uint64_t nth)
{
    gate->kill_opcode = opcode;
    gate->kill_nth = nth;
}

void fs_gate_set_kill_after_reply(struct fs_gate *gate, uint32_t opcode, uint64_t nth)
{
    fs_gate_set_kill_after_read(gate, opcode, nth);
    gate->kill_after_reply = true;
}

void fs_gate_expect_init(struct fs_gate *gate)
{
    gate->expect_init = true;
}

uint32_t fs_gate_refused(struct fs_gate *gate)
{
    return __atomic_load_n(&gate->refused_opcode, __ATOMIC_SEQ_CST);
}

/* A connection whose first request is not INIT was set up by an earlier daemon (a /dev/fd/N
 * descriptor a caller kept and gave again after the daemon and its supervisor died): its INIT
 * state died with them, so nothing here can serve it (libfuse would answer EIO to every
 * request, forever). Each such request is answered EIO and the loop is ended (ENODEV). */
static bool refuse_before_init(struct fs_gate *gate, int fd, const struct fuse_in_header *in)
{
    if (!gate->expect_init || in->opcode == FUSE_INIT)
        return false;
    g_mutex_lock(&gate->lock);
    bool seen = gate->init_request != NULL;
    g_mutex_unlock(&gate->lock);
    if (seen)
        return false;
    uint32_t none = 0;
    __atomic_compare_exchange_n(&gate->refused_opcode, &none, in->opcode, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    if (fs_gate_needs_reply(in->opcode)) {
        struct fuse_out_header out = {.len = sizeof(out), .error = -EIO, .unique = in->unique};
        ssize_t n = write(fd, &out, sizeof(out));
        (void)n;
    }
    return true;
}

void fs_gate_expect(struct fs_gate *gate)
{
    __atomic_add_fetch(&gate->expected, 1, __ATOMIC_SEQ_CST);
}

/* The gate whose request this thread returned last, until it comes back. */
static void busy_thread_exit(gpointer gate)
{
    __atomic_sub_fetch(&((struct fs_gate *)gate)->busy, 1, __ATOMIC_SEQ_CST);
}
static GPrivate busy_key = G_PRIVATE_INIT(busy_thread_exit);

struct fs_gate *fs_gate_new(void)
{
    struct fs_gate *gate = g_new0(struct fs_gate, 1);
    g_mutex_init(&gate->lock);
    gate->epoll = -1;
    if (pipe2(gate->park_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        gate->park_pipe[0] = gate->park_pipe[1] = -1;
    } else {
        char byte = 1;
        ssize_t n = write(gate->park_pipe[1], &byte, 1);
        (void)n;
    }
    return gate;
}

void fs_gate_free(struct fs_gate *gate)
{
    if (!gate)
        return;
    /* A waker still blocked in statfs keeps running detached (see above): fs.c keeps the gate
     * of a process that handed its mount over, the only one whose waker can outlive it. */
    if (gate->park_pipe[0] >= 0) {
        close(gate->park_pipe[0]);
        close(gate->park_pipe[1]);
    }
    if (gate->epoll >= 0)
        close(gate->epoll);
    if (gate->init_request)
        g_bytes_unref(gate->init_request);
    if (gate->init_reply)
        g_bytes_unref(gate->init_reply);
    if (gate->swallowed_reply)
        g_bytes_unref(gate->swallowed_reply);
    g_mutex_clear(&gate->lock);
    g_free(gate);
}

bool fs_gate_needs_reply(uint32_t opcode)
{
    return opcode != FUSE_FORGET && opcode != FUSE_BATCH_FORGET && opcode != FUSE_INTERRUPT &&
           opcode != FUSE_NOTIFY_REPLY;
}

/* Under the supervisor (crash recovery) a thread must not sleep inside read(2) of the device: a
 * thread that SIGKILL wakes there takes a pending request before it dies (the kernel checks
 * for a request before the signal), and that request is lost to whoever serves next. The
 * descriptor is non-blocking then and the threads wait in an epoll instance (gate_epoll),
 * where a kill ends them empty-handed. */
/* The one epoll instance all threads wait in, made by the first thread that needs it (under
 * gate->lock) and closed by fs_gate_free once the loop's threads are gone. Not one per thread:
 * libfuse starts and ends worker threads as load comes and goes, and an instance closed at a
 * thread's end (a TLS destructor, after anything that orders it) followed by another thread's
 * open of the same number is a race on the descriptor to ThreadSanitizer (CI's TSan run once
 * every mount was supervised). Waiters of one instance are woken one per event (the kernel
 * queues them exclusive); a thread woken for a request another took reads EAGAIN and waits
 * again. */
static int gate_epoll(struct fs_gate *gate, int device)
{
    int ep = __atomic_load_n(&gate->epoll, __ATOMIC_ACQUIRE);
    if (ep >= 0)
        return ep;
    g_mutex_lock(&gate->lock);
    ep = gate->epoll;
    if (ep < 0) {
        ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event want = {.events = EPOLLIN};
        if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, device, &want) < 0) {
            flog_warn("fs", "epoll_ctl of the FUSE device: %s; waiting in poll(2)",
                      g_strerror(errno));
            close(ep);
            ep = -1;
        }
        /* -2: none could be made; nobody tries again (the close above happened once). */
        __atomic_store_n(&gate->epoll, ep >= 0 ? ep : -2, __ATOMIC_RELEASE);
    }
    g_mutex_unlock(&gate->lock);
    return ep;
}

/* One read of the device. With a landing (crash recovery) the kernel copies the request's first
 * SLOT_BYTES into the shared map and the rest into buf; buf then gets those bytes too. */
static ssize_t read_device(int fd, void *buf, size_t len, uint8_t *landing)
{
    if (!landing || len <= SLOT_BYTES)
        return read(fd, buf, len);
    struct iovec iov[2] = {{.iov_base = landing, .iov_len = SLOT_BYTES},
                           {.iov_base = (uint8_t *)buf + SLOT_BYTES, .iov_len = len - SLOT_BYTES}};
    ssize_t got = readv(fd, iov, 2);
    if (got > 0)
        memcpy(buf, landing, MIN((size_t)got, (size_t)SLOT_BYTES));
    return got;
}

static ssize_t read_request(struct fs_gate *gate, int fd, void *buf, size_t len, uint8_t *landing)
{
    for (;;) {
        ssize_t got = read_device(fd, buf, len, landing);
        if (got >= 0 || errno != EAGAIN)
            return got;
        if (!gate->crash) { /* a descriptor taken over from a supervised mount */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            poll(&pfd, 1, -1);
            continue;
        }
        int ep = gate_epoll(gate, fd);
        if (ep < 0) {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            poll(&pfd, 1, -1);
            continue;
        }
        struct epoll_event event;
        epoll_wait(ep, &event, 1, -1);
    }
}

static void park(struct fs_gate *gate)
{
    while (__atomic_load_n(&gate->closed, __ATOMIC_SEQ_CST)) {
        struct pollfd pfd = {.fd = gate->park_pipe[0], .events = POLLIN};
        poll(&pfd, 1, -1);
    }
}

ssize_t fs_gate_read(struct fs_gate *gate, int fd, void *buf, size_t len)
{
    if (g_private_get(&busy_key)) {
        g_private_set(&busy_key, NULL);
        __atomic_sub_fetch(&gate->busy, 1, __ATOMIC_SEQ_CST);
    }
    ssize_t got;
    int err;
    uint8_t *landing = gate->crash ? fs_crash_landing(gate->crash) : NULL;
    for (;;) {
        __atomic_add_fetch(&gate->in_read, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&gate->closed, __ATOMIC_SEQ_CST)) {
            __atomic_sub_fetch(&gate->in_read, 1, __ATOMIC_SEQ_CST);
            park(gate);
            continue;
        }
        got = read_request(gate, fd, buf, len, landing);
        err = errno;
        if (got >= (ssize_t)sizeof(struct fuse_in_header) && refuse_before_init(gate, fd, buf)) {
            fs_crash_landing_done(landing);
            __atomic_sub_fetch(&gate->in_read, 1, __ATOMIC_SEQ_CST);
            errno = ENODEV; /* libfuse ends the session loop quietly */
            return -1;
        }
        if (got >= (ssize_t)sizeof(struct fuse_in_header)) {
            /* Counted busy before leaving in_read: the drain never sees neither. */
            __atomic_add_fetch(&gate->busy, 1, __ATOMIC_SEQ_CST);
            g_private_set(&busy_key, gate);
            const struct fuse_in_header *in = buf;
            if (gate->kill_opcode != 0 && in->opcode == gate->kill_opcode &&
                __atomic_add_fetch(&gate->kill_seen, 1, __ATOMIC_SEQ_CST) == gate->kill_nth) {
                if (!gate->kill_after_reply)
                    raise(SIGKILL); /* the test hook: dead between read(2) and the slot */
                __atomic_store_n(&gate->kill_reply_unique, in->unique, __ATOMIC_SEQ_CST);
            }
            if (fs_gate_needs_reply(in->opcode)) {
                __atomic_add_fetch(&gate->expected, 1, __ATOMIC_SEQ_CST);
                if (gate->crash)
                    fs_crash_request_read(gate->crash, buf, (size_t)got);
            }
            fs_crash_landing_done(landing); /* in a slot now, or needs no answer */
            if (in->opcode == FUSE_INIT) {
                g_mutex_lock(&gate->lock);
                if (!gate->init_request) {
                    gate->init_request = g_bytes_new(buf, (gsize)got);
                    gate->init_unique = in->unique;
                }
                g_mutex_unlock(&gate->lock);
            }
        }
        __atomic_sub_fetch(&gate->in_read, 1, __ATOMIC_SEQ_CST);
        if (got < 0 && err == EINTR)
            continue;
        break;
    }
    errno = err;
    return got;
}

static GBytes *iov_bytes(const struct iovec *iov, int count)
{
    GByteArray *bytes = g_byte_array_new();
    for (int i = 0; i < count; i++)
        g_byte_array_append(bytes, iov[i].iov_base, (guint)iov[i].iov_len);
    return g_byte_array_free_to_bytes(bytes);
}

ssize_t fs_gate_writev(struct fs_gate *gate, int fd, struct iovec *iov, int count)
{
    const struct fuse_out_header *out = iov[0].iov_base;
    uint64_t unique = out->unique;
    if (unique != 0) {
        bool swallow = false;
        g_mutex_lock(&gate->lock);
        if (gate->swallow_unique != 0 && unique == gate->swallow_unique) {
            gate->swallowed_reply = iov_bytes(iov, count);
            gate->swallow_unique = 0;
            swallow = true;
        } else if (gate->init_request && !gate->init_reply && unique == gate->init_unique) {
            gate->init_reply = iov_bytes(iov, count);
            if (gate->crash)
                fs_crash_set_init(gate->crash, gate->init_request, gate->init_reply);
        }
        g_mutex_unlock(&gate->lock);
        if (swallow)
            return (ssize_t)out->len;
    }
    ssize_t n = writev(fd, iov, count);
    if (unique != 0 && unique == __atomic_load_n(&gate->kill_reply_unique, __ATOMIC_SEQ_CST))
        raise(SIGKILL); /* the test hook: answered, and dead before the slot was cleared */
    if (unique != 0) {
        __atomic_add_fetch(&gate->answered, 1, __ATOMIC_SEQ_CST);
        if (gate->crash)
            fs_crash_request_answered(gate->crash, unique);
    }
    return n;
}

static bool drained(struct fs_gate *gate)
{
    return __atomic_load_n(&gate->in_read, __ATOMIC_SEQ_CST) == 0 &&
           __atomic_load_n(&gate->busy, __ATOMIC_SEQ_CST) == 0 &&
           __atomic_load_n(&gate->answered, __ATOMIC_SEQ_CST) ==
               __atomic_load_n(&gate->expected, __ATOMIC_SEQ_CST);
}

/* Wakes readers blocked in read() one request at a time while some remain. */
struct waker {
    struct fs_gate *gate;
    char *path;
};

static gpointer waker_main(gpointer data)
{
    struct waker *waker = data;
    struct fs_gate *gate = waker->gate;
    while (__atomic_load_n(&gate->closed, __ATOMIC_SEQ_CST) &&
           __atomic_load_n(&gate->in_read, __ATOMIC_SEQ_CST) > 0) {
        struct statfs info;
        if (statfs(waker->path, &info) < 0 && errno != EINTR)
            break;
    }
    g_free(waker->path);
    g_free(waker);
    return NULL;
}

int fs_gate_close(struct fs_gate *gate, const char *mountpoint, int64_t deadline_us)
{
    if (gate->park_pipe[0] < 0)
        return -EIO;
    char byte;
    while (read(gate->park_pipe[0], &byte, 1) == 1) {
    }
    __atomic_store_n(&gate->closed, 1, __ATOMIC_SEQ_CST);
    /* A waker left blocked by the previous close is never joined (its statfs is answered by
     * whoever reads next); each close starts its own. */
    struct waker *waker = g_new0(struct waker, 1);
    waker->gate = gate;
    waker->path = g_strdup(mountpoint);
    g_thread_unref(g_thread_new("fluxfs-gate", waker_main, waker));
    while (!drained(gate)) {
        if (g_get_monotonic_time() >= deadline_us) {
            fs_gate_open(gate);
            return -ETIMEDOUT;
        }
        /* The counters move by the workers' own progress; a short nap between looks. */
        g_usleep(500);
    }
    return 0;
}

void fs_gate_open(struct fs_gate *gate)
{
    __atomic_store_n(&gate->closed, 0, __ATOMIC_SEQ_CST);
    char byte = 1;
    ssize_t n = write(gate->park_pipe[1], &byte, 1);
    (void)n;
}

GBytes *fs_gate_init_request(struct fs_gate *gate)
{
    g_mutex_lock(&gate->lock);
    GBytes *bytes = gate->init_request ? g_bytes_ref(gate->init_request) : NULL;
    g_mutex_unlock(&gate->lock);
    return bytes;
}

GBytes *fs_gate_init_reply(struct fs_gate *gate)
{
    g_mutex_lock(&gate->lock);
    GBytes *bytes = gate->init_reply ? g_bytes_ref(gate->init_reply) : NULL;
    g_mutex_unlock(&gate->lock);
    return bytes;
}

void fs_gate_set_init(struct fs_gate *gate, GBytes *request, GBytes *reply)
{
    g_mutex_lock(&gate->lock);
    gate->init_request = g_bytes_ref(request);
    gate->init_reply = g_bytes_ref(reply);
    gate->init_unique = 0;
    g_mutex_unlock(&gate->lock);
    if (gate->crash)
        fs_crash_set_init(gate->crash, request, reply);
}

void fs_gate_swallow(struct fs_gate *gate, uint64_t unique)
{
    g_mutex_lock(&gate->lock);
    gate->swallow_unique = unique;
    g_mutex_unlock(&gate->lock);
}

GBytes *fs_gate_take_swallowed(struct fs_gate *gate)
{
    g_mutex_lock(&gate->lock);
    GBytes *bytes = gate->swallowed_reply;
    gate->swallowed_reply = NULL;
    gate->swallow_unique = 0;
    g_mutex_unlock(&gate->lock);
    return bytes;
}
