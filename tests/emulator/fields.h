/* Partial responses: the `fields` query parameter of the JSON API ("Only return the fields you
 * ask for"), e.g. fields=nextPageToken,prefixes,items(name,size,metadata/owner).
 *
 * Grammar (Google's documented form): a comma-separated list of selections; a selection is a
 * path of names separated by '/', optionally followed by a parenthesised sub-list that applies
 * to the last name; '*' selects every member of its level. A selection applies to each element
 * of an array member (items) and to the keys of a map member (metadata). Names are not checked
 * against the resource's schema: an unknown name selects nothing.
 *
 * A NULL selection means "everything" (no fields parameter). Selections are immutable after
 * parsing and may be shared between threads. */
#ifndef EMU_FIELDS_H
#define EMU_FIELDS_H

#include <stdbool.h>

struct emu_fields;

#define EMU_FIELDS_MAX_LEN   4096 /* longer parameters are refused */
#define EMU_FIELDS_MAX_DEPTH 8    /* nesting of '(' and '/' */

/* text NULL or "" -> *out = NULL (everything). 0 or -EINVAL (syntax error, empty name,
 * unbalanced parentheses, too long or too deep). */
int emu_fields_parse(const char *text, struct emu_fields **out);
void emu_fields_free(struct emu_fields *fields); /* accepts NULL */

/* Whether member `key` of an object under selection `fields` is rendered; *child (optional)
 * receives the selection that applies inside it (NULL = all of it). */
bool emu_fields_select(const struct emu_fields *fields, const char *key,
                       const struct emu_fields **child);

#endif
