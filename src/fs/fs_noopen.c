/* Reads without handles. On a read-only mount the kernel is told that it may open and close
 * files without asking (fs_init: OPEN is answered ENOSYS once, and the kernel stops sending
 * OPEN, RELEASE and, after one ENOSYS, FLUSH): a cached epoch then costs the daemon no request
 * per file. READs of such files arrive with handle 0; this keeps their state (the reader of the
 * inode's version, its readahead state, the disk cache file) per inode, for the few inodes being
 * read now, dropped least recently used first and as soon as a small object's end was served
 * (the kernel then holds all of it). Every inode is pinned to one generation in this mode
 * (inode.h), so a file's state always reads the version its inode names.
 *
 * Ownership: entries are owned by the table until dropped, and by each READ that took one
 * until it gives it back; the last of them frees the file. */
#include <errno.h>

#include "fs-internal.h"

#define NOOPEN_FILES_MAX 64

struct fs_noopen_entry {
    uint64_t ino;
    struct fs_file *file;
    unsigned refs; /* fs_noopen lock: the table's (while listed) and each READ's */
    bool listed;   /* fs_noopen lock */
};

struct fs_noopen {
    GMutex lock;
    GHashTable *by_ino; /* &entry->ino -> entry */
    GQueue lru;         /* entries, most recently used first */
};

void fs_noopen_init(struct fs *fs)
{
    struct fs_noopen *table = g_new0(struct fs_noopen, 1);
    g_mutex_init(&table->lock);
    table->by_ino = g_hash_table_new(g_int64_hash, g_int64_equal);
    g_queue_init(&table->lru);
    fs->noopen = table;
}

/* Lock held: unlists entry; returns true when nothing else holds it (the caller frees it). */
static bool unlist_locked(struct fs_noopen *table, struct fs_noopen_entry *entry)
{
    g_hash_table_remove(table->by_ino, &entry->ino);
    g_queue_remove(&table->lru, entry);
    entry->listed = false;
    return --entry->refs == 0;
}

static void entry_free(struct fs *fs, struct fs_noopen_entry *entry)
{
    fs_file_free(fs, entry->file);
    g_free(entry);
}

void fs_noopen_clear(struct fs *fs)
{
    struct fs_noopen *table = fs->noopen;
    if (!table)
        return;
    struct fs_noopen_entry *entry;
    while ((entry = g_queue_peek_head(&table->lru))) {
        if (unlist_locked(table, entry))
            entry_free(fs, entry);
    }
    g_hash_table_destroy(table->by_ino);
    g_mutex_clear(&table->lock);
    g_free(table);
    fs->noopen = NULL;
}

int fs_noopen_acquire(struct fs *fs, uint64_t ino, struct fs_noopen_entry **out)
{
    struct fs_noopen *table = fs->noopen;
    if (!table)
        return -EBADF;
    g_mutex_lock(&table->lock);
    struct fs_noopen_entry *entry = g_hash_table_lookup(table->by_ino, &ino);
    if (entry) {
        entry->refs++;
        g_queue_remove(&table->lru, entry);
        g_queue_push_head(&table->lru, entry);
        g_mutex_unlock(&table->lock);
        *out = entry;
        return 0;
    }
    g_mutex_unlock(&table->lock);

    struct inode *inode = inode_table_get_request(fs->inodes, ino, "read");
    if (!inode)
        return -ESTALE;
    if (inode->kind != META_FILE) {
        inode_put(fs->inodes, inode);
        return -EISDIR;
    }
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, NULL);
    struct fs_noopen_entry *made = g_new0(struct fs_noopen_entry, 1);
    made->ino = ino;
    made->file = fs_file_new(fs, inode, &attrs, 0); /* takes the inode reference */
    meta_attrs_clear(&attrs);

    struct fs_noopen_entry *evicted = NULL;
    g_mutex_lock(&table->lock);
    entry = g_hash_table_lookup(table->by_ino, &ino);
    if (entry) {
        entry->refs++; /* another READ made one meanwhile */
    } else {
        entry = made;
        made = NULL;
        entry->refs = 2; /* the table's and this READ's */
        entry->listed = true;
        g_hash_table_insert(table->by_ino, &entry->ino, entry);
        g_queue_push_head(&table->lru, entry);
        if (g_queue_get_length(&table->lru) > NOOPEN_FILES_MAX) {
            struct fs_noopen_entry *oldest = g_queue_peek_tail(&table->lru);
            if (unlist_locked(table, oldest))
                evicted = oldest;
        }
    }
    g_mutex_unlock(&table->lock);
    if (made)
        entry_free(fs, made);
    if (evicted)
        entry_free(fs, evicted);
    *out = entry;
    return 0;
}

struct fs_file *fs_noopen_file(struct fs_noopen_entry *entry)
{
    return entry->file;
}

void fs_noopen_release(struct fs *fs, struct fs_noopen_entry *entry, bool served_whole)
{
    struct fs_noopen *table = fs->noopen;
    g_mutex_lock(&table->lock);
    bool last = false;
    if (served_whole && entry->listed)
        last = unlist_locked(table, entry);
    if (!last)
        last = --entry->refs == 0;
    g_mutex_unlock(&table->lock);
    if (last)
        entry_free(fs, entry);
}
