/* URL building of the gcs layer: hostile object names, list query strings, endpoints. */
#include "test-common.h"

#include <glib.h>
#include <string.h>

#include "../../src/gcs/gcs-internal.h"

START_TEST(url_object_hostile_names)
{
    static const struct {
        const char *name, *encoded;
    } cases[] = {
        {"plain.txt", "plain.txt"},
        {"dir/sub/file", "dir%2Fsub%2Ffile"},
        {"with space", "with%20space"},
        {"100%", "100%25"},
        {"a#b?c", "a%23b%3Fc"},
        {"a+b=c&d", "a%2Bb%3Dc%26d"},
        {"caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac", "caf%C3%A9%2F%E6%97%A5%E6%9C%AC"},
        {"..", ".."},
        {"a//b", "a%2F%2Fb"},
        {"tilde~_-.", "tilde~_-."},
        {"semi;colon:at@", "semi%3Bcolon%3Aat%40"},
        {"new\nline\t", "new%0Aline%09"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *url = gcs_url_object("http://h:1", "bkt", cases[i].name);
        char *want = g_strconcat("http://h:1/storage/v1/b/bkt/o/", cases[i].encoded, NULL);
        ck_assert_str_eq(url, want);
        g_free(want);
        g_free(url);
    }
}
END_TEST

START_TEST(url_media)
{
    char *url = gcs_url_media("https://storage.googleapis.com", "b", "x/y z", 0);
    ck_assert_str_eq(url, "https://storage.googleapis.com/storage/v1/b/b/o/x%2Fy%20z?alt=media");
    g_free(url);
    url = gcs_url_media("http://e", "b", "o", 1712345678901234);
    ck_assert_str_eq(url, "http://e/storage/v1/b/b/o/o?alt=media&generation=1712345678901234");
    g_free(url);
}
END_TEST

/* Spelled out here, so a change to what list calls ask for shows in this test. */
#define LIST_FIELDS                                                                                \
    "nextPageToken,prefixes,items(name,size,generation,metageneration,updated,crc32c,"             \
    "contentEncoding,metadata)"

START_TEST(url_list_params)
{
    struct gcs_list_params params = {0};
    char *url = gcs_url_list("http://e", "b", &params);
    ck_assert_str_eq(url, "http://e/storage/v1/b/b/o?maxResults=1000&fields=" LIST_FIELDS);
    g_free(url);

    params = (struct gcs_list_params){
        .prefix = "data set/#1/",
        .delimiter = "/",
        .start_offset = "data set/#1/a+b",
        .end_offset = "data set/#1/z?",
        .page_token = "CgV0b2tlbg==",
        .max_results = 5000, /* clamped to the API's 1000 */
        .include_trailing_delimiter = true,
    };
    url = gcs_url_list("http://e", "b", &params);
    ck_assert_str_eq(url, "http://e/storage/v1/b/b/o?maxResults=1000"
                          "&prefix=data%20set%2F%231%2F&delimiter=%2F"
                          "&startOffset=data%20set%2F%231%2Fa%2Bb"
                          "&endOffset=data%20set%2F%231%2Fz%3F"
                          "&pageToken=CgV0b2tlbg%3D%3D&includeTrailingDelimiter=true"
                          "&fields=" LIST_FIELDS);
    g_free(url);
    params = (struct gcs_list_params){.prefix = "", .max_results = 1};
    url = gcs_url_list("http://e", "b", &params);
    ck_assert_str_eq(url, "http://e/storage/v1/b/b/o?maxResults=1&fields=" LIST_FIELDS);
    g_free(url);
}
END_TEST

/* --billing-project: userProject on every URL except an upload session's. */
START_TEST(url_billed)
{
    char *url = gcs_url_billed("http://h/storage/v1/b/b/o?maxResults=1", "my proj");
    ck_assert_str_eq(url, "http://h/storage/v1/b/b/o?maxResults=1&userProject=my%20proj");
    g_free(url);
    url = gcs_url_billed("http://h/b/a/b.bin", "p-1");
    ck_assert_str_eq(url, "http://h/b/a/b.bin?userProject=p-1");
    g_free(url);
    url = gcs_url_billed("http://h/upload/storage/v1/b/b/o?uploadType=resumable&upload_id=x", "p");
    ck_assert_str_eq(url, "http://h/upload/storage/v1/b/b/o?uploadType=resumable&upload_id=x");
    g_free(url);
    url = gcs_url_billed("http://h/x?a=1", NULL);
    ck_assert_str_eq(url, "http://h/x?a=1");
    g_free(url);
}
END_TEST

START_TEST(url_endpoint_forms)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"localhost:9023", "http://localhost:9023"},
        {"http://127.0.0.1:4443/", "http://127.0.0.1:4443"},
        {"https://storage.googleapis.com", "https://storage.googleapis.com"},
        {"http://localhost:8000/storage/v1/", "http://localhost:8000"},
        {"http://localhost:8000/storage/v1", "http://localhost:8000"},
        {"http://proxy/gcs/", "http://proxy/gcs"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *endpoint = gcs_endpoint_normalize(cases[i].in);
        ck_assert_str_eq(endpoint, cases[i].out);
        g_free(endpoint);
    }
}
END_TEST

TEST_SUITE(gcs_url_suite)
{
    Suite *s = suite_create("gcs_url");
    TCase *tc = tcase_create("urls");
    tcase_add_test(tc, url_object_hostile_names);
    tcase_add_test(tc, url_media);
    tcase_add_test(tc, url_list_params);
    tcase_add_test(tc, url_endpoint_forms);
    tcase_add_test(tc, url_billed);
    suite_add_tcase(s, tc);
    return s;
}
