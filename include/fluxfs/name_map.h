/* Name mapping between Cloud Storage object names and paths inside the mount (core layer).
 * Pure functions, no locks, no I/O.
 *
 * A "path" is relative to the mount root: "" is the root, "a/b" is a file or directory two
 * levels down; it never starts or ends with '/'. The object name of a file is
 * mount_prefix + path; a directory "a/b" is the set of objects whose names start with
 * mount_prefix + "a/b/" (an implicit directory), optionally with a placeholder object named
 * exactly mount_prefix + "a/b/".
 *
 * ---- Names that cannot be file names (copied to docs/semantics.md) ----
 * Cloud Storage accepts object names a POSIX directory tree cannot show. fluxfs handles them
 * deterministically, the same way on every listing and lookup:
 *
 *  1. A segment that is empty (from "a//b" or a leading "/"), "." or "..", longer than 255
 *     bytes (NAME_MAX), or containing a byte the kernel cannot carry (NUL cannot occur in
 *     object names we receive): the object, or the whole subtree below such a segment, is
 *     HIDDEN: not listed, lookup answers ENOENT. Nothing is renamed or escaped, so no two
 *     objects can ever map to one path.
 *  2. A name that is both a file and a directory ("a" and "a/b" both exist): the DIRECTORY
 *     WINS and the file "a" is hidden (gcsfuse does the same). Its bytes stay reachable through
 *     the Cloud Storage API only.
 *  3. The placeholder object "dir/" itself is never a file; it makes "dir" a directory even
 *     when nothing is below it (and, with implicit_dirs off, it is the only thing that does).
 *  4. At the mount root the name ".fluxfs" is reserved for fluxfs's control files (order hints
 *     for the prefetcher, issue 5): objects under mount_prefix + ".fluxfs" are hidden (write
 *     temporaries in .fluxfs/tmp/, compose temporaries, the intent records of directory renames
 *     in .fluxfs/renames/).
 *  5. Each visible path maps to exactly one inode at a time; when a name changes kind behind
 *     the mount (file <-> directory) it gets a new inode number, never a reused one.
 */
#ifndef FLUXFS_NAME_MAP_H
#define FLUXFS_NAME_MAP_H

#include <stdbool.h>
#include <stddef.h>

#define NAME_MAP_NAME_MAX 255
/* Cloud Storage's limit on an object name (UTF-8 bytes), the mount prefix included. */
#define NAME_MAP_OBJECT_NAME_MAX    1024
#define NAME_MAP_RESERVED_ROOT_NAME ".fluxfs"

/* What kind of child an entry of a delimiter listing is. */
enum name_kind { NAME_KIND_FILE = 1, NAME_KIND_DIR = 2 };

/* True when the len bytes at segment form a valid single path component (rule 1). */
bool name_map_segment_valid(const char *segment, size_t len);

/* True when every '/'-separated segment of path is valid; "" (the root) is valid. */
bool name_map_path_valid(const char *path);

/* True when name (a child of the directory at dir_path) is the reserved control name. */
bool name_map_is_reserved(const char *dir_path, const char *name);

/* Joins a directory path and a child name: ("", "x") -> "x", ("a", "x") -> "a/x".
 * Returns a g_malloc'd string. */
char *name_map_join(const char *dir_path, const char *name);

/* Whether a new file (or, with is_dir, the placeholder "path/" of a new directory) at path
 * has an object name Cloud Storage accepts: at most NAME_MAP_OBJECT_NAME_MAX bytes. */
bool name_map_object_name_fits(const char *mount_prefix, const char *path, bool is_dir);

/* Object name of the file at path: prefix + path. g_malloc'd. */
char *name_map_file_object(const char *mount_prefix, const char *path);

/* Listing prefix of the directory at path: prefix + path + "/" (or just prefix for the root).
 * g_malloc'd. */
char *name_map_dir_prefix(const char *mount_prefix, const char *path);

/* Classifies one entry of a delimiter listing of the directory whose listing prefix is
 * dir_prefix (ends in '/' or is ""). entry is an object name (is_prefix false) or a returned
 * prefix (is_prefix true, ends with '/'). On success sets *child_start and *child_len to the child
 * name inside entry and *kind, and returns true. Returns false for entries that are hidden by
 * the rules above or are the directory's own placeholder. */
bool name_map_classify_child(const char *dir_prefix, const char *entry, bool is_prefix,
                             const char **child_start, size_t *child_len, enum name_kind *kind);

/* Recursive (no delimiter) listings: given an object name below mount_prefix, gives the path
 * of the object (*path_out, g_malloc'd, "" never) and whether it is a placeholder (name ends
 * with '/': the path is then a directory). Returns false when any segment is hidden. */
bool name_map_object_to_path(const char *mount_prefix, const char *object_name, char **path_out,
                             bool *is_placeholder);

#endif
