/* The retry policy of the http engine: which outcomes retry, backoff bounds with full jitter,
 * Retry-After, the retry budget, the deadline, and non-idempotent requests. */
#include "test-common.h"

#include <curl/curl.h>
#include <glib.h>
#include <math.h>

#include "fluxfs/http.h"

static const struct http_retry_policy policy = {
    .max_retries = 6,
    .base_delay_s = 0.1,
    .max_delay_s = 10.0,
    .max_retry_after_s = 60.0,
};

static enum http_retry_verdict decide(long status, int curl_code, unsigned attempt,
                                      const char *retry_after, bool idempotent, double remaining,
                                      double random_unit, double *delay)
{
    unsigned spent = attempt > 0 ? attempt - 1 : 0; /* every earlier attempt spent a retry */
    return http_retry_decide(&policy, status, curl_code, attempt, &spent, retry_after, idempotent,
                             remaining, random_unit, delay);
}

START_TEST(retry_transient_statuses)
{
    const long transient[] = {408, 429, 500, 502, 503, 504, 599};
    for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
        double delay = -1;
        ck_assert_int_eq(decide(transient[i], CURLE_OK, 1, NULL, true, 100, 0.5, &delay),
                         HTTP_RETRY_YES);
        ck_assert(delay >= 0 && delay <= 0.1);
    }
    const long final[] = {200, 204, 206, 304, 400, 401, 403, 404, 409, 412, 416, 501, 505};
    for (size_t i = 0; i < sizeof(final) / sizeof(final[0]); i++) {
        double delay = -1;
        ck_assert_int_eq(decide(final[i], CURLE_OK, 1, NULL, true, 100, 0.5, &delay),
                         HTTP_RETRY_NO);
        ck_assert(delay == -1); /* untouched */
    }
}
END_TEST

START_TEST(retry_transport_errors)
{
    const int transient[] = {CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT, CURLE_RECV_ERROR,
                             CURLE_SEND_ERROR,      CURLE_GOT_NOTHING,        CURLE_PARTIAL_FILE,
                             CURLE_HTTP2_STREAM,    CURLE_WEIRD_SERVER_REPLY};
    double delay;
    for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
        ck_assert_int_eq(decide(0, transient[i], 1, NULL, true, 100, 0.3, &delay), HTTP_RETRY_YES);
    const int final[] = {CURLE_COULDNT_RESOLVE_HOST, CURLE_URL_MALFORMAT, CURLE_WRITE_ERROR,
                         CURLE_PEER_FAILED_VERIFICATION, CURLE_UNSUPPORTED_PROTOCOL};
    for (size_t i = 0; i < sizeof(final) / sizeof(final[0]); i++)
        ck_assert_int_eq(decide(0, final[i], 1, NULL, true, 100, 0.3, &delay), HTTP_RETRY_NO);
    /* A transport error wins over a status seen before it (e.g. reset mid-body of a 200). */
    ck_assert_int_eq(decide(200, CURLE_PARTIAL_FILE, 1, NULL, true, 100, 0.3, &delay),
                     HTTP_RETRY_YES);
}
END_TEST

START_TEST(retry_not_idempotent)
{
    double delay;
    ck_assert_int_eq(decide(503, CURLE_OK, 1, NULL, false, 100, 0.3, &delay), HTTP_RETRY_NO);
    ck_assert_int_eq(decide(0, CURLE_RECV_ERROR, 1, NULL, false, 100, 0.3, &delay), HTTP_RETRY_NO);
}
END_TEST

START_TEST(retry_backoff_bounds)
{
    /* Ceiling doubles from base per attempt, capped at max_delay; the jitter spans [0, ceiling). */
    for (unsigned attempt = 1; attempt <= 6; attempt++) {
        double ceiling = fmin(10.0, 0.1 * pow(2, attempt - 1));
        double low = -1, high = -1;
        ck_assert_int_eq(decide(503, CURLE_OK, attempt, NULL, true, 1000, 0.0, &low),
                         HTTP_RETRY_YES);
        ck_assert_int_eq(decide(503, CURLE_OK, attempt, NULL, true, 1000, 0.999999, &high),
                         HTTP_RETRY_YES);
        ck_assert_double_eq_tol(low, 0.0, 1e-9);
        ck_assert(high < ceiling + 1e-9);
        ck_assert(high > ceiling * 0.999);
    }
    /* The cap holds for a large policy budget too. */
    struct http_retry_policy many = policy;
    many.max_retries = 100;
    double delay = -1;
    unsigned spent = 89;
    ck_assert_int_eq(
        http_retry_decide(&many, 503, CURLE_OK, 90, &spent, NULL, true, 1000, 0.999, &delay),
        HTTP_RETRY_YES);
    ck_assert(delay <= 10.0 && delay > 9.9);
    /* Jitter spreads the delays: distinct random inputs give distinct delays. */
    double a, b;
    decide(503, CURLE_OK, 4, NULL, true, 1000, 0.25, &a);
    decide(503, CURLE_OK, 4, NULL, true, 1000, 0.75, &b);
    ck_assert_double_eq_tol(b - a, 0.5 * 0.8, 1e-9);
}
END_TEST

START_TEST(retry_budget_exhausted)
{
    double delay;
    ck_assert_int_eq(decide(503, CURLE_OK, 6, NULL, true, 1000, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert_int_eq(decide(503, CURLE_OK, 7, NULL, true, 1000, 0.5, &delay), HTTP_RETRY_EXHAUSTED);
    struct http_retry_policy none = policy;
    none.max_retries = 0;
    unsigned spent = 0;
    ck_assert_int_eq(
        http_retry_decide(&none, 503, CURLE_OK, 1, &spent, NULL, true, 1000, 0.5, &delay),
        HTTP_RETRY_EXHAUSTED);
}
END_TEST

/* A rate limit (429) spends no retry: it retries until the deadline, however many attempts
 * were made, with the same backoff and Retry-After, the backoff growing no further past the
 * budget; other transient outcomes spend the budget, and a 503 with Retry-After is one. */
START_TEST(retry_rate_limit_until_deadline)
{
    double delay = -1;
    unsigned spent = 0;
    for (unsigned attempt = 1; attempt <= 50; attempt++) {
        delay = -1;
        ck_assert_int_eq(http_retry_decide(&policy, 429, CURLE_OK, attempt, &spent, "1", true, 1000,
                                           0.5, &delay),
                         HTTP_RETRY_YES);
        ck_assert_uint_eq(spent, 0);
        /* max(backoff 0.5 x 0.1 x 2^(min(attempt, 6)-1), Retry-After 1 + 0.5 x 1): past the
         * budget (6) the backoff's ceiling stays at its last retry's, 3.2 s */
        double ceiling = 0.1 * pow(2, (attempt < 6 ? attempt : 6) - 1);
        ck_assert_double_eq_tol(delay, fmax(0.5 * ceiling, 1.5), 1e-9);
    }
    /* Only the deadline ends it. */
    ck_assert_int_eq(
        http_retry_decide(&policy, 429, CURLE_OK, 51, &spent, "1", true, 1.2, 0.5, &delay),
        HTTP_RETRY_DEADLINE);
    /* Rate limits between other failures leave the budget to those: 6 of them still retry, the
     * 7th is exhausted. */
    spent = 0;
    unsigned attempt = 0;
    for (unsigned i = 0; i < 6; i++) {
        ck_assert_int_eq(http_retry_decide(&policy, 503, CURLE_OK, ++attempt, &spent, "1", true,
                                           1000, 0.5, &delay),
                         HTTP_RETRY_YES);
        ck_assert_int_eq(http_retry_decide(&policy, 429, CURLE_OK, ++attempt, &spent, "1", true,
                                           1000, 0.5, &delay),
                         HTTP_RETRY_YES);
    }
    ck_assert_uint_eq(spent, 6);
    ck_assert_int_eq(
        http_retry_decide(&policy, 503, CURLE_OK, ++attempt, &spent, "1", true, 1000, 0.5, &delay),
        HTTP_RETRY_EXHAUSTED);
    ck_assert_int_eq(http_retry_decide(&policy, 0, CURLE_RECV_ERROR, ++attempt, &spent, NULL, true,
                                       1000, 0.5, &delay),
                     HTTP_RETRY_EXHAUSTED);
    /* Retrying switched off (max_retries 0) holds for rate limits too; not idempotent: never. */
    struct http_retry_policy none = policy;
    none.max_retries = 0;
    spent = 0;
    ck_assert_int_eq(
        http_retry_decide(&none, 429, CURLE_OK, 1, &spent, "1", true, 1000, 0.5, &delay),
        HTTP_RETRY_EXHAUSTED);
    ck_assert_int_eq(
        http_retry_decide(&policy, 429, CURLE_OK, 1, &spent, "1", false, 1000, 0.5, &delay),
        HTTP_RETRY_NO);
    ck_assert(http_outcome_is_rate_limit(429, CURLE_OK));
    ck_assert(!http_outcome_is_rate_limit(503, CURLE_OK));
    ck_assert(!http_outcome_is_rate_limit(429, CURLE_RECV_ERROR));
}
END_TEST

START_TEST(retry_after_honoured)
{
    double delay = -1;
    /* Never sooner than asked; spread over [value, 2 x value) by the random draw. */
    ck_assert_int_eq(decide(429, CURLE_OK, 1, "3", true, 100, 0.0, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 3.0, 1e-9);
    ck_assert_int_eq(decide(429, CURLE_OK, 1, "3", true, 100, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 4.5, 1e-9);
    ck_assert_int_eq(decide(429, CURLE_OK, 1, "1", true, 100, 0.999, &delay), HTTP_RETRY_YES);
    ck_assert(delay >= 1.0 && delay < 2.0);
    ck_assert_int_eq(decide(503, CURLE_OK, 1, " 2 ", true, 100, 0.0, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 2.0, 1e-9);
    /* Larger than the jittered delay only raises it; a small one keeps the backoff. */
    ck_assert_int_eq(decide(503, CURLE_OK, 6, "0", true, 100, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 0.5 * 3.2, 1e-9);
    /* Clamped to max_retry_after_s. */
    ck_assert_int_eq(decide(503, CURLE_OK, 1, "86400", true, 1000, 0.0, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 60.0, 1e-9);
    /* The spread is at most max_delay_s (10 s here). */
    ck_assert_int_eq(decide(503, CURLE_OK, 1, "86400", true, 1000, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 65.0, 1e-9);
    /* HTTP-dates and garbage are ignored: plain backoff. */
    ck_assert_int_eq(
        decide(503, CURLE_OK, 1, "Wed, 21 Oct 2015 07:28:00 GMT", true, 100, 0.5, &delay),
        HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 0.05, 1e-9);
    ck_assert_int_eq(decide(503, CURLE_OK, 1, "-5", true, 100, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 0.05, 1e-9);
    ck_assert_int_eq(decide(503, CURLE_OK, 1, "5x", true, 100, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert_double_eq_tol(delay, 0.05, 1e-9);
}
END_TEST

START_TEST(retry_deadline_respected)
{
    double delay = -1;
    /* A Retry-After beyond the deadline: give up now instead of sleeping past it. */
    ck_assert_int_eq(decide(429, CURLE_OK, 1, "30", true, 10, 0.5, &delay), HTTP_RETRY_DEADLINE);
    ck_assert(delay == -1);
    ck_assert_int_eq(decide(503, CURLE_OK, 5, NULL, true, 0.5, 0.5, &delay), HTTP_RETRY_DEADLINE);
    ck_assert_int_eq(decide(503, CURLE_OK, 5, NULL, true, 0.0, 0.0, &delay), HTTP_RETRY_DEADLINE);
    ck_assert_int_eq(decide(503, CURLE_OK, 5, NULL, true, 0.9, 0.5, &delay), HTTP_RETRY_YES);
    ck_assert(delay < 0.9);
}
END_TEST

START_TEST(percent_encode_unreserved)
{
    char *text = http_percent_encode("AZaz09-._~ /+%?#&=");
    ck_assert_str_eq(text, "AZaz09-._~%20%2F%2B%25%3F%23%26%3D");
    g_free(text);
}
END_TEST

/* --limit-ops-per-sec: the burst first, then one token per 1/rate s; nothing taken while
 * short, and the wait said is the one that makes the take succeed. */
START_TEST(token_bucket_ops)
{
    struct http_token_bucket bucket;
    double rate = 20;
    http_token_bucket_init(&bucket, rate, http_rate_burst(rate, 1), 100.0);
    ck_assert_double_eq(bucket.capacity, 2);
    ck_assert_double_eq(http_token_bucket_take(&bucket, 1, 100.0), 0);
    ck_assert_double_eq(http_token_bucket_take(&bucket, 1, 100.0), 0);
    double wait = http_token_bucket_take(&bucket, 1, 100.0);
    ck_assert_double_eq_tol(wait, 0.05, 1e-9);
    ck_assert_double_eq_tol(http_token_bucket_take(&bucket, 1, 100.0 + wait / 2), wait / 2, 1e-9);
    ck_assert_double_eq(http_token_bucket_take(&bucket, 1, 100.0 + wait), 0);
    /* 60 calls back to back need (60 - burst) / rate seconds: the figure the mount test bounds. */
    http_token_bucket_init(&bucket, rate, http_rate_burst(rate, 1), 0.0);
    double now = 0;
    for (int i = 0; i < 60; i++) {
        double w;
        while ((w = http_token_bucket_take(&bucket, 1, now)) > 0)
            now += w;
    }
    ck_assert_double_eq_tol(now, 58.0 / 20.0, 1e-6);
    /* An idle spell refills at most the burst. */
    ck_assert_double_eq(http_token_bucket_take(&bucket, 1, now + 3600), 0);
    ck_assert_double_eq(http_token_bucket_take(&bucket, 1, now + 3600), 0);
    ck_assert(http_token_bucket_take(&bucket, 1, now + 3600) > 0);
    /* Low rates still let one call through at a time. */
    ck_assert_double_eq(http_rate_burst(0.5, 1), 1);
}
END_TEST

/* --limit-bytes-per-sec: bytes received are debited into debt; the debt says how long the
 * transfers stay paused. */
START_TEST(token_bucket_bytes)
{
    struct http_token_bucket bucket;
    double rate = 1 << 20;
    http_token_bucket_init(&bucket, rate, http_rate_burst(rate, 65536), 0.0);
    ck_assert_double_eq(http_token_bucket_debt_s(&bucket, 0), 0);
    http_token_bucket_debit(&bucket, 512 * 1024, 0);
    double debt = http_token_bucket_debt_s(&bucket, 0);
    ck_assert_double_eq_tol(debt, (512 * 1024 - rate * 0.1) / rate, 1e-9);
    ck_assert(http_token_bucket_debt_s(&bucket, debt / 2) > 0);
    ck_assert_double_eq(http_token_bucket_debt_s(&bucket, debt), 0);
    /* 8 MiB taken in 512 KiB pieces, each only when out of debt: at least (8 MiB - burst - one
     * piece) / rate seconds. */
    http_token_bucket_init(&bucket, rate, http_rate_burst(rate, 65536), 0.0);
    double now = 0;
    for (int i = 0; i < 16; i++) {
        now += http_token_bucket_debt_s(&bucket, now);
        http_token_bucket_debit(&bucket, 512 * 1024, now);
    }
    ck_assert(now >= (8.0 * 1048576 - rate * 0.1 - 512 * 1024) / rate - 1e-6);
    ck_assert(now <= 8.0);
}
END_TEST

TEST_SUITE(http_retry_suite)
{
    Suite *s = suite_create("http_retry");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, retry_transient_statuses);
    tcase_add_test(tc, retry_transport_errors);
    tcase_add_test(tc, retry_not_idempotent);
    tcase_add_test(tc, retry_backoff_bounds);
    tcase_add_test(tc, retry_budget_exhausted);
    tcase_add_test(tc, retry_rate_limit_until_deadline);
    tcase_add_test(tc, retry_after_honoured);
    tcase_add_test(tc, retry_deadline_respected);
    tcase_add_test(tc, percent_encode_unreserved);
    tcase_add_test(tc, token_bucket_ops);
    tcase_add_test(tc, token_bucket_bytes);
    suite_add_tcase(s, tc);
    return s;
}
