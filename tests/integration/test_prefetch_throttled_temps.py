"""Compose temporaries under 429s, on the emulator's fault schedules (no luck, no timing): a
compose refused with 429 is not retried (its batch is fetched with plain GETs, the compose share
is lowered, and nothing is made, so nothing is deleted); a temporary whose delete the bucket
refuses (503) more often than the gcs layer retries is deleted again later, until it is gone,
and one whose delete is rate limited (429) is retried within its call, which a 429 does not
spend.
Either way nothing is left in the bucket and nothing is logged as an error."""

import random
from pathlib import Path

import pytest

from tests.integration.prefetch_util import (mounts_fixture, reserved_objects, status,
                                             wait_for)

pytestmark = pytest.mark.emulator_only

BUCKET = "data"
COUNT = 128  # 4 batches of 32


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "2", "--populate", f"{BUCKET}/a/:{COUNT}:3K:7",
            "--populate", f"{BUCKET}/b/:{COUNT}:3K:8"]


@pytest.fixture(scope="module")
def seed_objects():
    return None


# One retry per call: a delete refused (503) 3 times runs out of them once, then passes.
mounts = mounts_fixture(BUCKET, ["--compose", "on", "--prefetch-lookahead", "100000",
                                 "--max-retries", "1"])


def epoch(mount, gcs, prefix):
    """Hints every object under prefix (shuffled), waits until all are fetched and no
    temporary is live, and checks every byte read through the mount."""
    names = [f"{prefix}{i:08d}" for i in range(COUNT)]
    random.Random(5).shuffle(names)
    with open(Path(mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(n + "\n" for n in names))
    wait_for(mount, lambda s: int(s["hints_done"]) == COUNT and int(s["temps_live"]) == 0,
             "the epoch to be prefetched and its temporaries deleted")
    for name in names:
        data = (Path(mount.path) / name).read_bytes()
        assert data == gcs.bucket(BUCKET).blob(name).download_as_bytes(), name
    s = status(mount)
    assert int(s["files_failed"]) == 0
    assert reserved_objects(gcs, BUCKET) == []
    return s


def test_compose_refused_is_not_retried_and_leaves_nothing(mounts, gcs, emulator):
    emulator.config(faults=[{"kind": "429", "rate": 1, "op": "objects.compose", "count": 1}])
    m = mounts()
    before = emulator.stats()["ops"]
    s = epoch(m, gcs, "a/")
    after = emulator.stats()["ops"]
    assert int(s["composes_throttled"]) == 1, s
    assert int(s["compose_failures"]) == 1, s
    assert int(s["rate_limited_writes"]) == 1, s  # one attempt: not retried
    assert int(s["compose_share_decreases"]) >= 1, s
    assert int(s["direct_gets"]) > 0, s
    # One delete per temporary made; none for the refused compose, which made nothing.
    made = int(s["composes"]) - 1
    assert int(s["temps_deleted"]) == made, s
    assert after["objects.delete"] - before["objects.delete"] == made
    assert after["objects.compose"] - before["objects.compose"] == int(s["composes"])


def test_delete_refused_beyond_the_retries_is_sent_again(mounts, gcs, emulator):
    emulator.config(faults=[{"kind": "503", "rate": 1, "op": "objects.delete",
                             "per_object": 3}])
    m = mounts()
    faults_before = emulator.stats()["faults_injected"]
    s = epoch(m, gcs, "b/")
    made = int(s["composes"])
    assert made >= 1, s
    assert int(s["compose_failures"]) == 0, s
    # Each temporary's delete: 2 attempts refused (the call fails), sent again once by the
    # reaper: refused, then done.
    assert int(s["temps_delete_resent"]) == made, s
    assert int(s["temps_deleted"]) == made, s
    assert int(s["temps_delete_waiting"]) == 0, s
    assert emulator.stats()["faults_injected"] - faults_before == 3 * made


def test_delete_rate_limited_beyond_the_retries_is_retried_in_its_call(mounts, gcs, emulator):
    # A 429 spends none of --max-retries (1): each delete call takes its three 429s and
    # succeeds, and the reaper has nothing to send again.
    emulator.config(faults=[{"kind": "429", "rate": 1, "op": "objects.delete",
                             "per_object": 3}])
    m = mounts()
    faults_before = emulator.stats()["faults_injected"]
    s = epoch(m, gcs, "a/")
    made = int(s["composes"])
    assert made >= 1, s
    assert int(s["compose_failures"]) == 0, s
    assert int(s["temps_delete_resent"]) == 0, s
    assert int(s["temps_deleted"]) == made, s
    assert int(s["temps_delete_waiting"]) == 0, s
    assert int(s["rate_limited_writes"]) == 3 * made, s
    assert emulator.stats()["faults_injected"] - faults_before == 3 * made
