/* The compose batch planner (io layer): pure functions, no locks, no I/O.
 *
 * Given objects in the order they will be read, it cuts them into consecutive batches:
 * - an object larger than object_max_size is fetched on its own (BATCH_DIRECT);
 * - a 0-byte object needs no request at all (BATCH_EMPTY, one object);
 * - small objects are grouped, in order, into batches of at most max_objects (<= 32, Cloud
 *   Storage's compose limit) whose sizes add up to at most batch_max_bytes (BATCH_COMPOSE);
 *   a group of one small object is BATCH_DIRECT (compose + GET + delete would cost three
 *   requests for what one GET does).
 *
 * After the composite is fetched, compose_split_check checks it against the pinned sizes (the
 * composite's length must be their exact sum) and each piece's CRC32C where known, and gives
 * each piece's offset. */
#ifndef FLUXFS_COMPOSE_PLAN_H
#define FLUXFS_COMPOSE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COMPOSE_MAX_SOURCES 32

struct compose_plan_config {
    unsigned max_objects;     /* 2..32; other values are clamped */
    uint64_t object_max_size; /* objects up to this size may be composed */
    uint64_t batch_max_bytes; /* cap on one composite's size */
};

/* One object to fetch, pinned by generation. */
struct compose_item {
    const char *name;
    int64_t generation;
    uint64_t size;
    bool has_crc32c;
    uint32_t crc32c;
};

enum compose_batch_kind { BATCH_COMPOSE, BATCH_DIRECT, BATCH_EMPTY };

/* items[first .. first + count) */
struct compose_batch {
    enum compose_batch_kind kind;
    size_t first;
    size_t count;
    uint64_t bytes; /* sum of the sizes */
};

/* Fills batches (an array of at least count elements) and returns how many there are; every
 * item is in exactly one batch, in order. */
size_t compose_plan(const struct compose_plan_config *config, const struct compose_item *items,
                    size_t count, struct compose_batch *batches);

/* Checks a fetched composite of the count items: 0 and offsets[i] = where item i starts;
 * -EIO when len is not the sum of the sizes or a piece's CRC32C differs (then *bad_index, if
 * given, names the first bad item, or count for a length mismatch). */
int compose_split_check(const struct compose_item *items, size_t count, const void *composite,
                        uint64_t len, uint64_t *offsets, size_t *bad_index);

#endif
