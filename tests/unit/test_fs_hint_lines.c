/* The hint-file parser (src/fs/hint_lines.c): lines in any write pieces, normalization, long
 * lines dropped whole. */
#include "test-common.h"

#include <glib.h>
#include <string.h>

#include "../../src/fs/hint_lines.h"

static void collect(const char *path, void *user)
{
    g_ptr_array_add(user, g_strdup(path));
}

/* Parses text written in pieces of `step` bytes (0 = one write). */
static GPtrArray *parse(const char *text, size_t size, size_t step)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    struct hint_lines parser;
    hint_lines_init(&parser, "/mnt/data");
    for (size_t at = 0; at < size;) {
        size_t n = step ? MIN(step, size - at) : size - at;
        hint_lines_feed(&parser, text + at, n, collect, paths);
        at += n;
    }
    hint_lines_finish(&parser, collect, paths);
    hint_lines_clear(&parser);
    return paths;
}

START_TEST(lines_and_normalization)
{
    static const char text[] = "/mnt/data/train/a.jpg\r\n./b/c.jpg\n\n//d//\n/mnt/database/x\n"
                               "e f\0g\n/mnt/data\n/mnt/data/\nlast";
    static const char *want[] = {"train/a.jpg", "b/c.jpg",  "d",   "mnt/database/x", "e f", "g",
                                 "mnt/data",    "mnt/data", "last"};
    for (size_t step = 0; step < 8; step++) {
        GPtrArray *paths = parse(text, sizeof(text) - 1, step);
        ck_assert_uint_eq(paths->len, G_N_ELEMENTS(want));
        for (guint i = 0; i < paths->len; i++)
            ck_assert_str_eq(paths->pdata[i], want[i]);
        g_ptr_array_free(paths, TRUE);
    }
}
END_TEST

START_TEST(long_lines_are_dropped_whole)
{
    GString *text = g_string_new("ok1\n");
    for (int i = 0; i < HINT_LINE_MAX + 10; i++)
        g_string_append_c(text, 'x');
    g_string_append(text, "\nok2\n");
    for (int i = 0; i < HINT_LINE_MAX; i++)
        g_string_append_c(text, 'y'); /* exactly the limit: kept */
    g_string_append(text, "\n");
    GPtrArray *paths = parse(text->str, text->len, 1000);
    ck_assert_uint_eq(paths->len, 3);
    ck_assert_str_eq(paths->pdata[0], "ok1");
    ck_assert_str_eq(paths->pdata[1], "ok2");
    ck_assert_uint_eq(strlen(paths->pdata[2]), HINT_LINE_MAX);
    g_ptr_array_free(paths, TRUE);
    g_string_free(text, TRUE);
}
END_TEST

TEST_SUITE(hint_lines_suite)
{
    Suite *s = suite_create("hint_lines");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, lines_and_normalization);
    tcase_add_test(tc, long_lines_are_dropped_whole);
    suite_add_tcase(s, tc);
    return s;
}
