/* The writer: memory buffers or a staging file, streaming part uploads, commit with
 * preconditions (see include/fluxfs/writer.h). Crash cleanup is in upload_cleanup.c. */
#include "fluxfs/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics.h"
#include "fluxfs/mime.h"
#include "fluxfs/upload.h"

#define MIB                         ((size_t)1 << 20)
#define WRITER_MIN_PART             (5 * MIB)
#define WRITER_MAX_PARTS            10000
#define WRITER_IO_BLOCK             MIB
#define WRITER_FETCH_CHUNK          (8 * MIB)
#define WRITER_DEFAULT_BUFFER_BYTES ((uint64_t)512 * MIB)
#define WRITER_SPARE_BUFFERS        8 /* part buffers kept for reuse (no page faults, no munmap) */

struct writer_shared {
    /* The uploads' client, caps on parts in flight and lock (upload.h). Its lock guards the
     * fields below too, and its drained condition also wakes writers waiting for budget: a
     * memory part answered gives its bytes back (part_buffer_done). */
    struct upload_pool uploads;
    bool xml_missing;       /* uploads.lock: multipart begin said -ENOSYS once */
    uint64_t buffered;      /* uploads.lock: bytes in the memory buffers of every writer */
    uint64_t peak_buffered; /* uploads.lock: the most buffered ever was */
    uint64_t max_buffered;  /* immutable */
    GPtrArray *spare;       /* uploads.lock: free part buffers of spare_size bytes */
    size_t spare_size;      /* uploads.lock */
};

struct writer {
    struct writer_shared *shared; /* not owned */
    struct writer_config config;  /* strings owned */
    char *object_name;
    GMutex lock; /* serializes the fields below (writer_* calls) */
    /* Atomics, stored at every writer_unlock: what writer_size, writer_dirty and
     * writer_unlinked read without the lock, which a commit holds for its whole upload (a
     * stat or a listing of the file must not wait for it). */
    uint64_t shown_size;
    int shown_dirty, shown_unlinked;
    bool sealed; /* committed for shutdown: every later change is -EIO */
    int fd;      /* the staging file, -1 until one is needed */
    uint64_t size;
    bool materialized; /* the staging file holds the content */
    /* Memory mode: [0, sent_upto) was sent as parts, [sent_upto, size) is in buf (part_size
     * bytes allocated; size - sent_upto of them count in shared->buffered). */
    bool mem_mode;
    char *buf;
    uint64_t buf_budget;     /* bytes of shared->buffered the buffer holds */
    uint64_t buf_crc_len;    /* CRC32C of the buffer's first buf_crc_len bytes, fed while */
    uint32_t buf_crc;        /* they were copied in (hot in cache); UINT64_MAX: unknown */
    bool owns_content;       /* reads come from the writer (see writer_has_content) */
    int broken;              /* a negative errno once buffered bytes were lost */
    struct writer_base base; /* base.generation: precondition of the next commit */
    bool dirty, unlinked;
    bool has_mtime;
    int64_t mtime_ns;
    /* The stream: the upload of the file's parts while it is written (and every upload of
     * its commits), through one session whatever the protocol (upload.h). */
    struct upload_session *upload;
    bool stream_disabled; /* until the next commit */
    /* CRC32C of the bytes written sequentially from offset 0 (crc_upto of them): one value per
     * whole part below crc_upto (part i = [i * part_size, (i + 1) * part_size)) and a running
     * value of the rest, so a part cut from them is read once (as the request body). */
    uint64_t crc_upto;
    GArray *part_crcs; /* uint32_t */
    uint32_t crc_run;
    uint64_t sent_upto; /* the end of the last part appended to the upload */
    struct writer_stats stats;
};

/* Ends a writer_* call: publishes the lock-free snapshot of the fields it may have changed. */
static void writer_unlock(struct writer *writer)
{
    __atomic_store_n(&writer->shown_size, writer->size, __ATOMIC_RELEASE);
    __atomic_store_n(&writer->shown_dirty, writer->dirty && !writer->unlinked, __ATOMIC_RELEASE);
    __atomic_store_n(&writer->shown_unlinked, writer->unlinked, __ATOMIC_RELEASE);
    g_mutex_unlock(&writer->lock);
}

struct writer_shared *writer_shared_new(struct gcs_client *client, unsigned max_parts_in_flight,
                                        uint64_t max_buffer_bytes)
{
    struct writer_shared *shared = g_new0(struct writer_shared, 1);
    upload_pool_init(&shared->uploads, client, max_parts_in_flight);
    shared->max_buffered = max_buffer_bytes ? max_buffer_bytes : WRITER_DEFAULT_BUFFER_BYTES;
    shared->spare = g_ptr_array_new_with_free_func(g_free);
    return shared;
}

void writer_shared_get_buffer_stats(struct writer_shared *shared, struct writer_buffer_stats *out)
{
    g_mutex_lock(&shared->uploads.lock);
    *out = (struct writer_buffer_stats){
        .used = shared->buffered, .peak = shared->peak_buffered, .limit = shared->max_buffered};
    g_mutex_unlock(&shared->uploads.lock);
}

void writer_shared_free(struct writer_shared *shared)
{
    if (!shared)
        return;
    g_ptr_array_free(shared->spare, TRUE);
    upload_pool_clear(&shared->uploads);
    g_free(shared);
}

/* A part buffer of size bytes: a spare one when there is one. */
static char *buffer_get(struct writer_shared *shared, size_t size)
{
    char *buffer = NULL;
    g_mutex_lock(&shared->uploads.lock);
    if (shared->spare_size == size && shared->spare->len > 0)
        buffer = g_ptr_array_steal_index_fast(shared->spare, shared->spare->len - 1);
    g_mutex_unlock(&shared->uploads.lock);
    return buffer ? buffer : g_malloc(size);
}

/* Bytes of the spare part buffers (caller holds shared->uploads.lock). */
static uint64_t spare_bytes_locked(const struct writer_shared *shared)
{
    return (uint64_t)shared->spare->len * shared->spare_size;
}

/* Frees spares until the buffered bytes and the spares fit in the budget together (caller
 * holds shared->uploads.lock): spares are memory the process holds too (issue 22, item 11). */
static void spares_fit_locked(struct writer_shared *shared)
{
    while (shared->spare->len > 0 &&
           shared->buffered + spare_bytes_locked(shared) > shared->max_buffered)
        g_ptr_array_set_size(shared->spare, shared->spare->len - 1);
}

/* Gives a part buffer back (caller holds shared->uploads.lock). At most WRITER_SPARE_BUFFERS spares
 * stay, and only while they fit in the budget beside the buffered bytes. */
static void buffer_put_locked(struct writer_shared *shared, char *buffer, size_t size)
{
    if (!buffer)
        return;
    if (shared->spare_size != size) {
        g_ptr_array_set_size(shared->spare, 0);
        shared->spare_size = size;
    }
    if (shared->spare->len < WRITER_SPARE_BUFFERS &&
        shared->buffered + spare_bytes_locked(shared) + size <= shared->max_buffered)
        g_ptr_array_add(shared->spare, buffer);
    else
        g_free(buffer);
}

static void buffer_put(struct writer_shared *shared, char *buffer, size_t size)
{
    g_mutex_lock(&shared->uploads.lock);
    buffer_put_locked(shared, buffer, size);
    g_mutex_unlock(&shared->uploads.lock);
}

static int open_staging_file(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    char *template = g_build_filename(dir, "fluxfs-staging-XXXXXX", NULL);
    fd = mkostemp(template, O_CLOEXEC);
    int err = errno;
    if (fd >= 0)
        unlink(template);
    g_free(template);
    return fd >= 0 ? fd : -err;
}

/* A memory part answered (uploads.lock held, on a gcs callback's thread or the writer's):
 * its bytes are the server's now, or lost; the buffer goes back to the spares. */
static void part_buffer_done(char *buffer, uint64_t len, void *user)
{
    struct writer *writer = user;
    struct writer_shared *shared = writer->shared;
    shared->buffered -= len;
    buffer_put_locked(shared, buffer, writer->config.part_size);
}

int writer_new(struct writer_shared *shared, const struct writer_config *config,
               const char *object_name, const struct writer_base *base, bool truncate,
               struct writer **out)
{
    if (config->part_size < WRITER_MIN_PART || config->part_size % (256 * 1024) != 0)
        return -EINVAL;
    const char *dir = config->temp_dir ? config->temp_dir : g_get_tmp_dir();
    bool memory = (truncate || !base->exists) && !config->no_memory_buffers &&
                  config->mode != WRITER_UPLOAD_RESUMABLE;
    int fd = -1;
    if (!memory) {
        fd = open_staging_file(dir);
        if (fd < 0) {
            flog_error("writer", "cannot create a staging file in %s for '%s': %s", dir,
                       object_name, g_strerror(-fd));
            return fd;
        }
    }
    struct writer *writer = g_new0(struct writer, 1);
    writer->shared = shared;
    writer->config = *config;
    writer->config.temp_dir = g_strdup(dir);
    writer->config.tmp_prefix = g_strdup(config->tmp_prefix ? config->tmp_prefix : "");
    if (writer->config.max_parts_in_flight == 0)
        writer->config.max_parts_in_flight = 16;
    writer->object_name = g_strdup(object_name);
    g_mutex_init(&writer->lock);
    writer->fd = fd;
    writer->base = *base;
    if (!base->exists)
        writer->base.generation = 0;
    struct upload_session_config upload_config = {.object_name = object_name,
                                                  .tmp_prefix = writer->config.tmp_prefix,
                                                  .max_parts_in_flight =
                                                      writer->config.max_parts_in_flight,
                                                  .buffer_done = part_buffer_done,
                                                  .buffer_user = writer};
    writer->upload = upload_session_new(&shared->uploads, &upload_config);
    writer->part_crcs = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    if (truncate || !base->exists) {
        writer->mem_mode = memory;
        writer->materialized = !memory;
        writer->owns_content = true;
        writer->dirty = true;
        writer->size = 0;
    } else {
        writer->size = base->size;
    }
    g_mutex_lock(&writer->lock);
    writer_unlock(writer); /* the first snapshot */
    flog_debug("writer", "'%s': opened for writing (%s, %s)", object_name,
               truncate       ? "truncated"
               : base->exists ? "existing object"
                              : "new object",
               writer->mem_mode ? "memory buffers" : "staging file");
    *out = writer;
    return 0;
}

/* CRC32C of a range of the staging file. */
int writer_crc_of_range(int fd, uint64_t offset, uint64_t len, uint32_t *out)
{
    char *block = g_malloc(WRITER_IO_BLOCK);
    uint32_t crc = 0;
    int rc = 0;
    while (len > 0) {
        size_t want = len < WRITER_IO_BLOCK ? (size_t)len : WRITER_IO_BLOCK;
        ssize_t got = pread(fd, block, want, (off_t)offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rc = got < 0 ? -errno : -EIO;
            break;
        }
        crc = crc32c_update(crc, block, (size_t)got);
        offset += (uint64_t)got;
        len -= (uint64_t)got;
    }
    g_free(block);
    if (rc == 0)
        *out = crc;
    return rc;
}

/* A change at offset (a write starting there, a truncate to it, a fetch from 0): the CRCs of
 * the whole parts below it stay, the rest is dropped. */
static void crc_cut(struct writer *writer, uint64_t offset)
{
    if (offset >= writer->crc_upto)
        return;
    guint keep = (guint)(offset / writer->config.part_size);
    if (keep < writer->part_crcs->len)
        g_array_set_size(writer->part_crcs, keep);
    writer->crc_upto = (uint64_t)writer->part_crcs->len * writer->config.part_size;
    writer->crc_run = 0;
}

/* Bytes just stored at offset: extends the CRCs when they continue the covered range. */
static void crc_feed(struct writer *writer, uint64_t offset, const void *data, size_t len)
{
    if (offset != writer->crc_upto)
        return; /* a hole or a rewrite: parts from here on are read back */
    const char *p = data;
    uint64_t part_size = writer->config.part_size;
    while (len > 0) {
        uint64_t part_end = ((uint64_t)writer->part_crcs->len + 1) * part_size;
        size_t n = (uint64_t)len < part_end - writer->crc_upto
                       ? len
                       : (size_t)(part_end - writer->crc_upto);
        writer->crc_run = crc32c_update(writer->crc_run, p, n);
        writer->crc_upto += n;
        p += n;
        len -= n;
        if (writer->crc_upto == part_end) {
            g_array_append_val(writer->part_crcs, writer->crc_run);
            writer->crc_run = 0;
        }
    }
}

/* CRC32C of [offset, offset + len) from what the writes fed, when they cover it and it starts
 * at a part boundary; false otherwise. */
static bool crc_from_writes(struct writer *writer, uint64_t offset, uint64_t len, uint32_t *out)
{
    uint64_t part_size = writer->config.part_size;
    uint64_t end = offset + len;
    if (offset % part_size != 0 || end > writer->crc_upto)
        return false;
    uint64_t whole = writer->part_crcs->len;
    uint32_t crc = 0;
    uint64_t at = offset;
    for (uint64_t i = offset / part_size; i < whole && at + part_size <= end; i++) {
        crc = crc32c_combine(crc, g_array_index(writer->part_crcs, uint32_t, i), part_size);
        at += part_size;
    }
    if (at == end) {
        *out = crc;
        return true;
    }
    if (at == whole * part_size && end == writer->crc_upto) { /* ends inside the running part */
        *out = crc32c_combine(crc, writer->crc_run, end - at);
        return true;
    }
    return false;
}

/* CRC32C of a range about to be sent: from the writes, else read back. */
static int range_crc(struct writer *writer, uint64_t offset, uint64_t len, uint32_t *out)
{
    if (crc_from_writes(writer, offset, len, out))
        return 0;
    writer->stats.crc_reads++;
    return writer_crc_of_range(writer->fd, offset, len, out);
}

static bool stream_active(struct writer *writer)
{
    return upload_is_open(writer->upload);
}

/* Starts the stream's upload: multipart, or composite when the API is missing. */
static int stream_begin(struct writer *writer)
{
    struct writer_shared *shared = writer->shared;
    enum writer_upload_mode mode = writer->config.mode;
    g_mutex_lock(&shared->uploads.lock);
    bool xml_missing = shared->xml_missing;
    g_mutex_unlock(&shared->uploads.lock);
    if (mode == WRITER_UPLOAD_COMPOSITE || (mode == WRITER_UPLOAD_AUTO && xml_missing))
        return upload_begin(writer->upload, &upload_composite, NULL);
    struct gcs_write_attrs attrs = {.has_mtime = writer->has_mtime,
                                    .mtime_ns = writer->mtime_ns,
                                    .content_type = mime_type_for_name(writer->object_name)};
    /* Memory mode uploads through a temporary object, readable once completed (a spill needs
     * the bytes back); the commit composes it onto the object name. */
    struct upload_begin_args args = {.attrs = &attrs, .readable = writer->mem_mode};
    int rc = upload_begin(writer->upload, &upload_multipart, &args);
    if (rc == -ENOSYS && mode == WRITER_UPLOAD_AUTO) {
        g_mutex_lock(&shared->uploads.lock);
        shared->xml_missing = true;
        g_mutex_unlock(&shared->uploads.lock);
        flog_info("writer", "no XML multipart upload API: parallel composite uploads instead");
        return upload_begin(writer->upload, &upload_composite, NULL);
    }
    return rc;
}

/* Cuts [offset, offset+len) as the next part and sends it (upload_append waits for room
 * first). Its bytes are data (a memory buffer of len bytes whose budget the part takes over,
 * given back when the part is answered, also on failure: part_buffer_done) or, when data is
 * NULL, the staging file's. */
static int dispatch_part(struct writer *writer, uint64_t offset, uint64_t len, char *data,
                         const uint32_t *data_crc)
{
    if (upload_part_count(writer->upload) >= WRITER_MAX_PARTS)
        return -EFBIG;
    struct gcs_body body = {.fd = writer->fd, .fd_offset = offset, .len = len, .has_crc32c = true};
    int rc = 0;
    if (data && data_crc)
        body.crc32c = *data_crc;
    else if (data)
        body.crc32c = crc32c_update(0, data, (size_t)len);
    else
        rc = range_crc(writer, offset, len, &body.crc32c);
    if (rc < 0)
        return rc; /* data is still the caller's */
    if (data) {
        body.data = data;
        body.fd = -1;
    }
    rc = upload_append(writer->upload, offset, &body, data);
    if (rc < 0)
        return rc;
    writer->stats.parts_sent++;
    writer->sent_upto = offset + len;
    return 0;
}

/* Drops the stream: waits for parts in flight, aborts the upload, deletes temporary parts and
 * the marker. The staging file is untouched. */
static void stream_discard(struct writer *writer)
{
    upload_abort(writer->upload);
    writer->sent_upto = 0;
}

/* ---- decisions (pure) ---- */

uint64_t writer_next_part_len(uint64_t size, uint64_t sent_upto, uint64_t part_size, bool final)
{
    if (part_size == 0 || sent_upto >= size)
        return 0;
    uint64_t left = size - sent_upto;
    if (final)
        return left < part_size ? left : part_size;
    return left > part_size ? part_size : 0;
}

bool writer_change_breaks_stream(uint64_t offset, uint64_t sent_upto)
{
    return offset < sent_upto;
}

enum writer_commit_kind writer_commit_kind(enum writer_upload_mode mode, bool stream_active,
                                           uint64_t size, uint64_t small_threshold)
{
    if (stream_active)
        return WRITER_COMMIT_STREAM;
    if (mode == WRITER_UPLOAD_RESUMABLE)
        return WRITER_COMMIT_RESUMABLE;
    return size <= small_threshold ? WRITER_COMMIT_SINGLE : WRITER_COMMIT_STREAM;
}

/* After a change: sends every whole part below the current size. */
static int stream_advance(struct writer *writer)
{
    if (writer->stream_disabled || writer->config.mode == WRITER_UPLOAD_RESUMABLE)
        return 0;
    uint64_t part_len;
    /* Keeps at least one byte back, so the tail (commit) is never empty. */
    while ((part_len = writer_next_part_len(writer->size, writer->sent_upto,
                                            writer->config.part_size, false)) > 0) {
        if (!stream_active(writer)) {
            int rc = stream_begin(writer);
            if (rc < 0) {
                /* Not fatal: the commit uploads the staging file another way or fails. */
                writer->stream_disabled = true;
                return 0;
            }
        }
        int rc = dispatch_part(writer, writer->sent_upto, part_len, NULL, NULL);
        if (rc < 0) {
            stream_discard(writer);
            writer->stream_disabled = true;
            return 0;
        }
    }
    return 0;
}

/* A change below what was sent: the stream is no longer the file. */
static void stream_abandon(struct writer *writer)
{
    if (stream_active(writer)) {
        stream_discard(writer);
        writer->stats.streams_abandoned++;
    }
    writer->stream_disabled = true;
}

/* ---- content ---- */

static int pwrite_all(int fd, const void *data, size_t len, uint64_t offset)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

static int ensure_staging(struct writer *writer)
{
    if (writer->fd >= 0)
        return 0;
    int fd = open_staging_file(writer->config.temp_dir);
    if (fd < 0) {
        flog_error("writer", "cannot create a staging file in %s for '%s': %s",
                   writer->config.temp_dir, writer->object_name, g_strerror(-fd));
        return fd;
    }
    writer->fd = fd;
    return 0;
}

/* Copies [offset, offset + len) of an object (pinned by generation, object_size bytes) into
 * the staging file at dest; the bytes extend the running CRC32Cs where they continue them. */
static int fetch_into_staging(struct writer *writer, const char *name, int64_t generation,
                              uint64_t object_size, uint64_t offset, uint64_t len, uint64_t dest)
{
    char *buffer = g_malloc(len < WRITER_FETCH_CHUNK ? (size_t)len + 1 : WRITER_FETCH_CHUNK);
    int rc = 0;
    uint64_t done = 0;
    while (rc == 0 && done < len) {
        uint64_t left = len - done;
        size_t want = left < WRITER_FETCH_CHUNK ? (size_t)left : WRITER_FETCH_CHUNK;
        struct gcs_read_request req = {.name = name,
                                       .generation = generation,
                                       .offset = offset + done,
                                       .len = want,
                                       .buf = buffer,
                                       .object_size = object_size};
        size_t got = 0;
        rc = gcs_read(writer->shared->uploads.client, &req, &got);
        if (rc == 0 && got != want)
            rc = -EIO;
        if (rc == 0)
            rc = pwrite_all(writer->fd, buffer, got, dest + done);
        if (rc == 0)
            crc_feed(writer, dest + done, buffer, got);
        done += got;
    }
    g_free(buffer);
    return rc;
}

/* Fetches the base object into the staging file (first change of an existing file, or of a
 * file whose memory-buffered content was committed). */
static int materialize(struct writer *writer)
{
    if (writer->materialized)
        return 0;
    int rc = ensure_staging(writer);
    if (rc < 0)
        return rc;
    crc_cut(writer, 0);
    rc = fetch_into_staging(writer, writer->object_name, writer->base.generation, writer->base.size,
                            0, writer->base.size, 0);
    if (rc == -ENOENT)
        rc = -ESTALE; /* the version this file was opened at is gone */
    if (rc < 0) {
        flog_error("writer", "cannot fetch '%s' (generation %" PRId64 ") to edit it: %s",
                   writer->object_name, writer->base.generation, g_strerror(-rc));
        return rc;
    }
    if (ftruncate(writer->fd, (off_t)writer->base.size) < 0)
        return -errno;
    writer->stats.bytes_fetched += writer->base.size;
    writer->materialized = true;
    writer->size = writer->base.size;
    return 0;
}

/* ---- memory mode ---- */

/* Takes bytes of the shared buffer budget; -ENOMEM when it is exhausted and no part in flight
 * will give any back (the caller spills to a staging file). */
static int budget_take(struct writer *writer, uint64_t bytes)
{
    struct writer_shared *shared = writer->shared;
    g_mutex_lock(&shared->uploads.lock);
    while (shared->buffered + bytes > shared->max_buffered) {
        if (shared->uploads.in_flight == 0) {
            g_mutex_unlock(&shared->uploads.lock);
            return -ENOMEM;
        }
        g_cond_wait(&shared->uploads.drained, &shared->uploads.lock);
    }
    shared->buffered += bytes;
    shared->peak_buffered = MAX(shared->peak_buffered, shared->buffered);
    spares_fit_locked(shared);
    g_mutex_unlock(&shared->uploads.lock);
    return 0;
}

static void budget_give(struct writer *writer, uint64_t bytes)
{
    struct writer_shared *shared = writer->shared;
    g_mutex_lock(&shared->uploads.lock);
    shared->buffered -= bytes;
    g_cond_broadcast(&shared->uploads.drained);
    g_mutex_unlock(&shared->uploads.lock);
}

/* Drops the memory buffer and its budget; the file is no longer in memory mode. */
static void mem_release(struct writer *writer)
{
    if (!writer->mem_mode)
        return;
    budget_give(writer, writer->buf_budget);
    writer->buf_budget = 0;
    writer->buf_crc_len = 0;
    writer->buf_crc = 0;
    buffer_put(writer->shared, writer->buf, writer->config.part_size);
    writer->buf = NULL;
    writer->mem_mode = false;
}

/* Sends the buffer [sent_upto, size) as the next part. */
static int mem_send_buffer(struct writer *writer)
{
    if (!stream_active(writer)) {
        int rc = stream_begin(writer);
        if (rc < 0)
            return rc;
    }
    uint64_t len = writer->size - writer->sent_upto;
    /* The part takes the buffer and len bytes of budget (which the buffer holds: the budget
     * of bytes stored past the size follows the size). */
    bool crc_known = writer->buf_crc_len == len;
    int rc = dispatch_part(writer, writer->sent_upto, len, writer->buf,
                           crc_known ? &writer->buf_crc : NULL);
    if (rc == 0) {
        writer->buf = NULL;
        writer->buf_budget -= len;
        writer->buf_crc_len = 0;
        writer->buf_crc = 0;
    }
    return rc;
}

/* Stores n bytes (zeros when src is NULL) at pos, sent_upto <= pos <= size, in the buffer;
 * a full buffer goes out as a part when bytes beyond it arrive. On failure (-ENOMEM: budget;
 * other: the stream could not start or take a part) the caller spills: what was stored
 * stays. */
static int mem_store(struct writer *writer, uint64_t pos, const char *src, uint64_t n)
{
    uint64_t part_size = writer->config.part_size;
    while (n > 0) {
        uint64_t buffer_end = writer->sent_upto + part_size;
        if (pos == buffer_end) {
            int rc = mem_send_buffer(writer);
            if (rc < 0)
                return rc;
            continue;
        }
        uint64_t chunk = MIN(n, buffer_end - pos);
        if (pos + chunk > writer->size) {
            int rc = budget_take(writer, pos + chunk - writer->size);
            if (rc < 0)
                return rc;
            writer->buf_budget += pos + chunk - writer->size;
            writer->size = pos + chunk;
        }
        if (!writer->buf)
            writer->buf = buffer_get(writer->shared, part_size);
        uint64_t at = pos - writer->sent_upto;
        char *dst = writer->buf + at;
        if (src) {
            memcpy(dst, src, (size_t)chunk);
            src += chunk;
        } else {
            memset(dst, 0, (size_t)chunk);
        }
        if (writer->buf_crc_len == at) { /* in order: fed while the bytes are in cache */
            writer->buf_crc = crc32c_update(writer->buf_crc, dst, (size_t)chunk);
            writer->buf_crc_len += chunk;
        } else if (at < writer->buf_crc_len) {
            writer->buf_crc_len = UINT64_MAX; /* a rewrite: computed when sent */
        }
        pos += chunk;
        n -= chunk;
    }
    return 0;
}

/* A write at offset >= sent_upto: the gap from the size (if any) reads as zeros. */
static int mem_write(struct writer *writer, uint64_t offset, const void *data, size_t len)
{
    int rc = 0;
    /* A file whose first bytes land more than a part beyond its start is being preallocated
     * (numpy.memmap, "truncate -s" then fill from 0): its zeros, sent as parts, would have to
     * be fetched back by the writes below them, so it is staged at once (nothing was sent: the
     * spill is free). A hole after data already sent is filled in memory, as written. */
    if (writer->sent_upto == 0 && offset > writer->size &&
        offset - writer->size > writer->config.part_size)
        return -EAGAIN;
    if (offset > writer->size)
        rc = mem_store(writer, writer->size, NULL, offset - writer->size);
    if (rc == 0)
        rc = mem_store(writer, offset, data, len);
    return rc;
}

/* A piece of the bytes sent (upload_read_back) into the staging file at dest. */
static int fetch_sent_piece(const char *name, int64_t generation, uint64_t object_size,
                            uint64_t dest, uint64_t len, void *user)
{
    return fetch_into_staging(user, name, generation, object_size, 0, len, dest);
}

/* Moves a memory-mode file to a staging file: the parts sent are read back (the temporary
 * upload completed, or the temporary part objects), then the buffer is appended. Streaming
 * stops until the next commit, which uploads the staging file. A failure loses the sent bytes:
 * the writer is broken. */
static int mem_spill(struct writer *writer)
{
    uint64_t sent = writer->sent_upto;
    flog_debug("writer",
               "'%s': memory buffers spill to a staging file (%" PRIu64 " bytes, %" PRIu64 " sent)",
               writer->object_name, writer->size, sent);
    int rc = ensure_staging(writer);
    if (sent > 0 || stream_active(writer)) {
        if (rc == 0 && stream_active(writer))
            rc = upload_read_back(writer->upload, fetch_sent_piece, writer);
        stream_discard(writer); /* aborts what was not completed, deletes temporary parts */
        writer->stats.streams_abandoned++;
    }
    if (rc == 0 && writer->size > sent)
        rc = pwrite_all(writer->fd, writer->buf, (size_t)(writer->size - sent), sent);
    if (rc == 0 && ftruncate(writer->fd, (off_t)writer->size) < 0)
        rc = -errno;
    mem_release(writer);
    crc_cut(writer, 0);
    writer->stream_disabled = true;
    writer->stats.spills++;
    if (rc < 0) {
        flog_error("writer",
                   "cannot move '%s' (%" PRIu64 " bytes written) to a staging file: "
                   "%s; the file's later writes and close fail",
                   writer->object_name, writer->size, g_strerror(-rc));
        writer->broken = -EIO;
        return -EIO;
    }
    writer->materialized = true;
    return 0;
}

int writer_write(struct writer *writer, uint64_t offset, const void *data, size_t len)
{
    g_mutex_lock(&writer->lock);
    if (writer->sealed) {
        writer_unlock(writer);
        return -EIO;
    }
    if (writer->broken) {
        writer_unlock(writer);
        return writer->broken;
    }
    if (writer->mem_mode) {
        writer->dirty = true;
        if (offset >= writer->sent_upto && mem_write(writer, offset, data, len) == 0) {
            writer_unlock(writer);
            return 0;
        }
        /* Below what was sent, or out of budget: the rest of the file's life is staged. */
        flog_debug("writer",
                   "'%s': write of %zu at %" PRIu64 " (size %" PRIu64 ", sent %" PRIu64 ")",
                   writer->object_name, len, offset, writer->size, writer->sent_upto);
        int rc = mem_spill(writer);
        if (rc < 0) {
            writer_unlock(writer);
            return rc;
        }
    }
    int rc = materialize(writer);
    if (rc == 0 && writer_change_breaks_stream(offset, writer->sent_upto))
        stream_abandon(writer);
    if (rc == 0) {
        crc_cut(writer, offset);
        rc = pwrite_all(writer->fd, data, len, offset);
    }
    if (rc == 0) {
        crc_feed(writer, offset, data, len);
        writer->dirty = true;
        if (offset + len > writer->size)
            writer->size = offset + len;
        rc = stream_advance(writer);
    }
    writer_unlock(writer);
    return rc;
}

bool writer_has_content(struct writer *writer)
{
    g_mutex_lock(&writer->lock);
    bool owns = writer->owns_content || writer->materialized;
    writer_unlock(writer);
    return owns;
}

int writer_read(struct writer *writer, uint64_t offset, size_t len, void *dst, size_t *got)
{
    g_mutex_lock(&writer->lock);
    int rc = writer->broken;
    if (rc == 0 && writer->mem_mode && offset >= writer->sent_upto) {
        /* From the buffer. */
        size_t total = 0;
        if (offset < writer->size) {
            total = (size_t)MIN((uint64_t)len, writer->size - offset);
            memcpy(dst, writer->buf + (offset - writer->sent_upto), total);
        }
        writer_unlock(writer);
        *got = total;
        return 0;
    }
    if (rc == 0 && writer->mem_mode)
        rc = mem_spill(writer); /* bytes already sent are read back from the staging file */
    if (rc == 0)
        rc = materialize(writer); /* content committed from memory: fetched once */
    uint64_t size = writer->size;
    writer_unlock(writer);
    if (rc < 0)
        return rc;
    size_t total = 0;
    if (offset < size) {
        if (len > size - offset)
            len = (size_t)(size - offset);
        while (total < len) {
            ssize_t n =
                pread(writer->fd, (char *)dst + total, len - total, (off_t)(offset + total));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
            if (n == 0) {
                /* A hole at the end of the staging file reads as zeros. */
                memset((char *)dst + total, 0, len - total);
                total = len;
                break;
            }
            total += (size_t)n;
        }
    }
    *got = total;
    return 0;
}

int writer_truncate(struct writer *writer, uint64_t size)
{
    g_mutex_lock(&writer->lock);
    int rc = writer->sealed ? -EIO : writer->broken;
    if (rc == 0 && writer->mem_mode) {
        writer->dirty = true;
        if (size == 0 && writer->sent_upto > 0) {
            /* Nothing to keep (O_TRUNC reopen, ftruncate(0)): the stream goes, the file stays
             * in memory. */
            stream_discard(writer);
            mem_release(writer);
            writer->mem_mode = true;
            writer->size = 0;
        } else if (writer->sent_upto == 0 && size > writer->size &&
                   size - writer->size > writer->config.part_size) {
            rc = -EAGAIN; /* preallocation: staged (see mem_write) */
        } else if (size >= writer->size) {
            rc = mem_store(writer, writer->size, NULL, size - writer->size);
        } else if (size >= writer->sent_upto) {
            if (size - writer->sent_upto < writer->buf_crc_len)
                writer->buf_crc_len = UINT64_MAX;
            budget_give(writer, writer->size - size);
            writer->buf_budget -= writer->size - size;
            writer->size = size;
        } else {
            rc = -EAGAIN;
        }
        if (rc == 0) {
            writer_unlock(writer);
            return 0;
        }
        rc = mem_spill(writer);
    }
    if (rc < 0) {
        writer_unlock(writer);
        return rc;
    }
    if (!writer->materialized && size == 0) { /* nothing to fetch */
        if (!writer->config.no_memory_buffers && writer->config.mode != WRITER_UPLOAD_RESUMABLE) {
            writer->mem_mode = true; /* empty: what follows is written in memory again */
            writer->owns_content = true;
            writer->size = 0;
            writer->dirty = true;
            crc_cut(writer, 0);
            writer_unlock(writer);
            return 0;
        }
        rc = ensure_staging(writer);
        if (rc == 0) {
            writer->materialized = true;
            writer->size = 0;
        }
    }
    if (rc == 0)
        rc = materialize(writer);
    if (rc == 0 && writer_change_breaks_stream(size, writer->sent_upto))
        stream_abandon(writer);
    if (rc == 0) {
        crc_cut(writer, size);
        if (ftruncate(writer->fd, (off_t)size) < 0)
            rc = -errno;
    }
    if (rc == 0) {
        writer->size = size;
        writer->dirty = true;
        rc = stream_advance(writer);
    }
    writer_unlock(writer);
    return rc;
}

void writer_set_mtime(struct writer *writer, int64_t mtime_ns)
{
    g_mutex_lock(&writer->lock);
    writer->has_mtime = true;
    writer->mtime_ns = mtime_ns;
    writer_unlock(writer);
}

void writer_mark_unlinked(struct writer *writer)
{
    g_mutex_lock(&writer->lock);
    writer->unlinked = true;
    writer_unlock(writer);
}

void writer_content_published(struct writer *writer)
{
    g_mutex_lock(&writer->lock);
    if (!writer->mem_mode && !writer->materialized && !writer->dirty && writer->base.exists)
        writer->owns_content = false;
    writer_unlock(writer);
}

bool writer_has_object(struct writer *writer)
{
    g_mutex_lock(&writer->lock);
    bool exists = writer->base.exists;
    writer_unlock(writer);
    return exists;
}

bool writer_unlinked(struct writer *writer)
{
    return __atomic_load_n(&writer->shown_unlinked, __ATOMIC_ACQUIRE);
}

uint64_t writer_size(struct writer *writer)
{
    return __atomic_load_n(&writer->shown_size, __ATOMIC_ACQUIRE);
}

bool writer_dirty(struct writer *writer)
{
    return __atomic_load_n(&writer->shown_dirty, __ATOMIC_ACQUIRE);
}

/* ---- commit ---- */

/* One request: the whole file (body). */
static int commit_single(struct writer *writer, const struct gcs_body *body,
                         const struct gcs_write_attrs *attrs,
                         const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    int rc = upload_begin(writer->upload, &upload_single, NULL);
    if (rc < 0)
        return rc;
    upload_append(writer->upload, 0, body, NULL); /* kept for the commit */
    return upload_commit(writer->upload, attrs, pre, out);
}

/* One resumable session of the staging file, part_size bytes a request. */
static int commit_resumable(struct writer *writer, const struct gcs_write_attrs *attrs,
                            const struct gcs_write_preconditions *pre, struct gcs_object *out)
{
    struct upload_begin_args args = {
        .attrs = attrs, .pre = pre, .total_size = (int64_t)writer->size};
    int rc = upload_begin(writer->upload, &upload_resumable, &args);
    if (rc < 0)
        return rc;
    uint64_t offset = 0;
    size_t chunk = writer->config.part_size;
    do {
        uint64_t left = writer->size - offset;
        uint64_t len = left <= chunk ? left : chunk;
        struct gcs_body body = {
            .fd = writer->fd, .fd_offset = offset, .len = len, .has_crc32c = true};
        rc = range_crc(writer, offset, len, &body.crc32c);
        if (rc < 0) {
            upload_abort(writer->upload); /* cancels the session */
            return rc;
        }
        rc = upload_append(writer->upload, offset, &body, NULL);
        offset += len;
    } while (rc == 0 && offset < writer->size);
    /* A failed part: its error, and the session cancelled. */
    return upload_commit(writer->upload, attrs, pre, out);
}

/* Commit of a memory-mode file: one upload from the buffer for a small file; otherwise the
 * buffer as the last part, the temporary upload completed and composed onto the object name
 * (with the precondition), the temporary object deleted. The buffered bytes are gone after it,
 * whatever the outcome, except after a failed one-request upload (*kept: still buffered). */
static int commit_memory(struct writer *writer, const struct gcs_write_attrs *attrs,
                         const struct gcs_write_preconditions *pre, struct gcs_object *out,
                         bool *kept)
{
    int rc = 0;
    if (!stream_active(writer) && writer->sent_upto == 0 &&
        writer->size <= writer->config.small_threshold) {
        struct gcs_body body = {.data = writer->buf ? writer->buf : "",
                                .fd = -1,
                                .len = writer->size,
                                .has_crc32c = true};
        body.crc32c = writer->buf_crc_len == writer->size
                          ? writer->buf_crc
                          : crc32c_update(0, body.data, (size_t)writer->size);
        rc = commit_single(writer, &body, attrs, pre, out);
        if (rc < 0)
            *kept = true; /* the bytes are still in the buffer: a later commit may retry */
        return rc;
    }
    if (writer->size > writer->sent_upto || !stream_active(writer))
        rc = mem_send_buffer(writer);
    if (rc == 0) /* the temporary upload completed and composed, or the parts composed */
        rc = upload_commit(writer->upload, attrs, pre, out);
    stream_discard(writer); /* aborts what did not complete; deletes temporary parts */
    return rc;
}

static int commit_locked(struct writer *writer, struct gcs_object *out)
{
    struct gcs_write_attrs attrs = {.has_mtime = writer->has_mtime,
                                    .mtime_ns = writer->mtime_ns,
                                    .content_type = mime_type_for_name(writer->object_name)};
    struct gcs_write_preconditions pre = {.has_if_generation_match = true,
                                          .if_generation_match = writer->base.generation};
    int rc;
    flog_debug("writer", "'%s': commit of %" PRIu64 " bytes (%s)", writer->object_name,
               writer->size, writer->mem_mode ? "memory buffers" : "staging file");
    if (writer->mem_mode) {
        bool kept = false;
        rc = commit_memory(writer, &attrs, &pre, out, &kept);
        if (kept)
            return rc;       /* a failed one-request upload: the file is still in memory, dirty */
        mem_release(writer); /* what the buffer still holds, when it was not sent */
        writer->materialized = false; /* the object holds the content; a change fetches it */
        crc_cut(writer, 0);
        if (rc < 0)
            writer->broken = -EIO; /* the buffered bytes are gone */
        else if (writer->size == 0)
            writer->mem_mode = true; /* nothing to fetch back: appends stay in memory (a
                                      * close of a dup'ed descriptor flushes an empty file) */
        return rc;                   /* reads come from the object once the caller published it */
    }
    enum writer_commit_kind kind = writer_commit_kind(writer->config.mode, stream_active(writer),
                                                      writer->size, writer->config.small_threshold);
    if (kind == WRITER_COMMIT_RESUMABLE) {
        rc = commit_resumable(writer, &attrs, &pre, out);
    } else if (kind == WRITER_COMMIT_SINGLE) {
        struct gcs_body body = {.fd = writer->fd, .len = writer->size, .has_crc32c = true};
        rc = range_crc(writer, 0, writer->size, &body.crc32c);
        if (rc == 0)
            rc = commit_single(writer, &body, &attrs, &pre, out);
    } else {
        rc = 0;
        if (!stream_active(writer))
            rc = stream_begin(writer);
        /* The rest of the file: whole parts, then the tail (the last part may be short). */
        uint64_t part_len;
        /* A short tail below 5 MiB is fine for the last part only. */
        while (rc == 0 && (part_len = writer_next_part_len(writer->size, writer->sent_upto,
                                                           writer->config.part_size, true)) > 0)
            rc = dispatch_part(writer, writer->sent_upto, part_len, NULL, NULL);
        if (rc == 0 && upload_part_count(writer->upload) == 0) /* an empty file, a stream */
            rc = dispatch_part(writer, 0, 0, NULL, NULL);
        if (rc == 0) /* the multipart upload completed, or the parts composed */
            rc = upload_commit(writer->upload, &attrs, &pre, out);
        stream_discard(writer); /* aborts what did not complete; deletes temporary objects */
    }
    return rc;
}

static int commit_under_lock(struct writer *writer, struct gcs_object *out, bool *committed);

int writer_commit(struct writer *writer, struct gcs_object *out, bool *committed)
{
    g_mutex_lock(&writer->lock);
    return commit_under_lock(writer, out, committed);
}

int writer_commit_sealed(struct writer *writer, struct gcs_object *out, bool *committed)
{
    g_mutex_lock(&writer->lock);
    writer->sealed = true; /* in the same hold as the commit: no write slips in between */
    return commit_under_lock(writer, out, committed);
}

/* The commit itself; the caller took the lock, which this releases. */
static int commit_under_lock(struct writer *writer, struct gcs_object *out, bool *committed)
{
    int rc = 0;
    bool did = false;
    if (writer->unlinked) {
        /* Nothing is uploaded; the content stays readable through open handles (a memory
         * file keeps its buffer and its stream until writer_free). */
        if (!writer->mem_mode)
            stream_discard(writer);
        writer->dirty = false;
    } else if (writer->broken && writer->dirty) {
        rc = writer->broken;
        flog_error("writer", "'%s' is not uploaded: an earlier failure lost bytes written to it",
                   writer->object_name);
    } else if (writer->dirty) {
        struct gcs_object obj;
        memset(&obj, 0, sizeof(obj));
        rc = commit_locked(writer, &obj);
        writer->stream_disabled = false;
        if (rc == 0) {
            writer->base.exists = true;
            writer->base.generation = obj.generation;
            writer->base.size = writer->size;
            writer->dirty = false;
            writer->stats.commits++;
            metrics_add(METRICS_UPLOAD_COMMITS, 1);
            did = true;
            if (out)
                *out = obj;
            else
                gcs_object_clear(&obj);
        } else {
            /* Streaming restarts only for a new stream after a failure: the parts are gone. */
            flog_error("writer",
                       "commit of '%s' (%" PRIu64 " bytes, if-generation-match %" PRId64
                       ") failed: %s",
                       writer->object_name, writer->size, writer->base.generation,
                       rc == -ESTALE ? "another writer changed the object" : g_strerror(-rc));
        }
    }
    writer_unlock(writer);
    if (rc == 0)
        *committed = did;
    return rc;
}

void writer_get_stats(struct writer *writer, struct writer_stats *out)
{
    g_mutex_lock(&writer->lock);
    *out = writer->stats;
    writer_unlock(writer);
}

void writer_free(struct writer *writer)
{
    if (!writer)
        return;
    g_mutex_lock(&writer->lock);
    stream_discard(writer);
    mem_release(writer);
    writer_unlock(writer);
    upload_session_free(writer->upload); /* waits for the deletes earlier commits sent */
    g_mutex_lock(&writer->shared->uploads.lock);
    if (writer->shared->buffered == 0) /* no file holds bytes in memory: no spares kept idle */
        g_ptr_array_set_size(writer->shared->spare, 0);
    g_mutex_unlock(&writer->shared->uploads.lock);
    if (writer->fd >= 0)
        close(writer->fd);
    g_array_free(writer->part_crcs, TRUE);
    g_free((char *)writer->config.temp_dir);
    g_free((char *)writer->config.tmp_prefix);
    g_free(writer->object_name);
    g_mutex_clear(&writer->lock);
    g_free(writer);
}
