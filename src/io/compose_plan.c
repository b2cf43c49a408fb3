/* The compose batch planner and the composite split check (see include/fluxfs/compose_plan.h). */
#include "fluxfs/compose_plan.h"

#include <errno.h>

#include "fluxfs/crc32c.h"

static void close_group(struct compose_batch *group)
{
    if (group->count == 1)
        group->kind = BATCH_DIRECT;
}

size_t compose_plan(const struct compose_plan_config *config, const struct compose_item *items,
                    size_t count, struct compose_batch *batches)
{
    unsigned max_objects = config->max_objects;
    if (max_objects < 2)
        max_objects = 2;
    if (max_objects > COMPOSE_MAX_SOURCES)
        max_objects = COMPOSE_MAX_SOURCES;
    size_t batch_count = 0;
    struct compose_batch *group = NULL; /* the small-object batch being filled */
    for (size_t i = 0; i < count; i++) {
        uint64_t size = items[i].size;
        if (size == 0 || size > config->object_max_size || size > config->batch_max_bytes) {
            if (group)
                close_group(group);
            group = NULL;
            batches[batch_count++] =
                (struct compose_batch){.kind = size == 0 ? BATCH_EMPTY : BATCH_DIRECT,
                                       .first = i,
                                       .count = 1,
                                       .bytes = size};
            continue;
        }
        if (group &&
            (group->count == max_objects || group->bytes + size > config->batch_max_bytes)) {
            close_group(group);
            group = NULL;
        }
        if (!group) {
            group = &batches[batch_count++];
            *group = (struct compose_batch){.kind = BATCH_COMPOSE, .first = i};
        }
        group->count++;
        group->bytes += size;
    }
    if (group)
        close_group(group);
    return batch_count;
}

int compose_split_check(const struct compose_item *items, size_t count, const void *composite,
                        uint64_t len, uint64_t *offsets, size_t *bad_index)
{
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += items[i].size;
    if (total != len) {
        if (bad_index)
            *bad_index = count;
        return -EIO;
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        if (items[i].has_crc32c &&
            crc32c_update(0, (const char *)composite + offset, items[i].size) != items[i].crc32c) {
            if (bad_index)
                *bad_index = i;
            return -EIO;
        }
        offsets[i] = offset;
        offset += items[i].size;
    }
    return 0;
}
