"""Stopping safely (issue 13): SIGTERM/SIGINT or a lazy unmount by someone else while a file is
open for writing keeps the mount serving until the writer closes it (its object committed with
every byte), bounded by --shutdown-grace, after which what was written is committed as fsync
would; then the daemon unmounts and exits 0. SIGHUP reopens the log file and unmounts nothing.
The writer here is a real process with the file open (os.write/os.close on the mount)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.mount import Mount, is_mounted

pytestmark = pytest.mark.emulator_only

BUCKET = "stops"
WAIT_S = 60  # a guard against a hang, not a timed assertion


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/seed/:1:10:1"]


def blob_bytes(gcs, name):
    blob = gcs.bucket(BUCKET).get_blob(name)
    return None if blob is None else blob.download_as_bytes()


def wait_log(mount, text):
    deadline = time.monotonic() + WAIT_S
    while text not in mount.log():
        assert mount.alive() or text in mount.log(), mount.log()[-3000:]
        assert time.monotonic() < deadline, f"no '{text}' in the log:\n{mount.log()[-3000:]}"
        time.sleep(0.05)


def chunk(i):
    return bytes([65 + i % 26]) * 100_000


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_waits_for_the_writer_to_close(emulator, gcs, sig):
    m = Mount(emulator, BUCKET)
    try:
        fd = os.open(m.path / "ckpt.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, chunk(0))
        m.proc.send_signal(sig)
        wait_log(m, "serving 1 files open for writing until they are closed")
        # The mount still serves: the writer goes on, and others can still read.
        for i in range(1, 20):
            os.write(fd, chunk(i))
        assert (m.path / "seed" / "00000000").read_bytes()
        assert m.alive() and is_mounted(m.path)
        os.close(fd)
        assert m.wait() == 0, m.log()[-3000:]
        assert not is_mounted(m.path)
        assert blob_bytes(gcs, "ckpt.bin") == b"".join(chunk(i) for i in range(20))
        assert "no file open for writing: unmounting" in m.log()
        assert m.unexpected_errors() == []
    finally:
        m.close()


def test_grace_over_commits_what_was_written(emulator, gcs):
    m = Mount(emulator, BUCKET, args=["--shutdown-grace", "1s"])
    fd = None
    try:
        fd = os.open(m.path / "held.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, chunk(1))
        os.write(fd, chunk(2))
        m.proc.send_signal(signal.SIGTERM)
        assert m.wait() == 0, m.log()[-3000:]  # the writer never closed: the grace ends it
        assert "shutdown grace over with 1 files still open for writing: committed 1" in m.log()
        assert blob_bytes(gcs, "held.bin") == chunk(1) + chunk(2)
        with pytest.raises(OSError):
            os.write(fd, chunk(3))
        assert m.unexpected_errors() == []
    finally:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        m.close()


def test_lazy_unmount_by_someone_else_waits_for_the_writer(emulator, gcs):
    m = Mount(emulator, BUCKET)
    try:
        fd = os.open(m.path / "lazy.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, chunk(5))
        subprocess.run(["fusermount3", "-u", "-z", str(m.path)], check=True)
        assert not is_mounted(m.path)
        wait_log(m, "the mount was detached (lazy unmount): serving 1 files open for writing")
        os.write(fd, chunk(6))
        assert m.alive()
        os.close(fd)
        assert m.wait() == 0, m.log()[-3000:]
        assert blob_bytes(gcs, "lazy.bin") == chunk(5) + chunk(6)
        assert m.unexpected_errors() == []
    finally:
        m.close()


def test_sighup_reopens_the_log_file(emulator, tmp_path):
    log = tmp_path / "fluxfs.log"
    m = Mount(emulator, BUCKET, args=["--log-file", str(log)])
    try:
        deadline = time.monotonic() + WAIT_S
        while "mounted gs://" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, m.log()
            time.sleep(0.05)
        os.rename(log, tmp_path / "fluxfs.log.1")  # what logrotate does
        m.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT_S
        while not (log.exists() and "SIGHUP: log file reopened" in log.read_text()):
            assert m.alive(), m.log()
            assert time.monotonic() < deadline, "the log file was not reopened"
            time.sleep(0.05)
        assert m.alive() and is_mounted(m.path)
        assert (m.path / "seed" / "00000000").read_bytes()
        assert m.terminate() == 0
        assert "unmounting" in log.read_text()
        assert "SIGHUP" not in (tmp_path / "fluxfs.log.1").read_text()
    finally:
        m.close()


# ---- mount identity: fsname, a second daemon refused, an empty prefix warned about ----

def mountinfo_entry(path):
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if fields[4] == target:
                sep = fields.index("-")
                return fields[sep + 1], fields[sep + 2]  # type, source
    return None


def test_fsname_is_the_bucket_and_prefix(emulator):
    m = Mount(emulator, f"{BUCKET}/seed")
    try:
        assert mountinfo_entry(m.path) == ("fuse.fluxfs", f"gs://{BUCKET}/seed")
        df = subprocess.run(["df", "--output=source", str(m.path)], capture_output=True,
                            text=True, check=True).stdout
        assert f"gs://{BUCKET}/seed" in df
        assert "holds no objects" not in m.log()
    finally:
        m.close()
    m = Mount(emulator, BUCKET)
    try:
        assert mountinfo_entry(m.path) == ("fuse.fluxfs", f"gs://{BUCKET}")
    finally:
        m.close()


def test_second_mount_on_a_live_mount_is_refused(emulator):
    """A second fluxfs on a live mount never stacks a mount: with the same fixed options it
    takes the mount over (tests/integration/test_handover.py); with another one fixed at mount
    time (here --read-only) the serving daemon refuses, says why, and serves on."""
    m = Mount(emulator, BUCKET)
    try:
        from tests.integration.mount import fluxfs_command, fluxfs_env
        for foreground in (True, False):
            result = subprocess.run(fluxfs_command(emulator, BUCKET, m.path, ["--read-only"],
                                                   foreground=foreground),
                                    capture_output=True, text=True, timeout=60, env=fluxfs_env())
            assert result.returncode == 1, result.stderr
            assert "refused the hand-over: read-only is fixed at mount time (this mount is " \
                   "writable)" in result.stderr, result.stderr
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            assert sum(line.split()[4] == str(m.path) for line in f) == 1
        assert (m.path / "seed" / "00000000").read_bytes()
        assert m.alive()
    finally:
        m.close()


def test_empty_prefix_is_warned_about(emulator):
    m = Mount(emulator, f"{BUCKET}/no-such-prefix")
    try:
        assert f"gs://{BUCKET}/no-such-prefix/ holds no objects: the mount starts empty" in m.log()
        assert os.listdir(m.path) == []
    finally:
        m.close()
