"""The order-hint lookahead is bounded by the content cache: hinted objects fetched ahead of
the reader must still be cached when it gets there (1,024 objects of 1 MiB ahead would not fit
a small memory cache, and every one would be fetched twice)."""

import random
import time
from pathlib import Path

import pytest

from tests.integration.prefetch_util import status, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "lookahead"
MiB = 1024 * 1024
COUNT = 64


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    # An 8 MiB memory cache: half of it holds 4 objects of 1 MiB (the floor is 8).
    return ["--memory-cache-size", "8M", "--prefetch-lookahead", "1024"]


def body(i):
    return random.Random(i).randbytes(MiB)


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        for i in range(COUNT):
            bucket.blob(f"big/f{i:03d}").upload_from_string(body(i))
    return seed


def settled(mount, key, quiet_s=1.0):
    """The counter once it has not moved for quiet_s (the prefetcher has stopped)."""
    last, since = None, time.monotonic()
    while True:
        value = int(status(mount)[key])
        if value != last:
            last, since = value, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return value
        time.sleep(0.05)


def test_lookahead_bounded_by_the_cache(fluxfs_mount):
    names = [f"big/f{i:03d}" for i in range(COUNT)]
    random.Random(3).shuffle(names)
    with open(Path(fluxfs_mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(n + "\n" for n in names))
    # Nothing opened yet: the prefetcher stops at the lookahead the cache allows (8: the
    # floor, also the window until the first sizes are known), not at all 64.
    done = settled(fluxfs_mount, "hints_done")
    assert 0 < done <= 16, done
    # Reading in hint order moves the window; every object arrives, byte for byte.
    for name in names:
        i = int(name[-3:])
        assert (Path(fluxfs_mount.path) / name).read_bytes() == body(i)
    wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) == COUNT, "the hints to be done")
