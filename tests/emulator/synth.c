/* Synthetic object content (synth.h): bytes that are a pure function of (name, generation, seed),
 * so populated buckets cost no memory per byte and every reader can check what it got.
 * synth_fill is on the hot path of large GETs: it writes whole 64-bit words in a tight loop. */
#include "synth.h"

#include <string.h>

#define SYNTH_GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t synth_mix(uint64_t x)
{
    uint64_t z = x + SYNTH_GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t synth_key(const char *name, int64_t generation, uint64_t seed)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        hash ^= *p;
        hash *= 0x100000001b3ull;
    }
    return hash ^ seed ^ ((uint64_t)generation * SYNTH_GOLDEN);
}

static inline void store_le64(uint8_t *out, uint64_t word)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(out, &word, 8);
#else
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(word >> (8 * i));
#endif
}

void synth_fill(uint64_t key, uint64_t offset, void *buf, size_t len)
{
    uint8_t *out = buf;
    uint64_t k = offset / 8;
    unsigned skip = (unsigned)(offset % 8);

    if (len == 0)
        return;
    if (skip != 0) {
        /* Partial first word. */
        uint8_t word[8];
        store_le64(word, synth_mix(key + k));
        size_t take = 8 - skip;
        if (take > len)
            take = len;
        memcpy(out, word + skip, take);
        out += take;
        len -= take;
        k++;
    }
    /* Whole words: four at a time so the multiplies of neighbouring words overlap. */
    while (len >= 32) {
        store_le64(out, synth_mix(key + k));
        store_le64(out + 8, synth_mix(key + k + 1));
        store_le64(out + 16, synth_mix(key + k + 2));
        store_le64(out + 24, synth_mix(key + k + 3));
        out += 32;
        len -= 32;
        k += 4;
    }
    while (len >= 8) {
        store_le64(out, synth_mix(key + k));
        out += 8;
        len -= 8;
        k++;
    }
    if (len > 0) {
        uint8_t word[8];
        store_le64(word, synth_mix(key + k));
        memcpy(out, word, len);
    }
}
