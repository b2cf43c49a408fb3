/* JSON string literals: appends text as a quoted, escaped JSON string (", \, control characters
 * and DEL escaped; UTF-8 passed through). Used wherever JSON is written: log lines, request
 * bodies, the emulator's replies. */
#ifndef FLUXFS_JSON_STRING_H
#define FLUXFS_JSON_STRING_H

#include <glib.h>

void json_append_string(GString *out, const char *text);

#endif
