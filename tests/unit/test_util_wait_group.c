/* The wait group (include/fluxfs/wait_group.h): a wait returns only after every pending call
 * said it was done, and sees what each one wrote before. */
#include "test-common.h"

#include <glib.h>

#include "fluxfs/wait_group.h"

#define CALLS 16

struct call {
    struct wait_group *group;
    int result;
};

static gpointer finish_call(gpointer data)
{
    struct call *call = data;
    call->result = 42;
    wait_group_done(call->group);
    return NULL;
}

START_TEST(wait_returns_after_every_done)
{
    struct wait_group group;
    wait_group_init(&group, 0);
    struct call calls[CALLS];
    GThread *threads[CALLS];
    for (int i = 0; i < CALLS; i++) {
        calls[i] = (struct call){.group = &group};
        wait_group_add(&group, 1);
        threads[i] = g_thread_new("call", finish_call, &calls[i]);
    }
    wait_group_finish(&group);
    for (int i = 0; i < CALLS; i++)
        ck_assert_int_eq(calls[i].result, 42);
    for (int i = 0; i < CALLS; i++)
        g_thread_join(threads[i]);
}
END_TEST

START_TEST(nothing_pending_returns_at_once)
{
    struct wait_group group;
    wait_group_init(&group, 1);
    struct call call = {.group = &group};
    finish_call(&call); /* done on the caller's own thread, before the wait */
    wait_group_finish(&group);
    ck_assert_int_eq(call.result, 42);
}
END_TEST

TEST_SUITE(util_wait_group_suite)
{
    Suite *s = suite_create("util_wait_group");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, wait_returns_after_every_done);
    tcase_add_test(tc, nothing_pending_returns_at_once);
    suite_add_tcase(s, tc);
    return s;
}
