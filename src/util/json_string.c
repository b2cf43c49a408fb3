/* JSON string escaping, shared by the daemon and the emulator. */
#include "fluxfs/json_string.h"

void json_append_string(GString *out, const char *text)
{
    g_string_append_c(out, '"');
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        /* Runs that need no escaping (nearly all text) are copied in one go. */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\' && *p != 0x7f)
            p++;
        if (p != run)
            g_string_append_len(out, (const char *)run, p - run);
        if (*p == '\0')
            break;
        switch (*p) {
        case '"':
            g_string_append(out, "\\\"");
            break;
        case '\\':
            g_string_append(out, "\\\\");
            break;
        case '\n':
            g_string_append(out, "\\n");
            break;
        case '\r':
            g_string_append(out, "\\r");
            break;
        case '\t':
            g_string_append(out, "\\t");
            break;
        default:
            g_string_append_printf(out, "\\u%04x", *p);
        }
    }
    g_string_append_c(out, '"');
}
