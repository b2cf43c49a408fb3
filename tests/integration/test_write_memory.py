"""New files written from memory part buffers (src/io/writer.c, memory mode): sequential
writes stream as XML multipart parts of a temporary object under `.fluxfs/tmp/` that is
composed onto the name at close; reads of the unsent tail come from the buffer, anything that
touches bytes already sent spills the file to a staging file; forward seeks and truncates
within the buffer stay in memory; composite upload mode, --write-buffer-size 0 (always
staging) and a tiny shared budget (spills, no deadlock); a dup'ed descriptor's close keeps
memory mode; a failed part loses the file (EIO) and leaves nothing behind; numpy.savez (zipfile
seeks back). Every result is checked through the mount and through Google's client, and no
temporary object or multipart upload may be left behind."""

import io
import os
import re
import threading
import time
import urllib.request

import pytest

from tests.integration.mount import Mount

pytestmark = pytest.mark.emulator_only

BUCKET = "wmem"
MiB = 1024 * 1024
PART = 5 * MiB
SPILL_LINE = "memory buffers spill to a staging file"
DOWNLOAD_OPS = ("objects.download", "xml.get")
WAIT_S = 60  # a guard against a hang, not a timed assertion


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    # Debug log: the writer says when a file spills to a staging file.
    return ["--write-part-size", "5M", "--upload-cleanup-age", "0", "--max-retries", "2",
            "--request-deadline", "30s", "--log-level", "debug"]


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):  # creates the bucket; nothing else is needed
        bucket.blob("README").upload_from_string(b"memory-mode writes\n")
    return seed


@pytest.fixture(scope="module")
def bucket(gcs, fluxfs_mount):
    return gcs.bucket(BUCKET)


@pytest.fixture
def faults(emulator):
    yield emulator
    emulator.config(faults=[], deny=[])


class ExtraMount:
    """A second mount of a prefix of BUCKET with other options; checked like fluxfs_mount."""

    def __init__(self, emulator, prefix, args):
        self.prefix = prefix
        self.mount = Mount(emulator, f"{BUCKET}/{prefix}", args=args, log_level="debug")

    def close(self):
        try:
            assert self.mount.alive(), f"fluxfs died\n{self.mount.log()[-4000:]}"
            rc = self.mount.unmount()
            assert rc == 0, f"fluxfs exited with status {rc}\n{self.mount.log()[-4000:]}"
        finally:
            self.mount.close()


def extra_mount_fixture(prefix, args):
    @pytest.fixture(scope="module")
    def fixture(emulator, fluxfs_mount):
        extra = ExtraMount(emulator, prefix, args)
        try:
            yield extra
        finally:
            extra.close()
    return fixture


composite_mount = extra_mount_fixture(
    "composite", ["--write-part-size", "5M", "--upload-mode", "composite"])
staging_mount = extra_mount_fixture(
    "staging", ["--write-part-size", "5M", "--write-buffer-size", "0"])
budget_mount = extra_mount_fixture(
    "budget", ["--write-part-size", "5M", "--write-buffer-size", "5M"])


@pytest.fixture(autouse=True)
def _extra_mounts_clean(request):
    """Extra mounts used by a test must stay alive and log no unexpected ERROR line."""
    names = [n for n in ("composite_mount", "staging_mount", "budget_mount")
             if n in request.fixturenames]
    extras = [request.getfixturevalue(n) for n in names]
    for extra in extras:
        extra.mount.unexpected_errors()
    yield
    for extra in extras:
        assert extra.mount.alive(), f"fluxfs died\n{extra.mount.log()[-4000:]}"
        errors = extra.mount.unexpected_errors()
        assert errors == [], "unexpected ERROR lines:\n" + "\n".join(errors)


# ---- helpers ----

def pattern(size, seed):
    import random
    return random.Random(seed).randbytes(size)


def reset_stats(emulator):
    emulator._control("POST", "/_emulator/reset?stats_only=true", body={})


def ops(emulator):
    return emulator.stats()["ops"]


def downloads(emulator):
    stats = ops(emulator)
    return sum(stats.get(op, 0) for op in DOWNLOAD_OPS)


def temp_objects(bucket):
    return [b.name for b in bucket.list_blobs() if ".fluxfs/" in b.name]


def open_multipart_uploads(emulator):
    with urllib.request.urlopen(f"{emulator.url}/{BUCKET}?uploads", timeout=30) as reply:
        text = reply.read().decode()
    return re.findall(r"<Upload>.*?<Key>(.*?)</Key>", text, re.S)


def assert_nothing_left(emulator, bucket, timeout=WAIT_S):
    """No temporary object under any .fluxfs/ and no multipart upload open. The temporary
    object and the marker are deleted asynchronously (the release after close() waits for
    them, and FUSE sends the release after close() returns), so this polls (a guard against a
    hang: the ASan daemon beside CPU hogs took seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        temps = temp_objects(bucket)
        uploads = open_multipart_uploads(emulator)
        if (not temps and not uploads) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert temps == [], f"temporary objects left: {temps}"
    assert uploads == [], f"multipart uploads left open: {uploads}"


def spill_count(mount):
    return mount.log().count(SPILL_LINE)


def verify(path, gcs_bucket, name, data):
    """The bytes through the mount and through Google's client."""
    with open(path, "rb") as f:
        got = f.read()
    assert len(got) == len(data), (len(got), len(data))
    assert got == data
    blob = gcs_bucket.get_blob(name)
    assert blob is not None, name
    assert blob.size == len(data)
    assert blob.download_as_bytes() == data


def write_all(fd, data, offset=None, step=MiB):
    """Writes data with os.write (or os.pwrite at offset) in step-sized calls."""
    for i in range(0, len(data), step):
        chunk = data[i:i + step]
        if offset is None:
            n = os.write(fd, chunk)
        else:
            n = os.pwrite(fd, chunk, offset + i)
        assert n == len(chunk)


# ---- 1. sequential ----

@pytest.mark.parametrize("size", [5 * PART + 12345, 4 * PART])
def test_sequential_streams_parts_and_composes_once(fluxfs_mount, emulator, bucket, size):
    name = f"seq-{size}.bin"
    path = fluxfs_mount.path / name
    data = pattern(size, 1)
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    with open(path, "wb") as f:
        for i in range(0, size, MiB):
            f.write(data[i:i + MiB])
        f.flush()
        # Every full part but the last buffer goes out while the file is still open (sent
        # asynchronously: the last one may still be on its way).
        deadline = time.monotonic() + WAIT_S
        while (ops(emulator).get("xml.multipart_upload_part", 0) < (size - 1) // PART
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert ops(emulator).get("xml.multipart_upload_part", 0) == (size - 1) // PART
        assert bucket.get_blob(name) is None  # not before close
    after = ops(emulator)
    parts = -(-size // PART)
    assert after.get("xml.multipart_initiate", 0) == 1
    assert after.get("xml.multipart_upload_part", 0) == parts
    assert after.get("xml.multipart_complete", 0) == 1
    assert after.get("objects.compose", 0) == 1
    assert after.get("objects.download", 0) == 0 and after.get("xml.get", 0) == 0
    assert after.get("objects.rewrite", 0) == 0 and after.get("objects.copy", 0) == 0
    assert spill_count(fluxfs_mount) == spills
    verify(path, bucket, name, data)
    blob = bucket.get_blob(name)
    assert blob.component_count == 1  # one compose of the completed temporary object
    assert_nothing_left(emulator, bucket)


def test_small_new_file_is_one_upload(fluxfs_mount, emulator, bucket):
    data = pattern(3 * MiB + 7, 2)
    reset_stats(emulator)
    (fluxfs_mount.path / "small.bin").write_bytes(data)
    after = ops(emulator)
    assert after.get("objects.insert", 0) == 1
    assert after.get("xml.multipart_initiate", 0) == 0
    assert after.get("objects.compose", 0) == 0
    verify(fluxfs_mount.path / "small.bin", bucket, "small.bin", data)
    assert_nothing_left(emulator, bucket)


# ---- 2. reads while writing ----

def test_read_back_mid_write_tail_from_buffer_head_spills(fluxfs_mount, emulator, bucket):
    name = "readback.bin"
    path = fluxfs_mount.path / name
    first = pattern(20 * MiB, 3)
    rest = pattern(11 * MiB + 99, 4)
    with open(path, "w+b", buffering=0) as f:
        write_all(f.fileno(), first)
        spills = spill_count(fluxfs_mount)
        reset_stats(emulator)
        # Another open of the file drops the kernel's pages (no keep_cache), so the reads
        # below reach fluxfs instead of being served from the pages the writes filled. (Opened
        # through /proc/self/fd: a lookup by name of a file being written fails once the
        # stat TTL is over, a separate issue.)
        with open(f"/proc/self/fd/{f.fileno()}", "rb") as other:
            assert os.pread(other.fileno(), 4096, len(first) - 4096) == first[-4096:]
            assert os.pread(f.fileno(), 1000, len(first) - 3 * MiB) == \
                first[-3 * MiB:-3 * MiB + 1000]
            assert downloads(emulator) == 0, "a read of the unsent tail must not spill"
            assert spill_count(fluxfs_mount) == spills
            assert bucket.get_blob(name) is None
            # The head was sent as parts: reading it spills the file (fetched back).
            assert os.pread(other.fileno(), 8192, 0) == first[:8192]
            assert os.pread(f.fileno(), 4096, 7 * MiB) == first[7 * MiB:7 * MiB + 4096]
            assert downloads(emulator) >= 1
            assert spill_count(fluxfs_mount) == spills + 1
        write_all(f.fileno(), rest)
        f.seek(0)
        assert f.read() == first + rest
    verify(path, bucket, name, first + rest)
    assert_nothing_left(emulator, bucket)


# ---- 3. seeks and truncates ----

def test_seek_forward_gaps_read_as_zeros(fluxfs_mount, emulator, bucket):
    name = "gaps.bin"
    path = fluxfs_mount.path / name
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    expected = bytearray()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        # (offset, length): within the first part, across a part boundary, then gaps
        # spanning whole parts and ending exactly on a boundary.
        plan = [(0, 1 * MiB + 3), (2 * MiB, 100), (4 * MiB + 17, 2 * MiB),
                (9 * MiB, 5), (3 * PART, MiB), (6 * PART + 1, 777), (8 * PART - 10, 10),
                (8 * PART + 4096, 3 * MiB)]
        for i, (offset, length) in enumerate(plan):
            chunk = pattern(length, 100 + i)
            os.lseek(fd, offset, os.SEEK_SET)
            write_all(fd, chunk)
            if offset > len(expected):
                expected += bytes(offset - len(expected))
            expected[offset:offset + length] = chunk
    finally:
        os.close(fd)
    assert downloads(emulator) == 0
    assert spill_count(fluxfs_mount) == spills
    assert ops(emulator).get("objects.compose", 0) == 1
    verify(path, bucket, name, bytes(expected))
    assert_nothing_left(emulator, bucket)


@pytest.mark.parametrize("size", [3 * MiB, 12 * MiB + 3])
def test_rewrite_within_unsent_buffer_stays_in_memory(fluxfs_mount, emulator, bucket, size):
    """Rewrites of bytes still in the buffer (not sent): no spill, and the CRC32C sent with the
    part or the one-request upload (which the emulator verifies) covers the new bytes."""
    name = f"rewrite-{size}.bin"
    path = fluxfs_mount.path / name
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    data = bytearray(pattern(size, 16))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        buffer_start = (size - 1) // PART * PART  # what was sent ends here
        write_all(fd, bytes(data[:size - 1000]))
        for offset in (buffer_start, buffer_start + 4096 + 7, size - 1000 - 10):
            patch = pattern(10, offset)
            os.pwrite(fd, patch, offset)
            data[offset:offset + 10] = patch
        os.lseek(fd, size - 1000, os.SEEK_SET)
        write_all(fd, bytes(data[size - 1000:]))
        assert os.pread(fd, 64, buffer_start) == bytes(data[buffer_start:buffer_start + 64])
    finally:
        os.close(fd)
    assert downloads(emulator) == 0
    assert spill_count(fluxfs_mount) == spills
    verify(path, bucket, name, bytes(data))
    assert_nothing_left(emulator, bucket)


def test_truncate_within_unsent_buffer_stays_in_memory(fluxfs_mount, emulator, bucket):
    name = "trunc-mem.bin"
    path = fluxfs_mount.path / name
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    head = pattern(12 * MiB, 10)  # parts 1-2 sent, [10M, 12M) buffered
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, head)
        os.ftruncate(fd, 14 * MiB + 5)  # up, within the buffer: zeros
        assert os.fstat(fd).st_size == 14 * MiB + 5
        os.ftruncate(fd, 11 * MiB)  # down, still above what was sent
        assert os.fstat(fd).st_size == 11 * MiB
        os.ftruncate(fd, 13 * MiB)  # up again: the cut bytes must read as zeros now
        expected = bytearray(head[:11 * MiB]) + bytes(2 * MiB)
        assert os.pread(fd, 2 * MiB, 11 * MiB - MiB) == bytes(expected[10 * MiB:12 * MiB])
        os.ftruncate(fd, 10 * MiB + 1)  # down to one byte past what was sent
        del expected[10 * MiB + 1:]
        # Up across a part boundary: zeros streamed as a part.
        os.ftruncate(fd, 16 * MiB)
        expected += bytes(16 * MiB - len(expected))
        tail = pattern(3 * MiB, 11)
        os.lseek(fd, 0, os.SEEK_END)
        write_all(fd, tail)
        expected += tail
        assert downloads(emulator) == 0
        assert spill_count(fluxfs_mount) == spills
    finally:
        os.close(fd)
    assert downloads(emulator) == 0
    assert spill_count(fluxfs_mount) == spills
    verify(path, bucket, name, bytes(expected))
    assert_nothing_left(emulator, bucket)


def test_truncate_below_sent_spills(fluxfs_mount, emulator, bucket):
    name = "trunc-spill.bin"
    path = fluxfs_mount.path / name
    spills = spill_count(fluxfs_mount)
    head = pattern(17 * MiB, 12)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, head)
        reset_stats(emulator)
        os.ftruncate(fd, 7 * MiB + 3)  # below the 15 MiB sent
        assert os.fstat(fd).st_size == 7 * MiB + 3
        assert downloads(emulator) >= 1
        assert spill_count(fluxfs_mount) == spills + 1
        tail = pattern(9 * MiB, 13)
        os.lseek(fd, 0, os.SEEK_END)
        write_all(fd, tail)
        expected = head[:7 * MiB + 3] + tail
        assert os.pread(fd, 4096, 7 * MiB) == expected[7 * MiB:7 * MiB + 4096]
    finally:
        os.close(fd)
    verify(path, bucket, name, expected)
    assert_nothing_left(emulator, bucket)


def test_ftruncate_then_writes(fluxfs_mount, emulator, bucket):
    """ftruncate first (the checkpoint-preallocation pattern), then pwrite the content: the
    writes land inside what the truncate made (memory buffer or, past it, spilled)."""
    name = "prealloc.bin"
    path = fluxfs_mount.path / name
    size = 13 * MiB + 4321
    data = pattern(size, 14)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        assert os.fstat(fd).st_size == size
        write_all(fd, data, offset=0)
        assert os.fstat(fd).st_size == size
    finally:
        os.close(fd)
    verify(path, bucket, name, data)
    # ftruncate to a size within one part, then sequential writes from 0: stays in memory.
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    small = pattern(4 * MiB, 15)
    fd = os.open(fluxfs_mount.path / "prealloc-small.bin",
                 os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, len(small))
        write_all(fd, small, offset=0)
        os.ftruncate(fd, 0)  # and back to nothing, then the content again
        write_all(fd, small, offset=0)
    finally:
        os.close(fd)
    assert downloads(emulator) == 0
    assert spill_count(fluxfs_mount) == spills
    verify(fluxfs_mount.path / "prealloc-small.bin", bucket, "prealloc-small.bin", small)
    assert_nothing_left(emulator, bucket)


# ---- 4. composite ----

def test_composite_sequential_and_seek_back(composite_mount, emulator, bucket):
    mount = composite_mount.mount
    spills = spill_count(mount)
    seq = pattern(4 * PART + 999, 20)
    with open(mount.path / "seq.bin", "wb") as f:
        for i in range(0, len(seq), MiB):
            f.write(seq[i:i + MiB])
    verify(mount.path / "seq.bin", bucket, "composite/seq.bin", seq)
    assert spill_count(mount) == spills
    # Seek back below what was sent: the temporary part objects are fetched back.
    data = bytearray(pattern(13 * MiB, 21))
    patch = pattern(4096, 22)
    more = pattern(7 * MiB, 23)
    fd = os.open(mount.path / "patched.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, bytes(data))
        os.pwrite(fd, patch, 100)
        data[100:100 + len(patch)] = patch
        assert spill_count(mount) == spills + 1
        os.lseek(fd, 0, os.SEEK_END)
        write_all(fd, more)
        data += more
    finally:
        os.close(fd)
    verify(mount.path / "patched.bin", bucket, "composite/patched.bin", bytes(data))
    assert_nothing_left(emulator, bucket)


@pytest.mark.timeout(120)
def test_composite_more_than_32_parts(composite_mount, emulator, bucket):
    """34 parts: intermediate composites (temporary too) before the final compose."""
    mount = composite_mount.mount
    data = pattern(33 * PART + 4097, 24)
    spills = spill_count(mount)
    reset_stats(emulator)
    with open(mount.path / "many.bin", "wb") as f:
        for i in range(0, len(data), 4 * MiB):
            f.write(data[i:i + 4 * MiB])
    after = ops(emulator)
    assert after.get("objects.compose", 0) == 3  # 32 + 2 parts, then the two composites
    assert downloads(emulator) == 0
    verify(mount.path / "many.bin", bucket, "composite/many.bin", data)
    assert spill_count(mount) == spills
    assert_nothing_left(emulator, bucket)


# ---- 5. --write-buffer-size 0 ----

def test_write_buffer_size_zero_stages(staging_mount, emulator, bucket):
    mount = staging_mount.mount
    seq = pattern(4 * PART + 3, 30)
    with open(mount.path / "seq.bin", "wb") as f:
        for i in range(0, len(seq), MiB):
            f.write(seq[i:i + MiB])
    verify(mount.path / "seq.bin", bucket, "staging/seq.bin", seq)
    data = bytearray(pattern(12 * MiB, 31))
    fd = os.open(mount.path / "random.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, bytes(data))
        os.pwrite(fd, b"patched!", 3)
        data[3:11] = b"patched!"
        os.pwrite(fd, b"z" * 10, 14 * MiB)
        data += bytes(14 * MiB - len(data)) + b"z" * 10
        assert os.pread(fd, 20, 0) == bytes(data[:20])
    finally:
        os.close(fd)
    verify(mount.path / "random.bin", bucket, "staging/random.bin", bytes(data))
    # Nothing is ever buffered in memory, so nothing spills.
    assert spill_count(mount) == 0
    assert "memory buffers" not in mount.log()
    assert_nothing_left(emulator, bucket)


# ---- 6. shared budget ----

@pytest.mark.timeout(90)
def test_budget_two_interleaved_writers(budget_mount, emulator, bucket):
    mount = budget_mount.mount
    size = 22 * MiB + 123
    datas = {f"file{i}.bin": pattern(size, 40 + i) for i in range(2)}
    barrier = threading.Barrier(2, timeout=60)
    errors = []

    def writer(name):
        try:
            data = datas[name]
            with open(mount.path / name, "wb", buffering=0) as f:
                for i in range(0, size, MiB):
                    barrier.wait()  # lock-step: the two files' chunks interleave
                    f.write(data[i:i + MiB])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((name, e))
            barrier.abort()

    threads = [threading.Thread(target=writer, args=(name,)) for name in datas]
    for t in threads:
        t.start()
    for t in threads:
        t.join(75)
    assert not any(t.is_alive() for t in threads), "writers hung (deadlock?)"
    assert errors == []
    for name, data in datas.items():
        verify(mount.path / name, bucket, f"budget/{name}", data)
    # 5 MiB of memory for two files: at least one of them had to spill.
    assert spill_count(mount) >= 1
    assert_nothing_left(emulator, bucket)


# ---- 7. dup + close ----

def test_dup_close_commits_empty_then_memory_mode(fluxfs_mount, emulator, bucket):
    name = "dup.bin"
    path = fluxfs_mount.path / name
    data = pattern(30 * MiB, 50)
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        dup = os.dup(fd)
        os.close(dup)  # FLUSH: the empty file is committed
        empty = bucket.get_blob(name)
        assert empty is not None and empty.size == 0
        write_all(fd, data)
    finally:
        os.close(fd)
    after = ops(emulator)
    assert after.get("objects.download", 0) == 0 and after.get("xml.get", 0) == 0
    assert after.get("objects.compose", 0) == 1
    assert after.get("xml.multipart_upload_part", 0) == 6
    assert spill_count(fluxfs_mount) == spills
    verify(path, bucket, name, data)
    assert bucket.get_blob(name).generation != empty.generation
    assert_nothing_left(emulator, bucket)


# ---- 8. a failed part ----

@pytest.mark.timeout(90)
def test_failed_part_loses_the_file_and_leaves_nothing(fluxfs_mount, emulator, bucket, faults):
    fluxfs_mount.expect_errors(r"error (writer|gcs):")
    name = "doomed.bin"
    path = fluxfs_mount.path / name
    data = pattern(30 * MiB, 60)
    faults.config(faults=[{"kind": "503", "rate": 1, "op": "xml.multipart_upload_part"}])
    raised = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            write_all(fd, data)
        except OSError as e:
            raised.append(e)
        # Once a failure is known, every later write fails too.
        if raised:
            with pytest.raises(OSError):
                os.write(fd, b"more")
    finally:
        try:
            os.close(fd)
        except OSError as e:
            raised.append(e)
    assert raised, "neither a write nor close() reported the lost parts"
    assert all(e.errno == 5 for e in raised), [(e.errno, str(e)) for e in raised]
    assert faults.stats()["faults_injected"] > 0
    faults.config(faults=[])
    assert bucket.get_blob(name) is None
    assert_nothing_left(emulator, bucket)
    # (The name goes too once the file is released: test_failed_new_file_does_not_stay_visible.)
    # The mount still writes new files.
    good = pattern(12 * MiB + 5, 61)
    (fluxfs_mount.path / "after-fault.bin").write_bytes(good)
    verify(fluxfs_mount.path / "after-fault.bin", bucket, "after-fault.bin", good)
    assert_nothing_left(emulator, bucket)


def test_failed_spill_loses_the_file_and_leaves_nothing(fluxfs_mount, emulator, bucket, faults):
    """A seek-back whose fetch of the sent bytes fails: that write, later writes and close
    fail (EIO), and the temporary object is deleted anyway."""
    fluxfs_mount.expect_errors(r"error (writer|gcs):")
    name = "spill-fails.bin"
    path = fluxfs_mount.path / name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, pattern(12 * MiB, 62))
        faults.config(faults=[{"kind": "503", "rate": 1, "op": op} for op in DOWNLOAD_OPS])
        with pytest.raises(OSError) as exc:
            os.pwrite(fd, b"patch", 10)
        assert exc.value.errno == 5
        assert faults.stats()["faults_injected"] > 0
        faults.config(faults=[])
        with pytest.raises(OSError) as exc:
            os.write(fd, b"more")
        assert exc.value.errno == 5
    finally:
        with pytest.raises(OSError) as exc:
            os.close(fd)
        assert exc.value.errno == 5
    assert bucket.get_blob(name) is None
    assert_nothing_left(emulator, bucket)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op", ["xml.multipart_complete", "objects.compose"])
def test_failed_commit_leaves_nothing(fluxfs_mount, emulator, bucket, faults, op):
    """The temporary upload cannot be completed, or completed but not composed onto the
    name: close() fails, no object, the upload aborted or the temporary object deleted."""
    fluxfs_mount.expect_errors(r"error (writer|gcs):")
    name = f"commit-fails-{op}.bin"
    faults.config(faults=[{"kind": "503", "rate": 1, "op": op}])
    with pytest.raises(OSError) as exc:
        with open(fluxfs_mount.path / name, "wb") as f:
            f.write(pattern(12 * MiB, 63))
    assert exc.value.errno == 5
    assert faults.stats()["faults_injected"] > 0
    faults.config(faults=[])
    assert bucket.get_blob(name) is None
    assert_nothing_left(emulator, bucket)


def test_stream_start_failure_spills_and_the_file_still_commits(fluxfs_mount, emulator,
                                                                 bucket, faults):
    """The temporary upload cannot begin (the first part's multipart initiate fails past the
    retries): the file continues in a staging file and its close commits it."""
    fluxfs_mount.expect_errors(r"error (writer|gcs):", r"multipart_initiate")
    name = "no-initiate.bin"
    spills = spill_count(fluxfs_mount)
    reset_stats(emulator)
    faults.config(faults=[{"kind": "503", "rate": 1, "op": "xml.multipart_initiate",
                           "count": 3}])  # 1 try + 2 retries
    data = pattern(17 * MiB, 64)
    with open(fluxfs_mount.path / name, "wb") as f:
        for i in range(0, len(data), MiB):
            f.write(data[i:i + MiB])
    assert faults.stats()["faults_injected"] == 3
    faults.config(faults=[])
    assert spill_count(fluxfs_mount) == spills + 1
    verify(fluxfs_mount.path / name, bucket, name, data)
    assert_nothing_left(emulator, bucket)


# ---- more memory-mode lifecycles ----

def test_unlink_while_open_uploads_nothing(fluxfs_mount, emulator, bucket):
    name = "unlinked.bin"
    path = fluxfs_mount.path / name
    with open(path, "wb", buffering=0) as f:
        f.write(pattern(17 * MiB, 70))  # three parts sent to the temporary upload
        os.unlink(path)
        f.write(b"after unlink")
    time.sleep(0.2)
    assert bucket.get_blob(name) is None
    assert not os.path.exists(path)
    assert_nothing_left(emulator, bucket)


def test_fsync_mid_write_then_more(fluxfs_mount, emulator, bucket):
    """An fsync commits what is buffered (the object appears); later writes continue from the
    object (fetched once) and the close commits the whole file."""
    name = "fsynced.bin"
    path = fluxfs_mount.path / name
    first, second = pattern(12 * MiB + 1, 71), pattern(9 * MiB, 72)
    with open(path, "wb", buffering=0) as f:
        f.write(first)
        os.fsync(f.fileno())
        verify(path, bucket, name, first)
        assert_nothing_left(emulator, bucket)
        f.write(second)
    verify(path, bucket, name, first + second)
    assert_nothing_left(emulator, bucket)


def test_reopen_for_append_while_memory_buffered(fluxfs_mount, emulator, bucket):
    """A second write handle of the file (O_APPEND) while the first is memory-buffered: the
    appends land after the buffered bytes, still without a spill."""
    name = "two-handles.bin"
    path = fluxfs_mount.path / name
    spills = spill_count(fluxfs_mount)
    a, b, c = pattern(11 * MiB, 73), pattern(3 * MiB, 74), pattern(2 * MiB, 75)
    with open(path, "wb", buffering=0) as f:
        f.write(a)
        fd = os.open(f"/proc/self/fd/{f.fileno()}", os.O_WRONLY | os.O_APPEND)
        try:
            write_all(fd, b)
        finally:
            os.close(fd)  # its flush commits the file so far
        verify(path, bucket, name, a + b)
        f.seek(len(a) + len(b))
        f.write(c)
    verify(path, bucket, name, a + b + c)
    assert spill_count(fluxfs_mount) == spills
    assert_nothing_left(emulator, bucket)


# ---- 9. numpy.savez ----

def test_numpy_savez_seeks_back(fluxfs_mount, emulator, bucket):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2**31, size=(12 * MiB) // 8, dtype=np.int64)
    b = rng.random((12 * MiB) // 8)
    path = fluxfs_mount.path / "arrays.npz"
    spills = spill_count(fluxfs_mount)
    np.savez(path, a=a, b=b)
    assert spill_count(fluxfs_mount) == spills + 1  # the header rewrite at offset 0
    with np.load(path) as z:
        assert np.array_equal(z["a"], a)
        assert np.array_equal(z["b"], b)
    raw = bucket.blob("arrays.npz").download_as_bytes()
    assert raw == path.read_bytes()
    with np.load(io.BytesIO(raw)) as z:
        assert np.array_equal(z["a"], a)
        assert np.array_equal(z["b"], b)
    assert_nothing_left(emulator, bucket)


# ---- fs-layer behaviour of files being written (each was a bug found by these tests) ----

lookup_mount = extra_mount_fixture("lookup", ["--write-part-size", "5M", "--stat-ttl", "1"])


def test_file_being_written_found_by_name_after_the_ttl(lookup_mount):
    path = lookup_mount.mount.path / "slow-writer.bin"
    with open(path, "wb", buffering=0) as f:
        f.write(b"x" * 1000)
        assert os.stat(path).st_size == 1000
        time.sleep(2.2)  # past the 1 s stat TTL: waiting, not a timed assertion
        assert os.stat(path).st_size == 1000  # was ENOENT (so rm, open by name failed too)
        assert open(path, "rb").read() == b"x" * 1000
    assert os.stat(path).st_size == 1000  # no negative entry hides it after close


def test_failed_new_file_does_not_stay_visible(fluxfs_mount, bucket, faults):
    fluxfs_mount.expect_errors(r"error (writer|gcs):")
    path = fluxfs_mount.path / "ghost.bin"
    faults.config(faults=[{"kind": "503", "rate": 1, "op": "objects.insert"}])
    with pytest.raises(OSError):
        with open(path, "wb") as f:
            f.write(b"small: one upload at close")
    faults.config(faults=[])
    assert bucket.get_blob("ghost.bin") is None
    deadline = time.monotonic() + WAIT_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)  # the release after close() drops the open file
    assert not os.path.exists(path)


def test_futimens_while_open_shows_in_stat(fluxfs_mount, bucket):
    path = fluxfs_mount.path / "times.bin"
    with open(path, "wb") as f:
        f.write(pattern(12 * MiB, 80))
        f.flush()
        os.utime(f.fileno(), (1_000_000_000, 1_000_000_000))
    blob = bucket.get_blob("times.bin")
    assert blob.metadata["goog-reserved-file-mtime"] == "1000000000"
    assert int(os.stat(path).st_mtime) == 1_000_000_000


def test_read_after_fsync_reads_a_range(fluxfs_mount, emulator, bucket):
    path = fluxfs_mount.path / "fsync-read.bin"
    data = pattern(40 * MiB, 81)
    with open(path, "w+b", buffering=0) as f:
        f.write(data)
        os.fsync(f.fileno())
        reset_stats(emulator)
        with open(f"/proc/self/fd/{f.fileno()}", "rb") as other:  # drops the kernel's pages
            assert os.pread(other.fileno(), 4096, 0) == data[:4096]
        fetched = emulator.stats()["bytes_out"]
    verify(path, bucket, "fsync-read.bin", data)
    # The reader's first window (a read at offset 0 looks sequential), not the 40 MiB object.
    assert fetched <= 16 * MiB, f"{fetched / MiB:.0f} MiB fetched to read 4 KiB"


# ---- found by review (each failed before its fix) ----

def test_truncate_to_zero_after_a_memory_commit(fluxfs_mount, emulator, bucket):
    """fsync commits a memory-buffered file (it then has no staging file); ftruncate(0), writes
    and an O_TRUNC reopen afterwards work (they failed with EBADF) and write in memory again."""
    name = "trunc-after-commit.bin"
    path = fluxfs_mount.path / name
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"hello world")
        os.fsync(fd)
        os.ftruncate(fd, 0)
        spills = spill_count(fluxfs_mount)
        data = pattern(12 * MiB + 3, 91)
        write_all(fd, data, offset=0)
        fd2 = os.open(path, os.O_WRONLY | os.O_TRUNC)  # the shared writer truncated to 0 again
        os.close(fd2)
        write_all(fd, data, offset=0)
    finally:
        os.close(fd)
    verify(path, bucket, name, data)
    assert spill_count(fluxfs_mount) == spills
    assert_nothing_left(emulator, bucket)


@pytest.mark.parametrize("flush", ["fsync", "dup-close"])
def test_unlinked_open_file_keeps_its_content(fluxfs_mount, emulator, bucket, flush):
    """open, write, unlink, then a commit (fsync, or the close of a dup): nothing is uploaded
    and the content stays readable and writable through the open descriptor (it read back 0
    bytes before)."""
    name = f"unlinked-{flush}.bin"
    path = fluxfs_mount.path / name
    data = pattern(7 * MiB + 11, 92)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.unlink(path)
        if flush == "fsync":
            os.fsync(fd)
        else:
            os.close(os.dup(fd))
        more = pattern(MiB, 93)
        os.write(fd, more)
        with open(f"/proc/self/fd/{fd}", "rb") as other:  # reaches the daemon, not page cache
            got = other.read()
        assert got == data + more
    finally:
        os.close(fd)
    assert not path.exists()
    assert bucket.get_blob(name) is None
    assert_nothing_left(emulator, bucket)


@pytest.mark.parametrize("how", ["last-byte", "ftruncate"])
def test_write_at_the_end_first_then_fill_from_zero(fluxfs_mount, emulator, bucket, how):
    """numpy.memmap(mode='w+') writes the last byte first, then fills from 0 (and "truncate -s"
    sets the size first): the gap is not
    sent as parts of zeros and fetched back (it was: 15 parts and 5 downloads for 40 MiB); the
    file is staged at once and uploaded at close."""
    name = f"prealloc-{how}.bin"
    path = fluxfs_mount.path / name
    size = 40 * MiB
    data = bytearray(pattern(size, 94))
    reset_stats(emulator)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        if how == "last-byte":
            os.pwrite(fd, data[-1:], size - 1)
        else:
            os.ftruncate(fd, size)
        write_all(fd, bytes(data[:-1]) if how == "last-byte" else bytes(data), offset=0)
    finally:
        os.close(fd)
    stats = ops(emulator)
    assert downloads(emulator) == 0
    assert stats["xml.multipart_upload_part"] <= size // (5 * MiB) + 1, stats
    verify(path, bucket, name, bytes(data))
    assert_nothing_left(emulator, bucket)


def test_failed_small_commit_keeps_the_bytes_for_a_retry(fluxfs_mount, emulator, bucket, faults):
    """A small file's one-request upload failing at fsync leaves its bytes buffered: the close
    after the fault is gone commits them (nothing is lost, nothing half-written)."""
    fluxfs_mount.expect_errors(r"error (writer|gcs):")
    name = "retry-small.bin"
    path = fluxfs_mount.path / name
    data = pattern(3 * MiB + 5, 95)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        faults.config(faults=[{"kind": "503", "rate": 1, "op": "objects.insert"}])
        with pytest.raises(OSError):
            os.fsync(fd)
        faults.config(faults=[])
        assert bucket.get_blob(name) is None
    finally:
        os.close(fd)  # commits again, now without the fault
    verify(path, bucket, name, data)
    assert_nothing_left(emulator, bucket)


def test_create_over_a_file_being_written_after_the_ttl(lookup_mount):
    """O_EXCL create, mkdir and symlink of a name that is being written see it after the stat
    TTL too (the lookup, and create/mknod themselves, ask the file's writer, not only Cloud
    Storage, where it does not exist before its commit)."""
    path = lookup_mount.mount.path / "exclusive.bin"
    with open(path, "wb", buffering=0) as f:
        f.write(b"y" * 100)
        time.sleep(2.2)  # past the 1 s stat TTL: waiting, not a timed assertion
        with pytest.raises(FileExistsError):
            os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        with pytest.raises(FileExistsError):
            os.mkdir(path)
        with pytest.raises(FileExistsError):
            os.symlink("elsewhere", path)
    assert path.read_bytes() == b"y" * 100
