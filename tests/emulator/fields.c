/* Parsing and applying the JSON API's `fields` parameter (partial responses): see fields.h. */
#include "fields.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

/* A selection: member name -> struct emu_fields * (what is selected inside it) or NULL (all of
 * it). An absent name is not selected. */
struct emu_fields {
    GHashTable *children;
    /* Set once parsed, for emu_fields_select (one call per member of every listed object):
     * the children as arrays (keys and values owned by the table) and where "*" is. */
    const char **names;
    struct emu_fields **values;
    guint count;
    gint star; /* index of "*" in names, -1 when absent */
};

struct cursor {
    const char *p;
};

static struct emu_fields *fields_new(void)
{
    struct emu_fields *fields = g_new0(struct emu_fields, 1);
    fields->star = -1;
    fields->children =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)emu_fields_free);
    return fields;
}

void emu_fields_free(struct emu_fields *fields)
{
    if (fields == NULL)
        return;
    g_hash_table_destroy(fields->children);
    g_free(fields->names);
    g_free(fields->values);
    g_free(fields);
}

static bool is_name_char(char c)
{
    return c != '\0' && c != ',' && c != '/' && c != '(' && c != ')' && c != ' ';
}

static void skip_spaces(struct cursor *cur)
{
    while (*cur->p == ' ')
        cur->p++;
}

/* The node inside `parent` for `name`, created when absent; NULL when the member is already
 * selected whole (a narrower selection adds nothing). */
static struct emu_fields *descend(struct emu_fields *parent, const char *name)
{
    gpointer value;
    if (g_hash_table_lookup_extended(parent->children, name, NULL, &value))
        return value;
    struct emu_fields *child = fields_new();
    g_hash_table_insert(parent->children, g_strdup(name), child);
    return child;
}

static int parse_list(struct cursor *cur, struct emu_fields *into, int depth);

/* One selection: a/b/c or a/b(c,d). `into` NULL means "already whole": parse, keep nothing. */
static int parse_selection(struct cursor *cur, struct emu_fields *into, int depth)
{
    struct emu_fields *scratch = NULL;
    if (into == NULL)
        into = scratch = fields_new();
    int ret = 0;
    struct emu_fields *node = into;
    for (int level = 0;; level++) {
        if (depth + level >= EMU_FIELDS_MAX_DEPTH) {
            ret = -EINVAL;
            break;
        }
        skip_spaces(cur);
        const char *start = cur->p;
        while (is_name_char(*cur->p))
            cur->p++;
        if (cur->p == start) {
            ret = -EINVAL;
            break;
        }
        char *name = g_strndup(start, (gsize)(cur->p - start));
        skip_spaces(cur);
        if (*cur->p == '/') {
            cur->p++;
            struct emu_fields *next = descend(node, name);
            g_free(name);
            if (next == NULL)
                node = scratch = scratch != NULL ? scratch : fields_new();
            else
                node = next;
            continue;
        }
        if (*cur->p == '(') {
            cur->p++;
            struct emu_fields *next = descend(node, name);
            g_free(name);
            ret = parse_list(cur, next, depth + level + 1);
            if (ret == 0) {
                skip_spaces(cur);
                if (*cur->p == ')')
                    cur->p++;
                else
                    ret = -EINVAL;
            }
            break;
        }
        /* The last name, selected whole. */
        g_hash_table_replace(node->children, name, NULL);
        break;
    }
    emu_fields_free(scratch);
    return ret;
}

static int parse_list(struct cursor *cur, struct emu_fields *into, int depth)
{
    for (;;) {
        int ret = parse_selection(cur, into, depth);
        if (ret < 0)
            return ret;
        skip_spaces(cur);
        if (*cur->p != ',')
            return 0;
        cur->p++;
    }
}

/* Builds the lookup arrays of every level, once the selection is complete. */
static void index_children(struct emu_fields *fields)
{
    fields->count = g_hash_table_size(fields->children);
    fields->names = g_new(const char *, fields->count);
    fields->values = g_new(struct emu_fields *, fields->count);
    fields->star = -1;
    GHashTableIter iter;
    gpointer key, value;
    guint i = 0;
    g_hash_table_iter_init(&iter, fields->children);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        fields->names[i] = key;
        fields->values[i] = value;
        if (strcmp(key, "*") == 0)
            fields->star = (gint)i;
        if (value != NULL)
            index_children(value);
        i++;
    }
}

int emu_fields_parse(const char *text, struct emu_fields **out)
{
    if (text == NULL || text[0] == '\0') {
        *out = NULL;
        return 0;
    }
    if (strlen(text) > EMU_FIELDS_MAX_LEN)
        return -EINVAL;
    struct emu_fields *fields = fields_new();
    struct cursor cur = {text};
    int ret = parse_list(&cur, fields, 0);
    skip_spaces(&cur);
    if (ret == 0 && *cur.p != '\0')
        ret = -EINVAL; /* an unmatched ')' or stray text */
    if (ret < 0) {
        emu_fields_free(fields);
        return ret;
    }
    index_children(fields);
    *out = fields;
    return 0;
}

bool emu_fields_select(const struct emu_fields *fields, const char *key,
                       const struct emu_fields **child)
{
    const struct emu_fields *inner = NULL;
    bool selected = true;
    if (fields != NULL) {
        /* A few names per level: a scan beats hashing the key. */
        gint found = -1;
        for (guint i = 0; i < fields->count && found < 0; i++)
            if (fields->names[i][0] == key[0] && strcmp(fields->names[i], key) == 0)
                found = (gint)i;
        if (found < 0)
            found = fields->star;
        selected = found >= 0;
        inner = selected ? fields->values[found] : NULL;
    }
    if (child != NULL)
        *child = inner;
    return selected;
}
