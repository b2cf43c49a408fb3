/* The one wait for asynchronous calls (see include/fluxfs/wait_group.h). */
#include "fluxfs/wait_group.h"

#include "fluxfs/invariant.h"

void wait_group_init(struct wait_group *group, unsigned pending)
{
    g_mutex_init(&group->lock);
    g_cond_init(&group->cond);
    group->pending = pending;
}

void wait_group_clear(struct wait_group *group)
{
    g_cond_clear(&group->cond);
    g_mutex_clear(&group->lock);
}

void wait_group_add(struct wait_group *group, unsigned n)
{
    g_mutex_lock(&group->lock);
    group->pending += n;
    g_mutex_unlock(&group->lock);
}

void wait_group_done(struct wait_group *group)
{
    g_mutex_lock(&group->lock);
    if (fluxfs_invariant(group->pending > 0, "wait_group_done with nothing pending"))
        group->pending--;
    g_cond_broadcast(&group->cond);
    g_mutex_unlock(&group->lock);
}

void wait_group_wait(struct wait_group *group)
{
    g_mutex_lock(&group->lock);
    while (group->pending > 0)
        g_cond_wait(&group->cond, &group->lock);
    g_mutex_unlock(&group->lock);
}

void wait_group_finish(struct wait_group *group)
{
    wait_group_wait(group);
    wait_group_clear(group);
}
