"""utime (objects.patch) survives a transient failure like the other write calls.

The stress test saw utime fail with EIO on a single 503: gcs_patch sent its request once
(retried only with ifMetagenerationMatch, which fluxfs never sends), whereas deletes and
inserts retry. A patch sets the fields it names to given values, so a repeat is harmless and
it is now retried with the client's retry budget. Faults here come on a fixed schedule (the
next objects.patch only), no draw: a 503 (nothing applied), and a reset in the middle of the
reply (applied, the reply lost: the retry applies the same values again).
"""

import os

import pytest

from tests.integration.mount import faults_injected, mounts_fixture, read_plain

pytestmark = pytest.mark.emulator_only

BUCKET = "patchretry"
ARGS = ["--max-retries", "2", "--request-deadline", "30s"]


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def bucket(gcs):
    return gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)


mounts = mounts_fixture(BUCKET, ARGS)


@pytest.fixture
def mount(bucket, mounts):
    return mounts


@pytest.mark.parametrize("kind", ["503", "reset-mid"])
def test_utime_survives_one_transient_failure(emulator, bucket, mount, kind):
    m = mount()
    name = f"touched-{kind}"
    path = m.path / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b"contents")
    os.close(fd)
    generation = bucket.get_blob(name).generation

    mtime_ns = 1_600_000_000_123_456_789
    before = faults_injected(emulator)
    emulator.config(faults=[{"kind": kind, "rate": 1, "op": "objects.patch", "count": 1}])
    os.utime(path, ns=(mtime_ns, mtime_ns))  # before the fix: EIO after the one 503
    emulator.config(faults=[])
    assert faults_injected(emulator) == before + 1  # the fault struck, and only the first attempt

    assert os.stat(path).st_mtime_ns == mtime_ns
    blob = bucket.get_blob(name)
    assert blob.generation == generation  # metadata only: the bytes were not rewritten
    assert blob.metadata["goog-reserved-file-mtime"] == str(mtime_ns // 10**9)
    assert read_plain(path) == b"contents"
