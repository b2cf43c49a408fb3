/* Parallel listing with key-range splitting and work stealing (see include/fluxfs/listing.h). */
#include "fluxfs/listing.h"

#include <errno.h>
#include <string.h>

#include "fluxfs/key_range.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics.h"

/* Pieces are cut one page ahead of the names just seen (slightly under a page, see
 * key_range_split), so each piece is usually listed by one request, all pieces at once, instead
 * of a chain of pages one round trip after another. */
#define LISTING_STEP_PAGES      1
#define LISTING_MAX_PARALLELISM 256
/* A range is split only when about this many pages of it remain. */
#define LISTING_MIN_STEAL_PAGES 3
/* Speculative pieces: those cut ahead of the listing's frontier (the range reaching the end of
 * the prefix) on extrapolation alone, before any page of them came back; past the end of a
 * directory they come back empty, each a wasted request. So nothing is cut ahead until the
 * directory proved large: after two full pages, one probe piece goes LISTING_FAR_PAGES pages
 * ahead (the range before it keeps the frontier's chain). A directory of two pages costs two
 * requests; one of three to about ten pages one extra (the probe), while the range before the
 * probe is split among workers once one of its pages came back full. When the probe finds
 * names, the directory has more than LISTING_FAR_PAGES pages: everything before it is known to
 * hold names (split freely), and the frontier may run LISTING_SPECULATIVE_PER_PAGE pieces per
 * page received ahead of itself, at most a round of requests. Pieces that came back nearly
 * empty keep counting against that budget, so the waste past the end stays within a round. */
#define LISTING_FAR_PAGES 8
/* Full pages before the probe: after one, a directory of two pages would cost three requests
 * (the listing of a large one would be a round trip shorter, about 4% in the benchmark). */
#define LISTING_PROBE_AFTER_PAGES    2
#define LISTING_SPECULATIVE_PER_PAGE 2.0
/* A speculative piece returning fewer than a page / this entries counts as wasted. */
#define LISTING_WASTED_FRACTION 8
/* Bytes per block of the names' chunk: a few blocks for a large directory (a small one's names
 * are copied out of it, see dir_listing_from_array_names). */
#define LISTING_NAMES_CHUNK (16 * 1024)

/* One key range [cursor, end) being listed by one worker slot. All fields: job->lock. */
struct list_range {
    char *cursor;      /* next startOffset (inclusive); NULL = from the start of the prefix */
    char *end;         /* endOffset (exclusive); NULL = to the end of the prefix */
    char *page_start;  /* where the last completed page started (density estimate) */
    char *sample_end;  /* NULL: [page_start, cursor) held a page; else [page_start,
                          sample_end) did (a piece cut ahead, none of its pages back yet) */
    char *chain_start; /* startOffset of the page-token chain in progress */
    char *chain_end;   /* endOffset of that chain; a steal changes `end` and breaks it */
    char *page_token;  /* next page of the chain; NULL = start a new chain at cursor */
    bool in_flight;
    bool done;
    bool proven;      /* a page of it came back full: there is more beyond the cursor */
    bool speculative; /* cut ahead of the frontier, no page of it back yet */
    bool far_probe;   /* the far probe, no page of it back yet */
};

struct listing_job {
    GMutex lock;
    GCond finished_cond;
    listing_page_fn page_fn;
    void *backend;
    char *prefix;
    char *prefix_end;      /* end of the whole prefix, NULL = unbounded */
    const char *delimiter; /* NULL or "/" */
    unsigned parallelism;
    unsigned page_size;
    bool include_trailing_delimiter;

    /* Protected by lock. */
    GPtrArray *ranges; /* struct list_range * */
    struct key_space space;
    bool planned;        /* the first page came back and the key space was learned */
    GArray *objects;     /* struct dir_entry (full names), unsorted, may contain duplicates */
    GArray *object_runs; /* struct object_run: each page's objects, sorted within it */
    GPtrArray *prefixes; /* char * (in names), unsorted, may contain duplicates */
    GStringChunk *names; /* the names of objects and prefixes */
    unsigned in_flight;
    unsigned requests;
    unsigned steals;
    unsigned speculative; /* ranges with speculative set */
    unsigned wasted;      /* speculative pieces that came back nearly empty */
    bool far_probe_sent;  /* the probe LISTING_FAR_PAGES ahead was cut */
    bool far_seen;        /* it found names: the directory is large */
    unsigned long entries_received;
    int error;
    bool finished;
    bool (*stop)(void *user); /* see listing_config; asked after every page */
    void *stop_user;
};

/* objects[start, start + len) came from one page, in order. */
struct object_run {
    guint start;
    guint len;
};

/* One request in flight: a snapshot of its parameters (the range may change meanwhile). */
struct range_request {
    struct listing_job *job;
    struct list_range *range;
    char *start;
    char *end;
    char *token;
    struct gcs_list_params params;
};

void listing_page_gcs(void *backend, const struct gcs_list_params *params, gcs_list_cb cb,
                      void *user)
{
    gcs_list_async(backend, params, cb, user);
}

char *listing_prefix_end(const char *prefix)
{
    size_t len = strlen(prefix);
    char *end = g_strdup(prefix);
    while (len > 0) {
        unsigned char last = (unsigned char)end[len - 1];
        if (last < 0xFF) {
            end[len - 1] = (char)(last + 1);
            end[len] = '\0';
            return end;
        }
        len--;
    }
    g_free(end);
    return NULL;
}

static void list_range_free(struct list_range *range)
{
    if (!range)
        return;
    g_free(range->cursor);
    g_free(range->end);
    g_free(range->page_start);
    g_free(range->sample_end);
    g_free(range->chain_start);
    g_free(range->chain_end);
    g_free(range->page_token);
    g_free(range);
}

static void set_string(char **field, const char *value)
{
    char *copy = g_strdup(value);
    g_free(*field);
    *field = copy;
}

/* The end of the range's density sample [page_start, sample_to). */
static const char *sample_to(const struct list_range *range)
{
    return range->sample_end ? range->sample_end : range->cursor;
}

static void break_chain(struct list_range *range)
{
    g_clear_pointer(&range->page_token, g_free);
}

static int compare_entry_names(gconstpointer a, gconstpointer b)
{
    const struct dir_entry *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static struct dir_entry *entry_at(GArray *entries, guint index)
{
    return &g_array_index(entries, struct dir_entry, index);
}

static int compare_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The next startOffset after a page whose last entry is `last`: the name itself for objects
 * (inclusive, de-duplicated later), and the first name past the whole prefix for a prefix
 * entry so its children are not walked again. */
static char *cursor_after(const char *last, bool last_is_prefix)
{
    if (last_is_prefix) {
        char *after = listing_prefix_end(last);
        if (after)
            return after;
    }
    return g_strdup(last);
}

/* The range whose end is the end of the whole prefix (or unbounded: the first range): the
 * frontier of a listing. */
static bool range_is_frontier(const struct listing_job *job, const struct list_range *range)
{
    return !range->end || g_strcmp0(range->end, job->prefix_end) == 0;
}

/* The unfinished frontier, NULL when it is done. */
static struct list_range *find_frontier(struct listing_job *job)
{
    for (guint i = job->ranges->len; i-- > 0;) {
        struct list_range *range = g_ptr_array_index(job->ranges, i);
        if (!range->done && range_is_frontier(job, range))
            return range;
    }
    return NULL;
}

/* The unfinished range with the widest remaining key span, other than `self`; NULL if none. */
static struct list_range *widest_range(struct listing_job *job, struct list_range *self)
{
    struct list_range *best = NULL;
    key_value best_width = 0;
    for (guint i = 0; i < job->ranges->len; i++) {
        struct list_range *range = g_ptr_array_index(job->ranges, i);
        /* Only ranges known to hold more than a page are split: a piece nobody has seen data
         * in yet may well be empty (extrapolation past the end of the directory). The frontier
         * grows only by cut_ahead, within the speculation budget. */
        if (range == self || range->done || !range->cursor || !range->proven ||
            range_is_frontier(job, range))
            continue;
        key_value width = key_range_width(&job->space, range->cursor, range->end);
        if (!best || width > best_width) {
            best = range;
            best_width = width;
        }
    }
    return best;
}

/* A finished worker takes the upper part of the widest range. Returns true if it got work. */
static bool steal_work(struct listing_job *job, struct list_range *thief)
{
    struct list_range *victim = widest_range(job, thief);
    if (!victim)
        return false;
    /* Not worth a request when the victim's page in flight (plus one) likely finishes it:
     * the end game would otherwise split the last pages into many nearly empty requests. */
    if (victim->page_start) {
        key_value page = key_range_width(&job->space, victim->page_start, sample_to(victim));
        key_value left = key_range_width(&job->space, victim->cursor, victim->end);
        if (page > 0 && left / page < LISTING_MIN_STEAL_PAGES)
            return false;
    }
    char *point = NULL;
    const char *hi = victim->end ? victim->end : job->prefix_end;
    if (key_range_split_sampled(&job->space, victim->cursor, hi, 2, victim->page_start,
                                sample_to(victim), LISTING_STEP_PAGES, &point) != 1)
        return false;
    set_string(&thief->cursor, point);
    set_string(&thief->end, victim->end);
    set_string(&thief->page_start, victim->page_start);
    set_string(&thief->sample_end, sample_to(victim));
    break_chain(thief);
    thief->done = false;
    /* Below a far probe that found names, every range is known to hold some. */
    thief->proven = victim->proven && job->far_seen;
    g_free(victim->end);
    victim->end = point;
    /* The victim's chain (if any) was for the old end; it continues from its cursor. */
    break_chain(victim);
    job->steals++;
    return true;
}

static unsigned active_ranges(struct listing_job *job)
{
    unsigned active = 0;
    for (guint i = 0; i < job->ranges->len; i++)
        if (!((struct list_range *)g_ptr_array_index(job->ranges, i))->done)
            active++;
    return active;
}

static void recruit_workers(struct listing_job *job, struct list_range *just_served)
{
    for (guint i = 0; i < job->ranges->len; i++) {
        struct list_range *idle = g_ptr_array_index(job->ranges, i);
        if (idle->done && !idle->in_flight && idle != just_served && !steal_work(job, idle))
            return;
    }
    while (active_ranges(job) < job->parallelism) {
        struct list_range *fresh = g_new0(struct list_range, 1);
        fresh->done = true;
        if (!steal_work(job, fresh)) {
            list_range_free(fresh);
            return;
        }
        g_ptr_array_add(job->ranges, fresh);
        metrics_add(METRICS_LIST_PARALLEL_RANGES, 1);
    }
}

/* Speculative pieces the job may have in flight now, by the pages of entries received. */
static unsigned speculation_budget(const struct listing_job *job)
{
    if (!job->far_seen)
        return 0;
    double pages = (double)job->entries_received / job->page_size;
    double budget = (pages - 1.0) * LISTING_SPECULATIVE_PER_PAGE;
    /* Never more than a round of requests: that also bounds the waste of a large listing. */
    return budget < 1.0 ? 0 : (unsigned)MIN(budget, (double)job->parallelism);
}

/* After two full pages: the frontier keeps [cursor, a point LISTING_FAR_PAGES pages ahead) and a
 * probe takes the rest. true when it was cut. */
static bool cut_far_probe(struct listing_job *job, struct list_range *frontier)
{
    if (job->far_probe_sent || !frontier->proven || frontier->sample_end ||
        job->entries_received < LISTING_PROBE_AFTER_PAGES * (unsigned long)job->page_size ||
        !frontier->cursor || !frontier->page_start)
        return false;
    char *point = NULL;
    if (key_range_split_sampled(&job->space, frontier->cursor, frontier->end, 2,
                                frontier->page_start, frontier->cursor, LISTING_FAR_PAGES,
                                &point) != 1)
        return false;
    struct list_range *probe = g_new0(struct list_range, 1);
    probe->cursor = point;
    probe->end = g_strdup(frontier->end);
    probe->page_start = g_strdup(frontier->page_start);
    probe->sample_end = g_strdup(frontier->cursor);
    probe->speculative = true;
    probe->far_probe = true;
    g_ptr_array_add(job->ranges, probe);
    metrics_add(METRICS_LIST_PARALLEL_RANGES, 1);
    /* Its page-token chain goes on: the next page starts right after the last name (a new
     * chain would list that name again, and cost a request more when the directory ends at
     * a page boundary). */
    set_string(&frontier->end, point);
    /* Not split before its next page came back full: the directory may end within it. */
    frontier->proven = false;
    job->speculative++;
    job->far_probe_sent = true;
    return true;
}

/* The far probe found names: every range before it holds some, so all may be split. */
static void far_probe_found(struct listing_job *job)
{
    job->far_seen = true;
    for (guint i = 0; i < job->ranges->len; i++) {
        struct list_range *range = g_ptr_array_index(job->ranges, i);
        if (!range->done && range->cursor && range->page_start && !range_is_frontier(job, range))
            range->proven = true;
    }
}

/* Cuts the far probe when due; else pieces of about a page (at the density of the frontier's
 * last page) ahead of the frontier's cursor into free worker slots, within the speculation
 * budget. The frontier keeps the first piece (the page it lists next, or has in flight); the
 * last piece becomes the new frontier. With no budget the frontier follows its page token. */
static void cut_ahead(struct listing_job *job, struct list_range *frontier)
{
    if (cut_far_probe(job, frontier))
        return;
    unsigned active = active_ranges(job);
    unsigned budget = speculation_budget(job);
    unsigned spent = job->speculative + job->wasted;
    if (active >= job->parallelism || budget <= spent || !frontier->cursor || !frontier->page_start)
        return;
    unsigned pieces = MIN(job->parallelism - active, budget - spent) + 1;
    char **points = g_new0(char *, pieces);
    size_t count = key_range_split_sampled(&job->space, frontier->cursor, frontier->end, pieces,
                                           frontier->page_start, sample_to(frontier),
                                           LISTING_STEP_PAGES, points);
    if (count > 0) {
        char *old_end = g_strdup(frontier->end);
        set_string(&frontier->end, points[0]);
        break_chain(frontier);
        for (size_t i = 0; i < count; i++) {
            struct list_range *range = g_new0(struct list_range, 1);
            range->cursor = points[i];
            range->end = i + 1 < count ? g_strdup(points[i + 1]) : g_strdup(old_end);
            range->page_start = g_strdup(frontier->page_start);
            range->sample_end = g_strdup(sample_to(frontier));
            range->speculative = true;
            g_ptr_array_add(job->ranges, range);
            metrics_add(METRICS_LIST_PARALLEL_RANGES, 1);
        }
        g_free(old_end);
        job->speculative += (unsigned)count;
    }
    g_free(points);
}

/* The greatest entry of a page (its last object or last prefix); NULL when empty. */
static const char *page_last(const struct gcs_list_page *page, bool *is_prefix)
{
    const char *last = NULL;
    *is_prefix = false;
    if (page->objects && page->objects->len > 0)
        last = ((const struct gcs_object *)g_ptr_array_index(page->objects, page->objects->len - 1))
                   ->name;
    if (page->prefixes && page->prefixes->len > 0) {
        const char *tail = g_ptr_array_index(page->prefixes, page->prefixes->len - 1);
        if (!last || strcmp(tail, last) > 0) {
            last = tail;
            *is_prefix = true;
        }
    }
    return last;
}

/* A page that follows a page token must move the listing forward: a server that answers a
 * token with that same token, or with a page that ends where the chain already was, would have
 * the listing ask for the same page forever. NULL when the page is believable, else why not. */
static const char *page_goes_nowhere(const struct list_range *range,
                                     const struct range_request *request,
                                     const struct gcs_list_page *page)
{
    if (!request->token || !page->next_page_token)
        return NULL;
    if (strcmp(request->token, page->next_page_token) == 0)
        return "the server answered a page token with the same page token";
    bool is_prefix;
    const char *last = page_last(page, &is_prefix);
    if (!last || !range->cursor)
        return NULL;
    char *next_cursor = cursor_after(last, is_prefix);
    bool stuck = strcmp(next_cursor, range->cursor) <= 0;
    g_free(next_cursor);
    return stuck ? "a page after a page token did not move past the previous page" : NULL;
}

/* Moves a page's entries into the job: each object becomes a compact entry (its name copied into
 * the job's chunk), so the page's objects are freed right after, on the thread that parsed them
 * (their memory is reused by the next page instead of piling up until the listing ends). *first
 * and *last point at the job's copies. */
static void collect_page(struct listing_job *job, struct gcs_list_page *page, const char **last,
                         bool *last_is_prefix, const char **first)
{
    *last = NULL;
    *first = NULL;
    *last_is_prefix = false;
    guint objects = page->objects ? page->objects->len : 0;
    guint prefixes = page->prefixes ? page->prefixes->len : 0;
    if (objects > 0) {
        gint64 now = g_get_monotonic_time();
        struct object_run run = {job->objects->len, objects};
        g_array_append_val(job->object_runs, run);
        g_array_set_size(job->objects, job->objects->len + objects);
        struct dir_entry *entries = entry_at(job->objects, run.start);
        for (guint i = 0; i < objects; i++) {
            const struct gcs_object *obj = g_ptr_array_index(page->objects, i);
            entries[i].name = g_string_chunk_insert(job->names, obj->name);
            entries[i].kind = meta_kind_of_object(obj);
            meta_attrs_from_object_at(&entries[i].attrs, obj, now);
        }
        *first = entries[0].name;
        *last = entries[objects - 1].name;
    }
    if (prefixes > 0) {
        guint base = job->prefixes->len;
        for (guint i = 0; i < prefixes; i++)
            g_ptr_array_add(job->prefixes, g_string_chunk_insert(
                                               job->names, g_ptr_array_index(page->prefixes, i)));
        const char *head = g_ptr_array_index(job->prefixes, base);
        const char *tail = g_ptr_array_index(job->prefixes, job->prefixes->len - 1);
        if (!*first || strcmp(head, *first) < 0)
            *first = head;
        if (!*last || strcmp(tail, *last) > 0) {
            *last = tail;
            *last_is_prefix = true;
        }
    }
    job->entries_received += objects + prefixes;
}

static void range_request_free(struct range_request *request)
{
    if (!request)
        return;
    g_free(request->start);
    g_free(request->end);
    g_free(request->token);
    g_free(request);
}

/* Builds requests for every idle unfinished range. Called with the lock held; the requests are
 * submitted after it is released. */
static GPtrArray *prepare_requests(struct listing_job *job)
{
    GPtrArray *requests = g_ptr_array_new();
    if (job->error)
        return requests;
    for (guint i = 0; i < job->ranges->len; i++) {
        struct list_range *range = g_ptr_array_index(job->ranges, i);
        if (range->done || range->in_flight)
            continue;
        struct range_request *request = g_new0(struct range_request, 1);
        request->job = job;
        request->range = range;
        if (range->page_token) {
            request->start = g_strdup(range->chain_start);
            request->end = g_strdup(range->chain_end);
            request->token = g_strdup(range->page_token);
        } else {
            request->start = g_strdup(range->cursor);
            request->end = g_strdup(range->end);
            set_string(&range->chain_start, range->cursor);
            set_string(&range->chain_end, range->end);
        }
        request->params.prefix = job->prefix;
        request->params.delimiter = job->delimiter;
        request->params.start_offset = request->start;
        request->params.end_offset = request->end;
        request->params.page_token = request->token;
        request->params.max_results = job->page_size;
        request->params.include_trailing_delimiter = job->include_trailing_delimiter;
        range->in_flight = true;
        job->in_flight++;
        job->requests++;
        g_ptr_array_add(requests, request);
    }
    return requests;
}

static void submit_requests(struct listing_job *job, GPtrArray *requests);

static void on_page(int err, struct gcs_list_page *page, void *user)
{
    struct range_request *request = user;
    struct listing_job *job = request->job;
    struct list_range *range = request->range;

    g_mutex_lock(&job->lock);
    job->in_flight--;
    range->in_flight = false;
    if (range->speculative) {
        range->speculative = false;
        job->speculative--;
        /* Nearly empty: probably past the end of the directory. It keeps its share of the
         * budget, so the waste of a listing stays within the budget. */
        guint got = page ? (page->objects ? page->objects->len : 0) +
                               (page->prefixes ? page->prefixes->len : 0)
                         : 0;
        if (!err && got < job->page_size / LISTING_WASTED_FRACTION)
            job->wasted++;
        if (range->far_probe) {
            range->far_probe = false;
            if (!err && got > 0)
                far_probe_found(job);
        }
    }
    const char *lie = err ? NULL : page_goes_nowhere(range, request, page);
    if (lie) {
        flog_error("core",
                   "list of '%s' [%s, %s): %s (page token '%s'); the listing fails "
                   "with EIO",
                   job->prefix, request->start ? request->start : "",
                   request->end ? request->end : "", lie, request->token);
        err = -EIO;
    }
    if (err) {
        if (!job->error)
            job->error = err;
        range->done = true;
    } else {
        const char *last, *first;
        bool last_is_prefix;
        collect_page(job, page, &last, &last_is_prefix, &first);
        bool chain_intact = g_strcmp0(range->end, request->end) == 0;
        if (!job->planned) {
            const char *samples_store[2] = {first, last};
            job->planned = true;
            GPtrArray *samples = g_ptr_array_new();
            for (guint i = 0; page->objects && i < page->objects->len; i++)
                g_ptr_array_add(samples, ((struct gcs_object *)page->objects->pdata[i])->name);
            for (guint i = 0; page->prefixes && i < page->prefixes->len; i++)
                g_ptr_array_add(samples, page->prefixes->pdata[i]);
            if (samples->len == 0) {
                g_ptr_array_add(samples, (gpointer)samples_store[0]);
                g_ptr_array_add(samples, (gpointer)samples_store[1]);
            }
            key_space_init(&job->space, job->prefix, (const char *const *)samples->pdata,
                           samples->len);
            g_ptr_array_free(samples, TRUE);
        }
        if (!page->next_page_token || !last) {
            if (page->next_page_token && !last && chain_intact) {
                /* An empty page that still has a next page: follow the token. */
                set_string(&range->page_token, page->next_page_token);
            } else {
                range->done = true;
            }
        } else {
            range->proven = true;
            char *next_cursor = cursor_after(last, last_is_prefix);
            g_free(range->page_start);
            range->page_start = range->cursor ? range->cursor : g_strdup(first);
            g_clear_pointer(&range->sample_end, g_free);
            range->cursor = next_cursor;
            if (range->end && strcmp(range->cursor, range->end) >= 0) {
                range->done = true;
            } else if (chain_intact) {
                set_string(&range->page_token, page->next_page_token);
            } else {
                break_chain(range);
            }
        }
        flog_trace("core", "list page of '%s' [%s, %s): %u entries, next %s%s", job->prefix,
                   request->start ? request->start : "", request->end ? request->end : "",
                   (page->objects ? page->objects->len : 0) +
                       (page->prefixes ? page->prefixes->len : 0),
                   range->cursor ? range->cursor : "", range->done ? " (done)" : "");
        if (range->done)
            steal_work(job, range);
    }
    /* Whoever wanted the listing is gone: send nothing more (pages in flight still land). */
    if (!job->error && job->stop && job->stop(job->stop_user))
        job->error = -EINTR;
    /* Speculate ahead of the frontier as far as the entries received so far allow (also while
     * its own page is in flight: that page then ends at the first cut point). */
    struct list_range *frontier = job->error || !job->planned ? NULL : find_frontier(job);
    if (frontier && job->parallelism > 1)
        cut_ahead(job, frontier);
    /* Put idle capacity to work: finished slots first, then new ones up to parallelism, for
     * as long as some range has enough left to be worth splitting. */
    if (!job->error && job->planned && job->ranges->len > 1)
        recruit_workers(job, range);
    GPtrArray *requests = prepare_requests(job);
    if (job->in_flight == 0) {
        job->finished = true;
        g_cond_broadcast(&job->finished_cond);
    }
    g_mutex_unlock(&job->lock);

    if (page) {
        gcs_list_page_clear(page);
        g_free(page);
    }
    range_request_free(request);
    submit_requests(job, requests);
}

static void submit_requests(struct listing_job *job, GPtrArray *requests)
{
    for (guint i = 0; i < requests->len; i++) {
        struct range_request *request = g_ptr_array_index(requests, i);
        job->page_fn(job->backend, &request->params, on_page, request);
    }
    g_ptr_array_free(requests, TRUE);
}

static int compare_runs(gconstpointer a, gconstpointer b, gpointer user)
{
    GArray *objects = user;
    const struct object_run *x = a, *y = b;
    return strcmp(entry_at(objects, x->start)->name, entry_at(objects, y->start)->name);
}

/* Pages of disjoint key ranges, each sorted: ordering the pages by their first names usually
 * sorts everything (checked in one pass), which is much cheaper than sorting every name. The
 * entries are moved in place (a permutation followed cycle by cycle), so ordering a million
 * of them takes 4 bytes each, not a second array of entries. */
static void order_by_runs(GArray *objects, GArray *runs)
{
    if (runs->len < 2)
        return;
    g_array_sort_with_data(runs, compare_runs, objects);
    guint *dest = g_new(guint, objects->len); /* where entry i goes */
    guint at = 0;
    bool moved = false;
    for (guint r = 0; r < runs->len; r++) {
        const struct object_run *run = &g_array_index(runs, struct object_run, r);
        moved = moved || run->start != at;
        for (guint i = 0; i < run->len; i++)
            dest[run->start + i] = at++;
    }
    g_assert(at == objects->len); /* every entry came from one page */
    for (guint i = 0; moved && i < objects->len; i++) {
        while (dest[i] != i) {
            guint j = dest[i];
            struct dir_entry held = *entry_at(objects, j);
            *entry_at(objects, j) = *entry_at(objects, i);
            *entry_at(objects, i) = held;
            dest[i] = dest[j];
            dest[j] = j;
        }
    }
    g_free(dest);
}

/* Is name among objects[0, count) (sorted)? */
static bool sorted_contains(GArray *objects, guint count, const char *name)
{
    guint lo = 0, hi = count;
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        int cmp = strcmp(entry_at(objects, mid)->name, name);
        if (cmp == 0)
            return true;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static void drop_adjacent_duplicates(GArray *objects)
{
    guint kept = 0;
    for (guint i = 0; i < objects->len; i++) {
        struct dir_entry *entry = entry_at(objects, i);
        if (kept > 0 && strcmp(entry_at(objects, kept - 1)->name, entry->name) == 0) {
            meta_attrs_clear(&entry->attrs);
            continue;
        }
        *entry_at(objects, kept++) = *entry;
    }
    g_array_set_size(objects, kept);
}

/* Each page is a sorted, contiguous slice of the directory; slices overlap only where a piece
 * was cut while its request was in flight, and the overlap holds the same names. So after
 * ordering the pages by their first names, a name not above the last one kept is a duplicate
 * (checked by a binary search among those kept): one pass instead of sorting every name. A
 * name that is below it and new (the directory changed between two requests) makes it sort
 * after all. */
static void dedupe_objects(GArray *objects, GArray *runs)
{
    order_by_runs(objects, runs);
    guint kept = 0;
    bool sorted = true;
    for (guint i = 0; i < objects->len; i++) {
        struct dir_entry *entry = entry_at(objects, i);
        if (kept > 0) {
            int cmp = strcmp(entry_at(objects, kept - 1)->name, entry->name);
            if (cmp == 0 || (cmp > 0 && sorted && sorted_contains(objects, kept, entry->name))) {
                meta_attrs_clear(&entry->attrs);
                continue;
            }
            if (cmp > 0)
                sorted = false;
        }
        *entry_at(objects, kept++) = *entry;
    }
    g_array_set_size(objects, kept);
    if (!sorted) {
        g_array_sort(objects, compare_entry_names);
        drop_adjacent_duplicates(objects);
    }
}

static void dedupe_strings(GPtrArray *strings)
{
    g_ptr_array_sort(strings, compare_strings);
    guint kept = 0;
    for (guint i = 0; i < strings->len; i++) {
        char *s = strings->pdata[i];
        if (kept > 0 && strcmp(strings->pdata[kept - 1], s) == 0)
            continue; /* its bytes stay in the chunk */
        strings->pdata[kept++] = s;
    }
    g_ptr_array_set_size(strings, kept);
}

int listing_run(listing_page_fn page_fn, void *backend, const struct listing_config *config,
                struct listing_result *out)
{
    struct listing_job job;
    memset(&job, 0, sizeof(job));
    g_mutex_init(&job.lock);
    g_cond_init(&job.finished_cond);
    job.page_fn = page_fn;
    job.backend = backend;
    job.prefix = g_strdup(config->prefix ? config->prefix : "");
    job.prefix_end = listing_prefix_end(job.prefix);
    job.delimiter = config->recursive ? NULL : "/";
    job.parallelism = CLAMP(config->parallelism, 1, LISTING_MAX_PARALLELISM);
    job.page_size = config->page_size ? config->page_size : 1000;
    job.include_trailing_delimiter = config->include_trailing_delimiter && !config->recursive;
    job.stop = config->stop;
    job.stop_user = config->stop_user;
    job.ranges = g_ptr_array_new_with_free_func((GDestroyNotify)list_range_free);
    job.objects = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
    job.object_runs = g_array_new(FALSE, FALSE, sizeof(struct object_run));
    job.prefixes = g_ptr_array_new();
    job.names = g_string_chunk_new(LISTING_NAMES_CHUNK);
    g_ptr_array_add(job.ranges, g_new0(struct list_range, 1));

    g_mutex_lock(&job.lock);
    GPtrArray *requests = prepare_requests(&job);
    g_mutex_unlock(&job.lock);
    submit_requests(&job, requests);

    g_mutex_lock(&job.lock);
    while (!job.finished)
        g_cond_wait(&job.finished_cond, &job.lock);
    g_mutex_unlock(&job.lock);

    int rc = job.error;
    if (rc == 0) {
        dedupe_objects(job.objects, job.object_runs);
        dedupe_strings(job.prefixes);
        out->objects = job.objects;
        out->prefixes = job.prefixes;
        out->names = job.names;
        out->requests = job.requests;
        out->pieces = job.ranges->len;
        out->steals = job.steals;
        out->entries_received = job.entries_received;
    } else {
        struct listing_result failed = {
            .objects = job.objects, .prefixes = job.prefixes, .names = job.names};
        listing_result_clear(&failed);
    }
    g_ptr_array_free(job.ranges, TRUE);
    g_array_free(job.object_runs, TRUE);
    key_space_clear(&job.space);
    g_free(job.prefix);
    g_free(job.prefix_end);
    g_mutex_clear(&job.lock);
    g_cond_clear(&job.finished_cond);
    return rc;
}

void listing_result_clear(struct listing_result *result)
{
    if (!result)
        return;
    if (result->objects) {
        for (guint i = 0; i < result->objects->len; i++)
            meta_attrs_clear(&entry_at(result->objects, i)->attrs);
        g_array_free(result->objects, TRUE);
    }
    if (result->prefixes)
        g_ptr_array_free(result->prefixes, TRUE);
    if (result->names)
        g_string_chunk_free(result->names);
    memset(result, 0, sizeof(*result));
}
