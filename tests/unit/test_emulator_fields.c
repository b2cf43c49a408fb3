/* The emulator's `fields` parameter (partial responses): the selection grammar, merging of
 * overlapping selections, wildcards, and what is refused. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fields.h"

static bool selects(const struct emu_fields *fields, const char *path)
{
    char **names = g_strsplit(path, "/", -1);
    const struct emu_fields *node = fields;
    bool ok = true;
    for (char **name = names; *name && ok; name++)
        ok = emu_fields_select(node, *name, &node);
    g_strfreev(names);
    return ok;
}

START_TEST(fields_absent_selects_everything)
{
    struct emu_fields *fields = (struct emu_fields *)1;
    ck_assert_int_eq(emu_fields_parse(NULL, &fields), 0);
    ck_assert_ptr_null(fields);
    ck_assert_int_eq(emu_fields_parse("", &fields), 0);
    ck_assert_ptr_null(fields);
    ck_assert(selects(NULL, "anything/at/all"));
}
END_TEST

START_TEST(fields_list_selection)
{
    struct emu_fields *fields = NULL;
    ck_assert_int_eq(emu_fields_parse("nextPageToken,prefixes,items(name,size,generation,"
                                      "metageneration,updated,crc32c,contentEncoding,metadata)",
                                      &fields),
                     0);
    ck_assert(selects(fields, "nextPageToken"));
    ck_assert(selects(fields, "prefixes"));
    ck_assert(!selects(fields, "kind"));
    ck_assert(selects(fields, "items"));
    ck_assert(selects(fields, "items/name"));
    ck_assert(selects(fields, "items/contentEncoding"));
    ck_assert(!selects(fields, "items/selfLink"));
    ck_assert(!selects(fields, "items/kind"));
    /* metadata selected whole: every key inside it */
    ck_assert(selects(fields, "items/metadata/any-key"));
    const struct emu_fields *inner = NULL;
    ck_assert(emu_fields_select(fields, "items", &inner));
    ck_assert_ptr_nonnull(inner);
    ck_assert(emu_fields_select(inner, "metadata", &inner));
    ck_assert_ptr_null(inner);
    emu_fields_free(fields);
}
END_TEST

START_TEST(fields_paths_wildcards_and_merging)
{
    struct emu_fields *fields = NULL;
    ck_assert_int_eq(emu_fields_parse("items/metadata/owner,items(name),kind", &fields), 0);
    ck_assert(selects(fields, "items/name"));
    ck_assert(selects(fields, "items/metadata/owner"));
    ck_assert(!selects(fields, "items/metadata/other"));
    ck_assert(!selects(fields, "items/size"));
    ck_assert(selects(fields, "kind"));
    emu_fields_free(fields);

    /* A whole selection wins over a narrower one, in either order. */
    ck_assert_int_eq(emu_fields_parse("items(name),items", &fields), 0);
    ck_assert(selects(fields, "items/size"));
    emu_fields_free(fields);
    ck_assert_int_eq(emu_fields_parse("items,items(name),items/size/x", &fields), 0);
    ck_assert(selects(fields, "items/selfLink"));
    emu_fields_free(fields);

    ck_assert_int_eq(emu_fields_parse("items(*),nextPageToken", &fields), 0);
    ck_assert(selects(fields, "items/selfLink"));
    ck_assert(!selects(fields, "prefixes"));
    emu_fields_free(fields);

    ck_assert_int_eq(emu_fields_parse("items(name,metadata(a,b)), prefixes", &fields), 0);
    ck_assert(selects(fields, "items/metadata/a"));
    ck_assert(!selects(fields, "items/metadata/c"));
    ck_assert(selects(fields, "prefixes"));
    emu_fields_free(fields);
}
END_TEST

START_TEST(fields_refused)
{
    static const char *const bad[] = {
        ",",
        "a,",
        ",a",
        "a//b",
        "a/",
        "/a",
        "a(",
        "a()",
        "a(b",
        "a)",
        "a(b))",
        "(a)",
        "a(b)c",
        "a((b))",
        "a/b/c/d/e/f/g/h/i",
        "a(b(c(d(e(f(g(h(i)))))))))",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        struct emu_fields *fields = NULL;
        ck_assert_msg(emu_fields_parse(bad[i], &fields) == -EINVAL, "accepted '%s'", bad[i]);
        ck_assert_ptr_null(fields);
    }
    char *long_text = g_strnfill(EMU_FIELDS_MAX_LEN + 1, 'a');
    struct emu_fields *fields = NULL;
    ck_assert_int_eq(emu_fields_parse(long_text, &fields), -EINVAL);
    g_free(long_text);
}
END_TEST

TEST_SUITE(emulator_fields_suite)
{
    Suite *s = suite_create("emulator-fields");
    TCase *tc = tcase_create("fields");
    tcase_add_test(tc, fields_absent_selects_everything);
    tcase_add_test(tc, fields_list_selection);
    tcase_add_test(tc, fields_paths_wildcards_and_merging);
    tcase_add_test(tc, fields_refused);
    suite_add_tcase(s, tc);
    return s;
}
