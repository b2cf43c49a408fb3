/* Fast parallel listing of one prefix (core layer), the DESIGN's path 1.
 *
 * The first page is one ordinary list request, so a directory that fits in one page costs one
 * request, and the second page follows its page token, so two pages cost two. After two full
 * pages a probe piece is cut LISTING_FAR_PAGES (8) pages ahead with startOffset (extrapolating
 * the density of the pages read, key_range_split_sampled): a directory of three to ten pages
 * pays that one request more, and the range before the probe is split among workers as its
 * pages come back full. When the probe finds names, the directory is large: the range before
 * it is split freely, and pieces of about one page (one request each) are cut ahead of the
 * frontier within a budget that grows with the pages received (at most a round of requests,
 * nearly empty pieces counting against it, so the waste past the end is bounded). A finished
 * worker steals: it splits the widest unfinished range a page beyond its current position and
 * takes the upper part. Requests in flight are never cancelled; a piece whose end moved
 * continues from its last name, and everything is merged into sorted, de-duplicated arrays
 * (pages overlap where a piece was cut while its request was in flight, and a common prefix
 * whose children straddle a split point comes back from both pieces).
 *
 * Threads: listing_run blocks its caller (a FUSE worker or the mount thread, never the engine
 * thread) until every piece is done; the callbacks run on whatever thread the page function
 * calls them on and only take the job's lock briefly.
 *
 * Memory: each page's objects become compact entries (struct dir_entry, names copied into one
 * string chunk) as soon as the page arrives, and the page's own objects are freed on the thread
 * that parsed them; a listing of a million objects holds about 70 bytes per entry plus its
 * names, not a gcs_object and a name allocation per entry.
 *
 * Ownership: the result's arrays and names are owned by the caller (listing_result_clear); a
 * caller may take them over (and set the fields to NULL). */
#ifndef FLUXFS_LISTING_H
#define FLUXFS_LISTING_H

#include <stdbool.h>

#include "fluxfs/dircache.h"
#include "fluxfs/gcs.h"

/* Lists one page. gcs_list_async fits (with the client as backend); tests pass a fake. The
 * callback may run on any thread, including inside this call. */
typedef void (*listing_page_fn)(void *backend, const struct gcs_list_params *params, gcs_list_cb cb,
                                void *user);

/* Adapter calling gcs_list_async(backend as struct gcs_client *, ...). */
void listing_page_gcs(void *backend, const struct gcs_list_params *params, gcs_list_cb cb,
                      void *user);

struct listing_config {
    const char *prefix;   /* listing prefix ("" = whole bucket) */
    bool recursive;       /* true: no delimiter (every object below); false: delimiter "/" */
    unsigned parallelism; /* pieces listed at once; 1 = sequential paged listing */
    unsigned page_size;   /* maxResults; 0 = 1000 */
    bool include_trailing_delimiter; /* placeholders "x/" also come back as objects */
    /* Optional, asked after every page (on the thread that delivered it): true when nobody
     * wants the result any more (the process listing was killed); the listing then sends no
     * more requests and fails with -EINTR. A server that pages forever stops with its reader. */
    bool (*stop)(void *stop_user);
    void *stop_user;
};

struct listing_result {
    /* struct dir_entry: name = the full object name (in names), kind META_FILE or
     * META_SYMLINK, attrs (fetched_us: when its page came back; symlink_target owned); sorted
     * by name, unique. */
    GArray *objects;
    GPtrArray *prefixes; /* char * (in names), sorted, unique (delimiter listings only) */
    GStringChunk *names; /* every name of objects and prefixes (writable: a taker may cut them) */
    unsigned requests;   /* list requests issued */
    unsigned pieces;     /* key ranges used (1 = it fit in one chain of pages) */
    unsigned steals;     /* work-stealing splits */
    unsigned long entries_received; /* entries in all pages, duplicates included */
};

/* Lists everything under config->prefix. 0, or the first error of any piece (negative errno,
 * already logged by the gcs layer), -EIO (logged here) when a page after a page token does not
 * move the listing forward (a token answered with itself, a page ending where the chain
 * already was: a server that would page forever), or -EINTR when config->stop said so. *out
 * is filled only on success. */
int listing_run(listing_page_fn page_fn, void *backend, const struct listing_config *config,
                struct listing_result *out);
void listing_result_clear(struct listing_result *result); /* accepts zeroed results */

/* The smallest string greater than every name starting with prefix, or NULL when there is
 * none (prefix "" or all 0xFF bytes). g_malloc'd. */
char *listing_prefix_end(const char *prefix);

#endif
