/* Object name <-> path mapping and the rules for names a directory tree cannot show
 * (see include/fluxfs/name_map.h for the rules themselves). */
#include "fluxfs/name_map.h"

#include <glib.h>
#include <string.h>

bool name_map_segment_valid(const char *segment, size_t len)
{
    if (len == 0 || len > NAME_MAP_NAME_MAX)
        return false;
    if (len == 1 && segment[0] == '.')
        return false;
    if (len == 2 && segment[0] == '.' && segment[1] == '.')
        return false;
    if (memchr(segment, '/', len) != NULL || memchr(segment, '\0', len) != NULL)
        return false;
    return true;
}

bool name_map_path_valid(const char *path)
{
    if (path[0] == '\0')
        return true;
    const char *segment = path;
    for (;;) {
        const char *slash = strchr(segment, '/');
        size_t len = slash ? (size_t)(slash - segment) : strlen(segment);
        if (!name_map_segment_valid(segment, len))
            return false;
        if (!slash)
            return true;
        segment = slash + 1;
    }
}

bool name_map_is_reserved(const char *dir_path, const char *name)
{
    return dir_path[0] == '\0' && strcmp(name, NAME_MAP_RESERVED_ROOT_NAME) == 0;
}

static bool is_reserved_segment(const char *start, size_t len)
{
    return len == strlen(NAME_MAP_RESERVED_ROOT_NAME) &&
           memcmp(start, NAME_MAP_RESERVED_ROOT_NAME, len) == 0;
}

char *name_map_join(const char *dir_path, const char *name)
{
    if (dir_path[0] == '\0')
        return g_strdup(name);
    return g_strconcat(dir_path, "/", name, NULL);
}

bool name_map_object_name_fits(const char *mount_prefix, const char *path, bool is_dir)
{
    size_t len = strlen(mount_prefix ? mount_prefix : "") + strlen(path) + (is_dir ? 1 : 0);
    return len <= NAME_MAP_OBJECT_NAME_MAX;
}

char *name_map_file_object(const char *mount_prefix, const char *path)
{
    return g_strconcat(mount_prefix, path, NULL);
}

char *name_map_dir_prefix(const char *mount_prefix, const char *path)
{
    if (path[0] == '\0')
        return g_strdup(mount_prefix);
    return g_strconcat(mount_prefix, path, "/", NULL);
}

bool name_map_classify_child(const char *dir_prefix, const char *entry, bool is_prefix,
                             const char **child_start, size_t *child_len, enum name_kind *kind)
{
    size_t prefix_len = strlen(dir_prefix);
    if (strncmp(entry, dir_prefix, prefix_len) != 0)
        return false;
    const char *child = entry + prefix_len;
    size_t len = strlen(child);
    enum name_kind found;
    if (is_prefix) {
        /* "dir/x/" -> directory "x"; "dir//" -> empty segment, hidden. */
        if (len == 0 || child[len - 1] != '/')
            return false;
        len--;
        found = NAME_KIND_DIR;
    } else {
        if (len == 0) /* the directory's own placeholder */
            return false;
        if (child[len - 1] == '/') {
            /* A placeholder one level down, returned as an object (include_trailing_delimiter
             * listings): it names a directory. */
            len--;
            found = NAME_KIND_DIR;
        } else {
            found = NAME_KIND_FILE;
        }
    }
    if (!name_map_segment_valid(child, len))
        return false;
    /* The reserved root name is checked by the caller (name_map_is_reserved), which knows
     * whether this directory is the mount root. */
    *child_start = child;
    *child_len = len;
    *kind = found;
    return true;
}

bool name_map_object_to_path(const char *mount_prefix, const char *object_name, char **path_out,
                             bool *is_placeholder)
{
    size_t prefix_len = strlen(mount_prefix);
    if (strncmp(object_name, mount_prefix, prefix_len) != 0)
        return false;
    const char *rel = object_name + prefix_len;
    size_t len = strlen(rel);
    bool placeholder = false;
    if (len > 0 && rel[len - 1] == '/') {
        placeholder = true;
        len--;
    }
    if (len == 0)
        return false;
    /* Validate every segment of rel[0, len). */
    const char *segment = rel;
    const char *end = rel + len;
    bool first = true;
    while (segment <= end) {
        const char *slash = memchr(segment, '/', (size_t)(end - segment));
        size_t seg_len = slash ? (size_t)(slash - segment) : (size_t)(end - segment);
        if (!name_map_segment_valid(segment, seg_len))
            return false;
        if (first && is_reserved_segment(segment, seg_len))
            return false;
        first = false;
        if (!slash)
            break;
        segment = slash + 1;
    }
    *path_out = g_strndup(rel, len);
    *is_placeholder = placeholder;
    return true;
}
