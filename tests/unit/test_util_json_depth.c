/* JSON nesting depth (fluxfs/json_depth.h) and every tree parse that relies on it: a body nested
 * far deeper than JSON_DEPTH_MAX (a hostile server, a broken key file) is refused cleanly,
 * never a stack overflow in yajl_tree_free. Check forks each test, so a crash fails it. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "fluxfs/auth.h"
#include "fluxfs/json_depth.h"
#include "../../src/gcs/gcs-internal.h"

/* Deep enough that a recursive free overflows an 8 MiB stack: {"error": [[[...]]]}. */
#define HOSTILE_LEVELS 400000

static char *nested(const char *head, unsigned levels, const char *tail)
{
    GString *text = g_string_new(head);
    for (unsigned i = 0; i < levels; i++)
        g_string_append_c(text, '[');
    for (unsigned i = 0; i < levels; i++)
        g_string_append_c(text, ']');
    g_string_append(text, tail);
    return g_string_free(text, FALSE);
}

static bool within(const char *text, unsigned max)
{
    return json_depth_within(text, strlen(text), max);
}

START_TEST(depth_counts_brackets_and_braces)
{
    ck_assert(within("", 0));
    ck_assert(within("17", 0));
    ck_assert(!within("{}", 0));
    ck_assert(within("{}", 1));
    ck_assert(within("{\"a\":[1,{\"b\":2}],\"c\":[]}", 3));
    ck_assert(!within("{\"a\":[1,{\"b\":2}],\"c\":[]}", 2));
    /* Siblings do not add up; closing brackets bring the depth down. */
    ck_assert(within("[[],[],[[]],[]]", 3));
    ck_assert(!within("[[],[],[[[]]],[]]", 3));
    char *deep = nested("", JSON_DEPTH_MAX, "");
    ck_assert(json_depth_within(deep, strlen(deep), JSON_DEPTH_MAX));
    ck_assert(!json_depth_within(deep, strlen(deep), JSON_DEPTH_MAX - 1));
    /* Only the first len bytes count. */
    ck_assert(json_depth_within(deep, 3, 3));
    ck_assert(!json_depth_within(deep, 4, 3));
    g_free(deep);
}
END_TEST

START_TEST(depth_ignores_strings_and_comments)
{
    ck_assert(within("{\"[[[[\":\"{{{{\"}", 1));
    ck_assert(within("{\"a\\\"[[[\":1}", 1)); /* an escaped quote stays in the string */
    ck_assert(within("{\"a\\\\\":[1]}", 2));  /* an escaped backslash ends before " */
    ck_assert(!within("{\"a\\\\\":[[1]]}", 2));
    ck_assert(within("/* [[[[ */ {\"a\": 1} // [[[[\n", 1));
    ck_assert(!within("/* [[[[ */ {\"a\": [1]} // [[[[\n", 1));
    /* Unterminated strings and comments end the scan without reading past len. */
    ck_assert(within("[\"[[[[", 1));
    ck_assert(within("[/* [[[[", 1));
    ck_assert(within("[\"\\", 1));
    /* Unbalanced closers do not go below zero. */
    ck_assert(!within("]]]][[", 1));
}
END_TEST

START_TEST(gcs_parsers_refuse_hostile_nesting)
{
    char *hostile = nested("{\"error\":", HOSTILE_LEVELS, "}");
    size_t len = strlen(hostile);
    struct gcs_object obj = {0};
    ck_assert_int_eq(gcs_json_parse_object(hostile, len, &obj), -EIO);
    ck_assert_ptr_null(gcs_json_error_message(hostile, len));
    bool done = false;
    char *token = NULL;
    struct gcs_object resource = {0};
    ck_assert_int_lt(gcs_json_parse_rewrite(hostile, len, &done, &token, &resource), 0);
    GPtrArray *granted = NULL;
    ck_assert_int_lt(gcs_json_parse_permissions(hostile, len, &granted), 0);
    struct gcs_list_page page = {0};
    ck_assert_int_lt(gcs_json_parse_list(hostile, len, &page), 0);
    g_free(hostile);

    /* An object with an unknown member nested within the limit still parses. */
    char *fine = nested(
        "{\"name\":\"a\",\"size\":\"1\",\"generation\":\"2\",\"x\":", JSON_DEPTH_MAX - 1, "}");
    ck_assert_int_eq(gcs_json_parse_object(fine, strlen(fine), &obj), 0);
    ck_assert_str_eq(obj.name, "a");
    gcs_object_clear(&obj);
    g_free(fine);
}
END_TEST

START_TEST(key_file_refuses_hostile_nesting)
{
    char *dir = g_dir_make_tmp("fluxfs-key-XXXXXX", NULL);
    ck_assert_ptr_nonnull(dir);
    char *path = g_build_filename(dir, "key.json", NULL);
    char *hostile = nested("{\"type\":", HOSTILE_LEVELS, "}");
    ck_assert(g_file_set_contents(path, hostile, -1, NULL));
    struct auth_config config = {.key_file = path};
    struct auth_provider *provider = NULL;
    char *error = NULL;
    ck_assert_int_eq(auth_provider_new(&config, NULL, &provider, &error), -EINVAL);
    ck_assert_ptr_null(provider);
    ck_assert_ptr_nonnull(strstr(error, "nests JSON more than"));
    g_free(error);
    g_unlink(path);
    g_rmdir(dir);
    g_free(hostile);
    g_free(path);
    g_free(dir);
}
END_TEST

TEST_SUITE(json_depth_suite)
{
    Suite *s = suite_create("json_depth");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, depth_counts_brackets_and_braces);
    tcase_add_test(tc, depth_ignores_strings_and_comments);
    tcase_add_test(tc, gcs_parsers_refuse_hostile_nesting);
    tcase_add_test(tc, key_file_refuses_hostile_nesting);
    suite_add_tcase(s, tc);
    return s;
}
