"""Writes under failure: 503s during uploads (on a fixed schedule) still commit correct objects; a
permanent failure makes close() fail and leaves no object, no multipart upload and no temporary
parts; two mounts writing one object: one wins, the other's close fails, no mixed bytes;
kill -9 mid-upload keeps the previous version and the next mount cleans up."""

import os
import random
import time

import pytest

from tests.integration.mount import Mount

pytestmark = pytest.mark.emulator_only

BUCKET = "wfaults"
MiB = 1024 * 1024
UPLOAD_OPS = ["xml.multipart_upload_part", "xml.multipart_initiate", "xml.multipart_complete",
              "objects.insert"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    return ["--write-part-size", "5M", "--write-small-threshold", "6M", "--max-retries", "4",
            "--request-deadline", "60s", "--upload-cleanup-age", "0", "--stat-ttl", "0"]


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        bucket.blob("keep.bin").upload_from_string(b"previous version" * 1000)
    return seed


@pytest.fixture
def faults(emulator):
    yield emulator
    emulator.config(faults=[], deny=[])


def pattern(size, seed):
    return random.Random(seed).randbytes(size)


def open_uploads(gcs_client_bucket):
    return list(gcs_client_bucket.list_blobs(prefix=".fluxfs/"))


def write_file(path, data, step=MiB):
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])


def test_503s_during_uploads_still_commit(fluxfs_mount, gcs, faults):
    # 503s on a fixed schedule that no call can outlast with its 4 retries (a random 5% is a
    # lottery, and could also inject nothing: about 1 run in 25 over these ~60 upload
    # requests). XML requests name their object: one fault each at most. The one-shot inserts
    # (uploadType=multipart) carry their names in their bodies and share one key: 3 faults in
    # all. 36 inserts (one in 10 fails: 3), 26 parts (2), 3 initiates and 3 completes (one in 2,
    # no object twice: 2 each).
    faults.config(faults=[
        {"kind": "503", "op": "objects.insert", "every": 10, "per_object": 3},
        {"kind": "503", "op": "xml.multipart_upload_part", "every": 10, "per_object": 1},
        {"kind": "503", "op": "xml.multipart_initiate", "every": 2, "per_object": 1},
        {"kind": "503", "op": "xml.multipart_complete", "every": 2, "per_object": 1}])
    before = faults.stats()["faults_injected"]
    sizes = [100 + i for i in range(30)] + [3 * MiB, 27 * MiB + 5, 41 * MiB, 52 * MiB]
    datas = {f"flaky/{i}.bin": pattern(size, i) for i, size in enumerate(sizes)}
    (fluxfs_mount.path / "flaky").mkdir(exist_ok=True)
    for name, data in datas.items():
        write_file(fluxfs_mount.path / name, data)
    faults.config(faults=[])
    injected = faults.stats()["faults_injected"] - before
    for name, data in datas.items():
        assert gcs.bucket(BUCKET).blob(name).download_as_bytes() == data, name
    assert injected >= 3 + 2 + 2 + 2, injected
    assert open_uploads(gcs.bucket(BUCKET)) == []


@pytest.mark.parametrize("size", [2 * MiB, 30 * MiB])
def test_permanent_failure_fails_close_and_leaves_nothing(fluxfs_mount, gcs, faults, size):
    fluxfs_mount.expect_errors(r"error (writer|gcs):")
    name = f"doomed-{size}.bin"
    faults.config(faults=[{"kind": "503", "rate": 1, "op": op} for op in UPLOAD_OPS
                          if op != "xml.multipart_initiate"])
    with pytest.raises(OSError) as exc:
        write_file(fluxfs_mount.path / name, pattern(size, 5))
    assert exc.value.errno in (5, 2)  # EIO (ENOENT: the upload vanished under the faults)
    faults.config(faults=[])
    assert gcs.bucket(BUCKET).get_blob(name) is None
    assert open_uploads(gcs.bucket(BUCKET)) == []
    uploads = faults._control("GET", "/_emulator/stats")  # stats still answer
    assert uploads is not None
    listing = list(gcs.bucket(BUCKET).list_blobs(prefix=name))
    assert listing == []


def test_two_mounts_one_object_one_wins(emulator, gcs, fluxfs_mount):
    fluxfs_mount.expect_errors(r"error writer: commit of .*race|another writer")
    other = Mount(emulator, BUCKET, args=["--write-part-size", "5M"])
    try:
        a_data, b_data = pattern(12 * MiB, 10), pattern(12 * MiB, 11)
        fa = open(fluxfs_mount.path / "contended.bin", "wb")
        fb = open(other.path / "contended.bin", "wb")
        fa.write(a_data)
        fb.write(b_data)
        fa.close()  # first commit wins (ifGenerationMatch=0)
        with pytest.raises(OSError) as exc:
            fb.close()
        assert exc.value.errno == 116  # ESTALE: lost the race
        assert gcs.bucket(BUCKET).blob("contended.bin").download_as_bytes() == a_data
        other.expect_errors(r"another writer changed the object|HTTP 412")
        assert other.unexpected_errors() == []
    finally:
        other.unmount()
        other.close()


def test_kill_9_mid_upload_keeps_previous_version_and_next_mount_cleans(emulator, gcs,
                                                                        fluxfs_mount):
    bucket = gcs.bucket(BUCKET)
    before = bucket.get_blob("keep.bin")
    victim = Mount(emulator, BUCKET, args=["--write-part-size", "5M"])
    try:
        f = open(victim.path / "keep.bin", "wb")
        f.write(pattern(40 * MiB, 12))  # parts are uploaded while the file is open
        f.flush()
        deadline = time.monotonic() + 30
        while not open_uploads(bucket) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_uploads(bucket), "the upload's marker should exist while writing"
        victim.kill_daemon()  # the supervisor and the serving process: nothing commits
        try:
            f.close()
        except OSError:
            pass
    finally:
        victim.close()
    after = bucket.get_blob("keep.bin")
    assert after.generation == before.generation
    assert after.download_as_bytes() == b"previous version" * 1000
    # The next mount (cleanup age 0) removes the marker and aborts the upload.
    cleaner = Mount(emulator, BUCKET, args=["--upload-cleanup-age", "0"])
    try:
        assert open_uploads(bucket) == []
        assert "removed" in cleaner.log()
    finally:
        cleaner.unmount()
        cleaner.close()
