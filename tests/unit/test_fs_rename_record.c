/* The intent record of a directory rename (src/fs/rename_record.c): any object name survives
 * the round trip; torn, foreign or inconsistent records are refused with a reason. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "../../src/fs/rename_record.h"

static GString *sample(void)
{
    struct rename_record record;
    rename_record_init(&record);
    record.source = g_strdup("p/a b/");
    record.dest = g_strdup("p/\xc3\xa9t\xc3\xa9/");
    record.origin = g_strdup("host pid 42");
    rename_record_add(&record, "", 7); /* the placeholder */
    rename_record_add(&record, "x", 1700000000000001);
    rename_record_add(&record, "sub/with space\tand\\\"q\"", 3);
    rename_record_add(&record, "end", 4); /* a file named like the end line */
    rename_record_add(&record, "new\nline\r", 5);
    GString *text = rename_record_format(&record);
    rename_record_clear(&record);
    return text;
}

START_TEST(round_trip)
{
    GString *text = sample();
    struct rename_record back;
    char *error = NULL;
    ck_assert_int_eq(rename_record_parse(text->str, text->len, &back, &error), 0);
    ck_assert_ptr_null(error);
    ck_assert_str_eq(back.source, "p/a b/");
    ck_assert_str_eq(back.dest, "p/\xc3\xa9t\xc3\xa9/");
    ck_assert_str_eq(back.origin, "host pid 42");
    ck_assert_uint_eq(back.entries->len, 5);
    static const char *names[] = {"", "x", "sub/with space\tand\\\"q\"", "end", "new\nline\r"};
    static const int64_t generations[] = {7, 1700000000000001, 3, 4, 5};
    for (guint i = 0; i < back.entries->len; i++) {
        const struct rename_record_entry *entry = g_ptr_array_index(back.entries, i);
        ck_assert_str_eq(entry->name, names[i]);
        ck_assert_int_eq(entry->generation, generations[i]);
    }
    rename_record_clear(&back);
    ck_assert(g_str_has_prefix(text->str, RENAME_RECORD_MAGIC "\nsource p/a b/\n"));
    ck_assert(g_str_has_suffix(text->str, "\nend\n"));
    g_string_free(text, TRUE);
}
END_TEST

static void expect_refused(const char *text, size_t len, const char *why)
{
    struct rename_record record;
    char *error = NULL;
    ck_assert_int_eq(rename_record_parse(text, len, &record, &error), -EINVAL);
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(strstr(error, why) != NULL, "'%s' lacks '%s'", error, why);
    ck_assert_ptr_null(record.entries);
    g_free(error);
}

START_TEST(bad_records_are_refused)
{
    GString *text = sample();
    /* Torn: any prefix of the record short of its end line. */
    for (size_t cut = 0; cut + 4 < text->len; cut += 7)
        expect_refused(text->str, cut, cut < 16 ? "not a rename record" : "");
    expect_refused(text->str, text->len - 4, "torn");
    GString *extra = g_string_new(text->str);
    g_string_append(extra, "more\n");
    expect_refused(extra->str, extra->len, "after the end");
    g_string_free(extra, TRUE);
    static const char no_slash[] =
        RENAME_RECORD_MAGIC "\nsource a\ndest b/\norigin \ncount 0\nend\n";
    expect_refused(no_slash, sizeof(no_slash) - 1, "ending in '/'");
    static const char count[] = RENAME_RECORD_MAGIC "\nsource a/\ndest b/\norigin \ncount 2\n"
                                                    "1 x\nend\n";
    expect_refused(count, sizeof(count) - 1, "count");
    static const char generation[] = RENAME_RECORD_MAGIC "\nsource a/\ndest b/\norigin \n"
                                                         "count 1\n0 x\nend\n";
    expect_refused(generation, sizeof(generation) - 1, "no generation");
    static const char cut[] = RENAME_RECORD_MAGIC "\nsource a/\ndest b/\norigin \ncount 1\n"
                                                  "1 x\\\nend\n";
    expect_refused(cut, sizeof(cut) - 1, "cut escape");
    static const char nul[] = RENAME_RECORD_MAGIC "\nsource a/\0\n";
    expect_refused(nul, sizeof(nul) - 1, "NUL");
    static const char empty[] = RENAME_RECORD_MAGIC "\nsource a/\ndest b/\norigin \ncount 0\n"
                                                    "end\n\n";
    struct rename_record record;
    char *error = NULL;
    ck_assert_int_eq(rename_record_parse(empty, sizeof(empty) - 1, &record, &error), 0);
    ck_assert_uint_eq(record.entries->len, 0);
    rename_record_clear(&record);
    g_string_free(text, TRUE);
}
END_TEST

TEST_SUITE(rename_record_suite)
{
    Suite *s = suite_create("rename_record");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, bad_records_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
