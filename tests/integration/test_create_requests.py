"""Creating files costs one upload each (issue 11): requests counted by the emulator.

Before: a new file cost four requests (a lookup's objects.get 404 and prefix probe, the same
objects.get again from CREATE, then the upload), and the lookups ran while the kernel held the
directory's lock (an O_CREAT open holds it across LOOKUP and CREATE), so writers into one
directory waited on each other's round trips. Now absence known from a negative entry or a
cached listing is trusted for the create (a directory just made is known empty; a directory
this process creates files in is listed once and the listing keeps the files it adds), and
the commit's ifGenerationMatch=0 still catches a name that appeared meanwhile: close fails
with ESTALE and the other writer's object stays.
"""

import errno
import os
import subprocess
import threading

import pytest

pytestmark = pytest.mark.emulator_only

BUCKET = "creates"
KiB = 1024


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        bucket.blob("existing/seed.bin").upload_from_string(b"seed")
        bucket.blob("racy/seed.bin").upload_from_string(b"seed")
    return seed


def reset_stats(emulator):
    emulator._control("POST", "/_emulator/reset?stats_only=true", body={})


def requests(emulator):
    stats = emulator.stats()
    return stats["requests"], {k: v for k, v in stats["ops"].items() if v}


def test_cp_r_costs_one_upload_per_file(fluxfs_mount, emulator, gcs, tmp_path):
    count = 200
    src = tmp_path / "images"
    src.mkdir()
    for i in range(count):
        (src / f"img{i:05d}.jpg").write_bytes(os.urandom(10 * KiB))
    reset_stats(emulator)
    subprocess.run(["cp", "-r", str(src), str(fluxfs_mount.path / "copy")], check=True)
    total, ops = requests(emulator)
    assert total / count <= 2, f"{total} requests for {count} files: {ops}"
    assert ops.get("objects.insert", 0) == count + 1, ops  # the files and the directory
    bucket = gcs.bucket(BUCKET)
    for i in (0, 77, count - 1):
        name = f"img{i:05d}.jpg"
        assert bucket.blob(f"copy/{name}").download_as_bytes() == (src / name).read_bytes()
    assert sorted(os.listdir(fluxfs_mount.path / "copy")) == sorted(os.listdir(src))


def test_writers_into_one_directory_create_without_requests(fluxfs_mount, emulator, gcs):
    """16 writers create files in a directory that exists in the bucket (not listed yet): the
    first lookup probes the name, the next lists the directory once, and from then on LOOKUP
    and CREATE send nothing: no writer waits on the network under the directory's lock. The
    uploads (one each) happen at close."""
    writers, per_writer = 16, 8
    directory = fluxfs_mount.path / "existing"
    assert directory.is_dir()  # the directory's own lookup is not a create's
    reset_stats(emulator)
    handles = []
    lock = threading.Lock()

    def create(w):
        for i in range(per_writer):
            f = open(directory / f"w{w:02d}-{i:03d}.bin", "wb")
            with lock:
                handles.append((f, w, i))

    threads = [threading.Thread(target=create, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    before_close, ops = requests(emulator)
    assert len(handles) == writers * per_writer
    assert before_close <= 3, f"creates sent {before_close} requests: {ops}"
    for f, w, i in handles:
        f.write(bytes([w, i]) * 512)
        f.close()
    total, ops = requests(emulator)
    assert total / len(handles) <= 2, f"{total} requests for {len(handles)} files: {ops}"
    blob = gcs.bucket(BUCKET).blob("existing/w03-005.bin")
    assert blob.download_as_bytes() == bytes([3, 5]) * 512
    names = os.listdir(directory)
    assert len(names) == writers * per_writer + 1


def test_create_over_a_name_that_appeared_fails_estale(fluxfs_mount, emulator, gcs):
    """The listing says the name is absent; another client creates it meanwhile. The create
    trusts the listing, and the commit's precondition refuses to overwrite: close fails with
    ESTALE, the other writer's bytes stay."""
    directory = fluxfs_mount.path / "racy"
    assert os.listdir(directory) == ["seed.bin"]  # the listing is cached now
    gcs.bucket(BUCKET).blob("racy/late.bin").upload_from_string(b"theirs")
    fluxfs_mount.expect_errors(r"late\.bin")
    f = open(directory / "late.bin", "wb")
    f.write(b"mine")
    with pytest.raises(OSError) as raised:
        f.close()
    assert raised.value.errno == errno.ESTALE
    assert gcs.bucket(BUCKET).blob("racy/late.bin").download_as_bytes() == b"theirs"


def test_new_objects_get_a_content_type_from_their_extension(fluxfs_mount, gcs):
    """As gcsfuse and gcloud storage do: small files (one upload), a large one (streamed in
    parts, then completed), an empty one made by mknod; no extension stays octet-stream."""
    directory = fluxfs_mount.path / "typed"
    directory.mkdir()
    files = {"img.JPG": b"\xff\xd8" * 100, "shard-000.tar": b"t" * 2048,
             "notes.txt": b"hello\n", "blob": b"raw", "large.png": os.urandom(40 << 20)}
    for name, data in files.items():
        (directory / name).write_bytes(data)
    os.mknod(directory / "empty.json")
    expected = {"img.JPG": "image/jpeg", "shard-000.tar": "application/x-tar",
                "notes.txt": "text/plain; charset=utf-8", "blob": "application/octet-stream",
                "large.png": "image/png", "empty.json": "application/json"}
    bucket = gcs.bucket(BUCKET)
    for name, content_type in expected.items():
        blob = bucket.get_blob(f"typed/{name}")
        assert blob is not None, name
        assert blob.content_type == content_type, (name, blob.content_type)
    assert bucket.blob("typed/large.png").download_as_bytes() == files["large.png"]
