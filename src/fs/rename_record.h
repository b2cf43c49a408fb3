/* The intent record of a directory rename (issue 24), as text: what fs_rename.c writes to
 * MOUNT_PREFIX/.fluxfs/renames/ID before the first copy and reads back at the next mount to roll
 * an interrupted rename forward. Pure (no I/O, no globals), so it is unit-tested.
 *
 *     fluxfs-rename 1
 *     source PREFIX          object-name prefix of the directory renamed away ("a/b/")
 *     dest PREFIX            object-name prefix of the new name ("a/c/")
 *     origin TEXT            who wrote it ("host pid 123"), for the log only
 *     count N
 *     GENERATION NAME        N lines: each object to move, by its name below source ("" = the
 *     ...                    directory's placeholder object) and the generation listed
 *     end
 *
 * Every string is written with g_strescape (C escapes: control and non-ASCII bytes as \ooo,
 * '\\' and '"'), so any object name fits on one line and reads back byte for byte. */
#ifndef FLUXFS_FS_RENAME_RECORD_H
#define FLUXFS_FS_RENAME_RECORD_H

#include <glib.h>
#include <stdint.h>

#define RENAME_RECORD_MAGIC "fluxfs-rename 1"

struct rename_record_entry {
    char *name;         /* below source; "" = the placeholder object "source" itself */
    int64_t generation; /* > 0 */
};

struct rename_record {
    char *source;       /* object-name prefix, ends with '/' */
    char *dest;         /* object-name prefix, ends with '/' */
    char *origin;       /* may be "" */
    GPtrArray *entries; /* struct rename_record_entry *, owned */
};

/* An empty record (entries allocated); fill source/dest/origin with g_strdup'd strings. */
void rename_record_init(struct rename_record *record);
void rename_record_add(struct rename_record *record, const char *name, int64_t generation);
void rename_record_clear(struct rename_record *record); /* frees the members, accepts zeroed */

/* The record as text (g_string_free(..., TRUE) by the caller). */
GString *rename_record_format(const struct rename_record *record);

/* Parses text (len bytes, need not end in NUL) into *out (initialized here). 0, or -EINVAL with
 * *error (g_malloc'd) saying what is wrong: a missing or unknown header, a source or dest that
 * is empty or does not end in '/', an entry line without a generation, a count that does not
 * match, no "end" line (a torn record). */
int rename_record_parse(const char *text, size_t len, struct rename_record *out, char **error);

#endif
