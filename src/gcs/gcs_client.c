/* The Cloud Storage client: configuration (endpoint, STORAGE_EMULATOR_HOST, credentials),
 * lifetime of the engine and the credential provider, the mount-time access check, statistics. */
#include <curl/curl.h>
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fluxfs-config.h"
#include "fluxfs/log.h"
#include "gcs-internal.h"

#define DEFAULT_ENDPOINT    "https://storage.googleapis.com"
#define DEFAULT_MAX_RETRIES 6
#define DEFAULT_DEADLINE_S  120.0
#define DEFAULT_STALL_S     30.0
/* The mount-time check fails fast (a silent endpoint must not hold `mount` for long);
 * --request-deadline shortens it further. */
#define ACCESS_CHECK_DEADLINE_S 10.0
#define ACCESS_CHECK_RETRIES    3

int gcs_client_new(const struct gcs_client_config *config, struct gcs_client **out, char **error)
{
    if (!config->bucket || !*config->bucket || strchr(config->bucket, '/')) {
        *error =
            g_strdup_printf("invalid bucket name \"%s\"", config->bucket ? config->bucket : "");
        return -EINVAL;
    }
    bool anonymous = config->anonymous;
    const char *emulator_host = g_getenv("STORAGE_EMULATOR_HOST");
    const char *endpoint = config->endpoint;
    if (!endpoint && emulator_host && *emulator_host) {
        endpoint = emulator_host;
        anonymous = true; /* as Google's client libraries do */
    }
    if (!endpoint)
        endpoint = DEFAULT_ENDPOINT;

    struct gcs_client *client = g_new0(struct gcs_client, 1);
    client->endpoint = gcs_endpoint_normalize(endpoint);
    client->bucket = g_strdup(config->bucket);
    client->billing_project = config->billing_project && *config->billing_project
                                  ? g_strdup(config->billing_project)
                                  : NULL;
    client->max_retries = config->max_retries < 0    ? 0
                          : config->max_retries == 0 ? DEFAULT_MAX_RETRIES
                                                     : (unsigned)config->max_retries;
    client->deadline_s =
        config->request_deadline_s > 0 ? config->request_deadline_s : DEFAULT_DEADLINE_S;
    client->stall_s = config->stall_timeout_s > 0 ? config->stall_timeout_s : DEFAULT_STALL_S;
    g_mutex_init(&client->part_lock);
    gcs_cost_init(&client->cost);
    client->part_records =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_hash_table_unref);
    client->parse_pool = g_thread_pool_new(gcs_list_parse_run, NULL,
                                           CLAMP((gint)g_get_num_processors(), 2, 8), FALSE, NULL);

    char *user_agent = g_strdup(config->user_agent ? config->user_agent : "fluxfs/" FLUXFS_VERSION);
    struct http_engine_config engine_config = {
        .max_connections = config->max_connections,
        .connect_timeout_s = config->connect_timeout_s,
        .user_agent = user_agent,
        .ca_file = config->ca_file,
        .ca_dir = config->ca_dir,
        .limit_ops_per_sec = config->limit_ops_per_sec,
        .limit_bytes_per_sec = config->limit_bytes_per_sec,
    };
    int err = http_engine_new(&engine_config, &client->engine);
    g_free(user_agent);
    if (err < 0) {
        *error = g_strdup_printf("cannot start the request engine: %s", g_strerror(-err));
        gcs_client_free(client);
        return err;
    }
    client->log_requests = config->log_requests;
    http_engine_set_observer(client->engine, gcs_observe_attempt, client);
    struct auth_config auth_config = {
        .anonymous = anonymous,
        .key_file = config->key_file,
        .token_url = config->token_url,
        .token_url_is_source = config->token_url_is_source,
    };
    err = auth_provider_new(&auth_config, client->engine, &client->auth, error);
    if (err < 0) {
        gcs_client_free(client);
        return err;
    }
    flog_info("gcs", "endpoint %s, bucket %s, %s", client->endpoint, client->bucket,
              auth_provider_describe(client->auth));
    *out = client;
    return 0;
}

void gcs_client_free(struct gcs_client *client)
{
    if (!client)
        return;
    http_engine_free(client->engine); /* completes everything with -ECANCELED first */
    if (client->parse_pool)           /* list pages already received are parsed and delivered */
        g_thread_pool_free(client->parse_pool, FALSE, TRUE);
    auth_provider_free(client->auth);
    g_free(client->endpoint);
    g_free(client->bucket);
    g_free(client->billing_project);
    if (client->part_records)
        g_hash_table_unref(client->part_records);
    g_mutex_clear(&client->part_lock);
    gcs_cost_clear(&client->cost);
    g_free(client);
}

void gcs_rate_limited(struct gcs_client *client, uint64_t *reads, uint64_t *writes)
{
    *reads = atomic_load(&client->rate_limited_reads);
    *writes = atomic_load(&client->rate_limited_writes);
}

void gcs_get_stats(struct gcs_client *client, struct gcs_stats *out)
{
    struct http_engine_stats engine_stats;
    http_engine_get_stats(client->engine, &engine_stats);
    *out = (struct gcs_stats){
        .requests = engine_stats.requests,
        .retries = engine_stats.retries,
        .failures = engine_stats.failures,
        .bytes_downloaded = engine_stats.bytes_downloaded,
        .bytes_uploaded = engine_stats.bytes_uploaded,
        .list_calls = atomic_load(&client->list_calls),
        .get_calls = atomic_load(&client->get_calls),
        .media_calls = atomic_load(&client->media_calls),
        .write_calls = atomic_load(&client->write_calls),
        .limit_op_waits = engine_stats.limit_op_waits,
        .limit_op_wait_us = engine_stats.limit_op_wait_us,
        .limit_byte_pauses = engine_stats.limit_byte_pauses,
        .limit_byte_wait_us = engine_stats.limit_byte_wait_us,
        .connections = engine_stats.connections,
    };
}

/* What the access check needs from the one-item list: copied in the completion. */
struct access_reply {
    long status;
    int curl_code;
    int err;
    bool request_sent; /* connected and sent: no reply means a silent server */
    char *error_text;
    char *server_message;
    bool empty; /* a 200 listing nothing */
};

static void on_access_reply(const struct http_response *response, void *user)
{
    struct access_reply *reply = user;
    reply->status = response->status;
    reply->curl_code = response->curl_code;
    reply->request_sent = response->request_sent;
    reply->err = gcs_errno_from_response(response);
    reply->error_text = g_strdup(response->error_text);
    if (response->status >= 300 && response->body_len > 0)
        reply->server_message = gcs_json_error_message(response->body, response->body_len);
    if (reply->err == 0 && response->status == 200) {
        struct gcs_list_page page = {0};
        if (gcs_json_parse_list(response->body, response->body_len, &page) == 0)
            reply->empty = (!page.objects || page.objects->len == 0) &&
                           (!page.prefixes || page.prefixes->len == 0);
        gcs_list_page_clear(&page);
    }
}

int gcs_check_access(struct gcs_client *client, char **error)
{
    return gcs_check_access_prefix(client, NULL, NULL, error);
}

int gcs_check_access_prefix(struct gcs_client *client, const char *prefix, bool *empty,
                            char **error)
{
    char *header_line = NULL, *auth_error = NULL;
    int err = auth_get_header(client->auth, &header_line, &auth_error);
    if (err < 0) {
        *error = auth_error;
        return err;
    }
    struct gcs_list_params params = {.max_results = 1, .prefix = prefix && *prefix ? prefix : NULL};
    char *list_url = gcs_url_list(client->endpoint, client->bucket, &params);
    char *url = gcs_url_billed(list_url, client->billing_project);
    g_free(list_url);
    struct http_request *request = http_request_new(HTTP_GET, url);
    g_free(url);
    if (header_line)
        http_request_add_header(request, header_line);
    g_free(header_line);
    http_request_set_idempotent(request, true);
    double deadline_s = MIN(client->deadline_s, ACCESS_CHECK_DEADLINE_S);
    http_request_set_deadline(request, deadline_s);
    http_request_set_max_retries(request, MIN(client->max_retries, ACCESS_CHECK_RETRIES));
    http_request_set_stall_timeout(request, client->stall_s);
    http_request_set_growable_sink(request, GCS_JSON_CAP);
    struct access_reply reply = {0};
    http_request_set_completion(request, on_access_reply, &reply);
    atomic_fetch_add(&client->list_calls, 1);
    err = http_perform(client->engine, request);
    if (err < 0) {
        *error = g_strdup("gcs_check_access called on the engine thread");
        return err;
    }
    err = reply.err;
    if (empty)
        *empty = err == 0 && reply.empty;
    const char *server = reply.server_message ? reply.server_message : "no message";
    if (err == 0) {
        /* reachable, bucket there, credentials accepted */
    } else if (reply.status == 0 && reply.request_sent &&
               (reply.curl_code == CURLE_OPERATION_TIMEDOUT ||
                reply.curl_code == CURLE_ABORTED_BY_CALLBACK)) {
        /* It took the connection and the request, and said nothing back. */
        err = gcs_errno_from_transport(reply.curl_code);
        *error = g_strdup_printf("%s accepted the connection but did not answer within %.0f s "
                                 "(the mount-time limit: --request-deadline, at most %.0f s); "
                                 "is it a Cloud Storage endpoint, or a proxy that holds "
                                 "requests?",
                                 client->endpoint, deadline_s, ACCESS_CHECK_DEADLINE_S);
    } else if (reply.curl_code != CURLE_OK || reply.status == 0) {
        err = gcs_errno_from_transport(reply.curl_code);
        bool trust = reply.curl_code == CURLE_PEER_FAILED_VERIFICATION ||
                     reply.curl_code == CURLE_SSL_CACERT_BADFILE;
        *error = g_strdup_printf("cannot reach %s: %s%s", client->endpoint, reply.error_text,
                                 trust ? " (a private certificate authority: --ca-file FILE, "
                                         "or SSL_CERT_FILE / SSL_CERT_DIR)"
                                       : "");
    } else if (reply.status == 404) {
        *error =
            g_strdup_printf("bucket %s does not exist (at %s)", client->bucket, client->endpoint);
    } else if (reply.status == 401 || reply.status == 403) {
        *error = g_strdup_printf("access denied to bucket %s as %s: HTTP %ld: %s", client->bucket,
                                 auth_provider_describe(client->auth), reply.status, server);
    } else {
        *error = g_strdup_printf("listing bucket %s at %s failed: HTTP %ld: %s", client->bucket,
                                 client->endpoint, reply.status, server);
    }
    g_free(reply.error_text);
    g_free(reply.server_message);
    return err;
}
