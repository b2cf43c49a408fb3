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

/* Digit value + 1 of both alphabets; 0 for anything else. */
static const unsigned char base64_values[256] = {
    ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,  ['H'] = 8,
    ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['-'] = 63,
    ['/'] = 64, ['_'] = 64,
};

static int base64_value(char c)
{
    return (int)base64_values[(unsigned char)c] - 1;
}

int base64_decode_into(const char *text, size_t text_len, uint8_t *out, size_t cap, size_t *out_len)
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
