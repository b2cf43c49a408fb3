/* Readahead window logic and the global memory budget. */
#include "test-common.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "fluxfs/membudget.h"
#include "fluxfs/readahead.h"

#define MiB (1024u * 1024u)

static const struct readahead_config config = {
    .chunk = 8 * MiB, .window_max = 64 * MiB, .random_min = 1 * MiB};

START_TEST(sequential_grows_to_max)
{
    struct readahead_state state;
    struct readahead_plan plan;
    readahead_init(&state);
    uint64_t size = 1024ull * MiB;
    size_t expect = 8 * MiB;
    uint64_t offset = 0;
    for (int i = 0; i < 10; i++) {
        readahead_on_read(&config, &state, offset, 128 * 1024, size, &plan);
        ck_assert(plan.sequential);
        ck_assert_uint_eq(plan.fetch_start, offset);
        ck_assert_uint_eq(plan.fetch_end, offset + 128 * 1024 + expect);
        expect = expect * 2 > 64 * MiB ? 64 * MiB : expect * 2;
        offset += 128 * 1024;
    }
    ck_assert_uint_eq(state.window, 64 * MiB);
    /* Slightly out of order (kernel async reads) still counts as sequential. */
    readahead_on_read(&config, &state, offset + 256 * 1024, 128 * 1024, size, &plan);
    ck_assert(plan.sequential);
    readahead_on_read(&config, &state, offset, 128 * 1024, size, &plan);
    ck_assert(plan.sequential);
    /* Never past the end of the object. */
    readahead_on_read(&config, &state, offset + 384 * 1024, 128 * 1024, offset + 1 * MiB, &plan);
    ck_assert_uint_eq(plan.fetch_end, offset + 1 * MiB);
}
END_TEST

START_TEST(random_collapses_window)
{
    struct readahead_state state;
    struct readahead_plan plan;
    readahead_init(&state);
    uint64_t size = 1024ull * MiB;
    /* A first read not at 0 is random. */
    readahead_on_read(&config, &state, 500 * MiB, 4096, size, &plan);
    ck_assert(!plan.sequential);
    ck_assert_uint_eq(plan.fetch_end - plan.fetch_start, 1 * MiB);
    ck_assert_uint_eq(state.window, 0);
    /* Reading on from there becomes sequential. */
    readahead_on_read(&config, &state, 500 * MiB + 4096, 4096, size, &plan);
    ck_assert(plan.sequential);
    ck_assert_uint_eq(state.window, 8 * MiB);
    /* A jump halves it (8 -> 4 MiB) and plans no readahead; a large random read fetches
     * what is asked. Steady random reads decay the window to nothing. */
    readahead_on_read(&config, &state, 10 * MiB, 3 * MiB, size, &plan);
    ck_assert(!plan.sequential);
    ck_assert_uint_eq(state.window, 4 * MiB);
    ck_assert_uint_eq(plan.fetch_end, 13 * MiB);
    for (int i = 0; i < 30; i++)
        readahead_on_read(&config, &state, (uint64_t)(97 * i % 500) * MiB, 4096, size, &plan);
    ck_assert_uint_eq(state.window, 0);
    /* A random read near the end is clipped. */
    readahead_on_read(&config, &state, size - 100, 4096, size, &plan);
    ck_assert_uint_eq(plan.fetch_end, size);
}
END_TEST

/* Issue 11: a zip reader reads a record header, then hops to the next one megabytes further
 * on. A forward jump larger than what the run has read is a skip, not a stream: the window
 * collapses instead of rolling on to the end of the file. Reordering within what was read
 * still counts as sequential. */
START_TEST(header_skips_are_not_sequential)
{
    struct readahead_state state;
    struct readahead_plan plan;
    readahead_init(&state);
    uint64_t size = 512ull * MiB;
    readahead_on_read(&config, &state, 0, 128 * 1024, size, &plan);
    ck_assert(plan.sequential);
    /* 4 MiB on: within the old one-chunk slack, but 32 times what was read. No readahead
     * from the skip (only random_min), the window is halved. */
    readahead_on_read(&config, &state, 4 * MiB, 128 * 1024, size, &plan);
    ck_assert(!plan.sequential);
    ck_assert_uint_eq(state.window, 4 * MiB);
    ck_assert_uint_eq(plan.fetch_end, 5 * MiB);
    /* The record's bytes read on from there: sequential again, the window back at once. */
    readahead_on_read(&config, &state, 4 * MiB + 128 * 1024, 128 * 1024, size, &plan);
    ck_assert(plan.sequential);
    ck_assert_uint_eq(state.window, 8 * MiB);
    /* A reordered read one request ahead (the run has read 256 KiB): still a stream. */
    readahead_on_read(&config, &state, 4 * MiB + 384 * 1024, 128 * 1024, size, &plan);
    ck_assert(plan.sequential);
    /* The next header 20 MiB on: a skip. */
    readahead_on_read(&config, &state, 24 * MiB, 4096, size, &plan);
    ck_assert(!plan.sequential);
    /* Backwards within a chunk (reordering) stays what it was. */
    readahead_on_read(&config, &state, 24 * MiB + 4096, 4096, size, &plan);
    ck_assert(plan.sequential);
    readahead_on_read(&config, &state, 24 * MiB, 4096, size, &plan);
    ck_assert(plan.sequential);
}
END_TEST

/* Random reads skipping forward by a steady stride (safetensors touching each 16 MiB tensor's
 * first page) plan the neighbourhoods of the next skips, two more at each repeat of the
 * stride; an irregular skip plans nothing. */
START_TEST(steady_skips_prefetch_the_next)
{
    struct readahead_state state;
    struct readahead_plan plan;
    readahead_init(&state);
    uint64_t size = 1024ull * MiB;
    readahead_on_read(&config, &state, 100 * MiB, 4096, size, &plan);
    ck_assert(!plan.sequential);
    ck_assert_uint_eq(plan.prefetch_count, 0);
    readahead_on_read(&config, &state, 116 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_count, 0); /* one stride is no pattern yet */
    readahead_on_read(&config, &state, 132 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_start, 147 * MiB); /* a MiB before where it lands */
    ck_assert_uint_eq(plan.prefetch_len, 3 * MiB);
    ck_assert_uint_eq(plan.prefetch_stride, 16 * MiB);
    ck_assert_uint_eq(plan.prefetch_count, 2);
    /* Within a quarter: still a pattern, looking further ahead. */
    readahead_on_read(&config, &state, 150 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_start, 167 * MiB);
    ck_assert_uint_eq(plan.prefetch_stride, 18 * MiB);
    ck_assert_uint_eq(plan.prefetch_count, 4);
    /* Never more than window_max bytes of neighbourhoods (64 MiB / 3 MiB). */
    for (uint64_t at = 168 * MiB; at < 600 * MiB; at += 18 * MiB)
        readahead_on_read(&config, &state, at, 4096, size, &plan);
    ck_assert_uint_eq(state.skip_depth, 21);
    /* An irregular skip, or one backwards: nothing, and the depth starts over. */
    readahead_on_read(&config, &state, 900 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_count, 0);
    readahead_on_read(&config, &state, 10 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_count, 0);
    /* Never past the end of the object: targets beyond it are dropped. */
    readahead_on_read(&config, &state, size - 40 * MiB, 4096, size, &plan);
    readahead_on_read(&config, &state, size - 21 * MiB, 4096, size, &plan);
    readahead_on_read(&config, &state, size - 2 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_count, 0);
    readahead_init(&state);
    readahead_on_read(&config, &state, size - 100 * MiB, 4096, size, &plan);
    readahead_on_read(&config, &state, size - 70 * MiB, 4096, size, &plan);
    readahead_on_read(&config, &state, size - 40 * MiB, 4096, size, &plan);
    ck_assert_uint_eq(plan.prefetch_count, 1); /* size - 11 MiB; size + 19 MiB dropped */
    /* A sequential read plans no such prefetch. */
    readahead_on_read(&config, &state, size - 40 * MiB + 4096, 4096, size, &plan);
    ck_assert(plan.sequential);
    ck_assert_uint_eq(plan.prefetch_count, 0);
}
END_TEST

/* A columnar reader (pyarrow) reads two column chunks at once through one handle: each jump,
 * then their 1 MiB reads interleaved. Each continues its own stream, whose window is a
 * RA_JUMP_DIVISOR-th of what it read, clipped exactly: a chunk's end is overshot by at most that.
 */
START_TEST(interleaved_column_chunks_ramp_from_their_runs)
{
    struct readahead_state state;
    struct readahead_plan plan;
    readahead_init(&state);
    uint64_t size = 1024ull * MiB;
    uint64_t a = 100 * MiB, b = 300 * MiB;
    readahead_on_read(&config, &state, size - 64 * 1024, 64 * 1024, size, &plan); /* footer */
    readahead_on_read(&config, &state, a, MiB, size, &plan);
    ck_assert(!plan.sequential);
    readahead_on_read(&config, &state, b, MiB, size, &plan);
    ck_assert(!plan.sequential);
    for (uint64_t i = 1; i < 8; i++) {
        readahead_on_read(&config, &state, a + i * MiB, MiB, size, &plan);
        ck_assert(plan.sequential);
        ck_assert(plan.exact);
        ck_assert_uint_eq(plan.fetch_end, a + (i + 1) * MiB + (i + 1) * MiB / RA_JUMP_DIVISOR);
        readahead_on_read(&config, &state, b + i * MiB, MiB, size, &plan);
        ck_assert(plan.sequential);
        ck_assert(plan.exact);
        ck_assert_uint_le(plan.fetch_end, b + (i + 1) * MiB + (i + 1) * MiB / RA_JUMP_DIVISOR);
    }
    /* A small read far from both streams is still a random read of random_min. */
    readahead_on_read(&config, &state, 700 * MiB, 4096, size, &plan);
    ck_assert(!plan.sequential);
    ck_assert_uint_eq(plan.fetch_end, 701 * MiB);
    /* A stream from the start of the file ramps as a first read does. */
    readahead_on_read(&config, &state, 0, MiB, size, &plan);
    readahead_on_read(&config, &state, MiB, MiB, size, &plan);
    ck_assert(plan.sequential);
    ck_assert(!plan.exact);
    ck_assert_uint_ge(plan.fetch_end, 2 * MiB + 8 * MiB);

    /* One chunk at a time, after reading the footer first: a columnar reader from the first
     * jump on. */
    readahead_init(&state);
    readahead_on_read(&config, &state, size - 64 * 1024, 64 * 1024, size, &plan);
    readahead_on_read(&config, &state, a, MiB, size, &plan);
    readahead_on_read(&config, &state, a + MiB, MiB, size, &plan);
    ck_assert(plan.sequential);
    ck_assert(plan.exact);
    ck_assert_uint_eq(plan.fetch_end, a + 2 * MiB + 2 * MiB / RA_JUMP_DIVISOR);
    /* A zip reader: its tail, then offset 0, then a hop and a stream: windows as before. */
    readahead_init(&state);
    readahead_on_read(&config, &state, size - 64 * 1024, 64 * 1024, size, &plan);
    readahead_on_read(&config, &state, 0, MiB, size, &plan);
    readahead_on_read(&config, &state, a, MiB, size, &plan);
    readahead_on_read(&config, &state, a + MiB, MiB, size, &plan);
    ck_assert(plan.sequential);
    ck_assert(!plan.exact);
    ck_assert_uint_gt(plan.fetch_end, a + 4 * MiB);
}
END_TEST

/* A reader touching each tensor (the kernel reading 1 MiB before and after the faulted page)
 * opens no window in the neighbourhood of its skips; one streaming after each skip does. */
START_TEST(touching_skips_open_no_window)
{
    struct readahead_state state;
    struct readahead_plan plan;
    readahead_init(&state);
    uint64_t size = 1024ull * MiB;
    for (uint64_t tensor = 16 * MiB; tensor <= 80 * MiB; tensor += 16 * MiB) {
        readahead_on_read(&config, &state, tensor - MiB, MiB, size, &plan);
        ck_assert(!plan.sequential);
        readahead_on_read(&config, &state, tensor, MiB, size, &plan);
        ck_assert(plan.sequential);
        /* From the third skip of the stride on, its neighbourhood was prefetched and the
         * run before it was a touch. */
        if (tensor >= 64 * MiB)
            ck_assert_uint_eq(plan.fetch_end, tensor + MiB);
        else
            ck_assert_uint_gt(plan.fetch_end, tensor + 4 * MiB);
    }
    /* Reading on past the neighbourhood: a stream after all, its window opens. */
    readahead_on_read(&config, &state, 81 * MiB, MiB, size, &plan);
    ck_assert(plan.sequential);
    ck_assert_uint_gt(plan.fetch_end, 82 * MiB);

    /* torch.load(mmap=True) reads 3 MiB at each record header: its neighbourhoods are 3 MiB,
     * prefetched from a MiB before where the next headers should be. */
    readahead_init(&state);
    for (uint64_t record = 16 * MiB; record <= 64 * MiB; record += 16 * MiB) {
        for (uint64_t at = record; at < record + 3 * MiB; at += MiB)
            readahead_on_read(&config, &state, at, MiB, size, &plan);
        if (record >= 64 * MiB)
            ck_assert_uint_eq(plan.fetch_end, record + 3 * MiB);
    }
    readahead_on_read(&config, &state, 80 * MiB, MiB, size, &plan);
    ck_assert_uint_eq(plan.prefetch_start, 95 * MiB);
    ck_assert_uint_eq(plan.prefetch_len, 4 * MiB);

    /* Streaming 8 MiB after each skip of a steady stride: windows as before. */
    readahead_init(&state);
    for (uint64_t tensor = 16 * MiB; tensor <= 160 * MiB; tensor += 32 * MiB) {
        readahead_on_read(&config, &state, tensor, MiB, size, &plan);
        ck_assert(!plan.sequential);
        for (uint64_t at = tensor + MiB; at < tensor + 8 * MiB; at += MiB) {
            readahead_on_read(&config, &state, at, MiB, size, &plan);
            ck_assert(plan.sequential);
            ck_assert_uint_gt(plan.fetch_end, at + 4 * MiB);
        }
    }
}
END_TEST

/* A reclaimer for the test: holds buffers of the budget as a cache would and frees them when
 * asked; records whether the asks were urgent. */
struct test_cache {
    struct membudget *budget;
    void *held[8];
    size_t held_bytes;
    unsigned calls, urgent_calls;
};

static size_t test_reclaim(void *user, size_t wanted, bool urgent)
{
    struct test_cache *cache = user;
    cache->calls++;
    if (urgent)
        cache->urgent_calls++;
    else
        return 0; /* speculation does not displace this cache */
    size_t freed = 0;
    for (int i = 0; i < 8 && freed < wanted; i++) {
        if (cache->held[i]) {
            membudget_free_buffer(cache->budget, cache->held[i], cache->held_bytes);
            cache->held[i] = NULL;
            freed += cache->held_bytes;
        }
    }
    return freed;
}

START_TEST(budget_reclaims_cached_bytes_on_demand)
{
    struct membudget *budget = membudget_new(16 * MiB);
    struct test_cache cache = {.budget = budget, .held_bytes = 2 * MiB};
    for (int i = 0; i < 8; i++) {
        cache.held[i] = membudget_alloc(budget, 2 * MiB, true, 0);
        ck_assert_ptr_nonnull(cache.held[i]);
    }
    membudget_set_reclaimer(budget, test_reclaim, &cache);
    /* Speculation (a reserve to keep) is refused: the cache keeps its bytes. */
    ck_assert_ptr_null(membudget_alloc(budget, 4 * MiB, false, 2 * MiB));
    ck_assert_uint_eq(cache.calls, 1);
    ck_assert_uint_eq(cache.urgent_calls, 0);
    /* A demand gets room: the cache gives back enough (and not everything). */
    void *demand = membudget_alloc(budget, 4 * MiB, true, 0);
    ck_assert_ptr_nonnull(demand);
    ck_assert_uint_eq(cache.urgent_calls, 1);
    int still = 0;
    for (int i = 0; i < 8; i++)
        still += cache.held[i] != NULL;
    ck_assert_int_ge(still, 5);
    /* A blocking acquire (a write buffer) asks too. */
    ck_assert(membudget_acquire(budget, 4 * MiB, 0));
    ck_assert_uint_eq(cache.urgent_calls, 2);
    struct membudget_stats stats;
    membudget_get_stats(budget, &stats);
    ck_assert_uint_le(stats.used, 16 * MiB);
    ck_assert_uint_eq(stats.reclaims, 3);
    ck_assert_uint_ge(stats.reclaimed, 8 * MiB);
    membudget_set_reclaimer(budget, NULL, NULL);
    membudget_release(budget, 4 * MiB);
    membudget_free_buffer(budget, demand, 4 * MiB);
    for (int i = 0; i < 8; i++)
        membudget_free_buffer(budget, cache.held[i], 2 * MiB);
    membudget_free(budget);
}
END_TEST

START_TEST(budget_admission)
{
    struct membudget *budget = membudget_new(10 * MiB);
    ck_assert(membudget_try_acquire(budget, 6 * MiB));
    ck_assert(!membudget_try_acquire(budget, 5 * MiB));
    ck_assert(membudget_try_acquire_reserving(budget, 2 * MiB, 2 * MiB));
    ck_assert(!membudget_try_acquire_reserving(budget, 1 * MiB, 2 * MiB));
    ck_assert(membudget_try_acquire(budget, 2 * MiB));
    /* Larger than the whole budget: refused at once, even with an infinite wait. */
    ck_assert(!membudget_acquire(budget, 11 * MiB, -1));
    /* Full: a timed wait gives up. */
    gint64 start = g_get_monotonic_time();
    ck_assert(!membudget_acquire(budget, 1 * MiB, 50));
    ck_assert_int_ge(g_get_monotonic_time() - start, 40000);
    struct membudget_stats stats;
    membudget_get_stats(budget, &stats);
    ck_assert_uint_eq(stats.used, 10 * MiB);
    ck_assert_uint_eq(stats.peak, 10 * MiB);
    ck_assert_uint_ge(stats.refusals, 3);
    membudget_release(budget, 10 * MiB);
    membudget_get_stats(budget, &stats);
    ck_assert_uint_eq(stats.used, 0);
    membudget_free(budget);
    membudget_free(NULL);
}
END_TEST

/* Buffers of 2 MiB and more are huge-page-aligned mappings of exactly their size: every byte
 * is usable, a freed one is reused from the pool, and freeing (pool drain, budget free) does
 * not touch memory beyond it. */
START_TEST(budget_huge_buffers)
{
    struct membudget *budget = membudget_new(64 * MiB);
    size_t sizes[] = {2 * MiB, 3 * MiB + 5, 8 * MiB, MiB + 1};
    void *buffers[G_N_ELEMENTS(sizes)];
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        buffers[i] = membudget_alloc(budget, sizes[i], true, 0);
        ck_assert_ptr_nonnull(buffers[i]);
        if (sizes[i] >= 2 * MiB)
            ck_assert_uint_eq((uintptr_t)buffers[i] % (2 * MiB), 0);
        memset(buffers[i], (int)i + 1, sizes[i]);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        unsigned char *bytes = buffers[i];
        ck_assert_uint_eq(bytes[0], i + 1);
        ck_assert_uint_eq(bytes[sizes[i] - 1], i + 1);
    }
    membudget_free_buffer(budget, buffers[1], sizes[1]);
    void *again = membudget_alloc(budget, sizes[1], true, 0);
    ck_assert_ptr_eq(again, buffers[1]);
    memset(again, 0x5a, sizes[1]);
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        membudget_free_buffer(budget, buffers[i], sizes[i]);
    /* Too big for what is left unless the pool is drained (freed) first. */
    void *large = membudget_alloc(budget, 60 * MiB, true, 0);
    ck_assert_ptr_nonnull(large);
    memset(large, 1, 60 * MiB);
    membudget_free_buffer(budget, large, 60 * MiB);
    struct membudget_stats stats;
    membudget_get_stats(budget, &stats);
    ck_assert_uint_eq(stats.used, 0);
    membudget_free(budget);
}
END_TEST

/* Whether the page at address is mapped (msync answers ENOMEM for an unmapped one). */
static bool page_mapped(const void *address)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *start = (void *)((uintptr_t)address & ~(page - 1));
    return msync(start, page, MS_ASYNC) == 0;
}

/* A huge buffer of a size that is not a whole number of pages leaves nothing of its mapping
 * behind: not while it lives (the alignment slack beyond its last page is unmapped) and not
 * once freed. A leftover tail leaked up to 2 MiB of address space and a mapping per buffer
 * (a mount reading many odd-sized objects reached vm.max_map_count). */
START_TEST(budget_huge_buffer_odd_size_leaves_no_mapping)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t sizes[] = {3 * MiB + 5, 2 * MiB + 1, 5 * MiB - 1, 4 * MiB};
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        /* Small enough a budget that the freed buffer is not kept in the pool. */
        struct membudget *budget = membudget_new(8 * MiB);
        size_t bytes = sizes[i];
        char *buffer = membudget_alloc(budget, bytes, true, 0);
        ck_assert_ptr_nonnull(buffer);
        memset(buffer, 7, bytes);
        char *end = buffer + (bytes + page - 1) / page * page;
        ck_assert_msg(!page_mapped(end), "size %zu: the page after the buffer is mapped", bytes);
        membudget_free_buffer(budget, buffer, bytes);
        ck_assert(!page_mapped(buffer));
        ck_assert(!page_mapped(end - 1));
        struct membudget_stats stats;
        membudget_get_stats(budget, &stats);
        ck_assert_uint_eq(stats.used, 0);
        membudget_free(budget);
    }
}
END_TEST

/* Releases once the acquire is waiting (counted under the lock it waits on), not after a
 * fixed 50 ms that a loaded machine could spend before the acquire even starts. */
static gpointer release_when_waited(gpointer data)
{
    struct membudget_stats stats;
    gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    do {
        g_usleep(1000);
        membudget_get_stats(data, &stats);
    } while (stats.waits == 0 && g_get_monotonic_time() < deadline);
    membudget_release(data, 4 * MiB);
    return NULL;
}

START_TEST(budget_waiter_is_woken)
{
    struct membudget *budget = membudget_new(8 * MiB);
    ck_assert(membudget_try_acquire(budget, 8 * MiB));
    GThread *thread = g_thread_new("release", release_when_waited, budget);
    ck_assert(membudget_acquire(budget, 4 * MiB, 60000));
    g_thread_join(thread);
    struct membudget_stats stats;
    membudget_get_stats(budget, &stats);
    ck_assert_uint_eq(stats.used, 8 * MiB);
    ck_assert_uint_eq(stats.waits, 1);
    membudget_release(budget, 8 * MiB);
    membudget_free(budget);
}
END_TEST

TEST_SUITE(io_readahead_suite)
{
    Suite *s = suite_create("io_readahead");
    TCase *tc = tcase_create("io");
    tcase_add_test(tc, sequential_grows_to_max);
    tcase_add_test(tc, random_collapses_window);
    tcase_add_test(tc, header_skips_are_not_sequential);
    tcase_add_test(tc, steady_skips_prefetch_the_next);
    tcase_add_test(tc, touching_skips_open_no_window);
    tcase_add_test(tc, interleaved_column_chunks_ramp_from_their_runs);
    tcase_add_test(tc, budget_reclaims_cached_bytes_on_demand);
    tcase_add_test(tc, budget_admission);
    tcase_add_test(tc, budget_waiter_is_woken);
    tcase_add_test(tc, budget_huge_buffers);
    tcase_add_test(tc, budget_huge_buffer_odd_size_leaves_no_mapping);
    suite_add_tcase(s, tc);
    return s;
}
