/* gcs-smoke: a small command-line client of the gcs layer, for integration tests of the
 * transport (tests/integration/test_gcs_transport.py, test_auth.py) against the emulator.
 *
 *   gcs-smoke [--endpoint URL] [--anonymous] [--key-file F] [--token-url U] [--retries N]
 *             [--deadline S] [--stall S] BUCKET COMMAND [ARGS]
 *   check                     mount-time access check
 *   list PREFIX [DELIM [MAX]] every page; "O\tname\tsize\tgeneration\tcrc32c" / "P\tprefix"
 *   stat NAME                 "name\tsize\tgeneration\tmetageneration\tupdated_ns\tmtime_ns\tcrc"
 *   read NAME OFFSET LEN      the bytes to stdout (blocking gcs_read)
 *   readall NAME              stat, then one whole-object read verified by crc32c
 *   pread NAME CHUNK          stat, then all CHUNK-sized ranges at once (gcs_read_async)
 *   statloop NAME COUNT MS    COUNT stats MS milliseconds apart (token refresh tests)
 * On exit prints "STATS {json}" to stderr; on failure "ERROR errno-name: message" and exits 1. */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fluxfs/gcs.h"
#include "fluxfs/log.h"

static int fail(int err, const char *what)
{
    fprintf(stderr, "ERROR %s: %s\n", g_strerror(-err), what ? what : "");
    return 1;
}

static int command_list(struct gcs_client *client, int argc, char **argv)
{
    struct gcs_list_params params = {
        .prefix = argc > 0 ? argv[0] : NULL,
        .delimiter = argc > 1 && *argv[1] ? argv[1] : NULL,
        .max_results = argc > 2 ? (unsigned)atoi(argv[2]) : 0,
    };
    char *token = NULL;
    unsigned pages = 0;
    do {
        params.page_token = token;
        struct gcs_list_page page = {0};
        int err = gcs_list(client, &params, &page);
        if (err < 0) {
            g_free(token);
            return fail(err, "list");
        }
        pages++;
        for (guint i = 0; i < page.objects->len; i++) {
            struct gcs_object *obj = g_ptr_array_index(page.objects, i);
            printf("O\t%s\t%" PRIu64 "\t%" PRId64 "\t%08x\n", obj->name, obj->size,
                   obj->generation, obj->has_crc32c ? obj->crc32c : 0);
        }
        for (guint i = 0; i < page.prefixes->len; i++)
            printf("P\t%s\n", (char *)g_ptr_array_index(page.prefixes, i));
        g_free(token);
        token = g_strdup(page.next_page_token);
        gcs_list_page_clear(&page);
    } while (token);
    fprintf(stderr, "PAGES %u\n", pages);
    return 0;
}

static int command_stat(struct gcs_client *client, const char *name)
{
    struct gcs_object obj;
    int err = gcs_stat(client, name, &obj);
    if (err < 0)
        return fail(err, name);
    printf("%s\t%" PRIu64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%08x\n", obj.name,
           obj.size, obj.generation, obj.metageneration, obj.updated_ns, obj.mtime_ns,
           obj.has_crc32c ? obj.crc32c : 0);
    gcs_object_clear(&obj);
    return 0;
}

static int command_read(struct gcs_client *client, const char *name, uint64_t offset, size_t len)
{
    void *buf = g_malloc(len ? len : 1);
    struct gcs_read_request req = {.name = name, .offset = offset, .len = len, .buf = buf};
    size_t got = 0;
    int err = gcs_read(client, &req, &got);
    if (err == 0)
        fwrite(buf, 1, got, stdout);
    g_free(buf);
    return err < 0 ? fail(err, name) : 0;
}

static int command_readall(struct gcs_client *client, const char *name, bool tamper_crc)
{
    struct gcs_object obj;
    int err = gcs_stat(client, name, &obj);
    if (err < 0)
        return fail(err, name);
    void *buf = g_malloc(obj.size + 1);
    struct gcs_read_request req = {
        .name = name, .generation = obj.generation, .len = obj.size + 1, .buf = buf,
        .has_expected_crc32c = obj.has_crc32c,
        .expected_crc32c = tamper_crc ? obj.crc32c ^ 1 : obj.crc32c,
        .object_size = obj.size, .whole_object = true,
    };
    size_t got = 0;
    err = gcs_read(client, &req, &got);
    if (err == 0)
        fwrite(buf, 1, got, stdout);
    g_free(buf);
    gcs_object_clear(&obj);
    return err < 0 ? fail(err, name) : 0;
}

struct parallel_reads {
    GMutex lock;
    GCond cond;
    unsigned outstanding;
    int first_error;
    uint64_t bytes;
};

static void on_chunk(int err, size_t got, void *user)
{
    struct parallel_reads *state = user;
    g_mutex_lock(&state->lock);
    if (err < 0 && state->first_error == 0)
        state->first_error = err;
    state->bytes += got;
    if (--state->outstanding == 0)
        g_cond_signal(&state->cond);
    g_mutex_unlock(&state->lock);
}

static int command_pread(struct gcs_client *client, const char *name, size_t chunk)
{
    struct gcs_object obj;
    int err = gcs_stat(client, name, &obj);
    if (err < 0)
        return fail(err, name);
    uint8_t *buf = g_malloc(obj.size + 1);
    struct parallel_reads state = {0};
    g_mutex_init(&state.lock);
    g_cond_init(&state.cond);
    unsigned chunks = (unsigned)((obj.size + chunk - 1) / chunk);
    state.outstanding = chunks + 1; /* +1 held until every read is submitted */
    for (unsigned i = 0; i < chunks; i++) {
        struct gcs_read_request req = {
            .name = name, .generation = obj.generation, .offset = (uint64_t)i * chunk,
            .len = MIN(chunk, obj.size - (uint64_t)i * chunk), .buf = buf + (uint64_t)i * chunk,
        };
        gcs_read_async(client, &req, on_chunk, &state);
    }
    on_chunk(0, 0, &state);
    g_mutex_lock(&state.lock);
    while (state.outstanding > 0)
        g_cond_wait(&state.cond, &state.lock);
    g_mutex_unlock(&state.lock);
    err = state.first_error;
    if (err == 0 && state.bytes != obj.size)
        err = -EIO;
    if (err == 0)
        fwrite(buf, 1, obj.size, stdout);
    g_free(buf);
    gcs_object_clear(&obj);
    return err < 0 ? fail(err, name) : 0;
}

int main(int argc, char **argv)
{
    struct gcs_client_config config = {0};
    int i = 1;
    for (; i < argc && g_str_has_prefix(argv[i], "--"); i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--anonymous") == 0) {
            config.anonymous = true;
            continue;
        }
        if (strcmp(argv[i], "--endpoint") == 0)
            config.endpoint = value;
        else if (strcmp(argv[i], "--key-file") == 0)
            config.key_file = value;
        else if (strcmp(argv[i], "--token-url") == 0)
            config.token_url = value;
        else if (strcmp(argv[i], "--retries") == 0)
            config.max_retries = atoi(value);
        else if (strcmp(argv[i], "--deadline") == 0)
            config.request_deadline_s = atof(value);
        else if (strcmp(argv[i], "--stall") == 0)
            config.stall_timeout_s = atof(value);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
        i++;
    }
    if (argc - i < 2) {
        fprintf(stderr, "usage: gcs-smoke [options] BUCKET COMMAND [ARGS]\n");
        return 2;
    }
    const char *level_text = g_getenv("GCS_SMOKE_LOG");
    enum flog_level level = FLOG_WARN;
    if (level_text)
        flog_parse_level(level_text, &level);
    flog_init(level, false, NULL);
    config.bucket = argv[i];
    const char *command = argv[i + 1];
    char **args = argv + i + 2;
    int nargs = argc - i - 2;

    struct gcs_client *client = NULL;
    char *error = NULL;
    int err = gcs_client_new(&config, &client, &error);
    if (err < 0) {
        fail(err, error);
        g_free(error);
        return 1;
    }
    int rc;
    if (strcmp(command, "check") == 0) {
        err = gcs_check_access(client, &error);
        rc = err < 0 ? fail(err, error) : (printf("ok\n"), 0);
        g_free(error);
    } else if (strcmp(command, "list") == 0) {
        rc = command_list(client, nargs, args);
    } else if (strcmp(command, "stat") == 0 && nargs == 1) {
        rc = command_stat(client, args[0]);
    } else if (strcmp(command, "read") == 0 && nargs == 3) {
        rc = command_read(client, args[0], g_ascii_strtoull(args[1], NULL, 10),
                          (size_t)g_ascii_strtoull(args[2], NULL, 10));
    } else if (strcmp(command, "readall") == 0 && nargs >= 1) {
        rc = command_readall(client, args[0], nargs > 1 && strcmp(args[1], "tamper") == 0);
    } else if (strcmp(command, "statloop") == 0 && nargs == 3) {
        rc = 0;
        for (int n = atoi(args[1]); n > 0 && rc == 0; n--) {
            rc = command_stat(client, args[0]);
            g_usleep((gulong)atoi(args[2]) * 1000);
        }
    } else if (strcmp(command, "pread") == 0 && nargs == 2) {
        rc = command_pread(client, args[0], (size_t)g_ascii_strtoull(args[1], NULL, 10));
    } else {
        fprintf(stderr, "unknown command %s\n", command);
        rc = 2;
    }
    fflush(stdout);
    struct gcs_stats stats;
    gcs_get_stats(client, &stats);
    fprintf(stderr,
            "STATS {\"requests\":%" PRIu64 ",\"retries\":%" PRIu64 ",\"failures\":%" PRIu64
            ",\"bytes_downloaded\":%" PRIu64 ",\"list_calls\":%" PRIu64 ",\"get_calls\":%" PRIu64
            ",\"media_calls\":%" PRIu64 "}\n",
            stats.requests, stats.retries, stats.failures, stats.bytes_downloaded,
            stats.list_calls, stats.get_calls, stats.media_calls);
    gcs_client_free(client);
    flog_close();
    return rc;
}
