/* Emulator core: the data directory. Objects of every kind (memory, synthetic, composite, copy,
 * patched) survive close and reopen with the same fields and bytes; deletes, overwrites and
 * reset stay done; data files are shared, freed with their last user, and crash leftovers and
 * unreadable records are dealt with at open. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "store-internal.h"

static char *make_dir(void)
{
    char *dir = g_dir_make_tmp("emu-persist-XXXXXX", NULL);
    ck_assert_ptr_nonnull(dir);
    return dir;
}

static void remove_tree(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (d != NULL) {
        const char *entry;
        while ((entry = g_dir_read_name(d)) != NULL) {
            char *child = g_build_filename(path, entry, NULL);
            remove_tree(child);
            g_free(child);
        }
        g_dir_close(d);
    }
    (void)g_remove(path);
}

static unsigned count_files(const char *dir, const char *sub)
{
    char *path = g_build_filename(dir, sub, NULL);
    GDir *d = g_dir_open(path, 0, NULL);
    unsigned n = 0;
    while (d != NULL && g_dir_read_name(d) != NULL)
        n++;
    if (d != NULL)
        g_dir_close(d);
    g_free(path);
    return n;
}

static struct emu_store *open_at(const char *dir)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(dir, &store), 0);
    return store;
}

static struct emu_object *get(struct emu_store *store, const char *name)
{
    struct emu_object *obj = NULL;
    ck_assert_msg(emu_store_get_object(store, "b", name, 0, NULL, true, &obj) == 0, "get %s", name);
    return obj;
}

static GBytes *read_bytes(const struct emu_object *obj)
{
    uint8_t *buf = g_malloc(obj->size + 1);
    ck_assert_uint_eq(emu_object_read(obj, 0, buf, obj->size), obj->size);
    return g_bytes_new_take(buf, obj->size);
}

static void assert_same_object(const struct emu_object *a, const struct emu_object *b)
{
    ck_assert_str_eq(a->bucket, b->bucket);
    ck_assert_str_eq(a->name, b->name);
    ck_assert_int_eq(a->generation, b->generation);
    ck_assert_int_eq(a->metageneration, b->metageneration);
    ck_assert_int_eq(a->time_created_us, b->time_created_us);
    ck_assert_int_eq(a->updated_us, b->updated_us);
    ck_assert_uint_eq(a->size, b->size);
    ck_assert_uint_eq(a->crc32c, b->crc32c);
    ck_assert_int_eq(a->has_md5, b->has_md5);
    ck_assert_int_eq(memcmp(a->md5, b->md5, 16), 0);
    ck_assert_int_eq(a->component_count, b->component_count);
    ck_assert_str_eq(a->content_type, b->content_type);
    ck_assert_str_eq(a->storage_class, b->storage_class);
    ck_assert_int_eq(a->content_encoding == NULL, b->content_encoding == NULL);
    if (a->content_encoding != NULL)
        ck_assert_str_eq(a->content_encoding, b->content_encoding);
    ck_assert_uint_eq(g_hash_table_size(a->metadata), g_hash_table_size(b->metadata));
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, a->metadata);
    while (g_hash_table_iter_next(&iter, &key, &value))
        ck_assert_str_eq(g_hash_table_lookup(b->metadata, key), value);
    GBytes *ba = read_bytes(a), *bb = read_bytes(b);
    ck_assert(g_bytes_equal(ba, bb));
    ck_assert_uint_eq(b->crc32c, crc32c_update(0, g_bytes_get_data(bb, NULL), b->size));
    g_bytes_unref(ba);
    g_bytes_unref(bb);
}

static struct emu_content *text_content(const char *text)
{
    return emu_content_new_bytes(g_bytes_new(text, strlen(text)));
}

START_TEST(persist_round_trip)
{
    char *dir = make_dir();
    struct emu_store *store = open_at(dir);
    GHashTable *meta = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(meta, "key with space", "value\nwith newline");
    struct emu_object_attrs attrs = {
        .metadata = meta, .content_type = "text/plain", .content_encoding = "gzip"};
    const char *names[] = {"plain", "dir/sub/x y", "\xc3\xa9t\xc3\xa9 #?%+"};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
        ck_assert_int_eq(
            emu_store_put_object(store, "b", names[i], text_content(names[i]), &attrs, NULL, NULL),
            0);
    ck_assert_uint_eq(count_files(dir, "data"), 3);
    /* Synthetic content is stored by description: no data file. */
    ck_assert_int_eq(emu_store_put_object(store, "b", "synthetic",
                                          emu_content_new_synthetic("s", 5, 6, 123457), NULL, NULL,
                                          NULL),
                     0);
    ck_assert_uint_eq(count_files(dir, "data"), 3);
    struct emu_compose_source srcs[] = {
        {.name = "plain"}, {.name = "synthetic"}, {.name = "dir/sub/x y"}};
    ck_assert_int_eq(emu_store_compose(store, "b", "composite", srcs, 3, NULL, NULL, NULL), 0);
    ck_assert_int_eq(
        emu_store_copy_object(store, "b", "composite", 0, "b", "copy", NULL, NULL, NULL, NULL), 0);
    ck_assert_uint_eq(count_files(dir, "data"), 3); /* compose and copy wrote no bytes */
    struct emu_object_attrs patch = {.content_language = "fr",
                                     .has_custom_time = true,
                                     .custom_time_us = INT64_C(1700000000123000),
                                     .has_event_based_hold = true,
                                     .event_based_hold = true};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "copy", 0, &patch, false, NULL, NULL), 0);
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "deleted", text_content("gone"), NULL, NULL, NULL), 0);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "deleted", 0, NULL), 0);
    ck_assert_int_eq(emu_store_bucket_insert(store, "empty-bucket"), 0);
    ck_assert_int_eq(emu_store_bucket_insert(store, "gone-bucket"), 0);
    ck_assert_int_eq(emu_store_bucket_delete(store, "gone-bucket"), 0);
    ck_assert_int_eq(emu_store_populate(store, "b", "pop/", 10, 10, 1), 0);

    const char *kept[] = {"plain",     "dir/sub/x y", "\xc3\xa9t\xc3\xa9 #?%+",
                          "synthetic", "composite",   "copy"};
    struct emu_object *before[G_N_ELEMENTS(kept)];
    for (size_t i = 0; i < G_N_ELEMENTS(kept); i++)
        before[i] = get(store, kept[i]);
    emu_store_close(store);
    /* Closing keeps the files even though the objects were released. */
    ck_assert_uint_eq(count_files(dir, "data"), 3);

    store = open_at(dir);
    int64_t max_generation = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(kept); i++) {
        struct emu_object *after = get(store, kept[i]);
        assert_same_object(before[i], after);
        max_generation = MAX(max_generation, after->generation);
        emu_object_unref(after);
    }
    struct emu_object *copy = get(store, "copy");
    ck_assert_str_eq(copy->content_language, "fr");
    ck_assert_int_eq(copy->custom_time_us, INT64_C(1700000000123000));
    ck_assert(copy->event_based_hold);
    ck_assert(!copy->temporary_hold);
    ck_assert_int_eq(copy->metageneration, 2);
    ck_assert_int_eq(copy->component_count, 3);
    ck_assert(!copy->has_md5);
    emu_object_unref(copy);
    ck_assert_int_eq(emu_store_get_object(store, "b", "deleted", 0, NULL, true, NULL), -ENOENT);
    ck_assert_int_eq(emu_store_get_object(store, "b", "pop/00000001", 0, NULL, true, NULL),
                     -ENOENT);
    struct emu_bucket_info info;
    ck_assert_int_eq(emu_store_bucket_get(store, "empty-bucket", &info), 0);
    emu_bucket_info_clear(&info);
    ck_assert_int_eq(emu_store_bucket_get(store, "gone-bucket", &info), -ENOENT);
    /* New generations continue after the loaded ones. */
    struct emu_object *next = NULL;
    ck_assert_int_eq(emu_store_put_object(store, "b", "next", text_content("n"), NULL, NULL, &next),
                     0);
    ck_assert_int_gt(next->generation, max_generation);
    emu_object_unref(next);
    /* Listing sees the loaded objects in order. */
    struct emu_list_request req = {.delimiter = "/"};
    struct emu_list_result res;
    ck_assert_int_eq(emu_store_list(store, "b", &req, &res), 0);
    ck_assert_uint_eq(res.items->len, 6);
    ck_assert_uint_eq(res.prefixes->len, 1);
    emu_list_result_clear(&res);

    for (size_t i = 0; i < G_N_ELEMENTS(kept); i++)
        emu_object_unref(before[i]);
    g_hash_table_unref(meta);
    emu_store_close(store);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(persist_overwrite_delete_and_reset_free_files)
{
    char *dir = make_dir();
    struct emu_store *store = open_at(dir);
    ck_assert_int_eq(emu_store_put_object(store, "b", "o", text_content("first"), NULL, NULL, NULL),
                     0);
    struct emu_object *held = get(store, "o");
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "o", text_content("second"), NULL, NULL, NULL), 0);
    /* The old file stays while a reader holds the old version, then goes. */
    ck_assert_uint_eq(count_files(dir, "data"), 2);
    GBytes *old = read_bytes(held);
    ck_assert_int_eq(memcmp(g_bytes_get_data(old, NULL), "first", 5), 0);
    g_bytes_unref(old);
    emu_object_unref(held);
    ck_assert_uint_eq(count_files(dir, "data"), 1);

    /* A copy shares the file: deleting the source keeps it. */
    ck_assert_int_eq(emu_store_copy_object(store, "b", "o", 0, "b", "c", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "o", 0, NULL), 0);
    ck_assert_uint_eq(count_files(dir, "data"), 1);
    ck_assert_uint_eq(count_files(dir, "objects"), 1);
    emu_store_close(store);

    store = open_at(dir);
    struct emu_object *c = get(store, "c");
    GBytes *bytes = read_bytes(c);
    ck_assert_int_eq(memcmp(g_bytes_get_data(bytes, NULL), "second", 6), 0);
    g_bytes_unref(bytes);
    emu_object_unref(c);
    emu_store_reset(store);
    ck_assert_uint_eq(count_files(dir, "data"), 0);
    ck_assert_uint_eq(count_files(dir, "objects"), 0);
    ck_assert_uint_eq(count_files(dir, "buckets"), 0);
    emu_store_close(store);

    store = open_at(dir);
    GPtrArray *buckets = emu_store_bucket_list(store);
    ck_assert_uint_eq(buckets->len, 0);
    g_ptr_array_unref(buckets);
    emu_store_close(store);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(persist_crash_leftovers)
{
    char *dir = make_dir();
    struct emu_store *store = open_at(dir);
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "good", text_content("good"), NULL, NULL, NULL), 0);
    emu_store_close(store);
    /* An orphan data file, an interrupted record write and a record that is garbage. */
    char *orphan = g_build_filename(dir, "data", "orphan.bin", NULL);
    char *tmp = g_build_filename(dir, "objects", "abc.meta.tmp", NULL);
    char *garbage = g_build_filename(dir, "objects", "garbage.meta", NULL);
    ck_assert(g_file_set_contents(orphan, "x", 1, NULL));
    ck_assert(g_file_set_contents(tmp, "partial", 7, NULL));
    ck_assert(g_file_set_contents(garbage, "\x01\x02not a record", 14, NULL));
    store = open_at(dir);
    ck_assert(!g_file_test(orphan, G_FILE_TEST_EXISTS));
    ck_assert(!g_file_test(tmp, G_FILE_TEST_EXISTS));
    ck_assert_uint_eq(count_files(dir, "data"), 1);
    struct emu_object *obj = get(store, "good");
    ck_assert_uint_eq(obj->size, 4);
    emu_object_unref(obj);
    emu_store_close(store);
    g_free(orphan);
    g_free(tmp);
    g_free(garbage);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(persist_populate_replaces_record)
{
    char *dir = make_dir();
    struct emu_store *store = open_at(dir);
    ck_assert_int_eq(emu_store_put_object(store, "b", "pop/00000001", text_content("recorded"),
                                          NULL, NULL, NULL),
                     0);
    ck_assert_uint_eq(count_files(dir, "objects"), 1);
    ck_assert_int_eq(emu_store_populate(store, "b", "pop/", 3, 100, 1), 0);
    ck_assert_uint_eq(count_files(dir, "objects"), 0);
    ck_assert_uint_eq(count_files(dir, "data"), 0);
    struct emu_object *obj = get(store, "pop/00000001");
    ck_assert_uint_eq(obj->size, 100);
    emu_object_unref(obj);
    emu_store_close(store);
    store = open_at(dir);
    ck_assert_int_eq(emu_store_get_object(store, "b", "pop/00000001", 0, NULL, true, NULL),
                     -ENOENT);
    emu_store_close(store);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(persist_open_fails_cleanly)
{
    struct emu_store *store = NULL;
    ck_assert_int_lt(emu_store_open("/proc/version/not-a-dir", &store), 0);
    ck_assert_ptr_null(store);
}
END_TEST

TEST_SUITE(emulator_persist_suite)
{
    Suite *s = suite_create("emulator-persist");
    TCase *tc = tcase_create("persist");
    tcase_set_timeout(tc, 120); /* generous: the machine is shared with parallel builds */
    tcase_add_test(tc, persist_round_trip);
    tcase_add_test(tc, persist_overwrite_delete_and_reset_free_files);
    tcase_add_test(tc, persist_crash_leftovers);
    tcase_add_test(tc, persist_populate_replaces_record);
    tcase_add_test(tc, persist_open_fails_cleanly);
    suite_add_tcase(s, tc);
    return s;
}
