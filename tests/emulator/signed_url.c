/* V4 signed URL verification: see signed_url.h. */
#include "signed_url.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "server.h"

struct emu_signing_keys {
    EVP_PKEY *rsa;      /* NULL: no RSA key */
    char *client_email; /* the account the RSA key belongs to, NULL = not known (bare PEM) */
    char *hmac_id;      /* NULL: no HMAC key */
    char *hmac_secret;
};

static EVP_PKEY *pkey_from_pem(const char *pem, size_t len)
{
    EVP_PKEY *key = NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (bio != NULL)
        key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    if (key == NULL && bio != NULL && BIO_reset(bio) == 1) {
        X509 *cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        if (cert != NULL) {
            key = X509_get_pubkey(cert);
            X509_free(cert);
        }
    }
    if (key == NULL && bio != NULL && BIO_reset(bio) == 1)
        key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (key != NULL && EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    return key;
}

static int load_rsa(struct emu_signing_keys *keys, const char *path, char **error)
{
    char *text = NULL;
    gsize len = 0;
    GError *gerror = NULL;
    if (!g_file_get_contents(path, &text, &len, &gerror)) {
        *error = g_strdup_printf("--signing-key %s: %s", path, gerror->message);
        g_error_free(gerror);
        return -1;
    }
    const char *start = text;
    while (*start == ' ' || *start == '\n' || *start == '\r' || *start == '\t')
        start++;
    if (*start == '{') {
        char why[128] = "";
        yajl_val root = yajl_tree_parse(text, why, sizeof(why));
        const char *key_path[] = {"private_key", NULL};
        const char *email_path[] = {"client_email", NULL};
        yajl_val pem = root != NULL ? yajl_tree_get(root, key_path, yajl_t_string) : NULL;
        yajl_val email = root != NULL ? yajl_tree_get(root, email_path, yajl_t_string) : NULL;
        const char *pem_text = pem != NULL ? YAJL_GET_STRING(pem) : NULL;
        const char *email_text = email != NULL ? YAJL_GET_STRING(email) : NULL;
        if (pem_text != NULL)
            keys->rsa = pkey_from_pem(pem_text, strlen(pem_text));
        if (email_text != NULL)
            keys->client_email = g_strdup(email_text);
        if (root != NULL)
            yajl_tree_free(root);
    } else {
        keys->rsa = pkey_from_pem(text, len);
    }
    g_free(text);
    if (keys->rsa == NULL) {
        *error = g_strdup_printf("--signing-key %s: no RSA key in it (a service account JSON "
                                 "key file, or a PEM public key, certificate or private key)",
                                 path);
        return -1;
    }
    return 0;
}

struct emu_signing_keys *emu_signing_keys_load(const char *rsa_path, const char *hmac_spec,
                                               char **error)
{
    struct emu_signing_keys *keys = g_new0(struct emu_signing_keys, 1);
    if (rsa_path != NULL && load_rsa(keys, rsa_path, error) < 0) {
        emu_signing_keys_free(keys);
        return NULL;
    }
    if (hmac_spec != NULL) {
        const char *colon = strchr(hmac_spec, ':');
        if (colon == NULL || colon == hmac_spec || colon[1] == '\0') {
            *error = g_strdup("--hmac-key wants ACCESS_ID:SECRET");
            emu_signing_keys_free(keys);
            return NULL;
        }
        keys->hmac_id = g_strndup(hmac_spec, (gsize)(colon - hmac_spec));
        keys->hmac_secret = g_strdup(colon + 1);
    }
    return keys;
}

void emu_signing_keys_free(struct emu_signing_keys *keys)
{
    if (keys == NULL)
        return;
    EVP_PKEY_free(keys->rsa);
    g_free(keys->client_email);
    g_free(keys->hmac_id);
    if (keys->hmac_secret != NULL)
        memset(keys->hmac_secret, 0, strlen(keys->hmac_secret));
    g_free(keys->hmac_secret);
    g_free(keys);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Header value with leading and trailing blanks trimmed and inner runs of blanks collapsed. */
static void append_header_value(GString *out, const char *value)
{
    while (*value == ' ' || *value == '\t')
        value++;
    bool blank = false;
    for (; *value != '\0'; value++) {
        if (*value == ' ' || *value == '\t') {
            blank = true;
            continue;
        }
        if (blank)
            g_string_append_c(out, ' ');
        blank = false;
        g_string_append_c(out, *value);
    }
}

char *emu_signed_url_canonical_request(const struct emu_request *req)
{
    GString *out = g_string_new(req->method);
    g_string_append_c(out, '\n');
    g_string_append(out, req->path);
    g_string_append_c(out, '\n');
    /* The query: every parameter but the signature, "name=value" encoded, sorted. */
    GPtrArray *pairs = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i + 1 < req->query->len; i += 2) {
        const char *key = g_ptr_array_index(req->query, i);
        if (strcmp(key, "X-Goog-Signature") == 0)
            continue;
        GString *pair = g_string_new(NULL);
        emu_percent_encode(pair, key);
        g_string_append_c(pair, '=');
        emu_percent_encode(pair, g_ptr_array_index(req->query, i + 1));
        g_ptr_array_add(pairs, g_string_free(pair, FALSE));
    }
    qsort(pairs->pdata, pairs->len, sizeof(gpointer), compare_strings);
    for (guint i = 0; i < pairs->len; i++) {
        if (i > 0)
            g_string_append_c(out, '&');
        g_string_append(out, g_ptr_array_index(pairs, i));
    }
    g_ptr_array_unref(pairs);
    g_string_append_c(out, '\n');
    /* The signed headers, lower-case names as listed (sorted by the signer), one per line. */
    const char *signed_headers = emu_query(req, "X-Goog-SignedHeaders");
    char **names = g_strsplit(signed_headers != NULL ? signed_headers : "", ";", 64);
    bool missing = false;
    for (char **name = names; *name != NULL && !missing; name++) {
        if (**name == '\0')
            continue;
        const char *value = emu_header(req, *name);
        if (value == NULL) {
            missing = true;
            break;
        }
        char *lower = g_ascii_strdown(*name, -1);
        g_string_append_printf(out, "%s:", lower);
        g_free(lower);
        append_header_value(out, value);
        g_string_append_c(out, '\n');
    }
    g_strfreev(names);
    if (missing) {
        g_string_free(out, TRUE);
        return NULL;
    }
    g_string_append_c(out, '\n');
    g_string_append(out, signed_headers != NULL ? signed_headers : "");
    g_string_append_c(out, '\n');
    const char *payload = emu_header(req, "X-Goog-Content-SHA256");
    g_string_append(out, payload != NULL ? payload : "UNSIGNED-PAYLOAD");
    return g_string_free(out, FALSE);
}

static void hex_of(const unsigned char *raw, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * len] = '\0';
}

static bool hmac_sha256(const void *key, size_t key_len, const char *data, unsigned char out[32])
{
    unsigned int len = 32;
    return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)data, strlen(data), out,
                &len) != NULL &&
           len == 32;
}

const char *emu_signed_url_verify(const struct emu_signing_keys *keys,
                                  const struct emu_request *req, const char *algorithm,
                                  const char *credential, const char *date, const char *signature)
{
    static const char *mismatch = "The request signature we calculated does not match the "
                                  "signature you provided. Check your Google secret key and "
                                  "signing method.";
    bool rsa = strcmp(algorithm, "GOOG4-RSA-SHA256") == 0;
    if (rsa ? keys->rsa == NULL : keys->hmac_id == NULL)
        return "The emulator holds no key of this signing algorithm to check the signature with.";
    /* X-Goog-Credential: ACCOUNT/DATE/LOCATION/storage/goog4_request */
    const char *scope = strchr(credential, '/');
    if (scope == NULL)
        return mismatch;
    char *account = g_strndup(credential, (gsize)(scope - credential));
    scope++;
    const char *expected = rsa ? keys->client_email : keys->hmac_id;
    bool other_account = expected != NULL && strcmp(account, expected) != 0;
    g_free(account);
    char **parts = g_strsplit(scope, "/", 5);
    bool scope_ok = g_strv_length(parts) == 4 && strlen(parts[0]) == 8 &&
                    strncmp(parts[0], date, 8) == 0 && strcmp(parts[2], "storage") == 0 &&
                    strcmp(parts[3], "goog4_request") == 0;
    if (other_account || !scope_ok) {
        g_strfreev(parts);
        return other_account ? "The credential names an account whose key the emulator "
                               "does not hold."
                             : mismatch;
    }
    char *canonical = emu_signed_url_canonical_request(req);
    if (canonical == NULL) {
        g_strfreev(parts);
        return "A header named in X-Goog-SignedHeaders is missing from the request.";
    }
    unsigned char digest[32];
    char digest_hex[65];
    unsigned int digest_len = 0;
    EVP_Digest(canonical, strlen(canonical), digest, &digest_len, EVP_sha256(), NULL);
    g_free(canonical);
    hex_of(digest, 32, digest_hex);
    char *to_sign = g_strdup_printf("%s\n%s\n%s\n%s", algorithm, date, scope, digest_hex);
    size_t sig_len = strlen(signature) / 2;
    unsigned char *sig = g_malloc(sig_len + 1);
    for (size_t i = 0; i < sig_len; i++)
        sig[i] = (unsigned char)(g_ascii_xdigit_value(signature[2 * i]) << 4 |
                                 g_ascii_xdigit_value(signature[2 * i + 1]));
    bool good = false;
    if (rsa) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        good = ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, keys->rsa) == 1 &&
               EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)to_sign,
                                strlen(to_sign)) == 1;
        EVP_MD_CTX_free(ctx);
    } else {
        /* GOOG4 + secret -> date -> location -> "storage" -> "goog4_request" -> signature */
        char *first = g_strconcat("GOOG4", keys->hmac_secret, NULL);
        unsigned char k1[32], k2[32], k3[32], k4[32], mac[32];
        good = hmac_sha256(first, strlen(first), parts[0], k1) &&
               hmac_sha256(k1, 32, parts[1], k2) && hmac_sha256(k2, 32, "storage", k3) &&
               hmac_sha256(k3, 32, "goog4_request", k4) && hmac_sha256(k4, 32, to_sign, mac) &&
               sig_len == 32 && CRYPTO_memcmp(mac, sig, 32) == 0;
        memset(first, 0, strlen(first));
        g_free(first);
    }
    g_free(sig);
    g_free(to_sign);
    g_strfreev(parts);
    return good ? NULL : mismatch;
}
