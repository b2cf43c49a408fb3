/* V4 signed URLs (X-Goog-Signature) checked against keys the emulator was given
 * (--signing-key, --hmac-key): the canonical request and string to sign of Cloud Storage's
 * V4 signing process, verified with the service account's RSA key (GOOG4-RSA-SHA256) or an
 * HMAC key's secret (GOOG4-HMAC-SHA256). Without keys only the URL's shape is checked. */
#ifndef EMU_SIGNED_URL_H
#define EMU_SIGNED_URL_H

#include <glib.h>
#include <stdbool.h>

struct emu_request;
struct emu_signing_keys;

/* rsa_path: a service account JSON key file (private_key, client_email) or a PEM file holding
 * a public key, a certificate or a private key; hmac_spec: "ACCESS_ID:SECRET". Either may be
 * NULL. Returns NULL with *error (g_free) set when a key cannot be read. */
struct emu_signing_keys *emu_signing_keys_load(const char *rsa_path, const char *hmac_spec,
                                               char **error);
void emu_signing_keys_free(struct emu_signing_keys *keys); /* accepts NULL */

/* The canonical request Cloud Storage signs for this request (method, path as sent, the query
 * without X-Goog-Signature sorted and encoded, the signed headers, the payload hash).
 * g_free the result; NULL when a signed header is missing. */
char *emu_signed_url_canonical_request(const struct emu_request *req);

/* Verifies the request's X-Goog-Signature against the keys. NULL when it matches, else why
 * (a static message): a signature no configured key produced, or a credential that names
 * another account or access id. */
const char *emu_signed_url_verify(const struct emu_signing_keys *keys,
                                  const struct emu_request *req, const char *algorithm,
                                  const char *credential, const char *date, const char *signature);

#endif
