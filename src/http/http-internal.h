/* Inside the http layer: the streamed request body (http_body.c) that the engine reads from as
 * curl sends. Not for other layers: they use fluxfs/http.h. */
#ifndef FLUXFS_HTTP_INTERNAL_H
#define FLUXFS_HTTP_INTERNAL_H

#include <curl/curl.h>
#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request body: pieces (memory, borrowed or owned, or an fd range) sent in order, and a read
 * cursor. Touched only by the thread that owns the request (the builder, then the engine). */
struct http_body {
    GArray *pieces;  /* struct http_body_piece; NULL until the first piece */
    uint64_t total;  /* sum of the pieces' lengths */
    guint index;     /* cursor: current piece */
    uint64_t within; /* cursor: offset inside that piece */
    int read_error;  /* errno of the first failed or short pread, 0 when none */
};

void http_body_init(struct http_body *body);
/* Frees owned pieces and forgets every piece; the body is empty and reusable. */
void http_body_clear(struct http_body *body);
/* copy: the bytes are copied (owned by the body); else borrowed from the caller. */
void http_body_add_memory(struct http_body *body, const void *data, size_t len, bool copy);
void http_body_add_fd(struct http_body *body, int fd, uint64_t offset, uint64_t len);
/* Moves the cursor to byte position of the whole body: 0, or -EINVAL past the end. */
int http_body_seek(struct http_body *body, uint64_t position);
/* Copies up to size bytes from the cursor into buf and advances it; returns the count (0 at the
 * end) or -1 after a failed or short pread (read_error says why). */
ptrdiff_t http_body_read(struct http_body *body, void *buf, size_t size);

/* The engine's CA store (http_tls.c): the CA file parsed once, not per connection. Returns an
 * X509_STORE (as void *, to keep OpenSSL out of this header) holding ca_file (or curl's default
 * bundle) and a lookup in ca_dir (or curl's default directory), or NULL when curl is not built
 * on OpenSSL or a source does not load: then curl loads the CAs itself, per connection, and
 * reports the error as it always has. */
void *http_tls_store_new(const char *ca_file, const char *ca_dir);
void http_tls_store_free(void *store); /* NULL is fine */
/* CURLOPT_SSL_CTX_FUNCTION: puts the store (CURLOPT_SSL_CTX_DATA) into a new SSL_CTX. */
CURLcode http_tls_use_store(CURL *easy, void *ssl_ctx, void *store);

#endif
