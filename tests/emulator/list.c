/* objects.list over a bucket's sorted index (GTree, strcmp = UTF-8 byte order) at
 * O(log N + page) per page: one seek to where the page starts, then node-to-node steps. With a
 * delimiter, a name that rolls up into a prefix emits that prefix once and seeks straight past
 * every name under it (lower bound of the prefix's successor), so 10^5 names under one prefix
 * cost one seek. The page token names the last thing emitted and how to resume after it. */
#include "store-internal.h"

#include <errno.h>
#include <string.h>

#define MAX_PAGE 1000
/* With matchGlob, names that do not match are stepped over one by one; after this many in one
 * page the page ends (possibly empty) with a token to resume after the last name looked at, as
 * Cloud Storage returns short pages when it filters. */
#define GLOB_SCAN_MAX 100000

/* The smallest string greater than every string starting with prefix, or NULL when none
 * exists (prefix is all 0xff bytes). */
static char *prefix_successor(const char *prefix)
{
    char *succ = g_strdup(prefix);
    size_t len = strlen(succ);
    while (len > 0 && (unsigned char)succ[len - 1] == 0xff)
        len--;
    if (len == 0) {
        g_free(succ);
        return NULL;
    }
    succ[len - 1] = (char)((unsigned char)succ[len - 1] + 1);
    succ[len] = '\0';
    return succ;
}

static const char *max_key(const char *a, const char *b)
{
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    return strcmp(a, b) >= 0 ? a : b;
}

struct list_walk {
    struct emu_store *store;
    GTree *tree;
    const char *start; /* max(prefix, start_offset) */
    uint64_t steps;
};

static GTreeNode *seek_at_least(struct list_walk *walk, const char *key)
{
    walk->steps++;
    return g_tree_lower_bound(walk->tree, max_key(key, walk->start));
}

/* First node after every name starting with prefix. */
static GTreeNode *seek_past_prefix(struct list_walk *walk, const char *prefix)
{
    char *succ = prefix_successor(prefix);
    if (succ == NULL)
        return NULL;
    GTreeNode *node = seek_at_least(walk, succ);
    g_free(succ);
    return node;
}

static GTreeNode *seek_after(struct list_walk *walk, const char *name)
{
    if (strcmp(name, walk->start) < 0)
        return seek_at_least(walk, walk->start);
    walk->steps++;
    return g_tree_upper_bound(walk->tree, name);
}

int emu_store_list(struct emu_store *store, const char *bucket, const struct emu_list_request *req,
                   struct emu_list_result *out)
{
    const char *prefix = req->prefix ? req->prefix : "";
    const char *delimiter = req->delimiter && req->delimiter[0] ? req->delimiter : NULL;
    unsigned max =
        req->max_results == 0 || req->max_results > MAX_PAGE ? MAX_PAGE : req->max_results;
    size_t prefix_len = strlen(prefix);
    size_t delimiter_len = delimiter ? strlen(delimiter) : 0;

    memset(out, 0, sizeof(*out)); /* safe to clear even after an error */
    enum emu_token_kind token_kind = EMU_TOKEN_ITEM;
    char *token_name = NULL;
    if (req->page_token != NULL && req->page_token[0] != '\0' &&
        emu_page_token_decode(req->page_token, &token_kind, &token_name) < 0)
        return -EINVAL;
    if (bucket == NULL) {
        g_free(token_name);
        return -EINVAL;
    }

    out->items = g_ptr_array_new_with_free_func((GDestroyNotify)emu_object_unref);
    out->prefixes = g_ptr_array_new_with_free_func(g_free);

    g_rw_lock_reader_lock(&store->lock);
    struct emu_bucket *b = emu_store_find_bucket(store, bucket, false);
    if (b == NULL) {
        /* Cloud Storage answers 404 for an unknown bucket; writes create buckets, lists do not. */
        g_rw_lock_reader_unlock(&store->lock);
        g_free(token_name);
        emu_list_result_clear(out);
        return -ENOENT;
    }

    struct list_walk walk = {
        .store = store,
        .tree = b->objects,
        .start = max_key(prefix, req->start_offset),
    };
    unsigned emitted = 0;
    enum emu_token_kind last_kind = EMU_TOKEN_ITEM;
    const char *last_name = NULL; /* points into an emitted item or prefix */
    bool more = false;
    unsigned skipped = 0;
    GTreeNode *node;

    if (token_name == NULL) {
        node = seek_at_least(&walk, walk.start);
    } else if (token_kind == EMU_TOKEN_ITEM) {
        node = seek_after(&walk, token_name);
    } else {
        if (token_kind == EMU_TOKEN_TRAILING) {
            /* The previous page ended on the item "Q"; the prefix "Q" comes first here. */
            g_ptr_array_add(out->prefixes, g_strdup(token_name));
            last_kind = EMU_TOKEN_PREFIX;
            last_name = g_ptr_array_index(out->prefixes, out->prefixes->len - 1);
            emitted++;
        }
        node = seek_past_prefix(&walk, token_name);
    }

    while (node != NULL) {
        const char *key = g_tree_node_key(node);
        walk.steps++;
        if (strncmp(key, prefix, prefix_len) != 0)
            break; /* sorted: past every name with this prefix */
        if (req->end_offset != NULL && strcmp(key, req->end_offset) >= 0)
            break;
        /* Before the page-full check: a full page says "more" only when a match follows. */
        if (req->match_glob != NULL && !emu_glob_match(req->match_glob, key)) {
            if (++skipped == GLOB_SCAN_MAX) {
                more = true;
                last_kind = EMU_TOKEN_ITEM;
                last_name = key;
                break;
            }
            node = g_tree_node_next(node);
            continue;
        }
        if (emitted == max) {
            more = true;
            break;
        }
        const char *cut = delimiter ? strstr(key + prefix_len, delimiter) : NULL;
        if (cut == NULL) {
            struct emu_object *obj = g_tree_node_value(node);
            g_ptr_array_add(out->items, emu_object_ref(obj));
            last_kind = EMU_TOKEN_ITEM;
            last_name = obj->name;
            emitted++;
            node = g_tree_node_next(node);
            continue;
        }
        size_t rolled_len = (size_t)(cut - key) + delimiter_len;
        char *rolled = g_strndup(key, rolled_len);
        if (req->include_trailing_delimiter && key[rolled_len] == '\0') {
            /* The object "Q" itself (Q ends with the delimiter) is an item, then "Q" a prefix.
             * It is the first name under Q, so this is the one place it can show up. */
            struct emu_object *obj = g_tree_node_value(node);
            g_ptr_array_add(out->items, emu_object_ref(obj));
            last_kind = EMU_TOKEN_TRAILING;
            last_name = obj->name;
            emitted++;
            if (emitted == max) {
                more = true;
                g_free(rolled);
                break;
            }
        }
        g_ptr_array_add(out->prefixes, rolled);
        last_kind = EMU_TOKEN_PREFIX;
        last_name = rolled;
        emitted++;
        node = seek_past_prefix(&walk, rolled);
    }
    if (more && last_name != NULL)
        out->next_page_token = emu_page_token_encode(last_kind, last_name);
    g_rw_lock_reader_unlock(&store->lock);
    __atomic_fetch_add(&store->list_steps, walk.steps, __ATOMIC_RELAXED);
    g_free(token_name);
    return 0;
}

void emu_list_result_clear(struct emu_list_result *res)
{
    if (res == NULL)
        return;
    if (res->items != NULL)
        g_ptr_array_unref(res->items);
    if (res->prefixes != NULL)
        g_ptr_array_unref(res->prefixes);
    g_free(res->next_page_token);
    memset(res, 0, sizeof(*res));
}

uint64_t emu_store_debug_list_steps(struct emu_store *store)
{
    return __atomic_load_n(&store->list_steps, __ATOMIC_RELAXED);
}
