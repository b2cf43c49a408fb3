/* Metadata cache (TTLs, directory wins), directory listings (lookup, de-duplication,
 * single-flight filling) and the inode table (lookup/forget counts, kind changes). */
#include "test-common.h"

#include <errno.h>
#include <signal.h>
#include <glib.h>
#include <string.h>

#include "fluxfs/dircache.h"
#include "fluxfs/inode.h"
#include "fluxfs/metacache.h"

START_TEST(metacache_ttls_and_dirs_win)
{
    /* TTLs that leave a loaded machine room between a put and the check that the entry is
     * still there (the margins were 0.05 s and 0.12 s): 0.3 s negative, 1 s positive. */
    struct metacache *cache = metacache_new(1.0, 1.0, 0.3, 100);
    struct meta_attrs attrs = {.size = 42, .generation = 7};
    enum meta_kind kind;
    struct meta_attrs got;
    ck_assert_int_eq(metacache_get(cache, "a", &kind, &got), -ENOENT);
    metacache_put_file(cache, "a", META_FILE, &attrs);
    ck_assert_int_eq(metacache_get(cache, "a", &kind, &got), 0);
    ck_assert_int_eq(kind, META_FILE);
    ck_assert_uint_eq(got.size, 42);
    meta_attrs_clear(&got);
    /* A directory replaces the file, and a file does not replace a fresh directory. */
    metacache_put_dir(cache, "a");
    metacache_put_file(cache, "a", META_FILE, &attrs);
    ck_assert_int_eq(metacache_get(cache, "a", &kind, NULL), 0);
    ck_assert_int_eq(kind, META_DIR);
    metacache_put_absent(cache, "gone");
    ck_assert_int_eq(metacache_get(cache, "gone", &kind, NULL), 0);
    ck_assert_int_eq(kind, META_ABSENT);
    g_usleep(350000);
    ck_assert_int_eq(metacache_get(cache, "gone", &kind, NULL), -ENOENT); /* negative TTL */
    ck_assert_int_eq(metacache_get(cache, "a", &kind, NULL), 0);
    g_usleep(700000);
    ck_assert_int_eq(metacache_get(cache, "a", &kind, NULL), -ENOENT);
    metacache_free(cache);

    /* A TTL of 0 caches nothing; a full cache drops entries instead of growing. */
    cache = metacache_new(0, 0, 0, 10);
    metacache_put_file(cache, "x", META_FILE, &attrs);
    ck_assert_int_eq(metacache_get(cache, "x", &kind, NULL), -ENOENT);
    metacache_free(cache);
    cache = metacache_new(60, 60, 60, 10);
    for (int i = 0; i < 100; i++) {
        char name[16];
        g_snprintf(name, sizeof(name), "n%d", i);
        metacache_put_dir(cache, name);
        ck_assert_uint_le(metacache_size(cache), 10);
    }
    metacache_free(cache);
    metacache_free(NULL);
}
END_TEST

static void add(GArray *entries, const char *name, enum meta_kind kind)
{
    struct dir_entry entry;
    memset(&entry, 0, sizeof(entry));
    entry.name = g_strdup(name);
    entry.kind = kind;
    g_array_append_val(entries, entry);
}

START_TEST(listing_dedup_dir_wins)
{
    GArray *entries = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
    add(entries, "b", META_FILE);
    add(entries, "a", META_FILE);
    add(entries, "b", META_DIR);
    add(entries, "c", META_DIR);
    add(entries, "a", META_FILE);
    struct dir_listing *listing = dir_listing_from_array(entries);
    ck_assert_uint_eq(listing->count, 3);
    ck_assert_str_eq(listing->entries[0].name, "a");
    ck_assert_str_eq(listing->entries[1].name, "b");
    ck_assert_int_eq(listing->entries[1].kind, META_DIR);
    ck_assert_ptr_nonnull(dir_listing_find(listing, "c"));
    ck_assert_ptr_null(dir_listing_find(listing, "d"));
    ck_assert_ptr_null(dir_listing_find(listing, ""));
    dir_listing_unref(listing);
    dir_listing_unref(NULL);
}
END_TEST

struct fill_state {
    gint fills;
};

static int slow_fill(const char *path, void *user, struct dir_listing **out)
{
    struct fill_state *state = user;
    g_atomic_int_inc(&state->fills);
    g_usleep(100000);
    GArray *entries = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
    add(entries, path, META_FILE);
    *out = dir_listing_from_array(entries);
    return 0;
}

static int failing_fill(const char *path, void *user, struct dir_listing **out)
{
    return -EIO;
}

struct reader_args {
    struct dircache *cache;
    struct fill_state *state;
    int rc;
    size_t count;
};

static gpointer concurrent_get(gpointer data)
{
    struct reader_args *args = data;
    struct dir_listing *listing = NULL;
    args->rc = dircache_get(args->cache, "dir", slow_fill, args->state, &listing);
    if (args->rc == 0) {
        args->count = listing->count;
        dir_listing_unref(listing);
    }
    return NULL;
}

START_TEST(dircache_single_flight)
{
    struct dircache *cache = dircache_new(60, 100);
    struct fill_state state = {0};
    struct reader_args args[6];
    GThread *threads[6];
    for (int i = 0; i < 6; i++) {
        args[i] = (struct reader_args){.cache = cache, .state = &state};
        threads[i] = g_thread_new("get", concurrent_get, &args[i]);
    }
    for (int i = 0; i < 6; i++) {
        g_thread_join(threads[i]);
        ck_assert_int_eq(args[i].rc, 0);
        ck_assert_uint_eq(args[i].count, 1);
    }
    ck_assert_int_eq(g_atomic_int_get(&state.fills), 1);
    struct dir_listing *peeked = dircache_peek(cache, "dir");
    ck_assert_ptr_nonnull(peeked);
    dir_listing_unref(peeked);
    dircache_invalidate(cache, "dir");
    ck_assert_ptr_null(dircache_peek(cache, "dir"));
    struct dir_listing *listing = NULL;
    ck_assert_int_eq(dircache_get(cache, "bad", failing_fill, NULL, &listing), -EIO);
    ck_assert_ptr_null(listing);
    dircache_free(cache);
}
END_TEST

START_TEST(inode_lookup_forget)
{
    struct inode_table *table = inode_table_new();
    struct inode *root = inode_table_get(table, INODE_ROOT_ID);
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(root->path, "");
    inode_put(table, root);

    struct meta_attrs attrs = {.size = 5, .generation = 3};
    struct inode *a = inode_table_lookup(table, "a", META_FILE, &attrs, 1);
    uint64_t a_ino = a->ino;
    ck_assert_uint_ne(a_ino, INODE_ROOT_ID);
    inode_put(table, a);
    struct inode *again = inode_table_lookup(table, "a", META_FILE, NULL, 0);
    ck_assert_uint_eq(again->ino, a_ino); /* stable while referenced */
    ck_assert_uint_eq(again->nlookup, 2);
    inode_put(table, again);
    ck_assert_uint_eq(inode_table_find_path(table, "a"), a_ino);

    /* Kind change: a new number, the old one stays until forgotten. */
    struct inode *dir = inode_table_lookup(table, "a", META_DIR, NULL, 0);
    ck_assert_uint_ne(dir->ino, a_ino);
    uint64_t dir_ino = dir->ino;
    inode_put(table, dir);
    struct inode *old = inode_table_get(table, a_ino);
    ck_assert_ptr_nonnull(old);
    ck_assert_int_eq(old->kind, META_FILE);
    inode_put(table, old);
    inode_table_forget(table, a_ino, 2);
    ck_assert_ptr_null(inode_table_get(table, a_ino));
    ck_assert_uint_eq(inode_table_find_path(table, "a"), dir_ino);

    /* A reference held across forget keeps the inode until put. */
    struct inode *held = inode_table_get(table, dir_ino);
    inode_table_forget(table, dir_ino, 1);
    ck_assert_ptr_nonnull(held);
    ck_assert_str_eq(held->path, "a");
    inode_put(table, held);
    ck_assert_ptr_null(inode_table_get(table, dir_ino));
    ck_assert_uint_eq(inode_table_find_path(table, "a"), 0);

    /* Forgetting the root or unknown numbers is harmless; numbers are never reused. */
    inode_table_forget(table, INODE_ROOT_ID, 100);
    inode_table_forget(table, 999999, 1);
    struct inode *b = inode_table_lookup(table, "a", META_FILE, NULL, 0);
    ck_assert_uint_gt(b->ino, dir_ino);
    inode_put(table, b);
    ck_assert_uint_eq(inode_table_count(table), 2);
    inode_table_free(table);
    inode_table_free(NULL);
}
END_TEST

/* Issue 17: with generations pinned (read-only mounts that skip OPEN), another generation of a
 * file is a new inode; the old one lives on, detached, until forgotten; the same generation
 * and directories keep their number. */
START_TEST(inode_pinned_generations)
{
    struct inode_table *table = inode_table_new();
    inode_table_pin_generations(table, true);
    ck_assert(inode_table_generations_pinned(table));
    struct meta_attrs v1 = {.size = 5, .generation = 10};
    struct meta_attrs v2 = {.size = 5, .generation = 11};
    struct inode *a = inode_table_lookup(table, "a", META_FILE, &v1, 1);
    uint64_t a_ino = a->ino;
    inode_put(table, a);
    struct inode *same = inode_table_lookup(table, "a", META_FILE, &v1, 2);
    ck_assert_uint_eq(same->ino, a_ino);
    inode_put(table, same);
    struct inode *b = inode_table_lookup(table, "a", META_FILE, &v2, 3);
    ck_assert_uint_ne(b->ino, a_ino);
    ck_assert_uint_eq(inode_table_find_path(table, "a"), b->ino);
    struct inode *old = inode_table_get(table, a_ino);
    ck_assert_ptr_nonnull(old);
    ck_assert_int_eq(old->attrs.generation, 10);
    inode_put(table, old);
    /* No attributes (a writer's lookup): the inode stays. */
    struct inode *plain = inode_table_lookup(table, "a", META_FILE, NULL, 0);
    ck_assert_uint_eq(plain->ino, b->ino);
    inode_put(table, plain);
    /* Detached by a revalidation (ESTALE): the next lookup makes a new one. */
    inode_table_detach(table, b);
    ck_assert_uint_eq(inode_table_find_path(table, "a"), 0);
    inode_put(table, b);
    inode_table_forget(table, a_ino, 2);
    ck_assert_ptr_null(inode_table_get(table, a_ino));
    inode_table_free(table);
}
END_TEST

/* Issue 20: a renamed file's inode is detached from its old path (the kernel holds it under the
 * new name until that dentry is invalidated and forgotten): a create of the old name before
 * that FORGET gets a new inode, not the renamed one, whose opens answer ESTALE. */
START_TEST(inode_detach_path_after_rename)
{
    struct inode_table *table = inode_table_new();
    struct meta_attrs v1 = {.size = 3, .generation = 10};
    struct inode *a = inode_table_lookup(table, "d/a", META_FILE, &v1, 1);
    uint64_t a_ino = a->ino;
    inode_put(table, a);
    ck_assert_uint_eq(inode_table_detach_path(table, "d/a"), a_ino);
    ck_assert_uint_eq(inode_table_find_path(table, "d/a"), 0);
    ck_assert_uint_eq(inode_table_detach_path(table, "d/a"), 0); /* nothing left there */
    struct inode *old = inode_table_get(table, a_ino);           /* the kernel still holds it */
    ck_assert_ptr_nonnull(old);
    ck_assert_str_eq(old->path, "d/a");
    inode_put(table, old);
    struct inode *fresh = inode_table_lookup(table, "d/a", META_FILE, NULL, 0);
    ck_assert_uint_ne(fresh->ino, a_ino);
    ck_assert_uint_eq(inode_table_find_path(table, "d/a"), fresh->ino);
    inode_put(table, fresh);
    /* The detached one goes at its FORGET; the new one keeps the path. */
    inode_table_forget(table, a_ino, 1);
    ck_assert_ptr_null(inode_table_get(table, a_ino));
    ck_assert_uint_ne(inode_table_find_path(table, "d/a"), 0);
    /* The root never leaves its path. */
    ck_assert_uint_eq(inode_table_detach_path(table, ""), 0);
    ck_assert_uint_eq(inode_table_find_path(table, ""), INODE_ROOT_ID);
    ck_assert_uint_eq(inode_table_detach_path(table, "nothing"), 0);
    /* A request about an inode the table does not know: NULL (logged; the reply is ESTALE). */
    ck_assert_ptr_null(inode_table_get_request(table, a_ino, "open"));
    struct inode *known = inode_table_get_request(table, INODE_ROOT_ID, "getattr");
    ck_assert_ptr_nonnull(known);
    inode_put(table, known);
    inode_table_free(table);
}
END_TEST

/* Issue 20: a directory renamed away takes its children's inodes off their old paths (the
 * kernel reaches them below the new name, a write there must not commit to the old one);
 * siblings sharing the name's prefix ("d2", "dx") stay. */
START_TEST(inode_detach_tree_after_directory_rename)
{
    struct inode_table *table = inode_table_new();
    const char *paths[] = {"d", "d/a", "d/sub", "d/sub/b", "d2", "dx/c"};
    uint64_t inos[6];
    for (int i = 0; i < 6; i++) {
        struct inode *inode =
            inode_table_lookup(table, paths[i], i == 0 || i == 2 ? META_DIR : META_FILE, NULL, 0);
        inos[i] = inode->ino;
        inode_put(table, inode);
    }
    GArray *gone = inode_table_detach_tree(table, "d");
    ck_assert_uint_eq(gone->len, 4);
    for (int i = 0; i < 4; i++) {
        bool found = false;
        for (guint k = 0; k < gone->len; k++)
            found = found || g_array_index(gone, uint64_t, k) == inos[i];
        ck_assert_msg(found, "%s not detached", paths[i]);
        ck_assert_uint_eq(inode_table_find_path(table, paths[i]), 0);
    }
    g_array_free(gone, TRUE);
    ck_assert_uint_eq(inode_table_find_path(table, "d2"), inos[4]);
    ck_assert_uint_eq(inode_table_find_path(table, "dx/c"), inos[5]);
    gone = inode_table_detach_tree(table, ""); /* never the root */
    ck_assert_uint_eq(gone->len, 0);
    g_array_free(gone, TRUE);
    ck_assert_uint_eq(inode_table_find_path(table, ""), INODE_ROOT_ID);
    inode_table_free(table);
}
END_TEST

/* Issue 11: a change made through the mount goes into the cached listing (a new snapshot;
 * the old one, which open directories may serve, is untouched), so the listing keeps
 * answering lookups, absence included. A just-made directory is known empty. */
START_TEST(dircache_note_entry_keeps_listing)
{
    struct dircache *cache = dircache_new(60, 100);
    struct meta_attrs attrs = {.size = 7, .generation = 3};
    ck_assert_int_eq(dircache_note_entry(cache, "d", "x", META_FILE, &attrs), -ENOENT);
    dircache_put_empty(cache, "d");
    struct dir_listing *empty = dircache_peek(cache, "d");
    ck_assert_ptr_nonnull(empty);
    ck_assert_uint_eq(empty->count, 0);
    ck_assert_int_eq(dircache_note_entry(cache, "d", "m", META_FILE, &attrs), 0);
    ck_assert_int_eq(dircache_note_entry(cache, "d", "b", META_DIR, NULL), 0);
    ck_assert_int_eq(dircache_note_entry(cache, "d", "z", META_FILE, &attrs), 0);
    attrs.size = 9;
    ck_assert_int_eq(dircache_note_entry(cache, "d", "m", META_FILE, &attrs), 0); /* replaced */
    struct dir_listing *now = dircache_peek(cache, "d");
    ck_assert_uint_eq(now->count, 3);
    ck_assert_str_eq(now->entries[0].name, "b");
    ck_assert_int_eq(now->entries[0].kind, META_DIR);
    ck_assert_str_eq(now->entries[1].name, "m");
    ck_assert_uint_eq(now->entries[1].attrs.size, 9);
    ck_assert_str_eq(now->entries[2].name, "z");
    ck_assert_ptr_null(dir_listing_find(now, "a"));
    ck_assert_ptr_nonnull(dir_listing_find(now, "z"));
    ck_assert_uint_eq(empty->count, 0); /* the old snapshot did not change */
    dir_listing_unref(now);
    dir_listing_unref(empty);
    dircache_invalidate(cache, "d");
    ck_assert_int_eq(dircache_note_entry(cache, "d", "q", META_FILE, &attrs), -ENOENT);
    dircache_free(cache);
}
END_TEST

/* A double release is a bug: test builds abort at the broken invariant (invariant.h) rather
 * than clamping the count, which hid it. */
START_TEST(inode_double_put_aborts)
{
    struct inode_table *table = inode_table_new();
    struct inode *a = inode_table_lookup(table, "a", META_FILE, NULL, 0);
    inode_put(table, a);
    struct inode *held = inode_table_get(table, a->ino);
    inode_put(table, held);
    inode_put(table, held); /* aborts */
}
END_TEST

TEST_SUITE(core_caches_suite)
{
    Suite *s = suite_create("core_caches");
    TCase *tc = tcase_create("core");
    tcase_add_test_raise_signal(tc, inode_double_put_aborts, SIGABRT);
    tcase_add_test(tc, metacache_ttls_and_dirs_win);
    tcase_add_test(tc, listing_dedup_dir_wins);
    tcase_add_test(tc, dircache_single_flight);
    tcase_add_test(tc, dircache_note_entry_keeps_listing);
    tcase_add_test(tc, inode_lookup_forget);
    tcase_add_test(tc, inode_pinned_generations);
    tcase_add_test(tc, inode_detach_path_after_rename);
    tcase_add_test(tc, inode_detach_tree_after_directory_rename);
    suite_add_tcase(s, tc);
    return s;
}
