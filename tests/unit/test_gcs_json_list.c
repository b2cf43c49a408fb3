/* The streaming list-page parser (gcs_json_list.c) against the tree parser it replaced
 * (gcs_json_parse_list_tree): the same result, field by field, for real pages, partial
 * responses, odd but valid documents and hostile ones, plus every truncation and thousands of
 * seeded byte mutations of a page; and the cases where it is deliberately stricter. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "../../src/gcs/gcs-internal.h"

static void assert_same_object(const struct gcs_object *a, const struct gcs_object *b,
                               const char *json)
{
    ck_assert_msg(g_strcmp0(a->name, b->name) == 0, "name differs: %s", json);
    ck_assert_msg(a->size == b->size, "size differs: %s", json);
    ck_assert_msg(a->generation == b->generation, "generation differs: %s", json);
    ck_assert_msg(a->metageneration == b->metageneration, "metageneration differs: %s", json);
    ck_assert_msg(a->updated_ns == b->updated_ns, "updated differs: %s", json);
    ck_assert_msg(a->mtime_ns == b->mtime_ns, "mtime differs: %s", json);
    ck_assert_msg(a->has_crc32c == b->has_crc32c && a->crc32c == b->crc32c, "crc differs: %s",
                  json);
    ck_assert_msg(g_strcmp0(a->content_encoding, b->content_encoding) == 0,
                  "contentEncoding differs: %s", json);
    ck_assert_msg(g_strcmp0(a->symlink_target, b->symlink_target) == 0,
                  "symlink target differs: %s", json);
}

/* Both parsers on json[0..len); returns the streaming one's result after checking they agree. */
static int assert_same(const char *json, size_t len)
{
    struct gcs_list_page tree = {0}, stream = {0};
    int tree_rc = gcs_json_parse_list_tree(json, len, &tree);
    int stream_rc = gcs_json_parse_list(json, len, &stream);
    ck_assert_msg(tree_rc == stream_rc, "tree %d, streaming %d: %.*s", tree_rc, stream_rc,
                  (int)MIN(len, 300), json);
    if (stream_rc == 0) {
        ck_assert_uint_eq(tree.objects->len, stream.objects->len);
        ck_assert_uint_eq(tree.prefixes->len, stream.prefixes->len);
        for (guint i = 0; i < tree.objects->len; i++)
            assert_same_object(tree.objects->pdata[i], stream.objects->pdata[i], json);
        for (guint i = 0; i < tree.prefixes->len; i++)
            ck_assert_str_eq(tree.prefixes->pdata[i], stream.prefixes->pdata[i]);
        ck_assert_msg(g_strcmp0(tree.next_page_token, stream.next_page_token) == 0,
                      "token differs: %s", json);
    } else {
        ck_assert_ptr_null(stream.objects); /* out untouched on failure */
    }
    gcs_list_page_clear(&tree);
    gcs_list_page_clear(&stream);
    return stream_rc;
}

static int same(const char *json)
{
    return assert_same(json, strlen(json));
}

/* A page as the emulator renders it without `fields`, with metadata and escapes. */
static char *full_page(int count)
{
    GString *json = g_string_new("{\"kind\":\"storage#objects\",\"nextPageToken\":\"Q2hx\","
                                 "\"prefixes\":[\"d/a/\",\"d/\\u00e9\\\"q/\"],\"items\":[");
    for (int i = 0; i < count; i++) {
        g_string_append_printf(
            json,
            "%s{\"kind\":\"storage#object\",\"id\":\"b/d/%05d/17\",\"selfLink\":\"http://x/"
            "storage/v1/b/b/o/d%%2F%05d\",\"mediaLink\":\"http://x/download?generation=17\","
            "\"name\":\"d/%05d\\n\\u00e9\",\"bucket\":\"b\",\"generation\":\"%d\","
            "\"metageneration\":\"%d\",\"size\":\"%d\",\"contentType\":\"text/plain\","
            "%s\"storageClass\":\"STANDARD\",\"timeCreated\":\"2024-01-01T00:00:00.000Z\","
            "\"updated\":\"2024-0%d-02T03:04:05.%03dZ\",\"crc32c\":\"4waSgw==\","
            "\"md5Hash\":\"XrY7u+Ae7tCTyyK7j1rNww==\",\"etag\":\"CAE=\","
            "\"acl\":[{\"entity\":\"x\",\"role\":[1,2,{\"deep\":[[[]]]}]}],"
            "\"metadata\":{\"a\":\"1\",%s\"z\":{\"nested\":true}}}",
            i ? "," : "", i, i, i, 1000 + i, 1 + i % 3, i * 10,
            i % 4 == 0 ? "\"contentEncoding\":\"gzip\"," : "", 1 + i % 9, i % 1000,
            i % 5 == 0   ? "\"goog-reserved-file-mtime\":\"1700000000\","
            : i % 5 == 1 ? "\"gcsfuse_mtime\":\"2023-11-14T22:13:20Z\","
            : i % 5 == 2 ? "\"gcsfuse_symlink_target\":\"../t\","
            : i % 5 == 3
                ? "\"goog-reserved-file-mtime\":\"x\",\"gcsfuse_mtime\":\"2020-01-01T00:00:00Z\","
                : "");
    }
    g_string_append(json, "]}");
    return g_string_free(json, FALSE);
}

START_TEST(stream_matches_tree_on_pages)
{
    char *page = full_page(50);
    ck_assert_int_eq(same(page), 0);
    g_free(page);
    /* What the emulator sends for fluxfs's fields= selection. */
    ck_assert_int_eq(
        same("{\"nextPageToken\":\"SWZs\",\"items\":[{\"name\":\"flat/00000000\",\"generation\":"
             "\"1795263705295385\",\"metageneration\":\"1\",\"size\":\"1024\",\"updated\":"
             "\"2026-11-21T12:21:45.295Z\",\"crc32c\":\"WHA2Hw==\"},{\"name\":\"flat/1\","
             "\"generation\":\"2\",\"metageneration\":\"1\",\"size\":\"0\"}]}"),
        0);
    ck_assert_int_eq(same("{}"), 0);
    ck_assert_int_eq(same("{\"items\":[],\"prefixes\":[]}"), 0);
    ck_assert_int_eq(same("{\"items\":null,\"prefixes\":null,\"nextPageToken\":null}"), 0);
    ck_assert_int_eq(same("{\"nextPageToken\":\"\"}"), 0);
    ck_assert_int_eq(same("{\"nextPageToken\":7,\"kind\":[{}]}"), 0);
    ck_assert_int_eq(same(" /* comment */ {\"items\":[{\"name\":\"a\"}]} // tail\n"), 0);
}
END_TEST

START_TEST(stream_matches_tree_on_odd_documents)
{
    static const char *const docs[] = {
        /* duplicates: the first one counts */
        "{\"items\":[{\"name\":\"a\",\"name\":\"b\",\"size\":\"1\",\"size\":\"x\"}]}",
        "{\"items\":[{\"name\":\"a\"}],\"items\":7}",
        "{\"items\":7,\"items\":[{\"name\":\"a\"}]}",
        "{\"prefixes\":[\"p/\"],\"prefixes\":[1]}",
        "{\"nextPageToken\":\"t1\",\"nextPageToken\":\"t2\"}",
        "{\"items\":[{\"name\":\"a\",\"metadata\":{\"gcsfuse_symlink_target\":\"x\","
        "\"gcsfuse_symlink_target\":\"y\"}}]}",
        "{\"items\":[{\"name\":\"a\",\"metadata\":7,\"metadata\":{\"gcsfuse_symlink_target\":"
        "\"y\"}}]}",
        "{\"items\":[{\"name\":\"a\",\"metadata\":{\"gcsfuse_symlink_target\":5}}]}",
        /* integers as JSON numbers, nulls, odd shapes of optional members */
        "{\"items\":[{\"name\":\"a\",\"size\":12,\"generation\":-3,\"metageneration\":null}]}",
        "{\"items\":[{\"name\":\"a\",\"size\":null,\"generation\":\"+5\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"-9223372036854775808\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"9223372036854775807\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"9223372036854775808\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"-9223372036854775809\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"12\\u00003\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"\\u00003\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"+\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"-\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"0x10\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":\"\"}]}",
        "{\"items\":[{\"name\":\"a\",\"updated\":5,\"crc32c\":[1],\"contentEncoding\":{}}]}",
        "{\"items\":[{\"name\":\"a\",\"contentEncoding\":\"\"}]}",
        "{\"items\":[{\"name\":\"a\",\"contentEncoding\":\"\\u0000x\"}]}",
        "{\"items\":[{\"name\":\"a\",\"updated\":\"2024-01-01T00:00:00.1234567890123Z\"}]}",
        "{\"items\":[{\"name\":\"a\",\"metadata\":{\"goog-reserved-file-mtime\":"
        "\"99999999999999\"}}]}",
        "{\"items\":[{\"name\":\"a\",\"metadata\":{\"goog-reserved-file-mtime\":\"-5\","
        "\"gcsfuse_mtime\":\"bad\"}}]}",
        "{\"items\":[{\"name\":\"\\ud83d\\ude00 \\\"q\\\" \\\\ /\"}]}",
        "{\"other\":{\"items\":[7]},\"items\":[{\"name\":\"a\",\"x\":{\"name\":5}}]}",
        "{\"items\":[{\"name\":\"a\",\"big\":123456789012345678901234567890,\"f\":1.5e300}]}",
        /* rejected by both */
        "{\"items\":[{\"name\":\"a\",\"size\":1.0}]}",
        "{\"items\":[{\"name\":\"a\",\"size\":1e3}]}",
        "{\"items\":[{\"name\":\"a\",\"size\":9223372036854775808}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":[]}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":{}}]}",
        "{\"items\":[{\"name\":7}]}",
        "{\"items\":[{\"name\":null}]}",
        "{\"items\":[null]}",
        "{\"items\":[[]]}",
        "{\"items\":\"x\"}",
        "{\"prefixes\":{}}",
        "{\"prefixes\":[null]}",
        "{\"items\":[{\"name\":\"a\",\"size\":\" 1\"}]}",
        "{\"items\":[{\"name\":\"a\",\"updated\":\"2024-13-01T00:00:00Z\"}]}",
        "{\"items\":[{\"name\":\"a\",\"crc32c\":\"AAAAAAAA\"}]}",
        "[]",
        "\"x\"",
        "null",
        "{} {}",
        "{}}",
        "{\"a\":}",
        "{\"items\":[{\"name\":\"\\ud800\"}]}",
        "{\"items\":[{\"name\":\"\xff\"}]}",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(docs); i++)
        same(docs[i]);
}
END_TEST

START_TEST(stream_matches_tree_on_truncations_and_mutations)
{
    char *page = full_page(6);
    size_t len = strlen(page);
    for (size_t cut = 0; cut < len; cut++) {
        char *prefix = g_strndup(page, cut);
        assert_same(prefix, cut);
        g_free(prefix);
    }
    static const char alphabet[] = "{}[]\",:0123456789-+.eE \\/nultrfasx\x01\x80";
    GRand *rand = g_rand_new_with_seed(20261121);
    char *copy = g_malloc(len + 1);
    for (int round = 0; round < 4000; round++) {
        memcpy(copy, page, len + 1);
        int edits = g_rand_int_range(rand, 1, 4);
        for (int e = 0; e < edits; e++)
            copy[g_rand_int_range(rand, 0, (gint32)len)] =
                alphabet[g_rand_int_range(rand, 0, sizeof(alphabet) - 1)];
        assert_same(copy, len);
    }
    g_free(copy);
    g_rand_free(rand);
    g_free(page);
}
END_TEST

START_TEST(stream_hides_nul_names_and_refuses_deep_junk)
{
    struct gcs_list_page page = {0};
    /* A name with a NUL cannot be a path: that entry is left out, the page still counts. */
    const char *nul_name = "{\"items\":[{\"name\":\"a\"},{\"name\":\"a\\u0000b\","
                           "\"size\":\"3\"},{\"name\":\"c\"}],\"nextPageToken\":\"t\"}";
    ck_assert_int_eq(gcs_json_parse_list(nul_name, strlen(nul_name), &page), 0);
    ck_assert_uint_eq(page.objects->len, 2);
    ck_assert_str_eq(((struct gcs_object *)page.objects->pdata[0])->name, "a");
    ck_assert_str_eq(((struct gcs_object *)page.objects->pdata[1])->name, "c");
    ck_assert_uint_eq(page.impossible_names, 1);
    ck_assert_str_eq(page.next_page_token, "t");
    gcs_list_page_clear(&page);
    const char *nul_prefix = "{\"prefixes\":[\"a/\\u0000b/\",\"b/\"]}";
    ck_assert_int_eq(gcs_json_parse_list(nul_prefix, strlen(nul_prefix), &page), 0);
    ck_assert_uint_eq(page.prefixes->len, 1);
    ck_assert_str_eq(page.prefixes->pdata[0], "b/");
    ck_assert_uint_eq(page.impossible_names, 1);
    gcs_list_page_clear(&page);
    memset(&page, 0, sizeof(page));

    /* Nesting inside a skipped member: a little is fine, a lot is refused. */
    GString *deep = g_string_new("{\"x\":");
    for (int i = 0; i < 60; i++)
        g_string_append_c(deep, '[');
    for (int i = 0; i < 60; i++)
        g_string_append_c(deep, ']');
    g_string_append(deep, ",\"items\":[{\"name\":\"a\"}]}");
    ck_assert_int_eq(gcs_json_parse_list(deep->str, deep->len, &page), 0);
    ck_assert_uint_eq(page.objects->len, 1);
    gcs_list_page_clear(&page);
    g_string_assign(deep, "{\"x\":");
    for (int i = 0; i < 100000; i++)
        g_string_append_c(deep, '[');
    ck_assert_int_eq(gcs_json_parse_list(deep->str, deep->len, &page), -EIO);
    g_string_free(deep, TRUE);
}
END_TEST

TEST_SUITE(gcs_json_list_suite)
{
    Suite *s = suite_create("gcs-json-list");
    TCase *tc = tcase_create("streaming");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stream_matches_tree_on_pages);
    tcase_add_test(tc, stream_matches_tree_on_odd_documents);
    tcase_add_test(tc, stream_matches_tree_on_truncations_and_mutations);
    tcase_add_test(tc, stream_hides_nul_names_and_refuses_deep_junk);
    suite_add_tcase(s, tc);
    return s;
}
