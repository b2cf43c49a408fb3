/* CRC32C (Castagnoli), the checksum Cloud Storage keeps for every object.
 *
 * crc32c_update() extends a running CRC with more bytes: start from 0, feed the data in any
 * number of pieces, and the result equals the CRC of the concatenation. It uses the SSE4.2
 * instruction where the CPU has it and a table otherwise; both give the same result.
 * crc32c_combine() gives crc(A||B) from crc(A), crc(B) and len(B) without the bytes, which is
 * what compose needs. Cloud Storage transmits the value base64-encoded, big-endian. */
#ifndef FLUXFS_CRC32C_H
#define FLUXFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);
/* The same with the table-driven code only (what crc32c_update uses without SSE4.2): for tests
 * that check the hardware path against it. */
uint32_t crc32c_update_table(uint32_t crc, const void *data, size_t len);
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* Writes the 8-character base64 form ("AAAAAA==") of crc plus a NUL into out[9]. */
void crc32c_to_base64(uint32_t crc, char out[9]);
/* Parses the base64 form; returns 0 or -EINVAL. *crc is set only on success. */
int crc32c_from_base64(const char *text, uint32_t *crc);

#endif
