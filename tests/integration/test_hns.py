"""Hierarchical-namespace buckets (issue 21): directories are folders, and renaming one is a
single folders.rename — atomic, and independent of the number of files (Lightning and DCP save
into a temporary directory and rename it; on a flat bucket that is a copy and a delete per
object, at most --rename-dir-limit of them). rmdir removes the folder too. The mount learns
the namespace from the buckets.get it makes at mount."""

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.integration.mount import Mount, managed_mounts
from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only

JSON = {"Content-Type": "application/json"}
FILES = 1500  # beyond --rename-dir-limit (1000): a flat bucket would answer EXDEV


def http(emulator, method, path, body=None):
    req = urllib.request.Request(emulator.url + path, data=body, method=method, headers=JSON)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def folder_exists(emulator, bucket, name):
    status, _ = http(emulator, "GET",
                     f"/storage/v1/b/{bucket}/folders/{urllib.parse.quote(name, safe='')}")
    return status == 200


@pytest.fixture
def mount_bucket(emulator):
    yield from managed_mounts(
        emulator, lambda bucket, *args: Mount(emulator, bucket, args=list(args)))


def make_hns_bucket(emulator, gcs, files):
    name = unique_bucket_name("hns")
    body = {"name": name, "hierarchicalNamespace": {"enabled": True},
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}}}
    status, answer = http(emulator, "POST", "/storage/v1/b?project=p", json.dumps(body).encode())
    assert status == 200, answer
    bucket = gcs.bucket(name)
    for i in range(files):
        bucket.blob(f"ckpt.tmp/shard-{i:05d}").upload_from_string(f"shard {i}".encode())
    bucket.blob("ckpt.tmp/meta/state.json").upload_from_string(b"{}")
    return bucket


@pytest.fixture
def hns_bucket(emulator, gcs):
    return make_hns_bucket(emulator, gcs, 40)


@pytest.fixture
def large_hns_bucket(emulator, gcs):
    return make_hns_bucket(emulator, gcs, FILES)


def test_a_directory_rename_is_one_folder_rename(emulator, gcs, large_hns_bucket, mount_bucket):
    hns_bucket = large_hns_bucket
    m = mount_bucket(hns_bucket.name)
    root = Path(m.path)
    before = emulator.stats()["ops"]
    os.rename(root / "ckpt.tmp", root / "ckpt")
    after = emulator.stats()["ops"]
    # Read at FUSE INIT, which every request waits for (the log line may come after the
    # mount is visible, never after the first request is answered).
    assert "hierarchical namespace" in m.log()
    assert after["folders.rename"] - before.get("folders.rename", 0) == 1
    assert after.get("objects.copy", 0) == before.get("objects.copy", 0)
    assert after.get("objects.rewrite", 0) == before.get("objects.rewrite", 0)
    assert after.get("objects.delete", 0) == before.get("objects.delete", 0)
    names = [b.name for b in gcs.list_blobs(hns_bucket.name)]
    assert len(names) == FILES + 1 and all(n.startswith("ckpt/") for n in names)
    assert sorted(os.listdir(root)) == ["ckpt"]
    assert (root / "ckpt" / "shard-01234").read_bytes() == b"shard 1234"
    assert (root / "ckpt" / "meta" / "state.json").read_bytes() == b"{}"
    assert not (root / "ckpt.tmp").exists()
    assert folder_exists(emulator, hns_bucket.name, "ckpt/meta/")
    assert not folder_exists(emulator, hns_bucket.name, "ckpt.tmp/")


def test_a_rename_still_running_is_polled_to_its_end(emulator, gcs, hns_bucket, mount_bucket):
    """Cloud Storage answers a folder rename with an operation that is usually not done yet:
    the emulator says done=false at the start and for the first 3 operations.get; the
    rename(2) returns only once the operation is done."""
    m = mount_bucket(hns_bucket.name)
    root = Path(m.path)
    emulator.config(operation_polls=3)
    try:
        before = emulator.stats()["ops"]
        os.rename(root / "ckpt.tmp", root / "ckpt")
        after = emulator.stats()["ops"]
    finally:
        emulator.config(operation_polls=0)
    assert after["folders.rename"] - before.get("folders.rename", 0) == 1
    assert after["operations.get"] - before.get("operations.get", 0) == 4
    assert (root / "ckpt" / "shard-00007").read_bytes() == b"shard 7"
    assert not (root / "ckpt.tmp").exists()


def test_an_empty_folder_made_elsewhere_is_a_directory(emulator, gcs, hns_bucket, mount_bucket):
    """A folder with no object below it (made by gcloud or the console) lists as a
    directory: on an HNS bucket the mount's listings ask for folders as prefixes."""
    status, body = http(emulator, "POST", f"/storage/v1/b/{hns_bucket.name}/folders",
                        json.dumps({"name": "made-elsewhere/"}).encode())
    assert status == 200, body
    m = mount_bucket(hns_bucket.name)
    root = Path(m.path)
    assert sorted(os.listdir(root)) == ["ckpt.tmp", "made-elsewhere"]
    assert (root / "made-elsewhere").is_dir()
    assert os.listdir(root / "made-elsewhere") == []


def test_rename_onto_an_empty_directory_and_rmdir(emulator, gcs, hns_bucket, mount_bucket):
    m = mount_bucket(hns_bucket.name)
    root = Path(m.path)
    (root / "final").mkdir()
    assert folder_exists(emulator, hns_bucket.name, "final/")
    os.rename(root / "ckpt.tmp", root / "final")  # replaces the empty directory
    assert (root / "final" / "shard-00000").read_bytes() == b"shard 0"
    assert sorted(os.listdir(root)) == ["final"]
    (root / "empty").mkdir()
    (root / "empty").rmdir()
    assert not folder_exists(emulator, hns_bucket.name, "empty/")
    assert not (root / "empty").exists()
    with pytest.raises(OSError) as raised:
        (root / "final").rmdir()
    assert raised.value.errno == 39  # ENOTEMPTY


def test_a_flat_bucket_still_copies(emulator, gcs, mount_bucket):
    bucket = gcs.create_bucket(unique_bucket_name("flat"))
    for i in range(3):
        bucket.blob(f"a/{i}").upload_from_string(b"x")
    m = mount_bucket(bucket.name)
    before = emulator.stats()["ops"]
    os.rename(Path(m.path) / "a", Path(m.path) / "b")
    after = emulator.stats()["ops"]
    assert after.get("folders.rename", 0) == before.get("folders.rename", 0)
    assert sorted(b.name for b in gcs.list_blobs(bucket.name)) == ["b/0", "b/1", "b/2"]
    assert "hierarchical namespace" not in m.log()


def object_names(gcs, bucket):
    return sorted(b.name for b in gcs.list_blobs(bucket))


def test_mkdir_makes_a_folder_not_a_placeholder(emulator, gcs, hns_bucket, mount_bucket):
    """On an HNS bucket a directory is a folder: mkdir sends folders.insert and writes no
    object; the empty folder lists, survives a remount (nothing cached), and a nested mkdir,
    a rename and rmdir all work on folders."""
    m = mount_bucket(hns_bucket.name)
    root = Path(m.path)
    objects_before = object_names(gcs, hns_bucket.name)
    before = emulator.stats()["ops"]
    (root / "runs").mkdir()
    (root / "runs" / "a").mkdir()
    after = emulator.stats()["ops"]
    assert after["folders.insert"] - before.get("folders.insert", 0) == 2
    assert after.get("objects.insert", 0) == before.get("objects.insert", 0)
    assert object_names(gcs, hns_bucket.name) == objects_before  # no "runs/" placeholder
    assert folder_exists(emulator, hns_bucket.name, "runs/")
    assert folder_exists(emulator, hns_bucket.name, "runs/a/")
    with pytest.raises(FileExistsError):
        (root / "runs").mkdir()

    m2 = mount_bucket(hns_bucket.name)  # a second mount: what the bucket holds, no cache
    # (read once here: later changes would wait for its metadata cache to expire)
    other = Path(m2.path)
    assert sorted(os.listdir(other)) == ["ckpt.tmp", "runs"]
    assert os.listdir(other / "runs") == ["a"]
    assert (other / "runs" / "a").is_dir() and os.listdir(other / "runs" / "a") == []

    with pytest.raises(OSError) as raised:
        (root / "runs").rmdir()  # holds an empty folder, and no object
    assert raised.value.errno == 39  # ENOTEMPTY
    os.rename(root / "runs" / "a", root / "runs" / "b")
    assert folder_exists(emulator, hns_bucket.name, "runs/b/")
    assert not folder_exists(emulator, hns_bucket.name, "runs/a/")
    (root / "runs" / "b" / "f").write_bytes(b"data")
    assert hns_bucket.blob("runs/b/f").download_as_bytes() == b"data"
    (root / "runs" / "b" / "f").unlink()
    assert os.listdir(root / "runs" / "b") == []  # the folder outlives its last file
    (root / "runs" / "b").rmdir()
    (root / "runs").rmdir()
    assert not folder_exists(emulator, hns_bucket.name, "runs/")
    assert sorted(os.listdir(root)) == ["ckpt.tmp"]
    assert object_names(gcs, hns_bucket.name) == objects_before


def test_mkdir_on_a_flat_bucket_still_writes_a_placeholder(emulator, gcs, mount_bucket):
    bucket = gcs.create_bucket(unique_bucket_name("flat"))
    m = mount_bucket(bucket.name)
    before = emulator.stats()["ops"]
    (Path(m.path) / "d").mkdir()
    after = emulator.stats()["ops"]
    assert after.get("folders.insert", 0) == before.get("folders.insert", 0)
    assert object_names(gcs, bucket.name) == ["d/"]
