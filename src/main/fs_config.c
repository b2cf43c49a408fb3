/* The fs layer's configuration from the command line's options (see fs_config.h). */
#include "fs_config.h"

#include <string.h>

static enum writer_upload_mode upload_mode(const char *text)
{
    if (!text || strcmp(text, "auto") == 0)
        return WRITER_UPLOAD_AUTO;
    if (strcmp(text, "multipart") == 0)
        return WRITER_UPLOAD_MULTIPART;
    if (strcmp(text, "composite") == 0)
        return WRITER_UPLOAD_COMPOSITE;
    return WRITER_UPLOAD_RESUMABLE;
}

void fs_config_from_options(struct fs_config *cfg, const struct fluxfs_options *opts)
{
    *cfg = (struct fs_config){
        .bucket = opts->bucket,
        .prefix = opts->prefix,
        .mountpoint = opts->mountpoint,
        .handover_fd = opts->handover_fd,
        .handover_wait_s = opts->handover_wait_s,
        .crash_memfd = opts->crash_memfd,
        .crash_sock = opts->crash_sock,
        .crash_device_fd = opts->crash_device_fd,
        .crash_restarts = opts->crash_restarts,
        .crash_tmp_id = opts->crash_tmp_id,
        .shutdown_grace_s = opts->shutdown_grace_s,
        .read_only = opts->read_only,
        .skip_open = opts->skip_open,
        .allow_other = opts->allow_other,
        .implicit_dirs = opts->implicit_dirs,
        .uid = opts->uid,
        .gid = opts->gid,
        .file_mode = opts->file_mode,
        .dir_mode = opts->dir_mode,
        .stat_ttl_s = opts->stat_ttl_s,
        .type_ttl_s = opts->type_ttl_s,
        .negative_ttl_s = opts->negative_ttl_s,
        .list_ttl_s = opts->list_ttl_s,
        .entry_timeout_s = opts->entry_timeout_s,
        .attr_timeout_s = opts->attr_timeout_s,
        .kernel_list_ttl_s = opts->kernel_list_ttl_s,
        .prefetch_metadata = opts->prefetch_metadata,
        .max_cached_names = opts->max_cached_names,
        .kernel_readahead_kb = opts->kernel_readahead_kb,
        .memory_limit = opts->memory_limit,
        .small_file_threshold = opts->small_file_threshold,
        .readahead_chunk = opts->readahead_chunk,
        .readahead_max = opts->readahead_max,
        .random_read_min = opts->random_read_min,
        .list_parallelism = opts->list_parallelism,
        .temp_dir = opts->temp_dir,
        .write_part_size = opts->write_part_size,
        .write_small_threshold = opts->write_small_threshold,
        .write_parts_in_flight = opts->write_parts_in_flight,
        .write_max_parts_in_flight = opts->write_max_parts_in_flight,
        .write_buffer_size = opts->write_buffer_size,
        .rename_dir_limit = opts->rename_dir_limit,
        .upload_cleanup_age_s = opts->upload_cleanup_age_s,
        .cache_dir = opts->cache_dir,
        .cache_size = opts->cache_size,
        .memory_cache_size = opts->memory_cache_size,
        .compose = opts->compose,
        .compose_auto = opts->compose_auto,
        .prefetch_lookahead = opts->prefetch_lookahead,
        .prefetch_workers = opts->prefetch_workers,
        .compose_max_objects = opts->compose_max_objects,
        .compose_object_max_size = opts->compose_object_max_size,
        .compose_batch_max_bytes = opts->compose_batch_max_bytes,
        .batch_misses_us = opts->batch_misses_us,
        .batch_misses_min = opts->batch_misses_min,
        .prometheus_port = opts->prometheus_port,
        .prometheus_address = opts->prometheus_address,
        .fuse_args = opts->fuse_args,
        .chmod_refuse = opts->chmod_policy && strcmp(opts->chmod_policy, "refuse") == 0,
        .upload_mode = upload_mode(opts->upload_mode),
        .read_budget = fluxfs_options_read_budget(opts),
    };
}
