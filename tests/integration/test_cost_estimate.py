"""Dollars in the open (issue 21): the mount counts what it has cost — every request the server
answered by billing class, and the storage of its temporaries while they live and, on a bucket
with soft delete, for the period they stay soft-deleted — and shows it in .fluxfs/status,
`fluxfs status` and /metrics. The emulator's ledger (/_emulator/bill) is the outside check: over
a hinted epoch with compose, a small write and a multipart write, fluxfs's operation counts by
class equal the ledger's difference exactly (nothing else talks to the emulator meanwhile), and
the soft-deleted storage it commits to equals what the ledger holds soft-deleted."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.mount import Mount, find_fluxfs_binary, managed_mounts
from tests.integration.prefetch_util import reserved_objects, status, wait_for
from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only

COUNT = 64
SIZE = 16384
WEEK = 7 * 86400
GIB = float(1 << 30)


def payload(i):
    return bytes([i % 251]) * SIZE


@pytest.fixture
def mount_bucket(emulator):
    yield from managed_mounts(
        emulator, lambda bucket, *args: Mount(emulator, bucket, args=list(args)))


def make_bucket(gcs, soft_delete_s):
    bucket = gcs.bucket(unique_bucket_name("cost"))
    bucket.soft_delete_policy.retention_duration_seconds = soft_delete_s
    bucket = gcs.create_bucket(bucket)
    for i in range(COUNT):
        bucket.blob(f"d/{i:04d}").upload_from_string(payload(i))
    return bucket.name


def soft_deleted_bytes(bill):
    return sum(c["soft_deleted"] for c in bill["storage_bytes_now"].values())


def work(m):
    """A hinted epoch (composites), a small file and a 24 MiB file (multipart parts, a
    temporary composed onto the name); returns once nothing is in flight."""
    names = [f"d/{i:04d}" for i in range(COUNT)]
    (Path(m.path) / ".fluxfs" / "prefetch").write_text("".join(n + "\n" for n in names))
    wait_for(m, lambda s: int(s["hints_done"]) == COUNT and int(s["temps_live"]) == 0,
             "the hints")
    for i, name in enumerate(names):
        assert (Path(m.path) / name).read_bytes() == payload(i)
    (Path(m.path) / "small.bin").write_bytes(b"x" * 1000)
    big = os.urandom(1 << 20) * 24
    (Path(m.path) / "big.bin").write_bytes(big)
    return wait_for(m, lambda s: int(s["open_writers"]) == 0 and
                    int(s["cost_temporaries_live"]) == 0, "the writes")


@pytest.mark.parametrize("soft_delete_s", [0, WEEK])
def test_operations_by_class_match_the_ledger(emulator, gcs, mount_bucket, soft_delete_s):
    bucket = make_bucket(gcs, soft_delete_s)
    before = emulator.bill()
    held_before = soft_deleted_bytes(before)
    m = mount_bucket(bucket)
    s = work(m)
    after = emulator.bill()
    ops = {k: after["operations"][k] - before["operations"][k] for k in ("A", "B", "free")}
    assert int(s["cost_class_a_ops"]) == ops["A"], (s, ops)
    assert int(s["cost_class_b_ops"]) == ops["B"], (s, ops)
    assert int(s["cost_free_ops"]) == ops["free"], (s, ops)
    assert int(s["composes"]) >= 1 and int(s["cost_temporaries_deleted"]) >= 2
    assert reserved_objects(gcs, bucket) == []

    # The temporaries' soft-deleted bytes: what the ledger now holds soft-deleted (the user's
    # own objects were never deleted) times the period.
    held = soft_deleted_bytes(after) - held_before
    if soft_delete_s == 0:
        assert held == 0 and float(s["cost_soft_deleted_gib_seconds"]) == 0
    else:
        assert held >= SIZE * 2
        expected = held / GIB * soft_delete_s
        assert float(s["cost_soft_deleted_gib_seconds"]) == pytest.approx(expected, rel=1e-4)
    assert float(s["cost_temporary_gib_seconds"]) > 0
    dollars = (ops["A"] * 0.005 + ops["B"] * 0.0004) / 1000 + \
        (float(s["cost_temporary_gib_seconds"]) + float(s["cost_soft_deleted_gib_seconds"])) * \
        0.020 / (30 * 86400)
    assert float(s["cost_dollars"]) == pytest.approx(dollars, rel=1e-3, abs=1e-6)

    shown = subprocess.run([str(find_fluxfs_binary()), "status", str(m.path)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "Cost:          $" in shown.stdout and \
        f"{int(s['cost_class_a_ops'])} class A" in shown.stdout, shown.stdout


def test_versioning_keeps_temporaries_as_noncurrent_versions(emulator, gcs, mount_bucket):
    """On a versioned bucket a deleted temporary is a noncurrent version (soft delete comes
    only when that version is deleted in turn): the estimate counts the bytes the ledger holds
    noncurrent, one month of them in dollars, and no soft-deleted storage."""
    bucket = gcs.bucket(unique_bucket_name("cost"))
    bucket.soft_delete_policy.retention_duration_seconds = WEEK
    bucket.versioning_enabled = True
    bucket = gcs.create_bucket(bucket)
    for i in range(COUNT):
        bucket.blob(f"d/{i:04d}").upload_from_string(payload(i))
    before = emulator.bill()
    m = mount_bucket(bucket.name, "--compose", "on")  # auto reads plain GETs here
    s = work(m)
    after = emulator.bill()
    noncurrent = sum(c["noncurrent"] for c in after["storage_bytes_now"].values()) - \
        sum(c["noncurrent"] for c in before["storage_bytes_now"].values())
    assert int(s["composes"]) >= 1
    assert noncurrent >= SIZE * 2
    assert int(s["cost_noncurrent_bytes"]) == noncurrent
    assert float(s["cost_soft_deleted_gib_seconds"]) == 0
    assert soft_deleted_bytes(after) == soft_deleted_bytes(before)
    ops = {k: after["operations"][k] - before["operations"][k] for k in ("A", "B", "free")}
    dollars = (ops["A"] * 0.005 + ops["B"] * 0.0004) / 1000 + \
        float(s["cost_temporary_gib_seconds"]) * 0.020 / (30 * 86400) + \
        noncurrent / GIB * 0.020
    assert float(s["cost_dollars"]) == pytest.approx(dollars, rel=1e-3, abs=1e-6)
