/* CRC32C and base64: known vectors, the hardware and table paths agreeing, combine. */
#include "test-common.h"

#include <glib.h>
#include <string.h>

#include "fluxfs/base64.h"
#include "fluxfs/crc32c.h"

START_TEST(crc32c_known_vectors)
{
    /* RFC 3720 B.4 and the classic check value. */
    ck_assert_uint_eq(crc32c_update(0, "123456789", 9), 0xE3069283u);
    uint8_t zeros[32] = {0};
    ck_assert_uint_eq(crc32c_update(0, zeros, 32), 0x8A9136AAu);
    uint8_t ones[32];
    memset(ones, 0xff, sizeof(ones));
    ck_assert_uint_eq(crc32c_update(0, ones, 32), 0x62A8AB43u);
    ck_assert_uint_eq(crc32c_update(0, "", 0), 0u);
}
END_TEST

START_TEST(crc32c_pieces_and_combine)
{
    uint8_t data[1000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = crc32c_update(0, data, sizeof(data));
    for (size_t split = 0; split <= sizeof(data); split += 37) {
        uint32_t a = crc32c_update(0, data, split);
        uint32_t b = crc32c_update(0, data + split, sizeof(data) - split);
        ck_assert_uint_eq(crc32c_update(a, data + split, sizeof(data) - split), whole);
        ck_assert_uint_eq(crc32c_combine(a, b, sizeof(data) - split), whole);
    }
    /* Lengths with many bits set, as a reader's multi-MiB replies have. */
    size_t big = (3u << 20) + 4097;
    uint8_t *large = g_malloc(big);
    for (size_t i = 0; i < big; i++)
        large[i] = (uint8_t)(i * 131 + (i >> 9));
    uint32_t large_whole = crc32c_update(0, large, big);
    size_t splits[] = {1, 4096, (1u << 20) + 3, big - 1};
    for (size_t i = 0; i < G_N_ELEMENTS(splits); i++) {
        uint32_t a = crc32c_update(0, large, splits[i]);
        uint32_t b = crc32c_update(0, large + splits[i], big - splits[i]);
        ck_assert_uint_eq(crc32c_combine(a, b, big - splits[i]), large_whole);
    }
    g_free(large);
}
END_TEST

/* The hardware path (three interleaved lanes on blocks of 12 KiB, one stream for the rest)
 * agrees with the table path on every length and alignment around the block boundaries. */
START_TEST(crc32c_hardware_matches_table)
{
    size_t size = 100 * 1024;
    uint8_t *data = g_malloc(size);
    GRand *rand = g_rand_new_with_seed(42);
    for (size_t i = 0; i < size; i++)
        data[i] = (uint8_t)g_rand_int(rand);
    static const size_t lengths[] = {0,     1,     7,     8,     4095,  4096,  12287,
                                     12288, 12289, 24576, 24577, 36863, 50000, 98304};
    for (size_t l = 0; l < G_N_ELEMENTS(lengths); l++) {
        for (size_t offset = 0; offset < 9; offset++) {
            uint32_t seed = g_rand_int(rand);
            ck_assert_uint_eq(crc32c_update(seed, data + offset, lengths[l]),
                              crc32c_update_table(seed, data + offset, lengths[l]));
        }
    }
    for (int round = 0; round < 200; round++) {
        size_t offset = (size_t)g_rand_int_range(rand, 0, 1000);
        size_t len = (size_t)g_rand_int_range(rand, 0, (gint32)(size - offset));
        ck_assert_uint_eq(crc32c_update(0, data + offset, len),
                          crc32c_update_table(0, data + offset, len));
    }
    g_rand_free(rand);
    g_free(data);
}
END_TEST

START_TEST(crc32c_base64_form)
{
    char text[9];
    crc32c_to_base64(0xE3069283u, text);
    ck_assert_str_eq(text, "4waSgw==");
    uint32_t back = 0;
    ck_assert_int_eq(crc32c_from_base64(text, &back), 0);
    ck_assert_uint_eq(back, 0xE3069283u);
    ck_assert_int_lt(crc32c_from_base64("not base64!", &back), 0);
    ck_assert_int_lt(crc32c_from_base64("AAAAAAAA", &back), 0); /* six bytes, not four */
    /* The same answers as decoding with base64_decode and checking for four bytes. */
    const char *texts[] = {"4waSgw", "4waSgw=", "4waSgw===", "4waSg",    "4waSgwA",   "4wa*gw==",
                           "",       "=",       "AAAAAA==",  "_-_-_-==", "4waSgw==x", "4waS gw="};
    for (size_t i = 0; i < G_N_ELEMENTS(texts); i++) {
        size_t len = 0;
        uint8_t *raw = base64_decode(texts[i], strlen(texts[i]), &len);
        bool four = raw && len == 4;
        uint32_t want =
            four ? (uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 | (uint32_t)raw[2] << 8 | raw[3]
                 : 0;
        g_free(raw);
        back = 0;
        ck_assert_int_eq(crc32c_from_base64(texts[i], &back) == 0, four);
        if (four)
            ck_assert_uint_eq(back, want);
    }
    uint8_t small[2];
    size_t got = 0;
    ck_assert_int_eq(base64_decode_into("Zm9v", 4, small, sizeof(small), &got), -1);
    ck_assert_int_eq(base64_decode_into("Zm8=", 4, small, sizeof(small), &got), 0);
    ck_assert_uint_eq(got, 2);
    ck_assert_int_eq(memcmp(small, "fo", 2), 0);
}
END_TEST

START_TEST(base64_round_trip)
{
    const char *inputs[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *expect[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < G_N_ELEMENTS(inputs); i++) {
        char *enc = base64_encode(inputs[i], strlen(inputs[i]), false);
        ck_assert_str_eq(enc, expect[i]);
        size_t len = 0;
        uint8_t *dec = base64_decode(enc, strlen(enc), &len);
        ck_assert_ptr_nonnull(dec);
        ck_assert_uint_eq(len, strlen(inputs[i]));
        ck_assert_int_eq(memcmp(dec, inputs[i], len), 0);
        g_free(enc);
        g_free(dec);
    }
    uint8_t raw[] = {0xfb, 0xff};
    char *url = base64_encode(raw, 2, true);
    ck_assert_str_eq(url, "-_8=");
    g_free(url);
    size_t len = 0;
    ck_assert_ptr_null(base64_decode("a", 1, &len));
}
END_TEST

TEST_SUITE(crc32c_suite)
{
    Suite *s = suite_create("crc32c");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, crc32c_known_vectors);
    tcase_add_test(tc, crc32c_pieces_and_combine);
    tcase_add_test(tc, crc32c_hardware_matches_table);
    tcase_add_test(tc, crc32c_base64_form);
    tcase_add_test(tc, base64_round_trip);
    suite_add_tcase(s, tc);
    return s;
}
