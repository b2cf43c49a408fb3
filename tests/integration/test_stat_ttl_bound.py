"""Each TTL bounds what it names (issue 22, item 10): with a short --stat-ttl and a long
--list-ttl, an object replaced behind a read-only mount is seen (new size, new bytes) once the
stat TTL has passed, even though the name was answered from a directory listing that stays
valid for an hour. Before, the listing's attributes were served until --list-ttl ran out."""

import os
import time

import pytest

from tests.integration.mount import mounts_fixture

pytestmark = pytest.mark.emulator_only

BUCKET = "statttl"
STAT_TTL_S = 1.0
V1 = b"first version\n" * 10
V2 = b"the second, longer version\n" * 40
# A guard against a hang, far below the list TTL (3600 s): not a timing assertion.
DEADLINE_S = 60

mounts = mounts_fixture(BUCKET)


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/d/:3:100:1"]


def read_until(path, expected):
    """Reads path until it holds `expected`; returns what was read last."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        data = path.read_bytes()
        if data == expected or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["read", "stat"])
def test_replaced_object_seen_after_stat_ttl_despite_listing(mounts, gcs, how):
    bucket = gcs.bucket(BUCKET)
    name = f"d/replaced-{how}"
    bucket.blob(name).upload_from_string(V1)
    m = mounts("--read-only", "--stat-ttl", str(STAT_TTL_S), "--list-ttl", "3600",
               "--negative-ttl", "3600")
    path = m.path / name
    assert f"replaced-{how}" in os.listdir(m.path / "d")  # the listing answers lookups now
    assert path.read_bytes() == V1
    bucket.blob(name).upload_from_string(V2)
    if how == "stat":
        deadline = time.monotonic() + DEADLINE_S
        while os.stat(path).st_size != len(V2) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert os.stat(path).st_size == len(V2), "the listing's size outlived --stat-ttl"
    data = read_until(path, V2)
    assert data == V2, f"still {len(data)} bytes: the listing's version outlived --stat-ttl"
    # The listing's other names still answer, and the new version shows in a new listing
    # only after --list-ttl (readdir is what --list-ttl names): no claim made here.
    assert m.unmount() == 0
