"""The disk content cache on a filesystem smaller than --cache-size (issue 22, item 12): a
20 MiB tmpfs holds the cache while more than twice that is read through the mount. The cache
must keep caching (evicting its least recently used files for room, since --cache-size is never
reached), log no storm of ENOSPC warnings, and every byte read must stay correct.

Needs root (mounts a tmpfs); skipped otherwise."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.prefetch_util import mounts_fixture, status, wait_for
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "cfull"
SEED = 23
SMALL_COUNT = 48
SMALL_SIZE = 1 << 20          # whole-object (small) path: 48 MiB in all
LARGE_COUNT = 4
LARGE_SIZE = 6 << 20          # large-object fill path: 24 MiB in all
TMPFS_BYTES = 20 << 20

mounts = mounts_fixture(BUCKET)


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/s/:{SMALL_COUNT}:{SMALL_SIZE}:{SEED}",
            "--populate", f"{BUCKET}/l/:{LARGE_COUNT}:{LARGE_SIZE}:{SEED}"]


@pytest.fixture(scope="module")
def generations(emulator, gcs):
    return {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs()}


@pytest.fixture
def small_fs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    target = tmp_path / "small"
    target.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs",
                             str(target)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.strip()}")
    yield target
    subprocess.run(["umount", "-l", str(target)], check=False)


def downloads(emulator):
    return emulator.stats()["ops"].get("objects.download", 0)


def read_and_check(mount, generations, name, size):
    data = (Path(mount.path) / name).read_bytes()
    assert len(data) == size
    bad = first_mismatch(name, generations[name], SEED, 0, data)
    assert bad is None, f"{name}: wrong byte at {bad}"


def cache_files(cache):
    return [f for f in (cache / "fluxfs-content-v1").iterdir() if not f.name.startswith("tmp-")]


def no_space_lines(mount):
    return [line for line in mount.log().splitlines()
            if "No space left" in line or "ENOSPC" in line]


def test_cache_keeps_caching_on_a_full_filesystem(mounts, emulator, generations, small_fs):
    cache = small_fs / "cache"
    m = mounts("--cache-dir", str(cache), "--cache-size", "10G", "--memory-cache-size", "0",
               "--compose", "off")
    # Other data take part of the filesystem after the mount started: the bound the cache
    # took from the free space at start is too high now, so writes must look again.
    (small_fs / "other-data").write_bytes(b"x" * (6 << 20))
    smalls = [f"s/{i:08d}" for i in range(SMALL_COUNT)]
    for name in smalls:
        read_and_check(m, generations, name, SMALL_SIZE)
    s = status(m)
    # More than the filesystem holds went through: the cache evicted to make room.
    assert int(s["cache_evictions"]) > 0, s
    assert int(s["cache_disk_bytes"]) <= TMPFS_BYTES - (6 << 20), s
    # It kept caching to the end: the last files read are in the cache.
    entries = int(s["cache_disk_entries"])
    assert entries >= 8, s
    before = downloads(emulator)
    for name in smalls[-4:]:
        read_and_check(m, generations, name, SMALL_SIZE)
    assert downloads(emulator) == before, "recently read files were not cached"

    # Large objects (stored as they are read) also find room, evicting the small ones.
    larges = [f"l/{i:08d}" for i in range(LARGE_COUNT)]
    for name in larges:
        read_and_check(m, generations, name, LARGE_SIZE)
    # A fill is committed after the READ that completes it was answered (fs_read replies, then
    # writes the bytes to the cache file): the last one may land after read_bytes() returned.
    wait_for(m, lambda s: int(s["cache_large_fills"]) == LARGE_COUNT, "the large objects' fills")
    before = downloads(emulator)
    read_and_check(m, generations, larges[-1], LARGE_SIZE)
    assert downloads(emulator) == before, "the last large object read was not cached"

    assert no_space_lines(m) == [], "\n".join(no_space_lines(m)[:10])
    on_disk = sum(f.stat().st_size for f in cache_files(cache))
    assert on_disk <= TMPFS_BYTES
    assert m.unmount() == 0
