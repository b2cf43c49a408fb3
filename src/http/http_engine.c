/* The request engine: one thread owns the curl multi handle; other threads queue requests under a
 * mutex and wake it with curl_multi_wakeup. The engine starts attempts, collects finished
 * transfers, decides retries (http_retry.c), keeps backoff timers, and runs completions.
 *
 * Locking: engine->lock protects engine->pending and engine->stopping. Everything else in the
 * engine (multi handle, in-flight set, retry queue, easy-handle pool) and every field of a
 * request after submission is touched only by the engine thread. Statistics are atomics. */
#include "fluxfs/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <glib.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fluxfs/log.h"
#include "http-internal.h"

#define HEADER_BYTES_CAP        (64u << 10)
#define DEFAULT_DEADLINE_S      120.0
#define DEFAULT_STALL_S         30.0
#define DEFAULT_MAX_RETRIES     6
#define DEFAULT_MAX_CONNECTIONS 64
#define LARGE_UPLOAD_BUFFER     (512L << 10) /* curl's send buffer for bodies over 1 MiB */
#define LARGE_DOWNLOAD_MIN      (1u << 20)
#define LARGE_DOWNLOAD_BUFFER   (512L << 10) /* curl's maximum */
/* TLS 1.3 suites, AES-128-GCM first: what Google's front ends and Go clients (gcsfuse)
 * negotiate on AES-NI hardware. OpenSSL's default order puts AES-256-GCM first, which a server
 * that follows the client's order (the emulator's GnuTLS) then picks: 14 AES rounds, not 10. */
#define TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

struct perform_waiter {
    GMutex lock;
    GCond cond;
    bool done;
};

struct http_request {
    enum http_method method;
    char *url;
    struct curl_slist *headers;
    struct http_body body; /* copied or streamed; read through on_read / on_seek */
    bool expect_decided;   /* "Expect:" added (or not) for this body */

    /* Sink. fixed_buf is the caller's; grow_data is ours. */
    bool fixed_sink;
    char *fixed_buf;
    size_t sink_cap;
    char *grow_data;
    size_t grow_alloc;
    size_t received;          /* 2xx body bytes of this attempt */
    GString *error_body;      /* non-2xx body, capped at HTTP_ERROR_BODY_CAP */
    GPtrArray *reply_headers; /* alternating name, value (g_free) */
    size_t reply_header_bytes;
    bool overflow;
    bool out_of_memory;
    bool stalled;         /* this attempt moved no byte for stall_s */
    double last_activity; /* when this attempt last moved a byte (http_now_s) */
    curl_off_t last_down, last_up;

    bool idempotent;
    bool no_retry_on_429; /* http_request_set_retry_throttled(false) */
    double deadline_s;    /* relative, until submission */
    double deadline_at;   /* absolute (http_now_s), from submission */
    double stall_s;
    unsigned max_retries;
    http_completion_fn completion;
    void *completion_user;
    struct perform_waiter *waiter;

    unsigned attempts;
    unsigned retries_spent;        /* of max_retries: rate limits spend none */
    bool retrying_rate_limit;      /* the retry under way follows a 429 */
    bool rate_limited_to_deadline; /* gave up on a 429 for want of time */
    unsigned sends;        /* requests curl sent in the current attempt: more than one when it
                              resent by itself (a reused connection that died before any byte
                              of reply); the extra ones count as attempts */
    bool fresh_connection; /* the last attempt failed in transport: the next one opens a new
                              connection rather than trust one whose state is unknown */
    long status;
    int curl_code;
    bool deadline_exceeded;
    bool cancelled;
    double retry_at;
    double submitted_at;    /* http_now_s at submission */
    char *object_name;      /* for the observer; NULL when the URL names the object */
    double attempt_started; /* the current attempt's start */
    bool attempt_finished;  /* the figures below describe a finished attempt */
    double attempt_s;
    uint64_t attempt_down, attempt_up;
    struct http_engine *engine; /* set at submission */
    double ops_queued_at;       /* when the call joined the --limit-ops-per-sec queue */
    bool throttled;             /* paused by --limit-bytes-per-sec: in engine->byte_paused */
    double throttled_at;
    CURL *easy;
    char error_text[CURL_ERROR_SIZE];
};

struct http_engine {
    GMutex lock;
    GQueue pending; /* struct http_request *, lock */
    bool stopping;  /* lock */

    CURLM *multi;          /* engine thread only, from here down */
    CURLSH *share;         /* TLS sessions of every easy handle (NULL: not shared) */
    void *ca_store;        /* X509_STORE shared by every connection (NULL: curl loads CAs) */
    bool ca_store_tried;   /* engine thread: http_tls_store_new ran (at the first https URL) */
    GHashTable *in_flight; /* set of struct http_request * */
    GQueue retry_queue;    /* sorted by retry_at */
    GPtrArray *idle_easy;  /* CURL * ready for reuse */
    pthread_t thread;
    bool thread_started;

    int max_connections;
    long connect_timeout_ms;
    char *user_agent;
    char *ca_file; /* NULL = curl's default */
    char *ca_dir;

    /* --limit-ops-per-sec and --limit-bytes-per-sec (engine thread only). */
    bool limit_ops, limit_bytes;
    struct http_token_bucket ops_bucket, bytes_bucket;
    GQueue ops_waiting;     /* calls waiting for a token, in submission order */
    GPtrArray *byte_paused; /* struct http_request * whose transfer is paused */

    _Atomic uint64_t stat_requests, stat_attempts, stat_retries, stat_failures;
    _Atomic uint64_t stat_bytes_down, stat_bytes_up;
    _Atomic uint64_t stat_limit_op_waits, stat_limit_op_wait_us;
    _Atomic uint64_t stat_limit_byte_pauses, stat_limit_byte_wait_us;
    _Atomic uint64_t stat_connections;

    http_observer_fn observer; /* set before the first submission */
    void *observer_user;
};

static const struct http_retry_policy default_retry_policy = {
    .base_delay_s = 0.1,
    .max_delay_s = 10.0,
    .max_retry_after_s = 60.0,
};

static void count(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* ---- requests ---- */

struct http_request *http_request_new(enum http_method method, const char *url)
{
    struct http_request *request = g_new0(struct http_request, 1);
    request->method = method;
    request->url = g_strdup(url);
    request->sink_cap = HTTP_DEFAULT_BODY_CAP;
    request->deadline_s = DEFAULT_DEADLINE_S;
    request->stall_s = DEFAULT_STALL_S;
    request->max_retries = DEFAULT_MAX_RETRIES;
    request->error_body = g_string_new(NULL);
    request->reply_headers = g_ptr_array_new_with_free_func(g_free);
    http_body_init(&request->body);
    return request;
}

void http_request_free(struct http_request *request)
{
    if (!request)
        return;
    g_free(request->url);
    g_free(request->object_name);
    curl_slist_free_all(request->headers);
    http_body_clear(&request->body);
    g_free(request->grow_data);
    g_string_free(request->error_body, TRUE);
    g_ptr_array_unref(request->reply_headers);
    g_free(request);
}

void http_request_add_header(struct http_request *request, const char *header_line)
{
    struct curl_slist *grown = curl_slist_append(request->headers, header_line);
    if (grown)
        request->headers = grown;
    else
        request->out_of_memory = true;
}

void http_request_set_body(struct http_request *request, const void *data, size_t len)
{
    http_body_clear(&request->body);
    http_body_add_memory(&request->body, data, len, true);
}

void http_request_add_body_borrowed(struct http_request *request, const void *data, size_t len)
{
    http_body_add_memory(&request->body, data, len, false);
}

void http_request_add_body_copy(struct http_request *request, const void *data, size_t len)
{
    http_body_add_memory(&request->body, data, len, true);
}

void http_request_add_body_fd(struct http_request *request, int fd, uint64_t offset, uint64_t len)
{
    http_body_add_fd(&request->body, fd, offset, len);
}

uint64_t http_request_body_length(const struct http_request *request)
{
    return request->body.total;
}

void http_request_set_fixed_sink(struct http_request *request, void *buf, size_t cap)
{
    request->fixed_sink = true;
    request->fixed_buf = buf;
    request->sink_cap = cap;
}

void http_request_set_growable_sink(struct http_request *request, size_t cap)
{
    request->fixed_sink = false;
    request->fixed_buf = NULL;
    request->sink_cap = cap;
}

void http_request_set_idempotent(struct http_request *request, bool idempotent)
{
    request->idempotent = idempotent;
}

void http_request_set_retry_throttled(struct http_request *request, bool retry)
{
    request->no_retry_on_429 = !retry;
}

void http_request_set_deadline(struct http_request *request, double seconds)
{
    request->deadline_s = seconds > 0 ? seconds : DEFAULT_DEADLINE_S;
}

void http_request_set_stall_timeout(struct http_request *request, double seconds)
{
    request->stall_s = seconds > 0 ? seconds : DEFAULT_STALL_S;
}

void http_request_set_max_retries(struct http_request *request, unsigned max_retries)
{
    request->max_retries = max_retries;
}

void http_request_set_completion(struct http_request *request, http_completion_fn fn, void *user)
{
    request->completion = fn;
    request->completion_user = user;
}

const char *http_response_header_nth(const struct http_response *response, const char *name,
                                     unsigned nth)
{
    const struct http_request *request = response->private_request;
    if (!request)
        return NULL;
    GPtrArray *headers = request->reply_headers;
    for (guint i = 0; i + 1 < headers->len; i += 2) {
        if (g_ascii_strcasecmp(g_ptr_array_index(headers, i), name) == 0 && nth-- == 0)
            return g_ptr_array_index(headers, i + 1);
    }
    return NULL;
}

const char *http_response_header(const struct http_response *response, const char *name)
{
    return http_response_header_nth(response, name, 0);
}

/* ---- curl callbacks (engine thread) ---- */

static long current_status(struct http_request *request)
{
    long status = 0;
    curl_easy_getinfo(request->easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    struct http_request *request = user;
    size_t n = size * nmemb;
    struct http_engine *engine = request->engine;
    if (engine->limit_bytes) {
        /* In debt: curl keeps these bytes and offers them again once resumed. */
        double now = http_now_s();
        if (http_token_bucket_debt_s(&engine->bytes_bucket, now) > 0) {
            request->throttled = true;
            request->throttled_at = now;
            g_ptr_array_add(engine->byte_paused, request);
            count(&engine->stat_limit_byte_pauses, 1);
            return CURL_WRITEFUNC_PAUSE;
        }
        http_token_bucket_debit(&engine->bytes_bucket, (double)n, now);
    }
    long status = current_status(request);
    if (status < 200 || status > 299) {
        size_t room = HTTP_ERROR_BODY_CAP - MIN(HTTP_ERROR_BODY_CAP, request->error_body->len);
        g_string_append_len(request->error_body, data, (gssize)MIN(room, n));
        return n;
    }
    if (n > request->sink_cap - request->received) {
        request->overflow = true;
        return 0; /* CURLE_WRITE_ERROR ends the transfer */
    }
    if (request->fixed_sink) {
        memcpy(request->fixed_buf + request->received, data, n);
    } else {
        size_t need = request->received + n + 1;
        if (need > request->grow_alloc) {
            size_t alloc = MAX(need, request->grow_alloc * 2);
            /* The first bytes of a body whose length the server announced: one allocation of
             * that size instead of a doubling series (a list page is 150 KB, six reallocs and
             * copies). A length that lies only changes how the buffer grows. */
            curl_off_t announced = -1;
            if (request->grow_alloc == 0 &&
                curl_easy_getinfo(request->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced) ==
                    CURLE_OK &&
                announced > 0 && (uint64_t)announced < request->sink_cap)
                alloc = MAX(alloc, (size_t)announced + 1);
            alloc = MAX(alloc, 16384);
            alloc = MIN(alloc, request->sink_cap + 1);
            char *grown = g_try_realloc(request->grow_data, alloc);
            if (!grown) {
                request->out_of_memory = true;
                return 0;
            }
            request->grow_data = grown;
            request->grow_alloc = alloc;
        }
        memcpy(request->grow_data + request->received, data, n);
        request->grow_data[request->received + n] = '\0';
    }
    request->received += n;
    return n;
}

char *http_response_take_body(const struct http_response *response)
{
    /* The engine's request, finishing: nothing reads its sink after the completion. */
    struct http_request *request = (struct http_request *)response->private_request;
    if (!request || request->fixed_sink || !request->grow_data ||
        response->body != request->grow_data)
        return NULL;
    char *body = request->grow_data;
    request->grow_data = NULL;
    request->grow_alloc = 0;
    return body;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *user)
{
    struct http_request *request = user;
    ptrdiff_t got = http_body_read(&request->body, buf, size * nitems);
    return got < 0 ? CURL_READFUNC_ABORT : (size_t)got;
}

/* curl rewinds the body itself when it must send it again within one attempt (a reused
 * connection found dead, a 100-continue refusal); attempts of ours start at 0 anyway. Such a
 * resend is counted as an attempt (on_prereq). */
static int on_seek(void *user, curl_off_t offset, int origin)
{
    struct http_request *request = user;
    if (origin != SEEK_SET || offset < 0)
        return CURL_SEEKFUNC_CANTSEEK;
    return http_body_seek(&request->body, (uint64_t)offset) == 0 ? CURL_SEEKFUNC_OK
                                                                 : CURL_SEEKFUNC_FAIL;
}

/* Called by curl before each send of the request, its own resends included. */
static int on_prereq(void *user, char *conn_primary_ip, char *conn_local_ip, int primary_port,
                     int local_port)
{
    (void)conn_primary_ip;
    (void)conn_local_ip;
    (void)primary_port;
    (void)local_port;
    struct http_request *request = user;
    request->sends++;
    return CURL_PREREQFUNC_OK;
}

/* Stall detection: curl's LOW_SPEED check averages over several seconds, so a transfer that
 * ran fast and then froze is noticed late; this tracks the time of the last byte instead. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct http_request *request = user;
    double now = http_now_s();
    if (request->throttled) /* paused by the bytes limit, not by the server */
        request->last_activity = now;
    if (dlnow != request->last_down || ulnow != request->last_up) {
        request->last_down = dlnow;
        request->last_up = ulnow;
        request->last_activity = now;
        return 0;
    }
    if (now - request->last_activity > request->stall_s) {
        request->stalled = true;
        return 1; /* CURLE_ABORTED_BY_CALLBACK */
    }
    return 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
    struct http_request *request = user;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* A new response (after 100 Continue, or a new attempt): forget the old headers. */
        g_ptr_array_set_size(request->reply_headers, 0);
        request->reply_header_bytes = 0;
        return n;
    }
    const char *colon = memchr(data, ':', n);
    if (!colon || request->reply_header_bytes + n > HEADER_BYTES_CAP)
        return n;
    request->reply_header_bytes += n;
    const char *value = colon + 1;
    const char *end = data + n;
    while (value < end && (*value == ' ' || *value == '\t'))
        value++;
    while (end > value && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    g_ptr_array_add(request->reply_headers, g_strndup(data, (gsize)(colon - data)));
    g_ptr_array_add(request->reply_headers, g_strndup(value, (gsize)(end - value)));
    return n;
}

/* ---- completion ---- */

static const char *request_range(const struct http_request *request)
{
    for (const struct curl_slist *item = request->headers; item; item = item->next) {
        if (g_ascii_strncasecmp(item->data, "Range:", 6) == 0) {
            const char *value = item->data + 6;
            while (*value == ' ')
                value++;
            return value;
        }
    }
    return NULL;
}

static void report_attempt(struct http_engine *engine, const struct http_request *request,
                           bool retrying, bool success)
{
    if (!engine->observer)
        return;
    bool attempted = request->attempt_finished;
    struct http_attempt_report report = {
        .method = request->method,
        .url = request->url,
        .range = request_range(request),
        .object_name = request->object_name,
        .status = request->status,
        .curl_code = request->curl_code,
        .error_text = request->error_text,
        .attempt = attempted ? request->attempts : 0,
        .attempt_s = attempted ? request->attempt_s : 0,
        .call_s = http_now_s() - request->submitted_at,
        .bytes_down = attempted ? request->attempt_down : 0,
        .bytes_up = attempted ? request->attempt_up : 0,
        .stalled = attempted && request->stalled,
        .retrying = retrying,
        .final = !retrying,
        .success = success,
    };
    engine->observer(&report, engine->observer_user);
}

static void complete(struct http_engine *engine, struct http_request *request)
{
    struct http_response response = {
        .status = request->status,
        .curl_code = request->curl_code,
        .deadline_exceeded = request->deadline_exceeded,
        .rate_limited_to_deadline = request->rate_limited_to_deadline,
        .request_sent = request->sends > 0,
        .cancelled = request->cancelled,
        .body_overflow = request->overflow,
        .out_of_memory = request->out_of_memory,
        .body_read_error = request->body.read_error,
        .attempts = request->attempts,
        .error_text = request->error_text,
        .private_request = request,
    };
    if (request->error_text[0] == '\0' && request->curl_code != CURLE_OK)
        g_strlcpy(request->error_text, curl_easy_strerror(request->curl_code),
                  sizeof(request->error_text));
    bool success = request->curl_code == CURLE_OK && !request->cancelled && !request->overflow &&
                   request->status >= 200 && request->status <= 399;
    if (request->status >= 200 && request->status <= 299 && request->curl_code == CURLE_OK) {
        if (request->fixed_sink) {
            response.body = request->fixed_buf;
        } else {
            response.body = request->grow_data ? request->grow_data : "";
        }
        response.body_len = request->received;
    } else {
        response.body = request->error_body->str;
        response.body_len = request->error_body->len;
    }
    if (!success)
        count(&engine->stat_failures, 1);
    report_attempt(engine, request, false, success);
    if (request->completion)
        request->completion(&response, request->completion_user);
    struct perform_waiter *waiter = request->waiter;
    http_request_free(request);
    if (waiter) {
        g_mutex_lock(&waiter->lock);
        waiter->done = true;
        g_cond_signal(&waiter->cond);
        g_mutex_unlock(&waiter->lock);
    }
}

static void complete_cancelled(struct http_engine *engine, struct http_request *request)
{
    request->cancelled = true;
    g_strlcpy(request->error_text, "cancelled", sizeof(request->error_text));
    complete(engine, request);
}

/* ---- attempts (engine thread) ---- */

static CURL *take_easy(struct http_engine *engine)
{
    if (engine->idle_easy->len > 0)
        return g_ptr_array_steal_index_fast(engine->idle_easy, engine->idle_easy->len - 1);
    return curl_easy_init();
}

static void return_easy(struct http_engine *engine, CURL *easy)
{
    if (engine->idle_easy->len >= (guint)engine->max_connections * 2) {
        curl_easy_cleanup(easy);
        return;
    }
    curl_easy_reset(easy);
    g_ptr_array_add(engine->idle_easy, easy);
}

static void reset_reply(struct http_request *request)
{
    request->received = 0;
    request->overflow = false;
    request->stalled = false;
    request->last_activity = http_now_s();
    request->last_down = request->last_up = 0;
    request->status = 0;
    request->curl_code = CURLE_OK;
    request->error_text[0] = '\0';
    g_string_truncate(request->error_body, 0);
    g_ptr_array_set_size(request->reply_headers, 0);
    request->reply_header_bytes = 0;
}

/* A call rate limited until its deadline ends as the 429 it last had, whatever cut the last
 * try short (no room for another wait, the timer firing late, the deadline's own timeout of
 * the attempt after the wait): EIO, logged as rate limited, never the deadline's ETIMEDOUT
 * by a matter of timing. */
static void end_rate_limited(struct http_engine *engine, struct http_request *request)
{
    request->status = 429;
    request->curl_code = CURLE_OK;
    request->error_text[0] = '\0';
    request->deadline_exceeded = false;
    request->rate_limited_to_deadline = true;
    complete(engine, request);
}

static void start_attempt(struct http_engine *engine, struct http_request *request)
{
    double remaining = request->deadline_at - http_now_s();
    if (remaining <= 0.001) {
        if (request->retrying_rate_limit) {
            /* The backoff after a 429 ended at the deadline: the call ends on that 429 as it
             * does when the wait would not fit (finish_attempt), whichever side of the
             * deadline the timer fired. */
            end_rate_limited(engine, request);
            return;
        }
        request->deadline_exceeded = true;
        if (request->curl_code == CURLE_OK && request->status == 0)
            request->curl_code = CURLE_OPERATION_TIMEDOUT;
        complete(engine, request);
        return;
    }
    if (request->out_of_memory) {
        complete(engine, request);
        return;
    }
    CURL *easy = take_easy(engine);
    if (!easy) {
        request->out_of_memory = true;
        complete(engine, request);
        return;
    }
    reset_reply(request);
    request->attempt_finished = false;
    request->attempt_started = http_now_s();
    if (!request->expect_decided) {
        request->expect_decided = true;
        if (request->body.total < HTTP_EXPECT_CONTINUE_MIN)
            http_request_add_header(request, "Expect:"); /* no 100-continue round trip */
    }
    request->easy = easy;
    curl_easy_setopt(easy, CURLOPT_URL, request->url);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, request);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L); /* prefer multiplexing over a new connection */
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 15L);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    if (request->fresh_connection)
        curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, engine->connect_timeout_ms);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)ceil(remaining * 1000.0));
    /* A stalled transfer (no byte for stall_s, before or during the body) ends the attempt. */
    request->sends = 0;
    curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(easy, CURLOPT_PREREQDATA, request);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, request);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, request);
    /* Large downloads (read chunks): fewer socket reads and write callbacks per MiB. */
    if (request->fixed_sink && request->sink_cap >= LARGE_DOWNLOAD_MIN)
        curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, LARGE_DOWNLOAD_BUFFER);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, request);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, request->error_text);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, request->headers);
    if (engine->user_agent)
        curl_easy_setopt(easy, CURLOPT_USERAGENT, engine->user_agent);
    /* A new connection resumes a TLS session any earlier handle got (an abbreviated handshake,
     * no certificate chain to verify). The CA store is parsed once per engine (http_tls.c) and
     * handed to each connection's SSL_CTX below: curl's own cache (CURLOPT_CA_CACHE_TIMEOUT) is
     * skipped whenever a CA directory is set, as in Debian's libcurl, so it would re-read the
     * file per connection. */
    if (engine->share)
        curl_easy_setopt(easy, CURLOPT_SHARE, engine->share);
    curl_easy_setopt(easy, CURLOPT_TLS13_CIPHERS, TLS13_SUITES);
    /* Parsed at the first https URL, not at start: an engine that only speaks plain HTTP (an
     * emulator, a proxy) skips the ~30 ms of CPU per mount (issue 23: 3% of a 1 GiB load's). */
    if (!engine->ca_store_tried && g_ascii_strncasecmp(request->url, "https:", 6) == 0) {
        engine->ca_store_tried = true;
        engine->ca_store = http_tls_store_new(engine->ca_file, engine->ca_dir);
    }
    if (engine->ca_store) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, NULL); /* the store holds them already */
        curl_easy_setopt(easy, CURLOPT_CAPATH, NULL);
        curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, http_tls_use_store);
        curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, engine->ca_store);
    } else {
        if (engine->ca_file)
            curl_easy_setopt(easy, CURLOPT_CAINFO, engine->ca_file);
        if (engine->ca_dir)
            curl_easy_setopt(easy, CURLOPT_CAPATH, engine->ca_dir);
    }
    switch (request->method) {
    case HTTP_GET:
        curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
        break;
    case HTTP_HEAD:
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
        break;
    case HTTP_POST:
    case HTTP_PUT:
    case HTTP_PATCH: {
        curl_off_t total = (curl_off_t)request->body.total;
        http_body_seek(&request->body, 0);
        curl_easy_setopt(easy, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(easy, CURLOPT_READDATA, request);
        curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(easy, CURLOPT_SEEKDATA, request);
        if (request->method == HTTP_POST) {
            curl_easy_setopt(easy, CURLOPT_POST, 1L);
            curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, total);
        } else {
            curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, total);
            if (request->method == HTTP_PATCH)
                curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "PATCH");
        }
        if (request->body.total > HTTP_EXPECT_CONTINUE_MIN)
            curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, LARGE_UPLOAD_BUFFER);
        break;
    }
    case HTTP_DELETE:
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "DELETE");
        break;
    }
    CURLMcode added = curl_multi_add_handle(engine->multi, easy);
    if (added != CURLM_OK) {
        request->easy = NULL;
        return_easy(engine, easy);
        request->curl_code = CURLE_FAILED_INIT;
        g_strlcpy(request->error_text, curl_multi_strerror(added), sizeof(request->error_text));
        complete(engine, request);
        return;
    }
    request->attempts++;
    count(&engine->stat_attempts, 1);
    g_hash_table_add(engine->in_flight, request);
}

static gint compare_retry_at(gconstpointer a, gconstpointer b, gpointer unused)
{
    const struct http_request *x = a, *y = b;
    return x->retry_at < y->retry_at ? -1 : x->retry_at > y->retry_at ? 1 : 0;
}

static void finish_attempt(struct http_engine *engine, CURL *easy, CURLcode result)
{
    struct http_request *request = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&request);
    curl_off_t uploaded = 0, downloaded = 0;
    curl_easy_getinfo(easy, CURLINFO_SIZE_UPLOAD_T, &uploaded);
    curl_easy_getinfo(easy, CURLINFO_SIZE_DOWNLOAD_T, &downloaded);
    count(&engine->stat_bytes_up, (uint64_t)MAX(uploaded, 0));
    count(&engine->stat_bytes_down, (uint64_t)MAX(downloaded, 0));
    long connects = 0;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
    count(&engine->stat_connections, (uint64_t)MAX(connects, 0L));
    request->attempt_finished = true;
    request->attempt_s = http_now_s() - request->attempt_started;
    request->attempt_up = (uint64_t)MAX(uploaded, 0);
    request->attempt_down = (uint64_t)MAX(downloaded, 0);
    request->status = current_status(request);
    if (request->sends > 1) {
        /* The server may have acted on the request whose reply was lost: callers that read a
         * 412 or 404 "on a retry" as their own earlier attempt (see gcs.h) must see it. */
        unsigned hidden = request->sends - 1;
        request->attempts += hidden;
        request->retries_spent += hidden;
        count(&engine->stat_attempts, hidden);
        flog_debug("http",
                   "curl sent the request %u times in attempt %u (a reused connection "
                   "died before any reply): counted as attempts",
                   request->sends, request->attempts - hidden);
    }
    if (result == CURLE_ABORTED_BY_CALLBACK && request->stalled) {
        result = CURLE_OPERATION_TIMEDOUT; /* retried like a timeout */
        g_snprintf(request->error_text, sizeof(request->error_text),
                   "no data for %.1f s (stalled transfer)", request->stall_s);
    }
    if (result == CURLE_UNSUPPORTED_PROTOCOL) {
        /* Before connecting this is a URL curl cannot use (final); after, it is curl's verdict
         * on a reply that is not HTTP ("Unsupported response code", "HTTP/0.9"): a server or
         * connection out of step, retried like any garbled reply. */
        const char *peer = NULL;
        if (curl_easy_getinfo(easy, CURLINFO_PRIMARY_IP, &peer) == CURLE_OK && peer && *peer)
            result = CURLE_WEIRD_SERVER_REPLY;
    }
    request->curl_code = (int)result;
    if (request->throttled) { /* ended while paused (its deadline) */
        g_ptr_array_remove_fast(engine->byte_paused, request);
        request->throttled = false;
    }
    curl_multi_remove_handle(engine->multi, easy);
    g_hash_table_remove(engine->in_flight, request);
    request->easy = NULL;
    return_easy(engine, easy);

    double now = http_now_s();
    double remaining = request->deadline_at - now;
    if (request->overflow || request->out_of_memory) {
        complete(engine, request);
        return;
    }
    if (result == CURLE_OPERATION_TIMEDOUT && remaining <= 0.05) {
        if (request->retrying_rate_limit) {
            end_rate_limited(engine, request);
            return;
        }
        request->deadline_exceeded = true;
        complete(engine, request);
        return;
    }
    struct http_retry_policy policy = default_retry_policy;
    policy.max_retries = request->max_retries;
    double delay = 0;
    const char *retry_after = NULL;
    for (guint i = 0; i + 1 < request->reply_headers->len; i += 2) {
        if (g_ascii_strcasecmp(g_ptr_array_index(request->reply_headers, i), "Retry-After") == 0)
            retry_after = g_ptr_array_index(request->reply_headers, i + 1);
    }
    enum http_retry_verdict verdict = http_retry_decide(
        &policy, request->status, request->curl_code, request->attempts, &request->retries_spent,
        retry_after, request->idempotent, remaining, g_random_double(), &delay);
    bool rate_limited = http_outcome_is_rate_limit(request->status, request->curl_code);
    if (request->no_retry_on_429 && rate_limited)
        verdict = HTTP_RETRY_NO;
    if (verdict == HTTP_RETRY_DEADLINE && rate_limited)
        request->rate_limited_to_deadline = true;
    request->retrying_rate_limit = verdict == HTTP_RETRY_YES && rate_limited;
    if (verdict != HTTP_RETRY_YES) {
        complete(engine, request);
        return;
    }
    count(&engine->stat_retries, 1);
    report_attempt(engine, request, true, false);
    /* A reset, a garbled or short reply: whatever the connection held is suspect. curl closes
     * a connection it saw fail, but a reply that left bytes behind it may not look failed. */
    request->fresh_connection = request->curl_code != CURLE_OK;
    flog_debug("http", "retrying in %.3f s (attempt %u, status %ld, %s)", delay, request->attempts,
               request->status,
               request->curl_code ? curl_easy_strerror(request->curl_code) : "transfer ok");
    request->retry_at = now + delay;
    g_queue_insert_sorted(&engine->retry_queue, request, compare_retry_at, NULL);
}

static void cancel_everything(struct http_engine *engine, GQueue *incoming)
{
    GHashTableIter iter;
    gpointer key;
    g_ptr_array_set_size(engine->byte_paused, 0);
    g_hash_table_iter_init(&iter, engine->in_flight);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        struct http_request *request = key;
        curl_multi_remove_handle(engine->multi, request->easy);
        curl_easy_cleanup(request->easy);
        request->easy = NULL;
        g_hash_table_iter_remove(&iter);
        complete_cancelled(engine, request);
    }
    struct http_request *request;
    while ((request = g_queue_pop_head(&engine->retry_queue)))
        complete_cancelled(engine, request);
    while ((request = g_queue_pop_head(&engine->ops_waiting)))
        complete_cancelled(engine, request);
    while ((request = g_queue_pop_head(incoming)))
        complete_cancelled(engine, request);
    /* Completions may have submitted more; stopping is set, so those completed at once. */
    g_mutex_lock(&engine->lock);
    GQueue late = engine->pending;
    g_queue_init(&engine->pending);
    g_mutex_unlock(&engine->lock);
    while ((request = g_queue_pop_head(&late)))
        complete_cancelled(engine, request);
}

/* --limit-ops-per-sec: starts waiting calls in order while tokens last. Returns the seconds
 * until the next one can start, 0 when none waits. */
static double start_admitted_calls(struct http_engine *engine, double now)
{
    struct http_request *request;
    while ((request = g_queue_peek_head(&engine->ops_waiting))) {
        double wait = http_token_bucket_take(&engine->ops_bucket, 1, now);
        if (wait > 0)
            return wait;
        g_queue_pop_head(&engine->ops_waiting);
        if (now > request->ops_queued_at) {
            count(&engine->stat_limit_op_waits, 1);
            count(&engine->stat_limit_op_wait_us, (uint64_t)((now - request->ops_queued_at) * 1e6));
        }
        start_attempt(engine, request);
    }
    return 0;
}

/* --limit-bytes-per-sec: once the debt is paid, resumes every paused transfer (each may pause
 * again at once, from inside curl_easy_pause). Returns the seconds left to wait, 0 when none. */
static double resume_paused_transfers(struct http_engine *engine, double now)
{
    if (engine->byte_paused->len == 0)
        return 0;
    double debt = http_token_bucket_debt_s(&engine->bytes_bucket, now);
    if (debt > 0)
        return debt;
    GPtrArray *paused = engine->byte_paused;
    engine->byte_paused = g_ptr_array_new();
    for (guint i = 0; i < paused->len; i++) {
        struct http_request *request = g_ptr_array_index(paused, i);
        request->throttled = false;
        count(&engine->stat_limit_byte_wait_us, (uint64_t)((now - request->throttled_at) * 1e6));
        curl_easy_pause(request->easy, CURLPAUSE_CONT);
    }
    g_ptr_array_free(paused, TRUE);
    return 0;
}

static int wait_ms(double seconds, int timeout_ms)
{
    return seconds <= 0 ? timeout_ms : (int)MIN((double)timeout_ms, ceil(seconds * 1000.0));
}

static void *engine_main(void *arg)
{
    struct http_engine *engine = arg;
    for (;;) {
        g_mutex_lock(&engine->lock);
        bool stopping = engine->stopping;
        GQueue incoming = engine->pending;
        g_queue_init(&engine->pending);
        g_mutex_unlock(&engine->lock);
        if (stopping) {
            cancel_everything(engine, &incoming);
            break;
        }
        struct http_request *request;
        double now = http_now_s();
        while ((request = g_queue_pop_head(&incoming))) {
            if (engine->limit_ops) {
                request->ops_queued_at = now;
                g_queue_push_tail(&engine->ops_waiting, request);
            } else {
                start_attempt(engine, request);
            }
        }
        double ops_wait = engine->limit_ops ? start_admitted_calls(engine, now) : 0;
        while ((request = g_queue_peek_head(&engine->retry_queue)) && request->retry_at <= now) {
            g_queue_pop_head(&engine->retry_queue);
            start_attempt(engine, request);
        }
        double bytes_wait = engine->limit_bytes ? resume_paused_transfers(engine, now) : 0;

        int running = 0;
        curl_multi_perform(engine->multi, &running);
        CURLMsg *message;
        int queued = 0;
        while ((message = curl_multi_info_read(engine->multi, &queued))) {
            if (message->msg == CURLMSG_DONE)
                finish_attempt(engine, message->easy_handle, message->data.result);
        }

        int timeout_ms = 1000;
        if ((request = g_queue_peek_head(&engine->retry_queue))) {
            double wait = request->retry_at - http_now_s();
            timeout_ms = wait <= 0 ? 0 : (int)MIN(1000.0, ceil(wait * 1000.0));
        }
        timeout_ms = wait_ms(ops_wait, timeout_ms);
        timeout_ms = wait_ms(bytes_wait, timeout_ms);
        if (engine->byte_paused->len > 0 && bytes_wait <= 0)
            timeout_ms = 0; /* paused during this round with the debt already paid */
        /* curl_multi_poll also returns early for curl's own timers and for curl_multi_wakeup. */
        curl_multi_poll(engine->multi, NULL, 0, timeout_ms, NULL);
    }
    return NULL;
}

/* ---- engine lifetime ---- */

static gsize curl_initialized;

int http_engine_new(const struct http_engine_config *config, struct http_engine **out)
{
    if (g_once_init_enter(&curl_initialized)) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        g_once_init_leave(&curl_initialized, 1);
    }
    struct http_engine *engine = g_new0(struct http_engine, 1);
    g_mutex_init(&engine->lock);
    g_queue_init(&engine->pending);
    g_queue_init(&engine->retry_queue);
    engine->in_flight = g_hash_table_new(g_direct_hash, g_direct_equal);
    engine->idle_easy = g_ptr_array_new();
    engine->max_connections =
        config && config->max_connections > 0 ? config->max_connections : DEFAULT_MAX_CONNECTIONS;
    engine->connect_timeout_ms =
        (long)((config && config->connect_timeout_s > 0 ? config->connect_timeout_s : 10.0) *
               1000.0);
    engine->user_agent = g_strdup(config ? config->user_agent : NULL);
    engine->ca_file = g_strdup(config ? config->ca_file : NULL);
    engine->ca_dir = g_strdup(config ? config->ca_dir : NULL);
    g_queue_init(&engine->ops_waiting);
    engine->byte_paused = g_ptr_array_new();
    double now = http_now_s();
    if (config && config->limit_ops_per_sec > 0) {
        engine->limit_ops = true;
        http_token_bucket_init(&engine->ops_bucket, config->limit_ops_per_sec,
                               http_rate_burst(config->limit_ops_per_sec, 1), now);
    }
    if (config && config->limit_bytes_per_sec > 0) {
        /* At least one 64 KiB read of curl's may pass at a time, whatever the rate. */
        engine->limit_bytes = true;
        http_token_bucket_init(&engine->bytes_bucket, config->limit_bytes_per_sec,
                               http_rate_burst(config->limit_bytes_per_sec, 65536), now);
    }
    engine->multi = curl_multi_init();
    if (!engine->multi) {
        http_engine_free(engine);
        return -ENOMEM;
    }
    curl_multi_setopt(engine->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)engine->max_connections);
    curl_multi_setopt(engine->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)engine->max_connections);
    curl_multi_setopt(engine->multi, CURLMOPT_MAXCONNECTS, (long)engine->max_connections);
    curl_multi_setopt(engine->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    /* Only the engine thread uses the handles that share it: no lock callbacks needed. */
    engine->share = curl_share_init();
    if (engine->share && curl_share_setopt(engine->share, CURLSHOPT_SHARE,
                                           CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
        curl_share_cleanup(engine->share);
        engine->share = NULL;
    }
    int err = pthread_create(&engine->thread, NULL, engine_main, engine);
    if (err != 0) {
        http_engine_free(engine);
        return -err;
    }
    engine->thread_started = true;
    *out = engine;
    return 0;
}

void http_engine_free(struct http_engine *engine)
{
    if (!engine)
        return;
    if (engine->thread_started) {
        g_mutex_lock(&engine->lock);
        engine->stopping = true;
        g_mutex_unlock(&engine->lock);
        curl_multi_wakeup(engine->multi);
        pthread_join(engine->thread, NULL);
    }
    for (guint i = 0; i < engine->idle_easy->len; i++)
        curl_easy_cleanup(g_ptr_array_index(engine->idle_easy, i));
    g_ptr_array_free(engine->idle_easy, TRUE);
    g_hash_table_destroy(engine->in_flight);
    if (engine->byte_paused)
        g_ptr_array_free(engine->byte_paused, TRUE);
    if (engine->multi)
        curl_multi_cleanup(engine->multi);
    if (engine->share)
        curl_share_cleanup(engine->share);
    http_tls_store_free(engine->ca_store);
    g_free(engine->user_agent);
    g_free(engine->ca_file);
    g_free(engine->ca_dir);
    g_mutex_clear(&engine->lock);
    g_free(engine);
}

void http_engine_get_stats(struct http_engine *engine, struct http_engine_stats *out)
{
    out->requests = atomic_load_explicit(&engine->stat_requests, memory_order_relaxed);
    out->attempts = atomic_load_explicit(&engine->stat_attempts, memory_order_relaxed);
    out->retries = atomic_load_explicit(&engine->stat_retries, memory_order_relaxed);
    out->failures = atomic_load_explicit(&engine->stat_failures, memory_order_relaxed);
    out->bytes_downloaded = atomic_load_explicit(&engine->stat_bytes_down, memory_order_relaxed);
    out->bytes_uploaded = atomic_load_explicit(&engine->stat_bytes_up, memory_order_relaxed);
    out->limit_op_waits = atomic_load_explicit(&engine->stat_limit_op_waits, memory_order_relaxed);
    out->limit_op_wait_us =
        atomic_load_explicit(&engine->stat_limit_op_wait_us, memory_order_relaxed);
    out->limit_byte_pauses =
        atomic_load_explicit(&engine->stat_limit_byte_pauses, memory_order_relaxed);
    out->limit_byte_wait_us =
        atomic_load_explicit(&engine->stat_limit_byte_wait_us, memory_order_relaxed);
    out->connections = atomic_load_explicit(&engine->stat_connections, memory_order_relaxed);
}

void http_request_set_object_name(struct http_request *request, const char *name)
{
    g_free(request->object_name);
    request->object_name = g_strdup(name);
}

void http_engine_set_observer(struct http_engine *engine, http_observer_fn fn, void *user)
{
    engine->observer = fn;
    engine->observer_user = user;
}

bool http_engine_is_engine_thread(struct http_engine *engine)
{
    return engine->thread_started && pthread_equal(pthread_self(), engine->thread);
}

void http_submit(struct http_engine *engine, struct http_request *request)
{
    count(&engine->stat_requests, 1);
    request->engine = engine;
    request->submitted_at = http_now_s();
    request->deadline_at = request->submitted_at + request->deadline_s;
    g_mutex_lock(&engine->lock);
    bool stopping = engine->stopping;
    if (!stopping)
        g_queue_push_tail(&engine->pending, request);
    g_mutex_unlock(&engine->lock);
    if (stopping) {
        complete_cancelled(engine, request);
        return;
    }
    curl_multi_wakeup(engine->multi);
}

int http_perform(struct http_engine *engine, struct http_request *request)
{
    if (http_engine_is_engine_thread(engine)) {
        http_request_free(request);
        return -EDEADLK;
    }
    struct perform_waiter waiter = {.done = false};
    g_mutex_init(&waiter.lock);
    g_cond_init(&waiter.cond);
    request->waiter = &waiter;
    http_submit(engine, request);
    g_mutex_lock(&waiter.lock);
    while (!waiter.done)
        g_cond_wait(&waiter.cond, &waiter.lock);
    g_mutex_unlock(&waiter.lock);
    g_cond_clear(&waiter.cond);
    g_mutex_clear(&waiter.lock);
    return 0;
}
