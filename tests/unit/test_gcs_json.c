/* JSON replies of the gcs layer: list pages, object resources, error replies, RFC 3339 times,
 * the status -> errno map. Malformed and oversized input must fail cleanly. */
#include "test-common.h"

#include <errno.h>
#include <inttypes.h>
#include <glib.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/timens.h"
#include "../../src/gcs/gcs-internal.h"

#define NS INT64_C(1000000000)

static int parse_list(const char *json, struct gcs_list_page *page)
{
    return gcs_json_parse_list(json, strlen(json), page);
}

START_TEST(json_list_page)
{
    const char *json =
        "{\"kind\":\"storage#objects\",\"nextPageToken\":\"tok/+=\","
        "\"prefixes\":[\"a/\",\"b c/\"],"
        "\"items\":[{\"kind\":\"storage#object\",\"name\":\"x/one\",\"size\":\"12345678901\","
        "\"generation\":\"1712345678901234\",\"metageneration\":\"3\","
        "\"updated\":\"2024-04-05T06:07:08.123Z\",\"crc32c\":\"4waSgw==\","
        "\"contentEncoding\":\"gzip\",\"metadata\":{\"goog-reserved-file-mtime\":\"1700000000\","
        "\"gcsfuse_symlink_target\":\"../t\"}},"
        "{\"name\":\"x/two\",\"size\":7,\"generation\":5}]}";
    struct gcs_list_page page = {0};
    ck_assert_int_eq(parse_list(json, &page), 0);
    ck_assert_uint_eq(page.objects->len, 2);
    ck_assert_uint_eq(page.prefixes->len, 2);
    ck_assert_str_eq(g_ptr_array_index(page.prefixes, 1), "b c/");
    ck_assert_str_eq(page.next_page_token, "tok/+=");
    struct gcs_object *one = g_ptr_array_index(page.objects, 0);
    ck_assert_str_eq(one->name, "x/one");
    ck_assert_uint_eq(one->size, UINT64_C(12345678901));
    ck_assert_int_eq(one->generation, INT64_C(1712345678901234));
    ck_assert_int_eq(one->metageneration, 3);
    /* 2024-04-05T06:07:08Z = 1712297228 */
    ck_assert_int_eq(one->updated_ns, INT64_C(1712297228) * NS + 123000000);
    ck_assert_int_eq(one->mtime_ns, INT64_C(1700000000) * NS);
    ck_assert(one->has_crc32c);
    ck_assert_uint_eq(one->crc32c, 0xE3069283u);
    ck_assert_str_eq(one->content_encoding, "gzip");
    ck_assert_str_eq(one->symlink_target, "../t");
    struct gcs_object *two = g_ptr_array_index(page.objects, 1);
    ck_assert_uint_eq(two->size, 7);
    ck_assert_int_eq(two->generation, 5);
    ck_assert_int_eq(two->metageneration, 0);
    ck_assert_int_eq(two->updated_ns, 0);
    ck_assert_int_eq(two->mtime_ns, 0);
    ck_assert(!two->has_crc32c);
    ck_assert_ptr_null(two->content_encoding);
    ck_assert_ptr_null(two->symlink_target);
    gcs_list_page_clear(&page);
    gcs_list_page_clear(&page); /* cleared pages can be cleared again */
}
END_TEST

START_TEST(json_list_empty_and_last_page)
{
    struct gcs_list_page page = {0};
    ck_assert_int_eq(parse_list("{\"kind\":\"storage#objects\"}", &page), 0);
    ck_assert_uint_eq(page.objects->len, 0);
    ck_assert_uint_eq(page.prefixes->len, 0);
    ck_assert_ptr_null(page.next_page_token);
    gcs_list_page_clear(&page);
}
END_TEST

START_TEST(json_list_malformed)
{
    static const char *bad[] = {
        "",
        "not json",
        "[1,2,3]",
        "{\"items\":[{\"name\":\"a\"}",   /* truncated */
        "{\"items\":{\"name\":\"a\"}}",   /* items not an array */
        "{\"items\":[{\"size\":\"1\"}]}", /* item without a name */
        "{\"items\":[{\"name\":\"a\",\"size\":\"12x\"}]}",
        "{\"items\":[{\"name\":\"a\",\"size\":\"-1\"}]}",
        "{\"items\":[{\"name\":\"a\",\"size\":\"99999999999999999999999\"}]}",
        "{\"items\":[{\"name\":\"a\",\"generation\":true}]}",
        "{\"items\":[{\"name\":\"a\",\"updated\":\"yesterday\"}]}",
        "{\"items\":[{\"name\":\"a\",\"crc32c\":\"!!\"}]}",
        "{\"prefixes\":[1]}",
        "{\"items\":[7]}",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        struct gcs_list_page page = {0};
        ck_assert_msg(parse_list(bad[i], &page) == -EIO, "accepted: %s", bad[i]);
        ck_assert_ptr_null(page.objects); /* untouched on failure */
    }
    /* An embedded NUL before len is rejected, not parsed as the shorter text. */
    struct gcs_list_page page = {0};
    ck_assert_int_eq(gcs_json_parse_list("{}\0{}", 5, &page), -EIO);
}
END_TEST

START_TEST(json_list_huge_capped)
{
    size_t len = GCS_JSON_CAP + 16;
    char *json = g_malloc(len + 1);
    memset(json, ' ', len);
    json[0] = '{';
    json[len - 1] = '}';
    json[len] = '\0';
    struct gcs_list_page page = {0};
    ck_assert_int_eq(gcs_json_parse_list(json, len, &page), -EMSGSIZE);
    g_free(json);

    /* Just under the cap, a large valid page parses: 20,000 items. */
    GString *big = g_string_new("{\"items\":[");
    for (int i = 0; i < 20000; i++)
        g_string_append_printf(big, "%s{\"name\":\"obj%08d\",\"size\":\"%d\"}", i ? "," : "", i, i);
    g_string_append(big, "]}");
    ck_assert_int_eq(gcs_json_parse_list(big->str, big->len, &page), 0);
    ck_assert_uint_eq(page.objects->len, 20000);
    ck_assert_str_eq(((struct gcs_object *)g_ptr_array_index(page.objects, 19999))->name,
                     "obj00019999");
    gcs_list_page_clear(&page);
    g_string_free(big, TRUE);
}
END_TEST

/* mtime and symlinks as gcsfuse and gcloud store them (issue 16). */
START_TEST(posix_metadata_conventions)
{
    struct {
        const char *metadata;
        int64_t mtime_ns; /* 0: "updated" */
        const char *target;
        bool in_content;
    } cases[] = {
        /* gcsfuse's RFC 3339 key wins over the seconds key, nanoseconds kept */
        {"\"goog-reserved-file-mtime\":\"1000\",\"gcsfuse_mtime\":"
         "\"2024-05-01T12:00:00.123456789Z\"",
         INT64_C(1714564800123456789), NULL, false},
        {"\"gcsfuse_mtime\":\"2024-05-01T14:00:00.5+02:00\"", INT64_C(1714564800500000000), NULL,
         false},
        /* gcloud's seconds alone */
        {"\"goog-reserved-file-mtime\":\"1714564800\"", INT64_C(1714564800) * NS, NULL, false},
        /* a broken RFC value falls back to the seconds key */
        {"\"gcsfuse_mtime\":\"yesterday\",\"goog-reserved-file-mtime\":\"7\"", 7 * NS, NULL, false},
        /* gcloud's symlink: the target is the bytes */
        {"\"goog-reserved-file-is-symlink\":\"true\"", 0, NULL, true},
        {"\"goog-reserved-file-is-symlink\":\"false\"", 0, NULL, false},
        /* gcsfuse's symlink (which also sets gcloud's key): the metadata target */
        {"\"gcsfuse_symlink_target\":\"../t\",\"goog-reserved-file-is-symlink\":\"true\"", 0,
         "../t", false},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *item = g_strdup_printf("{\"name\":\"o\",\"size\":\"4\",\"updated\":"
                                     "\"2021-01-01T00:00:00Z\",\"metadata\":{%s}}",
                                     cases[i].metadata);
        char *list = g_strdup_printf("{\"items\":[%s]}", item);
        int64_t want = cases[i].mtime_ns ? cases[i].mtime_ns : INT64_C(1609459200) * NS;
        struct gcs_object obj;
        ck_assert_int_eq(gcs_json_parse_object(item, strlen(item), &obj), 0);
        struct gcs_list_page page;
        ck_assert_int_eq(gcs_json_parse_list(list, strlen(list), &page), 0);
        const struct gcs_object *listed = g_ptr_array_index(page.objects, 0);
        const struct gcs_object *both[] = {&obj, listed};
        for (int j = 0; j < 2; j++) {
            ck_assert_msg(both[j]->mtime_ns == want, "case %zu/%d: %" PRId64, i, j,
                          both[j]->mtime_ns);
            if (cases[i].target)
                ck_assert_str_eq(both[j]->symlink_target, cases[i].target);
            else
                ck_assert_ptr_null(both[j]->symlink_target);
            ck_assert_int_eq(both[j]->symlink_in_content, cases[i].in_content);
        }
        gcs_list_page_clear(&page);
        gcs_object_clear(&obj);
        g_free(list);
        g_free(item);
    }

    /* Go's RFC3339Nano, as gcsfuse formats: trailing zeros dropped, none for whole seconds. */
    char text[GCS_RFC3339_MAX];
    gcs_format_rfc3339_nano(0, text);
    ck_assert_str_eq(text, "1970-01-01T00:00:00Z");
    gcs_format_rfc3339_nano(INT64_C(1714564800500000000), text);
    ck_assert_str_eq(text, "2024-05-01T12:00:00.5Z");
    gcs_format_rfc3339_nano(INT64_C(1714564800000000001), text);
    ck_assert_str_eq(text, "2024-05-01T12:00:00.000000001Z");
    int64_t back = 0;
    ck_assert_int_eq(gcs_parse_rfc3339("2024-05-01T12:00:00.000000001Z", &back), 0);
    ck_assert_int_eq(back, INT64_C(1714564800000000001));
}
END_TEST

START_TEST(json_object_and_error)
{
    const char *json = "{\"name\":\"a b\",\"size\":\"0\",\"updated\":\"2021-01-01T00:00:00Z\","
                       "\"metadata\":{\"goog-reserved-file-mtime\":\"not-a-number\"}}";
    struct gcs_object obj;
    memset(&obj, 0x5a, sizeof(obj));
    ck_assert_int_eq(gcs_json_parse_object(json, strlen(json), &obj), 0);
    ck_assert_str_eq(obj.name, "a b");
    ck_assert_int_eq(obj.updated_ns, INT64_C(1609459200) * NS);
    ck_assert_int_eq(obj.mtime_ns, obj.updated_ns); /* bad custom mtime: fall back */
    gcs_object_clear(&obj);
    gcs_object_clear(NULL);
    gcs_object_free(NULL);

    const char *error =
        "{\"error\":{\"code\":403,\"message\":\"caller lacks storage.objects.list\","
        "\"errors\":[]}}";
    char *message = gcs_json_error_message(error, strlen(error));
    ck_assert_str_eq(message, "caller lacks storage.objects.list");
    g_free(message);
    ck_assert_ptr_null(gcs_json_error_message("<html>", 6));
}
END_TEST

START_TEST(rfc3339_parsing)
{
    int64_t ns = 0;
    ck_assert_int_eq(gcs_parse_rfc3339("1970-01-01T00:00:00Z", &ns), 0);
    ck_assert_int_eq(ns, 0);
    ck_assert_int_eq(gcs_parse_rfc3339("2000-02-29T23:59:59.999999999Z", &ns), 0);
    ck_assert_int_eq(ns, INT64_C(951868799) * NS + 999999999);
    ck_assert_int_eq(gcs_parse_rfc3339("2024-04-05t08:07:08.5+02:00", &ns), 0);
    ck_assert_int_eq(ns, INT64_C(1712297228) * NS + 500000000);
    ck_assert_int_eq(gcs_parse_rfc3339("2024-04-05T01:07:08-05:00", &ns), 0);
    ck_assert_int_eq(ns, INT64_C(1712297228) * NS);
    ck_assert_int_eq(gcs_parse_rfc3339("1969-12-31T23:59:59Z", &ns), 0);
    ck_assert_int_eq(ns, -NS);
    /* More than nanosecond precision is truncated. */
    ck_assert_int_eq(gcs_parse_rfc3339("2021-01-01T00:00:00.1234567891Z", &ns), 0);
    ck_assert_int_eq(ns, INT64_C(1609459200) * NS + 123456789);
    /* Beyond int64 nanoseconds (2262, 1677): clamped, no overflow (a fuzzer input). */
    ck_assert_int_eq(gcs_parse_rfc3339("2390-02-29T23:59:60.999999999-07:30", &ns), 0);
    ck_assert_int_eq(ns, (INT64_MAX / NS - 1) * NS);
    ck_assert_int_eq(gcs_parse_rfc3339("9999-12-31T23:59:59Z", &ns), 0);
    ck_assert_int_eq(ns, (INT64_MAX / NS - 1) * NS);
    ck_assert_int_eq(gcs_parse_rfc3339("0000-01-01T00:00:00Z", &ns), 0);
    ck_assert_int_eq(ns, (INT64_MIN / NS + 1) * NS);
    static const char *bad[] = {"",
                                "2024-04-05",
                                "2024-04-05T06:07:08",
                                "2024-13-01T00:00:00Z",
                                "2024-02-30T00:00:00Z",
                                "2024-04-05T24:00:00Z",
                                "2024-04-05T06:07:08.Z",
                                "2024-04-05T06:07:08Zjunk",
                                "2024-04-05 06:07:08Z",
                                "24-04-05T06:07:08Z",
                                "2024-04-05T06:07:08+0200"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        ns = 42;
        ck_assert_msg(gcs_parse_rfc3339(bad[i], &ns) == -EINVAL, "accepted: %s", bad[i]);
        ck_assert_int_eq(ns, 42);
    }
}
END_TEST

/* Times past 2262 or before 1677 in an object's metadata (gcsfuse and gcloud store them as
 * seconds, which reach far beyond int64 nanoseconds) and from the kernel (touch -d 2400-01-01):
 * clamped, never a negative or wrapped time, no signed overflow (issue 15, defect 4). */
START_TEST(times_beyond_int64_nanoseconds)
{
    const int64_t max_ns = (INT64_MAX / NS - 1) * NS, min_ns = (INT64_MIN / NS + 1) * NS;
    static const struct {
        const char *seconds;
        int64_t expect;
    } cases[] = {
        {"13569465600", (INT64_MAX / NS - 1) * NS}, /* 2400-01-01 */
        {"9223372036854775807", (INT64_MAX / NS - 1) * NS},
        {"-13569465600", (INT64_MIN / NS + 1) * NS},
        {"1700000000", INT64_C(1700000000) * NS},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *json = g_strdup_printf("{\"name\":\"a\",\"updated\":\"2021-01-01T00:00:00Z\","
                                     "\"metadata\":{\"goog-reserved-file-mtime\":\"%s\"}}",
                                     cases[i].seconds);
        struct gcs_object obj;
        ck_assert_int_eq(gcs_json_parse_object(json, strlen(json), &obj), 0);
        ck_assert_msg(obj.mtime_ns == cases[i].expect, "%s -> %" PRId64, cases[i].seconds,
                      obj.mtime_ns);
        gcs_object_clear(&obj);
        g_free(json);
        json = g_strdup_printf("{\"items\":[{\"name\":\"a\",\"metadata\":"
                               "{\"goog-reserved-file-mtime\":\"%s\"}}]}",
                               cases[i].seconds);
        struct gcs_list_page page;
        memset(&page, 0, sizeof(page));
        ck_assert_int_eq(gcs_json_parse_list(json, strlen(json), &page), 0);
        ck_assert_uint_eq(page.objects->len, 1);
        ck_assert_int_eq(((struct gcs_object *)g_ptr_array_index(page.objects, 0))->mtime_ns,
                         cases[i].expect);
        gcs_list_page_clear(&page);
        g_free(json);
    }
    /* The kernel's timespec (tv_sec of 2400-01-01, of -2^63) and back. */
    ck_assert_int_eq(timens_from_parts(INT64_C(13569465600), 5), max_ns);
    ck_assert_int_eq(timens_from_parts(INT64_MAX, 999999999), max_ns);
    ck_assert_int_eq(timens_from_parts(INT64_MIN, 0), min_ns);
    ck_assert_int_eq(timens_from_parts(-1, 500000000), -NS / 2);
    ck_assert_int_eq(timens_from_parts(1700000000, 1), INT64_C(1700000000) * NS + 1);
    int64_t seconds, nanoseconds;
    timens_split(-NS / 2, &seconds, &nanoseconds); /* 1969-12-31T23:59:59.5 */
    ck_assert_int_eq(seconds, -1);
    ck_assert_int_eq(nanoseconds, 500000000);
    timens_split(max_ns + 999999999, &seconds, &nanoseconds);
    ck_assert_int_eq(seconds, INT64_MAX / NS - 1);
    ck_assert_int_eq(nanoseconds, 999999999);
    timens_split(INT64_MIN, &seconds, &nanoseconds);
    ck_assert_int_eq(seconds, INT64_MIN / NS - 1);
    ck_assert_int_eq(nanoseconds, INT64_MIN % NS + NS);
}
END_TEST

START_TEST(errno_map)
{
    ck_assert_int_eq(gcs_errno_from_status(200), 0);
    ck_assert_int_eq(gcs_errno_from_status(206), 0);
    ck_assert_int_eq(gcs_errno_from_status(304), -EAGAIN);
    ck_assert_int_eq(gcs_errno_from_status(400), -EINVAL);
    ck_assert_int_eq(gcs_errno_from_status(401), -EACCES);
    ck_assert_int_eq(gcs_errno_from_status(403), -EACCES);
    ck_assert_int_eq(gcs_errno_from_status(404), -ENOENT);
    ck_assert_int_eq(gcs_errno_from_status(409), -EEXIST);
    ck_assert_int_eq(gcs_errno_from_status(412), -ESTALE);
    ck_assert_int_eq(gcs_errno_from_status(416), -ERANGE);
    ck_assert_int_eq(gcs_errno_from_status(429), -EIO);
    ck_assert_int_eq(gcs_errno_from_status(503), -EIO);
    struct http_response response = {.status = 503, .attempts = 7, .error_text = ""};
    ck_assert_int_eq(gcs_errno_from_response(&response), -EIO);
    response.deadline_exceeded = true;
    ck_assert_int_eq(gcs_errno_from_response(&response), -ETIMEDOUT);
    response.cancelled = true;
    ck_assert_int_eq(gcs_errno_from_response(&response), -ECANCELED);
    response = (struct http_response){.status = 200, .curl_code = 56 /* recv error */};
    ck_assert_int_eq(gcs_errno_from_response(&response), -EIO);
    response = (struct http_response){.status = 206, .body_overflow = true};
    ck_assert_int_eq(gcs_errno_from_response(&response), -EIO);
}
END_TEST

TEST_SUITE(gcs_json_suite)
{
    Suite *s = suite_create("gcs_json");
    TCase *tc = tcase_create("json");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, json_list_page);
    tcase_add_test(tc, json_list_empty_and_last_page);
    tcase_add_test(tc, json_list_malformed);
    tcase_add_test(tc, json_list_huge_capped);
    tcase_add_test(tc, json_object_and_error);
    tcase_add_test(tc, posix_metadata_conventions);
    tcase_add_test(tc, rfc3339_parsing);
    tcase_add_test(tc, times_beyond_int64_nanoseconds);
    tcase_add_test(tc, errno_map);
    suite_add_tcase(s, tc);
    return s;
}
