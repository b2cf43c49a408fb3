/* Hint-file lines to mount-relative paths (see hint_lines.h). */
#include "hint_lines.h"

#include <string.h>

void hint_lines_init(struct hint_lines *parser, const char *mountpoint)
{
    parser->partial = g_string_new(NULL);
    parser->dropping = false;
    parser->mountpoint = mountpoint;
}

void hint_lines_clear(struct hint_lines *parser)
{
    if (parser->partial)
        g_string_free(parser->partial, TRUE);
    parser->partial = NULL;
}

void hint_lines_restart(struct hint_lines *parser)
{
    g_string_truncate(parser->partial, 0);
    parser->dropping = false;
}

char *hint_line_normalize(char *line, const char *mountpoint)
{
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '/'))
        line[--len] = '\0';
    size_t mount_len = mountpoint ? strlen(mountpoint) : 0;
    if (mount_len > 0 && strncmp(line, mountpoint, mount_len) == 0 && line[mount_len] == '/')
        line += mount_len;
    while (line[0] == '/' || (line[0] == '.' && line[1] == '/'))
        line += line[0] == '/' ? 1 : 2;
    return line;
}

static void end_line(struct hint_lines *parser, hint_line_fn line, void *user)
{
    if (!parser->dropping && parser->partial->len > 0) {
        char *path = hint_line_normalize(parser->partial->str, parser->mountpoint);
        if (path[0] != '\0')
            line(path, user);
    }
    hint_lines_restart(parser);
}

void hint_lines_feed(struct hint_lines *parser, const char *data, size_t size, hint_line_fn line,
                     void *user)
{
    for (size_t i = 0; i < size; i++) {
        char c = data[i];
        if (c == '\n' || c == '\0') {
            end_line(parser, line, user);
        } else if (!parser->dropping) {
            if (parser->partial->len >= HINT_LINE_MAX) {
                parser->dropping = true;
                g_string_truncate(parser->partial, 0);
            } else {
                g_string_append_c(parser->partial, c);
            }
        }
    }
}

void hint_lines_finish(struct hint_lines *parser, hint_line_fn line, void *user)
{
    end_line(parser, line, user);
}
