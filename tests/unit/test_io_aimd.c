/* AIMD of the prefetcher's compose share and concurrency (src/io/aimd.c). */
#include "test-common.h"

#include "fluxfs/aimd.h"
#include "fluxfs/cost_model.h"
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

START_TEST(aimd_window_success_grows_by_step_per_round)
{
    /* A round is value successes: each limit grows by about the step per round, whatever it
     * is, so two mounts at 1 and at 4 close their gap in cuts (4 -> 2, 1 -> 1) and do not
     * widen it as they grow. */
    struct aimd low, high;
    aimd_init(&low, 1, 8, 1, 0.5);
    aimd_init(&high, 1, 8, 1, 0.5);
    for (int i = 0; i < 3; i++)
        aimd_on_throttle(&low); /* 1 */
    aimd_on_throttle(&high);    /* 4 */
    aimd_on_window_success(&low);
    ck_assert_double_eq_tol(low.value, 2.0, 1e-9); /* a round of 1 */
    for (int i = 0; i < 4; i++)
        aimd_on_window_success(&high); /* a round of 4 */
    ck_assert(high.value > 4.8 && high.value < 5.0);
    aimd_on_throttle(&high);
    aimd_on_throttle(&low);
    ck_assert_uint_eq(aimd_limit(&low), 1);
    ck_assert_uint_eq(aimd_limit(&high), 2);
    /* Below 1 (a fractional share) it steps as aimd_on_success does; it stops at max. */
    struct aimd share;
    aimd_init(&share, 0.0625, 1.0, 0.25, 0.5);
    aimd_on_throttle(&share);
    aimd_on_throttle(&share);
    aimd_on_window_success(&share);
    ck_assert_double_eq_tol(share.value, 0.5, 1e-9);
    for (int i = 0; i < 100; i++)
        aimd_on_window_success(&high);
    ck_assert(high.value == 8.0);
    ck_assert_uint_eq(high.successes, 104);
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

/* The two limits weighed (aimd_weigh): write 429s cut the compose share only while reads have
 * room; otherwise reads and writes back off together through the batches in flight. */
static struct aimd_weighed weigh(bool write, bool read, bool worthy, bool tight, bool at_min)
{
    struct aimd_signals s = {.write_refused = write,
                             .read_refused = read,
                             .compose_worthy = worthy,
                             .reads_tight = tight,
                             .share_at_min = at_min};
    return aimd_weigh(&s);
}

START_TEST(aimd_weigh_write_429s_with_reads_to_spare_cut_the_share)
{
    struct aimd_weighed w = weigh(true, false, true, false, false);
    ck_assert_int_eq(w.share, AIMD_CUT);
    ck_assert_int_eq(w.concurrency, AIMD_RAISE);
}
END_TEST

START_TEST(aimd_weigh_write_429s_with_reads_tight_cut_the_batches_in_flight)
{
    /* Reads refused in the same batch. */
    struct aimd_weighed w = weigh(true, true, true, false, false);
    ck_assert_int_eq(w.share, AIMD_HOLD);
    ck_assert_int_eq(w.concurrency, AIMD_CUT);
    /* Reads refused earlier: the batches in flight have not grown back. */
    w = weigh(true, false, true, true, false);
    ck_assert_int_eq(w.share, AIMD_HOLD);
    ck_assert_int_eq(w.concurrency, AIMD_CUT);
    /* The share at its floor: the batches in flight take the cut. */
    w = weigh(true, false, true, false, true);
    ck_assert_int_eq(w.share, AIMD_HOLD);
    ck_assert_int_eq(w.concurrency, AIMD_CUT);
}
END_TEST

START_TEST(aimd_weigh_read_429s_restore_the_share)
{
    struct aimd_weighed w = weigh(false, true, false, true, false);
    ck_assert_int_eq(w.share, AIMD_RESTORE);
    ck_assert_int_eq(w.concurrency, AIMD_CUT);
    w = weigh(false, true, true, false, false);
    ck_assert_int_eq(w.share, AIMD_RESTORE);
    ck_assert_int_eq(w.concurrency, AIMD_CUT);
}
END_TEST

START_TEST(aimd_weigh_no_429s_raise_both)
{
    struct aimd_weighed w = weigh(false, false, true, true, false);
    ck_assert_int_eq(w.share, AIMD_RAISE);
    ck_assert_int_eq(w.concurrency, AIMD_RAISE);
    /* A batch not worth composing says nothing about the share. */
    w = weigh(false, false, false, false, false);
    ck_assert_int_eq(w.share, AIMD_HOLD);
    ck_assert_int_eq(w.concurrency, AIMD_RAISE);
}
END_TEST

/* A fleet in miniature: two mounts under both limits, driven by the same signals, keep the
 * same compose share: the share is cut only while reads have room, so a mount that met read
 * 429s first does not slide to plain GETs while the other keeps composing. */
START_TEST(aimd_weigh_keeps_the_share_while_reads_are_tight)
{
    struct aimd share, flight;
    aimd_init(&share, 1.0 / 16, 1.0, 1.0 / 50, 0.5);
    aimd_init(&flight, 1, 8, 0.25, 0.5);
    /* A read 429 first: the batches in flight fall, the share stays at 1. */
    struct aimd_signals s = {.read_refused = true, .compose_worthy = true};
    s.reads_tight = aimd_below_max(&flight);
    struct aimd_weighed w = aimd_weigh(&s);
    ck_assert_int_eq(w.concurrency, AIMD_CUT);
    aimd_on_throttle(&flight);
    ck_assert(aimd_below_max(&flight));
    /* Then write 429s, batch after batch: the share holds, the batches in flight take them. */
    for (int i = 0; i < 5; i++) {
        s = (struct aimd_signals){.write_refused = true,
                                  .compose_worthy = true,
                                  .reads_tight = aimd_below_max(&flight),
                                  .share_at_min = share.value <= share.min};
        w = aimd_weigh(&s);
        ck_assert_int_eq(w.share, AIMD_HOLD);
        ck_assert_int_eq(w.concurrency, AIMD_CUT);
        aimd_on_throttle(&flight);
    }
    ck_assert(share.value == 1.0);
    ck_assert_uint_eq(aimd_limit(&flight), 1);
    /* Clean batches grow the batches in flight back; at their max, reads have room again and
     * a write 429 cuts the share. */
    while (aimd_below_max(&flight))
        aimd_on_success(&flight);
    s = (struct aimd_signals){.write_refused = true, .compose_worthy = true};
    s.reads_tight = aimd_below_max(&flight);
    w = aimd_weigh(&s);
    ck_assert_int_eq(w.share, AIMD_CUT);
    ck_assert_int_eq(w.concurrency, AIMD_RAISE);
}
END_TEST

START_TEST(aimd_restore_undoes_a_throttle)
{
    struct aimd a;
    aimd_init(&a, 1.0 / 16, 1.0, 1.0 / 50, 0.5);
    aimd_on_throttle(&a);
    aimd_on_throttle(&a);
    ck_assert(a.value == 0.25);
    aimd_on_restore(&a);
    ck_assert(a.value == 0.5);
    aimd_on_restore(&a);
    aimd_on_restore(&a);
    ck_assert(a.value == 1.0);
    ck_assert_uint_eq(a.throttles, 2);
}
END_TEST

/* A compose refused for the write rate is sent again, after about 100..800 ms (jittered), only
 * while reads are tight; otherwise (or after the AIMD_COMPOSE_RETRIES-th refusal) its batch comes
 * by plain GETs. */
START_TEST(aimd_compose_retry_only_while_reads_are_tight)
{
    ck_assert_uint_eq(aimd_compose_retry_ms(false, 1, 0.5), 0);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 0, 0.5), 0);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 1, 0.5), 100);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 2, 0.5), 200);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 4, 0.5), 800);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 5, 0.5), 800);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, AIMD_COMPOSE_RETRIES, 0.5), 800);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, AIMD_COMPOSE_RETRIES + 1, 0.5), 0);
    /* Spread over [base / 2, 1.5 x base). */
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 1, 0.0), 50);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 1, 0.999), 149);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 3, 0.0), 200);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 3, 1.5), 599);
    ck_assert_uint_eq(aimd_compose_retry_ms(true, 3, -1), 200);
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

/* --compose auto on a soft delete bucket (cost_model.c): a batch is composed only when one
 * compose (class A) + one GET + the temporary's bytes kept soft-deleted cost less than a GET per
 * object. */
START_TEST(compose_cheaper_by_object_size_under_soft_delete)
{
    double week = compose_extra_dollars_per_gib(7 * 86400);
    ck_assert(week > 0.0046 && week < 0.0047); /* 0.020 $/GiB-month x 7/30.44 */
    const uint64_t KiB = 1024;
    /* 32 objects: cheaper composed below ~52 KiB each, dearer above. */
    ck_assert(compose_cheaper(32, 32 * 8 * KiB, week));
    ck_assert(compose_cheaper(32, 32 * 48 * KiB, week));
    ck_assert(!compose_cheaper(32, 32 * 56 * KiB, week));
    ck_assert(!compose_cheaper(32, 32 * 128 * KiB, week));
    /* Few objects: the compose's class A costs more than the GETs it saves. */
    ck_assert(!compose_cheaper(10, 10 * KiB, week));
    ck_assert(compose_cheaper(16, 16 * KiB, week));
    ck_assert(!compose_cheaper(1, 1, week));
    /* Without soft delete only the request count matters: 14+ objects of any size. */
    ck_assert(compose_cheaper(32, 32 * 1024 * KiB, 0));
    ck_assert(!compose_cheaper(13, 13 * KiB, 0));
    ck_assert(compose_cheaper(14, 14 * KiB, 0));
    double d = direct_batch_dollars(32);
    ck_assert(d > 0.0000127 && d < 0.0000129);
}
END_TEST

START_TEST(compose_decision_checks_batches_only_under_soft_delete)
{
    struct gcs_bucket_config config = {0};
    struct compose_decision out;
    compose_decide(COMPOSE_MODE_AUTO, &config, 0, &out);
    ck_assert(out.on && out.per_batch_extra_per_gib == 0);
    config.soft_delete_seconds = 7 * 86400;
    compose_decide(COMPOSE_MODE_AUTO, &config, 0, &out);
    ck_assert(out.on && out.per_batch_extra_per_gib > 0.0046);
    ck_assert_msg(strstr(out.reason, "below ~52 KiB per object in a batch of 32") != NULL, "%s",
                  out.reason);
    compose_decide(COMPOSE_MODE_ON, &config, 0, &out); /* forced: every batch */
    ck_assert(out.on && out.per_batch_extra_per_gib == 0);
}
END_TEST

TEST_SUITE(io_aimd_suite)
{
    Suite *s = suite_create("io-aimd");
    TCase *tc = tcase_create("aimd");
    tcase_add_test(tc, aimd_decreases_multiplicatively_to_min);
    tcase_add_test(tc, aimd_increases_additively_to_max);
    tcase_add_test(tc, aimd_window_success_grows_by_step_per_round);
    tcase_add_test(tc, aimd_limit_never_below_one);
    tcase_add_test(tc, aimd_allowed_spreads_the_share);
    tcase_add_test(tc, aimd_weigh_write_429s_with_reads_to_spare_cut_the_share);
    tcase_add_test(tc, aimd_weigh_write_429s_with_reads_tight_cut_the_batches_in_flight);
    tcase_add_test(tc, aimd_weigh_read_429s_restore_the_share);
    tcase_add_test(tc, aimd_weigh_no_429s_raise_both);
    tcase_add_test(tc, aimd_weigh_keeps_the_share_while_reads_are_tight);
    tcase_add_test(tc, aimd_restore_undoes_a_throttle);
    tcase_add_test(tc, aimd_compose_retry_only_while_reads_are_tight);
    tcase_add_test(tc, temp_reaper_pause_doubles_to_a_cap);
    tcase_add_test(tc, compose_cheaper_by_object_size_under_soft_delete);
    tcase_add_test(tc, compose_decision_checks_batches_only_under_soft_delete);
    suite_add_tcase(s, tc);
    return s;
}
