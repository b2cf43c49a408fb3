/* The table of files being written (the write path's state; its operations are in
 * fs_write.c, the model of both in fs-writes.h): one struct fs_open_writer per inode being
 * written, shared by every handle of that inode; commits and what a failed one drops; the
 * inodes renamed away; the write hooks the read side asks (fs-internal.h: fs_write_active,
 * fs_write_resolve, fs_write_patch_stat, fs_write_merge_listing, fs_write_release...). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fluxfs/log.h"
#include "fluxfs/name_map.h"
#include "fluxfs/writer.h"
#include "fs-writes.h"

/* The kernel's dentry of path (when its parent has an inode here), from the notifier. */
static void invalidate_path_entry(struct fs *fs, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *parent_path = slash ? g_strndup(path, (gsize)(slash - path)) : g_strdup("");
    uint64_t parent = *parent_path ? inode_table_find_path(fs->inodes, parent_path) : FUSE_ROOT_ID;
    const char *name = slash ? slash + 1 : path;
    if (parent)
        fs_notify_inval_entry(fs, parent, name);
    g_free(parent_path);
}

static void open_writer_free(gpointer data, gpointer user);

void fs_writes_init(struct fs *fs)
{
    const struct fs_config *cfg = fs->cfg;
    struct fs_writes *writes = g_new0(struct fs_writes, 1);
    g_mutex_init(&writes->lock);
    writes->by_ino = g_hash_table_new(g_int64_hash, g_int64_equal);
    writes->renamed = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    const char *prefix = cfg->prefix ? cfg->prefix : "";
    writes->temp_root = g_strdup_printf("%s%s/tmp/", prefix, NAME_MAP_RESERVED_ROOT_NAME);
    if (cfg->crash_tmp_id)
        writes->tmp_prefix = g_strdup_printf("%s%016" G_GINT64_MODIFIER "x/", writes->temp_root,
                                             (guint64)cfg->crash_tmp_id);
    else
        writes->tmp_prefix = g_strdup_printf("%s%08x%08x/", writes->temp_root, g_random_int(),
                                             (unsigned)g_get_real_time());
    writes->shared = writer_shared_new(
        fs->client,
        cfg->write_max_parts_in_flight > 0 ? (unsigned)cfg->write_max_parts_in_flight : 64,
        cfg->write_buffer_size);
    writes->config.part_size = cfg->write_part_size ? cfg->write_part_size : 16u << 20;
    writes->config.small_threshold = cfg->write_small_threshold;
    writes->config.max_parts_in_flight =
        cfg->write_parts_in_flight > 0 ? (unsigned)cfg->write_parts_in_flight : 16;
    writes->config.mode = cfg->upload_mode;
    writes->config.temp_dir = cfg->temp_dir;
    writes->config.no_memory_buffers = cfg->write_buffer_size == 0;
    writes->config.tmp_prefix = writes->tmp_prefix;
    writes->chmod_refuse = cfg->chmod_refuse;
    writes->reaper = g_thread_pool_new(open_writer_free, fs, 1, FALSE, NULL);
    fs->writes = writes;
    /* A hand-over (cfg->handover_fd): the daemon serving now is alive, nothing crashed, and
     * its renames may be under way: no cleanup. */
    if (!cfg->read_only && cfg->handover_fd < 0) {
        int rc =
            writer_cleanup_stale(fs->client, prefix, writes->temp_root, cfg->upload_cleanup_age_s);
        if (rc < 0)
            flog_warn("fs", "cleanup of stale uploads under '%s' failed: %s", writes->temp_root,
                      g_strerror(-rc));
        /* Before the mount serves anything: no listing shows a file of an interrupted
         * directory rename twice. One list request when there is none. */
        fs_rename_recover(fs->client, prefix);
    }
    /* Started after a crash: the temporaries under this mount's prefix (parts of files being
     * written, multipart markers) are the dead process's, whatever their age: gone now, so an
     * interrupted save leaves nothing behind. */
    if (!cfg->read_only && cfg->crash_tmp_id && cfg->crash_restarts > 0) {
        int rc = writer_cleanup_prefix(fs->client, writes->tmp_prefix);
        if (rc < 0)
            flog_warn("fs", "cleanup of the temporaries under '%s' failed: %s", writes->tmp_prefix,
                      g_strerror(-rc));
    }
}

void fs_writes_clear(struct fs *fs)
{
    struct fs_writes *writes = fs->writes;
    if (!writes)
        return;
    g_thread_pool_free(writes->reaper, FALSE, TRUE); /* what was dropped is freed first */
    /* A directory rename of this mount stopped part way: finish it now if the bucket lets
     * us, so a clean unmount leaves nothing for the next mount to do. */
    if (g_atomic_int_get(&fs->renames_unfinished) && !fs->cfg->read_only)
        fs_rename_recover(fs->client, fs->cfg->prefix ? fs->cfg->prefix : "");
    /* Every handle was released by now (FUSE destroy frees those the kernel never released,
     * committing what they had pending), so only the table's own references are left. */
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, writes->by_ino);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct fs_open_writer *open_writer = value;
        g_assert(open_writer->refs == 1 && open_writer->handles == 0);
        writer_free(open_writer->writer);
        inode_put(fs->inodes, open_writer->inode);
        g_free(open_writer->path);
        g_free(open_writer);
    }
    g_hash_table_destroy(writes->by_ino);
    g_hash_table_destroy(writes->renamed);
    writer_shared_free(writes->shared);
    g_free(writes->tmp_prefix);
    g_free(writes->temp_root);
    g_mutex_clear(&writes->lock);
    g_free(writes);
    fs->writes = NULL;
}

size_t fs_write_open_count(struct fs *fs)
{
    struct fs_writes *writes = fs->writes;
    if (!writes)
        return 0;
    g_mutex_lock(&writes->lock);
    size_t count = g_hash_table_size(writes->by_ino);
    g_mutex_unlock(&writes->lock);
    return count;
}

void fs_write_buffer_stats(struct fs *fs, struct writer_buffer_stats *out)
{
    *out = (struct writer_buffer_stats){0};
    if (fs->writes)
        writer_shared_get_buffer_stats(fs->writes->shared, out);
}

/* ---- the table of files being written ---- */

/* The writer of ino with a reference for the caller (fs_open_writer_unref), and one handle more
 * when add_handle; NULL when ino is not being written. */
struct fs_open_writer *fs_open_writer_find(struct fs *fs, uint64_t ino, bool add_handle)
{
    g_mutex_lock(&fs->writes->lock);
    struct fs_open_writer *open_writer = g_hash_table_lookup(fs->writes->by_ino, &ino);
    if (open_writer) {
        open_writer->refs++;
        if (add_handle)
            open_writer->handles++;
    }
    g_mutex_unlock(&fs->writes->lock);
    return open_writer;
}

/* On the reaper thread: writer_free may wait for an abort and temporary deletes. */
static void open_writer_free(gpointer data, gpointer user)
{
    struct fs_open_writer *open_writer = data;
    struct fs *fs = user;
    writer_free(open_writer->writer);
    inode_put(fs->inodes, open_writer->inode);
    g_free(open_writer->path);
    g_free(open_writer);
}

void fs_open_writer_unref(struct fs *fs, struct fs_open_writer *open_writer)
{
    if (!open_writer)
        return;
    g_mutex_lock(&fs->writes->lock);
    g_assert(open_writer->refs > 0);
    bool last = --open_writer->refs == 0;
    g_mutex_unlock(&fs->writes->lock);
    if (!last)
        return;
    g_assert(!open_writer->attached && open_writer->handles == 0);
    g_thread_pool_push(fs->writes->reaper, open_writer, NULL);
}

/* Takes open_writer out of by_ino (its handles keep it; a new open starts from the bucket).
 * Caller holds fs_writes.lock and a reference of its own. */
static void open_writer_detach_locked(struct fs *fs, struct fs_open_writer *open_writer)
{
    if (!open_writer->attached)
        return;
    if (g_hash_table_lookup(fs->writes->by_ino, &open_writer->ino) == open_writer)
        g_hash_table_remove(fs->writes->by_ino, &open_writer->ino);
    open_writer->attached = false;
    g_assert(open_writer->refs > 1);
    open_writer->refs--; /* the table's */
}

bool fs_write_active(struct fs *fs, uint64_t ino)
{
    if (!fs->writes)
        return false;
    g_mutex_lock(&fs->writes->lock);
    bool active = g_hash_table_contains(fs->writes->by_ino, &ino);
    g_mutex_unlock(&fs->writes->lock);
    return active;
}

int fs_write_resolve(struct fs *fs, const char *path, enum meta_kind *kind,
                     struct meta_attrs *attrs)
{
    uint64_t ino = fs->writes ? inode_table_find_path(fs->inodes, path) : 0;
    struct fs_open_writer *open_writer = ino ? fs_open_writer_find(fs, ino, false) : NULL;
    if (open_writer && !writer_unlinked(open_writer->writer) && !fs_was_renamed(fs, ino)) {
        struct inode *inode = inode_table_get(fs->inodes, ino);
        if (inode) {
            if (attrs) {
                inode_get_attrs(inode, attrs, NULL);
                attrs->size = writer_size(open_writer->writer);
            }
            inode_put(fs->inodes, inode);
            fs_open_writer_unref(fs, open_writer);
            *kind = META_FILE;
            return 0;
        }
    }
    fs_open_writer_unref(fs, open_writer);
    return namespace_resolve(fs->ns, path, kind, attrs);
}

/* Gets or makes the writer of inode with one handle counted. The inode reference is the
 * caller's (the table takes its own). known_absent: the caller just found no object at the
 * path (a negative entry, a cached listing or a probe): it is a new object, committed with
 * ifGenerationMatch=0, with no objects.get to ask again (a race with another creator fails
 * that commit: close reports ESTALE). */
int fs_writer_for_inode(struct fs *fs, struct inode *inode, bool truncate, bool known_absent,
                        struct fs_open_writer **out)
{
    struct fs_open_writer *open_writer = fs_open_writer_find(fs, inode->ino, true);
    if (open_writer && known_absent && writer_unlinked(open_writer->writer)) {
        /* A create of a name whose previous file was unlinked while open and whose last
         * RELEASE (asynchronous) has not come yet: the name is a new file now, not that one
         * (whose commits do nothing). A reopen of the unlinked file itself (/proc/PID/fd)
         * keeps it. */
        g_mutex_lock(&fs->writes->lock);
        open_writer->handles--;
        open_writer_detach_locked(fs, open_writer);
        g_mutex_unlock(&fs->writes->lock);
        fs_open_writer_unref(fs, open_writer);
        open_writer = NULL;
    }
    if (open_writer) {
        int rc = truncate ? writer_truncate(open_writer->writer, 0) : 0;
        if (rc < 0) {
            fs_write_release(fs, &(struct fs_file){.writer = open_writer});
            return rc;
        }
        *out = open_writer;
        return 0;
    }
    struct writer_base base = {0};
    enum meta_kind kind;
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    int rc = known_absent ? -ENOENT : namespace_stat_file(fs->ns, inode->path, &kind, &attrs);
    if (rc == 0) {
        base.exists = true;
        base.generation = attrs.generation;
        base.size = attrs.size;
        meta_attrs_clear(&attrs);
    } else if (rc != -ENOENT) {
        return rc;
    }
    char *object_name = namespace_object_name(fs->ns, inode->path);
    struct writer *writer = NULL;
    rc = writer_new(fs->writes->shared, &fs->writes->config, object_name, &base, truncate, &writer);
    g_free(object_name);
    if (rc < 0)
        return rc;
    struct fs_open_writer *made = g_new0(struct fs_open_writer, 1);
    made->ino = inode->ino;
    made->path = g_strdup(inode->path);
    made->writer = writer;
    made->handles = 1;
    made->refs = 2; /* the table's and the handle's */
    made->attached = true;
    g_mutex_lock(&fs->writes->lock);
    open_writer = g_hash_table_lookup(fs->writes->by_ino, &inode->ino);
    if (open_writer) {
        open_writer->handles++; /* another open won the race */
        open_writer->refs++;
    } else {
        made->inode = inode_table_get(fs->inodes, inode->ino);
        g_hash_table_insert(fs->writes->by_ino, &made->ino, made);
    }
    g_mutex_unlock(&fs->writes->lock);
    if (open_writer) {
        writer_free(made->writer);
        g_free(made->path);
        g_free(made);
        made = open_writer;
        if (truncate && (rc = writer_truncate(made->writer, 0)) < 0) {
            fs_write_release(fs, &(struct fs_file){.writer = made});
            return rc;
        }
    }
    *out = made;
    return 0;
}

/* After a commit that failed: nothing here may go on showing the name as this mount last saw
 * it or as the failed writer made it. The bucket holds the previous version or another
 * writer's object, and the next open or stat must ask it: the writer leaves by_ino (open
 * handles keep reading and writing it; a later commit of it may still succeed and publish),
 * the name's cached metadata and listing entry go, the inode's attributes are marked old and
 * the kernel's pages suspect (the next open drops them), and the kernel's attributes (which
 * follow the failed writer's size) and dentry are invalidated (from the notifier thread). The
 * caller holds a reference. */
void fs_drop_failed_commit(struct fs *fs, struct fs_open_writer *open_writer)
{
    g_mutex_lock(&fs->writes->lock);
    open_writer_detach_locked(fs, open_writer);
    g_mutex_unlock(&fs->writes->lock);
    namespace_invalidate(fs->ns, open_writer->path);
    struct inode *inode = open_writer->inode;
    if (inode) {
        struct meta_attrs attrs;
        inode_get_attrs(inode, &attrs, NULL);
        inode_set_attrs(inode, &attrs, 0); /* fetched long ago: the next use asks again */
        meta_attrs_clear(&attrs);
        g_mutex_lock(&inode->attr_lock);
        inode->kernel_cache_generation = FS_KERNEL_CACHE_SUSPECT;
        g_mutex_unlock(&inode->attr_lock);
    }
    /* The attributes at once (attributes only: no lock the kernel could hold for a request
     * is needed), so a stat right after the failed close() asks again; pages and dentry from
     * the notifier. */
    if (fs->session)
        fuse_lowlevel_notify_inval_inode(fs->session, open_writer->ino, -1, 0);
    fs_notify_inval_inode(fs, open_writer->ino, 0, 0);
    invalidate_path_entry(fs, open_writer->path);
}

/* Commits and makes every cache show the new object; a failure makes them show the bucket
 * (fs_drop_failed_commit). sealed: for shutdown (writer_commit_sealed). The caller holds a
 * reference and no lock. */
static int commit_and_publish_from(struct fs *fs, struct fs_open_writer *open_writer, bool sealed)
{
    struct gcs_object obj;
    memset(&obj, 0, sizeof(obj));
    bool committed = false;
    /* Changes made before this point are in the commit (a write's sequence number is taken
     * after its bytes are in the writer); later ones may be too, which only costs a FLUSH
     * that finds nothing dirty. */
    int64_t covered = __atomic_load_n(&open_writer->change_seq, __ATOMIC_ACQUIRE);
    int rc = sealed ? writer_commit_sealed(open_writer->writer, &obj, &committed)
                    : writer_commit(open_writer->writer, &obj, &committed);
    if (rc < 0)
        fs_drop_failed_commit(fs, open_writer);
    if (rc == 0) {
        int64_t before = __atomic_load_n(&open_writer->committed_seq, __ATOMIC_ACQUIRE);
        while (before < covered &&
               !__atomic_compare_exchange_n(&open_writer->committed_seq, &before, covered, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
    }
    if (rc < 0 || !committed)
        return rc;
    struct meta_attrs attrs;
    meta_attrs_from_object(&attrs, &obj);
    gcs_object_clear(&obj);
    namespace_note_file(fs->ns, open_writer->path, META_FILE, &attrs);
    struct inode *inode = open_writer->inode;
    if (inode) {
        inode_set_attrs(inode, &attrs, g_get_monotonic_time());
        /* The kernel's pages are the bytes just written: they may stay. */
        g_mutex_lock(&inode->attr_lock);
        inode->kernel_cache_generation = attrs.generation;
        g_mutex_unlock(&inode->attr_lock);
    }
    writer_content_published(open_writer->writer); /* the inode shows the new generation */
    meta_attrs_clear(&attrs);
    return 0;
}

int fs_commit_and_publish(struct fs *fs, struct fs_open_writer *open_writer)
{
    return commit_and_publish_from(fs, open_writer, false);
}

static void put_open_writer(struct fs *fs, struct fs_open_writer *open_writer);

void fs_write_release(struct fs *fs, struct fs_file *file)
{
    struct fs_open_writer *open_writer = file->writer;
    if (!open_writer)
        return;
    file->writer = NULL;
    put_open_writer(fs, open_writer);
}

int fs_write_commit_all(struct fs *fs, size_t *committed, size_t *failed)
{
    *committed = 0;
    *failed = 0;
    if (!fs->writes)
        return 0;
    /* Each is pinned (a reference) while it is committed: a RELEASE meanwhile leaves it. */
    GPtrArray *pinned = g_ptr_array_new();
    g_mutex_lock(&fs->writes->lock);
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, fs->writes->by_ino);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct fs_open_writer *open_writer = value;
        open_writer->refs++;
        g_ptr_array_add(pinned, open_writer);
    }
    g_mutex_unlock(&fs->writes->lock);
    int first_error = 0;
    for (guint i = 0; i < pinned->len; i++) {
        struct fs_open_writer *open_writer = g_ptr_array_index(pinned, i);
        /* Sealed: a write after this commit fails (EIO) instead of being acknowledged and
         * then lost with the session. */
        int rc = commit_and_publish_from(fs, open_writer, true);
        if (rc < 0) {
            flog_error("fs", "committing '%s' at shutdown failed: %s", open_writer->path,
                       g_strerror(-rc));
            (*failed)++;
            if (first_error == 0)
                first_error = rc;
        } else {
            flog_info("fs", "committed '%s' at shutdown (still open for writing)",
                      open_writer->path);
            (*committed)++;
        }
        fs_open_writer_unref(fs, open_writer);
    }
    g_ptr_array_free(pinned, TRUE);
    return first_error;
}

/* Drops one handle's hold on open_writer. The last handle commits what no FLUSH committed
 * (the model above: a non-writer's close came last, or a writer's close found nothing new
 * then), unless the writer was detached (a failed commit) or abandoned (its writer killed);
 * then the writer leaves the table, unless a new open took it meanwhile. */
static void put_open_writer(struct fs *fs, struct fs_open_writer *open_writer)
{
    g_mutex_lock(&fs->writes->lock);
    g_assert(open_writer->handles > 0);
    bool last = --open_writer->handles == 0;
    bool attached = open_writer->attached;
    g_mutex_unlock(&fs->writes->lock);
    if (last && attached && writer_dirty(open_writer->writer) &&
        !__atomic_load_n(&open_writer->abandoned, __ATOMIC_ACQUIRE)) {
        int rc = fs_commit_and_publish(fs, open_writer);
        if (rc < 0)
            flog_error("fs",
                       "'%s': the commit at its last close failed: %s; the bucket keeps "
                       "its previous version",
                       open_writer->path, g_strerror(-rc));
        else
            flog_debug("fs", "'%s': committed at its last close", open_writer->path);
    }
    bool detached = false;
    if (last) {
        g_mutex_lock(&fs->writes->lock);
        if (open_writer->handles == 0 && open_writer->attached) {
            open_writer_detach_locked(fs, open_writer);
            detached = true;
        }
        g_mutex_unlock(&fs->writes->lock);
    }
    /* A new file that never got committed leaves no name behind (no lock held: the writer
     * is out of the table and has no handle, nothing else changes it). */
    if (detached && writer_dirty(open_writer->writer) && !writer_has_object(open_writer->writer)) {
        namespace_invalidate(fs->ns, open_writer->path);
        invalidate_path_entry(fs, open_writer->path); /* the kernel's dentry too */
    }
    fs_open_writer_unref(fs, open_writer);
}

void fs_write_patch_stat(struct fs *fs, uint64_t ino, struct stat *st)
{
    if (!fs->writes)
        return;
    /* writer_size is lock-free: no wait for a commit of this file in progress. */
    g_mutex_lock(&fs->writes->lock);
    struct fs_open_writer *open_writer = g_hash_table_lookup(fs->writes->by_ino, &ino);
    if (open_writer) {
        st->st_size = (off_t)writer_size(open_writer->writer);
        st->st_blocks = (st->st_size + 511) / 512;
    }
    g_mutex_unlock(&fs->writes->lock);
}

struct dir_listing *fs_write_merge_listing(struct fs *fs, const char *dir_path,
                                           struct dir_listing *listing)
{
    if (!fs->writes)
        return listing;
    size_t dir_len = strlen(dir_path);
    GArray *extra = NULL;
    g_mutex_lock(&fs->writes->lock);
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, fs->writes->by_ino);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        struct fs_open_writer *open_writer = value;
        const char *path = open_writer->path;
        if (dir_len > 0 && (strncmp(path, dir_path, dir_len) != 0 || path[dir_len] != '/'))
            continue;
        const char *name = path + (dir_len > 0 ? dir_len + 1 : 0);
        if (*name == '\0' || strchr(name, '/') || dir_listing_find(listing, name) ||
            g_hash_table_contains(fs->writes->renamed, &open_writer->ino) ||
            writer_unlinked(open_writer->writer))
            continue;
        if (!extra)
            extra = g_array_new(FALSE, TRUE, sizeof(struct dir_entry));
        struct dir_entry entry = {.name = g_strdup(name), .kind = META_FILE};
        entry.attrs.size = writer_size(open_writer->writer); /* lock-free */
        entry.attrs.mtime_ns = g_get_real_time() * 1000;
        g_array_append_val(extra, entry);
    }
    g_mutex_unlock(&fs->writes->lock);
    if (!extra)
        return listing;
    for (size_t i = 0; i < listing->count; i++) {
        struct dir_entry copy = {.name = g_strdup(listing->entries[i].name),
                                 .kind = listing->entries[i].kind};
        meta_attrs_copy(&copy.attrs, &listing->entries[i].attrs);
        g_array_append_val(extra, copy);
    }
    dir_listing_unref(listing);
    return dir_listing_from_array(extra);
}

/* The kernel moved the source dentry onto the new name, with the source's inode, whose path
 * here is the old one: opening it answers ESTALE, and the kernel then looks the name up again
 * (LOOKUP_REVAL) and gets the inode of the new path. */
#define FS_RENAMED_MAX 100000

void fs_note_renamed(struct fs *fs, const char *old_path)
{
    /* Detached from old_path too: until the kernel forgets it (after the new name's dentry is
     * invalidated, from the notifier thread, which a slow request may hold up for seconds), a
     * create or lookup of old_path must make a new inode, not give this one out again under
     * the old name, where every open of it would answer ESTALE. */
    /* A directory's children too: the kernel reaches them below the new name with their old
     * paths (a write to new/x must not commit to old/x). */
    GArray *inos = inode_table_detach_tree(fs->inodes, old_path);
    g_mutex_lock(&fs->writes->lock);
    if (g_hash_table_size(fs->writes->renamed) + inos->len >= FS_RENAMED_MAX)
        g_hash_table_remove_all(fs->writes->renamed);
    for (guint i = 0; i < inos->len; i++) {
        uint64_t ino = g_array_index(inos, uint64_t, i);
        g_hash_table_add(fs->writes->renamed, g_memdup2(&ino, sizeof(ino)));
    }
    g_mutex_unlock(&fs->writes->lock);
    g_array_free(inos, TRUE);
}

bool fs_was_renamed(struct fs *fs, uint64_t ino)
{
    g_mutex_lock(&fs->writes->lock);
    bool renamed = g_hash_table_contains(fs->writes->renamed, &ino);
    g_mutex_unlock(&fs->writes->lock);
    return renamed;
}

bool fs_write_renamed(struct fs *fs, uint64_t ino)
{
    return fs->writes && fs_was_renamed(fs, ino);
}
