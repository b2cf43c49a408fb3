/* gcs_json_scan (the hand-written scanner behind list pages) against yajl, the parser it
 * replaced on that path: for every document, both accept or both reject, and when they accept
 * they report the same events with the same decoded text. Documents: real list pages, every
 * JSON escape and unicode form (surrogate pairs, lone and mismatched surrogates, NUL), raw
 * UTF-8 of every length and broken UTF-8, numbers, literals, whitespace and comments, every
 * truncation of a page, tens of thousands of seeded byte mutations, random documents, deep
 * nesting. Then the list-page parse built on it against the same parse driven by yajl. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "../../src/gcs/gcs-internal.h"

/* ---- event traces ---- */

struct trace {
    GString *events;
    int cancel_at; /* cancel on this event number (1-based); 0 = never */
    int count;
};

static int record(struct trace *t, char kind, const void *text, size_t len)
{
    g_string_append_c(t->events, kind);
    if (text) {
        g_string_append_printf(t->events, "%zu:", len);
        g_string_append_len(t->events, text, (gssize)len);
    }
    g_string_append_c(t->events, '|');
    return ++t->count != t->cancel_at;
}

static int on_null(void *ctx)
{
    return record(ctx, 'n', NULL, 0);
}
static int on_boolean(void *ctx, int value)
{
    return record(ctx, value ? 'T' : 'F', NULL, 0);
}
static int on_number(void *ctx, const char *text, size_t len)
{
    return record(ctx, '#', text, len);
}
static int on_string(void *ctx, const unsigned char *text, size_t len)
{
    return record(ctx, 's', text, len);
}
static int on_start_map(void *ctx)
{
    return record(ctx, '{', NULL, 0);
}
static int on_key(void *ctx, const unsigned char *text, size_t len)
{
    return record(ctx, 'k', text, len);
}
static int on_end_map(void *ctx)
{
    return record(ctx, '}', NULL, 0);
}
static int on_start_array(void *ctx)
{
    return record(ctx, '[', NULL, 0);
}
static int on_end_array(void *ctx)
{
    return record(ctx, ']', NULL, 0);
}

static const yajl_callbacks recorder = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

/* yajl as gcs_json_parse_list_yajl drives it: 0 ok, -1 error, -2 cancelled. */
static int yajl_run(const char *json, size_t len, struct trace *t)
{
    yajl_handle handle = yajl_alloc(&recorder, NULL, t);
    yajl_config(handle, yajl_allow_comments, 1);
    yajl_status status = yajl_parse(handle, (const unsigned char *)json, len);
    if (status == yajl_status_ok)
        status = yajl_complete_parse(handle);
    yajl_free(handle);
    return status == yajl_status_ok                ? GCS_JSON_SCAN_OK
           : status == yajl_status_client_canceled ? GCS_JSON_SCAN_CANCELED
                                                   : GCS_JSON_SCAN_ERROR;
}

static unsigned compared, accepted;

/* Both parsers on json[0..len): the same verdict, and the same events when accepted. */
static int assert_scan_same(const char *json, size_t len)
{
    struct trace a = {.events = g_string_new(NULL)}, b = {.events = g_string_new(NULL)};
    int want = yajl_run(json, len, &a);
    int got = gcs_json_scan(json, len, &recorder, &b);
    ck_assert_msg(want == got, "yajl %d, scanner %d on [%zu] %.*s", want, got, len,
                  (int)MIN(len, 200), json);
    if (want == GCS_JSON_SCAN_OK) {
        ck_assert_msg(a.events->len == b.events->len &&
                          memcmp(a.events->str, b.events->str, a.events->len) == 0,
                      "events differ on %.*s:\nyajl    %.*s\nscanner %.*s", (int)MIN(len, 200),
                      json, (int)MIN(a.events->len, 400), a.events->str,
                      (int)MIN(b.events->len, 400), b.events->str);
        accepted++;
    }
    compared++;
    g_string_free(a.events, TRUE);
    g_string_free(b.events, TRUE);
    return got;
}

static int scan_same(const char *json)
{
    return assert_scan_same(json, strlen(json));
}

/* ---- list pages through both drivers ---- */

static void assert_same_object(const struct gcs_object *a, const struct gcs_object *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert(a->size == b->size && a->generation == b->generation &&
              a->metageneration == b->metageneration && a->updated_ns == b->updated_ns &&
              a->mtime_ns == b->mtime_ns && a->has_crc32c == b->has_crc32c &&
              a->crc32c == b->crc32c);
    ck_assert(g_strcmp0(a->content_encoding, b->content_encoding) == 0);
    ck_assert(g_strcmp0(a->symlink_target, b->symlink_target) == 0);
}

static int assert_page_same(const char *json, size_t len)
{
    struct gcs_list_page want = {0}, got = {0};
    int want_rc = gcs_json_parse_list_yajl(json, len, &want);
    int got_rc = gcs_json_parse_list(json, len, &got);
    ck_assert_msg(want_rc == got_rc, "yajl %d, scanner %d on %.*s", want_rc, got_rc,
                  (int)MIN(len, 200), json);
    if (got_rc == 0) {
        ck_assert_uint_eq(want.objects->len, got.objects->len);
        ck_assert_uint_eq(want.prefixes->len, got.prefixes->len);
        for (guint i = 0; i < want.objects->len; i++)
            assert_same_object(want.objects->pdata[i], got.objects->pdata[i]);
        for (guint i = 0; i < want.prefixes->len; i++)
            ck_assert_str_eq(want.prefixes->pdata[i], got.prefixes->pdata[i]);
        ck_assert(g_strcmp0(want.next_page_token, got.next_page_token) == 0);
    } else {
        ck_assert_ptr_null(got.objects);
    }
    gcs_list_page_clear(&want);
    gcs_list_page_clear(&got);
    return got_rc;
}

/* Both comparisons; the page parse needs NUL-terminated text of len bytes. */
static void assert_both(const char *json, size_t len)
{
    assert_scan_same(json, len);
    char *copy = g_strndup(json, len);
    if (strlen(copy) == len)
        assert_page_same(copy, len);
    g_free(copy);
}

/* A page as the emulator renders it for fluxfs's fields= selection, with hostile names. */
static char *list_page(int count, unsigned seed)
{
    static const char *const name_parts[] = {
        "img_000123.jpg",
        " ",
        "%",
        "#",
        "?",
        "+",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b\\f\\n\\r\\t",
        "\\u00e9",
        "\\u00E9",
        "\xc3\xa9",
        "\xe6\x97\xa5\xe6\x9c\xac",
        "\\u65e5",
        "\xf0\x9f\x98\x80",
        "\\ud83d\\ude00",
        "\\uD83D\\uDE00",
        "\x7f",
        "..",
        "a//b",
        "/",
        "\\u0041",
        "~!@$&*()=",
    };
    GRand *rand = g_rand_new_with_seed(seed);
    GString *json = g_string_new("{\"nextPageToken\":\"Q2hCa2FYSXZNREF3TURBd01USXo=\","
                                 "\"prefixes\":[\"d/a/\",\"d/\\u00e9\\\"q/\"],\"items\":[");
    for (int i = 0; i < count; i++) {
        GString *name = g_string_new("d/");
        int parts = g_rand_int_range(rand, 1, 5);
        for (int j = 0; j < parts; j++)
            g_string_append(name, name_parts[g_rand_int_range(rand, 0, G_N_ELEMENTS(name_parts))]);
        g_string_append_printf(name, "%d", i);
        g_string_append_printf(
            json,
            "%s{\"name\":\"%s\",\"generation\":\"%d\",\"metageneration\":\"1\",\"size\":\"%d\","
            "\"updated\":\"2026-11-21T12:21:45.%03dZ\",\"crc32c\":\"WHA2Hw==\"%s%s}",
            i ? "," : "", name->str, 1795263 + i, i * 7, i % 1000,
            i % 4 == 0 ? ",\"contentEncoding\":\"gzip\"" : "",
            i % 3 == 0   ? ",\"metadata\":{\"goog-reserved-file-mtime\":\"1700000000\"}"
            : i % 3 == 1 ? ",\"metadata\":{\"gcsfuse_symlink_target\":\"../t\\u00e9\",\"x\":[1,{}]}"
                         : "");
        g_string_free(name, TRUE);
    }
    g_string_append(json, "]}");
    g_rand_free(rand);
    return g_string_free(json, FALSE);
}

START_TEST(scanner_matches_yajl_on_pages)
{
    for (unsigned seed = 1; seed <= 20; seed++) {
        char *page = list_page(seed == 1 ? 1000 : 40, seed);
        ck_assert_int_eq(scan_same(page), GCS_JSON_SCAN_OK);
        ck_assert_int_eq(assert_page_same(page, strlen(page)), 0);
        g_free(page);
    }
    ck_assert_int_eq(scan_same("{}"), GCS_JSON_SCAN_OK);
    ck_assert_int_eq(scan_same("{\"items\":[],\"prefixes\":[]}"), GCS_JSON_SCAN_OK);
}
END_TEST

START_TEST(scanner_matches_yajl_on_tokens)
{
    static const char *const docs[] = {
        /* whitespace and comments */
        "{\v}",
        "{\f}",
        "{ \t\r\n}",
        "{}//x",
        "{}/*x",
        "{}/*x*",
        "{}/*x*/",
        "{}/",
        "{}/x",
        "/**/{}",
        "//\n{}",
        "{/*x*/\"a\"//q\n:1}",
        "{\"a\"/**/:/**/1/**/,/**/\"b\":2}",
        "{}/*/",
        "{}\x01",
        "\xef\xbb\xbf{}",
        "{\x00}",
        /* escapes */
        "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
        "[\"\\u0041\\u00e9\\u00E9\\u20ac\\uffff\"]",
        "[\"\\ud83d\\ude00\"]",
        "[\"\\uD83D\\uDE00x\"]",
        "[\"\\ud800\"]",
        "[\"\\ud800x\"]",
        "[\"\\ud800\\u0041\"]",
        "[\"\\ud800\\ud800\"]",
        "[\"\\ud800\\n\"]",
        "[\"\\udc00\"]",
        "[\"\\udbff\\udfff\"]",
        "[\"\\ud800\\u12\"]",
        "[\"\\ud800\\u\"]",
        "[\"\\ud800\\\"]",
        "[\"\\ud800\\\\\"]",
        "[\"a\\u0000b\"]",
        "[\"\\u0000\"]",
        "[\"\\u123\"]",
        "[\"\\u12g4\"]",
        "[\"\\x\"]",
        "[\"\\'\"]",
        "[\"\\",
        "[\"\\u",
        "[\"\\u00",
        "[\"\\ud800\\u0041",
        "[\"\\U0041\"]",
        "[\"\\a\"]",
        "[\"\\0\"]",
        /* raw bytes in strings */
        "[\"a\x01\"]",
        "[\"a\x1f\"]",
        "[\"a\x7f\"]",
        "[\"\t\"]",
        "[\"\n\"]",
        "[\"\xc3\xa9\"]",
        "[\"\xc0\x80\"]",
        "[\"\xe2\x82\xac\"]",
        "[\"\xed\xa0\x80\"]",
        "[\"\xf0\x9f\x98\x80\"]",
        "[\"\xf5\x80\x80\x80\"]",
        "[\"\xf7\xbf\xbf\xbf\"]",
        "[\"\xf8\x80\x80\x80\x80\"]",
        "[\"\x80\"]",
        "[\"\xbf\"]",
        "[\"\xc3\"]",
        "[\"\xc3\"",
        "[\"\xe2\x82\"]",
        "[\"\xf0\x9f\x98\"]",
        "[\"\xc3\xc3\"]",
        "[\"\xff\"]",
        "[\"\xfe\"]",
        "[\"\xe2\x28\xa1\"]",
        "[\"a",
        "[\"",
        /* numbers */
        "[0]",
        "[-0]",
        "[01]",
        "[1.]",
        "[1e5]",
        "[-]",
        "[1.5e-3]",
        "[1E+2]",
        "[.5]",
        "[1a]",
        "[+1]",
        "[1e]",
        "[1e+]",
        "[-a]",
        "[00]",
        "[1.2.3]",
        "[123456789012345678901234567890]",
        "[1 2]",
        "[0x1]",
        "[-01]",
        "[1.0e+0010]",
        "1",
        "-",
        "1 ",
        "1/**/",
        "[1,]",
        "[,1]",
        "[1,,2]",
        /* literals */
        "[true,false,null]",
        "[truex]",
        "[nul]",
        "[tru]",
        "[True]",
        "[nulll]",
        "true",
        "null",
        "[t]",
        "[f]",
        "[n]",
        "[fals]",
        /* structure */
        "",
        " ",
        "{",
        "}",
        "[",
        "]",
        "[]",
        "[[]]",
        "{}",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "{,}",
        "{1:2}",
        "{\"a\":1 \"b\":2}",
        "[}",
        "{]",
        "{} x",
        "{}{}",
        "[] []",
        "{\"a\":[1,{\"b\":[[],{}]},\"c\"],\"d\":{\"e\":{}}}",
        "{\"\":\"\"}",
        "{\"k\\u00e9y\\n\":\"v\"}",
        "{\"a\":1}\n",
        "\"x\"",
        "\"\\ud83d\\ude00\"",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(docs); i++)
        assert_both(docs[i], strlen(docs[i]));
    /* Embedded NUL bytes (the page parse refuses those earlier; the scanner sees them). */
    assert_scan_same("[\"a\0b\"]", 7);
    assert_scan_same("[1\0]", 4);
    assert_scan_same("{}\0", 3);
}
END_TEST

START_TEST(scanner_matches_yajl_on_truncations_and_mutations)
{
    char *page = list_page(8, 77);
    size_t len = strlen(page);
    for (size_t cut = 0; cut <= len; cut++)
        assert_both(page, cut);
    static const char alphabet[] =
        "{}[]\",:0123456789-+.eE \t\n\\/*nultrfasxXuU\x01\x1f\x7f\x80\xbf\xc3\xe2\xed\xf0\xf8\xff";
    GRand *rand = g_rand_new_with_seed(20261121);
    char *copy = g_malloc(len + 1);
    for (int round = 0; round < 30000; round++) {
        memcpy(copy, page, len + 1);
        int edits = g_rand_int_range(rand, 1, 5);
        for (int e = 0; e < edits; e++) {
            gint32 at = g_rand_int_range(rand, 0, (gint32)len);
            if (g_rand_boolean(rand))
                copy[at] = alphabet[g_rand_int_range(rand, 0, sizeof(alphabet) - 1)];
            else /* move a byte from elsewhere: keeps the text JSON-like */
                copy[at] = page[g_rand_int_range(rand, 0, (gint32)len)];
        }
        assert_both(copy, len);
    }
    g_free(copy);
    g_rand_free(rand);
    g_free(page);
}
END_TEST

/* Random documents from a small grammar that includes every token kind and broken pieces. */
static void random_value(GRand *rand, GString *out, int depth)
{
    static const char *const scalars[] = {
        "0",
        "-1",
        "12.5e3",
        "1.",
        "01",
        "true",
        "false",
        "null",
        "nul",
        "\"\"",
        "\"abc\"",
        "\"\\u00e9\\n\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "\"\\ud800\\u0041\"",
        "\"\xc3\xa9\"",
        "\"\xc3\"",
        "\"\\u0000\"",
        "\"\\q\"",
        "\"a\x01\"",
        "\"/**/\"",
    };
    static const char *const glue[] = {"", "", "", " ", "\n", "/*c*/", "//c\n", "\v", ","};
    int pick = g_rand_int_range(rand, 0, depth > 6 ? 1 : 4);
    g_string_append(out, glue[g_rand_int_range(rand, 0, G_N_ELEMENTS(glue))]);
    if (pick == 0) {
        g_string_append(out, scalars[g_rand_int_range(rand, 0, G_N_ELEMENTS(scalars))]);
    } else if (pick == 1) {
        g_string_append_c(out, '[');
        int n = g_rand_int_range(rand, 0, 4);
        for (int i = 0; i < n; i++) {
            if (i)
                g_string_append_c(out, ',');
            random_value(rand, out, depth + 1);
        }
        g_string_append_c(out, g_rand_int_range(rand, 0, 20) ? ']' : '}');
    } else {
        g_string_append_c(out, '{');
        int n = g_rand_int_range(rand, 0, 4);
        for (int i = 0; i < n; i++) {
            if (i)
                g_string_append_c(out, ',');
            g_string_append(out, g_rand_int_range(rand, 0, 30) ? "\"k\\u00e9\"" : "k");
            g_string_append_c(out, g_rand_int_range(rand, 0, 30) ? ':' : ',');
            random_value(rand, out, depth + 1);
        }
        g_string_append_c(out, g_rand_int_range(rand, 0, 20) ? '}' : ']');
    }
    g_string_append(out, glue[g_rand_int_range(rand, 0, G_N_ELEMENTS(glue) - 1)]);
}

START_TEST(scanner_matches_yajl_on_random_documents)
{
    GRand *rand = g_rand_new_with_seed(3);
    GString *doc = g_string_new(NULL);
    for (int round = 0; round < 20000; round++) {
        g_string_truncate(doc, 0);
        random_value(rand, doc, 0);
        assert_both(doc->str, doc->len);
    }
    g_string_free(doc, TRUE);
    g_rand_free(rand);
    /* Both accepted a fair share: the comparisons are not all of broken text. */
    ck_assert_uint_gt(accepted, compared / 20);
}
END_TEST

START_TEST(scanner_deep_nesting_and_cancel)
{
    GString *deep = g_string_new(NULL);
    for (int i = 0; i < 200000; i++)
        g_string_append_c(deep, '[');
    ck_assert_int_eq(assert_scan_same(deep->str, deep->len), GCS_JSON_SCAN_ERROR);
    for (int i = 0; i < 200000; i++)
        g_string_append_c(deep, ']');
    ck_assert_int_eq(assert_scan_same(deep->str, deep->len), GCS_JSON_SCAN_OK);
    g_string_free(deep, TRUE);

    /* A callback returning 0 stops both at the same event. */
    const char *doc = "{\"a\":[1,\"x\",true,null,{}],\"b\":\"\\u00e9\"}";
    for (int at = 1; at <= 12; at++) {
        struct trace a = {.events = g_string_new(NULL), .cancel_at = at};
        struct trace b = {.events = g_string_new(NULL), .cancel_at = at};
        int want = yajl_run(doc, strlen(doc), &a);
        int got = gcs_json_scan(doc, strlen(doc), &recorder, &b);
        ck_assert_int_eq(want, got);
        ck_assert_str_eq(a.events->str, b.events->str);
        g_string_free(a.events, TRUE);
        g_string_free(b.events, TRUE);
    }
}
END_TEST

TEST_SUITE(gcs_json_scan_suite)
{
    Suite *s = suite_create("gcs-json-scan");
    TCase *tc = tcase_create("scanner");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, scanner_matches_yajl_on_pages);
    tcase_add_test(tc, scanner_matches_yajl_on_tokens);
    tcase_add_test(tc, scanner_matches_yajl_on_truncations_and_mutations);
    tcase_add_test(tc, scanner_matches_yajl_on_random_documents);
    tcase_add_test(tc, scanner_deep_nesting_and_cancel);
    suite_add_tcase(s, tc);
    return s;
}
