/* Directory renames that survive a crash (issue 24).
 *
 * On a flat bucket a directory rename is one copy and one delete per object below it. Before the
 * first copy, an intent record (rename_record.h) naming the source and destination prefixes and
 * every object to move (name and generation, as listed) is written to
 * MOUNT_PREFIX/.fluxfs/renames/ID (a name no listing of the mount shows: name_map.h rule 4); it
 * is deleted once every object has moved. A daemon killed in between leaves the record; the next
 * read-write mount lists .fluxfs/renames/ (one request when there is nothing) before it serves
 * anything, and rolls each record forward, logging one line per rename. So no listing through
 * fluxfs ever shows a file of an interrupted rename twice, or under its old name after the
 * next mount.
 *
 * Rolling forward is one routine (roll_forward) for the rename itself and for the recovery, and
 * it is idempotent, so two mounts finishing the same record at once, or a recovery racing the
 * rename it finishes, end in the same state. For each recorded object (name N, generation G):
 *   - the source N is not live at generation G: it moved already (or was deleted or replaced
 *     since by someone else): nothing to do;
 *   - the destination does not exist: copy source generation G to it with ifGenerationMatch=0
 *     (a 412 means it appeared meanwhile: handled as the next case), then delete source
 *     generation G (a 404 is done);
 *   - the destination exists: when it holds the source's bytes (size, CRC32C, MD5 when both
 *     carry one, symlink target, content encoding) it is the copy made before the crash (or the
 *     same bytes written by someone else, which leaves the name as the rename wants it), and the
 *     source generation G is deleted; otherwise another writer wrote the new name after the
 *     rename began, and the source is KEPT (never lose bytes): a warning names it.
 * The destination prefix was empty when the rename began (fs_rename checks), so an existing
 * destination object is either the copy or a newer write.
 *
 * A rename that fails part way (an error past the retries) keeps its record: the unmount of
 * that mount tries once more (fs_writes_clear), else the next mount finishes it. One refused
 * (403) before any object moved failed whole: its record is deleted.
 *
 * Threads: called on a FUSE worker (rename) or the mount thread (recovery, and the unmount's
 * retry), no lock held; every call is a blocking gcs call. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/name_map.h"
#include "fs-internal.h"
#include "rename_record.h"

#define RENAME_RECORD_READ_MAX ((size_t)1 << 30) /* bigger is not a record fluxfs wrote */

struct rename_counts {
    unsigned moved;    /* copied and deleted now */
    unsigned finished; /* the copy was there already: only the source deleted */
    unsigned gone;     /* the source had moved already (or was changed by someone else) */
    unsigned kept;     /* the new name holds other bytes: the source stays */
    unsigned changed;  /* copies and deletes that succeeded (0: the bucket is as before) */
};

char *fs_rename_record_root(const char *mount_prefix)
{
    return g_strdup_printf("%s%s/renames/", mount_prefix ? mount_prefix : "",
                           NAME_MAP_RESERVED_ROOT_NAME);
}

static bool same_content(const struct gcs_object *a, const struct gcs_object *b)
{
    bool same_md5 = !a->has_md5 || !b->has_md5 || memcmp(a->md5, b->md5, sizeof(a->md5)) == 0;
    return a->size == b->size && a->has_crc32c && b->has_crc32c && a->crc32c == b->crc32c &&
           same_md5 && g_strcmp0(a->symlink_target, b->symlink_target) == 0 &&
           a->symlink_in_content == b->symlink_in_content &&
           g_strcmp0(a->content_encoding, b->content_encoding) == 0;
}

/* A path of the mount for the log: the prefix without the mount prefix and the last '/'. */
static char *shown_path(const char *mount_prefix, const char *prefix)
{
    size_t skip = g_str_has_prefix(prefix, mount_prefix) ? strlen(mount_prefix) : 0;
    char *path = g_strdup(prefix + skip);
    size_t len = strlen(path);
    if (len > 0 && path[len - 1] == '/')
        path[len - 1] = '\0';
    return path;
}

/* Deletes the source generation; gone already is done. */
static int delete_source(struct gcs_client *client, const char *name, int64_t generation)
{
    int rc = gcs_delete(client, name, generation, NULL);
    return rc == -ENOENT ? 0 : rc;
}

/* The new name exists (dest): deletes the source when dest is its copy, else keeps it. */
static int settle_existing(struct gcs_client *client, const struct gcs_object *src,
                           const struct gcs_object *dest, struct rename_counts *counts)
{
    if (!same_content(src, dest)) {
        flog_warn("fs",
                  "rename: object '%s' was written by someone else after the rename of "
                  "its directory began; the source object '%s' stays",
                  dest->name, src->name);
        counts->kept++;
        return 0;
    }
    int rc = delete_source(client, src->name, src->generation);
    if (rc == 0) {
        counts->finished++;
        counts->changed++;
    }
    return rc;
}

/* Moves one object src (its generation is the recorded one) to dest_name; dest is what a
 * listing found there (NULL = absent). */
static int move_one(struct gcs_client *client, const struct gcs_object *src, const char *dest_name,
                    const struct gcs_object *dest, struct rename_counts *counts)
{
    if (dest)
        return settle_existing(client, src, dest, counts);
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .if_generation_match = 0};
    int rc = gcs_copy(client, src->name, src->generation, dest_name, &pre, NULL);
    if (rc == -ENOENT) {
        counts->gone++; /* the pinned source went meanwhile: moved by someone else */
        return 0;
    }
    if (rc == -ESTALE) {
        /* The new name appeared since the listing (another mount finishing this record). */
        struct gcs_object now = {0};
        rc = gcs_stat(client, dest_name, &now);
        if (rc == 0)
            rc = settle_existing(client, src, &now, counts);
        gcs_object_clear(&now);
        return rc == -ENOENT ? -ESTALE : rc;
    }
    if (rc < 0)
        return rc;
    counts->changed++;
    rc = delete_source(client, src->name, src->generation);
    if (rc == 0)
        counts->moved++;
    return rc;
}

/* Rolls record forward. src_now: live objects below record->source by name below it (NULL:
 * the record's own entries are live, as just listed); dest_now: the same below record->dest
 * (NULL: nothing there). Stops at the first error (returned). */
static int roll_forward(struct gcs_client *client, const struct rename_record *record,
                        GHashTable *src_now, GHashTable *dest_now, struct rename_counts *counts)
{
    for (guint i = 0; i < record->entries->len; i++) {
        const struct rename_record_entry *entry = g_ptr_array_index(record->entries, i);
        char *src_name = g_strconcat(record->source, entry->name, NULL);
        struct gcs_object recorded = {.name = src_name, .generation = entry->generation};
        const struct gcs_object *src = &recorded;
        if (src_now) {
            src = g_hash_table_lookup(src_now, entry->name);
            if (!src || src->generation != entry->generation) {
                counts->gone++;
                g_free(src_name);
                continue;
            }
        }
        char *dest_name = g_strconcat(record->dest, entry->name, NULL);
        const struct gcs_object *dest =
            dest_now ? g_hash_table_lookup(dest_now, entry->name) : NULL;
        int rc = move_one(client, src, dest_name, dest, counts);
        g_free(dest_name);
        g_free(src_name);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Every object below prefix, by its name below prefix (values: struct gcs_object, owned). */
static int list_below(struct gcs_client *client, const char *prefix, GHashTable **out)
{
    GHashTable *objects =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)gcs_object_free);
    size_t prefix_len = strlen(prefix);
    GPtrArray *listed = g_ptr_array_new();
    int rc = gcs_list_all(client, prefix, SIZE_MAX, listed);
    for (guint i = 0; i < listed->len; i++) {
        struct gcs_object *obj = g_ptr_array_index(listed, i);
        if (g_str_has_prefix(obj->name, prefix))
            g_hash_table_replace(objects, obj->name + prefix_len, obj);
        else
            gcs_object_free(obj);
    }
    g_ptr_array_free(listed, TRUE);
    if (rc < 0) {
        g_hash_table_destroy(objects);
        return rc;
    }
    *out = objects;
    return 0;
}

static char *origin_text(void)
{
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) < 0)
        g_strlcpy(host, "?", sizeof(host));
    return g_strdup_printf("%s pid %ld", host, (long)getpid());
}

int fs_rename_dir_objects(struct fs *fs, const char *src_prefix, const char *dest_prefix,
                          const GPtrArray *objects)
{
    const char *mount_prefix = fs->cfg->prefix ? fs->cfg->prefix : "";
    struct rename_record record;
    rename_record_init(&record);
    record.source = g_strdup(src_prefix);
    record.dest = g_strdup(dest_prefix);
    record.origin = origin_text();
    size_t src_len = strlen(src_prefix);
    for (guint i = 0; i < objects->len; i++) {
        const struct gcs_object *obj = g_ptr_array_index(objects, i);
        if (g_str_has_prefix(obj->name, src_prefix))
            rename_record_add(&record, obj->name + src_len, obj->generation);
    }
    GString *text = rename_record_format(&record);
    char *root = fs_rename_record_root(mount_prefix);
    char *record_name =
        g_strdup_printf("%s%016" PRIx64 "%08x", root, (uint64_t)g_get_real_time(), g_random_int());
    g_free(root);
    struct gcs_body body = {.data = text->str,
                            .fd = -1,
                            .len = text->len,
                            .has_crc32c = true,
                            .crc32c = crc32c_update(0, text->str, text->len)};
    struct gcs_write_attrs attrs = gcs_temporary_attrs;
    attrs.content_type = "text/plain";
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .if_generation_match = 0};
    struct gcs_object written = {0};
    int rc = gcs_upload(fs->client, record_name, &body, &attrs, &pre, &written);
    g_string_free(text, TRUE);
    struct rename_counts counts = {0};
    if (rc == 0) {
        GHashTable *src_now = g_hash_table_new(g_str_hash, g_str_equal);
        for (guint i = 0; i < objects->len; i++) {
            const struct gcs_object *obj = g_ptr_array_index(objects, i);
            if (g_str_has_prefix(obj->name, src_prefix))
                g_hash_table_replace(src_now, obj->name + src_len, (gpointer)obj);
        }
        rc = roll_forward(fs->client, &record, src_now, NULL, &counts);
        g_hash_table_destroy(src_now);
        char *src_path = shown_path(mount_prefix, src_prefix);
        char *dest_path = shown_path(mount_prefix, dest_prefix);
        if (rc == 0) {
            int deleted = gcs_delete(fs->client, record_name, written.generation, NULL);
            if (deleted < 0 && deleted != -ENOENT)
                flog_warn("fs",
                          "rename of '%s' to '%s' done, but its intent record %s stays "
                          "(%s): the next mount finds nothing to move and deletes it",
                          src_path, dest_path, record_name, g_strerror(-deleted));
            if (counts.kept > 0)
                rc = -ENOTEMPTY; /* someone wrote below the new name meanwhile */
        } else if (counts.changed == 0 && (rc == -EACCES || rc == -EPERM)) {
            /* Refused before anything moved: the rename failed whole; nothing to finish. */
            gcs_delete(fs->client, record_name, written.generation, NULL);
        } else {
            flog_warn("fs",
                      "rename of '%s' to '%s' stopped after %u of %u objects (%s); its "
                      "intent record %s stays: the unmount tries again, else the next "
                      "read-write mount finishes it",
                      src_path, dest_path, counts.moved + counts.finished + counts.gone,
                      record.entries->len, g_strerror(-rc), record_name);
            g_atomic_int_set(&fs->renames_unfinished, 1);
        }
        g_free(src_path);
        g_free(dest_path);
    }
    gcs_object_clear(&written);
    g_free(record_name);
    rename_record_clear(&record);
    return rc;
}

/* One record found at mount: read, checked, rolled forward, deleted. */
static void recover_one(struct gcs_client *client, const char *mount_prefix,
                        const struct gcs_object *obj)
{
    if (obj->size > RENAME_RECORD_READ_MAX) {
        flog_warn("fs", "%s is not a rename record fluxfs wrote (%" PRIu64 " bytes); left alone",
                  obj->name, obj->size);
        return;
    }
    char *text = g_malloc((size_t)obj->size + 1);
    size_t got = 0;
    struct gcs_read_request req = {.name = obj->name,
                                   .generation = obj->generation,
                                   .len = (size_t)obj->size,
                                   .buf = text,
                                   .object_size = obj->size,
                                   .whole_object = true,
                                   .has_expected_crc32c = obj->has_crc32c,
                                   .expected_crc32c = obj->crc32c};
    int rc = obj->size > 0 ? gcs_read(client, &req, &got) : 0;
    if (rc == -ENOENT) {
        g_free(text); /* finished meanwhile (another mount, or the rename itself) */
        return;
    }
    if (rc < 0) {
        flog_warn("fs", "cannot read the rename record %s: %s; the next mount tries again",
                  obj->name, g_strerror(-rc));
        g_free(text);
        return;
    }
    struct rename_record record;
    char *error = NULL;
    rc = rename_record_parse(text, got, &record, &error);
    g_free(text);
    if (rc == 0 &&
        (!g_str_has_prefix(record.source, mount_prefix) ||
         !g_str_has_prefix(record.dest, mount_prefix) || strcmp(record.source, mount_prefix) == 0 ||
         strcmp(record.dest, mount_prefix) == 0 || g_str_has_prefix(record.source, record.dest) ||
         g_str_has_prefix(record.dest, record.source))) {
        error = g_strdup("its source and dest are not two separate directories of this mount");
        rc = -EINVAL;
        rename_record_clear(&record);
    }
    if (rc < 0) {
        flog_warn("fs", "%s is not a rename record fluxfs can follow (%s); left alone", obj->name,
                  error);
        g_free(error);
        return;
    }
    GHashTable *src_now = NULL, *dest_now = NULL;
    struct rename_counts counts = {0};
    rc = list_below(client, record.source, &src_now);
    if (rc == 0)
        rc = list_below(client, record.dest, &dest_now);
    if (rc == 0)
        rc = roll_forward(client, &record, src_now, dest_now, &counts);
    if (rc == 0) {
        rc = gcs_delete(client, obj->name, obj->generation, NULL);
        if (rc == -ENOENT)
            rc = 0;
    }
    char *src_path = shown_path(mount_prefix, record.source);
    char *dest_path = shown_path(mount_prefix, record.dest);
    double age_s = (double)(g_get_real_time() * 1000 - obj->updated_ns) / 1e9;
    if (rc == 0)
        flog_warn("fs",
                  "rolled forward the interrupted rename of '%s' to '%s' (begun %.0f s ago "
                  "by %s): %u objects moved now, %u copied before (source deleted now), "
                  "%u moved before, %u kept (their new name holds other bytes)",
                  src_path, dest_path, age_s < 0 ? 0 : age_s,
                  record.origin[0] ? record.origin : "?", counts.moved, counts.finished,
                  counts.gone, counts.kept);
    else
        flog_warn("fs",
                  "cannot finish the interrupted rename of '%s' to '%s' (record %s): %s; "
                  "the next mount tries again",
                  src_path, dest_path, obj->name, g_strerror(-rc));
    g_free(src_path);
    g_free(dest_path);
    if (src_now)
        g_hash_table_destroy(src_now);
    if (dest_now)
        g_hash_table_destroy(dest_now);
    rename_record_clear(&record);
}

int fs_rename_recover(struct gcs_client *client, const char *mount_prefix)
{
    const char *prefix = mount_prefix ? mount_prefix : "";
    char *root = fs_rename_record_root(prefix);
    GPtrArray *records = g_ptr_array_new_with_free_func((GDestroyNotify)gcs_object_free);
    int rc = gcs_list_all(client, root, SIZE_MAX, records);
    /* Oldest first (the names begin with the time they were written). */
    for (guint i = 0; rc == 0 && i < records->len; i++)
        recover_one(client, prefix, g_ptr_array_index(records, i));
    if (rc < 0)
        flog_warn("fs",
                  "cannot list the rename records under '%s': %s; interrupted directory "
                  "renames, if any, are finished by the next mount",
                  root, g_strerror(-rc));
    guint found = records->len;
    g_ptr_array_free(records, TRUE);
    g_free(root);
    return rc < 0 ? rc : (int)found;
}
