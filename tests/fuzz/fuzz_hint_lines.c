/* libFuzzer target: the hint-file parser (src/fs/hint_lines.c). The first byte picks where the
 * rest is cut into writes; the paths must be the same whichever way the file was written (one
 * write, or pieces), and each must be a clean mount-relative path: not empty, no leading '/' or
 * "./", no trailing '/' or '\r', at most HINT_LINE_MAX bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/fs/hint_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void collect(const char *path, void *user)
{
    size_t len = strlen(path);
    if (len == 0 || len > HINT_LINE_MAX || path[0] == '/' || (path[0] == '.' && path[1] == '/') ||
        path[len - 1] == '/' || path[len - 1] == '\r')
        abort();
    g_ptr_array_add(user, g_strdup(path));
}

static GPtrArray *parse(const char *text, size_t size, unsigned step)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    struct hint_lines parser;
    hint_lines_init(&parser, "/mnt/data");
    size_t at = 0;
    while (at < size) {
        size_t n = step ? MIN((size_t)step, size - at) : size - at;
        hint_lines_feed(&parser, text + at, n, collect, paths);
        at += n;
    }
    hint_lines_finish(&parser, collect, paths);
    hint_lines_clear(&parser);
    return paths;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned step = data[0];
    const char *text = (const char *)data + 1;
    size--;
    GPtrArray *whole = parse(text, size, 0);
    GPtrArray *pieces = parse(text, size, step ? step : 1);
    if (whole->len != pieces->len)
        abort();
    for (guint i = 0; i < whole->len; i++)
        if (strcmp(whole->pdata[i], pieces->pdata[i]) != 0)
            abort();
    g_ptr_array_free(whole, TRUE);
    g_ptr_array_free(pieces, TRUE);
    return 0;
}
