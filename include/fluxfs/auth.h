/* The auth layer: finds credentials the way Google's client libraries do (Application Default
 * Credentials) and keeps one shared, cached access token, refreshed before it expires.
 *
 * Sources, in order: anonymous (no header); an explicit key file, else the file named by
 * GOOGLE_APPLICATION_CREDENTIALS (type service_account: an RS256-signed JWT exchanged at the
 * key's token_uri; type authorized_user: a refresh-token grant); else gcloud's ADC file
 * ($CLOUDSDK_CONFIG or ~/.config/gcloud, application_default_credentials.json); else the
 * metadata server (GCE_METADATA_HOST overrides metadata.google.internal). Token fetches go through
 * the http engine as ordinary asynchronous requests, so no thread blocks on them.
 *
 * Tokens are never logged. A token is used until `lifetime - margin` (margin 5 min, or a quarter
 * of the lifetime for short-lived tokens); after that the first caller starts one refresh while
 * the still-valid token keeps being handed out; once it has expired callers wait for the refresh.
 *
 * Locking: auth_provider.lock protects the cached token, its times, the refresh-in-flight flag and
 * the waiter list. Callbacks run outside the lock. */
#ifndef FLUXFS_AUTH_H
#define FLUXFS_AUTH_H

#include <stdbool.h>
#include <stdint.h>

struct http_engine;
struct auth_provider;

enum auth_source_kind {
    AUTH_ANONYMOUS,
    AUTH_SERVICE_ACCOUNT,
    AUTH_AUTHORIZED_USER,
    AUTH_METADATA_SERVER,
    AUTH_TOKEN_URL, /* gcsfuse's --token-url without --key-file */
};

struct auth_config {
    bool anonymous;
    const char *key_file;     /* NULL = the ADC order above */
    const char *token_url;    /* overrides the token endpoint (key file's token_uri, Google's) */
    bool token_url_is_source; /* without a key file: GET token_url for tokens (gcsfuse's
                               * --token-url); the ADC order is not consulted */
};

/* Resolves the credential source and parses (and checks) the key; no network traffic. On failure
 * returns -errno and a message in *error (g_free). The engine must outlive the provider. */
int auth_provider_new(const struct auth_config *config, struct http_engine *engine,
                      struct auth_provider **out, char **error);
void auth_provider_free(struct auth_provider *provider); /* accepts NULL */

enum auth_source_kind auth_provider_kind(const struct auth_provider *provider);
/* For logs: "anonymous", "service account NAME@...", "authorized user (key file PATH)", ... */
const char *auth_provider_describe(const struct auth_provider *provider);

/* Called with err 0 and the full header line ("Authorization: Bearer ...") or NULL when
 * anonymous; or with -errno and a message (-EACCES: the token endpoint refused the credentials;
 * -ENOKEY: no credential source works; other: transport errors). Strings are valid during the
 * call only. Runs on the calling thread when a cached token is usable, otherwise on the engine
 * thread; must not block. */
typedef void (*auth_header_cb)(int err, const char *header_line, const char *error_message,
                               void *user);
void auth_get_header_async(struct auth_provider *provider, auth_header_cb cb, void *user);

/* Blocking form (not on the engine thread): *header_line (g_free, NULL when anonymous) on
 * success, *error (g_free) on failure. */
int auth_get_header(struct auth_provider *provider, char **header_line, char **error);

/* Statistics: token fetches started and failed. */
void auth_provider_get_stats(struct auth_provider *provider, uint64_t *fetches, uint64_t *failures);

/* ---- JWT (exposed for tests) ---- */

/* Builds and signs a Google service-account JWT: header {"alg":"RS256","typ":"JWT","kid":key_id}
 * (kid omitted when NULL), claims {iss, scope, aud, iat, exp = iat + lifetime_s}. private_key_pem
 * is a PKCS#8 or PKCS#1 RSA key. Returns 0 and *jwt (g_free) or -EINVAL with *error (g_free). */
int auth_jwt_sign(const char *private_key_pem, const char *key_id, const char *issuer,
                  const char *scope, const char *audience, int64_t issued_at, int64_t lifetime_s,
                  char **jwt, char **error);

#endif
