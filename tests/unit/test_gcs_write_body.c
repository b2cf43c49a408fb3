/* Streamed request bodies of the write calls (src/http/http_body.c): pieces from memory and from
 * a file range read in odd-sized slices, rewinding to any position (curl's seek, a resumable
 * resend from the persisted offset), and a staging file that is shorter than promised. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/http/http-internal.h"

static int temp_file_with(const uint8_t *data, size_t len)
{
    char path[] = "/tmp/fluxfs-body-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq((int)write(fd, data, len), (int)len);
    return fd;
}

/* Reads the whole body from the cursor in slices of step bytes. */
static GByteArray *read_all(struct http_body *body, size_t step)
{
    GByteArray *out = g_byte_array_new();
    uint8_t *buf = g_malloc(step);
    for (;;) {
        ptrdiff_t got = http_body_read(body, buf, step);
        ck_assert_int_ge(got, 0);
        if (got == 0)
            break;
        g_byte_array_append(out, buf, (guint)got);
    }
    g_free(buf);
    return out;
}

START_TEST(pieces_in_order_any_slice)
{
    uint8_t file_data[100000];
    for (size_t i = 0; i < sizeof(file_data); i++)
        file_data[i] = (uint8_t)(i * 13 + i / 256);
    int fd = temp_file_with(file_data, sizeof(file_data));
    char preamble[] = "--boundary\r\n";
    static const uint8_t borrowed[] = "borrowed bytes";

    struct http_body body;
    http_body_init(&body);
    http_body_add_memory(&body, preamble, strlen(preamble), true);
    memset(preamble, 'X', strlen(preamble)); /* a copy is independent of the caller's buffer */
    http_body_add_memory(&body, borrowed, 0, false); /* empty pieces are skipped */
    http_body_add_fd(&body, fd, 1000, 50000);
    http_body_add_memory(&body, borrowed, sizeof(borrowed) - 1, false);
    ck_assert_uint_eq(body.total, 12 + 50000 + sizeof(borrowed) - 1);

    GByteArray *want = g_byte_array_new();
    g_byte_array_append(want, (const guint8 *)"--boundary\r\n", 12);
    g_byte_array_append(want, file_data + 1000, 50000);
    g_byte_array_append(want, borrowed, sizeof(borrowed) - 1);

    const size_t steps[] = {1, 7, 4096, 65536, 1 << 20};
    for (size_t i = 0; i < G_N_ELEMENTS(steps); i++) {
        ck_assert_int_eq(http_body_seek(&body, 0), 0);
        GByteArray *got = read_all(&body, steps[i]);
        ck_assert_uint_eq(got->len, want->len);
        ck_assert(memcmp(got->data, want->data, want->len) == 0);
        g_byte_array_unref(got);
    }
    /* Any position: inside the preamble, at a piece boundary, inside the file, at the end. */
    const uint64_t positions[] = {5, 12, 12 + 25000, 12 + 50000, body.total};
    for (size_t i = 0; i < G_N_ELEMENTS(positions); i++) {
        ck_assert_int_eq(http_body_seek(&body, positions[i]), 0);
        GByteArray *got = read_all(&body, 3000);
        ck_assert_uint_eq(got->len, want->len - positions[i]);
        ck_assert(got->len == 0 || memcmp(got->data, want->data + positions[i], got->len) == 0);
        g_byte_array_unref(got);
    }
    ck_assert_int_eq(http_body_seek(&body, body.total + 1), -EINVAL);
    g_byte_array_unref(want);
    http_body_clear(&body);
    ck_assert_uint_eq(body.total, 0);
    uint8_t byte;
    ck_assert_int_eq((int)http_body_read(&body, &byte, 1), 0);
    close(fd);
}
END_TEST

START_TEST(short_or_bad_file_fails)
{
    static const uint8_t data[] = "0123456789";
    int fd = temp_file_with(data, 10);
    struct http_body body;
    http_body_init(&body);
    http_body_add_fd(&body, fd, 4, 100); /* promises 100 bytes, the file has 6 after 4 */
    uint8_t buf[256];
    ptrdiff_t got = http_body_read(&body, buf, sizeof(buf));
    ck_assert_int_eq((int)got, -1);
    ck_assert_int_eq(body.read_error, EIO);
    /* A rewind clears the error; the bytes that exist come first again. */
    ck_assert_int_eq(http_body_seek(&body, 0), 0);
    ck_assert_int_eq(body.read_error, 0);
    ck_assert_int_eq((int)http_body_read(&body, buf, 6), 6);
    ck_assert(memcmp(buf, "456789", 6) == 0);
    http_body_clear(&body);
    close(fd);

    http_body_init(&body);
    http_body_add_fd(&body, fd, 0, 10); /* closed: EBADF */
    ck_assert_int_eq((int)http_body_read(&body, buf, sizeof(buf)), -1);
    ck_assert_int_eq(body.read_error, EBADF);
    http_body_clear(&body);
}
END_TEST

TEST_SUITE(gcs_write_body_suite)
{
    Suite *s = suite_create("gcs_write_body");
    TCase *tc = tcase_create("body");
    tcase_add_test(tc, pieces_in_order_any_slice);
    tcase_add_test(tc, short_or_bad_file_fails);
    suite_add_tcase(s, tc);
    return s;
}
