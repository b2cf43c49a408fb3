/* Container detection, mount propagation from mountinfo, and the advice for a missing FUSE
 * device (container.h). */
#include "container.h"

#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *container_kind(const struct container_hints *hints)
{
    if (hints->kubernetes_env && *hints->kubernetes_env)
        return "kubernetes";
    if (hints->containerenv)
        return "podman";
    if (hints->dockerenv)
        return "docker";
    if (hints->container_env && *hints->container_env) {
        static const char *const known[] = {"podman", "docker", "lxc", "systemd-nspawn", "oci"};
        for (size_t i = 0; i < G_N_ELEMENTS(known); i++)
            if (strcmp(hints->container_env, known[i]) == 0)
                return known[i];
        return "a container";
    }
    if (hints->cgroup) {
        /* cgroup v1 paths, and v2 paths on hosts that did not give the container a namespace */
        static const struct {
            const char *marker, *kind;
        } markers[] = {{"kubepods", "kubernetes"},
                       {"libpod", "podman"},
                       {"docker", "docker"},
                       {"containerd", "a container"},
                       {"lxc", "lxc"}};
        for (size_t i = 0; i < G_N_ELEMENTS(markers); i++)
            if (strstr(hints->cgroup, markers[i].marker))
                return markers[i].kind;
    }
    if (hints->pid1)
        return "a container";
    return NULL;
}

const char *container_detect(void)
{
    static gsize once;
    static const char *kind;
    if (g_once_init_enter(&once)) {
        char *cgroup = NULL;
        g_file_get_contents("/proc/self/cgroup", &cgroup, NULL, NULL);
        struct container_hints hints = {
            .containerenv = access("/run/.containerenv", F_OK) == 0,
            .dockerenv = access("/.dockerenv", F_OK) == 0,
            .pid1 = getpid() == 1,
            .container_env = getenv("container"),
            .kubernetes_env = getenv("KUBERNETES_SERVICE_HOST"),
            .cgroup = cgroup,
        };
        kind = container_kind(&hints);
        g_free(cgroup);
        g_once_init_leave(&once, 1);
    }
    return kind;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape_mount_point(const char *text)
{
    GString *out = g_string_sized_new(strlen(text));
    for (const char *c = text; *c; c++) {
        if (c[0] == '\\' && c[1] >= '0' && c[1] <= '3' && c[2] >= '0' && c[2] <= '7' &&
            c[3] >= '0' && c[3] <= '7') {
            g_string_append_c(out, (char)((c[1] - '0') * 64 + (c[2] - '0') * 8 + (c[3] - '0')));
            c += 3;
        } else {
            g_string_append_c(out, *c);
        }
    }
    return g_string_free(out, FALSE);
}

/* Whether mount point `mount` holds `path`: equal, "/" or a leading whole-component path. */
static bool mount_holds(const char *mount, const char *path)
{
    size_t len = strlen(mount);
    if (strcmp(mount, "/") == 0)
        return path[0] == '/';
    return strncmp(mount, path, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

enum mount_propagation mountinfo_propagation(const char *mountinfo, const char *path)
{
    enum mount_propagation best = MOUNT_PROPAGATION_UNKNOWN;
    size_t best_len = 0;
    char **lines = g_strsplit(mountinfo ? mountinfo : "", "\n", -1);
    for (char **line = lines; *line; line++) {
        /* id parent major:minor root mount-point options [optional...] - type source super */
        char **fields = g_strsplit(*line, " ", -1);
        guint count = g_strv_length(fields);
        if (count < 7) {
            g_strfreev(fields);
            continue;
        }
        char *mount = unescape_mount_point(fields[4]);
        size_t len = strlen(mount);
        if (mount_holds(mount, path) && len >= best_len) {
            enum mount_propagation found = MOUNT_PROPAGATION_PRIVATE;
            for (guint i = 6; i < count && strcmp(fields[i], "-") != 0; i++) {
                if (g_str_has_prefix(fields[i], "shared:"))
                    found = MOUNT_PROPAGATION_SHARED;
                else if (g_str_has_prefix(fields[i], "master:") &&
                         found != MOUNT_PROPAGATION_SHARED)
                    found = MOUNT_PROPAGATION_SLAVE;
            }
            best = found;
            best_len = len;
        }
        g_free(mount);
        g_strfreev(fields);
    }
    g_strfreev(lines);
    return best;
}

char *fuse_device_advice(const char *device, int open_errno, bool root, const char *container)
{
    const char *what;
    switch (open_errno) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
        what = "does not exist here";
        break;
    case EPERM:
    case EACCES:
        if (!root)
            return NULL; /* the setuid fusermount3 opens it for a non-root user */
        what = "is not allowed to this process (a container's device policy denies it)";
        break;
    default:
        return NULL;
    }
    if (container)
        return g_strdup_printf(
            "cannot open the FUSE device %s: it %s (%s). fluxfs runs in a container (%s): give it "
            "the device and the right to mount (docker/podman run --device /dev/fuse --cap-add "
            "SYS_ADMIN; Kubernetes: a privileged container), or let the caller mount and hand "
            "fluxfs the descriptor as the mountpoint /dev/fd/N (docs/containers.md)",
            device, what, g_strerror(open_errno), container);
    return g_strdup_printf("cannot open the FUSE device %s: it %s (%s): load the fuse module "
                           "(modprobe fuse) or, in a container, pass --device /dev/fuse "
                           "--cap-add SYS_ADMIN (docs/containers.md)",
                           device, what, g_strerror(open_errno));
}
