/* A descriptor passed over a Unix socket (SCM_RIGHTS) beside a few bytes: the hand-over
 * (src/fs/fs_handover.c) and the crash supervisor (src/main/supervisor.c, src/fs/fs_crash.c). */
#ifndef FLUXFS_FD_PASS_H
#define FLUXFS_FD_PASS_H

#include <stddef.h>
#include <sys/types.h>

/* One sendmsg of len bytes of buf, with fd attached when fd >= 0 (retried on EINTR; no
 * SIGPIPE). Returns the bytes sent (possibly fewer than len) or -errno. */
ssize_t fd_pass_send(int sock, const void *buf, size_t len, int fd);

/* One recvmsg into buf (flags beside MSG_CMSG_CLOEXEC; retried on EINTR): *fd gets the
 * descriptor that came with it, close-on-exec, or -1. Returns the bytes received (0: the
 * peer closed) or -errno. */
ssize_t fd_pass_receive(int sock, void *buf, size_t len, int flags, int *fd);

#endif
