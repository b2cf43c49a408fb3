"""Many mounts, one bucket: under the emulator's rate model (a very low object write rate) a
hinted epoch over a few hundred small files still reads every byte right, leaves no compose
temporary behind and logs no error; the mount counts every 429 the bucket sent, and lowers its
compose share when a compose is refused.

No assertion depends on timing. The write rate (one write per 4 s, a bucket of one token) makes
429s certain rather than likely: an epoch with none would compose every batch of 32 (15
composes and 15 deletes, 4 s apart: about 2 minutes) and fail the 60 s wait on its own."""

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
    # A quarter of an object write a second per bucket (reads unlimited).
    return ["--latency-ms", "2", "--write-rate", "0.25",
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
    wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) == COUNT
             and int(s["temps_live"]) == 0, "the rate-limited epoch to be prefetched")
    for name in names:
        data = (Path(fluxfs_mount.path) / name).read_bytes()
        assert data == expected[name], f"{name}: wrong bytes under the rate limit"
    s = status(fluxfs_mount)
    stats = emulator.stats()
    assert stats["rate_model"] is True
    assert int(s["files_failed"]) == 0
    # Nothing left behind: every temporary made was deleted (some only after the bucket
    # refused their deletes), none is in the bucket.
    assert reserved_objects(gcs, BUCKET) == []
    assert int(s["temps_deleted"]) == int(s["composes"]) - int(s["compose_failures"]), s
    # The bucket refused writes, and the mount saw and counted every refusal; reads were
    # never refused, so the prefetch concurrency was never lowered.
    refused = stats["rate_limited_writes"] + stats["rate_limited_object_writes"]
    assert refused > 0, stats
    assert int(s["rate_limited_writes"]) == refused, (s, stats)
    assert stats["rate_limited_reads"] == 0
    assert int(s["rate_limited_reads"]) == 0
    assert int(s["concurrency_decreases"]) == 0
    # A compose the bucket refused was not retried: its batch came by plain GETs, and the
    # share of batches composed was lowered.
    assert int(s["compose_failures"]) == int(s["composes_throttled"]), s
    if int(s["composes_throttled"]) > 0:
        assert int(s["compose_share_decreases"]) > 0, s
        assert int(s["direct_gets"]) > 0, s
