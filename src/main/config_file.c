/* gcsfuse's --config-file: its YAML schema read with libyaml's document API, each key mapped to
 * the command-line flag gcsfuse's cfg/params.yaml gives it (see config_file.h). */
#include "config_file.h"

#include <errno.h>
#include <glib.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

/* gcsfuse v3's config paths and their flags (cfg/params.yaml: config-path -> flag-name). */
static const struct {
    const char *key;
    const char *flag;
} key_table[] = {
    {"app-name", "app-name"},
    {"cache-dir", "cache-dir"},
    {"cloud-profiler.allocated-heap", "cloud-profiler-allocated-heap"},
    {"cloud-profiler.cpu", "cloud-profiler-cpu"},
    {"cloud-profiler.enabled", "enable-cloud-profiler"},
    {"cloud-profiler.goroutines", "cloud-profiler-goroutines"},
    {"cloud-profiler.heap", "cloud-profiler-heap"},
    {"cloud-profiler.label", "cloud-profiler-label"},
    {"cloud-profiler.mutex", "cloud-profiler-mutex"},
    {"debug.exit-on-invariant-violation", "debug-invariants"},
    {"debug.fuse", "debug-fuse"},
    {"debug.gcs", "debug-gcs"},
    {"debug.log-mutex", "debug-mutex"},
    {"disable-autoconfig", "disable-autoconfig"},
    {"dummy-io.enable", "enable-dummy-io"},
    {"dummy-io.per-mb-latency", "dummy-io-per-mb-latency"},
    {"dummy-io.reader-latency", "dummy-io-reader-latency"},
    {"enable-atomic-rename-object", "enable-atomic-rename-object"},
    {"enable-google-lib-auth", "enable-google-lib-auth"},
    {"enable-hns", "enable-hns"},
    {"enable-new-reader", "enable-new-reader"},
    {"enable-unsupported-path-support", "enable-unsupported-path-support"},
    {"file-cache.cache-file-for-range-read", "file-cache-cache-file-for-range-read"},
    {"file-cache.download-chunk-size-mb", "file-cache-download-chunk-size-mb"},
    {"file-cache.enable-crc", "file-cache-enable-crc"},
    {"file-cache.enable-o-direct", "file-cache-enable-o-direct"},
    {"file-cache.enable-parallel-downloads", "file-cache-enable-parallel-downloads"},
    {"file-cache.exclude-regex", "file-cache-exclude-regex"},
    {"file-cache.experimental-enable-block-cache", "file-cache-experimental-enable-block-cache"},
    {"file-cache.experimental-enable-chunk-cache", "file-cache-experimental-enable-chunk-cache"},
    {"file-cache.experimental-parallel-downloads-default-on",
     "file-cache-experimental-parallel-downloads-default-on"},
    {"file-cache.include-regex", "file-cache-include-regex"},
    {"file-cache.max-parallel-downloads", "file-cache-max-parallel-downloads"},
    {"file-cache.max-size-mb", "file-cache-max-size-mb"},
    {"file-cache.parallel-downloads-per-file", "file-cache-parallel-downloads-per-file"},
    {"file-cache.write-buffer-size", "file-cache-write-buffer-size"},
    {"file-system.congestion-threshold", "congestion-threshold"},
    {"file-system.dir-mode", "dir-mode"},
    {"file-system.disable-parallel-dirops", "disable-parallel-dirops"},
    {"file-system.experimental-enable-dentry-cache", "experimental-enable-dentry-cache"},
    {"file-system.experimental-enable-readdirplus", "experimental-enable-readdirplus"},
    {"file-system.experimental-o-direct", "experimental-o-direct"},
    {"file-system.enable-kernel-reader", "enable-kernel-reader"},
    {"file-system.file-mode", "file-mode"},
    {"file-system.fuse-max-request-size-kb", "fuse-max-request-size-kb"},
    {"file-system.fuse-options", "o"},
    {"file-system.gid", "gid"},
    {"file-system.ignore-interrupts", "ignore-interrupts"},
    {"file-system.kernel-list-cache-ttl-secs", "kernel-list-cache-ttl-secs"},
    {"file-system.max-background", "max-background"},
    {"file-system.max-read-ahead-kb", "max-read-ahead-kb"},
    {"file-system.o-direct", "o-direct"},
    {"file-system.precondition-errors", "precondition-errors"},
    {"file-system.rename-dir-limit", "rename-dir-limit"},
    {"file-system.temp-dir", "temp-dir"},
    {"file-system.uid", "uid"},
    {"file-system.unused-mrd-cache-size", "unused-mrd-cache-size"},
    {"foreground", "foreground"},
    {"gcs-auth.anonymous-access", "anonymous-access"},
    {"gcs-auth.key-file", "key-file"},
    {"gcs-auth.reuse-token-from-url", "reuse-token-from-url"},
    {"gcs-auth.token-url", "token-url"},
    {"gcs-connection.billing-project", "billing-project"},
    {"gcs-connection.client-protocol", "client-protocol"},
    {"gcs-connection.custom-endpoint", "custom-endpoint"},
    {"gcs-connection.enable-http-dns-cache", "enable-http-dns-cache"},
    {"gcs-connection.experimental-enable-json-read", "experimental-enable-json-read"},
    {"gcs-connection.experimental-local-socket-address", "experimental-local-socket-address"},
    {"gcs-connection.grpc-conn-pool-size", "experimental-grpc-conn-pool-size"},
    {"gcs-connection.http-client-timeout", "http-client-timeout"},
    {"gcs-connection.limit-bytes-per-sec", "limit-bytes-per-sec"},
    {"gcs-connection.limit-ops-per-sec", "limit-ops-per-sec"},
    {"gcs-connection.max-conns-per-host", "max-conns-per-host"},
    {"gcs-connection.max-idle-conns-per-host", "max-idle-conns-per-host"},
    {"gcs-connection.sequential-read-size-mb", "sequential-read-size-mb"},
    {"gcs-retries.chunk-transfer-timeout-secs", "chunk-transfer-timeout-secs"},
    {"gcs-retries.max-retry-attempts", "max-retry-attempts"},
    {"gcs-retries.max-retry-sleep", "max-retry-sleep"},
    {"gcs-retries.multiplier", "retry-multiplier"},
    {"gcs-retries.read-stall.enable", "enable-read-stall-retry"},
    {"gcs-retries.read-stall.initial-req-timeout", "read-stall-initial-req-timeout"},
    {"gcs-retries.read-stall.max-req-timeout", "read-stall-max-req-timeout"},
    {"gcs-retries.read-stall.min-req-timeout", "read-stall-min-req-timeout"},
    {"gcs-retries.read-stall.req-increase-rate", "read-stall-req-increase-rate"},
    {"gcs-retries.read-stall.req-target-percentile", "read-stall-req-target-percentile"},
    {"implicit-dirs", "implicit-dirs"},
    {"list.enable-empty-managed-folders", "enable-empty-managed-folders"},
    {"logging.file-path", "log-file"},
    {"logging.format", "log-format"},
    {"logging.log-rotate.backup-file-count", "log-rotate-backup-file-count"},
    {"logging.log-rotate.compress", "log-rotate-compress"},
    {"logging.log-rotate.max-file-size-mb", "log-rotate-max-file-size-mb"},
    {"logging.severity", "log-severity"},
    {"machine-type", "machine-type"},
    {"metadata-cache.deprecated-stat-cache-capacity", "stat-cache-capacity"},
    {"metadata-cache.deprecated-stat-cache-ttl", "stat-cache-ttl"},
    {"metadata-cache.deprecated-type-cache-ttl", "type-cache-ttl"},
    {"metadata-cache.enable-nonexistent-type-cache", "enable-nonexistent-type-cache"},
    {"metadata-cache.experimental-metadata-prefetch-on-mount",
     "experimental-metadata-prefetch-on-mount"},
    {"metadata-cache.negative-ttl-secs", "metadata-cache-negative-ttl-secs"},
    {"metadata-cache.stat-cache-max-size-mb", "stat-cache-max-size-mb"},
    {"metadata-cache.ttl-secs", "metadata-cache-ttl-secs"},
    {"metadata-cache.type-cache-max-size-mb", "type-cache-max-size-mb"},
    {"metrics.buffer-size", "metrics-buffer-size"},
    {"metrics.cloud-metrics-export-interval-secs", "cloud-metrics-export-interval-secs"},
    {"metrics.enable-grpc-metrics", "enable-grpc-metrics"},
    {"metrics.prometheus-port", "prometheus-port"},
    {"metrics.stackdriver-export-interval", "stackdriver-export-interval"},
    {"metrics.use-new-names", "metrics-use-new-names"},
    {"metrics.workers", "metrics-workers"},
    {"monitoring.experimental-tracing-mode", "experimental-tracing-mode"},
    {"monitoring.experimental-tracing-project-id", "experimental-tracing-project-id"},
    {"monitoring.experimental-tracing-sampling-ratio", "experimental-tracing-sampling-ratio"},
    {"only-dir", "only-dir"},
    {"profile", "profile"},
    {"read.block-size-mb", "read-block-size-mb"},
    {"read.enable-buffered-read", "enable-buffered-read"},
    {"read.global-max-blocks", "read-global-max-blocks"},
    {"read.inactive-stream-timeout", "read-inactive-stream-timeout"},
    {"read.max-blocks-per-handle", "read-max-blocks-per-handle"},
    {"read.min-blocks-per-handle", "read-min-blocks-per-handle"},
    {"read.random-seek-threshold", "read-random-seek-threshold"},
    {"read.start-blocks-per-handle", "read-start-blocks-per-handle"},
    {"workload-insight.forward-merge-threshold-mb", "workload-insight-forward-merge-threshold-mb"},
    {"workload-insight.output-file", "workload-insight-output-file"},
    {"workload-insight.visualize", "visualize-workload-insight"},
    {"write.block-size-mb", "write-block-size-mb"},
    {"write.create-empty-file", "create-empty-file"},
    {"write.enable-rapid-appends", "enable-rapid-appends"},
    {"write.enable-streaming-writes", "enable-streaming-writes"},
    {"write.finalize-file-for-rapid", "finalize-file-for-rapid"},
    {"write.global-max-blocks", "write-global-max-blocks"},
    {"write.max-blocks-per-file", "write-max-blocks-per-file"},
};

/* Larger than any configuration; a bigger file is refused rather than read into memory. */
#define CONFIG_FILE_MAX (4u << 20)
/* Deeper than gcsfuse's schema (three levels) by far; refuses pathological nesting. */
#define CONFIG_DEPTH_MAX 16

const char *config_file_flag_for_key(const char *key)
{
    for (size_t i = 0; i < G_N_ELEMENTS(key_table); i++)
        if (strcmp(key_table[i].key, key) == 0)
            return key_table[i].flag;
    return NULL;
}

const char *config_file_key_at(size_t i)
{
    return i < G_N_ELEMENTS(key_table) ? key_table[i].key : NULL;
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

/* The first key of the table under section ("metadata-cache" -> "metadata-cache.ttl-secs"'s
 * leaf), or NULL when section is not one of gcsfuse's sections. */
static const char *first_key_in(const char *section)
{
    size_t len = strlen(section);
    for (size_t i = 0; i < G_N_ELEMENTS(key_table); i++)
        if (strncmp(key_table[i].key, section, len) == 0 && key_table[i].key[len] == '.')
            return key_table[i].key + len + 1;
    return NULL;
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
        char *full = prefix ? g_strconcat(prefix, ".", scalar_text(key), NULL)
                            : g_strdup(scalar_text(key));
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
    struct walk w = {.path = path, .doc = &doc, .apply = apply, .user = user,
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
                                 "(e.g. -o %s:VALUE)", shown, section, example);
        g_free(example);
    } else {
        *error = g_strdup_printf("-o %s: unknown gcsfuse config key '%s' (the form is "
                                 "SECTION:KEY:VALUE, e.g. -o metadata-cache:ttl-secs:30)", shown,
                                 path);
    }
    g_free(shown);
    g_free(path);
    g_free(whole);
    return -EINVAL;
}
