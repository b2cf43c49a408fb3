/* Deleting compose temporaries until they are gone (see include/fluxfs/temp_reaper.h). */
#include "fluxfs/temp_reaper.h"

#include <errno.h>
#include <glib.h>
#include <math.h>

#include "fluxfs/log.h"

#define PAUSE_MAX_S 32.0

struct reap_job {
    struct temp_reaper *reaper;
    char *name;
    int64_t generation;
    unsigned failures;
    gint64 due_us; /* monotonic: when a paused job is sent again */
    gcs_done_cb done;
    void *user;
};

struct temp_reaper {
    struct gcs_client *client;
    GMutex lock;
    GCond changed;
    GQueue waiting;                 /* lock: struct reap_job *, paused */
    bool stopping;                  /* lock */
    struct temp_reaper_stats stats; /* lock */
    GThread *thread;
};

double temp_reaper_pause_s(unsigned failed_tries, double random)
{
    double ceiling = failed_tries <= 1  ? 1.0
                     : failed_tries > 6 ? PAUSE_MAX_S
                                        : ldexp(1.0, (int)failed_tries - 1);
    return ceiling * (0.5 + 0.5 * random);
}

static void job_free(struct reap_job *job)
{
    g_free(job->name);
    g_free(job);
}

static void on_deleted(int err, void *user)
{
    struct reap_job *job = user;
    struct temp_reaper *reaper = job->reaper;
    if (err == -ENOENT)
        err = 0;
    bool again = err == -EIO || err == -ETIMEDOUT;
    g_mutex_lock(&reaper->lock);
    if (again && !reaper->stopping) {
        job->failures++;
        job->due_us = g_get_monotonic_time() +
                      (gint64)(temp_reaper_pause_s(job->failures, g_random_double()) * 1e6);
        g_queue_push_tail(&reaper->waiting, job);
        reaper->stats.waiting++;
        g_cond_signal(&reaper->changed);
        g_mutex_unlock(&reaper->lock);
        flog_debug("io", "temporary '%s': delete failed (%s); trying again", job->name,
                   g_strerror(-err));
        return;
    }
    if (err < 0 && !again)
        reaper->stats.given_up++;
    g_mutex_unlock(&reaper->lock);
    gcs_done_cb done = job->done;
    void *done_user = job->user;
    job_free(job);
    done(err, done_user);
}

static void send_job(struct reap_job *job)
{
    gcs_delete_temporary_async(job->reaper->client, job->name, job->generation, on_deleted, job);
}

/* Sends the paused jobs that are due (all of them when stopping). */
static gpointer reaper_main(gpointer data)
{
    struct temp_reaper *reaper = data;
    g_mutex_lock(&reaper->lock);
    for (;;) {
        gint64 now = g_get_monotonic_time();
        gint64 next = G_MAXINT64;
        GQueue due = G_QUEUE_INIT;
        for (GList *link = reaper->waiting.head; link;) {
            GList *following = link->next;
            struct reap_job *job = link->data;
            if (reaper->stopping || job->due_us <= now) {
                g_queue_unlink(&reaper->waiting, link);
                g_queue_push_tail_link(&due, link);
            } else if (job->due_us < next) {
                next = job->due_us;
            }
            link = following;
        }
        if (due.length > 0) {
            reaper->stats.waiting -= due.length;
            reaper->stats.resent += due.length;
            g_mutex_unlock(&reaper->lock);
            struct reap_job *job;
            while ((job = g_queue_pop_head(&due)))
                send_job(job);
            g_mutex_lock(&reaper->lock);
            continue;
        }
        if (reaper->stopping)
            break;
        if (next == G_MAXINT64)
            g_cond_wait(&reaper->changed, &reaper->lock);
        else
            g_cond_wait_until(&reaper->changed, &reaper->lock, next);
    }
    g_mutex_unlock(&reaper->lock);
    return NULL;
}

struct temp_reaper *temp_reaper_new(struct gcs_client *client)
{
    struct temp_reaper *reaper = g_new0(struct temp_reaper, 1);
    reaper->client = client;
    g_mutex_init(&reaper->lock);
    g_cond_init(&reaper->changed);
    g_queue_init(&reaper->waiting);
    reaper->thread = g_thread_new("fluxfs-reaper", reaper_main, reaper);
    return reaper;
}

void temp_reaper_delete(struct temp_reaper *reaper, const char *name, int64_t generation,
                        gcs_done_cb done, void *user)
{
    struct reap_job *job = g_new0(struct reap_job, 1);
    job->reaper = reaper;
    job->name = g_strdup(name);
    job->generation = generation;
    job->done = done;
    job->user = user;
    send_job(job);
}

void temp_reaper_stop(struct temp_reaper *reaper)
{
    if (!reaper)
        return;
    g_mutex_lock(&reaper->lock);
    reaper->stopping = true;
    g_cond_signal(&reaper->changed);
    g_mutex_unlock(&reaper->lock);
    if (reaper->thread) {
        g_thread_join(reaper->thread); /* it sent every paused job before leaving */
        reaper->thread = NULL;
    }
}

void temp_reaper_get_stats(struct temp_reaper *reaper, struct temp_reaper_stats *out)
{
    g_mutex_lock(&reaper->lock);
    *out = reaper->stats;
    g_mutex_unlock(&reaper->lock);
}

void temp_reaper_free(struct temp_reaper *reaper)
{
    if (!reaper)
        return;
    temp_reaper_stop(reaper);
    g_cond_clear(&reaper->changed);
    g_mutex_clear(&reaper->lock);
    g_free(reaper);
}
