/* The /metrics listener (see fluxfs/metrics_server.h) on libmicrohttpd. */
#include "fluxfs/metrics_server.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

#define METRICS_CONNECTION_LIMIT     16
#define METRICS_CONNECTION_TIMEOUT_S 10

struct metrics_server {
    struct MHD_Daemon *daemon;
    metrics_render_fn render;
    void *user;
};

static enum MHD_Result answer_text(struct MHD_Connection *connection, unsigned status,
                                   const char *content_type, char *body, size_t len)
{
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        g_free(body);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **connection_state)
{
    struct metrics_server *server = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        char *body = g_strdup("only GET /metrics is served\n");
        return answer_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", body,
                           strlen(body));
    }
    if (*upload_data_size > 0) {
        *upload_data_size = 0; /* a GET body is ignored */
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") != 0) {
        char *body = g_strdup("not found: metrics are at /metrics\n");
        return answer_text(connection, MHD_HTTP_NOT_FOUND, "text/plain", body, strlen(body));
    }
    GString *text = g_string_sized_new(16384);
    server->render(text, server->user);
    size_t len = text->len;
    /* MHD frees with free(); glib's g_free is free() since 2.46. */
    return answer_text(connection, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                       g_string_free(text, FALSE), len);
}

int metrics_server_start(const char *address, int port, metrics_render_fn render, void *user,
                         struct metrics_server **out, char **error)
{
    if (port <= 0 || port > 65535) {
        *error = g_strdup_printf("invalid port %d", port);
        return -EINVAL;
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *found = NULL;
    char service[16];
    g_snprintf(service, sizeof(service), "%d", port);
    int rc = getaddrinfo(address, service, &hints, &found);
    if (rc != 0 || !found) {
        *error = g_strdup_printf("cannot resolve the metrics address '%s': %s", address,
                                 rc ? gai_strerror(rc) : "no address");
        if (found)
            freeaddrinfo(found);
        return -EINVAL;
    }
    struct metrics_server *server = g_new0(struct metrics_server, 1);
    server->render = render;
    server->user = user;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (found->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    server->daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, server, MHD_OPTION_SOCK_ADDR, found->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_CONNECTION_LIMIT,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_CONNECTION_TIMEOUT_S, MHD_OPTION_END);
    freeaddrinfo(found);
    if (!server->daemon) {
        int err = errno ? errno : EADDRINUSE;
        *error =
            g_strdup_printf("cannot serve metrics on %s:%d: %s", address, port, g_strerror(err));
        g_free(server);
        return -err;
    }
    *out = server;
    return 0;
}

void metrics_server_stop(struct metrics_server *server)
{
    if (!server)
        return;
    MHD_stop_daemon(server->daemon);
    g_free(server);
}
