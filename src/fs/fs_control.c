/* The control directory MOUNT/.fluxfs and what it drives: the content cache and the
 * prefetcher (issue 5). It wraps the operations table (the decorator sshfs's cache.c uses):
 * requests about the control inodes are answered here, everything else goes to the wrapped
 * operation, with opens of files also reported to the prefetcher.
 *
 * Files (hidden from every listing; resolvable by lookup/getattr/open):
 *   .fluxfs/prefetch  write-only (mode 0200, the mount owner or root): order hints, one path
 *                     relative to the mount per line (absolute paths under the mountpoint are
 *                     accepted too). Each writing process (the FUSE request's pid, as its
 *                     thread group) has a list of its own: a write at offset 0 starts a new
 *                     list for that process (an epoch) and replaces its previous list only;
 *                     later writes append. The prefetcher follows every list with its own
 *                     bounded lookahead and drops a list once its writer has exited.
 *   .fluxfs/warmup    (0600, owner): paths to fetch into the cache as fast as the cache's
 *                     capacity allows. Written through a write-only handle they stay queued
 *                     after it closes; through a read-write one (what `fluxfs prefetch PATH...`
 *                     opens) they are a session: what is still queued when the handle closes
 *                     (the command ended or was killed) is dropped (warmup_cancelled).
 *   .fluxfs/status    read-only (0444): "key: value" lines (prefetch and cache counters,
 *                     then one hint_list_PID line per live list), a snapshot taken at open.
 * Once the kernel is seen evicting pages of a file it held (fs_read tells fs->prefetcher),
 * hinted files it held are probed (fuse_lowlevel_notify_retrieve of their first page) before
 * the prefetcher passes them over, so only what it evicted is fetched again.
 * Automatic prefetch: when a directory's files are opened in increasing name order (3 in a
 * row), the next files of its listing are queued.
 *
 * Threads: control inode numbers are atomics (set by lookups); the listing-order detector has
 * its own lock (control->auto_lock). Ownership: struct fs_control belongs to struct fs; it is
 * made at FUSE init and freed at FUSE destroy. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "fluxfs/content_cache.h"
#include "fluxfs/cost_model.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics.h"
#include "fluxfs/miss_batch.h"
#include "fluxfs/name_map.h"
#include "fluxfs/prefetch.h"
#include "fs-internal.h"
#include "hint_lines.h"

#define CONTROL_HINT_BATCH    4096
#define CONTROL_AUTO_RUN      3     /* opens in name order before listing order is assumed */
#define CONTROL_AUTO_WINDOW   128   /* files queued ahead of the reader in listing order */
#define CONTROL_AUTO_DIRS     1024  /* directories tracked by the detector */
#define CONTROL_HINT_LIST_MIN 64    /* hinted files in a directory before it is listed */
#define CONTROL_HINT_DIRS     65536 /* directories counted for all hint lists */
#define CONTROL_PROBE_PAGE    4096  /* bytes of an object's start a probe asks for */
#define CONTROL_PROBE_WAIT_US (G_USEC_PER_SEC / 2) /* no answer: taken as still held */

enum control_file { CONTROL_PREFETCH, CONTROL_WARMUP, CONTROL_STATUS, CONTROL_FILE_COUNT };

static const char *const control_names[CONTROL_FILE_COUNT] = {"prefetch", "warmup", "status"};
static const mode_t control_modes[CONTROL_FILE_COUNT] = {0200, 0600, 0444};

struct auto_state {
    char *last_name;
    unsigned run;
    size_t queued_until; /* listing index up to which files were queued */
};

struct fs_control {
    struct fs *fs; /* not owned */
    struct content_cache *cache;
    struct prefetcher *prefetcher;         /* NULL when it could not start */
    struct miss_batcher *batcher;          /* --batch-misses; NULL when off */
    uint64_t dir_ino;                      /* atomic; 0 = not looked up yet */
    uint64_t file_ino[CONTROL_FILE_COUNT]; /* atomic */
    uint64_t next_warm_session;            /* atomic */
    GMutex auto_lock;
    GHashTable *auto_dirs; /* auto_lock: dir path -> struct auto_state */
    GHashTable *hint_dirs; /* auto_lock: dir paths with at least
                            * CONTROL_HINT_LIST_MIN entries in one list */
    GMutex probe_lock;
    GCond probe_answered;
    GHashTable *probes;    /* probe_lock: cookie -> struct kernel_probe * */
    uint64_t probe_cookie; /* probe_lock: the last cookie given */
    bool probes_closed;    /* probe_lock: unmounting, nobody will answer */
    /* Mounts whose kernel opens files without asking (fs->no_open): the status file has no
     * handle to hold a snapshot, so each lookup of it (entry timeout 0: every open looks it
     * up) takes one and answers with a new inode, whose size and bytes it is: an open file
     * reads one snapshot, and no page of an older one. The latest CONTROL_STATUS_KEPT. */
    GMutex status_lock;
    GHashTable *status_by_ino;       /* status_lock: &ino -> GBytes */
    GQueue status_order;             /* status_lock: uint64_t *ino, oldest first */
    int64_t status_seq;              /* status_lock: the snapshots' "generation" */
    struct compose_decision compose; /* set once at creation, read-only after */
};
#define CONTROL_STATUS_KEPT 64

/* A retrieve sent to the kernel, waiting for its reply (control_retrieve_reply). */
struct kernel_probe {
    bool answered;
    size_t bytes; /* bytes of the object's start the kernel holds */
};

/* An open control file. */
struct control_handle {
    uint32_t magic;
    enum control_file file;
    struct hint_lines parser;         /* prefetch/warmup: bytes written -> paths (hint_lines.h) */
    GPtrArray *lines;                 /* complete lines not handed over yet */
    struct prefetch_hint_owner owner; /* prefetch: the process whose list this writes */
    int error;              /* prefetch: a refusal (negative errno) answered to later writes */
    uint64_t warm_session;  /* warmup opened read-write: its session id; else 0 */
    GHashTable *dir_counts; /* prefetch: dir path -> entries of this list in it */
    char *status_text;      /* status: the snapshot */
    size_t status_len;
};
#define CONTROL_HANDLE_MAGIC 0x464c5843u

/* Hints through an ioctl on the .fluxfs directory (read-only mounts refuse opens for writing,
 * ioctls pass): a chunk of whole newline-ended lines of the calling process's hint list; flag
 * NEW starts a new list (what opening .fluxfs/prefetch does). python/fluxfs_hints computes the
 * same number: _IOW('F', 0x17, 16000 bytes). */
struct control_hint_chunk {
    uint32_t flags;
    uint32_t length;
    char data[16000 - 8];
};
#define CONTROL_HINT_CHUNK_NEW 1u
#define CONTROL_IOC_HINTS      _IOW('F', 0x17, struct control_hint_chunk)

static struct fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static void count(uint64_t *counter)
{
    __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

static bool is_control_dir(struct fs *fs, fuse_ino_t ino)
{
    return fs->control && ino != 0 &&
           ino == __atomic_load_n(&fs->control->dir_ino, __ATOMIC_ACQUIRE);
}

/* Which control file ino is, or -1. */
static int control_file_of(struct fs *fs, fuse_ino_t ino)
{
    if (!fs->control || ino == 0)
        return -1;
    for (int i = 0; i < CONTROL_FILE_COUNT; i++)
        if (ino == __atomic_load_n(&fs->control->file_ino[i], __ATOMIC_ACQUIRE))
            return i;
    return -1;
}

/* The handles this process gave out: a number from the kernel is only looked at when it is
 * one of them (after a crash restart, fs_crash.c, the kernel may name a handle of the dead
 * process: a number, not an address here). */
static GMutex live_lock;
static GHashTable *live_handles; /* live_lock */

static void live_add(struct control_handle *handle)
{
    g_mutex_lock(&live_lock);
    if (!live_handles)
        live_handles = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_hash_table_add(live_handles, handle);
    g_mutex_unlock(&live_lock);
}

static void live_remove(struct control_handle *handle)
{
    g_mutex_lock(&live_lock);
    if (live_handles)
        g_hash_table_remove(live_handles, handle);
    g_mutex_unlock(&live_lock);
}

static struct control_handle *handle_of(struct fuse_file_info *fi)
{
    struct control_handle *handle = (struct control_handle *)(uintptr_t)fi->fh;
    if (!handle)
        return NULL;
    g_mutex_lock(&live_lock);
    bool live = live_handles && g_hash_table_contains(live_handles, handle);
    g_mutex_unlock(&live_lock);
    return live && handle->magic == CONTROL_HANDLE_MAGIC ? handle : NULL;
}

static void control_stat(struct fs *fs, fuse_ino_t ino, int file, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_uid = fs->cfg->uid;
    st->st_gid = fs->cfg->gid;
    st->st_mtim.tv_sec = fs->mount_time_ns / 1000000000;
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
    if (file < 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        st->st_size = 4096;
    } else {
        st->st_mode = S_IFREG | control_modes[file];
        st->st_nlink = 1;
    }
}

/* ---- resolving paths for the prefetcher ---- */

/* Whether the directory holding path has so many hinted files that one listing of it is
 * cheaper than an objects.get per file (it fills the metadata cache for all of them). */
static bool hint_dir_worth_listing(struct fs *fs, const char *dir)
{
    struct fs_control *control = fs->control;
    /* Not when metadata is not to be cached: a listing answers lookups for its own TTL. */
    if (!control || fs->cfg->stat_ttl_s <= 0 || fs->cfg->list_ttl_s <= 0)
        return false;
    g_mutex_lock(&control->auto_lock);
    bool worth = g_hash_table_contains(control->hint_dirs, dir);
    g_mutex_unlock(&control->auto_lock);
    return worth;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? g_strndup(path, (gsize)(slash - path)) : g_strdup("");
}

static int resolve_path(const char *path, void *user, struct prefetch_object *out)
{
    struct fs *fs = user;
    if (!name_map_path_valid(path) || path[0] == '\0')
        return -EINVAL;
    /* A hinted epoch reads the whole directory: list it (once per listing TTL, single-flight)
     * instead of resolving each file with its own request. */
    char *dir = dir_of(path);
    struct dir_listing *listing = NULL;
    if (hint_dir_worth_listing(fs, dir) && namespace_list_dir(fs->ns, dir, &listing) == 0) {
        metrics_add(METRICS_PREFETCH_DIR_LISTS, 1);
        dir_listing_unref(listing);
    }
    g_free(dir);
    enum meta_kind kind;
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    int rc = namespace_resolve(fs->ns, path, &kind, &attrs);
    if (rc < 0)
        return rc;
    if (kind != META_FILE) {
        meta_attrs_clear(&attrs);
        return -EISDIR;
    }
    out->name = namespace_object_name(fs->ns, path);
    out->generation = attrs.generation;
    /* Opened before at this generation: its pages are in the kernel's page cache (the next
     * epoch's open keeps them), so fetching it again would only cost requests and CPU. */
    out->kernel_cached = false;
    uint64_t ino = inode_table_find_path(fs->inodes, path);
    struct inode *inode = ino ? inode_table_get(fs->inodes, ino) : NULL;
    out->inode = ino;
    if (inode) {
        g_mutex_lock(&inode->attr_lock);
        out->kernel_cached = inode->kernel_cache_generation == attrs.generation;
        g_mutex_unlock(&inode->attr_lock);
        inode_put(fs->inodes, inode);
    }
    out->size = attrs.size;
    out->has_crc32c = attrs.has_crc32c;
    out->crc32c = attrs.crc32c;
    meta_attrs_clear(&attrs);
    return 0;
}

/* Whether the kernel still holds the first page of an object it held (prefetch_probe_fn): a
 * retrieve of that page; the kernel answers with the pages it has from the start, up to the
 * first one missing. No answer in time, or no retrieve possible: taken as held (the reader
 * fetches the object itself if its pages are gone). An inode the kernel forgot holds nothing. */
static bool probe_kernel_holds(const struct prefetch_object *object, void *user)
{
    struct fs *fs = user;
    struct fs_control *control = fs->control;
    if (!control || !fs->session || object->inode == 0 || object->size == 0)
        return true;
    size_t want = (size_t)MIN(object->size, (uint64_t)CONTROL_PROBE_PAGE);
    struct kernel_probe probe = {0};
    g_mutex_lock(&control->probe_lock);
    if (control->probes_closed) {
        g_mutex_unlock(&control->probe_lock);
        return true;
    }
    uint64_t cookie = ++control->probe_cookie;
    g_hash_table_insert(control->probes, GSIZE_TO_POINTER(cookie), &probe);
    g_mutex_unlock(&control->probe_lock);
    int rc = fuse_lowlevel_notify_retrieve(fs->session, object->inode, want, 0,
                                           GSIZE_TO_POINTER(cookie));
    g_mutex_lock(&control->probe_lock);
    gint64 deadline = g_get_monotonic_time() + CONTROL_PROBE_WAIT_US;
    while (rc == 0 && !probe.answered && !control->probes_closed)
        if (!g_cond_wait_until(&control->probe_answered, &control->probe_lock, deadline))
            break;
    g_hash_table_remove(control->probes, GSIZE_TO_POINTER(cookie));
    g_mutex_unlock(&control->probe_lock);
    if (rc == -ENOENT)
        return false;
    if (rc < 0 || !probe.answered)
        return true;
    return probe.bytes >= want;
}

static void control_retrieve_reply(fuse_req_t req, void *cookie, fuse_ino_t ino, off_t offset,
                                   struct fuse_bufvec *bufv)
{
    (void)ino;
    (void)offset;
    struct fs_control *control = fs_of(req)->control;
    if (control) {
        g_mutex_lock(&control->probe_lock);
        struct kernel_probe *probe = g_hash_table_lookup(control->probes, cookie);
        if (probe) {
            probe->answered = true;
            probe->bytes = fuse_buf_size(bufv);
            g_cond_broadcast(&control->probe_answered);
        }
        g_mutex_unlock(&control->probe_lock);
    }
    fuse_reply_none(req);
}

/* ---- the state, made at FUSE init ---- */

/* --compose auto reads the bucket's settings once (buckets.get) and decides by what temporaries
 * would cost there (cost_model.h); on/off force it. The decision and its reason are logged once
 * and shown in .fluxfs/status. */
static void control_decide_compose(struct fs_control *control, const struct fs_config *cfg)
{
    enum compose_mode mode = !cfg->compose       ? COMPOSE_MODE_OFF
                             : cfg->compose_auto ? COMPOSE_MODE_AUTO
                                                 : COMPOSE_MODE_ON;
    struct gcs_bucket_config config;
    int rc = 0;
    /* Read once: compose auto decides by it, and a read-write mount needs to know whether
     * the bucket has a hierarchical namespace (directory renames, rmdir). */
    bool read = mode == COMPOSE_MODE_AUTO || !cfg->read_only;
    if (read)
        rc = gcs_bucket_get_config(control->fs->client, &config);
    compose_decide(mode, mode == COMPOSE_MODE_AUTO && rc == 0 ? &config : NULL, rc,
                   &control->compose);
    if (read && rc == 0 && config.hierarchical_namespace) {
        control->fs->hierarchical_namespace = true;
        flog_info("fs",
                  "gs://%s has a hierarchical namespace: directories are folders, "
                  "renamed at once",
                  cfg->bucket);
    }
    if (read && rc < 0)
        flog_warn("prefetch", "could not read gs://%s's settings (buckets.get: %s): %s",
                  cfg->bucket, g_strerror(-rc),
                  mode == COMPOSE_MODE_AUTO ? "compose assumes the costly case"
                                            : "taken for a flat namespace");
    flog_info("prefetch", "compose %s (%s)", control->compose.on ? "on" : "off",
              control->compose.reason);
}

static struct fs_control *control_new(struct fs *fs)
{
    const struct fs_config *cfg = fs->cfg;
    struct fs_control *control = g_new0(struct fs_control, 1);
    control->fs = fs;
    g_mutex_init(&control->auto_lock);
    control->auto_dirs = g_hash_table_new(g_str_hash, g_str_equal);
    control->hint_dirs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_mutex_init(&control->probe_lock);
    g_mutex_init(&control->status_lock);
    control->status_by_ino =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, (GDestroyNotify)g_bytes_unref);
    g_queue_init(&control->status_order);
    g_cond_init(&control->probe_answered);
    control->probes = g_hash_table_new(g_direct_hash, g_direct_equal);
    struct content_cache_config cache_config = {
        .memory_bytes = cfg->memory_cache_size,
        .dir = cfg->cache_dir,
        .disk_bytes = cfg->cache_size,
        .scope = cfg->bucket,
        .budget = fs->budget,
        .reserve = fs->reader_config.demand_reserve,
        .max_object_size = cfg->small_file_threshold,
    };
    int rc = content_cache_new(&cache_config, &control->cache);
    if (rc < 0 && cfg->cache_dir) {
        flog_error("fs", "cache directory %s unusable (%s): caching in memory only", cfg->cache_dir,
                   g_strerror(-rc));
        cache_config.dir = NULL;
        rc = content_cache_new(&cache_config, &control->cache);
    }
    if (rc < 0)
        return control;
    fs->reader_config.cache = control->cache;
    char *temp_prefix =
        g_strconcat(cfg->prefix ? cfg->prefix : "", NAME_MAP_RESERVED_ROOT_NAME "/compose/", NULL);
    control_decide_compose(control, cfg);
    struct prefetch_config prefetch_config = {
        .client = fs->client,
        .cache = control->cache,
        .budget = fs->budget,
        .reserve = fs->reader_config.demand_reserve,
        .temp_prefix = temp_prefix,
        .compose = control->compose.on,
        .compose_extra_per_gib = control->compose.per_batch_extra_per_gib,
        .plan = {.max_objects = (unsigned)cfg->compose_max_objects,
                 .object_max_size = cfg->compose_object_max_size,
                 .batch_max_bytes = cfg->compose_batch_max_bytes},
        .max_object_size = cfg->small_file_threshold,
        .lookahead = (unsigned)cfg->prefetch_lookahead,
        .workers = (unsigned)cfg->prefetch_workers,
        .resolve = resolve_path,
        .probe = probe_kernel_holds,
        .resolve_user = fs,
    };
    rc = prefetch_new(&prefetch_config, &control->prefetcher);
    if (rc < 0)
        flog_error("fs", "prefetcher did not start: %s", g_strerror(-rc));
    struct prefetch_stats pstats = {0};
    if (control->prefetcher)
        prefetch_get_stats(control->prefetcher, &pstats);
    if (cfg->batch_misses_us > 0 && pstats.compose_enabled) {
        struct miss_batch_config batch_config = {
            .client = fs->client,
            .budget = fs->budget,
            .reserve = fs->reader_config.demand_reserve,
            .temp_prefix = temp_prefix,
            .mount_id = prefetch_mount_id(control->prefetcher),
            .window_us = (unsigned)cfg->batch_misses_us,
            .min_count = (unsigned)cfg->batch_misses_min,
            .plan = prefetch_config.plan,
        };
        if (miss_batch_new(&batch_config, &control->batcher) == 0)
            fs->reader_config.batcher = control->batcher;
    }
    g_free(temp_prefix);
    return control;
}

static void auto_state_free(gpointer key, gpointer value, gpointer user)
{
    struct auto_state *state = value;
    g_free(key);
    g_free(state->last_name);
    g_free(state);
}

static void control_free(struct fs_control *control)
{
    if (!control)
        return;
    g_mutex_lock(&control->probe_lock);
    control->probes_closed = true; /* the session loop is over: no retrieve reply comes */
    g_cond_broadcast(&control->probe_answered);
    g_mutex_unlock(&control->probe_lock);
    if (control->fs->reader_config.batcher == control->batcher)
        control->fs->reader_config.batcher = NULL;
    miss_batch_free(control->batcher);
    prefetch_free(control->prefetcher);
    if (control->fs->reader_config.cache == control->cache)
        control->fs->reader_config.cache = NULL;
    content_cache_free(control->cache);
    g_hash_table_foreach(control->auto_dirs, auto_state_free, NULL);
    g_hash_table_destroy(control->auto_dirs);
    g_hash_table_destroy(control->hint_dirs);
    g_mutex_clear(&control->auto_lock);
    g_hash_table_destroy(control->probes);
    g_cond_clear(&control->probe_answered);
    g_mutex_clear(&control->probe_lock);
    g_hash_table_destroy(control->status_by_ino);
    g_queue_clear_full(&control->status_order, g_free);
    g_mutex_clear(&control->status_lock);
    g_free(control);
}

/* The operations this decorator wraps: the table fs_table.c handed to it, kept in struct fs. */
static const struct fuse_lowlevel_ops *inner_of(void *userdata)
{
    return &((struct fs *)userdata)->control_layer.inner;
}

static const struct fuse_lowlevel_ops *inner(fuse_req_t req)
{
    return inner_of(fuse_req_userdata(req));
}

static void control_init(void *userdata, struct fuse_conn_info *conn)
{
    struct fs *fs = userdata;
    if (inner_of(userdata)->init)
        inner_of(userdata)->init(userdata, conn);
    /* Released: the metrics listener reads it from its own thread. */
    __atomic_store_n(&fs->control, control_new(fs), __ATOMIC_RELEASE);
    fs->prefetcher = fs->control->prefetcher;
}

static void control_destroy(void *userdata)
{
    struct fs *fs = userdata;
    if (inner_of(userdata)->destroy)
        inner_of(userdata)->destroy(userdata);
    fs->prefetcher = NULL;
    control_free(fs->control);
    fs->control = NULL;
}

/* ---- listing-order detection ---- */

static void note_open_in_listing_order(struct fs *fs, const char *path)
{
    struct fs_control *control = fs->control;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? g_strndup(path, (gsize)(slash - path)) : g_strdup("");
    const char *name = slash ? slash + 1 : path;
    bool check_listing = false;
    size_t queued_until = 0;
    g_mutex_lock(&control->auto_lock);
    struct auto_state *state = g_hash_table_lookup(control->auto_dirs, dir);
    if (!state) {
        if (g_hash_table_size(control->auto_dirs) >= CONTROL_AUTO_DIRS) {
            g_hash_table_foreach(control->auto_dirs, auto_state_free, NULL);
            g_hash_table_remove_all(control->auto_dirs);
        }
        state = g_new0(struct auto_state, 1);
        g_hash_table_insert(control->auto_dirs, g_strdup(dir), state);
    }
    if (state->last_name && strcmp(name, state->last_name) > 0)
        state->run++;
    else
        state->run = 1;
    g_free(state->last_name);
    state->last_name = g_strdup(name);
    check_listing = state->run >= CONTROL_AUTO_RUN;
    queued_until = state->queued_until;
    g_mutex_unlock(&control->auto_lock);
    if (!check_listing) {
        g_free(dir);
        return;
    }
    /* A reader going through a directory in name order has listed it: this is cached. */
    struct dir_listing *listing = NULL;
    if (namespace_list_dir(fs->ns, dir, &listing) < 0) {
        g_free(dir);
        return;
    }
    size_t lo = 0, hi = listing->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(listing->entries[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t start = MAX(lo + 1, queued_until);
    size_t end = MIN(listing->count, lo + 1 + CONTROL_AUTO_WINDOW);
    /* Top the window up in steps of a quarter, so every open does not queue one file. */
    if (start < end && end - start >= CONTROL_AUTO_WINDOW / 4) {
        GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
        for (size_t i = start; i < end; i++)
            if (listing->entries[i].kind == META_FILE)
                g_ptr_array_add(paths, name_map_join(dir, listing->entries[i].name));
        prefetch_add_auto(control->prefetcher, (const char *const *)paths->pdata, paths->len);
        g_ptr_array_free(paths, TRUE);
        g_mutex_lock(&control->auto_lock);
        state = g_hash_table_lookup(control->auto_dirs, dir);
        if (state)
            state->queued_until = MAX(state->queued_until, end);
        g_mutex_unlock(&control->auto_lock);
    }
    dir_listing_unref(listing);
    g_free(dir);
}

/* ---- names ---- */

static char *status_snapshot(struct fs_control *control, size_t *len);

/* No-open mounts: the snapshot of a status inode (a new reference), or NULL. */
static GBytes *status_of_ino(struct fs_control *control, fuse_ino_t ino)
{
    uint64_t key = ino;
    g_mutex_lock(&control->status_lock);
    GBytes *bytes = g_hash_table_lookup(control->status_by_ino, &key);
    if (bytes)
        g_bytes_ref(bytes);
    g_mutex_unlock(&control->status_lock);
    return bytes;
}

/* No-open mounts: a lookup of the status file: a snapshot under a new inode. */
static void reply_status_entry(fuse_req_t req, struct fs *fs, const char *path)
{
    struct fs_control *control = fs->control;
    size_t len = 0;
    char *text = status_snapshot(control, &len);
    GBytes *bytes = g_bytes_new_take(text, len);
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    attrs.size = len;
    g_mutex_lock(&control->status_lock);
    attrs.generation = ++control->status_seq; /* pinned generations: a new inode */
    g_mutex_unlock(&control->status_lock);
    struct inode *inode =
        inode_table_lookup(fs->inodes, path, META_FILE, &attrs, g_get_monotonic_time());
    uint64_t *key = g_memdup2(&inode->ino, sizeof(inode->ino));
    g_mutex_lock(&control->status_lock);
    g_hash_table_replace(control->status_by_ino, key, bytes);
    g_queue_push_tail(&control->status_order, key);
    while (g_queue_get_length(&control->status_order) > CONTROL_STATUS_KEPT) {
        uint64_t *oldest = g_queue_pop_head(&control->status_order);
        g_hash_table_remove(control->status_by_ino, oldest);
        g_free(oldest);
    }
    g_mutex_unlock(&control->status_lock);
    __atomic_store_n(&control->file_ino[CONTROL_STATUS], inode->ino, __ATOMIC_RELEASE);
    struct fuse_entry_param entry;
    memset(&entry, 0, sizeof(entry));
    entry.ino = inode->ino;
    control_stat(fs, inode->ino, CONTROL_STATUS, &entry.attr);
    entry.attr.st_size = (off_t)len;
    entry.attr_timeout = fs->attr_timeout_s; /* the size of this inode never changes */
    entry.entry_timeout = 0;
    inode_put(fs->inodes, inode);
    fs_reply_entry(req, &entry);
}

static void reply_control_entry(fuse_req_t req, struct fs *fs, const char *path, int file)
{
    if (fs->no_open && file == CONTROL_STATUS) {
        reply_status_entry(req, fs, path);
        return;
    }
    struct meta_attrs attrs;
    memset(&attrs, 0, sizeof(attrs));
    struct inode *inode = inode_table_lookup(fs->inodes, path, file < 0 ? META_DIR : META_FILE,
                                             file < 0 ? NULL : &attrs, g_get_monotonic_time());
    if (file < 0)
        __atomic_store_n(&fs->control->dir_ino, inode->ino, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&fs->control->file_ino[file], inode->ino, __ATOMIC_RELEASE);
    struct fuse_entry_param entry;
    memset(&entry, 0, sizeof(entry));
    entry.ino = inode->ino;
    control_stat(fs, inode->ino, file, &entry.attr);
    entry.attr_timeout = fs->attr_timeout_s;
    entry.entry_timeout = fs->entry_timeout_s;
    inode_put(fs->inodes, inode);
    fs_reply_entry(req, &entry);
}

static void control_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_of(req);
    if (fs->control && parent == FUSE_ROOT_ID && strcmp(name, NAME_MAP_RESERVED_ROOT_NAME) == 0) {
        reply_control_entry(req, fs, NAME_MAP_RESERVED_ROOT_NAME, -1);
        return;
    }
    if (is_control_dir(fs, parent)) {
        for (int i = 0; i < CONTROL_FILE_COUNT; i++) {
            if (strcmp(name, control_names[i]) == 0) {
                char *path = g_strconcat(NAME_MAP_RESERVED_ROOT_NAME "/", name, NULL);
                reply_control_entry(req, fs, path, i);
                g_free(path);
                return;
            }
        }
        fs_reply_err(req, ENOENT);
        return;
    }
    count(&fs->counters.lookups);
    inner(req)->lookup(req, parent, name);
}

static void control_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    int file = control_file_of(fs, ino);
    GBytes *snapshot = fs->no_open && fs->control ? status_of_ino(fs->control, ino) : NULL;
    if (snapshot) {
        struct stat st;
        control_stat(fs, ino, CONTROL_STATUS, &st);
        st.st_size = (off_t)g_bytes_get_size(snapshot);
        g_bytes_unref(snapshot);
        fuse_reply_attr(req, &st, fs->attr_timeout_s);
        return;
    }
    if (file >= 0 || is_control_dir(fs, ino)) {
        struct stat st;
        control_stat(fs, ino, file, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    count(&fs->counters.getattrs);
    inner(req)->getattr(req, ino, fi);
}

static void control_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                            struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    int file = control_file_of(fs, ino);
    if (file >= 0 || is_control_dir(fs, ino)) {
        /* O_TRUNC of a hint file arrives here: nothing to truncate (a write at 0 restarts). */
        if (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
                       FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)) {
            fs_reply_err(req, EPERM);
            return;
        }
        struct stat st;
        control_stat(fs, ino, file, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    if (inner(req)->setattr)
        inner(req)->setattr(req, ino, attr, to_set, fi);
    else
        fs_reply_err(req, EROFS);
}

/* ---- the control directory (empty to readdir) ---- */

static void control_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    if (!is_control_dir(fs, ino)) {
        inner(req)->opendir(req, ino, fi);
        return;
    }
    struct fs_dir *dir = g_new0(struct fs_dir, 1);
    g_mutex_init(&dir->lock);
    dir->listing = dir_listing_new(NULL, 0);
    dir->ino = ino;
    dir->path = g_strdup(NAME_MAP_RESERVED_ROOT_NAME);
    fs_handle_opened(fs, dir, FS_HANDLE_DIR, fi);
    if (fuse_reply_open(req, fi) != 0) {
        if (fs_handle_closed(fs, dir))
            fs_dir_free(dir);
    }
}

/* ---- control files ---- */

static uint64_t counter_value(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static char *status_snapshot(struct fs_control *control, size_t *len)
{
    GString *text = g_string_new(NULL);
    const struct fs_counters *ops = &control->fs->counters;
    g_string_append_printf(
        text,
        "fuse_lookups: %" PRIu64 "\nfuse_getattrs: %" PRIu64 "\nfuse_opens: %" PRIu64
        "\nfuse_reads: %" PRIu64 "\nfuse_flushes: %" PRIu64 "\nfuse_releases: %" PRIu64
        "\nkernel_stores: %" PRIu64 "\nkernel_store_bytes: %" PRIu64 "\n",
        counter_value(&ops->lookups), counter_value(&ops->getattrs), counter_value(&ops->opens),
        counter_value(&ops->reads), counter_value(&ops->flushes), counter_value(&ops->releases),
        counter_value(&ops->kernel_stores), counter_value(&ops->kernel_store_bytes));
    /* 1: the kernel opens and closes files without requests (read-only mounts, fs_noopen.c). */
    g_string_append_printf(text, "skip_open: %d\n", control->fs->no_open ? 1 : 0);
    if (control->prefetcher) {
        struct prefetch_stats s;
        prefetch_get_stats(control->prefetcher, &s);
        g_string_append_printf(
            text,
            "mount_id: %s\ncompose: %s\ncompose_decision: %s (%s)\nhints_total: %" PRIu64
            "\nhints_done: %" PRIu64 "\nhint_position: %" PRIu64 "\nhints_opened: %" PRIu64
            "\nwarmup_total: %" PRIu64 "\nwarmup_done: %" PRIu64 "\nwarmup_bytes: %" PRIu64
            "\nwarmup_skipped: %" PRIu64 "\nauto_queued: %" PRIu64 "\nfiles_prefetched: %" PRIu64
            "\nbytes_prefetched: %" PRIu64 "\nfiles_already_cached: %" PRIu64
            "\nfiles_failed: %" PRIu64 "\ncomposes: %" PRIu64 "\ncompose_failures: %" PRIu64
            "\ncomposite_gets: %" PRIu64 "\ndirect_gets: %" PRIu64 "\ntemps_live: %" PRIu64
            "\ntemps_deleted: %" PRIu64 "\ntemps_swept: %" PRIu64 "\nbuffers_reused: %" PRIu64
            "\nbuffers_fresh: %" PRIu64 "\nkernel_evictions: %" PRIu64 "\nkernel_probes: %" PRIu64
            "\nkernel_probe_misses: %" PRIu64 "\nhint_lists: %" PRIu64 "\nhints_missing: %" PRIu64
            "\nhint_lists_dropped: %" PRIu64 "\nwarmup_fetched: %" PRIu64
            "\nwarmup_cached: %" PRIu64 "\nwarmup_too_large: %" PRIu64 "\nwarmup_failed: %" PRIu64
            "\nwarmup_missing: %" PRIu64 "\nwarmup_cancelled: %" PRIu64 "\n",
            prefetch_mount_id(control->prefetcher), s.compose_enabled ? "on" : "off",
            control->compose.on ? "on" : "off", control->compose.reason, s.hints_total,
            s.hints_done, s.hint_position, s.hints_opened, s.warmup_total, s.warmup_done,
            s.warmup_bytes, s.warmup_skipped, s.auto_queued, s.files_fetched, s.bytes_fetched,
            s.files_already_cached, s.files_failed, s.composes, s.compose_failures,
            s.composite_gets, s.direct_gets, s.temps_live, s.temps_deleted, s.temps_swept,
            s.buffers_reused, s.buffers_fresh, s.kernel_evictions, s.kernel_probes,
            s.kernel_probe_misses, s.hint_lists, s.hints_missing, s.hint_lists_dropped,
            s.warmup_fetched, s.warmup_cached, s.warmup_too_large, s.warmup_failed,
            s.warmup_missing, s.warmup_cancelled);
        g_string_append_printf(
            text,
            "compose_share: %.3f\ncompose_share_decreases: %" PRIu64
            "\nbatches_not_composed: %" PRIu64 "\nbatches_cheaper_direct: %" PRIu64
            "\nconcurrency_limit: %u\nconcurrency_max: %u"
            "\nconcurrency_decreases: %" PRIu64 "\nrate_limited_reads: %" PRIu64
            "\nrate_limited_writes: %" PRIu64 "\ncomposes_throttled: %" PRIu64
            "\ntemps_delete_resent: %" PRIu64 "\ntemps_delete_waiting: %" PRIu64 "\n",
            s.compose_share, s.compose_share_decreases, s.batches_not_composed,
            s.batches_cheaper_direct, s.concurrency_limit, s.concurrency_max,
            s.concurrency_decreases, s.rate_limited_reads, s.rate_limited_writes,
            s.composes_throttled, s.temps_delete_resent, s.temps_delete_waiting);
        struct prefetch_hint_list_stats *lists = NULL;
        size_t list_count = 0;
        prefetch_get_hint_lists(control->prefetcher, &lists, &list_count);
        for (size_t i = 0; i < list_count; i++)
            g_string_append_printf(text,
                                   "hint_list_%d: total=%" PRIu64 " done=%" PRIu64
                                   " missing=%" PRIu64 " opened=%" PRIu64 " position=%" PRIu64 "\n",
                                   lists[i].owner.pid, lists[i].total, lists[i].done,
                                   lists[i].missing, lists[i].opened, lists[i].position);
        g_free(lists);
    }
    if (control->cache) {
        struct content_cache_stats c;
        content_cache_get_stats(control->cache, &c);
        g_string_append_printf(text,
                               "cache_memory_hits: %" PRIu64 "\ncache_disk_hits: %" PRIu64
                               "\ncache_misses: %" PRIu64 "\ncache_inserts: %" PRIu64
                               "\ncache_evictions: %" PRIu64 "\ncache_pending_waits: %" PRIu64
                               "\ncache_corrupt_files: %" PRIu64 "\ncache_memory_bytes: %zu\n"
                               "cache_memory_entries: %zu\ncache_disk_bytes: %" PRIu64
                               "\ncache_disk_entries: %zu\n"
                               "cache_capacity: %" PRIu64 "\ncache_dropped_stored: %" PRIu64 "\n"
                               "cache_large_hits: %" PRIu64 "\ncache_large_fills: %" PRIu64
                               "\ncache_large_abandoned: %" PRIu64 "\n",
                               c.memory_hits, c.disk_hits, c.misses, c.inserts, c.evictions,
                               c.pending_waits, c.corrupt_files, c.memory_used, c.memory_entries,
                               c.disk_used, c.disk_entries, content_cache_capacity(control->cache),
                               c.dropped_stored, c.large_hits, c.large_fills, c.large_abandoned);
    }
    if (control->batcher) {
        struct miss_batch_stats m;
        miss_batch_get_stats(control->batcher, &m);
        g_string_append_printf(
            text,
            "miss_batch_compose: %s\nmiss_batch_misses: %" PRIu64 "\nmiss_batch_windows: %" PRIu64
            "\nmiss_batch_composed: %" PRIu64 "\nmiss_batch_direct: %" PRIu64
            "\nmiss_batch_fallbacks: %" PRIu64 "\nmiss_batch_composes: %" PRIu64
            "\nmiss_batch_compose_failures: %" PRIu64 "\nmiss_batch_temps_live: %" PRIu64
            "\nmiss_batch_temps_deleted: %" PRIu64 "\n",
            m.compose_enabled ? "on" : "off", m.misses, m.windows, m.composed, m.direct,
            m.fallbacks, m.composes, m.compose_failures, m.temps_live, m.temps_deleted);
    }
    fs_status_append(control->fs, text);
    *len = text->len;
    return g_string_free(text, FALSE);
}

static void control_open_file(fuse_req_t req, struct fs *fs, int file, struct fuse_file_info *fi)
{
    int accmode = fi->flags & O_ACCMODE;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    if (file == CONTROL_STATUS) {
        if (accmode != O_RDONLY) {
            fs_reply_err(req, EACCES);
            return;
        }
    } else {
        if (accmode == O_RDONLY || (file == CONTROL_PREFETCH && accmode != O_WRONLY)) {
            fs_reply_err(req, EACCES);
            return;
        }
        /* Only the mount owner (or root) steers the prefetcher: also with allow_other. */
        if (ctx->uid != fs->cfg->uid && ctx->uid != 0) {
            fs_reply_err(req, EACCES);
            return;
        }
        if (!fs->control->prefetcher) {
            fs_reply_err(req, EIO);
            return;
        }
    }
    struct control_handle *handle = g_new0(struct control_handle, 1);
    handle->magic = CONTROL_HANDLE_MAGIC;
    live_add(handle);
    handle->file = (enum control_file)file;
    if (file == CONTROL_STATUS) {
        handle->status_text = status_snapshot(fs->control, &handle->status_len);
    } else {
        hint_lines_init(&handle->parser, fs->cfg->mountpoint);
        handle->lines = g_ptr_array_new_with_free_func(g_free);
        if (file == CONTROL_WARMUP && accmode == O_RDWR)
            handle->warm_session =
                __atomic_add_fetch(&fs->control->next_warm_session, 1, __ATOMIC_RELAXED);
        if (file == CONTROL_PREFETCH) {
            prefetch_hint_owner_of((int)ctx->pid, &handle->owner);
            handle->dir_counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        }
    }
    fs_handle_expose(fs, handle, fi);
    __atomic_add_fetch(&fs->control_handles_open, 1, __ATOMIC_SEQ_CST);
    fi->direct_io = 1;
    fi->nonseekable = 0;
    if (fuse_reply_open(req, fi) != 0) {
        fs_handle_unexpose(fs, handle);
        __atomic_sub_fetch(&fs->control_handles_open, 1, __ATOMIC_SEQ_CST);
        handle->magic = 0;
        hint_lines_clear(&handle->parser);
        if (handle->lines)
            g_ptr_array_free(handle->lines, TRUE);
        if (handle->dir_counts)
            g_hash_table_destroy(handle->dir_counts);
        g_free(handle->status_text);
        live_remove(handle);
        g_free(handle);
    }
}

static void control_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    if (fs->no_open) {
        /* The kernel offered to open files without asking (FUSE_CAP_NO_OPEN_SUPPORT): this
         * answer makes it stop sending OPEN and RELEASE on this connection. */
        count(&fs->counters.opens);
        fs_reply_err(req, ENOSYS);
        return;
    }
    int file = control_file_of(fs, ino);
    if (file >= 0) {
        control_open_file(req, fs, file, fi);
        return;
    }
    if (is_control_dir(fs, ino)) {
        fs_reply_err(req, EISDIR);
        return;
    }
    char *path = NULL;
    if (fs->control && fs->control->prefetcher && (fi->flags & O_ACCMODE) == O_RDONLY) {
        struct inode *inode = inode_table_get(fs->inodes, ino);
        if (inode && inode->kind == META_FILE)
            path = g_strdup(inode->path);
        inode_put(fs->inodes, inode);
    }
    if (path) {
        /* Before the open itself, so the prefetcher moves on while the open revalidates.
         * A hinted path needs no guess at the order: in a shuffled epoch a few opens in name
         * order by chance would queue files that the hints fetch later anyway. */
        if (!prefetch_note_open(fs->control->prefetcher, path))
            note_open_in_listing_order(fs, path);
        g_free(path);
    }
    count(&fs->counters.opens);
    inner(req)->open(req, ino, fi);
}

/* No-open mounts: a READ of a status inode: its snapshot. */
static void read_status_snapshot(fuse_req_t req, GBytes *snapshot, size_t size, off_t off)
{
    if (off < 0) {
        fs_reply_err(req, EINVAL);
        return;
    }
    size_t total = 0;
    const char *text = g_bytes_get_data(snapshot, &total);
    size_t start = MIN((size_t)off, total);
    fuse_reply_buf(req, text + start, MIN(size, total - start));
}

/* No-open mounts: the first READ of a file is the progress an OPEN used to report (the pages
 * of a file the kernel holds are read with no request, and then nothing is to be fetched). */
static void note_first_read(struct fs *fs, fuse_ino_t ino)
{
    if (!fs->control->prefetcher)
        return;
    struct inode *inode = inode_table_get(fs->inodes, ino);
    char *path = inode && inode->kind == META_FILE ? g_strdup(inode->path) : NULL;
    inode_put(fs->inodes, inode);
    if (!path)
        return;
    if (!prefetch_note_open(fs->control->prefetcher, path))
        note_open_in_listing_order(fs, path);
    g_free(path);
}

static void control_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                         struct fuse_file_info *fi)
{
    struct control_handle *handle = handle_of(fi);
    struct fs *fs = fs_of(req);
    if (!handle && fs->no_open && fi->fh == 0) {
        GBytes *snapshot = status_of_ino(fs->control, ino);
        if (snapshot) {
            read_status_snapshot(req, snapshot, size, off);
            g_bytes_unref(snapshot);
            return;
        }
        int file = control_file_of(fs, ino);
        if (file >= 0 || is_control_dir(fs, ino)) {
            fs_reply_err(req, EBADF);
            return;
        }
        if (off == 0)
            note_first_read(fs, ino); /* what an open told the prefetcher */
    }
    if (!handle) {
        count(&fs->counters.reads);
        inner(req)->read(req, ino, size, off, fi);
        return;
    }
    if (handle->warm_session != 0) {
        fuse_reply_buf(req, NULL, 0); /* a warm-up session reads as empty */
        return;
    }
    if (!handle->status_text || off < 0) {
        fs_reply_err(req, EBADF);
        return;
    }
    /* A copy: release may free the handle while this reply is still being written. */
    size_t start = MIN((size_t)off, handle->status_len);
    size_t len = MIN(size, handle->status_len - start);
    char *copy = g_memdup2(handle->status_text + start, len ? len : 1);
    fuse_reply_buf(req, copy, len);
    g_free(copy);
}

/* Hands the complete lines collected so far to the prefetcher. */
static void flush_lines(struct fs *fs, struct control_handle *handle)
{
    if (handle->lines->len == 0)
        return;
    const char *const *paths = (const char *const *)handle->lines->pdata;
    if (handle->file == CONTROL_PREFETCH) {
        struct fs_control *control = fs->control;
        for (guint i = 0; i < handle->lines->len; i++) {
            char *dir = dir_of(paths[i]);
            size_t count = GPOINTER_TO_SIZE(g_hash_table_lookup(handle->dir_counts, dir)) + 1;
            if (count == CONTROL_HINT_LIST_MIN) {
                g_mutex_lock(&control->auto_lock);
                if (g_hash_table_size(control->hint_dirs) < CONTROL_HINT_DIRS)
                    g_hash_table_add(control->hint_dirs, g_strdup(dir));
                g_mutex_unlock(&control->auto_lock);
            }
            if (count <= CONTROL_HINT_LIST_MIN &&
                (count > 1 || g_hash_table_size(handle->dir_counts) < CONTROL_HINT_DIRS))
                g_hash_table_replace(handle->dir_counts, dir, GSIZE_TO_POINTER(count));
            else
                g_free(dir);
        }
        int rc =
            prefetch_hints_append(control->prefetcher, &handle->owner, paths, handle->lines->len);
        if (rc < 0 && handle->error == 0) {
            flog_warn("fs",
                      "hints of process %d refused: %u hint lists already (one per "
                      "writing process)",
                      handle->owner.pid, PREFETCH_MAX_HINT_LISTS);
            handle->error = rc;
        }
    } else {
        prefetch_add_warmup(fs->control->prefetcher, handle->warm_session, paths,
                            handle->lines->len);
    }
    g_ptr_array_set_size(handle->lines, 0);
}

struct line_target {
    struct fs *fs;
    struct control_handle *handle;
};

/* A path from the parser: kept, and handed over in batches. */
static void take_line(const char *path, void *user)
{
    struct line_target *target = user;
    g_ptr_array_add(target->handle->lines, g_strdup(path));
    if (target->handle->lines->len >= CONTROL_HINT_BATCH)
        flush_lines(target->fs, target->handle);
}

static void control_consume(struct fs *fs, struct control_handle *handle, const char *data,
                            size_t size, off_t off)
{
    if (off == 0 && handle->file == CONTROL_PREFETCH) {
        hint_lines_restart(&handle->parser);
        g_ptr_array_set_size(handle->lines, 0);
        handle->error = prefetch_hints_reset(fs->control->prefetcher, &handle->owner);
        g_hash_table_remove_all(handle->dir_counts);
        if (handle->error < 0)
            flog_warn("fs",
                      "hints of process %d refused: %u hint lists already (one per "
                      "writing process)",
                      handle->owner.pid, PREFETCH_MAX_HINT_LISTS);
    }
    if (handle->error < 0)
        return;
    struct line_target target = {fs, handle};
    hint_lines_feed(&handle->parser, data, size, take_line, &target);
    flush_lines(fs, handle);
}

static void control_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                          struct fuse_file_info *fi)
{
    struct control_handle *handle = handle_of(fi);
    if (!handle) {
        if (inner(req)->write)
            inner(req)->write(req, ino, buf, size, off, fi);
        else
            fs_reply_err(req, EBADF);
        return;
    }
    if (!handle->lines) {
        fs_reply_err(req, EBADF);
        return;
    }
    control_consume(fs_of(req), handle, buf, size, off);
    if (handle->error < 0)
        fs_reply_err(req, -handle->error);
    else
        fuse_reply_write(req, size);
}

static void control_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
                              struct fuse_file_info *fi)
{
    struct control_handle *handle = handle_of(fi);
    if (!handle) {
        inner(req)->write_buf(req, ino, bufv, off, fi);
        return;
    }
    size_t size = fuse_buf_size(bufv);
    char *copy = g_try_malloc(size ? size : 1);
    if (!copy || !handle->lines) {
        g_free(copy);
        fs_reply_err(req, copy ? EBADF : ENOMEM);
        return;
    }
    struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
    dst.buf[0].mem = copy;
    ssize_t got = fuse_buf_copy(&dst, bufv, 0);
    if (got < 0) {
        g_free(copy);
        fs_reply_err(req, (int)-got);
        return;
    }
    control_consume(fs_of(req), handle, copy, (size_t)got, off);
    g_free(copy);
    if (handle->error < 0)
        fs_reply_err(req, -handle->error);
    else
        fuse_reply_write(req, (size_t)got);
}

static void control_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                          struct fuse_file_info *fi, unsigned flags, const void *in_buf,
                          size_t in_bufsz, size_t out_bufsz)
{
    struct fs *fs = fs_of(req);
    if (!is_control_dir(fs, ino) || cmd != CONTROL_IOC_HINTS) {
        /* CPython's isatty at every open (TCGETS), among others: not a terminal. */
        fs_reply_err(req, ENOTTY);
        return;
    }
    const struct control_hint_chunk *chunk = in_buf;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    if (in_bufsz < sizeof(*chunk) || chunk->length > sizeof(chunk->data)) {
        fs_reply_err(req, EINVAL);
        return;
    }
    if (ctx->uid != fs->cfg->uid && ctx->uid != 0) {
        fs_reply_err(req, EACCES); /* as for opening .fluxfs/prefetch */
        return;
    }
    if (!fs->control->prefetcher) {
        fs_reply_err(req, EIO);
        return;
    }
    /* One chunk is one short-lived writer of the process's list. */
    struct control_handle handle;
    memset(&handle, 0, sizeof(handle));
    handle.file = CONTROL_PREFETCH;
    prefetch_hint_owner_of((int)ctx->pid, &handle.owner);
    hint_lines_init(&handle.parser, fs->cfg->mountpoint);
    handle.lines = g_ptr_array_new_with_free_func(g_free);
    handle.dir_counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    if (chunk->flags & CONTROL_HINT_CHUNK_NEW) {
        handle.error = prefetch_hints_reset(fs->control->prefetcher, &handle.owner);
        if (handle.error < 0)
            flog_warn("fs",
                      "hints of process %d refused: %u hint lists already (one per "
                      "writing process)",
                      handle.owner.pid, PREFETCH_MAX_HINT_LISTS);
    }
    if (handle.error == 0) {
        struct line_target target = {fs, &handle};
        hint_lines_feed(&handle.parser, chunk->data, chunk->length, take_line, &target);
        hint_lines_finish(&handle.parser, take_line, &target);
        flush_lines(fs, &handle);
    }
    g_ptr_array_free(handle.lines, TRUE);
    hint_lines_clear(&handle.parser);
    g_hash_table_destroy(handle.dir_counts);
    if (handle.error < 0)
        fs_reply_err(req, -handle.error);
    else
        fuse_reply_ioctl(req, 0, NULL, 0);
}

static void control_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_of(req);
    if (fs->no_open && !handle_of(fi)) {
        /* Files opened without asking are flushed on close: nothing to commit on a read-only
         * mount, and ENOSYS makes the kernel stop sending FLUSH. */
        count(&fs->counters.flushes);
        fs_reply_err(req, ENOSYS);
        return;
    }
    if (handle_of(fi)) {
        fs_reply_err(req, 0);
        return;
    }
    count(&fs_of(req)->counters.flushes);
    inner(req)->flush(req, ino, fi);
}

static void control_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct control_handle *handle = handle_of(fi);
    if (!handle) {
        count(&fs_of(req)->counters.releases);
        inner(req)->release(req, ino, fi);
        return;
    }
    struct fs *fs = fs_of(req);
    if (handle->lines) {
        if (handle->error == 0) {
            struct line_target target = {fs, handle};
            hint_lines_finish(&handle->parser, take_line, &target); /* no newline at the end */
            flush_lines(fs, handle);
        }
        g_ptr_array_free(handle->lines, TRUE);
        hint_lines_clear(&handle->parser);
    }
    if (handle->warm_session != 0 && fs->control->prefetcher) {
        size_t cancelled = prefetch_cancel_warmup(fs->control->prefetcher, handle->warm_session);
        if (cancelled > 0)
            flog_info("fs", "a warm-up session ended: %zu queued paths dropped", cancelled);
    }
    if (handle->dir_counts)
        g_hash_table_destroy(handle->dir_counts);
    g_free(handle->status_text);
    handle->magic = 0;
    fs_handle_unexpose(fs, handle);
    __atomic_sub_fetch(&fs->control_handles_open, 1, __ATOMIC_SEQ_CST);
    live_remove(handle);
    g_free(handle);
    fs_reply_err(req, 0);
}

void fs_control_adopt_inodes(struct fs *fs)
{
    struct fs_control *control = __atomic_load_n(&fs->control, __ATOMIC_ACQUIRE);
    if (!control)
        return;
    uint64_t dir = inode_table_find_path(fs->inodes, NAME_MAP_RESERVED_ROOT_NAME);
    if (dir)
        __atomic_store_n(&control->dir_ino, dir, __ATOMIC_RELEASE);
    for (int file = 0; file < CONTROL_FILE_COUNT; file++) {
        char *path = g_strdup_printf("%s/%s", NAME_MAP_RESERVED_ROOT_NAME, control_names[file]);
        uint64_t ino = inode_table_find_path(fs->inodes, path);
        if (ino)
            __atomic_store_n(&control->file_ino[file], ino, __ATOMIC_RELEASE);
        g_free(path);
    }
}

void fs_control_render_metrics(struct fs *fs, GString *out)
{
    struct fs_control *control = __atomic_load_n(&fs->control, __ATOMIC_ACQUIRE);
    if (!control)
        return;
    static const char counter[] = "counter", gauge[] = "gauge";
    if (control->prefetcher) {
        struct prefetch_stats s;
        prefetch_get_stats(control->prefetcher, &s);
        const struct {
            const char *name, *type, *help;
            uint64_t value;
        } families[] = {
            {"fluxfs_prefetch_hint_lists", gauge,
             "Live hint lists (one per writing process, e.g. per DDP rank).", s.hint_lists},
            {"fluxfs_prefetch_hints", gauge, "Paths in the live hint lists.", s.hints_total},
            {"fluxfs_prefetch_hints_done", gauge,
             "Hinted paths of the live lists fetched or skipped.", s.hints_done},
            {"fluxfs_prefetch_hints_missing", gauge,
             "Hinted paths of the live lists that name no file.", s.hints_missing},
            {"fluxfs_prefetch_hint_position", gauge,
             "Highest hinted path opened plus one, summed over the live lists.", s.hint_position},
            {"fluxfs_prefetch_kernel_probe_misses_count", counter,
             "Hinted files the kernel no longer held when asked (fetched again).",
             s.kernel_probe_misses},
            {"fluxfs_prefetch_files_count", counter, "Files put into the cache by prefetch.",
             s.files_fetched},
            {"fluxfs_prefetch_bytes_count", counter, "Bytes put into the cache by prefetch.",
             s.bytes_fetched},
            {"fluxfs_prefetch_files_failed_count", counter, "Prefetches that failed.",
             s.files_failed},
            {"fluxfs_prefetch_composes_count", counter, "Compose batches made by prefetch.",
             s.composes},
            {"fluxfs_prefetch_compose_failures_count", counter, "Compose batches that failed.",
             s.compose_failures},
            {"fluxfs_prefetch_composes_throttled_count", counter,
             "Composes refused with 429 (not retried: fetched with plain GETs instead).",
             s.composes_throttled},
            {"fluxfs_prefetch_batches_not_composed_count", counter,
             "Compose-worthy batches fetched with plain GETs because the compose share was "
             "lowered after 429s.",
             s.batches_not_composed},
            {"fluxfs_prefetch_batches_cheaper_direct_count", counter,
             "Compose-worthy batches fetched with plain GETs because --compose auto found them "
             "cheaper than a compose whose temporary soft delete would bill.",
             s.batches_cheaper_direct},
            {"fluxfs_prefetch_compose_share_decreases_count", counter,
             "Times the compose share was halved after 429s to writes.", s.compose_share_decreases},
            {"fluxfs_prefetch_concurrency_limit", gauge,
             "Prefetch batches allowed in flight now (AIMD under 429s to reads).",
             s.concurrency_limit},
            {"fluxfs_prefetch_concurrency_max", gauge,
             "Prefetch batches in flight at most (the prefetch workers).", s.concurrency_max},
            {"fluxfs_prefetch_concurrency_decreases_count", counter,
             "Times the prefetch concurrency was halved after 429s to reads.",
             s.concurrency_decreases},
            {"fluxfs_prefetch_temp_delete_resent_count", counter,
             "Deletes of compose temporaries sent again after running out of retries.",
             s.temps_delete_resent},
            {"fluxfs_prefetch_temps_live", gauge, "Compose temporaries made and not yet deleted.",
             s.temps_live},
            {"fluxfs_prefetch_auto_queued_count", counter,
             "Files queued by listing-order detection.", s.auto_queued},
            {"fluxfs_prefetch_warmup_bytes_count", counter, "Bytes fetched by warmup.",
             s.warmup_bytes},
        };
        for (size_t i = 0; i < G_N_ELEMENTS(families); i++) {
            metrics_render_family(out, families[i].name, families[i].type, families[i].help);
            metrics_render_sample(out, families[i].name, NULL, families[i].value);
        }
        metrics_render_family(out, "fluxfs_prefetch_compose_share_ratio", gauge,
                              "Share of compose-worthy prefetch batches composed now (AIMD: "
                              "halved on 429s to writes, raised while none are refused).");
        g_string_append_printf(out, "fluxfs_prefetch_compose_share_ratio %.4f\n", s.compose_share);
        metrics_render_family(out, "fluxfs_gcs_rate_limited_count", counter,
                              "Cloud Storage attempts answered 429, retried or not, by class "
                              "(read: GET/HEAD; write: the rest).");
        metrics_render_sample(out, "fluxfs_gcs_rate_limited_count", "class=\"read\"",
                              s.rate_limited_reads);
        metrics_render_sample(out, "fluxfs_gcs_rate_limited_count", "class=\"write\"",
                              s.rate_limited_writes);
    }
    if (control->cache) {
        struct content_cache_stats c;
        content_cache_get_stats(control->cache, &c);
        metrics_render_family(out, "fluxfs_cache_hits_count", counter,
                              "Content cache hits by tier.");
        metrics_render_sample(out, "fluxfs_cache_hits_count", "tier=\"memory\"", c.memory_hits);
        metrics_render_sample(out, "fluxfs_cache_hits_count", "tier=\"disk\"", c.disk_hits);
        const struct {
            const char *name, *type, *help;
            uint64_t value;
        } families[] = {
            {"fluxfs_cache_misses_count", counter, "Content cache misses.", c.misses},
            {"fluxfs_cache_inserts_count", counter, "Objects put into the content cache.",
             c.inserts},
            {"fluxfs_cache_evictions_count", counter, "Content cache evictions.", c.evictions},
            {"fluxfs_cache_memory_bytes", gauge, "Bytes in the memory tier.", c.memory_used},
            {"fluxfs_cache_disk_bytes", gauge, "Bytes in the disk tier.", c.disk_used},
            {"fluxfs_cache_entries", gauge, "Objects in the memory tier.", c.memory_entries},
            {"fluxfs_cache_capacity_bytes", gauge, "The content cache's capacity.",
             content_cache_capacity(control->cache)},
        };
        for (size_t i = 0; i < G_N_ELEMENTS(families); i++) {
            metrics_render_family(out, families[i].name, families[i].type, families[i].help);
            metrics_render_sample(out, families[i].name, NULL, families[i].value);
        }
    }
    if (control->batcher) {
        struct miss_batch_stats m;
        miss_batch_get_stats(control->batcher, &m);
        metrics_render_family(out, "fluxfs_miss_batch_misses_count", counter,
                              "Demand misses gathered by --batch-misses.");
        metrics_render_sample(out, "fluxfs_miss_batch_misses_count", NULL, m.misses);
        metrics_render_family(out, "fluxfs_miss_batch_composes_count", counter,
                              "Compose batches of demand misses.");
        metrics_render_sample(out, "fluxfs_miss_batch_composes_count", NULL, m.composes);
    }
}

void fs_control_decorate(struct fs_layer *layer, struct fuse_lowlevel_ops *ops)
{
    layer->inner = *ops;
    ops->init = control_init;
    ops->destroy = control_destroy;
    ops->lookup = control_lookup;
    ops->getattr = control_getattr;
    ops->setattr = control_setattr;
    ops->opendir = control_opendir;
    ops->open = control_open;
    ops->read = control_read;
    ops->write = control_write;
    if (layer->inner.write_buf)
        ops->write_buf = control_write_buf;
    if (layer->inner.flush)
        ops->flush = control_flush;
    ops->release = control_release;
    ops->ioctl = control_ioctl;
    ops->retrieve_reply = control_retrieve_reply;
}
