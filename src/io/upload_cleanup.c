/* Crash cleanup at mount (see writer_cleanup_stale in include/fluxfs/writer.h): temporary parts,
 * intermediate composites and multipart markers a crashed daemon left under the reserved
 * temp prefix, and the multipart uploads those markers name. */
#include "fluxfs/writer.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fluxfs/log.h"

#define MARKER_MAX_BYTES    8192
#define CLEANUP_MAX_OBJECTS 100000

static void abort_from_marker(struct gcs_client *client, const struct gcs_object *marker)
{
    if (marker->size == 0 || marker->size > MARKER_MAX_BYTES)
        return;
    char *text = g_malloc0(MARKER_MAX_BYTES + 1);
    size_t got = 0;
    struct gcs_read_request req = {.name = marker->name,
                                   .generation = marker->generation,
                                   .len = (size_t)marker->size,
                                   .buf = text,
                                   .object_size = marker->size};
    if (gcs_read(client, &req, &got) == 0) {
        text[got] = '\0';
        char **lines = g_strsplit(text, "\n", 3);
        if (lines[0] && lines[1] && lines[0][0] && lines[1][0]) {
            int rc = gcs_multipart_abort(client, lines[1], lines[0]);
            flog_info("writer", "aborted the stale multipart upload of '%s': %s", lines[1],
                      rc == 0 ? "done" : g_strerror(-rc));
        }
        g_strfreev(lines);
    }
    g_free(text);
}

struct cleanup_walk {
    struct gcs_client *client;
    int64_t now_ns;
    double max_age_s;
    unsigned seen;
    int removed;
};

static int cleanup_visit(const struct gcs_object *obj, void *user)
{
    struct cleanup_walk *walk = user;
    if (walk->seen++ >= CLEANUP_MAX_OBJECTS)
        return 1;
    double age_s = (double)(walk->now_ns - obj->updated_ns) / 1e9;
    if (age_s < walk->max_age_s)
        return 0;
    const char *base = strrchr(obj->name, '/');
    base = base ? base + 1 : obj->name;
    if (g_str_has_prefix(base, "mpu-"))
        abort_from_marker(walk->client, obj);
    if (gcs_delete(walk->client, obj->name, obj->generation, NULL) == 0)
        walk->removed++;
    return 0;
}

/* Aborts every multipart upload in progress whose object name starts with prefix; returns how
 * many were aborted. */
static int abort_uploads_under(struct gcs_client *client, const char *prefix)
{
    GPtrArray *names = NULL, *ids = NULL;
    int aborted = 0;
    if (gcs_multipart_list(client, prefix, &names, &ids) != 0)
        return 0;
    for (guint i = 0; i < names->len; i++)
        if (gcs_multipart_abort(client, g_ptr_array_index(names, i), g_ptr_array_index(ids, i)) ==
            0)
            aborted++;
    g_ptr_array_free(names, TRUE);
    g_ptr_array_free(ids, TRUE);
    return aborted;
}

int writer_cleanup_stale(struct gcs_client *client, const char *mount_prefix, const char *temp_root,
                         double max_age_s)
{
    struct cleanup_walk walk = {
        .client = client, .now_ns = g_get_real_time() * 1000, .max_age_s = max_age_s};
    int rc = gcs_list_each(client, temp_root, cleanup_visit, &walk);
    int removed = walk.removed;

    if (rc == 0 && max_age_s <= 0)
        removed += abort_uploads_under(client, mount_prefix);
    if (removed > 0)
        flog_info("writer", "cleanup: removed %d stale temporary objects and uploads under '%s'",
                  removed, temp_root);
    return rc < 0 ? rc : removed;
}

int writer_cleanup_prefix(struct gcs_client *client, const char *tmp_prefix)
{
    /* Any age: also one stamped ahead of this clock. */
    struct cleanup_walk walk = {
        .client = client, .now_ns = g_get_real_time() * 1000, .max_age_s = -1e300};
    int rc = gcs_list_each(client, tmp_prefix, cleanup_visit, &walk);
    /* A multipart upload begun just before the crash may have no marker yet (the marker is
     * uploaded asynchronously): the uploads under this prefix are all the dead process's,
     * whatever markers say. */
    if (rc == 0)
        walk.removed += abort_uploads_under(client, tmp_prefix);
    if (walk.removed > 0)
        flog_info("writer", "cleanup: removed %d temporary objects and uploads under '%s'",
                  walk.removed, tmp_prefix);
    return rc < 0 ? rc : walk.removed;
}
