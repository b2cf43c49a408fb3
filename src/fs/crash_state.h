/* The crash-recovery state's layout in the memfd (crash_state.c writes it, fs_crash.c reads it
 * back after a crash). */
#ifndef FLUXFS_CRASH_STATE_H
#define FLUXFS_CRASH_STATE_H

#include <stdint.h>

#define CRASH_MAGIC      0x52435846u /* "FXCR" */
#define CRASH_VERSION    3u /* 2: one journal, never compacted (read the same way: half 0) */
#define INIT_MAX         512
#define SLOT_COUNT       1024 /* a power of 2; far above threads + max_background */
#define SLOT_BYTES       512
#define LANDING_COUNT    256 /* far above the session's threads; past it, reads go unguarded */
#define SLOT_BUSY        UINT64_MAX
#define JOURNAL_BYTES    (1ull << 30)        /* sparse: only what is written takes memory */
#define JOURNAL_HALF     (JOURNAL_BYTES / 2) /* two halves: a compaction writes the other one */
#define JOURNAL_HALF_BIT (UINT64_C(1) << 63) /* in the header's journal word: half 1 */
/* A compaction starts when the dead records' bytes exceed the live ones' and the journal
 * holds at least this many bytes (below it a compaction would free nothing worth its cost). */
#define COMPACT_MIN_BYTES (256u * 1024u)
#define NLOOKUP_ADOPTED   (UINT64_C(1) << 62)

/* REC_DEAD: an OPEN whose handle closed, its place free for the next OPEN, or a NEW whose inode
 * is gone (crash_state.c); recovery skips it. REC_CLOSE, REC_DETACH and REC_GONE are no longer
 * written (a DETACH sets its NEW's f in place, a GONE marks its NEW dead); recovery still
 * honours them (a version 2 journal). */
enum record_type { REC_NEW = 1, REC_DETACH, REC_GONE, REC_OPEN, REC_CLOSE, REC_DEAD };

struct crash_header {
    uint32_t magic, version;
    uint32_t init_request_len, init_reply_len; /* 0 until captured */
    uint8_t init_request[INIT_MAX];
    uint8_t init_reply[INIT_MAX];
    uint64_t handovers;
    /* Atomic: where the journal is and how many of its bytes are committed: bit 63 the half
     * (JOURNAL_HALF_BIT), the rest the bytes from that half's start. One release store
     * publishes a record, and one switches to a compacted copy in the other half. Version 2
     * had one journal: the same word, bit 63 always 0. */
    uint64_t journal;
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
    GMutex lock;              /* journal appends, and the fields down to the hook */
    GHashTable *open_records; /* fh -> the journal offset of its OPEN record */
    GArray *free_records;     /* offsets of dead OPEN records, reused by the next OPENs */
    GHashTable *live_records; /* ino (the key itself) -> the journal offset of its NEW record */
    uint32_t half;            /* the half appends go to (offsets above are from its start) */
    bool staging;             /* recovery: appends not published until fs_crash_publish */
    uint64_t used;            /* bytes written in that half */
    uint64_t dead;            /* of which dead records (REC_DEAD), freed by a compaction */
    uint64_t compactions;     /* atomic reads (status) */
    uint64_t compaction_us;   /* the compactions' CPU time (the thread's); atomic reads */
    /* The test hook FLUXFS_TEST_KILL_IN_COMPACTION=N:PHASE: SIGKILL in compaction N, at PHASE
     * (1: half the live records copied, 2: all copied, not switched, 3: switched, the old half
     * not yet freed). 0: none. */
    uint64_t kill_compaction;
    unsigned kill_phase;
    size_t probe_max; /* atomic: the farthest a request was placed from its hash slot */
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
