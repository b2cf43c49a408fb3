/* The content cache (include/fluxfs/content_cache.h): generation keying, memory LRU within its
 * cap and the budget, the disk tier across instances (a remount), damaged files, pending fills,
 * pieces of a shared block cached in place, borrowed without a copy, demoted. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "fluxfs/content_cache.h"
#include "fluxfs/crc32c.h"

static char *make_temp_dir(void)
{
    char *dir = g_dir_make_tmp("fluxfs-cache-test-XXXXXX", NULL);
    ck_assert_ptr_nonnull(dir);
    return dir;
}

static void remove_tree(const char *dir)
{
    char *command = g_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(command), 0);
    g_free(command);
}

static void add_piece(struct content_fill *fill, const char *body, uint64_t from, uint64_t to)
{
    /* Two iovec parts, as a reader view may have. */
    uint64_t mid = from + (to - from) / 3;
    struct iovec iov[2] = {{(void *)(body + from), mid - from}, {(void *)(body + mid), to - mid}};
    content_fill_add(fill, from, iov, 2);
}

/* Large objects (gcsfuse's file cache): pieces in any order, repeated and overlapping, make an
 * entry once all bytes are there and the CRC32C matches; served through a file descriptor,
 * after a new instance (remount) too; a wrong CRC32C or a partial fill leaves nothing. */
START_TEST(large_object_fill_any_order)
{
    char *dir = make_temp_dir();
    struct content_cache_config config = {.dir = dir, .disk_bytes = 1 << 20, .scope = "b"};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    enum { SIZE = 100000 };
    char *body = g_malloc(SIZE);
    for (int i = 0; i < SIZE; i++)
        body[i] = (char)(i * 7 + i / 251);
    uint32_t crc = crc32c_update(0, body, SIZE);

    struct content_fill *fill = content_cache_fill_begin(cache, "big", 3, SIZE, true, crc);
    ck_assert_ptr_nonnull(fill);
    /* A second reader of the same version shares the fill. */
    ck_assert_ptr_eq(content_cache_fill_begin(cache, "big", 3, SIZE, true, crc), fill);
    add_piece(fill, body, 60000, 100000);
    add_piece(fill, body, 0, 20000);
    add_piece(fill, body, 10000, 30000);  /* overlaps what is there */
    add_piece(fill, body, 60000, 100000); /* repeated */
    int fd = -1;
    ck_assert_int_eq(content_cache_large_open(cache, "big", 3, SIZE, &fd), -ENOENT);
    add_piece(fill, body, 25000, 65000); /* the last gap, overlapping both sides */
    content_fill_unref(fill);
    content_fill_unref(fill);
    struct content_cache_stats stats;
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_eq(stats.large_fills, 1);
    ck_assert_int_eq(content_cache_large_open(cache, "big", 4, SIZE, &fd), -ENOENT);
    ck_assert_ptr_null(content_cache_fill_begin(cache, "big", 3, SIZE, true, crc)); /* cached */
    content_cache_free(cache);

    /* A new instance (remount) finds it, checks it once, serves it. */
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert_int_eq(content_cache_large_open(cache, "big", 3, SIZE, &fd), 0);
    char *back = g_malloc(SIZE);
    ck_assert_int_eq(pread(fd, back, SIZE, CONTENT_CACHE_BODY_OFFSET), SIZE);
    ck_assert_int_eq(memcmp(back, body, SIZE), 0);
    close(fd);

    /* Bytes that do not add up to the object's CRC32C are not kept; nor is a partial fill. */
    fill = content_cache_fill_begin(cache, "bad", 1, SIZE, true, crc ^ 1);
    add_piece(fill, body, 0, SIZE);
    content_fill_unref(fill);
    fill = content_cache_fill_begin(cache, "part", 1, SIZE, true, crc);
    add_piece(fill, body, 0, SIZE / 2);
    content_fill_unref(fill);
    ck_assert_int_eq(content_cache_large_open(cache, "bad", 1, SIZE, &fd), -ENOENT);
    ck_assert_int_eq(content_cache_large_open(cache, "part", 1, SIZE, &fd), -ENOENT);
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_eq(stats.large_abandoned, 2);
    ck_assert_uint_eq(stats.disk_entries, 1); /* no temporary file counted or left */
    /* Larger than the cap: never started. */
    ck_assert_ptr_null(content_cache_fill_begin(cache, "huge", 1, 2 << 20, false, 0));
    content_cache_free(cache);
    char *sub = g_build_filename(dir, "fluxfs-content-v1", NULL);
    GDir *listing = g_dir_open(sub, 0, NULL);
    int files = 0;
    while (g_dir_read_name(listing))
        files++;
    g_dir_close(listing);
    ck_assert_int_eq(files, 1);
    g_free(sub);
    g_free(back);
    g_free(body);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(generation_is_part_of_the_key)
{
    struct membudget *budget = membudget_new(1 << 20);
    struct content_cache_config config = {.memory_bytes = 4096, .budget = budget};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert_int_eq(content_cache_insert(cache, "a", 1, "old!", 4), 0);
    char buf[8];
    ck_assert_int_eq(content_cache_read(cache, "a", 2, 4, buf, 0), -ENOENT);
    ck_assert_int_eq(content_cache_read(cache, "a", 1, 4, buf, 0), 0);
    ck_assert_int_eq(memcmp(buf, "old!", 4), 0);
    /* A size that does not match the entry is a miss, never a short copy. */
    ck_assert_int_eq(content_cache_read(cache, "a", 1, 3, buf, 0), -ENOENT);
    ck_assert(content_cache_contains(cache, "a", 1));
    ck_assert(!content_cache_contains(cache, "b", 1));
    content_cache_free(cache);
    struct membudget_stats stats;
    membudget_get_stats(budget, &stats);
    ck_assert_uint_eq(stats.used, 0); /* every byte given back */
    membudget_free(budget);
}
END_TEST

START_TEST(memory_lru_within_cap_and_budget)
{
    struct membudget *budget = membudget_new(1 << 20);
    struct content_cache_config config = {.memory_bytes = 3000, .budget = budget};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    char body[1000];
    memset(body, 'x', sizeof(body));
    char buf[1000];
    ck_assert_int_eq(content_cache_insert(cache, "1", 1, body, 1000), 0);
    ck_assert_int_eq(content_cache_insert(cache, "2", 1, body, 1000), 0);
    ck_assert_int_eq(content_cache_insert(cache, "3", 1, body, 1000), 0);
    ck_assert_int_eq(content_cache_read(cache, "1", 1, 1000, buf, 0), 0); /* 1 is recent now */
    ck_assert_int_eq(content_cache_insert(cache, "4", 1, body, 1000), 0);
    ck_assert(content_cache_contains(cache, "1", 1));
    ck_assert(!content_cache_contains(cache, "2", 1)); /* the least recently used went */
    struct content_cache_stats stats;
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_le(stats.memory_used, 3000);
    ck_assert_uint_eq(stats.evictions, 1);
    /* Larger than the cap: refused without a disk tier. */
    char big[4000] = {0};
    ck_assert_int_lt(content_cache_insert(cache, "big", 1, big, sizeof(big)), 0);
    content_cache_free(cache);
    membudget_free(budget);

    /* A budget that is short: the cache gives up its own entries, never more than it has. */
    budget = membudget_new(2500);
    config.budget = budget;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert_int_eq(content_cache_insert(cache, "1", 1, body, 1000), 0);
    ck_assert_int_eq(content_cache_insert(cache, "2", 1, body, 1000), 0);
    ck_assert_int_eq(content_cache_insert(cache, "3", 1, body, 1000), 0);
    struct membudget_stats budget_stats;
    membudget_get_stats(budget, &budget_stats);
    ck_assert_uint_le(budget_stats.used, 2500);
    ck_assert(content_cache_contains(cache, "3", 1));
    content_cache_free(cache);
    membudget_free(budget);
}
END_TEST

START_TEST(disk_tier_survives_a_new_instance)
{
    char *dir = make_temp_dir();
    struct content_cache_config config = {.dir = dir, .disk_bytes = 1 << 20, .scope = "b"};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert_int_eq(content_cache_insert(cache, "obj/1", 7, "hello", 5), 0);
    ck_assert_int_eq(content_cache_insert(cache, "obj/empty", 7, "", 0), 0);
    content_cache_free(cache);

    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    char buf[8];
    ck_assert_int_eq(content_cache_read(cache, "obj/1", 7, 5, buf, 0), 0);
    ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
    ck_assert_int_eq(content_cache_read(cache, "obj/empty", 7, 0, buf, 0), 0);
    ck_assert_int_eq(content_cache_read(cache, "obj/1", 8, 5, buf, 0), -ENOENT);
    content_cache_free(cache);

    /* Another scope (bucket) never sees these entries. */
    config.scope = "other";
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert_int_eq(content_cache_read(cache, "obj/1", 7, 5, buf, 0), -ENOENT);
    content_cache_free(cache);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(damaged_file_is_dropped)
{
    char *dir = make_temp_dir();
    struct content_cache_config config = {.dir = dir, .disk_bytes = 1 << 20, .scope = "b"};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert_int_eq(content_cache_insert(cache, "o", 1, "abcdef", 6), 0);
    content_cache_free(cache);
    char *sub = g_build_filename(dir, "fluxfs-content-v1", NULL);
    GDir *listing = g_dir_open(sub, 0, NULL);
    const char *entry = g_dir_read_name(listing);
    ck_assert_ptr_nonnull(entry);
    char *path = g_build_filename(sub, entry, NULL);
    g_dir_close(listing);
    gchar *data = NULL;
    gsize len = 0;
    ck_assert(g_file_get_contents(path, &data, &len, NULL));
    data[len - 1] ^= 0x55;
    ck_assert(g_file_set_contents(path, data, (gssize)len, NULL));
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    char buf[8];
    ck_assert_int_eq(content_cache_read(cache, "o", 1, 6, buf, 0), -ENOENT);
    ck_assert(!g_file_test(path, G_FILE_TEST_EXISTS));
    struct content_cache_stats stats;
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_eq(stats.corrupt_files, 1);
    content_cache_free(cache);
    g_free(data);
    g_free(path);
    g_free(sub);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

START_TEST(disk_cap_evicts_oldest)
{
    char *dir = make_temp_dir();
    struct content_cache_config config = {.dir = dir, .disk_bytes = 3 * (100 + 32), .scope = "b"};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    char body[100] = {0};
    for (int i = 0; i < 5; i++) {
        char name[8];
        g_snprintf(name, sizeof(name), "%d", i);
        ck_assert_int_eq(content_cache_insert(cache, name, 1, body, sizeof(body)), 0);
    }
    struct content_cache_stats stats;
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_eq(stats.disk_entries, 3);
    ck_assert_uint_le(stats.disk_used, 3 * (100 + 32));
    ck_assert(!content_cache_contains(cache, "0", 1));
    ck_assert(content_cache_contains(cache, "4", 1));
    content_cache_free(cache);
    remove_tree(dir);
    g_free(dir);
}
END_TEST

struct filler {
    struct content_cache *cache;
};

static gpointer fill_later(gpointer data)
{
    struct filler *filler = data;
    g_usleep(20000);
    content_cache_insert(filler->cache, "p", 3, "late", 4);
    content_cache_clear_pending(filler->cache, "p", 3);
    return NULL;
}

START_TEST(reader_waits_for_a_pending_fill)
{
    struct membudget *budget = membudget_new(1 << 20);
    struct content_cache_config config = {.memory_bytes = 4096, .budget = budget};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    ck_assert(content_cache_mark_pending(cache, "p", 3));
    ck_assert(!content_cache_mark_pending(cache, "p", 3)); /* one fill at a time */
    struct filler filler = {cache};
    GThread *thread = g_thread_new("filler", fill_later, &filler);
    char buf[4];
    ck_assert_int_eq(content_cache_read(cache, "p", 3, 4, buf, 30000), 0);
    ck_assert_int_eq(memcmp(buf, "late", 4), 0);
    g_thread_join(thread);
    ck_assert(!content_cache_mark_pending(cache, "p", 3)); /* cached now */
    content_cache_free(cache);
    membudget_free(budget);
}
END_TEST

static void count_block_free(void *data, size_t bytes, void *user)
{
    (void)bytes;
    g_free(data);
    (*(int *)user)++;
}

START_TEST(blocks_are_shared_borrowed_and_demoted)
{
    struct membudget *budget = membudget_new(1 << 20);
    struct content_cache_config config = {.memory_bytes = 5000, .budget = budget};
    struct content_cache *cache = NULL;
    ck_assert_int_eq(content_cache_new(&config, &cache), 0);
    /* One composite of two pieces, cached in place: the block counts once, whole. */
    int freed = 0;
    char *composite = g_malloc(1000);
    memset(composite, 'a', 500);
    memset(composite + 500, 'b', 500);
    struct content_block *block = content_block_new(composite, 1000, count_block_free, &freed);
    ck_assert_int_eq(content_cache_insert_block(cache, "a", 1, block, 0, 500), 0);
    ck_assert_int_eq(content_cache_insert_block(cache, "b", 1, block, 500, 500), 0);
    content_block_unref(block);
    struct content_cache_stats stats;
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_eq(stats.memory_used, 1000);
    ck_assert_uint_eq(stats.memory_entries, 2);
    /* Borrowed: a pointer into the composite, valid while the reference is held. */
    struct content_block *borrowed = NULL;
    const void *data = NULL;
    ck_assert_int_eq(content_cache_borrow(cache, "b", 1, 500, 0, &borrowed, &data), 0);
    ck_assert_ptr_eq(data, composite + 500);
    ck_assert_int_eq(content_cache_borrow(cache, "b", 1, 499, 0, &block, &data), -ENOENT);
    ck_assert_int_eq(content_cache_borrow(cache, "c", 1, 500, 0, &block, &data), -ENOENT);
    /* A copied entry and the demotion: "a" demoted is evicted first, but its block stays
     * (cached "b" holds it, 1000 bytes counted) until "b" goes too. */
    char body[2500];
    memset(body, 'c', sizeof(body));
    ck_assert_int_eq(content_cache_insert(cache, "c", 1, body, 2500), 0);
    content_cache_demote(cache, "c", 1);
    content_cache_demote(cache, "b", 1);
    content_cache_demote(cache, "a", 1); /* now the coldest; then "b", then "c" */
    ck_assert_int_eq(content_cache_insert(cache, "d", 1, body, 2500), 0);
    ck_assert(!content_cache_contains(cache, "a", 1));
    ck_assert(!content_cache_contains(cache, "b", 1));
    ck_assert(content_cache_contains(cache, "c", 1));
    ck_assert_int_eq(freed, 0); /* still borrowed */
    ck_assert_int_eq(memcmp(data, "bbbb", 4), 0);
    content_block_unref(borrowed);
    ck_assert_int_eq(freed, 1);
    content_cache_get_stats(cache, &stats);
    ck_assert_uint_eq(stats.memory_used, 5000);
    ck_assert_uint_eq(stats.memory_entries, 2);
    content_cache_free(cache);
    struct membudget_stats budget_stats;
    membudget_get_stats(budget, &budget_stats);
    ck_assert_uint_eq(budget_stats.used, 0);
    membudget_free(budget);
}
END_TEST

TEST_SUITE(io_content_cache_suite)
{
    Suite *s = suite_create("io_content_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, generation_is_part_of_the_key);
    tcase_add_test(tc, memory_lru_within_cap_and_budget);
    tcase_add_test(tc, disk_tier_survives_a_new_instance);
    tcase_add_test(tc, damaged_file_is_dropped);
    tcase_add_test(tc, disk_cap_evicts_oldest);
    tcase_add_test(tc, reader_waits_for_a_pending_fill);
    tcase_add_test(tc, blocks_are_shared_borrowed_and_demoted);
    tcase_add_test(tc, large_object_fill_any_order);
    suite_add_tcase(s, tc);
    return s;
}
