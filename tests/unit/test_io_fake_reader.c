/* The reader (include/fluxfs/reader.h) over the fake gcs layer: sequential reads return the
 * object's bytes with readahead (several ranged GETs in flight, fewer GETs than reads, the
 * end-to-end CRC32C checked); a failed GET is -EIO and the next read fetches again; a
 * replaced generation is -ESTALE; a wrong CRC32C is caught (whole small objects: -EIO,
 * large ones read to the end: -EBADMSG). */
#include "test-common.h"

#include <errno.h>

#include "fake_gcs_test_util.h"
#include "fluxfs/reader.h"

#define NAME      "data/shard-0000.bin"
#define READ_SIZE (128 * 1024)

static const struct reader_config reader_config = {
    .small_file_threshold = 256 * 1024,
    .chunk = MIB,
    .window_max = 8 * MIB,
    .random_min = 256 * 1024,
    .demand_reserve = 4 * MIB,
};

struct fixture {
    struct gcs_client *fake;
    struct membudget *budget;
    char *data;
    size_t size;
    struct reader_object object;
};

static void fixture_init(struct fixture *f, size_t size)
{
    f->fake = fake_gcs_new();
    f->budget = membudget_new(64 * MIB);
    f->size = size;
    f->data = fake_test_bytes(size, 7);
    f->object = (struct reader_object){
        .name = NAME, .size = size, .has_crc32c = true, .crc32c = crc32c_update(0, f->data, size)};
    f->object.generation = fake_gcs_put(f->fake, NAME, f->data, size);
}

static void fixture_clear(struct fixture *f)
{
    fake_gcs_free(f->fake);
    membudget_free(f->budget);
    g_free(f->data);
}

struct first_read {
    struct reader *reader;
    char *buf;
    int rc;
    size_t got;
};

static gpointer first_read_main(gpointer data)
{
    struct first_read *r = data;
    r->rc = reader_read(r->reader, 0, READ_SIZE, r->buf, &r->got);
    return NULL;
}

START_TEST(sequential_reads_with_readahead)
{
    struct fixture f;
    fixture_init(&f, 24 * MIB + 1234);
    fake_gcs_set_latency(f.fake, FAKE_GCS_READ, 500);
    struct reader *reader = reader_new(f.fake, f.budget, &reader_config, &f.object);
    char *buf = g_malloc(READ_SIZE);
    /* The first read at offset 0 already sends its own GET and readahead beside it: with the
     * fake holding completions, both are seen in flight before any completes. */
    fake_gcs_hold(f.fake, true);
    struct first_read first = {.reader = reader, .buf = buf};
    GThread *thread = g_thread_new("first-read", first_read_main, &first);
    ck_assert(fake_gcs_wait_queued(f.fake, 2, 10000));
    fake_gcs_hold(f.fake, false);
    g_thread_join(thread);
    ck_assert_int_eq(first.rc, 0);
    ck_assert_uint_eq(first.got, READ_SIZE);
    ck_assert_int_eq(memcmp(buf, f.data, READ_SIZE), 0);
    size_t reads = 1;
    for (uint64_t off = READ_SIZE; off < f.size; off += READ_SIZE) {
        size_t got = 0;
        ck_assert_int_eq(reader_read(reader, off, READ_SIZE, buf, &got), 0);
        ck_assert_uint_eq(got, MIN((uint64_t)READ_SIZE, f.size - off));
        ck_assert_int_eq(memcmp(buf, f.data + off, got), 0);
        reads++;
    }
    size_t got = 1;
    ck_assert_int_eq(reader_read(reader, f.size, READ_SIZE, buf, &got), 0); /* EOF */
    ck_assert_uint_eq(got, 0);
    struct reader_stats stats;
    reader_get_stats(reader, &stats);
    ck_assert_uint_eq(stats.requests, fake_gcs_calls(f.fake, FAKE_GCS_READ));
    ck_assert_uint_lt(stats.requests, reads / 2); /* chunks of 1 MiB served 128 KiB reads */
    ck_assert_uint_ge(stats.bytes_fetched, f.size);
    ck_assert_uint_eq(stats.crc_checks, 1);
    ck_assert_uint_eq(stats.crc_mismatches, 0);
    ck_assert_uint_eq(stats.direct_reads, 0);
    ck_assert_uint_ge(fake_gcs_max_queued(f.fake), 2);
    reader_free(reader);
    ck_assert(fake_gcs_wait_idle(f.fake, 10000));
    g_free(buf);
    fixture_clear(&f);
}
END_TEST

START_TEST(failed_get_is_eio_then_refetched)
{
    struct fixture f;
    fixture_init(&f, 4 * MIB);
    struct reader *reader = reader_new(f.fake, f.budget, &reader_config, &f.object);
    char *buf = g_malloc(READ_SIZE);
    size_t got = 0;
    fake_gcs_fail(f.fake, FAKE_GCS_READ, NAME, 1, 0, -EIO); /* every GET of it fails */
    ck_assert_int_eq(reader_read(reader, 0, READ_SIZE, buf, &got), -EIO);
    uint64_t failed = fake_gcs_failures(f.fake, FAKE_GCS_READ);
    ck_assert_uint_ge(failed, 1);
    /* The failure is not remembered: the next read of the same bytes fetches them again. */
    fake_gcs_clear_faults(f.fake);
    ck_assert_int_eq(reader_read(reader, 0, READ_SIZE, buf, &got), 0);
    ck_assert_uint_eq(got, READ_SIZE);
    ck_assert_int_eq(memcmp(buf, f.data, READ_SIZE), 0);
    ck_assert_uint_gt(fake_gcs_calls(f.fake, FAKE_GCS_READ), failed);
    /* Only the 1st GET from now on fails: a read further on (random) gets -EIO once. */
    fake_gcs_fail(f.fake, FAKE_GCS_READ, NAME, 1, 1, -EIO);
    ck_assert_int_eq(reader_read(reader, 3 * MIB, READ_SIZE, buf, &got), -EIO);
    ck_assert_int_eq(reader_read(reader, 3 * MIB, READ_SIZE, buf, &got), 0);
    ck_assert_int_eq(memcmp(buf, f.data + 3 * MIB, READ_SIZE), 0);
    reader_free(reader);
    g_free(buf);
    fixture_clear(&f);
}
END_TEST

START_TEST(replaced_generation_is_estale)
{
    struct fixture f;
    fixture_init(&f, 4 * MIB);
    struct reader *reader = reader_new(f.fake, f.budget, &reader_config, &f.object);
    char *buf = g_malloc(READ_SIZE);
    size_t got = 0;
    fake_gcs_put(f.fake, NAME, "new", 3);
    ck_assert_int_eq(reader_read(reader, 2 * MIB, READ_SIZE, buf, &got), -ESTALE);
    reader_free(reader);
    g_free(buf);
    fixture_clear(&f);
}
END_TEST

START_TEST(wrong_crc_is_caught)
{
    /* A small object is fetched whole and checked by the gcs layer: -EIO. */
    struct fixture f;
    fixture_init(&f, 100 * 1024);
    f.object.crc32c ^= 1;
    struct reader *reader = reader_new(f.fake, f.budget, &reader_config, &f.object);
    char *buf = g_malloc(READ_SIZE);
    size_t got = 0;
    ck_assert_int_eq(reader_read(reader, 0, 4096, buf, &got), -EIO);
    reader_free(reader);
    fixture_clear(&f);
    /* A large one read to its end: the end-to-end check fails the last read. */
    fixture_init(&f, 3 * MIB + 5);
    f.object.crc32c ^= 1;
    reader = reader_new(f.fake, f.budget, &reader_config, &f.object);
    int rc = 0;
    for (uint64_t off = 0; rc == 0 && off < f.size; off += READ_SIZE)
        rc = reader_read(reader, off, READ_SIZE, buf, &got);
    ck_assert_int_eq(rc, -EBADMSG);
    struct reader_stats stats;
    reader_get_stats(reader, &stats);
    ck_assert_uint_eq(stats.crc_mismatches, 1);
    reader_free(reader);
    g_free(buf);
    fixture_clear(&f);
}
END_TEST

TEST_SUITE(io_fake_reader_suite)
{
    Suite *s = suite_create("io_fake_reader");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sequential_reads_with_readahead);
    tcase_add_test(tc, failed_get_is_eio_then_refetched);
    tcase_add_test(tc, replaced_generation_is_estale);
    tcase_add_test(tc, wrong_crc_is_caught);
    suite_add_tcase(s, tc);
    return s;
}
