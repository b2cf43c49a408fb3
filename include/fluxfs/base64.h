/* Standard base64 (RFC 4648, with padding) for hashes and page tokens, and its URL-safe
 * variant. Output buffers are allocated with g_malloc and owned by the caller. */
#ifndef FLUXFS_BASE64_H
#define FLUXFS_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returns a NUL-terminated string; url_safe uses '-' and '_' instead of '+' and '/'. */
char *base64_encode(const void *data, size_t len, bool url_safe);
/* Decodes either alphabet, padding optional. Returns a buffer of *out_len bytes (plus a NUL
 * after it for convenience) or NULL when the text is not base64. */
uint8_t *base64_decode(const char *text, size_t text_len, size_t *out_len);
/* The same into out[0..cap): 0 with *out_len set, or -1 when the text is not base64 or its
 * bytes do not fit. No allocation. */
int base64_decode_into(const char *text, size_t text_len, uint8_t *out, size_t cap,
                       size_t *out_len);

#endif
