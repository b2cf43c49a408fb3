/* The prefetcher (include/fluxfs/prefetch.h) over the fake gcs layer: a hint list (in a
 * shuffled order) and a warm-up of small objects fetch each one exactly once (in a compose
 * batch, or as a plain GET when compose fails or is not permitted) into the content cache,
 * fetch nothing again when the files are opened or asked for a second time, and leave no
 * temporary object behind. */
#include "test-common.h"

#include <errno.h>
#include <unistd.h>

#include "fake_gcs_test_util.h"
#include "fluxfs/content_cache.h"
#include "fluxfs/prefetch.h"

#define FILES 40
#define TEMP  "pf/.fluxfs/compose/"

enum variant { COMPOSED, COMPOSE_FAILS, NO_PERMISSION, COMPOSE_REPLY_LOST };

/* The resolve callback: a path is the object's name; its live version. */
static int resolve(const char *path, void *user, struct prefetch_object *out)
{
    struct gcs_object meta;
    if (fake_gcs_get(user, path, NULL, &meta) < 0)
        return -ENOENT;
    memset(out, 0, sizeof(*out));
    out->name = g_strdup(meta.name);
    out->generation = meta.generation;
    out->size = meta.size;
    out->has_crc32c = meta.has_crc32c;
    out->crc32c = meta.crc32c;
    gcs_object_clear(&meta);
    return 0;
}

static uint64_t warmup_done(struct prefetcher *p)
{
    struct prefetch_stats stats;
    prefetch_get_stats(p, &stats);
    return stats.warmup_done;
}

START_TEST(warmup_fetches_each_object_once)
{
    enum variant variant = (enum variant)_i;
    struct gcs_client *fake = fake_gcs_new();
    fake_gcs_set_latency(fake, FAKE_GCS_DELETE, 500); /* temporary deletes still in flight */
    char *paths[FILES];
    char *contents[FILES];
    for (int i = 0; i < FILES; i++) {
        paths[i] = g_strdup_printf("ds/train/%05d.jpg", i);
        size_t len = 1000 + (size_t)i * 37;
        contents[i] = fake_test_bytes(len, (guint32)i + 100);
        fake_gcs_put(fake, paths[i], contents[i], len);
    }
    if (variant == COMPOSE_FAILS)
        fake_gcs_fail(fake, FAKE_GCS_COMPOSE, NULL, 1, 0, -EIO);
    if (variant == COMPOSE_REPLY_LOST) /* composites made, the prefetcher never hears */
        fake_gcs_lose_reply(fake, FAKE_GCS_COMPOSE, NULL, 1, 0, -EIO);
    if (variant == NO_PERMISSION)
        fake_gcs_deny_permissions(fake, true);
    struct membudget *budget = membudget_new(128 * MIB);
    struct content_cache_config cache_config = {.memory_bytes = 32 * MIB, .budget = budget};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&cache_config, &cache), 0);
    struct prefetch_config config = {
        .client = fake,
        .cache = cache,
        .budget = budget,
        .temp_prefix = TEMP,
        .compose = true,
        .plan = {.max_objects = 32, .object_max_size = MIB, .batch_max_bytes = 8 * MIB},
        .max_object_size = MIB,
        .workers = 2,
        .resolve = resolve,
        .resolve_user = fake,
    };
    struct prefetcher *p = NULL;
    ck_assert_int_eq(prefetch_new(&config, &p), 0);
    prefetch_add_warmup(p, 1, (const char *const *)paths, FILES);
    FAKE_TEST_WAIT_FOR(warmup_done(p) == FILES);

    struct prefetch_stats stats;
    prefetch_get_stats(p, &stats);
    ck_assert_uint_eq(stats.warmup_fetched, FILES);
    ck_assert_uint_eq(stats.files_fetched, FILES);
    ck_assert_uint_eq(stats.files_failed, 0);
    for (int i = 0; i < FILES; i++) {
        /* Fetched once: as a source of a successful compose, or with one GET of its own. */
        uint64_t composed = fake_gcs_calls_named(fake, FAKE_GCS_COMPOSE_SOURCE, paths[i]);
        uint64_t gets = fake_gcs_calls_named(fake, FAKE_GCS_READ, paths[i]);
        if (variant == COMPOSED) {
            ck_assert_uint_eq(composed, 1);
            ck_assert_uint_eq(gets, 0);
        } else {
            ck_assert_uint_eq(gets, 1);
        }
        struct gcs_object meta;
        ck_assert_int_eq(fake_gcs_get(fake, paths[i], NULL, &meta), 0);
        char *buf = g_malloc(meta.size);
        ck_assert_int_eq(content_cache_read(cache, paths[i], meta.generation, meta.size, buf, 0),
                         0);
        ck_assert_int_eq(memcmp(buf, contents[i], meta.size), 0);
        g_free(buf);
        gcs_object_clear(&meta);
    }
    if (variant == COMPOSED) {
        ck_assert_uint_ge(stats.composes, 2); /* 40 objects: at least two batches of <= 32 */
        ck_assert_uint_eq(stats.composite_gets, stats.composes);
    } else if (variant == COMPOSE_FAILS || variant == COMPOSE_REPLY_LOST) {
        ck_assert_uint_eq(stats.compose_failures, stats.composes);
        ck_assert_uint_ge(stats.composes, 1);
    } else {
        ck_assert(!stats.compose_enabled);
        ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_COMPOSE), 0);
    }

    /* Asked again: everything is cached, nothing is fetched. */
    uint64_t reads = fake_gcs_calls(fake, FAKE_GCS_READ);
    uint64_t composes = fake_gcs_calls(fake, FAKE_GCS_COMPOSE);
    prefetch_add_warmup(p, 2, (const char *const *)paths, FILES);
    FAKE_TEST_WAIT_FOR(warmup_done(p) == 2 * FILES);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_READ), reads);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_COMPOSE), composes);

    prefetch_free(p);
    ck_assert_uint_eq(fake_gcs_count(fake, TEMP), 0);
    ck_assert_uint_eq(fake_gcs_count(fake, NULL), FILES);
    content_cache_free(cache);
    membudget_free(budget);
    for (int i = 0; i < FILES; i++) {
        g_free(paths[i]);
        g_free(contents[i]);
    }
    fake_gcs_free(fake);
}
END_TEST

static uint64_t hints_done(struct prefetcher *p)
{
    struct prefetch_stats stats;
    prefetch_get_stats(p, &stats);
    return stats.hints_done;
}

START_TEST(hinted_objects_are_fetched_once)
{
    struct gcs_client *fake = fake_gcs_new();
    fake_gcs_set_latency(fake, FAKE_GCS_READ, 300);
    char *paths[FILES];
    for (int i = 0; i < FILES; i++) {
        paths[i] = g_strdup_printf("ds/epoch/%05d.bin", (i * 17) % FILES); /* a permutation */
        char *data = fake_test_bytes(2000 + (size_t)i, (guint32)i);
        fake_gcs_put(fake, paths[i], data, 2000 + (size_t)i);
        g_free(data);
    }
    struct membudget *budget = membudget_new(128 * MIB);
    struct content_cache_config cache_config = {.memory_bytes = 32 * MIB, .budget = budget};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&cache_config, &cache), 0);
    struct prefetch_config config = {
        .client = fake,
        .cache = cache,
        .budget = budget,
        .temp_prefix = TEMP,
        .compose = true,
        .plan = {.max_objects = 8, .object_max_size = MIB, .batch_max_bytes = 8 * MIB},
        .max_object_size = MIB,
        .workers = 3,
        .resolve = resolve,
        .resolve_user = fake,
    };
    struct prefetcher *p = NULL;
    ck_assert_int_eq(prefetch_new(&config, &p), 0);
    struct prefetch_hint_owner owner;
    prefetch_hint_owner_of(getpid(), &owner);
    ck_assert_int_eq(prefetch_hints_reset(p, &owner), 0);
    /* The list in two appends, the second while the first is being fetched. */
    ck_assert_int_eq(prefetch_hints_append(p, &owner, (const char *const *)paths, FILES / 2), 0);
    ck_assert_int_eq(
        prefetch_hints_append(p, &owner, (const char *const *)paths + FILES / 2, FILES / 2), 0);
    FAKE_TEST_WAIT_FOR(hints_done(p) == FILES);
    struct prefetch_stats stats;
    prefetch_get_stats(p, &stats);
    ck_assert_uint_eq(stats.hints_total, FILES);
    ck_assert_uint_eq(stats.files_fetched, FILES);
    for (int i = 0; i < FILES; i++) {
        uint64_t fetched = fake_gcs_calls_named(fake, FAKE_GCS_COMPOSE_SOURCE, paths[i]) +
                           fake_gcs_calls_named(fake, FAKE_GCS_READ, paths[i]);
        ck_assert_msg(fetched == 1,
                      "%s: composed %" G_GUINT64_FORMAT " times, %" G_GUINT64_FORMAT
                      " GETs; stats: composes %" G_GUINT64_FORMAT " failures %" G_GUINT64_FORMAT
                      " direct %" G_GUINT64_FORMAT " already %" G_GUINT64_FORMAT
                      " done %" G_GUINT64_FORMAT " fetched %" G_GUINT64_FORMAT,
                      paths[i], fake_gcs_calls_named(fake, FAKE_GCS_COMPOSE_SOURCE, paths[i]),
                      fake_gcs_calls_named(fake, FAKE_GCS_READ, paths[i]), stats.composes,
                      stats.compose_failures, stats.direct_gets, stats.files_already_cached,
                      stats.hints_done, stats.files_fetched);
        struct gcs_object meta;
        ck_assert_int_eq(fake_gcs_get(fake, paths[i], NULL, &meta), 0);
        ck_assert(content_cache_contains(cache, paths[i], meta.generation));
        gcs_object_clear(&meta);
    }
    /* The reader opening them in order: no fetch of its own is needed, none is made. */
    uint64_t reads = fake_gcs_calls(fake, FAKE_GCS_READ);
    for (int i = 0; i < FILES; i++)
        ck_assert(prefetch_note_open(p, paths[i]));
    prefetch_get_stats(p, &stats);
    ck_assert_uint_eq(stats.hints_opened, FILES);
    ck_assert_uint_eq(fake_gcs_calls(fake, FAKE_GCS_READ), reads);
    prefetch_free(p);
    ck_assert_uint_eq(fake_gcs_count(fake, TEMP), 0);
    content_cache_free(cache);
    membudget_free(budget);
    for (int i = 0; i < FILES; i++)
        g_free(paths[i]);
    fake_gcs_free(fake);
}
END_TEST

TEST_SUITE(io_fake_prefetch_suite)
{
    Suite *s = suite_create("io_fake_prefetch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, warmup_fetches_each_object_once, COMPOSED, COMPOSE_REPLY_LOST + 1);
    tcase_add_test(tc, hinted_objects_are_fetched_once);
    suite_add_tcase(s, tc);
    return s;
}
