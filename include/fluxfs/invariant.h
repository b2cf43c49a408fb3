/* Invariants (issue 25, item 5): conditions that only a bug in fluxfs can break (a reference
 * released twice, a count below zero). fluxfs_invariant(cond, what) checks one:
 *   - every build but a release build (meson defines FLUXFS_INVARIANTS_ABORT unless
 *     buildtype=release: the test, ASan and TSan builds) logs the site and aborts, so the
 *     suites see the bug where it happens;
 *   - a release build (the Debian package) logs it as an error, counts it
 *     (fluxfs_invariant_failures) and goes on: the caller then repairs the value (e.g. keeps a
 *     count at 0), because aborting would lose every write in flight on the mount.
 * Evaluates to cond, so callers can write `if (!fluxfs_invariant(x > 0, "...")) repair;`. */
#ifndef FLUXFS_INVARIANT_H
#define FLUXFS_INVARIANT_H

#include <stdbool.h>
#include <stdint.h>

void fluxfs_invariant_failed(const char *file, int line, const char *what);
uint64_t fluxfs_invariant_failures(void); /* how many failed so far (release builds) */

#define fluxfs_invariant(cond, what)                                                               \
    (__builtin_expect(!!(cond), 1) ? true                                                          \
                                   : (fluxfs_invariant_failed(__FILE__, __LINE__, (what)), false))

#endif
