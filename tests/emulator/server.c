/* The emulator's HTTP front: libmicrohttpd with a thread per connection, request parsing and
 * routing, the control API, and the injection of latency, bandwidth limits, QPS limits, faults,
 * --deny and --auth-token (see server.h). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>
#include <zlib.h>

#include "bill.h"
#include "fluxfs/json_depth.h"

#include "signed_url.h"
#include "uploads.h"

#define EMU_STREAM_BLOCK     (1u << 20)     /* content callback block size */
#define EMU_SMALL_BODY       (256u * 1024u) /* bodies up to this are copied into one buffer */
#define EMU_CONTROL_BODY_MAX (1u << 20)
#define EMU_CONNECTION_LIMIT 4096
#define EMU_MAX_DENY         64

struct emu_server {
    struct MHD_Daemon *daemon;
    struct emu_store *store;
    struct emu_uploads *uploads;
    struct emu_stats *stats;
    struct emu_faults *faults;
    char *url;
    const char *scheme; /* "http" or "https" */
    char *tls_cert_pem; /* kept for the daemon's lifetime (NULL: plain HTTP) */
    char *tls_key_pem;
    bool verbose;
    char *auth_header;                           /* "Bearer TOKEN" or NULL; fixed at start */
    const struct emu_signing_keys *signing_keys; /* NULL: signed URLs checked for shape only */

    GMutex config_lock; /* protects the fields below */
    unsigned latency_ms;
    unsigned jitter_ms;
    double bandwidth_mibps;
    double qps_limit;
    struct emu_token_bucket qps;
    struct emu_rate_model *rate; /* NULL = the rate model is off */
    bool deny[EMU_OP_COUNT];
    char *requester_pays; /* "Requester Pays": requests must carry userProject=this; NULL = off */
};

/* ------------------------------------------------------------------ formatting helpers */

void emu_xml_escape(GString *out, const char *text)
{
    for (const char *p = text; *p != '\0'; p++) {
        switch (*p) {
        case '<':
            g_string_append(out, "&lt;");
            break;
        case '>':
            g_string_append(out, "&gt;");
            break;
        case '&':
            g_string_append(out, "&amp;");
            break;
        case '"':
            g_string_append(out, "&quot;");
            break;
        case '\'':
            g_string_append(out, "&apos;");
            break;
        default:
            g_string_append_c(out, *p);
        }
    }
}

char *emu_percent_decode(const char *text, size_t len, bool plus_is_space)
{
    char *out = g_malloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '%') {
            int hi = i + 1 < len ? g_ascii_xdigit_value(text[i + 1]) : -1;
            int lo = i + 2 < len ? g_ascii_xdigit_value(text[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                g_free(out);
                return NULL;
            }
            c = (char)(hi * 16 + lo);
            i += 2;
            if (c == '\0') {
                g_free(out);
                return NULL;
            }
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        } else if (c == '\0') {
            g_free(out);
            return NULL;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return out;
}

void emu_percent_encode(GString *out, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if (g_ascii_isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            g_string_append_c(out, (char)*p);
        } else {
            g_string_append_c(out, '%');
            g_string_append_c(out, hex[*p >> 4]);
            g_string_append_c(out, hex[*p & 15]);
        }
    }
}

static void put_digits(char *at, unsigned value, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        at[i] = (char)('0' + value % 10);
        value /= 10;
    }
}

/* The civil date of a day count since 1970-01-01 (days >= 0), H. Hinnant's algorithm. */
static void civil_from_days(int64_t days, int64_t *year, unsigned *month, unsigned *day)
{
    int64_t z = days + 719468;
    int64_t era = z / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *day = doy - (153 * mp + 2) / 5 + 1;
    *month = mp < 10 ? mp + 3 : mp - 9;
    *year = (int64_t)yoe + era * 400 + (*month <= 2);
}

void emu_format_rfc3339(int64_t us, char out[40])
{
    /* Every listed object's "updated" goes through here: digits by hand (snprintf and
     * gmtime_r's time zone lock were a fifth of a list page's cost), the same text. */
    if (us >= 0 && us < INT64_C(253402300800000000)) { /* before year 10000 */
        int64_t seconds = us / 1000000;
        int64_t year;
        unsigned month, day, of_day = (unsigned)(seconds % 86400);
        civil_from_days(seconds / 86400, &year, &month, &day);
        memcpy(out, "0000-00-00T00:00:00.000Z", 25);
        put_digits(out, (unsigned)year, 4);
        put_digits(out + 5, month, 2);
        put_digits(out + 8, day, 2);
        put_digits(out + 11, of_day / 3600, 2);
        put_digits(out + 14, of_day / 60 % 60, 2);
        put_digits(out + 17, of_day % 60, 2);
        put_digits(out + 20, (unsigned)(us / 1000 % 1000), 3);
        return;
    }
    time_t seconds = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&seconds, &tm);
    /* The modulos bound each field so the compiler can see the text fits. */
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (tm.tm_year + 1900) % 10000,
             (tm.tm_mon + 1) % 100, tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
             tm.tm_sec % 100, (int)((us / 1000) % 1000));
}

void emu_format_http_date(int64_t us, char out[40])
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t seconds = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&seconds, &tm);
    snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday % 100,
             months[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour % 100, tm.tm_min % 100,
             tm.tm_sec % 100);
}

/* Days since 1970-01-01 of a civil date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t year, unsigned month, unsigned day)
{
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    unsigned yoe = (unsigned)(year - era * 400);
    unsigned doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool take_digits(const char **p, int count, unsigned *out)
{
    unsigned value = 0;
    for (int i = 0; i < count; i++) {
        if (!g_ascii_isdigit((*p)[i]))
            return false;
        value = value * 10 + (unsigned)((*p)[i] - '0');
    }
    *p += count;
    *out = value;
    return true;
}

int emu_parse_rfc3339(const char *text, int64_t *out_us)
{
    static const unsigned month_days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const char *p = text;
    unsigned year, month, day, hour, minute, second;
    if (p == NULL || !take_digits(&p, 4, &year) || *p++ != '-' || !take_digits(&p, 2, &month) ||
        *p++ != '-' || !take_digits(&p, 2, &day))
        return -EINVAL;
    if (*p != 'T' && *p != 't')
        return -EINVAL;
    p++;
    if (!take_digits(&p, 2, &hour) || *p++ != ':' || !take_digits(&p, 2, &minute) || *p++ != ':' ||
        !take_digits(&p, 2, &second))
        return -EINVAL;
    if (month < 1 || month > 12 || day < 1 || day > month_days[month - 1] || hour > 23 ||
        minute > 59 || second > 60)
        return -EINVAL;
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (month == 2 && day == 29 && !leap)
        return -EINVAL;
    int64_t fraction_us = 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        while (g_ascii_isdigit(*p)) {
            if (digits < 6)
                fraction_us = fraction_us * 10 + (*p - '0');
            digits++;
            p++;
        }
        if (digits == 0)
            return -EINVAL;
        for (int i = digits; i < 6; i++)
            fraction_us *= 10;
    }
    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1;
        unsigned oh, om;
        if (!take_digits(&p, 2, &oh) || *p++ != ':' || !take_digits(&p, 2, &om) || oh > 23 ||
            om > 59)
            return -EINVAL;
        offset_s = sign * (int64_t)(oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    int64_t seconds =
        days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
    *out_us = seconds * 1000000 + fraction_us;
    return 0;
}

int emu_parse_int64(const char *text, int64_t *out)
{
    if (text == NULL || text[0] == '\0' || strlen(text) > 20)
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || g_ascii_isspace(text[0]))
        return -EINVAL;
    *out = value;
    return 0;
}

/* ------------------------------------------------------------------ request accessors */

const char *emu_query(const struct emu_request *req, const char *key)
{
    for (guint i = 0; i + 1 < req->query->len; i += 2) {
        if (strcmp(g_ptr_array_index(req->query, i), key) == 0)
            return g_ptr_array_index(req->query, i + 1);
    }
    return NULL;
}

bool emu_query_bool(const struct emu_request *req, const char *key)
{
    const char *value = emu_query(req, key);
    return value != NULL && (g_ascii_strcasecmp(value, "true") == 0 || strcmp(value, "1") == 0);
}

const char *emu_header(const struct emu_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

/* The body is collected in one malloc'd buffer (not a GByteArray: those stop at 4 GiB). */
struct emu_request_body {
    uint8_t *data;
    size_t len;
    size_t cap;
};

GBytes *emu_request_take_body(struct emu_request *req)
{
    struct emu_request_body *body = req->body;
    if (body == NULL || body->data == NULL)
        return g_bytes_new(NULL, 0);
    GBytes *bytes = g_bytes_new_take(body->data, body->len);
    body->data = NULL;
    body->len = body->cap = 0;
    return bytes;
}

/* Content-Encoding: gzip on a JSON API request (gzip-in-flight: `gcloud storage cp -J`,
 * apitools' gzip_encoded uploads, on media, multipart and resumable requests alike): Cloud
 * Storage inflates the body before reading it and stores what it inflates to. Concatenated
 * gzip members are one stream. Returns 0, or the HTTP status to refuse with (400: not gzip;
 * 413: inflates past `limit` bytes) and *why. */
static unsigned inflate_request_body(struct emu_request *req, uint64_t limit, const char **why)
{
    struct emu_request_body *body = req->body;
    if (body == NULL || body->len == 0)
        return 0;
    z_stream zs = {0};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) {
        *why = "Out of memory inflating the request body.";
        return 503;
    }
    size_t cap = (size_t)MIN((uint64_t)body->len * 4 + 4096, limit + 1), len = 0;
    uint8_t *out = g_try_malloc(cap);
    unsigned status = 0;
    zs.next_in = body->data;
    zs.avail_in = (uInt)MIN(body->len, (size_t)UINT_MAX);
    size_t in_left = body->len - zs.avail_in;
    while (out != NULL) {
        if (len == cap) {
            if (cap > limit) {
                status = 413;
                *why = "The request body inflates past what the emulator accepts "
                       "(Content-Encoding: gzip).";
                break;
            }
            size_t want = (size_t)MIN((uint64_t)cap * 2, limit + 1);
            uint8_t *grown = g_try_realloc(out, want);
            if (grown == NULL) {
                g_free(out);
                out = NULL;
                break;
            }
            out = grown;
            cap = want;
        }
        zs.next_out = out + len;
        zs.avail_out = (uInt)MIN(cap - len, (size_t)UINT_MAX);
        size_t before = zs.avail_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        len += before - zs.avail_out;
        if (zs.avail_in == 0 && in_left > 0) {
            zs.avail_in = (uInt)MIN(in_left, (size_t)UINT_MAX);
            in_left -= zs.avail_in;
        }
        if (rc == Z_STREAM_END) {
            if (zs.avail_in == 0 && in_left == 0)
                break;
            inflateReset(&zs); /* another gzip member follows */
            continue;
        }
        if (rc == Z_BUF_ERROR && zs.avail_out > 0 && zs.avail_in == 0) {
            /* the input ended inside a member */
            status = 400;
            *why = "The request body is not complete gzip data (Content-Encoding: gzip).";
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            status = 400;
            *why = "The request body is not valid gzip data (Content-Encoding: gzip).";
            break;
        }
    }
    inflateEnd(&zs);
    if (out == NULL) {
        *why = "Out of memory inflating the request body.";
        return 503;
    }
    if (status != 0) {
        g_free(out);
        return status;
    }
    g_free(body->data);
    body->data = out;
    body->len = len;
    body->cap = cap;
    return 0;
}

static bool gzip_encoded(const struct emu_request *req)
{
    const char *encoding = emu_header(req, "Content-Encoding");
    if (encoding == NULL)
        return false;
    while (*encoding == ' ' || *encoding == '\t')
        encoding++;
    size_t n = strlen(encoding);
    while (n > 0 && (encoding[n - 1] == ' ' || encoding[n - 1] == '\t'))
        n--;
    return (n == 4 && g_ascii_strncasecmp(encoding, "gzip", 4) == 0) ||
           (n == 6 && g_ascii_strncasecmp(encoding, "x-gzip", 6) == 0);
}

static void request_body_free(struct emu_request *req)
{
    struct emu_request_body *body = req->body;
    if (body != NULL) {
        g_free(body->data);
        g_free(body);
        req->body = NULL;
    }
}

/* ------------------------------------------------------------------ replies */

void emu_reply_header(struct emu_reply *reply, const char *name, const char *value)
{
    g_ptr_array_add(reply->headers, g_strdup(name));
    g_ptr_array_add(reply->headers, g_strdup(value));
}

void emu_reply_headerf(struct emu_reply *reply, const char *name, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *value = g_strdup_vprintf(format, args);
    va_end(args);
    g_ptr_array_add(reply->headers, g_strdup(name));
    g_ptr_array_add(reply->headers, value);
}

void emu_reply_reset(struct emu_reply *reply)
{
    g_ptr_array_set_size(reply->headers, 0);
    if (reply->body != NULL)
        g_bytes_unref(reply->body);
    reply->body = NULL;
    emu_object_unref(reply->object);
    reply->object = NULL;
    reply->offset = reply->length = 0;
    reply->status = 0;
}

void emu_reply_text(struct emu_reply *reply, unsigned status, const char *content_type,
                    GString *text)
{
    reply->status = status;
    if (content_type != NULL)
        emu_reply_header(reply, "Content-Type", content_type);
    if (reply->body != NULL)
        g_bytes_unref(reply->body);
    reply->body = g_string_free_to_bytes(text);
}

void emu_reply_json(struct emu_reply *reply, unsigned status, GString *json)
{
    emu_reply_text(reply, status, "application/json; charset=UTF-8", json);
}

void emu_reply_empty(struct emu_reply *reply, unsigned status)
{
    reply->status = status;
}

void emu_reply_stream(struct emu_reply *reply, unsigned status, struct emu_object *obj,
                      uint64_t offset, uint64_t length)
{
    reply->status = status;
    emu_object_unref(reply->object);
    reply->object = emu_object_ref(obj);
    reply->offset = offset;
    reply->length = length;
}

void emu_reply_json_error(struct emu_reply *reply, unsigned status, const char *reason,
                          const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = g_strdup_vprintf(format, args);
    va_end(args);
    GString *json = g_string_new(NULL);
    g_string_append_printf(json, "{\"error\":{\"code\":%u,\"message\":", status);
    json_append_string(json, message);
    g_string_append(json, ",\"errors\":[{\"message\":");
    json_append_string(json, message);
    g_string_append(json, ",\"domain\":\"global\",\"reason\":");
    json_append_string(json, reason);
    g_string_append(json, "}]}}");
    g_free(message);
    emu_reply_json(reply, status, json);
}

void emu_reply_xml_error(struct emu_reply *reply, unsigned status, const char *code,
                         const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = g_strdup_vprintf(format, args);
    va_end(args);
    GString *xml = g_string_new("<?xml version='1.0' encoding='UTF-8'?><Error><Code>");
    emu_xml_escape(xml, code);
    g_string_append(xml, "</Code><Message>");
    emu_xml_escape(xml, message);
    g_string_append(xml, "</Message><Details>");
    emu_xml_escape(xml, message);
    g_string_append(xml, "</Details></Error>");
    g_free(message);
    emu_reply_text(reply, status, "application/xml; charset=UTF-8", xml);
}

struct status_words {
    unsigned status;
    const char *reason; /* JSON API */
    const char *code;   /* XML API */
    const char *message;
};

static const struct status_words status_table[] = {
    {400, "invalid", "InvalidArgument", "Invalid argument."},
    {401, "required", "AuthenticationRequired", "Anonymous caller does not have access."},
    {403, "forbidden", "AccessDenied", "Access denied."},
    {404, "notFound", "NoSuchKey", "Not Found"},
    {405, "badRequest", "MethodNotAllowed", "The method is not allowed for this resource."},
    {409, "conflict", "Conflict", "Conflict."},
    {411, "required", "MissingContentLength", "Length required."},
    {412, "conditionNotMet", "PreconditionFailed",
     "At least one of the pre-conditions you specified did not hold."},
    {413, "uploadTooLarge", "EntityTooLarge", "The request body is too large."},
    {416, "requestedRangeNotSatisfiable", "InvalidRange",
     "The requested range cannot be satisfied."},
    {429, "rateLimitExceeded", "SlowDown", "The rate of requests exceeds the limit."},
    {500, "backendError", "InternalError", "Backend Error"},
    {501, "notImplemented", "NotImplemented", "Not implemented by the emulator."},
    {503, "backendError", "ServiceUnavailable", "Service Unavailable"},
};

static const struct status_words *words_for_status(unsigned status)
{
    for (size_t i = 0; i < G_N_ELEMENTS(status_table); i++) {
        if (status_table[i].status == status)
            return &status_table[i];
    }
    return &status_table[0];
}

void emu_reply_status_error(struct emu_request *req, struct emu_reply *reply, unsigned status,
                            const char *message)
{
    const struct status_words *words = words_for_status(status);
    if (message == NULL)
        message = words->message;
    emu_reply_reset(reply);
    if (req->xml)
        emu_reply_xml_error(reply, status, words->code, "%s", message);
    else
        emu_reply_json_error(reply, status, words->reason, "%s", message);
}

void emu_reply_errno(struct emu_request *req, struct emu_reply *reply, int err, const char *what)
{
    emu_reply_reset(reply);
    if (what == NULL)
        what = req->object != NULL ? req->object : (req->bucket != NULL ? req->bucket : "");
    switch (err) {
    case -ENOENT: {
        struct emu_bucket_info info = {0};
        bool bucket_missing =
            req->bucket != NULL && emu_store_bucket_get(req->store, req->bucket, &info) == -ENOENT;
        emu_bucket_info_clear(&info);
        if (req->xml) {
            if (bucket_missing)
                emu_reply_xml_error(reply, 404, "NoSuchBucket",
                                    "The specified bucket does not exist.");
            else
                emu_reply_xml_error(reply, 404, "NoSuchKey", "The specified key does not exist.");
        } else if (bucket_missing) {
            emu_reply_json_error(reply, 404, "notFound", "The specified bucket does not exist.");
        } else if (req->bucket != NULL && req->object != NULL) {
            emu_reply_json_error(reply, 404, "notFound", "No such object: %s/%s", req->bucket,
                                 what);
        } else {
            emu_reply_json_error(reply, 404, "notFound", "Not Found: %s", what);
        }
        return;
    }
    case -EEXIST:
        if (req->xml)
            emu_reply_xml_error(reply, 409, "BucketAlreadyOwnedByYou",
                                "Your previous request to create the named bucket succeeded "
                                "and you already own it.");
        else
            emu_reply_json_error(reply, 409, "conflict",
                                 "Your previous request to create the named bucket succeeded "
                                 "and you already own it.");
        return;
    case -EALREADY:
        emu_reply_empty(reply, 304);
        return;
    case -EBADMSG:
        if (req->xml)
            emu_reply_xml_error(reply, 400, "BadDigest",
                                "The checksum you specified did not match what we received.");
        else
            emu_reply_json_error(reply, 400, "invalid",
                                 "Provided checksum does not match the data received.");
        return;
    case -EINVAL:
        emu_reply_status_error(req, reply, 400, NULL);
        return;
    case -EPERM:
        if (req->xml)
            emu_reply_xml_error(reply, 403, "AccessDenied",
                                "Object '%s/%s' is under active hold and cannot be deleted or "
                                "overwritten until the hold is removed.",
                                req->bucket != NULL ? req->bucket : "", what);
        else
            emu_reply_json_error(reply, 403, "forbidden",
                                 "Object '%s/%s' is under active hold and cannot be deleted, "
                                 "overwritten or archived until the hold is removed.",
                                 req->bucket != NULL ? req->bucket : "", what);
        return;
    case -EPROTO:
        emu_reply_status_error(req, reply, 412, NULL);
        return;
    case -ERANGE:
        emu_reply_status_error(req, reply, 416, NULL);
        return;
    case -EFBIG:
        emu_reply_status_error(req, reply, 413, NULL);
        return;
    case -ENOMEM:
        emu_reply_status_error(req, reply, 503, NULL);
        return;
    default:
        emu_reply_status_error(req, reply, 500, NULL);
        return;
    }
}

/* ------------------------------------------------------------------ request lifecycle */

static void request_free(struct emu_request *req)
{
    if (req == NULL)
        return;
    g_free(req->uri);
    g_free(req->path);
    if (req->query != NULL)
        g_ptr_array_unref(req->query);
    g_free(req->base_url);
    g_free(req->bucket);
    g_free(req->object);
    g_free(req->dest_bucket);
    g_free(req->dest_object);
    request_body_free(req);
    g_free(req);
}

/* Called by libmicrohttpd with the request-target exactly as received, before any unescaping:
 * the only place the raw path is available (object names contain %2F). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection)
{
    struct emu_server *server = cls;
    struct emu_request *req = g_new0(struct emu_request, 1);
    req->server = server;
    req->store = server->store;
    req->uploads = server->uploads;
    req->connection = connection;
    req->uri = g_strdup(uri != NULL ? uri : "/");
    req->content_length = -1;
    req->start_us = g_get_monotonic_time();
    return req;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                         enum MHD_RequestTerminationCode code)
{
    request_free(*req_cls);
    *req_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct emu_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        emu_stats_connection_opened(server->stats);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        emu_stats_connection_closed(server->stats);
}

/* Splits the request-target into the raw path and decoded query pairs. Returns false when the
 * query is not valid percent-encoding. */
static bool parse_target(struct emu_request *req)
{
    const char *target = req->uri;
    /* An absolute-form target (http://host/path, https://...) is reduced to its path. */
    size_t scheme_len = g_ascii_strncasecmp(target, "http://", 7) == 0    ? 7
                        : g_ascii_strncasecmp(target, "https://", 8) == 0 ? 8
                                                                          : 0;
    if (scheme_len > 0) {
        const char *slash = strchr(target + scheme_len, '/');
        target = slash != NULL ? slash : "/";
    }
    const char *question = strchr(target, '?');
    const char *fragment = strchr(target, '#');
    size_t path_len = question != NULL ? (size_t)(question - target) : strlen(target);
    if (fragment != NULL && (size_t)(fragment - target) < path_len)
        path_len = (size_t)(fragment - target);
    req->path = g_strndup(target, path_len);
    req->query = g_ptr_array_new_with_free_func(g_free);
    if (question == NULL)
        return true;
    const char *query = question + 1;
    size_t query_len = strlen(query);
    const char *hash = memchr(query, '#', query_len);
    if (hash != NULL)
        query_len = (size_t)(hash - query);
    const char *p = query, *end = query + query_len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp != NULL ? amp : end;
        if (stop > p) {
            const char *eq = memchr(p, '=', (size_t)(stop - p));
            const char *key_end = eq != NULL ? eq : stop;
            char *key = emu_percent_decode(p, (size_t)(key_end - p), true);
            char *value = eq != NULL ? emu_percent_decode(eq + 1, (size_t)(stop - eq - 1), true)
                                     : g_strdup("");
            if (key == NULL || value == NULL) {
                g_free(key);
                g_free(value);
                return false;
            }
            g_ptr_array_add(req->query, key);
            g_ptr_array_add(req->query, value);
        }
        p = stop + 1;
    }
    return true;
}

static bool has_prefix_segment(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(path, prefix, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static bool is_json_api_path(const char *path)
{
    return has_prefix_segment(path, "/storage/v1") ||
           has_prefix_segment(path, "/upload/storage/v1") ||
           has_prefix_segment(path, "/resumable/upload/storage/v1") ||
           has_prefix_segment(path, "/download/storage/v1") ||
           has_prefix_segment(path, "/batch/storage/v1");
}

static void early_error(struct emu_request *req, unsigned status, const char *reason,
                        const char *message)
{
    if (req->early_status != 0)
        return;
    req->early_status = status;
    req->early_reason = reason;
    req->early_message = message;
    req->discard_body = true;
}

static bool all_lower_hex(const char *text)
{
    for (; *text != '\0'; text++) {
        if (!g_ascii_isdigit(*text) && !(*text >= 'a' && *text <= 'f'))
            return false;
    }
    return true;
}

/* A V4 signed URL (X-Goog-Signature in the query). Given keys (--signing-key, --hmac-key) the
 * signature is verified (signed_url.c); without them it cannot be, and what no key could have
 * produced is refused: a signature that is
 * not lowercase hex of an HMAC-SHA256 (32 bytes) or RSA (128..512 bytes) signature, missing
 * X-Goog-* parameters, an unknown algorithm, and an expired URL (by the store's clock).
 * Returns NULL when acceptable, else the message; *xml_code and *status say how to refuse. */
static const char *signed_url_problem(struct emu_request *req, unsigned *status,
                                      const char **xml_code)
{
    const char *signature = emu_query(req, "X-Goog-Signature");
    if (signature == NULL)
        return NULL;
    *status = 403;
    *xml_code = "SignatureDoesNotMatch";
    size_t len = strlen(signature);
    bool length_ok = len == 64 || (len >= 256 && len <= 1024 && len % 2 == 0);
    if (!length_ok || !all_lower_hex(signature))
        return "The request signature we calculated does not match the signature you "
               "provided. Check your Google secret key and signing method.";
    const char *algorithm = emu_query(req, "X-Goog-Algorithm");
    const char *credential = emu_query(req, "X-Goog-Credential");
    const char *date = emu_query(req, "X-Goog-Date");
    const char *expires = emu_query(req, "X-Goog-Expires");
    const char *signed_headers = emu_query(req, "X-Goog-SignedHeaders");
    *status = 400;
    *xml_code = "AuthorizationQueryParametersError";
    if (algorithm == NULL || credential == NULL || date == NULL || expires == NULL ||
        signed_headers == NULL)
        return "Query-string authentication version 4 requires the X-Goog-Algorithm, "
               "X-Goog-Credential, X-Goog-Signature, X-Goog-Date, X-Goog-SignedHeaders and "
               "X-Goog-Expires parameters.";
    if (strcmp(algorithm, "GOOG4-RSA-SHA256") != 0 && strcmp(algorithm, "GOOG4-HMAC-SHA256") != 0)
        return "The X-Goog-Algorithm parameter is not supported.";
    if ((strcmp(algorithm, "GOOG4-HMAC-SHA256") == 0) != (len == 64)) {
        *status = 403;
        *xml_code = "SignatureDoesNotMatch";
        return "The request signature does not match the signing algorithm.";
    }
    if (req->server->signing_keys != NULL) {
        const char *problem = emu_signed_url_verify(req->server->signing_keys, req, algorithm,
                                                    credential, date, signature);
        if (problem != NULL) {
            *status = 403;
            *xml_code = "SignatureDoesNotMatch";
            return problem;
        }
    }
    int year, month, day, hour, minute, second, used = 0;
    int64_t expires_s;
    if (strlen(date) != 16 ||
        sscanf(date, "%4d%2d%2dT%2d%2d%2dZ%n", &year, &month, &day, &hour, &minute, &second,
               &used) != 6 ||
        used != 16 || emu_parse_int64(expires, &expires_s) < 0 || expires_s < 1 ||
        expires_s > 604800)
        return "Invalid X-Goog-Date or X-Goog-Expires (at most 604800 seconds).";
    GDateTime *signed_at = g_date_time_new_utc(year, month, day, hour, minute, second);
    if (signed_at == NULL)
        return "Invalid X-Goog-Date.";
    int64_t signed_s = g_date_time_to_unix(signed_at);
    g_date_time_unref(signed_at);
    int64_t now_s = emu_store_now_us(req->store) / G_USEC_PER_SEC;
    if (now_s > signed_s + expires_s) {
        *xml_code = "ExpiredToken";
        return "Invalid argument: the signed URL has expired.";
    }
    return NULL;
}

/* Everything decided once the headers are in: routing, counting, admission, faults. */
/* What the rate model counts an operation as: reads of objects, writes that create or change
 * one object name, and other object writes (deletes). Listings and bucket calls are not
 * limited by it. */
static enum emu_rate_class rate_class(enum emu_op op)
{
    switch (op) {
    case EMU_OP_OBJECTS_GET:
    case EMU_OP_OBJECTS_DOWNLOAD:
    case EMU_OP_XML_GET:
    case EMU_OP_XML_HEAD:
        return EMU_RATE_READ;
    case EMU_OP_OBJECTS_INSERT:
    case EMU_OP_OBJECTS_COMPOSE:
    case EMU_OP_OBJECTS_COPY:
    case EMU_OP_OBJECTS_REWRITE:
    case EMU_OP_OBJECTS_PATCH:
    case EMU_OP_OBJECTS_UPDATE:
    case EMU_OP_OBJECTS_RESTORE:
    case EMU_OP_XML_PUT:
    case EMU_OP_XML_MPU_COMPLETE:
    case EMU_OP_XML_RESUMABLE_INITIATE:
        return EMU_RATE_NAME_WRITE;
    case EMU_OP_OBJECTS_DELETE:
    case EMU_OP_XML_DELETE:
        return EMU_RATE_WRITE;
    default:
        return EMU_RATE_NONE;
    }
}

static void begin_request(struct emu_request *req, const char *method)
{
    struct emu_server *server = req->server;
    req->method = method;
    req->head = strcmp(method, "HEAD") == 0;
    const char *host = emu_header(req, "Host");
    if (host != NULL && host[0] != '\0' && strlen(host) < 256 && strpbrk(host, " /\"<>\\") == NULL)
        req->base_url = g_strdup_printf("%s://%s", server->scheme, host);
    else
        req->base_url = g_strdup(server->url);
    const char *length = emu_header(req, "Content-Length");
    int64_t content_length;
    if (length != NULL && emu_parse_int64(length, &content_length) == 0 && content_length >= 0)
        req->content_length = content_length;

    if (!parse_target(req)) {
        req->xml = !is_json_api_path(req->path);
        early_error(req, 400, "invalid", "The request URL is not valid percent-encoding.");
        return;
    }
    if (has_prefix_segment(req->path, "/_emulator")) {
        req->body_limit = EMU_CONTROL_BODY_MAX;
        return; /* control: never counted, delayed or faulted */
    }

    unsigned route_status;
    if (is_json_api_path(req->path)) {
        route_status = api_json_route(req);
    } else {
        req->xml = true;
        route_status = api_xml_route(req);
    }
    emu_stats_count_request(server->stats, req->op);
    if (route_status != 0) {
        const char *message = req->early_message;
        req->early_message = NULL;
        early_error(req, route_status, NULL, message);
        return;
    }

    unsigned signed_status = 0;
    const char *xml_code = NULL;
    const char *signed_problem = signed_url_problem(req, &signed_status, &xml_code);
    if (signed_problem != NULL) {
        req->early_xml_code = xml_code;
        early_error(req, signed_status, signed_status == 403 ? "forbidden" : "invalid",
                    signed_problem);
        return;
    }
    bool signed_url = emu_query(req, "X-Goog-Signature") != NULL;
    if (server->auth_header != NULL && !signed_url) {
        const char *auth = emu_header(req, "Authorization");
        if (auth == NULL || strcmp(auth, server->auth_header) != 0) {
            early_error(req, 401, "required", "Anonymous caller does not have access.");
            return;
        }
    }
    bool denied, limited = false, unbilled = false;
    enum emu_rate_verdict rate_verdict = EMU_RATE_OK;
    const char *name = req->object != NULL ? req->object : emu_query(req, "name");
    unsigned retry_after = 1;
    const char *user_project =
        MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "userProject");
    /* Upload sessions were billed when they were opened: their URI needs no userProject. */
    bool session =
        MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "upload_id") != NULL;
    g_mutex_lock(&server->config_lock);
    if (server->requester_pays != NULL && !session)
        unbilled = user_project == NULL || strcmp(user_project, server->requester_pays) != 0;
    denied = server->deny[req->op];
    if (!denied && !emu_token_bucket_take(&server->qps, g_get_monotonic_time())) {
        limited = true;
        retry_after = emu_token_bucket_retry_after(&server->qps);
    }
    if (!denied && !limited && server->rate != NULL)
        rate_verdict = emu_rate_decide(server->rate, req->bucket, name, rate_class(req->op),
                                       g_get_monotonic_time(), &retry_after);
    g_mutex_unlock(&server->config_lock);
    if (unbilled) {
        emu_stats_count_unbilled(server->stats);
        early_error(req, 400, "required",
                    "Bucket is a requester pays bucket but no user project provided.");
        return;
    }
    if (denied) {
        early_error(req, 403, "forbidden", "The caller does not have permission.");
        return;
    }
    if (limited) {
        req->retry_after = retry_after;
        early_error(req, 429, "rateLimitExceeded",
                    "The project exceeded the rate limit for requests.");
        return;
    }
    if (rate_verdict != EMU_RATE_OK) {
        req->retry_after = retry_after;
        early_error(req, 429, "rateLimitExceeded",
                    rate_verdict == EMU_RATE_REFUSED_OBJECT
                        ? "The object exceeded the rate limit for object mutation operations "
                          "(create, update, and delete). Please reduce your request rate."
                        : "The bucket exceeded the rate limit for object operations. Please "
                          "reduce your request rate.");
        return;
    }
    /* What a per_object fault rule counts: the object the URL names (in its path, or in the
     * name parameter of a media or resumable upload), else the request-target, which a client's
     * retry repeats (a listing page, a resumable session; all multipart uploads to a bucket,
     * whose names are in their bodies, share one). */
    char *fault_key = req->bucket != NULL && name != NULL
                          ? g_strconcat(req->bucket, "/", name, NULL)
                          : g_strdup(req->uri);
    bool faulted = emu_faults_decide(server->faults, emu_op_name(req->op), fault_key, &req->fault);
    g_free(fault_key);
    if (faulted) {
        emu_stats_count_fault(server->stats);
        if (req->fault.kind == EMU_FAULT_503) {
            early_error(req, 503, "backendError", "Backend Error (injected fault).");
        } else if (req->fault.kind == EMU_FAULT_429) {
            req->retry_after = req->fault.retry_after;
            early_error(req, 429, "rateLimitExceeded",
                        "The rate of change requests is too high (injected fault).");
        } else if (req->fault.kind == EMU_FAULT_RESET_BEFORE) {
            req->discard_body = true;
        }
    }
    if (req->content_length > 0 && (uint64_t)req->content_length > req->body_limit &&
        !req->discard_body)
        early_error(req, 413, "uploadTooLarge", "The request body is too large.");
}

static void absorb_body(struct emu_request *req, const char *data, size_t size)
{
    req->body_received += size;
    if (req->op != EMU_OP_NONE)
        emu_stats_add_bytes_in(req->server->stats, size);
    if (req->discard_body || req->body_too_large)
        return;
    if (req->body_received > req->body_limit) {
        req->body_too_large = true;
        request_body_free(req);
        return;
    }
    struct emu_request_body *body = req->body;
    if (body == NULL) {
        body = g_new0(struct emu_request_body, 1);
        req->body = body;
    }
    if (body->len + size > body->cap) {
        /* Preallocate what Content-Length announces, but no more than 64 MiB on the word of
         * the client; beyond that grow by doubling (glibc moves large blocks with mremap). */
        size_t want = body->cap == 0 ? 64 * 1024 : body->cap * 2;
        if (body->cap == 0 && req->content_length > 0)
            want = (size_t)MIN((uint64_t)req->content_length, (uint64_t)64 << 20);
        if (want < body->len + size)
            want = body->len + size;
        if (want > req->body_limit && body->len + size <= req->body_limit)
            want = (size_t)req->body_limit;
        uint8_t *grown = g_try_realloc(body->data, want);
        if (grown == NULL) {
            req->body_no_memory = true;
            req->body_too_large = true;
            request_body_free(req);
            return;
        }
        body->data = grown;
        body->cap = want;
    }
    memcpy(body->data + body->len, data, size);
    body->len += size;
}

/* ------------------------------------------------------------------ control API */

static void control_config_json(struct emu_server *server, GString *out)
{
    g_mutex_lock(&server->config_lock);
    g_string_append_printf(out,
                           "{\"latency_ms\":%u,\"jitter_ms\":%u,\"bandwidth_mibps\":%g,"
                           "\"qps_limit\":%g,\"deny\":[",
                           server->latency_ms, server->jitter_ms, server->bandwidth_mibps,
                           server->qps_limit);
    bool first = true;
    for (int op = 1; op < EMU_OP_COUNT; op++) {
        if (!server->deny[op])
            continue;
        g_string_append(out, first ? "" : ",");
        json_append_string(out, emu_op_name((enum emu_op)op));
        first = false;
    }
    g_mutex_unlock(&server->config_lock);
    g_string_append(out, "],\"faults\":[");
    GArray *rules = emu_faults_get_rules(server->faults);
    for (guint i = 0; i < rules->len; i++) {
        const struct emu_fault_rule *rule = &g_array_index(rules, struct emu_fault_rule, i);
        g_string_append_printf(out, "%s{\"kind\":", i == 0 ? "" : ",");
        json_append_string(out, emu_fault_kind_name(rule->kind));
        g_string_append_printf(out, ",\"rate\":%g,\"op\":", rule->rate);
        json_append_string(out, rule->op);
        g_string_append_printf(out,
                               ",\"count\":%" PRId64 ",\"every\":%" PRId64
                               ",\"per_object\":%" PRId64 ",\"seconds\":%g,\"retry_after\":%u}",
                               rule->count, rule->every, rule->per_object, rule->seconds,
                               rule->retry_after);
    }
    g_array_free(rules, TRUE);
    g_string_append_printf(out, "],\"operation_polls\":%u}",
                           emu_store_operation_polls(server->store));
}

static bool json_number(yajl_val value, double min, double max, double *out)
{
    if (value == NULL || !YAJL_IS_NUMBER(value))
        return false;
    double number = YAJL_GET_DOUBLE(value);
    if (YAJL_IS_INTEGER(value))
        number = (double)YAJL_GET_INTEGER(value);
    if (!(number >= min && number <= max))
        return false;
    *out = number;
    return true;
}

static const char *parse_fault_object(yajl_val item, struct emu_fault_rule *rule)
{
    if (!YAJL_IS_OBJECT(item))
        return "Each fault must be an object.";
    yajl_val kind = yajl_tree_get(item, (const char *[]){"kind", NULL}, yajl_t_any);
    enum emu_fault_kind fault_kind;
    char kind_text[32] = "";
    if (kind != NULL && YAJL_IS_STRING(kind))
        g_strlcpy(kind_text, YAJL_GET_STRING(kind), sizeof(kind_text));
    else if (kind != NULL && YAJL_IS_INTEGER(kind))
        snprintf(kind_text, sizeof(kind_text), "%lld", YAJL_GET_INTEGER(kind));
    if (emu_fault_kind_from_name(kind_text, &fault_kind) < 0)
        return "A fault's kind must be one of 503, 429, reset-before, reset-mid, truncate, stall.";
    double number = 1.0;
    yajl_val rate = yajl_tree_get(item, (const char *[]){"rate", NULL}, yajl_t_any);
    if (rate != NULL && !json_number(rate, 0, 1, &number))
        return "A fault's rate must be a number in [0, 1].";
    emu_fault_rule_init(rule, fault_kind, number);
    yajl_val op = yajl_tree_get(item, (const char *[]){"op", NULL}, yajl_t_any);
    if (op != NULL && !YAJL_IS_NULL(op)) {
        const char *name = YAJL_IS_STRING(op) ? YAJL_GET_STRING(op) : NULL;
        if (name == NULL || strlen(name) >= sizeof(rule->op) ||
            emu_op_from_name(name) == EMU_OP_NONE)
            return "A fault's op must be an operation name (see GET /_emulator/stats).";
        g_strlcpy(rule->op, name, sizeof(rule->op));
    }
    yajl_val count = yajl_tree_get(item, (const char *[]){"count", NULL}, yajl_t_any);
    if (count != NULL && !YAJL_IS_NULL(count)) {
        if (!json_number(count, -1, 1e15, &number))
            return "A fault's count must be a non-negative integer.";
        rule->count = (int64_t)number;
    }
    /* 0 (as GET renders an unscheduled rule) means none; a schedule leaves no room for a rate
     * other than the default 1, so a rule read back from GET is accepted again. */
    yajl_val every = yajl_tree_get(item, (const char *[]){"every", NULL}, yajl_t_any);
    if (every != NULL && !YAJL_IS_NULL(every)) {
        if (!YAJL_IS_INTEGER(every) || !json_number(every, 0, 1e15, &number))
            return "A fault's every must be a non-negative integer.";
        rule->every = (int64_t)number;
        if (rule->every > 0 && rule->rate < 1.0)
            return "A fault takes a rate or an every, not both.";
    }
    yajl_val per_object = yajl_tree_get(item, (const char *[]){"per_object", NULL}, yajl_t_any);
    if (per_object != NULL && !YAJL_IS_NULL(per_object)) {
        if (!YAJL_IS_INTEGER(per_object) || !json_number(per_object, 0, 1e15, &number))
            return "A fault's per_object must be a non-negative integer.";
        rule->per_object = (int64_t)number;
    }
    yajl_val seconds = yajl_tree_get(item, (const char *[]){"seconds", NULL}, yajl_t_any);
    if (seconds != NULL && !json_number(seconds, 0, 86400, &rule->seconds))
        return "A fault's seconds must be a number in [0, 86400].";
    yajl_val retry = yajl_tree_get(item, (const char *[]){"retry_after", NULL}, yajl_t_any);
    if (retry != NULL) {
        if (!json_number(retry, 0, 86400, &number))
            return "A fault's retry_after must be a number in [0, 86400].";
        rule->retry_after = (unsigned)number;
    }
    return NULL;
}

/* A control request's JSON body as a tree (free with yajl_tree_free), or NULL when it is not
 * JSON or nested too deeply. */
static yajl_val parse_control_body(GBytes *body)
{
    gsize len = 0;
    const char *data = g_bytes_get_data(body, &len);
    char *text = g_strndup(data != NULL ? data : "", len);
    char error[256] = "";
    yajl_val root = json_depth_within(text, len, JSON_DEPTH_MAX)
                        ? yajl_tree_parse(text, error, sizeof(error))
                        : NULL;
    g_free(text);
    return root;
}

/* Validates the whole document first, then applies it, so a bad request changes nothing. */
static void control_config_post(struct emu_server *server, GBytes *body, struct emu_reply *reply)
{
    yajl_val root = parse_control_body(body);
    const char *problem = NULL;
    double latency = -1, jitter = -1, bandwidth = -1, qps = -1, polls = -1;
    GArray *rules = NULL;
    bool deny[EMU_OP_COUNT] = {false};
    bool has_deny = false;
    bool has_requester_pays = false;
    const char *requester_pays = NULL;
    if (root == NULL || !YAJL_IS_OBJECT(root)) {
        problem = "The config must be a JSON object.";
        goto out;
    }
    for (size_t i = 0; i < root->u.object.len && problem == NULL; i++) {
        const char *key = root->u.object.keys[i];
        yajl_val value = root->u.object.values[i];
        if (strcmp(key, "latency_ms") == 0) {
            if (!json_number(value, 0, 3600000, &latency))
                problem = "latency_ms must be a number of milliseconds.";
        } else if (strcmp(key, "jitter_ms") == 0) {
            if (!json_number(value, 0, 3600000, &jitter))
                problem = "jitter_ms must be a number of milliseconds.";
        } else if (strcmp(key, "bandwidth_mibps") == 0) {
            if (!json_number(value, 0, 1e9, &bandwidth))
                problem = "bandwidth_mibps must be a non-negative number.";
        } else if (strcmp(key, "operation_polls") == 0) {
            if (!json_number(value, 0, 1000, &polls) || polls != (double)(unsigned)polls)
                problem = "operation_polls must be a whole number from 0 to 1000.";
        } else if (strcmp(key, "qps_limit") == 0) {
            if (!json_number(value, 0, 1e9, &qps))
                problem = "qps_limit must be a non-negative number.";
        } else if (strcmp(key, "faults") == 0) {
            if (!YAJL_IS_ARRAY(value)) {
                problem = "faults must be an array.";
                break;
            }
            rules = g_array_new(FALSE, FALSE, sizeof(struct emu_fault_rule));
            for (size_t j = 0; j < value->u.array.len && problem == NULL; j++) {
                struct emu_fault_rule rule;
                problem = parse_fault_object(value->u.array.values[j], &rule);
                if (problem == NULL)
                    g_array_append_val(rules, rule);
            }
        } else if (strcmp(key, "requester_pays_project") == 0) {
            /* A project name turns Requester Pays on for every bucket, null turns it off. */
            if (!YAJL_IS_NULL(value) && !(YAJL_IS_STRING(value) && *YAJL_GET_STRING(value))) {
                problem = "requester_pays_project must be a project name or null.";
                break;
            }
            has_requester_pays = true;
            requester_pays = YAJL_IS_STRING(value) ? YAJL_GET_STRING(value) : NULL;
        } else if (strcmp(key, "deny") == 0) {
            if (!YAJL_IS_ARRAY(value)) {
                problem = "deny must be an array of operation names.";
                break;
            }
            has_deny = true;
            for (size_t j = 0; j < value->u.array.len; j++) {
                yajl_val name = value->u.array.values[j];
                enum emu_op op =
                    YAJL_IS_STRING(name) ? emu_op_from_name(YAJL_GET_STRING(name)) : EMU_OP_NONE;
                if (op == EMU_OP_NONE) {
                    problem = "deny holds an unknown operation name.";
                    break;
                }
                deny[op] = true;
            }
        }
    }
    if (problem != NULL)
        goto out;
    g_mutex_lock(&server->config_lock);
    if (latency >= 0)
        server->latency_ms = (unsigned)latency;
    if (jitter >= 0)
        server->jitter_ms = (unsigned)jitter;
    if (bandwidth >= 0)
        server->bandwidth_mibps = bandwidth;
    if (qps >= 0) {
        server->qps_limit = qps;
        emu_token_bucket_init(&server->qps, qps, g_get_monotonic_time());
    }
    if (has_deny)
        memcpy(server->deny, deny, sizeof(deny));
    if (polls >= 0)
        emu_store_set_operation_polls(server->store, (unsigned)polls);
    if (has_requester_pays) {
        g_free(server->requester_pays);
        server->requester_pays = g_strdup(requester_pays);
    }
    g_mutex_unlock(&server->config_lock);
    if (rules != NULL)
        emu_faults_set_rules(server->faults, (const struct emu_fault_rule *)rules->data,
                             rules->len);
out:
    if (rules != NULL)
        g_array_free(rules, TRUE);
    if (root != NULL)
        yajl_tree_free(root);
    if (problem != NULL) {
        emu_reply_json_error(reply, 400, "invalid", "%s", problem);
        return;
    }
    GString *json = g_string_new(NULL);
    control_config_json(server, json);
    emu_reply_json(reply, 200, json);
}

static void control_clock_json(struct emu_server *server, struct emu_reply *reply)
{
    int64_t now = emu_store_now_us(server->store);
    /* The offset as stored, not now minus a second reading of the real clock (that came out
     * some microseconds short, and a test comparing offsets failed now and then). */
    int64_t offset = emu_store_clock_offset_us(server->store);
    GString *json = g_string_new(NULL);
    g_string_append_printf(json, "{\"now_us\":%" PRId64 ",\"offset_s\":%.6f}", now,
                           (double)offset / G_USEC_PER_SEC);
    emu_reply_json(reply, 200, json);
}

/* POST /_emulator/clock {"advance_s": N}: the store's clock moves N seconds ahead (never back),
 * so soft delete retention, retention periods and storage time pass without waiting. */
static void control_clock_post(struct emu_server *server, GBytes *body, struct emu_reply *reply)
{
    yajl_val root = parse_control_body(body);
    const char *path[] = {"advance_s", NULL};
    yajl_val advance =
        root != NULL && YAJL_IS_OBJECT(root) ? yajl_tree_get(root, path, yajl_t_number) : NULL;
    double seconds = advance != NULL ? YAJL_GET_DOUBLE(advance) : -1;
    if (root != NULL)
        yajl_tree_free(root);
    /* At most ten years at a time: enough for Archive's 365 days, far from int64 overflow. */
    if (!(seconds >= 0 && seconds <= 10.0 * 366 * 86400)) {
        emu_reply_json_error(reply, 400, "invalid",
                             "The body must be {\"advance_s\": N} with 0 <= N <= 10 years.");
        return;
    }
    emu_store_advance_clock(server->store, (int64_t)(seconds * G_USEC_PER_SEC));
    control_clock_json(server, reply);
}

/* Adds the rate model's counters to the stats object (new fields; the old ones keep their
 * meaning): json ends with the object's closing brace. */
static void append_rate_stats(struct emu_server *server, GString *json)
{
    struct emu_rate_counters counters;
    g_mutex_lock(&server->config_lock);
    emu_rate_counters(server->rate, &counters);
    bool on = server->rate != NULL;
    g_mutex_unlock(&server->config_lock);
    if (json->len > 0 && json->str[json->len - 1] == '}')
        g_string_truncate(json, json->len - 1);
    g_string_append_printf(
        json,
        ",\"rate_model\":%s,\"rate_limited_reads\":%" PRIu64 ",\"rate_limited_writes\":%" PRIu64
        ",\"rate_limited_object_writes\":%" PRIu64 ",\"rate_limited\":%" PRIu64
        ",\"rate_scale_ups\":%" PRIu64 "}",
        on ? "true" : "false", counters.refused_reads, counters.refused_writes,
        counters.refused_object_writes,
        counters.refused_reads + counters.refused_writes + counters.refused_object_writes,
        counters.scale_ups);
}

static void handle_control(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_server *server = req->server;
    const char *what = req->path + strlen("/_emulator");
    bool get = strcmp(req->method, "GET") == 0 || req->head;
    bool post = strcmp(req->method, "POST") == 0;
    if (strcmp(what, "/stats") == 0 && get) {
        GString *json = g_string_new(NULL);
        emu_stats_to_json(server->stats, json);
        append_rate_stats(server, json);
        emu_reply_json(reply, 200, json);
    } else if (strcmp(what, "/reset") == 0 && post) {
        if (!emu_query_bool(req, "stats_only")) {
            emu_uploads_reset(server->uploads);
            emu_store_reset(server->store);
        }
        emu_stats_reset(server->stats);
        emu_reply_json(reply, 200, g_string_new("{\"reset\":true}"));
    } else if (strcmp(what, "/bill") == 0 && get) {
        GString *json = g_string_new(NULL);
        emu_bill_to_json(server->store, server->stats, json);
        emu_reply_json(reply, 200, json);
    } else if (strcmp(what, "/clock") == 0 && get) {
        control_clock_json(server, reply);
    } else if (strcmp(what, "/clock") == 0 && post) {
        GBytes *body = emu_request_take_body(req);
        control_clock_post(server, body, reply);
        g_bytes_unref(body);
    } else if (strcmp(what, "/config") == 0 && get) {
        GString *json = g_string_new(NULL);
        control_config_json(server, json);
        emu_reply_json(reply, 200, json);
    } else if (strcmp(what, "/config") == 0 && post) {
        GBytes *body = emu_request_take_body(req);
        control_config_post(server, body, reply);
        g_bytes_unref(body);
    } else {
        emu_reply_json_error(reply, 404, "notFound", "No such control endpoint: %s", req->path);
    }
}

/* ------------------------------------------------------------------ sending */

struct body_source {
    struct emu_server *server;
    struct MHD_Connection *connection;
    GBytes *bytes;             /* either this ... */
    struct emu_object *object; /* ... or this */
    uint64_t offset;
    uint64_t length;
    double bytes_per_us; /* 0 = unlimited */
    int64_t start_us;
    enum emu_fault_kind fault;
    uint64_t cut; /* where reset-mid, truncate and stall strike */
    double stall_seconds;
    bool stalled;
};

static void body_source_free(void *cls)
{
    struct body_source *src = cls;
    if (src->bytes != NULL)
        g_bytes_unref(src->bytes);
    emu_object_unref(src->object);
    g_free(src);
}

/* Makes the kernel answer with RST instead of FIN when the connection closes. */
static void connection_set_abortive_close(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL)
        return;
    struct linger linger = {.l_onoff = 1, .l_linger = 0};
    setsockopt(info->connect_fd, SOL_SOCKET, SO_LINGER, &linger, sizeof(linger));
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct body_source *src = cls;
    if (pos >= src->length && !(src->fault != EMU_FAULT_NONE && src->length == 0))
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (src->start_us == 0)
        src->start_us = g_get_monotonic_time();
    if (pos >= src->cut) {
        if (src->fault == EMU_FAULT_RESET_MID) {
            connection_set_abortive_close(src->connection);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (src->fault == EMU_FAULT_TRUNCATE)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (src->fault == EMU_FAULT_STALL && !src->stalled) {
            src->stalled = true;
            g_usleep((gulong)(src->stall_seconds * 1e6));
            src->start_us = 0; /* pacing restarts after the stall */
        }
        if (pos >= src->length)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = max;
    if (n > src->length - pos)
        n = (size_t)(src->length - pos);
    if (src->fault != EMU_FAULT_NONE && pos < src->cut && n > src->cut - pos)
        n = (size_t)(src->cut - pos);
    if (src->bytes_per_us > 0) {
        /* Pace in slices of about 50 ms so the rate is smooth. */
        double slice = src->bytes_per_us * 50000.0;
        if (slice < 16384)
            slice = 16384;
        if ((double)n > slice)
            n = (size_t)slice;
        if (src->start_us == 0)
            src->start_us = g_get_monotonic_time();
    }
    if (src->bytes != NULL) {
        gsize len = 0;
        const uint8_t *data = g_bytes_get_data(src->bytes, &len);
        memcpy(buf, data + src->offset + pos, n);
    } else {
        n = emu_object_read(src->object, src->offset + pos, buf, n);
        if (n == 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (src->bytes_per_us > 0) {
        int64_t due = src->start_us + (int64_t)((double)(pos + n) / src->bytes_per_us);
        int64_t now = g_get_monotonic_time();
        if (due > now)
            g_usleep((gulong)(due - now));
    }
    emu_stats_add_bytes_out(src->server->stats, n);
    return (ssize_t)n;
}

static struct MHD_Response *build_response(struct emu_request *req, struct emu_reply *reply,
                                           double bandwidth_mibps)
{
    struct emu_server *server = req->server;
    bool has_body = reply->body != NULL || reply->object != NULL;
    bool shaped = bandwidth_mibps > 0 || req->fault.kind == EMU_FAULT_RESET_MID ||
                  req->fault.kind == EMU_FAULT_TRUNCATE || req->fault.kind == EMU_FAULT_STALL;
    uint64_t length = reply->object != NULL ? reply->length : 0;
    if (reply->body != NULL)
        length = g_bytes_get_size(reply->body);

    if (!has_body)
        return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!shaped || req->head) {
        /* Bodies served from a buffer are counted here; streamed ones in read_body. */
        if (!req->head && (reply->body != NULL || length <= EMU_SMALL_BODY) &&
            !has_prefix_segment(req->path, "/_emulator"))
            emu_stats_add_bytes_out(server->stats, length);
        if (reply->body != NULL) {
            gsize size = 0;
            const void *data = g_bytes_get_data(reply->body, &size);
            GBytes *bytes = reply->body;
            reply->body = NULL;
            return MHD_create_response_from_buffer_with_free_callback_cls(
                size, (void *)(data != NULL ? data : ""),
                (MHD_ContentReaderFreeCallback)g_bytes_unref, bytes);
        }
        if (length <= EMU_SMALL_BODY && !req->head) {
            void *buf = g_malloc(length > 0 ? length : 1);
            size_t got = emu_object_read(reply->object, reply->offset, buf, (size_t)length);
            if (got != length) {
                g_free(buf);
                return NULL;
            }
            return MHD_create_response_from_buffer_with_free_callback((size_t)length, buf, g_free);
        }
    }
    struct body_source *src = g_new0(struct body_source, 1);
    src->server = server;
    src->connection = req->connection;
    if (reply->body != NULL) {
        src->bytes = reply->body;
        reply->body = NULL;
    } else {
        src->object = emu_object_ref(reply->object);
        src->offset = reply->offset;
    }
    src->length = length;
    src->bytes_per_us = bandwidth_mibps * 1048576.0 / 1e6;
    src->cut = UINT64_MAX;
    if (req->fault.kind == EMU_FAULT_RESET_MID || req->fault.kind == EMU_FAULT_TRUNCATE ||
        req->fault.kind == EMU_FAULT_STALL) {
        src->fault = req->fault.kind;
        src->cut = length / 2;
        src->stall_seconds = req->fault.seconds;
    }
    struct MHD_Response *response = MHD_create_response_from_callback(
        length, EMU_STREAM_BLOCK, read_body, src, body_source_free);
    if (response == NULL)
        body_source_free(src);
    return response;
}

static void log_request(struct emu_request *req, unsigned status)
{
    if (!req->server->verbose)
        return;
    fprintf(stderr, "gcs-emulator: %s %s -> %u (%s, %.1f ms)\n", req->method, req->uri, status,
            req->op != EMU_OP_NONE ? emu_op_name(req->op) : "-",
            (double)(g_get_monotonic_time() - req->start_us) / 1000.0);
}

static enum MHD_Result finish_request(struct emu_request *req)
{
    struct emu_server *server = req->server;
    bool control = has_prefix_segment(req->path, "/_emulator");
    struct emu_reply reply = {0};
    reply.headers = g_ptr_array_new_with_free_func(g_free);

    if (control && req->early_status == 0) {
        if (req->body_too_large)
            emu_reply_json_error(&reply, 413, "uploadTooLarge", "The request body is too large.");
        else
            handle_control(req, &reply);
    } else if (req->fault.kind == EMU_FAULT_RESET_BEFORE) {
        log_request(req, 0);
        connection_set_abortive_close(req->connection);
        g_ptr_array_unref(reply.headers);
        return MHD_NO;
    } else if (req->early_status != 0) {
        if (req->early_xml_code != NULL && req->xml)
            emu_reply_xml_error(&reply, req->early_status, req->early_xml_code, "%s",
                                req->early_message);
        else if (req->early_reason != NULL && !req->xml)
            emu_reply_json_error(&reply, req->early_status, req->early_reason, "%s",
                                 req->early_message);
        else
            emu_reply_status_error(req, &reply, req->early_status, req->early_message);
        if (req->early_status == 429 || req->early_status == 503)
            emu_reply_headerf(&reply, "Retry-After", "%u",
                              req->retry_after > 0 ? req->retry_after : 1);
        if (req->early_status == 401)
            emu_reply_header(&reply, "WWW-Authenticate", "Bearer realm=\"gcs-emulator\"");
    } else if (req->body_too_large) {
        emu_reply_status_error(req, &reply, req->body_no_memory ? 503 : 413,
                               req->body_no_memory ? "Out of memory for the request body." : NULL);
    } else if (req->handler != NULL) {
        /* XML API: Content-Encoding is the object's metadata (stored as sent), not inflated. */
        unsigned inflate_status = 0;
        const char *why = NULL;
        if (!req->xml && gzip_encoded(req))
            inflate_status = inflate_request_body(req, MIN(req->body_limit, EMU_INFLATE_MAX), &why);
        if (inflate_status == 0)
            req->handler(req, &reply);
        else
            emu_reply_json_error(&reply, inflate_status,
                                 inflate_status == 413   ? "uploadTooLarge"
                                 : inflate_status == 400 ? "badContent"
                                                         : "backendError",
                                 "%s", why);
    } else {
        emu_reply_status_error(req, &reply, 404, NULL);
    }
    if (reply.status == 0)
        reply.status = 500;
    /* reset-mid of a reply without a body (a delete's 204, a part's 200, a 308): there is no
     * half to send, so the operation stays performed and the whole reply is lost. */
    if (!control && req->fault.kind == EMU_FAULT_RESET_MID && reply.body == NULL &&
        reply.object == NULL) {
        log_request(req, 0);
        connection_set_abortive_close(req->connection);
        emu_reply_reset(&reply);
        g_ptr_array_unref(reply.headers);
        return MHD_NO;
    }

    double bandwidth = 0;
    if (!control) {
        g_mutex_lock(&server->config_lock);
        unsigned latency = server->latency_ms, jitter = server->jitter_ms;
        bandwidth = server->bandwidth_mibps;
        g_mutex_unlock(&server->config_lock);
        unsigned delay = latency + emu_faults_jitter_ms(server->faults, jitter);
        /* A stall holds back the headers of in-memory replies (JSON, XML, errors) and
         * pauses streamed object bodies half way (see build_response). */
        if (req->fault.kind == EMU_FAULT_STALL && reply.object == NULL) {
            delay += (unsigned)(req->fault.seconds * 1000);
            req->fault.kind = EMU_FAULT_NONE;
        }
        /* Latency is time to first byte, counted from the arrival of the request. */
        int64_t due = req->start_us + (int64_t)delay * 1000;
        int64_t now = g_get_monotonic_time();
        if (delay > 0 && due > now)
            g_usleep((gulong)(due - now));
    }

    struct MHD_Response *response = build_response(req, &reply, bandwidth);
    enum MHD_Result result = MHD_NO;
    if (response != NULL) {
        for (guint i = 0; i + 1 < reply.headers->len; i += 2)
            MHD_add_response_header(response, g_ptr_array_index(reply.headers, i),
                                    g_ptr_array_index(reply.headers, i + 1));
        result = MHD_queue_response(req->connection, reply.status, response);
        MHD_destroy_response(response);
    }
    log_request(req, reply.status);
    emu_reply_reset(&reply);
    g_ptr_array_unref(reply.headers);
    return result;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct emu_request *req = *req_cls;
    if (req == NULL) {
        /* Without the URI callback's request (should not happen) the raw target is lost. */
        req = on_uri(cls, url, connection);
        *req_cls = req;
    }
    if (!req->started) {
        req->started = true;
        begin_request(req, method);
        /* A declared body over the cap is refused before it is sent (the connection closes
         * after the reply, as the body is never read). */
        if (req->early_status == 413)
            return finish_request(req);
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        absorb_body(req, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    return finish_request(req);
}

/* ------------------------------------------------------------------ start / stop */

/* libmicrohttpd's own messages (mostly clients that went away, and the connections our faults
 * break on purpose) are noise for tests that watch stderr: shown with --verbose only. */
static void on_mhd_log(void *cls, const char *format, va_list args)
{
    struct emu_server *server = cls;
    if (!server->verbose)
        return;
    fputs("gcs-emulator: libmicrohttpd: ", stderr);
    vfprintf(stderr, format, args);
}

static int resolve_address(const char *host, unsigned port, struct sockaddr_storage *out,
                           socklen_t *out_len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof(service), "%u", port);
    if (getaddrinfo(host, service, &hints, &res) != 0 || res == NULL)
        return -EADDRNOTAVAIL;
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *out_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int emu_server_start(struct emu_store *store, const struct emu_server_options *options,
                     struct emu_server **out)
{
    const char *host = options->host != NULL ? options->host : "127.0.0.1";
    struct sockaddr_storage address;
    socklen_t address_len = 0;
    int ret = resolve_address(host, options->port, &address, &address_len);
    if (ret < 0)
        return ret;

    struct emu_server *server = g_new0(struct emu_server, 1);
    server->store = store;
    server->uploads = emu_uploads_new();
    server->stats = emu_stats_new();
    server->faults = emu_faults_new(options->seed);
    server->verbose = options->verbose;
    if (options->auth_token != NULL)
        server->auth_header = g_strdup_printf("Bearer %s", options->auth_token);
    server->signing_keys = options->signing_keys;
    g_mutex_init(&server->config_lock);
    server->latency_ms = options->latency_ms;
    server->jitter_ms = options->jitter_ms;
    server->bandwidth_mibps = options->bandwidth_mibps;
    server->qps_limit = options->qps_limit;
    emu_token_bucket_init(&server->qps, options->qps_limit, g_get_monotonic_time());
    server->rate = emu_rate_model_new(&options->rate);
    if (options->fault_count > 0)
        emu_faults_set_rules(server->faults, options->faults, options->fault_count);
    for (size_t i = 0; i < options->deny_count; i++) {
        enum emu_op op = emu_op_from_name(options->deny[i]);
        if (op == EMU_OP_NONE) {
            ret = -EINVAL;
            goto fail;
        }
        server->deny[op] = true;
    }

    server->scheme = "http";
    /* libmicrohttpd takes the PEM texts by pointer: they live as long as the server. */
    struct MHD_OptionItem tls_options[3] = {{MHD_OPTION_END, 0, NULL}};
    if (options->tls_cert_pem != NULL && options->tls_key_pem != NULL) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            ret = -ENOTSUP;
            goto fail;
        }
        server->scheme = "https";
        server->tls_cert_pem = g_strdup(options->tls_cert_pem);
        server->tls_key_pem = g_strdup(options->tls_key_pem);
        tls_options[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, server->tls_key_pem};
        tls_options[1] =
            (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, server->tls_cert_pem};
        tls_options[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }

    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (address.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (server->tls_cert_pem != NULL)
        flags |= MHD_USE_TLS;
    server->daemon = MHD_start_daemon(
        flags, (uint16_t)options->port, NULL, NULL, on_request, server,
        /* First, so that libmicrohttpd's messages about later options come through it too. */
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, server, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&address, MHD_OPTION_URI_LOG_CALLBACK, on_uri, server,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, server, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, server, MHD_OPTION_CONNECTION_LIMIT, (unsigned)EMU_CONNECTION_LIMIT,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)EMU_CONNECTION_LIMIT,
        /* Also the cap on request headers: larger ones get 431 from libmicrohttpd. */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)600, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1024 * 1024), MHD_OPTION_ARRAY,
        tls_options, MHD_OPTION_END);
    if (server->daemon == NULL) {
        ret = -EADDRINUSE;
        goto fail;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = info != NULL ? info->port : options->port;
    const char *url_host = host;
    if (strcmp(host, "0.0.0.0") == 0)
        url_host = "127.0.0.1";
    else if (strcmp(host, "::") == 0)
        url_host = "::1";
    if (strchr(url_host, ':') != NULL)
        server->url = g_strdup_printf("%s://[%s]:%u", server->scheme, url_host, port);
    else
        server->url = g_strdup_printf("%s://%s:%u", server->scheme, url_host, port);
    *out = server;
    return 0;
fail:
    g_free(server->tls_cert_pem);
    g_free(server->tls_key_pem);
    emu_uploads_free(server->uploads);
    emu_stats_free(server->stats);
    emu_rate_model_free(server->rate);
    emu_faults_free(server->faults);
    g_free(server->auth_header);
    g_mutex_clear(&server->config_lock);
    g_free(server);
    return ret;
}

const char *emu_server_url(const struct emu_server *server)
{
    return server->url;
}

void emu_server_stop(struct emu_server *server)
{
    if (server == NULL)
        return;
    MHD_stop_daemon(server->daemon);
    g_free(server->tls_cert_pem);
    g_free(server->tls_key_pem);
    emu_uploads_free(server->uploads);
    emu_stats_free(server->stats);
    emu_rate_model_free(server->rate);
    emu_faults_free(server->faults);
    g_free(server->auth_header);
    g_free(server->requester_pays);
    g_free(server->url);
    g_mutex_clear(&server->config_lock);
    g_free(server);
}
