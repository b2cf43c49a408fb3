/* The compose batch planner and the composite split check (include/fluxfs/compose_plan.h). */
#include "test-common.h"

#include <errno.h>
#include <glib.h>

#include "fluxfs/compose_plan.h"
#include "fluxfs/crc32c.h"

static const struct compose_plan_config config = {
    .max_objects = 32, .object_max_size = 1000, .batch_max_bytes = 10000};

static size_t plan_sizes(const struct compose_plan_config *cfg, const uint64_t *sizes, size_t n,
                         struct compose_batch *batches)
{
    struct compose_item items[256];
    for (size_t i = 0; i < n; i++)
        items[i] = (struct compose_item){.name = "x", .generation = 1, .size = sizes[i]};
    return compose_plan(cfg, items, n, batches);
}

/* Every item in exactly one batch, in order, within every limit. */
static void check_invariants(const struct compose_plan_config *cfg, const uint64_t *sizes, size_t n,
                             const struct compose_batch *batches, size_t count)
{
    size_t next = 0;
    for (size_t b = 0; b < count; b++) {
        ck_assert_uint_eq(batches[b].first, next);
        ck_assert_uint_ge(batches[b].count, 1);
        uint64_t bytes = 0;
        for (size_t i = 0; i < batches[b].count; i++)
            bytes += sizes[batches[b].first + i];
        ck_assert_uint_eq(bytes, batches[b].bytes);
        if (batches[b].kind == BATCH_COMPOSE) {
            ck_assert_uint_ge(batches[b].count, 2);
            ck_assert_uint_le(batches[b].count, MIN(cfg->max_objects, 32u));
            ck_assert_uint_le(bytes, cfg->batch_max_bytes);
            for (size_t i = 0; i < batches[b].count; i++) {
                ck_assert_uint_gt(sizes[batches[b].first + i], 0);
                ck_assert_uint_le(sizes[batches[b].first + i], cfg->object_max_size);
            }
        } else if (batches[b].kind == BATCH_EMPTY) {
            ck_assert_uint_eq(batches[b].count, 1);
            ck_assert_uint_eq(bytes, 0);
        } else {
            ck_assert_uint_eq(batches[b].count, 1);
        }
        next += batches[b].count;
    }
    ck_assert_uint_eq(next, n);
}

START_TEST(groups_of_32)
{
    uint64_t sizes[100];
    for (int i = 0; i < 100; i++)
        sizes[i] = 100;
    struct compose_batch batches[100];
    size_t count = plan_sizes(&config, sizes, 100, batches);
    check_invariants(&config, sizes, 100, batches, count);
    ck_assert_uint_eq(count, 4);
    ck_assert_uint_eq(batches[0].count, 32);
    ck_assert_uint_eq(batches[3].count, 4);
    ck_assert_int_eq(batches[3].kind, BATCH_COMPOSE);
}
END_TEST

START_TEST(byte_cap_large_and_empty)
{
    /* 30 x 900 bytes: the 10000-byte cap closes a batch after 11. */
    uint64_t sizes[34];
    for (int i = 0; i < 30; i++)
        sizes[i] = 900;
    sizes[30] = 0;    /* empty: no request */
    sizes[31] = 5000; /* over object_max_size: alone */
    sizes[32] = 10;   /* a lone small one: a plain GET, not a compose of one */
    sizes[33] = 0;
    struct compose_batch batches[34];
    size_t count = plan_sizes(&config, sizes, 34, batches);
    check_invariants(&config, sizes, 34, batches, count);
    ck_assert_uint_eq(batches[0].count, 11);
    ck_assert_uint_eq(batches[1].count, 11);
    ck_assert_uint_eq(batches[2].count, 8);
    ck_assert_int_eq(batches[3].kind, BATCH_EMPTY);
    ck_assert_int_eq(batches[4].kind, BATCH_DIRECT);
    ck_assert_int_eq(batches[5].kind, BATCH_DIRECT);
    ck_assert_int_eq(batches[6].kind, BATCH_EMPTY);
    ck_assert_uint_eq(count, 7);
}
END_TEST

START_TEST(random_sizes_keep_invariants)
{
    GRand *rng = g_rand_new_with_seed(42);
    for (int round = 0; round < 500; round++) {
        struct compose_plan_config cfg = {
            .max_objects = (unsigned)g_rand_int_range(rng, 0, 40),
            .object_max_size = (uint64_t)g_rand_int_range(rng, 1, 3000),
            .batch_max_bytes = (uint64_t)g_rand_int_range(rng, 1, 20000)};
        size_t n = (size_t)g_rand_int_range(rng, 0, 200);
        uint64_t sizes[200];
        for (size_t i = 0; i < n; i++)
            sizes[i] = g_rand_boolean(rng) ? 0 : (uint64_t)g_rand_int_range(rng, 0, 4000);
        struct compose_batch batches[200];
        size_t count = plan_sizes(&cfg, sizes, n, batches);
        struct compose_plan_config effective = cfg;
        if (effective.max_objects < 2)
            effective.max_objects = 2;
        check_invariants(&effective, sizes, n, batches, count);
    }
    g_rand_free(rng);
}
END_TEST

START_TEST(split_checks_lengths_and_crcs)
{
    char composite[64];
    for (int i = 0; i < 64; i++)
        composite[i] = (char)(i * 7);
    struct compose_item items[4] = {{.name = "a", .size = 10},
                                    {.name = "b", .size = 0},
                                    {.name = "c", .size = 30},
                                    {.name = "d", .size = 24}};
    items[0].has_crc32c = true;
    items[0].crc32c = crc32c_update(0, composite, 10);
    items[2].has_crc32c = true;
    items[2].crc32c = crc32c_update(0, composite + 10, 30);
    uint64_t offsets[4];
    size_t bad = 99;
    ck_assert_int_eq(compose_split_check(items, 4, composite, 64, offsets, &bad), 0);
    ck_assert_uint_eq(offsets[0], 0);
    ck_assert_uint_eq(offsets[1], 10);
    ck_assert_uint_eq(offsets[2], 10);
    ck_assert_uint_eq(offsets[3], 40);
    /* A composite of another length never splits. */
    ck_assert_int_eq(compose_split_check(items, 4, composite, 63, offsets, &bad), -EIO);
    ck_assert_uint_eq(bad, 4);
    /* A damaged piece is named. */
    composite[15] ^= 1;
    ck_assert_int_eq(compose_split_check(items, 4, composite, 64, offsets, &bad), -EIO);
    ck_assert_uint_eq(bad, 2);
}
END_TEST

TEST_SUITE(io_compose_plan_suite)
{
    Suite *s = suite_create("io_compose_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, groups_of_32);
    tcase_add_test(tc, byte_cap_large_and_empty);
    tcase_add_test(tc, random_sizes_keep_invariants);
    tcase_add_test(tc, split_checks_lengths_and_crcs);
    suite_add_tcase(s, tc);
    return s;
}
