"""The write path under a training job's ordinary concurrency (issue 20).

- A forked child's or a subprocess's exit closes the parent's descriptor too: the kernel sends
  FLUSH for it. Only a process that opened the file for writing or wrote through it commits
  on FLUSH; before, every such FLUSH committed the half-written file (64 MiB written with a
  subprocess after every 8 MiB: 4.5x the bytes uploaded, the torn file visible in between).
- A writer killed by a signal leaves the previous version, not what it had written so far.
- One file's commit never stalls lookups of the mount: a listing of the directory of a file
  being committed took the mount-wide lock and waited for the file's lock (held for the whole
  upload), and every lookup waited behind it.
- Writes acknowledged after the shutdown commit: they fail instead (EIO), or are in the
  object.
- Unlink and rename racing with the last close of a file being rewritten (a use-after-free of
  the writer under ASan).

No assertion here depends on timing: the commit that must not stall others is held up by the
emulator (a stalled reply) until the test has seen the others finish.
"""

import errno
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.integration.mount import Mount, mounts_fixture, read_plain

pytestmark = pytest.mark.emulator_only

BUCKET = "concurrency"
MIB = 1 << 20


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def bucket(gcs):
    return gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)


mounts = mounts_fixture(BUCKET, ["--stat-ttl", "600"])


def chunk(i, size=8 * MIB):
    return bytes([i % 251]) * (size // 2) + bytes([(i * 7 + 3) % 251]) * (size - size // 2)


def bytes_in(emulator):
    return emulator.stats()["bytes_in"]


def test_a_subprocess_or_forked_child_exiting_commits_nothing(bucket, mounts, emulator):
    m = mounts()
    path = m.path / "ckpt-fork.pt"
    before = bytes_in(emulator)
    written = 0
    with open(path, "wb", buffering=0) as f:
        for i in range(4):
            f.write(chunk(i))
            written += 8 * MIB
            subprocess.run(["true"], check=True)  # its exit closes f's descriptor too
            pid = os.fork()
            if pid == 0:
                os._exit(0)  # a forked DataLoader worker that ends
            os.waitpid(pid, 0)
            # Nothing in the bucket yet: no FLUSH so far came from the writer.
            assert bucket.get_blob("ckpt-fork.pt") is None, f"a torn version after {written}"
    assert bucket.blob("ckpt-fork.pt").download_as_bytes() == b"".join(chunk(i) for i in range(4))
    uploaded = bytes_in(emulator) - before
    # Once: the parts, plus small request bodies (marker, completion XML).
    assert uploaded <= 1.05 * written, f"{uploaded / written:.2f}x the bytes written uploaded"


def test_a_child_that_wrote_commits_at_its_close(bucket, mounts):
    """A process that wrote through an inherited descriptor is a writer: its close commits."""
    m = mounts()
    path = m.path / "child-wrote.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b"parent ")
    pid = os.fork()
    if pid == 0:
        try:
            os.write(fd, b"child")
            os.close(fd)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert bucket.blob("child-wrote.bin").download_as_bytes() == b"parent child"
    os.close(fd)  # the parent's close: nothing new, nothing uploaded again
    assert read_plain(path) == b"parent child"


def test_a_killed_writer_leaves_the_previous_version(bucket, mounts):
    m = mounts()
    old = b"version one\n" * 1000
    bucket.blob("killed.pt").upload_from_string(old)
    path = m.path / "killed.pt"
    assert read_plain(path) == old
    code = (
        "import os, sys\n"
        f"fd = os.open({str(path)!r}, os.O_WRONLY | os.O_TRUNC)\n"
        "os.write(fd, b'torn' * (3 << 20))\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert bucket.blob("killed.pt").download_as_bytes() == old
    assert read_plain(path) == old
    assert "was killed by signal 9 before closing it" in m.log()


def test_a_commit_does_not_stall_lookups_of_other_files(bucket, mounts, emulator):
    m = mounts()
    (m.path / "stall").mkdir()
    (m.path / "stall" / "other.txt").write_bytes(b"other")
    big = m.path / "stall" / "big.bin"
    fd = os.open(big, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    for i in range(5):
        os.write(fd, chunk(i, 8 * MIB))  # 40 MiB: parts stream while it is written
    composes = emulator.stats()["ops"].get("objects.compose", 0)
    # The commit's compose onto the name is answered only after 8 s: the file's lock is held
    # that long.
    emulator.config(faults=[{"kind": "stall", "rate": 1, "op": "objects.compose", "count": 1,
                             "seconds": 8}])
    closed = threading.Event()
    close_error = []

    def close_big():
        try:
            os.close(fd)
        except OSError as e:
            close_error.append(e)
        closed.set()

    closer = threading.Thread(target=close_big)
    closer.start()
    try:
        deadline = time.monotonic() + 60
        while emulator.stats()["ops"].get("objects.compose", 0) <= composes:
            assert time.monotonic() < deadline and not closed.is_set(), "no commit seen"
            time.sleep(0.05)
        # The commit is in progress. A listing of its directory and lookups of other names
        # must not wait for it.
        assert sorted(os.listdir(m.path / "stall")) == ["big.bin", "other.txt"]
        assert os.stat(m.path / "stall" / "other.txt").st_size == 5
        assert not os.path.exists(m.path / "stall" / "never-there")
        assert os.stat(big).st_size == 40 * MIB
        assert not closed.is_set(), "the lookups waited for the commit"
    finally:
        closer.join(timeout=120)
    assert not close_error, close_error
    assert bucket.get_blob("stall/big.bin").size == 40 * MIB


def test_writes_after_the_shutdown_commit_fail_or_are_kept(emulator, gcs, bucket):
    m = Mount(emulator, BUCKET, args=["--shutdown-grace", "1s"])
    fd = os.open(m.path / "grace.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    acknowledged = 0
    failure = None
    try:
        piece = b"g" * (256 << 10)
        os.write(fd, piece)
        acknowledged += len(piece)
        m.proc.send_signal(signal.SIGTERM)
        # Write on through the grace, the commit and the end of the session.
        for _ in range(4000):
            try:
                os.write(fd, piece)
            except OSError as e:
                failure = e
                break
            acknowledged += len(piece)
            time.sleep(0.005)
        assert failure is not None and failure.errno in (
            errno.EIO, errno.ENOTCONN, errno.ECONNABORTED), failure
        assert m.wait() == 0, m.log()[-3000:]
        blob = gcs.bucket(BUCKET).get_blob("grace.bin")
        assert blob is not None and blob.size == acknowledged, (
            f"{acknowledged} bytes acknowledged, {blob.size if blob else 0} in the object")
        assert m.unexpected_errors() == []
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
        m.close()


def test_unlink_and_rename_racing_with_rewrites(bucket, mounts):
    """Two threads rewrite a file, one unlinks it, one renames it away: every operation may
    fail with ENOENT/ESTALE (the name comes and goes), none may hang or kill the daemon (under
    ASan a writer freed by one close and used by an unlink died within ~60 operations)."""
    m = mounts()
    # Two rewriters of one name race: the loser's commit is refused (412) and logged.
    # An edit that finds the object it was based on gone (unlinked, renamed away) fails too.
    m.expect_errors(r"another writer changed the object", r"commit .* failed",
                    r"gs://concurrency/race/.*HTTP 412",
                    r"cannot fetch 'race/f\.bin' .* to edit it")
    base = m.path / "race"
    base.mkdir()
    name = base / "f.bin"
    rounds = 150
    allowed = {errno.ENOENT, errno.ESTALE}
    problems = []

    def rewrite(tag):
        for i in range(rounds):
            try:
                with open(name, "wb") as f:
                    f.write(tag * (1000 + i))
            except OSError as e:
                if e.errno not in allowed:
                    problems.append(e)

    def unlink():
        for _ in range(rounds):
            try:
                os.unlink(name)
            except OSError as e:
                if e.errno not in allowed:
                    problems.append(e)

    def rename():
        for i in range(rounds):
            try:
                os.rename(name, base / f"moved-{i % 4}.bin")
            except OSError as e:
                if e.errno not in allowed:
                    problems.append(e)

    threads = [threading.Thread(target=rewrite, args=(b"a",)),
               threading.Thread(target=rewrite, args=(b"b",)),
               threading.Thread(target=unlink), threading.Thread(target=rename)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "an operation hung"
    assert m.alive(), m.log()[-3000:]
    assert not problems, problems[:5]
    # Whatever is left is a whole version one of the writers wrote, or the empty file an
    # open("wb") made before its write (a rename commits what the file holds then).
    for entry in os.listdir(base):
        data = (base / entry).read_bytes()
        assert data == b"" or (len(set(data)) == 1 and 1000 <= len(data) < 1000 + rounds), entry


def test_truncate_by_path_of_a_file_a_reader_holds_is_committed(bucket, mounts):
    """truncate(path) returned 0 but nothing was uploaded while another handle (a reader that
    opened the file while it was written) kept the file's writer: now committed at once."""
    m = mounts()
    path = m.path / "held-truncate.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b"x" * 1000)
    reader = os.open(path, os.O_RDONLY)
    try:
        os.close(fd)
        assert bucket.get_blob("held-truncate.bin").size == 1000
        os.truncate(path, 10)
        assert bucket.get_blob("held-truncate.bin").size == 10
        assert os.stat(path).st_size == 10
    finally:
        os.close(reader)
    assert bucket.blob("held-truncate.bin").download_as_bytes() == b"x" * 10


def test_writes_below_a_renamed_directory_go_to_its_new_name(bucket, mounts):
    """After rename(d, e) the kernel reaches e/x with d/x's inode until its dentry is
    invalidated (from the notifier thread): a write there committed to d/x, bringing d back
    (12 of 30 rounds with two listing threads beside it). The children of a renamed directory
    now leave their old paths, and an open of one answers ESTALE once: the kernel looks it up
    again under the new name."""
    m = mounts()
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            try:
                os.listdir(m.path)
            except OSError:
                pass

    threads = [threading.Thread(target=busy) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(30):
            os.makedirs(m.path / f"d{i}")
            (m.path / f"d{i}" / "x").write_bytes(b"old" * 10)
            os.rename(m.path / f"d{i}", m.path / f"e{i}")
            (m.path / f"e{i}" / "x").write_bytes(b"new")
            assert [b.name for b in bucket.list_blobs(prefix=f"d{i}/")] == [], i
            assert bucket.blob(f"e{i}/x").download_as_bytes() == b"new", i
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_a_name_recreated_while_its_unlinked_file_is_open_is_a_new_file(bucket, mounts):
    """A file unlinked while open keeps its writer until its last (asynchronous) RELEASE; a
    create of the same name meanwhile got that writer, whose commits do nothing once unlinked:
    the new file's close returned 0 and nothing was uploaded (found by tests/stress: a utime
    of the new file answered ENOENT)."""
    m = mounts()
    path = m.path / "recreated.bin"
    old = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(old, b"old bytes")
        os.unlink(path)
        new = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(new, b"new")
        os.utime(path, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
        os.close(new)
        assert bucket.blob("recreated.bin").download_as_bytes() == b"new"
    finally:
        os.close(old)  # the unlinked file: nothing committed
    assert bucket.blob("recreated.bin").download_as_bytes() == b"new"
    assert read_plain(path) == b"new"
