/* gcsfuse's YAML configuration file (--config-file), read with libyaml (main layer, private).
 * The keys are gcsfuse's, with its nesting ("metadata-cache: {ttl-secs: 60}"); each one is
 * turned into the command-line flag gcsfuse documents for it, so it has exactly that flag's
 * meaning in fluxfs (src/main/options.c), and the command line, applied after, overrides it. */
#ifndef FLUXFS_MAIN_CONFIG_FILE_H
#define FLUXFS_MAIN_CONFIG_FILE_H

#include <stddef.h>

/* One setting of the file: the flag (long name without dashes, e.g. "metadata-cache-ttl-secs")
 * and its value as text ("true"/"false" for booleans; a sequence's items joined with ',' for
 * file-system.fuse-options), and the key as written in the file ("metadata-cache.ttl-secs"). */
struct config_setting {
    char *flag;
    char *value;
    char *key;
};

typedef void (*config_setting_fn)(const struct config_setting *setting, void *user);

/* Reads path and calls apply for each known key in file order; unknown keys and nulls are not
 * applied: an unknown key adds a line to *warnings (a GPtrArray of g_free'd strings, created
 * when needed). 0, or -EINVAL with a one-line *error (g_free) naming the file, the line and the
 * key (a value that is a mapping or a list where a scalar belongs, malformed YAML, a file that
 * cannot be read, a top level that is not a mapping). */
int config_file_read(const char *path, config_setting_fn apply, void *user, void **warnings,
                     char **error);

/* A config key given as one mount option, the form of the GKE Cloud Storage FUSE CSI driver's
 * mountOptions: the key's levels joined by ':' then ':' and the value
 * ("file-cache:max-size-mb:-1", "metadata-cache:ttl-secs:30", "implicit-dirs:true"); also
 * "section:key=value". The key is the longest-known prefix, so a value may hold ':' (a URL).
 * Returns 0 when item is not of that form (no ':' before the first '='); 1 with *setting
 * filled (config_setting_clear frees it); -EINVAL with a one-line *error (g_free) for an unknown
 * key, a section given a value, or a key with no value. */
int config_option_setting(const char *item, struct config_setting *setting, char **error);
void config_setting_clear(struct config_setting *setting);

/* The flag a gcsfuse config key stands for, or NULL; the i-th key of the table, NULL past its
 * end (for tests). */
const char *config_file_flag_for_key(const char *key);
const char *config_file_key_at(size_t i);

#endif
