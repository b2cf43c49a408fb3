/* The emulator's HTTP server: libmicrohttpd setup (a thread per connection, so injected
 * latency, stalls and bandwidth pacing are plain sleeps), request parsing (raw path and query,
 * decoded exactly once), routing to the JSON API (api_json.c), the XML API (api_xml.c) and the
 * control API (/_emulator/...), and the application of latency, bandwidth, QPS limits, faults,
 * --deny and --auth-token.
 *
 * The second half of this header is the internal interface the api_*.c files use: a request
 * (what arrived), a reply (what to send), and small formatting helpers. A handler fills a
 * reply and never talks to libmicrohttpd itself. */
#ifndef EMU_SERVER_H
#define EMU_SERVER_H

#include <glib.h>

#include "fluxfs/json_string.h"
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "faults.h"
#include "rate.h"
#include "stats.h"
#include "store.h"

struct emu_uploads;

struct emu_server_options {
    const char *host; /* NULL = 127.0.0.1 */
    unsigned port;    /* 0 = any free port */
    unsigned latency_ms;
    unsigned jitter_ms;
    double bandwidth_mibps;      /* per connection; 0 = unlimited */
    double qps_limit;            /* 0 = unlimited */
    struct emu_rate_config rate; /* the rate model (rate.h); all rates 0 = off */
    uint64_t seed;
    const char *auth_token; /* NULL = no auth */
    const struct emu_fault_rule *faults;
    size_t fault_count;
    const char *const *deny; /* operation names answered 403 */
    size_t deny_count;
    bool verbose;             /* log every request on stderr */
    const char *tls_cert_pem; /* PEM certificate (chain) and private key: serve HTTPS; */
    const char *tls_key_pem;  /* NULL = plain HTTP. Copied at start. */
    /* Keys to verify V4 signed URLs with (signed_url.h); NULL = check their shape only. Not
     * copied: must outlive the server. */
    const struct emu_signing_keys *signing_keys;
};

struct emu_server;
struct emu_signing_keys;

/* Starts listening; the store stays owned by the caller and must outlive the server. */
int emu_server_start(struct emu_store *store, const struct emu_server_options *options,
                     struct emu_server **out);
/* "http://127.0.0.1:41234" ("https://..." when serving TLS) */
const char *emu_server_url(const struct emu_server *server);
void emu_server_stop(struct emu_server *server); /* accepts NULL */

/* ---------------- internal: shared by server.c, api_json.c, api_xml.c ---------------- */

/* Caps on request bodies grown from network input. */
#define EMU_JSON_BODY_MAX   (4u << 20)                     /* metadata, compose, config */
#define EMU_XML_BODY_MAX    (4u << 20)                     /* CompleteMultipartUpload */
#define EMU_UPLOAD_BODY_MAX ((uint64_t)5 << 30 | 1u << 20) /* one upload request: 5 GiB + */
/* A JSON API request body sent with Content-Encoding: gzip inflates to at most this (and at
 * most the operation's own cap): a gzip bomb is refused with 413, not held in memory. */
#define EMU_INFLATE_MAX ((uint64_t)256 << 20)

struct emu_request;
struct emu_reply;
struct emu_request_body;
typedef void (*emu_handler_fn)(struct emu_request *req, struct emu_reply *reply);

struct emu_request {
    struct emu_server *server;
    struct emu_store *store;
    struct emu_uploads *uploads;
    struct MHD_Connection *connection;
    const char *method; /* "GET", ... (owned by libmicrohttpd) */
    bool head;          /* HEAD request: reply as to GET, body suppressed */
    char *uri;          /* request-target as received */
    char *path;         /* its path, still percent-encoded */
    GPtrArray *query;   /* decoded key, value, key, value, ... (g_free) */
    char *base_url;     /* http(s)://HOST:PORT as the client addressed us */

    /* Filled by routing. */
    enum emu_op op;
    bool xml; /* errors in XML (XML API) instead of JSON */
    emu_handler_fn handler;
    char *bucket; /* decoded names from the path, NULL when absent */
    char *object;
    char *dest_bucket;
    char *dest_object;
    uint64_t body_limit; /* bytes accepted; more -> 413 */

    /* Body. */
    int64_t content_length;        /* -1 when not given */
    struct emu_request_body *body; /* see emu_request_take_body() */
    uint64_t body_received;
    bool body_too_large;
    bool body_no_memory; /* the body could not be stored (503) */

    /* Server-private state. */
    bool started;
    bool discard_body;
    unsigned early_status; /* reply this error without calling the handler */
    const char *early_reason;
    const char *early_message;
    const char *early_xml_code; /* XML error code of an early error, NULL = from the status */
    unsigned retry_after;
    struct emu_fault_decision fault;
    int64_t start_us;
};

/* Decoded query value of the first occurrence of key; "" for a key without '='; NULL absent. */
const char *emu_query(const struct emu_request *req, const char *key);
bool emu_query_bool(const struct emu_request *req, const char *key); /* "true" / "1" */
/* Request header (case-insensitive), NULL when absent. */
const char *emu_header(const struct emu_request *req, const char *name);
/* Hands over the body received (an empty GBytes when there was none). */
GBytes *emu_request_take_body(struct emu_request *req);

struct emu_reply {
    unsigned status;
    GPtrArray *headers;        /* name, value, name, value, ... (g_free) */
    GBytes *body;              /* in-memory body or NULL */
    struct emu_object *object; /* streamed body (a reference) or NULL */
    uint64_t offset;           /* streamed range */
    uint64_t length;
};

void emu_reply_header(struct emu_reply *reply, const char *name, const char *value);
void emu_reply_headerf(struct emu_reply *reply, const char *name, const char *format, ...)
    G_GNUC_PRINTF(3, 4);
/* Takes text. */
void emu_reply_text(struct emu_reply *reply, unsigned status, const char *content_type,
                    GString *text);
void emu_reply_json(struct emu_reply *reply, unsigned status, GString *json);
void emu_reply_empty(struct emu_reply *reply, unsigned status);
/* Streams bytes [offset, offset + length) of obj (takes a new reference). */
void emu_reply_stream(struct emu_reply *reply, unsigned status, struct emu_object *obj,
                      uint64_t offset, uint64_t length);
/* Cloud Storage JSON error body {"error":{"code","message","errors":[{...reason...}]}}. */
void emu_reply_json_error(struct emu_reply *reply, unsigned status, const char *reason,
                          const char *format, ...) G_GNUC_PRINTF(4, 5);
/* XML error body <Error><Code/><Message/><Details/></Error>. */
void emu_reply_xml_error(struct emu_reply *reply, unsigned status, const char *code,
                         const char *format, ...) G_GNUC_PRINTF(4, 5);
/* Maps a store errno to the status and error body of the request's API; what names the
 * bucket/object for messages. */
void emu_reply_errno(struct emu_request *req, struct emu_reply *reply, int err, const char *what);
/* Error in the request's API from a status (reason/code chosen from the status). */
void emu_reply_status_error(struct emu_request *req, struct emu_reply *reply, unsigned status,
                            const char *message);
/* Discards whatever the reply held (to replace it with another). */
void emu_reply_reset(struct emu_reply *reply);

/* --- formatting helpers --- */
void emu_xml_escape(GString *out, const char *text);
/* Decodes %XX (and '+' as space when plus_is_space). NULL when malformed or when the result
 * holds a NUL byte. */
char *emu_percent_decode(const char *text, size_t len, bool plus_is_space);
/* Encodes everything but unreserved characters (RFC 3986), so '/' becomes %2F. */
void emu_percent_encode(GString *out, const char *text);
/* 2026-11-21T11:22:33.456Z */
void emu_format_rfc3339(int64_t us, char out[40]);
/* Sat, 21 Nov 2026 11:22:33 GMT */
void emu_format_http_date(int64_t us, char out[40]);
/* RFC 3339 date-time ("2026-11-21T11:22:33.456Z", "...+01:00", fractions to microseconds)
 * to microseconds since the epoch; 0 or -EINVAL. */
int emu_parse_rfc3339(const char *text, int64_t *out_us);
/* Strict decimal int64; 0 or -EINVAL. */
int emu_parse_int64(const char *text, int64_t *out);

/* Routing entry points: set op, handler, names and body_limit, or return an HTTP status (and
 * set early_message) for a request that cannot be routed. */
unsigned api_json_route(struct emu_request *req);
unsigned api_xml_route(struct emu_request *req);

#endif
