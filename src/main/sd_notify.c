/* See sd_notify.h. */
#include "sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int fluxfs_sd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    size_t path_len = strlen(path);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if ((path[0] != '/' && path[0] != '@') || path_len >= sizeof(addr.sun_path))
        return -EINVAL; /* vsock addresses and the like are not supported */
    memcpy(addr.sun_path, path, path_len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0'; /* abstract namespace */
    socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    ssize_t sent;
    do {
        sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
    } while (sent < 0 && errno == EINTR);
    int err = sent < 0 ? -errno : 0;
    close(fd);
    return err;
}
