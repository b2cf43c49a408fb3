/* The upload session interface (include/fluxfs/upload.h) over the fake gcs layer, for each
 * protocol (XML multipart to the object or through a readable temporary, parallel composite,
 * resumable, one request): begin, append, commit make the object with the bytes and CRC32C
 * sent; an abort leaves nothing (no object, temporary, marker or upload in progress); a failed
 * part fails the commit and leaves nothing either; the parts' buffers are given back; the
 * bytes sent can be read back (multipart through a temporary, composite). */
#include "test-common.h"

#include <errno.h>

#include "fake_gcs_test_util.h"
#include "fluxfs/upload.h"

#define OBJECT    "out/upload.bin"
#define TMP       "tmp/"
#define PART_SIZE (5 * MIB)
#define SIZE      (12 * MIB + 4321) /* three parts: 5 + 5 + 2 MiB and a bit */

struct protocol_case {
    const struct upload_protocol *protocol;
    bool readable;
    enum fake_gcs_op part_op; /* the call that sends a part */
    const char *part_name;    /* the name it names (NULL = any) */
    bool buffers;             /* parts given buffers of their own (parallel protocols) */
};

static const struct protocol_case cases[] = {
    {&upload_multipart, false, FAKE_GCS_PUT_PART, NULL, true},
    {&upload_multipart, true, FAKE_GCS_PUT_PART, NULL, true},
    {&upload_composite, false, FAKE_GCS_UPLOAD, TMP "part-", true},
    {&upload_resumable, false, FAKE_GCS_RESUMABLE_PUT, NULL, false},
    {&upload_single, false, FAKE_GCS_UPLOAD, OBJECT, false},
};

struct fixture {
    struct gcs_client *fake;
    struct upload_pool pool;
    struct upload_session *session;
    unsigned buffers_back; /* pool.lock */
};

static void count_buffer(char *buffer, uint64_t len, void *user)
{
    struct fixture *f = user;
    (void)len;
    g_free(buffer);
    f->buffers_back++; /* buffer_done runs under pool.lock */
}

static void fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    f->fake = fake_gcs_new();
    /* Answers come later, on the fake's engine thread, while the caller goes on. */
    fake_gcs_set_latency(f->fake, FAKE_GCS_PUT_PART, 1000);
    fake_gcs_set_latency(f->fake, FAKE_GCS_UPLOAD, 1000);
    upload_pool_init(&f->pool, f->fake, 0);
    struct upload_session_config config = {.object_name = OBJECT,
                                           .tmp_prefix = TMP,
                                           .max_parts_in_flight = 2,
                                           .buffer_done = count_buffer,
                                           .buffer_user = f};
    f->session = upload_session_new(&f->pool, &config);
}

/* Frees the session (waiting for its deletes) and checks nothing of the upload is left. */
static void fixture_end(struct fixture *f)
{
    upload_session_free(f->session);
    ck_assert_uint_eq(fake_gcs_count(f->fake, TMP), 0);
    ck_assert_uint_eq(fake_gcs_open_uploads(f->fake), 0);
    upload_pool_clear(&f->pool);
    fake_gcs_free(f->fake);
}

static int begin(struct fixture *f, const struct protocol_case *c)
{
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    struct upload_begin_args args = {
        .pre = &pre, .total_size = (int64_t)SIZE, .readable = c->readable};
    return upload_begin(f->session, c->protocol, &args);
}

/* Appends size bytes of data: parts of PART_SIZE (one part for upload_single), each with a
 * buffer of its own when the case says so. The first error, or 0. */
static int append(struct fixture *f, const struct protocol_case *c, const char *data, size_t size)
{
    size_t step = c->protocol == &upload_single ? size : PART_SIZE;
    int rc = 0;
    for (size_t off = 0; rc == 0 && off < size; off += step) {
        size_t len = MIN(step, size - off);
        struct gcs_body body = {.fd = -1, .len = len, .has_crc32c = true};
        body.crc32c = crc32c_update(0, data + off, len);
        char *buffer = c->buffers ? g_memdup2(data + off, len) : NULL;
        body.data = buffer ? buffer : data + off;
        rc = upload_append(f->session, off, &body, buffer);
    }
    return rc;
}

START_TEST(begin_append_commit_makes_the_object)
{
    const struct protocol_case *c = &cases[_i];
    struct fixture f;
    fixture_init(&f);
    char *data = fake_test_bytes(SIZE, 11);
    ck_assert_int_eq(begin(&f, c), 0);
    ck_assert(upload_is_open(f.session));
    ck_assert_int_eq(append(&f, c, data, SIZE), 0);
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    struct gcs_object obj = {0};
    ck_assert_int_eq(upload_commit(f.session, NULL, &pre, &obj), 0);
    ck_assert(!upload_is_open(f.session));
    fake_test_check_object(f.fake, OBJECT, data, SIZE);
    struct gcs_object live;
    ck_assert_int_eq(fake_gcs_get(f.fake, OBJECT, NULL, &live), 0);
    ck_assert_int_eq(obj.generation, live.generation);
    ck_assert_uint_eq(obj.size, SIZE);
    gcs_object_clear(&live);
    gcs_object_clear(&obj);
    if (c->buffers) {
        g_mutex_lock(&f.pool.lock);
        ck_assert_uint_eq(f.buffers_back, 3);
        g_mutex_unlock(&f.pool.lock);
    }
    /* The session takes the next upload of the object: the precondition now names it. */
    int rc = begin(&f, c);
    if (rc == 0) {
        int appended = append(&f, c, data, SIZE); /* resumable: the last part meets it */
        ck_assert(appended == 0 || appended == -ESTALE);
        rc = upload_commit(f.session, NULL, &pre, NULL);
    }
    ck_assert_int_eq(rc, -ESTALE);
    ck_assert(!upload_is_open(f.session));
    fixture_end(&f);
    g_free(data);
}
END_TEST

START_TEST(abort_leaves_nothing)
{
    const struct protocol_case *c = &cases[_i];
    struct fixture f;
    fixture_init(&f);
    char *data = fake_test_bytes(SIZE, 12);
    ck_assert_int_eq(begin(&f, c), 0);
    /* All but the last part: a resumable upload is not finalized yet. */
    ck_assert_int_eq(append(&f, c, data, c->protocol == &upload_single ? SIZE : 2 * PART_SIZE), 0);
    upload_abort(f.session);
    ck_assert(!upload_is_open(f.session));
    ck_assert_uint_eq(upload_part_count(f.session), 0);
    ck_assert_int_eq(fake_gcs_get(f.fake, OBJECT, NULL, NULL), -ENOENT);
    if (c->protocol == &upload_resumable)
        ck_assert_uint_eq(fake_gcs_calls(f.fake, FAKE_GCS_RESUMABLE_CANCEL), 1);
    if (c->protocol == &upload_multipart)
        ck_assert_uint_eq(fake_gcs_calls(f.fake, FAKE_GCS_MULTIPART_ABORT), 1);
    upload_abort(f.session); /* nothing open: nothing done */
    fixture_end(&f);
    g_free(data);
}
END_TEST

START_TEST(failed_part_fails_commit)
{
    const struct protocol_case *c = &cases[_i];
    struct fixture f;
    fixture_init(&f);
    /* The second part fails (the one request, for upload_single). */
    fake_gcs_fail(f.fake, c->part_op, c->part_name, c->protocol == &upload_single ? 1 : 2, 1, -EIO);
    char *data = fake_test_bytes(SIZE, 13);
    ck_assert_int_eq(begin(&f, c), 0);
    int rc = append(&f, c, data, SIZE);
    /* Parallel parts fail in the background; a resumable part as it is sent. */
    ck_assert(rc == 0 || (rc == -EIO && c->protocol == &upload_resumable));
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    struct gcs_object obj = {0};
    ck_assert_int_eq(upload_commit(f.session, NULL, &pre, &obj), -EIO);
    ck_assert(!upload_is_open(f.session));
    ck_assert_int_eq(fake_gcs_get(f.fake, OBJECT, NULL, NULL), -ENOENT);
    ck_assert_uint_eq(fake_gcs_failures(f.fake, c->part_op), 1);
    if (c->buffers) { /* a failed part's buffer comes back too */
        g_mutex_lock(&f.pool.lock);
        ck_assert_uint_eq(f.buffers_back, 3);
        g_mutex_unlock(&f.pool.lock);
    }
    fixture_end(&f);
    g_free(data);
}
END_TEST

struct read_back_target {
    struct gcs_client *fake;
    char *bytes;
    size_t cap;
    unsigned pieces;
};

static int fetch_piece(const char *name, int64_t generation, uint64_t object_size, uint64_t dest,
                       uint64_t len, void *user)
{
    struct read_back_target *t = user;
    GBytes *stored = NULL;
    struct gcs_object meta;
    int rc = fake_gcs_get(t->fake, name, &stored, &meta);
    if (rc < 0)
        return rc;
    size_t stored_len;
    const char *data = g_bytes_get_data(stored, &stored_len);
    ck_assert_int_eq(meta.generation, generation);
    ck_assert_uint_eq(stored_len, object_size);
    ck_assert_uint_le(dest + len, t->cap);
    memcpy(t->bytes + dest, data, (size_t)len);
    t->pieces++;
    g_bytes_unref(stored);
    gcs_object_clear(&meta);
    return 0;
}

START_TEST(read_back_hands_the_bytes_sent)
{
    const struct protocol_case *c = &cases[_i];
    struct fixture f;
    fixture_init(&f);
    char *data = fake_test_bytes(SIZE, 14);
    ck_assert_int_eq(begin(&f, c), 0);
    ck_assert_int_eq(append(&f, c, data, 2 * PART_SIZE), 0);
    struct read_back_target target = {.fake = f.fake, .bytes = g_malloc0(SIZE), .cap = SIZE};
    int rc = upload_read_back(f.session, fetch_piece, &target);
    bool readable = c->protocol == &upload_composite || c->readable;
    if (c->protocol == &upload_single) {
        ck_assert_int_eq(rc, -EOPNOTSUPP);
    } else if (readable) {
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(target.pieces, c->protocol == &upload_composite ? 2 : 1);
        ck_assert_int_eq(memcmp(target.bytes, data, 2 * PART_SIZE), 0);
    } else {
        ck_assert_int_eq(rc, -EOPNOTSUPP);
    }
    upload_abort(f.session);
    ck_assert_int_eq(fake_gcs_get(f.fake, OBJECT, NULL, NULL), -ENOENT);
    fixture_end(&f);
    g_free(target.bytes);
    g_free(data);
}
END_TEST

/* A parallel session never has more parts in flight than its cap. */
START_TEST(parallel_parts_stay_within_the_cap)
{
    struct fixture f;
    fixture_init(&f);
    fake_gcs_set_latency(f.fake, FAKE_GCS_PUT_PART, 5000);
    char *data = fake_test_bytes(SIZE * 2, 15);
    ck_assert_int_eq(begin(&f, &cases[0]), 0);
    ck_assert_int_eq(append(&f, &cases[0], data, SIZE * 2), 0); /* 5 parts */
    struct gcs_write_preconditions pre = {.has_if_generation_match = true};
    ck_assert_int_eq(upload_commit(f.session, NULL, &pre, NULL), 0);
    /* The marker upload beside at most two parts. */
    ck_assert_uint_le(fake_gcs_max_queued(f.fake), 3);
    fake_test_check_object(f.fake, OBJECT, data, SIZE * 2);
    fixture_end(&f);
    g_free(data);
}
END_TEST

TEST_SUITE(io_fake_upload_suite)
{
    Suite *s = suite_create("io_fake_upload");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, begin_append_commit_makes_the_object, 0, G_N_ELEMENTS(cases));
    tcase_add_loop_test(tc, abort_leaves_nothing, 0, G_N_ELEMENTS(cases));
    tcase_add_loop_test(tc, failed_part_fails_commit, 0, G_N_ELEMENTS(cases));
    tcase_add_loop_test(tc, read_back_hands_the_bytes_sent, 0, G_N_ELEMENTS(cases));
    tcase_add_test(tc, parallel_parts_stay_within_the_cap);
    suite_add_tcase(s, tc);
    return s;
}
