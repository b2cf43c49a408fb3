/* Containers (src/main/container.c): the runtime from its hints, a mountpoint's propagation
 * from mountinfo text, and which message a FUSE device that cannot be opened gets. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "../../src/main/container.h"

/* A podman container's mountinfo: / private, /mnt bound rshared from the host, /data bound
 * private, /srv slave, a stacked FUSE mount on /mnt/fluxfs and a mount point with a space. */
static const char mountinfo[] =
    "600 550 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"
    "601 600 0:53 / /proc rw,nosuid - proc proc rw\n"
    "610 600 8:1 /host/mnt /mnt rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "611 600 8:1 /host/data /data rw,relatime - ext4 /dev/sda1 rw\n"
    "612 600 8:1 /host/srv /srv rw,relatime master:7 - ext4 /dev/sda1 rw\n"
    "613 600 8:1 /host/both /both rw shared:9 master:7 - ext4 /dev/sda1 rw\n"
    "614 610 0:60 / /mnt/fluxfs rw,nosuid shared:30 - fuse.fluxfs gs://b rw\n"
    "615 611 0:61 / /data/fluxfs rw,nosuid - fuse.fluxfs gs://b rw\n"
    "616 600 8:1 /x /with\\040space rw shared:4 - ext4 /dev/sda1 rw\n"
    "617 600 8:1 /y /data rw shared:5 - ext4 /dev/sda1 rw\n"
    "garbage line\n";

START_TEST(propagation_of_the_holding_mount)
{
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/"), MOUNT_PROPAGATION_PRIVATE);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/tmp/x"), MOUNT_PROPAGATION_PRIVATE);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/mnt"), MOUNT_PROPAGATION_SHARED);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/mnt/a/b"), MOUNT_PROPAGATION_SHARED);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/mnt/fluxfs"), MOUNT_PROPAGATION_SHARED);
    /* a name that only starts like a mount point is not below it */
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/mntx"), MOUNT_PROPAGATION_PRIVATE);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/srv/x"), MOUNT_PROPAGATION_SLAVE);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/both"), MOUNT_PROPAGATION_SHARED);
    /* the FUSE mount on a private parent is private, whatever mounts on /data later */
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/data/fluxfs"), MOUNT_PROPAGATION_PRIVATE);
    /* two mounts on /data: the later one is the visible one */
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/data/other"), MOUNT_PROPAGATION_SHARED);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/with space/d"), MOUNT_PROPAGATION_SHARED);
    ck_assert_int_eq(mountinfo_propagation(mountinfo, "/with\\040space"),
                     MOUNT_PROPAGATION_PRIVATE);
    ck_assert_int_eq(mountinfo_propagation("", "/mnt"), MOUNT_PROPAGATION_UNKNOWN);
    ck_assert_int_eq(mountinfo_propagation(NULL, "/mnt"), MOUNT_PROPAGATION_UNKNOWN);
}
END_TEST

START_TEST(container_kind_from_hints)
{
    struct container_hints none = {0};
    ck_assert_ptr_null(container_kind(&none));
    struct container_hints host = {.cgroup = "0::/user.slice/user-0.slice/session-3.scope\n"};
    ck_assert_ptr_null(container_kind(&host));
    struct container_hints podman = {.containerenv = true};
    ck_assert_str_eq(container_kind(&podman), "podman");
    struct container_hints docker = {.dockerenv = true};
    ck_assert_str_eq(container_kind(&docker), "docker");
    struct container_hints k8s = {.kubernetes_env = "10.0.0.1", .dockerenv = true};
    ck_assert_str_eq(container_kind(&k8s), "kubernetes");
    struct container_hints nspawn = {.container_env = "systemd-nspawn"};
    ck_assert_str_eq(container_kind(&nspawn), "systemd-nspawn");
    struct container_hints other = {.container_env = "wsl"};
    ck_assert_str_eq(container_kind(&other), "a container");
    struct container_hints v1 = {.cgroup = "12:pids:/docker/0123abcd\n0::/\n"};
    ck_assert_str_eq(container_kind(&v1), "docker");
    struct container_hints pod = {.cgroup = "0::/kubepods/besteffort/pod1/abc\n"};
    ck_assert_str_eq(container_kind(&pod), "kubernetes");
    struct container_hints pid1 = {.pid1 = true, .cgroup = "0::/\n"};
    ck_assert_str_eq(container_kind(&pid1), "a container");
    struct container_hints empty_env = {.container_env = "", .kubernetes_env = ""};
    ck_assert_ptr_null(container_kind(&empty_env));
}
END_TEST

START_TEST(fuse_device_messages)
{
    /* missing device, in a container: the container's flags, and the descriptor hand-off */
    char *text = fuse_device_advice("/dev/fuse", ENOENT, true, "podman");
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "--device /dev/fuse"));
    ck_assert_ptr_nonnull(strstr(text, "--cap-add SYS_ADMIN"));
    ck_assert_ptr_nonnull(strstr(text, "/dev/fd/N"));
    ck_assert_ptr_null(strstr(text, "modprobe"));
    g_free(text);
    /* missing device on a host: the module first, the container flags as well */
    text = fuse_device_advice("/dev/fuse", ENODEV, false, NULL);
    ck_assert_ptr_nonnull(strstr(text, "modprobe fuse"));
    ck_assert_ptr_nonnull(strstr(text, "--device /dev/fuse"));
    g_free(text);
    /* root denied by the device cgroup */
    text = fuse_device_advice("/dev/fuse", EPERM, true, "docker");
    ck_assert_ptr_nonnull(strstr(text, "not allowed"));
    ck_assert_ptr_nonnull(strstr(text, "--device /dev/fuse"));
    g_free(text);
    /* a non-root user denied: fusermount3 may still open it, so libfuse goes on */
    ck_assert_ptr_null(fuse_device_advice("/dev/fuse", EACCES, false, "docker"));
    /* anything else is libfuse's to report */
    ck_assert_ptr_null(fuse_device_advice("/dev/fuse", EMFILE, true, "docker"));
}
END_TEST

TEST_SUITE(container_suite)
{
    Suite *s = suite_create("container");
    TCase *tc = tcase_create("container");
    tcase_add_test(tc, propagation_of_the_holding_mount);
    tcase_add_test(tc, container_kind_from_hints);
    tcase_add_test(tc, fuse_device_messages);
    suite_add_tcase(s, tc);
    return s;
}
