"""A daemon detached without --log-file logs to syslog. The machine has no syslog daemon, so the
test runs the mount in a private mount namespace (unshare, as root) whose /dev is a tmpfs with
the real device nodes bound back and a datagram socket of the test's own at /dev/log: what
fluxfs sends through syslog(3) arrives there, and nothing outside the namespace sees it."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.integration.mount import find_fluxfs_binary, fluxfs_env

pytestmark = pytest.mark.emulator_only

BUCKET = "slog"


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/d/:2:1000:1"]


# Runs inside the namespace: binds /dev/log, mounts detached, reads, unmounts, prints what
# syslog received.
PROBE = textwrap.dedent("""
    import os, socket, subprocess, sys, time
    fluxfs, endpoint, bucket, mnt = sys.argv[1:5]
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind("/dev/log")
    log.settimeout(0.2)
    rc = subprocess.run([fluxfs, "--endpoint", endpoint, "--anonymous", bucket, mnt]).returncode
    print("mount rc", rc, flush=True)
    if rc == 0:
        print("read", len(open(os.path.join(mnt, "d", "00000000"), "rb").read()), flush=True)
        subprocess.run(["fusermount3", "-u", mnt], check=True)
    received = []
    deadline = time.monotonic() + 60  # a guard: it stops at the "unmounted" line
    while time.monotonic() < deadline:
        try:
            received.append(log.recv(65536).decode(errors="replace"))
        except socket.timeout:
            if any("unmounted" in r for r in received):
                break
    for r in received:
        print("SYSLOG", r.replace("\\n", " "), flush=True)
""")

SHELL = textwrap.dedent("""
    set -e
    real=$(mktemp -d)
    mount --bind /dev "$real"
    mount -t tmpfs -o mode=755 tmpfs /dev
    for node in null zero full random urandom fuse tty; do
        [ -e "$real/$node" ] || continue
        touch "/dev/$node"
        mount --bind "$real/$node" "/dev/$node"
    done
    ln -s /proc/self/fd /dev/fd
    mkdir /dev/shm && mount -t tmpfs tmpfs /dev/shm
    exec "$@"
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare for a private /dev/log")
@pytest.mark.skipif(os.path.exists("/dev/log"), reason="a syslog daemon owns /dev/log here")
def test_detached_daemon_without_log_file_logs_to_syslog(emulator, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", SHELL, "sh",
         sys.executable, "-c", PROBE, str(find_fluxfs_binary()), emulator.url, BUCKET,
         str(mountpoint)],
        capture_output=True, text=True, timeout=120, env=fluxfs_env())
    out = result.stdout
    assert result.returncode == 0, result.stderr + out
    assert "mount rc 0" in out and "read 1000" in out, out
    lines = [line for line in out.splitlines() if line.startswith("SYSLOG ")]
    # RFC 3164 as glibc sends it: <PRI>TIMESTAMP fluxfs[PID]: component: message;
    # facility daemon (3) * 8 + info (6) = 30.
    mounted = [line for line in lines if f"main: mounted gs://{BUCKET}/" in line]
    assert mounted, out
    assert mounted[0].startswith("SYSLOG <30>") and "fluxfs[" in mounted[0], mounted[0]
    assert any("main: unmounted" in line for line in lines), out
    assert not os.path.ismount(mountpoint)
