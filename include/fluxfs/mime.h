/* Content-Type of a new object from its name's extension (util layer), as gcsfuse and gcloud
 * storage give one: a built-in table of common types first (so the answer does not depend on
 * the host for the usual data, model and web formats), then the host's mime.types file
 * (/etc/mime.types, read once), else NULL (the caller's default, application/octet-stream).
 *
 * The extension is what follows the last '.' of the last path segment, matched without regard
 * to ASCII case; names without one (or ending in '.', or dot files like ".bashrc") get NULL.
 * Threads: safe from any thread. Ownership: the string returned is static (or lives until the
 * process exits); never free it. */
#ifndef FLUXFS_MIME_H
#define FLUXFS_MIME_H

const char *mime_type_for_name(const char *name);

/* The same, but reading the types file at path instead of /etc/mime.types (tests); NULL path
 * = built-in table only. Not cached. */
const char *mime_type_for_name_with(const char *name, const char *types_path);

#endif
