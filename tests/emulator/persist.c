/* The emulator's data directory (--data-dir): objects survive a restart.
 *
 * Layout under DIR:
 *   data/<unique>.bin       the bytes of one memory segment, written once, never modified
 *   objects/<sha256>.meta   the live version of one (bucket, name): a serialized GVariant with
 *                           every field of struct emu_object and the content's description
 *   buckets/<sha256>.meta   one bucket (name, creation time, metageneration)
 * sha256 is over "bucket\0name" (objects) or the bucket name, so any name maps to a short file
 * name. Records are written to "<file>.tmp" and renamed over the old one, so a crash leaves the
 * old record or the new one, never a torn one (no fsync: an emulator trades durability across
 * power loss for speed).
 *
 * Contents are stored by description: a list of segments, each a range of a data file or a
 * synthetic stream (key, start, size). Memory segments are written to new data files when an
 * object is published (emu_persist_materialise, outside the store lock), after which the object
 * reads from the file; compose and copy reuse the same files, so they still copy no bytes.
 * Synthetic contents cost nothing on disk. A data file is deleted when the last content using
 * it is released while the store is open; at open, data files no record refers to (left by a
 * crash) and stale .tmp files are deleted. Objects made by emu_store_populate are not recorded:
 * --populate recreates them at every start. */
#include "store-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORD_VERSION 1
/* Object record: version, bucket, name, generation, metageneration, created, updated, size,
 * crc32c, has_md5, md5, component_count, six strings, metadata, segments; version 2 adds
 * customTime, temporaryHold, eventBasedHold. Version 1 records still load (no time, no holds).
 * The version is the first member of either, at offset 0. */
#define OBJECT_RECORD_VERSION 2
#define OBJECT_RECORD_TYPE_V1 "(uayayxxxxtubayiayayayayayaya(ayay)a(yaytttt))"
#define OBJECT_RECORD_TYPE    "(uayayxxxxtubayiayayayayayaya(ayay)a(yaytttt)xbb)"
#define BUCKET_RECORD_TYPE    "(uayxx)"
#define MAX_RECORD_SIZE       (64u << 20)
#define SEGMENT_FILE          'f'
#define SEGMENT_SYNTH         's'

struct emu_persist {
    char *dir;
    char *data_dir;
    char *objects_dir;
    char *buckets_dir;
    struct emu_file_owner *owner;
    int64_t started_us; /* data file names: started_us + counter are unique across restarts */
    guint counter;      /* atomic */
};

static int errno_or_eio(void)
{
    return errno != 0 ? -errno : -EIO;
}

int emu_persist_open(const char *dir, struct emu_persist **out)
{
    struct emu_persist *p = g_new0(struct emu_persist, 1);
    p->dir = g_strdup(dir);
    p->data_dir = g_build_filename(dir, "data", NULL);
    p->objects_dir = g_build_filename(dir, "objects", NULL);
    p->buckets_dir = g_build_filename(dir, "buckets", NULL);
    p->owner = emu_file_owner_new();
    p->started_us = g_get_real_time();
    const char *dirs[] = {p->dir, p->data_dir, p->objects_dir, p->buckets_dir};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        if (g_mkdir_with_parents(dirs[i], 0755) < 0) {
            int rc = errno_or_eio();
            emu_persist_close(p);
            return rc;
        }
    }
    *out = p;
    return 0;
}

void emu_persist_close(struct emu_persist *p)
{
    if (p == NULL)
        return;
    g_atomic_int_set(&p->owner->live, 0);
    emu_file_owner_unref(p->owner);
    g_free(p->dir);
    g_free(p->data_dir);
    g_free(p->objects_dir);
    g_free(p->buckets_dir);
    g_free(p);
}

/* --- small file helpers --- */

static char *record_path(const char *dir, const char *a, const char *b)
{
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(sum, (const guchar *)a, (gssize)strlen(a));
    if (b != NULL) {
        g_checksum_update(sum, (const guchar *)"", 1);
        g_checksum_update(sum, (const guchar *)b, (gssize)strlen(b));
    }
    char *file = g_strconcat(g_checksum_get_string(sum), ".meta", NULL);
    char *path = g_build_filename(dir, file, NULL);
    g_free(file);
    g_checksum_free(sum);
    return path;
}

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno_or_eio();
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes data to path atomically: path.tmp, then rename over path. */
static int write_atomically(const char *path, const void *data, size_t len)
{
    char *tmp = g_strconcat(path, ".tmp", NULL);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? errno_or_eio() : write_all(fd, data, len);
    if (fd >= 0 && close(fd) < 0 && rc == 0)
        rc = errno_or_eio();
    if (rc == 0 && rename(tmp, path) < 0)
        rc = errno_or_eio();
    if (rc < 0)
        (void)unlink(tmp);
    g_free(tmp);
    return rc;
}

static GVariant *read_record(const char *path, const char *type)
{
    gchar *data = NULL;
    gsize len = 0;
    struct stat st;
    if (stat(path, &st) < 0 || (uint64_t)st.st_size > MAX_RECORD_SIZE)
        return NULL;
    if (!g_file_get_contents(path, &data, &len, NULL))
        return NULL;
    GBytes *bytes = g_bytes_new_take(data, len);
    GVariant *record = g_variant_new_from_bytes(G_VARIANT_TYPE(type), bytes, FALSE);
    g_bytes_unref(bytes);
    g_variant_ref_sink(record);
    return record;
}

/* --- buckets --- */

int emu_persist_save_bucket(struct emu_persist *p, const struct emu_bucket *bucket)
{
    if (p == NULL)
        return 0;
    GVariant *record = g_variant_ref_sink(g_variant_new("(u^ayxx)", RECORD_VERSION, bucket->name,
                                                        (gint64)bucket->time_created_us,
                                                        (gint64)bucket->metageneration));
    char *path = record_path(p->buckets_dir, bucket->name, NULL);
    int rc = write_atomically(path, g_variant_get_data(record), g_variant_get_size(record));
    g_free(path);
    g_variant_unref(record);
    return rc;
}

int emu_persist_remove_bucket(struct emu_persist *p, const char *name)
{
    if (p == NULL)
        return 0;
    char *path = record_path(p->buckets_dir, name, NULL);
    int rc = unlink(path) < 0 && errno != ENOENT ? errno_or_eio() : 0;
    g_free(path);
    return rc;
}

/* --- objects --- */

struct segment_builder {
    GVariantBuilder *builder;
    struct emu_persist *persist;
};

static int describe_leaf(const struct emu_content *leaf, void *data)
{
    struct segment_builder *sb = data;
    if (leaf->kind == EMU_CONTENT_SYNTH) {
        g_variant_builder_add(sb->builder, "(y^aytttt)", (guchar)SEGMENT_SYNTH, "",
                              (guint64)leaf->u.synth.key, (guint64)leaf->u.synth.start,
                              (guint64)leaf->size, (guint64)0);
        return 0;
    }
    if (leaf->kind != EMU_CONTENT_FILE)
        return -EIO; /* not materialised: a bug, refuse to write a record that cannot load */
    char *base = g_path_get_basename(leaf->u.file.path);
    g_variant_builder_add(sb->builder, "(y^aytttt)", (guchar)SEGMENT_FILE, base, (guint64)0,
                          (guint64)leaf->u.file.start, (guint64)leaf->size, (guint64)0);
    g_free(base);
    return 0;
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

int emu_persist_save_object(struct emu_persist *p, const struct emu_object *obj)
{
    if (p == NULL)
        return 0;
    GVariantBuilder metadata, segments;
    g_variant_builder_init(&metadata, G_VARIANT_TYPE("a(ayay)"));
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, obj->metadata);
    while (g_hash_table_iter_next(&iter, &key, &value))
        g_variant_builder_add(&metadata, "(^ay^ay)", (const char *)key, (const char *)value);
    g_variant_builder_init(&segments, G_VARIANT_TYPE("a(yaytttt)"));
    struct segment_builder sb = {.builder = &segments, .persist = p};
    int rc = emu_content_foreach_leaf(obj->content, describe_leaf, &sb);
    if (rc < 0) {
        g_variant_builder_clear(&metadata);
        g_variant_builder_clear(&segments);
        return rc;
    }
    GVariant *md5 = g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, obj->md5, 16, 1);
    GVariant *record = g_variant_ref_sink(g_variant_new(
        "(u^ay^ayxxxxtub@ayi^ay^ay^ay^ay^ay^aya(ayay)a(yaytttt)xbb)", OBJECT_RECORD_VERSION,
        obj->bucket, obj->name, (gint64)obj->generation, (gint64)obj->metageneration,
        (gint64)obj->time_created_us, (gint64)obj->updated_us, (guint64)obj->size,
        (guint32)obj->crc32c, (gboolean)obj->has_md5, md5, (gint32)obj->component_count,
        obj->content_type, or_empty(obj->content_encoding), or_empty(obj->cache_control),
        or_empty(obj->content_disposition), or_empty(obj->content_language), obj->storage_class,
        &metadata, &segments, (gint64)obj->custom_time_us, (gboolean)obj->temporary_hold,
        (gboolean)obj->event_based_hold));
    char *path = record_path(p->objects_dir, obj->bucket, obj->name);
    rc = write_atomically(path, g_variant_get_data(record), g_variant_get_size(record));
    g_free(path);
    g_variant_unref(record);
    return rc;
}

int emu_persist_remove_object(struct emu_persist *p, const char *bucket, const char *name)
{
    if (p == NULL)
        return 0;
    char *path = record_path(p->objects_dir, bucket, name);
    int rc = unlink(path) < 0 && errno != ENOENT ? errno_or_eio() : 0;
    g_free(path);
    return rc;
}

/* --- materialising memory segments --- */

/* Writes one memory leaf to a new data file and returns its file content. */
static int write_data_file(struct emu_persist *p, const struct emu_content *leaf,
                           struct emu_content **out)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        char *file = g_strdup_printf("%016" G_GINT64_MODIFIER "x-%08x.bin", p->started_us,
                                     (unsigned)g_atomic_int_add(&p->counter, 1));
        char *path = g_build_filename(p->data_dir, file, NULL);
        g_free(file);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {
            g_free(path);
            continue;
        }
        int rc = fd < 0 ? errno_or_eio() : write_all(fd, leaf->u.mem.data, (size_t)leaf->size);
        if (fd >= 0 && close(fd) < 0 && rc == 0)
            rc = errno_or_eio();
        if (rc < 0) {
            (void)unlink(path);
            g_free(path);
            return rc;
        }
        *out = emu_content_new_file(path, 0, leaf->size, p->owner);
        if (g_atomic_int_get(&leaf->crc_known))
            emu_content_set_crc32c(*out, leaf->crc32c);
        g_free(path);
        return 0;
    }
    return -EIO;
}

struct materialise_state {
    struct emu_persist *persist;
    GPtrArray *leaves; /* struct emu_content * (references) */
    bool changed;
};

static int materialise_leaf(const struct emu_content *leaf, void *data)
{
    struct materialise_state *st = data;
    if (leaf->kind != EMU_CONTENT_BYTES) {
        g_ptr_array_add(st->leaves, emu_content_ref((struct emu_content *)leaf));
        return 0;
    }
    struct emu_content *file = NULL;
    int rc = write_data_file(st->persist, leaf, &file);
    if (rc == 0) {
        g_ptr_array_add(st->leaves, file);
        st->changed = true;
    }
    return rc;
}

int emu_persist_materialise(struct emu_persist *p, struct emu_content *content,
                            struct emu_content **out)
{
    if (p == NULL || content->size == 0) {
        *out = emu_content_ref(content);
        return 0;
    }
    struct materialise_state st = {
        .persist = p,
        .leaves = g_ptr_array_new_with_free_func((GDestroyNotify)emu_content_unref),
    };
    int rc = emu_content_foreach_leaf(content, materialise_leaf, &st);
    if (rc == 0 && !st.changed) {
        *out = emu_content_ref(content);
    } else if (rc == 0) {
        struct emu_content *c = emu_content_new_concat(
            (struct emu_content *const *)st.leaves->pdata, (int)st.leaves->len);
        if (g_atomic_int_get(&content->crc_known) && !g_atomic_int_get(&c->crc_known))
            emu_content_set_crc32c(c, content->crc32c);
        *out = c;
    }
    g_ptr_array_unref(st.leaves); /* on error this deletes the files written so far */
    return rc;
}

/* --- loading --- */

struct loader {
    struct emu_persist *persist;
    struct emu_store *store;
    GHashTable *files; /* data file basename -> struct emu_content * (one per file) */
};

static bool file_name_safe(const char *base)
{
    return base[0] != '\0' && base[0] != '.' && strchr(base, '/') == NULL;
}

static struct emu_content *load_segments(struct loader *ld, GVariant *segments, uint64_t size)
{
    gsize count = g_variant_n_children(segments);
    if (count > 10u * 1000 * 1000)
        return NULL;
    struct emu_content **parts = g_new0(struct emu_content *, count > 0 ? count : 1);
    uint64_t total = 0;
    bool ok = true;
    for (gsize i = 0; i < count && ok; i++) {
        guchar kind;
        const char *base;
        guint64 key, start, len, reserved;
        g_variant_get_child(segments, i, "(y^&aytttt)", &kind, &base, &key, &start, &len,
                            &reserved);
        total += len;
        if (kind == SEGMENT_SYNTH) {
            parts[i] = emu_content_new_synth_key(key, start, len);
        } else if (kind == SEGMENT_FILE && file_name_safe(base)) {
            struct emu_content *file = g_hash_table_lookup(ld->files, base);
            if (file == NULL) {
                char *path = g_build_filename(ld->persist->data_dir, base, NULL);
                struct stat st;
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                    file = emu_content_new_file(path, 0, (uint64_t)st.st_size, ld->persist->owner);
                    g_hash_table_insert(ld->files, g_strdup(base), file);
                }
                g_free(path);
            }
            /* Segments are whole data files (materialise writes one file per segment). */
            if (file != NULL && start == 0 && len == file->size)
                parts[i] = emu_content_ref(file);
            else
                ok = false;
        } else {
            ok = false;
        }
    }
    struct emu_content *content = NULL;
    if (ok && total == size)
        content = emu_content_new_concat(parts, (int)count);
    for (gsize i = 0; i < count; i++)
        emu_content_unref(parts[i]);
    g_free(parts);
    return content;
}

static const char *empty_to_null(const char *s)
{
    return s[0] != '\0' ? s : NULL;
}

/* Loads one object record; a record that does not parse or whose data is missing is skipped
 * (and left in place for a person to look at). */
static void load_object(struct loader *ld, const char *path)
{
    GVariant *record = read_record(path, OBJECT_RECORD_TYPE_V1);
    if (record == NULL)
        return;
    guint32 version;
    g_variant_get_child(record, 0, "u", &version);
    if (version == OBJECT_RECORD_VERSION) {
        g_variant_unref(record);
        record = read_record(path, OBJECT_RECORD_TYPE);
        if (record == NULL)
            return;
    }
    guint32 crc;
    const char *bucket, *name, *strs[6];
    gint64 generation, metageneration, created, updated;
    guint64 size;
    gboolean has_md5;
    GVariant *md5, *metadata, *segments;
    gint32 components;
    gint64 custom_time = 0;
    gboolean temporary_hold = FALSE, event_based_hold = FALSE;
#define V1_FORMAT "(u^&ay^&ayxxxxtub@ayi^&ay^&ay^&ay^&ay^&ay^&ay@a(ayay)@a(yaytttt)"
#define V1_ARGS                                                                                    \
    &version, &bucket, &name, &generation, &metageneration, &created, &updated, &size, &crc,       \
        &has_md5, &md5, &components, &strs[0], &strs[1], &strs[2], &strs[3], &strs[4], &strs[5],   \
        &metadata, &segments
    if (version == OBJECT_RECORD_VERSION)
        g_variant_get(record, V1_FORMAT "xbb)", V1_ARGS, &custom_time, &temporary_hold,
                      &event_based_hold);
    else
        g_variant_get(record, V1_FORMAT ")", V1_ARGS);
#undef V1_FORMAT
#undef V1_ARGS
    gsize md5_len = 0;
    const guchar *md5_bytes = g_variant_get_fixed_array(md5, &md5_len, 1);
    struct emu_content *content = NULL;
    if ((version == 1 || version == OBJECT_RECORD_VERSION) && md5_len == 16 &&
        emu_object_name_valid(name) && bucket[0] != '\0' && generation > 0)
        content = load_segments(ld, segments, size);
    if (content != NULL) {
        emu_content_set_crc32c(content, crc);
        GHashTable *table = NULL;
        gsize n = g_variant_n_children(metadata);
        if (n > 0) {
            table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
            for (gsize i = 0; i < n; i++) {
                const char *k, *v;
                g_variant_get_child(metadata, i, "(^&ay^&ay)", &k, &v);
                g_hash_table_insert(table, g_strdup(k), g_strdup(v));
            }
        }
        struct emu_object_strings s = {
            .bucket = bucket,
            .name = name,
            .content_type = strs[0][0] ? strs[0] : "application/octet-stream",
            .content_encoding = empty_to_null(strs[1]),
            .cache_control = empty_to_null(strs[2]),
            .content_disposition = empty_to_null(strs[3]),
            .content_language = empty_to_null(strs[4]),
            .storage_class = strs[5][0] ? strs[5] : "STANDARD",
        };
        struct emu_object *obj = emu_object_alloc(&s, table, content);
        if (table != NULL)
            g_hash_table_unref(table);
        obj->generation = generation;
        obj->metageneration = metageneration;
        obj->time_created_us = created;
        obj->updated_us = updated;
        obj->crc32c = crc;
        obj->has_md5 = has_md5;
        memcpy(obj->md5, md5_bytes, 16);
        obj->component_count = components;
        obj->custom_time_us = custom_time;
        obj->temporary_hold = temporary_hold;
        obj->event_based_hold = event_based_hold;
        emu_store_insert_loaded(ld->store, obj);
    }
    g_variant_unref(md5);
    g_variant_unref(metadata);
    g_variant_unref(segments);
    g_variant_unref(record);
}

static void load_bucket(struct loader *ld, const char *path)
{
    GVariant *record = read_record(path, BUCKET_RECORD_TYPE);
    if (record == NULL)
        return;
    guint32 version;
    const char *name;
    gint64 created, metageneration;
    g_variant_get(record, "(u^&ayxx)", &version, &name, &created, &metageneration);
    if (version == RECORD_VERSION && name[0] != '\0')
        emu_store_insert_loaded_bucket(ld->store, name, created, metageneration);
    g_variant_unref(record);
}

/* Calls fn for every "*.meta" file of dir; deletes "*.tmp" files (interrupted writes). */
static int scan_records(struct loader *ld, const char *dir,
                        void (*fn)(struct loader *ld, const char *path))
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d == NULL)
        return -EIO;
    const char *entry;
    while ((entry = g_dir_read_name(d)) != NULL) {
        char *path = g_build_filename(dir, entry, NULL);
        if (g_str_has_suffix(entry, ".tmp"))
            (void)unlink(path);
        else if (g_str_has_suffix(entry, ".meta"))
            fn(ld, path);
        g_free(path);
    }
    g_dir_close(d);
    return 0;
}

int emu_persist_load(struct emu_persist *p, struct emu_store *store)
{
    if (p == NULL)
        return 0;
    struct loader ld = {
        .persist = p,
        .store = store,
        .files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify)emu_content_unref),
    };
    /* While loading, a released content must not delete its file: the GC below decides. */
    g_atomic_int_set(&p->owner->live, 0);
    int rc = scan_records(&ld, p->buckets_dir, load_bucket);
    if (rc == 0)
        rc = scan_records(&ld, p->objects_dir, load_object);
    if (rc == 0) {
        /* Data files no loaded object uses: left by a crash between data and record. */
        GDir *d = g_dir_open(p->data_dir, 0, NULL);
        const char *entry;
        while (d != NULL && (entry = g_dir_read_name(d)) != NULL) {
            if (g_hash_table_contains(ld.files, entry))
                continue;
            char *path = g_build_filename(p->data_dir, entry, NULL);
            (void)unlink(path);
            g_free(path);
        }
        if (d != NULL)
            g_dir_close(d);
    }
    g_hash_table_unref(ld.files);
    g_atomic_int_set(&p->owner->live, 1);
    return rc;
}

static void remove_records(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d == NULL)
        return;
    const char *entry;
    while ((entry = g_dir_read_name(d)) != NULL) {
        char *path = g_build_filename(dir, entry, NULL);
        (void)unlink(path);
        g_free(path);
    }
    g_dir_close(d);
}

void emu_persist_reset(struct emu_persist *p)
{
    if (p == NULL)
        return;
    remove_records(p->objects_dir);
    remove_records(p->buckets_dir);
}
