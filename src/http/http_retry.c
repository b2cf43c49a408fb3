/* The retry decision for one finished attempt: which outcomes are transient and how long to wait
 * before the next attempt (exponential backoff with full jitter, honouring Retry-After). Pure
 * functions with no clock and no randomness of their own, so they can be unit-tested. */
#include "fluxfs/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool http_status_is_transient(long status)
{
    if (status == 408 || status == 429)
        return true;
    /* 501 Not Implemented and 505 HTTP Version Not Supported will not change on a retry. */
    return status >= 500 && status <= 599 && status != 501 && status != 505;
}

bool http_outcome_is_rate_limit(long status, int curl_code)
{
    return curl_code == CURLE_OK && status == 429;
}

bool http_curl_code_is_transient(int curl_code)
{
    switch ((CURLcode)curl_code) {
    case CURLE_COULDNT_CONNECT:    /* refused: a restarting server, a full backlog */
    case CURLE_OPERATION_TIMEDOUT: /* attempt timeout or stalled body (low-speed limit) */
    case CURLE_SEND_ERROR:         /* reset while sending */
    case CURLE_RECV_ERROR:         /* reset while receiving */
    case CURLE_GOT_NOTHING:        /* closed before any reply */
    case CURLE_PARTIAL_FILE:       /* body shorter than Content-Length */
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:  /* reset during the handshake */
    case CURLE_WEIRD_SERVER_REPLY: /* garbage where a status line belongs: a connection out of
                                      step (the attempt is retried on a fresh connection) */
        return true;
    default:
        return false;
    }
}

/* Parses a delta-seconds Retry-After. Returns -1 when absent or not a number (HTTP-dates are
 * ignored: the backoff still applies). */
static double parse_retry_after(const char *text)
{
    if (!text)
        return -1;
    while (*text == ' ' || *text == '\t')
        text++;
    if (*text < '0' || *text > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    double seconds = strtod(text, &end);
    if (errno != 0 || !isfinite(seconds) || seconds < 0)
        return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end != '\0')
        return -1;
    return seconds;
}

enum http_retry_verdict http_retry_decide(const struct http_retry_policy *policy, long status,
                                          int curl_code, unsigned attempt, unsigned *spent,
                                          const char *retry_after, bool idempotent,
                                          double remaining_s, double random_unit, double *delay_s)
{
    bool transient;
    if (curl_code != CURLE_OK)
        transient = http_curl_code_is_transient(curl_code);
    else
        transient = http_status_is_transient(status);
    if (!transient || !idempotent)
        return HTTP_RETRY_NO;
    if (policy->max_retries == 0)
        return HTTP_RETRY_EXHAUSTED; /* retrying is off, rate limits included */
    /* A rate limit is the bucket's answer to the load of many clients, not a fault of this
     * request: it is retried until the deadline, as Google's client libraries and gcsfuse do;
     * counted, a fleet of mounts sharing one bucket saw EIO once the few retries of an unlucky
     * request were spent (bench/fleet.py). Every other transient outcome spends the budget. */
    bool rate_limit = http_outcome_is_rate_limit(status, curl_code);
    if (!rate_limit && ++*spent > policy->max_retries)
        return HTTP_RETRY_EXHAUSTED;
    /* Past the budget a rate-limited call waits no longer than at its budget's last retry:
     * growing on to the 10 s cap, its reader would sit out seconds of a rate the bucket has
     * again (a fleet of 32 mounts read 12-21% slower: bench/fleet.py). The server paces it with
     * Retry-After, the prefetcher's back-off lowers the load. */
    if (rate_limit && attempt > policy->max_retries)
        attempt = policy->max_retries;

    double ceiling = policy->base_delay_s * ldexp(1.0, attempt > 0 ? (int)attempt - 1 : 0);
    if (attempt > 60 || ceiling > policy->max_delay_s)
        ceiling = policy->max_delay_s;
    if (random_unit < 0)
        random_unit = 0;
    if (random_unit >= 1)
        random_unit = nextafter(1.0, 0.0);
    double delay = random_unit * ceiling;

    double server_delay = curl_code == CURLE_OK ? parse_retry_after(retry_after) : -1;
    if (server_delay >= 0) {
        if (server_delay > policy->max_retry_after_s)
            server_delay = policy->max_retry_after_s;
        /* Never sooner than the server asked, but spread over [server, 2 x server): the
         * requests a rate limit refused in one burst would otherwise all come back at the same
         * instant, meet the limit together again, and leave it idle in between (a fleet of
         * mounts on one bucket stalled in whole-second steps: bench/fleet.py). */
        server_delay += random_unit * fmin(server_delay, policy->max_delay_s);
        if (server_delay > delay)
            delay = server_delay;
    }
    if (delay >= remaining_s)
        return HTTP_RETRY_DEADLINE;
    *delay_s = delay;
    return HTTP_RETRY_YES;
}
