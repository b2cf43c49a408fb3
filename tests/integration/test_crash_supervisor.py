"""Crash recovery (issue 24): with --crash-restart a small supervising process keeps the FUSE
connection and the serving process's state; when the serving process is killed (kill -9) a new
one takes over, and the mount's users see no error.

A reader loop reads ~200 files again and again (and compares the bytes, and lists directories)
while the serving process is killed twice; descriptors opened before stay open across both
kills, and inodes looked up before keep their numbers. A file open for writing across a kill
fails its next write and its close with EIO, and no object of it appears in the bucket. The
unmount ends the supervisor and leaves no process behind.

Nothing waits on time: every wait is for a condition (the reader's pass count, the status
file's pid), with a generous guard; no assertion depends on how long anything took."""

import errno
import os
import random
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.integration.mount import (
    children,
    crash_state_memfd,
    kill_serving,
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

FILES = 200


def content(i: int) -> bytes:
    return (f"file {i:04d} ".encode() * (1 + i * 37 % 900))[: 100 + i * 977 % 9000]


def name(i: int) -> str:
    return f"data/d{i % 5}/f{i:04d}.bin"


class Reader(threading.Thread):
    """Reads every file in a fixed shuffled order, pass after pass, until stopped."""

    def __init__(self, mountpoint: Path):
        super().__init__(daemon=True)
        self.mountpoint = mountpoint
        self.stop = threading.Event()
        self.passes = 0
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
                        listed = os.listdir(self.mountpoint / f"data/d{i % 5}")
                        if len(listed) != FILES // 5:
                            self.errors.append(f"data/d{i % 5}: {len(listed)} entries")
                except OSError as e:
                    self.errors.append(f"{name(i)}: {e}")
            self.passes += 1


def test_kill_serving_process_twice_under_reads(emulator, gcs, mountpoint):
    bucket = gcs.create_bucket("crash")
    for i in range(FILES):
        bucket.blob(name(i)).upload_from_string(content(i))
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    reader = None
    supervisor = mount.proc.pid
    serving = 0
    try:
        st0 = status(mountpoint)
        serving = int(st0["pid"])
        assert serving != supervisor and children(supervisor) == [serving], st0
        assert st0["crash_restarts"] == "0" and st0["handovers"] == "0", st0
        # O_PATH descriptors hold these inodes (the kernel may forget one nothing holds).
        pinned = {i: os.open(mountpoint / name(i), os.O_PATH) for i in range(0, FILES, 10)}
        inodes = {i: os.fstat(fd).st_ino for i, fd in pinned.items()}
        kept = {i: os.open(mountpoint / name(i), os.O_RDONLY) for i in (3, 50, 117)}
        for i, fd in kept.items():
            assert os.read(fd, 50) == content(i)[:50]
        kept_dir = os.open(mountpoint / "data" / "d1", os.O_RDONLY | os.O_DIRECTORY)
        # A writer across the first kill: its bytes live in the serving process only.
        written = os.open(mountpoint / "written.bin", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(written, b"a" * 100_000)

        reader = Reader(mountpoint)
        reader.start()
        wait_for(lambda: reader.passes >= 1, timeout=120)

        for round_ in (1, 2):
            before = reader.passes
            st = kill_serving(supervisor, serving, mountpoint)
            new = int(st["pid"])
            assert st["crash_restarts"] == str(round_), st
            serving = new
            assert is_mounted(mountpoint)
            # The reader goes on through the crash: two whole passes after it.
            wait_for(lambda: reader.passes >= before + 2, timeout=120)
            assert reader.errors == [], reader.errors[:10]
            if round_ == 1:
                with pytest.raises(OSError) as failed:
                    os.write(written, b"b" * 1000)
                assert failed.value.errno == errno.EIO
                with pytest.raises(OSError) as failed:
                    os.close(written)
                assert failed.value.errno == errno.EIO

        reader.stop.set()
        reader.join(120)
        assert reader.errors == [], reader.errors[:10]

        # The writer's object never appeared, whole or short.
        assert [b.name for b in bucket.list_blobs(prefix="written")] == []
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
            os.close(fd)
        assert sorted(os.listdir(kept_dir)) == sorted(
            os.path.basename(name(i)) for i in range(FILES) if i % 5 == 1)
        os.close(kept_dir)
        # A new file written after the crashes is committed whole.
        with open(mountpoint / "after.bin", "wb") as f:
            f.write(b"c" * 50_000)
        assert bucket.blob("after.bin").download_as_bytes() == b"c" * 50_000

        shown = subprocess.run([str(find_fluxfs_binary()), "status", str(mountpoint)],
                               capture_output=True, text=True, env=fluxfs_env())
        assert "Crash restarts: 2" in shown.stdout, shown.stdout + shown.stderr
        log = mount.log()
        assert len(re.findall(r"died by signal 9 .*crash restart", log)) == 2, log[-3000:]

        # The unmount ends the serving process and the supervisor, with status 0.
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
        assert not is_mounted(mountpoint)
        assert os.listdir(mountpoint) == []
    finally:
        if reader is not None:
            reader.stop.set()
            reader.join(120)
        for pid in [serving, *children(supervisor)]:
            if pid and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)


def test_twenty_kills_under_uncached_reads(emulator, gcs, mountpoint):
    """Six threads open, read (the page cache dropped first: every read reaches the daemon),
    stat missing names and list directories while the serving process is killed 20 times:
    requests it had taken are served again, and no caller sees an error."""
    bucket = gcs.create_bucket("crash-many")
    for i in range(FILES):
        bucket.blob(name(i)).upload_from_string(content(i))
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    supervisor = mount.proc.pid
    stop = threading.Event()
    errors: list[str] = []
    done = [0]

    def work(seed):
        r = random.Random(seed)
        while not stop.is_set():
            i = r.randrange(FILES)
            try:
                fd = os.open(mountpoint / name(i), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    data = b""
                    while chunk := os.read(fd, 1 << 16):
                        data += chunk
                finally:
                    os.close(fd)
                if data != content(i):
                    errors.append(f"{name(i)}: {len(data)} bytes differ")
                if os.path.exists(mountpoint / f"data/missing{r.randrange(10**9)}"):
                    errors.append("a missing name exists")
                if len(os.listdir(mountpoint / f"data/d{i % 5}")) != FILES // 5:
                    errors.append(f"data/d{i % 5}: wrong count")
            except OSError as e:
                errors.append(f"{name(i)}: {e}")
            done[0] += 1

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in range(6)]
    for t in threads:
        t.start()
    serving = 0
    try:
        for round_ in range(1, 21):
            before = done[0]
            wait_for(lambda: done[0] >= before + 30, timeout=120)
            serving = int(status(mountpoint)["pid"])
            os.kill(serving, signal.SIGKILL)
            wait_for(lambda: children(supervisor) and children(supervisor) != [serving],
                     timeout=EXIT_TIMEOUT_S)
        before = done[0]
        wait_for(lambda: done[0] >= before + 30, timeout=120)
        stop.set()
        for t in threads:
            t.join(120)
        assert errors == [], errors[:10]
        assert status(mountpoint)["crash_restarts"] == "20"
        serving = int(status(mountpoint)["pid"])
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
    finally:
        stop.set()
        for t in threads:
            t.join(120)
        for pid in [serving, *children(supervisor)]:
            if pid and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)


def test_handover_of_a_supervised_mount_then_a_crash(emulator, gcs, mountpoint, tmp_path):
    """A supervised mount handed over (an upgrade) to a new daemon started with --crash-restart
    is supervised again: the old supervisor exits 0 with its child, the new daemon serves the
    descriptors opened before, and a kill -9 of the new serving process is survived too."""
    bucket = gcs.create_bucket("crash-handover")
    for i in range(40):
        bucket.blob(name(i)).upload_from_string(content(i))
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    new_supervisor = None
    try:
        first_serving = int(status(mountpoint)["pid"])
        assert first_serving != mount.proc.pid and first_serving in children(mount.proc.pid)
        kept = os.open(mountpoint / name(3), os.O_RDONLY)
        assert os.read(kept, 50) == content(3)[:50]
        log_path = tmp_path / "new.log"
        done = subprocess.run(
            [str(find_fluxfs_binary()), "--endpoint", emulator.url, "--anonymous", "--log-file",
             str(log_path), "--crash-restart", bucket.name, str(mountpoint)],
            capture_output=True, text=True, env=fluxfs_env(), timeout=EXIT_TIMEOUT_S)
        assert done.returncode == 0, (done.stderr, log_path.read_text())
        # The old supervisor ends with its serving process, 0, without unmounting.
        assert mount.wait() == 0, mount.log()[-3000:]
        assert is_mounted(mountpoint)
        st = status(mountpoint)
        serving = int(st["pid"])
        assert serving != first_serving and st["handovers"] == "1", st
        # The new daemon detached: its supervisor is the serving process's parent.
        new_supervisor = int(Path(f"/proc/{serving}/stat").read_text().split(") ")[1].split()[1])
        assert serving in children(new_supervisor)
        for i in range(40):
            assert read_plain(mountpoint / name(i)) == content(i), name(i)

        os.kill(serving, signal.SIGKILL)
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
        for i in range(40):
            assert read_plain(mountpoint / name(i)) == content(i), name(i)
        st = status(mountpoint)
        assert int(st["pid"]) not in (serving, first_serving), st
        assert st["crash_restarts"] == "1" and st["handovers"] == "1", st
        rest = b""
        while chunk := os.read(kept, 1 << 16):
            rest += chunk
        assert rest == content(3)[50:]
        os.close(kept)

        serving = int(st["pid"])
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True, capture_output=True)
        wait_for(lambda: not pid_alive(serving) and not pid_alive(new_supervisor),
                 timeout=EXIT_TIMEOUT_S)
        assert not is_mounted(mountpoint)
        assert len(re.findall(r"died by signal 9 .*crash restart 1", log_path.read_text())) == 1
    finally:
        for pid in [new_supervisor, *(children(new_supervisor) if new_supervisor else [])]:
            if pid and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)


def test_kill_between_read_and_record_loses_no_request(emulator, gcs, mountpoint, monkeypatch):
    """The narrowest window: the serving process dies right after read(2) gave it a LOOKUP and
    before it recorded it (a test hook kills it exactly there). The kernel had handed that
    request over; the next process finds it in the dead thread's landing and answers it, so
    the stat waiting on it returns (without the landing it would wait forever)."""
    bucket = gcs.create_bucket("crash-window")
    for i in range(30):
        bucket.blob(name(i)).upload_from_string(content(i))
    monkeypatch.setenv("FLUXFS_TEST_KILL_AFTER_READ", "1:5")  # FUSE_LOOKUP, the 5th
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    results: dict[int, object] = {}

    def stat_all():
        for i in range(30):
            try:
                results[i] = os.stat(mountpoint / name(i)).st_size
            except OSError as e:
                results[i] = e

    try:
        worker = threading.Thread(target=stat_all, daemon=True)
        worker.start()
        worker.join(EXIT_TIMEOUT_S * 4)
        assert not worker.is_alive(), f"a stat never returned: {len(results)} of 30 done"
        assert results == {i: len(content(i)) for i in range(30)}, results
        st = status(mountpoint)
        assert st["crash_restarts"] == "1", st
        log = mount.log()
        assert "test hook: this process kills itself" in log, log[-3000:]
        found = re.findall(r"answered EIO \((\d+) of them read and not yet recorded\)", log)
        assert found == ["1"], log[-3000:]
        serving = int(st["pid"])
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
    finally:
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)


def memfd_allocated(supervisor: int) -> int:
    """Bytes allocated to the supervisor's crash-state memfd."""
    size, allocated = crash_state_memfd(supervisor)
    assert size > 0, "no crash-state memfd"
    return allocated


def test_opens_and_closes_do_not_grow_the_journal(emulator, gcs, mountpoint):
    """Each open used to append an OPEN record and each close a CLOSE record (112 bytes per
    file read, never reclaimed while the process lived: 1 GiB, the journal's limit, after about
    9.6 million opens, and then a crash ended the mount). A close now marks its OPEN dead and
    the next OPEN takes its place: 3,000 opens and closes leave the memfd as it was. Handles
    whose OPEN took a dead one's place are carried across a kill and read on."""
    bucket = gcs.create_bucket("crash-journal")
    for i in range(20):
        bucket.blob(name(i)).upload_from_string(content(i))
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    supervisor = mount.proc.pid
    try:
        # Warm up: every inode looked up (its NEW record written), every request slot's page
        # touched (slots are picked by the request's number: 1,024 of them).
        for _ in range(60):
            for i in range(20):
                assert read_plain(mountpoint / name(i)) == content(i)
        before = memfd_allocated(supervisor)
        for _ in range(150):
            for i in range(20):
                assert read_plain(mountpoint / name(i)) == content(i)
        grown = memfd_allocated(supervisor) - before
        assert grown < 64 * 1024, f"the memfd grew {grown} bytes over 3,000 opens"

        # Handles open at once: some take dead places, some are appended; two close and two
        # more open (into the places just freed); then a kill.
        held = {i: os.open(mountpoint / name(i), os.O_RDONLY) for i in range(5)}
        for i in (1, 3):
            os.close(held.pop(i))
        for i in (10, 11):
            held[i] = os.open(mountpoint / name(i), os.O_RDONLY)
        for i, fd in held.items():
            assert os.read(fd, 40) == content(i)[:40]
        serving = int(status(mountpoint)["pid"])
        os.kill(serving, signal.SIGKILL)
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
        for i, fd in held.items():
            rest = b""
            while chunk := os.read(fd, 1 << 16):
                rest += chunk
            assert rest == content(i)[40:], name(i)
            os.close(fd)
        st = status(mountpoint)
        assert st["crash_restarts"] == "1", st
        carried = re.findall(r"took over .*: \d+ inodes, (\d+) open files", mount.log())
        assert len(carried) == 1 and int(carried[0]) >= len(held), mount.log()[-3000:]
        serving = int(st["pid"])
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
    finally:
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)


def test_kill_after_answering_a_listing(emulator, gcs, mountpoint, monkeypatch):
    """The serving process dies right after answering a READDIRPLUS, before it cleared the
    request's slot (a test hook kills it exactly there). The next process serves that request
    again (the kernel refuses the second answer) while its caller, answered, goes on and closes
    the directory: the RELEASEDIR waits for the request served again, which reads the handle
    (ASan caught the RELEASEDIR freeing it under a replayed READDIRPLUS)."""
    bucket = gcs.create_bucket("crash-answered")
    for i in range(30):
        bucket.blob(name(i)).upload_from_string(content(i))
    monkeypatch.setenv("FLUXFS_TEST_KILL_AFTER_REPLY", "44:1")  # FUSE_READDIRPLUS, the 1st
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    listed: list[object] = []

    def list_twice():
        try:
            listed.append(sorted(os.listdir(mountpoint / "data" / "d1")))
            listed.append(sorted(os.listdir(mountpoint / "data" / "d1")))
        except OSError as e:
            listed.append(e)

    try:
        worker = threading.Thread(target=list_twice, daemon=True)
        worker.start()
        worker.join(EXIT_TIMEOUT_S * 4)
        assert not worker.is_alive(), "a listing never returned"
        expected = sorted(os.path.basename(name(i)) for i in range(30) if i % 5 == 1)
        assert listed == [expected, expected], listed
        st = status(mountpoint)
        assert st["crash_restarts"] == "1", st
        log = mount.log()
        assert len(re.findall(r"died by signal 9 .*crash restart", log)) == 1, log[-3000:]
        # The answered READDIRPLUS, and any request a sibling thread read before the kill
        # reached it (its landing keeps it): all served again, none failed.
        served = re.findall(r"(\d+) requests served again, (\d+) answered EIO", log)
        assert len(served) == 1 and int(served[0][0]) >= 1 and served[0][1] == "0", log[-3000:]
        serving = int(st["pid"])
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
    finally:
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)
