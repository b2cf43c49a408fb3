/* Synthetic object content: a deterministic function of (name, generation, seed) so huge
 * buckets cost no memory per byte and any client can verify every byte it reads.
 *
 *   fnv1a64(s)    = FNV-1a 64-bit over the name's bytes (offset 0xcbf29ce484222325,
 *                   prime 0x100000001b3)
 *   key           = fnv1a64(name) ^ seed ^ (generation * 0x9E3779B97F4A7C15)   (mod 2^64)
 *   word[k]       = splitmix64(key + k)          for k = 0, 1, 2, ...           (mod 2^64)
 *   byte[i]       = (word[i / 8] >> (8 * (i % 8))) & 0xff   (words little-endian)
 *   splitmix64(x) : z = x + 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *                   z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31)
 *
 * tests/lib/synth.py implements the same function for the Python tests. */
#ifndef EMU_SYNTH_H
#define EMU_SYNTH_H

#include <stddef.h>
#include <stdint.h>

uint64_t synth_key(const char *name, int64_t generation, uint64_t seed);
/* Fills buf with bytes [offset, offset + len) of the content with this key. */
void synth_fill(uint64_t key, uint64_t offset, void *buf, size_t len);

#endif
