/* The FUSE operations table, assembled in this one place (as gcsfuse's NewServer stacks its
 * wrappers): the base operations, then each decorator around what is below it.
 *
 *   metrics (fs_metrics.c)   counts every request by kind, its errno and latency
 *     control (fs_control.c) .fluxfs, the content cache and the prefetcher
 *       base: fs_ops.c (names, reads, directories through fs_dir.c, read-only stubs),
 *             then fs_write.c (the operations that change the bucket replace the stubs)
 *
 * A decorator keeps the table it wraps in its struct fs_layer (in struct fs): the state is
 * the mount's, filled here before the session starts and read-only afterwards. */
#include <string.h>

#include "fs-internal.h"

void fs_table_fill(struct fs *fs, struct fuse_lowlevel_ops *ops)
{
    memset(ops, 0, sizeof(*ops));
    fs_ops_fill(ops);
    fs_write_ops_fill(ops);
    fs_control_decorate(&fs->control_layer, ops);
    fs_metrics_decorate(&fs->metrics_layer, ops); /* outermost: requests about .fluxfs count */
}
