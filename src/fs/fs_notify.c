/* Kernel notifications (invalidations of an inode's attributes and pages, of a dentry) from
 * one thread of their own.
 *
 * Why: fuse_lowlevel_notify_inval_entry takes the parent directory's lock in the kernel, and
 * notify_inval_inode waits for the inode's locked pages. A request handler may be serving a
 * request for which the kernel holds exactly those (a RENAME holds both directories, a READ
 * holds its pages locked), or be waiting (for a per-file lock held by a commit) on a handler
 * that does: three threads of a daemon once sat in fuse_reverse_inval_entry called from FLUSH
 * while applications hung in close, rename and getdents. So no handler notifies: it queues
 * here, and the notifier thread sends, in order, after the handler has replied. Two
 * exceptions: the store of a small object's bytes at OPEN (fs_ops.c), with the invalidation
 * of the inode's pages just before it, which must reach the page cache before the reply (the
 * kernel holds no page or directory lock during OPEN), and
 * attributes-only invalidations (offset -1), for which the kernel takes no such lock.
 *
 * Lifetime: started at FUSE INIT, stopped at FUSE DESTROY (the session is alive in both):
 * what is still queued then is dropped (the mount is going away, the kernel forgets it all),
 * the one being sent is waited for. Queueing before the start or after the stop is a no-op. */
#include <errno.h>
#include <string.h>

#include "fluxfs/log.h"
#include "fs-internal.h"

struct fs_notification {
    uint64_t ino; /* the inode, or the parent of name */
    char *name;   /* NULL: the inode's attributes and pages from offset */
    int64_t offset, len;
};

struct fs_notifier {
    GMutex lock;
    GCond wake;
    GQueue queue;  /* lock: struct fs_notification * */
    bool stopping; /* lock */
    GThread *thread;
    struct fuse_session *session;
};

static void notification_free(gpointer data)
{
    struct fs_notification *note = data;
    g_free(note->name);
    g_free(note);
}

static gpointer notifier_main(gpointer data)
{
    struct fs_notifier *notifier = data;
    g_mutex_lock(&notifier->lock);
    for (;;) {
        while (!notifier->stopping && g_queue_is_empty(&notifier->queue))
            g_cond_wait(&notifier->wake, &notifier->lock);
        if (notifier->stopping)
            break;
        struct fs_notification *note = g_queue_pop_head(&notifier->queue);
        g_mutex_unlock(&notifier->lock);
        int rc;
        if (note->name)
            rc = fuse_lowlevel_notify_inval_entry(notifier->session, note->ino, note->name,
                                                  strlen(note->name));
        else
            rc = fuse_lowlevel_notify_inval_inode(notifier->session, note->ino, note->offset,
                                                  note->len);
        /* -ENOENT: the kernel has forgotten the inode or name already, which is the point. */
        if (rc < 0 && rc != -ENOENT)
            flog_debug("fs", "kernel invalidation of inode %" G_GUINT64_FORMAT "%s%s: %s",
                       note->ino, note->name ? " name " : "", note->name ? note->name : "",
                       g_strerror(-rc));
        notification_free(note);
        g_mutex_lock(&notifier->lock);
    }
    g_mutex_unlock(&notifier->lock);
    return NULL;
}

void fs_notify_start(struct fs *fs)
{
    if (fs->notifier || !fs->session)
        return;
    struct fs_notifier *notifier = g_new0(struct fs_notifier, 1);
    g_mutex_init(&notifier->lock);
    g_cond_init(&notifier->wake);
    g_queue_init(&notifier->queue);
    notifier->session = fs->session;
    notifier->thread = g_thread_new("fluxfs-notify", notifier_main, notifier);
    g_atomic_pointer_set(&fs->notifier, notifier);
}

void fs_notify_stop(struct fs *fs)
{
    struct fs_notifier *notifier = g_atomic_pointer_get(&fs->notifier);
    if (!notifier)
        return;
    g_mutex_lock(&notifier->lock);
    notifier->stopping = true;
    guint dropped = g_queue_get_length(&notifier->queue);
    g_cond_signal(&notifier->wake);
    g_mutex_unlock(&notifier->lock);
    g_thread_join(notifier->thread);
    /* Handlers that read the pointer before it was cleared find stopping set (see queue). */
    g_atomic_pointer_set(&fs->notifier, NULL);
    if (dropped > 0)
        flog_debug("fs", "%u kernel invalidations dropped at unmount", dropped);
    g_queue_clear_full(&notifier->queue, notification_free);
    /* Freed at fs state clear: a handler still running may hold the pointer. */
    fs->notifier_retired = notifier;
}

void fs_notify_free(struct fs *fs)
{
    fs_notify_stop(fs);
    struct fs_notifier *notifier = fs->notifier_retired;
    if (!notifier)
        return;
    g_mutex_clear(&notifier->lock);
    g_cond_clear(&notifier->wake);
    g_free(notifier);
    fs->notifier_retired = NULL;
}

static void queue(struct fs *fs, struct fs_notification *note)
{
    struct fs_notifier *notifier = g_atomic_pointer_get(&fs->notifier);
    if (notifier) {
        g_mutex_lock(&notifier->lock);
        if (!notifier->stopping) {
            g_queue_push_tail(&notifier->queue, note);
            note = NULL;
            g_cond_signal(&notifier->wake);
        }
        g_mutex_unlock(&notifier->lock);
    }
    if (note)
        notification_free(note);
}

void fs_notify_inval_inode(struct fs *fs, uint64_t ino, int64_t offset, int64_t len)
{
    struct fs_notification *note = g_new0(struct fs_notification, 1);
    note->ino = ino;
    note->offset = offset;
    note->len = len;
    queue(fs, note);
}

void fs_notify_inval_entry(struct fs *fs, uint64_t parent, const char *name)
{
    struct fs_notification *note = g_new0(struct fs_notification, 1);
    note->ino = parent;
    note->name = g_strdup(name);
    queue(fs, note);
}
