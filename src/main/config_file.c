/* gcsfuse's --config-file: its YAML schema read with libyaml's document API, each key mapped to
 * the command-line flag gcsfuse's cfg/params.yaml gives it (see config_file.h). The keys are
 * those of the option table (option_table.c: each entry's .config, gcsfuse's config-path). */
#include "config_file.h"

#include <errno.h>
#include <glib.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "option_table.h"

/* Larger than any configuration; a bigger file is refused rather than read into memory. */
#define CONFIG_FILE_MAX (4u << 20)
/* Deeper than gcsfuse's schema (three levels) by far; refuses pathological nesting. */
#define CONFIG_DEPTH_MAX 16

const char *config_file_flag_for_key(const char *key)
{
    for (size_t i = 0; i < option_table_size; i++)
        if (option_table[i].config && strcmp(option_table[i].config, key) == 0)
            return option_table[i].name;
    return NULL;
}

const char *config_file_key_at(size_t i)
{
    for (size_t t = 0; t < option_table_size; t++)
        if (option_table[t].config && i-- == 0)
            return option_table[t].config;
    return NULL;
}

struct walk {
    const char *path;
    yaml_document_t *doc;
    config_setting_fn apply;
    void *user;
    GPtrArray **warnings;
    char *error;
};

static void walk_fail(struct walk *w, const yaml_node_t *node, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static void walk_fail(struct walk *w, const yaml_node_t *node, const char *fmt, ...)
{
    if (w->error)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    w->error = g_strdup_printf("config file %s, line %zu: %s", w->path,
                               (size_t)node->start_mark.line + 1, what);
    g_free(what);
}

static const char *scalar_text(const yaml_node_t *node)
{
    return (const char *)node->data.scalar.value;
}

/* A YAML null: "~", "null" (any case form YAML 1.1 knows) or nothing, when not quoted. */
static bool scalar_is_null(const yaml_node_t *node)
{
    if (node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *text = scalar_text(node);
    return text[0] == '\0' || strcmp(text, "~") == 0 || strcmp(text, "null") == 0 ||
           strcmp(text, "Null") == 0 || strcmp(text, "NULL") == 0;
}

static void walk_mapping(struct walk *w, const yaml_node_t *map, const char *prefix, int depth);

/* The first key (in strcmp order) under section ("metadata-cache" -> "metadata-cache.deprecated-
 * stat-cache-capacity"'s leaf), or NULL when section is not one of gcsfuse's sections. */
static const char *first_key_in(const char *section)
{
    size_t len = strlen(section);
    const char *first = NULL;
    for (size_t i = 0; i < option_table_size; i++) {
        const char *key = option_table[i].config;
        if (key && strncmp(key, section, len) == 0 && key[len] == '.' &&
            (!first || strcmp(key + len + 1, first) < 0))
            first = key + len + 1;
    }
    return first;
}

static bool is_section(const char *key)
{
    return first_key_in(key) != NULL;
}

static void walk_value(struct walk *w, const char *key, const yaml_node_t *key_node,
                       const yaml_node_t *value, int depth)
{
    const char *flag = config_file_flag_for_key(key);
    if (value->type == YAML_MAPPING_NODE) {
        if (flag) {
            walk_fail(w, value, "key '%s' needs a value, not a mapping", key);
            return;
        }
        walk_mapping(w, value, key, depth + 1);
        return;
    }
    if (!flag && is_section(key)) {
        walk_fail(w, value, "key '%s' is a section: it holds keys (e.g. '%s'), not a value", key,
                  first_key_in(key));
        return;
    }
    if (!flag) {
        if (!*w->warnings)
            *w->warnings = g_ptr_array_new_with_free_func(g_free);
        char *shown = g_strescape(key, NULL); /* one log line, whatever the key holds */
        g_ptr_array_add(*w->warnings,
                        g_strdup_printf("config file %s, line %zu: unknown key '%s' ignored",
                                        w->path, (size_t)key_node->start_mark.line + 1, shown));
        g_free(shown);
        return;
    }
    GString *text = g_string_new(NULL);
    if (value->type == YAML_SEQUENCE_NODE) {
        if (strcmp(flag, "o") != 0) {
            walk_fail(w, value, "key '%s' needs one value, not a list", key);
            g_string_free(text, TRUE);
            return;
        }
        /* file-system.fuse-options: a list of mount options, each one an -o item. */
        for (yaml_node_item_t *item = value->data.sequence.items.start;
             item < value->data.sequence.items.top; item++) {
            yaml_node_t *option = yaml_document_get_node(w->doc, *item);
            if (!option || option->type != YAML_SCALAR_NODE) {
                walk_fail(w, value, "key '%s' must list plain mount options", key);
                g_string_free(text, TRUE);
                return;
            }
            if (text->len)
                g_string_append_c(text, ',');
            for (const char *c = scalar_text(option); *c; c++) {
                if (*c == ',' || *c == '\\')
                    g_string_append_c(text, '\\'); /* a literal comma inside one option */
                g_string_append_c(text, *c);
            }
        }
    } else if (scalar_is_null(value) || scalar_text(value)[0] == '\0') {
        /* gcsfuse: an empty key leaves the setting at its default; and "" is the default of
         * each of its string keys (billing-project: "" in a file written with its defaults). */
        g_string_free(text, TRUE);
        return;
    } else {
        g_string_append(text, scalar_text(value));
    }
    struct config_setting setting = {.flag = (char *)flag, .value = text->str, .key = (char *)key};
    w->apply(&setting, w->user);
    g_string_free(text, TRUE);
}

static void walk_mapping(struct walk *w, const yaml_node_t *map, const char *prefix, int depth)
{
    if (depth > CONFIG_DEPTH_MAX) {
        walk_fail(w, map, "nested too deeply");
        return;
    }
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top && !w->error; pair++) {
        yaml_node_t *key = yaml_document_get_node(w->doc, pair->key);
        yaml_node_t *value = yaml_document_get_node(w->doc, pair->value);
        if (!key || !value || key->type != YAML_SCALAR_NODE) {
            walk_fail(w, key ? key : map, "a key must be a plain name");
            return;
        }
        char *full =
            prefix ? g_strconcat(prefix, ".", scalar_text(key), NULL) : g_strdup(scalar_text(key));
        walk_value(w, full, key, value, depth);
        g_free(full);
    }
}

int config_file_read(const char *path, config_setting_fn apply, void *user, void **warnings,
                     char **error)
{
    gchar *contents = NULL;
    gsize len = 0;
    GError *read_error = NULL;
    if (!g_file_get_contents(path, &contents, &len, &read_error)) {
        *error = g_strdup_printf("config file %s: %s", path, read_error->message);
        g_error_free(read_error);
        return -EINVAL;
    }
    if (len > CONFIG_FILE_MAX) {
        *error = g_strdup_printf("config file %s: larger than %u bytes", path, CONFIG_FILE_MAX);
        g_free(contents);
        return -EINVAL;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)contents, len);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        *error = g_strdup_printf("config file %s, line %zu: %s%s%s", path,
                                 (size_t)parser.problem_mark.line + 1,
                                 parser.problem ? parser.problem : "malformed YAML",
                                 parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        g_free(contents);
        return -EINVAL;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    struct walk w = {.path = path,
                     .doc = &doc,
                     .apply = apply,
                     .user = user,
                     .warnings = (GPtrArray **)warnings};
    if (!root || (root->type == YAML_SCALAR_NODE && scalar_is_null(root))) {
        /* an empty file: nothing to apply */
    } else if (root->type != YAML_MAPPING_NODE) {
        walk_fail(&w, root, "the top level must be a mapping of gcsfuse's keys");
    } else {
        walk_mapping(&w, root, NULL, 0);
    }
    if (w.error) {
        *error = w.error;
        rc = -EINVAL;
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    g_free(contents);
    return rc;
}

/* ---- config keys as mount options ("file-cache:max-size-mb:-1") ----------------------------- */

void config_setting_clear(struct config_setting *setting)
{
    if (!setting)
        return;
    g_free(setting->flag);
    g_free(setting->value);
    g_free(setting->key);
    memset(setting, 0, sizeof(*setting));
}

/* item[0, len) as a dotted key: ':' between levels, '_' read as '-' (fstab spellings). */
static char *dotted_key(const char *item, size_t len)
{
    char *key = g_strndup(item, len);
    for (char *c = key; *c; c++) {
        if (*c == ':')
            *c = '.';
        else if (*c == '_')
            *c = '-';
    }
    return key;
}

int config_option_setting(const char *item, struct config_setting *setting, char **error)
{
    const char *first_colon = strchr(item, ':');
    const char *first_equals = strchr(item, '=');
    if (!first_colon || first_colon == item || (first_equals && first_equals < first_colon))
        return 0;
    /* The first ':' (or '=') after which the text so far names a key ends the key: keys are
     * leaves, so no known key is a prefix of another, and the value keeps any ':' it holds. */
    for (const char *sep = item; *sep; sep++) {
        if (*sep != ':' && *sep != '=')
            continue;
        char *key = dotted_key(item, (size_t)(sep - item));
        const char *flag = config_file_flag_for_key(key);
        if (flag) {
            setting->flag = g_strdup(flag);
            setting->value = g_strdup(sep + 1);
            setting->key = key;
            return 1;
        }
        g_free(key);
        if (*sep == '=')
            break; /* a value starts here whatever the key: it is not a known one */
    }
    /* Not a key and a value: say what it is instead. */
    const char *end = first_equals ? first_equals : item + strlen(item);
    char *whole = dotted_key(item, (size_t)(end - item));
    const char *last_colon = NULL;
    for (const char *c = item; c < end; c++)
        if (*c == ':')
            last_colon = c;
    char *path = dotted_key(item, (size_t)(last_colon - item));
    char *shown = g_strescape(item, NULL);
    if (config_file_flag_for_key(whole)) {
        *error = g_strdup_printf("-o %s: gcsfuse config key '%s' needs a value (-o %s:VALUE)",
                                 shown, whole, shown);
    } else if (is_section(whole) || is_section(path)) {
        const char *section = is_section(whole) ? whole : path;
        char *example = g_strdup_printf("%s.%s", section, first_key_in(section));
        for (char *c = example; *c; c++)
            if (*c == '.')
                *c = ':';
        *error = g_strdup_printf("-o %s: '%s' is a section of gcsfuse's config, not a key "
                                 "(e.g. -o %s:VALUE)",
                                 shown, section, example);
        g_free(example);
    } else {
        *error = g_strdup_printf("-o %s: unknown gcsfuse config key '%s' (the form is "
                                 "SECTION:KEY:VALUE, e.g. -o metadata-cache:ttl-secs:30)",
                                 shown, path);
    }
    g_free(shown);
    g_free(path);
    g_free(whole);
    return -EINVAL;
}
