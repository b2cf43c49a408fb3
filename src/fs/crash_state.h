/* The crash-recovery state's layout in the memfd (crash_state.c writes it, fs_crash.c reads it
 * back after a crash). */
#ifndef FLUXFS_CRASH_STATE_H
#define FLUXFS_CRASH_STATE_H

#include <stdint.h>

#define CRASH_MAGIC     0x52435846u /* "FXCR" */
#define CRASH_VERSION   2u
#define INIT_MAX        512
#define SLOT_COUNT      1024 /* a power of 2; far above threads + max_background */
#define SLOT_BYTES      512
#define LANDING_COUNT   256 /* far above the session's threads; past it, reads go unguarded */
#define SLOT_BUSY       UINT64_MAX
#define JOURNAL_BYTES   (1ull << 30) /* sparse: only what is written takes memory */
#define NLOOKUP_ADOPTED (UINT64_C(1) << 62)

/* REC_DEAD: an OPEN whose handle closed, its place free for the next OPEN (crash_state.c);
 * recovery skips it. REC_CLOSE is no longer written (recovery still honours it). */
enum record_type { REC_NEW = 1, REC_DETACH, REC_GONE, REC_OPEN, REC_CLOSE, REC_DEAD };

struct crash_header {
    uint32_t magic, version;
    uint32_t init_request_len, init_reply_len; /* 0 until captured */
    uint8_t init_request[INIT_MAX];
    uint8_t init_reply[INIT_MAX];
    uint64_t handovers;
    uint64_t journal_used; /* atomic: committed bytes */
    uint32_t journal_full; /* a record did not fit: recovery is off */
    uint32_t pad;
};

struct crash_slot {
    uint64_t unique; /* atomic: 0 free, SLOT_BUSY being filled */
    uint32_t len;    /* the request's length */
    uint32_t stored; /* bytes kept below (min(len, SLOT_BYTES)) */
    uint8_t bytes[SLOT_BYTES];
};

/* One per thread reading /dev/fuse: the kernel copies a request's first SLOT_BYTES straight
 * here (readv), so a request this process took and had not yet put in a slot when it died is
 * still known to the next one. The header's unique is cleared once the slot holds it. */
struct crash_landing {
    uint32_t owner; /* atomic: 0 free, 1 a thread's */
    uint32_t pad;
    uint8_t bytes[SLOT_BYTES]; /* 8-aligned: read as struct fuse_in_header */
};

struct record {
    uint32_t type;
    uint32_t len; /* the whole record, a multiple of 8 */
    uint64_t a, b;
    uint64_t c, d; /* OPEN: generation, size */
    uint32_t e, f; /* NEW: kind, detached; OPEN: kind | writable << 8, crc | has_crc in g */
    uint32_t g, h;
    /* NEW: the path follows, NUL-terminated */
};

struct crash_map {
    struct crash_header header;
    struct crash_slot slots[SLOT_COUNT];
    struct crash_landing landings[LANDING_COUNT];
    uint8_t journal[];
};

#define MAP_BYTES (sizeof(struct crash_map) + JOURNAL_BYTES)

struct fs_crash {
    struct crash_map *map;
    GMutex lock;              /* journal appends, and the two below */
    GHashTable *open_records; /* fh -> the journal offset of its OPEN record */
    GArray *free_records;     /* offsets of dead OPEN records, reused by the next OPENs */
    size_t probe_max;         /* atomic: the farthest a request was placed from its hash slot */
    /* Requests served again after a crash that use a handle (READ, READDIR...) and are not yet
     * answered: a RELEASE/RELEASEDIR waits for them (fs_crash_release_wait). */
    GMutex replay_lock;
    GCond replay_done;
    int replays; /* atomic reads; changed under replay_lock */
    /* The threads serving them (fs_crash_recover starts them; joined before the session is
     * destroyed: fs_crash_join_replays). Only the thread running fs_run touches it. */
    GPtrArray *replay_threads;
};

#define SLOT_INDEX(unique) ((size_t)((unique) >> 1) & (SLOT_COUNT - 1))
void crash_state_observe(void *user, enum inode_event event, const struct inode *inode);

#endif
