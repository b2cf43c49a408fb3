/* Service-account JWTs: base64url(header).base64url(claims).base64url(RS256 signature), signed
 * with OpenSSL's EVP_DigestSign over SHA-256. */
#include "fluxfs/auth.h"

#include <errno.h>
#include <glib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "fluxfs/base64.h"

/* base64url without padding, as JWS wants. */
static char *base64url_unpadded(const void *data, size_t len)
{
    char *text = base64_encode(data, len, true);
    char *pad = strchr(text, '=');
    if (pad)
        *pad = '\0';
    return text;
}

static void gen_string_field(yajl_gen gen, const char *key, const char *value)
{
    yajl_gen_string(gen, (const unsigned char *)key, strlen(key));
    yajl_gen_string(gen, (const unsigned char *)value, strlen(value));
}

static void gen_integer_field(yajl_gen gen, const char *key, int64_t value)
{
    yajl_gen_string(gen, (const unsigned char *)key, strlen(key));
    yajl_gen_integer(gen, (long long)value);
}

static char *gen_take_base64url(yajl_gen gen)
{
    const unsigned char *json = NULL;
    size_t len = 0;
    yajl_gen_get_buf(gen, &json, &len);
    char *encoded = base64url_unpadded(json, len);
    yajl_gen_free(gen);
    return encoded;
}

int auth_jwt_sign(const char *private_key_pem, const char *key_id, const char *issuer,
                  const char *scope, const char *audience, int64_t issued_at, int64_t lifetime_s,
                  char **jwt, char **error)
{
    int err = 0;
    EVP_PKEY *key = NULL;
    EVP_MD_CTX *sign_ctx = NULL;
    unsigned char *signature = NULL;
    char *header_b64 = NULL, *claims_b64 = NULL, *signing_input = NULL, *signature_b64 = NULL;

    BIO *bio = BIO_new_mem_buf(private_key_pem, -1);
    if (bio)
        key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) {
        *error = g_strdup("the private key is not a PEM RSA private key");
        err = -EINVAL;
        goto out;
    }

    yajl_gen gen = yajl_gen_alloc(NULL);
    yajl_gen_map_open(gen);
    gen_string_field(gen, "alg", "RS256");
    gen_string_field(gen, "typ", "JWT");
    if (key_id)
        gen_string_field(gen, "kid", key_id);
    yajl_gen_map_close(gen);
    header_b64 = gen_take_base64url(gen);

    gen = yajl_gen_alloc(NULL);
    yajl_gen_map_open(gen);
    gen_string_field(gen, "iss", issuer);
    gen_string_field(gen, "scope", scope);
    gen_string_field(gen, "aud", audience);
    gen_integer_field(gen, "iat", issued_at);
    gen_integer_field(gen, "exp", issued_at + lifetime_s);
    yajl_gen_map_close(gen);
    claims_b64 = gen_take_base64url(gen);

    signing_input = g_strconcat(header_b64, ".", claims_b64, NULL);
    size_t signature_len = 0;
    sign_ctx = EVP_MD_CTX_new();
    if (!sign_ctx || EVP_DigestSignInit(sign_ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(sign_ctx, NULL, &signature_len, (const unsigned char *)signing_input,
                       strlen(signing_input)) != 1) {
        *error = g_strdup("cannot sign the JWT (OpenSSL)");
        err = -EINVAL;
        goto out;
    }
    signature = g_malloc(signature_len);
    if (EVP_DigestSign(sign_ctx, signature, &signature_len, (const unsigned char *)signing_input,
                       strlen(signing_input)) != 1) {
        *error = g_strdup("cannot sign the JWT (OpenSSL)");
        err = -EINVAL;
        goto out;
    }
    signature_b64 = base64url_unpadded(signature, signature_len);
    *jwt = g_strconcat(signing_input, ".", signature_b64, NULL);

out:
    g_free(signature_b64);
    g_free(signature);
    EVP_MD_CTX_free(sign_ctx);
    g_free(signing_input);
    g_free(claims_b64);
    g_free(header_b64);
    EVP_PKEY_free(key);
    return err;
}
