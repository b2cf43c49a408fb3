/* The one wait for asynchronous calls (util layer): the caller counts the calls it started,
 * each completion says it is done, and the caller waits until none is pending, as Go's
 * sync.WaitGroup. One call waited for is a group of one (wait_group_init(&group, 1)).
 *
 * Results travel in the caller's own struct: a completion writes them before
 * wait_group_done, and wait_group_wait returning orders those writes before the caller's
 * reads (the group's lock), so they need no lock of their own. The group lives where the
 * caller waits (usually its stack): wait_group_done is the completion's last touch of it.
 * Threads: add and wait from the caller, done from any thread (a gcs callback, which must not
 * block: done never does). Not for waits with a deadline or on a condition other threads
 * change in a shared struct: those keep their own lock and GCond. */
#ifndef FLUXFS_WAIT_GROUP_H
#define FLUXFS_WAIT_GROUP_H

#include <glib.h>

struct wait_group {
    GMutex lock;
    GCond cond;
    unsigned pending; /* lock */
};

void wait_group_init(struct wait_group *group, unsigned pending);
void wait_group_clear(struct wait_group *group);
/* n more calls are pending (before each is started). */
void wait_group_add(struct wait_group *group, unsigned n);
/* One pending call ended (after its results were written). */
void wait_group_done(struct wait_group *group);
/* Until none is pending. */
void wait_group_wait(struct wait_group *group);
/* wait_group_wait, then wait_group_clear: the usual end of a blocking call. */
void wait_group_finish(struct wait_group *group);

#endif
