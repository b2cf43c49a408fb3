/* Running in a container: how fluxfs tells (container_detect), whether a mountpoint's mount
 * propagates to the outside (mountinfo_propagation), and what to say when /dev/fuse cannot be
 * opened (fuse_device_advice). The parsers and the message selection are pure functions of
 * their inputs (unit-tested); only container_detect and container_read_hints read the system. */
#ifndef FLUXFS_MAIN_CONTAINER_H
#define FLUXFS_MAIN_CONTAINER_H

#include <stdbool.h>

/* What the system shows of a container. Strings may be NULL (absent); none is owned here. */
struct container_hints {
    bool containerenv;          /* /run/.containerenv exists (podman, buildah) */
    bool dockerenv;             /* /.dockerenv exists (docker) */
    bool pid1;                  /* fluxfs is PID 1 of its PID namespace */
    const char *container_env;  /* $container (podman, systemd-nspawn, LXC set it) */
    const char *kubernetes_env; /* $KUBERNETES_SERVICE_HOST */
    const char *cgroup;         /* the text of /proc/self/cgroup */
};

/* Which container runtime the hints point to ("podman", "docker", "kubernetes", "lxc", ...,
 * or "a container" when only PID 1 or the cgroup tells), or NULL when none. Static strings. */
const char *container_kind(const struct container_hints *hints);

/* container_kind of this process's own hints (read once, then remembered). */
const char *container_detect(void);

enum mount_propagation {
    MOUNT_PROPAGATION_UNKNOWN, /* no mount found for the path */
    MOUNT_PROPAGATION_PRIVATE, /* no optional field: mounts below stay in this namespace */
    MOUNT_PROPAGATION_SLAVE,   /* master:N only: receives mounts, sends none back */
    MOUNT_PROPAGATION_SHARED,  /* shared:N: mounts below reach the peer group */
};

/* The propagation of the mount that holds `path` (absolute, canonical), from the text of a
 * /proc/PID/mountinfo: the entry whose mount point is the longest leading path of `path`
 * (the last such entry, as the most recent mount on a mount point is the visible one). Mount
 * points are unescaped (\040 and friends) before comparison. */
enum mount_propagation mountinfo_propagation(const char *mountinfo, const char *path);

/* What to tell the user when opening the FUSE device `device` failed with `open_errno`, or
 * NULL when libfuse should go on and try (as a non-root user denied access, the setuid
 * fusermount3 may still open it). `container` is container_kind's answer. Newly allocated. */
char *fuse_device_advice(const char *device, int open_errno, bool root, const char *container);

#endif
