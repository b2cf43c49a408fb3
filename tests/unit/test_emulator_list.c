/* Emulator core: objects.list against a brute-force model (prefix, delimiter, offsets,
 * includeTrailingDelimiter, every page size), bad page tokens, and the cost of a page staying
 * O(log N + page) wherever the page is (counted tree steps, not time). */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "store-internal.h"

static void put_name(struct emu_store *store, const char *bucket, const char *name)
{
    GBytes *bytes = g_bytes_new(name, strlen(name));
    int rc =
        emu_store_put_object(store, bucket, name, emu_content_new_bytes(bytes), NULL, NULL, NULL);
    ck_assert_msg(rc == 0, "put %s: %d", name, rc);
}

/* One entry of the merged listing sequence. */
struct entry {
    bool is_prefix;
    char *text;
};

static void entry_free(gpointer data)
{
    struct entry *e = data;
    g_free(e->text);
    g_free(e);
}

static void add_entry(GPtrArray *seq, bool is_prefix, const char *text)
{
    struct entry *e = g_new0(struct entry, 1);
    e->is_prefix = is_prefix;
    e->text = g_strdup(text);
    g_ptr_array_add(seq, e);
}

static gint compare_strptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The model: scan every name in sorted order, no skipping, no tree. */
static GPtrArray *model_list(const char *const *names, size_t count,
                             const struct emu_list_request *req)
{
    GPtrArray *sorted = g_ptr_array_new();
    for (size_t i = 0; i < count; i++)
        g_ptr_array_add(sorted, (gpointer)names[i]);
    g_ptr_array_sort(sorted, compare_strptr);
    GPtrArray *seq = g_ptr_array_new_with_free_func(entry_free);
    const char *prefix = req->prefix ? req->prefix : "";
    const char *last_prefix = NULL;
    for (guint i = 0; i < sorted->len; i++) {
        const char *name = g_ptr_array_index(sorted, i);
        if (i > 0 && strcmp(name, g_ptr_array_index(sorted, i - 1)) == 0)
            continue;
        if (!g_str_has_prefix(name, prefix))
            continue;
        if (req->start_offset && strcmp(name, req->start_offset) < 0)
            continue;
        if (req->end_offset && strcmp(name, req->end_offset) >= 0)
            continue;
        if (req->match_glob && !emu_glob_match(req->match_glob, name))
            continue;
        const char *cut = req->delimiter ? strstr(name + strlen(prefix), req->delimiter) : NULL;
        if (cut == NULL) {
            add_entry(seq, false, name);
            continue;
        }
        char *rolled = g_strndup(name, (size_t)(cut - name) + strlen(req->delimiter));
        if (req->include_trailing_delimiter && strcmp(rolled, name) == 0)
            add_entry(seq, false, name);
        if (last_prefix == NULL || strcmp(last_prefix, rolled) != 0) {
            add_entry(seq, true, rolled);
            last_prefix = ((struct entry *)g_ptr_array_index(seq, seq->len - 1))->text;
        }
        g_free(rolled);
    }
    g_ptr_array_unref(sorted);
    return seq;
}

/* Pages through the store with req (page size max) and checks the result against the model. */
static void check_paged(struct emu_store *store, const char *const *names, size_t count,
                        struct emu_list_request req, unsigned max)
{
    GPtrArray *expect = model_list(names, count, &req);
    GPtrArray *items = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *prefixes = g_ptr_array_new_with_free_func(g_free);
    req.max_results = max;
    char *token = NULL;
    unsigned pages = 0;
    do {
        struct emu_list_result res;
        req.page_token = token;
        ck_assert_int_eq(emu_store_list(store, "b", &req, &res), 0);
        pages++;
        ck_assert_uint_le(res.items->len + res.prefixes->len, max);
        for (guint i = 0; i < res.items->len; i++) {
            struct emu_object *obj = g_ptr_array_index(res.items, i);
            g_ptr_array_add(items, g_strdup(obj->name));
        }
        for (guint i = 0; i < res.prefixes->len; i++)
            g_ptr_array_add(prefixes, g_strdup(g_ptr_array_index(res.prefixes, i)));
        g_free(token);
        token = g_strdup(res.next_page_token);
        if (token != NULL) /* a page with a next token is full */
            ck_assert_uint_eq(res.items->len + res.prefixes->len, max);
        emu_list_result_clear(&res);
        ck_assert_uint_le(pages, count + 2);
    } while (token != NULL);

    guint want_items = 0, want_prefixes = 0;
    for (guint i = 0; i < expect->len; i++) {
        struct entry *e = g_ptr_array_index(expect, i);
        if (e->is_prefix) {
            ck_assert_uint_lt(want_prefixes, prefixes->len);
            ck_assert_str_eq(g_ptr_array_index(prefixes, want_prefixes), e->text);
            want_prefixes++;
        } else {
            ck_assert_uint_lt(want_items, items->len);
            ck_assert_str_eq(g_ptr_array_index(items, want_items), e->text);
            want_items++;
        }
    }
    ck_assert_uint_eq(items->len, want_items);
    ck_assert_uint_eq(prefixes->len, want_prefixes);
    unsigned want_pages = expect->len == 0 ? 1 : (expect->len + max - 1) / max;
    ck_assert_uint_eq(pages, want_pages);
    g_ptr_array_unref(expect);
    g_ptr_array_unref(items);
    g_ptr_array_unref(prefixes);
}

static const char *const tree_names[] = {
    "a",
    "a/",
    "a/1",
    "a/2",
    "a/b/",
    "a/b/c",
    "a/b/d",
    "a/c/x",
    "a/c/y",
    "a0",
    "a0/z",
    "b",
    "b/",
    "b//",
    "b//x",
    "c d/e f",
    "c%d/#?+",
    "/lead",
    "//double",
    "trail/",
    "x.y/z",
    "\xc3\xa9t\xc3\xa9/1",
    "\xc3\xa9t\xc3\xa9/2",
    "zz",
    "z/",
    "z/z/",
    "z/z/z/",
    "z/z/z/z",
    "dir/0001",
    "dir/0002",
    "dir/0003",
    "dir/sub/0",
    "dir/sub/1",
    "dir/~tilde",
    "dir-sibling",
    "dir0",
};

START_TEST(list_matches_model)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    size_t count = G_N_ELEMENTS(tree_names);
    for (size_t i = 0; i < count; i++)
        put_name(store, "b", tree_names[i]);

    const char *prefixes[] = {NULL, "a", "a/", "a/b/", "dir/", "z/", "b/", "nothing/", "\xc3\xa9"};
    const char *delimiters[] = {NULL, "/", "//", "z/", "-"};
    const char *starts[] = {NULL, "a/1", "a/b/", "dir/0002", "c"};
    const char *ends[] = {NULL, "a/c", "dir/sub/1", "z"};
    unsigned sizes[] = {1, 2, 3, 5, 1000};
    for (size_t p = 0; p < G_N_ELEMENTS(prefixes); p++)
        for (size_t d = 0; d < G_N_ELEMENTS(delimiters); d++)
            for (size_t s = 0; s < G_N_ELEMENTS(starts); s++)
                for (size_t e = 0; e < G_N_ELEMENTS(ends); e++)
                    for (int trailing = 0; trailing < 2; trailing++)
                        for (size_t m = 0; m < G_N_ELEMENTS(sizes); m++) {
                            struct emu_list_request req = {
                                .prefix = prefixes[p],
                                .delimiter = delimiters[d],
                                .start_offset = starts[s],
                                .end_offset = ends[e],
                                .include_trailing_delimiter = trailing,
                            };
                            check_paged(store, tree_names, count, req, sizes[m]);
                        }
    emu_store_close(store);
}
END_TEST

/* matchGlob: the glob filters names first, the delimiter rolls up what is left. */
START_TEST(list_glob_matches_model)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    size_t count = G_N_ELEMENTS(tree_names);
    for (size_t i = 0; i < count; i++)
        put_name(store, "b", tree_names[i]);
    const char *globs[] = {"*",      "**",        "a/*",     "a/**", "**/z", "dir/{0001,sub/*}",
                           "?",      "[a-c]*/**", "[!a-d]*", "**/",  "*/*/", "\xc3\xa9t\xc3\xa9/?",
                           "nothing"};
    const char *prefixes[] = {NULL, "a/", "dir/", "z/"};
    const char *delimiters[] = {NULL, "/", "z/"};
    unsigned sizes[] = {1, 2, 3, 1000};
    for (size_t g = 0; g < G_N_ELEMENTS(globs); g++)
        for (size_t p = 0; p < G_N_ELEMENTS(prefixes); p++)
            for (size_t d = 0; d < G_N_ELEMENTS(delimiters); d++)
                for (int trailing = 0; trailing < 2; trailing++)
                    for (size_t m = 0; m < G_N_ELEMENTS(sizes); m++) {
                        struct emu_list_request req = {
                            .prefix = prefixes[p],
                            .delimiter = delimiters[d],
                            .include_trailing_delimiter = trailing,
                            .match_glob = globs[g],
                        };
                        check_paged(store, tree_names, count, req, sizes[m]);
                    }
    emu_store_close(store);
}
END_TEST

START_TEST(glob_syntax)
{
    static const struct {
        const char *glob, *name;
        bool match;
    } cases[] = {
        {"*.txt", "a.txt", true},
        {"*.txt", "d/a.txt", false},
        {"**.txt", "d/e/a.txt", true},
        {"**", "", true},
        {"a/**/b", "a/b", true},
        {"a/**/b", "a/x/b", true},
        {"a/**/b", "a/x/y/b", true},
        {"a/**/b", "a/xb", false},
        {"**/x", "x", true},
        {"**/x", "d/e/x", true},
        {"**/x", "dx", false},
        {"a**b", "a/c/b", true},
        {"?", "\xc3\xa9", true},
        {"?", "/", false},
        {"??", "\xc3\xa9", false},
        {"[a-c]x", "bx", true},
        {"[a-c]x", "dx", false},
        {"[!a-c]x", "dx", true},
        {"[^a-c]x", "bx", false},
        {"[!a-c]x", "/x", false},
        {"[]]", "]", true},
        {"[\xc3\xa9-\xc3\xab]", "\xc3\xaa", true},
        {"{a,b/c}*", "a1", true},
        {"{a,b/c}*", "b/c2", true},
        {"{a,b/c}*", "b/d", false},
        {"{a,{b,c}}x", "cx", true},
        {"x{,y}", "x", true},
        {"\\*", "*", true},
        {"\\*", "a", false},
        {"a\\[b", "a[b", true},
        {"data/train/*.tar", "data/train/shard-000.tar", true},
        {"data/train/*.tar", "data/train/x/shard.tar", false},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        ck_assert_int_eq(emu_glob_valid(cases[i].glob), 0);
        ck_assert_msg(emu_glob_match(cases[i].glob, cases[i].name) == cases[i].match,
                      "glob %s name %s: want %d", cases[i].glob, cases[i].name, cases[i].match);
    }
    const char *invalid[] = {"[abc", "{a,b", "a\\", "{[}]", "\xff"};
    for (size_t i = 0; i < G_N_ELEMENTS(invalid); i++)
        ck_assert_int_eq(emu_glob_valid(invalid[i]), -EINVAL);
    /* 64 alternatives at most. */
    ck_assert_int_eq(emu_glob_valid("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"), 0);
    ck_assert_int_eq(emu_glob_valid("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"), -EINVAL);
    /* Many stars against a long name: exact (the step budget runs out, the memo pass answers). */
    char name[1025];
    memset(name, 'a', 1024);
    name[1024] = '\0';
    ck_assert(!emu_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*b", name));
    ck_assert(emu_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*a", name));
    ck_assert(!emu_glob_match("**a**a**a**a**a**a**a**a**b", name));
}
END_TEST

START_TEST(list_prefix_once_across_pages)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    put_name(store, "b", "d/");
    put_name(store, "b", "d/x");
    put_name(store, "b", "d/y");
    put_name(store, "b", "e");

    /* Page size 1 with includeTrailingDelimiter: item "d/", prefix "d/", item "e". */
    struct emu_list_request req = {
        .delimiter = "/", .max_results = 1, .include_trailing_delimiter = true};
    struct emu_list_result res;
    ck_assert_int_eq(emu_store_list(store, "b", &req, &res), 0);
    ck_assert_uint_eq(res.items->len, 1);
    ck_assert_uint_eq(res.prefixes->len, 0);
    ck_assert_str_eq(((struct emu_object *)g_ptr_array_index(res.items, 0))->name, "d/");
    ck_assert_ptr_nonnull(res.next_page_token);
    char *token = g_strdup(res.next_page_token);
    emu_list_result_clear(&res);

    req.page_token = token;
    ck_assert_int_eq(emu_store_list(store, "b", &req, &res), 0);
    ck_assert_uint_eq(res.items->len, 0);
    ck_assert_uint_eq(res.prefixes->len, 1);
    ck_assert_str_eq(g_ptr_array_index(res.prefixes, 0), "d/");
    g_free(token);
    token = g_strdup(res.next_page_token);
    emu_list_result_clear(&res);

    req.page_token = token;
    ck_assert_int_eq(emu_store_list(store, "b", &req, &res), 0);
    ck_assert_uint_eq(res.items->len, 1);
    ck_assert_str_eq(((struct emu_object *)g_ptr_array_index(res.items, 0))->name, "e");
    ck_assert_ptr_null(res.next_page_token);
    emu_list_result_clear(&res);
    g_free(token);

    /* The last page is exactly full: no token for an empty page after it. */
    struct emu_list_request two = {.delimiter = "/", .max_results = 2};
    ck_assert_int_eq(emu_store_list(store, "b", &two, &res), 0);
    ck_assert_uint_eq(res.items->len + res.prefixes->len, 2);
    ck_assert_ptr_null(res.next_page_token);
    emu_list_result_clear(&res);
    emu_store_close(store);
}
END_TEST

START_TEST(list_bad_tokens_and_empty_buckets)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    put_name(store, "b", "one");
    struct emu_list_result res;
    const char *bad[] = {"not base64!", "QQ", "WmFh" /* "Zaa": unknown kind */, "SQ==" /* "I" */,
                         "%%%%"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        struct emu_list_request req = {.page_token = bad[i]};
        ck_assert_int_eq(emu_store_list(store, "b", &req, &res), -EINVAL);
    }
    char *huge = g_strnfill(20000, 'A');
    struct emu_list_request req = {.page_token = huge};
    ck_assert_int_eq(emu_store_list(store, "b", &req, &res), -EINVAL);
    g_free(huge);

    /* An unknown bucket is 404 and listing does not create it; an empty one lists empty. */
    struct emu_list_request plain = {0};
    ck_assert_int_eq(emu_store_list(store, "fresh", &plain, &res), -ENOENT);
    ck_assert_ptr_null(res.items);
    emu_list_result_clear(&res);
    struct emu_bucket_info info;
    ck_assert_int_eq(emu_store_bucket_get(store, "fresh", &info), -ENOENT);
    ck_assert_int_eq(emu_store_bucket_insert(store, "fresh"), 0);
    ck_assert_int_eq(emu_store_list(store, "fresh", &plain, &res), 0);
    ck_assert_uint_eq(res.items->len, 0);
    ck_assert_ptr_null(res.next_page_token);
    emu_list_result_clear(&res);

    /* A token from a page resumes after its item. */
    put_name(store, "b", "two");
    struct emu_list_request first = {.max_results = 1};
    ck_assert_int_eq(emu_store_list(store, "b", &first, &res), 0);
    ck_assert_ptr_nonnull(res.next_page_token);
    char *token = g_strdup(res.next_page_token);
    emu_list_result_clear(&res);
    first.page_token = token;
    ck_assert_int_eq(emu_store_list(store, "b", &first, &res), 0);
    ck_assert_uint_eq(res.items->len, 1);
    ck_assert_str_eq(((struct emu_object *)g_ptr_array_index(res.items, 0))->name, "two");
    emu_list_result_clear(&res);
    g_free(token);
    emu_store_close(store);
}
END_TEST

/* Tree steps of one page: the work counter's growth across one emu_store_list call. */
static uint64_t page_steps(struct emu_store *store, struct emu_list_request *req,
                           struct emu_list_result *res)
{
    uint64_t before = emu_store_debug_list_steps(store);
    ck_assert_int_eq(emu_store_list(store, "big", req, res), 0);
    return emu_store_debug_list_steps(store) - before;
}

START_TEST(list_page_cost_independent_of_position)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    const uint64_t count = 200000;
    ck_assert_int_eq(emu_store_populate(store, "big", "flat/", count, 16, 1), 0);
    ck_assert_int_eq(emu_store_populate(store, "big", "deep/child/", 100000, 0, 1), 0);
    ck_assert_int_eq(emu_store_populate(store, "big", "deep/other/", 10, 0, 1), 0);

    /* Every page of the flat listing costs one seek plus one step per entry (+1 lookahead). */
    struct emu_list_request req = {.prefix = "flat/", .max_results = 1000};
    char *token = NULL;
    uint64_t seen = 0, pages = 0, max_steps = 0, first_steps = 0, middle_steps = 0, last_steps = 0;
    do {
        struct emu_list_result res;
        req.page_token = token;
        uint64_t steps = page_steps(store, &req, &res);
        if (pages == 0)
            first_steps = steps;
        if (pages == 150)
            middle_steps = steps;
        last_steps = steps;
        max_steps = steps > max_steps ? steps : max_steps;
        seen += res.items->len;
        pages++;
        g_free(token);
        token = g_strdup(res.next_page_token);
        emu_list_result_clear(&res);
    } while (token != NULL);
    ck_assert_uint_eq(seen, count);
    ck_assert_uint_eq(pages, count / 1000);
    ck_assert_uint_le(max_steps, 1000 + 3);
    /* Page 151 costs exactly what page 1 does; the last one skips the look-ahead step. */
    ck_assert_uint_eq(first_steps, middle_steps);
    ck_assert_uint_le(last_steps, first_steps);

    /* A page starting deep inside the bucket costs the same as the first one. */
    struct emu_list_request mid = {
        .prefix = "flat/", .start_offset = "flat/00199000", .max_results = 1000};
    struct emu_list_result res;
    ck_assert_uint_le(page_steps(store, &mid, &res), 1000 + 3);
    ck_assert_uint_eq(res.items->len, 1000);
    ck_assert_str_eq(((struct emu_object *)g_ptr_array_index(res.items, 0))->name, "flat/00199000");
    emu_list_result_clear(&res);

    /* 100,000 names under one prefix cost one seek, not 100,000 steps. */
    struct emu_list_request dirs = {.delimiter = "/", .max_results = 1000};
    uint64_t steps = page_steps(store, &dirs, &res);
    ck_assert_uint_eq(res.prefixes->len, 2); /* "deep/", "flat/" */
    ck_assert_uint_le(steps, 10);
    emu_list_result_clear(&res);
    struct emu_list_request deep = {.prefix = "deep/", .delimiter = "/", .max_results = 1000};
    steps = page_steps(store, &deep, &res);
    ck_assert_uint_eq(res.prefixes->len, 2);
    ck_assert_str_eq(g_ptr_array_index(res.prefixes, 0), "deep/child/");
    ck_assert_str_eq(g_ptr_array_index(res.prefixes, 1), "deep/other/");
    ck_assert_uint_le(steps, 10);
    emu_list_result_clear(&res);
    emu_store_close(store);
}
END_TEST

TEST_SUITE(emulator_list_suite)
{
    Suite *s = suite_create("emulator-list");
    TCase *tc = tcase_create("list");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, list_matches_model);
    tcase_add_test(tc, list_prefix_once_across_pages);
    tcase_add_test(tc, list_glob_matches_model);
    tcase_add_test(tc, glob_syntax);
    tcase_add_test(tc, list_bad_tokens_and_empty_buckets);
    tcase_add_test(tc, list_page_cost_independent_of_position);
    suite_add_tcase(s, tc);
    return s;
}
