/* The FUSE low-level operations on names and files: translate a kernel request, ask the core
 * (namespace, inodes) and io (reader) layers, reply. Directory operations are in fs_dir.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fluxfs/log.h"
#include "fluxfs/name_map.h"
#include "fluxfs/prefetch.h"
#include "fs-internal.h"

#define FS_READ_MAX            (16u << 20)
#define FS_STORE_CACHE_WAIT_MS 10000 /* an open waits this long for a prefetch under way */

static struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* ---- names ---- */

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    struct inode *dir = inode_table_get_request(fs->inodes, parent, "lookup");
    if (!dir) {
        fs_reply_err(req, ESTALE);
        return;
    }
    int err = 0;
    char *path = NULL;
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    if (dir->kind != META_DIR) {
        err = ENOTDIR;
        goto out;
    }
    if (fs_write_renamed(fs, parent)) {
        flog_info("fs",
                  "lookup of '%s' in directory inode %" PRIu64 " ('%s'): that directory "
                  "was renamed away; answering ESTALE (the kernel looks it up again)",
                  name, (uint64_t)parent, dir->path);
        err = ESTALE; /* a directory renamed away, reached under its new name */
        goto out;
    }
    if (strlen(name) > NAME_MAP_NAME_MAX) {
        err = ENAMETOOLONG;
        goto out;
    }
    /* Issue 5's control files live under this name; until then it does not exist. */
    if (name_map_is_reserved(dir->path, name) || !name_map_segment_valid(name, strlen(name))) {
        err = ENOENT;
        goto out;
    }
    path = name_map_join(dir->path, name);
    enum meta_kind kind;
    int rc = fs_write_resolve(fs, path, &kind, &attrs);
    if (rc == -ENOENT) {
        /* A negative entry: the kernel remembers the absence for the negative TTL. */
        struct fuse_entry_param negative;
        memset(&negative, 0, sizeof(negative));
        negative.entry_timeout = fs->negative_timeout_s;
        fs_reply_entry(req, &negative);
        goto done;
    }
    if (rc < 0) {
        err = -rc;
        goto out;
    }
    struct inode *child = inode_table_lookup(
        fs->inodes, path, kind, kind == META_DIR ? NULL : &attrs, meta_attrs_fetched_us(&attrs));
    struct fuse_entry_param entry;
    fs_fill_entry(fs, child, &entry);
    inode_put(fs->inodes, child);
    fs_reply_entry(req, &entry);
    goto done;
out:
    fs_reply_err(req, err);
done:
    meta_attrs_clear(&attrs);
    g_free(path);
    inode_put(fs->inodes, dir);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    inode_table_forget(fs_of(req)->inodes, ino, nlookup);
    fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        inode_table_forget(fs->inodes, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

/* Refreshes a file inode's attributes when they are older than the stat TTL (a file being
 * written is what its writer says, not what Cloud Storage has yet). 0 or -errno. */
static int refresh_attrs(struct fs *fs, struct inode *inode, bool bypass_caches)
{
    if (inode->kind == META_DIR)
        return 0;
    int64_t fetched_us;
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, &fetched_us);
    meta_attrs_clear(&attrs);
    int64_t now = g_get_monotonic_time();
    if (now - fetched_us < fs->stat_ttl_us || fs_write_active(fs, inode->ino))
        return 0; /* a file being written: its writer knows better than Cloud Storage */
    enum meta_kind kind;
    int rc = bypass_caches ? namespace_stat_file(fs->ns, inode->path, &kind, &attrs)
                           : namespace_resolve(fs->ns, inode->path, &kind, &attrs);
    if (rc < 0)
        return rc;
    if (kind != inode->kind) {
        flog_info("fs",
                  "'%s' (inode %" PRIu64 ") is another kind of entry now; answering "
                  "ESTALE (a new lookup gets a new inode)",
                  inode->path, inode->ino);
        meta_attrs_clear(&attrs);
        return -ESTALE; /* the name is something else now; a new lookup gets a new inode */
    }
    if (inode_table_generations_pinned(fs->inodes) && inode->kind == META_FILE) {
        struct meta_attrs pinned;
        inode_get_attrs(inode, &pinned, NULL);
        bool replaced = pinned.generation != 0 && pinned.generation != attrs.generation;
        meta_attrs_clear(&pinned);
        if (replaced) {
            /* This inode is the old version (read-only mounts that skip OPEN): ESTALE, and the
             * kernel looks the name up again (LOOKUP_REVAL) and gets the new version's inode. */
            flog_info("fs",
                      "'%s' (inode %" PRIu64 ") was replaced by generation %" PRId64
                      "; answering ESTALE (a new lookup gets the new version's inode)",
                      inode->path, inode->ino, attrs.generation);
            meta_attrs_clear(&attrs);
            inode_table_detach(fs->inodes, inode);
            return -ESTALE;
        }
    }
    inode_set_attrs(inode, &attrs, meta_attrs_fetched_us(&attrs));
    meta_attrs_clear(&attrs);
    return 0;
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct inode *inode = inode_table_get_request(fs->inodes, ino, "getattr");
    if (!inode) {
        fs_reply_err(req, ESTALE);
        return;
    }
    /* fi: the kernel asks about an open file (fstat, or before a read: with a short attribute
     * timeout, --stat-ttl 0 above all, it asks before every read()). Close-to-open: the open
     * revalidated, and an open file reads the generation it opened, so the answer is the one
     * the open got, with no objects.get. A path stat (no fi) still honours the stat TTL. */
    int rc = fi ? 0 : refresh_attrs(fs, inode, false);
    if (rc < 0)
        fs_reply_err(req, -rc);
    else
        fs_reply_attr(req, fs, inode);
    inode_put(fs->inodes, inode);
}

/* A gcloud symlink's target is the object's bytes (the generation the inode knows): fetched and
 * kept with the inode's attributes, so the next readlink costs nothing. */
static int read_content_target(struct fs *fs, struct inode *inode, const struct meta_attrs *attrs,
                               char **out)
{
    if (attrs->size == 0 || attrs->size >= PATH_MAX)
        return -EIO; /* not a usable target */
    char *buf = g_malloc0(attrs->size + 1);
    char *object_name = namespace_object_name(fs->ns, inode->path);
    struct gcs_read_request read = {
        .name = object_name,
        .generation = attrs->generation,
        .offset = 0,
        .len = attrs->size,
        .buf = buf,
        .has_expected_crc32c = attrs->has_crc32c,
        .expected_crc32c = attrs->crc32c,
        .object_size = attrs->size,
        .whole_object = true,
    };
    size_t got = 0;
    int rc = gcs_read(fs->client, &read, &got);
    g_free(object_name);
    if (rc == 0 && (got != attrs->size || memchr(buf, '\0', got)))
        rc = -EIO;
    if (rc < 0) {
        flog_warn("fs", "readlink of '%s' (a gcloud symlink, target in its bytes): %s", inode->path,
                  g_strerror(-rc));
        g_free(buf);
        return rc == -ENOENT ? -ESTALE : rc;
    }
    struct meta_attrs updated;
    int64_t fetched_us;
    inode_get_attrs(inode, &updated, &fetched_us);
    if (updated.generation == attrs->generation && !updated.symlink_target) {
        updated.symlink_target = g_strdup(buf);
        inode_set_attrs(inode, &updated, fetched_us);
    }
    meta_attrs_clear(&updated);
    *out = buf;
    return 0;
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct fs *fs = fs_of(req);
    struct inode *inode = inode_table_get_request(fs->inodes, ino, "readlink");
    if (!inode) {
        fs_reply_err(req, ESTALE);
        return;
    }
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, NULL);
    char *target = NULL;
    int err = 0;
    if (inode->kind != META_SYMLINK)
        err = EINVAL;
    else if (attrs.symlink_target)
        target = g_strdup(attrs.symlink_target);
    else if (attrs.symlink_in_content)
        err = -read_content_target(fs, inode, &attrs, &target);
    else
        err = EINVAL;
    if (err)
        fs_reply_err(req, err);
    else
        fuse_reply_readlink(req, target);
    g_free(target);
    meta_attrs_clear(&attrs);
    inode_put(fs->inodes, inode);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
    /* Cloud Storage has no capacity: report a large, mostly free filesystem so tools that
     * check free space before writing proceed. */
    struct statvfs st;
    memset(&st, 0, sizeof(st));
    st.f_bsize = 1u << 20;
    st.f_frsize = 4096;
    st.f_blocks = UINT64_C(1) << 40; /* 4 PiB of 4 KiB blocks */
    st.f_bfree = st.f_blocks;
    st.f_bavail = st.f_blocks;
    st.f_files = UINT64_C(1) << 32;
    st.f_ffree = st.f_files;
    st.f_favail = st.f_files;
    st.f_namemax = NAME_MAP_NAME_MAX;
    fuse_reply_statfs(req, &st);
}

static void fs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct fs *fs = fs_of(req);
    if ((mask & W_OK) && fs->cfg->read_only)
        fs_reply_err(req, EROFS);
    else
        fs_reply_err(req, 0);
}

/* ---- files ---- */

/* First open of an inode of a small object (fetched whole on the first read anyway): the
 * reader gets the bytes now (from the content cache when it has them: prefetched, warmed up,
 * read before a forget; else with the GET the first read would have sent), and they go
 * straight into the kernel's page cache (FUSE_NOTIFY_STORE); the open keeps them
 * (keep_cache). The application's reads then cost no READ round trip, and, since no READ
 * invalidates the kernel's atime, the next epoch's stat costs no GETATTR. The inode's pages
 * and attributes are invalidated first, so nothing the kernel held before (bytes a failed
 * writer left, another size) survives next to the stored bytes, except when the kernel's
 * attributes are the ones stored (kernel_attrs_current: the inode's generation and size never
 * changed, so every entry and attribute reply gave the kernel these, and the caller knows the
 * kernel holds no pages of another version): the store rewrites every page up to the size
 * the kernel has, and the invalidation would only cost the application's next fstat a
 * GETATTR round trip (a fifth of the requests of a cold small file). A failed fetch leaves
 * the open as it was: the first read fetches again and reports the error. true when stored. */
static bool store_small_object(struct fs *fs, fuse_ino_t ino, struct reader *reader,
                               const struct reader_object *object, int open_flags,
                               bool kernel_attrs_current)
{
    if (object->size == 0 || object->size > fs->reader_config.small_file_threshold ||
        (open_flags & O_DIRECT))
        return false;
    struct reader_view view;
    memset(&view, 0, sizeof(view));
    /* Cached (prefetched) bodies go to the kernel straight from the cache's buffer: no copy
     * into a reader buffer of its own, which the reads it saves would never use. */
    struct content_block *block = NULL;
    const void *cached = NULL;
    int rc = -ENOENT;
    if (fs->reader_config.cache &&
        content_cache_borrow(fs->reader_config.cache, object->name, object->generation,
                             object->size, FS_STORE_CACHE_WAIT_MS, &block, &cached) == 0) {
        view.parts[0].iov_base = (void *)cached;
        view.parts[0].iov_len = (size_t)object->size;
        view.count = 1;
        view.total = (size_t)object->size;
        rc = 0;
    } else {
        rc = reader_read_view(reader, NULL, 0, (size_t)object->size, &view);
    }
    if (rc == 0 && view.total == object->size && view.count > 0) {
        struct fuse_bufvec *bufv =
            g_malloc0(sizeof(*bufv) + (size_t)view.count * sizeof(struct fuse_buf));
        bufv->count = (size_t)view.count;
        for (int i = 0; i < view.count; i++) {
            bufv->buf[i].mem = view.parts[i].iov_base;
            bufv->buf[i].size = view.parts[i].iov_len;
        }
        rc = kernel_attrs_current ? 0 : fuse_lowlevel_notify_inval_inode(fs->session, ino, 0, 0);
        if (rc == 0)
            rc = fuse_lowlevel_notify_store(fs->session, ino, 0, bufv, 0);
        g_free(bufv);
        if (rc == 0) {
            /* The kernel serves it now: the content cache keeps objects not read yet first. */
            if (fs->reader_config.cache)
                content_cache_demote(fs->reader_config.cache, object->name, object->generation);
            __atomic_add_fetch(&fs->counters.kernel_stores, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&fs->counters.kernel_store_bytes, object->size, __ATOMIC_RELAXED);
        } else {
            flog_debug("fs", "storing '%s' in the page cache failed: %s", object->name,
                       g_strerror(-rc));
        }
    } else if (rc == 0) {
        rc = -EIO;
    }
    if (block)
        content_block_unref(block);
    else
        reader_view_release(&view);
    return rc == 0;
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct inode *inode = inode_table_get_request(fs->inodes, ino, "open");
    if (!inode) {
        fs_reply_err(req, ESTALE);
        return;
    }
    if (inode->kind == META_DIR) {
        inode_put(fs->inodes, inode);
        fs_reply_err(req, EISDIR);
        return;
    }
    /* Opens for writing, and opens of a file being written (fs_write.c). */
    if (fs_write_open(req, fs, inode, fi))
        return;
    /* Close-to-open: past the stat TTL, ask Cloud Storage which generation is current. */
    int rc = refresh_attrs(fs, inode, true);
    if (rc < 0) {
        inode_put(fs->inodes, inode);
        fs_reply_err(req, -rc);
        return;
    }
    struct meta_attrs attrs;
    inode_get_attrs(inode, &attrs, NULL);
    g_mutex_lock(&inode->attr_lock);
    bool unchanged = inode->kernel_cache_generation == attrs.generation;
    int64_t previous = inode->kernel_cache_generation;
    inode->kernel_cache_generation = attrs.generation;
    /* previous -1: the kernel holds no pages of this inode, or only some of the generation it
     * last held (a READ came after it evicted); with attributes that never changed, that
     * generation is this one. */
    bool kernel_attrs_current = !inode->attrs_changed &&
                                inode->attrs.generation == attrs.generation &&
                                inode->attrs.size == attrs.size;
    g_mutex_unlock(&inode->attr_lock);
    /* Without keep_cache the kernel drops the inode's pages on this open; the size it caches
     * is refreshed too when another generation was seen before. */
    fi->keep_cache = unchanged;
    /* close() of a read-only handle has nothing to commit: without FLUSH it costs the
     * application no round trip to the daemon (RELEASE is asynchronous). */
    fi->noflush = 1;
    if (!unchanged && previous != -1)
        fuse_lowlevel_notify_inval_inode(fs->session, ino, -1, 0);

    struct fs_file *file = fs_file_new(fs, inode, &attrs, fi->flags);
    if (!unchanged && previous == -1 &&
        store_small_object(fs, ino, file->reader, &file->object, fi->flags, kernel_attrs_current))
        fi->keep_cache = 1;
    file->kernel_held = !(fi->flags & O_DIRECT) && file->object.size > 0 &&
                        file->object.size <= fs->reader_config.small_file_threshold &&
                        fi->keep_cache;
    meta_attrs_clear(&attrs);
    fs_handle_opened(fs, file, FS_HANDLE_FILE, fi);
    if (fuse_reply_open(req, fi) != 0) {
        /* The open was interrupted: the kernel will not release this handle. */
        if (fs_handle_closed(fs, file)) /* else freed at the session's end already */
            fs_file_free(fs, file);
    }
}

/* A read of a large object the disk cache holds. */
static void read_from_cache_file(fuse_req_t req, struct fs_file *file, size_t size, off_t off)
{
    if ((uint64_t)off >= file->cache_size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    size = (size_t)MIN((uint64_t)size, file->cache_size - (uint64_t)off);
    char *buf = g_try_malloc(size ? size : 1);
    if (!buf) {
        fs_reply_err(req, ENOMEM);
        return;
    }
    size_t done = 0;
    int err = 0;
    while (done < size) {
        ssize_t n = pread(file->cache_fd, buf + done, size - done,
                          (off_t)CONTENT_CACHE_BODY_OFFSET + off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        done += (size_t)n;
    }
    if (err)
        fs_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, done);
    g_free(buf);
}

/* A READ showed that the kernel evicted pages of an object it held: the prefetcher (the
 * control layer's, fs_control.c) stops trusting that objects opened before are still in the
 * page cache. */
static void note_kernel_eviction(struct fs *fs)
{
    if (fs->prefetcher)
        prefetch_note_kernel_eviction(fs->prefetcher);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct fs_file *file = (struct fs_file *)(uintptr_t)fi->fh;
    struct fs_noopen_entry *shared = NULL;
    if (off < 0) {
        fs_reply_err(req, EINVAL);
        return;
    }
    if (!file) {
        /* The kernel opened the file without asking (read-only mounts, fs_noopen.c). */
        int rc = fs_noopen_acquire(fs, ino, &shared);
        if (rc < 0) {
            fs_reply_err(req, -rc);
            return;
        }
        file = fs_noopen_file(shared);
    }
    if (file->lost) {
        /* Its bytes died with a serving process (fs_handover.c): no short read, an error. */
        fs_reply_err(req, EIO);
        return;
    }
    if (fs_write_read(req, file, size, off))
        return;
    if (file->from_cache) {
        read_from_cache_file(req, file, size, off);
        if (shared)
            fs_noopen_release(fs, shared, false);
        return;
    }
    /* The kernel asks for pages of a small object it held at open: it evicted them (memory
     * pressure, drop_caches). Hinted objects "in the page cache" are then fetched again. */
    if (__atomic_load_n(&file->kernel_held, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&file->kernel_held, false, __ATOMIC_RELAXED))
        note_kernel_eviction(fs);
    bool small = file->object.size <= fs->reader_config.small_file_threshold;
    if (shared && small) {
        /* Files opened without asking: the inode says whether the kernel held all of this
         * version (below); a READ of it now means it evicted pages. */
        g_mutex_lock(&file->inode->attr_lock);
        bool held = file->inode->kernel_cache_generation == file->object.generation;
        if (held)
            file->inode->kernel_cache_generation = -1;
        g_mutex_unlock(&file->inode->attr_lock);
        if (held)
            note_kernel_eviction(fs);
    }
    if (size > FS_READ_MAX)
        size = FS_READ_MAX;
    /* The reply is gathered straight from the reader's buffers (no copy in between). */
    struct reader_view view;
    int rc = reader_read_view(file->reader, &file->ra, (uint64_t)off, size, &view);
    /* Nothing of req or file may be used once replied to: the kernel can deliver the data,
     * the application close the file and another worker run its RELEASE (which frees file)
     * before this thread goes on. What is needed afterwards is copied first. */
    char *demote_name = NULL;
    int64_t demote_generation = 0;
    bool served_whole = false;
    /* The served bytes go to the object's disk cache file after the reply. */
    struct content_fill *fill = rc >= 0 && file->fill ? content_fill_ref(file->fill) : NULL;
    if (rc == -EBADMSG) {
        /* Bytes served from this open file did not match the object's CRC32C: the kernel may
         * hold some of them, so the next open drops its pages (an impossible generation). */
        g_mutex_lock(&file->inode->attr_lock);
        file->inode->kernel_cache_generation = FS_KERNEL_CACHE_SUSPECT;
        g_mutex_unlock(&file->inode->attr_lock);
        if (shared) /* no open comes to drop them: the inode's pages go (not from this
                     * handler: the kernel holds the page this READ fills locked) */
            fs_notify_inval_inode(fs, ino, 0, 0);
        rc = -EIO;
    }
    if (rc < 0) {
        fs_reply_err(req, -rc);
    } else {
        if (file->small_name && (uint64_t)off + view.total >= file->small_size) {
            demote_name = g_strdup(file->small_name);
            demote_generation = file->small_generation;
        }
        served_whole = small && (uint64_t)off + view.total >= file->object.size;
        if (shared && served_whole) {
            /* The kernel holds all of it now (what an open's store or keep_cache tells the
             * prefetcher on other mounts): hints of it are not fetched again. */
            g_mutex_lock(&file->inode->attr_lock);
            if (file->inode->kernel_cache_generation != FS_KERNEL_CACHE_SUSPECT)
                file->inode->kernel_cache_generation = file->object.generation;
            g_mutex_unlock(&file->inode->attr_lock);
        }
        fuse_reply_iov(req, view.parts, view.count);
    }
    if (fill) {
        content_fill_add(fill, (uint64_t)off, view.parts, view.count);
        content_fill_unref(fill);
    }
    /* The view keeps the reader alive on its own (reader_free waits for the last view). */
    reader_view_release(&view);
    if (shared)
        fs_noopen_release(fs, shared, served_whole);
    /* The end of a small object went to the page cache: the content cache keeps the objects
     * not read yet first (as after a store at open). */
    if (demote_name) {
        content_cache_demote(fs->reader_config.cache, demote_name, demote_generation);
        g_free(demote_name);
    }
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    struct fs_file *file = (struct fs_file *)(uintptr_t)fi->fh;
    fs_crash_release_wait(fs->crash);
    if (file) {
        if (fs_handle_closed(fs, file)) /* else freed at the session's end already */
            fs_file_free(fs, file);
    }
    fs_reply_err(req, 0);
}

/* ---- changes: read-only stubs (fs_write_ops_fill replaces those writes implement) ---- */

static void reply_erofs(fuse_req_t req)
{
    fs_reply_err(req, EROFS);
}

static void fs_setattr_readonly(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                                struct fuse_file_info *fi)
{
    reply_erofs(req);
}

static void fs_mknod_readonly(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                              dev_t rdev)
{
    reply_erofs(req);
}

static void fs_mkdir_readonly(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    reply_erofs(req);
}

static void fs_unlink_readonly(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    reply_erofs(req);
}

static void fs_symlink_readonly(fuse_req_t req, const char *link, fuse_ino_t parent,
                                const char *name)
{
    reply_erofs(req);
}

static void fs_rename_readonly(fuse_req_t req, fuse_ino_t parent, const char *name,
                               fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    reply_erofs(req);
}

static void fs_link_readonly(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                             const char *newname)
{
    reply_erofs(req);
}

static void fs_create_readonly(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                               struct fuse_file_info *fi)
{
    reply_erofs(req);
}

/* Extended attributes are not stored: EROFS on a read-only mount, else ENOTSUP ("not
 * supported", gcsfuse's answer), which cp -a, cp -p and install -p ignore; EROFS made them
 * fail on a writable mount. */
static void reply_xattr_unsupported(fuse_req_t req)
{
    const struct fs *fs = fuse_req_userdata(req);
    if (fs->cfg->read_only)
        reply_erofs(req);
    else
        fs_reply_err(req, ENOTSUP);
}

static void fs_setxattr_unsupported(fuse_req_t req, fuse_ino_t ino, const char *name,
                                    const char *value, size_t size, int flags)
{
    reply_xattr_unsupported(req);
}

static void fs_removexattr_unsupported(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    reply_xattr_unsupported(req);
}

/* ---- session start and end ---- */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
    /* IOCTL_DIR: hints reach read-only mounts by an ioctl on .fluxfs (fs_control.c). */
    unsigned wanted = FUSE_CAP_ASYNC_READ | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO |
                      FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_IOCTL_DIR;
    conn->want |= wanted & conn->capable;
    conn->want &= ~(unsigned)FUSE_CAP_EXPORT_SUPPORT;
    /* Replies come from memory buffers, so splice would only add a copy into a pipe. */
    conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
    /* The reader does its own, larger readahead; the kernel's keeps requests large and
     * several in flight. libfuse clamps to what the kernel allows. */
    conn->max_readahead = 4u << 20;
    conn->max_background = 64;
    conn->max_write = 1u << 20; /* fewer, larger write requests (libfuse clamps) */
    conn->congestion_threshold = 48;
    conn->time_gran = 1;
    struct fs *fs = userdata;
    if (fs->no_open && !(conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) {
        /* A kernel before 4.19: files are opened with requests, and a handle pins the version
         * it reads, so inodes need not be pinned. */
        flog_info("fs", "the kernel cannot open files without asking: OPEN and RELEASE stay");
        fs->no_open = false;
        inode_table_pin_generations(fs->inodes, false);
    }
    flog_debug("fs", "fuse init: capable 0x%x want 0x%x", conn->capable, conn->want);
    fs_notify_start(fs);
}

/* At FUSE destroy (the request, or fuse_session_destroy after a signal): the handles whose
 * RELEASE/RELEASEDIR the kernel queued but the loop never read (an unmount right after a
 * close()), or still open at a signal. Every close() already flushed. A RELEASE still being
 * handled by another worker finds its handle gone and leaves it (fs_handle_closed). */
static void free_unreleased_handles(struct fs *fs)
{
    g_mutex_lock(&fs->handles_lock);
    GHashTable *left = fs->open_handles;
    fs->open_handles = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_mutex_unlock(&fs->handles_lock);
    guint count = g_hash_table_size(left);
    GHashTableIter iter;
    gpointer handle, kind;
    g_hash_table_iter_init(&iter, left);
    while (g_hash_table_iter_next(&iter, &handle, &kind)) {
        if (GPOINTER_TO_INT(kind) == FS_HANDLE_DIR)
            fs_dir_free(handle);
        else
            fs_file_free(fs, handle);
    }
    g_hash_table_destroy(left);
    if (count > 0)
        flog_debug("fs", "%u handles the kernel did not release before the unmount freed", count);
}

static void fs_destroy(void *userdata)
{
    flog_debug("fs", "fuse destroy");
    free_unreleased_handles(userdata);
    fs_noopen_clear(userdata);
    fs_notify_stop(userdata); /* the session is still alive here */
}

void fs_ops_fill(struct fuse_lowlevel_ops *ops)
{
    ops->init = fs_init;
    ops->destroy = fs_destroy;
    ops->lookup = fs_lookup;
    ops->forget = fs_forget;
    ops->forget_multi = fs_forget_multi;
    ops->getattr = fs_getattr;
    ops->readlink = fs_readlink;
    ops->statfs = fs_statfs;
    ops->access = fs_access;
    ops->open = fs_open;
    ops->read = fs_read;
    ops->release = fs_release;
    ops->opendir = fs_opendir;
    ops->readdir = fs_readdir;
    ops->readdirplus = fs_readdirplus;
    ops->releasedir = fs_releasedir;
    /* getxattr/listxattr stay unset: libfuse answers ENOSYS and the kernel stops asking. */

    /* Read-only stubs: fs_write_ops_fill replaces those that writes implement. */
    ops->setattr = fs_setattr_readonly;
    ops->mknod = fs_mknod_readonly;
    ops->mkdir = fs_mkdir_readonly;
    ops->unlink = fs_unlink_readonly;
    ops->rmdir = fs_unlink_readonly;
    ops->symlink = fs_symlink_readonly;
    ops->rename = fs_rename_readonly;
    ops->link = fs_link_readonly;
    ops->create = fs_create_readonly;
    ops->setxattr = fs_setxattr_unsupported;
    ops->removexattr = fs_removexattr_unsupported;
}
