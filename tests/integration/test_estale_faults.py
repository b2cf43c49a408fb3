"""ESTALE on names only one thread used (issue 20, item 6).

A 7-minute fault soak saw 13 operations fail with ESTALE (4 opens for writing, 9 reads) and
no log line. The cause: a rename leaves the source name's inode behind in the inode table's
path index (it is marked "renamed", so that an open through the kernel's dentry of the new
name answers ESTALE and the kernel looks the name up again). Until the kernel forgets that
inode -- after the notifier thread has invalidated the new name's dentry -- a create of the
old name got that same inode back: the kernel then held the old name on a "renamed" inode,
every open of it answered ESTALE, and the revalidating lookup handed out the same inode
again. Without faults the window (rename reply to FORGET) is a millisecond; with them the
notifier thread waits behind an invalidation of a directory whose lock a slow request holds
(a retried listing, lookup or mkdir in another directory), and the same thread's next write
of the old name lands inside it.

Here the window is made to last on a fixed schedule, no draw: a mkdir in directory c stalls
(8 s, the kernel holding c's lock), a failed commit in c queues an invalidation of c's entry
first (503s past --max-retries), so the rename's invalidation waits behind it. A second test
keeps the renamed inode alive the plain way, with a descriptor open on it.

Every ESTALE the daemon answers says why in its log: the open through the old dentry of the
new name logs that the inode was renamed away.
"""

import errno
import os
import threading
import time

import pytest

from tests.integration.mount import faults_injected, mounts_fixture, read_plain, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "estale"
ARGS = ["--max-retries", "2", "--request-deadline", "60s"]
STALL_S = 8
RENAMED_LINE = "renamed away"


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def bucket(gcs):
    return gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)


mounts = mounts_fixture(BUCKET, ARGS)


@pytest.fixture
def mount(bucket, mounts):
    return mounts


def write_plain(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    """os.open/os.write: Python's open() asks isatty(), itself a request."""
    fd = os.open(path, flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def rewrite_and_read(path, old, new):
    """Reopens path for writing (no truncation), changes its first bytes, reads it back:
    what the soak's failed opens and reads did."""
    write_plain(path, new[:len(old)], os.O_WRONLY)
    assert read_plain(path) == new[:len(old)]


def test_recreated_name_while_the_rename_invalidation_waits(emulator, bucket, mount):
    m = mount()
    for d in ("a", "c"):
        os.mkdir(m.path / d)
    write_plain(m.path / "a" / "f", b"one")
    assert read_plain(m.path / "a" / "f") == b"one"

    # A file in c, open for writing: its commit will fail (503s past the retries).
    held = os.open(m.path / "c" / "x", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(held, b"never stored")

    # The kernel holds c's lock for as long as this mkdir's insert stalls.
    before = faults_injected(emulator)
    emulator.config(faults=[{"kind": "stall", "rate": 1, "count": 1, "seconds": STALL_S,
                             "op": "objects.insert"}])
    blocker_error = []

    def blocker():
        try:
            os.mkdir(m.path / "c" / "sub")
        except OSError as e:  # asserted after the join
            blocker_error.append(e)

    thread = threading.Thread(target=blocker)
    thread.start()
    started = time.monotonic()
    try:
        wait_for(lambda: faults_injected(emulator) > before)
        # --max-retries 2: three 503s fail the commit for good; the failed commit queues an
        # invalidation of c's dentry, which waits for c's lock: the notifier thread is stuck.
        emulator.config(faults=[{"kind": "503", "rate": 1, "count": 3,
                                 "op": "objects.insert"}])
        with pytest.raises(OSError) as failed:
            os.close(held)
        assert failed.value.errno == errno.EIO
        m.expect_errors(r"c/x")
        assert faults_injected(emulator) == before + 4
        emulator.config(faults=[])

        # The rename's invalidation of a/g queues behind: the kernel keeps the renamed inode.
        os.rename(m.path / "a" / "f", m.path / "a" / "g")
        # The same thread writes the old name again, reopens it for writing, reads it back.
        write_plain(m.path / "a" / "f", b"two")  # the create got the renamed inode before
        rewrite_and_read(m.path / "a" / "f", b"two", b"TWO")  # ESTALE before the fix
        assert read_plain(m.path / "a" / "f") == b"TWO"
        # The new name, reached through the kernel's dentry that still holds the renamed
        # inode: ESTALE inside the kernel (logged), which looks it up again.
        assert read_plain(m.path / "a" / "g") == b"one"
        # All of it ran inside the window.
        assert thread.is_alive(), (
            f"the mkdir stalled {STALL_S} s but ended after {time.monotonic() - started:.1f} s:"
            " the window closed before the test was done (machine too slow?)")
    finally:
        thread.join(STALL_S + 60)
    assert not blocker_error
    assert (m.path / "c" / "sub").is_dir()
    assert bucket.get_blob("a/f").download_as_bytes() == b"TWO"
    assert bucket.get_blob("a/g").download_as_bytes() == b"one"
    assert bucket.get_blob("c/x") is None
    log = m.log()
    assert RENAMED_LINE in log, log[-3000:]


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_recreated_name_while_the_renamed_inode_is_open(bucket, mount, kind):
    """The same without faults: a descriptor open on the renamed file (or directory) keeps its
    inode, so the kernel cannot forget it however soon the dentry is invalidated."""
    m = mount()
    base = m.path / kind
    os.mkdir(base)
    if kind == "file":
        old, new = base / "f", base / "g"
        write_plain(old, b"one")
    else:
        old, new = base / "d", base / "e"
        os.mkdir(old)
        write_plain(old / "x", b"one")
    held = os.open(old, os.O_RDONLY)
    try:
        os.rename(old, new)
        if kind == "file":
            write_plain(old, b"two")
            rewrite_and_read(old, b"two", b"TWO")  # ESTALE before the fix
        else:
            os.mkdir(old)
            write_plain(old / "x", b"two")  # ESTALE before the fix
            rewrite_and_read(old / "x", b"two", b"TWO")
            assert sorted(os.listdir(old)) == ["x"]
    finally:
        os.close(held)
    if kind == "file":
        assert read_plain(new) == b"one"
    else:
        assert read_plain(new / "x") == b"one"
