/* Name mapping: segment validity, object name <-> path, listing entry classification, the
 * reserved root name. */
#include "test-common.h"

#include <glib.h>
#include <string.h>

#include "fluxfs/name_map.h"

START_TEST(segments)
{
    ck_assert(name_map_segment_valid("a", 1));
    ck_assert(name_map_segment_valid("...", 3));
    ck_assert(name_map_segment_valid("a b%#?+", 7));
    ck_assert(name_map_segment_valid("\xc3\xa9t\xc3\xa9", 5));
    ck_assert(!name_map_segment_valid("", 0));
    ck_assert(!name_map_segment_valid(".", 1));
    ck_assert(!name_map_segment_valid("..", 2));
    ck_assert(!name_map_segment_valid("a/b", 3));
    char long_name[300];
    memset(long_name, 'x', sizeof(long_name));
    ck_assert(name_map_segment_valid(long_name, 255));
    ck_assert(!name_map_segment_valid(long_name, 256));
}
END_TEST

START_TEST(paths)
{
    ck_assert(name_map_path_valid(""));
    ck_assert(name_map_path_valid("a/b/c"));
    ck_assert(!name_map_path_valid("a//b"));
    ck_assert(!name_map_path_valid("/a"));
    ck_assert(!name_map_path_valid("a/"));
    ck_assert(!name_map_path_valid("a/./b"));
    ck_assert(!name_map_path_valid("a/../b"));

    char *s = name_map_join("", "x");
    ck_assert_str_eq(s, "x");
    g_free(s);
    s = name_map_join("a/b", "x");
    ck_assert_str_eq(s, "a/b/x");
    g_free(s);
    s = name_map_file_object("data/", "a/b");
    ck_assert_str_eq(s, "data/a/b");
    g_free(s);
    s = name_map_dir_prefix("data/", "");
    ck_assert_str_eq(s, "data/");
    g_free(s);
    s = name_map_dir_prefix("data/", "a/b");
    ck_assert_str_eq(s, "data/a/b/");
    g_free(s);
    s = name_map_dir_prefix("", "a");
    ck_assert_str_eq(s, "a/");
    g_free(s);

    ck_assert(name_map_is_reserved("", ".fluxfs"));
    ck_assert(!name_map_is_reserved("a", ".fluxfs"));
    ck_assert(!name_map_is_reserved("", ".fluxfs2"));
}
END_TEST

static bool classify(const char *dir_prefix, const char *entry, bool is_prefix, char **child,
                     enum name_kind *kind)
{
    const char *start;
    size_t len;
    if (!name_map_classify_child(dir_prefix, entry, is_prefix, &start, &len, kind))
        return false;
    *child = g_strndup(start, len);
    return true;
}

START_TEST(classify_children)
{
    char *child = NULL;
    enum name_kind kind;
    ck_assert(classify("d/", "d/file", false, &child, &kind));
    ck_assert_str_eq(child, "file");
    ck_assert_int_eq(kind, NAME_KIND_FILE);
    g_free(child);
    ck_assert(classify("d/", "d/sub/", true, &child, &kind));
    ck_assert_str_eq(child, "sub");
    ck_assert_int_eq(kind, NAME_KIND_DIR);
    g_free(child);
    /* A placeholder one level down returned as an object. */
    ck_assert(classify("d/", "d/sub/", false, &child, &kind));
    ck_assert_str_eq(child, "sub");
    ck_assert_int_eq(kind, NAME_KIND_DIR);
    g_free(child);
    ck_assert(classify("", "top", false, &child, &kind));
    ck_assert_str_eq(child, "top");
    g_free(child);
    /* Hidden: own placeholder, empty segment, dot names, other prefixes, too long. */
    ck_assert(!classify("d/", "d/", false, &child, &kind));
    ck_assert(!classify("d/", "d//", true, &child, &kind));
    ck_assert(!classify("d/", "d/./", true, &child, &kind));
    ck_assert(!classify("d/", "d/..", false, &child, &kind));
    ck_assert(!classify("d/", "e/x", false, &child, &kind));
    char *longname = g_strnfill(256, 'z');
    char *entry = g_strconcat("d/", longname, NULL);
    ck_assert(!classify("d/", entry, false, &child, &kind));
    g_free(entry);
    g_free(longname);
}
END_TEST

START_TEST(objects_to_paths)
{
    char *path = NULL;
    bool placeholder = true;
    ck_assert(name_map_object_to_path("m/", "m/a/b/c", &path, &placeholder));
    ck_assert_str_eq(path, "a/b/c");
    ck_assert(!placeholder);
    g_free(path);
    ck_assert(name_map_object_to_path("m/", "m/a/b/", &path, &placeholder));
    ck_assert_str_eq(path, "a/b");
    ck_assert(placeholder);
    g_free(path);
    ck_assert(!name_map_object_to_path("m/", "m/", &path, &placeholder));
    ck_assert(!name_map_object_to_path("m/", "m/a//b", &path, &placeholder));
    ck_assert(!name_map_object_to_path("m/", "m/a/../b", &path, &placeholder));
    ck_assert(!name_map_object_to_path("m/", "x/a", &path, &placeholder));
    ck_assert(!name_map_object_to_path("m/", "m/.fluxfs/prefetch", &path, &placeholder));
    ck_assert(name_map_object_to_path("m/", "m/a/.fluxfs", &path, &placeholder));
    ck_assert_str_eq(path, "a/.fluxfs");
    g_free(path);
}
END_TEST

/* Cloud Storage's 1,024-byte limit on the whole object name (issue 22). */
START_TEST(object_name_limit)
{
    char *path = g_strnfill(1020, 'a');
    ck_assert(name_map_object_name_fits("pfx/", path, false)); /* 1,024 */
    ck_assert(!name_map_object_name_fits("pfx/", path, true)); /* "…/" is 1,025 */
    ck_assert(!name_map_object_name_fits("pfx/x", path, false));
    ck_assert(name_map_object_name_fits("", path, true));
    ck_assert(name_map_object_name_fits(NULL, path, false));
    g_free(path);
}
END_TEST

TEST_SUITE(name_map_suite)
{
    Suite *s = suite_create("name_map");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, segments);
    tcase_add_test(tc, paths);
    tcase_add_test(tc, classify_children);
    tcase_add_test(tc, objects_to_paths);
    tcase_add_test(tc, object_name_limit);
    suite_add_tcase(s, tc);
    return s;
}
