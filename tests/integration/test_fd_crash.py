"""--crash-restart on a /dev/fd/N mount (issue 24, "Containers"), as the GKE Cloud Storage FUSE
CSI driver runs its sidecar: this process (the node side) opens /dev/fuse, calls mount(2) with
fd=N and passes the descriptor over a Unix socket to the sidecar, which serves /dev/fd/N from
its own mount namespace (see test_fd_handoff.py).

- The serving process is killed twice under a reader loop: the supervisor holds the descriptor
  and restarts it; the reader sees no error and the same bytes. The caller's unmount ends the
  connection, and with it the serving process and the supervisor (exit 0, no process left);
  the supervisor never unmounts anything itself.
- The whole sidecar (supervisor included) is killed: with the caller still holding its copy of
  the descriptor, a new fluxfs given that copy refuses it (the INIT state died with the
  sidecar: its first request is not INIT); once no copy is left the mount answers ENOTCONN;
  the caller unmounts and mounts again with a fresh descriptor, and a new sidecar serves.

Nothing waits on time: kills follow the reader's progress, every wait is for a condition with
a generous guard. Needs root (mount(2)); skipped otherwise."""

import ctypes
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import threading

import pytest

from tests.integration.mount import (
    children,
    find_fluxfs_binary,
    fluxfs_env,
    kill_serving,
    mount_status,
    pid_alive,
    read_plain,
    wait_for,
)
from tests.integration.test_crash_supervisor import FILES, Reader, content, name
from tests.integration.test_fd_handoff import MNT_DETACH, RECEIVER, WAIT_S, libc, within

pytestmark = [pytest.mark.emulator_only,
              pytest.mark.skipif(os.geteuid() != 0, reason="mount(2) needs root")]


def caller_mount(lib, target) -> int:
    """The node side's mount: opens /dev/fuse and mounts it on target; returns the descriptor."""
    fuse_fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    options = f"fd={fuse_fd},rootmode=40000,user_id=0,group_id=0,allow_other"
    if lib.mount(b"gs://fdcrash", str(target).encode(), b"fuse.fluxfs", 0,
                 options.encode()) != 0:
        err = ctypes.get_errno()
        os.close(fuse_fd)
        pytest.skip(f"mount(2) of a FUSE filesystem refused here: {os.strerror(err)}")
    return fuse_fd


def start_sidecar(emulator, bucket, tmp_path, tag, args, make_mount):
    """The sidecar in its own mount namespace and session (its process group is the whole
    sidecar). As in a pod, the namespace exists before the mount (a copy of the mount made in
    it would keep the connection past the caller's unmount): once the sidecar connects,
    make_mount() mounts and returns the descriptor, which the sidecar is given. Returns the
    sidecar once it logged the mount, and the descriptor (the caller's copy, still open)."""
    sock_path = tmp_path / f"{tag}.sock"
    log_path = tmp_path / f"{tag}.log"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen(1)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", sys.executable, str(RECEIVER),
             str(sock_path), str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url,
             "--anonymous", *args, bucket, "{fd}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=fluxfs_env(),
            start_new_session=True)
    proc.log_path = log_path
    try:
        server.settimeout(WAIT_S)
        conn, _ = server.accept()
        fuse_fd = make_mount()
        socket.send_fds(conn, [b"fuse"], [fuse_fd])
        conn.close()
        wait_logged(proc, "mounted gs://")
    except BaseException:
        kill_group(proc)
        raise
    finally:
        server.close()
    return proc, fuse_fd


def wait_logged(proc, text):
    wait_for(lambda: text in proc.log_path.read_text() or proc.poll() is not None,
             timeout=WAIT_S)
    assert text in proc.log_path.read_text(), proc.log_path.read_text()[-3000:]


def upload(gcs, bucket_name):
    bucket = gcs.create_bucket(bucket_name)
    for i in range(FILES):
        bucket.blob(name(i)).upload_from_string(content(i))
    return bucket


def kill_group(proc):
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_fd_mount_survives_kills_and_ends_with_the_callers_unmount(emulator, gcs, tmp_path):
    upload(gcs, "fdcrash")
    lib = libc()
    target = tmp_path / "target"
    target.mkdir()
    fuse_fd, mounted, proc, reader, serving = -1, False, None, None, 0
    try:

        def make_mount():
            nonlocal mounted
            fd = caller_mount(lib, target)
            mounted = True
            return fd

        proc, fuse_fd = start_sidecar(emulator, "fdcrash", tmp_path, "sidecar",
                                      ["--crash-restart"], make_mount)
        os.close(fuse_fd)  # the CSI driver's way: only the sidecar holds the connection
        fuse_fd = -1
        supervisor = proc.pid
        st = within(lambda: mount_status(target), "status")
        serving = int(st["pid"])
        assert serving != supervisor and children(supervisor) == [serving], st
        assert st["crash_restarts"] == "0", st

        reader = Reader(target)
        reader.start()
        wait_for(lambda: reader.passes >= 1 or not reader.is_alive(), timeout=120)
        for round_ in (1, 2):
            before = reader.passes
            st = kill_serving(supervisor, serving, target, timeout=WAIT_S,
                              read_status=lambda: within(lambda: mount_status(target), "status"))
            new = int(st["pid"])
            assert st["crash_restarts"] == str(round_), st
            serving = new
            # The reader goes on through the crash: two whole passes after it.
            wait_for(lambda: reader.passes >= before + 2 or not reader.is_alive(), timeout=120)
            assert reader.errors == [], reader.errors[:10]
        reader.stop.set()
        reader.join(120)
        assert reader.errors == [], reader.errors[:10]
        assert reader.passes >= 5
        log = proc.log_path.read_text()
        assert len(re.findall(r"died by signal 9 .*crash restart", log)) == 2, log[-3000:]

        # The caller unmounts: the kernel ends the connection; the serving process and the
        # supervisor exit 0, and nothing is left.
        assert lib.umount2(str(target).encode(), MNT_DETACH) == 0
        mounted = False
        assert proc.wait(WAIT_S) == 0, proc.log_path.read_text()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=WAIT_S)
        assert os.listdir(target) == []
        log = proc.log_path.read_text()
        assert " error " not in log, log[-3000:]
        assert "stopped serving /dev/fd/" in log, log[-3000:]  # it unmounted nothing
    finally:
        if reader is not None:
            reader.stop.set()
            reader.join(120)
        kill_group(proc)
        if serving and pid_alive(serving):
            os.kill(serving, signal.SIGKILL)
        if fuse_fd >= 0:
            os.close(fuse_fd)
        if mounted:
            lib.umount2(str(target).encode(), MNT_DETACH)


def test_whole_sidecar_killed_then_mounted_again(emulator, gcs, tmp_path):
    upload(gcs, "fdcrash-all")
    lib = libc()
    target = tmp_path / "target"
    target.mkdir()
    kept, mounted, procs, again = -1, False, [], -1
    try:

        def make_mount():
            nonlocal mounted
            fd = caller_mount(lib, target)
            mounted = True
            return fd

        # This caller keeps its copy of the descriptor (kept).
        proc, kept = start_sidecar(emulator, "fdcrash-all", tmp_path, "first",
                                   ["--crash-restart"], make_mount)
        procs.append(proc)
        serving = int(within(lambda: mount_status(target), "status")["pid"])
        assert within(lambda: read_plain(target / name(7)), "reading") == content(7)

        # The whole sidecar dies (supervisor and serving process: the container is killed).
        kill_group(procs[0])
        wait_for(lambda: not pid_alive(serving), timeout=WAIT_S)

        # A new fluxfs on the caller's kept copy cannot serve it: the connection's INIT was
        # answered by the dead sidecar. It answers its first request EIO (a stat, or the
        # RELEASE of the read above if the dead sidecar had not answered it) and exits 1.
        log_path = tmp_path / "reused.log"
        with open(log_path, "wb") as log:
            reused = subprocess.Popen(
                [str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url, "--anonymous",
                 "fdcrash-all", f"/dev/fd/{kept}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=fluxfs_env(),
                pass_fds=[kept], start_new_session=True)
        reused.log_path = log_path
        procs.append(reused)
        wait_logged(reused, "mounted gs://")
        probe = []

        def stat_probe():
            try:
                os.stat(target / "probe-1")
                probe.append("exists")
            except OSError as e:
                probe.append(e.errno)

        prober = threading.Thread(target=stat_probe, daemon=True)
        prober.start()
        assert reused.wait(WAIT_S) == 1, log_path.read_text()[-3000:]
        assert "set up by an earlier daemon" in log_path.read_text(), log_path.read_text()

        # No copy of the descriptor left: the kernel ends the connection. The stat got EIO
        # from the refusing fluxfs, or, queued behind its first request, ECONNABORTED when the
        # connection ended (or ENOTCONN after); every access now answers ENOTCONN (what the
        # pod sees until the mount is made again).
        os.close(kept)
        kept = -1
        prober.join(WAIT_S)
        assert not prober.is_alive(), "stat on the reused descriptor hung"
        assert probe[0] in (errno.EIO, errno.ECONNABORTED, errno.ENOTCONN), probe
        with pytest.raises(OSError) as failed:
            within(lambda: os.stat(target / "probe-2"), "stat on the dead mount")
        assert failed.value.errno == errno.ENOTCONN

        # The CSI driver makes the mount again with a fresh descriptor and a new sidecar.
        assert lib.umount2(str(target).encode(), MNT_DETACH) == 0
        mounted = False
        proc, again = start_sidecar(emulator, "fdcrash-all", tmp_path, "second",
                                    ["--crash-restart"], make_mount)
        procs.append(proc)
        os.close(again)
        again = -1
        for i in range(0, FILES, 9):
            assert within(lambda i=i: read_plain(target / name(i)), "reading") == content(i)
        procs[-1].send_signal(signal.SIGTERM)
        assert procs[-1].wait(WAIT_S) == 0, procs[-1].log_path.read_text()[-3000:]
        assert lib.umount2(str(target).encode(), MNT_DETACH) == 0
        mounted = False
        assert " error " not in procs[-1].log_path.read_text()
    finally:
        for proc in procs:
            kill_group(proc)
        for fd in (kept, again):
            if fd >= 0:
                os.close(fd)
        if mounted:
            lib.umount2(str(target).encode(), MNT_DETACH)
