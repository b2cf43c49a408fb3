/* The http layer: one engine thread that owns a curl multi handle and runs every transfer of the
 * process, with deadlines and retries. It knows nothing of objects or credentials: the gcs and
 * auth layers build requests (URL, headers, body, where the reply goes) and get a completion.
 *
 * Threads: http_submit() may be called from any thread, the engine thread included (e.g. from a
 * completion). Completions run on the engine thread and must not block; http_perform() (submit
 * and wait) must not be called on the engine thread (it returns -EDEADLK there).
 *
 * Retries: a request marked idempotent is retried on 408/429/5xx (except 501/505), connection
 * refused/reset, transfer timeouts and stalled bodies (no byte for stall_timeout_s), with
 * exponential backoff and full jitter, honouring Retry-After (seconds). Backoff timers live in
 * the engine thread; no thread sleeps. Every attempt restarts the reply sink from its start
 * (a ranged read rewrites its buffer from byte 0). The whole call, retries included, ends at
 * its deadline.
 *
 * Ownership: http_submit() takes the request; the engine frees it after the completion returns.
 * The http_response handed to the completion (and its body) lives until the completion returns.
 * A fixed sink buffer belongs to the caller and must outlive the request. */
#ifndef FLUXFS_HTTP_H
#define FLUXFS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_engine;
struct http_request;

struct http_engine_config {
    int max_connections;      /* total and per-host connection cap; 0 = 64 */
    double connect_timeout_s; /* 0 = 10 */
    const char *user_agent;   /* NULL = none */
    /* TLS trust (PEM): replace curl's built-in CA bundle file / CA directory (hashed names, as
     * c_rehash makes; a colon-separated list works). NULL = the built-in ones. Peer and host
     * verification are always on: an untrusted certificate fails the request. */
    const char *ca_file;
    const char *ca_dir;
    /* gcsfuse's --limit-ops-per-sec and --limit-bytes-per-sec; <= 0 = no limit. Calls start at
     * most this often (retries are part of their call), and reply body bytes are taken in at
     * most this fast, all requests together; see "rate limits" below. */
    double limit_ops_per_sec;
    double limit_bytes_per_sec;
};

/* Starts the engine thread. 0 or -errno. */
int http_engine_new(const struct http_engine_config *config, struct http_engine **out);
/* Completes everything queued or in flight with cancelled = true, stops the thread. Accepts NULL.
 * Must not be called on the engine thread. */
void http_engine_free(struct http_engine *engine);

struct http_engine_stats {
    uint64_t requests; /* calls submitted (one per http_submit) */
    uint64_t attempts; /* transfers started, retries included */
    uint64_t retries;
    uint64_t failures;           /* calls that ended without a 2xx/3xx status */
    uint64_t bytes_downloaded;   /* body bytes received, all attempts */
    uint64_t bytes_uploaded;     /* body bytes sent, all attempts */
    uint64_t limit_op_waits;     /* calls that waited for --limit-ops-per-sec */
    uint64_t limit_op_wait_us;   /* their total wait */
    uint64_t limit_byte_pauses;  /* transfers paused for --limit-bytes-per-sec */
    uint64_t limit_byte_wait_us; /* their total pause */
    uint64_t connections;        /* connections opened (each a TLS handshake over HTTPS) */
};
void http_engine_get_stats(struct http_engine *engine, struct http_engine_stats *out);

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_PATCH, HTTP_DELETE };

/* What the engine tells its observer (request logs, metrics) about a call, on the engine thread:
 * once per attempt that is retried (retrying) and once when the call completes (final), with the
 * last attempt's figures. Strings are valid during the call only. The observer must not block. */
struct http_attempt_report {
    enum http_method method;
    const char *url;
    const char *range;       /* the Range request header's value, or NULL */
    const char *object_name; /* http_request_set_object_name's, or NULL */
    long status;             /* 0 when no reply arrived */
    int curl_code;
    const char *error_text;        /* "" when none */
    unsigned attempt;              /* 1-based; 0 when the call ended before any attempt */
    double attempt_s;              /* duration of that attempt; 0 without one */
    double call_s;                 /* since submission */
    uint64_t bytes_down, bytes_up; /* body bytes of that attempt */
    bool stalled;                  /* the attempt moved no byte for the stall timeout */
    bool retrying;                 /* another attempt follows */
    bool final;                    /* the call completes now */
    bool success;                  /* final and a 2xx/3xx reply */
};
typedef void (*http_observer_fn)(const struct http_attempt_report *report, void *user);
/* Set once, before the first submission. */
void http_engine_set_observer(struct http_engine *engine, http_observer_fn fn, void *user);

/* ---- the reply, as the completion sees it ---- */

struct http_response {
    long status;            /* last HTTP status; 0 when none arrived */
    int curl_code;          /* CURLcode of the last attempt; 0 = transfer completed */
    bool deadline_exceeded; /* the call's deadline passed (last attempt or backoff) */
    bool request_sent;      /* the last attempt connected and sent the request: a
                             * transport failure then means the server did not answer */
    bool cancelled;         /* engine shut down before completion */
    bool body_overflow;     /* the reply was longer than the sink's cap */
    bool out_of_memory;
    int body_read_error;    /* errno of a failed or short read of a streamed body, else 0 */
    unsigned attempts;      /* 1 + retries */
    const char *error_text; /* curl's description of curl_code, "" when none */
    /* The body of a 2xx reply is in the sink: fixed buffer (body = that buffer) or growable
     * buffer (body NUL-terminated for convenience). For other statuses body holds the error
     * reply (at most 64 KiB), never the caller's fixed buffer. */
    const char *body;
    size_t body_len;
    const struct http_request *private_request; /* the engine's; for http_response_header */
    /* Answered 429 until the deadline left no room for another retry: status is that 429,
     * deadline_exceeded is false. */
    bool rate_limited_to_deadline;
};

/* Takes a 2xx reply's growable body over (NUL-terminated at body_len; g_free it), so that a
 * caller keeping it past the completion needs no copy; response->body is invalid afterwards.
 * NULL for a fixed sink, an empty body or another status (copy those). Only from the
 * completion callback. */
char *http_response_take_body(const struct http_response *response);
/* Returns the value of a reply header of the last attempt (case-insensitive name, no trailing
 * CR/LF) or NULL. Valid until the completion returns. */
const char *http_response_header(const struct http_response *response, const char *name);
/* The nth (0-based) header of that name, for headers sent more than once (x-goog-hash). */
const char *http_response_header_nth(const struct http_response *response, const char *name,
                                     unsigned nth);

typedef void (*http_completion_fn)(const struct http_response *response, void *user);

struct http_request;
/* Names the object a request is about when its URL does not (a multipart upload carries it in
 * its body), for the observer's request log. Copied. */
void http_request_set_object_name(struct http_request *request, const char *name);

/* ---- building a request ---- */

#define HTTP_DEFAULT_BODY_CAP (32u << 20) /* growable sinks: 32 MiB */
#define HTTP_ERROR_BODY_CAP   (64u << 10) /* error replies kept for messages */

/* url is copied. Defaults: growable sink with HTTP_DEFAULT_BODY_CAP, not idempotent, deadline
 * 120 s, stall timeout 30 s, 6 retries. NULL only when out of memory (g_malloc aborts). */
struct http_request *http_request_new(enum http_method method, const char *url);
/* Frees a request that was never submitted. Accepts NULL. */
void http_request_free(struct http_request *request);
/* "Name: value", copied. */
void http_request_add_header(struct http_request *request, const char *header_line);
/* Request body, copied: for small bodies (JSON documents). Sets Content-Length. Replaces any
 * body set before (copied or streamed). */
void http_request_set_body(struct http_request *request, const void *data, size_t len);

/* Streamed request bodies, never copied whole: the body is the concatenation of the pieces
 * added, in order, read by the engine as curl sends (CURLOPT_READFUNCTION) and re-read from the
 * start for every attempt (and on curl's own rewinds, CURLOPT_SEEKFUNCTION).
 *   _borrowed: len bytes at data, owned by the caller; they must stay valid and unchanged until
 *              the completion has run.
 *   _copy:     small framing pieces (a multipart preamble); copied.
 *   _fd:       len bytes of fd from offset, read with pread; fd must stay open until the
 *              completion has run. A failed or short read ends the call (no retry) with
 *              response->body_read_error set.
 * Content-Length is the total; bodies under HTTP_EXPECT_CONTINUE_MIN go without
 * "Expect: 100-continue" (no extra round trip), larger ones let the server refuse (401, 412, 503)
 * before the bytes are sent. Adding a piece drops a body set with http_request_set_body. */
void http_request_add_body_borrowed(struct http_request *request, const void *data, size_t len);
void http_request_add_body_copy(struct http_request *request, const void *data, size_t len);
void http_request_add_body_fd(struct http_request *request, int fd, uint64_t offset, uint64_t len);
/* Total length of the request body (copied or streamed). */
uint64_t http_request_body_length(const struct http_request *request);

#define HTTP_EXPECT_CONTINUE_MIN (1u << 20)
/* The 2xx body goes into buf (no copy); more than cap bytes ends the call with body_overflow. */
void http_request_set_fixed_sink(struct http_request *request, void *buf, size_t cap);
/* The 2xx body goes into an engine-owned buffer of at most cap bytes. */
void http_request_set_growable_sink(struct http_request *request, size_t cap);
void http_request_set_idempotent(struct http_request *request, bool idempotent);
/* Whether a 429 is retried (default: yes, like any transient status). A call with a cheaper way
 * round the server's rate limit (a compose temporary: plain GETs instead) ends at the first 429
 * and leaves the rate to others; 5xx, resets and timeouts are still retried. */
void http_request_set_retry_throttled(struct http_request *request, bool retry);
/* Total time for the call including retries and backoff, from submission. */
void http_request_set_deadline(struct http_request *request, double seconds);
void http_request_set_stall_timeout(struct http_request *request, double seconds);
/* Retries after the first attempt; 0 = none. */
void http_request_set_max_retries(struct http_request *request, unsigned max_retries);
void http_request_set_completion(struct http_request *request, http_completion_fn fn, void *user);

/* Queues the request and wakes the engine; takes ownership. The completion always runs exactly
 * once (on the engine thread, or on the calling thread when the engine is shutting down). */
void http_submit(struct http_engine *engine, struct http_request *request);

/* Submits and waits. The completion set on the request (if any) runs first on the engine thread;
 * then this returns 0 (the call completed, whatever its status) or -EDEADLK on the engine
 * thread. Intended for callers that copy what they need in their completion. */
int http_perform(struct http_engine *engine, struct http_request *request);

bool http_engine_is_engine_thread(struct http_engine *engine);

/* ---- retry policy: a pure function, unit-tested ---- */

struct http_retry_policy {
    unsigned max_retries;     /* retries after the first attempt (429s aside: http_retry_decide) */
    double base_delay_s;      /* first backoff ceiling, e.g. 0.1 */
    double max_delay_s;       /* backoff ceiling cap, e.g. 10 */
    double max_retry_after_s; /* a larger Retry-After is clamped to this, e.g. 60 */
};

enum http_retry_verdict {
    HTTP_RETRY_NO = 0,    /* success, or a final error */
    HTTP_RETRY_YES,       /* retry after *delay_s */
    HTTP_RETRY_EXHAUSTED, /* retryable, but max_retries spent (or 0) */
    HTTP_RETRY_DEADLINE,  /* retryable, but the wait would pass the deadline */
};

/* Whether the outcome of one attempt calls for a retry.
 *   status: HTTP status (0 when none), curl_code: CURLcode of the attempt (0 = ok),
 *   attempt: how many attempts were made so far (1 after the first): the backoff's exponent,
 *   spent: in/out, the retries spent from max_retries so far: a transient outcome adds one,
 *     except a rate limit (http_outcome_is_rate_limit), which retries until the deadline
 *     (unless max_retries is 0: no retry at all),
 *   retry_after: the Retry-After header value or NULL (delta-seconds; dates are ignored),
 *   idempotent: false never retries, remaining_s: time left to the deadline,
 *   random_unit: a uniform random number in [0, 1) for the jitter.
 * Backoff with full jitter: delay = random_unit * min(max_delay, base * 2^(attempt-1)); a
 * Retry-After R (clamped to max_retry_after_s) raises the delay to R + random_unit * min(R,
 * max_delay): never sooner than asked, and spread, so that the requests a rate limit refused
 * together do not all come back at one instant. *delay_s is set only for HTTP_RETRY_YES. */
enum http_retry_verdict http_retry_decide(const struct http_retry_policy *policy, long status,
                                          int curl_code, unsigned attempt, unsigned *spent,
                                          const char *retry_after, bool idempotent,
                                          double remaining_s, double random_unit, double *delay_s);
/* Whether an outcome is the server's rate limit (HTTP 429): retried until the deadline, not
 * counted against max_retries. A 503 is not one, even with Retry-After: Cloud Storage answers
 * rate limits with 429, and its 503 is a backend failure that should surface after the budget,
 * not hold every call for the whole deadline. */
bool http_outcome_is_rate_limit(long status, int curl_code);
/* Whether a status / a curl code by itself is transient (used by http_retry_decide). */
bool http_status_is_transient(long status);
bool http_curl_code_is_transient(int curl_code);

/* ---- rate limits: a token bucket, a pure function of the clock given, unit-tested ----
 *
 * The engine thread alone uses its buckets (no lock). Calls wait in a queue for a token, in
 * order, and the engine's poll timeout wakes for the next one: nothing sleeps or spins. Bytes
 * are debited as they arrive, into debt if needed; while in debt, a transfer that delivers
 * more is paused (CURL_WRITEFUNC_PAUSE) and resumed when the debt is paid. */

struct http_token_bucket {
    double rate;      /* tokens per second, > 0 */
    double capacity;  /* most tokens held: the burst after an idle spell */
    double tokens;    /* below 0 while in debt */
    double updated_s; /* when tokens was last brought up to date */
};

/* Burst of a limit: what accrues in HTTP_RATE_BURST_S, at least min_tokens. gcsfuse's limits
 * are "measured over a 30-second window"; a tenth of a second keeps every window, down to
 * fractions of a second, within one burst of the rate. */
#define HTTP_RATE_BURST_S 0.1
double http_rate_burst(double rate, double min_tokens);

/* Starts full. */
void http_token_bucket_init(struct http_token_bucket *bucket, double rate, double capacity,
                            double now_s);
/* Takes n tokens (n <= capacity) when held and returns 0; otherwise takes nothing and returns the
 * seconds until n will be held (> 0). */
double http_token_bucket_take(struct http_token_bucket *bucket, double n, double now_s);
/* Debits n tokens whatever is held (bytes already received); the balance may go below 0. */
void http_token_bucket_debit(struct http_token_bucket *bucket, double n, double now_s);
/* Seconds until the balance is back at 0 or above; 0 when it is. */
double http_token_bucket_debt_s(struct http_token_bucket *bucket, double now_s);

/* ---- helpers ---- */

/* Percent-encodes every byte outside RFC 3986's unreserved set (A-Z a-z 0-9 - . _ ~). Returns
 * a g_malloc'd string. Used for path segments, query values and form bodies. */
char *http_percent_encode(const char *text);

/* Monotonic clock in seconds. */
double http_now_s(void);

#endif
