"""Objects that change behind the mount (uploaded or deleted with Google's client): before the
TTL the old metadata may be served, after it the new size and bytes are seen; a read returns the
bytes of one generation, never a mix."""

import os
import time

import pytest

pytestmark = pytest.mark.emulator_only

TTL_S = 1.0
V1 = bytes(range(256)) * 4            # 1024 bytes
V2 = bytes(reversed(range(256))) * 12  # 3072 bytes: another size and other bytes


@pytest.fixture(scope="module")
def mount_args():
    ttl = str(TTL_S)
    return ["--stat-ttl", ttl, "--type-ttl", ttl, "--negative-ttl", ttl, "--list-ttl", ttl,
            "--entry-timeout", ttl, "--attr-timeout", ttl]


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        for name in ("change/obj", "delete/obj", "delete/keep", "appear/old", "relisted/obj"):
            bucket.blob(name).upload_from_string(V1)
    return seed


@pytest.fixture(scope="module")
def bucket(fluxfs_mount, gcs):
    return gcs.bucket("data")


def wait_past_ttl():
    # Waiting for the configured TTL to pass: part of the behaviour under test, not a timing
    # assertion (nothing is asserted about how long anything takes).
    time.sleep(TTL_S * 1.5 + 0.2)


def test_new_version_is_seen_after_the_ttl(fluxfs_mount, bucket):
    path = fluxfs_mount.path / "change" / "obj"
    assert path.read_bytes() == V1
    assert os.stat(path).st_size == len(V1)

    bucket.blob("change/obj").upload_from_string(V2)
    # Before the TTL either version may be served, but only a whole one.
    early = path.read_bytes()
    assert early in (V1, V2), f"mixed content: {len(early)} bytes"
    assert os.stat(path).st_size in (len(V1), len(V2))

    wait_past_ttl()
    assert os.stat(path).st_size == len(V2)
    assert path.read_bytes() == V2


def test_open_file_keeps_reading_one_generation(fluxfs_mount, bucket):
    bucket.blob("change/obj").upload_from_string(V1)
    wait_past_ttl()
    path = fluxfs_mount.path / "change" / "obj"
    with open(path, "rb", buffering=0) as f:
        head = f.read(100)
        assert head == V1[:100]
        bucket.blob("change/obj").upload_from_string(V2)
        try:
            rest = f.read()
        except OSError as e:
            # The generation this handle pinned is gone: an error is acceptable, bytes of
            # another generation are not.
            assert e.errno in (5, 116), e  # EIO, ESTALE
        else:
            assert head + rest == V1
    wait_past_ttl()
    assert path.read_bytes() == V2


def test_deleted_object_disappears_after_the_ttl(fluxfs_mount, bucket):
    d = fluxfs_mount.path / "delete"
    assert sorted(os.listdir(d)) == ["keep", "obj"]
    assert (d / "obj").read_bytes() == V1
    bucket.blob("delete/obj").delete()
    wait_past_ttl()
    assert not os.path.exists(d / "obj")
    with pytest.raises(FileNotFoundError):
        open(d / "obj", "rb")
    assert os.listdir(d) == ["keep"]


def test_new_object_appears_after_the_ttl(fluxfs_mount, bucket):
    d = fluxfs_mount.path / "appear"
    assert os.listdir(d) == ["old"]
    assert not os.path.exists(d / "new")  # may now sit in the negative cache
    bucket.blob("appear/new").upload_from_string(V2)
    wait_past_ttl()
    assert sorted(os.listdir(d)) == ["new", "old"]
    assert (d / "new").read_bytes() == V2


def test_attributes_expire_a_ttl_after_they_were_read(fluxfs_mount, bucket):
    """An inode filled from a cached listing keeps the time the attributes were read: they
    expire a TTL after the listing, not a TTL after the inode was filled (which allowed up to
    twice the TTL of staleness)."""
    path = fluxfs_mount.path / "relisted" / "obj"
    assert os.listdir(path.parent) == ["obj"]  # listed: attributes read now (READDIRPLUS)
    time.sleep(TTL_S * 0.6)
    assert os.listdir(path.parent) == ["obj"]  # the cached listing fills the inode again
    bucket.blob("relisted/obj").upload_from_string(V2)
    time.sleep(TTL_S * 0.6)  # past the listing's TTL, not past the second fill
    assert path.read_bytes() == V2  # the open revalidates (it read V1's gone generation)
