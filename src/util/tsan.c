/* What ThreadSanitizer cannot see by itself (the TSan build, scripts/test-tsan): GLib's thread
 * primitives, and descriptors inherited from another process (tsan_adopt_fd, fluxfs/tsan.h).
 *
 * GLib is not instrumented, and on Linux its GMutex and GCond are futexes and atomics inside
 * libglib, not pthread calls: TSan, which learns about locks from the pthread functions it
 * intercepts, never sees fluxfs take or release a GMutex, so every access that a GMutex orders
 * looked like a data race (hundreds of false reports in core/listing.c alone) and no
 * lock-order inversion could be found. In a -fsanitize=thread build this file defines, in the
 * executable, the GLib functions fluxfs calls; a definition in the executable wins over
 * libglib's, so the calls of fluxfs (and of its tests) come here:
 *
 *   GMutex, GCond         implemented with pthread_mutex_t / pthread_cond_t (CLOCK_MONOTONIC, as
 *                         g_cond_wait_until's end time is g_get_monotonic_time), which TSan
 *                         intercepts: lock happens-before, deadlock detection, wait semantics.
 *                         The GMutex/GCond holds a pointer to them, allocated on first use (a
 *                         zeroed static GMutex needs no g_mutex_init) and freed by _clear.
 *   g_once, g_once_init_*  GLib's slow path publishes with its own uninstrumented atomics;
 *                         reimplemented here with a pthread mutex and instrumented atomics that
 *                         pair with the inline fast path's acquire load.
 *   GThreadPool           GLib's pool hands tasks over through its own queue and lock; here a
 *                         small pool on pthreads (new, push, free: what fluxfs calls).
 *
 * Calls inside libglib still use libglib's own functions (they bind directly, not through the
 * PLT), so GLib-internal mutexes stay GLib's; fluxfs never shares a GMutex or GCond with GLib.
 * Without -fsanitize=thread this file defines only an empty tsan_adopt_fd. */
#include "fluxfs-config.h"

#include "fluxfs/tsan.h"

#if defined(__SANITIZE_THREAD__)
#define FLUXFS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FLUXFS_TSAN 1
#endif
#endif

#ifdef FLUXFS_TSAN

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void *must_alloc(size_t size)
{
    void *p = malloc(size);
    if (!p) {
        fputs("fluxfs tsan.c: out of memory\n", stderr);
        abort();
    }
    return p;
}

/* --- GMutex ----------------------------------------------------------------------------------- */

static pthread_mutex_t *mutex_new(void)
{
    pthread_mutex_t *m = must_alloc(sizeof *m);
    pthread_mutex_init(m, NULL);
    return m;
}

static pthread_mutex_t *mutex_get(GMutex *mutex)
{
    pthread_mutex_t *m = __atomic_load_n((pthread_mutex_t **)&mutex->p, __ATOMIC_ACQUIRE);
    if (m)
        return m;
    pthread_mutex_t *fresh = mutex_new();
    if (__atomic_compare_exchange_n((pthread_mutex_t **)&mutex->p, &m, fresh, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return fresh;
    pthread_mutex_destroy(fresh);
    free(fresh);
    return m;
}

void g_mutex_init(GMutex *mutex)
{
    mutex->p = mutex_new();
}

void g_mutex_clear(GMutex *mutex)
{
    pthread_mutex_t *m = mutex->p;
    if (m) {
        pthread_mutex_destroy(m);
        free(m);
        mutex->p = NULL;
    }
}

void g_mutex_lock(GMutex *mutex)
{
    int rc = pthread_mutex_lock(mutex_get(mutex));
    if (rc != 0) {
        fprintf(stderr, "fluxfs tsan.c: pthread_mutex_lock: %d\n", rc);
        abort();
    }
}

gboolean g_mutex_trylock(GMutex *mutex)
{
    return pthread_mutex_trylock(mutex_get(mutex)) == 0;
}

void g_mutex_unlock(GMutex *mutex)
{
    int rc = pthread_mutex_unlock(mutex_get(mutex));
    if (rc != 0) {
        fprintf(stderr, "fluxfs tsan.c: pthread_mutex_unlock: %d\n", rc);
        abort();
    }
}

/* --- GCond ------------------------------------------------------------------------------------ */

static pthread_cond_t *cond_new(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_t *c = must_alloc(sizeof *c);
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return c;
}

static pthread_cond_t *cond_get(GCond *cond)
{
    pthread_cond_t *c = __atomic_load_n((pthread_cond_t **)&cond->p, __ATOMIC_ACQUIRE);
    if (c)
        return c;
    pthread_cond_t *fresh = cond_new();
    if (__atomic_compare_exchange_n((pthread_cond_t **)&cond->p, &c, fresh, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return fresh;
    pthread_cond_destroy(fresh);
    free(fresh);
    return c;
}

void g_cond_init(GCond *cond)
{
    cond->p = cond_new();
}

void g_cond_clear(GCond *cond)
{
    pthread_cond_t *c = cond->p;
    if (c) {
        pthread_cond_destroy(c);
        free(c);
        cond->p = NULL;
    }
}

void g_cond_wait(GCond *cond, GMutex *mutex)
{
    pthread_cond_wait(cond_get(cond), mutex_get(mutex));
}

gboolean g_cond_wait_until(GCond *cond, GMutex *mutex, gint64 end_time)
{
    struct timespec ts = {
        .tv_sec = end_time / G_USEC_PER_SEC,
        .tv_nsec = (end_time % G_USEC_PER_SEC) * 1000,
    };
    int rc;
    do
        rc = pthread_cond_timedwait(cond_get(cond), mutex_get(mutex), &ts);
    while (rc == EINTR);
    return rc != ETIMEDOUT;
}

void g_cond_signal(GCond *cond)
{
    pthread_cond_signal(cond_get(cond));
}

void g_cond_broadcast(GCond *cond)
{
    pthread_cond_broadcast(cond_get(cond));
}

/* --- g_once, g_once_init_enter/leave ---------------------------------------------------------- */

static pthread_mutex_t once_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t once_cond = PTHREAD_COND_INITIALIZER;

gpointer g_once_impl(GOnce *once, GThreadFunc func, gpointer arg)
{
    pthread_mutex_lock(&once_mutex);
    while (__atomic_load_n(&once->status, __ATOMIC_ACQUIRE) == G_ONCE_STATUS_PROGRESS)
        pthread_cond_wait(&once_cond, &once_mutex);
    if (__atomic_load_n(&once->status, __ATOMIC_ACQUIRE) != G_ONCE_STATUS_READY) {
        __atomic_store_n(&once->status, G_ONCE_STATUS_PROGRESS, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&once_mutex);
        gpointer retval = func(arg);
        pthread_mutex_lock(&once_mutex);
        once->retval = retval;
        __atomic_store_n(&once->status, G_ONCE_STATUS_READY, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&once_cond);
    }
    gpointer retval = once->retval;
    pthread_mutex_unlock(&once_mutex);
    return retval;
}

struct once_pending {
    volatile void *location;
    struct once_pending *next;
};

static struct once_pending *once_pending; /* under once_mutex */

static gboolean once_is_pending(volatile void *location)
{
    for (struct once_pending *p = once_pending; p; p = p->next)
        if (p->location == location)
            return TRUE;
    return FALSE;
}

gboolean(g_once_init_enter)(volatile void *location)
{
    gboolean mine = FALSE;
    pthread_mutex_lock(&once_mutex);
    if (__atomic_load_n((gsize *)location, __ATOMIC_ACQUIRE) == 0) {
        if (!once_is_pending(location)) {
            struct once_pending *p = must_alloc(sizeof *p);
            p->location = location;
            p->next = once_pending;
            once_pending = p;
            mine = TRUE;
        } else {
            while (once_is_pending(location))
                pthread_cond_wait(&once_cond, &once_mutex);
        }
    }
    pthread_mutex_unlock(&once_mutex);
    return mine;
}

void(g_once_init_leave)(volatile void *location, gsize result)
{
    pthread_mutex_lock(&once_mutex);
    __atomic_store_n((gsize *)location, result, __ATOMIC_RELEASE);
    for (struct once_pending **p = &once_pending; *p; p = &(*p)->next) {
        if ((*p)->location == location) {
            struct once_pending *done = *p;
            *p = done->next;
            free(done);
            break;
        }
    }
    pthread_cond_broadcast(&once_cond);
    pthread_mutex_unlock(&once_mutex);
}

/* --- GThreadPool ------------------------------------------------------------------------------ */

/* GLib's pool hands tasks over through its GAsyncQueue (GLib's own mutex, and list nodes
 * allocated by the pushing thread and freed by the worker): none of it visible to TSan, and
 * wrapping push/free with annotations still left the queue's own nodes reported. So the TSan
 * build has its own pool on pthreads, for what fluxfs uses: g_thread_pool_new, _push and _free
 * (immediate or not, waiting or not). Threads start on demand up to max_threads (-1: no
 * limit), as GLib's do; "exclusive" changes nothing here. */
struct tsan_pool {
    GThreadPool pub; /* func, user_data, exclusive: public fields of GThreadPool */
    pthread_mutex_t mutex;
    pthread_cond_t cond; /* a task queued, or the pool stops */
    GQueue tasks;        /* gpointer data, FIFO */
    int max_threads;
    int threads; /* started and not yet returned */
    int idle;    /* of those, waiting for a task */
    bool stopping;
    bool detached;      /* freed without waiting: the last thread frees the pool */
    GPtrArray *handles; /* pthread_t *, for the join */
};

static void pool_destroy(struct tsan_pool *pool)
{
    g_ptr_array_free(pool->handles, TRUE);
    g_queue_clear(&pool->tasks);
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->mutex);
    free(pool);
}

static void *pool_thread(void *arg)
{
    struct tsan_pool *pool = arg;
    pthread_mutex_lock(&pool->mutex);
    for (;;) {
        while (g_queue_is_empty(&pool->tasks) && !pool->stopping) {
            pool->idle++;
            pthread_cond_wait(&pool->cond, &pool->mutex);
            pool->idle--;
        }
        if (g_queue_is_empty(&pool->tasks))
            break; /* stopping, nothing left */
        gpointer data = g_queue_pop_head(&pool->tasks);
        pthread_mutex_unlock(&pool->mutex);
        pool->pub.func(data, pool->pub.user_data);
        pthread_mutex_lock(&pool->mutex);
    }
    bool last = --pool->threads == 0;
    bool free_it = last && pool->detached;
    pthread_mutex_unlock(&pool->mutex);
    if (free_it)
        pool_destroy(pool);
    return NULL;
}

GThreadPool *g_thread_pool_new(GFunc func, gpointer user_data, gint max_threads, gboolean exclusive,
                               GError **error)
{
    struct tsan_pool *pool = must_alloc(sizeof *pool);
    *pool = (struct tsan_pool){
        .pub = {.func = func, .user_data = user_data, .exclusive = exclusive},
        .max_threads = max_threads,
        .handles = g_ptr_array_new_with_free_func(free),
    };
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->cond, NULL);
    g_queue_init(&pool->tasks);
    return &pool->pub;
}

gboolean g_thread_pool_push(GThreadPool *pub, gpointer data, GError **error)
{
    struct tsan_pool *pool = (struct tsan_pool *)pub;
    pthread_mutex_lock(&pool->mutex);
    g_queue_push_tail(&pool->tasks, data);
    /* A thread more when the tasks queued outnumber the idle threads (signalled ones may not
     * have taken theirs yet), up to max_threads. */
    if ((guint)pool->idle < pool->tasks.length &&
        (pool->max_threads < 0 || pool->threads < pool->max_threads)) {
        pthread_t *handle = must_alloc(sizeof *handle);
        int rc = pthread_create(handle, NULL, pool_thread, pool);
        if (rc != 0) {
            free(handle);
            if (pool->threads == 0) {
                g_queue_pop_tail(&pool->tasks);
                pthread_mutex_unlock(&pool->mutex);
                g_set_error(error, G_THREAD_ERROR, G_THREAD_ERROR_AGAIN,
                            "Error creating thread: %s", g_strerror(rc));
                return FALSE;
            }
        } else {
            pool->threads++;
            g_ptr_array_add(pool->handles, handle);
        }
    }
    pthread_cond_signal(&pool->cond);
    pthread_mutex_unlock(&pool->mutex);
    return TRUE;
}

void g_thread_pool_free(GThreadPool *pub, gboolean immediate, gboolean wait_)
{
    struct tsan_pool *pool = (struct tsan_pool *)pub;
    pthread_mutex_lock(&pool->mutex);
    pool->stopping = true;
    if (immediate)
        g_queue_clear(&pool->tasks); /* GLib: tasks not yet started are dropped */
    pthread_cond_broadcast(&pool->cond);
    if (!wait_ && pool->threads > 0) {
        pool->detached = true;
        for (guint i = 0; i < pool->handles->len; i++)
            pthread_detach(*(pthread_t *)g_ptr_array_index(pool->handles, i));
        pthread_mutex_unlock(&pool->mutex);
        return;
    }
    pthread_mutex_unlock(&pool->mutex);
    /* Waiting (or no thread ever started): the joins are the happens-before of every task. */
    for (guint i = 0; i < pool->handles->len; i++)
        pthread_join(*(pthread_t *)g_ptr_array_index(pool->handles, i), NULL);
    pool_destroy(pool);
}

/* --- inherited descriptors ------------------------------------------------------------------- */

/* TSan gives each descriptor it sees created (open, pipe, socket, one received with
 * SCM_RIGHTS, ...) a sync object: write/send release it, read/recv acquire it. An inherited
 * descriptor has none, so nothing is ordered through it. Sending fd to ourselves over a socket
 * pair makes TSan see a descriptor created (the received one, same open file), and dup2 of that
 * one onto fd gives fd its sync object. */
void tsan_adopt_fd(int fd)
{
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0)
        return;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        return;
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.bytes,
                         .msg_controllen = sizeof(control.bytes)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    int received = -1;
    if (sendmsg(pair[0], &msg, 0) == 1) {
        memset(&control, 0, sizeof(control));
        msg.msg_controllen = sizeof(control.bytes);
        if (recvmsg(pair[1], &msg, MSG_CMSG_CLOEXEC) == 1) {
            cmsg = CMSG_FIRSTHDR(&msg);
            if (cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
                memcpy(&received, CMSG_DATA(cmsg), sizeof(int));
        }
    }
    close(pair[0]);
    close(pair[1]);
    if (received < 0)
        return;
    if (dup2(received, fd) == fd)
        fcntl(fd, F_SETFD, flags);
    close(received);
}

#else

void tsan_adopt_fd(int fd)
{
    (void)fd;
}

#endif
