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
 * Writes (options anywhere after the command; objects print as stat does, plus a column with
 * the symlink target):
 *   upload NAME FILE          one-request upload from a buffer (--fd: from the file, pread)
 *   multipart NAME FILE PART  XML multipart upload, parts of PART bytes in parallel (--inflight
 *                             N, default 8; --fd; --abort: abort instead of completing)
 *   mpbegin NAME              begin a multipart upload, print its id
 *   mpabort NAME UPLOAD_ID    abort it
 *   uploads PREFIX            multipart uploads in progress: "name\tupload_id"
 *   resumable NAME FILE CHUNK resumable upload in CHUNK-byte chunks (--unknown-size, --fd)
 *   compose DEST SRC[#GEN]... compose the sources (pinned when #GEN is given)
 *   copy SRC SRCGEN DEST      objects.rewrite loop
 *   delete NAME [GEN]         delete (GEN pins a generation)
 *   patch NAME                set --mtime S, --symlink T, --ctype CT
 *   testperm PERM...          "PERM\t1" when held, "PERM\t0" when not
 *   Write options: --ifgen G (ifGenerationMatch), --ifmeta M (ifMetagenerationMatch),
 *   --mtime S, --symlink T, --ctype CT, --badcrc (send a wrong crc32c), --nocrc.
 * On exit prints "STATS {json}" to stderr; on failure "ERROR errno-name: message" and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/crc32c.h"
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
            printf("O\t%s\t%" PRIu64 "\t%" PRId64 "\t%08x\n", obj->name, obj->size, obj->generation,
                   obj->has_crc32c ? obj->crc32c : 0);
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

static void print_object(const struct gcs_object *obj)
{
    printf("%s\t%" PRIu64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%08x\t%s\n",
           obj->name, obj->size, obj->generation, obj->metageneration, obj->updated_ns,
           obj->mtime_ns, obj->has_crc32c ? obj->crc32c : 0,
           obj->symlink_target ? obj->symlink_target : "");
}

static int command_stat(struct gcs_client *client, const char *name)
{
    struct gcs_object obj;
    int err = gcs_stat(client, name, &obj);
    if (err < 0)
        return fail(err, name);
    print_object(&obj);
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
        .name = name,
        .generation = obj.generation,
        .len = obj.size + 1,
        .buf = buf,
        .has_expected_crc32c = obj.has_crc32c,
        .expected_crc32c = tamper_crc ? obj.crc32c ^ 1 : obj.crc32c,
        .object_size = obj.size,
        .whole_object = true,
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
            .name = name,
            .generation = obj.generation,
            .offset = (uint64_t)i * chunk,
            .len = MIN(chunk, obj.size - (uint64_t)i * chunk),
            .buf = buf + (uint64_t)i * chunk,
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

/* ---- writes ---- */

struct write_options {
    GPtrArray *args; /* positional arguments (borrowed) */
    struct gcs_write_preconditions pre;
    struct gcs_write_attrs attrs;
    bool use_fd, bad_crc, no_crc, abort_upload, unknown_size;
    unsigned inflight;
};

static bool parse_write_options(int argc, char **argv, struct write_options *opts)
{
    *opts = (struct write_options){.args = g_ptr_array_new(), .inflight = 8};
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes_value = true;
        if (strcmp(arg, "--fd") == 0)
            opts->use_fd = true, takes_value = false;
        else if (strcmp(arg, "--badcrc") == 0)
            opts->bad_crc = true, takes_value = false;
        else if (strcmp(arg, "--nocrc") == 0)
            opts->no_crc = true, takes_value = false;
        else if (strcmp(arg, "--abort") == 0)
            opts->abort_upload = true, takes_value = false;
        else if (strcmp(arg, "--unknown-size") == 0)
            opts->unknown_size = true, takes_value = false;
        else if (!g_str_has_prefix(arg, "--")) {
            g_ptr_array_add(opts->args, (char *)arg);
            continue;
        }
        if (!takes_value)
            continue;
        if (!value) {
            fprintf(stderr, "%s needs a value\n", arg);
            return false;
        }
        i++;
        if (strcmp(arg, "--ifgen") == 0) {
            opts->pre.has_if_generation_match = true;
            opts->pre.if_generation_match = g_ascii_strtoll(value, NULL, 10);
        } else if (strcmp(arg, "--ifmeta") == 0) {
            opts->pre.has_if_metageneration_match = true;
            opts->pre.if_metageneration_match = g_ascii_strtoll(value, NULL, 10);
        } else if (strcmp(arg, "--mtime") == 0) {
            opts->attrs.has_mtime = true;
            opts->attrs.mtime_ns = g_ascii_strtoll(value, NULL, 10) * 1000000000;
        } else if (strcmp(arg, "--symlink") == 0) {
            opts->attrs.symlink_target = value;
        } else if (strcmp(arg, "--ctype") == 0) {
            opts->attrs.content_type = value;
        } else if (strcmp(arg, "--inflight") == 0) {
            opts->inflight = (unsigned)MAX(1, atoi(value));
        } else {
            fprintf(stderr, "unknown option %s\n", arg);
            return false;
        }
    }
    return true;
}

static const char *positional(const struct write_options *opts, guint index)
{
    return index < opts->args->len ? g_ptr_array_index(opts->args, index) : NULL;
}

/* The file's bytes in memory (buffer mode) or an open fd (fd mode), and its size. */
struct source_file {
    int fd;
    uint8_t *data;
    uint64_t size;
};

static int source_open(const char *path, bool use_fd, struct source_file *out)
{
    *out = (struct source_file){.fd = -1};
    if (use_fd) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        off_t size = lseek(fd, 0, SEEK_END);
        if (size < 0) {
            close(fd);
            return -errno;
        }
        out->fd = fd;
        out->size = (uint64_t)size;
        return 0;
    }
    gchar *contents = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &contents, &len, NULL))
        return -ENOENT;
    out->data = (uint8_t *)contents;
    out->size = len;
    return 0;
}

static void source_close(struct source_file *file)
{
    if (file->fd >= 0)
        close(file->fd);
    g_free(file->data);
}

/* The crc32c of [offset, offset+len) of the file. */
static uint32_t source_crc(const struct source_file *file, uint64_t offset, uint64_t len)
{
    if (file->data)
        return crc32c_update(0, file->data + offset, (size_t)len);
    uint8_t buf[1 << 16];
    uint32_t crc = 0;
    while (len > 0) {
        ssize_t got = pread(file->fd, buf, (size_t)MIN(len, sizeof(buf)), (off_t)offset);
        if (got <= 0)
            break;
        crc = crc32c_update(crc, buf, (size_t)got);
        offset += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return crc;
}

static struct gcs_body source_body(const struct source_file *file, uint64_t offset, uint64_t len,
                                   const struct write_options *opts)
{
    struct gcs_body body = {
        .data = file->data ? file->data + offset : NULL,
        .fd = file->data ? -1 : file->fd,
        .fd_offset = offset,
        .len = len,
        .has_crc32c = !opts->no_crc,
    };
    if (body.has_crc32c)
        body.crc32c = source_crc(file, offset, len) ^ (opts->bad_crc ? 0x5a5a5a5au : 0);
    return body;
}

static int command_upload(struct gcs_client *client, const struct write_options *opts)
{
    const char *name = positional(opts, 0), *path = positional(opts, 1);
    if (!name || !path)
        return fail(-EINVAL, "upload NAME FILE");
    struct source_file file;
    int err = source_open(path, opts->use_fd, &file);
    if (err < 0)
        return fail(err, path);
    struct gcs_body body = source_body(&file, 0, file.size, opts);
    struct gcs_object obj;
    err = gcs_upload(client, name, &body, &opts->attrs, &opts->pre, &obj);
    source_close(&file);
    if (err < 0)
        return fail(err, name);
    print_object(&obj);
    gcs_object_clear(&obj);
    return 0;
}

struct part_state {
    GMutex lock;
    GCond cond;
    unsigned in_flight;
    int first_error;
    char **etags;
};

struct part_slot {
    struct part_state *state;
    int index;
};

static void on_part(int err, const char *etag, void *user)
{
    struct part_slot *slot = user;
    struct part_state *state = slot->state;
    g_mutex_lock(&state->lock);
    if (err < 0 && state->first_error == 0)
        state->first_error = err;
    if (err == 0)
        state->etags[slot->index] = g_strdup(etag);
    state->in_flight--;
    g_cond_signal(&state->cond);
    g_mutex_unlock(&state->lock);
    g_free(slot);
}

static int command_multipart(struct gcs_client *client, const struct write_options *opts)
{
    const char *name = positional(opts, 0), *path = positional(opts, 1);
    const char *part_text = positional(opts, 2);
    if (!name || !path || !part_text)
        return fail(-EINVAL, "multipart NAME FILE PARTSIZE");
    uint64_t part_size = g_ascii_strtoull(part_text, NULL, 10);
    struct source_file file;
    int err = source_open(path, opts->use_fd, &file);
    if (err < 0)
        return fail(err, path);
    int parts = (int)MAX(1, (file.size + part_size - 1) / part_size);
    char *upload_id = NULL;
    err = gcs_multipart_begin(client, name, &opts->attrs, &upload_id);
    if (err < 0) {
        source_close(&file);
        return fail(err, "begin");
    }
    struct part_state state = {.etags = g_new0(char *, parts)};
    g_mutex_init(&state.lock);
    g_cond_init(&state.cond);
    struct gcs_body *bodies = g_new0(struct gcs_body, parts);
    for (int i = 0; i < parts; i++) {
        uint64_t offset = (uint64_t)i * part_size;
        bodies[i] = source_body(&file, offset, MIN(part_size, file.size - offset), opts);
        g_mutex_lock(&state.lock);
        while (state.in_flight >= opts->inflight)
            g_cond_wait(&state.cond, &state.lock);
        state.in_flight++;
        g_mutex_unlock(&state.lock);
        struct part_slot *slot = g_new(struct part_slot, 1);
        slot->state = &state;
        slot->index = i;
        gcs_multipart_put_part_async(client, name, upload_id, i + 1, &bodies[i], on_part, slot);
    }
    g_mutex_lock(&state.lock);
    while (state.in_flight > 0)
        g_cond_wait(&state.cond, &state.lock);
    g_mutex_unlock(&state.lock);
    err = state.first_error;
    if (err == 0 && !opts->abort_upload) {
        struct gcs_completed_part *completed = g_new0(struct gcs_completed_part, parts);
        for (int i = 0; i < parts; i++)
            completed[i] =
                (struct gcs_completed_part){.part_number = i + 1, .etag = state.etags[i]};
        struct gcs_object obj;
        err = gcs_multipart_complete(client, name, upload_id, completed, parts, &opts->pre, &obj);
        g_free(completed);
        if (err == 0) {
            print_object(&obj);
            gcs_object_clear(&obj);
        }
    }
    if (err < 0 || opts->abort_upload) {
        int abort_err = gcs_multipart_abort(client, name, upload_id);
        if (err == 0 && abort_err == 0)
            printf("ABORTED\t%s\n", upload_id);
        if (err == 0)
            err = abort_err;
    }
    for (int i = 0; i < parts; i++)
        g_free(state.etags[i]);
    g_free(state.etags);
    g_free(bodies);
    g_cond_clear(&state.cond);
    g_mutex_clear(&state.lock);
    g_free(upload_id);
    source_close(&file);
    return err < 0 ? fail(err, name) : 0;
}

static int command_resumable(struct gcs_client *client, const struct write_options *opts)
{
    const char *name = positional(opts, 0), *path = positional(opts, 1);
    const char *chunk_text = positional(opts, 2);
    if (!name || !path || !chunk_text)
        return fail(-EINVAL, "resumable NAME FILE CHUNK");
    uint64_t chunk = g_ascii_strtoull(chunk_text, NULL, 10);
    struct source_file file;
    int err = source_open(path, opts->use_fd, &file);
    if (err < 0)
        return fail(err, path);
    char *session = NULL;
    err = gcs_resumable_begin(client, name, &opts->attrs, &opts->pre,
                              opts->unknown_size ? -1 : (int64_t)file.size, &session);
    if (err < 0) {
        source_close(&file);
        return fail(err, "begin");
    }
    uint64_t offset = 0;
    struct gcs_object obj = {0};
    do {
        uint64_t len = MIN(chunk, file.size - offset);
        bool final = offset + len == file.size;
        struct gcs_body body = source_body(&file, offset, len, opts);
        err = gcs_resumable_put(client, session, offset, &body, final, final ? &obj : NULL);
        offset += len;
        if (final)
            break;
    } while (err == 0);
    if (err == 0) {
        print_object(&obj);
        gcs_object_clear(&obj);
    } else {
        gcs_resumable_cancel(client, session);
    }
    g_free(session);
    source_close(&file);
    return err < 0 ? fail(err, name) : 0;
}

static int command_compose(struct gcs_client *client, const struct write_options *opts)
{
    const char *dest = positional(opts, 0);
    int count = (int)opts->args->len - 1;
    if (!dest || count < 1)
        return fail(-EINVAL, "compose DEST SRC...");
    struct gcs_compose_source *sources = g_new0(struct gcs_compose_source, count);
    char **names = g_new0(char *, count + 1);
    for (int i = 0; i < count; i++) {
        const char *spec = positional(opts, (guint)i + 1);
        const char *hash = strrchr(spec, '#');
        names[i] = hash ? g_strndup(spec, (gsize)(hash - spec)) : g_strdup(spec);
        sources[i].name = names[i];
        sources[i].generation = hash ? g_ascii_strtoll(hash + 1, NULL, 10) : 0;
    }
    struct gcs_object obj;
    int err = gcs_compose(client, dest, sources, count, &opts->attrs, &opts->pre, &obj);
    g_strfreev(names);
    g_free(sources);
    if (err < 0)
        return fail(err, dest);
    print_object(&obj);
    gcs_object_clear(&obj);
    return 0;
}

static int command_copy(struct gcs_client *client, const struct write_options *opts)
{
    const char *src = positional(opts, 0), *gen = positional(opts, 1), *dest = positional(opts, 2);
    if (!src || !gen || !dest)
        return fail(-EINVAL, "copy SRC SRCGEN DEST");
    struct gcs_object obj;
    int err = gcs_copy(client, src, g_ascii_strtoll(gen, NULL, 10), dest, &opts->pre, &obj);
    if (err < 0)
        return fail(err, dest);
    print_object(&obj);
    gcs_object_clear(&obj);
    return 0;
}

static int command_write_simple(struct gcs_client *client, const char *command,
                                const struct write_options *opts)
{
    const char *name = positional(opts, 0);
    if (!name)
        return fail(-EINVAL, "NAME needed");
    int err;
    if (strcmp(command, "delete") == 0) {
        const char *gen = positional(opts, 1);
        err = gcs_delete(client, name, gen ? g_ascii_strtoll(gen, NULL, 10) : 0, &opts->pre);
        if (err == 0)
            printf("deleted\n");
    } else if (strcmp(command, "mpbegin") == 0) {
        char *id = NULL;
        err = gcs_multipart_begin(client, name, &opts->attrs, &id);
        if (err == 0)
            printf("%s\n", id);
        g_free(id);
    } else if (strcmp(command, "mpabort") == 0) {
        const char *id = positional(opts, 1);
        err = id ? gcs_multipart_abort(client, name, id) : -EINVAL;
        if (err == 0)
            printf("aborted\n");
    } else { /* patch */
        struct gcs_object obj;
        err = gcs_patch(client, name, &opts->attrs, &opts->pre, &obj);
        if (err == 0) {
            print_object(&obj);
            gcs_object_clear(&obj);
        }
    }
    return err < 0 ? fail(err, name) : 0;
}

static int command_uploads(struct gcs_client *client, const struct write_options *opts)
{
    GPtrArray *names = NULL, *ids = NULL;
    int err = gcs_multipart_list(client, positional(opts, 0), &names, &ids);
    if (err < 0)
        return fail(err, "uploads");
    for (guint i = 0; i < names->len; i++)
        printf("%s\t%s\n", (char *)g_ptr_array_index(names, i), (char *)g_ptr_array_index(ids, i));
    g_ptr_array_unref(names);
    g_ptr_array_unref(ids);
    return 0;
}

static int command_testperm(struct gcs_client *client, const struct write_options *opts)
{
    int count = (int)opts->args->len;
    bool *granted = g_new0(bool, MAX(count, 1));
    int err = gcs_test_permissions(client, (const char *const *)opts->args->pdata, count, granted);
    for (int i = 0; err == 0 && i < count; i++)
        printf("%s\t%d\n", positional(opts, (guint)i), granted[i] ? 1 : 0);
    g_free(granted);
    return err < 0 ? fail(err, "testIamPermissions") : 0;
}

static int command_write(struct gcs_client *client, const char *command, int argc, char **argv)
{
    struct write_options opts;
    if (!parse_write_options(argc, argv, &opts)) {
        g_ptr_array_unref(opts.args);
        return 2;
    }
    int rc;
    if (strcmp(command, "upload") == 0)
        rc = command_upload(client, &opts);
    else if (strcmp(command, "multipart") == 0)
        rc = command_multipart(client, &opts);
    else if (strcmp(command, "resumable") == 0)
        rc = command_resumable(client, &opts);
    else if (strcmp(command, "compose") == 0)
        rc = command_compose(client, &opts);
    else if (strcmp(command, "copy") == 0)
        rc = command_copy(client, &opts);
    else if (strcmp(command, "uploads") == 0)
        rc = command_uploads(client, &opts);
    else if (strcmp(command, "testperm") == 0)
        rc = command_testperm(client, &opts);
    else
        rc = command_write_simple(client, command, &opts);
    g_ptr_array_unref(opts.args);
    return rc;
}

static bool is_write_command(const char *command)
{
    static const char *const commands[] = {"upload",  "multipart", "mpbegin", "mpabort",
                                           "uploads", "resumable", "compose", "copy",
                                           "delete",  "patch",     "testperm"};
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(command, commands[i]) == 0)
            return true;
    }
    return false;
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
    } else if (is_write_command(command)) {
        rc = command_write(client, command, nargs, args);
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
            ",\"media_calls\":%" PRIu64 ",\"write_calls\":%" PRIu64 ",\"bytes_uploaded\":%" PRIu64
            "}\n",
            stats.requests, stats.retries, stats.failures, stats.bytes_downloaded, stats.list_calls,
            stats.get_calls, stats.media_calls, stats.write_calls, stats.bytes_uploaded);
    gcs_client_free(client);
    flog_close();
    return rc;
}
