/* The writer's decisions (include/fluxfs/writer.h): part cutting while writing and at commit,
 * sequential vs non-sequential changes, the commit kind, and the CRC32C of each part read
 * back from a real staging file. */
#include "test-common.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/writer.h"

#define MIB  (1024u * 1024u)
#define PART (16u * MIB)

/* Drives the cutting the way the writer does: after each append of `step` bytes, every part
 * writer_next_part_len allows; then the commit's parts. Checks that the parts tile [0, size)
 * in order, that only the last is short, and that the commit sends at least one byte. */
static void simulate(uint64_t size, uint64_t step, uint64_t part, unsigned *streamed,
                     unsigned *total)
{
    uint64_t written = 0, sent = 0, len;
    unsigned n = 0;
    while (written < size) {
        written += MIN(step, size - written);
        while ((len = writer_next_part_len(written, sent, part, false)) > 0) {
            ck_assert_uint_eq(len, part);
            ck_assert_uint_lt(sent + len, written); /* a byte is always kept back */
            sent += len;
            n++;
        }
    }
    *streamed = n;
    uint64_t tail = 0;
    while ((len = writer_next_part_len(size, sent, part, true)) > 0) {
        ck_assert_uint_le(len, part);
        if (len < part)
            ck_assert_uint_eq(sent + len, size); /* only the last part is short */
        sent += len;
        tail += len;
        n++;
    }
    ck_assert_uint_eq(sent, size);
    if (size > 0)
        ck_assert_uint_gt(tail, 0);
    *total = n;
}

START_TEST(cutting_while_writing_and_at_commit)
{
    unsigned streamed, total;
    /* Exactly one part: nothing streams (the byte kept back), the commit sends it. */
    simulate(PART, MIB, PART, &streamed, &total);
    ck_assert_uint_eq(streamed, 0);
    ck_assert_uint_eq(total, 1);
    /* One byte more: the first part streams, the tail is one byte. */
    simulate(PART + 1, MIB, PART, &streamed, &total);
    ck_assert_uint_eq(streamed, 1);
    ck_assert_uint_eq(total, 2);
    /* 100 MiB in 1 MiB writes: 6 whole parts stream, the 4 MiB tail at commit. */
    simulate(100ull * MIB, MIB, PART, &streamed, &total);
    ck_assert_uint_eq(streamed, 6);
    ck_assert_uint_eq(total, 7);
    /* 64 MiB exactly: 3 stream, the last whole part is the tail. */
    simulate(64ull * MIB, MIB, PART, &streamed, &total);
    ck_assert_uint_eq(streamed, 3);
    ck_assert_uint_eq(total, 4);
    /* One huge write of 8 GiB: every part but the last streams at once. */
    simulate(8ull << 30, 8ull << 30, PART, &streamed, &total);
    ck_assert_uint_eq(streamed, 511);
    ck_assert_uint_eq(total, 512);
    /* Odd write sizes, odd part sizes. */
    simulate(37ull * MIB + 12345, 4096 * 3 + 7, 5 * MIB, &streamed, &total);
    ck_assert_uint_eq(total, 8);
    ck_assert_uint_eq(streamed, 7);
    /* Empty file: nothing at all (the writer sends an empty part itself). */
    simulate(0, MIB, PART, &streamed, &total);
    ck_assert_uint_eq(total, 0);
}
END_TEST

START_TEST(cutting_edges)
{
    ck_assert_uint_eq(writer_next_part_len(10, 10, 4, true), 0);
    ck_assert_uint_eq(writer_next_part_len(10, 12, 4, true), 0); /* shrunk below sent */
    ck_assert_uint_eq(writer_next_part_len(10, 12, 4, false), 0);
    ck_assert_uint_eq(writer_next_part_len(10, 0, 0, false), 0); /* no part size: never */
    ck_assert_uint_eq(writer_next_part_len(10, 8, 4, true), 2);
    ck_assert_uint_eq(writer_next_part_len(12, 8, 4, false), 0);
    ck_assert_uint_eq(writer_next_part_len(13, 8, 4, false), 4);
    ck_assert_uint_eq(writer_next_part_len(UINT64_MAX, UINT64_MAX - 5, 4, false), 4);
    ck_assert_uint_eq(writer_next_part_len(UINT64_MAX, UINT64_MAX - 4, 4, false), 0);
}
END_TEST

START_TEST(sequential_vs_not)
{
    /* Appending at or past what was sent keeps the stream (holes past it are fine). */
    ck_assert(!writer_change_breaks_stream(0, 0));
    ck_assert(!writer_change_breaks_stream(PART, PART));
    ck_assert(!writer_change_breaks_stream(PART + 100, PART));
    ck_assert(!writer_change_breaks_stream(3 * PART, PART));
    /* Seeking back into a sent part, or truncating below it, breaks it. */
    ck_assert(writer_change_breaks_stream(PART - 1, PART));
    ck_assert(writer_change_breaks_stream(0, PART));
    ck_assert(writer_change_breaks_stream(0, 1));
}
END_TEST

START_TEST(commit_kind_transitions)
{
    const uint64_t small = PART;
    /* A stream under way always finishes as a stream, whatever the mode and size. */
    for (int m = WRITER_UPLOAD_AUTO; m <= WRITER_UPLOAD_RESUMABLE; m++) {
        ck_assert_int_eq(writer_commit_kind(m, true, 1, small), WRITER_COMMIT_STREAM);
        ck_assert_int_eq(writer_commit_kind(m, true, 10 * small, small), WRITER_COMMIT_STREAM);
    }
    /* Nothing streamed: small files in one request, up to the threshold inclusive. */
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_AUTO, false, 0, small), WRITER_COMMIT_SINGLE);
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_AUTO, false, small, small),
                     WRITER_COMMIT_SINGLE);
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_COMPOSITE, false, small, small),
                     WRITER_COMMIT_SINGLE);
    /* Larger and not streamed (a stream abandoned by a seek back): parts at commit. */
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_AUTO, false, small + 1, small),
                     WRITER_COMMIT_STREAM);
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_MULTIPART, false, 8ull << 30, small),
                     WRITER_COMMIT_STREAM);
    /* Resumable mode never streams: one resumable upload, small or not. */
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_RESUMABLE, false, 1, small),
                     WRITER_COMMIT_RESUMABLE);
    ck_assert_int_eq(writer_commit_kind(WRITER_UPLOAD_RESUMABLE, false, 8ull << 30, small),
                     WRITER_COMMIT_RESUMABLE);
}
END_TEST

/* A real file of pseudo-random bytes; the CRC of each part must equal the CRC of that slice
 * of memory, and the parts' CRCs combine (by continuing the CRC) into the whole file's. */
START_TEST(crc_per_part_from_file)
{
    const size_t size = 3 * MIB + 777; /* crosses the writer's 1 MiB read blocks */
    unsigned char *data = g_malloc(size);
    GRand *rand = g_rand_new_with_seed(42);
    for (size_t i = 0; i < size; i++)
        data[i] = (unsigned char)g_rand_int(rand);
    g_rand_free(rand);
    char path[] = "/tmp/fluxfs-test-writer-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq(write(fd, data, size), (ssize_t)size);

    const uint64_t part = MIB + 4096;
    uint64_t sent = 0, len;
    uint32_t running = 0;
    unsigned parts = 0;
    while ((len = writer_next_part_len(size, sent, part, true)) > 0) {
        uint32_t crc = 0xdeadbeef;
        ck_assert_int_eq(writer_crc_of_range(fd, sent, len, &crc), 0);
        ck_assert_uint_eq(crc, crc32c_update(0, data + sent, (size_t)len));
        running = crc32c_update(running, data + sent, (size_t)len);
        sent += len;
        parts++;
    }
    ck_assert_uint_eq(parts, 3);
    uint32_t whole = 0;
    ck_assert_int_eq(writer_crc_of_range(fd, 0, size, &whole), 0);
    ck_assert_uint_eq(whole, running);
    ck_assert_uint_eq(whole, crc32c_update(0, data, size));
    /* Empty range: the CRC of nothing. */
    uint32_t empty = 1;
    ck_assert_int_eq(writer_crc_of_range(fd, size, 0, &empty), 0);
    ck_assert_uint_eq(empty, 0);
    /* Past the end: -EIO, and the out-parameter is left alone. */
    uint32_t untouched = 7;
    ck_assert_int_eq(writer_crc_of_range(fd, size - 10, 11, &untouched), -EIO);
    ck_assert_uint_eq(untouched, 7);
    close(fd);
    /* A closed descriptor: -EBADF. */
    ck_assert_int_eq(writer_crc_of_range(fd, 0, 1, &untouched), -EBADF);
    g_free(data);
}
END_TEST

TEST_SUITE(io_writer_suite)
{
    Suite *s = suite_create("io_writer");
    TCase *tc = tcase_create("decisions");
    tcase_add_test(tc, cutting_while_writing_and_at_commit);
    tcase_add_test(tc, cutting_edges);
    tcase_add_test(tc, sequential_vs_not);
    tcase_add_test(tc, commit_kind_transitions);
    tcase_add_test(tc, crc_per_part_from_file);
    suite_add_tcase(s, tc);
    return s;
}
