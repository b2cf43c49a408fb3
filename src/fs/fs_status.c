/* What the mount shows operators, rendered: the mount's identity and its request, upload,
 * memory and cost figures, as lines of MOUNT/.fluxfs/status (fluxfs status reads them) and as
 * the fs-level families of /metrics (--prometheus-port). Only rendering: the requests are
 * counted by the metrics decorator (fs_metrics.c) into the util layer's registry, read here;
 * the control layer renders its own figures (fs_control.c), and fs.c serves both. */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "fluxfs-config.h"
#include "fluxfs/invariant.h"
#include "fluxfs/metrics.h"
#include "fs-internal.h"

/* ---- the process's resident memory (issue 22, item 11) ---- */

struct process_memory {
    uint64_t rss, peak; /* bytes: VmRSS, VmHWM */
};

static void process_memory_read(struct process_memory *out)
{
    *out = (struct process_memory){0};
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return;
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            out->rss = (uint64_t)kb * 1024;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            out->peak = (uint64_t)kb * 1024;
    }
    fclose(f);
}

/* ---- what the mount is: shared by the status file and /metrics ---- */

static double uptime_s(const struct fs *fs)
{
    return fs->started_us ? (double)(g_get_monotonic_time() - fs->started_us) / 1e6 : 0.0;
}

static void append_line(GString *out, const char *key, uint64_t value)
{
    g_string_append_printf(out, "%s: %" PRIu64 "\n", key, value);
}

void fs_status_append(struct fs *fs, GString *out)
{
    const struct fs_config *cfg = fs->cfg;
    g_string_append_printf(out,
                           "version: %s\nbucket: %s\nprefix: %s\nmountpoint: %s\npid: %ld\n"
                           "uptime_s: %.1f\n",
                           FLUXFS_VERSION, cfg->bucket, cfg->prefix ? cfg->prefix : "",
                           cfg->mountpoint, (long)getpid(), uptime_s(fs));
    append_line(out, "handovers", fs->handovers); /* daemons this mount was handed over to */
    append_line(out, "crash_restarts", fs->crash_restarts); /* serving processes lost, replaced */
    if (fs->crash) { /* the crash journal (fs_crash.c): its bytes now, its compactions */
        uint64_t compactions = 0, compaction_us = 0;
        append_line(out, "crash_journal_bytes",
                    fs_crash_journal_bytes(fs->crash, &compactions, &compaction_us));
        append_line(out, "crash_journal_compactions", compactions);
        append_line(out, "crash_journal_compaction_cpu_us", compaction_us);
    }
    if (cfg->prometheus_port > 0)
        g_string_append_printf(out, "metrics_url: http://%s:%d/metrics\n", cfg->prometheus_address,
                               cfg->prometheus_port);
    uint64_t requests = 0, errors = 0, unsupported = 0;
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        requests += metrics_fs_op_count(op);
        errors += metrics_fs_op_errors(op);
        unsupported += metrics_fs_op_unsupported(op);
    }
    append_line(out, "fuse_requests", requests);
    append_line(out, "fuse_errors", errors);
    append_line(out, "fuse_unsupported", unsupported); /* ENOTTY to ioctls: not errors */
    /* Every kind, always (stable keys for scripts): count and errors. */
    for (int op = 0; op < METRICS_FS_OP_COUNT; op++) {
        char key[64];
        g_snprintf(key, sizeof(key), "fuse_op_%s", metrics_fs_op_key(op));
        append_line(out, key, metrics_fs_op_count(op));
        g_snprintf(key, sizeof(key), "fuse_op_%s_errors", metrics_fs_op_key(op));
        append_line(out, key, metrics_fs_op_errors(op));
    }
    uint64_t gcs_requests = 0, gcs_failures = 0, retries = 0;
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        gcs_requests += metrics_gcs_request_count(m);
        gcs_failures += metrics_gcs_request_failures(m);
    }
    for (int c = 0; c < METRICS_RETRY_CAUSE_COUNT; c++)
        retries += metrics_gcs_retries(c);
    append_line(out, "gcs_requests", gcs_requests);
    append_line(out, "gcs_request_failures", gcs_failures);
    append_line(out, "gcs_retries", retries);
    for (int m = 0; m < METRICS_GCS_METHOD_COUNT; m++) {
        uint64_t count = metrics_gcs_request_count(m);
        if (count > 0)
            g_string_append_printf(out, "gcs_method_%s: %" PRIu64 "\n", metrics_gcs_method_label(m),
                                   count);
    }
    for (int c = 0; c < METRICS_RETRY_CAUSE_COUNT; c++) {
        uint64_t count = metrics_gcs_retries(c);
        if (count > 0)
            g_string_append_printf(out, "gcs_retries_%s: %" PRIu64 "\n",
                                   metrics_retry_cause_label(c), count);
    }
    append_line(out, "gcs_read_bytes", metrics_get(METRICS_GCS_READ_BYTES));
    append_line(out, "gcs_received_bytes", metrics_get(METRICS_GCS_BYTES_DOWNLOADED));
    append_line(out, "gcs_sent_bytes", metrics_get(METRICS_GCS_BYTES_UPLOADED));
    append_line(out, "download_bytes_sequential",
                metrics_download_bytes_get(METRICS_READ_SEQUENTIAL));
    append_line(out, "download_bytes_random", metrics_download_bytes_get(METRICS_READ_RANDOM));
    append_line(out, "download_bytes_parallel", metrics_download_bytes_get(METRICS_READ_PARALLEL));
    append_line(out, "upload_parts", metrics_get(METRICS_UPLOAD_PARTS));
    append_line(out, "upload_bytes", metrics_get(METRICS_UPLOAD_BYTES));
    append_line(out, "upload_commits", metrics_get(METRICS_UPLOAD_COMMITS));
    append_line(out, "upload_retries", metrics_get(METRICS_UPLOAD_RETRIES));
    append_line(out, "upload_failures", metrics_get(METRICS_UPLOAD_FAILURES));
    append_line(out, "list_pages", metrics_get(METRICS_LIST_PAGES));
    append_line(out, "list_parallel_ranges", metrics_get(METRICS_LIST_PARALLEL_RANGES));
    append_line(out, "prefetch_dir_lists", metrics_get(METRICS_PREFETCH_DIR_LISTS));
    append_line(out, "refetched_bytes", metrics_get(METRICS_REFETCHED_BYTES));
    struct membudget_stats budget;
    membudget_get_stats(fs->budget, &budget);
    struct process_memory rss;
    process_memory_read(&rss);
    append_line(out, "memory_limit", fs->cfg->memory_limit);
    append_line(out, "memory_read_limit", budget.limit);
    append_line(out, "memory_rss", rss.rss);
    append_line(out, "memory_rss_peak", rss.peak);
    append_line(out, "memory_used", budget.used);
    append_line(out, "memory_peak", budget.peak);
    append_line(out, "memory_waits", budget.waits);
    append_line(out, "memory_buffers_reused", budget.buffers_reused);
    append_line(out, "memory_buffers_fresh", budget.buffers_fresh);
    append_line(out, "memory_buffer_fresh_bytes", budget.buffer_fresh_bytes);
    append_line(out, "open_writers", fs_write_open_count(fs));
    append_line(out, "inodes", inode_table_count(fs->inodes)); /* the kernel knows them */
    append_line(out, "kernel_forgotten", inode_table_forgotten_with_pages(fs->inodes));
    struct writer_buffer_stats write_buffers;
    fs_write_buffer_stats(fs, &write_buffers);
    append_line(out, "write_buffer_used", write_buffers.used);
    append_line(out, "write_buffer_peak", write_buffers.peak);
    append_line(out, "write_buffer_limit", write_buffers.limit);
    struct gcs_stats gcs;
    gcs_get_stats(fs->client, &gcs);
    append_line(out, "limit_op_waits", gcs.limit_op_waits);
    append_line(out, "limit_op_wait_ms", gcs.limit_op_wait_us / 1000);
    append_line(out, "limit_byte_pauses", gcs.limit_byte_pauses);
    append_line(out, "limit_byte_wait_ms", gcs.limit_byte_wait_us / 1000);
    append_line(out, "http_connections_opened", gcs.connections);
    append_line(out, "invariant_failures", fluxfs_invariant_failures());
    struct gcs_cost_stats cost;
    gcs_get_cost(fs->client, &cost);
    append_line(out, "cost_class_a_ops", cost.class_a);
    append_line(out, "cost_class_b_ops", cost.class_b);
    append_line(out, "cost_free_ops", cost.free_ops);
    append_line(out, "cost_temporaries_live", cost.temporaries_live);
    append_line(out, "cost_temporaries_deleted", cost.temporaries_deleted);
    g_string_append_printf(out, "cost_temporary_gib_seconds: %.6f\n", cost.temporary_gib_seconds);
    g_string_append_printf(out, "cost_soft_deleted_gib_seconds: %.6f\n",
                           cost.soft_deleted_gib_seconds);
    append_line(out, "cost_noncurrent_bytes", cost.noncurrent_bytes);
    g_string_append_printf(out, "cost_dollars: %.6f\n", cost.dollars);
}

/* ---- /metrics: the registry plus the fs-level families ---- */

static void gauge(GString *out, const char *name, const char *help, uint64_t value)
{
    metrics_render_family(out, name, "gauge", help);
    metrics_render_sample(out, name, NULL, value);
}

static void counter(GString *out, const char *name, const char *help, uint64_t value)
{
    metrics_render_family(out, name, "counter", help);
    metrics_render_sample(out, name, NULL, value);
}

void fs_status_render_metrics(struct fs *fs, GString *out)
{
    metrics_render(out);
    metrics_render_family(out, "fluxfs_build_info", "gauge",
                          "fluxfs version and the mounted bucket.");
    g_string_append_printf(out, "fluxfs_build_info{version=\"%s\",bucket=\"%s\"} 1\n",
                           FLUXFS_VERSION, fs->cfg->bucket); /* bucket names need no escape */
    g_string_append_printf(out,
                           "# HELP fluxfs_uptime_seconds Seconds since the mount started.\n"
                           "# TYPE fluxfs_uptime_seconds gauge\nfluxfs_uptime_seconds %.3f\n",
                           uptime_s(fs));
    struct membudget_stats budget;
    membudget_get_stats(fs->budget, &budget);
    struct process_memory rss;
    process_memory_read(&rss);
    struct gcs_cost_stats cost;
    gcs_get_cost(fs->client, &cost);
    metrics_render_family(out, "fluxfs_cost_operations_total", "counter",
                          "Requests the server answered, by billing class (list prices in gcs.h).");
    g_string_append_printf(out,
                           "fluxfs_cost_operations_total{class=\"A\"} %" PRIu64 "\n"
                           "fluxfs_cost_operations_total{class=\"B\"} %" PRIu64 "\n"
                           "fluxfs_cost_operations_total{class=\"free\"} %" PRIu64 "\n",
                           cost.class_a, cost.class_b, cost.free_ops);
    metrics_render_family(out, "fluxfs_cost_dollars", "gauge",
                          "Estimated list-price dollars of the mount's operations and temporary "
                          "storage (soft delete included) so far.");
    g_string_append_printf(out, "fluxfs_cost_dollars %.6f\n", cost.dollars);
    counter(out, "fluxfs_invariant_failures_total",
            "Broken invariants logged (bugs in fluxfs; release builds go on).",
            fluxfs_invariant_failures());
    gauge(out, "fluxfs_memory_limit_bytes",
          "--memory-limit: read buffers, the memory cache and write buffers together.",
          fs->cfg->memory_limit);
    gauge(out, "fluxfs_memory_budget_limit_bytes",
          "The read budget: --memory-limit less the write buffers' share.", budget.limit);
    gauge(out, "fluxfs_process_resident_bytes", "The daemon's resident memory (VmRSS).", rss.rss);
    gauge(out, "fluxfs_process_resident_peak_bytes", "The daemon's peak resident memory (VmHWM).",
          rss.peak);
    gauge(out, "fluxfs_memory_budget_used_bytes", "Bytes of the memory budget in use.",
          budget.used);
    gauge(out, "fluxfs_memory_budget_peak_bytes", "Most bytes of the budget ever in use.",
          budget.peak);
    gauge(out, "fluxfs_memory_budget_pooled_bytes",
          "Free buffers kept for reuse (part of the used bytes).", budget.pooled);
    struct writer_buffer_stats write_buffers;
    fs_write_buffer_stats(fs, &write_buffers);
    gauge(out, "fluxfs_write_buffer_bytes",
          "Bytes of files being written held in memory (their share of --memory-limit).",
          write_buffers.used);
    gauge(out, "fluxfs_write_buffer_peak_bytes", "Most bytes ever held in write buffers.",
          write_buffers.peak);
    gauge(out, "fluxfs_write_buffer_limit_bytes", "The write buffers' cap (--write-buffer-size).",
          write_buffers.limit);
    counter(out, "fluxfs_memory_budget_waits_count", "Acquisitions that had to wait.",
            budget.waits);
    gauge(out, "fluxfs_open_writers", "Files open for writing.", fs_write_open_count(fs));
    struct gcs_stats gcs;
    gcs_get_stats(fs->client, &gcs);
    counter(out, "fluxfs_rate_limit_op_waits_count",
            "Cloud Storage calls that waited for --limit-ops-per-sec.", gcs.limit_op_waits);
    counter(out, "fluxfs_rate_limit_op_wait_microseconds_count",
            "Total time calls waited for --limit-ops-per-sec.", gcs.limit_op_wait_us);
    counter(out, "fluxfs_rate_limit_byte_pauses_count",
            "Transfers paused for --limit-bytes-per-sec.", gcs.limit_byte_pauses);
    counter(out, "fluxfs_rate_limit_byte_wait_microseconds_count",
            "Total time transfers were paused for --limit-bytes-per-sec.", gcs.limit_byte_wait_us);
    struct namespace_stats ns;
    namespace_get_stats(fs->ns, &ns);
    counter(out, "fluxfs_listings_count", "Directory listings fetched.", ns.listings);
    counter(out, "fluxfs_name_resolutions_count", "Name lookups that needed requests.",
            ns.resolve_network);
}
