/* The metrics registry: histogram buckets at gcsfuse's boundaries, counts under concurrent
 * recording, the Prometheus text rendering, errno categories, and which Cloud Storage call a
 * request URL is (from the URLs the gcs layer really builds). */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "../../src/gcs/gcs-internal.h"
#include "fluxfs/metrics.h"

/* The value of the sample line that starts with prefix (e.g. "x{a=\"b\"} "), or -1. */
static long long sample(const char *text, const char *prefix)
{
    size_t len = strlen(prefix);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, prefix, len) == 0)
            return g_ascii_strtoll(line + len, NULL, 10);
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return -1;
}

START_TEST(histogram_buckets_are_le_boundaries)
{
    metrics_reset();
    metrics_fs_op_done(METRICS_FS_READ, 0, 0);      /* <= 1 */
    metrics_fs_op_done(METRICS_FS_READ, 0, 1);      /* <= 1 */
    metrics_fs_op_done(METRICS_FS_READ, 0, 7);      /* <= 8 */
    metrics_fs_op_done(METRICS_FS_READ, 0, 100000); /* <= 100000 */
    metrics_fs_op_done(METRICS_FS_READ, 0, 100001); /* +Inf only */
    GString *out = g_string_new(NULL);
    metrics_render(out);
    const char *text = out->str;
    ck_assert_int_eq(sample(text, "fs_ops_latency_bucket{fs_op=\"ReadFile\",le=\"1\"} "), 2);
    ck_assert_int_eq(sample(text, "fs_ops_latency_bucket{fs_op=\"ReadFile\",le=\"6\"} "), 2);
    ck_assert_int_eq(sample(text, "fs_ops_latency_bucket{fs_op=\"ReadFile\",le=\"8\"} "), 3);
    ck_assert_int_eq(sample(text, "fs_ops_latency_bucket{fs_op=\"ReadFile\",le=\"100000\"} "), 4);
    ck_assert_int_eq(sample(text, "fs_ops_latency_bucket{fs_op=\"ReadFile\",le=\"+Inf\"} "), 5);
    ck_assert_int_eq(sample(text, "fs_ops_latency_count{fs_op=\"ReadFile\"} "), 5);
    ck_assert_int_eq(sample(text, "fs_ops_latency_sum{fs_op=\"ReadFile\"} "), 200009);
    ck_assert_int_eq(sample(text, "fs_ops_count{fs_op=\"ReadFile\"} "), 5);
    /* Kinds never seen have no series. */
    ck_assert_int_eq(sample(text, "fs_ops_count{fs_op=\"Ioctl\"} "), -1);
    ck_assert(strstr(text, "# TYPE fs_ops_latency histogram\n") != NULL);
    ck_assert(strstr(text, "# TYPE fs_ops_count counter\n") != NULL);
    g_string_free(out, TRUE);
}
END_TEST

START_TEST(errors_by_gcsfuse_category)
{
    metrics_reset();
    metrics_fs_op_done(METRICS_FS_LOOKUP, ENOENT, 3);
    metrics_fs_op_done(METRICS_FS_LOOKUP, ENOENT, 3);
    metrics_fs_op_done(METRICS_FS_IOCTL, ENOSYS, 1);
    metrics_fs_op_done(METRICS_FS_LOOKUP, 0, 3);
    ck_assert_int_eq(metrics_fs_op_count(METRICS_FS_LOOKUP), 3);
    ck_assert_int_eq(metrics_fs_op_errors(METRICS_FS_LOOKUP), 2);
    GString *out = g_string_new(NULL);
    metrics_render(out);
    ck_assert_int_eq(sample(out->str, "fs_ops_error_count{fs_error_category=\"NO_FILE_OR_DIR\","
                                      "fs_op=\"LookUpInode\"} "),
                     2);
    ck_assert_int_eq(sample(out->str, "fs_ops_error_count{fs_error_category=\"NOT_IMPLEMENTED\","
                                      "fs_op=\"Ioctl\"} "),
                     1);
    g_string_free(out, TRUE);
    ck_assert_str_eq(metrics_error_category_label(metrics_error_category_of(EIO)), "IO_ERROR");
    ck_assert_str_eq(metrics_error_category_label(metrics_error_category_of(EACCES)), "PERM_ERROR");
    ck_assert_str_eq(metrics_error_category_label(metrics_error_category_of(ENOTEMPTY)),
                     "DIR_NOT_EMPTY");
    ck_assert_str_eq(metrics_error_category_label(metrics_error_category_of(EMFILE)),
                     "TOO_MANY_OPEN_FILES");
    ck_assert_str_eq(metrics_error_category_label(metrics_error_category_of(12345)), "MISC_ERROR");
}
END_TEST

#define THREADS    8
#define PER_THREAD 100000

static gpointer hammer(gpointer unused)
{
    for (int i = 0; i < PER_THREAD; i++) {
        metrics_fs_op_done(METRICS_FS_GETATTR, 0, (uint64_t)(i % 300));
        metrics_add(METRICS_GCS_READ_BYTES, 3);
        metrics_gcs_request_done(METRICS_GCS_STAT_OBJECT, false, 2);
    }
    return NULL;
}

START_TEST(concurrent_recording_loses_nothing)
{
    metrics_reset();
    GThread *threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("hammer", hammer, NULL);
    for (int i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    ck_assert_uint_eq(metrics_fs_op_count(METRICS_FS_GETATTR), THREADS * PER_THREAD);
    ck_assert_uint_eq(metrics_get(METRICS_GCS_READ_BYTES), 3ull * THREADS * PER_THREAD);
    ck_assert_uint_eq(metrics_gcs_request_count(METRICS_GCS_STAT_OBJECT), THREADS * PER_THREAD);
    GString *out = g_string_new(NULL);
    metrics_render(out);
    ck_assert_int_eq(sample(out->str, "fs_ops_latency_count{fs_op=\"GetInodeAttributes\"} "),
                     THREADS * PER_THREAD);
    g_string_free(out, TRUE);
}
END_TEST

static enum metrics_gcs_method classify(enum http_method method, const char *url, char **object)
{
    return gcs_classify_request("http://h:1", method, url, object);
}

static void check(enum http_method method, char *url, enum metrics_gcs_method want,
                  const char *want_object)
{
    char *object = NULL;
    enum metrics_gcs_method got = classify(method, url, &object);
    ck_assert_msg(got == want, "%s: %s, wanted %s", url, metrics_gcs_method_label(got),
                  metrics_gcs_method_label(want));
    if (want_object)
        ck_assert_str_eq(object, want_object);
    g_free(object);
    g_free(url);
}

/* owned + suffix, freeing owned. */
static char *append(char *owned, const char *suffix)
{
    char *joined = g_strconcat(owned, suffix, NULL);
    g_free(owned);
    return joined;
}

START_TEST(classify_the_urls_the_gcs_layer_builds)
{
    const char *e = "http://h:1";
    check(HTTP_GET, gcs_url_object(e, "b", "dir/a b"), METRICS_GCS_STAT_OBJECT, "dir/a b");
    check(HTTP_GET, gcs_url_media(e, "b", "dir/x", 7), METRICS_GCS_NEW_READER, "dir/x");
    check(HTTP_DELETE, gcs_url_object(e, "b", "o"), METRICS_GCS_DELETE_OBJECT, "o");
    check(HTTP_PATCH, gcs_url_object(e, "b", "o"), METRICS_GCS_UPDATE_OBJECT, "o");
    check(HTTP_POST, append(gcs_url_object(e, "b", "t/c"), "/compose"), METRICS_GCS_COMPOSE_OBJECTS,
          "t/c");
    check(HTTP_POST, g_strdup("http://h:1/storage/v1/b/b/o/s/rewriteTo/b/b/o/d"),
          METRICS_GCS_COPY_OBJECT, "s");
    check(HTTP_GET, g_strdup("http://h:1/storage/v1/b/b/o?maxResults=1000&prefix=d%2F"),
          METRICS_GCS_LIST_OBJECTS, NULL);
    check(HTTP_GET, g_strdup("http://h:1/storage/v1/b/b"), METRICS_GCS_GET_BUCKET, NULL);
    check(HTTP_POST, gcs_url_upload(e, "b", "multipart"), METRICS_GCS_CREATE_OBJECT, NULL);
    check(HTTP_POST, gcs_url_upload(e, "b", "resumable"), METRICS_GCS_CREATE_OBJECT_CHUNK_WRITER,
          NULL);
    check(HTTP_POST, append(gcs_url_upload(e, "b", "resumable"), "&name=a%2Fb%20c"),
          METRICS_GCS_CREATE_OBJECT_CHUNK_WRITER, "a/b c");
    check(HTTP_PUT, append(gcs_url_upload(e, "b", "resumable"), "&upload_id=xyz"),
          METRICS_GCS_UPLOAD_CHUNK, NULL);
    check(HTTP_POST, append(gcs_url_xml_object(e, "b", "d/f"), "?uploads"),
          METRICS_GCS_MULTIPART_CREATE, "d/f");
    check(HTTP_PUT, append(gcs_url_xml_object(e, "b", "d/f"), "?partNumber=2&uploadId=u"),
          METRICS_GCS_MULTIPART_PART, "d/f");
    check(HTTP_POST, append(gcs_url_xml_object(e, "b", "d/f"), "?uploadId=u"),
          METRICS_GCS_MULTIPART_COMPLETE, "d/f");
    check(HTTP_DELETE, append(gcs_url_xml_object(e, "b", "d/f"), "?uploadId=u"),
          METRICS_GCS_MULTIPART_ABORT, "d/f");
    check(HTTP_GET, g_strdup("http://h:1/b?uploads&prefix=x"), METRICS_GCS_MULTIPART_LIST, NULL);
    /* Another host (the token endpoint) is not a Cloud Storage request. */
    check(HTTP_POST, g_strdup("http://tokens:2/token"), METRICS_GCS_METHOD_COUNT, NULL);
    check(HTTP_POST, g_strdup("http://h:12/storage/v1/b/b/o"), METRICS_GCS_METHOD_COUNT, NULL);
}
END_TEST

START_TEST(retry_causes)
{
    ck_assert_int_eq(gcs_retry_cause(429, 0, false), METRICS_RETRY_RATE_LIMITED);
    ck_assert_int_eq(gcs_retry_cause(503, 0, false), METRICS_RETRY_SERVER_ERROR);
    ck_assert_int_eq(gcs_retry_cause(0, 28 /* CURLE_OPERATION_TIMEDOUT */, false),
                     METRICS_RETRY_TIMEOUT);
    ck_assert_int_eq(gcs_retry_cause(0, 28, true), METRICS_RETRY_STALLED);
    ck_assert_int_eq(gcs_retry_cause(0, 56 /* CURLE_RECV_ERROR */, false),
                     METRICS_RETRY_CONNECTION);
    ck_assert_int_eq(gcs_retry_cause(0, 8 /* CURLE_WEIRD_SERVER_REPLY */, false),
                     METRICS_RETRY_GARBLED);
}
END_TEST

TEST_SUITE(metrics_suite)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, histogram_buckets_are_le_boundaries);
    tcase_add_test(tc, errors_by_gcsfuse_category);
    tcase_add_test(tc, concurrent_recording_loses_nothing);
    tcase_add_test(tc, classify_the_urls_the_gcs_layer_builds);
    tcase_add_test(tc, retry_causes);
    suite_add_tcase(s, tc);
    return s;
}
