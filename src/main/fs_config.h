/* The fs layer's configuration from the command line's options (main layer, private): the one
 * place that knows both struct fluxfs_options and struct fs_config (include/fluxfs/fs.h). */
#ifndef FLUXFS_MAIN_FS_CONFIG_H
#define FLUXFS_MAIN_FS_CONFIG_H

#include "fluxfs/fs.h"
#include "fluxfs/options.h"

/* Fills *cfg from the parsed options, resolving what the fs layer should not parse (the upload
 * mode, the chmod policy, the readers' memory budget). The strings in *cfg point into opts,
 * which must outlive every use of cfg (fs_run). Pure: reads opts only. */
void fs_config_from_options(struct fs_config *cfg, const struct fluxfs_options *opts);

#endif
