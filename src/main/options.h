/* Command-line parsing for the fluxfs executable (main layer, private). Turns argv, -o option
 * lists and STORAGE_EMULATOR_HOST into a struct fluxfs_options (include/fluxfs/options.h).
 * The value parsers are exposed for the unit tests (tests/unit/test_options.c). */
#ifndef FLUXFS_MAIN_OPTIONS_H
#define FLUXFS_MAIN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "fluxfs/options.h"

/* Exit statuses of the fluxfs executable. */
enum {
    FLUXFS_EXIT_OK = 0,
    FLUXFS_EXIT_FAILURE = 1, /* the mount failed (access check, FUSE, runtime error) */
    FLUXFS_EXIT_USAGE = 2,   /* bad command line: unknown option, bad value, bad bucket, ... */
};

/* A TTL of "-1", "inf" or "forever" is stored as this many seconds (about 31 years): large
 * enough to never expire, small enough to convert to int64 nanoseconds safely. */
#define FLUXFS_TTL_FOREVER 1e9

enum options_parse_result {
    OPTIONS_PARSE_MOUNT = 0, /* opts is complete: mount */
    OPTIONS_PARSE_HELP,      /* --help was given: print help, exit 0 */
    OPTIONS_PARSE_VERSION,   /* --version was given */
    OPTIONS_PARSE_ERROR,     /* *error holds one line naming the option; exit 2 */
};

/* Parses argv (argv[0] is the program name) into opts, which the caller initialised with
 * fluxfs_options_init. Checks values, the bucket name, conflicts, and that the mountpoint is an
 * existing directory; makes paths absolute (the daemon changes directory to /). On
 * OPTIONS_PARSE_ERROR *error is set (caller g_free's it) and opts may be partly filled
 * (fluxfs_options_clear still frees it). */
enum options_parse_result fluxfs_options_parse(struct fluxfs_options *opts, int argc, char **argv,
                                               char **error);

/* Whether name ("stat-ttl", "debug_gcs", "no-implicit-dirs") is an option (for tests). */
bool options_known(const char *name);

/* Prints --help, grouped by topic. */
void fluxfs_options_print_help(FILE *out, const char *program);

/* Prints one generated part of the man page (troff, man/fluxfs.1, scripts/gen-man): "options"
 * (the OPTIONS section's subsections) or "gcsfuse" (every gcsfuse flag). -EINVAL for another
 * part. */
int fluxfs_options_print_man(FILE *out, const char *part);

/* ---- value parsers (0 or -EINVAL; *out set only on success) ---- */

/* "1048576", "64K", "1.5M", "2GiB", "512kb": every suffix is a power of 1024. */
int options_parse_size(const char *text, size_t *out);
/* Seconds: "1.5", "30s", "500ms", "5m", "1h30m" (Go duration syntax). With allow_forever,
 * "-1", "inf", "infinite" and "forever" give FLUXFS_TTL_FOREVER. */
int options_parse_duration(const char *text, bool allow_forever, double *out);
/* Octal permission bits, "644" or "0644", at most 07777. */
int options_parse_mode(const char *text, mode_t *out);
/* "true/false", "yes/no", "on/off", "1/0". */
int options_parse_bool(const char *text, bool *out);
/* Cloud Storage bucket naming rules; on failure *why says which rule (static string). */
int options_check_bucket_name(const char *name, const char **why);
/* Splits an -o list at unescaped commas; "\," is a literal comma and "\\" a backslash. Empty
 * items are dropped. Returns a NULL-terminated array (g_strfreev). */
char **options_split_list(const char *text);

#endif
