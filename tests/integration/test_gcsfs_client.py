"""gcsfs (fsspec's Cloud Storage filesystem, which Hugging Face datasets and pandas use) against
the emulator, beside a fluxfs mount of the same bucket: what one writes, the other lists and
reads byte for byte.

gcsfs 2025.x and later import ExtendedGcsFileSystem by default, which asks the gRPC Storage
Control API for the bucket's layout before calls; the emulator speaks no gRPC, so each call
waited out a 60 s gRPC deadline and then fell back (the failure is not cached). The setting that
avoids it is GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false, read when gcsfs is imported
(docs/development.md, "Other clients against the emulator"). This module sets it before the
import and checks that the plain GCSFileSystem is what fsspec hands out, so no call can wait.
"""

import hashlib
import os

import pytest

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

fsspec = pytest.importorskip("fsspec")
gcsfs = pytest.importorskip("gcsfs")

from tests.lib.emulator import unique_bucket_name  # noqa: E402

BUCKET = unique_bucket_name("gcsfs")
# Every read by the mount asks the server: another client changes the bucket under it.
ARGS = ["--stat-ttl", "0", "--type-ttl", "0", "--negative-ttl", "0", "--list-ttl", "0"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    return ARGS


@pytest.fixture(scope="module")
def seed_objects():
    return lambda bucket: None  # the fixture creates the bucket; gcsfs writes the objects


@pytest.fixture(scope="module")
def fs(emulator):
    if not emulator.is_emulator:
        pytest.skip("needs gcs-emulator")
    fs = fsspec.filesystem("gs", endpoint_url=emulator.url, token="anon",
                           skip_instance_cache=True, use_listings_cache=False)
    # The plain client: no gRPC bucket-type probe (the 60 s wait) on any call.
    assert type(fs) is gcsfs.core.GCSFileSystem
    return fs


def payload(name: str, size: int) -> bytes:
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def mount_tree(root) -> dict:
    """Every file under the mount: relative name -> bytes."""
    tree = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                tree[os.path.relpath(path, root)] = fh.read()
    return tree


def gcsfs_tree(fs, prefix="") -> dict:
    """Every object under the prefix but the mount's directory placeholders ("d/", empty)."""
    names = fs.find(f"{BUCKET}/{prefix}")
    return {n[len(BUCKET) + 1:]: fs.cat_file(n) for n in names if not n.endswith("/")}


GCSFS_FILES = {
    "from-gcsfs/empty": 0,
    "from-gcsfs/small.txt": 1000,
    "from-gcsfs/deep/a/b/c.bin": 70_000,
    "from-gcsfs/big.bin": 3 * 1024 * 1024 + 17,  # several resumable chunks
}


def test_gcsfs_writes_the_mount_reads(fs, fluxfs_mount):
    for name, size in GCSFS_FILES.items():
        data = payload(name, size)
        if size > 1024 * 1024:
            with fs.open(f"{BUCKET}/{name}", "wb", block_size=256 * 1024) as f:
                for at in range(0, size, 100_000):
                    f.write(data[at:at + 100_000])
        else:
            fs.pipe_file(f"{BUCKET}/{name}", data)
    expected = {name: payload(name, size) for name, size in GCSFS_FILES.items()}
    assert gcsfs_tree(fs, "from-gcsfs/") == expected
    seen = mount_tree(fluxfs_mount.path / "from-gcsfs")
    assert {"from-gcsfs/" + k: v for k, v in seen.items()} == expected
    # Directory listings agree too, level by level.
    assert sorted(os.listdir(fluxfs_mount.path / "from-gcsfs")) == sorted(
        p.rsplit("/", 1)[1] for p in fs.ls(f"{BUCKET}/from-gcsfs"))
    for name, size in GCSFS_FILES.items():
        assert os.stat(fluxfs_mount.path / name).st_size == size
        assert fs.info(f"{BUCKET}/{name}")["size"] == size


def test_the_mount_writes_gcsfs_reads(fs, fluxfs_mount):
    files = {"from-mount/one.txt": 12_345, "from-mount/sub/two.bin": 2 * 1024 * 1024 + 3,
             "from-mount/sub/empty": 0}
    for name, size in files.items():
        path = fluxfs_mount.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(payload(name, size))
    expected = {name: payload(name, size) for name, size in files.items()}
    assert gcsfs_tree(fs, "from-mount/") == expected
    assert {"from-mount/" + k: v
            for k, v in mount_tree(fluxfs_mount.path / "from-mount").items()} == expected
    # Ranged reads through gcsfs match the mount's bytes at the same offsets.
    name = "from-mount/sub/two.bin"
    with open(fluxfs_mount.path / name, "rb") as f:
        f.seek(1_000_000)
        local = f.read(300_000)
    assert fs.cat_file(f"{BUCKET}/{name}", start=1_000_000, end=1_300_000) == local


def test_gcsfs_overwrite_and_delete_show_in_the_mount(fs, fluxfs_mount):
    name = "changes/f.txt"
    fs.pipe_file(f"{BUCKET}/{name}", b"first version")
    assert (fluxfs_mount.path / name).read_bytes() == b"first version"
    fs.pipe_file(f"{BUCKET}/{name}", b"the second, longer version")
    assert (fluxfs_mount.path / name).read_bytes() == b"the second, longer version"
    fs.rm(f"{BUCKET}/{name}")
    assert not (fluxfs_mount.path / name).exists()
    # (changes/ held only that object, so it is gone too.) The other way: a file removed
    # through the mount is gone for gcsfs.
    (fluxfs_mount.path / "back").mkdir()
    (fluxfs_mount.path / "back" / "g.txt").write_bytes(b"g")
    assert fs.cat_file(f"{BUCKET}/back/g.txt") == b"g"
    os.unlink(fluxfs_mount.path / "back" / "g.txt")
    assert not fs.exists(f"{BUCKET}/back/g.txt")
