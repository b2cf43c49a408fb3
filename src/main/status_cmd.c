/* `fluxfs status MOUNT [--json] [--interval SECONDS]`: what a running mount is doing, from its
 * control file
 * MOUNT/.fluxfs/status (a snapshot taken when the file is opened): the bucket, prefix, version
 * and uptime, FUSE requests and errors by kind, Cloud Storage requests by method and retries by
 * cause, bytes and the average throughput since the mount, the content cache, the prefetcher,
 * uploads, open writers and the memory budget. --json prints every figure of the file as one
 * JSON object (numbers as numbers) for scripts. --interval reads the file twice that far apart
 * and adds the rates in between (requests/s, bytes/s; rate_* keys in JSON). MOUNT may be any
 * path inside the mount. */
#include "status_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "fluxfs/json_string.h"

#define STATUS_FILE_MAX (1u << 20)

struct status {
    GPtrArray *keys;    /* in file order; owned by values */
    GHashTable *values; /* key -> value, both owned */
};

static const char *get(const struct status *status, const char *key)
{
    const char *value = g_hash_table_lookup(status->values, key);
    return value ? value : "";
}

static uint64_t num(const struct status *status, const char *key)
{
    return g_ascii_strtoull(get(status, key), NULL, 10);
}

static bool has(const struct status *status, const char *key)
{
    return g_hash_table_contains(status->values, key);
}

/* The mount root holding path: path itself or the nearest ancestor whose .fluxfs/status is a
 * regular file. NULL when there is none. */
static char *find_mount_root(const char *path)
{
    char *current = realpath(path, NULL);
    if (!current)
        return NULL;
    struct stat info;
    if (stat(current, &info) == 0 && !S_ISDIR(info.st_mode)) {
        char *parent = g_path_get_dirname(current);
        free(current);
        current = strdup(parent);
        g_free(parent);
    }
    for (;;) {
        char *file = g_build_filename(current, ".fluxfs", "status", NULL);
        bool found = stat(file, &info) == 0 && S_ISREG(info.st_mode);
        g_free(file);
        if (found)
            return current;
        if (strcmp(current, "/") == 0) {
            free(current);
            return NULL;
        }
        char *parent = g_path_get_dirname(current);
        free(current);
        current = strdup(parent);
        g_free(parent);
    }
}

/* 0 with *out filled, or -errno. A file without the "version" key is not fluxfs's. */
static int read_status(const char *root, struct status *out)
{
    char *path = g_build_filename(root, ".fluxfs", "status", NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    g_free(path);
    if (fd < 0)
        return -errno;
    GString *text = g_string_new(NULL);
    char buffer[16384];
    int err = 0;
    for (;;) {
        ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err = -errno;
            break;
        }
        if (n == 0)
            break;
        g_string_append_len(text, buffer, n);
        if (text->len > STATUS_FILE_MAX) {
            err = -EFBIG;
            break;
        }
    }
    close(fd);
    out->values = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    out->keys = g_ptr_array_new();
    if (err == 0) {
        char **lines = g_strsplit(text->str, "\n", -1);
        for (char **line = lines; *line; line++) {
            char *sep = strstr(*line, ": ");
            if (!sep || sep == *line)
                continue;
            char *key = g_strndup(*line, (gsize)(sep - *line));
            if (g_hash_table_contains(out->values, key)) {
                g_free(key);
                continue;
            }
            g_ptr_array_add(out->keys, key);
            g_hash_table_insert(out->values, key, g_strdup(sep + 2));
        }
        g_strfreev(lines);
        if (!has(out, "version") || !has(out, "fuse_requests"))
            err = -EPROTO;
    }
    g_string_free(text, TRUE);
    return err;
}

static void status_clear(struct status *status)
{
    if (status->keys)
        g_ptr_array_free(status->keys, TRUE); /* the array only: the table owns the keys */
    if (status->values)
        g_hash_table_destroy(status->values);
}

/* Whether value is a JSON number as the status file writes them: -?DIGITS(.DIGITS)?, no
 * leading zero. */
static bool json_number_like(const char *value)
{
    const char *p = value + (value[0] == '-');
    if (!g_ascii_isdigit(p[0]) || (p[0] == '0' && g_ascii_isdigit(p[1])))
        return false;
    while (g_ascii_isdigit(*p))
        p++;
    if (*p == '.') {
        p++;
        if (!g_ascii_isdigit(*p))
            return false;
        while (g_ascii_isdigit(*p))
            p++;
    }
    return *p == '\0';
}

static void print_json(const struct status *status)
{
    GString *out = g_string_new("{");
    for (guint i = 0; i < status->keys->len; i++) {
        const char *key = g_ptr_array_index(status->keys, i);
        const char *value = get(status, key);
        if (i > 0)
            g_string_append_c(out, ',');
        json_append_string(out, key);
        g_string_append_c(out, ':');
        if (json_number_like(value))
            g_string_append(out, value);
        else
            json_append_string(out, value);
    }
    g_string_append(out, "}\n");
    fputs(out->str, stdout);
    g_string_free(out, TRUE);
}

static char *bytes_text(double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    unsigned unit = 0;
    while (bytes >= 1024 && unit + 1 < G_N_ELEMENTS(units)) {
        bytes /= 1024;
        unit++;
    }
    return unit == 0 ? g_strdup_printf("%.0f B", bytes)
                     : g_strdup_printf("%.1f %s", bytes, units[unit]);
}

static char *duration_text(double seconds)
{
    uint64_t s = (uint64_t)seconds;
    if (s >= 86400)
        return g_strdup_printf("%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", s / 86400,
                               s % 86400 / 3600, s % 3600 / 60);
    if (s >= 3600)
        return g_strdup_printf("%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", s / 3600,
                               s % 3600 / 60, s % 60);
    if (s >= 60)
        return g_strdup_printf("%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
    return g_strdup_printf("%.1fs", seconds);
}

struct kind_count {
    const char *name;
    uint64_t count, errors;
};

static gint by_count_desc(gconstpointer a, gconstpointer b)
{
    const struct kind_count *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : strcmp(x->name, y->name);
}

/* "  name N (E errors), ..." wrapped at 100 columns, busiest first. */
static void print_kinds(GArray *kinds)
{
    g_array_sort(kinds, by_count_desc);
    GString *line = g_string_new("  ");
    for (guint i = 0; i < kinds->len; i++) {
        const struct kind_count *k = &g_array_index(kinds, struct kind_count, i);
        char item[160];
        if (k->errors)
            g_snprintf(item, sizeof(item), "%s %" PRIu64 " (%" PRIu64 " errors)", k->name, k->count,
                       k->errors);
        else
            g_snprintf(item, sizeof(item), "%s %" PRIu64, k->name, k->count);
        if (line->len > 2 && line->len + strlen(item) + 2 > 100) {
            printf("%s\n", line->str);
            g_string_assign(line, "  ");
        }
        if (line->len > 2)
            g_string_append(line, ", ");
        g_string_append(line, item);
    }
    if (line->len > 2)
        printf("%s\n", line->str);
    g_string_free(line, TRUE);
}

static void set_figure(struct status *s, const char *key, char *value)
{
    if (!g_hash_table_contains(s->values, key)) {
        char *owned = g_strdup(key);
        g_ptr_array_add(s->keys, owned);
        g_hash_table_insert(s->values, owned, value);
    } else {
        g_hash_table_insert(s->values, g_strdup(key), value);
    }
}

/* Adds to later the rates between the two snapshots (rate_*: per second of the daemon's own
 * uptime between them). Counters that went backwards (another daemon now) count as 0. */
static void add_rates(const struct status *earlier, struct status *later)
{
    static const struct {
        const char *counter, *rate;
    } rates[] = {
        {"fuse_requests", "rate_fuse_requests_per_s"},
        {"fuse_errors", "rate_fuse_errors_per_s"},
        {"gcs_requests", "rate_gcs_requests_per_s"},
        {"gcs_retries", "rate_gcs_retries_per_s"},
        {"gcs_received_bytes", "rate_gcs_received_bytes_per_s"},
        {"gcs_sent_bytes", "rate_gcs_sent_bytes_per_s"},
        {"gcs_read_bytes", "rate_gcs_read_bytes_per_s"},
    };
    double seconds = g_ascii_strtod(get(later, "uptime_s"), NULL) -
                     g_ascii_strtod(get(earlier, "uptime_s"), NULL);
    if (seconds <= 0)
        seconds = 0.1; /* the file's uptime has 0.1 s steps */
    set_figure(later, "rate_interval_s", g_strdup_printf("%.1f", seconds));
    for (size_t i = 0; i < G_N_ELEMENTS(rates); i++) {
        uint64_t before = num(earlier, rates[i].counter), after = num(later, rates[i].counter);
        double rate = after >= before ? (double)(after - before) / seconds : 0.0;
        set_figure(later, rates[i].rate, g_strdup_printf("%.1f", rate));
    }
}

static void print_summary(const char *root, const struct status *s)
{
    double uptime = g_ascii_strtod(get(s, "uptime_s"), NULL);
    char *up = duration_text(uptime);
    printf("fluxfs %s on %s: gs://%s/%s (pid %s, up %s)\n", get(s, "version"), root,
           get(s, "bucket"), get(s, "prefix"), get(s, "pid"), up);
    if (has(s, "handovers") && num(s, "handovers") > 0)
        printf("Hand-overs:    %s (the daemon was replaced without an unmount)\n",
               get(s, "handovers"));
    if (has(s, "crash_restarts") && num(s, "crash_restarts") > 0)
        printf("Crash restarts: %s (the serving process died and was replaced, "
               "--crash-restart)\n",
               get(s, "crash_restarts"));
    g_free(up);
    if (has(s, "metrics_url"))
        printf("Metrics:       %s\n", get(s, "metrics_url"));

    GArray *kinds = g_array_new(FALSE, FALSE, sizeof(struct kind_count));
    for (guint i = 0; i < s->keys->len; i++) {
        const char *key = g_ptr_array_index(s->keys, i);
        if (!g_str_has_prefix(key, "fuse_op_") || g_str_has_suffix(key, "_errors"))
            continue;
        struct kind_count k = {.name = key + strlen("fuse_op_"), .count = num(s, key)};
        char *errors_key = g_strconcat(key, "_errors", NULL);
        k.errors = num(s, errors_key);
        g_free(errors_key);
        if (k.count > 0)
            g_array_append_val(kinds, k);
    }
    printf("FUSE requests: %" PRIu64 ", %" PRIu64 " errors", num(s, "fuse_requests"),
           num(s, "fuse_errors"));
    if (num(s, "fuse_unsupported") > 0) /* isatty and other ioctls answered ENOTTY */
        printf(" (%" PRIu64 " unsupported ioctls, not errors)", num(s, "fuse_unsupported"));
    printf("\n");
    print_kinds(kinds);
    g_array_set_size(kinds, 0);

    for (guint i = 0; i < s->keys->len; i++) {
        const char *key = g_ptr_array_index(s->keys, i);
        if (g_str_has_prefix(key, "gcs_method_")) {
            struct kind_count k = {.name = key + strlen("gcs_method_"), .count = num(s, key)};
            g_array_append_val(kinds, k);
        }
    }
    printf("Cloud Storage: %" PRIu64 " requests, %" PRIu64 " answered with an error (404s "
           "included), %" PRIu64 " retries",
           num(s, "gcs_requests"), num(s, "gcs_request_failures"), num(s, "gcs_retries"));
    GString *causes = g_string_new(NULL);
    for (guint i = 0; i < s->keys->len; i++) {
        const char *key = g_ptr_array_index(s->keys, i);
        if (g_str_has_prefix(key, "gcs_retries_"))
            g_string_append_printf(causes, "%s%s %s", causes->len ? ", " : "",
                                   key + strlen("gcs_retries_"), get(s, key));
    }
    printf(causes->len ? " (%s)\n" : "%s\n", causes->str);
    g_string_free(causes, TRUE);
    print_kinds(kinds);
    g_array_free(kinds, TRUE);

    double received = (double)num(s, "gcs_received_bytes");
    double sent = (double)num(s, "gcs_sent_bytes");
    char *received_text = bytes_text(received), *sent_text = bytes_text(sent);
    char *down_rate = bytes_text(uptime > 0 ? received / uptime : 0);
    char *up_rate = bytes_text(uptime > 0 ? sent / uptime : 0);
    printf("Throughput:    received %s (%s/s), sent %s (%s/s), averages since the mount\n",
           received_text, down_rate, sent_text, up_rate);
    if (has(s, "rate_interval_s")) {
        char *recent_down =
            bytes_text(g_ascii_strtod(get(s, "rate_gcs_received_bytes_per_s"), NULL));
        char *recent_up = bytes_text(g_ascii_strtod(get(s, "rate_gcs_sent_bytes_per_s"), NULL));
        printf("Last %ss:%*s%s FUSE requests/s (%s errors/s), %s Cloud Storage requests/s, "
               "received %s/s, sent %s/s\n",
               get(s, "rate_interval_s"), (int)MAX(1, 8 - (int)strlen(get(s, "rate_interval_s"))),
               "", get(s, "rate_fuse_requests_per_s"), get(s, "rate_fuse_errors_per_s"),
               get(s, "rate_gcs_requests_per_s"), recent_down, recent_up);
        g_free(recent_down);
        g_free(recent_up);
    }
    g_free(received_text);
    g_free(sent_text);
    g_free(down_rate);
    g_free(up_rate);

    if (has(s, "cache_capacity")) {
        char *memory = bytes_text((double)num(s, "cache_memory_bytes"));
        char *disk = bytes_text((double)num(s, "cache_disk_bytes"));
        char *capacity = bytes_text((double)num(s, "cache_capacity"));
        printf("Cache:         %" PRIu64 " memory hits, %" PRIu64 " disk hits, %" PRIu64
               " misses, %" PRIu64 " evictions; %s in memory (%s entries), %s on disk, "
               "capacity %s\n",
               num(s, "cache_memory_hits"), num(s, "cache_disk_hits"), num(s, "cache_misses"),
               num(s, "cache_evictions"), memory, get(s, "cache_memory_entries"), disk, capacity);
        g_free(memory);
        g_free(disk);
        g_free(capacity);
    }
    if (has(s, "hints_total")) {
        char *prefetched = bytes_text((double)num(s, "bytes_prefetched"));
        printf("Prefetch:      hints %" PRIu64 " done of %" PRIu64 " (reader at %" PRIu64
               "), warmup %" PRIu64 " of %" PRIu64 ", %" PRIu64 " files / %s prefetched, %" PRIu64
               " failed, compose %s\n",
               num(s, "hints_done"), num(s, "hints_total"), num(s, "hint_position"),
               num(s, "warmup_done"), num(s, "warmup_total"), num(s, "files_prefetched"),
               prefetched, num(s, "files_failed"), get(s, "compose"));
        g_free(prefetched);
        if (has(s, "compose_decision"))
            printf("Compose:       %s\n", get(s, "compose_decision"));
        /* One hint list per writing process (DDP ranks): each one's progress. */
        if (has(s, "hint_lists"))
            printf("Hint lists:    %" PRIu64 " live (one per writing process), %" PRIu64
                   " hints naming no file, %" PRIu64 " lists of exited writers dropped\n",
                   num(s, "hint_lists"), num(s, "hints_missing"), num(s, "hint_lists_dropped"));
        for (guint i = 0; i < s->keys->len; i++) {
            const char *key = g_ptr_array_index(s->keys, i);
            if (g_str_has_prefix(key, "hint_list_"))
                printf("  process %-6s %s\n", key + strlen("hint_list_"), get(s, key));
        }
    }
    char *uploaded = bytes_text((double)num(s, "upload_bytes"));
    printf("Uploads:       %" PRIu64 " commits, %" PRIu64 " parts (%s), %" PRIu64
           " retries, %" PRIu64 " failures; %" PRIu64 " files open for writing\n",
           num(s, "upload_commits"), num(s, "upload_parts"), uploaded, num(s, "upload_retries"),
           num(s, "upload_failures"), num(s, "open_writers"));
    g_free(uploaded);
    if (has(s, "cost_dollars"))
        printf("Cost:          $%.4f so far at list prices (%" PRIu64 " class A, %" PRIu64
               " class B, %" PRIu64 " free operations; temporaries %.3f GiB-s live, %.3f GiB-s "
               "soft-deleted, %" PRIu64 " bytes noncurrent)\n",
               g_ascii_strtod(get(s, "cost_dollars"), NULL), num(s, "cost_class_a_ops"),
               num(s, "cost_class_b_ops"), num(s, "cost_free_ops"),
               g_ascii_strtod(get(s, "cost_temporary_gib_seconds"), NULL),
               g_ascii_strtod(get(s, "cost_soft_deleted_gib_seconds"), NULL),
               num(s, "cost_noncurrent_bytes"));
    char *total = bytes_text((double)num(s, "memory_limit"));
    char *rss = bytes_text((double)num(s, "memory_rss"));
    char *rss_peak = bytes_text((double)num(s, "memory_rss_peak"));
    printf("Memory:        resident %s (peak %s); --memory-limit %s\n", rss, rss_peak, total);
    g_free(total);
    g_free(rss);
    g_free(rss_peak);
    char *used = bytes_text((double)num(s, "memory_used"));
    char *limit = bytes_text((double)num(s, "memory_read_limit"));
    char *peak = bytes_text((double)num(s, "memory_peak"));
    printf("Read buffers:  %s of %s in use, memory cache included (peak %s)\n", used, limit, peak);
    g_free(used);
    g_free(limit);
    g_free(peak);
    used = bytes_text((double)num(s, "write_buffer_used"));
    limit = bytes_text((double)num(s, "write_buffer_limit"));
    peak = bytes_text((double)num(s, "write_buffer_peak"));
    printf("Write buffers: %s of %s in use (peak %s)\n", used, limit, peak);
    g_free(used);
    g_free(limit);
    g_free(peak);
}

bool fluxfs_status_command_applies(int argc, char **argv)
{
    return argc >= 2 && strcmp(argv[1], "status") == 0;
}

static int usage(const char *problem)
{
    if (problem)
        fprintf(stderr, "fluxfs status: %s\n", problem);
    fprintf(stderr, "Usage: fluxfs status MOUNT [--json] [--interval SECONDS]\n");
    return 2;
}

int fluxfs_status_command(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    double interval = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--interval") == 0 || g_str_has_prefix(argv[i], "--interval=")) {
            const char *value = strchr(argv[i], '=') ? strchr(argv[i], '=') + 1
                                : i + 1 < argc       ? argv[++i]
                                                     : NULL;
            char *end = NULL;
            interval = value ? g_ascii_strtod(value, &end) : 0;
            if (!value || end == value || *end != '\0' || !(interval > 0 && interval <= 3600))
                return usage("--interval needs a number of seconds in (0, 3600]");
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("Usage: fluxfs status MOUNT [--json] [--interval SECONDS]\n"
                   "Summarises what the fluxfs mount holding MOUNT is doing (from "
                   "MOUNT/.fluxfs/status);\n--json prints every figure as one JSON object; "
                   "--interval reads it twice that far\napart and adds the rates in "
                   "between.\n");
            return 0;
        } else if (argv[i][0] == '-') {
            char *problem = g_strdup_printf("unknown option '%s'", argv[i]);
            int rc = usage(problem);
            g_free(problem);
            return rc;
        } else if (path) {
            return usage("one MOUNT only");
        } else {
            path = argv[i];
        }
    }
    if (!path)
        return usage("MOUNT is missing");
    char *root = find_mount_root(path);
    if (!root) {
        fprintf(stderr, "fluxfs status: %s is not on a fluxfs mount\n", path);
        return 1;
    }
    struct status status = {0};
    int err = read_status(root, &status);
    if (err < 0) {
        if (err == -EPROTO)
            fprintf(stderr,
                    "fluxfs status: %s is not on a fluxfs mount (its .fluxfs/status is "
                    "not fluxfs's)\n",
                    path);
        else
            fprintf(stderr, "fluxfs status: cannot read %s/.fluxfs/status: %s\n", root,
                    g_strerror(-err));
        status_clear(&status);
        free(root);
        return 1;
    }
    if (interval > 0) {
        g_usleep((gulong)(interval * G_USEC_PER_SEC));
        struct status later = {0};
        err = read_status(root, &later);
        if (err < 0) {
            fprintf(stderr, "fluxfs status: cannot read %s/.fluxfs/status again: %s\n", root,
                    g_strerror(-err));
            status_clear(&later);
            status_clear(&status);
            free(root);
            return 1;
        }
        add_rates(&status, &later);
        status_clear(&status);
        status = later;
    }
    if (json)
        print_json(&status);
    else
        print_summary(root, &status);
    status_clear(&status);
    free(root);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
