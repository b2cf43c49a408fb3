/* One main for the Check unit tests: runs every registered suite and exits non-zero on any
 * failure. CK_FORK and the rest of Check's environment variables work as usual. */
#include "test-common.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_SUITES 128

static test_suite_factory suites[MAX_SUITES];
static int suite_count;

void test_register_suite(test_suite_factory factory)
{
    if (suite_count == MAX_SUITES) {
        fprintf(stderr, "too many test suites\n");
        abort();
    }
    suites[suite_count++] = factory;
}

int main(void)
{
    if (suite_count == 0) {
        fprintf(stderr, "no test suites registered\n");
        return 1;
    }
    SRunner *runner = srunner_create(suites[0]());
    for (int i = 1; i < suite_count; i++)
        srunner_add_suite(runner, suites[i]());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
