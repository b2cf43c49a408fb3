/* Hand-over: a new fluxfs process takes a live mount from the one serving it, without an
 * unmount (issue 24). The kernel keeps a FUSE connection as long as some process holds its
 * /dev/fuse descriptor and queues requests meanwhile, so the old process passes the descriptor
 * (SCM_RIGHTS) and what the kernel's view depends on: the INIT it negotiated, the inode numbers
 * the kernel holds (path, kind, lookup count) and the handles of open files and directories.
 *
 * The conversation, on an abstract Unix socket named after the mountpoint (only the same user
 * or root may connect: SO_PEERCRED):
 *   new -> old  HELLO   what the new command fixes at mount (bucket, prefix, ro, allow_other,
 *                       -o options) and how long it lets files open for writing close
 *   old         waits until no file is open for writing and no .fluxfs file is open (else
 *               REFUSE, and it serves on), closes its device gate (fs_gate.c: no new request is
 *               read, those read are answered), checks again
 *   old -> new  STATE   the state below, with the descriptor
 *   new         builds its session on the descriptor, feeds it the kernel's INIT as if it had
 *               just come (its answer goes nowhere; it must equal the answer the kernel got),
 *               adopts inodes and handles
 *   new -> old  ACCEPT  (or REFUSE with why: the old one opens its gate and serves on)
 *   old -> new  DONE    the old one let go (its metrics port is free); it then ends its
 *                       session loop without unmounting and exits
 * Every other failure on either side before ACCEPT leaves the old process serving. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fluxfs/fs.h"
#include "fluxfs/fd_pass.h"
#include "fluxfs/log.h"
#include "fluxfs/metrics_server.h"
#include "fs-internal.h"

#define HANDOVER_MAGIC     0x4f48584cu /* "LXHO" */
#define HANDOVER_HELLO     1u
#define HANDOVER_REFUSE    2u
#define HANDOVER_STATE     3u
#define HANDOVER_ACCEPT    4u
#define HANDOVER_DONE      5u
#define HANDOVER_MAX_BYTES (1u << 30)
#define HANDOVER_IO_S      30 /* a peer that says nothing this long is gone */
#define HANDOVER_DRAIN_S   10 /* requests in flight must be answered within this */
#define INIT_UNIQUE        1  /* the synthesized INIT (odd: never a kernel request's) */

/* HELLO: bucket, prefix, ro, allow_other, -o options, the writers' wait (s), pid. */
#define HELLO_TYPE "(ssbbsdu)"
#define HELLO_READ "(&s&sbb&sdu)" /* the strings borrowed from the message */
/* An inode: ino, kind, path, detached, nlookup, attrs known, generation, metageneration,
 * size, mtime_ns, has_crc32c, crc32c, symlink target, symlink in content, fetched_us, kernel
 * cache generation. */
#define INODE_TYPE "(tusbtbxxtxbusbxx)"
#define INODE_READ "(tu&sbtbxxtxbu&sbxx)"
/* An open file: kernel handle number, ino, open flags, generation, size, has_crc32c, crc32c,
 * kernel_held. An open directory: number, ino. */
#define FILE_TYPE "(ttixtbub)"
#define DIR_TYPE  "(tt)"
/* The state: fixed options, pid, hand-overs so far, the INIT request and its reply, next ino,
 * next handle alias, inodes, open files, open directories. */
#define STATE_FIELDS(bytes) "(ssbbsut" bytes bytes "tta" INODE_TYPE "a" FILE_TYPE "a" DIR_TYPE ")"

/* The type, and the format g_variant_new/get take (the INIT bytes as GVariants). */
static const char *state_type(void)
{
    return STATE_FIELDS("ay");
}

static const char *state_format(void)
{
    return STATE_FIELDS("@ay");
}

struct fs_handover {
    struct fs *fs;
    int listen_fd;
    int stop_pipe[2];
    GThread *thread;
    void (*loop_exit)(void *user);
    void *user;
};

struct fs_handover_state {
    GVariant *state;
    int sock;
    pid_t old_pid;
};

/* ---- the socket ---- */

static socklen_t socket_address(const char *mountpoint, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, mountpoint, -1);
    /* Abstract (sun_path[0] = 0): nothing to clean up, gone with the process. */
    int len =
        snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "fluxfs/handover/%.40s", digest);
    g_free(digest);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
}

static void set_timeouts(int fd, int seconds)
{
    struct timeval tv = {.tv_sec = seconds};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int fs_handover_connect(const char *mountpoint)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un addr;
    socklen_t len = socket_address(mountpoint, &addr);
    if (connect(fd, (struct sockaddr *)&addr, len) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    set_timeouts(fd, HANDOVER_IO_S);
    return fd;
}

static int write_full(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_full(int fd, void *data, size_t len)
{
    char *p = data;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return -ECONNRESET;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A message: magic, type, length, then the payload; fd >= 0 rides on the header. */
static int send_message(int sock, uint32_t type, const void *payload, size_t len, int fd)
{
    uint32_t header[3] = {HANDOVER_MAGIC, type, (uint32_t)len};
    ssize_t n = fd_pass_send(sock, header, sizeof(header), fd);
    if (n < 0)
        return (int)n;
    if ((size_t)n < sizeof(header)) {
        int rc = write_full(sock, (char *)header + n, sizeof(header) - (size_t)n);
        if (rc < 0)
            return rc;
    }
    return len > 0 ? write_full(sock, payload, len) : 0;
}

/* Receives one message: its type, payload (g_free) and a descriptor (-1 if none). */
static int receive_message(int sock, uint32_t *type, char **payload, size_t *len, int *fd)
{
    uint32_t header[3];
    ssize_t n = fd_pass_receive(sock, header, sizeof(header), 0, fd);
    if (n < 0)
        return (int)n;
    if (n == 0)
        return -ECONNRESET;
    int rc = 0;
    if ((size_t)n < sizeof(header))
        rc = read_full(sock, (char *)header + n, sizeof(header) - (size_t)n);
    if (rc == 0 && (header[0] != HANDOVER_MAGIC || header[2] > HANDOVER_MAX_BYTES))
        rc = -EPROTO;
    char *data = NULL;
    if (rc == 0) {
        data = g_malloc(header[2] + 1);
        rc = read_full(sock, data, header[2]);
        data[header[2]] = '\0';
    }
    if (rc < 0) {
        g_free(data);
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return rc;
    }
    *type = header[1];
    *payload = data;
    *len = header[2];
    return 0;
}

static int send_variant(int sock, uint32_t type, GVariant *value, int fd)
{
    g_variant_ref_sink(value);
    int rc = send_message(sock, type, g_variant_get_data(value), g_variant_get_size(value), fd);
    g_variant_unref(value);
    return rc;
}

static int send_text(int sock, uint32_t type, const char *text)
{
    return send_message(sock, type, text, strlen(text), -1);
}

static char *fuse_args_text(const struct fs_config *cfg)
{
    return cfg->fuse_args ? g_strjoinv(",", cfg->fuse_args) : g_strdup("");
}

/* ---- old side: giving the mount away ---- */

struct export
{
    GVariantBuilder inodes;
    struct fs *fs;
};

static void export_inode(struct inode *inode, void *user)
{
    struct export *ex = user;
    /* Inodes the kernel holds (nlookup) or an open handle holds (refs after the drain). */
    if (inode->nlookup == 0 && inode->refs == 0)
        return;
    if (inode->ino == INODE_ROOT_ID)
        return;
    g_mutex_lock(&inode->attr_lock);
    const struct meta_attrs *a = &inode->attrs;
    g_variant_builder_add(&ex->inodes, INODE_TYPE, (guint64)inode->ino, (guint32)inode->kind,
                          inode->path, inode->detached, (guint64)inode->nlookup, inode->attrs_known,
                          (gint64)a->generation, (gint64)a->metageneration, (guint64)a->size,
                          (gint64)a->mtime_ns, a->has_crc32c, (guint32)a->crc32c,
                          a->symlink_target ? a->symlink_target : "", a->symlink_in_content,
                          (gint64)inode->attrs_fetched_us, (gint64)inode->kernel_cache_generation);
    g_mutex_unlock(&inode->attr_lock);
}

static GVariant *bytes_variant(GBytes *bytes)
{
    gsize len = 0;
    const void *data = g_bytes_get_data(bytes, &len);
    return g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, data, len, 1);
}

/* The state after the drain (nothing else runs requests now). */
static GVariant *export_state(struct fs *fs, GBytes *init_request, GBytes *init_reply)
{
    struct export ex = {.fs = fs};
    g_variant_builder_init(&ex.inodes, G_VARIANT_TYPE("a" INODE_TYPE));
    uint64_t next_ino = inode_table_visit(fs->inodes, export_inode, &ex);
    GVariantBuilder files, dirs;
    g_variant_builder_init(&files, G_VARIANT_TYPE("a" FILE_TYPE));
    g_variant_builder_init(&dirs, G_VARIANT_TYPE("a" DIR_TYPE));
    g_mutex_lock(&fs->handles_lock);
    GHashTableIter iter;
    gpointer handle, kind;
    g_hash_table_iter_init(&iter, fs->open_handles);
    while (g_hash_table_iter_next(&iter, &handle, &kind)) {
        uint64_t number = fs_handle_number_locked(fs, handle);
        if (GPOINTER_TO_INT(kind) == FS_HANDLE_DIR) {
            struct fs_dir *dir = handle;
            g_variant_builder_add(&dirs, DIR_TYPE, (guint64)number, (guint64)dir->ino);
        } else {
            struct fs_file *file = handle;
            g_variant_builder_add(&files, FILE_TYPE, (guint64)number, (guint64)file->inode->ino, 0,
                                  (gint64)file->object.generation, (guint64)file->object.size,
                                  file->object.has_crc32c, (guint32)file->object.crc32c,
                                  __atomic_load_n(&file->kernel_held, __ATOMIC_RELAXED));
        }
    }
    uint64_t next_alias = fs->next_handle_alias;
    g_mutex_unlock(&fs->handles_lock);
    const struct fs_config *cfg = fs->cfg;
    char *args = fuse_args_text(cfg);
    GVariant *state =
        g_variant_new(state_format(), cfg->bucket, cfg->prefix ? cfg->prefix : "", cfg->read_only,
                      cfg->allow_other, args, (guint32)getpid(), (guint64)fs->handovers,
                      bytes_variant(init_request), bytes_variant(init_reply), (guint64)next_ino,
                      (guint64)next_alias, &ex.inodes, &files, &dirs);
    g_free(args);
    return state;
}

/* Why a new command with these fixed options cannot take this mount, or NULL. */
static char *fixed_mismatch(const struct fs_config *cfg, const char *bucket, const char *prefix,
                            gboolean read_only, gboolean allow_other, const char *args)
{
    char *mine = fuse_args_text(cfg);
    char *why = NULL;
    if (strcmp(bucket, cfg->bucket) != 0 || strcmp(prefix, cfg->prefix ? cfg->prefix : "") != 0)
        why = g_strdup_printf("this mount serves gs://%s/%s, not gs://%s/%s", cfg->bucket,
                              cfg->prefix ? cfg->prefix : "", bucket, prefix);
    else if (!read_only != !cfg->read_only)
        why = g_strdup_printf("read-only is fixed at mount time (this mount is %s)",
                              cfg->read_only ? "read-only" : "writable");
    else if (!allow_other != !cfg->allow_other)
        why = g_strdup_printf("allow_other is fixed at mount time (this mount has it %s)",
                              cfg->allow_other ? "on" : "off");
    else if (strcmp(args, mine) != 0)
        why = g_strdup_printf("-o options are fixed at mount time (this mount has '%s', "
                              "asked: '%s')",
                              mine, args);
    g_free(mine);
    return why;
}

/* Waits until nothing that cannot be carried is open (files being written, .fluxfs files):
 * NULL, or why not by deadline_us. */
static char *wait_uncarried_closed(struct fs *fs, int64_t deadline_us, double wait_s)
{
    for (;;) {
        size_t writers = fs_write_open_count(fs);
        int controls = __atomic_load_n(&fs->control_handles_open, __ATOMIC_SEQ_CST);
        if (writers == 0 && controls == 0)
            return NULL;
        if (g_get_monotonic_time() >= deadline_us) {
            if (writers > 0)
                return g_strdup_printf(
                    "%zu file%s open for writing did not close within %gs (a hand-over carries "
                    "no file half-written); the running daemon keeps serving",
                    writers, writers == 1 ? "" : "s", wait_s);
            return g_strdup_printf("%d file%s under .fluxfs stayed open for %gs; the running "
                                   "daemon keeps serving",
                                   controls, controls == 1 ? "" : "s", wait_s);
        }
        g_usleep(10 * 1000);
    }
}

/* One request for the mount: true when it was handed over (this process stops serving). */
static bool give(struct fs_handover *ho, int sock)
{
    struct fs *fs = ho->fs;
    const struct fs_config *cfg = fs->cfg;
    uint32_t type = 0;
    char *payload = NULL;
    size_t len = 0;
    int fd = -1;
    if (receive_message(sock, &type, &payload, &len, &fd) < 0 || type != HANDOVER_HELLO) {
        if (fd >= 0)
            close(fd);
        g_free(payload);
        return false;
    }
    GVariant *hello =
        g_variant_new_from_data(G_VARIANT_TYPE(HELLO_TYPE), payload, len, FALSE, g_free, payload);
    const char *bucket, *prefix, *args;
    gboolean read_only, allow_other;
    double wait_s;
    guint32 pid;
    g_variant_get(hello, HELLO_READ, &bucket, &prefix, &read_only, &allow_other, &args, &wait_s,
                  &pid);
    char *why = fixed_mismatch(cfg, bucket, prefix, read_only, allow_other, args);
    g_variant_unref(hello); /* the strings above are not used after this */
    GBytes *init_request = fs_gate_init_request(fs->gate);
    GBytes *init_reply = fs_gate_init_reply(fs->gate);
    if (!why && (!init_request || !init_reply))
        why = g_strdup("this daemon did not see the kernel's INIT (a mount made by an older "
                       "fluxfs)");
    if (!why && g_str_has_prefix(cfg->mountpoint, "/dev/fd/"))
        why = g_strdup("a mount served on /dev/fd/N cannot be handed over");
    flog_info("fs", "hand-over asked by pid %u", pid);
    int64_t deadline = g_get_monotonic_time() + (int64_t)(wait_s * G_USEC_PER_SEC);
    bool closed = false;
    while (!why) {
        why = wait_uncarried_closed(fs, deadline, wait_s);
        if (why)
            break;
        int64_t drain_deadline =
            MAX(deadline, g_get_monotonic_time() + HANDOVER_DRAIN_S * G_USEC_PER_SEC);
        if (fs_gate_close(fs->gate, cfg->mountpoint, drain_deadline) < 0) {
            why = g_strdup_printf("requests in flight were not answered within %ds; the "
                                  "running daemon keeps serving",
                                  HANDOVER_DRAIN_S);
            break;
        }
        /* A file opened for writing while the gate closed: wait for it too. */
        if (fs_write_open_count(fs) == 0 &&
            __atomic_load_n(&fs->control_handles_open, __ATOMIC_SEQ_CST) == 0) {
            closed = true;
            break;
        }
        fs_gate_open(fs->gate);
    }
    bool handed = false;
    if (why) {
        flog_warn("fs", "hand-over to pid %u refused: %s", pid, why);
        send_text(sock, HANDOVER_REFUSE, why);
        g_free(why);
        goto out;
    }
    GVariant *state = export_state(fs, init_request, init_reply);
    int rc = send_variant(sock, HANDOVER_STATE, state, fuse_session_fd(fs->session));
    char *answer = NULL;
    if (rc == 0)
        rc = receive_message(sock, &type, &answer, &len, &fd);
    if (fd >= 0)
        close(fd);
    if (rc == 0 && type == HANDOVER_ACCEPT) {
        /* The new daemon serves from now on; free the metrics port for it, then let go. */
        metrics_server_stop(fs->metrics_server);
        fs->metrics_server = NULL;
        fs->handed_over = true;
        /* The new daemon listens on the same name once it has DONE. */
        close(ho->listen_fd);
        ho->listen_fd = -1;
        send_message(sock, HANDOVER_DONE, NULL, 0, -1);
        flog_info("fs",
                  "handed %s over to pid %u (hand-over %" G_GUINT64_FORMAT "); exiting "
                  "without unmounting",
                  cfg->mountpoint, pid, fs->handovers + 1);
        handed = true;
        closed = false; /* stays closed for good */
    } else if (rc == 0 && type == HANDOVER_REFUSE) {
        flog_warn("fs", "hand-over to pid %u failed there: %s; serving on", pid, answer);
    } else {
        flog_warn("fs", "hand-over to pid %u failed: %s; serving on", pid,
                  rc < 0 ? g_strerror(-rc) : "unexpected answer");
    }
    g_free(answer);
out:
    if (closed)
        fs_gate_open(fs->gate);
    if (init_request)
        g_bytes_unref(init_request);
    if (init_reply)
        g_bytes_unref(init_reply);
    return handed;
}

static gpointer listener_main(gpointer data)
{
    struct fs_handover *ho = data;
    for (;;) {
        struct pollfd pfds[2] = {{.fd = ho->listen_fd, .events = POLLIN},
                                 {.fd = ho->stop_pipe[0], .events = POLLIN}};
        if (poll(pfds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pfds[1].revents)
            break;
        int sock = accept4(ho->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (sock < 0)
            continue;
        struct ucred cred;
        socklen_t cred_len = sizeof(cred);
        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) < 0 ||
            (cred.uid != 0 && cred.uid != geteuid())) {
            close(sock);
            continue;
        }
        set_timeouts(sock, HANDOVER_IO_S);
        bool handed = give(ho, sock);
        close(sock);
        if (handed) {
            ho->loop_exit(ho->user);
            break;
        }
    }
    return NULL;
}

int fs_handover_listen(struct fs *fs, void (*loop_exit)(void *user), void *user, char **error)
{
    if (g_str_has_prefix(fs->cfg->mountpoint, "/dev/fd/"))
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *error = g_strdup_printf("hand-over socket: %s", g_strerror(errno));
        return -errno;
    }
    struct sockaddr_un addr;
    socklen_t len = socket_address(fs->cfg->mountpoint, &addr);
    if (bind(fd, (struct sockaddr *)&addr, len) < 0 || listen(fd, 4) < 0) {
        int err = errno;
        close(fd);
        /* Not fatal: this mount just cannot be handed over. */
        flog_warn("fs", "hand-over socket for %s: %s (this mount cannot be handed over)",
                  fs->cfg->mountpoint, g_strerror(err));
        return 0;
    }
    struct fs_handover *ho = g_new0(struct fs_handover, 1);
    ho->fs = fs;
    ho->listen_fd = fd;
    ho->loop_exit = loop_exit;
    ho->user = user;
    if (pipe2(ho->stop_pipe, O_CLOEXEC) < 0) {
        close(fd);
        g_free(ho);
        *error = g_strdup_printf("pipe: %s", g_strerror(errno));
        return -errno;
    }
    ho->thread = g_thread_new("fluxfs-handover", listener_main, ho);
    fs->handover = ho;
    return 0;
}

void fs_handover_stop(struct fs *fs)
{
    struct fs_handover *ho = fs->handover;
    if (!ho)
        return;
    char byte = 0;
    ssize_t n = write(ho->stop_pipe[1], &byte, 1);
    (void)n;
    g_thread_join(ho->thread);
    if (ho->listen_fd >= 0)
        close(ho->listen_fd);
    close(ho->stop_pipe[0]);
    close(ho->stop_pipe[1]);
    g_free(ho);
    fs->handover = NULL;
}

/* ---- new side: taking the mount ---- */

void fs_handover_state_free(struct fs_handover_state *state)
{
    if (!state)
        return;
    if (state->state)
        g_variant_unref(state->state);
    g_free(state);
}

int fs_handover_receive(struct fs *fs, int sock, struct fs_handover_state **out, int *fd,
                        char **error)
{
    const struct fs_config *cfg = fs->cfg;
    char *args = fuse_args_text(cfg);
    GVariant *hello =
        g_variant_new(HELLO_TYPE, cfg->bucket, cfg->prefix ? cfg->prefix : "", cfg->read_only,
                      cfg->allow_other, args, cfg->handover_wait_s, (guint32)getpid());
    g_free(args);
    int rc = send_variant(sock, HANDOVER_HELLO, hello, -1);
    uint32_t type = 0;
    char *payload = NULL;
    size_t len = 0;
    *fd = -1;
    if (rc == 0)
        rc = receive_message(sock, &type, &payload, &len, fd);
    if (rc < 0) {
        *error =
            g_strdup_printf("the running daemon did not answer the hand-over: %s", g_strerror(-rc));
        return rc;
    }
    if (type == HANDOVER_REFUSE) {
        *error = g_strdup_printf("the running daemon refused the hand-over: %s", payload);
        g_free(payload);
        return -EBUSY;
    }
    if (type != HANDOVER_STATE || *fd < 0) {
        g_free(payload);
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        *error = g_strdup("the running daemon answered the hand-over with no state");
        return -EPROTO;
    }
    struct fs_handover_state *state = g_new0(struct fs_handover_state, 1);
    state->state = g_variant_ref_sink(g_variant_new_from_data(G_VARIANT_TYPE(state_type()), payload,
                                                              len, FALSE, g_free, payload));
    state->sock = sock;
    *out = state;
    return 0;
}

static GBytes *variant_bytes(GVariant *value)
{
    gsize len = 0;
    const void *data = g_variant_get_fixed_array(value, &len, 1);
    return g_bytes_new(data, len);
}

/* Feeds the kernel's INIT to the new session; its answer must be the one the kernel got. */
static int replay_init(struct fs *fs, GBytes *request, GBytes *reply, char **error)
{
    gsize len = 0;
    const char *data = g_bytes_get_data(request, &len);
    if (len < sizeof(struct fuse_in_header)) {
        *error = g_strdup("the carried INIT is too short");
        return -EPROTO;
    }
    char *copy = g_malloc(len);
    memcpy(copy, data, len);
    ((struct fuse_in_header *)copy)->unique = INIT_UNIQUE;
    fs_gate_set_init(fs->gate, request, reply);
    fs_gate_swallow(fs->gate, INIT_UNIQUE);
    struct fuse_buf buf = {.mem = copy, .size = len};
    fuse_session_process_buf(fs->session, &buf);
    g_free(copy);
    GBytes *answer = fs_gate_take_swallowed(fs->gate);
    if (!answer) {
        *error = g_strdup("the new session gave no answer to the carried INIT");
        return -EPROTO;
    }
    gsize mine_len = 0, theirs_len = 0;
    const char *mine = g_bytes_get_data(answer, &mine_len);
    const char *theirs = g_bytes_get_data(reply, &theirs_len);
    size_t header = sizeof(struct fuse_out_header);
    int rc = 0;
    if (mine_len < header || ((const struct fuse_out_header *)mine)->error != 0) {
        *error = g_strdup("the new session refused the carried INIT");
        rc = -EPROTO;
    } else if (mine_len != theirs_len ||
               memcmp(mine + header, theirs + header, mine_len - header)) {
        const struct fuse_init_out *a = (const void *)(mine + header);
        const struct fuse_init_out *b = (const void *)(theirs + header);
        *error = g_strdup_printf(
            "this build would negotiate other FUSE parameters than the kernel has (flags 0x%x "
            "max_write %u max_readahead %u, the kernel has flags 0x%x max_write %u "
            "max_readahead %u)",
            a->flags, a->max_write, a->max_readahead, b->flags, b->max_write, b->max_readahead);
        rc = -EPROTO;
    }
    g_bytes_unref(answer);
    return rc;
}

int fs_handover_restore(struct fs *fs, struct fs_handover_state *state, char **error)
{
    const char *bucket, *prefix, *args;
    gboolean read_only, allow_other;
    guint32 pid;
    guint64 handovers, next_ino, next_alias;
    GVariant *init_request_v, *init_reply_v;
    GVariantIter *inodes, *files, *dirs;
    g_variant_get(state->state, state_format(), &bucket, &prefix, &read_only, &allow_other, &args,
                  &pid, &handovers, &init_request_v, &init_reply_v, &next_ino, &next_alias, &inodes,
                  &files, &dirs);
    state->old_pid = (pid_t)pid;
    int rc = 0;
    char *why = fixed_mismatch(fs->cfg, bucket, prefix, read_only, allow_other, args);
    GBytes *init_request = variant_bytes(init_request_v);
    GBytes *init_reply = variant_bytes(init_reply_v);
    if (why) {
        *error = why;
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = replay_init(fs, init_request, init_reply, error);
    /* Inodes, then the handles that hold them. */
    guint64 ino, nlookup, size, fh;
    guint32 kind, crc;
    const char *path, *target;
    gboolean detached, known, has_crc, in_content, held;
    gint64 generation, metageneration, mtime, fetched, kernel_generation;
    while (rc == 0 &&
           g_variant_iter_next(inodes, INODE_READ, &ino, &kind, &path, &detached, &nlookup, &known,
                               &generation, &metageneration, &size, &mtime, &has_crc, &crc, &target,
                               &in_content, &fetched, &kernel_generation)) {
        struct meta_attrs attrs = {
            .size = size,
            .generation = generation,
            .metageneration = metageneration,
            .mtime_ns = mtime,
            .has_crc32c = has_crc,
            .crc32c = crc,
            .symlink_target = target[0] ? (char *)target : NULL,
            .symlink_in_content = in_content,
            .fetched_us = fetched,
        };
        if (inode_table_adopt(fs->inodes, ino, path, (enum meta_kind)kind, nlookup, detached,
                              known ? &attrs : NULL, fetched, kernel_generation) < 0) {
            *error =
                g_strdup_printf("inode %" G_GUINT64_FORMAT " ('%s') cannot be adopted", ino, path);
            rc = -EEXIST;
        }
    }
    if (rc == 0)
        inode_table_set_next(fs->inodes, next_ino);
    g_mutex_lock(&fs->handles_lock);
    fs->next_handle_alias = next_alias | 1;
    g_mutex_unlock(&fs->handles_lock);
    gint32 flags;
    while (rc == 0 && g_variant_iter_next(files, FILE_TYPE, &fh, &ino, &flags, &generation, &size,
                                          &has_crc, &crc, &held)) {
        struct inode *inode = inode_table_get(fs->inodes, ino);
        if (!inode) {
            *error = g_strdup_printf("an open file's inode %" G_GUINT64_FORMAT " is missing", ino);
            rc = -ENOENT;
            break;
        }
        struct meta_attrs attrs = {
            .size = size, .generation = generation, .has_crc32c = has_crc, .crc32c = crc};
        /* Generation 0: a file opened for reading while it was being written (fs_write_open),
         * which read the writer's bytes; the writer died with the process (a hand-over waits
         * for it instead). It reads on from the object the name has now, asked for here; with
         * none (never committed), its bytes are gone and its reads fail with EIO. */
        bool gone = false;
        struct meta_attrs now = {0};

        if (generation == 0 && flags >= 0 && inode->kind == META_FILE) {
            enum meta_kind found;
            gone = namespace_stat_file(fs->ns, inode->path, &found, &now) < 0 || found != META_FILE;
            if (!gone)
                inode_set_attrs(inode, &now, g_get_monotonic_time());
        }
        /* flags -1: a file open for writing in a process that died (fs_crash.c): what it
         * wrote is gone, its next write, flush or fsync fails with EIO. */
        const struct meta_attrs *opened = now.generation != 0 ? &now : &attrs;
        /* An inode a crash carried has no attributes yet (the journal keeps none): those the
         * open got, which a GETATTR of the open file answers (fs_getattr). Else the kernel,
         * asking before a read, was told size 0 and read nothing (issue 24's combined test). */
        struct meta_attrs inode_attrs;
        inode_get_attrs(inode, &inode_attrs, NULL);
        if (inode_attrs.generation == 0 && opened->generation != 0 && !gone)
            inode_set_attrs(inode, opened, 0); /* fetched never: a path stat asks again */
        meta_attrs_clear(&inode_attrs);
        struct fs_file *file =
            fs_file_new(fs, inode, opened, flags < 0 ? 0 : flags); /* takes the reference */
        meta_attrs_clear(&now);
        file->kernel_held = held;
        file->lost = flags < 0 || gone;
        g_mutex_lock(&fs->handles_lock);
        g_hash_table_insert(fs->open_handles, file, GINT_TO_POINTER(FS_HANDLE_FILE));
        fs_handle_alias_locked(fs, fh, file);
        g_mutex_unlock(&fs->handles_lock);
    }
    while (rc == 0 && g_variant_iter_next(dirs, DIR_TYPE, &fh, &ino)) {
        struct inode *inode = inode_table_get(fs->inodes, ino);
        if (!inode) {
            *error =
                g_strdup_printf("an open directory's inode %" G_GUINT64_FORMAT " is missing", ino);
            rc = -ENOENT;
            break;
        }
        struct fs_dir *dir = g_new0(struct fs_dir, 1);
        g_mutex_init(&dir->lock);
        dir->ino = ino; /* listed again at its next readdir */
        dir->path = g_strdup(inode->path);
        inode_put(fs->inodes, inode);
        g_mutex_lock(&fs->handles_lock);
        g_hash_table_insert(fs->open_handles, dir, GINT_TO_POINTER(FS_HANDLE_DIR));
        fs_handle_alias_locked(fs, fh, dir);
        g_mutex_unlock(&fs->handles_lock);
    }
    fs->handovers = handovers + 1;
    g_variant_iter_free(inodes);
    g_variant_iter_free(files);
    g_variant_iter_free(dirs);
    g_variant_unref(init_request_v);
    g_variant_unref(init_reply_v);
    g_bytes_unref(init_request);
    g_bytes_unref(init_reply);
    g_free((char *)bucket);
    g_free((char *)prefix);
    g_free((char *)args);
    if (rc < 0 && state->sock >= 0)
        send_text(state->sock, HANDOVER_REFUSE, *error);
    return rc;
}

/* ---- crash recovery (fs_crash.c) builds the same state from its shared memory ---- */

void fs_handover_builders_init(GVariantBuilder *inodes, GVariantBuilder *files,
                               GVariantBuilder *dirs)
{
    g_variant_builder_init(inodes, G_VARIANT_TYPE("a" INODE_TYPE));
    g_variant_builder_init(files, G_VARIANT_TYPE("a" FILE_TYPE));
    g_variant_builder_init(dirs, G_VARIANT_TYPE("a" DIR_TYPE));
}

void fs_handover_add_inode(GVariantBuilder *inodes, uint64_t ino, uint32_t kind, const char *path,
                           bool detached, uint64_t nlookup)
{
    g_variant_builder_add(inodes, INODE_TYPE, (guint64)ino, (guint32)kind, path, (gboolean)detached,
                          (guint64)nlookup, FALSE, (gint64)0, (gint64)0, (guint64)0, (gint64)0,
                          FALSE, (guint32)0, "", FALSE, (gint64)0, (gint64)-1);
}

void fs_handover_add_file(GVariantBuilder *files, uint64_t fh, uint64_t ino, bool lost,
                          int64_t generation, uint64_t size, bool has_crc32c, uint32_t crc32c)
{
    g_variant_builder_add(files, FILE_TYPE, (guint64)fh, (guint64)ino, lost ? -1 : 0,
                          (gint64)generation, (guint64)size, (gboolean)has_crc32c, (guint32)crc32c,
                          FALSE);
}

void fs_handover_add_dir(GVariantBuilder *dirs, uint64_t fh, uint64_t ino)
{
    g_variant_builder_add(dirs, DIR_TYPE, (guint64)fh, (guint64)ino);
}

struct fs_handover_state *fs_handover_state_build(struct fs *fs, GBytes *init_request,
                                                  GBytes *init_reply, uint64_t handovers,
                                                  uint64_t next_ino, uint64_t next_alias,
                                                  GVariantBuilder *inodes, GVariantBuilder *files,
                                                  GVariantBuilder *dirs)
{
    const struct fs_config *cfg = fs->cfg;
    char *args = fuse_args_text(cfg);
    GVariant *state = g_variant_new(
        state_format(), cfg->bucket, cfg->prefix ? cfg->prefix : "", cfg->read_only,
        cfg->allow_other, args, (guint32)0, (guint64)handovers, bytes_variant(init_request),
        bytes_variant(init_reply), (guint64)next_ino, (guint64)next_alias, inodes, files, dirs);
    g_free(args);
    struct fs_handover_state *out = g_new0(struct fs_handover_state, 1);
    out->state = g_variant_ref_sink(state);
    out->sock = -1;
    return out;
}

int fs_handover_finish(struct fs *fs, struct fs_handover_state *state, char **error)
{
    uint32_t pid = (uint32_t)getpid();
    int rc = send_message(state->sock, HANDOVER_ACCEPT, &pid, sizeof(pid), -1);
    if (rc < 0) {
        *error = g_strdup_printf("cannot tell the running daemon: %s", g_strerror(-rc));
        return rc;
    }
    /* From here on this process serves whatever happens to the old one. */
    uint32_t type = 0;
    char *payload = NULL;
    size_t len = 0;
    int fd = -1;
    rc = receive_message(state->sock, &type, &payload, &len, &fd);
    if (fd >= 0)
        close(fd);
    g_free(payload);
    flog_info("fs",
              "took over %s from pid %d (hand-over %" G_GUINT64_FORMAT ")%s: serving, "
              "%u inodes carried",
              fs->cfg->mountpoint, (int)state->old_pid, fs->handovers,
              rc == 0 && type == HANDOVER_DONE ? "" : " (it did not confirm)",
              (unsigned)inode_table_count(fs->inodes));
    return 0;
}
