/* Lock-free request counters of the emulator (see stats.h). Every counter is a relaxed atomic:
 * exact totals matter, ordering between counters does not. */
#include "stats.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

struct emu_op_info {
    const char *name;
    enum emu_op_class klass;
};

static const struct emu_op_info op_table[EMU_OP_COUNT] = {
    [EMU_OP_NONE] = {"", EMU_CLASS_NONE},
    [EMU_OP_BUCKETS_INSERT] = {"buckets.insert", EMU_CLASS_A},
    [EMU_OP_BUCKETS_GET] = {"buckets.get", EMU_CLASS_B},
    [EMU_OP_BUCKETS_LIST] = {"buckets.list", EMU_CLASS_A},
    [EMU_OP_BUCKETS_TEST_IAM] = {"buckets.testIamPermissions", EMU_CLASS_B},
    [EMU_OP_BUCKETS_DELETE] = {"buckets.delete", EMU_CLASS_FREE},
    [EMU_OP_BUCKETS_GET_STORAGE_LAYOUT] = {"buckets.getStorageLayout", EMU_CLASS_B},
    [EMU_OP_OBJECTS_LIST] = {"objects.list", EMU_CLASS_A},
    [EMU_OP_OBJECTS_GET] = {"objects.get", EMU_CLASS_B},
    [EMU_OP_OBJECTS_DOWNLOAD] = {"objects.download", EMU_CLASS_B},
    [EMU_OP_OBJECTS_INSERT] = {"objects.insert", EMU_CLASS_A},
    /* "A completed resumable upload is considered one Class A operation" (Cloud Storage docs,
     * resumable uploads): the initiation (objects.insert) is that one; its chunks add none. */
    [EMU_OP_OBJECTS_RESUMABLE_CHUNK] = {"objects.resumable_chunk", EMU_CLASS_FREE},
    [EMU_OP_OBJECTS_COMPOSE] = {"objects.compose", EMU_CLASS_A},
    [EMU_OP_OBJECTS_COPY] = {"objects.copy", EMU_CLASS_A},
    [EMU_OP_OBJECTS_REWRITE] = {"objects.rewrite", EMU_CLASS_A},
    [EMU_OP_OBJECTS_PATCH] = {"objects.patch", EMU_CLASS_A},
    [EMU_OP_OBJECTS_UPDATE] = {"objects.update", EMU_CLASS_A},
    [EMU_OP_OBJECTS_DELETE] = {"objects.delete", EMU_CLASS_FREE},
    [EMU_OP_XML_GET] = {"xml.get", EMU_CLASS_B},
    [EMU_OP_XML_HEAD] = {"xml.head", EMU_CLASS_B},
    [EMU_OP_XML_PUT] = {"xml.put", EMU_CLASS_A},
    [EMU_OP_XML_DELETE] = {"xml.delete", EMU_CLASS_FREE},
    [EMU_OP_XML_LIST] = {"xml.list", EMU_CLASS_A},
    [EMU_OP_XML_MPU_INITIATE] = {"xml.multipart_initiate", EMU_CLASS_A},
    [EMU_OP_XML_MPU_UPLOAD_PART] = {"xml.multipart_upload_part", EMU_CLASS_A},
    [EMU_OP_XML_MPU_COMPLETE] = {"xml.multipart_complete", EMU_CLASS_A},
    [EMU_OP_XML_MPU_ABORT] = {"xml.multipart_abort", EMU_CLASS_FREE},
    [EMU_OP_XML_MPU_LIST_PARTS] = {"xml.multipart_list_parts", EMU_CLASS_A},
    [EMU_OP_BUCKETS_PATCH] = {"buckets.patch", EMU_CLASS_A},
    [EMU_OP_BUCKETS_UPDATE] = {"buckets.update", EMU_CLASS_A},
    [EMU_OP_OBJECTS_RESTORE] = {"objects.restore", EMU_CLASS_A},
    [EMU_OP_OBJECTS_MOVE] = {"objects.move", EMU_CLASS_A},
    [EMU_OP_MANAGED_FOLDERS_LIST] = {"managedFolders.list", EMU_CLASS_A},
    [EMU_OP_FOLDERS_INSERT] = {"folders.insert", EMU_CLASS_A},
    [EMU_OP_FOLDERS_GET] = {"folders.get", EMU_CLASS_B},
    [EMU_OP_FOLDERS_LIST] = {"folders.list", EMU_CLASS_A},
    [EMU_OP_FOLDERS_DELETE] = {"folders.delete", EMU_CLASS_FREE},
    [EMU_OP_FOLDERS_RENAME] = {"folders.rename", EMU_CLASS_A},
    [EMU_OP_OPERATIONS_GET] = {"operations.get", EMU_CLASS_B},
    /* XML API resumable uploads: billed like the JSON API's (the initiation is the one Class A
     * operation of a completed upload). */
    [EMU_OP_XML_RESUMABLE_INITIATE] = {"xml.resumable_initiate", EMU_CLASS_A},
    [EMU_OP_XML_RESUMABLE_CHUNK] = {"xml.resumable_chunk", EMU_CLASS_FREE},
};

struct emu_stats {
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t ops[EMU_OP_COUNT];
    atomic_uint_fast64_t bytes_in;
    atomic_uint_fast64_t bytes_out;
    atomic_uint_fast64_t faults;
    atomic_uint_fast64_t unbilled; /* refused: Requester Pays without userProject */
    atomic_int_fast64_t connections;
    atomic_int_fast64_t peak_connections;
};

const char *emu_op_name(enum emu_op op)
{
    if ((unsigned)op >= EMU_OP_COUNT)
        return "";
    return op_table[op].name;
}

enum emu_op_class emu_op_class(enum emu_op op)
{
    if ((unsigned)op >= EMU_OP_COUNT)
        return EMU_CLASS_NONE;
    return op_table[op].klass;
}

enum emu_op emu_op_from_name(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return EMU_OP_NONE;
    for (int op = 1; op < EMU_OP_COUNT; op++) {
        if (strcmp(op_table[op].name, name) == 0)
            return (enum emu_op)op;
    }
    return EMU_OP_NONE;
}

struct emu_stats *emu_stats_new(void)
{
    struct emu_stats *stats = g_new0(struct emu_stats, 1);
    return stats;
}

void emu_stats_free(struct emu_stats *stats)
{
    g_free(stats);
}

void emu_stats_reset(struct emu_stats *stats)
{
    atomic_store(&stats->requests, 0);
    for (int i = 0; i < EMU_OP_COUNT; i++)
        atomic_store(&stats->ops[i], 0);
    atomic_store(&stats->bytes_in, 0);
    atomic_store(&stats->bytes_out, 0);
    atomic_store(&stats->faults, 0);
    atomic_store(&stats->unbilled, 0);
    atomic_store(&stats->peak_connections, atomic_load(&stats->connections));
}

void emu_stats_count_request(struct emu_stats *stats, enum emu_op op)
{
    atomic_fetch_add_explicit(&stats->requests, 1, memory_order_relaxed);
    if ((unsigned)op < EMU_OP_COUNT)
        atomic_fetch_add_explicit(&stats->ops[op], 1, memory_order_relaxed);
}

void emu_stats_add_bytes_in(struct emu_stats *stats, uint64_t n)
{
    atomic_fetch_add_explicit(&stats->bytes_in, n, memory_order_relaxed);
}

void emu_stats_add_bytes_out(struct emu_stats *stats, uint64_t n)
{
    atomic_fetch_add_explicit(&stats->bytes_out, n, memory_order_relaxed);
}

void emu_stats_count_fault(struct emu_stats *stats)
{
    atomic_fetch_add_explicit(&stats->faults, 1, memory_order_relaxed);
}

void emu_stats_count_unbilled(struct emu_stats *stats)
{
    atomic_fetch_add_explicit(&stats->unbilled, 1, memory_order_relaxed);
}

void emu_stats_connection_opened(struct emu_stats *stats)
{
    int_fast64_t now = atomic_fetch_add(&stats->connections, 1) + 1;
    int_fast64_t peak = atomic_load(&stats->peak_connections);
    while (now > peak && !atomic_compare_exchange_weak(&stats->peak_connections, &peak, now))
        ;
}

void emu_stats_connection_closed(struct emu_stats *stats)
{
    atomic_fetch_sub(&stats->connections, 1);
}

void emu_stats_class_counts(struct emu_stats *stats, uint64_t out[4])
{
    for (int k = 0; k < 4; k++)
        out[k] = 0;
    for (int op = 1; op < EMU_OP_COUNT; op++)
        out[op_table[op].klass] += atomic_load(&stats->ops[op]);
    out[EMU_CLASS_NONE] = 0;
}

void emu_stats_to_json(struct emu_stats *stats, GString *out)
{
    uint64_t per_class[4] = {0};
    g_string_append_printf(out, "{\"requests\":%" PRIuFAST64 ",\"ops\":{",
                           atomic_load(&stats->requests));
    for (int op = 1; op < EMU_OP_COUNT; op++) {
        uint64_t n = atomic_load(&stats->ops[op]);
        per_class[op_table[op].klass] += n;
        g_string_append_printf(out, "%s\"%s\":%" PRIu64, op == 1 ? "" : ",", op_table[op].name, n);
    }
    int_fast64_t connections = atomic_load(&stats->connections);
    g_string_append_printf(out,
                           "},\"class_a\":%" PRIu64 ",\"class_b\":%" PRIu64 ",\"free\":%" PRIu64
                           ",\"bytes_in\":%" PRIuFAST64 ",\"bytes_out\":%" PRIuFAST64
                           ",\"connections\":%" PRIdFAST64 ",\"peak_connections\":%" PRIdFAST64
                           ",\"faults_injected\":%" PRIuFAST64 ",\"unbilled\":%" PRIuFAST64 "}",
                           per_class[EMU_CLASS_A], per_class[EMU_CLASS_B],
                           per_class[EMU_CLASS_FREE], atomic_load(&stats->bytes_in),
                           atomic_load(&stats->bytes_out), connections < 0 ? 0 : connections,
                           atomic_load(&stats->peak_connections), atomic_load(&stats->faults),
                           atomic_load(&stats->unbilled));
}
