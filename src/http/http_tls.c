/* One certificate-authority store for every TLS connection of an engine.
 *
 * libcurl 7.88 with OpenSSL builds an SSL_CTX per connection and loads the CA file into it each
 * time; its own cache (CURLOPT_CA_CACHE_TIMEOUT) is skipped whenever a CA directory is also in
 * effect, which Debian's libcurl always has (built --with-ca-path=/etc/ssl/certs). Parsing
 * Debian's bundle of ~140 authorities costs ~40 ms of CPU, so every new connection to Cloud
 * Storage paid that. Here the file is parsed once; the directory stays a lazy hash lookup, as
 * curl would set it up; trust is unchanged. Anything unexpected (another TLS backend, a file
 * that does not load) returns NULL and the caller leaves CA loading to curl, errors included. */
#include "http-internal.h"

#include <curl/curl.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <string.h>

/* curl's compiled-in defaults, asked of a scratch handle (CURLINFO_CAINFO/CAPATH: 7.84). */
static void curl_default_ca(char **file, char **dir)
{
    *file = *dir = NULL;
#if LIBCURL_VERSION_NUM >= 0x075400
    CURL *easy = curl_easy_init();
    if (!easy)
        return;
    char *value = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_CAINFO, &value) == CURLE_OK && value)
        *file = g_strdup(value);
    value = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_CAPATH, &value) == CURLE_OK && value)
        *dir = g_strdup(value);
    curl_easy_cleanup(easy);
#endif
}

void *http_tls_store_new(const char *ca_file, const char *ca_dir)
{
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    if (!info || !info->ssl_version || strncmp(info->ssl_version, "OpenSSL/", 8) != 0)
        return NULL;
    char *default_file, *default_dir;
    curl_default_ca(&default_file, &default_dir);
    /* As curl would: --ca-file replaces the default file, --ca-dir the default directory. */
    const char *file = ca_file ? ca_file : default_file;
    const char *dir = ca_dir ? ca_dir : default_dir;
    X509_STORE *store = NULL;
    if (!file && !dir)
        goto out; /* curl's own fallback, whatever it is */
    store = X509_STORE_new();
    if (!store)
        goto out;
    if ((file && !X509_STORE_load_file(store, file)) ||
        (dir && !X509_STORE_load_path(store, dir))) {
        X509_STORE_free(store);
        store = NULL;
    }
out:
    g_free(default_file);
    g_free(default_dir);
    return store;
}

void http_tls_store_free(void *store)
{
    X509_STORE_free(store); /* accepts NULL */
}

CURLcode http_tls_use_store(CURL *easy, void *ssl_ctx, void *store)
{
    (void)easy;
    if (!X509_STORE_up_ref(store))
        return CURLE_OUT_OF_MEMORY;
    SSL_CTX_set_cert_store(ssl_ctx, store); /* frees the empty store curl made */
    return CURLE_OK;
}
