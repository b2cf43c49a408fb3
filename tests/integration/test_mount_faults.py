"""Errors through the mount under the emulator's injected faults: 404 -> ENOENT, 403 -> EACCES,
429/503 beyond the retry budget -> EIO (and the mount keeps working once the faults stop),
retries that hide a 5% 503 rate or connection resets, with every byte checked."""

import errno
import os

import pytest

from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "faults"
SEED = 3
COUNT = 400
SIZE = 20_000
BIG_SIZE = 6 * 1024 * 1024
READ_OPS = ["objects.get", "objects.list", "objects.download"]


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/f/:{COUNT}:{SIZE}:{SEED}",
            "--populate", f"{BUCKET}/big/:4:{BIG_SIZE}:{SEED}"]


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
    """The emulator's fault config, reset after the test."""
    yield emulator
    emulator.config(faults=[], deny=[])


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


@pytest.mark.parametrize("kind", ["503", "429"])
def test_exhausted_retries_are_eio(fluxfs_mount, faults, generations, kind):
    fresh_stat, fresh_read = Names.take(2)
    os.stat(fluxfs_mount.path / fresh_read)
    # Every request fails, far more times than the retry budget (2).
    faults.config(faults=[{"kind": kind, "rate": 1.0, "count": 1000}])
    # One line per failed call, naming the call, the object and the status.
    fluxfs_mount.expect_errors(rf"error gcs: objects\.[\w()]+ gs://faults/f.*\(HTTP {kind}")
    with pytest.raises(OSError) as stat_error:
        os.stat(fluxfs_mount.path / fresh_stat)
    assert stat_error.value.errno == errno.EIO
    with pytest.raises(OSError) as read_error:
        (fluxfs_mount.path / fresh_read).read_bytes()
    assert read_error.value.errno == errno.EIO
    faults.config(faults=[])
    read_and_check(fluxfs_mount, generations, fresh_stat, SIZE)
    read_and_check(fluxfs_mount, generations, fresh_read, SIZE)


@pytest.mark.parametrize("kind", ["503", "reset-mid", "truncate"])
def test_retries_hide_a_five_percent_fault_rate(fluxfs_mount, faults, generations, kind):
    names = Names.take(60)
    before = faults.stats()
    faults.config(faults=[{"kind": kind, "rate": 0.05}])
    for name in names:
        read_and_check(fluxfs_mount, generations, name, SIZE)
    for i in range(4):
        path = fluxfs_mount.path / "big" / f"{i:08d}"
        fd = os.open(path, os.O_RDONLY)
        try:
            offset = (i * 1_234_567) % BIG_SIZE
            data = os.pread(fd, 2 << 20, offset)
            assert first_mismatch(f"big/{i:08d}", generations[f"big/{i:08d}"], SEED, offset,
                                  data) is None
        finally:
            os.close(fd)
    after = faults.stats()
    # The faults really happened (else this test would prove nothing).
    assert after["faults_injected"] > before["faults_injected"]
