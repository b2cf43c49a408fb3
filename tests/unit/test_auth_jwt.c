/* Service-account JWTs: signed with a key generated here, verified with its public half via
 * OpenSSL (real crypto), header and claims checked, tampering detected. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "fluxfs/auth.h"
#include "fluxfs/base64.h"

static EVP_PKEY *test_key;
static char *test_key_pem;

static void generate_key(void)
{
    test_key = EVP_RSA_gen(2048);
    ck_assert_ptr_nonnull(test_key);
    BIO *bio = BIO_new(BIO_s_mem());
    ck_assert_int_eq(PEM_write_bio_PrivateKey(bio, test_key, NULL, NULL, 0, NULL, NULL), 1);
    char *data = NULL;
    long len = BIO_get_mem_data(bio, &data);
    test_key_pem = g_strndup(data, (gsize)len);
    BIO_free(bio);
}

static void free_key(void)
{
    EVP_PKEY_free(test_key);
    g_free(test_key_pem);
}

static bool verify_signature(EVP_PKEY *key, const char *jwt)
{
    const char *last_dot = strrchr(jwt, '.');
    size_t signature_len = 0;
    uint8_t *signature = base64_decode(last_dot + 1, strlen(last_dot + 1), &signature_len);
    if (!signature)
        return false;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
              EVP_DigestVerify(ctx, signature, signature_len, (const unsigned char *)jwt,
                               (size_t)(last_dot - jwt)) == 1;
    EVP_MD_CTX_free(ctx);
    g_free(signature);
    return ok;
}

static yajl_val decode_part(const char *part, size_t len)
{
    size_t json_len = 0;
    uint8_t *json = base64_decode(part, len, &json_len);
    ck_assert_ptr_nonnull(json);
    char error[128];
    yajl_val value = yajl_tree_parse((const char *)json, error, sizeof(error));
    g_free(json);
    ck_assert_ptr_nonnull(value);
    return value;
}

static const char *get_string(yajl_val object, const char *key)
{
    const char *path[] = {key, NULL};
    yajl_val value = yajl_tree_get(object, path, yajl_t_string);
    return value ? YAJL_GET_STRING(value) : NULL;
}

static long long get_integer(yajl_val object, const char *key)
{
    const char *path[] = {key, NULL};
    yajl_val value = yajl_tree_get(object, path, yajl_t_number);
    ck_assert_ptr_nonnull(value);
    return YAJL_GET_INTEGER(value);
}

START_TEST(jwt_sign_and_verify)
{
    char *jwt = NULL, *error = NULL;
    const char *scope = "https://www.googleapis.com/auth/devstorage.full_control";
    ck_assert_int_eq(auth_jwt_sign(test_key_pem, "key-id-1", "sa@p.iam.gserviceaccount.com", scope,
                                   "https://oauth2.googleapis.com/token", 1700000000, 3600, &jwt,
                                   &error),
                     0);
    ck_assert_ptr_null(error);
    /* Three base64url parts, no padding, no '+' or '/'. */
    ck_assert_ptr_null(strpbrk(jwt, "=+/"));
    char **parts = g_strsplit(jwt, ".", -1);
    ck_assert_uint_eq(g_strv_length(parts), 3);

    yajl_val header = decode_part(parts[0], strlen(parts[0]));
    ck_assert_str_eq(get_string(header, "alg"), "RS256");
    ck_assert_str_eq(get_string(header, "typ"), "JWT");
    ck_assert_str_eq(get_string(header, "kid"), "key-id-1");
    yajl_val claims = decode_part(parts[1], strlen(parts[1]));
    ck_assert_str_eq(get_string(claims, "iss"), "sa@p.iam.gserviceaccount.com");
    ck_assert_str_eq(get_string(claims, "scope"), scope);
    ck_assert_str_eq(get_string(claims, "aud"), "https://oauth2.googleapis.com/token");
    ck_assert_int_eq(get_integer(claims, "iat"), 1700000000);
    ck_assert_int_eq(get_integer(claims, "exp"), 1700003600);
    yajl_tree_free(header);
    yajl_tree_free(claims);

    ck_assert(verify_signature(test_key, jwt));

    /* Tampered claims: the signature no longer verifies. */
    char *tampered_claims = g_strdup(parts[1]);
    tampered_claims[5] = tampered_claims[5] == 'A' ? 'B' : 'A';
    char *tampered = g_strjoin(".", parts[0], tampered_claims, parts[2], NULL);
    ck_assert(!verify_signature(test_key, tampered));
    /* Another key's public half does not verify it either. */
    EVP_PKEY *other = EVP_RSA_gen(2048);
    ck_assert(!verify_signature(other, jwt));
    EVP_PKEY_free(other);

    g_free(tampered);
    g_free(tampered_claims);
    g_strfreev(parts);
    g_free(jwt);
}
END_TEST

START_TEST(jwt_escapes_and_bad_keys)
{
    char *jwt = NULL, *error = NULL;
    /* Quotes in claims are JSON-escaped, not injected. */
    ck_assert_int_eq(auth_jwt_sign(test_key_pem, NULL, "a\"b", "s", "u", 1, 2, &jwt, &error), 0);
    char **parts = g_strsplit(jwt, ".", -1);
    yajl_val header = decode_part(parts[0], strlen(parts[0]));
    ck_assert_ptr_null(get_string(header, "kid"));
    yajl_val claims = decode_part(parts[1], strlen(parts[1]));
    ck_assert_str_eq(get_string(claims, "iss"), "a\"b");
    yajl_tree_free(header);
    yajl_tree_free(claims);
    g_strfreev(parts);
    g_free(jwt);

    jwt = NULL;
    ck_assert_int_eq(auth_jwt_sign("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n",
                                   NULL, "i", "s", "a", 1, 2, &jwt, &error),
                     -EINVAL);
    ck_assert_ptr_null(jwt);
    ck_assert_ptr_nonnull(error);
    g_free(error);
    error = NULL;
    /* An EC key is not RS256 material. */
    EVP_PKEY *ec = EVP_EC_gen("P-256");
    BIO *bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, ec, NULL, NULL, 0, NULL, NULL);
    char *data = NULL;
    long len = BIO_get_mem_data(bio, &data);
    char *ec_pem = g_strndup(data, (gsize)len);
    ck_assert_int_eq(auth_jwt_sign(ec_pem, NULL, "i", "s", "a", 1, 2, &jwt, &error), -EINVAL);
    g_free(error);
    g_free(ec_pem);
    BIO_free(bio);
    EVP_PKEY_free(ec);
}
END_TEST

TEST_SUITE(auth_jwt_suite)
{
    Suite *s = suite_create("auth_jwt");
    TCase *tc = tcase_create("jwt");
    tcase_add_unchecked_fixture(tc, generate_key, free_key);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, jwt_sign_and_verify);
    tcase_add_test(tc, jwt_escapes_and_bad_keys);
    suite_add_tcase(s, tc);
    return s;
}
