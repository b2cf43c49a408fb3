/* `fluxfs prefetch PATH...`: the warm-up command. Walks each PATH (a file or a directory tree
 * on a running fluxfs mount), writes the files' mount-relative paths to MOUNT/.fluxfs/warmup,
 * and follows MOUNT/.fluxfs/status to draw a progress bar (files, bytes, rate, ETA) until the
 * daemon has handled every path. The daemon does the fetching (compose-batched, at full
 * parallelism, within its cache's capacity); this process only lists and watches. */
#include "prefetch_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#define WARMUP_POLL_US   200000
#define WARMUP_MAX_FILES (10u * 1000 * 1000)

/* The mount root holding path: the nearest ancestor with .fluxfs/status. */
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
        char *status = g_build_filename(current, ".fluxfs", "status", NULL);
        bool found = stat(status, &info) == 0;
        g_free(status);
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

/* nftw has no user pointer: the walk's state lives here for the duration of one walk. */
static struct {
    const char *root;
    size_t root_len;
    GString *text;
    uint64_t files, bytes;
} walk;

static int walk_visit(const char *path, const struct stat *info, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_F && S_ISREG(info->st_mode) && walk.files < WARMUP_MAX_FILES) {
        const char *rel = path + walk.root_len;
        while (*rel == '/')
            rel++;
        if (g_str_has_prefix(rel, ".fluxfs/"))
            return 0;
        g_string_append(walk.text, rel);
        g_string_append_c(walk.text, '\n');
        walk.files++;
        walk.bytes += (uint64_t)info->st_size;
    }
    return 0;
}

/* Reads one "key: value" counter from the status file; -1 when missing. */
static int64_t status_value(const char *status_text, const char *key)
{
    size_t key_len = strlen(key);
    for (const char *line = status_text; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ':')
            return strtoll(line + key_len + 1, NULL, 10);
    }
    return -1;
}

static char *read_status(const char *root)
{
    char *path = g_build_filename(root, ".fluxfs", "status", NULL);
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        text = NULL;
    g_free(path);
    return text;
}

static void format_bytes(double bytes, char *out, size_t size)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (bytes >= 1024 && unit < 4) {
        bytes /= 1024;
        unit++;
    }
    snprintf(out, size, unit ? "%.1f %s" : "%.0f %s", bytes, units[unit]);
}

static void draw_progress(FILE *out, bool tty, uint64_t files_done, uint64_t files_total,
                          uint64_t bytes_done, uint64_t bytes_total, double elapsed_s, bool final)
{
    double fraction = files_total ? (double)files_done / (double)files_total : 1.0;
    int width = 30, filled = (int)(fraction * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    double rate = elapsed_s > 0 ? (double)bytes_done / elapsed_s : 0;
    double files_rate = elapsed_s > 0 ? (double)files_done / elapsed_s : 0;
    double eta = files_rate > 0 ? (double)(files_total - files_done) / files_rate : 0;
    char done_text[32], total_text[32], rate_text[32];
    format_bytes((double)bytes_done, done_text, sizeof(done_text));
    format_bytes((double)bytes_total, total_text, sizeof(total_text));
    format_bytes(rate, rate_text, sizeof(rate_text));
    fprintf(out, "%s[%s] %" PRIu64 "/%" PRIu64 " files  %s/%s  %s/s  %.0f files/s  ETA %.0fs%s",
            tty ? "\r" : "", bar, files_done, files_total, done_text, total_text, rate_text,
            files_rate, eta, tty && !final ? "  " : "\n");
    fflush(out);
}

/* The warm-up counters of a status snapshot, less those of base (another warm-up of the same
 * mount at the same time mixes in: the daemon counts per mount). */
struct warm_counts {
    int64_t total, done, bytes, fetched, cached, no_room, too_large, failed, missing;
};

static void read_counts(const char *text, struct warm_counts *out)
{
    out->total = status_value(text, "warmup_total");
    out->done = status_value(text, "warmup_done");
    out->bytes = status_value(text, "warmup_bytes");
    out->fetched = status_value(text, "warmup_fetched");
    out->cached = status_value(text, "warmup_cached");
    out->no_room = status_value(text, "warmup_skipped");
    out->too_large = status_value(text, "warmup_too_large");
    out->failed = status_value(text, "warmup_failed");
    out->missing = status_value(text, "warmup_missing");
}

static uint64_t delta(int64_t now, int64_t base)
{
    return now > base && base >= 0 ? (uint64_t)(now - base) : 0;
}

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static int warm_one_mount(const char *root, GPtrArray *paths)
{
    walk.text = g_string_new(NULL);
    walk.files = 0;
    walk.bytes = 0;
    walk.root = root;
    walk.root_len = strlen(root);
    for (guint i = 0; i < paths->len; i++) {
        if (nftw(g_ptr_array_index(paths, i), walk_visit, 32, FTW_PHYS) != 0)
            fprintf(stderr, "fluxfs prefetch: cannot walk %s: %s\n",
                    (const char *)g_ptr_array_index(paths, i), g_strerror(errno));
    }
    uint64_t files_total = walk.files, bytes_total = walk.bytes;
    char *before = read_status(root);
    if (!before || status_value(before, "warmup_fetched") < 0) {
        fprintf(stderr, "fluxfs prefetch: cannot read the warm-up counters in %s/.fluxfs/status\n",
                root);
        g_free(before);
        g_string_free(walk.text, TRUE);
        return 1;
    }
    struct warm_counts base;
    read_counts(before, &base);
    g_free(before);

    /* Read-write: a session, whose paths still queued are dropped when this process ends
     * (however it ends: the kernel closes the descriptor). */
    char *control = g_build_filename(root, ".fluxfs", "warmup", NULL);
    int fd = open(control, O_RDWR | O_CLOEXEC);
    int status = 0;
    if (fd < 0) {
        fprintf(stderr, "fluxfs prefetch: %s: %s\n", control, g_strerror(errno));
        status = 1;
    } else {
        const char *data = walk.text->str;
        size_t left = walk.text->len;
        while (left > 0 && status == 0 && !stop_signal) {
            ssize_t n = write(fd, data, MIN(left, (size_t)1 << 20));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                fprintf(stderr, "fluxfs prefetch: writing %s: %s\n", control, g_strerror(errno));
                status = 1;
                break;
            }
            data += n;
            left -= (size_t)n;
        }
    }
    g_free(control);
    g_string_free(walk.text, TRUE);
    if (status != 0) {
        if (fd >= 0)
            close(fd);
        return status;
    }

    bool tty = isatty(STDERR_FILENO);
    gint64 start = g_get_monotonic_time();
    struct warm_counts now = base;
    for (;;) {
        if (stop_signal)
            break;
        char *text = read_status(root);
        if (!text) {
            fprintf(stderr, "\nfluxfs prefetch: the mount at %s went away\n", root);
            close(fd);
            return 1;
        }
        read_counts(text, &now);
        g_free(text);
        /* The daemon's queue is bounded: what it did not take is not waited for. */
        uint64_t expected = MIN(files_total, delta(now.total, base.total));
        uint64_t done = delta(now.done, base.done);
        double elapsed = (double)(g_get_monotonic_time() - start) / 1e6;
        bool final = done >= expected;
        if (tty || final)
            draw_progress(stderr, tty, done, expected, delta(now.bytes, base.bytes), bytes_total,
                          elapsed, final);
        if (final)
            break;
        g_usleep(WARMUP_POLL_US);
    }
    close(fd); /* ends the session: anything still queued is dropped */
    double elapsed = (double)(g_get_monotonic_time() - start) / 1e6;
    uint64_t fetched = delta(now.fetched, base.fetched), cached = delta(now.cached, base.cached);
    uint64_t no_room = delta(now.no_room, base.no_room);
    uint64_t too_large = delta(now.too_large, base.too_large);
    uint64_t failed = delta(now.failed, base.failed), missing = delta(now.missing, base.missing);
    uint64_t not_queued = files_total - MIN(files_total, delta(now.total, base.total));
    if (stop_signal) {
        if (tty)
            fputc('\n', stderr);
        fprintf(stderr,
                "fluxfs prefetch: cancelled by signal %d; the paths not started yet "
                "were dropped\n",
                (int)stop_signal);
    }
    printf("warmed %" PRIu64 " files (%" PRIu64 " fetched, %" PRIu64 " already cached), %" PRIu64
           " bytes in %.2f s\n",
           fetched + cached, fetched, cached, delta(now.bytes, base.bytes), elapsed);
    if (no_room)
        printf("skipped %" PRIu64 " files: no room left in the cache (--cache-size)\n", no_room);
    if (too_large)
        printf("skipped %" PRIu64 " files: larger than --small-file-threshold\n", too_large);
    if (failed)
        printf("skipped %" PRIu64 " files: the download failed (see the mount's log)\n", failed);
    if (missing)
        printf("skipped %" PRIu64 " files: gone from the bucket, or not a file\n", missing);
    if (not_queued)
        printf("skipped %" PRIu64 " files: the daemon's warm-up queue was full\n", not_queued);
    fflush(stdout);
    if (stop_signal)
        return 128 + (int)stop_signal;
    return failed ? 1 : 0;
}

static int usage(const char *problem)
{
    if (problem)
        fprintf(stderr, "fluxfs prefetch: %s\n", problem);
    fprintf(stderr, "Usage: fluxfs prefetch PATH...  (PATH: a file or directory on a fluxfs "
                    "mount)\n");
    return 2;
}

int fluxfs_prefetch_command(int argc, char **argv)
{
    /* Paths grouped by the mount they are on (usually one). */
    GHashTable *by_root =
        g_hash_table_new_full(g_str_hash, g_str_equal, free, (GDestroyNotify)g_ptr_array_unref);
    GPtrArray *roots = g_ptr_array_new();
    int status = 0;
    if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) {
        g_ptr_array_free(roots, TRUE);
        g_hash_table_destroy(by_root);
        return argc < 3 ? usage("no PATH given") : (usage(NULL), 0);
    }
    struct sigaction action = {.sa_handler = on_stop_signal};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    for (int i = 2; i < argc; i++) {
        char *root = find_mount_root(argv[i]);
        if (!root) {
            fprintf(stderr, "fluxfs prefetch: %s is not on a fluxfs mount\n", argv[i]);
            status = 1;
            continue;
        }
        GPtrArray *paths = g_hash_table_lookup(by_root, root);
        if (!paths) {
            paths = g_ptr_array_new_with_free_func(free);
            g_hash_table_insert(by_root, root, paths);
            g_ptr_array_add(roots, root);
        } else {
            free(root);
        }
        g_ptr_array_add(paths, realpath(argv[i], NULL));
    }
    for (guint i = 0; i < roots->len && status == 0; i++) {
        const char *root = g_ptr_array_index(roots, i);
        status = warm_one_mount(root, g_hash_table_lookup(by_root, root));
    }
    g_ptr_array_free(roots, TRUE);
    g_hash_table_destroy(by_root);
    return status;
}
