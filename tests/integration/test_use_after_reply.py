"""No handler touches a request or an open file's state after replying (issue 15, defect 1).

Once a READ is answered the kernel can hand the bytes to the application, which closes the
file; another FUSE worker then runs RELEASE and frees the open file while the replying thread
is still finishing. fs_read used the file's small-object name after fuse_reply_iov: a
use-after-free that the ASan build of the daemon (scripts/test) reports within a few dozen
files of this loop, and that the plain build survives by luck. The loop drops the kernel's
pages before each read (posix_fadvise DONTNEED), so every read of a small file reaches the
daemon and ends at the object's end, the path that used the file after the reply.

The test checks every byte, that the daemon is alive, and (through tests/conftest.py) that no
sanitizer report was written.
"""

import os
import random
import threading
from pathlib import Path

import pytest

from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "data"
SEED = 11
COUNT = 64
SIZE = 20_000
THREADS = 4
PASSES = 3


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/small/:{COUNT}:{SIZE}:{SEED}"]


@pytest.fixture(scope="module")
def generations(emulator, gcs):
    return {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs()}


def test_read_then_close_races_release(fluxfs_mount, generations):
    root = Path(fluxfs_mount.path)
    names = [f"small/{i:08d}" for i in range(COUNT)]
    failures = []

    def worker(index):
        order = random.Random(index)
        try:
            for _ in range(PASSES):
                for name in order.sample(names, len(names)):
                    fd = os.open(root / name, os.O_RDONLY)
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        data = os.read(fd, SIZE + 1)
                    finally:
                        os.close(fd)
                    assert len(data) == SIZE, f"{name}: {len(data)} bytes"
                    bad = first_mismatch(name, generations[name], SEED, 0, data)
                    assert bad is None, f"{name}: wrong byte at {bad}"
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]
    assert fluxfs_mount.alive(), fluxfs_mount.log()[-4000:]


def test_handles_open_at_stop_are_freed(emulator, generations):
    """A stop while files and directories are still open (SIGTERM; likewise a RELEASE or
    RELEASEDIR the kernel queued just before an unmount, which the session never reads): the
    handles are freed after the session loop, so the sanitized daemon's leak check at exit
    finds nothing (it reported the directory handle of an os.listdir right before unmount)."""
    from tests.integration.mount import Mount

    mount = Mount(emulator, BUCKET)
    try:
        root = Path(mount.path)
        dir_fd = os.open(root / "small", os.O_RDONLY | os.O_DIRECTORY)
        os.listdir(dir_fd)
        file_fd = os.open(root / "small" / f"{0:08d}", os.O_RDONLY)
        assert len(os.read(file_fd, SIZE)) == SIZE
        rc = mount.terminate()
        for fd in (dir_fd, file_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        assert rc == 0, mount.log()[-3000:]
        assert not mount.unexpected_errors()
    finally:
        mount.close()
