"""Installing fluxfs (issue 13): `meson install` puts the binary, the mount(8) helper, the man
page, the systemd unit (with the binary's path from the install prefix, Type=notify) and the
Python package in place, and the installed helper mounts; the daemon tells systemd it is ready
(sd_notify's datagram) only once the mount is live; and, when the Debian package from
scripts/package is installed on the machine (scripts/test does that), `mount -t fluxfs` and an
fstab-style line of type fluxfs mount with the installed files."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.mount import find_fluxfs_binary, fluxfs_env, is_mounted
from tests.lib.emulator import REPO_ROOT

pytestmark = pytest.mark.emulator_only

BUCKET = "inst"
WAIT_S = 60  # a guard against a hang, not a timed assertion


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/d/:2:1000:3"]


def build_dir():
    return find_fluxfs_binary().parent.parent.parent


def wait_mounted(path, proc=None):
    deadline = time.monotonic() + WAIT_S
    while not is_mounted(path):
        assert proc is None or proc.poll() is None, "the daemon exited"
        assert time.monotonic() < deadline, f"{path} not mounted"
        time.sleep(0.02)


def unmount(path):
    subprocess.run(["fusermount3", "-u", str(path)], check=True)
    deadline = time.monotonic() + WAIT_S
    while is_mounted(path):
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize("abstract", [False, True])
def test_ready_notification_only_once_mounted(emulator, tmp_path, abstract):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    address = f"@fluxfs-test-{os.getpid()}-{time.monotonic_ns()}" if abstract \
        else str(tmp_path / "notify")
    sock.bind("\0" + address[1:] if abstract else address)
    sock.settimeout(WAIT_S)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = fluxfs_env()
    env["NOTIFY_SOCKET"] = address
    proc = subprocess.Popen([str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url,
                             "--anonymous", BUCKET, str(mnt)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        message = sock.recv(4096).decode()
        # Sent after the mount exists: anything ordered after the unit finds it there.
        assert is_mounted(mnt)
        lines = message.split("\n")
        assert "READY=1" in lines
        assert f"MAINPID={proc.pid}" in lines
        assert f"STATUS=serving gs://{BUCKET}/ on {mnt}" in lines
        assert sorted(os.listdir(mnt / "d")) == ["00000000", "00000001"]
        proc.send_signal(signal.SIGTERM)
        assert sock.recv(4096).decode() == "STOPPING=1"
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)])
        sock.close()


def test_meson_install_and_the_installed_helper_mounts(emulator, tmp_path):
    dest = tmp_path / "dest"
    env = dict(os.environ, DESTDIR=str(dest))
    subprocess.run(["meson", "install", "-C", str(build_dir()), "--no-rebuild", "--quiet"],
                   env=env, check=True, capture_output=True)
    prefix = subprocess.run(["meson", "introspect", "--buildoptions", str(build_dir())],
                            capture_output=True, text=True, check=True).stdout
    import json
    options = {o["name"]: o["value"] for o in json.loads(prefix)}
    root = dest / options["prefix"].lstrip("/")
    binary = root / options["bindir"] / "fluxfs"
    helper = root / options["sbindir"] / "mount.fluxfs"
    unit = root / "lib" / "systemd" / "system" / "fluxfs@.service"
    assert os.access(binary, os.X_OK) and os.access(helper, os.X_OK)
    assert (root / options["mandir"] / "man1" / "fluxfs.1").is_file()
    unit_text = unit.read_text()
    installed_path = f"{options['prefix']}/{options['bindir']}/fluxfs"
    assert f"ExecStart={installed_path} --foreground" in unit_text
    assert "Type=notify" in unit_text
    assert f'FLUXFS="${{FLUXFS_BINARY:-{installed_path}}}"' in helper.read_text()
    logrotate = list(dest.rglob("logrotate.d/fluxfs"))
    assert len(logrotate) == 1 and "-HUP" in logrotate[0].read_text(), logrotate
    hints = list(dest.rglob("fluxfs_hints/__init__.py"))
    assert len(hints) == 1, hints

    # mount(8)'s call of the helper, with the installed binary (it is not at its final path
    # in a DESTDIR tree): fstab options, gs:// source, -n -s flags.
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    run_env = fluxfs_env()
    run_env["FLUXFS_BINARY"] = str(binary)
    result = subprocess.run(
        [str(helper), f"gs://{BUCKET}/d", str(mnt), "-n", "-s", "-o",
         f"rw,nofail,_netdev,endpoint={emulator.url},anonymous"],
        env=run_env, capture_output=True, text=True, timeout=WAIT_S)
    try:
        assert result.returncode == 0, result.stderr
        assert is_mounted(mnt)  # fluxfs returned only once the mount was live
        assert sorted(os.listdir(mnt)) == ["00000000", "00000001"]
    finally:
        if is_mounted(mnt):
            unmount(mnt)
    # -f (fake) mounts nothing; a failure is mount(8)'s non-zero status with fluxfs's message.
    fake = subprocess.run([str(helper), BUCKET, str(mnt), "-f", "-o", "anonymous"],
                          env=run_env, capture_output=True, text=True, timeout=WAIT_S)
    assert fake.returncode == 0 and not is_mounted(mnt)
    bad = subprocess.run([str(helper), "no-such-bucket-x", str(mnt), "-o",
                          f"endpoint={emulator.url},anonymous"],
                         env=run_env, capture_output=True, text=True, timeout=WAIT_S)
    assert bad.returncode != 0 and "does not exist" in bad.stderr, bad.stderr
    assert not is_mounted(mnt)


def deb_installed():
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "fluxfs"],
                            capture_output=True, text=True)
    return status.returncode == 0 and "install ok installed" in status.stdout


@pytest.mark.skipif(not deb_installed() or os.geteuid() != 0,
                    reason="the fluxfs Debian package is not installed (scripts/test installs "
                           "build/pkg/*.deb for this test)")
def test_installed_package_mounts_with_mount_t_fluxfs(emulator, tmp_path):
    files = subprocess.run(["dpkg", "-L", "fluxfs"], capture_output=True, text=True,
                           check=True).stdout.split()
    for path in ("/usr/bin/fluxfs", "/usr/sbin/mount.fluxfs", "/lib/systemd/system/fluxfs@.service",
                 "/usr/share/man/man1/fluxfs.1.gz",
                 "/usr/lib/python3/dist-packages/fluxfs_hints/__init__.py"):
        assert path in files, path
    assert "ExecStart=/usr/bin/fluxfs --foreground" in \
        Path("/lib/systemd/system/fluxfs@.service").read_text()
    if Path("/usr/bin/python3").exists():
        subprocess.run(["/usr/bin/python3", "-c", "import fluxfs_hints"], check=True)
    version = subprocess.run(["/usr/bin/fluxfs", "--version"], capture_output=True, text=True,
                             check=True).stdout
    assert version.startswith("fluxfs ")

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = fluxfs_env()
    env.pop("FLUXFS_BINARY", None)
    result = subprocess.run(["mount", "-t", "fluxfs", f"{BUCKET}/d", str(mnt), "-o",
                             f"ro,endpoint={emulator.url},anonymous"],
                            env=env, capture_output=True, text=True, timeout=WAIT_S)
    try:
        assert result.returncode == 0, result.stderr
        assert sorted(os.listdir(mnt)) == ["00000000", "00000001"]
        found = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE", str(mnt)],
                               capture_output=True, text=True, check=True).stdout.split()
        assert found == [f"gs://{BUCKET}/d", "fuse.fluxfs"]
        pids = subprocess.run(["pgrep", "-f", f"^/usr/bin/fluxfs {BUCKET}/d {mnt}"],
                              capture_output=True, text=True).stdout.split()
        assert pids, "the daemon is not the installed /usr/bin/fluxfs"
    finally:
        if is_mounted(mnt):
            subprocess.run(["umount", str(mnt)], check=True)
    # An fstab line of type fluxfs (mount reads it from --fstab).
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{BUCKET}/d {mnt} fluxfs ro,noauto,nofail,_netdev,"
                     f"endpoint={emulator.url},anonymous 0 0\n")
    result = subprocess.run(["mount", "--fstab", str(fstab), str(mnt)], env=env,
                            capture_output=True, text=True, timeout=WAIT_S)
    try:
        assert result.returncode == 0, result.stderr
        assert sorted(os.listdir(mnt)) == ["00000000", "00000001"]
    finally:
        if is_mounted(mnt):
            subprocess.run(["umount", str(mnt)], check=True)
