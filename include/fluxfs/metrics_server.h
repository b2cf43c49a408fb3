/* A small HTTP listener serving GET /metrics (Prometheus text format) from its own thread
 * (libmicrohttpd's internal polling thread), for --prometheus-port.
 *
 * The render callback runs on the listener thread for every scrape; it must only read state
 * that stays valid until metrics_server_stop returns (atomics, stats snapshots). */
#ifndef FLUXFS_METRICS_SERVER_H
#define FLUXFS_METRICS_SERVER_H

#include <glib.h>

typedef void (*metrics_render_fn)(GString *out, void *user);

struct metrics_server;

/* Listens on address:port (a numeric IPv4 or IPv6 address, or a host name resolved once).
 * 0 and *out, or a negative errno with *error (owned by the caller) naming the address. */
int metrics_server_start(const char *address, int port, metrics_render_fn render, void *user,
                         struct metrics_server **out, char **error);
/* Stops listening and waits for a scrape in progress. Accepts NULL. */
void metrics_server_stop(struct metrics_server *server);

#endif
