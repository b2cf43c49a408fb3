/* See rename_record.h. */
#include "rename_record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void entry_free(gpointer data)
{
    struct rename_record_entry *entry = data;
    g_free(entry->name);
    g_free(entry);
}

void rename_record_init(struct rename_record *record)
{
    memset(record, 0, sizeof(*record));
    record->entries = g_ptr_array_new_with_free_func(entry_free);
}

void rename_record_add(struct rename_record *record, const char *name, int64_t generation)
{
    struct rename_record_entry *entry = g_new0(struct rename_record_entry, 1);
    entry->name = g_strdup(name);
    entry->generation = generation;
    g_ptr_array_add(record->entries, entry);
}

void rename_record_clear(struct rename_record *record)
{
    if (!record)
        return;
    g_free(record->source);
    g_free(record->dest);
    g_free(record->origin);
    if (record->entries)
        g_ptr_array_free(record->entries, TRUE);
    memset(record, 0, sizeof(*record));
}

static void append_escaped(GString *out, const char *key, const char *value)
{
    char *escaped = g_strescape(value ? value : "", NULL);
    if (key)
        g_string_append_printf(out, "%s %s\n", key, escaped);
    else
        g_string_append_printf(out, "%s\n", escaped);
    g_free(escaped);
}

GString *rename_record_format(const struct rename_record *record)
{
    GString *out = g_string_new(RENAME_RECORD_MAGIC "\n");
    append_escaped(out, "source", record->source);
    append_escaped(out, "dest", record->dest);
    append_escaped(out, "origin", record->origin);
    g_string_append_printf(out, "count %u\n", record->entries->len);
    for (guint i = 0; i < record->entries->len; i++) {
        const struct rename_record_entry *entry = g_ptr_array_index(record->entries, i);
        char generation[32];
        g_snprintf(generation, sizeof(generation), "%" PRId64, entry->generation);
        append_escaped(out, generation, entry->name);
    }
    g_string_append(out, "end\n");
    return out;
}

/* g_strcompress of text, or NULL when it ends in a lone '\\' (a cut escape, which
 * g_strcompress would warn about). */
static char *unescape(const char *text)
{
    size_t len = strlen(text), backslashes = 0;
    while (backslashes < len && text[len - 1 - backslashes] == '\\')
        backslashes++;
    return backslashes % 2 ? NULL : g_strcompress(text);
}

/* The value of line "KEY VALUE" unescaped (g_malloc'd), or NULL when the line is not that. */
static char *keyed_value(const char *line, const char *key)
{
    size_t key_len = strlen(key);
    if (!line || strncmp(line, key, key_len) != 0 || line[key_len] != ' ')
        return NULL;
    return unescape(line + key_len + 1);
}

static int fail(char **error, struct rename_record *out, char **lines, const char *format, ...)
    G_GNUC_PRINTF(4, 5);

static int fail(char **error, struct rename_record *out, char **lines, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    *error = g_strdup_vprintf(format, args);
    va_end(args);
    rename_record_clear(out);
    g_strfreev(lines);
    return -EINVAL;
}

static bool is_dir_prefix(const char *prefix)
{
    size_t len = prefix ? strlen(prefix) : 0;
    return len > 0 && prefix[len - 1] == '/';
}

int rename_record_parse(const char *text, size_t len, struct rename_record *out, char **error)
{
    rename_record_init(out);
    *error = NULL;
    if (memchr(text, '\0', len))
        return fail(error, out, NULL, "a NUL byte in the record");
    char *copy = g_strndup(text, len);
    char **lines = g_strsplit(copy, "\n", -1);
    g_free(copy);
    guint count = g_strv_length(lines);
    if (count == 0 || strcmp(lines[0], RENAME_RECORD_MAGIC) != 0)
        return fail(error, out, lines, "not a rename record (first line is not '%s')",
                    RENAME_RECORD_MAGIC);
    out->source = keyed_value(count > 1 ? lines[1] : NULL, "source");
    out->dest = keyed_value(count > 2 ? lines[2] : NULL, "dest");
    out->origin = keyed_value(count > 3 ? lines[3] : NULL, "origin");
    if (!is_dir_prefix(out->source) || !is_dir_prefix(out->dest))
        return fail(error, out, lines, "no source and dest prefixes ending in '/'");
    if (!out->origin)
        return fail(error, out, lines, "no origin line");
    if (count < 5 || strncmp(lines[4], "count ", 6) != 0)
        return fail(error, out, lines, "no count line");
    char *end = NULL;
    errno = 0;
    unsigned long long want = strtoull(lines[4] + 6, &end, 10);
    if (errno || end == lines[4] + 6 || *end || want > count)
        return fail(error, out, lines, "a bad count line");
    guint at = 5;
    for (; at < count && strcmp(lines[at], "end") != 0; at++) {
        const char *line = lines[at];
        if (!line[0])
            break; /* an empty line: where a record cut short ends */
        errno = 0;
        long long generation = strtoll(line, &end, 10);
        if (errno || end == line || *end != ' ' || generation <= 0)
            return fail(error, out, lines, "line %u: no generation", at + 1);
        char *name = unescape(end + 1);
        if (!name)
            return fail(error, out, lines, "line %u: a cut escape", at + 1);
        rename_record_add(out, name, generation);
        g_free(name);
    }
    if (at >= count || strcmp(lines[at], "end") != 0)
        return fail(error, out, lines, "no end line (a torn record)");
    if (out->entries->len != want)
        return fail(error, out, lines, "count %llu but %u objects", want, out->entries->len);
    for (at++; at < count; at++) {
        if (lines[at][0])
            return fail(error, out, lines, "text after the end line");
    }
    g_strfreev(lines);
    return 0;
}
