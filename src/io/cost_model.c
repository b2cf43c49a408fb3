/* The compose cost rule of --compose auto (include/fluxfs/cost_model.h). */
#include "fluxfs/cost_model.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

double compose_extra_dollars_per_gib(int64_t soft_delete_seconds)
{
    if (soft_delete_seconds <= 0)
        return 0;
    return COST_STANDARD_PER_GIB_MONTH * (double)soft_delete_seconds / COST_MONTH_SECONDS;
}

double compose_batch_dollars(uint64_t bytes, double extra_per_gib)
{
    return (COST_CLASS_A_PER_1000 + COST_CLASS_B_PER_1000) / 1000.0 +
           (double)bytes / (1024.0 * 1024.0 * 1024.0) * extra_per_gib;
}

double direct_batch_dollars(size_t count)
{
    return (double)count * COST_CLASS_B_PER_1000 / 1000.0;
}

bool compose_cheaper(size_t count, uint64_t bytes, double extra_per_gib)
{
    return count > 1 && compose_batch_dollars(bytes, extra_per_gib) < direct_batch_dollars(count);
}

/* "7 d", "36 h", "90 s": the soft delete period as people say it. */
static void format_period(int64_t seconds, char *out, size_t size)
{
    if (seconds % 86400 == 0)
        g_snprintf(out, size, "%" G_GINT64_FORMAT " d", seconds / 86400);
    else if (seconds % 3600 == 0)
        g_snprintf(out, size, "%" G_GINT64_FORMAT " h", seconds / 3600);
    else
        g_snprintf(out, size, "%" G_GINT64_FORMAT " s", seconds);
}

void compose_decide(enum compose_mode mode, const struct gcs_bucket_config *config, int get_error,
                    struct compose_decision *out)
{
    memset(out, 0, sizeof(*out));
    if (mode == COMPOSE_MODE_ON) {
        out->on = true;
        g_strlcpy(out->reason, "forced by --compose on", sizeof(out->reason));
        return;
    }
    if (mode == COMPOSE_MODE_OFF) {
        g_strlcpy(out->reason, "forced by --compose off", sizeof(out->reason));
        return;
    }
    if (!config) {
        g_snprintf(out->reason, sizeof(out->reason),
                   "bucket settings unreadable (%s): assuming a retention policy or hold that "
                   "forbids deleting temporaries; plain GETs",
                   get_error == -EACCES ? "no storage.buckets.get" : g_strerror(-get_error));
        return;
    }
    if (config->retention_seconds > 0) {
        char period[32];
        format_period(config->retention_seconds, period, sizeof(period));
        g_snprintf(out->reason, sizeof(out->reason),
                   "retention policy %s: temporaries could not be deleted; plain GETs", period);
        return;
    }
    if (config->default_event_based_hold) {
        g_strlcpy(out->reason,
                  "default event-based hold: temporaries could not be deleted; plain GETs",
                  sizeof(out->reason));
        return;
    }
    if (config->versioning) {
        /* A deleted temporary becomes a noncurrent version, billed until a lifecycle rule
         * removes it: bench/cost.py measured an epoch with compose at 6x the dollars of plain
         * GETs after one month, and growing. */
        g_strlcpy(out->reason,
                  "versioning: each deleted temporary would stay as a noncurrent version, "
                  "billed until a lifecycle rule deletes it; plain GETs",
                  sizeof(out->reason));
        return;
    }
    /* A default class with a minimum duration does not reach the temporaries: they are
     * created STANDARD (gcs_temporary_attrs), so no early deletion is billed. */
    const char *class_note = "";
    char class_text[64] = "";
    if (config->storage_class[0] && g_ascii_strcasecmp(config->storage_class, "STANDARD") != 0) {
        g_snprintf(class_text, sizeof(class_text), "; bucket class %s, temporaries STANDARD",
                   config->storage_class);
        class_note = class_text;
    }
    out->on = true;
    if (config->soft_delete_seconds > 0) {
        char period[32];
        format_period(config->soft_delete_seconds, period, sizeof(period));
        double extra = compose_extra_dollars_per_gib(config->soft_delete_seconds);
        out->per_batch_extra_per_gib = extra;
        /* The object size below which a full batch of 32 is cheaper composed, for the text:
         * where the GETs' dollars meet the compose's requests plus its bytes kept. */
        double per_object = (direct_batch_dollars(32) - compose_batch_dollars(0, extra)) / 32.0 /
                            extra * 1024.0 * 1024.0;
        g_snprintf(out->reason, sizeof(out->reason),
                   "soft delete %s: each temporary is billed ~%s after its delete, ~$%.4f per "
                   "GiB composed; a batch is composed only where that costs less than its "
                   "GETs, below ~%.0f KiB per object in a batch of 32%s",
                   period, period, extra, per_object, class_note);
    } else {
        g_snprintf(out->reason, sizeof(out->reason),
                   "no soft delete, retention or hold: temporaries cost nothing after their "
                   "delete%s",
                   class_note);
    }
}
