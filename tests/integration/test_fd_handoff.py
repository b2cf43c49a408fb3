"""/dev/fd/N mountpoints (issue 13), tested as the GKE Cloud Storage FUSE CSI driver uses them:
this process (the node side) opens /dev/fuse, calls mount(2) with fd=N itself, and passes the
descriptor over a Unix socket (SCM_RIGHTS) to a daemon started in its own mount namespace
(unshare --mount); the daemon serves /dev/fd/N, and the mount is used from here. Needs root
(mount(2)); skipped otherwise."""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.mount import find_fluxfs_binary, fluxfs_env
from tests.lib.synth import first_mismatch

pytestmark = [pytest.mark.emulator_only,
              pytest.mark.skipif(os.geteuid() != 0, reason="mount(2) needs root")]

BUCKET = "handoff"
SEED = 5
SIZE = 70_000
WAIT_S = 60  # a guard against a hang, not a timed assertion
MNT_DETACH = 2
RECEIVER = Path(__file__).with_name("fd_receiver.py")


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/data/:3:{SIZE}:{SEED}"]


def libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return lib


def within(fn, what):
    """Runs fn in a thread: a daemon that never answers must fail the test, not hang it."""
    result, error = [], []

    def run():
        try:
            result.append(fn())
        except BaseException as e:  # noqa: BLE001 - reported below
            error.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(WAIT_S)
    assert not t.is_alive(), f"{what} hung"
    if error:
        raise error[0]
    return result[0]


def test_fd_handoff_from_another_mount_namespace(emulator, gcs, tmp_path):
    lib = libc()
    target = tmp_path / "target"
    target.mkdir()
    sock_path = tmp_path / "fuse.sock"
    log_path = tmp_path / "fluxfs.log"
    fuse_fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    options = f"fd={fuse_fd},rootmode=40000,user_id=0,group_id=0,allow_other"
    if lib.mount(f"gs://{BUCKET}".encode(), str(target).encode(), b"fuse.fluxfs", 0,
                 options.encode()) != 0:
        err = ctypes.get_errno()
        os.close(fuse_fd)
        pytest.skip(f"mount(2) of a FUSE filesystem refused here: {os.strerror(err)}")
    proc = None
    mounted = True
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(sock_path))
        server.listen(1)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", sys.executable,
                 str(RECEIVER), str(sock_path), str(find_fluxfs_binary()), "-f",
                 "--endpoint", emulator.url, "--anonymous", BUCKET, "{fd}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=fluxfs_env())
        server.settimeout(WAIT_S)
        conn, _ = server.accept()
        socket.send_fds(conn, [b"fuse"], [fuse_fd])
        conn.close()
        server.close()
        os.close(fuse_fd)  # only the daemon holds the connection now
        fuse_fd = -1

        deadline = time.monotonic() + WAIT_S
        while "mounted gs://" not in log_path.read_text():
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        # Its own mount namespace: the daemon does not see the node's mount at all.
        assert os.readlink(f"/proc/{proc.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert "on /dev/fd/" in log_path.read_text()

        names = within(lambda: sorted(os.listdir(target / "data")), "listing")
        assert names == [f"{i:08d}" for i in range(3)]
        for name in names:
            blob = gcs.bucket(BUCKET).get_blob(f"data/{name}")
            data = within(lambda n=name: (target / "data" / n).read_bytes(), "reading")
            assert len(data) == SIZE
            assert first_mismatch(f"data/{name}", blob.generation, SEED, 0, data) is None
        payload = os.urandom(300_000)
        within(lambda: (target / "written.bin").write_bytes(payload), "writing")
        assert gcs.bucket(BUCKET).get_blob("written.bin").download_as_bytes() == payload

        # The sidecar stops first (SIGTERM), then the node side unmounts.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0, log_path.read_text()
        assert lib.umount2(str(target).encode(), MNT_DETACH) == 0
        mounted = False
        text = log_path.read_text()
        assert " error " not in text, text
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if fuse_fd >= 0:
            os.close(fuse_fd)
        if mounted:
            lib.umount2(str(target).encode(), MNT_DETACH)


@pytest.mark.parametrize("kind", ["closed", "not-fuse", "stdio"])
def test_bad_fd_mountpoints_are_refused(emulator, tmp_path, kind):
    keep = []
    if kind == "closed":
        path = "/dev/fd/987"
    elif kind == "not-fuse":
        fd = os.open(tmp_path, os.O_RDONLY)
        keep.append(fd)
        path = f"/dev/fd/{fd}"
    else:
        path = "/dev/fd/1"
    try:
        result = subprocess.run([str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url,
                                 "--anonymous", BUCKET, path], capture_output=True, text=True,
                                timeout=WAIT_S, env=fluxfs_env(), pass_fds=keep)
        assert result.returncode == 2, result.stderr
        expected = {"closed": "is not open", "not-fuse": "is not /dev/fuse",
                    "stdio": "descriptors 0-2"}[kind]
        assert expected in result.stderr, result.stderr
    finally:
        for fd in keep:
            os.close(fd)
