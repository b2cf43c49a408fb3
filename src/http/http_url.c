/* Percent-encoding (RFC 3986 unreserved set) and the monotonic clock, shared by the layers that
 * build URLs and form bodies. */
#include "fluxfs/http.h"

#include <glib.h>
#include <string.h>
#include <time.h>

char *http_percent_encode(const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    GString *out = g_string_sized_new(strlen(text) + 8);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        unsigned char c = *p;
        if (g_ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            g_string_append_c(out, (char)c);
        } else {
            g_string_append_c(out, '%');
            g_string_append_c(out, hex[c >> 4]);
            g_string_append_c(out, hex[c & 15]);
        }
    }
    return g_string_free(out, FALSE);
}

double http_now_s(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}
