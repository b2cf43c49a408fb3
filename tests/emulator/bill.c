/* GET /_emulator/bill: operations by billing class, storage GiB-seconds by storage class and
 * state, early deletion, and their price in list-price dollars. */
#include "bill.h"

#include <inttypes.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Cloud Storage pricing page (cloud.google.com/storage/pricing), us-central1, as read in
 * 2025-06; the README's table repeats it. List prices: check them before quoting a bill. */
static const double storage_per_gib_month[EMU_STORAGE_CLASS_COUNT] = {
    0.020,  /* STANDARD */
    0.010,  /* NEARLINE */
    0.004,  /* COLDLINE */
    0.0012, /* ARCHIVE */
};
static const double class_a_per_1000 = 0.005; /* Standard storage, regional bucket */
static const double class_b_per_1000 = 0.0004;

double emu_bill_storage_price(enum emu_storage_class cls)
{
    return cls < EMU_STORAGE_CLASS_COUNT ? storage_per_gib_month[cls] : 0;
}

double emu_bill_operation_price(enum emu_op_class klass)
{
    switch (klass) {
    case EMU_CLASS_A:
        return class_a_per_1000;
    case EMU_CLASS_B:
        return class_b_per_1000;
    default:
        return 0;
    }
}

void emu_bill_to_json(struct emu_store *store, struct emu_stats *stats, GString *out)
{
    struct emu_ledger_report ledger;
    emu_store_ledger(store, &ledger);
    uint64_t ops[4] = {0};
    emu_stats_class_counts(stats, ops);

    double op_dollars = 0;
    for (int k = EMU_CLASS_A; k <= EMU_CLASS_FREE; k++)
        op_dollars += (double)ops[k] / 1000.0 * emu_bill_operation_price(k);

    g_string_append_printf(out,
                           "{\"elapsed_seconds\":%.6f,\"operations\":{\"A\":%" PRIu64
                           ",\"B\":%" PRIu64 ",\"free\":%" PRIu64 "},",
                           ledger.elapsed_seconds, ops[EMU_CLASS_A], ops[EMU_CLASS_B],
                           ops[EMU_CLASS_FREE]);

    double storage_dollars = 0, early_dollars = 0;
    GString *gib_seconds = g_string_new("\"storage_gib_seconds\":{");
    GString *bytes_now = g_string_new("\"storage_bytes_now\":{");
    GString *early = g_string_new("\"early_deletion_gib_seconds\":{");
    for (int c = 0; c < EMU_STORAGE_CLASS_COUNT; c++) {
        const char *name = emu_storage_class_name(c);
        double per_gib_second = emu_bill_storage_price(c) / EMU_BILL_MONTH_SECONDS;
        g_string_append_printf(gib_seconds, "%s\"%s\":{", c ? "," : "", name);
        g_string_append_printf(bytes_now, "%s\"%s\":{", c ? "," : "", name);
        for (int st = 0; st < EMU_STATE_COUNT; st++) {
            double gs = ledger.byte_seconds[c][st] / GIB;
            storage_dollars += gs * per_gib_second;
            g_string_append_printf(gib_seconds, "%s\"%s\":%.9g", st ? "," : "",
                                   emu_object_state_name(st), gs);
            g_string_append_printf(bytes_now, "%s\"%s\":%" PRIu64, st ? "," : "",
                                   emu_object_state_name(st), ledger.bytes_now[c][st]);
        }
        g_string_append_c(gib_seconds, '}');
        g_string_append_c(bytes_now, '}');
        double egs = ledger.early_byte_seconds[c] / GIB;
        early_dollars += egs * per_gib_second;
        g_string_append_printf(early, "%s\"%s\":%.9g", c ? "," : "", name, egs);
    }
    g_string_append_printf(out, "%s},%s},%s},", gib_seconds->str, bytes_now->str, early->str);
    g_string_free(gib_seconds, TRUE);
    g_string_free(bytes_now, TRUE);
    g_string_free(early, TRUE);

    g_string_append_printf(out,
                           "\"dollars\":{\"operations\":%.9g,\"storage\":%.9g,"
                           "\"early_deletion\":%.9g,\"total\":%.9g},",
                           op_dollars, storage_dollars, early_dollars,
                           op_dollars + storage_dollars + early_dollars);
    g_string_append_printf(out,
                           "\"prices\":{\"source\":\"https://cloud.google.com/storage/pricing\","
                           "\"as_of\":\"2025-06\",\"location\":\"us-central1\","
                           "\"note\":\"list prices, to check\",\"month_seconds\":%.0f,"
                           "\"operations_per_1000\":{\"A\":%g,\"B\":%g,\"free\":0},"
                           "\"storage_per_gib_month\":{",
                           EMU_BILL_MONTH_SECONDS, class_a_per_1000, class_b_per_1000);
    for (int c = 0; c < EMU_STORAGE_CLASS_COUNT; c++)
        g_string_append_printf(out, "%s\"%s\":%g", c ? "," : "", emu_storage_class_name(c),
                               storage_per_gib_month[c]);
    g_string_append(out, "}}}");
}
