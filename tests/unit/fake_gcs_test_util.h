/* Helpers shared by the tests over the fake gcs layer (fake_gcs.h). */
#ifndef FLUXFS_TESTS_FAKE_GCS_TEST_UTIL_H
#define FLUXFS_TESTS_FAKE_GCS_TEST_UTIL_H

#include <check.h>
#include <glib.h>
#include <string.h>

#include "fake_gcs.h"
#include "fluxfs/crc32c.h"

#define MIB ((size_t)1 << 20)

/* len reproducible bytes (g_free them): the same seed gives the same bytes. */
static inline char *fake_test_bytes(size_t len, guint32 seed)
{
    char *data = g_malloc(len ? len : 1);
    GRand *rand = g_rand_new_with_seed(seed);
    for (size_t i = 0; i < len; i++)
        data[i] = (char)g_rand_int_range(rand, 0, 256);
    g_rand_free(rand);
    return data;
}

/* The live object name holds exactly data (len bytes) and says so in its CRC32C. */
static inline void fake_test_check_object(struct gcs_client *fake, const char *name,
                                          const char *data, size_t len)
{
    GBytes *stored = NULL;
    struct gcs_object meta;
    ck_assert_int_eq(fake_gcs_get(fake, name, &stored, &meta), 0);
    size_t stored_len;
    const char *bytes = g_bytes_get_data(stored, &stored_len);
    ck_assert_uint_eq(stored_len, len);
    ck_assert_int_eq(memcmp(bytes, data, len), 0);
    ck_assert(meta.has_crc32c);
    ck_assert_uint_eq(meta.crc32c, crc32c_update(0, data, len));
    ck_assert_uint_eq(meta.size, len);
    g_bytes_unref(stored);
    gcs_object_clear(&meta);
}

/* Polls cond (a counter the layer keeps) every millisecond for up to 20 s: the outcome is
 * checked, never assumed after a sleep. */
#define FAKE_TEST_WAIT_FOR(cond)                                                                   \
    do {                                                                                           \
        gint64 fake_test_deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;                  \
        while (!(cond) && g_get_monotonic_time() < fake_test_deadline)                             \
            g_usleep(1000);                                                                        \
        ck_assert_msg((cond), "timed out waiting for " #cond);                                     \
    } while (0)

#endif
