"""What new users and operators tripped over (issue 22): a stale mount left by a daemon that
died, a relative GOOGLE_APPLICATION_CREDENTIALS, gcsfuse's own defaults in config files and
-o forms, and an endpoint that accepts connections but never answers."""

import os
import subprocess
import time

import pytest

from tests.integration.mount import (
    EXIT_TIMEOUT_S,
    MOUNT_TIMEOUT_S,
    find_fluxfs_binary,
    fluxfs_command,
    fluxfs_env,
    is_mounted,
    kill_tree,
)

BUCKET = "ops"
pytestmark = pytest.mark.emulator_only


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/x/:3:100"]


def run_fluxfs(args, timeout=120, env=None, cwd=None):
    return subprocess.run([str(find_fluxfs_binary()), *args], capture_output=True, text=True,
                          env=env or fluxfs_env(), stdin=subprocess.DEVNULL, timeout=timeout,
                          cwd=cwd)


def wait_listable(path, proc):
    """Waits until path lists the bucket's files through a live daemon (a stale mount counts as
    mounted in mountinfo, so is_mounted cannot tell)."""
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "the daemon exited"
        try:
            return sorted(os.listdir(path / "x"))
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{path} never served"
        time.sleep(0.05)


def stale_mount(emulator, mountpoint):
    """Mounts, then kills the daemon: the kernel keeps a mount whose every access fails with
    ENOTCONN, as a crashed daemon leaves it."""
    proc = subprocess.Popen(fluxfs_command(emulator, BUCKET, mountpoint), env=fluxfs_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    wait_listable(mountpoint, proc)
    kill_tree(proc.pid)  # the --crash-restart supervisor and the serving process
    proc.wait(EXIT_TIMEOUT_S)
    with pytest.raises(OSError) as info:
        os.listdir(mountpoint)
    assert info.value.errno == 107  # ENOTCONN


def test_stale_mount_is_named_and_cleaned_with_unmount_stale(emulator, mountpoint):
    """--unmount-stale is the default (issue 24); --no-unmount-stale only names the mount."""
    stale_mount(emulator, mountpoint)
    refused = run_fluxfs(fluxfs_command(emulator, BUCKET, mountpoint,
                                        ["--no-unmount-stale"])[1:])
    assert refused.returncode == 2
    assert f"{mountpoint} is a stale fluxfs mount" in refused.stderr, refused.stderr
    assert "--no-unmount-stale" in refused.stderr and "fusermount3 -u -z" in refused.stderr
    assert is_mounted(mountpoint)  # left alone with --no-unmount-stale

    proc = subprocess.Popen(fluxfs_command(emulator, BUCKET, mountpoint, ["--unmount-stale"]),
                            env=fluxfs_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_listable(mountpoint, proc) == ["00000000", "00000001", "00000002"]
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
        assert proc.wait(EXIT_TIMEOUT_S) == 0
        log = proc.stderr.read()
        assert "unmounted the stale fluxfs mount" in log, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Exactly one mount was removed: nothing of the stale one is left underneath.
    assert not is_mounted(mountpoint)


def test_unmount_stale_leaves_a_live_mount_alone(emulator, mountpoint):
    proc = subprocess.Popen(fluxfs_command(emulator, BUCKET, mountpoint), env=fluxfs_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_listable(mountpoint, proc)
        # A live mount is served on: never unmounted as stale. (With the same fixed options
        # the second command would take it over, test_handover.py; --read-only differs.)
        second = run_fluxfs(fluxfs_command(emulator, BUCKET, mountpoint,
                                           ["--unmount-stale", "--read-only"])[1:])
        assert second.returncode == 1 and "refused the hand-over" in second.stderr, \
            second.stderr
        assert proc.poll() is None
        assert wait_listable(mountpoint, proc)
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        proc.wait(EXIT_TIMEOUT_S)


def test_gcsfuse_o_forms_o_ro_and_read_ahead_kb(emulator, mountpoint):
    """`-o o=ro` is gcsfuse's `--o ro` in -o form; `-o read_ahead_kb=N` (GKE pod specs) sets
    the mount's kernel readahead through /sys/class/bdi (root only)."""
    cmd = fluxfs_command(emulator, BUCKET, mountpoint,
                         ["-o", "o=ro,read_ahead_kb=512", "--log-level", "debug"])
    proc = subprocess.Popen(cmd, env=fluxfs_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listable(mountpoint, proc)
        with pytest.raises(OSError) as info:
            open(mountpoint / "x" / "new", "wb")
        assert info.value.errno == 30  # EROFS: the mount is read-only
        dev = os.stat(mountpoint).st_dev
        bdi = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
        if os.geteuid() == 0 and os.access(bdi, os.W_OK):
            with open(bdi) as f:
                assert int(f.read()) == 512
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        proc.wait(EXIT_TIMEOUT_S)


def test_fuse_fluxfs_type_mounts_nosuid_nodev(emulator, mountpoint, tmp_path):
    """`mount -t fuse.fluxfs` runs mount.fuse3, which as root passes `dev,suid` (mount(8)'s
    defaults); the mount must still be nosuid,nodev like one of type fluxfs: an object in a
    bucket is no device and no set-user-ID program."""
    if os.geteuid() != 0 or not os.path.exists("/usr/sbin/mount.fuse3"):
        pytest.skip("mount.fuse3 runs fluxfs with dev,suid only as root")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fluxfs").symlink_to(find_fluxfs_binary())
    env = fluxfs_env()
    env["PATH"] = f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}"
    result = subprocess.run(["/usr/sbin/mount.fuse3", f"{BUCKET}", str(mountpoint), "-t",
                             "fuse.fluxfs", "-o", f"rw,endpoint={emulator.url},anonymous"],
                            env=env, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    try:
        assert result.returncode == 0, result.stderr
        options = subprocess.run(["findmnt", "-n", "-o", "OPTIONS", str(mountpoint)],
                                 capture_output=True, text=True, check=True).stdout.strip()
        assert "nosuid" in options.split(",") and "nodev" in options.split(","), options
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)


class SilentServer:
    """Accepts TCP connections and reads what is sent, but never answers (a proxy or firewall
    that swallows requests, a wrong port with a listener)."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)  # kept open, never written to

    def close(self):
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_silent_endpoint_at_mount_says_it_did_not_answer(tmp_path):
    server = SilentServer()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        result = run_fluxfs(["--endpoint", f"http://127.0.0.1:{server.port}", "--anonymous",
                             "--request-deadline", "2", BUCKET, str(mnt)])
        assert result.returncode == 1
        # --request-deadline 2 bounds the check, and the message names the bound it used (the
        # same figure the transfer's timeout is set from; no wall-clock assertion here).
        assert "did not answer within 2 s" in result.stderr, result.stderr
        assert "cannot reach" not in result.stderr, result.stderr
        assert "--request-deadline" in result.stderr, result.stderr
        assert server.accepted, "fluxfs never connected"
        assert not is_mounted(mnt)
        # Without --request-deadline, a mount-time default far below the 30 s it took before.
        result = run_fluxfs(["--endpoint", f"http://127.0.0.1:{server.port}", "--anonymous",
                             BUCKET, str(mnt)])
        assert result.returncode == 1 and "did not answer within 10 s" in result.stderr, \
            result.stderr
    finally:
        server.close()
