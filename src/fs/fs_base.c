/* The fs layer's base: what the operation files share. Below it only fs_writes.c (a file being
 * written shows its writer's size; its handle holds a writer reference), fs_notify.c and
 * fs_rename.c.
 *
 * Replies: fs_reply_err and fs_reply_entry are the fs layer's error and entry replies. Each
 * records the errno on the request being served on this thread (struct fs_request, opened by
 * the metrics decorator, fs_metrics.c) before the kernel hears it, then replies with libfuse's
 * function of the same suffix. Every fs operation replies on the thread that runs it.
 *
 * Attributes: what stat shows of an inode (a file being written: its writer's size and mtime),
 * as entry and attribute replies.
 *
 * Handles: the open files given to the kernel (fs_file_new/fs_file_free) and the record of
 * every open file and directory (fs_handle_opened/closed), from which FUSE destroy frees
 * what the kernel never released (fs_ops.c). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/content_cache.h"
#include "fluxfs/metrics.h"
#include "fluxfs/timens.h"
#include "fs-internal.h"

#define FS_BLOCK_SIZE      (1u << 20)
#define FS_BLOCK_SIZE_NEAR (128u << 10)

/* ---- replies ---- */

static __thread struct fs_request *current_request;

void fs_request_enter(struct fs_request *request, enum metrics_fs_op op)
{
    request->err = 0;
    request->op = op;
    request->previous = current_request;
    current_request = request;
}

void fs_request_leave(struct fs_request *request)
{
    current_request = request->previous;
}

int fs_reply_err(fuse_req_t req, int err)
{
    struct fs_request *request = current_request;
    if (request) {
        if (request->err == 0 && err > 0)
            metrics_fs_op_failed(request->op, err);
        request->err = err;
    } else if (err != 0)
        metrics_fs_op_done(METRICS_FS_OTHERS, err, 0);
    return fuse_reply_err(req, err);
}

int fs_reply_entry(fuse_req_t req, const struct fuse_entry_param *entry)
{
    struct fs_request *request = current_request;
    if (request && entry->ino == 0 && request->err == 0) {
        metrics_fs_op_failed(request->op, ENOENT);
        request->err = ENOENT;
    }
    return fuse_reply_entry(req, entry);
}

/* ---- attributes ---- */

/* The preferred I/O size stat shows: 1 MiB (buffered writers send large WRITEs), but not for
 * files about that large. CPython's buffered open allocates st_blksize bytes next to the
 * file's bytes; when the two are about equal, glibc trims the heap top at every close (its
 * dynamic trim threshold is twice the largest chunk seen), so every file read in a fresh
 * DataLoader worker pays page faults on 2 MiB of new memory: 1 MiB files read 5x slower than
 * from a local disk (4 KiB blocks). */
static blksize_t preferred_block_size(uint64_t size)
{
    if (size >= FS_BLOCK_SIZE / 2 && size <= 2 * (uint64_t)FS_BLOCK_SIZE)
        return FS_BLOCK_SIZE_NEAR;
    return FS_BLOCK_SIZE;
}

void fs_fill_stat(const struct fs *fs, uint64_t ino, enum meta_kind kind,
                  const struct meta_attrs *attrs, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_uid = fs->cfg->uid;
    st->st_gid = fs->cfg->gid;
    st->st_blksize = FS_BLOCK_SIZE;
    int64_t time_ns = fs->mount_time_ns;
    switch (kind) {
    case META_DIR:
        st->st_mode = S_IFDIR | (fs->cfg->dir_mode & 07777);
        st->st_nlink = 2;
        st->st_size = 4096;
        break;
    case META_SYMLINK:
        st->st_mode = S_IFLNK | 0777;
        st->st_nlink = 1;
        st->st_size = !attrs                  ? 0
                      : attrs->symlink_target ? (off_t)strlen(attrs->symlink_target)
                                              : (off_t)attrs->size; /* gcloud: target = bytes */
        time_ns = attrs ? attrs->mtime_ns : time_ns;
        break;
    default:
        st->st_mode = S_IFREG | (fs->cfg->file_mode & 07777);
        st->st_nlink = 1;
        st->st_size = attrs ? (off_t)attrs->size : 0;
        time_ns = attrs ? attrs->mtime_ns : time_ns;
        break;
    }
    if (fs->cfg->read_only)
        st->st_mode &= ~(mode_t)0222;
    st->st_blocks = (st->st_size + 511) / 512;
    int64_t seconds, nanoseconds;
    timens_split(time_ns, &seconds, &nanoseconds); /* before 1970: tv_nsec stays >= 0 */
    st->st_mtim.tv_sec = (time_t)seconds;
    st->st_mtim.tv_nsec = (long)nanoseconds;
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
    if (kind == META_FILE)
        fs_write_patch_stat((struct fs *)fs, ino, st);
    if (kind != META_DIR)
        st->st_blksize = preferred_block_size((uint64_t)st->st_size);
}

void fs_fill_entry(struct fs *fs, struct inode *inode, struct fuse_entry_param *entry)
{
    memset(entry, 0, sizeof(*entry));
    entry->ino = inode->ino;
    entry->generation = 0; /* inode numbers are never reused */
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, NULL);
    fs_fill_stat(fs, inode->ino, inode->kind, &attrs, &entry->attr);
    meta_attrs_clear(&attrs);
    entry->attr_timeout = fs->attr_timeout_s;
    entry->entry_timeout = fs->entry_timeout_s;
}

void fs_reply_attr(fuse_req_t req, struct fs *fs, struct inode *inode)
{
    struct meta_attrs attrs;
    struct stat st;
    inode_get_attrs(inode, &attrs, NULL);
    fs_fill_stat(fs, inode->ino, inode->kind, &attrs, &st);
    meta_attrs_clear(&attrs);
    fuse_reply_attr(req, &st, fs->attr_timeout_s);
}

/* ---- handles ---- */

struct fs_file *fs_file_new(struct fs *fs, struct inode *inode, const struct meta_attrs *attrs,
                            int open_flags)
{
    struct fs_file *file = g_new0(struct fs_file, 1);
    file->inode = inode;
    file->object_name = namespace_object_name(fs->ns, inode->path);
    file->object = (struct reader_object){
        .name = file->object_name,
        .generation = attrs->generation,
        .size = attrs->size,
        .has_crc32c = attrs->has_crc32c,
        .crc32c = attrs->crc32c,
    };
    const struct reader_object *object = &file->object;
    /* Large objects the disk cache holds (this generation) are read from it; others are
     * stored there as they are read (gcsfuse's file cache). */
    bool large = object->size > fs->reader_config.small_file_threshold;
    struct content_cache *cache = fs->reader_config.cache;
    if (large && cache &&
        content_cache_large_open(cache, object->name, object->generation, object->size,
                                 &file->cache_fd) == 0) {
        file->from_cache = true;
        file->cache_size = object->size;
    } else if (large && cache) {
        file->fill = content_cache_fill_begin(cache, object->name, object->generation, object->size,
                                              object->has_crc32c, object->crc32c);
    }
    /* Large objects: one reader per version, shared with the other handles (issue 11). */
    if (file->from_cache)
        file->reader = NULL;
    else
        file->reader = large ? reader_pool_open(fs->readers, object)
                             : reader_new(fs->client, fs->budget, &fs->reader_config, object);
    bool small = !(open_flags & O_DIRECT) && object->size > 0 &&
                 object->size <= fs->reader_config.small_file_threshold;
    if (small && cache) {
        file->small_name = g_strdup(object->name);
        file->small_generation = object->generation;
        file->small_size = object->size;
    }
    return file;
}

void fs_file_free(struct fs *fs, struct fs_file *file)
{
    fs_write_release(fs, file);
    reader_free(file->reader);
    if (file->from_cache)
        close(file->cache_fd);
    content_fill_unref(file->fill);
    inode_put(fs->inodes, file->inode);
    g_free(file->small_name);
    g_free(file->object_name);
    g_free(file);
}

/* The kernel's handle number for a handle: its address, unless a carried handle (fs_handover.c)
 * already has that number, then an odd alias (addresses are even). handles_lock held. */
static uint64_t expose_locked(struct fs *fs, void *handle)
{
    uint64_t fh = (uint64_t)(uintptr_t)handle;
    if (fs->handle_aliases && g_hash_table_contains(fs->handle_aliases, &fh)) {
        fh = fs->next_handle_alias;
        fs->next_handle_alias += 2;
        fs_handle_alias_locked(fs, fh, handle);
    }
    return fh;
}

void fs_handle_alias_locked(struct fs *fs, uint64_t fh, void *handle)
{
    if (!fs->handle_aliases) {
        fs->handle_aliases = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
        fs->handle_numbers = g_hash_table_new(g_direct_hash, g_direct_equal);
    }
    uint64_t *key = g_memdup2(&fh, sizeof(fh));
    g_hash_table_replace(fs->handle_aliases, key, handle);
    g_hash_table_replace(fs->handle_numbers, handle, key);
    __atomic_add_fetch(&fs->handle_alias_count, 1, __ATOMIC_RELEASE);
}

static void unexpose_locked(struct fs *fs, void *handle)
{
    if (!fs->handle_numbers)
        return;
    uint64_t *key = g_hash_table_lookup(fs->handle_numbers, handle);
    if (!key)
        return;
    g_hash_table_remove(fs->handle_numbers, handle);
    g_hash_table_remove(fs->handle_aliases, key); /* frees key */
    __atomic_sub_fetch(&fs->handle_alias_count, 1, __ATOMIC_RELEASE);
}

void fs_handle_expose(struct fs *fs, void *handle, struct fuse_file_info *fi)
{
    bool restarted = fs->crash_restarts > 0;
    if (!restarted && __atomic_load_n(&fs->handle_alias_count, __ATOMIC_ACQUIRE) == 0) {
        fi->fh = (uint64_t)(uintptr_t)handle;
        return;
    }
    g_mutex_lock(&fs->handles_lock);
    fi->fh = expose_locked(fs, handle);
    /* After a crash restart every number given is recorded: fs_handle_resolve tells them from
     * the dead process's. */
    if (restarted && fi->fh == (uint64_t)(uintptr_t)handle)
        fs_handle_alias_locked(fs, fi->fh, handle);
    g_mutex_unlock(&fs->handles_lock);
}

void fs_handle_unexpose(struct fs *fs, void *handle)
{
    if (__atomic_load_n(&fs->handle_alias_count, __ATOMIC_ACQUIRE) == 0)
        return;
    g_mutex_lock(&fs->handles_lock);
    unexpose_locked(fs, handle);
    g_mutex_unlock(&fs->handles_lock);
}

bool fs_handle_resolve(struct fs *fs, struct fuse_file_info *fi)
{
    if (!fi || fi->fh == 0)
        return true;
    bool restarted = fs->crash_restarts > 0;
    if (!restarted && __atomic_load_n(&fs->handle_alias_count, __ATOMIC_ACQUIRE) == 0)
        return true;
    g_mutex_lock(&fs->handles_lock);
    void *handle = fs->handle_aliases ? g_hash_table_lookup(fs->handle_aliases, &fi->fh) : NULL;
    bool known = true;
    if (handle)
        fi->fh = (uint64_t)(uintptr_t)handle;
    else if (restarted) /* after a crash: a number the dead process gave and never journaled */
        known = g_hash_table_contains(fs->open_handles, (void *)(uintptr_t)fi->fh);
    g_mutex_unlock(&fs->handles_lock);
    return known;
}

uint64_t fs_handle_number_locked(struct fs *fs, void *handle)
{
    uint64_t *key = fs->handle_numbers ? g_hash_table_lookup(fs->handle_numbers, handle) : NULL;
    return key ? *key : (uint64_t)(uintptr_t)handle;
}

void fs_handle_opened(struct fs *fs, void *handle, enum fs_handle_kind kind,
                      struct fuse_file_info *fi)
{
    g_mutex_lock(&fs->handles_lock);
    g_hash_table_insert(fs->open_handles, handle, GINT_TO_POINTER(kind));
    fi->fh = expose_locked(fs, handle);
    if (fs->crash)
        fs_crash_handle_opened(fs, handle, kind, fi->fh);
    g_mutex_unlock(&fs->handles_lock);
}

bool fs_handle_closed(struct fs *fs, void *handle)
{
    g_mutex_lock(&fs->handles_lock);
    bool recorded = g_hash_table_remove(fs->open_handles, handle);
    if (fs->crash && recorded)
        fs_crash_handle_closed(fs, fs_handle_number_locked(fs, handle));
    unexpose_locked(fs, handle);
    g_mutex_unlock(&fs->handles_lock);
    return recorded;
}
