/* fluxfs command line: one table of options (long names, gcsfuse aliases, -o keys), value
 * parsers for sizes, durations and modes, fstab-style -o lists, and the checks that run before
 * anything touches the network (bucket name, conflicts, mountpoint). */
#include "options.h"

#include "config_file.h"
#include "option_table.h"

#include <ctype.h>
#include <errno.h>
#include <glib.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fluxfs-config.h"

#define MIB ((size_t)1 << 20)

struct parse_state {
    struct fluxfs_options *opts;
    GPtrArray *fuse_args;   /* char *, owned */
    GPtrArray *positionals; /* const char *, borrowed from argv */
    bool endpoint_given, anonymous_given, key_file_given, prefix_given;
    bool entry_timeout_given, attr_timeout_given, shutdown_grace_given;
    bool help, version;
    bool disk_cache_off;     /* --file-cache-max-size-mb 0 */
    bool write_blocks_given; /* --write-global-max-blocks */
    bool write_buffer_given; /* --write-buffer-size */
    long write_blocks;
    GPtrArray *warnings; /* char *, owned: gcsfuse flags accepted without effect */
    const char *context; /* prefix of errors and warnings ("config file F: ") or NULL */
    char *error;
};

/* ---- value parsers ---------------------------------------------------------------------- */

int options_parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < G_N_ELEMENTS(yes); i++) {
        if (g_ascii_strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (g_ascii_strcasecmp(text, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* Reads "123" or "1.25" (no sign, no exponent) at *p; advances *p. */
static int parse_decimal(const char **p, double *out)
{
    const char *s = *p;
    const char *start = s;
    double value = 0;
    bool digits = false;
    while (isdigit((unsigned char)*s)) {
        value = value * 10 + (*s - '0');
        s++;
        digits = true;
    }
    if (*s == '.') {
        s++;
        double scale = 0.1;
        while (isdigit((unsigned char)*s)) {
            value += (*s - '0') * scale;
            scale /= 10;
            s++;
            digits = true;
        }
    }
    if (!digits || s == start || !isfinite(value))
        return -EINVAL;
    *p = s;
    *out = value;
    return 0;
}

int options_parse_size(const char *text, size_t *out)
{
    static const struct {
        const char *suffix;
        double multiplier;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1024.0},
        {"kb", 1024.0},
        {"kib", 1024.0},
        {"m", 1048576.0},
        {"mb", 1048576.0},
        {"mib", 1048576.0},
        {"g", 1073741824.0},
        {"gb", 1073741824.0},
        {"gib", 1073741824.0},
        {"t", 1099511627776.0},
        {"tb", 1099511627776.0},
        {"tib", 1099511627776.0},
    };
    const char *p = text;
    double value;
    if (parse_decimal(&p, &value) < 0)
        return -EINVAL;
    for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
        if (g_ascii_strcasecmp(p, units[i].suffix) == 0) {
            double bytes = value * units[i].multiplier;
            /* 2^62: far beyond any memory size, safely below SIZE_MAX and int64 limits. */
            if (bytes > 4611686018427387904.0)
                return -EINVAL;
            *out = (size_t)llround(bytes);
            return 0;
        }
    }
    return -EINVAL;
}

int options_parse_duration(const char *text, bool allow_forever, double *out)
{
    static const struct {
        const char *unit;
        double seconds;
    } units[] = {
        /* Longest first so "ms" is not read as "m" followed by garbage. */
        {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3},
        {"s", 1},     {"m", 60},    {"h", 3600},         {"d", 86400},
    };
    if (allow_forever &&
        (strcmp(text, "-1") == 0 || g_ascii_strcasecmp(text, "inf") == 0 ||
         g_ascii_strcasecmp(text, "infinite") == 0 || g_ascii_strcasecmp(text, "forever") == 0)) {
        *out = FLUXFS_TTL_FOREVER;
        return 0;
    }
    const char *p = text;
    double total = 0;
    double value;
    if (parse_decimal(&p, &value) < 0)
        return -EINVAL;
    if (*p == '\0') { /* a bare number is seconds */
        total = value;
    } else {
        for (;;) {
            size_t matched = 0;
            double unit_seconds = 0;
            for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
                size_t len = strlen(units[i].unit);
                if (strncmp(p, units[i].unit, len) == 0 && len > matched) {
                    matched = len;
                    unit_seconds = units[i].seconds;
                }
            }
            if (matched == 0)
                return -EINVAL;
            total += value * unit_seconds;
            p += matched;
            if (*p == '\0')
                break;
            if (parse_decimal(&p, &value) < 0)
                return -EINVAL;
        }
    }
    if (!isfinite(total) || total > FLUXFS_TTL_FOREVER)
        return -EINVAL;
    *out = total;
    return 0;
}

int options_parse_mode(const char *text, mode_t *out)
{
    if (text[0] == '\0' || strlen(text) > 5)
        return -EINVAL;
    unsigned value = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '7')
            return -EINVAL;
        value = value * 8 + (unsigned)(*p - '0');
    }
    if (value > 07777)
        return -EINVAL;
    *out = (mode_t)value;
    return 0;
}

static int parse_int(const char *text, long min, long max, long *out)
{
    if (text[0] == '\0')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max)
        return -EINVAL;
    *out = value;
    return 0;
}

static bool is_ip_address_form(const char *name)
{
    int parts = 0;
    const char *p = name;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
        parts++;
        if (*p == '.')
            p++;
        else if (*p != '\0')
            return false;
    }
    return parts == 4;
}

int options_check_bucket_name(const char *name, const char **why)
{
    size_t len = strlen(name);
    bool has_dot = strchr(name, '.') != NULL;
    if (len < 3 || len > (has_dot ? 222u : 63u)) {
        *why = "must be 3 to 63 characters long (up to 222 with dots)";
        return -EINVAL;
    }
    for (const char *p = name; *p; p++) {
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '_' ||
              *p == '.')) {
            *why = "may contain only lowercase letters, digits, '-', '_' and '.'";
            return -EINVAL;
        }
    }
    if (!isalnum((unsigned char)name[0]) || !isalnum((unsigned char)name[len - 1])) {
        *why = "must start and end with a letter or digit";
        return -EINVAL;
    }
    size_t component = 0;
    for (const char *p = name; *p; p++) {
        if (*p == '.') {
            if (component == 0) {
                *why = "must not contain empty dot-separated parts";
                return -EINVAL;
            }
            component = 0;
        } else if (++component > 63) {
            *why = "each dot-separated part must be at most 63 characters";
            return -EINVAL;
        }
    }
    if (is_ip_address_form(name)) {
        *why = "must not look like an IP address";
        return -EINVAL;
    }
    if (g_str_has_prefix(name, "goog") || strstr(name, "google") || strstr(name, "g00gle")) {
        *why = "must not start with \"goog\" or contain \"google\"";
        return -EINVAL;
    }
    return 0;
}

char **options_split_list(const char *text)
{
    GPtrArray *items = g_ptr_array_new();
    GString *current = g_string_new(NULL);
    for (const char *p = text;; p++) {
        if (*p == '\\' && (p[1] == ',' || p[1] == '\\')) {
            g_string_append_c(current, p[1]);
            p++;
        } else if (*p == ',' || *p == '\0') {
            if (current->len > 0)
                g_ptr_array_add(items, g_strdup(current->str));
            g_string_truncate(current, 0);
            if (*p == '\0')
                break;
        } else {
            g_string_append_c(current, *p);
        }
    }
    g_string_free(current, TRUE);
    g_ptr_array_add(items, NULL);
    return (char **)g_ptr_array_free(items, FALSE);
}

/* ---- option application ----------------------------------------------------------------- */

static void *field_at(struct parse_state *st, const struct option_spec *spec)
{
    return (char *)st->opts + spec->offset;
}

static void set_string(char **field, const char *value)
{
    g_free(*field);
    *field = g_strdup(value);
}

/* "http://host:port[/]" or with a trailing "/storage/v1[/]" (gcsfuse's --custom-endpoint form);
 * a bare "host:port" gets "http://" like Google's libraries do for STORAGE_EMULATOR_HOST. */
static char *normalize_endpoint(const char *text, bool default_http)
{
    char *url;
    if (g_str_has_prefix(text, "http://") || g_str_has_prefix(text, "https://"))
        url = g_strdup(text);
    else if (default_http && text[0] != '\0' && !strstr(text, "://"))
        url = g_strconcat("http://", text, NULL);
    else
        return NULL;
    size_t host_start = (size_t)(strstr(url, "://") - url) + 3;
    size_t len = strlen(url);
    while (len > host_start && url[len - 1] == '/')
        url[--len] = '\0';
    if (g_str_has_suffix(url, "/storage/v1")) {
        len -= strlen("/storage/v1");
        url[len] = '\0';
    }
    if (len <= host_start || url[host_start] == '/') {
        g_free(url);
        return NULL;
    }
    return url;
}

/* Strips slashes at both ends and appends one; rejects empty, "." and ".." segments. */
static int normalize_prefix(const char *text, char **out, const char **why)
{
    while (*text == '/')
        text++;
    char *trimmed = g_strdup(text);
    size_t len = strlen(trimmed);
    while (len > 0 && trimmed[len - 1] == '/')
        trimmed[--len] = '\0';
    if (len == 0) {
        g_free(trimmed);
        *out = g_strdup("");
        return 0;
    }
    char **segments = g_strsplit(trimmed, "/", -1);
    int err = 0;
    for (char **s = segments; *s; s++) {
        if ((*s)[0] == '\0') {
            *why = "contains an empty segment (\"//\")";
            err = -EINVAL;
        } else if (strcmp(*s, ".") == 0 || strcmp(*s, "..") == 0) {
            *why = "contains a \".\" or \"..\" segment";
            err = -EINVAL;
        } else if (strlen(*s) > 255) {
            *why = "contains a segment longer than 255 bytes";
            err = -EINVAL;
        }
    }
    g_strfreev(segments);
    if (err == 0)
        *out = g_strconcat(trimmed, "/", NULL);
    g_free(trimmed);
    return err;
}

static int resolve_user(const char *text, uid_t *out)
{
    long number;
    if (strcmp(text, "-1") == 0) {
        *out = getuid();
        return 0;
    }
    if (parse_int(text, 0, UINT32_MAX - 1, &number) == 0) {
        *out = (uid_t)number;
        return 0;
    }
    struct passwd *pw = getpwnam(text);
    if (!pw)
        return -EINVAL;
    *out = pw->pw_uid;
    return 0;
}

static int resolve_group(const char *text, gid_t *out)
{
    long number;
    if (strcmp(text, "-1") == 0) {
        *out = getgid();
        return 0;
    }
    if (parse_int(text, 0, UINT32_MAX - 1, &number) == 0) {
        *out = (gid_t)number;
        return 0;
    }
    struct group *gr = getgrnam(text);
    if (!gr)
        return -EINVAL;
    *out = gr->gr_gid;
    return 0;
}

static char *absolute_path(const char *path)
{
    if (g_path_is_absolute(path))
        return g_strdup(path);
    char *cwd = g_get_current_dir();
    char *joined = g_build_filename(cwd, path, NULL);
    g_free(cwd);
    return joined;
}

static bool spec_takes_value(const struct option_spec *spec)
{
    switch (spec->kind) {
    case KIND_FLAG:
    case KIND_DEBUG:
    case KIND_IGNORED:
    case KIND_HELP:
    case KIND_VERSION:
        return false;
    case KIND_FUSE:
    case KIND_WARN:
    case KIND_COMPAT:
        return spec->metavar != NULL;
    default:
        return true;
    }
}

static void fail(struct parse_state *st, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void fail(struct parse_state *st, const char *fmt, ...)
{
    if (st->error)
        return; /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    st->error = st->context ? g_strconcat(st->context, text, NULL) : g_strdup(text);
    g_free(text);
}

static void warn(struct parse_state *st, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void warn(struct parse_state *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    char *line = st->context ? g_strconcat(st->context, text, NULL) : g_strdup(text);
    g_free(text);
    for (guint i = 0; i < st->warnings->len; i++) {
        if (strcmp(g_ptr_array_index(st->warnings, i), line) == 0) {
            g_free(line); /* one line per flag, however often it is given */
            return;
        }
    }
    g_ptr_array_add(st->warnings, line);
}

/* A gcsfuse switch's value: absent = true. */
static int flag_value(struct parse_state *st, const char *value, const char *shown, bool *on)
{
    *on = true;
    if (value && options_parse_bool(value, on) < 0) {
        fail(st, "option '%s': '%s' is not true or false", shown, value);
        return -EINVAL;
    }
    return 0;
}

static bool value_is_quiet(const struct option_spec *spec, const char *value)
{
    if (!spec->quiet)
        return false;
    char **quiet = g_strsplit(spec->quiet, "|", -1);
    bool match = false;
    for (char **q = quiet; *q && !match; q++) {
        bool a, b;
        if (options_parse_bool(*q, &a) == 0 && options_parse_bool(value, &b) == 0)
            match = a == b;
        else
            match = strcmp(*q, value) == 0;
    }
    g_strfreev(quiet);
    return match;
}

static int apply_warn(struct parse_state *st, const struct option_spec *spec, const char *value,
                      const char *shown)
{
    if (!spec->metavar) {
        bool on;
        if (flag_value(st, value, shown, &on) < 0)
            return -EINVAL;
        if (!value_is_quiet(spec, on ? "true" : "false"))
            warn(st, "%s=%s accepted for gcsfuse compatibility, no effect: %s", shown,
                 on ? "true" : "false", spec->help);
        return 0;
    }
    if (!value_is_quiet(spec, value))
        warn(st, "%s %s accepted for gcsfuse compatibility, no effect: %s", shown, value,
             spec->help);
    return 0;
}

/* gcsfuse's integer flags: a whole number >= min. */
static int compat_long(struct parse_state *st, const char *value, const char *shown, long min,
                       long *out)
{
    if (parse_int(value, min, LONG_MAX / 2, out) < 0) {
        fail(st, "option '%s': '%s' is not a whole number of at least %ld", shown, value, min);
        return -EINVAL;
    }
    return 0;
}

#define UNBOUNDED_SIZE ((size_t)1 << 62)
/* gcsfuse's stat cache entry, positive and negative together (its --stat-cache-capacity doc). */
#define GCSFUSE_STAT_ENTRY_BYTES 1688

/* gcsfuse flags mapped onto fluxfs settings, with gcsfuse's units and special values. */
static int apply_compat(struct parse_state *st, const struct option_spec *spec, const char *value,
                        const char *shown)
{
    struct fluxfs_options *opts = st->opts;
    const char *name = spec->name;
    long n;
    if (strcmp(name, "kernel-list-cache-ttl-secs") == 0) {
        if (parse_int(value, -1, 1000000000L, &n) < 0) {
            fail(st, "option '%s': '%s' is not a number of seconds (-1 = forever)", shown, value);
            return -EINVAL;
        }
        opts->kernel_list_ttl_s = n < 0 ? FLUXFS_TTL_FOREVER : (double)n;
    } else if (strcmp(name, "max-conns-per-host") == 0) {
        if (compat_long(st, value, shown, 0, &n) < 0)
            return -EINVAL;
        /* gcsfuse: 0 = no limit. fluxfs's engine needs a number: its highest cap. */
        if (n == 0 || n > 4096)
            opts->gcs.max_connections = 4096;
        else
            opts->gcs.max_connections = (int)n;
    } else if (strcmp(name, "http-client-timeout") == 0) {
        double seconds;
        if (options_parse_duration(value, false, &seconds) < 0) {
            fail(st, "option '%s': '%s' is not a duration (e.g. 30s, 2m; 0 = none)", shown, value);
            return -EINVAL;
        }
        /* gcsfuse: 0 = no timeout. A dead connection is still caught by --stall-timeout. */
        opts->gcs.request_deadline_s = seconds > 0 ? seconds : FLUXFS_TTL_FOREVER;
    } else if (strcmp(name, "file-cache-max-size-mb") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        st->disk_cache_off = n == 0;
        if (n != 0)
            opts->cache_size = n < 0 ? UNBOUNDED_SIZE : (size_t)n * MIB;
    } else if (strcmp(name, "stat-cache-max-size-mb") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        opts->max_cached_names = n < 0    ? UNBOUNDED_SIZE
                                 : n == 0 ? 1
                                          : MAX((size_t)n * MIB / GCSFUSE_STAT_ENTRY_BYTES, 1);
    } else if (strcmp(name, "stat-cache-capacity") == 0) {
        if (compat_long(st, value, shown, 0, &n) < 0)
            return -EINVAL;
        opts->max_cached_names = n > 0 ? (size_t)n : 1;
    } else if (strcmp(name, "max-retry-attempts") == 0) {
        if (compat_long(st, value, shown, 0, &n) < 0)
            return -EINVAL;
        /* gcsfuse: 0 = no limit; here the highest retry count, still bounded by the deadline. */
        opts->gcs.max_retries = n == 0 || n > 100 ? 100 : (int)n;
    } else if (strcmp(name, "experimental-metadata-prefetch-on-mount") == 0) {
        if (strcmp(value, "disabled") == 0) {
            opts->prefetch_metadata = false;
        } else if (strcmp(value, "sync") == 0 || strcmp(value, "async") == 0) {
            opts->prefetch_metadata = true;
        } else {
            fail(st, "option '%s': '%s' is not disabled, sync or async", shown, value);
            return -EINVAL;
        }
    } else if (strcmp(name, "enable-metadata-prefetch") == 0) {
        bool on;
        if (flag_value(st, value, shown, &on) < 0)
            return -EINVAL;
        opts->prefetch_metadata = on;
    } else if (strcmp(name, "write-block-size-mb") == 0) {
        if (compat_long(st, value, shown, 1, &n) < 0)
            return -EINVAL;
        if (n > 4096) {
            fail(st, "option '%s': %ld MiB is more than the 4096 MiB a part may have", shown, n);
            return -EINVAL;
        }
        opts->write_part_size = (size_t)n * MIB;
    } else if (strcmp(name, "write-global-max-blocks") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        st->write_blocks_given = true;
        st->write_blocks = n;
    } else if (strcmp(name, "write-max-blocks-per-file") == 0) {
        if (compat_long(st, value, shown, -1, &n) < 0)
            return -EINVAL;
        opts->write_parts_in_flight = n < 0 || n > 1024 ? 1024 : MAX((int)n, 1);
    } else if (strcmp(name, "limit-ops-per-sec") == 0 || strcmp(name, "limit-bytes-per-sec") == 0) {
        char *end = NULL;
        errno = 0;
        double rate = g_ascii_strtod(value, &end);
        if (errno != 0 || end == value || *end != '\0' || !isfinite(rate) || rate > 1e15) {
            fail(st, "option '%s': '%s' is not a number (-1 = no limit)", shown, value);
            return -EINVAL;
        }
        /* gcsfuse: any value that is not above 0 means no limit. */
        if (strcmp(name, "limit-ops-per-sec") == 0)
            opts->gcs.limit_ops_per_sec = rate > 0 ? rate : 0;
        else
            opts->gcs.limit_bytes_per_sec = rate > 0 ? rate : 0;
    } else if (strcmp(name, "client-protocol") == 0) {
        if (strcmp(value, "http2") == 0 || strcmp(value, "grpc") == 0) {
            warn(st,
                 "%s %s accepted for gcsfuse compatibility: fluxfs speaks HTTP/1.1 to the "
                 "JSON and XML APIs",
                 shown, value);
        } else if (strcmp(value, "http1") != 0) {
            fail(st, "option '%s': '%s' is not http1, http2 or grpc", shown, value);
            return -EINVAL;
        }
    }
    return 0;
}

static int apply_list(struct parse_state *st, const char *list);

/* shown: the option as the user wrote it, e.g. "--stat-ttl" or "-o stat_ttl". */
static int apply_option(struct parse_state *st, const struct option_spec *spec, bool negated,
                        const char *value, const char *shown)
{
    struct fluxfs_options *opts = st->opts;
    const char *why = NULL;

    if (negated && spec->kind != KIND_FLAG) {
        fail(st, "unknown option '%s'", shown);
        return -EINVAL;
    }
    bool flag_like = spec->kind == KIND_FLAG ||
                     ((spec->kind == KIND_WARN || spec->kind == KIND_COMPAT) && !spec->metavar);
    if (value && !spec_takes_value(spec) && !flag_like) {
        fail(st, "option '%s' takes no value", shown);
        return -EINVAL;
    }
    if ((!value || value[0] == '\0') && spec_takes_value(spec)) {
        fail(st, "option '%s' needs a value", shown);
        return -EINVAL;
    }

    switch (spec->kind) {
    case KIND_FLAG: {
        bool on = true;
        if (value && options_parse_bool(value, &on) < 0) {
            fail(st, "option '%s': '%s' is not true or false", shown, value);
            return -EINVAL;
        }
        *(bool *)field_at(st, spec) = negated ? !on : on;
        if (spec->offset == FIELD(gcs.anonymous))
            st->anonymous_given = true;
        return 0;
    }
    case KIND_STRING:
        set_string((char **)field_at(st, spec), value);
        return 0;
    case KIND_PATH: {
        char *path = absolute_path(value);
        struct stat info;
        const char *problem = NULL;
        bool want_dir = spec->offset == FIELD(temp_dir); /* the one directory-valued path */
        if (stat(path, &info) < 0)
            problem = g_strerror(errno);
        else if (!want_dir && S_ISDIR(info.st_mode))
            problem = "is a directory";
        else if (want_dir && !S_ISDIR(info.st_mode))
            problem = "is not a directory";
        if (problem) {
            fail(st, "option '%s': %s: %s", shown, value, problem);
            g_free(path);
            return -EINVAL;
        }
        g_free(*(char **)field_at(st, spec));
        *(char **)field_at(st, spec) = path;
        if (spec->offset == FIELD(key_file))
            st->key_file_given = true;
        return 0;
    }
    case KIND_NEW_PATH:
        g_free(*(char **)field_at(st, spec));
        *(char **)field_at(st, spec) = absolute_path(value);
        return 0;
    case KIND_ENDPOINT: {
        char *url = normalize_endpoint(value, false);
        if (!url) {
            fail(st, "option '%s': '%s' is not an http:// or https:// URL with a host", shown,
                 value);
            return -EINVAL;
        }
        g_free(opts->endpoint);
        opts->endpoint = url;
        st->endpoint_given = true;
        return 0;
    }
    case KIND_PREFIX: {
        char *prefix = NULL;
        if (normalize_prefix(value, &prefix, &why) < 0) {
            fail(st, "option '%s': prefix '%s' %s", shown, value, why);
            return -EINVAL;
        }
        g_free(opts->prefix);
        opts->prefix = prefix;
        st->prefix_given = true;
        return 0;
    }
    case KIND_UID:
        if (resolve_user(value, (uid_t *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not a user id or name", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_GID:
        if (resolve_group(value, (gid_t *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not a group id or name", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_MODE:
        if (options_parse_mode(value, (mode_t *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not an octal mode (e.g. 0644)", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_TTL:
        if (options_parse_duration(value, true, (double *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not a duration (e.g. 30s, 1.5, 5m, -1)", shown, value);
            return -EINVAL;
        }
        if (spec->offset == FIELD(entry_timeout_s))
            st->entry_timeout_given = true;
        if (spec->offset == FIELD(attr_timeout_s))
            st->attr_timeout_given = true;
        if (spec->offset == FIELD(shutdown_grace_s))
            st->shutdown_grace_given = true;
        return 0;
    case KIND_TTL_SECONDS:
    case KIND_METADATA_TTL: {
        long seconds;
        if (parse_int(value, -1, 1000000000L, &seconds) < 0) {
            fail(st, "option '%s': '%s' is not a number of seconds (-1 = forever)", shown, value);
            return -EINVAL;
        }
        double ttl = seconds < 0 ? FLUXFS_TTL_FOREVER : (double)seconds;
        if (spec->kind == KIND_METADATA_TTL) {
            opts->stat_ttl_s = ttl;
            opts->type_ttl_s = ttl;
        } else {
            *(double *)field_at(st, spec) = ttl;
        }
        return 0;
    }
    case KIND_DURATION: {
        double seconds;
        if (options_parse_duration(value, false, &seconds) < 0 || seconds <= 0) {
            fail(st, "option '%s': '%s' is not a positive duration (e.g. 30s, 2m)", shown, value);
            return -EINVAL;
        }
        *(double *)field_at(st, spec) = seconds;
        return 0;
    }
    case KIND_SIZE:
    case KIND_SIZE_MIB: {
        size_t bytes;
        long mib;
        if (spec->kind == KIND_SIZE_MIB && parse_int(value, 1, 1 << 20, &mib) == 0) {
            bytes = (size_t)mib * MIB;
        } else if (options_parse_size(value, &bytes) < 0) {
            fail(st, "option '%s': '%s' is not a size (e.g. 512K, 64M, 1GiB)", shown, value);
            return -EINVAL;
        }
        if (bytes == 0 && spec->offset != FIELD(memory_cache_size) &&
            spec->offset != FIELD(write_buffer_size)) { /* 0 is documented for these two */
            fail(st, "option '%s': size must be greater than 0", shown);
            return -EINVAL;
        }
        *(size_t *)field_at(st, spec) = bytes;
        if (spec->offset == FIELD(write_buffer_size))
            st->write_buffer_given = true;
        return 0;
    }
    case KIND_INT:
    case KIND_RETRIES: {
        long number;
        if (parse_int(value, spec->min, spec->max, &number) < 0) {
            fail(st, "option '%s': '%s' is not a whole number from %d to %d", shown, value,
                 spec->min, spec->max);
            return -EINVAL;
        }
        if (spec->kind == KIND_RETRIES && number == 0)
            number = -1; /* the gcs config's "no retries" */
        *(int *)field_at(st, spec) = (int)number;
        return 0;
    }
    case KIND_LOG_LEVEL:
        if (flog_parse_level(value, (enum flog_level *)field_at(st, spec)) < 0) {
            fail(st, "option '%s': '%s' is not one of error, warn, info, debug, trace", shown,
                 value);
            return -EINVAL;
        }
        return 0;
    case KIND_LOG_FORMAT:
        if (g_ascii_strcasecmp(value, "json") == 0) {
            opts->log_json = true;
        } else if (g_ascii_strcasecmp(value, "text") == 0) {
            opts->log_json = false;
        } else {
            fail(st, "option '%s': '%s' is not text or json", shown, value);
            return -EINVAL;
        }
        return 0;
    case KIND_DEBUG:
        opts->foreground = true;
        opts->log_level = FLOG_DEBUG;
        return 0;
    case KIND_FUSE: {
        char *key = g_strdelimit(g_strdup(spec->name), "-", '_');
        g_ptr_array_add(st->fuse_args,
                        value ? g_strdup_printf("%s=%s", key, value) : g_strdup(key));
        g_free(key);
        return 0;
    }
    case KIND_IGNORED:
        return 0;
    case KIND_WARN:
        return apply_warn(st, spec, value, shown);
    case KIND_COMPAT:
        return apply_compat(st, spec, value, shown);
    case KIND_HELP:
        st->help = true;
        return 0;
    case KIND_VERSION:
        st->version = true;
        return 0;
    case KIND_CONFIG:
        return 0; /* read before the command line (read_config_file) */
    case KIND_OPTION_LIST:
        return apply_list(st, value);
    }
    return 0;
}

/* Looks up a name with dashes or underscores; a "no-" prefix negates a flag. */
static const struct option_spec *find_option(const char *name, bool *negated)
{
    char *key = g_strdelimit(g_strdup(name), "_", '-');
    const struct option_spec *found = NULL;
    *negated = false;
    for (size_t i = 0; i < option_table_size && !found; i++) {
        if (option_table[i].kind != KIND_OPTION_LIST && strcmp(option_table[i].name, key) == 0)
            found = &option_table[i];
    }
    if (!found && g_str_has_prefix(key, "no-")) {
        for (size_t i = 0; i < option_table_size && !found; i++) {
            if (option_table[i].kind == KIND_FLAG && strcmp(option_table[i].name, key + 3) == 0) {
                found = &option_table[i];
                *negated = true;
            }
        }
    }
    g_free(key);
    return found;
}

bool options_known(const char *name)
{
    bool negated;
    return find_option(name, &negated) != NULL;
}

static bool is_ignored_mount_key(const char *key)
{
    return g_str_has_prefix(key, "x-") || g_str_has_prefix(key, "comment=");
}

static void apply_setting(struct parse_state *st, const struct config_setting *setting,
                          const char *shown);
static int apply_list(struct parse_state *st, const char *list);

/* One item of an -o list: "key", "key=value", or a gcsfuse config key as the GKE CSI driver
 * passes it ("file-cache:max-size-mb:-1"), applied exactly as the config file's key. */
static int apply_list_item(struct parse_state *st, const char *item)
{
    if (is_ignored_mount_key(item))
        return 0;
    struct config_setting setting = {0};
    char *config_error = NULL;
    int form = config_option_setting(item, &setting, &config_error);
    if (form < 0) {
        fail(st, "%s", config_error);
        g_free(config_error);
        return -EINVAL;
    }
    if (form > 0) {
        char *shown = g_strdup_printf("-o %s", setting.key);
        for (char *c = shown; *c; c++)
            if (*c == '.')
                *c = ':';
        apply_setting(st, &setting, shown);
        g_free(shown);
        config_setting_clear(&setting);
        return st->error ? -EINVAL : 0;
    }
    const char *eq = strchr(item, '=');
    if (eq && eq - item == 1 && item[0] == 'o')
        return apply_list(st, eq + 1); /* "-o o=ro": gcsfuse's "--o ro" as an -o item */
    char *key = eq ? g_strndup(item, (size_t)(eq - item)) : g_strdup(item);
    char *shown = g_strdup_printf("-o %s", key);
    bool negated;
    const struct option_spec *spec = find_option(key, &negated);
    int err;
    if (!spec || spec->kind == KIND_HELP || spec->kind == KIND_VERSION) {
        fail(st, "unknown option '%s'", shown);
        err = -EINVAL;
    } else {
        err = apply_option(st, spec, negated, eq ? eq + 1 : NULL, shown);
    }
    g_free(shown);
    g_free(key);
    return err;
}

static int apply_list(struct parse_state *st, const char *list)
{
    char **items = options_split_list(list);
    int err = 0;
    for (char **item = items; *item && err == 0; item++)
        err = apply_list_item(st, *item);
    g_strfreev(items);
    return err;
}

/* "--name", "--name=value" or "--name value" at argv[*index]; advances *index past a value. */
static int apply_long(struct parse_state *st, int argc, char **argv, int *index)
{
    const char *arg = argv[*index] + 2;
    const char *eq = strchr(arg, '=');
    char *name = eq ? g_strndup(arg, (size_t)(eq - arg)) : g_strdup(arg);
    char *shown = g_strdup_printf("--%s", name);
    bool negated;
    const struct option_spec *spec = find_option(name, &negated);
    int err;
    if (strcmp(name, "o") == 0) { /* gcsfuse's "--o ro" */
        const char *list = eq ? eq + 1 : (*index + 1 < argc ? argv[++*index] : NULL);
        if (list)
            err = apply_list(st, list);
        else
            fail(st, "option '--o' needs a value");
        err = list ? err : -EINVAL;
    } else if (!spec || spec->kind == KIND_IGNORED) {
        fail(st, "unknown option '%s'", shown);
        err = -EINVAL;
    } else {
        const char *value = eq ? eq + 1 : NULL;
        if (!value && !negated && spec_takes_value(spec)) {
            if (*index + 1 >= argc) {
                fail(st, "option '%s' needs a value", shown);
                g_free(shown);
                g_free(name);
                return -EINVAL;
            }
            value = argv[++*index];
        }
        err = apply_option(st, spec, negated, value, shown);
    }
    g_free(shown);
    g_free(name);
    return err;
}

/* "-f", "-fd", "-o LIST", "-oLIST" at argv[*index]. */
static int apply_short(struct parse_state *st, int argc, char **argv, int *index)
{
    const char *arg = argv[*index];
    for (const char *p = arg + 1; *p; p++) {
        if (*p == 'o') {
            const char *list = p[1] ? p + 1 : NULL;
            if (!list) {
                if (*index + 1 >= argc) {
                    fail(st, "option '-o' needs a value");
                    return -EINVAL;
                }
                list = argv[++*index];
            }
            return apply_list(st, list);
        }
        const struct option_spec *spec = NULL;
        char letter = *p == 'v' ? 'V' : *p; /* gcsfuse's -v is the version too */
        for (size_t i = 0; i < option_table_size && !spec; i++) {
            if (option_table[i].short_name == letter)
                spec = &option_table[i];
        }
        if (!spec) {
            fail(st, "unknown option '-%c'", *p);
            return -EINVAL;
        }
        char shown[3] = {'-', *p, '\0'};
        int err = apply_option(st, spec, false, NULL, shown);
        if (err < 0)
            return err;
    }
    return 0;
}

/* "BUCKET", "BUCKET/PREFIX" or "gs://BUCKET[/PREFIX]". */
static int apply_bucket_argument(struct parse_state *st, const char *text)
{
    struct fluxfs_options *opts = st->opts;
    const char *why = NULL;
    if (g_str_has_prefix(text, "gs://"))
        text += strlen("gs://");
    const char *slash = strchr(text, '/');
    char *bucket = slash ? g_strndup(text, (size_t)(slash - text)) : g_strdup(text);
    if (bucket[0] == '\0') {
        fail(st, "missing bucket name in '%s'", text);
        g_free(bucket);
        return -EINVAL;
    }
    if (options_check_bucket_name(bucket, &why) < 0) {
        fail(st, "invalid bucket name '%s': %s", bucket, why);
        g_free(bucket);
        return -EINVAL;
    }
    g_free(opts->bucket);
    opts->bucket = bucket;
    if (slash) {
        char *prefix = NULL;
        if (normalize_prefix(slash + 1, &prefix, &why) < 0) {
            fail(st, "invalid prefix in '%s': %s", text, why);
            return -EINVAL;
        }
        if (prefix[0] != '\0' && st->prefix_given) {
            fail(st, "both BUCKET/PREFIX ('%s') and --only-dir given; use one", text);
            g_free(prefix);
            return -EINVAL;
        }
        if (prefix[0] != '\0') {
            g_free(opts->prefix);
            opts->prefix = prefix;
        } else {
            g_free(prefix);
        }
    }
    return 0;
}

/* "/dev/fd/N": a /dev/fuse descriptor inherited from the caller, which mounted it with fd=N
 * (the GKE Cloud Storage FUSE CSI driver's hand-off). libfuse serves it as is. 1 when text is
 * such a path (checked: an open descriptor of /dev/fuse), 0 when it is not, -EINVAL. */
static int apply_fd_mountpoint(struct parse_state *st, const char *text)
{
    if (!g_str_has_prefix(text, "/dev/fd/"))
        return 0;
    const char *digits = text + strlen("/dev/fd/");
    char *end = NULL;
    errno = 0;
    long fd = strtol(digits, &end, 10);
    if (!*digits || *end || errno || fd < 0 || fd > INT_MAX)
        return 0;
    struct stat info;
    if (fd <= STDERR_FILENO) {
        fail(st,
             "mountpoint '%s': descriptors 0-2 become /dev/null when fluxfs detaches; pass "
             "the /dev/fuse descriptor as 3 or above",
             text);
        return -EINVAL;
    }
    if (fstat((int)fd, &info) < 0) {
        fail(st,
             "mountpoint '%s': descriptor %ld is not open (%s): the caller must pass the "
             "/dev/fuse descriptor it mounted with fd=%ld",
             text, fd, g_strerror(errno), fd);
        return -EINVAL;
    }
    if (!S_ISCHR(info.st_mode) || major(info.st_rdev) != 10 || minor(info.st_rdev) != 229) {
        fail(st, "mountpoint '%s': descriptor %ld is not /dev/fuse", text, fd);
        return -EINVAL;
    }
    g_free(st->opts->mountpoint);
    st->opts->mountpoint = g_strdup(text);
    return 1;
}

static int apply_mountpoint_argument(struct parse_state *st, const char *text)
{
    struct fluxfs_options *opts = st->opts;
    int fd_rc = apply_fd_mountpoint(st, text);
    if (fd_rc != 0)
        return fd_rc < 0 ? fd_rc : 0;
    struct stat info;
    if (stat(text, &info) < 0) {
        int err = errno;
        if (err == ENOTCONN) {
            /* A mount whose daemon is gone: main removes it when it is fluxfs's (names it
             * with --no-unmount-stale). realpath cannot walk it: made absolute by its text. */
            g_free(opts->mountpoint);
            opts->mountpoint = g_canonicalize_filename(text, NULL);
            opts->mountpoint_unreachable = true;
            return 0;
        }
        fail(st, "mountpoint '%s': %s", text, g_strerror(err));
        return -EINVAL;
    }
    if (!S_ISDIR(info.st_mode)) {
        fail(st, "mountpoint '%s' is not a directory", text);
        return -EINVAL;
    }
    char *resolved = realpath(text, NULL);
    if (!resolved) {
        fail(st, "mountpoint '%s': %s", text, g_strerror(errno));
        return -EINVAL;
    }
    g_free(opts->mountpoint);
    opts->mountpoint = g_strdup(resolved);
    free(resolved);
    return 0;
}

/* --write-buffer-size when neither it nor gcsfuse's write-global-max-blocks is given: a third
 * of --memory-limit in whole parts, at most 512 MiB (the option table's def_shown says so). */
static size_t default_write_buffer_size(const struct fluxfs_options *opts)
{
    size_t share = MIN(opts->memory_limit / 3, (size_t)512 * MIB);
    return share / opts->write_part_size * opts->write_part_size;
}

/* Cross-option rules and derived fields, once everything is read. */
static int finish_options(struct parse_state *st)
{
    struct fluxfs_options *opts = st->opts;
    const char *emulator_host = getenv("STORAGE_EMULATOR_HOST");
    bool emulator_env = emulator_host && emulator_host[0] != '\0';

    if (st->positionals->len < 2) {
        fail(st, st->positionals->len == 0 ? "missing BUCKET[/PREFIX] and MOUNTPOINT"
                                           : "missing MOUNTPOINT");
        return -EINVAL;
    }
    if (st->positionals->len > 2) {
        fail(st, "unexpected argument '%s' (expected BUCKET[/PREFIX] MOUNTPOINT)",
             (const char *)g_ptr_array_index(st->positionals, 2));
        return -EINVAL;
    }
    if (apply_bucket_argument(st, g_ptr_array_index(st->positionals, 0)) < 0 ||
        apply_mountpoint_argument(st, g_ptr_array_index(st->positionals, 1)) < 0)
        return -EINVAL;

    /* STORAGE_EMULATOR_HOST implies anonymous access only while it also picks the endpoint. */
    if (emulator_env && !st->anonymous_given && (st->endpoint_given || st->key_file_given))
        opts->gcs.anonymous = false;
    if (opts->gcs.anonymous && st->key_file_given) {
        fail(st, "--anonymous and --key-file conflict: choose one");
        return -EINVAL;
    }
    if (!st->entry_timeout_given)
        opts->entry_timeout_s = opts->stat_ttl_s;
    if (!st->attr_timeout_given)
        opts->attr_timeout_s = opts->stat_ttl_s;
    opts->shutdown_grace_default = !st->shutdown_grace_given;
    if (opts->readahead_max < opts->readahead_chunk)
        opts->readahead_max = opts->readahead_chunk;
    if (opts->memory_limit < 2 * opts->readahead_chunk) {
        fail(st,
             "--memory-limit (%zu bytes) must be at least twice --readahead-chunk "
             "(%zu bytes)",
             opts->memory_limit, opts->readahead_chunk);
        return -EINVAL;
    }

    if (opts->write_part_size < 5 * MIB || opts->write_part_size % (256 * 1024) != 0) {
        fail(st, "--write-part-size must be at least 5M and a multiple of 256K");
        return -EINVAL;
    }
    if (opts->write_buffer_size != 0 && opts->write_buffer_size < opts->write_part_size) {
        fail(st, "--write-buffer-size must be 0 or at least --write-part-size");
        return -EINVAL;
    }
    if (opts->upload_mode &&
        !g_strv_contains((const char *const[]){"auto", "multipart", "composite", "resumable", NULL},
                         opts->upload_mode)) {
        fail(st, "--upload-mode must be auto, multipart, composite or resumable");
        return -EINVAL;
    }
    if (opts->chmod_policy &&
        !g_strv_contains((const char *const[]){"ignore", "refuse", NULL}, opts->chmod_policy)) {
        fail(st, "--chmod-policy must be ignore or refuse");
        return -EINVAL;
    }

    if (opts->compose_mode && g_ascii_strcasecmp(opts->compose_mode, "auto") == 0) {
        opts->compose = true;
        opts->compose_auto = true;
    } else if (opts->compose_mode) {
        if (options_parse_bool(opts->compose_mode, &opts->compose) < 0) {
            fail(st, "--compose must be auto, on or off");
            return -EINVAL;
        }
        opts->compose_auto = false;
    }
    if (opts->debug_fuse) {
        opts->foreground = true; /* libfuse writes its trace to stderr */
        g_ptr_array_add(st->fuse_args, g_strdup("debug"));
    }
    if (st->disk_cache_off) {
        g_free(opts->cache_dir);
        opts->cache_dir = NULL;
    }
    if (st->write_blocks_given) {
        /* gcsfuse's write blocks are the parts of a streaming upload. */
        if (st->write_blocks < 0)
            opts->write_buffer_size = UNBOUNDED_SIZE;
        else if ((size_t)st->write_blocks > UNBOUNDED_SIZE / opts->write_part_size)
            opts->write_buffer_size = UNBOUNDED_SIZE;
        else
            opts->write_buffer_size = (size_t)st->write_blocks * opts->write_part_size;
    }
    /* --memory-limit is one figure for every buffer and cache (issue 22, item 11): the write
     * buffers take their share (a third by default, whole parts, at most 512 MiB; 0 parts =
     * staging files), read buffers and the memory cache the rest. Only gcsfuse's unbounded
     * write-global-max-blocks (-1) leaves the write buffers outside it. */
    if (!st->write_buffer_given && !st->write_blocks_given)
        opts->write_buffer_size = default_write_buffer_size(opts);
    if (opts->write_buffer_size < UNBOUNDED_SIZE &&
        (opts->memory_limit < opts->write_buffer_size ||
         opts->memory_limit - opts->write_buffer_size < 2 * opts->readahead_chunk)) {
        fail(st,
             "--write-buffer-size (%zu bytes) must leave at least twice --readahead-chunk "
             "(%zu bytes) of --memory-limit (%zu bytes) for reads",
             opts->write_buffer_size, opts->readahead_chunk, opts->memory_limit);
        return -EINVAL;
    }
    /* The memory cache lives inside the read budget and leaves at least half to read buffers. */
    if (opts->memory_cache_size > fluxfs_options_read_budget(opts) / 2)
        opts->memory_cache_size = fluxfs_options_read_budget(opts) / 2;

    if (st->fuse_args->len > 0) {
        g_ptr_array_add(st->fuse_args, NULL);
        g_strfreev(opts->fuse_args);
        opts->fuse_args = (char **)g_ptr_array_free(st->fuse_args, FALSE);
        st->fuse_args = NULL;
    }

    /* The gcs config points into the strings this struct owns. */
    opts->gcs.endpoint = opts->endpoint;
    opts->gcs.bucket = opts->bucket;
    opts->gcs.key_file = opts->key_file;
    opts->gcs.token_url = opts->token_url;
    /* gcsfuse: "a url for getting an access token when the key-file is absent". */
    opts->gcs.token_url_is_source = opts->token_url && !st->key_file_given && !opts->gcs.anonymous;
    opts->gcs.billing_project = opts->billing_project;
    if (opts->app_name && opts->app_name[0] != '\0') {
        g_free(opts->user_agent);
        opts->user_agent = g_strdup_printf("fluxfs/%s %s", FLUXFS_VERSION, opts->app_name);
        opts->gcs.user_agent = opts->user_agent;
    }
    if (st->warnings->len > 0) {
        g_ptr_array_add(st->warnings, NULL);
        g_strfreev(opts->warnings);
        opts->warnings = (char **)g_ptr_array_free(st->warnings, FALSE);
        st->warnings = NULL;
    }
    /* TLS trust as OpenSSL and Go programs take it from the environment; --ca-file first. */
    const char *cert_file = getenv("SSL_CERT_FILE");
    const char *cert_dir = getenv("SSL_CERT_DIR");
    if (!opts->ca_file && cert_file && cert_file[0] != '\0')
        opts->ca_file = g_strdup(cert_file);
    if (!opts->ca_dir && cert_dir && cert_dir[0] != '\0')
        opts->ca_dir = g_strdup(cert_dir);
    opts->gcs.ca_file = opts->ca_file;
    opts->gcs.ca_dir = opts->ca_dir;
    opts->gcs.log_requests = opts->debug_gcs;
    if (!opts->prometheus_address || opts->prometheus_address[0] == '\0') {
        g_free(opts->prometheus_address);
        opts->prometheus_address = g_strdup("127.0.0.1");
    }
    return 0;
}

/* ---- --config-file ------------------------------------------------------------------------ */

static int apply_list(struct parse_state *st, const char *list);

/* One gcsfuse config key, as its flag (config_file.c maps gcsfuse's keys to gcsfuse's flags),
 * from the config file or an -o option; shown names it in errors and warnings. */
static void apply_setting(struct parse_state *st, const struct config_setting *setting,
                          const char *shown)
{
    if (st->error)
        return;
    /* No setting holds a line break (a multi-line YAML scalar): refused before it can reach a
     * message or a path. */
    for (const char *c = setting->value; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            fail(st, "key '%s': the value holds a control character (a line break?)", setting->key);
            return;
        }
    }
    if (strcmp(setting->flag, "o") == 0) {
        apply_list(st, setting->value);
        return;
    }
    bool negated;
    const struct option_spec *spec = find_option(setting->flag, &negated);
    if (!spec) { /* every flag of the key table is in the option table (unit-tested) */
        fail(st, "key '%s' has no option", setting->key);
        return;
    }
    apply_option(st, spec, false, setting->value, shown);
}

static void apply_config_setting(const struct config_setting *setting, void *user)
{
    apply_setting(user, setting, setting->key);
}

/* The last --config-file (or -o config_file=FILE) on the command line, or NULL (g_free). */
static char *config_file_argument(int argc, char **argv)
{
    char *found = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0)
            break;
        const char *value = NULL;
        if (g_str_has_prefix(arg, "--config-file") || g_str_has_prefix(arg, "--config_file")) {
            const char *rest = arg + strlen("--config-file");
            if (*rest == '=')
                value = rest + 1;
            else if (*rest == '\0' && i + 1 < argc)
                value = argv[++i];
            if (value) {
                g_free(found);
                found = g_strdup(value);
            }
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--o") == 0 ||
                   (arg[0] == '-' && arg[1] == 'o' && arg[2] != '\0')) {
            const char *list = arg[1] == 'o' && arg[2] ? arg + 2 : (i + 1 < argc ? argv[++i] : "");
            char **items = options_split_list(list);
            for (char **item = items; *item; item++) {
                if (g_str_has_prefix(*item, "config_file=") ||
                    g_str_has_prefix(*item, "config-file=")) {
                    g_free(found);
                    found = g_strdup(*item + strlen("config-file="));
                }
            }
            g_strfreev(items);
        }
    }
    return found;
}

enum options_parse_result fluxfs_options_parse(struct fluxfs_options *opts, int argc, char **argv,
                                               char **error)
{
    struct parse_state st = {
        .opts = opts,
        .fuse_args = g_ptr_array_new_with_free_func(g_free),
        .positionals = g_ptr_array_new(),
        .warnings = g_ptr_array_new_with_free_func(g_free),
    };
    /* gcsfuse's --config-file first, so that the command line overrides it. */
    char *config_path = config_file_argument(argc, argv);
    if (config_path) {
        char *context = g_strdup_printf("config file %s: ", config_path);
        char *config_error = NULL;
        st.context = context;
        if (config_file_read(config_path, apply_config_setting, &st, (void **)&st.warnings,
                             &config_error) < 0) {
            g_free(st.error);
            st.error = config_error; /* a malformed file: its error comes first */
        }
        st.context = NULL;
        g_free(context);
    }
    bool only_positionals = false;
    for (int i = 1; i < argc && !st.error; i++) {
        const char *arg = argv[i];
        if (only_positionals || arg[0] != '-' || arg[1] == '\0')
            g_ptr_array_add(st.positionals, (void *)arg);
        else if (strcmp(arg, "--") == 0)
            only_positionals = true;
        else if (arg[1] == '-')
            apply_long(&st, argc, argv, &i);
        else
            apply_short(&st, argc, argv, &i);
    }

    enum options_parse_result result = OPTIONS_PARSE_MOUNT;
    if (!st.error && st.help)
        result = OPTIONS_PARSE_HELP;
    else if (!st.error && st.version)
        result = OPTIONS_PARSE_VERSION;
    else if (!st.error) {
        finish_options(&st);
        if (st.error && config_path) {
            /* The checks of the whole set: its values may come from the file. */
            char *whole = g_strdup_printf("%s (options from the command line and config file "
                                          "%s)",
                                          st.error, config_path);
            g_free(st.error);
            st.error = whole;
        }
    }
    g_free(config_path);

    if (st.error) {
        *error = st.error;
        result = OPTIONS_PARSE_ERROR;
    }
    if (st.fuse_args)
        g_ptr_array_free(st.fuse_args, TRUE);
    g_ptr_array_free(st.positionals, TRUE);
    if (st.warnings)
        g_ptr_array_free(st.warnings, TRUE);
    return result;
}

/* ---- help ---------------------------------------------------------------------------------- */

#define HELP_INDENT 32
#define HELP_WIDTH  80

/* Prints text word-wrapped into the help column; the cursor is at column `column`. */
static void print_wrapped(FILE *out, int column, const char *text)
{
    if (column > HELP_INDENT) {
        fputc('\n', out);
        column = 0;
    }
    fprintf(out, "%*s", HELP_INDENT - column, "");
    column = HELP_INDENT;
    char **words = g_strsplit(text, " ", -1);
    for (char **w = words; *w; w++) {
        int len = (int)strlen(*w);
        if (column > HELP_INDENT && column + 1 + len > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_INDENT, "");
            column = HELP_INDENT;
        }
        if (column > HELP_INDENT) {
            fputc(' ', out);
            column++;
        }
        fputs(*w, out);
        column += len;
    }
    fputc('\n', out);
    g_strfreev(words);
}

static void print_option_help(FILE *out, const struct option_spec *spec)
{
    GString *left = g_string_new("  ");
    if (spec->short_name)
        g_string_append_printf(left, "-%c, ", spec->short_name);
    else
        g_string_append(left, "    ");
    g_string_append_printf(left, "--%s", spec->name);
    if (spec->metavar && spec_takes_value(spec))
        g_string_append_printf(left, " %s", spec->metavar);
    g_string_append_c(left, ' ');
    fputs(left->str, out);

    GString *text = g_string_new(spec->help);
    if (spec->def_shown)
        g_string_append_printf(text, " (default: %s)", spec->def_shown);
    else if (spec->def)
        g_string_append_printf(text, " (default %s)", spec->def);
    bool first_alias = true;
    for (size_t i = 0; i < option_table_size; i++) {
        const char *target = option_table[i].alias_of;
        size_t name_len = strlen(spec->name);
        if (target && strncmp(target, spec->name, name_len) == 0 &&
            (target[name_len] == '\0' || target[name_len] == ' ')) {
            g_string_append_printf(text, "%s--%s", first_alias ? " (gcsfuse: " : ", ",
                                   option_table[i].name);
            first_alias = false;
        }
    }
    if (!first_alias)
        g_string_append_c(text, ')');
    print_wrapped(out, (int)left->len, text->str);
    g_string_free(text, TRUE);
    g_string_free(left, TRUE);
}

void fluxfs_options_print_help(FILE *out, const char *program)
{
    fprintf(out,
            "Usage: %s [OPTIONS] BUCKET[/PREFIX] MOUNTPOINT\n"
            "Mounts a Cloud Storage bucket (or a prefix of it) as a directory.\n"
            "\n"
            "Every --long-option can also be given as -o long_option[=VALUE] (dashes or\n"
            "underscores), so fstab and mount -t fuse.fluxfs work; boolean options accept\n"
            "--no-NAME and --NAME=false. fstab-only keys (rw, auto, noauto, user, nofail,\n"
            "_netdev, x-systemd.*) are ignored. The gcsfuse spellings shown below are\n"
            "accepted too, as is gcsfuse's form \"BUCKET MOUNTPOINT --only-dir PREFIX\".\n",
            program);
    for (int topic = TOPIC_MOUNTING; topic < TOPIC_HIDDEN; topic++) {
        fprintf(out, "\n%s:\n", option_topic_titles[topic]);
        if (topic == TOPIC_MOUNTING) {
            fputs("  -o OPT[,OPT...] ", out);
            print_wrapped(out, 18,
                          "any long option as key[=value], comma-separated (\\, for a literal "
                          "comma); also ro, allow_other, default_permissions, fsname=, subtype=");
        }
        for (size_t i = 0; i < option_table_size; i++) {
            if ((int)option_table[i].topic == topic && option_table[i].help)
                print_option_help(out, &option_table[i]);
        }
    }
    fprintf(out,
            "\nEnvironment:\n"
            "  STORAGE_EMULATOR_HOST         use this endpoint with anonymous access (as\n"
            "                                Google's client libraries do), unless --endpoint\n"
            "                                is given\n"
            "  GOOGLE_APPLICATION_CREDENTIALS\n"
            "                                service-account or authorized_user key file\n"
            "\nExit status: 0 mounted (or unmounted cleanly with -f), 1 the mount failed,\n"
            "2 bad command line.\n");
}

/* ---- man page (man/fluxfs.1, regenerated by scripts/gen-man) ------------------------------ */

/* text as troff: '-' is a minus (option names), '\' printed as itself, no control line. */
static void troff_append(GString *out, const char *text)
{
    if (text[0] == '.' || text[0] == '\'')
        g_string_append(out, "\\&");
    for (const char *c = text; *c; c++) {
        if (*c == '-')
            g_string_append(out, "\\-");
        else if (*c == '\\')
            g_string_append(out, "\\e");
        else
            g_string_append_c(out, *c);
    }
}

static void print_man_head(GString *out, const struct option_spec *spec)
{
    if (spec->man_head) {
        g_string_append_printf(out, "%s\n", spec->man_head);
        return;
    }
    char *name = g_strconcat("--", spec->name, NULL);
    if (spec->short_name) {
        g_string_append_printf(out, ".BR \\-%c \", \" ", spec->short_name);
        troff_append(out, name);
    } else if (spec->metavar && spec_takes_value(spec)) {
        g_string_append(out, ".BI ");
        troff_append(out, name);
        g_string_append(out, " \" ");
        troff_append(out, spec->metavar);
        g_string_append_c(out, '"');
    } else if (spec->kind == KIND_FLAG && spec->def) {
        g_string_append(out, ".BR ");
        troff_append(out, name);
        g_string_append(out, " \", \" ");
        char *negated = g_strconcat("--no-", spec->name, NULL);
        troff_append(out, negated);
        g_free(negated);
    } else {
        g_string_append(out, ".B ");
        troff_append(out, name);
    }
    g_string_append_c(out, '\n');
    g_free(name);
}

static void print_man_entry(GString *out, const struct option_spec *spec)
{
    g_string_append(out, ".TP\n");
    print_man_head(out, spec);
    const char *shown = spec->def_shown ? spec->def_shown : spec->def;
    GString *value = g_string_new(NULL);
    if (shown)
        troff_append(value, shown);
    if (!spec->man) {
        troff_append(out, spec->help);
        if (shown)
            g_string_append_printf(out, " (default%s %s)", spec->def_shown ? ":" : "", value->str);
    } else if (strstr(spec->man, "@DEFAULT@")) {
        if (!shown)
            g_error("option table: --%s: @DEFAULT@ but no default", spec->name);
        char **pieces = g_strsplit(spec->man, "@DEFAULT@", -1);
        char *joined = g_strjoinv(value->str, pieces);
        g_string_append(out, joined);
        g_free(joined);
        g_strfreev(pieces);
    } else {
        /* A default that is a description (def_shown) is the man text's to explain. */
        g_string_append(out, spec->man);
        if (spec->def && !spec->def_shown)
            g_string_append_printf(out, "\nDefault: \\fB%s\\fR.", value->str);
    }
    g_string_append_c(out, '\n');
    g_string_free(value, TRUE);
}

/* "-o" followed by the names of the entries of one kind, as -o keys ("_netdev", "fsname=NAME"). */
static void print_man_keys(GString *out, enum option_kind kind, const char *more, const char *what)
{
    g_string_append(out, ".TP\n.BR \\-o \"");
    const char *sep = " ";
    for (size_t i = 0; i < option_table_size; i++) {
        const struct option_spec *spec = &option_table[i];
        if (spec->kind != kind)
            continue;
        char *key = g_strdelimit(g_strdup(spec->name), "-", '_');
        g_string_append(out, sep);
        troff_append(out, key);
        if (spec->metavar)
            g_string_append_printf(out, "=\\fI%s\\fR", spec->metavar);
        g_free(key);
        sep = ", ";
    }
    if (more)
        g_string_append_printf(out, "%s%s", sep, more);
    g_string_append_printf(out, "\"\n%s\n", what);
}

int fluxfs_options_print_man(FILE *out, const char *part)
{
    GString *text = g_string_new(NULL);
    if (strcmp(part, "options") == 0) {
        for (int topic = TOPIC_MOUNTING; topic < TOPIC_GCSFUSE; topic++) {
            const char *title = option_topic_titles[topic];
            const char *paren = strstr(title, " (");
            g_string_append_printf(text, ".SS %.*s\n",
                                   (int)(paren ? (size_t)(paren - title) : strlen(title)), title);
            for (size_t i = 0; i < option_table_size; i++) {
                if ((int)option_table[i].topic == topic && option_table[i].help)
                    print_man_entry(text, &option_table[i]);
            }
            if (topic == TOPIC_MOUNTING) {
                print_man_keys(text, KIND_FUSE, NULL, "Passed to libfuse.");
                print_man_keys(text, KIND_IGNORED, "x\\-*, comment=*",
                               "fstab keys with no meaning for fluxfs: accepted and ignored.");
            }
        }
    } else if (strcmp(part, "gcsfuse") == 0) {
        for (size_t i = 0; i < option_table_size; i++) {
            if (option_table[i].topic == TOPIC_GCSFUSE && option_table[i].help)
                print_man_entry(text, &option_table[i]);
        }
    } else {
        g_string_free(text, TRUE);
        return -EINVAL;
    }
    fputs(text->str, out);
    g_string_free(text, TRUE);
    return 0;
}

/* ---- struct lifecycle (include/fluxfs/options.h) -------------------------------------------- */

void fluxfs_options_init(struct fluxfs_options *opts)
{
    memset(opts, 0, sizeof(*opts));
    /* Each default of the option table, through the parser the command line uses, so that a
     * default can never differ from what --help shows. A default the parser refuses is a bug
     * in the table (the unit tests run this). */
    struct parse_state st = {
        .opts = opts,
        .fuse_args = g_ptr_array_new_with_free_func(g_free),
        .warnings = g_ptr_array_new_with_free_func(g_free),
    };
    for (size_t i = 0; i < option_table_size; i++) {
        const struct option_spec *spec = &option_table[i];
        if (spec->def && apply_option(&st, spec, false, spec->def, spec->name) < 0)
            g_error("option table: the default of --%s: %s", spec->name, st.error);
    }
    g_ptr_array_free(st.fuse_args, TRUE);
    g_ptr_array_free(st.warnings, TRUE);
    opts->prefix = g_strdup("");
    opts->handover_fd = -1;
    opts->crash_memfd = opts->crash_sock = opts->crash_device_fd = -1;
    const char *emulator_host = getenv("STORAGE_EMULATOR_HOST");
    if (emulator_host && emulator_host[0] != '\0') {
        char *url = normalize_endpoint(emulator_host, true);
        if (url) {
            g_free(opts->endpoint);
            opts->endpoint = url;
            opts->gcs.anonymous = true;
        }
    }
    /* Defaults derived from others (def_shown in the table); finish_options derives them
     * again from the values given. */
    opts->entry_timeout_s = opts->stat_ttl_s;
    opts->attr_timeout_s = opts->stat_ttl_s;
    opts->write_buffer_size = default_write_buffer_size(opts);
    opts->compose = true; /* --compose auto */
    opts->compose_auto = true;
    opts->gcs.endpoint = opts->endpoint;
}

void fluxfs_options_clear(struct fluxfs_options *opts)
{
    if (!opts)
        return;
    g_free(opts->bucket);
    g_free(opts->prefix);
    g_free(opts->mountpoint);
    g_free(opts->endpoint);
    g_free(opts->key_file);
    g_free(opts->token_url);
    g_free(opts->ca_file);
    g_free(opts->ca_dir);
    g_free(opts->log_file);
    g_free(opts->prometheus_address);
    g_free(opts->cache_dir);
    g_free(opts->compose_mode);
    g_free(opts->temp_dir);
    g_free(opts->upload_mode);
    g_free(opts->chmod_policy);
    g_free(opts->billing_project);
    g_free(opts->app_name);
    g_free(opts->user_agent);
    g_strfreev(opts->warnings);
    g_strfreev(opts->fuse_args);
    memset(opts, 0, sizeof(*opts));
}
