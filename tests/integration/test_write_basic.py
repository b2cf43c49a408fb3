"""Writes through the mount: new files small and streamed (multipart parts while writing),
overwrites, random writes, appends, truncates, renames, directories, symlinks, utimens, unlink,
concurrent writers; every result checked through the mount and through Google's client."""

import os
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.integration.mount import Mount

BUCKET = "wbasic"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    # Small parts so a 40 MiB file streams in several parts; short TTLs so checks hit GCS.
    return ["--write-part-size", "5M", "--write-small-threshold", "6M", "--stat-ttl", "1",
            "--upload-cleanup-age", "0"]


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        bucket.blob("seed/existing.bin").upload_from_string(b"0123456789" * 1000)
        far = bucket.blob("seed/far-future")
        far.metadata = {"goog-reserved-file-mtime": "13569465600"}  # 2400-01-01
        far.upload_from_string(b"o")
    return seed


def blob_bytes(gcs, name):
    return gcs.bucket(BUCKET).blob(name).download_as_bytes()


def pattern(size, seed):
    return random.Random(seed).randbytes(size)


def test_small_file_appears_at_close(fluxfs_mount, gcs, emulator):
    path = fluxfs_mount.path / "small.txt"
    with open(path, "wb") as f:
        f.write(b"hello ")
        f.write(b"world")
        assert gcs.bucket(BUCKET).get_blob("small.txt") is None  # not before close
    assert blob_bytes(gcs, "small.txt") == b"hello world"
    assert path.read_bytes() == b"hello world"
    assert os.stat(path).st_size == 11


def test_empty_file(fluxfs_mount, gcs):
    (fluxfs_mount.path / "empty").touch()
    assert blob_bytes(gcs, "empty") == b""
    assert os.stat(fluxfs_mount.path / "empty").st_size == 0


def test_large_file_streams_in_parts(fluxfs_mount, gcs, emulator):
    data = pattern(40 * MiB + 12345, 1)
    before = emulator.stats()["ops"]
    with open(fluxfs_mount.path / "big.bin", "wb") as f:
        for i in range(0, len(data), 1 * MiB):
            f.write(data[i:i + 1 * MiB])
        # Parts go out while the file is still open (they are sent asynchronously: waited
        # for, so a slow daemon, e.g. the sanitized build, is not a failure).
        def parts_sent():
            return emulator.stats()["ops"].get("xml.multipart_upload_part", 0) - before.get(
                "xml.multipart_upload_part", 0)
        deadline = time.monotonic() + 60
        while parts_sent() < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert parts_sent() >= 5
        assert gcs.bucket(BUCKET).get_blob("big.bin") is None
    after = emulator.stats()["ops"]
    assert after["xml.multipart_complete"] - before.get("xml.multipart_complete", 0) == 1
    blob = gcs.bucket(BUCKET).get_blob("big.bin")
    assert blob.size == len(data)
    assert blob_bytes(gcs, "big.bin") == data
    assert (fluxfs_mount.path / "big.bin").read_bytes() == data
    # The crash marker of the upload is gone, and no upload is left open.
    assert list(gcs.list_blobs(BUCKET, prefix=".fluxfs/")) == []


def test_read_while_writing_sees_written_bytes(fluxfs_mount):
    path = fluxfs_mount.path / "rw.bin"
    data = pattern(12 * MiB, 2)
    with open(path, "wb") as writer:
        writer.write(data)
        writer.flush()
        with open(path, "rb") as reader:  # another handle of the same inode
            assert reader.read() == data
        assert os.stat(path).st_size == len(data)
    assert path.read_bytes() == data


def test_file_being_written_stays_visible_past_the_stat_ttl(fluxfs_mount, gcs):
    """The object does not exist until close, yet the name, size and bytes of an open file
    must stay visible after the stat TTL (1 s here) has expired and the kernel's dentries and
    inodes were dropped: listing and lookup come from fluxfs, not from a stale cache."""
    os.mkdir(fluxfs_mount.path / "vis")
    path = fluxfs_mount.path / "vis" / "open.bin"
    data = pattern(12 * MiB, 9)  # streams (5 MiB parts): parts are out, no object yet
    with open(path, "wb") as writer:
        writer.write(data)
        writer.flush()
        time.sleep(2.5)  # past the stat TTL: waiting, not a timed assertion
        try:
            Path("/proc/sys/vm/drop_caches").write_text("2\n")
        except OSError:
            pass
        assert gcs.bucket(BUCKET).get_blob("vis/open.bin") is None
        assert os.listdir(fluxfs_mount.path / "vis") == ["open.bin"]
        assert os.stat(path).st_size == len(data)
        with open(path, "rb") as reader:
            assert reader.read() == data
    assert blob_bytes(gcs, "vis/open.bin") == data
    os.rename(path, fluxfs_mount.path / "vis" / "done.bin")
    assert os.listdir(fluxfs_mount.path / "vis") == ["done.bin"]
    assert gcs.bucket(BUCKET).get_blob("vis/open.bin") is None


def test_random_writes(fluxfs_mount, gcs):
    path = fluxfs_mount.path / "random.bin"
    size = 20 * MiB
    expected = bytearray(size)
    rng = random.Random(7)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        for _ in range(200):
            off = rng.randrange(0, size - 4096)
            chunk = rng.randbytes(rng.randrange(1, 4096))
            os.pwrite(fd, chunk, off)
            expected[off:off + len(chunk)] = chunk
        assert os.pread(fd, size, 0) == bytes(expected)
    finally:
        os.close(fd)
    assert blob_bytes(gcs, "random.bin") == bytes(expected)
    assert path.read_bytes() == bytes(expected)


def test_seek_back_after_parts_were_sent(fluxfs_mount, gcs):
    path = fluxfs_mount.path / "seekback.bin"
    data = bytearray(pattern(30 * MiB, 3))
    with open(path, "wb") as f:
        f.write(data)
        f.seek(100)
        f.write(b"HEADER")  # below what was already uploaded: falls back to staging
    data[100:106] = b"HEADER"
    assert blob_bytes(gcs, "seekback.bin") == bytes(data)
    assert list(gcs.list_blobs(BUCKET, prefix=".fluxfs/")) == []


def test_overwrite_append_truncate_existing(fluxfs_mount, gcs):
    path = fluxfs_mount.path / "seed" / "existing.bin"
    original = b"0123456789" * 1000
    assert path.read_bytes() == original
    with open(path, "ab") as f:
        f.write(b"APPENDED")
    assert blob_bytes(gcs, "seed/existing.bin") == original + b"APPENDED"
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(b"EDIT")
    edited = original[:5] + b"EDIT" + original[9:] + b"APPENDED"
    assert blob_bytes(gcs, "seed/existing.bin") == edited
    os.truncate(path, 50)
    assert blob_bytes(gcs, "seed/existing.bin") == edited[:50]
    os.truncate(path, 100)  # grow: zeros
    assert blob_bytes(gcs, "seed/existing.bin") == edited[:50] + bytes(50)
    assert path.read_bytes() == edited[:50] + bytes(50)
    with open(path, "wb") as f:
        f.write(b"replaced")
    assert blob_bytes(gcs, "seed/existing.bin") == b"replaced"
    assert path.read_bytes() == b"replaced"


def test_fsync_commits_and_file_stays_writable(fluxfs_mount, gcs):
    path = fluxfs_mount.path / "fsync.bin"
    with open(path, "wb") as f:
        f.write(b"first")
        f.flush()
        os.fsync(f.fileno())
        first = gcs.bucket(BUCKET).get_blob("fsync.bin")
        assert first.download_as_bytes() == b"first"
        f.write(b" second")
    blob = gcs.bucket(BUCKET).get_blob("fsync.bin")
    assert blob.download_as_bytes() == b"first second"
    assert blob.generation != first.generation


def test_rename_file_and_replace_target(fluxfs_mount, gcs):
    root = fluxfs_mount.path
    (root / "a.tmp").write_bytes(b"AAA")
    (root / "b").write_bytes(b"old B")
    os.rename(root / "a.tmp", root / "b")
    assert (root / "b").read_bytes() == b"AAA"
    assert not (root / "a.tmp").exists()
    assert blob_bytes(gcs, "b") == b"AAA"
    assert gcs.bucket(BUCKET).get_blob("a.tmp") is None
    os.rename(root / "b", root / "c")
    assert (root / "c").read_bytes() == b"AAA"
    assert sorted(p.name for p in root.iterdir() if p.name in ("b", "c")) == ["c"]


def test_directories(fluxfs_mount, gcs):
    root = fluxfs_mount.path
    os.mkdir(root / "d1")
    assert gcs.bucket(BUCKET).get_blob("d1/") is not None
    assert (root / "d1").is_dir()
    with pytest.raises(FileExistsError):
        os.mkdir(root / "d1")
    (root / "d1" / "x").write_bytes(b"x")
    os.mkdir(root / "d1" / "sub")
    (root / "d1" / "sub" / "y").write_bytes(b"y")
    with pytest.raises(OSError) as exc:
        os.rmdir(root / "d1")
    assert exc.value.errno == 39  # ENOTEMPTY
    os.rename(root / "d1", root / "d2")
    assert sorted(os.listdir(root / "d2")) == ["sub", "x"]
    assert (root / "d2" / "sub" / "y").read_bytes() == b"y"
    assert not (root / "d1").exists()
    names = sorted(b.name for b in gcs.list_blobs(BUCKET, prefix="d2/"))
    assert names == ["d2/", "d2/sub/", "d2/sub/y", "d2/x"]
    assert list(gcs.list_blobs(BUCKET, prefix="d1/")) == []
    os.unlink(root / "d2" / "sub" / "y")
    os.rmdir(root / "d2" / "sub")
    os.unlink(root / "d2" / "x")
    os.rmdir(root / "d2")
    assert list(gcs.list_blobs(BUCKET, prefix="d2/")) == []
    assert not (root / "d2").exists()


def test_symlink_uses_gcsfuse_metadata(fluxfs_mount, gcs):
    root = fluxfs_mount.path
    os.symlink("small.txt", root / "link")
    assert os.readlink(root / "link") == "small.txt"
    blob = gcs.bucket(BUCKET).get_blob("link")
    assert blob.metadata["gcsfuse_symlink_target"] == "small.txt"


def test_utimens_and_chmod(fluxfs_mount, gcs):
    path = fluxfs_mount.path / "times"
    path.write_bytes(b"t")
    os.utime(path, (1_600_000_000, 1_600_000_000))
    blob = gcs.bucket(BUCKET).get_blob("times")
    assert blob.metadata["goog-reserved-file-mtime"] == "1600000000"
    assert int(os.stat(path).st_mtime) == 1_600_000_000
    os.chmod(path, 0o600)  # accepted, changes nothing (default policy)
    os.chown(path, os.getuid(), os.getgid())


# 2262-04-11T23:47:15Z: the last whole second int64 nanoseconds hold (include/fluxfs/timens.h).
LAST_NS_SECOND = 2**63 // 10**9 - 1


def test_times_past_2262_are_clamped(fluxfs_mount, gcs):
    """touch -d 2400-01-01 stored a wrapped, negative mtime (signed overflow; issue 15, defect
    4): a time beyond int64 nanoseconds is clamped to the last second they hold, on the object
    and in stat; one before 1970 keeps its fraction (tv_nsec is never negative)."""
    path = fluxfs_mount.path / "far-future"
    path.write_bytes(b"f")
    subprocess.run(["touch", "-m", "-d", "2400-01-01T00:00:00Z", str(path)], check=True)
    blob = gcs.bucket(BUCKET).get_blob("far-future")
    assert blob.metadata["goog-reserved-file-mtime"] == str(LAST_NS_SECOND)
    assert int(os.stat(path).st_mtime) == LAST_NS_SECOND
    # Written by another tool (gcsfuse stores seconds; see seed_objects): clamped, not wrapped.
    assert int(os.stat(fluxfs_mount.path / "seed" / "far-future").st_mtime) == LAST_NS_SECOND
    past = fluxfs_mount.path / "before-1970"
    past.write_bytes(b"p")
    os.utime(past, ns=(-1_500_000_000, -1_500_000_000))
    # Nanoseconds kept (gcsfuse_mtime, RFC 3339, issue 16); the seconds key rounds down.
    assert os.stat(past).st_mtime_ns == -1_500_000_000
    assert gcs.bucket(BUCKET).get_blob("before-1970").metadata == {
        "goog-reserved-file-mtime": "-2", "gcsfuse_mtime": "1969-12-31T23:59:58.5Z"}


def test_unlink(fluxfs_mount, gcs):
    path = fluxfs_mount.path / "gone"
    path.write_bytes(b"bye")
    os.unlink(path)
    assert not path.exists()
    assert gcs.bucket(BUCKET).get_blob("gone") is None
    with pytest.raises(FileNotFoundError):
        os.unlink(path)


def test_concurrent_writers_to_different_files(fluxfs_mount, gcs):
    datas = {f"conc/{i}.bin": pattern((i + 1) * 3 * MiB + i, 100 + i) for i in range(6)}
    (fluxfs_mount.path / "conc").mkdir()
    errors = []

    def write(name, data):
        try:
            with open(fluxfs_mount.path / name, "wb") as f:
                for j in range(0, len(data), 256 * 1024):
                    f.write(data[j:j + 256 * 1024])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=item) for item in datas.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for name, data in datas.items():
        assert blob_bytes(gcs, name) == data, name


@pytest.mark.parametrize("mode", ["composite", "resumable"])
def test_other_upload_modes(emulator, gcs, fluxfs_mount, mode):
    data = pattern(23 * MiB + 7, 9)
    other = Mount(emulator, BUCKET, args=["--upload-mode", mode, "--write-part-size", "5M",
                                          "--write-small-threshold", "6M"])
    try:
        with open(other.path / f"mode-{mode}.bin", "wb") as f:
            for j in range(0, len(data), MiB):
                f.write(data[j:j + MiB])
        assert blob_bytes(gcs, f"mode-{mode}.bin") == data
        assert list(gcs.list_blobs(BUCKET, prefix=".fluxfs/")) == []
        assert other.unexpected_errors() == []
    finally:
        other.unmount()
        other.close()
