/* Removed names must not come back after a racing listing (stress test, 11 of 40 rounds): a
 * listing or a lookup whose requests started before a change made through the mount (unlink,
 * rename) and that comes back after the change's invalidation goes to its caller, not into the
 * caches. The races are played out in order on one thread: the fill callback (or the code
 * between metacache_epoch and the put) does what the racing unlink would do meanwhile. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fluxfs/dircache.h"
#include "fluxfs/metacache.h"

static void add(GArray *entries, const char *name, enum meta_kind kind, uint64_t size)
{
    struct dir_entry entry;
    memset(&entry, 0, sizeof(entry));
    entry.name = g_strdup(name);
    entry.kind = kind;
    entry.attrs.size = size;
    g_array_append_val(entries, entry);
}

static struct dir_listing *listing_of_f_and_g(void)
{
    GArray *entries = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
    add(entries, "f", META_FILE, 10);
    add(entries, "g", META_FILE, 20);
    return dir_listing_from_array(entries);
}

/* A listing of a directory holding f and g, during which (after the server answered, before
 * the reply is stored) the mount changes something: what the racing unlink or create does. */
struct race {
    struct dircache *cache;
    const char *invalidate; /* path invalidated meanwhile (NULL: none) */
    const char *note;       /* name created in the listed directory meanwhile (NULL: none) */
    int fills;
};

static int racing_fill(const char *path, void *user, struct dir_listing **out)
{
    struct race *race = user;
    race->fills++;
    struct dir_listing *answer = listing_of_f_and_g();
    if (race->invalidate)
        dircache_invalidate(race->cache, race->invalidate);
    if (race->note) {
        struct meta_attrs attrs = {.size = 5};
        ck_assert_int_eq(dircache_note_entry(race->cache, path, race->note, META_FILE, &attrs), 0);
    }
    *out = answer;
    return 0;
}

START_TEST(dircache_listing_started_before_an_invalidation_is_not_cached)
{
    struct dircache *cache = dircache_new(60, 100);
    struct race race = {.cache = cache, .invalidate = "d"};
    struct dir_listing *listing = NULL;
    ck_assert_int_eq(dircache_get(cache, "d", racing_fill, &race, &listing), 0);
    /* The caller that asked gets what the server said... */
    ck_assert_ptr_nonnull(dir_listing_find(listing, "f"));
    dir_listing_unref(listing);
    /* ...the cache does not keep it (before the fix: f, for the list TTL). */
    ck_assert_ptr_null(dircache_peek(cache, "d"));

    /* The next listing started after the invalidation: cached. */
    race.invalidate = NULL;
    ck_assert_int_eq(dircache_get(cache, "d", racing_fill, &race, &listing), 0);
    dir_listing_unref(listing);
    ck_assert_int_eq(race.fills, 2);
    listing = dircache_peek(cache, "d");
    ck_assert_ptr_nonnull(listing);
    dir_listing_unref(listing);

    /* An invalidation of another directory does not keep this one out. */
    dircache_invalidate(cache, "d");
    race.invalidate = "e";
    ck_assert_int_eq(dircache_get(cache, "d", racing_fill, &race, &listing), 0);
    dir_listing_unref(listing);
    listing = dircache_peek(cache, "d");
    ck_assert_ptr_nonnull(listing);
    dir_listing_unref(listing);
    dircache_free(cache);
}
END_TEST

START_TEST(dircache_create_during_a_listing_is_kept)
{
    struct dircache *cache = dircache_new(60, 100);
    struct race race = {.cache = cache, .note = "new"};
    struct dir_listing *listing = NULL;
    ck_assert_int_eq(dircache_get(cache, "d", racing_fill, &race, &listing), 0);
    dir_listing_unref(listing);
    listing = dircache_peek(cache, "d");
    ck_assert_ptr_nonnull(listing);
    ck_assert_uint_eq(listing->count, 3);
    ck_assert_str_eq(listing->entries[0].name, "f");
    ck_assert_str_eq(listing->entries[1].name, "g");
    ck_assert_str_eq(listing->entries[2].name, "new");
    ck_assert_uint_eq(listing->entries[2].attrs.size, 5);
    dir_listing_unref(listing);

    /* A note of a listed name replaces its entry (a commit of g meanwhile: its new size). */
    dircache_invalidate(cache, "d");
    race.note = "g";
    ck_assert_int_eq(dircache_get(cache, "d", racing_fill, &race, &listing), 0);
    dir_listing_unref(listing);
    listing = dircache_peek(cache, "d");
    ck_assert_uint_eq(listing->count, 2);
    ck_assert_uint_eq(dir_listing_find(listing, "g")->attrs.size, 5);
    dir_listing_unref(listing);
    dircache_free(cache);
}
END_TEST

START_TEST(dircache_put_since_refuses_a_listing_older_than_a_change)
{
    struct dircache *cache = dircache_new(60, 100);
    struct dir_listing *answer = listing_of_f_and_g();
    uint64_t since = dircache_epoch(cache);
    dircache_invalidate(cache, "d");
    ck_assert(!dircache_put_since(cache, "d", answer, since));
    ck_assert_ptr_null(dircache_peek(cache, "d"));
    ck_assert(dircache_put_since(cache, "d", answer, dircache_epoch(cache)));
    /* A create counts too (the listing would lack it). */
    since = dircache_epoch(cache);
    ck_assert_int_eq(dircache_note_entry(cache, "p", "x", META_DIR, NULL), -ENOENT);
    ck_assert(!dircache_put_since(cache, "p", answer, since));
    ck_assert(dircache_put_since(cache, "other", answer, since));
    dircache_free(cache);

    /* Slots evicted for room take their marks along: older listings are refused anywhere. */
    cache = dircache_new(60, 2);
    since = dircache_epoch(cache);
    dircache_invalidate(cache, "a");
    dircache_invalidate(cache, "b");
    dircache_invalidate(cache, "c"); /* evicts a and b */
    ck_assert(!dircache_put_since(cache, "a", answer, since));
    ck_assert(!dircache_put_since(cache, "z", answer, since));
    ck_assert(dircache_put_since(cache, "a", answer, dircache_epoch(cache)));
    dircache_free(cache);
    dir_listing_unref(answer);
}
END_TEST

static void listing_child(const void *user, size_t index, const char **name, enum meta_kind *kind,
                          const struct meta_attrs **attrs)
{
    const struct dir_entry *entry = &((const struct dir_listing *)user)->entries[index];
    *name = entry->name;
    *kind = entry->kind;
    *attrs = &entry->attrs;
}

START_TEST(metacache_fetch_started_before_a_forget_is_not_cached)
{
    struct metacache *cache = metacache_new(60, 60, 60, 100);
    struct meta_attrs attrs = {.size = 10, .generation = 1};
    enum meta_kind kind;
    /* A lookup (objects.get) of d/f starts; the unlink of d/f forgets it; the lookup's
     * answer (the object as it was) comes back. */
    uint64_t since = metacache_epoch(cache);
    metacache_put_file(cache, "d/f", META_FILE, &attrs);
    metacache_forget(cache, "d/f");
    ck_assert_int_eq(metacache_get(cache, "d/f", &kind, NULL), -ENOENT);
    ck_assert(!metacache_put_fetched(cache, "d/f", META_FILE, &attrs, since));
    ck_assert_int_eq(metacache_get(cache, "d/f", &kind, NULL), -ENOENT);
    /* The same for a listing of d: f stays out, g goes in. */
    struct dir_listing *listing = listing_of_f_and_g();
    metacache_put_children(cache, "d", listing->count, listing_child, listing, since);
    ck_assert_int_eq(metacache_get(cache, "d/f", &kind, NULL), -ENOENT);
    ck_assert_int_eq(metacache_get(cache, "d/g", &kind, NULL), 0);
    /* A fetch that started after the forget is cached; the mark stays with the new entry,
     * so an older fetch that comes back later still is not. */
    uint64_t after = metacache_epoch(cache);
    ck_assert(metacache_put_fetched(cache, "d/f", META_ABSENT, NULL, after));
    ck_assert(!metacache_put_fetched(cache, "d/f", META_FILE, &attrs, since));
    ck_assert_int_eq(metacache_get(cache, "d/f", &kind, NULL), 0);
    ck_assert_int_eq(kind, META_ABSENT);
    /* A directory forgotten since (renamed, removed): none of its listing. */
    since = metacache_epoch(cache);
    metacache_forget(cache, "d");
    metacache_forget(cache, "d/g");
    metacache_put_children(cache, "d", listing->count, listing_child, listing, since);
    ck_assert_int_eq(metacache_get(cache, "d/g", &kind, NULL), -ENOENT);
    ck_assert(!metacache_put_fetched(cache, "d", META_DIR, NULL, since));
    /* What the caller knows now (its own change) always goes in. */
    metacache_put_dir(cache, "d");
    ck_assert_int_eq(metacache_get(cache, "d", &kind, NULL), 0);
    metacache_put_file(cache, "d/g", META_FILE, &attrs);
    ck_assert_int_eq(metacache_get(cache, "d/g", &kind, NULL), 0);
    dir_listing_unref(listing);
    metacache_free(cache);

    /* Marks dropped for room: fetches older than them are refused for every path. */
    cache = metacache_new(60, 60, 60, 3);
    since = metacache_epoch(cache);
    metacache_forget(cache, "a");
    metacache_put_dir(cache, "b");
    metacache_put_dir(cache, "c");
    ck_assert(!metacache_put_fetched(cache, "z", META_DIR, NULL, since));
    ck_assert(metacache_put_fetched(cache, "z", META_DIR, NULL, metacache_epoch(cache)));
    ck_assert_int_eq(metacache_get(cache, "z", &kind, NULL), 0);
    metacache_free(cache);
}
END_TEST

TEST_SUITE(core_cache_epochs_suite)
{
    Suite *s = suite_create("core_cache_epochs");
    TCase *tc = tcase_create("races");
    tcase_add_test(tc, dircache_listing_started_before_an_invalidation_is_not_cached);
    tcase_add_test(tc, dircache_create_during_a_listing_is_kept);
    tcase_add_test(tc, dircache_put_since_refuses_a_listing_older_than_a_change);
    tcase_add_test(tc, metacache_fetch_started_before_a_forget_is_not_cached);
    suite_add_tcase(s, tc);
    return s;
}
