/* Request accounting for the emulator: the canonical operation names shared by stats, faults
 * and --deny, their Cloud Storage billing class, and lock-free counters (per operation, per
 * class, bytes in/out, current and peak connections, injected faults) served as JSON by
 * GET /_emulator/stats. */
#ifndef EMU_STATS_H
#define EMU_STATS_H

#include <glib.h>
#include <stdint.h>

enum emu_op {
    EMU_OP_NONE = 0, /* not routed (control requests, unknown paths) */
    EMU_OP_BUCKETS_INSERT,
    EMU_OP_BUCKETS_GET,
    EMU_OP_BUCKETS_LIST,
    EMU_OP_BUCKETS_TEST_IAM,
    EMU_OP_BUCKETS_DELETE,
    EMU_OP_BUCKETS_GET_STORAGE_LAYOUT,
    EMU_OP_OBJECTS_LIST,
    EMU_OP_OBJECTS_GET,
    EMU_OP_OBJECTS_DOWNLOAD,
    EMU_OP_OBJECTS_INSERT,
    EMU_OP_OBJECTS_RESUMABLE_CHUNK,
    EMU_OP_OBJECTS_COMPOSE,
    EMU_OP_OBJECTS_COPY,
    EMU_OP_OBJECTS_REWRITE,
    EMU_OP_OBJECTS_PATCH,
    EMU_OP_OBJECTS_UPDATE,
    EMU_OP_OBJECTS_DELETE,
    EMU_OP_XML_GET,
    EMU_OP_XML_HEAD,
    EMU_OP_XML_PUT,
    EMU_OP_XML_DELETE,
    EMU_OP_XML_LIST,
    EMU_OP_XML_MPU_INITIATE,
    EMU_OP_XML_MPU_UPLOAD_PART,
    EMU_OP_XML_MPU_COMPLETE,
    EMU_OP_XML_MPU_ABORT,
    EMU_OP_XML_MPU_LIST_PARTS,
    EMU_OP_BUCKETS_PATCH,
    EMU_OP_BUCKETS_UPDATE,
    EMU_OP_OBJECTS_RESTORE,
    EMU_OP_OBJECTS_MOVE,
    EMU_OP_MANAGED_FOLDERS_LIST,
    EMU_OP_FOLDERS_INSERT,
    EMU_OP_FOLDERS_GET,
    EMU_OP_FOLDERS_LIST,
    EMU_OP_FOLDERS_DELETE,
    EMU_OP_FOLDERS_RENAME,
    EMU_OP_OPERATIONS_GET,
    EMU_OP_XML_RESUMABLE_INITIATE,
    EMU_OP_XML_RESUMABLE_CHUNK,
    EMU_OP_COUNT
};

enum emu_op_class { EMU_CLASS_NONE, EMU_CLASS_A, EMU_CLASS_B, EMU_CLASS_FREE };

/* "objects.list" etc.; "" for EMU_OP_NONE. */
const char *emu_op_name(enum emu_op op);
enum emu_op_class emu_op_class(enum emu_op op);
/* Returns EMU_OP_NONE for an unknown name. */
enum emu_op emu_op_from_name(const char *name);

struct emu_stats;

struct emu_stats *emu_stats_new(void);
void emu_stats_free(struct emu_stats *stats); /* accepts NULL */
/* Zeroes every counter; the current connection count stays (it is a gauge) and becomes the peak. */
void emu_stats_reset(struct emu_stats *stats);

void emu_stats_count_request(struct emu_stats *stats, enum emu_op op);
void emu_stats_add_bytes_in(struct emu_stats *stats, uint64_t n);
void emu_stats_add_bytes_out(struct emu_stats *stats, uint64_t n);
void emu_stats_count_fault(struct emu_stats *stats);
/* A request refused because Requester Pays is on and it carried no (or another) userProject. */
void emu_stats_count_unbilled(struct emu_stats *stats);
void emu_stats_connection_opened(struct emu_stats *stats);
void emu_stats_connection_closed(struct emu_stats *stats);

/* Requests counted so far by billing class: out[EMU_CLASS_A], out[EMU_CLASS_B],
 * out[EMU_CLASS_FREE] (out[EMU_CLASS_NONE] is 0). */
void emu_stats_class_counts(struct emu_stats *stats, uint64_t out[4]);

/* Appends the JSON document of GET /_emulator/stats. */
void emu_stats_to_json(struct emu_stats *stats, GString *out);

#endif
