/* The fake gcs layer itself (fake_gcs.h): preconditions, pinned reads, compose CRC32C, the
 * Nth-call faults and the hold that shows calls in flight. */
#include "test-common.h"

#include <errno.h>

#include "fake_gcs_test_util.h"

START_TEST(store_preconditions_and_pinned_reads)
{
    struct gcs_client *fake = fake_gcs_new();
    int64_t g1 = fake_gcs_put(fake, "a", "hello", 5);
    struct gcs_body body = {.data = "world!", .fd = -1, .len = 6};
    struct gcs_write_preconditions new_only = {.has_if_generation_match = true};
    ck_assert_int_eq(gcs_upload(fake, "a", &body, NULL, &new_only, NULL), -ESTALE);
    struct gcs_write_preconditions match = {.has_if_generation_match = true,
                                            .if_generation_match = g1};
    struct gcs_object obj;
    ck_assert_int_eq(gcs_upload(fake, "a", &body, NULL, &match, &obj), 0);
    ck_assert_int_gt(obj.generation, g1);
    gcs_object_clear(&obj);
    char buf[16];
    size_t got = 0;
    struct gcs_read_request old = {.name = "a", .generation = g1, .len = 5, .buf = buf};
    ck_assert_int_eq(gcs_read(fake, &old, &got), -ENOENT); /* the pinned generation is gone */
    struct gcs_read_request live = {.name = "a", .offset = 4, .len = 16, .buf = buf};
    ck_assert_int_eq(gcs_read(fake, &live, &got), 0);
    ck_assert_uint_eq(got, 2);
    ck_assert_int_eq(memcmp(buf, "d!", 2), 0);
    /* A body whose CRC32C does not match is refused. */
    body.has_crc32c = true;
    body.crc32c = 1234;
    ck_assert_int_eq(gcs_upload(fake, "b", &body, NULL, NULL, NULL), -EIO);
    ck_assert_int_eq(fake_gcs_get(fake, "b", NULL, NULL), -ENOENT);
    /* Compose: bytes and CRC32C of the concatenation. */
    fake_gcs_put(fake, "c", "hello ", 6);
    struct gcs_compose_source sources[] = {{"c", 0}, {"a", 0}};
    ck_assert_int_eq(gcs_compose(fake, "d", sources, 2, NULL, NULL, &obj), 0);
    ck_assert_int_eq(obj.component_count, 2);
    gcs_object_clear(&obj);
    fake_test_check_object(fake, "d", "hello world!", 12);
    ck_assert_uint_eq(fake_gcs_calls_named(fake, FAKE_GCS_COMPOSE_SOURCE, "a"), 1);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 3);
    fake_gcs_free(fake);
}
END_TEST

static void on_done(int err, void *user)
{
    int *slot = user;
    g_atomic_int_set(slot, err == 0 ? 1 : err);
}

START_TEST(faults_nth_and_hold)
{
    struct gcs_client *fake = fake_gcs_new();
    for (int i = 0; i < 5; i++) {
        char name[8];
        g_snprintf(name, sizeof(name), "o%d", i);
        fake_gcs_put(fake, name, "x", 1);
    }
    /* The 2nd and 3rd deletes of names containing "o" fail. */
    fake_gcs_fail(fake, FAKE_GCS_DELETE, "o", 2, 2, -EIO);
    int results[5] = {0};
    fake_gcs_hold(fake, true);
    for (int i = 0; i < 5; i++) {
        char name[8];
        g_snprintf(name, sizeof(name), "o%d", i);
        gcs_delete_async(fake, name, 0, on_done, &results[i]);
    }
    ck_assert(fake_gcs_wait_queued(fake, 5, 5000));
    ck_assert_int_eq(g_atomic_int_get(&results[0]), 0); /* nothing completes while held */
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 5);
    fake_gcs_hold(fake, false);
    ck_assert(fake_gcs_wait_idle(fake, 5000));
    int expected[5] = {1, -EIO, -EIO, 1, 1};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(g_atomic_int_get(&results[i]), expected[i]);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 2);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_DELETE), 5);
    ck_assert_uint_eq(fake_gcs_failures(fake, FAKE_GCS_DELETE), 2);
    ck_assert_uint_ge(fake_gcs_max_queued(fake), 5);
    /* A lost reply: the delete happens, the caller hears -EIO. */
    fake_gcs_clear_faults(fake);
    fake_gcs_lose_reply(fake, FAKE_GCS_DELETE, NULL, 1, 1, -EIO);
    ck_assert_int_eq(gcs_delete(fake, "o1", 0, NULL), -EIO);
    ck_assert_int_eq(fake_gcs_get(fake, "o1", NULL, NULL), -ENOENT);
    ck_assert_int_eq(gcs_delete(fake, "o2", 0, NULL), 0);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 0);
    fake_gcs_free(fake);
}
END_TEST

START_TEST(list_pages_and_prefixes)
{
    struct gcs_client *fake = fake_gcs_new();
    const char *names[] = {"d/a", "d/b", "d/sub/c", "d/sub/d", "e"};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
        fake_gcs_put(fake, names[i], "x", 1);
    struct gcs_list_params params = {.prefix = "d/", .delimiter = "/"};
    struct gcs_list_page page = {0};
    ck_assert_int_eq(gcs_list(fake, &params, &page), 0);
    ck_assert_uint_eq(page.objects->len, 2);
    ck_assert_uint_eq(page.prefixes->len, 1);
    ck_assert_str_eq(g_ptr_array_index(page.prefixes, 0), "d/sub/");
    ck_assert_ptr_null(page.next_page_token);
    gcs_list_page_clear(&page);
    struct gcs_list_params paged = {.prefix = "d/", .max_results = 3};
    ck_assert_int_eq(gcs_list(fake, &paged, &page), 0);
    ck_assert_uint_eq(page.objects->len, 3);
    ck_assert_ptr_nonnull(page.next_page_token);
    char *token = g_strdup(page.next_page_token);
    gcs_list_page_clear(&page);
    paged.page_token = token;
    ck_assert_int_eq(gcs_list(fake, &paged, &page), 0);
    ck_assert_uint_eq(page.objects->len, 1);
    ck_assert_str_eq(((struct gcs_object *)g_ptr_array_index(page.objects, 0))->name, "d/sub/d");
    gcs_list_page_clear(&page);
    g_free(token);
    fake_gcs_free(fake);
}
END_TEST

TEST_SUITE(fake_gcs_suite)
{
    Suite *s = suite_create("fake_gcs");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, store_preconditions_and_pinned_reads);
    tcase_add_test(tc, faults_nth_and_hold);
    tcase_add_test(tc, list_pages_and_prefixes);
    suite_add_tcase(s, tc);
    return s;
}
