/* Who owns a hint list (include/fluxfs/prefetch.h: prefetch_hint_owner_of, _alive): a thread
 * is its process, a reused pid is not the old owner, an exited process is gone at once, also
 * before its parent reaps it. */
#include "test-common.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fluxfs/prefetch.h"

/* Field 22 of /proc/self/stat, read the simple way (no spaces in this binary's name). */
static uint64_t own_start_time(void)
{
    gchar *text = NULL;
    ck_assert(g_file_get_contents("/proc/self/stat", &text, NULL, NULL));
    gchar **fields = g_strsplit(strrchr(text, ')') + 2, " ", -1);
    uint64_t value = g_ascii_strtoull(fields[22 - 3], NULL, 10);
    g_strfreev(fields);
    g_free(text);
    return value;
}

START_TEST(test_owner_is_the_process)
{
    struct prefetch_hint_owner owner;
    prefetch_hint_owner_of((int)getpid(), &owner);
    ck_assert_int_eq(owner.pid, (int)getpid());
    ck_assert_uint_eq(owner.start_time, own_start_time());
    ck_assert_uint_gt(owner.start_time, 0);
    ck_assert(prefetch_hint_owner_alive(&owner));
}
END_TEST

static gpointer thread_owner(gpointer data)
{
    struct prefetch_hint_owner *owner = data;
    prefetch_hint_owner_of((int)syscall(SYS_gettid), owner);
    return NULL;
}

START_TEST(test_a_thread_is_its_process)
{
    struct prefetch_hint_owner owner = {0};
    g_thread_join(g_thread_new("owner", thread_owner, &owner));
    ck_assert_int_eq(owner.pid, (int)getpid());
    ck_assert_uint_eq(owner.start_time, own_start_time());
}
END_TEST

START_TEST(test_reused_pid_is_not_the_owner)
{
    struct prefetch_hint_owner owner;
    prefetch_hint_owner_of((int)getpid(), &owner);
    owner.start_time += 1; /* the same pid, started at another time */
    ck_assert(!prefetch_hint_owner_alive(&owner));
}
END_TEST

START_TEST(test_exited_process_is_gone_before_and_after_reaping)
{
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(go[0]);
    struct prefetch_hint_owner owner;
    prefetch_hint_owner_of((int)child, &owner);
    ck_assert_int_eq(owner.pid, (int)child);
    ck_assert(prefetch_hint_owner_alive(&owner));
    close(go[1]); /* the child exits */
    /* A zombie until reaped: already not alive. */
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    ck_assert_int_eq(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT), 0);
    ck_assert(!prefetch_hint_owner_alive(&owner));
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    ck_assert(!prefetch_hint_owner_alive(&owner));
}
END_TEST

START_TEST(test_unknown_writer_lives)
{
    struct prefetch_hint_owner owner;
    prefetch_hint_owner_of(0, &owner);
    ck_assert_int_eq(owner.pid, 0);
    ck_assert(prefetch_hint_owner_alive(&owner));
}
END_TEST

TEST_SUITE(prefetch_owner_suite)
{
    Suite *s = suite_create("prefetch_owner");
    TCase *tc = tcase_create("owner");
    tcase_add_test(tc, test_owner_is_the_process);
    tcase_add_test(tc, test_a_thread_is_its_process);
    tcase_add_test(tc, test_reused_pid_is_not_the_owner);
    tcase_add_test(tc, test_exited_process_is_gone_before_and_after_reaping);
    tcase_add_test(tc, test_unknown_writer_lives);
    suite_add_tcase(s, tc);
    return s;
}
