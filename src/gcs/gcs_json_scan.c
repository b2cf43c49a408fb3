/* A one-shot JSON scanner that drives yajl's callbacks over a whole document in memory (see
 * gcs-internal.h): the hot path of list pages. It accepts, rejects and decodes what
 * yajl_parse + yajl_complete_parse do with yajl_allow_comments set and UTF-8 validation on
 * (yajl 2.1's rules, quirks included: whitespace includes \v and \f, UTF-8 is checked by its
 * structure only, a lone high surrogate escape reads as '?', a high surrogate escape followed by
 * any \u escape is combined with it, a block comment left open at the end of the text ends the
 * text). The unit tests compare the two on many documents, valid, odd and broken.
 *
 * What makes it cheaper than yajl: no lexer state machine and no token buffer; a string without
 * escapes is handed to the callback straight from the document; containers are tracked in a
 * small explicit stack (no recursion, so nesting depth costs memory, never the C stack). */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "gcs-internal.h"

/* Bytes that end a fast run inside a string: '"', '\\', controls and non-ASCII. */
static const unsigned char string_plain[256] = {
    [0x20 ... 0x21] = 1, /* '"' is 0x22 */
    [0x23 ... 0x5B] = 1, /* '\\' is 0x5C */
    [0x5D ... 0x7F] = 1,
};

struct scanner {
    const unsigned char *p;
    const unsigned char *end;
    const yajl_callbacks *cb;
    void *ctx;
    GString *scratch; /* decoded text of strings holding escapes */
    int status;       /* GCS_JSON_SCAN_* */
};

static bool scan_error(struct scanner *s)
{
    if (s->status == GCS_JSON_SCAN_OK)
        s->status = GCS_JSON_SCAN_ERROR;
    return false;
}

/* A callback's verdict: 0 cancels the scan. */
static bool verdict(struct scanner *s, int keep_going)
{
    if (!keep_going) {
        s->status = GCS_JSON_SCAN_CANCELED;
        return false;
    }
    return true;
}

/* Skips whitespace and comments. false on a '/' that starts no comment. */
static bool skip_space_slow(struct scanner *s);

static inline bool skip_space(struct scanner *s)
{
    /* Compact JSON (what servers send) has none: one test per token. */
    if (s->p<s->end && * s->p> ' ' && *s->p != '/')
        return true;
    return skip_space_slow(s);
}

static bool skip_space_slow(struct scanner *s)
{
    const unsigned char *p = s->p, *end = s->end;
    while (p < end) {
        unsigned char c = *p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f') {
            p++;
            continue;
        }
        if (c != '/')
            break;
        if (p + 1 < end && p[1] == '*') {
            const unsigned char *close = NULL;
            for (const unsigned char *q = p + 2; q + 1 < end; q++) {
                if (q[0] == '*' && q[1] == '/') {
                    close = q;
                    break;
                }
            }
            p = close ? close + 2 : end; /* left open: the text ends there, as with yajl */
        } else if (p + 1 < end && p[1] == '/') {
            const unsigned char *newline = memchr(p + 2, '\n', (size_t)(end - p - 2));
            p = newline ? newline + 1 : end;
        } else {
            s->p = p;
            return scan_error(s);
        }
    }
    s->p = p;
    return true;
}

/* One UTF-8 character by its structure (yajl's check: no overlong or range checks). */
static bool skip_utf8(const unsigned char **pos, const unsigned char *end)
{
    const unsigned char *p = *pos;
    unsigned char lead = *p;
    size_t more = (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xE ? 2 : (lead >> 3) == 0x1E ? 3 : 0;
    if (more == 0 || (size_t)(end - p) <= more)
        return false;
    for (size_t i = 1; i <= more; i++)
        if ((p[i] >> 6) != 0x2)
            return false;
    *pos = p + more + 1;
    return true;
}

/* Four hex digits at p (p + 4 <= end checked by the caller); -1 when not hex. */
static long hex4(const unsigned char *p)
{
    long value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = g_ascii_xdigit_value(p[i]);
        if (digit < 0)
            return -1;
        value = value * 16 + digit;
    }
    return value;
}

/* yajl's Utf32toUtf8: code points up to 0x1FFFFF in up to four bytes, '?' above. */
static void append_code_point(GString *out, unsigned long cp)
{
    char buf[4];
    size_t n;
    if (cp < 0x80) {
        buf[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        buf[0] = (char)(0xC0 | (cp >> 6));
        buf[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12));
        buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else if (cp < 0x200000) {
        buf[0] = (char)(0xF0 | (cp >> 18));
        buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    } else {
        buf[0] = '?';
        n = 1;
    }
    g_string_append_len(out, buf, (gssize)n);
}

/* One escape at p ('\\'), appended to out decoded; p moves past it. */
static bool decode_escape(const unsigned char **pos, const unsigned char *end, GString *out)
{
    const unsigned char *p = *pos;
    if (end - p < 2)
        return false;
    char plain;
    switch (p[1]) {
    case '"':
        plain = '"';
        break;
    case '\\':
        plain = '\\';
        break;
    case '/':
        plain = '/';
        break;
    case 'b':
        plain = '\b';
        break;
    case 'f':
        plain = '\f';
        break;
    case 'n':
        plain = '\n';
        break;
    case 'r':
        plain = '\r';
        break;
    case 't':
        plain = '\t';
        break;
    case 'u': {
        long cp = end - p >= 6 ? hex4(p + 2) : -1;
        if (cp < 0)
            return false;
        p += 6;
        if ((cp & 0xFC00) == 0xD800) {
            /* yajl combines a high surrogate with whatever \u escape follows it, and reads
             * a high surrogate followed by anything else as '?'. */
            if (end - p >= 2 && p[0] == '\\' && p[1] == 'u') {
                long low = end - p >= 6 ? hex4(p + 2) : -1;
                if (low < 0)
                    return false;
                unsigned long combined = (((unsigned long)cp & 0x3F) << 10) |
                                         (((((unsigned long)cp >> 6) & 0xF) + 1) << 16) |
                                         ((unsigned long)low & 0x3FF);
                append_code_point(out, combined);
                p += 6;
            } else {
                g_string_append_c(out, '?');
            }
        } else {
            append_code_point(out, (unsigned long)cp);
        }
        *pos = p;
        return true;
    }
    default:
        return false;
    }
    g_string_append_c(out, plain);
    *pos = p + 2;
    return true;
}

/* The string at s->p ('"'): text and len point into the document when it holds no escape, else
 * into s->scratch (valid until the next string). */
/* The high bit of each of 8 bytes that ends a plain run (a quote, a backslash, a control
 * character or a byte of a multi-byte character, >= 0x80), and maybe of bytes after the first
 * such one (borrows), never before it: below the first, plain bytes borrow nothing. */
static inline uint64_t word_special_bits(uint64_t word)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    return ((quote - ones) | (backslash - ones) | (word - ones * 0x20) | word) & highs;
}

/* The first byte at or after p that is not plain (string_plain), or end. Eight bytes a step:
 * a list page is 150 KB of names and values; the lowest special bit gives the end of the run
 * without a byte loop (whose exit the branch predictor misses on every string). */
static inline const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end)
{
    while (end - p >= 8) {
        uint64_t word;
        memcpy(&word, p, sizeof(word));
        uint64_t special = word_special_bits(word);
        if (special) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return p + (__builtin_ctzll(special) >> 3);
#else
            break;
#endif
        }
        p += 8;
    }
    while (p < end && string_plain[*p])
        p++;
    return p;
}

static bool scan_string(struct scanner *s, const unsigned char **text, size_t *len)
{
    const unsigned char *p = s->p + 1, *end = s->end, *start = p;
    for (;;) {
        p = skip_plain(p, end);
        if (p == end)
            return scan_error(s);
        if (*p == '"') {
            *text = start;
            *len = (size_t)(p - start);
            s->p = p + 1;
            return true;
        }
        if (*p == '\\')
            break;
        if (*p < 0x20 || !skip_utf8(&p, end))
            return scan_error(s);
    }
    /* Escapes: decode into the scratch buffer. */
    GString *out = s->scratch;
    g_string_truncate(out, 0);
    g_string_append_len(out, (const char *)start, p - start);
    for (;;) {
        const unsigned char *run = p;
        p = skip_plain(p, end);
        g_string_append_len(out, (const char *)run, p - run);
        if (p == end)
            return scan_error(s);
        if (*p == '"')
            break;
        if (*p == '\\') {
            if (!decode_escape(&p, end, out))
                return scan_error(s);
            continue;
        }
        run = p;
        if (*p < 0x20 || !skip_utf8(&p, end))
            return scan_error(s);
        g_string_append_len(out, (const char *)run, p - run);
    }
    *text = (const unsigned char *)out->str;
    *len = out->len;
    s->p = p + 1;
    return true;
}

static bool is_digit(const unsigned char *p, const unsigned char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/* A number at s->p: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, handed over as text. */
static bool scan_number(struct scanner *s)
{
    const unsigned char *start = s->p, *p = start, *end = s->end;
    if (*p == '-')
        p++;
    if (!is_digit(p, end))
        return scan_error(s);
    if (*p++ != '0')
        while (is_digit(p, end))
            p++;
    if (p < end && *p == '.') {
        p++;
        if (!is_digit(p, end))
            return scan_error(s);
        while (is_digit(p, end))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (!is_digit(p, end))
            return scan_error(s);
        while (is_digit(p, end))
            p++;
    }
    s->p = p;
    if (!s->cb->yajl_number)
        return true;
    return verdict(s, s->cb->yajl_number(s->ctx, (const char *)start, (size_t)(p - start)));
}

static bool scan_literal(struct scanner *s, const char *word, size_t len)
{
    if ((size_t)(s->end - s->p) < len || memcmp(s->p, word, len) != 0)
        return scan_error(s);
    s->p += len;
    return true;
}

/* Open containers: '[' or '{' per level. */
struct nesting {
    unsigned char *levels;
    size_t depth;
    size_t cap;
    unsigned char inline_levels[64];
};

static void nesting_push(struct nesting *n, unsigned char kind)
{
    if (n->depth == n->cap) {
        size_t cap = n->cap * 2;
        if (n->levels == n->inline_levels) {
            n->levels = g_malloc(cap);
            memcpy(n->levels, n->inline_levels, n->depth);
        } else {
            n->levels = g_realloc(n->levels, cap);
        }
        n->cap = cap;
    }
    n->levels[n->depth++] = kind;
}

enum expect { EXPECT_VALUE, EXPECT_KEY, EXPECT_AFTER_VALUE };

static void scan_document(struct scanner *s)
{
    const yajl_callbacks *cb = s->cb;
    struct nesting nest = {.cap = sizeof(nest.inline_levels)};
    nest.levels = nest.inline_levels;
    enum expect expect = EXPECT_VALUE;
    bool ok = true;
    while (ok) {
        if (!skip_space(s))
            break;
        if (expect == EXPECT_AFTER_VALUE && nest.depth == 0) {
            if (s->p != s->end) /* trailing garbage */
                scan_error(s);
            break;
        }
        if (s->p == s->end) {
            scan_error(s); /* the document is incomplete */
            break;
        }
        unsigned char c = *s->p;
        if (expect == EXPECT_AFTER_VALUE) {
            unsigned char open = nest.levels[nest.depth - 1];
            if (c == ',') {
                s->p++;
                expect = open == '{' ? EXPECT_KEY : EXPECT_VALUE;
            } else if (c == (open == '{' ? '}' : ']')) {
                s->p++;
                nest.depth--;
                if (open == '{')
                    ok = !cb->yajl_end_map || verdict(s, cb->yajl_end_map(s->ctx));
                else
                    ok = !cb->yajl_end_array || verdict(s, cb->yajl_end_array(s->ctx));
            } else {
                ok = scan_error(s);
            }
            continue;
        }
        if (expect == EXPECT_KEY) {
            const unsigned char *text;
            size_t len;
            if (c != '"' || !scan_string(s, &text, &len)) {
                ok = scan_error(s);
                continue;
            }
            if (cb->yajl_map_key && !verdict(s, cb->yajl_map_key(s->ctx, text, len)))
                break;
            if (!skip_space(s))
                break;
            if (s->p == s->end || *s->p != ':') {
                ok = scan_error(s);
                continue;
            }
            s->p++;
            expect = EXPECT_VALUE;
            continue;
        }
        /* A value. */
        expect = EXPECT_AFTER_VALUE;
        switch (c) {
        case '{':
        case '[':
            s->p++;
            if (c == '{' ? cb->yajl_start_map && !verdict(s, cb->yajl_start_map(s->ctx))
                         : cb->yajl_start_array && !verdict(s, cb->yajl_start_array(s->ctx))) {
                ok = false;
                break;
            }
            nesting_push(&nest, c);
            if (!skip_space(s)) {
                ok = false;
                break;
            }
            if (s->p < s->end && *s->p == (c == '{' ? '}' : ']')) {
                s->p++;
                nest.depth--;
                if (c == '{')
                    ok = !cb->yajl_end_map || verdict(s, cb->yajl_end_map(s->ctx));
                else
                    ok = !cb->yajl_end_array || verdict(s, cb->yajl_end_array(s->ctx));
            } else {
                expect = c == '{' ? EXPECT_KEY : EXPECT_VALUE;
            }
            break;
        case '"': {
            const unsigned char *text;
            size_t len;
            ok = scan_string(s, &text, &len) &&
                 (!cb->yajl_string || verdict(s, cb->yajl_string(s->ctx, text, len)));
            break;
        }
        case 't':
            ok = scan_literal(s, "true", 4) &&
                 (!cb->yajl_boolean || verdict(s, cb->yajl_boolean(s->ctx, 1)));
            break;
        case 'f':
            ok = scan_literal(s, "false", 5) &&
                 (!cb->yajl_boolean || verdict(s, cb->yajl_boolean(s->ctx, 0)));
            break;
        case 'n':
            ok =
                scan_literal(s, "null", 4) && (!cb->yajl_null || verdict(s, cb->yajl_null(s->ctx)));
            break;
        default:
            if (c == '-' || (c >= '0' && c <= '9'))
                ok = scan_number(s);
            else
                ok = scan_error(s);
            break;
        }
    }
    if (nest.levels != nest.inline_levels)
        g_free(nest.levels);
}

int gcs_json_scan(const char *json, size_t len, const yajl_callbacks *callbacks, void *ctx)
{
    struct scanner s = {
        .p = (const unsigned char *)json,
        .end = (const unsigned char *)json + len,
        .cb = callbacks,
        .ctx = ctx,
        .scratch = g_string_sized_new(256),
        .status = GCS_JSON_SCAN_OK,
    };
    scan_document(&s);
    g_string_free(s.scratch, TRUE);
    return s.status;
}
