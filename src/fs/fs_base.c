/* The fs layer's base: what every operation file uses and that calls no other fs file.
 *
 * Replies: fs_reply_err and fs_reply_entry are the fs layer's error and entry replies. Each
 * records the errno on the request being served on this thread (struct fs_request, opened by
 * the metrics decorator, fs_metrics.c) before the kernel hears it, then replies with libfuse's
 * function of the same suffix. Every fs operation replies on the thread that runs it.
 *
 * Handles: the open files and directories given to the kernel (fs_handle_opened/closed),
 * freed at FUSE destroy when the kernel never released them (fs.c). */
#include <errno.h>

#include "fluxfs/metrics.h"
#include "fs-internal.h"

static __thread struct fs_request *current_request;

void fs_request_enter(struct fs_request *request, enum metrics_fs_op op)
{
    request->err = 0;
    request->op = op;
    request->previous = current_request;
    current_request = request;
}

void fs_request_leave(struct fs_request *request)
{
    current_request = request->previous;
}

int fs_reply_err(fuse_req_t req, int err)
{
    struct fs_request *request = current_request;
    if (request) {
        if (request->err == 0 && err > 0)
            metrics_fs_op_failed(request->op, err);
        request->err = err;
    } else if (err != 0)
        metrics_fs_op_done(METRICS_FS_OTHERS, err, 0);
    return fuse_reply_err(req, err);
}

int fs_reply_entry(fuse_req_t req, const struct fuse_entry_param *entry)
{
    struct fs_request *request = current_request;
    if (request && entry->ino == 0 && request->err == 0) {
        metrics_fs_op_failed(request->op, ENOENT);
        request->err = ENOENT;
    }
    return fuse_reply_entry(req, entry);
}
