/* CRC32C with a hardware path (SSE4.2 crc32 instruction) and a slicing-by-8 table fallback. */
#include "fluxfs/crc32c.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "fluxfs/base64.h"
#include <glib.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32c_software(uint32_t crc, const uint8_t *p, size_t len)
{
    pthread_once(&crc_table_once, crc_table_init);
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = crc_table[7][word & 0xff] ^ crc_table[6][(word >> 8) & 0xff] ^
              crc_table[5][(word >> 16) & 0xff] ^ crc_table[4][(word >> 24) & 0xff] ^
              crc_table[3][(word >> 32) & 0xff] ^ crc_table[2][(word >> 40) & 0xff] ^
              crc_table[1][(word >> 48) & 0xff] ^ crc_table[0][word >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
/* The crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so three
 * independent streams over three lanes of a block run about three times faster than one.
 * The lanes' states are joined by "shifting" a state over LANE_BYTES zero bytes, a linear map
 * of the 32-bit state kept as four 256-entry tables (built once from the instruction itself). */
#define LANE_BYTES 4096
static uint32_t lane_shift[4][256];
static pthread_once_t lane_shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42_serial(uint32_t crc,
                                                                      const uint8_t *p, size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}

__attribute__((target("sse4.2"))) static void lane_shift_init(void)
{
    static const uint8_t zeros[LANE_BYTES];
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++)
        basis[bit] = crc32c_sse42_serial(1u << bit, zeros, LANE_BYTES);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1 << bit))
                    v ^= basis[8 * k + bit];
            lane_shift[k][b] = v;
        }
    }
}

static inline uint32_t shift_lane(uint32_t state)
{
    return lane_shift[0][state & 0xff] ^ lane_shift[1][(state >> 8) & 0xff] ^
           lane_shift[2][(state >> 16) & 0xff] ^ lane_shift[3][state >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t len)
{
    if (len >= 3 * LANE_BYTES) {
        pthread_once(&lane_shift_once, lane_shift_init);
        while (len >= 3 * LANE_BYTES) {
            uint64_t c0 = crc, c1 = 0, c2 = 0;
            for (size_t i = 0; i < LANE_BYTES; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + LANE_BYTES + i, 8);
                memcpy(&w2, p + 2 * LANE_BYTES + i, 8);
                c0 = __builtin_ia32_crc32di(c0, w0);
                c1 = __builtin_ia32_crc32di(c1, w1);
                c2 = __builtin_ia32_crc32di(c2, w2);
            }
            crc = shift_lane(shift_lane((uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
            p += 3 * LANE_BYTES;
            len -= 3 * LANE_BYTES;
        }
    }
    return crc32c_sse42_serial(crc, p, len);
}
#endif

uint32_t crc32c_update_table(uint32_t crc, const void *data, size_t len)
{
    return ~crc32c_software(~crc, data, len);
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
    crc = ~crc;
#if defined(__x86_64__)
    /* Found out by the first caller; callers on other threads may race to it (atomics: the
     * same answer stored twice is harmless, a plain int so shared is a data race). */
    static int have_sse42 = -1;
    int sse42 = __atomic_load_n(&have_sse42, __ATOMIC_RELAXED);
    if (sse42 < 0) {
        sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&have_sse42, sse42, __ATOMIC_RELAXED);
    }
    if (sse42)
        return ~crc32c_sse42(crc, data, len);
#endif
    return ~crc32c_software(crc, data, len);
}

/* crc32c_combine by multiplication modulo the polynomial (zlib 1.2.12's method): appending
 * len_b zero bytes to crc_a multiplies it by x^(8 len_b), assembled from a table of x^(2^k).
 * About 30 times cheaper than squaring 32x32 bit matrices per bit of len_b; the reader
 * combines once per read reply for its end-to-end check. Reflected bit order throughout:
 * bit 31 is x^0. */
static uint32_t x2n_table[32]; /* x^(2^k) modulo the polynomial */
static pthread_once_t x2n_once = PTHREAD_ONCE_INIT;

static uint32_t multiply_modulo(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, product = 0;
    for (;;) {
        if (a & m) {
            product ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ CRC32C_POLY_REFLECTED : b >> 1;
    }
    return product;
}

static void x2n_table_init(void)
{
    uint32_t power = 1u << 30; /* x^1 */
    for (int k = 0; k < 32; k++) {
        x2n_table[k] = power;
        power = multiply_modulo(power, power);
    }
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    if (len_b == 0)
        return crc_a;
    pthread_once(&x2n_once, x2n_table_init);
    uint32_t factor = 1u << 31;                   /* x^0 */
    for (unsigned k = 3; len_b; len_b >>= 1, k++) /* x^(8 len_b): bits of len_b from 2^3 */
        if (len_b & 1)
            factor = multiply_modulo(x2n_table[k & 31], factor);
    return multiply_modulo(factor, crc_a) ^ crc_b;
}

void crc32c_to_base64(uint32_t crc, char out[9])
{
    uint8_t be[4] = {crc >> 24, crc >> 16, crc >> 8, crc};
    char *text = base64_encode(be, 4, false);
    memcpy(out, text, 9);
    g_free(text);
}

int crc32c_from_base64(const char *text, uint32_t *crc)
{
    /* Four bytes are six base64 digits (what base64_decode accepts as four bytes: any '='
     * padding stripped), decoded here without an allocation (once per listed object). */
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '=')
        len--;
    uint8_t raw[4];
    size_t got = 0;
    if (len != 6 || base64_decode_into(text, len, raw, sizeof(raw), &got) != 0 || got != 4)
        return -EINVAL;
    *crc = (uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 | (uint32_t)raw[2] << 8 | raw[3];
    return 0;
}
