/* The parallel listing engine against an in-memory fake of objects.list (prefix, delimiter,
 * startOffset, endOffset, pageToken, maxResults), answering from a thread pool like the
 * engine thread would: every object listed exactly once, prefixes de-duplicated, one request
 * for small directories, work stealing on large ones, errors reported. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fluxfs/listing.h"
#include "fluxfs/log.h"

struct fake_bucket {
    GPtrArray *names; /* sorted */
    GThreadPool *pool;
    gint requests;      /* atomic */
    gint fail_after;    /* atomic: fail the request with this number (0 = never) */
    gint max_in_flight; /* atomic */
    gint in_flight;     /* atomic */
    enum { HONEST, REPEAT_TOKEN, ENDLESS } lie;
};

struct fake_call {
    struct fake_bucket *bucket;
    char *prefix, *delimiter, *start, *end, *token;
    unsigned max_results;
    bool trailing;
    gcs_list_cb cb;
    void *user;
    int number;
};

static int compare_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static guint lower_bound(GPtrArray *names, const char *key)
{
    guint lo = 0, hi = names->len;
    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        if (strcmp(names->pdata[mid], key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void fake_answer(gpointer data, gpointer user_data)
{
    struct fake_call *call = data;
    struct fake_bucket *bucket = call->bucket;
    g_usleep(g_random_int_range(0, 300));
    if (call->number == g_atomic_int_get(&bucket->fail_after)) {
        g_atomic_int_add(&bucket->in_flight, -1);
        call->cb(-EIO, NULL, call->user);
        goto done;
    }
    struct gcs_list_page *page = g_new0(struct gcs_list_page, 1);
    page->objects = g_ptr_array_new_with_free_func((GDestroyNotify)gcs_object_free);
    page->prefixes = g_ptr_array_new_with_free_func(g_free);
    if (bucket->lie == ENDLESS) {
        page->next_page_token = g_strdup_printf("endless-%d", call->number);
        g_atomic_int_add(&bucket->in_flight, -1);
        call->cb(0, page, call->user);
        goto done;
    }
    const char *from = call->start ? call->start : call->prefix;
    if (call->token && strcmp(call->token, from) > 0)
        from = call->token;
    if (strcmp(from, call->prefix) < 0)
        from = call->prefix;
    size_t prefix_len = strlen(call->prefix);
    unsigned count = 0;
    for (guint i = lower_bound(bucket->names, from); i < bucket->names->len; i++) {
        const char *name = bucket->names->pdata[i];
        if (strncmp(name, call->prefix, prefix_len) != 0)
            break;
        if (call->end && strcmp(name, call->end) >= 0)
            break;
        if (count == call->max_results) {
            page->next_page_token = g_strdup(name);
            break;
        }
        const char *slash = call->delimiter ? strchr(name + prefix_len, '/') : NULL;
        if (slash) {
            char *common = g_strndup(name, (size_t)(slash - name) + 1);
            g_ptr_array_add(page->prefixes, common);
            if (call->trailing && strcmp(name, common) == 0) {
                struct gcs_object *obj = g_new0(struct gcs_object, 1);
                obj->name = g_strdup(name);
                g_ptr_array_add(page->objects, obj);
            }
            count++;
            /* Skip the rest of this prefix. */
            char *after = listing_prefix_end(common);
            i = lower_bound(bucket->names, after) - 1;
            g_free(after);
            continue;
        }
        struct gcs_object *obj = g_new0(struct gcs_object, 1);
        obj->name = g_strdup(name);
        obj->size = strlen(name);
        obj->generation = 1;
        g_ptr_array_add(page->objects, obj);
        count++;
    }
    if (bucket->lie == REPEAT_TOKEN && call->token && page->next_page_token) {
        g_free(page->next_page_token);
        page->next_page_token = g_strdup(call->token);
    }
    g_atomic_int_add(&bucket->in_flight, -1);
    call->cb(0, page, call->user);
done:
    g_free(call->prefix);
    g_free(call->delimiter);
    g_free(call->start);
    g_free(call->end);
    g_free(call->token);
    g_free(call);
}

static void fake_list(void *backend, const struct gcs_list_params *params, gcs_list_cb cb,
                      void *user)
{
    struct fake_bucket *bucket = backend;
    struct fake_call *call = g_new0(struct fake_call, 1);
    call->bucket = bucket;
    call->prefix = g_strdup(params->prefix ? params->prefix : "");
    call->delimiter = g_strdup(params->delimiter);
    call->start = g_strdup(params->start_offset);
    call->end = g_strdup(params->end_offset);
    call->token = g_strdup(params->page_token);
    call->max_results = params->max_results ? params->max_results : 1000;
    call->trailing = params->include_trailing_delimiter;
    call->cb = cb;
    call->user = user;
    call->number = g_atomic_int_add(&bucket->requests, 1) + 1;
    int now = g_atomic_int_add(&bucket->in_flight, 1) + 1;
    int seen;
    while ((seen = g_atomic_int_get(&bucket->max_in_flight)) < now &&
           !g_atomic_int_compare_and_exchange(&bucket->max_in_flight, seen, now))
        ;
    g_thread_pool_push(bucket->pool, call, NULL);
}

static void fake_init(struct fake_bucket *bucket, GPtrArray *names)
{
    memset(bucket, 0, sizeof(*bucket));
    g_ptr_array_sort(names, compare_strings);
    bucket->names = names;
    bucket->pool = g_thread_pool_new(fake_answer, NULL, 8, FALSE, NULL);
}

static void fake_clear(struct fake_bucket *bucket)
{
    g_thread_pool_free(bucket->pool, FALSE, TRUE);
    g_ptr_array_free(bucket->names, TRUE);
}

/* Checks that the result holds exactly the expected objects and prefixes, each once. */
static void check_result(GPtrArray *names, const char *prefix, bool recursive,
                         const struct listing_result *result)
{
    GPtrArray *want_objects = g_ptr_array_new();
    GHashTable *want_prefixes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    size_t prefix_len = strlen(prefix);
    for (guint i = 0; i < names->len; i++) {
        const char *name = names->pdata[i];
        if (strncmp(name, prefix, prefix_len) != 0)
            continue;
        const char *slash = recursive ? NULL : strchr(name + prefix_len, '/');
        if (slash)
            g_hash_table_add(want_prefixes, g_strndup(name, (size_t)(slash - name) + 1));
        else
            g_ptr_array_add(want_objects, (gpointer)name);
    }
    ck_assert_uint_eq(result->objects->len, want_objects->len);
    for (guint i = 0; i < want_objects->len; i++) {
        const struct dir_entry *obj = &g_array_index(result->objects, struct dir_entry, i);
        ck_assert_str_eq(obj->name, want_objects->pdata[i]);
    }
    ck_assert_uint_eq(result->prefixes->len, g_hash_table_size(want_prefixes));
    for (guint i = 0; i < result->prefixes->len; i++) {
        ck_assert(g_hash_table_contains(want_prefixes, result->prefixes->pdata[i]));
        if (i > 0)
            ck_assert(strcmp(result->prefixes->pdata[i - 1], result->prefixes->pdata[i]) < 0);
    }
    g_ptr_array_free(want_objects, TRUE);
    g_hash_table_destroy(want_prefixes);
}

static int run_listing(struct fake_bucket *bucket, const char *prefix, bool recursive,
                       unsigned parallelism, unsigned page_size, struct listing_result *result)
{
    struct listing_config config = {
        .prefix = prefix,
        .recursive = recursive,
        .parallelism = parallelism,
        .page_size = page_size,
    };
    memset(result, 0, sizeof(*result));
    return listing_run(fake_list, bucket, &config, result);
}

/* prefix + a zero-padded number of `digits` digits, count names. */
static GPtrArray *numbered_names(const char *prefix, int digits, int count)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (int i = 0; i < count; i++)
        g_ptr_array_add(names, g_strdup_printf("%s%0*d", prefix, digits, i));
    return names;
}

START_TEST(small_directory_one_request)
{
    struct fake_bucket bucket;
    GPtrArray *names = numbered_names("d/", 5, 500);
    g_ptr_array_add(names, g_strdup("other/x"));
    g_ptr_array_add(names, g_strdup("d/sub/x"));
    fake_init(&bucket, names);
    struct listing_result result;
    ck_assert_int_eq(run_listing(&bucket, "d/", false, 16, 1000, &result), 0);
    check_result(names, "d/", false, &result);
    ck_assert_int_eq(g_atomic_int_get(&bucket.requests), 1);
    ck_assert_uint_eq(result.requests, 1);
    listing_result_clear(&result);
    fake_clear(&bucket);
}
END_TEST

START_TEST(large_directory_parallel)
{
    struct fake_bucket bucket;
    GPtrArray *names = numbered_names("dir/", 8, 100000);
    fake_init(&bucket, names);
    struct listing_result result;
    ck_assert_int_eq(run_listing(&bucket, "dir/", false, 16, 1000, &result), 0);
    check_result(names, "dir/", false, &result);
    ck_assert_uint_gt(result.pieces, 4);
    ck_assert_int_gt(g_atomic_int_get(&bucket.max_in_flight), 4);
    /* At most about one and a half times the pages of a sequential listing. */
    ck_assert_uint_le(result.requests, 160);
    listing_result_clear(&result);

    ck_assert_int_eq(run_listing(&bucket, "dir/", false, 1, 1000, &result), 0);
    check_result(names, "dir/", false, &result);
    ck_assert_uint_eq(result.requests, 100); /* sequential: exactly the pages */
    ck_assert_uint_eq(result.pieces, 1);
    listing_result_clear(&result);
    fake_clear(&bucket);
}
END_TEST

/* Issue 3: no extra cost for directories that fit in one page (or two), and about one request
 * per page (the far probe, and few speculative pieces past the end) up to ten pages. */
START_TEST(few_pages_cost_about_their_pages)
{
    if (g_getenv("FLUXFS_TEST_VERBOSE"))
        flog_init(FLOG_TRACE, false, NULL);
    const int entries[] = {1000, 1500, 2000, 2500, 3000, 4000, 5000, 6500, 8000, 10000, 20000};
    for (size_t k = 0; k < G_N_ELEMENTS(entries); k++) {
        struct fake_bucket bucket;
        GPtrArray *names = numbered_names("img_", 6, entries[k]);
        fake_init(&bucket, names);
        struct listing_result result;
        /* The default parallelism: it bounds the speculation of larger directories. */
        ck_assert_int_eq(run_listing(&bucket, "img_", false, 32, 1000, &result), 0);
        check_result(names, "img_", false, &result);
        unsigned pages = (unsigned)(entries[k] + 999) / 1000;
        if (g_getenv("FLUXFS_TEST_VERBOSE"))
            g_printerr("steals %u; ", result.steals),
                g_printerr("%d entries: %u requests, %u pieces\n", entries[k], result.requests,
                           result.pieces);
        if (pages <= 2)
            ck_assert_uint_le(result.requests, pages);
        else if (pages <= 3)
            ck_assert_uint_le(result.requests, pages + 1); /* the probe */
        else if (pages <= 10)
            ck_assert_uint_le(result.requests, pages + pages / 2 + 2);
        else /* up to a round of 32 speculative pieces past the end */
            ck_assert_uint_le(result.requests, 3 * pages);
        listing_result_clear(&result);
        fake_clear(&bucket);
    }
}
END_TEST

START_TEST(random_names_and_prefixes)
{
    struct fake_bucket bucket;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    GRand *rand = g_rand_new_with_seed(7);
    const char *pieces[] = {
        "a", "b", "c", "0", "7", "-", "_", " ", "%", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
        "/", "/"};
    for (int i = 0; i < 6000; i++) {
        GString *s = g_string_new("r/");
        int len = g_rand_int_range(rand, 1, 10);
        for (int j = 0; j < len; j++)
            g_string_append(s, pieces[g_rand_int_range(rand, 0, G_N_ELEMENTS(pieces))]);
        g_ptr_array_add(names, g_string_free(s, FALSE));
    }
    g_rand_free(rand);
    /* Remove duplicates: object names are unique. */
    g_ptr_array_sort(names, compare_strings);
    for (guint i = 1; i < names->len;) {
        if (strcmp(names->pdata[i - 1], names->pdata[i]) == 0)
            g_ptr_array_remove_index(names, i);
        else
            i++;
    }
    fake_init(&bucket, names);
    struct listing_result result;
    for (unsigned parallelism = 1; parallelism <= 32; parallelism *= 2) {
        ck_assert_int_eq(run_listing(&bucket, "r/", false, parallelism, 37, &result), 0);
        check_result(names, "r/", false, &result);
        listing_result_clear(&result);
        ck_assert_int_eq(run_listing(&bucket, "r/", true, parallelism, 53, &result), 0);
        check_result(names, "r/", true, &result);
        listing_result_clear(&result);
    }
    /* The whole bucket (no end of prefix). */
    ck_assert_int_eq(run_listing(&bucket, "", true, 8, 100, &result), 0);
    check_result(names, "", true, &result);
    listing_result_clear(&result);
    fake_clear(&bucket);
}
END_TEST

START_TEST(prefixes_straddling_splits)
{
    /* Few large subdirectories: their prefixes come back from several pieces. */
    struct fake_bucket bucket;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (int d = 0; d < 30; d++)
        for (int i = 0; i < 400; i++)
            g_ptr_array_add(names, g_strdup_printf("t/sub%02d/%05d", d, i));
    for (int i = 0; i < 3000; i++)
        g_ptr_array_add(names, g_strdup_printf("t/sub%02d-file%04d", i % 30, i));
    fake_init(&bucket, names);
    struct listing_result result;
    ck_assert_int_eq(run_listing(&bucket, "t/", false, 16, 50, &result), 0);
    check_result(names, "t/", false, &result);
    ck_assert_uint_eq(result.prefixes->len, 30);
    listing_result_clear(&result);
    fake_clear(&bucket);
}
END_TEST

START_TEST(errors_are_reported)
{
    struct fake_bucket bucket;
    GPtrArray *names = numbered_names("e/", 6, 20000);
    fake_init(&bucket, names);
    struct listing_result result;
    for (int fail = 1; fail <= 7; fail += 3) {
        g_atomic_int_set(&bucket.requests, 0);
        g_atomic_int_set(&bucket.fail_after, fail);
        ck_assert_int_eq(run_listing(&bucket, "e/", false, 8, 500, &result), -EIO);
        ck_assert_ptr_null(result.objects);
    }
    fake_clear(&bucket);
}
END_TEST

START_TEST(repeated_page_token_is_eio)
{
    struct fake_bucket bucket;
    fake_init(&bucket, numbered_names("r/", 6, 5000));
    bucket.lie = REPEAT_TOKEN;
    struct listing_result result;
    unsigned parallelism[] = {1, 8};
    for (unsigned i = 0; i < G_N_ELEMENTS(parallelism); i++) {
        g_atomic_int_set(&bucket.requests, 0);
        ck_assert_int_eq(run_listing(&bucket, "r/", false, parallelism[i], 500, &result), -EIO);
        ck_assert_ptr_null(result.objects);
        /* It stopped at the first repeat (the pieces in flight then land). */
        ck_assert_int_le(g_atomic_int_get(&bucket.requests), 40);
    }
    fake_clear(&bucket);
}
END_TEST

static bool stop_after_50_requests(void *user)
{
    return g_atomic_int_get(&((struct fake_bucket *)user)->requests) >= 50;
}

START_TEST(endless_listing_stops_when_asked)
{
    struct fake_bucket bucket;
    fake_init(&bucket, numbered_names("n/", 6, 10));
    bucket.lie = ENDLESS;
    struct listing_result result;
    memset(&result, 0, sizeof(result));
    struct listing_config config = {
        .prefix = "n/",
        .parallelism = 8,
        .page_size = 500,
        .stop = stop_after_50_requests,
        .stop_user = &bucket,
    };
    ck_assert_int_eq(listing_run(fake_list, &bucket, &config, &result), -EINTR);
    ck_assert_ptr_null(result.objects);
    ck_assert_int_le(g_atomic_int_get(&bucket.requests), 51);
    fake_clear(&bucket);
}
END_TEST

TEST_SUITE(listing_suite)
{
    Suite *s = suite_create("listing");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, small_directory_one_request);
    tcase_add_test(tc, large_directory_parallel);
    tcase_add_test(tc, few_pages_cost_about_their_pages);
    tcase_add_test(tc, random_names_and_prefixes);
    tcase_add_test(tc, prefixes_straddling_splits);
    tcase_add_test(tc, errors_are_reported);
    tcase_add_test(tc, repeated_page_token_is_eio);
    tcase_add_test(tc, endless_listing_stops_when_asked);
    suite_add_tcase(s, tc);
    return s;
}
