/* The emulator's rate model (tests/emulator/rate.c): bucket rates, the per-name write limit,
 * scale-up under sustained load, counters. Time is passed in, so nothing here waits. */
#include "test-common.h"

#include "rate.h"

#define S 1000000 /* microseconds in a second */

START_TEST(rate_model_off_is_null)
{
    struct emu_rate_config config = {0};
    ck_assert_ptr_null(emu_rate_model_new(&config));
    unsigned retry = 0;
    ck_assert_int_eq(emu_rate_decide(NULL, "b", "o", EMU_RATE_WRITE, 0, &retry), EMU_RATE_OK);
}
END_TEST

START_TEST(rate_write_bucket_refuses_beyond_rate)
{
    struct emu_rate_config config = {.write_rate = 5, .scale_up_s = 1200};
    struct emu_rate_model *model = emu_rate_model_new(&config);
    unsigned retry = 0;
    int64_t now = 10 * S;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(emu_rate_decide(model, "b", NULL, EMU_RATE_WRITE, now, &retry),
                         EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", NULL, EMU_RATE_WRITE, now, &retry),
                     EMU_RATE_REFUSED_WRITE);
    ck_assert_uint_ge(retry, 1);
    /* Another bucket has its own rate; reads are not limited (read_rate 0). */
    ck_assert_int_eq(emu_rate_decide(model, "c", NULL, EMU_RATE_WRITE, now, &retry), EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", "o", EMU_RATE_READ, now, &retry), EMU_RATE_OK);
    /* A fifth of a second later one token is back. */
    ck_assert_int_eq(emu_rate_decide(model, "b", NULL, EMU_RATE_WRITE, now + S / 5, &retry),
                     EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", NULL, EMU_RATE_WRITE, now + S / 5, &retry),
                     EMU_RATE_REFUSED_WRITE);
    struct emu_rate_counters counters;
    emu_rate_counters(model, &counters);
    ck_assert_uint_eq(counters.refused_writes, 2);
    ck_assert_uint_eq(counters.refused_reads, 0);
    emu_rate_model_free(model);
}
END_TEST

START_TEST(rate_read_bucket)
{
    struct emu_rate_config config = {.read_rate = 2};
    struct emu_rate_model *model = emu_rate_model_new(&config);
    unsigned retry = 0;
    ck_assert_int_eq(emu_rate_decide(model, "b", "x", EMU_RATE_READ, S, &retry), EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", "x", EMU_RATE_READ, S, &retry), EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", "x", EMU_RATE_READ, S, &retry),
                     EMU_RATE_REFUSED_READ);
    ck_assert_int_eq(emu_rate_decide(model, "b", "x", EMU_RATE_WRITE, S, &retry), EMU_RATE_OK);
    struct emu_rate_counters counters;
    emu_rate_counters(model, &counters);
    ck_assert_uint_eq(counters.refused_reads, 1);
    emu_rate_model_free(model);
}
END_TEST

START_TEST(rate_one_write_per_second_per_name)
{
    struct emu_rate_config config = {.write_rate = 1000, .per_object_rate = 1};
    struct emu_rate_model *model = emu_rate_model_new(&config);
    unsigned retry = 0;
    int64_t now = 5 * S;
    ck_assert_int_eq(emu_rate_decide(model, "b", "o", EMU_RATE_NAME_WRITE, now, &retry),
                     EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", "o", EMU_RATE_NAME_WRITE, now + S / 2, &retry),
                     EMU_RATE_REFUSED_OBJECT);
    ck_assert_uint_eq(retry, 1);
    /* Other names, and deletes (not a create or change of the name), pass. */
    ck_assert_int_eq(emu_rate_decide(model, "b", "p", EMU_RATE_NAME_WRITE, now + S / 2, &retry),
                     EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", "o", EMU_RATE_WRITE, now + S / 2, &retry),
                     EMU_RATE_OK);
    ck_assert_int_eq(emu_rate_decide(model, "b", "o", EMU_RATE_NAME_WRITE, now + S, &retry),
                     EMU_RATE_OK);
    struct emu_rate_counters counters;
    emu_rate_counters(model, &counters);
    ck_assert_uint_eq(counters.refused_object_writes, 1);
    ck_assert_uint_eq(counters.refused_writes, 0);
    emu_rate_model_free(model);
}
END_TEST

START_TEST(rate_scales_up_under_sustained_load)
{
    struct emu_rate_config config = {.write_rate = 2, .scale_up_s = 10};
    struct emu_rate_model *model = emu_rate_model_new(&config);
    unsigned retry = 0;
    double write_rate, read_rate;
    /* Ten requests a second, more than every rate it reaches, for 25 seconds. */
    for (int64_t t = 0; t < 25 * S; t += S / 10)
        emu_rate_decide(model, "b", NULL, EMU_RATE_WRITE, S + t, &retry);
    emu_rate_current(model, "b", &write_rate, &read_rate);
    ck_assert(write_rate == 8); /* two doublings: at 10 s and 20 s of load */
    struct emu_rate_counters counters;
    emu_rate_counters(model, &counters);
    ck_assert_uint_eq(counters.scale_ups, 2);
    ck_assert_uint_gt(counters.refused_writes, 0);
    /* An idle bucket keeps its starting rate. */
    emu_rate_current(model, "other", &write_rate, &read_rate);
    ck_assert(write_rate == 2);
    emu_rate_model_free(model);
}
END_TEST

START_TEST(rate_lull_restarts_the_load)
{
    struct emu_rate_config config = {.write_rate = 1, .scale_up_s = 10};
    struct emu_rate_model *model = emu_rate_model_new(&config);
    unsigned retry = 0;
    double write_rate, read_rate;
    /* Refusals 8 s apart with a 30 s lull between: never 10 s of sustained load. */
    int64_t times[] = {S, S, 9 * S, 9 * S, 40 * S, 40 * S, 48 * S, 48 * S};
    for (size_t i = 0; i < G_N_ELEMENTS(times); i++)
        emu_rate_decide(model, "b", NULL, EMU_RATE_WRITE, times[i], &retry);
    emu_rate_current(model, "b", &write_rate, &read_rate);
    ck_assert(write_rate == 1);
    emu_rate_model_free(model);
}
END_TEST

TEST_SUITE(emulator_rate_suite)
{
    Suite *s = suite_create("emulator-rate");
    TCase *tc = tcase_create("rate");
    tcase_add_test(tc, rate_model_off_is_null);
    tcase_add_test(tc, rate_write_bucket_refuses_beyond_rate);
    tcase_add_test(tc, rate_read_bucket);
    tcase_add_test(tc, rate_one_write_per_second_per_name);
    tcase_add_test(tc, rate_scales_up_under_sustained_load);
    tcase_add_test(tc, rate_lull_restarts_the_load);
    suite_add_tcase(s, tc);
    return s;
}
