/* JSON nesting depth, checked before a tree parse: yajl_tree_parse builds its tree without
 * recursion but yajl_tree_free (and any walk of the tree) recurses once per level, so 50,000
 * nested arrays in a 100 KB body overflow a thread's stack. Every tree parse of text that came
 * from outside (a server reply, a request body, a key file) asks json_depth_within first. */
#ifndef FLUXFS_JSON_DEPTH_H
#define FLUXFS_JSON_DEPTH_H

#include <stdbool.h>
#include <stddef.h>

/* Far deeper than any Cloud Storage resource (an object is 3 levels, a bucket 4), far
 * shallower than what a 1 MiB stack survives. Cloud Storage's own JSON front end refuses
 * about 100 levels as well. */
#define JSON_DEPTH_MAX 100

/* True when no array or object in the first len bytes of text nests deeper than max_depth.
 * Brackets inside strings and comments (yajl_tree_parse allows them) do not count. Reads no
 * further than len and stops at a NUL; it does not validate the JSON (the parser does). */
bool json_depth_within(const char *text, size_t len, unsigned max_depth);

#endif
