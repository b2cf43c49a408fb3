/* AIMD of the prefetcher's compose share and concurrency (src/io/aimd.c). */
#include "test-common.h"

#include "fluxfs/aimd.h"
#include "fluxfs/temp_reaper.h"

START_TEST(aimd_decreases_multiplicatively_to_min)
{
    struct aimd a;
    aimd_init(&a, 0.0625, 1.0, 0.05, 0.5);
    ck_assert(a.value == 1.0);
    aimd_on_throttle(&a);
    ck_assert(a.value == 0.5);
    aimd_on_throttle(&a);
    ck_assert(a.value == 0.25);
    for (int i = 0; i < 10; i++)
        aimd_on_throttle(&a);
    ck_assert(a.value == 0.0625);
    ck_assert_uint_eq(a.throttles, 12);
}
END_TEST

START_TEST(aimd_increases_additively_to_max)
{
    struct aimd a;
    aimd_init(&a, 1, 8, 1, 0.5);
    aimd_on_throttle(&a);
    aimd_on_throttle(&a);
    ck_assert_uint_eq(aimd_limit(&a), 2);
    aimd_on_success(&a);
    ck_assert_uint_eq(aimd_limit(&a), 3);
    for (int i = 0; i < 20; i++)
        aimd_on_success(&a);
    ck_assert_uint_eq(aimd_limit(&a), 8);
    ck_assert_uint_eq(a.successes, 21);
}
END_TEST

START_TEST(aimd_limit_never_below_one)
{
    struct aimd a;
    aimd_init(&a, 0.25, 4, 0.5, 0.5);
    for (int i = 0; i < 10; i++)
        aimd_on_throttle(&a);
    ck_assert(a.value == 0.25);
    ck_assert_uint_eq(aimd_limit(&a), 1);
}
END_TEST

START_TEST(aimd_allowed_spreads_the_share)
{
    struct aimd a;
    aimd_init(&a, 0.0, 1.0, 0.25, 0.5);
    int yes = 0;
    for (int i = 0; i < 100; i++)
        yes += aimd_allowed(&a);
    ck_assert_int_eq(yes, 100);
    aimd_on_throttle(&a);
    aimd_on_throttle(&a); /* 0.25 */
    yes = 0;
    for (int i = 0; i < 100; i++) {
        bool allowed = aimd_allowed(&a);
        ck_assert(allowed == (i % 4 == 3));
        yes += allowed;
    }
    ck_assert_int_eq(yes, 25);
    aimd_init(&a, 0.0, 1.0, 0.25, 0.5);
    a.value = 0;
    for (int i = 0; i < 10; i++)
        ck_assert(!aimd_allowed(&a));
}
END_TEST

/* The pause before a temporary's delete is sent again: doubling from 1 s to 32 s, jittered to
 * half of that at least. */
START_TEST(temp_reaper_pause_doubles_to_a_cap)
{
    ck_assert(temp_reaper_pause_s(1, 0.0) == 0.5);
    ck_assert(temp_reaper_pause_s(1, 0.999) < 1.0);
    ck_assert(temp_reaper_pause_s(2, 0.0) == 1.0);
    ck_assert(temp_reaper_pause_s(3, 0.0) == 2.0);
    ck_assert(temp_reaper_pause_s(6, 0.0) == 16.0);
    ck_assert(temp_reaper_pause_s(7, 0.0) == 16.0);
    ck_assert(temp_reaper_pause_s(1000, 0.999) < 32.0);
    ck_assert(temp_reaper_pause_s(1000, 0.999) > 31.0);
    ck_assert(temp_reaper_pause_s(0, 0.0) == 0.5);
}
END_TEST

TEST_SUITE(io_aimd_suite)
{
    Suite *s = suite_create("io-aimd");
    TCase *tc = tcase_create("aimd");
    tcase_add_test(tc, aimd_decreases_multiplicatively_to_min);
    tcase_add_test(tc, aimd_increases_additively_to_max);
    tcase_add_test(tc, aimd_limit_never_below_one);
    tcase_add_test(tc, aimd_allowed_spreads_the_share);
    tcase_add_test(tc, temp_reaper_pause_doubles_to_a_cap);
    suite_add_tcase(s, tc);
    return s;
}
