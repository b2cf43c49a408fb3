"""After a close() whose commit truly failed, the next open of the name sees what the bucket
holds (issue 15, leftover of defect 2).

A commit fails for good when the server keeps answering 503 past the retries (the bucket keeps
the previous version) or answers 412 because another writer really won (the bucket holds the
other writer's object). Before the fix the mount went on with what it had cached for the name
before the write: the old generation in its stat cache and inode (so the next open, within the
stat TTL, read a generation that no longer exists: ESTALE, or the old bytes from the content
cache), and the kernel kept the failed writer's pages and size with keep_cache, so the next
open read back the bytes that were never committed. The stat TTL here is long (10 min) so
that nothing but the fix makes the mount ask again.
"""

import errno
import os
import random

import pytest

from tests.integration.mount import mounts_fixture, read_plain

pytestmark = pytest.mark.emulator_only

BUCKET = "failedcommit"
ARGS = ["--stat-ttl", "600", "--type-cache-ttl", "600", "--max-retries", "2",
        "--request-deadline", "30s"]
COMMIT_OPS = ("objects.insert", "objects.compose", "xml.multipart_complete",
              "objects.resumable_chunk")


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


def pattern(size, seed):
    return random.Random(seed).randbytes(size)




def failing_write(path, data, expected_errno, meanwhile=None):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, data)
        if meanwhile:
            meanwhile()
    except BaseException:
        os.close(fd)
        raise
    with pytest.raises(OSError) as error:
        os.close(fd)
    assert error.value.errno == expected_errno


@pytest.mark.parametrize("size", [3000, 300_000], ids=["small", "large"])
def test_after_losing_to_another_writer_the_next_open_reads_theirs(bucket, mount, size):
    m = mount()
    name = f"lost-race-{size}.bin"
    mine, theirs, old = pattern(size + 17, 1), pattern(size // 2 + 5, 2), pattern(size, 3)
    bucket.blob(name).upload_from_string(old)
    path = m.path / name
    assert read_plain(path) == old  # cached: stat cache, inode, content cache, page cache
    # Another writer wins, behind the mount, while this one writes (an open revalidates).
    failing_write(path, mine, errno.ESTALE,
                  lambda: bucket.blob(name).upload_from_string(theirs))
    m.expect_errors(name.replace(".", r"\."))
    assert os.stat(path).st_size == len(theirs)
    assert read_plain(path) == theirs  # before the fix: ESTALE, or the bytes of `mine`/`old`
    with open(path, "rb") as f:
        assert f.read() == theirs
    assert sorted(os.listdir(m.path)).count(name) == 1


def test_a_new_name_another_writer_created_reads_theirs(bucket, mount):
    m = mount()
    name = "new-race.bin"
    path = m.path / name
    assert not path.exists()  # a negative entry, cached for the TTL
    theirs = pattern(4000, 4)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.write(fd, pattern(9000, 5))
    bucket.blob(name).upload_from_string(theirs)
    with pytest.raises(OSError) as error:
        os.close(fd)
    assert error.value.errno == errno.ESTALE
    m.expect_errors(r"new-race\.bin")
    assert os.stat(path).st_size == len(theirs)
    assert read_plain(path) == theirs


@pytest.mark.parametrize("size", [3000, 300_000], ids=["small", "large"])
def test_after_a_commit_refused_past_the_retries_the_next_open_reads_the_previous_version(
        emulator, bucket, mount, size):
    m = mount()
    name = f"refused-{size}.bin"
    old = pattern(size, 6)
    bucket.blob(name).upload_from_string(old)
    path = m.path / name
    assert read_plain(path) == old
    emulator.config(faults=[{"kind": "503", "rate": 1, "op": op} for op in COMMIT_OPS])
    failing_write(path, pattern(size + 4096, 7), errno.EIO)
    emulator.config(faults=[])
    m.expect_errors(name.replace(".", r"\."))
    assert bucket.get_blob(name).download_as_bytes() == old
    assert os.stat(path).st_size == len(old)  # not the failed writer's size
    assert read_plain(path) == old  # before the fix: the failed writer's bytes from the pages
    with open(path, "rb") as f:
        assert f.read() == old
