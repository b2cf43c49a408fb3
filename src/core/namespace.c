/* Path resolution, directory listings and the metadata caches (see
 * include/fluxfs/namespace.h). */
#include "fluxfs/namespace.h"

#include <errno.h>
#include <string.h>

#include "fluxfs/log.h"
#include "fluxfs/name_map.h"

#define DEFAULT_MAX_CACHED_NAMES (4u * 1000 * 1000)
#define DEFAULT_MAX_CACHED_DIRS  (100u * 1000)
#define DEFAULT_MAX_WRITTEN_DIRS 4096u

struct namespace
{
    struct gcs_client *client; /* not owned */
    char *mount_prefix;        /* immutable */
    bool implicit_dirs;        /* immutable */
    unsigned list_parallelism; /* immutable */
    /* Whether listings copy their entries into the metadata cache: only when a cached listing
     * may expire before the entries would (namespace_resolve answers from a fresh listing of
     * the parent anyway, so otherwise the copy costs 100,000 inserts for nothing). immutable */
    bool feed_listings;
    struct metacache *meta;          /* thread-safe itself */
    struct dircache *dirs;           /* thread-safe itself */
    gint64 list_ttl_us;              /* immutable */
    gint64 stat_ttl_us, type_ttl_us; /* immutable; -1 = forever */
    gint64 negative_ttl_us;          /* immutable: how long a listing's silence means absence */
    /* Directories this process created files in lately (path -> gint64 expiry, monotonic
     * us): a lookup that misses there lists the directory once instead of probing each new
     * name (issue 11). */
    GMutex written_lock;
    GHashTable *written_dirs; /* written_lock */
    /* Counters: atomics. */
    guint64 resolve_network;
    guint64 listings;
    guint64 list_requests;
};

static void counter_add(guint64 *counter, guint64 value)
{
    __atomic_add_fetch(counter, value, __ATOMIC_RELAXED);
}

/* A TTL in microseconds: 0 when disabled, -1 for forever (or longer than a year). */
static gint64 ttl_to_us(double seconds)
{
    if (seconds <= 0)
        return 0;
    return seconds >= 366.0 * 86400 ? -1 : (gint64)(seconds * 1e6);
}

/* True when a listing's entry is older than the TTL of its kind: a stat (files, symlinks) or
 * type (directories) TTL shorter than --list-ttl then bounds how long the listing's attributes
 * answer lookups, so a replaced object is seen once --stat-ttl has passed (issue 22). */
static bool listing_entry_expired(const struct namespace *ns, const struct dir_listing *listing,
                                  const struct dir_entry *entry)
{
    gint64 ttl_us = entry->kind == META_DIR ? ns->type_ttl_us : ns->stat_ttl_us;
    if (ttl_us < 0)
        return false;
    gint64 fetched = entry->attrs.fetched_us > 0 ? entry->attrs.fetched_us : listing->taken_us;
    return g_get_monotonic_time() - fetched >= ttl_us;
}

struct namespace *namespace_new(const struct namespace_config *config, struct gcs_client *client)
{
    struct namespace *ns = g_new0(struct namespace, 1);
    ns->client = client;
    ns->mount_prefix = g_strdup(config->mount_prefix ? config->mount_prefix : "");
    ns->implicit_dirs = config->implicit_dirs;
    ns->list_parallelism = config->list_parallelism ? config->list_parallelism : 16;
    ns->feed_listings = !(config->list_ttl_s > 0 && config->list_ttl_s >= config->stat_ttl_s &&
                          config->list_ttl_s >= config->type_ttl_s);
    ns->meta = metacache_new(config->stat_ttl_s, config->type_ttl_s, config->negative_ttl_s,
                             config->max_cached_names ? config->max_cached_names
                                                      : DEFAULT_MAX_CACHED_NAMES);
    ns->list_ttl_us = config->list_ttl_s > 0 ? (gint64)(config->list_ttl_s * 1e6) : 0;
    ns->stat_ttl_us = ttl_to_us(config->stat_ttl_s);
    ns->type_ttl_us = ttl_to_us(config->type_ttl_s);
    ns->negative_ttl_us = config->negative_ttl_s > 0 ? (gint64)(config->negative_ttl_s * 1e6) : 0;
    g_mutex_init(&ns->written_lock);
    ns->written_dirs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    ns->dirs = dircache_new(config->list_ttl_s, config->max_cached_dirs ? config->max_cached_dirs
                                                                        : DEFAULT_MAX_CACHED_DIRS);
    return ns;
}

void namespace_free(struct namespace *ns)
{
    if (!ns)
        return;
    dircache_free(ns->dirs);
    metacache_free(ns->meta);
    g_hash_table_destroy(ns->written_dirs);
    g_mutex_clear(&ns->written_lock);
    g_free(ns->mount_prefix);
    g_free(ns);
}

char *namespace_object_name(struct namespace *ns, const char *path)
{
    return name_map_file_object(ns->mount_prefix, path);
}

void namespace_get_stats(struct namespace *ns, struct namespace_stats *out)
{
    out->resolve_network = __atomic_load_n(&ns->resolve_network, __ATOMIC_RELAXED);
    out->listings = __atomic_load_n(&ns->listings, __ATOMIC_RELAXED);
    out->list_requests = __atomic_load_n(&ns->list_requests, __ATOMIC_RELAXED);
}

static char *parent_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? g_strndup(path, (size_t)(slash - path)) : g_strdup("");
}

static bool path_is_visible(const char *path)
{
    if (!name_map_path_valid(path))
        return false;
    size_t reserved_len = strlen(NAME_MAP_RESERVED_ROOT_NAME);
    return !(strncmp(path, NAME_MAP_RESERVED_ROOT_NAME, reserved_len) == 0 &&
             (path[reserved_len] == '\0' || path[reserved_len] == '/'));
}

/* ---- resolving one name: objects.get and a one-item list, concurrently ---- */

struct probe {
    GMutex lock;
    GCond done;
    int pending;               /* lock */
    int stat_err;              /* lock */
    struct gcs_object *object; /* lock; owned */
    int list_err;              /* lock */
    bool has_children;         /* lock */
    bool has_placeholder;      /* lock */
    const char *dir_prefix;    /* immutable */
};

static void probe_on_stat(int err, struct gcs_object *obj, void *user)
{
    struct probe *probe = user;
    g_mutex_lock(&probe->lock);
    probe->stat_err = err;
    probe->object = obj;
    probe->pending--;
    g_cond_broadcast(&probe->done);
    g_mutex_unlock(&probe->lock);
}

static void probe_on_list(int err, struct gcs_list_page *page, void *user)
{
    struct probe *probe = user;
    bool children = false, placeholder = false;
    if (!err && page) {
        children = (page->objects && page->objects->len > 0) ||
                   (page->prefixes && page->prefixes->len > 0);
        if (page->objects && page->objects->len > 0) {
            const struct gcs_object *first = g_ptr_array_index(page->objects, 0);
            placeholder = strcmp(first->name, probe->dir_prefix) == 0;
        }
    }
    if (page) {
        gcs_list_page_clear(page);
        g_free(page);
    }
    g_mutex_lock(&probe->lock);
    probe->list_err = err;
    probe->has_children = children;
    probe->has_placeholder = placeholder;
    probe->pending--;
    g_cond_broadcast(&probe->done);
    g_mutex_unlock(&probe->lock);
}

static int resolve_from_network(struct namespace *ns, const char *path, enum meta_kind *kind,
                                struct meta_attrs *attrs)
{
    counter_add(&ns->resolve_network, 1);
    char *object_name = name_map_file_object(ns->mount_prefix, path);
    char *dir_prefix = name_map_dir_prefix(ns->mount_prefix, path);
    struct probe probe;
    memset(&probe, 0, sizeof(probe));
    g_mutex_init(&probe.lock);
    g_cond_init(&probe.done);
    probe.pending = 2;
    probe.dir_prefix = dir_prefix;

    /* What is found is cached unless the name changes through the mount meanwhile. */
    uint64_t since = metacache_epoch(ns->meta);
    struct gcs_list_params params = {.prefix = dir_prefix, .max_results = 1};
    gcs_stat_async(ns->client, object_name, probe_on_stat, &probe);
    gcs_list_async(ns->client, &params, probe_on_list, &probe);

    g_mutex_lock(&probe.lock);
    while (probe.pending > 0)
        g_cond_wait(&probe.done, &probe.lock);
    g_mutex_unlock(&probe.lock);

    int rc;
    bool is_dir = ns->implicit_dirs ? probe.has_children : probe.has_placeholder;
    if (probe.list_err == 0 && is_dir) {
        metacache_put_fetched(ns->meta, path, META_DIR, NULL, since);
        *kind = META_DIR;
        rc = 0;
    } else if (probe.stat_err == 0 && probe.object) {
        struct meta_attrs found;
        meta_attrs_from_object(&found, probe.object);
        enum meta_kind found_kind = meta_kind_of_object(probe.object);
        metacache_put_fetched(ns->meta, path, found_kind, &found, since);
        *kind = found_kind;
        if (attrs)
            *attrs = found;
        else
            meta_attrs_clear(&found);
        rc = 0;
    } else if (probe.stat_err == -ENOENT && (probe.list_err == 0 || probe.list_err == -ENOENT)) {
        metacache_put_fetched(ns->meta, path, META_ABSENT, NULL, since);
        rc = -ENOENT;
    } else {
        rc = probe.stat_err && probe.stat_err != -ENOENT ? probe.stat_err : probe.list_err;
    }
    gcs_object_free(probe.object);
    g_mutex_clear(&probe.lock);
    g_cond_clear(&probe.done);
    g_free(object_name);
    g_free(dir_prefix);
    return rc;
}

static bool dir_written_lately(struct namespace *ns, const char *dir_path)
{
    if (ns->list_ttl_us == 0)
        return false;
    g_mutex_lock(&ns->written_lock);
    const gint64 *expiry = g_hash_table_lookup(ns->written_dirs, dir_path);
    bool lately = expiry && *expiry > g_get_monotonic_time();
    g_mutex_unlock(&ns->written_lock);
    return lately;
}

static void note_written(struct namespace *ns, const char *dir_path)
{
    if (ns->list_ttl_us == 0)
        return;
    gint64 now = g_get_monotonic_time();
    g_mutex_lock(&ns->written_lock);
    if (g_hash_table_size(ns->written_dirs) >= DEFAULT_MAX_WRITTEN_DIRS)
        g_hash_table_remove_all(ns->written_dirs);
    gint64 *expiry = g_new(gint64, 1);
    *expiry = now + ns->list_ttl_us;
    g_hash_table_replace(ns->written_dirs, g_strdup(dir_path), expiry);
    g_mutex_unlock(&ns->written_lock);
}

int namespace_resolve(struct namespace *ns, const char *path, enum meta_kind *kind,
                      struct meta_attrs *attrs)
{
    if (path[0] == '\0') {
        *kind = META_DIR;
        return 0;
    }
    if (!path_is_visible(path))
        return -ENOENT;

    enum meta_kind cached;
    struct meta_attrs cached_attrs;
    if (metacache_get(ns->meta, path, &cached, &cached_attrs) == 0) {
        if (cached == META_ABSENT) {
            meta_attrs_clear(&cached_attrs);
            return -ENOENT;
        }
        *kind = cached;
        if (attrs)
            *attrs = cached_attrs;
        else
            meta_attrs_clear(&cached_attrs);
        return 0;
    }

    /* A cached listing of the parent answers too: a name it holds at once; a name it lacks is
     * absent only while the listing is younger than the negative TTL (another client may have
     * created it since). An older listing's silence is checked with Cloud Storage, and a name
     * found that way drops the stale listing, so the next readdir lists again.
     * In a directory this process is creating files in, a lookup that finds no listing (or a
     * stale one, when the negative TTL is not 0) lists the directory (one request for up to
     * 1,000 entries, shared by concurrent lookups) rather than probe every new name: the kernel
     * holds the directory's lock across an O_CREAT open's LOOKUP and CREATE, so each probe's
     * round trip would serialize the writers. */
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    char *parent = parent_path(path);
    bool written = dir_written_lately(ns, parent);
    bool listing_was_stale = false;
    struct dir_listing *listing = dircache_peek(ns->dirs, parent);
    if (listing && !dir_listing_find(listing, name)) {
        if (g_get_monotonic_time() - listing->taken_us >= ns->negative_ttl_us) {
            g_clear_pointer(&listing, dir_listing_unref);
            listing_was_stale = true;
            if (written && ns->negative_ttl_us > 0)
                dircache_expire(ns->dirs, parent); /* listed again just below */
        }
    }
    if (!listing && written && !(listing_was_stale && ns->negative_ttl_us == 0) &&
        namespace_list_dir(ns, parent, &listing) < 0)
        listing = NULL;
    bool entry_expired = false;
    if (listing) {
        const struct dir_entry *entry = dir_listing_find(listing, name);
        if (entry && listing_entry_expired(ns, listing, entry)) {
            g_clear_pointer(&listing, dir_listing_unref); /* asked again below */
            entry_expired = true;
        }
    }
    if (listing) {
        g_free(parent);
        const struct dir_entry *entry = dir_listing_find(listing, name);
        int rc = -ENOENT;
        if (entry) {
            *kind = entry->kind;
            if (attrs)
                meta_attrs_copy(attrs, &entry->attrs);
            rc = 0;
        }
        dir_listing_unref(listing);
        return rc;
    }
    int rc = resolve_from_network(ns, path, kind, attrs);
    if ((rc == 0 && listing_was_stale) || (rc == -ENOENT && entry_expired))
        dircache_expire(ns->dirs, parent);
    g_free(parent);
    return rc;
}

int namespace_stat_file(struct namespace *ns, const char *path, enum meta_kind *kind,
                        struct meta_attrs *attrs)
{
    if (!path_is_visible(path) || path[0] == '\0')
        return -ENOENT;
    char *object_name = name_map_file_object(ns->mount_prefix, path);
    struct gcs_object obj;
    memset(&obj, 0, sizeof(obj));
    uint64_t since = metacache_epoch(ns->meta);
    int rc = gcs_stat(ns->client, object_name, &obj);
    g_free(object_name);
    if (rc == -ENOENT) {
        metacache_forget(ns->meta, path);
        return rc;
    }
    if (rc < 0)
        return rc;
    struct meta_attrs found;
    meta_attrs_from_object(&found, &obj);
    enum meta_kind found_kind = meta_kind_of_object(&obj);
    gcs_object_clear(&obj);
    metacache_put_fetched(ns->meta, path, found_kind, &found, since);
    *kind = found_kind;
    *attrs = found;
    return 0;
}

/* ---- directory listings ---- */

static void add_entry(GArray *entries, const char *name, size_t name_len, enum meta_kind kind,
                      const struct meta_attrs *attrs)
{
    struct dir_entry entry;
    memset(&entry, 0, sizeof(entry));
    entry.name = g_strndup(name, name_len);
    entry.kind = kind;
    if (attrs)
        meta_attrs_copy(&entry.attrs, attrs);
    g_array_append_val(entries, entry);
}

/* The child name inside a name of the listing's chunk, cut there (the byte after it is the
 * child's '/' for a placeholder or a prefix, or already its end). */
static char *cut_child(const char *child, size_t child_len)
{
    char *name = (char *)child;
    name[child_len] = '\0';
    return name;
}

static void listing_child(const void *user, size_t index, const char **name, enum meta_kind *kind,
                          const struct meta_attrs **attrs)
{
    const struct dir_entry *entry = &((const struct dir_listing *)user)->entries[index];
    *name = entry->name;
    *kind = entry->kind;
    *attrs = &entry->attrs;
}

/* since: the metadata cache's epoch when the listing's requests started (a name forgotten
 * after that is not put back from it). */
static void feed_metacache(struct namespace *ns, const char *dir_path,
                           const struct dir_listing *listing, uint64_t since)
{
    metacache_put_fetched(ns->meta, dir_path, META_DIR, NULL, since);
    if (!ns->feed_listings)
        return;
    metacache_put_children(ns->meta, dir_path, listing->count, listing_child, listing, since);
}

struct fill_context {
    struct namespace *ns;
    bool (*stop)(void *stop_user);
    void *stop_user;
};

static int fill_listing(const char *path, void *user, struct dir_listing **out)
{
    const struct fill_context *context = user;
    struct namespace *ns = context->ns;
    char *dir_prefix = name_map_dir_prefix(ns->mount_prefix, path);
    struct listing_config config = {
        .prefix = dir_prefix,
        .recursive = false,
        .parallelism = ns->list_parallelism,
        .include_trailing_delimiter = !ns->implicit_dirs,
        .stop = context->stop,
        .stop_user = context->stop_user,
    };
    struct listing_result result;
    memset(&result, 0, sizeof(result));
    gint64 started = g_get_monotonic_time();
    /* dircache_get does the same for the listing itself: a fill that started before an
     * invalidation of path is not cached. */
    uint64_t since = metacache_epoch(ns->meta);
    /* What the listing holds (readdirplus checks its entries against later changes). */
    uint64_t dirs_since = dircache_epoch(ns->dirs);
    int rc = listing_run(listing_page_gcs, ns->client, &config, &result);
    if (rc < 0) {
        g_free(dir_prefix);
        return rc;
    }
    counter_add(&ns->listings, 1);
    counter_add(&ns->list_requests, result.requests);

    /* The listing's objects become the directory's entries in place: each entry's name is cut
     * down to the child's inside the result's name chunk, which the listing takes over. */
    bool at_root = path[0] == '\0';
    GArray *entries = result.objects;
    guint kept = 0;
    for (guint i = 0; i < entries->len; i++) {
        struct dir_entry *entry = &g_array_index(entries, struct dir_entry, i);
        const char *child;
        size_t child_len;
        enum name_kind kind;
        if (!name_map_classify_child(dir_prefix, entry->name, false, &child, &child_len, &kind) ||
            (at_root && child_len == strlen(NAME_MAP_RESERVED_ROOT_NAME) &&
             memcmp(child, NAME_MAP_RESERVED_ROOT_NAME, child_len) == 0)) {
            meta_attrs_clear(&entry->attrs);
            continue;
        }
        struct dir_entry *to = &g_array_index(entries, struct dir_entry, kept++);
        if (kind == NAME_KIND_DIR) {
            meta_attrs_clear(&entry->attrs); /* a placeholder: a directory has no attributes */
            *to = (struct dir_entry){.kind = META_DIR};
        } else if (to != entry) {
            *to = *entry;
        }
        to->name = cut_child(child, child_len);
    }
    g_array_set_size(entries, kept);
    for (guint i = 0; ns->implicit_dirs && i < result.prefixes->len; i++) {
        const char *prefix = g_ptr_array_index(result.prefixes, i);
        const char *child;
        size_t child_len;
        enum name_kind kind;
        if (!name_map_classify_child(dir_prefix, prefix, true, &child, &child_len, &kind))
            continue;
        if (at_root && child_len == strlen(NAME_MAP_RESERVED_ROOT_NAME) &&
            memcmp(child, NAME_MAP_RESERVED_ROOT_NAME, child_len) == 0)
            continue;
        struct dir_entry entry = {.name = cut_child(child, child_len), .kind = META_DIR};
        g_array_append_val(entries, entry);
    }
    struct dir_listing *listing = dir_listing_from_array_names(entries, result.names);
    result.objects = NULL;
    result.names = NULL;
    listing->dir_epoch = dirs_since;
    listing->meta_epoch = since;
    feed_metacache(ns, path, listing, since);
    flog_info("core",
              "listed '%s': %zu entries (%lu received), %u requests, %u pieces, "
              "%u steals, %.3f s",
              dir_prefix, listing->count, result.entries_received, result.requests, result.pieces,
              result.steals, (double)(g_get_monotonic_time() - started) / 1e6);
    listing_result_clear(&result);
    g_free(dir_prefix);
    *out = listing;
    return 0;
}

int namespace_list_dir_until(struct namespace *ns, const char *path, bool (*stop)(void *stop_user),
                             void *stop_user, struct dir_listing **out)
{
    if (path[0] != '\0' && !path_is_visible(path))
        return -ENOENT;
    struct fill_context context = {ns, stop, stop_user};
    return dircache_get(ns->dirs, path, fill_listing, &context, out);
}

int namespace_list_dir(struct namespace *ns, const char *path, struct dir_listing **out)
{
    return namespace_list_dir_until(ns, path, NULL, NULL, out);
}

/* ---- whole-tree prefetch ---- */

static GArray *entries_of(GHashTable *dirs, const char *dir_path)
{
    GArray *entries = g_hash_table_lookup(dirs, dir_path);
    if (!entries) {
        entries = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
        g_hash_table_insert(dirs, g_strdup(dir_path), entries);
    }
    return entries;
}

/* Marks dir_path and (for implicit directories) its ancestors as directories. */
static void mark_dir(GHashTable *dirs, const char *dir_path, bool with_ancestors)
{
    char *path = g_strdup(dir_path);
    for (;;) {
        if (g_hash_table_contains(dirs, path) && path[0] != '\0')
            break;
        entries_of(dirs, path);
        if (path[0] == '\0' || !with_ancestors)
            break;
        char *parent = parent_path(path);
        g_free(path);
        path = parent;
    }
    g_free(path);
}

int namespace_prefetch_metadata(struct namespace *ns)
{
    struct listing_config config = {
        .prefix = ns->mount_prefix,
        .recursive = true,
        .parallelism = ns->list_parallelism,
    };
    struct listing_result result;
    memset(&result, 0, sizeof(result));
    gint64 started = g_get_monotonic_time();
    /* The mount serves requests meanwhile: what changes through it is not overwritten. */
    uint64_t meta_since = metacache_epoch(ns->meta);
    uint64_t dirs_since = dircache_epoch(ns->dirs);
    int rc = listing_run(listing_page_gcs, ns->client, &config, &result);
    if (rc < 0)
        return rc;
    counter_add(&ns->list_requests, result.requests);

    /* Pass 1: which paths are directories. */
    GHashTable *dirs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    entries_of(dirs, "");
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    GArray *placeholder_flags = g_array_new(FALSE, FALSE, sizeof(gboolean));
    for (guint i = 0; i < result.objects->len; i++) {
        const struct dir_entry *obj = &g_array_index(result.objects, struct dir_entry, i);
        char *path = NULL;
        bool placeholder = false;
        if (!name_map_object_to_path(ns->mount_prefix, obj->name, &path, &placeholder)) {
            g_ptr_array_add(paths, NULL);
        } else {
            g_ptr_array_add(paths, path);
            char *parent = parent_path(path);
            if (placeholder)
                mark_dir(dirs, path, ns->implicit_dirs);
            if (ns->implicit_dirs)
                mark_dir(dirs, parent, true);
            g_free(parent);
        }
        gboolean flag = placeholder;
        g_array_append_val(placeholder_flags, flag);
    }
    /* Pass 2: files into their parents' entries, directories into theirs. */
    for (guint i = 0; i < result.objects->len; i++) {
        const char *path = g_ptr_array_index(paths, i);
        if (!path || g_array_index(placeholder_flags, gboolean, i))
            continue;
        char *parent = parent_path(path);
        GArray *entries = g_hash_table_lookup(dirs, parent);
        if (entries) {
            const struct dir_entry *obj = &g_array_index(result.objects, struct dir_entry, i);
            const char *name = strrchr(path, '/');
            name = name ? name + 1 : path;
            add_entry(entries, name, strlen(name), obj->kind, &obj->attrs);
        }
        g_free(parent);
    }
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, dirs);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const char *dir_path = key;
        if (dir_path[0] == '\0')
            continue;
        char *parent = parent_path(dir_path);
        GArray *entries = g_hash_table_lookup(dirs, parent);
        if (entries) {
            const char *name = strrchr(dir_path, '/');
            name = name ? name + 1 : dir_path;
            add_entry(entries, name, strlen(name), META_DIR, NULL);
        }
        g_free(parent);
    }
    size_t dir_count = g_hash_table_size(dirs);
    g_hash_table_iter_init(&iter, dirs);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        struct dir_listing *listing = dir_listing_from_array(value);
        g_hash_table_iter_replace(&iter, NULL);
        listing->dir_epoch = dirs_since;
        listing->meta_epoch = meta_since;
        feed_metacache(ns, key, listing, meta_since);
        dircache_put_since(ns->dirs, key, listing, dirs_since);
        dir_listing_unref(listing);
    }
    flog_info("core",
              "metadata prefetch of '%s': %u objects in %zu directories, %u requests, "
              "%u steals, %.3f s",
              ns->mount_prefix, result.objects->len, dir_count, result.requests, result.steals,
              (double)(g_get_monotonic_time() - started) / 1e6);
    g_hash_table_destroy(dirs);
    g_ptr_array_free(paths, TRUE);
    g_array_free(placeholder_flags, TRUE);
    listing_result_clear(&result);
    return 0;
}

void namespace_invalidate(struct namespace *ns, const char *path)
{
    metacache_forget(ns->meta, path);
    dircache_invalidate(ns->dirs, path);
    char *parent = parent_path(path);
    dircache_invalidate(ns->dirs, parent);
    g_free(parent);
}

/* The parent's cached listing gets the entry (it stays an authority on absence). */
static void note_in_parent(struct namespace *ns, const char *path, enum meta_kind kind,
                           const struct meta_attrs *attrs)
{
    char *parent = parent_path(path);
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    if (dircache_note_entry(ns->dirs, parent, name, kind, attrs) == -E2BIG)
        dircache_invalidate(ns->dirs, parent);
    note_written(ns, parent);
    g_free(parent);
}

void namespace_note_file(struct namespace *ns, const char *path, enum meta_kind kind,
                         const struct meta_attrs *attrs)
{
    metacache_forget(ns->meta, path);
    metacache_put_file(ns->meta, path, kind, attrs);
    note_in_parent(ns, path, kind, attrs);
}

void namespace_note_dir(struct namespace *ns, const char *path)
{
    metacache_forget(ns->meta, path);
    metacache_put_dir(ns->meta, path);
    note_in_parent(ns, path, META_DIR, NULL);
}

void namespace_note_new_dir(struct namespace *ns, const char *path)
{
    namespace_note_dir(ns, path);
    /* Just made (it was absent): an empty listing, so lookups of the names about to be
     * created in it (cp -r) are answered without a request. It holds every change made
     * before now (the put's own change of path is past dir_epoch: harmless, it is empty). */
    struct dir_listing *empty = dir_listing_new(NULL, 0);
    empty->meta_epoch = metacache_epoch(ns->meta);
    empty->dir_epoch = dircache_epoch(ns->dirs);
    dircache_put(ns->dirs, path, empty);
    dir_listing_unref(empty);
}

bool namespace_listing_changed(struct namespace *ns, const char *dir_path,
                               const struct dir_listing *listing)
{
    return dircache_changed_since(ns->dirs, dir_path, listing->dir_epoch) ||
           metacache_changed_since(ns->meta, dir_path, listing->meta_epoch);
}

bool namespace_entry_changed(struct namespace *ns, const char *path,
                             const struct dir_listing *listing)
{
    return metacache_changed_since(ns->meta, path, listing->meta_epoch);
}

char *namespace_dir_prefix(struct namespace *ns, const char *path)
{
    return name_map_dir_prefix(ns->mount_prefix, path);
}
