/* Shared Check runner: every test file registers its suite at load time with TEST_SUITE, and
 * test-main.c runs them all (one binary per component). A test that needs a privilege or a
 * missing resource exits 77 so meson reports SKIP. */
#ifndef FLUXFS_TEST_COMMON_H
#define FLUXFS_TEST_COMMON_H

#include <check.h>

typedef Suite *(*test_suite_factory)(void);
void test_register_suite(test_suite_factory factory);

#define TEST_SUITE(fn)                                                                             \
    static Suite *fn(void);                                                                        \
    __attribute__((constructor)) static void register_##fn(void)                                   \
    {                                                                                              \
        test_register_suite(fn);                                                                   \
    }                                                                                              \
    static Suite *fn(void)

#endif
