"""Many mounts, one bucket: under the emulator's rate model (a low object write rate) a hinted
epoch over a few hundred small files still reads every byte right, the mount sees and counts
the 429s, and its prefetcher lowers the share of batches it composes (composes and the deletes
of their temporaries are object writes; plain GETs are reads). Assertions are on counters and
bytes, never on timing."""

import random
from pathlib import Path

import pytest

from tests.integration.prefetch_util import reserved_objects, status, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "data"
COUNT = 480
PREFIX = "rl/"


@pytest.fixture(scope="module")
def emulator_args():
    # Two object writes a second per bucket (reads unlimited): a compose-batched epoch
    # (a compose and a delete per batch of up to 32) needs far more.
    return ["--latency-ms", "2", "--write-rate", "2",
            "--populate", f"{BUCKET}/{PREFIX}:{COUNT}:3K:7"]


@pytest.fixture(scope="module")
def mount_args():
    return ["--compose", "on", "--prefetch-lookahead", "100000"]


@pytest.fixture(scope="module")
def seed_objects():
    return None


def test_rate_limited_epoch_reads_everything_and_backs_off_compose(fluxfs_mount, gcs, emulator):
    names = [f"{PREFIX}{i:08d}" for i in range(COUNT)]
    random.Random(3).shuffle(names)
    expected = {n: gcs.bucket(BUCKET).blob(n).download_as_bytes() for n in names}
    assert all(len(b) == 3 * 1024 for b in expected.values())
    with open(Path(fluxfs_mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(n + "\n" for n in names))
    s = wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) == COUNT
                 and int(s["temps_live"]) == 0, "the rate-limited epoch to be prefetched")
    for name in names:
        data = (Path(fluxfs_mount.path) / name).read_bytes()
        assert data == expected[name], f"{name}: wrong bytes under the rate limit"
    s = status(fluxfs_mount)
    assert int(s["files_failed"]) == 0
    stats = emulator.stats()
    assert stats["rate_model"] is True
    assert stats["rate_limited_writes"] > 0, stats
    assert stats["rate_limited_reads"] == 0
    # The mount saw the 429s, counted them, and backed off compose (not concurrency: reads
    # were never refused).
    assert int(s["rate_limited_writes"]) > 0, s
    assert int(s["rate_limited_reads"]) == 0
    assert int(s["compose_share_decreases"]) > 0, s
    assert int(s["concurrency_decreases"]) == 0
    assert int(s["direct_gets"]) > 0, s
    assert reserved_objects(gcs, BUCKET) == []
