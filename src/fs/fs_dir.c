/* Directory operations: opendir takes a listing snapshot (cached or listed in parallel),
 * readdir and readdirplus serve it with stable offsets (entry index + 1, counting "." and ".."),
 * so a directory read in many calls, or by several readers at once, sees every entry once. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/log.h"
#include "fluxfs/name_map.h"
#include "fs-internal.h"

#define FS_DOT_ENTRIES 2
/* d_ino for entries the kernel has not looked up yet (libfuse's high-level API uses the same). */
#define FS_UNKNOWN_INO 0xffffffffu

/* The process that opened the directory was interrupted (killed): stop listing for it. */
static bool opener_gone(void *user)
{
    return fuse_req_interrupted((fuse_req_t)user) != 0;
}

/* The listing a directory handle serves: the cached or a new listing, merged with the files
 * this mount is writing there. */
static int take_listing(struct fs *fs, const char *path, fuse_req_t req, struct dir_listing **out)
{
    struct dir_listing *listing = NULL;
    int rc = namespace_list_dir_until(fs->ns, path, opener_gone, req, &listing);
    if (rc < 0)
        return rc;
    /* A merged listing is a new one: it holds what its base holds (and the files being
     * written now), so it keeps the base's epochs (readdirplus checks entries against them). */
    uint64_t dir_epoch = listing->dir_epoch, meta_epoch = listing->meta_epoch;
    listing = fs_write_merge_listing(fs, path, listing);
    if (listing->dir_epoch != dir_epoch || listing->meta_epoch != meta_epoch) {
        listing->dir_epoch = dir_epoch; /* only ours yet: the merge made it */
        listing->meta_epoch = meta_epoch;
    }
    *out = listing;
    return 0;
}

/* gcsfuse's --kernel-list-cache-ttl-secs: the kernel keeps the entries it read and serves the
 * next opendir from them while they are younger than the TTL (keep_cache); an older cache is
 * dropped here (keep_cache off) and refilled by this opendir's readdir. True when the kernel
 * keeps its entries. */
static bool kernel_keeps_listing(struct fs *fs, struct inode *inode, struct fuse_file_info *fi)
{
    double ttl = fs->cfg->kernel_list_ttl_s;
    if (ttl <= 0)
        return false;
    gint64 now = g_get_monotonic_time();
    bool keep = false;
    fi->cache_readdir = 1;
    g_mutex_lock(&inode->attr_lock);
    if (inode->kernel_list_since_us > 0 && (double)(now - inode->kernel_list_since_us) < ttl * 1e6)
        keep = true;
    else
        inode->kernel_list_since_us = now;
    g_mutex_unlock(&inode->attr_lock);
    fi->keep_cache = keep;
    return keep;
}

void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fuse_req_userdata(req);
    struct inode *inode = inode_table_get_request(fs->inodes, ino, "opendir");
    if (!inode) {
        fs_reply_err(req, ESTALE);
        return;
    }
    if (inode->kind == META_DIR && fs_write_renamed(fs, ino))
        flog_info("fs",
                  "opendir of inode %" PRIu64 " ('%s'): that directory was renamed away; "
                  "answering ESTALE (the kernel looks it up again)",
                  (uint64_t)ino, inode->path);
    if (inode->kind != META_DIR || fs_write_renamed(fs, ino)) {
        int err = inode->kind != META_DIR ? ENOTDIR : ESTALE; /* before the put frees it */
        inode_put(fs->inodes, inode);
        fs_reply_err(req, err);
        return;
    }
    /* When the kernel keeps its entries it usually sends no readdir: list only if it does. */
    struct dir_listing *listing = NULL;
    if (!kernel_keeps_listing(fs, inode, fi)) {
        int rc = take_listing(fs, inode->path, req, &listing);
        if (rc < 0) {
            inode_put(fs->inodes, inode);
            fs_reply_err(req, -rc);
            return;
        }
    }
    struct fs_dir *dir = g_new0(struct fs_dir, 1);
    g_mutex_init(&dir->lock);
    dir->listing = listing;
    dir->ino = ino;
    dir->path = g_strdup(inode->path);
    inode_put(fs->inodes, inode);
    fs_handle_opened(fs, dir, FS_HANDLE_DIR, fi);
    if (fuse_reply_open(req, fi) != 0) {
        if (fs_handle_closed(fs, dir))
            fs_dir_free(dir);
    }
}

static void reply_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi, bool plus)
{
    struct fs *fs = fuse_req_userdata(req);
    struct fs_dir *dir = (struct fs_dir *)(uintptr_t)fi->fh;
    g_mutex_lock(&dir->lock);
    if (!dir->listing) {
        int rc = take_listing(fs, dir->path, req, &dir->listing);
        if (rc < 0) {
            g_mutex_unlock(&dir->lock);
            fs_reply_err(req, -rc);
            return;
        }
    }
    const struct dir_listing *listing = dir->listing;
    g_mutex_unlock(&dir->lock);
    char *buf = g_try_malloc(size ? size : 1);
    if (!buf) {
        fs_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    size_t total = listing->count + FS_DOT_ENTRIES;
    /* Child paths are built in one buffer: dir->path, "/" (not at the root), then the name. */
    size_t dir_len = strlen(dir->path);
    GString *path = g_string_sized_new(dir_len + 64);
    if (dir_len > 0) {
        g_string_append_len(path, dir->path, (gssize)dir_len);
        g_string_append_c(path, '/');
    }
    size_t base_len = path->len;
    /* readdirplus hands the kernel a dentry and attributes per entry, cached for the entry and
     * attr timeouts; the snapshot may predate a change made through this mount meanwhile (an
     * unlink, a rename, a commit: the listing's requests were out, or the handle was opened
     * before it). Such an entry goes without a node id (the kernel then caches nothing for it
     * and looks the name up when it needs it), else the removed name would stat as the deleted
     * object, or a file just written show its old size, for the timeout. One check per reply;
     * the per-entry one (a hash lookup) only when the directory changed since the snapshot. */
    bool check_entries = plus && namespace_listing_changed(fs->ns, dir->path, listing);
    for (size_t index = off < 0 ? 0 : (size_t)off; index < total; index++) {
        off_t next = (off_t)index + 1;
        const char *name;
        struct fuse_entry_param entry;
        memset(&entry, 0, sizeof(entry));
        struct inode *child = NULL;
        if (index < FS_DOT_ENTRIES) {
            name = index == 0 ? "." : "..";
            /* Not a lookup: ino 0 in the entry, only the attributes' inode number. */
            entry.attr.st_ino = dir->ino;
            entry.attr.st_mode = S_IFDIR;
        } else {
            const struct dir_entry *item = &listing->entries[index - FS_DOT_ENTRIES];
            name = item->name;
            g_string_truncate(path, base_len);
            g_string_append(path, item->name);
            if (plus && check_entries && namespace_entry_changed(fs->ns, path->str, listing)) {
                /* ino 0: a plain entry (libfuse and the kernel skip the dentry and attrs). */
                uint64_t known = inode_table_find_path(fs->inodes, path->str);
                entry.attr.st_ino = known ? known : FS_UNKNOWN_INO;
                entry.attr.st_mode = item->kind == META_DIR       ? S_IFDIR
                                     : item->kind == META_SYMLINK ? S_IFLNK
                                                                  : S_IFREG;
            } else if (plus) {
                child = inode_table_lookup(fs->inodes, path->str, item->kind,
                                           item->kind == META_DIR ? NULL : &item->attrs,
                                           meta_attrs_fetched_us(&item->attrs));
                fs_fill_entry(fs, child, &entry);
            } else {
                uint64_t known = inode_table_find_path(fs->inodes, path->str);
                entry.attr.st_ino = known ? known : FS_UNKNOWN_INO;
                entry.attr.st_mode = item->kind == META_DIR       ? S_IFDIR
                                     : item->kind == META_SYMLINK ? S_IFLNK
                                                                  : S_IFREG;
            }
        }
        size_t need =
            plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &entry, next)
                 : fuse_add_direntry(req, buf + used, size - used, name, &entry.attr, next);
        if (need > size - used) {
            /* Does not fit: this entry was not returned, so its lookup does not count. */
            if (child)
                inode_table_forget(fs->inodes, child->ino, 1);
            inode_put(fs->inodes, child);
            break;
        }
        used += need;
        inode_put(fs->inodes, child);
    }
    g_string_free(path, TRUE);
    fuse_reply_buf(req, buf, used);
    g_free(buf);
}

void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    reply_dir(req, ino, size, off, fi, false);
}

void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    reply_dir(req, ino, size, off, fi, true);
}

void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs_dir *dir = (struct fs_dir *)(uintptr_t)fi->fh;
    fs_crash_release_wait(((struct fs *)fuse_req_userdata(req))->crash);
    if (dir) {
        if (fs_handle_closed(fuse_req_userdata(req), dir)) /* else freed at the end already */
            fs_dir_free(dir);
    }
    fs_reply_err(req, 0);
}

void fs_dir_free(struct fs_dir *dir)
{
    dir_listing_unref(dir->listing);
    g_mutex_clear(&dir->lock);
    g_free(dir->path);
    g_free(dir);
}
