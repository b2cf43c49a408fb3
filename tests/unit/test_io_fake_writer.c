/* The writer (include/fluxfs/writer.h) over the fake gcs layer: multipart, composite and
 * staging-file uploads commit the bytes written with their CRC32C; a failed part fails the
 * commit with no object and nothing left behind (temporary objects, uploads in progress); a
 * failed one-request upload keeps the bytes for the next commit; a lost race is -ESTALE; a
 * resumable upload whose chunk fails is cancelled and the next commit sends it again; an edit
 * of an existing object fetches it (pinned) and uploads the result; lost replies and a crash
 * (the next mount's cleanup) leave nothing behind either. */
#include "test-common.h"

#include <errno.h>

#include "fake_gcs_test_util.h"
#include "fluxfs/writer.h"

#define OBJECT "out/model.bin"
#define TMP    "tmp/"

struct writer_case {
    enum writer_upload_mode mode;
    bool no_memory_buffers;
};

static const struct writer_case cases[] = {
    {WRITER_UPLOAD_MULTIPART, false}, /* memory buffers, temporary upload composed on commit */
    {WRITER_UPLOAD_COMPOSITE, false}, /* memory buffers, temporary part objects composed */
    {WRITER_UPLOAD_MULTIPART, true},  /* staging file, multipart upload of the object itself */
    {WRITER_UPLOAD_COMPOSITE, true},  /* staging file, temporary part objects */
};

static struct writer_config config_of(const struct writer_case *c)
{
    return (struct writer_config){.part_size = 5 * MIB,
                                  .small_threshold = MIB,
                                  .max_parts_in_flight = 4,
                                  .mode = c->mode,
                                  .tmp_prefix = TMP,
                                  .no_memory_buffers = c->no_memory_buffers};
}

/* Writes data in odd-sized sequential writes. */
static int write_all(struct writer *w, const char *data, size_t size)
{
    size_t step = MIB + 4099;
    for (size_t off = 0; off < size; off += step) {
        int rc = writer_write(w, off, data + off, MIN(step, size - off));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Nothing of the upload is left: no temporary object, no upload in progress. */
static void check_nothing_left(struct gcs_client *fake)
{
    ck_assert_uint_eq(fake_gcs_count(fake, TMP), 0);
    ck_assert_uint_eq(fake_gcs_open_uploads(fake), 0);
}

START_TEST(streamed_upload_commits_bytes_and_crc)
{
    const struct writer_case *c = &cases[_i];
    struct gcs_client *fake = fake_gcs_new();
    /* Parts complete later, on the fake's engine thread, while the writes go on. */
    fake_gcs_set_latency(fake, FAKE_GCS_PUT_PART, 2000);
    fake_gcs_set_latency(fake, FAKE_GCS_UPLOAD, 2000);
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(c);
    struct writer_base base = {0};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, true, &w), 0);
    size_t size = 12 * MIB + 4321; /* three parts: 5 + 5 + 2 MiB and a bit */
    char *data = fake_test_bytes(size, 1);
    ck_assert_int_eq(write_all(w, data, size), 0);
    struct gcs_object obj = {0};
    bool committed = false;
    ck_assert_int_eq(writer_commit(w, &obj, &committed), 0);
    ck_assert(committed);
    fake_test_check_object(fake, OBJECT, data, size);
    struct gcs_object live;
    ck_assert_int_eq(fake_gcs_get(fake, OBJECT, NULL, &live), 0);
    ck_assert_int_eq(obj.generation, live.generation);
    ck_assert_uint_eq(obj.crc32c, crc32c_update(0, data, size));
    gcs_object_clear(&live);
    gcs_object_clear(&obj);
    if (c->mode == WRITER_UPLOAD_MULTIPART) {
        ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_PUT_PART), 3);
        ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_MULTIPART_COMPLETE), 1);
    } else {
        ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_PUT_PART), 0);
        ck_assert_uint_eq(fake_gcs_calls_named(fake, FAKE_GCS_COMPOSE, OBJECT), 1);
        ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_COMPOSE_SOURCE), 3);
    }
    struct writer_stats stats;
    writer_get_stats(w, &stats);
    ck_assert_uint_eq(stats.parts_sent, 3);
    ck_assert_uint_eq(stats.commits, 1);
    /* A second commit with nothing changed uploads nothing. */
    ck_assert_int_eq(writer_commit(w, NULL, &committed), 0);
    ck_assert(!committed);
    writer_free(w);
    check_nothing_left(fake);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 1);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

START_TEST(failed_part_fails_commit_and_leaves_nothing)
{
    const struct writer_case *c = &cases[_i];
    struct gcs_client *fake = fake_gcs_new();
    fake_gcs_set_latency(fake, FAKE_GCS_PUT_PART, 1000);
    fake_gcs_set_latency(fake, FAKE_GCS_UPLOAD, 1000);
    /* The second part fails: a multipart part, or a composite's temporary part object. */
    if (c->mode == WRITER_UPLOAD_MULTIPART)
        fake_gcs_fail(fake, FAKE_GCS_PUT_PART, NULL, 2, 1, -EIO);
    else
        fake_gcs_fail(fake, FAKE_GCS_UPLOAD, TMP "part-", 2, 1, -EIO);
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(c);
    struct writer_base base = {0};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, true, &w), 0);
    size_t size = 12 * MIB + 4321;
    char *data = fake_test_bytes(size, 2);
    int rc = write_all(w, data, size); /* parts fail in the background: writes may not see it */
    ck_assert(rc == 0 || rc == -EIO);
    struct gcs_object obj = {0};
    bool committed = false;
    rc = writer_commit(w, &obj, &committed);
    ck_assert_int_eq(rc, -EIO);
    ck_assert(!committed);
    ck_assert_int_eq(fake_gcs_get(fake, OBJECT, NULL, NULL), -ENOENT);
    ck_assert_uint_eq(fake_gcs_failures(fake, c->mode == WRITER_UPLOAD_MULTIPART ? FAKE_GCS_PUT_PART
                                                                                 : FAKE_GCS_UPLOAD),
                      1);
    if (!c->no_memory_buffers) {
        /* The buffered bytes are gone: the file's later writes and commits fail too. */
        ck_assert_int_eq(writer_write(w, size, "x", 1), -EIO);
        ck_assert_int_eq(writer_commit(w, NULL, &committed), -EIO);
        ck_assert_int_eq(fake_gcs_get(fake, OBJECT, NULL, NULL), -ENOENT);
    }
    writer_free(w);
    check_nothing_left(fake);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 0);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

START_TEST(failed_small_upload_keeps_bytes_for_next_commit)
{
    struct gcs_client *fake = fake_gcs_new();
    fake_gcs_fail(fake, FAKE_GCS_UPLOAD, "small.txt", 1, 1, -EIO);
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(&cases[0]);
    struct writer_base base = {0};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, "small.txt", &base, true, &w), 0);
    char *data = fake_test_bytes(1000, 3);
    ck_assert_int_eq(writer_write(w, 0, data, 1000), 0);
    bool committed = false;
    ck_assert_int_eq(writer_commit(w, NULL, &committed), -EIO);
    ck_assert_int_eq(fake_gcs_get(fake, "small.txt", NULL, NULL), -ENOENT);
    ck_assert(writer_dirty(w));
    ck_assert_int_eq(writer_commit(w, NULL, &committed), 0); /* the retry */
    ck_assert(committed);
    fake_test_check_object(fake, "small.txt", data, 1000);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_UPLOAD), 2);
    writer_free(w);
    check_nothing_left(fake);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

START_TEST(lost_race_is_estale)
{
    struct gcs_client *fake = fake_gcs_new();
    int64_t opened = fake_gcs_put(fake, "f", "old", 3);
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(&cases[0]);
    struct writer_base base = {.exists = true, .generation = opened, .size = 3};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, "f", &base, true, &w), 0);
    ck_assert_int_eq(writer_write(w, 0, "mine", 4), 0);
    fake_gcs_put(fake, "f", "theirs", 6); /* another writer got there first */
    bool committed = false;
    ck_assert_int_eq(writer_commit(w, NULL, &committed), -ESTALE);
    fake_test_check_object(fake, "f", "theirs", 6);
    writer_free(w);
    check_nothing_left(fake);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

START_TEST(resumable_upload_and_its_failure)
{
    struct gcs_client *fake = fake_gcs_new();
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(&cases[0]);
    config.mode = WRITER_UPLOAD_RESUMABLE; /* a staging file, one session at commit */
    struct writer_base base = {0};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, true, &w), 0);
    size_t size = 11 * MIB + 17;
    char *data = fake_test_bytes(size, 4);
    ck_assert_int_eq(write_all(w, data, size), 0);
    /* The 2nd chunk fails: the session is cancelled, no object appears. */
    fake_gcs_fail(fake, FAKE_GCS_RESUMABLE_PUT, OBJECT, 2, 1, -EIO);
    bool committed = false;
    ck_assert_int_eq(writer_commit(w, NULL, &committed), -EIO);
    ck_assert_int_eq(fake_gcs_get(fake, OBJECT, NULL, NULL), -ENOENT);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_RESUMABLE_CANCEL), 1);
    check_nothing_left(fake);
    /* The staging file still holds the bytes: the next commit uploads them (3 chunks). */
    fake_gcs_reset_counters(fake);
    ck_assert_int_eq(writer_commit(w, NULL, &committed), 0);
    ck_assert(committed);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_RESUMABLE_PUT), 3);
    fake_test_check_object(fake, OBJECT, data, size);
    writer_free(w);
    check_nothing_left(fake);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

START_TEST(edit_of_existing_object)
{
    struct gcs_client *fake = fake_gcs_new();
    size_t size = 7 * MIB + 3;
    char *data = fake_test_bytes(size, 5);
    int64_t generation = fake_gcs_put(fake, OBJECT, data, size);
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(&cases[0]);
    struct writer_base base = {.exists = true, .generation = generation, .size = size};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, false, &w), 0);
    ck_assert(!writer_has_content(w)); /* nothing fetched until the first change */
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_READ), 0);
    /* A patch in the middle and an append: the object is fetched (pinned), then uploaded. */
    memcpy(data + 3 * MIB, "patched", 7);
    ck_assert_int_eq(writer_write(w, 3 * MIB, "patched", 7), 0);
    ck_assert_uint_ge(fake_gcs_calls_named(fake, FAKE_GCS_READ, OBJECT), 1);
    data = g_realloc(data, size + 5);
    memcpy(data + size, "tail!", 5);
    ck_assert_int_eq(writer_write(w, size, "tail!", 5), 0);
    char check[7];
    size_t got = 0;
    ck_assert_int_eq(writer_read(w, 3 * MIB, 7, check, &got), 0);
    ck_assert_uint_eq(got, 7);
    ck_assert_int_eq(memcmp(check, "patched", 7), 0);
    struct gcs_object obj = {0};
    bool committed = false;
    ck_assert_int_eq(writer_commit(w, &obj, &committed), 0);
    ck_assert(committed);
    ck_assert_int_gt(obj.generation, generation);
    gcs_object_clear(&obj);
    fake_test_check_object(fake, OBJECT, data, size + 5);
    writer_free(w);
    check_nothing_left(fake);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

/* Replies lost after the server acted: a temporary part object that landed although its
 * upload failed, and a crash marker likewise, are found and deleted all the same. */
START_TEST(lost_replies_leave_nothing_behind)
{
    struct gcs_client *fake = fake_gcs_new();
    fake_gcs_lose_reply(fake, FAKE_GCS_UPLOAD, TMP "part-", 2, 1, -EIO);
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(&cases[1]); /* composite, memory buffers */
    struct writer_base base = {0};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, true, &w), 0);
    size_t size = 12 * MIB + 4321;
    char *data = fake_test_bytes(size, 6);
    ck_assert_int_eq(write_all(w, data, size), 0);
    bool committed = false;
    ck_assert_int_eq(writer_commit(w, NULL, &committed), -EIO);
    ck_assert_int_eq(fake_gcs_get(fake, OBJECT, NULL, NULL), -ENOENT);
    writer_free(w);
    check_nothing_left(fake);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 0);

    /* Multipart: the marker's reply is lost; the upload commits, the marker is deleted. */
    fake_gcs_clear_faults(fake);
    fake_gcs_reset_counters(fake);
    fake_gcs_lose_reply(fake, FAKE_GCS_UPLOAD, TMP "mpu-", 1, 1, -EIO);
    config = config_of(&cases[0]);
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, true, &w), 0);
    ck_assert_int_eq(write_all(w, data, size), 0);
    ck_assert_int_eq(writer_commit(w, NULL, &committed), 0);
    ck_assert(committed);
    fake_test_check_object(fake, OBJECT, data, size);
    writer_free(w);
    check_nothing_left(fake);
    ck_assert_uint_eq(fake_gcs_failures(fake, FAKE_GCS_UPLOAD), 1);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

/* A daemon that crashes in the middle of a streamed upload leaves a multipart upload, its
 * crash marker and a temporary upload object: the next mount's cleanup keeps them while they
 * are young, and with max age 0 aborts the upload the marker names and deletes the rest. */
START_TEST(crash_cleanup_aborts_what_a_crashed_writer_left)
{
    struct gcs_client *fake = fake_gcs_new();
    struct writer_shared *shared = writer_shared_new(fake, 0, 0);
    struct writer_config config = config_of(&cases[0]); /* multipart, memory buffers */
    struct writer_base base = {0};
    struct writer *w = NULL;
    ck_assert_int_eq(writer_new(shared, &config, OBJECT, &base, true, &w), 0);
    size_t size = 12 * MIB + 4321;
    char *data = fake_test_bytes(size, 8);
    ck_assert_int_eq(write_all(w, data, size), 0);
    ck_assert(fake_gcs_wait_idle(fake, 10000)); /* two parts and the marker landed */
    ck_assert_uint_eq(fake_gcs_open_uploads(fake), 1);
    ck_assert_uint_eq(fake_gcs_count(fake, TMP "mpu-"), 1);
    /* The crash: the writer is never committed nor freed before the next mount's cleanup. */
    ck_assert_int_eq(writer_cleanup_stale(fake, "", TMP, 3600), 0); /* all young: kept */
    ck_assert_uint_eq(fake_gcs_open_uploads(fake), 1);
    int removed = writer_cleanup_stale(fake, "", TMP, 0);
    ck_assert_int_ge(removed, 1);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_MULTIPART_ABORT), 1); /* from the marker */
    check_nothing_left(fake);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), 0);
    writer_free(w); /* (its own abort and deletes now find nothing) */
    check_nothing_left(fake);
    g_free(data);
    writer_shared_free(shared);
    fake_gcs_free(fake);
}
END_TEST

TEST_SUITE(io_fake_writer_suite)
{
    Suite *s = suite_create("io_fake_writer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, streamed_upload_commits_bytes_and_crc, 0, G_N_ELEMENTS(cases));
    tcase_add_loop_test(tc, failed_part_fails_commit_and_leaves_nothing, 0, G_N_ELEMENTS(cases));
    tcase_add_test(tc, failed_small_upload_keeps_bytes_for_next_commit);
    tcase_add_test(tc, lost_race_is_estale);
    tcase_add_test(tc, resumable_upload_and_its_failure);
    tcase_add_test(tc, edit_of_existing_object);
    tcase_add_test(tc, lost_replies_leave_nothing_behind);
    tcase_add_test(tc, crash_cleanup_aborts_what_a_crashed_writer_left);
    suite_add_tcase(s, tc);
    return s;
}
