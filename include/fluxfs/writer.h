/* The writer (io layer): the bytes of one file being written, and their upload.
 *
 * Two ways to hold the content while the file is open:
 *
 * Memory (a new or truncated file written sequentially, the checkpoint case): bytes go into a
 * part-sized buffer; when bytes beyond a full buffer arrive, the buffer is sent as the next part
 * (its CRC32C computed from memory) and freed when the part is acknowledged, so the daemon holds
 * at most the part being filled plus the parts in flight. A write may skip forward (the gap
 * reads as zeros) or rewrite bytes still in the buffer. Every buffered byte counts against one
 * budget shared by all writers (writer_shared_new); a writer that would exceed it waits for
 * parts in flight to drain, or spills to a staging file when nothing is in flight. The parts go
 * to an XML multipart upload of a temporary object under tmp_prefix (or, without the XML API,
 * to temporary part objects), so bytes already sent can be read back: a write, truncate or
 * read below what was sent spills the file to a staging file (completing the temporary upload
 * and fetching it back; rare: seek-back patches, numpy.savez) and it continues there. A commit
 * completes the temporary upload and composes it onto the object name in one request with the
 * precondition, then deletes the temporary object; a file up to small_threshold is one upload
 * from memory. After a commit the content is the object's: a later change fetches it into a
 * staging file. A failed part, or a failed commit of a file that streamed parts, loses the
 * buffered bytes, so every later write and commit of that file fails (EIO) instead of
 * uploading anything else; a failed one-request upload keeps them (the next commit retries).
 *
 * Staging file (edits of existing objects, spilled files, resumable mode): every byte goes to
 * a local staging file (O_TMPFILE under the temp dir), which is the file's content while it is
 * open: reads are preads of it, edits anywhere are pwrites, truncate is ftruncate. Streaming:
 * as soon as a whole part (part_size bytes) below the current size exists, and no write has
 * touched bytes already sent, the part is uploaded from the staging file (pread as the body)
 * while the application goes on writing, to a multipart upload of the object name itself. The
 * CRC32C is computed from the bytes as they are written, per part, as long as the file is
 * written sequentially from offset 0; a part the writes did not cover in order has its CRC32C
 * read back. A write or truncate below what was sent abandons the stream (aborts it) and the
 * whole staging file is uploaded at commit instead.
 *
 * Commit (close/fsync): waits for the parts in flight, sends the tail and completes (or
 * composes), or uploads a small file in one request, always with the precondition
 * ifGenerationMatch = the generation the file was based on (0 for a new object), so a lost race
 * is -ESTALE and the object appears atomically or not at all. A failed commit aborts the
 * multipart upload and deletes temporary objects. The next commit uses the new generation.
 *
 * Crash cleanup marker (multipart): a small temporary object naming the upload, so the next
 * mount aborts the upload of a crashed daemon. It is uploaded asynchronously right after the
 * multipart begin, overlapped with the first parts, and awaited before the upload is completed
 * or aborted; once the upload is completed or aborted it is deleted without waiting, and
 * writer_free waits for those deletes (and those of completed temporary objects).
 *
 * Uploads: the writer says what to upload and never which protocol does it: every upload
 * (the stream's parts, a one-request upload, a resumable session) goes through the writer's
 * upload session (upload.h: begin, append a part, commit, abort; multipart, composite,
 * resumable and one request behind one table of functions each).
 *
 * Caps: parts in flight per file (max_parts_in_flight) and across all files; buffered bytes
 * across all files. Threads: all writer_* functions may block (never call them from a gcs
 * callback, nor with a lock of another layer held), except writer_size, writer_dirty and
 * writer_unlinked, which read atomics and never block; one lock per writer serializes them,
 * and a commit holds it for its whole upload. The shared state's upload pool lock
 * (upload.h) protects every part's state (done, err, etag, generation, buffer) and the
 * counters and buffer budget; gcs callbacks take only that lock. Ownership: the writer copies the
 * names it is given; writer_free aborts what was not committed and closes the staging file. */
#ifndef FLUXFS_WRITER_H
#define FLUXFS_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fluxfs/gcs.h"

enum writer_upload_mode {
    WRITER_UPLOAD_AUTO = 0,  /* XML multipart, composite when the XML API is missing */
    WRITER_UPLOAD_MULTIPART, /* XML multipart only (a missing API fails the commit) */
    WRITER_UPLOAD_COMPOSITE, /* parallel composite upload */
    WRITER_UPLOAD_RESUMABLE, /* one resumable upload at commit (no streaming) */
};

struct writer_config {
    size_t part_size;             /* >= 5 MiB, a multiple of 256 KiB; default 16 MiB */
    size_t small_threshold;       /* files up to this size: one request at commit */
    unsigned max_parts_in_flight; /* per file */
    enum writer_upload_mode mode;
    const char *temp_dir;   /* staging files; NULL = g_get_tmp_dir() */
    const char *tmp_prefix; /* temporary objects ("<prefix>.fluxfs/tmp/<mount id>/") */
    bool no_memory_buffers; /* every file through a staging file (the older way) */
};

/* State shared by every writer of a mount: the global caps on parts in flight and on bytes
 * held in memory buffers (0 = 512 MiB). */
struct writer_shared;
struct writer_shared *writer_shared_new(struct gcs_client *client, unsigned max_parts_in_flight,
                                        uint64_t max_buffer_bytes);
void writer_shared_free(struct writer_shared *shared); /* accepts NULL */

/* The memory buffers of every writer: outside the read budget (--memory-limit), bounded by
 * --write-buffer-size. */
struct writer_buffer_stats {
    uint64_t used, peak, limit;
};
void writer_shared_get_buffer_stats(struct writer_shared *shared, struct writer_buffer_stats *out);

/* What the file is based on: an existing object (exists, generation, size) or nothing. */
struct writer_base {
    bool exists;
    int64_t generation;
    uint64_t size;
};

struct writer_stats {
    uint64_t parts_sent, commits, streams_abandoned, bytes_fetched;
    uint64_t crc_reads; /* uploads whose CRC32C was read back from the staging file */
    uint64_t spills;    /* memory-buffered files moved to a staging file */
};

struct writer;

/* truncate: the content starts empty (O_TRUNC, create); else the existing object is fetched
 * into the staging file on the first change (lazily: an O_RDWR open that only reads fetches
 * nothing). A new writer is dirty when it starts empty (a created file must appear at close). */
int writer_new(struct writer_shared *shared, const struct writer_config *config,
               const char *object_name, const struct writer_base *base, bool truncate,
               struct writer **out);
void writer_free(struct writer *writer); /* accepts NULL */

int writer_write(struct writer *writer, uint64_t offset, const void *data, size_t len);
/* Whether reads must come from the writer: it holds the content (in memory or a staging
 * file). False before the first change of an existing object, and after the commit of a
 * memory-buffered file (until its next change): reads then come from the object. */
bool writer_has_content(struct writer *writer);
int writer_read(struct writer *writer, uint64_t offset, size_t len, void *dst, size_t *got);
int writer_truncate(struct writer *writer, uint64_t size);
/* The mtime to store with the next commit. */
void writer_set_mtime(struct writer *writer, int64_t mtime_ns);
/* The file was unlinked: later commits do nothing. */
void writer_mark_unlinked(struct writer *writer);
bool writer_unlinked(struct writer *writer);
/* After a commit of a memory-buffered file, once the caller's caches show the new object:
 * reads may come from the object (writer_has_content turns false until the next change). */
void writer_content_published(struct writer *writer);
/* Whether the file is based on an object (it existed, or a commit made it). */
bool writer_has_object(struct writer *writer);
/* Lock-free (atomics published as each writer_* call ends): they never wait for a commit in
 * progress, so a mount-wide lock may be held while calling them. writer_dirty: changed since
 * the last commit and not unlinked. */
uint64_t writer_size(struct writer *writer);
bool writer_dirty(struct writer *writer);

/* Makes the object match the staging file. 0 with *out (optional, cleared by the caller)
 * set when an upload happened (*committed true); 0 without one when nothing was dirty.
 * -ESTALE for a lost precondition race, -EIO etc. for other failures (logged once here). */
int writer_commit(struct writer *writer, struct gcs_object *out, bool *committed);
/* writer_commit for shutdown: from the same hold of the lock on, every write and truncate
 * fails with -EIO, so no write can be acknowledged after the bytes were committed. */
int writer_commit_sealed(struct writer *writer, struct gcs_object *out, bool *committed);
void writer_get_stats(struct writer *writer, struct writer_stats *out);

/* ---- The writer's decisions, as pure functions (unit-tested; the writer uses them) ---- */

/* Length of the next part to send from sent_upto in a file of size bytes. While writing
 * (final false): part_size when a whole part exists below the size with at least one byte
 * beyond it (so the commit's tail is never empty), else 0. At commit (final true): the rest in
 * part_size pieces, the last one short; 0 when everything was sent. */
uint64_t writer_next_part_len(uint64_t size, uint64_t sent_upto, uint64_t part_size, bool final);

/* Whether a change at offset (a write starting there, or a truncate to it) touches bytes that
 * were already sent: the stream no longer matches the file and must be abandoned. Sequential
 * writes (offset >= sent_upto) keep it. */
bool writer_change_breaks_stream(uint64_t offset, uint64_t sent_upto);

enum writer_commit_kind {
    WRITER_COMMIT_RESUMABLE, /* one resumable upload of the staging file */
    WRITER_COMMIT_SINGLE,    /* one request (small file, nothing streamed) */
    WRITER_COMMIT_STREAM,    /* the parts: complete the multipart upload or compose */
};
/* How a commit uploads a file of size bytes. */
enum writer_commit_kind writer_commit_kind(enum writer_upload_mode mode, bool stream_active,
                                           uint64_t size, uint64_t small_threshold);

/* CRC32C (as sent in x-goog-hash) of len bytes of fd at offset, read with pread.
 * -EIO when the file is shorter, -errno on a read error. */
int writer_crc_of_range(int fd, uint64_t offset, uint64_t len, uint32_t *out);

/* Crash cleanup at mount: deletes temporary objects under temp_root ("<prefix>.fluxfs/tmp/")
 * older than max_age_s and aborts the multipart uploads their markers name; with max_age_s 0
 * also aborts every multipart upload under mount_prefix. Returns the number of things removed
 * or a negative errno. */
int writer_cleanup_stale(struct gcs_client *client, const char *mount_prefix, const char *temp_root,
                         double max_age_s);

/* Removes every temporary object under tmp_prefix (one process's, or one supervised mount's)
 * whatever its age, and aborts the multipart uploads their markers name and every other upload
 * in progress under tmp_prefix (one begun just before a crash may have no marker yet); nothing
 * else. Returns the number of things removed or a negative errno. */
int writer_cleanup_prefix(struct gcs_client *client, const char *tmp_prefix);

#endif
