/* The emulator's bill: GET /_emulator/bill prices what the ledger (store.h) and the request
 * counters (stats.h) recorded with Cloud Storage's list prices. The price table is here, once,
 * and in the README (dated, with its source): list prices to check, not a quote. */
#ifndef EMU_BILL_H
#define EMU_BILL_H

#include <glib.h>

#include "stats.h"
#include "store.h"

/* A month as Cloud Storage's pricing examples count it (early deletion "15/30"). */
#define EMU_BILL_MONTH_SECONDS (30.0 * 86400.0)

/* Dollars per GiB-month of storage, per class (us-central1, regional). */
double emu_bill_storage_price(enum emu_storage_class cls);
/* Dollars per 1,000 operations of a billing class (Standard storage rates). */
double emu_bill_operation_price(enum emu_op_class klass);

/* Appends the JSON document of GET /_emulator/bill. */
void emu_bill_to_json(struct emu_store *store, struct emu_stats *stats, GString *out);

#endif
