"""Errors through the mount under the emulator's injected faults: 404 -> ENOENT, 403 -> EACCES,
503 beyond the retry budget -> EIO, 429 (a rate limit) retried past the budget until the request
deadline and only then EIO (and the mount keeps working once the faults stop),
retries that hide 5% of requests failing (503, connection resets, short bodies) on a fixed
schedule, with every byte checked."""

import errno
import os
import re

import pytest

from tests.integration.mount import mount_status, mounts_fixture
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "faults"
SEED = 3
COUNT = 400
SIZE = 20_000
BIG_SIZE = 6 * 1024 * 1024
READ_OPS = ["objects.get", "objects.list", "objects.download"]
HIDDEN_KINDS = ["503", "reset-mid", "truncate"]
HIDDEN_SMALL = 60
HIDDEN_BIG = 4


@pytest.fixture(scope="module")
def emulator_args():
    # Each test_retries_hide_* case reads files of its own, so that what an earlier case read
    # (and the prefetch that follows reads in name order) never answers a later one from cache.
    hidden = []
    for kind in HIDDEN_KINDS:
        hidden += ["--populate", f"{BUCKET}/hide-{kind}/small/:{HIDDEN_SMALL}:{SIZE}:{SEED}",
                   "--populate", f"{BUCKET}/hide-{kind}/big/:{HIDDEN_BIG}:{BIG_SIZE}:{SEED}"]
    return ["--populate", f"{BUCKET}/f/:{COUNT}:{SIZE}:{SEED}",
            "--populate", f"{BUCKET}/big/:4:{BIG_SIZE}:{SEED}", *hidden]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    # Few retries so exhausting them is quick; short negative TTL so failures are not cached.
    # Compose-batched prefetch off: these tests count the faults hitting each file's own GET
    # (the compose path's faults are tested in test_prefetch_*.py).
    return ["--max-retries", "2", "--negative-ttl", "0", "--request-deadline", "30s",
            "--compose", "off"]


@pytest.fixture(scope="module")
def generations(fluxfs_mount, gcs):
    return {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs()}


@pytest.fixture
def faults(emulator):
    """The emulator's fault config (and latency), reset after the test."""
    yield emulator
    emulator.config(faults=[], deny=[], latency_ms=0)


class Names:
    """Hands out object indices no earlier test has touched (so no cache answers)."""
    next_index = 0

    @classmethod
    def take(cls, n):
        first = cls.next_index
        cls.next_index += n
        assert cls.next_index <= COUNT
        return [f"f/{i:08d}" for i in range(first, first + n)]


def read_and_check(mount, generations, name, expected_size):
    data = (mount.path / name).read_bytes()
    assert len(data) == expected_size, name
    assert first_mismatch(name, generations[name], SEED, 0, data) is None, name


def test_missing_object_is_enoent(fluxfs_mount):
    with pytest.raises(FileNotFoundError):
        os.stat(fluxfs_mount.path / "f" / "does-not-exist")
    with pytest.raises(FileNotFoundError):
        open(fluxfs_mount.path / "nowhere" / "file", "rb")


def test_denied_requests_are_eacces(fluxfs_mount, faults, generations):
    fresh_stat, fresh_read = Names.take(2)
    os.stat(fluxfs_mount.path / fresh_read)  # metadata cached, content not yet read
    faults.config(deny=READ_OPS)
    fluxfs_mount.expect_errors(r"error gcs: objects\.[\w()]+ gs://faults/f.*\(HTTP 403")
    with pytest.raises(PermissionError):
        os.stat(fluxfs_mount.path / fresh_stat)
    with pytest.raises(PermissionError):
        (fluxfs_mount.path / fresh_read).read_bytes()
    faults.config(deny=[])
    # Errors other than "not found" are not cached: the names work once access is back.
    read_and_check(fluxfs_mount, generations, fresh_stat, SIZE)
    read_and_check(fluxfs_mount, generations, fresh_read, SIZE)


# For the tests that need a short --request-deadline: the module mount's flags, no deadline yet.
mounts = mounts_fixture(BUCKET, ["--max-retries", "2", "--negative-ttl", "0", "--compose", "off"])


def stat_and_read_fail_with_eio(path, stat_name, read_name):
    """A stat of one name and a read of another (its metadata cached) both fail with EIO."""
    with pytest.raises(OSError) as stat_error:
        os.stat(path / stat_name)
    assert stat_error.value.errno == errno.EIO
    with pytest.raises(OSError) as read_error:
        (path / read_name).read_bytes()
    assert read_error.value.errno == errno.EIO


@pytest.mark.parametrize("kind", ["503"])
def test_exhausted_retries_are_eio(fluxfs_mount, faults, generations, kind):
    fresh_stat, fresh_read = Names.take(2)
    os.stat(fluxfs_mount.path / fresh_read)
    # Every request fails, far more times than the retry budget (2).
    faults.config(faults=[{"kind": kind, "rate": 1.0, "count": 1000}])
    # One line per failed call, naming the call, the object and the status.
    fluxfs_mount.expect_errors(rf"error gcs: objects\.[\w()]+ gs://faults/f.*\(HTTP {kind}")
    stat_and_read_fail_with_eio(fluxfs_mount.path, fresh_stat, fresh_read)
    faults.config(faults=[])
    read_and_check(fluxfs_mount, generations, fresh_stat, SIZE)
    read_and_check(fluxfs_mount, generations, fresh_read, SIZE)


def test_rate_limits_beyond_max_retries_are_retried(mounts, faults, generations):
    """A 429 spends none of --max-retries (2 here): five in a row on one call, and the read
    succeeds. A mount of its own, which has read nothing: no name-order prefetch of the
    neighbours shares the faults, so the object's one download call takes all five."""
    mount = mounts("--request-deadline", "60s")
    (name,) = Names.take(1)
    os.stat(mount.path / name)  # metadata cached: the read is the object's one download
    before = faults.stats()
    # Each waits the emulator's Retry-After (1 s, its least) spread up to 2 s.
    faults.config(faults=[{"kind": "429", "rate": 1.0, "op": "objects.download", "count": 5}])
    read_and_check(mount, generations, name, SIZE)
    after = faults.stats()
    assert after["faults_injected"] - before["faults_injected"] == 5
    downloads = after["ops"]["objects.download"] - before["ops"]["objects.download"]
    assert downloads == 6, downloads  # one call: five 429s, then the object
    status = mount_status(mount.path)
    assert {k: v for k, v in status.items() if k.startswith("gcs_retries_")} == {
        "gcs_retries_rate_limited": "5"}, status


@pytest.mark.parametrize("latency_ms", [0, 400])
def test_rate_limits_until_the_deadline_are_eio(mounts, faults, generations, latency_ms):
    """429s that do not stop: retried until --request-deadline, then EIO, logged as such; the
    mount works again once they stop. With 400 ms to each answer the deadline may also fall in
    an attempt's wait for its reply: the call still ends as rate limited, not ETIMEDOUT."""
    mount = mounts("--request-deadline", "3s")
    fresh_stat, fresh_read = Names.take(2)
    os.stat(mount.path / fresh_read)
    faults.config(latency_ms=latency_ms,
                  faults=[{"kind": "429", "rate": 1.0, "count": 100000}])
    line = (r"error gcs: objects\.[\w()]+ gs://faults/f.*\(HTTP 429, \d+ attempts, rate limited "
            r"on every retry until --request-deadline \(3 s\) ran out")
    mount.expect_errors(line)
    stat_and_read_fail_with_eio(mount.path, fresh_stat, fresh_read)
    faults.config(latency_ms=0, faults=[])
    # Both calls said why they ended: the deadline, not the retry budget.
    assert len(re.findall(line, mount.log())) >= 2, mount.log()[-3000:]
    read_and_check(mount, generations, fresh_stat, SIZE)
    read_and_check(mount, generations, fresh_read, SIZE)


@pytest.mark.parametrize("kind", HIDDEN_KINDS)
def test_retries_hide_a_five_percent_fault_rate(fluxfs_mount, faults, generations, kind):
    small = [f"hide-{kind}/small/{i:08d}" for i in range(HIDDEN_SMALL)]
    big = [f"hide-{kind}/big/{i:08d}" for i in range(HIDDEN_BIG)]
    before = faults.stats()
    # Every 20th request fails (5%) on a schedule, not by a random draw: at a random 5%, three
    # faults in a row on one of the ~200 calls (retry budget 2) failed about 2% of runs, more
    # under load. No object is faulted twice, so no call meets more faults than its budget
    # allows, however the mount's parallel range reads and its prefetch interleave.
    faults.config(faults=[{"kind": kind, "every": 20, "per_object": 1}])
    for name in small:
        read_and_check(fluxfs_mount, generations, name, SIZE)
    for i, name in enumerate(big):
        fd = os.open(fluxfs_mount.path / name, os.O_RDONLY)
        try:
            offset = (i * 1_234_567) % BIG_SIZE
            data = os.pread(fd, 2 << 20, offset)
            assert len(data) == 2 << 20, name
            assert first_mismatch(name, generations[name], SEED, offset, data) is None, name
        finally:
            os.close(fd)
    after = faults.stats()
    # The faults really happened (else this test would prove nothing). Nothing here was read
    # before, so each of the 64 objects took at least one request of its own, and a schedule
    # of one fault in 20 that skips no more than already faulted objects fired at least 3 times.
    requests = after["requests"] - before["requests"]
    injected = after["faults_injected"] - before["faults_injected"]
    assert requests >= HIDDEN_SMALL + HIDDEN_BIG, requests
    assert injected >= 3, (injected, requests)
