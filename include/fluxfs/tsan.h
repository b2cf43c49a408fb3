/* What ThreadSanitizer cannot see by itself (src/util/tsan.c; the TSan run is scripts/test-tsan).
 * In a build without -fsanitize=thread every function here does nothing. */
#ifndef FLUXFS_TSAN_H
#define FLUXFS_TSAN_H

/* A descriptor this process inherited (a /dev/fuse handed over as /dev/fd/N): TSan orders a
 * write on a descriptor before a later read of it (a FUSE reply before the next request, e.g.
 * an open's handle before its release) only for descriptors it saw created; this gives fd
 * one, keeping its number, flags and open file. */
void tsan_adopt_fd(int fd);

#endif
