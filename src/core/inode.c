/* Inode numbers and lookup counts (see include/fluxfs/inode.h). */
#include "fluxfs/inode.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/invariant.h"
#include "fluxfs/log.h"

struct inode_table {
    GMutex lock;
    GHashTable *by_ino;            /* uint64_t * -> struct inode *; owns the inodes; lock */
    GHashTable *by_path;           /* char *path (the inode's own) -> struct inode *; lock */
    uint64_t next_ino;             /* lock */
    struct inode *root;            /* immutable */
    bool pin_generations;          /* set before the session starts */
    uint64_t forgotten_with_pages; /* lock: inodes freed while the kernel may have held their
                                    * pages (kernel_cache_generation set): those pages went
                                    * with the inode (the kernel reclaimed it) */
    inode_observer_fn observer;    /* set before the session starts */
    void *observer_user;
};

static void observe(struct inode_table *table, enum inode_event event, const struct inode *inode)
{
    if (table->observer && inode != table->root)
        table->observer(table->observer_user, event, inode);
}

void inode_table_set_observer(struct inode_table *table, inode_observer_fn fn, void *user)
{
    g_mutex_lock(&table->lock);
    table->observer = fn;
    table->observer_user = user;
    g_mutex_unlock(&table->lock);
}

static struct inode *inode_new(uint64_t ino, const char *path, enum meta_kind kind)
{
    struct inode *inode = g_new0(struct inode, 1);
    inode->ino = ino;
    inode->path = g_strdup(path);
    inode->kind = kind;
    inode->kernel_cache_generation = -1;
    g_mutex_init(&inode->attr_lock);
    return inode;
}

static void inode_free(struct inode *inode)
{
    if (!inode)
        return;
    meta_attrs_clear(&inode->attrs);
    g_mutex_clear(&inode->attr_lock);
    g_free(inode->path);
    g_free(inode);
}

struct inode_table *inode_table_new(void)
{
    struct inode_table *table = g_new0(struct inode_table, 1);
    g_mutex_init(&table->lock);
    table->by_ino =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, (GDestroyNotify)inode_free);
    table->by_path = g_hash_table_new(g_str_hash, g_str_equal);
    table->next_ino = INODE_ROOT_ID + 1;
    table->root = inode_new(INODE_ROOT_ID, "", META_DIR);
    table->root->nlookup = 1; /* the kernel never forgets the root */
    g_hash_table_insert(table->by_ino, &table->root->ino, table->root);
    g_hash_table_insert(table->by_path, table->root->path, table->root);
    return table;
}

void inode_table_free(struct inode_table *table)
{
    if (!table)
        return;
    g_hash_table_destroy(table->by_path);
    g_hash_table_destroy(table->by_ino);
    g_mutex_clear(&table->lock);
    g_free(table);
}

/* Frees the inode if nothing refers to it any more. Table lock held. */
static void maybe_free_locked(struct inode_table *table, struct inode *inode)
{
    if (inode->nlookup > 0 || inode->refs > 0 || inode == table->root)
        return;
    if (!inode->detached)
        g_hash_table_remove(table->by_path, inode->path);
    /* Nobody else refers to it (nlookup and refs are 0): its attr_lock fields are ours. */
    if (inode->kernel_cache_generation > 0)
        table->forgotten_with_pages++;
    observe(table, INODE_EVENT_GONE, inode);
    g_hash_table_remove(table->by_ino, &inode->ino);
}

struct inode *inode_table_get(struct inode_table *table, uint64_t ino)
{
    g_mutex_lock(&table->lock);
    struct inode *inode = g_hash_table_lookup(table->by_ino, &ino);
    if (inode)
        inode->refs++;
    g_mutex_unlock(&table->lock);
    return inode;
}

struct inode *inode_table_get_request(struct inode_table *table, uint64_t ino, const char *op)
{
    struct inode *inode = inode_table_get(table, ino);
    if (!inode)
        flog_warn("core",
                  "%s of inode %" PRIu64 ": no such inode here (the kernel names only "
                  "inodes it was given and has not forgotten); answering ESTALE",
                  op, ino);
    return inode;
}

void inode_put(struct inode_table *table, struct inode *inode)
{
    if (!inode)
        return;
    g_mutex_lock(&table->lock);
    if (fluxfs_invariant(inode->refs > 0, "inode_put without a reference (a double release)"))
        inode->refs--;
    maybe_free_locked(table, inode);
    g_mutex_unlock(&table->lock);
}

struct inode *inode_table_lookup(struct inode_table *table, const char *path, enum meta_kind kind,
                                 const struct meta_attrs *attrs, int64_t fetched_us)
{
    g_mutex_lock(&table->lock);
    struct inode *inode = g_hash_table_lookup(table->by_path, path);
    if (inode && inode->kind != kind && inode != table->root) {
        /* The name changed kind behind the mount: the old inode keeps its number until the
         * kernel forgets it, the path gets a new one. */
        g_hash_table_remove(table->by_path, inode->path);
        inode->detached = true;
        observe(table, INODE_EVENT_DETACH, inode);
        maybe_free_locked(table, inode);
        inode = NULL;
    } else if (inode && table->pin_generations && kind == META_FILE && attrs &&
               attrs->generation != 0) {
        g_mutex_lock(&inode->attr_lock);
        int64_t pinned = inode->attrs.generation;
        g_mutex_unlock(&inode->attr_lock);
        if (pinned != 0 && pinned != attrs->generation) {
            /* Another version: a new inode; the old one serves its opens until forgotten. */
            g_hash_table_remove(table->by_path, inode->path);
            inode->detached = true;
            observe(table, INODE_EVENT_DETACH, inode);
            maybe_free_locked(table, inode);
            inode = NULL;
        }
    }
    if (!inode) {
        inode = inode_new(table->next_ino++, path, kind);
        g_hash_table_insert(table->by_ino, &inode->ino, inode);
        g_hash_table_insert(table->by_path, inode->path, inode);
        observe(table, INODE_EVENT_NEW, inode);
    }
    inode->nlookup++;
    inode->refs++;
    g_mutex_unlock(&table->lock);
    if (attrs)
        inode_set_attrs(inode, attrs, fetched_us);
    return inode;
}

void inode_table_pin_generations(struct inode_table *table, bool pin)
{
    table->pin_generations = pin;
}

bool inode_table_generations_pinned(struct inode_table *table)
{
    return table->pin_generations;
}

void inode_table_detach(struct inode_table *table, struct inode *inode)
{
    g_mutex_lock(&table->lock);
    if (!inode->detached && inode != table->root) {
        g_hash_table_remove(table->by_path, inode->path);
        inode->detached = true;
        observe(table, INODE_EVENT_DETACH, inode);
    }
    g_mutex_unlock(&table->lock);
}

void inode_table_forget(struct inode_table *table, uint64_t ino, uint64_t count)
{
    g_mutex_lock(&table->lock);
    struct inode *inode = g_hash_table_lookup(table->by_ino, &ino);
    if (inode && inode != table->root) {
        /* The kernel forgets only what it was given: more means a reply that gave an entry
         * without counting it. */
        if (fluxfs_invariant(count <= inode->nlookup, "FORGET of more lookups than counted"))
            inode->nlookup -= count;
        else
            inode->nlookup = 0;
        maybe_free_locked(table, inode);
    }
    g_mutex_unlock(&table->lock);
}

uint64_t inode_table_detach_path(struct inode_table *table, const char *path)
{
    g_mutex_lock(&table->lock);
    struct inode *inode = g_hash_table_lookup(table->by_path, path);
    uint64_t ino = 0;
    if (inode && inode != table->root) {
        ino = inode->ino;
        g_hash_table_remove(table->by_path, inode->path);
        inode->detached = true;
        observe(table, INODE_EVENT_DETACH, inode);
        maybe_free_locked(table, inode);
    }
    g_mutex_unlock(&table->lock);
    return ino;
}

GArray *inode_table_detach_tree(struct inode_table *table, const char *path)
{
    GArray *inos = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    size_t len = strlen(path);
    if (len == 0)
        return inos; /* never the root */
    g_mutex_lock(&table->lock);
    GPtrArray *found = g_ptr_array_new();
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, table->by_path);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const char *candidate = key;
        if (value != table->root && strncmp(candidate, path, len) == 0 &&
            (candidate[len] == '\0' || candidate[len] == '/'))
            g_ptr_array_add(found, value);
    }
    for (guint i = 0; i < found->len; i++) {
        struct inode *inode = g_ptr_array_index(found, i);
        g_array_append_val(inos, inode->ino);
        g_hash_table_remove(table->by_path, inode->path);
        inode->detached = true;
        observe(table, INODE_EVENT_DETACH, inode);
        maybe_free_locked(table, inode);
    }
    g_ptr_array_free(found, TRUE);
    g_mutex_unlock(&table->lock);
    return inos;
}

uint64_t inode_table_find_path(struct inode_table *table, const char *path)
{
    g_mutex_lock(&table->lock);
    struct inode *inode = g_hash_table_lookup(table->by_path, path);
    uint64_t ino = inode ? inode->ino : 0;
    g_mutex_unlock(&table->lock);
    return ino;
}

uint64_t inode_table_forgotten_with_pages(struct inode_table *table)
{
    g_mutex_lock(&table->lock);
    uint64_t n = table->forgotten_with_pages;
    g_mutex_unlock(&table->lock);
    return n;
}

size_t inode_table_count(struct inode_table *table)
{
    g_mutex_lock(&table->lock);
    size_t n = g_hash_table_size(table->by_ino);
    g_mutex_unlock(&table->lock);
    return n;
}

uint64_t inode_table_visit(struct inode_table *table, inode_visit_fn visit, void *user)
{
    g_mutex_lock(&table->lock);
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, table->by_ino);
    while (g_hash_table_iter_next(&iter, &key, &value))
        visit(value, user);
    uint64_t next = table->next_ino;
    g_mutex_unlock(&table->lock);
    return next;
}

int inode_table_adopt(struct inode_table *table, uint64_t ino, const char *path,
                      enum meta_kind kind, uint64_t nlookup, bool detached,
                      const struct meta_attrs *attrs, int64_t fetched_us,
                      int64_t kernel_cache_generation)
{
    g_mutex_lock(&table->lock);
    if (ino == INODE_ROOT_ID || g_hash_table_contains(table->by_ino, &ino) ||
        (!detached && g_hash_table_contains(table->by_path, path))) {
        g_mutex_unlock(&table->lock);
        return -EEXIST;
    }
    struct inode *inode = inode_new(ino, path, kind);
    inode->nlookup = nlookup;
    inode->detached = detached;
    g_hash_table_insert(table->by_ino, &inode->ino, inode);
    if (!detached)
        g_hash_table_insert(table->by_path, inode->path, inode);
    observe(table, INODE_EVENT_NEW, inode);
    if (ino >= table->next_ino)
        table->next_ino = ino + 1;
    g_mutex_unlock(&table->lock);
    if (attrs)
        inode_set_attrs(inode, attrs, fetched_us);
    g_mutex_lock(&inode->attr_lock);
    inode->kernel_cache_generation = kernel_cache_generation;
    g_mutex_unlock(&inode->attr_lock);
    return 0;
}

void inode_table_set_next(struct inode_table *table, uint64_t next_ino)
{
    g_mutex_lock(&table->lock);
    if (next_ino > table->next_ino)
        table->next_ino = next_ino;
    g_mutex_unlock(&table->lock);
}

void inode_get_attrs(struct inode *inode, struct meta_attrs *out, int64_t *fetched_us)
{
    g_mutex_lock(&inode->attr_lock);
    meta_attrs_copy(out, &inode->attrs);
    if (fetched_us)
        *fetched_us = inode->attrs_fetched_us;
    g_mutex_unlock(&inode->attr_lock);
}

void inode_set_attrs(struct inode *inode, const struct meta_attrs *attrs, int64_t fetched_us)
{
    char *target = g_strdup(attrs->symlink_target);
    g_mutex_lock(&inode->attr_lock);
    g_free(inode->attrs.symlink_target);
    if (inode->attrs_known &&
        (inode->attrs.generation != attrs->generation || inode->attrs.size != attrs->size))
        inode->attrs_changed = true;
    inode->attrs_known = true;
    inode->attrs = *attrs;
    inode->attrs.symlink_target = target;
    inode->attrs_fetched_us = fetched_us;
    g_mutex_unlock(&inode->attr_lock);
}
