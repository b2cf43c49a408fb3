/* Small parsers of the emulator core: the Range header (RFC 9110 single byte ranges), object
 * name validation as Cloud Storage does it, and listing page tokens. */
#include "store-internal.h"

#include <errno.h>
#include <string.h>

#include "fluxfs/base64.h"

#define MAX_NAME_BYTES 1024

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Parses decimal digits at *p into *value; fails on no digits or overflow. */
static int parse_u64(const char **p, uint64_t *value)
{
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    while (*s >= '0' && *s <= '9') {
        unsigned digit = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return -EINVAL;
        v = v * 10 + digit;
        s++;
    }
    *p = s;
    *value = v;
    return 0;
}

int emu_parse_range(const char *header, uint64_t size, uint64_t *first, uint64_t *last)
{
    if (header == NULL)
        return -EINVAL;
    const char *p = skip_spaces(header);
    if (g_ascii_strncasecmp(p, "bytes", 5) != 0)
        return -EINVAL;
    p = skip_spaces(p + 5);
    if (*p != '=')
        return -EINVAL;
    p = skip_spaces(p + 1);

    bool suffix = false;
    uint64_t a = 0, b = 0;
    bool has_b = false;
    if (*p == '-') {
        suffix = true;
        p = skip_spaces(p + 1);
        if (parse_u64(&p, &b) < 0)
            return -EINVAL;
    } else {
        if (parse_u64(&p, &a) < 0)
            return -EINVAL;
        p = skip_spaces(p);
        if (*p != '-')
            return -EINVAL;
        p = skip_spaces(p + 1);
        if (*p >= '0' && *p <= '9') {
            if (parse_u64(&p, &b) < 0)
                return -EINVAL;
            has_b = true;
        }
    }
    p = skip_spaces(p);
    if (*p != '\0')
        return -EINVAL; /* several ranges or trailing junk: not a single byte range */

    if (suffix) {
        /* The last b bytes; a zero-length suffix or an empty object cannot be satisfied. */
        if (b == 0 || size == 0)
            return -ERANGE;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return 0;
    }
    if (has_b && b < a)
        return -EINVAL; /* syntactically invalid: the header is ignored */
    if (a >= size)
        return -ERANGE;
    *first = a;
    *last = has_b && b < size ? b : size - 1;
    return 0;
}

bool emu_object_name_valid(const char *name)
{
    if (name == NULL)
        return false;
    size_t len = strlen(name);
    if (len == 0 || len > MAX_NAME_BYTES)
        return false;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    if (strpbrk(name, "\r\n") != NULL)
        return false;
    return g_utf8_validate_len(name, len, NULL);
}

char *emu_page_token_encode(enum emu_token_kind kind, const char *name)
{
    size_t len = strlen(name);
    char *raw = g_malloc(len + 1);
    raw[0] = (char)kind;
    memcpy(raw + 1, name, len);
    char *token = base64_encode(raw, len + 1, true);
    g_free(raw);
    return token;
}

int emu_page_token_decode(const char *token, enum emu_token_kind *kind, char **name)
{
    size_t text_len = strlen(token);
    /* A name is at most 1024 bytes (a prefix can be the name plus a delimiter): cap generously. */
    if (text_len == 0 || text_len > 4 * 4096)
        return -EINVAL;
    size_t len = 0;
    uint8_t *raw = base64_decode(token, text_len, &len);
    if (raw == NULL)
        return -EINVAL;
    int rc = 0;
    if (len < 2 || memchr(raw, '\0', len) != NULL)
        rc = -EINVAL;
    else if (raw[0] != EMU_TOKEN_ITEM && raw[0] != EMU_TOKEN_PREFIX && raw[0] != EMU_TOKEN_TRAILING)
        rc = -EINVAL;
    if (rc == 0) {
        *kind = (enum emu_token_kind)raw[0];
        *name = g_strndup((const char *)raw + 1, len - 1);
    }
    g_free(raw);
    return rc;
}
