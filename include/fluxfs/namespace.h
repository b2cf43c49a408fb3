/* The namespace (core layer): what each path in the mount is, answered from the caches when
 * they are fresh and from Cloud Storage otherwise. Owns the metadata cache and the directory
 * listing cache; uses listing.c for directories and gcs.h for single names. Knows nothing of
 * FUSE (the fs layer owns the inode table and the kernel's view).
 *
 * Resolving a path not known from a cache: if the parent directory's listing is fresh, the
 * answer is in it (absent included). Otherwise one objects.get of prefix+path and one
 * list(prefix=prefix+path+"/", maxResults=1) run concurrently; a non-empty list makes it a
 * directory (directories win over files, name_map.h rule 2), else the object makes it a file
 * or symlink, else it is absent. Every answer goes into the caches, unless the name was
 * invalidated through the mount while its requests were out (see namespace_invalidate).
 *
 * Threads: all functions are thread-safe and may block on the network (call them from FUSE
 * workers or the mount thread, never from a gcs callback). Ownership: attrs filled by these
 * functions are the caller's (meta_attrs_clear); listings carry a reference. */
#ifndef FLUXFS_NAMESPACE_H
#define FLUXFS_NAMESPACE_H

#include <stdbool.h>

#include "fluxfs/dircache.h"
#include "fluxfs/gcs.h"
#include "fluxfs/listing.h"
#include "fluxfs/metacache.h"

struct namespace_config {
    const char *mount_prefix; /* "" or ends with '/' */
    bool implicit_dirs;
    unsigned list_parallelism;
    double stat_ttl_s, type_ttl_s, negative_ttl_s, list_ttl_s;
    size_t max_cached_names; /* 0 = 4 million */
    size_t max_cached_dirs;  /* 0 = 100,000 */
};

/* Counters for logs and tests; all monotonic. */
struct namespace_stats {
    uint64_t resolve_network; /* resolutions that needed requests */
    uint64_t listings;        /* directory listings fetched */
    uint64_t list_requests;   /* list requests of those listings */
};

struct namespace;

struct namespace *namespace_new(const struct namespace_config *config, struct gcs_client *client);
void namespace_free(struct namespace *ns); /* accepts NULL */

/* What path is: 0 with *kind (META_FILE, META_SYMLINK or META_DIR) and, for files, *attrs
 * (may be NULL); -ENOENT when absent or hidden; other negative errno on failure. */
int namespace_resolve(struct namespace *ns, const char *path, enum meta_kind *kind,
                      struct meta_attrs *attrs);
/* Revalidates a file against Cloud Storage (objects.get), bypassing the caches, and refreshes
 * them. -ENOENT when the object is gone. */
int namespace_stat_file(struct namespace *ns, const char *path, enum meta_kind *kind,
                        struct meta_attrs *attrs);
/* The listing of the directory at path (cached while fresh, else listed in parallel). */
int namespace_list_dir(struct namespace *ns, const char *path, struct dir_listing **out);
/* The same; stop (may be NULL) is asked after every list page and, when true (the caller's
 * request was interrupted), ends a listing this call started with -EINTR. Others waiting for
 * that listing start their own. */
int namespace_list_dir_until(struct namespace *ns, const char *path, bool (*stop)(void *stop_user),
                             void *stop_user, struct dir_listing **out);
/* Lists the whole mount prefix recursively (same parallel method) and fills both caches. */
int namespace_prefetch_metadata(struct namespace *ns);
/* Forgets what is cached about path (and its listing, and its parent's listing), after a
 * change made through the mount (unlink, rmdir, rename). A lookup or listing whose requests
 * started before this call and that comes back after it answers its caller but is not cached
 * (it may hold the removed name). */
void namespace_invalidate(struct namespace *ns, const char *path);

/* After a change made through the mount (writes, mkdir, symlink): records what path now is
 * and adds it to the parent's cached listing (which keeps answering lookups, absence
 * included: issue 11). */
void namespace_note_file(struct namespace *ns, const char *path, enum meta_kind kind,
                         const struct meta_attrs *attrs);
void namespace_note_dir(struct namespace *ns, const char *path);
/* The same for a directory this process just created (it was absent): its listing is known
 * to be empty. */
void namespace_note_new_dir(struct namespace *ns, const char *path);
/* Whether a listing of the directory at dir_path (from namespace_list_dir) may miss a change
 * made through the mount after its requests started: true when the directory changed since
 * (a child removed, renamed, created or committed; the directory itself removed or renamed),
 * or when that is no longer known. Two hash lookups; false lets a reader trust every entry. */
bool namespace_listing_changed(struct namespace *ns, const char *dir_path,
                               const struct dir_listing *listing);
/* Whether the entry at path (a child of listing's directory) changed through the mount after
 * listing's requests started (or that is no longer known): its entry in listing may be a
 * removed name or old attributes. One hash lookup. */
bool namespace_entry_changed(struct namespace *ns, const char *path,
                             const struct dir_listing *listing);
/* The listing prefix of the directory at path (g_malloc'd). */
char *namespace_dir_prefix(struct namespace *ns, const char *path);

/* The object name of the file at path (g_malloc'd). */
char *namespace_object_name(struct namespace *ns, const char *path);
void namespace_get_stats(struct namespace *ns, struct namespace_stats *out);

#endif
