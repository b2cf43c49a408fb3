/* The option table of the fluxfs executable (main layer, private): the one source of every
 * option's names, kind, help text, default and gcsfuse config-file key. options.c parses the
 * command line and prints --help and the man page's option sections from it; config_file.c
 * looks gcsfuse's config keys up in it; fluxfs_options_init applies its defaults. */
#ifndef FLUXFS_MAIN_OPTION_TABLE_H
#define FLUXFS_MAIN_OPTION_TABLE_H

#include <stddef.h>

#include "fluxfs/options.h"

enum option_kind {
    KIND_FLAG,     /* bool; "--x", "--x=false", "--no-x", "-o x", "-o no_x" */
    KIND_STRING,   /* char * field */
    KIND_PATH,     /* char * field, must exist, made absolute */
    KIND_NEW_PATH, /* char * field, made absolute (may not exist yet, e.g. a log file) */
    KIND_ENDPOINT, /* opts->endpoint, normalised URL */
    KIND_PREFIX,   /* --only-dir: opts->prefix */
    KIND_UID,
    KIND_GID,
    KIND_MODE,
    KIND_TTL,          /* double seconds, -1/inf = forever */
    KIND_TTL_SECONDS,  /* gcsfuse's *-secs: integer seconds, -1 = forever */
    KIND_METADATA_TTL, /* gcsfuse's metadata-cache-ttl-secs: stat and type TTL together */
    KIND_DURATION,     /* double seconds > 0 */
    KIND_SIZE,         /* size_t bytes */
    KIND_SIZE_MIB,     /* size_t, a bare number means MiB (gcsfuse's *-mb flags) */
    KIND_INT,          /* int within [min, max] */
    KIND_RETRIES,      /* --max-retries N: 0 = no retries (stored as -1 in the gcs config) */
    KIND_LOG_LEVEL,
    KIND_LOG_FORMAT,
    KIND_DEBUG,   /* foreground + debug log */
    KIND_FUSE,    /* passed through to libfuse in fuse_args */
    KIND_IGNORED, /* fstab-only keys, accepted and dropped */
    KIND_WARN,    /* a gcsfuse flag with no effect here: accepted, one warning line
                   * (help = why) unless the value is one of `quiet` ('|'-separated) */
    KIND_COMPAT,  /* a gcsfuse flag mapped onto fluxfs settings (apply_compat) */
    KIND_HELP,
    KIND_VERSION,
    KIND_CONFIG,      /* --config-file: read before the command line (read_config_file) */
    KIND_OPTION_LIST, /* "o": an -o list; parsed where it is written ("-o", "--o", the
                       * config key file-system.fuse-options), never looked up by name */
};

enum option_topic {
    TOPIC_MOUNTING,
    TOPIC_CREDENTIALS,
    TOPIC_PRESENTATION,
    TOPIC_CACHING,
    TOPIC_PERFORMANCE,
    TOPIC_LOGGING,
    TOPIC_GCSFUSE,
    TOPIC_HIDDEN,
};

/* The heading --help and the man page give each topic (TOPIC_HIDDEN has none). */
extern const char *const option_topic_titles[];

struct option_spec {
    const char *name; /* long name with dashes; the -o key is the same with dashes or '_' */
    char short_name;  /* 0 = none */
    enum option_kind kind;
    size_t offset; /* into struct fluxfs_options */
    int min, max;  /* KIND_INT */
    enum option_topic topic;
    const char *metavar;  /* NULL for flags */
    const char *help;     /* NULL for aliases (listed with their target) */
    const char *alias_of; /* the canonical name, for aliases */
    const char *quiet;    /* KIND_WARN: values that match what fluxfs does anyway: no warning */
    /* Given by name (".def = "16""), after the fields above: */
    const char *def;       /* the default as the command line spells it ("16", "60s", "1536M",
                            * "on"): fluxfs_options_init applies it through the same parser as
                            * the command line, and --help shows "(default DEF)". NULL: the
                            * field starts zeroed (false, 0, NULL) and no default is shown. */
    const char *def_shown; /* a default that is not one value ("the stat TTL"): --help shows
                            * "(default: DEF_SHOWN)"; finish_options or the fs layer derives it */
    const char *config;    /* gcsfuse's config-file key for this flag (cfg/params.yaml's
                            * config-path, levels joined by '.': "metadata-cache.ttl-secs"), or
                            * NULL; --config-file and -o SECTION:KEY:VALUE look keys up here */
    const char *man;       /* the man page's text for the option, troff; "@DEFAULT@" stands for
                            * the default; without it, a .def is added as "Default: DEF." (a
                            * def_shown is the text's to explain). NULL: the help text, escaped,
                            * and the default as --help shows it */
    const char *man_head;  /* the man page's .TP head line when it is not the generated one */
};

#define FIELD(f) offsetof(struct fluxfs_options, f)
#define NO_FIELD 0

/* Canonical options first in each topic (help and man page order), aliases after them. */
extern const struct option_spec option_table[];
extern const size_t option_table_size;

#endif
