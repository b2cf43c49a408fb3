/* Token buckets for the engine's rate limits (gcsfuse's --limit-ops-per-sec and
 * --limit-bytes-per-sec): plain arithmetic on a clock the caller passes, so tests need no time. */
#include "fluxfs/http.h"

#include <glib.h>

/* Rounding of (now - updated) * rate must not cost a wake-up of a microsecond. */
#define EPSILON_TOKENS 1e-9

double http_rate_burst(double rate, double min_tokens)
{
    return MAX(rate * HTTP_RATE_BURST_S, min_tokens);
}

static void refill(struct http_token_bucket *bucket, double now_s)
{
    if (now_s > bucket->updated_s) {
        bucket->tokens =
            MIN(bucket->capacity, bucket->tokens + (now_s - bucket->updated_s) * bucket->rate);
        bucket->updated_s = now_s;
    }
}

void http_token_bucket_init(struct http_token_bucket *bucket, double rate, double capacity,
                            double now_s)
{
    bucket->rate = rate;
    bucket->capacity = capacity;
    bucket->tokens = capacity;
    bucket->updated_s = now_s;
}

double http_token_bucket_take(struct http_token_bucket *bucket, double n, double now_s)
{
    refill(bucket, now_s);
    if (bucket->tokens >= n - EPSILON_TOKENS) {
        bucket->tokens -= n;
        return 0;
    }
    return (n - bucket->tokens) / bucket->rate;
}

void http_token_bucket_debit(struct http_token_bucket *bucket, double n, double now_s)
{
    refill(bucket, now_s);
    bucket->tokens -= n;
}

double http_token_bucket_debt_s(struct http_token_bucket *bucket, double now_s)
{
    refill(bucket, now_s);
    return bucket->tokens >= -EPSILON_TOKENS ? 0 : -bucket->tokens / bucket->rate;
}
