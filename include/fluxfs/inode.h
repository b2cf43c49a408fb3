/* The inode table (core layer): inode numbers for paths the kernel knows, with lookup counts
 * that follow FUSE's lookup/forget protocol exactly as libfuse's passthrough_ll does.
 *
 * An inode is (path, kind): its number stays the same while the kernel holds a lookup count
 * on it. Numbers are never reused (a 64-bit counter), so the FUSE generation is always 0. When
 * a path changes kind behind the mount (file <-> directory), the old inode is detached from
 * the path index (it lives on until forgotten, and answers ESTALE-ish errors) and a new one is
 * created: no two paths alias one inode, no inode changes kind. A rename detaches the source
 * name's inode the same way (inode_table_detach_path): the kernel holds it under the new name
 * until that dentry is invalidated, and the old name, written again meanwhile, gets a new one.
 *
 * With generations pinned (read-only mounts whose kernel skips OPEN: an open file has no
 * handle that could pin the version it opened), a file inode is (path, kind, generation): a
 * lookup that finds another generation detaches the old inode and gives the path a new one, so
 * the kernel drops the old dentry, starts an empty page cache for the new version, and files
 * still open on the old inode go on reading the old version.
 *
 * Locks: the table lock protects the two indexes and every inode's nlookup, refs and detached
 * fields. An inode's attr_lock protects attrs, attrs_fetched_us, attrs_known, attrs_changed and
 * kernel_cache_generation.
 * path, kind and ino are immutable. Lock order: table lock, then an attr_lock (never the
 * other way round).
 *
 * Ownership: inode_table_get/lookup return a counted reference (refs) that the caller drops
 * with inode_put; an inode is freed when both nlookup and refs are 0 (the root never is). */
#ifndef FLUXFS_INODE_H
#define FLUXFS_INODE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "fluxfs/metacache.h"

#define INODE_ROOT_ID 1

struct inode {
    uint64_t ino;        /* immutable */
    char *path;          /* immutable; "" for the root */
    enum meta_kind kind; /* immutable: META_FILE, META_SYMLINK or META_DIR */

    uint64_t nlookup; /* table lock */
    uint64_t refs;    /* table lock */
    bool detached;    /* table lock: no longer reachable by path */

    GMutex attr_lock;
    struct meta_attrs attrs;         /* attr_lock */
    int64_t attrs_fetched_us;        /* attr_lock: monotonic time attrs were known fresh */
    int64_t kernel_cache_generation; /* attr_lock: generation whose pages the kernel may hold;
                                        -1 = none */
    bool attrs_known;                /* attr_lock: attrs were set once */
    bool attrs_changed;              /* attr_lock: set again since with another generation or
                                        size: replies to the kernel may have told it other sizes
                                        (while false, every reply about this inode gave the
                                        kernel the attributes it has now) */
    int64_t kernel_list_since_us;    /* attr_lock: directories: monotonic time the kernel's cached
                                        readdir pages were started (--kernel-list-cache-ttl-secs);
                                        0 = none */
};

struct inode_table;

struct inode_table *inode_table_new(void);
void inode_table_free(struct inode_table *table); /* accepts NULL */

/* A reference to the inode numbered ino, or NULL when unknown. */
struct inode *inode_table_get(struct inode_table *table, uint64_t ino);
/* inode_table_get for a kernel request (op names it in the log) about ino: NULL, which the
 * request answers with ESTALE, is logged at warn (the kernel only names inodes it was given and
 * has not forgotten, so it means a lookup count went wrong). */
struct inode *inode_table_get_request(struct inode_table *table, uint64_t ino, const char *op);
void inode_put(struct inode_table *table, struct inode *inode); /* accepts NULL */

/* The inode for (path, kind), created when needed; adds one to its nlookup and returns a
 * reference. attrs (may be NULL) become the inode's attributes, fetched at fetched_us. */
struct inode *inode_table_lookup(struct inode_table *table, const char *path, enum meta_kind kind,
                                 const struct meta_attrs *attrs, int64_t fetched_us);
/* Pins file inodes to one generation (set once, before the session starts). */
void inode_table_pin_generations(struct inode_table *table, bool pin);
bool inode_table_generations_pinned(struct inode_table *table);
/* Detaches inode from its path: the next lookup of the path makes a new inode. */
void inode_table_detach(struct inode_table *table, struct inode *inode);
/* Detaches the inode of path, if any (not the root), and returns its number (0: none). For a
 * name whose object moved away (rename): the kernel's dentry of the new name holds that inode
 * until it is invalidated and forgotten, and the next lookup or create of path must make a new
 * inode rather than give that one out again under its old name. */
uint64_t inode_table_detach_path(struct inode_table *table, const char *path);
/* inode_table_detach_path for path and every inode below it (a directory renamed away: its
 * children's paths are the old ones). Returns the numbers of the inodes detached (free with
 * g_array_free(.., TRUE)); empty for the root. */
GArray *inode_table_detach_tree(struct inode_table *table, const char *path);
/* Drops count lookups (FUSE forget). */
void inode_table_forget(struct inode_table *table, uint64_t ino, uint64_t count);
/* The number of the live inode for path, or 0. */
uint64_t inode_table_find_path(struct inode_table *table, const char *path);
size_t inode_table_count(struct inode_table *table);
/* Inodes the kernel forgot (and freed here) while it may have held their pages: the pages
 * went with them, so a hinted epoch fetches those files again (status kernel_forgotten). */
uint64_t inode_table_forgotten_with_pages(struct inode_table *table);

/* Hand-over to another process (the fs layer's fs_handover.c). inode_table_visit calls visit for
 * every inode the kernel may name (root included), under the table lock (visit may take the
 * inode's attr_lock, nothing else), and returns the next inode number the table would give.
 * inode_table_adopt adds an inode as another process had it: number, path, kind, lookup count,
 * detached, attributes (attrs NULL: not known), fetched time and kernel cache generation; 0, or
 * -EEXIST when the number is taken. inode_table_set_next sets the next number (never lower). */
typedef void (*inode_visit_fn)(struct inode *inode, void *user);
uint64_t inode_table_visit(struct inode_table *table, inode_visit_fn visit, void *user);
int inode_table_adopt(struct inode_table *table, uint64_t ino, const char *path,
                      enum meta_kind kind, uint64_t nlookup, bool detached,
                      const struct meta_attrs *attrs, int64_t fetched_us,
                      int64_t kernel_cache_generation);
void inode_table_set_next(struct inode_table *table, uint64_t next_ino);

/* An observer of the table's membership (crash recovery, src/fs/fs_crash.c): called under the
 * table lock when an inode is created or adopted (NEW), becomes unreachable by path (DETACH) or
 * is freed (GONE); never for the root. Set before the session starts, or NULL. */
enum inode_event { INODE_EVENT_NEW = 1, INODE_EVENT_DETACH = 2, INODE_EVENT_GONE = 3 };
typedef void (*inode_observer_fn)(void *user, enum inode_event event, const struct inode *inode);
void inode_table_set_observer(struct inode_table *table, inode_observer_fn fn, void *user);

void inode_get_attrs(struct inode *inode, struct meta_attrs *out, int64_t *fetched_us);
void inode_set_attrs(struct inode *inode, const struct meta_attrs *attrs, int64_t fetched_us);

#endif
