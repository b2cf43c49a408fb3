"""Hand-over (issue 24): running fluxfs again on a mountpoint a live fluxfs daemon serves
replaces the daemon without an unmount.

A reader loop reads every file again and again (and compares the bytes) while the mount is
handed over twice; descriptors opened before stay open across both, and inodes looked up
before keep their numbers. A hand-over while a file is open for writing is refused: the
daemon serving keeps serving, and the file, closed afterwards, is committed whole.

Nothing waits on time: every wait is for a condition (the reader's pass count, the status
file's pid), with a generous guard; the refusal waits --handover-wait 0.5s by design, and no
assertion depends on how long anything took."""

import os
import random
import re
import subprocess
import threading
from pathlib import Path

import pytest

from tests.integration.mount import (
    children,
    parent,
    mount_status as status,
    pid_alive,
    EXIT_TIMEOUT_S,
    Mount,
    find_fluxfs_binary,
    fluxfs_env,
    is_mounted,
    read_plain,
    wait_for,
)

pytestmark = pytest.mark.emulator_only

FILES = 120


def content(i: int) -> bytes:
    return (f"file {i:04d} ".encode() * (1 + i * 37 % 900))[: 100 + i * 977 % 9000]


def name(i: int) -> str:
    return f"data/d{i % 4}/f{i:04d}.bin"


class Reader(threading.Thread):
    """Reads every file in a fixed shuffled order, pass after pass, until stopped."""

    def __init__(self, mountpoint: Path):
        super().__init__(daemon=True)
        self.mountpoint = mountpoint
        self.stop = threading.Event()
        self.passes = 0
        self.reads = 0
        self.errors: list[str] = []

    def run(self):
        order = list(range(FILES))
        random.Random(24).shuffle(order)
        while not self.stop.is_set():
            for i in order:
                try:
                    data = read_plain(self.mountpoint / name(i))
                    if data != content(i):
                        self.errors.append(f"{name(i)}: {len(data)} bytes differ")
                    if i % 7 == 0:
                        os.listdir(self.mountpoint / f"data/d{i % 4}")
                except OSError as e:
                    self.errors.append(f"{name(i)}: {e}")
                self.reads += 1
            self.passes += 1


def take_over(emulator, bucket, mountpoint, log_path, *args):
    """Runs `fluxfs BUCKET MOUNTPOINT` (detaching, as a user would) on the live mount."""
    cmd = [str(find_fluxfs_binary()), "--endpoint", emulator.url, "--anonymous",
           "--log-file", str(log_path), *args, bucket, str(mountpoint)]
    return subprocess.run(cmd, capture_output=True, text=True, env=fluxfs_env(),
                          timeout=EXIT_TIMEOUT_S)


def test_handover_twice_under_reads_and_refused_with_a_writer(emulator, gcs, mountpoint,
                                                              tmp_path):
    bucket = gcs.create_bucket("handover")
    for i in range(FILES):
        bucket.blob(name(i)).upload_from_string(content(i))
    first = Mount(emulator, bucket.name, mountpoint)
    reader = None
    daemons = []
    try:
        st0 = status(mountpoint)
        # The serving process: the only child of the --crash-restart supervisor (the default).
        assert children(first.proc.pid) == [int(st0["pid"])] and st0["handovers"] == "0", st0
        # Inodes looked up before, and handles kept open across both hand-overs. The kernel may
        # forget an inode nothing holds (and a new lookup then gets a new number, legitimately:
        # a shrinking dcache, a drop_caches elsewhere), so O_PATH descriptors hold these.
        pinned = {i: os.open(mountpoint / name(i), os.O_PATH) for i in range(0, FILES, 10)}
        inodes = {i: os.fstat(fd).st_ino for i, fd in pinned.items()}
        kept = {i: os.open(mountpoint / name(i), os.O_RDONLY) for i in (3, 50, 117)}
        for i, fd in kept.items():
            assert os.read(fd, 50) == content(i)[:50]
        kept_dir = os.open(mountpoint / "data" / "d1", os.O_RDONLY | os.O_DIRECTORY)

        reader = Reader(mountpoint)
        reader.start()
        wait_for(lambda: reader.passes >= 1, timeout=120)

        logs = []
        for round_ in (1, 2):
            before = reader.passes
            old_pid = int(status(mountpoint)["pid"])
            log_path = tmp_path / f"fluxfs-{round_}.log"
            logs.append(log_path)
            done = take_over(emulator, bucket.name, mountpoint, log_path)
            assert done.returncode == 0, (done.stderr, log_path.read_text(), first.log()[-3000:])
            st = status(mountpoint)
            new_pid = int(st["pid"])
            daemons.append(new_pid)
            daemons.append(parent(new_pid))  # the new command's supervisor
            assert new_pid != old_pid and st["handovers"] == str(round_), st
            if round_ == 1:
                assert first.wait() == 0  # the old daemon exits 0, without unmounting
            else:
                wait_for(lambda: not pid_alive(old_pid), timeout=EXIT_TIMEOUT_S)
            assert is_mounted(mountpoint)
            # The reader goes on through the hand-over: a whole pass after it.
            wait_for(lambda: reader.passes >= before + 2, timeout=120)
            assert reader.errors == [], reader.errors[:10]
            new_log = log_path.read_text()
            assert len(re.findall(r"took over .* from pid %d \(hand-over %d\)" %
                                  (old_pid, round_), new_log)) == 1, new_log
            old_log = first.log() if round_ == 1 else logs[0].read_text()
            assert len(re.findall(r"handed .* over to pid %d \(hand-over %d\)" %
                                  (new_pid, round_), old_log)) == 1, old_log

        # What was looked up and opened before still is, with the same numbers and bytes.
        for i, ino in inodes.items():
            assert os.stat(mountpoint / name(i)).st_ino == ino, name(i)
            assert os.fstat(pinned[i]).st_ino == ino, name(i)
            os.close(pinned[i])
        for i, fd in kept.items():
            rest = b""
            while chunk := os.read(fd, 1 << 16):
                rest += chunk
            assert rest == content(i)[50:], name(i)
            os.lseek(fd, 0, os.SEEK_SET)
            assert os.read(fd, 1 << 20) == content(i)
            os.close(fd)
        assert sorted(os.listdir(kept_dir)) == sorted(
            os.path.basename(name(i)) for i in range(FILES) if i % 4 == 1)
        os.close(kept_dir)

        # A file open for writing cannot be carried: the hand-over is refused, the daemon
        # serving keeps serving, and the file is committed whole when it is closed.
        serving = int(status(mountpoint)["pid"])
        written = os.open(mountpoint / "written.bin", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(written, b"a" * 100_000)
        refused = take_over(emulator, bucket.name, mountpoint, tmp_path / "refused.log",
                            "--handover-wait", "0.5s")
        assert refused.returncode != 0
        assert "open for writing" in refused.stderr, refused.stderr
        st = status(mountpoint)
        assert int(st["pid"]) == serving and st["handovers"] == "2", st
        assert pid_alive(serving)
        os.write(written, b"b" * 100_000)
        os.close(written)
        assert bucket.blob("written.bin").download_as_bytes() == b"a" * 100_000 + b"b" * 100_000
        assert read_plain(mountpoint / "written.bin") == b"a" * 100_000 + b"b" * 100_000

        before = reader.passes
        wait_for(lambda: reader.passes >= before + 1, timeout=120)
        reader.stop.set()
        reader.join(120)
        assert reader.errors == [], reader.errors[:10]
        assert reader.passes >= 5

        # The last daemon unmounts as any would, and leaves nothing behind.
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True, capture_output=True)
        wait_for(lambda: not any(pid_alive(p) for p in daemons), timeout=EXIT_TIMEOUT_S)
        assert not is_mounted(mountpoint)
        assert os.listdir(mountpoint) == []
        assert [b.name for b in bucket.list_blobs(prefix=".fluxfs/")] == []
        for log_path in logs:
            text = log_path.read_text()
            assert not re.search(r"\b(ERROR|error)\b", text), text
    finally:
        if reader is not None:
            reader.stop.set()
            reader.join(120)
        first.close()
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        for pid in daemons:
            if pid_alive(pid):
                os.kill(pid, 9)
