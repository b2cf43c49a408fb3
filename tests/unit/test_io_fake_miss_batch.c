/* Miss batching (include/fluxfs/miss_batch.h) over the fake gcs layer: concurrent misses of
 * small objects are served from one compose batch (each object a compose source once, no GET
 * of its own, the temporary object deleted); when the compose or the composite's GET fails,
 * each miss falls back to one plain GET of its pinned generation, with the right bytes, and
 * a composite made by a compose whose reply was lost is deleted all the same. */
#include "test-common.h"

#include <errno.h>

#include "fake_gcs_test_util.h"
#include "fluxfs/miss_batch.h"

#define MISSES 8
#define TEMP   "mb/.fluxfs/compose/"

enum variant { COMPOSED, COMPOSE_FAILS, COMPOSITE_GET_FAILS, COMPOSE_REPLY_LOST };

struct waiter {
    GMutex lock;
    GCond cond;
    unsigned done;
    int err[MISSES];
    size_t got[MISSES];
};

struct miss_slot {
    struct waiter *waiter;
    int index;
};

static void on_miss_done(int err, size_t got, void *user)
{
    struct miss_slot *slot = user;
    struct waiter *w = slot->waiter;
    g_mutex_lock(&w->lock);
    w->err[slot->index] = err;
    w->got[slot->index] = got;
    w->done++;
    g_cond_broadcast(&w->cond);
    g_mutex_unlock(&w->lock);
}

START_TEST(concurrent_misses_share_one_compose)
{
    enum variant variant = (enum variant)_i;
    struct gcs_client *fake = fake_gcs_new();
    fake_gcs_set_latency(fake, FAKE_GCS_COMPOSE, 500);
    char *names[MISSES], *contents[MISSES], *bufs[MISSES];
    size_t sizes[MISSES];
    int64_t generations[MISSES];
    for (int i = 0; i < MISSES; i++) {
        names[i] = g_strdup_printf("ds/val/%03d.npy", i);
        sizes[i] = 3000 + (size_t)i * 101;
        contents[i] = fake_test_bytes(sizes[i], (guint32)i + 500);
        bufs[i] = g_malloc0(sizes[i]);
        generations[i] = fake_gcs_put(fake, names[i], contents[i], sizes[i]);
    }
    if (variant == COMPOSE_FAILS)
        fake_gcs_fail(fake, FAKE_GCS_COMPOSE, NULL, 1, 0, -EIO);
    if (variant == COMPOSE_REPLY_LOST) /* the composite is made, the batcher never hears */
        fake_gcs_lose_reply(fake, FAKE_GCS_COMPOSE, NULL, 1, 0, -EIO);
    if (variant == COMPOSITE_GET_FAILS)
        fake_gcs_fail(fake, FAKE_GCS_READ, TEMP, 1, 0, -EIO);
    struct membudget *budget = membudget_new(64 * MIB);
    struct miss_batch_config config = {
        .client = fake,
        .budget = budget,
        .temp_prefix = TEMP,
        .mount_id = "host-1-abcd",
        .window_us = 10 * G_USEC_PER_SEC, /* closed by the count, not the clock */
        .min_count = 4,
        .plan = {.max_objects = MISSES, .object_max_size = MIB, .batch_max_bytes = 8 * MIB},
    };
    struct miss_batcher *b = NULL;
    ck_assert_int_eq(miss_batch_new(&config, &b), 0);
    struct waiter w = {0};
    g_mutex_init(&w.lock);
    g_cond_init(&w.cond);
    struct miss_slot slots[MISSES];
    for (int i = 0; i < MISSES; i++) {
        slots[i] = (struct miss_slot){&w, i};
        struct gcs_read_request req = {.name = names[i],
                                       .generation = generations[i],
                                       .offset = 0,
                                       .len = sizes[i],
                                       .buf = bufs[i],
                                       .has_expected_crc32c = true,
                                       .expected_crc32c = crc32c_update(0, contents[i], sizes[i]),
                                       .object_size = sizes[i],
                                       .whole_object = true};
        miss_batch_submit(b, &req, on_miss_done, &slots[i]);
    }
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    g_mutex_lock(&w.lock);
    while (w.done < MISSES && g_cond_wait_until(&w.cond, &w.lock, deadline))
        ;
    g_mutex_unlock(&w.lock);
    ck_assert_uint_eq(w.done, MISSES);
    for (int i = 0; i < MISSES; i++) {
        ck_assert_int_eq(w.err[i], 0);
        ck_assert_uint_eq(w.got[i], sizes[i]);
        ck_assert_int_eq(memcmp(bufs[i], contents[i], sizes[i]), 0);
        ck_assert_uint_eq(fake_gcs_calls_named(fake, FAKE_GCS_COMPOSE_SOURCE, names[i]), 1);
        ck_assert_uint_eq(fake_gcs_calls_named(fake, FAKE_GCS_READ, names[i]),
                          variant == COMPOSED ? 0 : 1);
    }
    struct miss_batch_stats stats;
    miss_batch_get_stats(b, &stats);
    ck_assert_uint_eq(stats.misses, MISSES);
    ck_assert_uint_eq(stats.composes, 1);
    ck_assert_uint_eq(stats.composed, variant == COMPOSED ? MISSES : 0);
    ck_assert_uint_eq(stats.fallbacks, variant == COMPOSED ? 0 : MISSES);
    miss_batch_free(b); /* waits for the temporary object's delete */
    uint64_t composite_gets = variant == COMPOSED || variant == COMPOSITE_GET_FAILS ? 1 : 0;
    uint64_t plain_gets = variant == COMPOSED ? 0 : MISSES;
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_COMPOSE), 1);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_READ), composite_gets + plain_gets);
    ck_assert_uint_eq(fake_gcs_count(fake, TEMP), 0);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), MISSES);
    membudget_free(budget);
    g_mutex_clear(&w.lock);
    g_cond_clear(&w.cond);
    for (int i = 0; i < MISSES; i++) {
        g_free(names[i]);
        g_free(contents[i]);
        g_free(bufs[i]);
    }
    fake_gcs_free(fake);
}
END_TEST

TEST_SUITE(io_fake_miss_batch_suite)
{
    Suite *s = suite_create("io_fake_miss_batch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, concurrent_misses_share_one_compose, COMPOSED, COMPOSE_REPLY_LOST + 1);
    suite_add_tcase(s, tc);
    return s;
}
