/* Credential sources (Application Default Credentials order) and the shared token cache with
 * refresh ahead of expiry. Token requests are ordinary http engine requests; their completion
 * (engine thread) stores the token and wakes the callers that were waiting for it. */
#include "fluxfs/auth.h"

#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "fluxfs/http.h"
#include "fluxfs/json_depth.h"
#include "fluxfs/log.h"
#include "fluxfs/wait_group.h"

#define GOOGLE_TOKEN_URL    "https://oauth2.googleapis.com/token"
#define STORAGE_SCOPE       "https://www.googleapis.com/auth/devstorage.full_control"
#define METADATA_TOKEN_PATH "/computeMetadata/v1/instance/service-accounts/default/token"
#define KEY_FILE_CAP        (1u << 20)
#define TOKEN_REPLY_CAP     (1u << 20)
#define JWT_LIFETIME_S      3600
#define REFRESH_MARGIN_S    300.0
#define NO_CREDENTIALS_MESSAGE                                                                     \
    "no credentials found: set GOOGLE_APPLICATION_CREDENTIALS, use --key-file, or --anonymous"

struct auth_waiter {
    auth_header_cb cb;
    void *user;
};

struct auth_provider {
    enum auth_source_kind kind;
    struct http_engine *engine;
    char *description;
    char *token_url;
    /* service_account */
    char *client_email;
    char *private_key_pem;
    char *private_key_id;
    /* authorized_user */
    char *client_id;
    char *client_secret;
    char *refresh_token;

    GMutex lock;
    char *header_line; /* lock: "Authorization: Bearer ..." or NULL */
    double refresh_at; /* lock: monotonic time to start a refresh */
    double expires_at; /* lock: monotonic time after which the token is not used */
    bool refreshing;   /* lock: a token request is in flight */
    GArray *waiters;   /* lock: struct auth_waiter, waiting for the refresh */

    _Atomic uint64_t fetches, fetch_failures;
};

/* ---- key files ---- */

static const char *json_string(yajl_val root, const char *key)
{
    const char *path[] = {key, NULL};
    yajl_val value = yajl_tree_get(root, path, yajl_t_string);
    return value ? YAJL_GET_STRING(value) : NULL;
}

static int load_key_file(struct auth_provider *provider, const char *path, const char *origin,
                         char **error)
{
    char *text = NULL;
    gsize len = 0;
    GError *gerror = NULL;
    if (!g_file_get_contents(path, &text, &len, &gerror)) {
        int err = gerror->domain == G_FILE_ERROR && gerror->code == G_FILE_ERROR_NOENT ? -ENOENT
                                                                                       : -EACCES;
        *error =
            g_strdup_printf("cannot read the key file %s (%s): %s", path, origin, gerror->message);
        g_error_free(gerror);
        return err;
    }
    if (len > KEY_FILE_CAP) {
        g_free(text);
        *error = g_strdup_printf("the key file %s (%s) is too large", path, origin);
        return -EINVAL;
    }
    if (!json_depth_within(text, len, JSON_DEPTH_MAX)) {
        g_free(text);
        *error = g_strdup_printf("the key file %s (%s) nests JSON more than %d levels deep", path,
                                 origin, JSON_DEPTH_MAX);
        return -EINVAL;
    }
    char parse_error[256] = "";
    yajl_val root = yajl_tree_parse(text, parse_error, sizeof(parse_error));
    g_free(text);
    if (!root || !YAJL_IS_OBJECT(root)) {
        yajl_tree_free(root);
        *error = g_strdup_printf("the key file %s (%s) is not JSON", path, origin);
        return -EINVAL;
    }
    int err = 0;
    const char *type = json_string(root, "type");
    if (type && strcmp(type, "service_account") == 0) {
        const char *email = json_string(root, "client_email");
        const char *pem = json_string(root, "private_key");
        if (!email || !pem) {
            *error = g_strdup_printf("the service account key %s lacks client_email or "
                                     "private_key",
                                     path);
            err = -EINVAL;
            goto out;
        }
        /* Sign once now so a broken key fails at mount, not at the first request. */
        char *probe = NULL, *sign_error = NULL;
        err = auth_jwt_sign(pem, NULL, email, STORAGE_SCOPE, "probe", 0, 1, &probe, &sign_error);
        g_free(probe);
        if (err < 0) {
            *error = g_strdup_printf("the service account key %s: %s", path, sign_error);
            g_free(sign_error);
            goto out;
        }
        provider->kind = AUTH_SERVICE_ACCOUNT;
        provider->client_email = g_strdup(email);
        provider->private_key_pem = g_strdup(pem);
        provider->private_key_id = g_strdup(json_string(root, "private_key_id"));
        if (!provider->token_url)
            provider->token_url = g_strdup(json_string(root, "token_uri"));
        provider->description = g_strdup_printf("service account %s (%s %s)", email, origin, path);
    } else if (type && strcmp(type, "authorized_user") == 0) {
        const char *client_id = json_string(root, "client_id");
        const char *client_secret = json_string(root, "client_secret");
        const char *refresh_token = json_string(root, "refresh_token");
        if (!client_id || !client_secret || !refresh_token) {
            *error = g_strdup_printf("the authorized_user credentials %s lack client_id, "
                                     "client_secret or refresh_token",
                                     path);
            err = -EINVAL;
            goto out;
        }
        provider->kind = AUTH_AUTHORIZED_USER;
        provider->client_id = g_strdup(client_id);
        provider->client_secret = g_strdup(client_secret);
        provider->refresh_token = g_strdup(refresh_token);
        if (!provider->token_url)
            provider->token_url = g_strdup(json_string(root, "token_uri"));
        provider->description = g_strdup_printf("authorized user (%s %s)", origin, path);
    } else {
        *error = g_strdup_printf("the credentials file %s has type \"%s\"; supported are "
                                 "service_account and authorized_user",
                                 path, type ? type : "(none)");
        err = -EINVAL;
    }
out:
    yajl_tree_free(root);
    return err;
}

static char *gcloud_adc_path(void)
{
    const char *config_dir = g_getenv("CLOUDSDK_CONFIG");
    if (config_dir && *config_dir)
        return g_build_filename(config_dir, "application_default_credentials.json", NULL);
    return g_build_filename(g_get_home_dir(), ".config", "gcloud",
                            "application_default_credentials.json", NULL);
}

int auth_provider_new(const struct auth_config *config, struct http_engine *engine,
                      struct auth_provider **out, char **error)
{
    struct auth_provider *provider = g_new0(struct auth_provider, 1);
    provider->engine = engine;
    g_mutex_init(&provider->lock);
    provider->waiters = g_array_new(FALSE, FALSE, sizeof(struct auth_waiter));
    if (config->token_url)
        provider->token_url = g_strdup(config->token_url);

    int err = 0;
    const char *env_key = g_getenv("GOOGLE_APPLICATION_CREDENTIALS");
    char *adc_path = gcloud_adc_path();
    if (config->anonymous) {
        provider->kind = AUTH_ANONYMOUS;
        provider->description = g_strdup("anonymous");
    } else if (config->key_file) {
        err = load_key_file(provider, config->key_file, "--key-file", error);
    } else if (config->token_url_is_source && config->token_url) {
        provider->kind = AUTH_TOKEN_URL;
        provider->description = g_strdup_printf("token URL %s", config->token_url);
    } else if (env_key && *env_key) {
        err = load_key_file(provider, env_key, "GOOGLE_APPLICATION_CREDENTIALS", error);
    } else if (g_file_test(adc_path, G_FILE_TEST_EXISTS)) {
        err = load_key_file(provider, adc_path, "gcloud ADC file", error);
    } else {
        const char *host = g_getenv("GCE_METADATA_HOST");
        if (!host || !*host)
            host = "metadata.google.internal";
        provider->kind = AUTH_METADATA_SERVER;
        g_free(provider->token_url);
        provider->token_url = g_strdup_printf("http://%s%s", host, METADATA_TOKEN_PATH);
        provider->description = g_strdup_printf("metadata server %s", host);
    }
    g_free(adc_path);
    if (err < 0) {
        auth_provider_free(provider);
        return err;
    }
    if (!provider->token_url)
        provider->token_url = g_strdup(GOOGLE_TOKEN_URL);
    flog_info("auth", "credentials: %s", provider->description);
    *out = provider;
    return 0;
}

void auth_provider_free(struct auth_provider *provider)
{
    if (!provider)
        return;
    /* Waiters were completed when the engine cancelled the token request. */
    g_array_free(provider->waiters, TRUE);
    g_mutex_clear(&provider->lock);
    if (provider->private_key_pem)
        memset(provider->private_key_pem, 0, strlen(provider->private_key_pem));
    if (provider->header_line)
        memset(provider->header_line, 0, strlen(provider->header_line));
    g_free(provider->header_line);
    g_free(provider->private_key_pem);
    g_free(provider->private_key_id);
    g_free(provider->client_email);
    g_free(provider->client_id);
    g_free(provider->client_secret);
    g_free(provider->refresh_token);
    g_free(provider->token_url);
    g_free(provider->description);
    g_free(provider);
}

enum auth_source_kind auth_provider_kind(const struct auth_provider *provider)
{
    return provider->kind;
}

const char *auth_provider_describe(const struct auth_provider *provider)
{
    return provider->description;
}

void auth_provider_get_stats(struct auth_provider *provider, uint64_t *fetches, uint64_t *failures)
{
    *fetches = atomic_load(&provider->fetches);
    *failures = atomic_load(&provider->fetch_failures);
}

/* ---- token refresh ---- */

struct refresh_context {
    struct auth_provider *provider;
    double started_at;
};

/* Completes every waiter; called without the lock. */
static void wake_waiters(GArray *waiters, int err, const char *header_line, const char *message)
{
    for (guint i = 0; i < waiters->len; i++) {
        struct auth_waiter *waiter = &g_array_index(waiters, struct auth_waiter, i);
        waiter->cb(err, header_line, message, waiter->user);
    }
    g_array_free(waiters, TRUE);
}

static char *describe_token_error(const struct http_response *response)
{
    char parse_error[128];
    size_t body_len = MIN(response->body_len, 4096);
    char *body = g_strndup(response->body, body_len);
    yajl_val root = json_depth_within(body, body_len, JSON_DEPTH_MAX)
                        ? yajl_tree_parse(body, parse_error, sizeof(parse_error))
                        : NULL;
    const char *code = root ? json_string(root, "error") : NULL;
    const char *description = root ? json_string(root, "error_description") : NULL;
    char *text;
    if (code)
        text = g_strdup_printf("%s%s%s", code, description ? ": " : "",
                               description ? description : "");
    else
        text = g_strdup_printf("HTTP %ld", response->status);
    yajl_tree_free(root);
    g_free(body);
    return text;
}

/* Parses a token reply. Returns 0 with a header line and lifetime, or -EIO. */
static int parse_token_reply(const struct http_response *response, char **header_line,
                             double *lifetime_s)
{
    char parse_error[128];
    yajl_val root =
        response->body && json_depth_within(response->body, response->body_len, JSON_DEPTH_MAX)
            ? yajl_tree_parse(response->body, parse_error, sizeof(parse_error))
            : NULL;
    const char *token = root ? json_string(root, "access_token") : NULL;
    int err = -EIO;
    if (token && *token && !strpbrk(token, "\r\n")) {
        const char *path[] = {"expires_in", NULL};
        yajl_val expires = yajl_tree_get(root, path, yajl_t_number);
        double lifetime =
            expires && YAJL_IS_INTEGER(expires) ? (double)YAJL_GET_INTEGER(expires) : 3599.0;
        if (lifetime <= 0)
            lifetime = 60;
        *header_line = g_strdup_printf("Authorization: Bearer %s", token);
        *lifetime_s = lifetime;
        err = 0;
    }
    yajl_tree_free(root);
    return err;
}

static void on_token_reply(const struct http_response *response, void *user)
{
    struct refresh_context *context = user;
    struct auth_provider *provider = context->provider;
    int err = 0;
    char *message = NULL;
    char *header_line = NULL;
    double lifetime = 0;

    if (response->cancelled) {
        err = -ECANCELED;
        message = g_strdup("cancelled");
    } else if (response->curl_code != 0 || response->status == 0) {
        err = provider->kind == AUTH_METADATA_SERVER ? -ENOKEY : -EHOSTUNREACH;
        if (provider->kind == AUTH_METADATA_SERVER)
            message = g_strdup_printf(NO_CREDENTIALS_MESSAGE " (metadata server %s: %s)",
                                      provider->token_url, response->error_text);
        else
            message = g_strdup_printf("cannot reach the token endpoint %s: %s", provider->token_url,
                                      response->error_text);
    } else if (response->status < 200 || response->status > 299) {
        char *detail = describe_token_error(response);
        err = response->status == 400 || response->status == 401 || response->status == 403
                  ? -EACCES
                  : -EIO;
        if (provider->kind == AUTH_METADATA_SERVER && response->status == 404)
            err = -ENOKEY;
        message =
            g_strdup_printf("the token endpoint %s refused the credentials of %s: "
                            "HTTP %ld %s",
                            provider->token_url, provider->description, response->status, detail);
        g_free(detail);
    } else if (parse_token_reply(response, &header_line, &lifetime) < 0) {
        err = -EIO;
        message = g_strdup_printf("the token endpoint %s sent a reply without an access_token",
                                  provider->token_url);
    }

    g_mutex_lock(&provider->lock);
    provider->refreshing = false;
    if (err == 0) {
        if (provider->header_line)
            memset(provider->header_line, 0, strlen(provider->header_line));
        g_free(provider->header_line);
        provider->header_line = g_strdup(header_line);
        double margin = MIN(REFRESH_MARGIN_S, lifetime / 4);
        provider->refresh_at = context->started_at + lifetime - margin;
        provider->expires_at = context->started_at + lifetime - MIN(10.0, lifetime / 10);
    }
    GArray *waiters = provider->waiters;
    provider->waiters = g_array_new(FALSE, FALSE, sizeof(struct auth_waiter));
    g_mutex_unlock(&provider->lock);

    if (err < 0) {
        atomic_fetch_add(&provider->fetch_failures, 1);
        if (err != -ECANCELED)
            flog_warn("auth", "token refresh failed: %s", message);
    } else {
        flog_debug("auth", "new access token for %s, valid %.0f s", provider->description,
                   lifetime);
    }
    wake_waiters(waiters, err, header_line, message);
    if (header_line)
        memset(header_line, 0, strlen(header_line));
    g_free(header_line);
    g_free(message);
    g_free(context);
}

static void append_form_field(GString *form, const char *key, const char *value)
{
    char *encoded = http_percent_encode(value);
    g_string_append_printf(form, "%s%s=%s", form->len ? "&" : "", key, encoded);
    memset(encoded, 0, strlen(encoded));
    g_free(encoded);
}

/* Builds the token request; NULL with *message when it cannot be built (a signing failure). */
static struct http_request *build_token_request(struct auth_provider *provider, char **message)
{
    struct http_request *request = NULL;
    if (provider->kind == AUTH_METADATA_SERVER) {
        request = http_request_new(HTTP_GET, provider->token_url);
        http_request_add_header(request, "Metadata-Flavor: Google");
        /* Off Google Cloud the name does not resolve; fail quickly rather than retry for long. */
        http_request_set_deadline(request, 5);
        http_request_set_max_retries(request, 2);
    } else if (provider->kind == AUTH_TOKEN_URL) {
        /* gcsfuse's token URL: a GET answered with an OAuth token JSON. The metadata header
         * lets a metadata server (or a proxy of one) be named directly. */
        request = http_request_new(HTTP_GET, provider->token_url);
        http_request_add_header(request, "Metadata-Flavor: Google");
        http_request_set_deadline(request, 30);
        http_request_set_max_retries(request, 3);
    } else {
        GString *form = g_string_new(NULL);
        if (provider->kind == AUTH_SERVICE_ACCOUNT) {
            char *jwt = NULL, *sign_error = NULL;
            int err = auth_jwt_sign(provider->private_key_pem, provider->private_key_id,
                                    provider->client_email, STORAGE_SCOPE, provider->token_url,
                                    (int64_t)time(NULL), JWT_LIFETIME_S, &jwt, &sign_error);
            if (err < 0) {
                *message = sign_error;
                g_string_free(form, TRUE);
                return NULL;
            }
            append_form_field(form, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
            append_form_field(form, "assertion", jwt);
            g_free(jwt);
        } else {
            append_form_field(form, "grant_type", "refresh_token");
            append_form_field(form, "client_id", provider->client_id);
            append_form_field(form, "client_secret", provider->client_secret);
            append_form_field(form, "refresh_token", provider->refresh_token);
        }
        request = http_request_new(HTTP_POST, provider->token_url);
        http_request_add_header(request, "Content-Type: application/x-www-form-urlencoded");
        http_request_set_body(request, form->str, form->len);
        memset(form->str, 0, form->len);
        g_string_free(form, TRUE);
        http_request_set_deadline(request, 30);
        http_request_set_max_retries(request, 3);
    }
    /* A token grant has no side effect worth guarding: retrying it is safe. */
    http_request_set_idempotent(request, true);
    http_request_set_growable_sink(request, TOKEN_REPLY_CAP);
    return request;
}

/* Starts a refresh; the caller has set provider->refreshing under the lock. */
static void start_refresh(struct auth_provider *provider)
{
    char *message = NULL;
    struct http_request *request = build_token_request(provider, &message);
    if (!request) {
        g_mutex_lock(&provider->lock);
        provider->refreshing = false;
        GArray *waiters = provider->waiters;
        provider->waiters = g_array_new(FALSE, FALSE, sizeof(struct auth_waiter));
        g_mutex_unlock(&provider->lock);
        atomic_fetch_add(&provider->fetch_failures, 1);
        wake_waiters(waiters, -EINVAL, NULL, message);
        g_free(message);
        return;
    }
    struct refresh_context *context = g_new0(struct refresh_context, 1);
    context->provider = provider;
    context->started_at = http_now_s();
    atomic_fetch_add(&provider->fetches, 1);
    http_request_set_completion(request, on_token_reply, context);
    http_submit(provider->engine, request);
}

void auth_get_header_async(struct auth_provider *provider, auth_header_cb cb, void *user)
{
    if (provider->kind == AUTH_ANONYMOUS) {
        cb(0, NULL, NULL, user);
        return;
    }
    double now = http_now_s();
    char *usable = NULL;
    bool start = false;
    g_mutex_lock(&provider->lock);
    if (provider->header_line && now < provider->expires_at) {
        usable = g_strdup(provider->header_line);
        if (now >= provider->refresh_at && !provider->refreshing)
            start = provider->refreshing = true;
    } else {
        struct auth_waiter waiter = {.cb = cb, .user = user};
        g_array_append_val(provider->waiters, waiter);
        if (!provider->refreshing)
            start = provider->refreshing = true;
    }
    g_mutex_unlock(&provider->lock);
    if (start)
        start_refresh(provider);
    if (usable) {
        cb(0, usable, NULL, user);
        memset(usable, 0, strlen(usable));
        g_free(usable);
    }
}

struct blocking_header {
    struct wait_group group;
    int err;
    char *header_line;
    char *error;
};

static void on_blocking_header(int err, const char *header_line, const char *error_message,
                               void *user)
{
    struct blocking_header *wait = user;
    wait->err = err;
    wait->header_line = g_strdup(header_line);
    wait->error = g_strdup(error_message);
    wait_group_done(&wait->group);
}

int auth_get_header(struct auth_provider *provider, char **header_line, char **error)
{
    if (http_engine_is_engine_thread(provider->engine)) {
        *error = g_strdup("auth_get_header called on the engine thread");
        return -EDEADLK;
    }
    struct blocking_header wait = {.err = 0};
    wait_group_init(&wait.group, 1);
    auth_get_header_async(provider, on_blocking_header, &wait);
    wait_group_finish(&wait.group);
    if (wait.err < 0) {
        *error = wait.error;
        g_free(wait.header_line);
        return wait.err;
    }
    g_free(wait.error);
    *header_line = wait.header_line;
    return 0;
}
