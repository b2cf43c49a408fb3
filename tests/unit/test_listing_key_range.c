/* Key-range splitting: split points strictly inside the range, increasing, valid UTF-8 with no
 * NUL, for plain, unicode, hostile and narrow ranges, and density extrapolation. */
#include "test-common.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "fluxfs/key_range.h"
#include "fluxfs/listing.h"

static void check_points(const char *lo, const char *hi, char **points, size_t count)
{
    const char *previous = lo;
    for (size_t i = 0; i < count; i++) {
        ck_assert_msg(strcmp(points[i], previous) > 0, "point %zu not above the previous", i);
        if (hi)
            ck_assert_msg(strcmp(points[i], hi) < 0, "point %zu not below hi", i);
        ck_assert(g_utf8_validate(points[i], -1, NULL));
        previous = points[i];
    }
}

static size_t split(const struct key_space *space, const char *lo, const char *hi, size_t pieces,
                    char **points)
{
    size_t n = key_range_split(space, lo, hi, pieces, NULL, 0, points);
    ck_assert_uint_le(n, pieces - 1);
    check_points(lo, hi, points, n);
    return n;
}

static void free_points(char **points, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g_free(points[i]);
}

START_TEST(plain_ranges)
{
    const char *samples[] = {"d/apple", "d/banana", "d/cherry", "d/zebra"};
    struct key_space space;
    key_space_init(&space, "d/", samples, 4);
    char *points[16];
    size_t n = split(&space, "d/apple", "d0", 16, points);
    ck_assert_uint_ge(n, 8);
    free_points(points, n);
    n = split(&space, "d/a", NULL, 4, points);
    ck_assert_uint_eq(n, 3);
    free_points(points, n);
    /* Empty and inverted ranges, one piece. */
    ck_assert_uint_eq(key_range_split(&space, "d/b", "d/b", 4, NULL, 0, points), 0);
    ck_assert_uint_eq(key_range_split(&space, "d/c", "d/b", 4, NULL, 0, points), 0);
    ck_assert_uint_eq(key_range_split(&space, "d/a", "d/b", 1, NULL, 0, points), 0);
    key_space_clear(&space);
    key_space_clear(NULL);
}
END_TEST

START_TEST(narrow_ranges)
{
    struct key_space space;
    key_space_init(&space, "", NULL, 0);
    char *points[8];
    /* Nothing lies strictly between "a" and "a\x01" without a NUL byte. */
    ck_assert_uint_eq(key_range_split(&space, "a", "a\x01", 4, NULL, 0, points), 0);
    /* Ranges deeper than the space's precision are split after their common prefix. */
    char *common = g_strnfill(300, 'q');
    char *lo = g_strconcat(common, "0", NULL);
    char *hi = g_strconcat(common, "9", NULL);
    size_t n = split(&space, lo, hi, 4, points);
    ck_assert_uint_ge(n, 1);
    free_points(points, n);
    g_free(common);
    g_free(lo);
    g_free(hi);
    key_space_clear(&space);
}
END_TEST

START_TEST(unicode_and_hostile)
{
    const char *samples[] = {"p/\xe6\x97\xa5\xe6\x9c\xac", "p/\xc3\xa9t\xc3\xa9",
                             "p/\xf0\x9f\x98\x80", "p/\xff\xfe bad", "p/ %#?+"};
    struct key_space space;
    key_space_init(&space, "p/", samples, G_N_ELEMENTS(samples));
    char *points[8];
    /* Between two CJK names sharing a character. */
    size_t n = split(&space, "p/\xe6\x97\xa5\xe6\x9c\xac", "p/\xe6\x97\xa5\xe8\xaa\x9e", 4, points);
    ck_assert_uint_ge(n, 1);
    free_points(points, n);
    /* lo with invalid UTF-8 bytes; points stay valid UTF-8. */
    n = split(&space, "p/\xff\xfe bad", "p0", 4, points);
    free_points(points, n);
    n = split(&space, "p/ ", "p/\xf0\x9f\x98\x80", 8, points);
    ck_assert_uint_ge(n, 3);
    free_points(points, n);
    /* Near the top of the code point range. */
    n = split(&space, "p/\xf4\x8f\xbf\xbe", NULL, 4, points);
    free_points(points, n);
    key_space_clear(&space);
}
END_TEST

START_TEST(random_ranges_keep_invariants)
{
    const char *alphabet[] = {
        "a", "b",    "z",   "0", "9", "/", "-", " ", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
        "~", "\x7f", "\x01"};
    GRand *rand = g_rand_new_with_seed(42);
    for (int round = 0; round < 2000; round++) {
        char *words[2];
        for (int w = 0; w < 2; w++) {
            GString *s = g_string_new("k/");
            int len = g_rand_int_range(rand, 0, 12);
            for (int i = 0; i < len; i++)
                g_string_append(s, alphabet[g_rand_int_range(rand, 0, G_N_ELEMENTS(alphabet))]);
            words[w] = g_string_free(s, FALSE);
        }
        if (strcmp(words[0], words[1]) > 0) {
            char *t = words[0];
            words[0] = words[1];
            words[1] = t;
        }
        const char *samples[] = {words[0], words[1]};
        struct key_space space;
        key_space_init(&space, "k/", samples, round % 3 == 0 ? 0 : 2);
        char *points[32];
        size_t pieces = (size_t)g_rand_int_range(rand, 2, 33);
        const char *hi = round % 5 == 0 ? NULL : words[1];
        size_t n =
            key_range_split(&space, words[0], hi, pieces, round % 2 ? words[0] : NULL, 3, points);
        ck_assert_uint_le(n, pieces - 1);
        check_points(words[0], hi, points, n);
        free_points(points, n);
        key_space_clear(&space);
        g_free(words[0]);
        g_free(words[1]);
    }
    g_rand_free(rand);
}
END_TEST

START_TEST(density_extrapolation)
{
    /* The first page of "dir/%08u" names: the rest should be cut a few pages ahead, not at
     * the midpoint of the whole key space (which would hold no names at all). */
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (int i = 0; i < 1000; i++)
        g_ptr_array_add(names, g_strdup_printf("dir/%08d", i));
    struct key_space space;
    key_space_init(&space, "dir/", (const char *const *)names->pdata, names->len);
    char *points[16];
    size_t n = key_range_split(&space, "dir/00000999", "dir0", 16, "dir/00000000", 4, points);
    ck_assert_uint_ge(n, 8);
    check_points("dir/00000999", "dir0", points, n);
    /* Four pages of 999 new names each, a little under: between 3.5 and 4 pages ahead. */
    ck_assert_msg(strcmp(points[0], "dir/00004995") < 0, "first point %s too far", points[0]);
    ck_assert_msg(strcmp(points[0], "dir/00004500") > 0, "first point %s too close", points[0]);
    /* Evenly spaced: the same number of names between consecutive points. */
    for (size_t i = 1; i + 1 < n; i++) {
        long a = strtol(points[i - 1] + 4, NULL, 10), b = strtol(points[i] + 4, NULL, 10),
             c = strtol(points[i + 1] + 4, NULL, 10);
        ck_assert_int_le(labs((c - b) - (b - a)), 2);
    }
    free_points(points, n);
    /* Without the hint the even split lands far away. */
    n = key_range_split(&space, "dir/00000999", "dir0", 16, NULL, 0, points);
    ck_assert_uint_ge(n, 1);
    ck_assert(strcmp(points[0], "dir/00010000") > 0);
    free_points(points, n);
    ck_assert(key_range_width(&space, "dir/00000000", "dir/00005000") <
              key_range_width(&space, "dir/00000000", "dir/00050000"));
    key_space_clear(&space);
    g_ptr_array_free(names, TRUE);
}
END_TEST

START_TEST(prefix_end)
{
    char *end = listing_prefix_end("dir/");
    ck_assert_str_eq(end, "dir0");
    g_free(end);
    end = listing_prefix_end("a\xff");
    ck_assert_str_eq(end, "b");
    g_free(end);
    ck_assert_ptr_null(listing_prefix_end(""));
    ck_assert_ptr_null(listing_prefix_end("\xff\xff"));
}
END_TEST

TEST_SUITE(key_range_suite)
{
    Suite *s = suite_create("key_range");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, plain_ranges);
    tcase_add_test(tc, narrow_ranges);
    tcase_add_test(tc, unicode_and_hostile);
    tcase_add_test(tc, random_ranges_keep_invariants);
    tcase_add_test(tc, density_extrapolation);
    tcase_add_test(tc, prefix_end);
    suite_add_tcase(s, tc);
    return s;
}
