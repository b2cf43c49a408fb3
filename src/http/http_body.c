/* Streamed request bodies: a list of pieces (caller memory, small owned copies, fd ranges read
 * with pread) that curl pulls through its read callback, and that a retry or a curl rewind reads
 * again from any position. The caller's bytes are never copied into a body-sized buffer. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "http-internal.h"

enum piece_kind { PIECE_MEMORY, PIECE_FD };

struct http_body_piece {
    enum piece_kind kind;
    const uint8_t *data; /* PIECE_MEMORY */
    uint8_t *owned;      /* PIECE_MEMORY when copied: data == owned */
    int fd;              /* PIECE_FD */
    uint64_t offset;     /* PIECE_FD */
    uint64_t len;
};

void http_body_init(struct http_body *body)
{
    *body = (struct http_body){0};
}

void http_body_clear(struct http_body *body)
{
    if (body->pieces) {
        for (guint i = 0; i < body->pieces->len; i++)
            g_free(g_array_index(body->pieces, struct http_body_piece, i).owned);
        g_array_free(body->pieces, TRUE);
    }
    http_body_init(body);
}

static void add_piece(struct http_body *body, const struct http_body_piece *piece)
{
    if (piece->len == 0)
        return;
    if (!body->pieces)
        body->pieces = g_array_new(FALSE, TRUE, sizeof(struct http_body_piece));
    g_array_append_val(body->pieces, *piece);
    body->total += piece->len;
}

void http_body_add_memory(struct http_body *body, const void *data, size_t len, bool copy)
{
    struct http_body_piece piece = {.kind = PIECE_MEMORY, .data = data, .len = len};
    if (copy && len > 0) {
        piece.owned = g_memdup2(data, len);
        piece.data = piece.owned;
    }
    add_piece(body, &piece);
}

void http_body_add_fd(struct http_body *body, int fd, uint64_t offset, uint64_t len)
{
    struct http_body_piece piece = {.kind = PIECE_FD, .fd = fd, .offset = offset, .len = len};
    add_piece(body, &piece);
}

int http_body_seek(struct http_body *body, uint64_t position)
{
    if (position > body->total)
        return -EINVAL;
    body->index = 0;
    body->within = 0;
    body->read_error = 0;
    guint count = body->pieces ? body->pieces->len : 0;
    while (body->index < count) {
        uint64_t len = g_array_index(body->pieces, struct http_body_piece, body->index).len;
        if (position < len)
            break;
        position -= len;
        body->index++;
    }
    body->within = position;
    return 0;
}

ptrdiff_t http_body_read(struct http_body *body, void *buf, size_t size)
{
    uint8_t *out = buf;
    size_t done = 0;
    guint count = body->pieces ? body->pieces->len : 0;
    while (done < size && body->index < count) {
        const struct http_body_piece *piece =
            &g_array_index(body->pieces, struct http_body_piece, body->index);
        uint64_t left = piece->len - body->within;
        size_t want = (size_t)MIN((uint64_t)(size - done), left);
        if (piece->kind == PIECE_MEMORY) {
            memcpy(out + done, piece->data + body->within, want);
        } else {
            ssize_t got;
            do {
                got = pread(piece->fd, out + done, want, (off_t)(piece->offset + body->within));
            } while (got < 0 && errno == EINTR);
            if (got <= 0) {
                /* A staging file shorter than promised is as bad as an I/O error. */
                body->read_error = got < 0 ? errno : EIO;
                return -1;
            }
            want = (size_t)got; /* a short pread: the loop asks again for the rest */
        }
        done += want;
        body->within += want;
        if (body->within == piece->len) {
            body->index++;
            body->within = 0;
        }
    }
    return (ptrdiff_t)done;
}
