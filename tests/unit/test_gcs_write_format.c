/* The pure parts of the gcs write calls: metadata JSON, multipart/related framing, compose
 * bodies, XML replies (well-formed, hostile, truncated), CompleteMultipartUpload documents and
 * the Range header of resumable uploads. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "../../src/gcs/gcs-internal.h"
#include "fluxfs/crc32c.h"

static const char *json_string_at(yajl_val root, const char *a, const char *b)
{
    const char *path[] = {a, b, NULL};
    yajl_val value = yajl_tree_get(root, path, yajl_t_string);
    return value ? YAJL_GET_STRING(value) : NULL;
}

START_TEST(metadata_json_new_object)
{
    struct gcs_write_attrs attrs = {.has_mtime = true,
                                    .mtime_ns = INT64_C(1700000000999999999),
                                    .symlink_target = "a \"quoted\"\\path\n"};
    char *json = gcs_object_metadata_json("dir/na\"me", &attrs, false, true, 0x01020304u);
    char error[128];
    yajl_val root = yajl_tree_parse(json, error, sizeof(error));
    ck_assert_msg(root != NULL, "%s: %s", json, error);
    ck_assert_str_eq(json_string_at(root, "name", NULL), "dir/na\"me");
    ck_assert_str_eq(json_string_at(root, "contentType", NULL), "application/octet-stream");
    ck_assert_str_eq(json_string_at(root, "crc32c", NULL), "AQIDBA==");
    ck_assert_str_eq(json_string_at(root, "metadata", "goog-reserved-file-mtime"), "1700000000");
    /* What gcsfuse writes and prefers: RFC 3339 with the nanoseconds kept. */
    ck_assert_str_eq(json_string_at(root, "metadata", "gcsfuse_mtime"),
                     "2023-11-14T22:13:20.999999999Z");
    ck_assert_str_eq(json_string_at(root, "metadata", "gcsfuse_symlink_target"),
                     "a \"quoted\"\\path\n");
    /* What gcloud reads as a link (its bytes are the target). */
    ck_assert_str_eq(json_string_at(root, "metadata", "goog-reserved-file-is-symlink"), "true");
    yajl_tree_free(root);
    g_free(json);
}
END_TEST

START_TEST(metadata_json_patch_and_negative_mtime)
{
    struct gcs_write_attrs attrs = {.has_mtime = true, .mtime_ns = -1}; /* 1969: rounds down */
    char *json = gcs_object_metadata_json(NULL, &attrs, true, false, 0);
    ck_assert_str_eq(json, "{\"metadata\":{\"goog-reserved-file-mtime\":\"-1\","
                           "\"gcsfuse_mtime\":\"1969-12-31T23:59:59.999999999Z\"}}");
    g_free(json);
    struct gcs_write_attrs type_only = {.content_type = "text/plain"};
    json = gcs_object_metadata_json(NULL, &type_only, true, false, 0);
    ck_assert_str_eq(json, "{\"contentType\":\"text/plain\"}");
    g_free(json);
    json = gcs_object_metadata_json("x", NULL, false, false, 0);
    ck_assert_str_eq(json, "{\"name\":\"x\",\"contentType\":\"application/octet-stream\"}");
    g_free(json);
}
END_TEST

START_TEST(compose_body)
{
    struct gcs_compose_source sources[] = {{"a", 5}, {"b/\"c\"", 0}};
    struct gcs_write_attrs attrs = {.content_type = "x/y"};
    char *json = gcs_compose_body_json(sources, 2, &attrs);
    ck_assert_str_eq(json,
                     "{\"sourceObjects\":[{\"name\":\"a\",\"generation\":\"5\"},"
                     "{\"name\":\"b/\\\"c\\\"\"}],\"destination\":{\"contentType\":\"x/y\"}}");
    g_free(json);
}
END_TEST

/* Splits preamble + media + epilogue the way a server does and checks every piece. */
START_TEST(related_framing_round_trip)
{
    static const uint8_t media[] = {'-', '-', 'x', '\r', '\n', 0, 0xff, '-', '-'};
    char *boundary = gcs_related_boundary_new();
    char *other = gcs_related_boundary_new();
    ck_assert_str_ne(boundary, other);
    g_free(other);
    struct gcs_related_frame frame;
    gcs_related_frame_build("{\"name\":\"o\"}", "image/png", boundary, &frame);
    char *expected_type = g_strdup_printf("Content-Type: multipart/related; boundary=%s", boundary);
    ck_assert_str_eq(frame.content_type_header, expected_type);
    g_free(expected_type);
    GByteArray *body = g_byte_array_new();
    g_byte_array_append(body, (const guint8 *)frame.preamble, (guint)frame.preamble_len);
    g_byte_array_append(body, media, sizeof(media));
    g_byte_array_append(body, (const guint8 *)frame.epilogue, (guint)frame.epilogue_len);

    char *delimiter = g_strdup_printf("--%s", boundary);
    size_t dlen = strlen(delimiter);
    const uint8_t *data = body->data;
    size_t len = body->len;
    /* --B CRLF headers CRLF CRLF json CRLF --B CRLF headers CRLF CRLF media CRLF --B-- CRLF */
    ck_assert(memcmp(data, delimiter, dlen) == 0);
    const uint8_t *json_start = (const uint8_t *)memmem(data, len, "\r\n\r\n", 4) + 4;
    ck_assert(g_str_has_prefix((const char *)data + dlen,
                               "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"));
    const uint8_t *second = memmem(json_start, len - (size_t)(json_start - data), delimiter, dlen);
    ck_assert_ptr_nonnull(second);
    ck_assert_int_eq((int)(second - json_start), (int)strlen("{\"name\":\"o\"}\r\n"));
    ck_assert(memcmp(json_start, "{\"name\":\"o\"}\r\n", (size_t)(second - json_start)) == 0);
    const uint8_t *media_headers = second + dlen;
    ck_assert(memcmp(media_headers, "\r\nContent-Type: image/png\r\n\r\n", 29) == 0);
    const uint8_t *media_start = media_headers + 29;
    ck_assert(memcmp(media_start, media, sizeof(media)) == 0);
    const uint8_t *tail = media_start + sizeof(media);
    char *closing = g_strdup_printf("\r\n--%s--\r\n", boundary);
    ck_assert_int_eq((int)(len - (size_t)(tail - data)), (int)strlen(closing));
    ck_assert(memcmp(tail, closing, strlen(closing)) == 0);
    g_free(closing);
    g_free(delimiter);
    g_byte_array_unref(body);
    gcs_related_frame_clear(&frame);
    gcs_related_frame_clear(NULL);
    g_free(boundary);
}
END_TEST

START_TEST(xml_initiate)
{
    static const char ok[] =
        "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
        "<UploadId>ABC&amp;def&#x41;&#66;</UploadId></InitiateMultipartUploadResult>";
    char *id = NULL;
    ck_assert_int_eq(gcs_xml_parse_initiate(ok, strlen(ok), &id), 0);
    ck_assert_str_eq(id, "ABC&defAB");
    g_free(id);

    static const char *const bad[] = {
        "",
        "<InitiateMultipartUploadResult><UploadId>abc</UploadId>", /* truncated */
        "<InitiateMultipartUploadResult><UploadId>abc</InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId></UploadId></InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>a<b/>c</UploadId>"
        "</InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>a&bogus;</UploadId>"
        "</InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>a&#0;</UploadId>"
        "</InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>a&#x110000;</UploadId>"
        "</InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>a&amp</UploadId>"
        "</InitiateMultipartUploadResult>",
        "<Error><Code>AccessDenied</Code></Error>",
        "<InitiateMultipartUploadResultX><UploadId>a</UploadId></InitiateMultipartUploadResultX>",
        "<InitiateMultipartUploadResult><UploadIdX>a</UploadIdX></InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId",
        "<",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        id = NULL;
        ck_assert_msg(gcs_xml_parse_initiate(bad[i], strlen(bad[i]), &id) < 0, "%s", bad[i]);
        ck_assert_ptr_null(id);
    }
    /* An embedded NUL, and every truncation of the good document. */
    char with_nul[sizeof(ok)];
    memcpy(with_nul, ok, sizeof(ok));
    with_nul[150] = '\0';
    ck_assert_int_lt(gcs_xml_parse_initiate(with_nul, sizeof(ok) - 1, &id), 0);
    for (size_t cut = 0; cut < strlen(ok) - strlen("</InitiateMultipartUploadResult>"); cut++) {
        id = NULL;
        int err = gcs_xml_parse_initiate(ok, cut, &id);
        ck_assert_msg(err < 0, "accepted a document cut at %zu", cut);
        ck_assert_ptr_null(id);
    }
}
END_TEST

START_TEST(xml_caps)
{
    GString *huge = g_string_new("<InitiateMultipartUploadResult><UploadId>");
    for (unsigned i = 0; i < GCS_XML_TEXT_CAP + 1; i++)
        g_string_append_c(huge, 'a');
    g_string_append(huge, "</UploadId></InitiateMultipartUploadResult>");
    char *id = NULL;
    ck_assert_int_eq(gcs_xml_parse_initiate(huge->str, huge->len, &id), -EIO);
    ck_assert_int_eq(gcs_xml_parse_initiate(huge->str, GCS_XML_CAP + 1, &id), -EMSGSIZE);
    g_string_free(huge, TRUE);
}
END_TEST

START_TEST(xml_upload_list)
{
    static const char page[] =
        "<?xml version='1.0'?><ListMultipartUploadsResult xmlns=\"x\"><Bucket>b</Bucket>"
        "<KeyMarker></KeyMarker><UploadIdMarker/><NextKeyMarker>k&lt;2</NextKeyMarker>"
        "<NextUploadIdMarker>u2</NextUploadIdMarker><MaxUploads>2</MaxUploads>"
        "<IsTruncated>true</IsTruncated>"
        "<Upload><Key>k1</Key><UploadId>u1</UploadId><Initiator><ID>i</ID></Initiator>"
        "<Initiated>2024-01-01T00:00:00Z</Initiated></Upload>"
        "<Upload><Key>k&lt;2</Key><UploadId>u2</UploadId></Upload>"
        "</ListMultipartUploadsResult>";
    struct gcs_upload_list list;
    ck_assert_int_eq(gcs_xml_parse_upload_list(page, strlen(page), &list), 0);
    ck_assert_uint_eq(list.names->len, 2);
    ck_assert_str_eq(g_ptr_array_index(list.names, 1), "k<2");
    ck_assert_str_eq(g_ptr_array_index(list.upload_ids, 0), "u1");
    ck_assert(list.truncated);
    ck_assert_str_eq(list.next_key_marker, "k<2");
    ck_assert_str_eq(list.next_upload_id_marker, "u2");
    gcs_upload_list_clear(&list);

    static const char empty[] = "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
                                "</ListMultipartUploadsResult>";
    ck_assert_int_eq(gcs_xml_parse_upload_list(empty, strlen(empty), &list), 0);
    ck_assert_uint_eq(list.names->len, 0);
    ck_assert(!list.truncated);
    gcs_upload_list_clear(&list);

    static const char *const bad[] = {
        /* truncated without markers: would loop forever */
        "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
        "</ListMultipartUploadsResult>",
        /* an entry without its id */
        "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload></ListMultipartUploadsResult>",
        /* an unterminated entry */
        "<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId>u</UploadId>"
        "</ListMultipartUploadsResult>",
        "<ListBucketResult></ListBucketResult>",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(gcs_xml_parse_upload_list(bad[i], strlen(bad[i]), &list) < 0, "%s", bad[i]);
    for (size_t cut = 0; cut + strlen("</ListMultipartUploadsResult>") < strlen(page); cut++)
        ck_assert_msg(gcs_xml_parse_upload_list(page, cut, &list) < 0, "cut at %zu", cut);

    /* More entries than one page may hold. */
    GString *many = g_string_new("<ListMultipartUploadsResult>");
    for (unsigned i = 0; i <= GCS_UPLOAD_LIST_PAGE_CAP; i++)
        g_string_append(many, "<Upload><Key>k</Key><UploadId>u</UploadId></Upload>");
    g_string_append(many, "</ListMultipartUploadsResult>");
    ck_assert_int_eq(gcs_xml_parse_upload_list(many->str, many->len, &list), -EIO);
    g_string_free(many, TRUE);
}
END_TEST

START_TEST(xml_error_document)
{
    static const char doc[] = "<?xml version='1.0'?><Error><Code>NoSuchUpload</Code>"
                              "<Message>gone &amp; done</Message></Error>";
    char *code = NULL, *message = NULL;
    ck_assert_int_eq(gcs_xml_parse_error(doc, strlen(doc), &code, &message), 0);
    ck_assert_str_eq(code, "NoSuchUpload");
    ck_assert_str_eq(message, "gone & done");
    g_free(code);
    g_free(message);
    static const char json[] = "{\"error\":{\"code\":404,\"message\":\"x\"}}";
    ck_assert_int_lt(gcs_xml_parse_error(json, strlen(json), &code, NULL), 0);
    char *text = gcs_error_reply_message(doc, strlen(doc));
    ck_assert_str_eq(text, "NoSuchUpload: gone & done");
    g_free(text);
    text = gcs_error_reply_message(json, strlen(json));
    ck_assert_str_eq(text, "x");
    g_free(text);
}
END_TEST

START_TEST(complete_body)
{
    struct gcs_completed_part parts[] = {{1, "\"abc\""}, {2, "d<e>&'f"}, {10000, "z"}};
    char *xml = NULL;
    size_t len = 0;
    ck_assert_int_eq(gcs_xml_complete_body(parts, 3, &xml, &len), 0);
    ck_assert_str_eq(xml, "<CompleteMultipartUpload>"
                          "<Part><PartNumber>1</PartNumber><ETag>&quot;abc&quot;</ETag></Part>"
                          "<Part><PartNumber>2</PartNumber><ETag>d&lt;e&gt;&amp;&apos;f</ETag>"
                          "</Part>"
                          "<Part><PartNumber>10000</PartNumber><ETag>z</ETag></Part>"
                          "</CompleteMultipartUpload>");
    ck_assert_uint_eq(len, strlen(xml));
    g_free(xml);

    struct gcs_completed_part unordered[] = {{2, "a"}, {1, "b"}};
    struct gcs_completed_part repeated[] = {{1, "a"}, {1, "b"}};
    struct gcs_completed_part no_etag[] = {{1, NULL}};
    struct gcs_completed_part empty_etag[] = {{1, ""}};
    struct gcs_completed_part zero[] = {{0, "a"}};
    struct gcs_completed_part too_big[] = {{10001, "a"}};
    xml = NULL;
    ck_assert_int_eq(gcs_xml_complete_body(unordered, 2, &xml, &len), -EINVAL);
    ck_assert_int_eq(gcs_xml_complete_body(repeated, 2, &xml, &len), -EINVAL);
    ck_assert_int_eq(gcs_xml_complete_body(no_etag, 1, &xml, &len), -EINVAL);
    ck_assert_int_eq(gcs_xml_complete_body(empty_etag, 1, &xml, &len), -EINVAL);
    ck_assert_int_eq(gcs_xml_complete_body(zero, 1, &xml, &len), -EINVAL);
    ck_assert_int_eq(gcs_xml_complete_body(too_big, 1, &xml, &len), -EINVAL);
    ck_assert_int_eq(gcs_xml_complete_body(parts, 0, &xml, &len), -EINVAL);
    ck_assert_ptr_null(xml);
}
END_TEST

START_TEST(resumable_range)
{
    uint64_t persisted = 77;
    ck_assert_int_eq(gcs_parse_resumable_range(NULL, &persisted), 0);
    ck_assert_uint_eq(persisted, 0);
    ck_assert_int_eq(gcs_parse_resumable_range("bytes=0-262143", &persisted), 0);
    ck_assert_uint_eq(persisted, 262144);
    ck_assert_int_eq(gcs_parse_resumable_range("bytes=0-0", &persisted), 0);
    ck_assert_uint_eq(persisted, 1);
    static const char *const bad[] = {
        "",           "bytes=",     "bytes=0-",  "bytes=1-5",     "bytes=0-5x",
        "bytes=0--5", "bytes=0-+5", "items=0-5", "bytes=0-5,7-9", "bytes=0-99999999999999999999",
        "bytes=0- 5"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        persisted = 77;
        ck_assert_msg(gcs_parse_resumable_range(bad[i], &persisted) == -EIO, "%s", bad[i]);
        ck_assert_uint_eq(persisted, 77);
    }
}
END_TEST

START_TEST(rewrite_and_permission_replies)
{
    static const char more[] =
        "{\"done\":false,\"rewriteToken\":\"tok\",\"totalBytesRewritten\":\"1\"}";
    bool done = true;
    char *token = NULL;
    struct gcs_object obj = {0};
    ck_assert_int_eq(gcs_json_parse_rewrite(more, strlen(more), &done, &token, &obj), 0);
    ck_assert(!done);
    ck_assert_str_eq(token, "tok");
    g_free(token);
    static const char finished[] = "{\"done\":true,\"resource\":{\"name\":\"d\",\"size\":\"5\","
                                   "\"generation\":\"9\"}}";
    ck_assert_int_eq(gcs_json_parse_rewrite(finished, strlen(finished), &done, &token, &obj), 0);
    ck_assert(done);
    ck_assert_ptr_null(token);
    ck_assert_str_eq(obj.name, "d");
    ck_assert_int_eq(obj.generation, 9);
    gcs_object_clear(&obj);
    static const char *const bad[] = {"{\"done\":false}", "{\"done\":true}", "{\"done\":\"yes\"}",
                                      "[]", "{\"done\":false,\"rewriteToken\":\"\"}"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_int_lt(gcs_json_parse_rewrite(bad[i], strlen(bad[i]), &done, &token, &obj), 0);

    static const char held[] = "{\"kind\":\"storage#testIamPermissionsResponse\","
                               "\"permissions\":[\"a\",\"b\"]}";
    GPtrArray *granted = NULL;
    ck_assert_int_eq(gcs_json_parse_permissions(held, strlen(held), &granted), 0);
    ck_assert_uint_eq(granted->len, 2);
    g_ptr_array_unref(granted);
    static const char none[] = "{\"kind\":\"storage#testIamPermissionsResponse\"}";
    ck_assert_int_eq(gcs_json_parse_permissions(none, strlen(none), &granted), 0);
    ck_assert_uint_eq(granted->len, 0);
    g_ptr_array_unref(granted);
    static const char wrong[] = "{\"permissions\":[1]}";
    ck_assert_int_lt(gcs_json_parse_permissions(wrong, strlen(wrong), &granted), 0);
}
END_TEST

START_TEST(xml_urls_and_preconditions)
{
    char *url = gcs_url_xml_object("http://h", "b", "dir/a b/../%x/.");
    ck_assert_str_eq(url, "http://h/b/dir/a%20b/%2E%2E/%25x/%2E");
    g_free(url);
    GString *query = g_string_new("http://h/x");
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .has_if_metageneration_match = true,
                                          .if_metageneration_match = 3};
    gcs_url_append_preconditions(query, &pre);
    ck_assert_str_eq(query->str, "http://h/x?ifGenerationMatch=0&ifMetagenerationMatch=3");
    g_string_free(query, TRUE);
}
END_TEST

/* A multipart upload's crc32c is the parts' combined: the client relies on it. */
START_TEST(combined_part_crcs)
{
    uint8_t data[3000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 31 + 7);
    uint32_t whole = crc32c_update(0, data, sizeof(data));
    uint32_t combined = 0;
    size_t cuts[] = {0, 1000, 1001, 3000};
    for (size_t i = 0; i + 1 < G_N_ELEMENTS(cuts); i++) {
        size_t len = cuts[i + 1] - cuts[i];
        combined = crc32c_combine(combined, crc32c_update(0, data + cuts[i], len), len);
    }
    ck_assert_uint_eq(combined, whole);
}
END_TEST

TEST_SUITE(gcs_write_format_suite)
{
    Suite *s = suite_create("gcs_write_format");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, metadata_json_new_object);
    tcase_add_test(tc, metadata_json_patch_and_negative_mtime);
    tcase_add_test(tc, compose_body);
    tcase_add_test(tc, related_framing_round_trip);
    tcase_add_test(tc, xml_initiate);
    tcase_add_test(tc, xml_caps);
    tcase_add_test(tc, xml_upload_list);
    tcase_add_test(tc, xml_error_document);
    tcase_add_test(tc, complete_body);
    tcase_add_test(tc, resumable_range);
    tcase_add_test(tc, rewrite_and_permission_replies);
    tcase_add_test(tc, xml_urls_and_preconditions);
    tcase_add_test(tc, combined_part_crcs);
    suite_add_tcase(s, tc);
    return s;
}
