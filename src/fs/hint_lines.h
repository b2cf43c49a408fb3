/* The parser of the hint files (MOUNT/.fluxfs/prefetch and .fluxfs/warmup): the bytes a process
 * writes, in pieces of any size, become mount-relative paths, one per line.
 *
 * - '\n' or NUL ends a line; a last line without one counts once hint_lines_finish is called.
 * - Trailing '\r' and '/' are dropped; the mountpoint (when the line starts with it and a '/'),
 *   then leading '/' and "./" are stripped; lines that end up empty are skipped.
 * - A line longer than HINT_LINE_MAX bytes is dropped whole (up to its end).
 *
 * No allocation per byte, no limit on the input: memory is one line. Pure (no FUSE, no
 * globals), so it is unit-tested and fuzzed (tests/fuzz/fuzz_hint_lines.c). Not thread-safe:
 * one parser per open hint file, used under that handle's serialization. */
#ifndef FLUXFS_FS_HINT_LINES_H
#define FLUXFS_FS_HINT_LINES_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>

#define HINT_LINE_MAX 4096

struct hint_lines {
    GString *partial;       /* the unfinished current line */
    bool dropping;          /* the current line is over HINT_LINE_MAX: skip to its end */
    const char *mountpoint; /* not owned; NULL = none */
};

/* Called for each complete line, with the normalized path (valid during the call only). */
typedef void (*hint_line_fn)(const char *path, void *user);

void hint_lines_init(struct hint_lines *parser, const char *mountpoint);
void hint_lines_clear(struct hint_lines *parser); /* accepts a zeroed parser */
/* Forgets the unfinished line (the file is written again from offset 0). */
void hint_lines_restart(struct hint_lines *parser);
void hint_lines_feed(struct hint_lines *parser, const char *data, size_t size, hint_line_fn line,
                     void *user);
/* The end of the file: an unfinished last line counts. */
void hint_lines_finish(struct hint_lines *parser, hint_line_fn line, void *user);

/* A line as a mount-relative path, in place (see above); returns a pointer into line. */
char *hint_line_normalize(char *line, const char *mountpoint);

#endif
