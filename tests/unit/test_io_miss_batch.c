/* The demand-miss batch plan (include/fluxfs/miss_batch.h): compose only for enough objects. */
#include "test-common.h"

#include <glib.h>

#include "fluxfs/miss_batch.h"

static const struct compose_plan_config config = {
    .max_objects = 32, .object_max_size = 1000, .batch_max_bytes = 10000};

static size_t plan_sizes(unsigned min_count, const uint64_t *sizes, size_t n,
                         struct compose_batch *batches)
{
    struct compose_item items[128];
    for (size_t i = 0; i < n; i++)
        items[i] = (struct compose_item){.name = "x", .generation = 1, .size = sizes[i]};
    return miss_batch_plan(&config, min_count, items, n, batches);
}

START_TEST(fewer_than_minimum_are_plain_gets)
{
    uint64_t sizes[3] = {10, 20, 30};
    struct compose_batch batches[3];
    size_t count = plan_sizes(4, sizes, 3, batches);
    ck_assert_uint_eq(count, 1);
    ck_assert_int_eq(batches[0].kind, BATCH_DIRECT);
    ck_assert_uint_eq(batches[0].count, 3);
}
END_TEST

START_TEST(minimum_and_more_are_composed)
{
    uint64_t sizes[40];
    for (size_t i = 0; i < 40; i++)
        sizes[i] = 100;
    struct compose_batch batches[40];
    /* 40 objects: one compose of 32, then 8 more (>= 4: composed too). */
    size_t count = plan_sizes(4, sizes, 40, batches);
    ck_assert_uint_eq(count, 2);
    ck_assert_int_eq(batches[0].kind, BATCH_COMPOSE);
    ck_assert_uint_eq(batches[0].count, 32);
    ck_assert_int_eq(batches[1].kind, BATCH_COMPOSE);
    ck_assert_uint_eq(batches[1].count, 8);
    /* 35: the tail of 3 is below the minimum. */
    count = plan_sizes(4, sizes, 35, batches);
    ck_assert_uint_eq(count, 2);
    ck_assert_int_eq(batches[1].kind, BATCH_DIRECT);
    ck_assert_uint_eq(batches[1].count, 3);
}
END_TEST

START_TEST(empty_and_large_objects_are_plain_gets)
{
    uint64_t sizes[7] = {0, 10, 10, 10, 10, 5000, 10};
    struct compose_batch batches[7];
    size_t count = plan_sizes(4, sizes, 7, batches);
    size_t composed = 0, next = 0;
    for (size_t b = 0; b < count; b++) {
        ck_assert_uint_eq(batches[b].first, next);
        next += batches[b].count;
        ck_assert(batches[b].kind == BATCH_COMPOSE || batches[b].kind == BATCH_DIRECT);
        if (batches[b].kind == BATCH_COMPOSE) {
            composed += batches[b].count;
            for (size_t i = 0; i < batches[b].count; i++) {
                ck_assert_uint_gt(sizes[batches[b].first + i], 0);
                ck_assert_uint_le(sizes[batches[b].first + i], config.object_max_size);
            }
        }
    }
    ck_assert_uint_eq(next, 7);
    ck_assert_uint_eq(composed, 4); /* the four 10-byte objects in a row */
}
END_TEST

START_TEST(minimum_below_two_means_two)
{
    uint64_t sizes[2] = {10, 10};
    struct compose_batch batches[2];
    ck_assert_uint_eq(plan_sizes(0, sizes, 2, batches), 1);
    ck_assert_int_eq(batches[0].kind, BATCH_COMPOSE);
    ck_assert_uint_eq(plan_sizes(3, sizes, 2, batches), 1);
    ck_assert_int_eq(batches[0].kind, BATCH_DIRECT);
}
END_TEST

TEST_SUITE(io_miss_batch_suite)
{
    Suite *s = suite_create("io_miss_batch");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, fewer_than_minimum_are_plain_gets);
    tcase_add_test(tc, minimum_and_more_are_composed);
    tcase_add_test(tc, empty_and_large_objects_are_plain_gets);
    tcase_add_test(tc, minimum_below_two_means_two);
    suite_add_tcase(s, tc);
    return s;
}
