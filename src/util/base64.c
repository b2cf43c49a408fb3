/* base64 encode/decode, both alphabets (RFC 4648 sections 4 and 5). */
#include "fluxfs/base64.h"

#include <glib.h>
#include <string.h>

static const char alphabet_std[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char alphabet_url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *base64_encode(const void *data, size_t len, bool url_safe)
{
    const char *alphabet = url_safe ? alphabet_url : alphabet_std;
    const uint8_t *in = data;
    char *out = g_malloc((len + 2) / 3 * 4 + 1);
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int base64_decode_into(const char *text, size_t text_len, uint8_t *out, size_t cap,
                       size_t *out_len)
{
    while (text_len > 0 && text[text_len - 1] == '=')
        text_len--;
    if (text_len % 4 == 1)
        return -1;
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < text_len; i++) {
        int v = base64_value(text[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    *out_len = n;
    return 0;
}

uint8_t *base64_decode(const char *text, size_t text_len, size_t *out_len)
{
    uint8_t *out = g_malloc(text_len / 4 * 3 + 3);
    size_t n = 0;
    if (base64_decode_into(text, text_len, out, text_len / 4 * 3 + 2, &n) != 0) {
        g_free(out);
        return NULL;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}
