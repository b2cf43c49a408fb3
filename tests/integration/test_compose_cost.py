"""--compose auto (issue 21): the mount reads its bucket's settings once (buckets.get) and
decides compose by what temporaries cost there. One bucket per case, created with the setting
through the emulator's JSON API (Google's client); the decision shows in .fluxfs/status, and
where compose is off no temporary is composed, where on none is left behind. The emulator's
bill (/_emulator/bill) shows what the temporaries were billed as."""

import subprocess
from pathlib import Path

import pytest

from tests.integration.mount import Mount, find_fluxfs_binary, managed_mounts
from tests.integration.prefetch_util import reserved_objects, status, wait_for
from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only

COUNT = 40
SIZE = 8192
WEEK = 7 * 86400


def payload(i):
    return bytes([i % 251]) * SIZE


@pytest.fixture
def mount_bucket(emulator):
    yield from managed_mounts(
        emulator, lambda bucket, *args: Mount(emulator, bucket, args=list(args)))


def make_bucket(gcs, storage_class="STANDARD", soft_delete_s=0, retention_s=0,
                event_based_hold=False, versioning=False):
    bucket = gcs.bucket(unique_bucket_name("cc"))
    bucket.storage_class = storage_class
    bucket.versioning_enabled = versioning
    bucket.soft_delete_policy.retention_duration_seconds = soft_delete_s
    bucket = gcs.create_bucket(bucket)
    for i in range(COUNT):
        bucket.blob(f"d/{i:04d}").upload_from_string(payload(i))
    if retention_s or event_based_hold:
        if retention_s:
            bucket.retention_period = retention_s
        bucket.default_event_based_hold = event_based_hold
        bucket.patch()
    return bucket.name


def read_hinted(m):
    names = [f"d/{i:04d}" for i in range(COUNT)]
    with open(Path(m.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(n + "\n" for n in names))
    s = wait_for(m, lambda s: int(s["hints_done"]) == COUNT and int(s["temps_live"]) == 0,
                 "the hints")
    for i, name in enumerate(names):
        assert (Path(m.path) / name).read_bytes() == payload(i)
    assert int(s["files_prefetched"]) == COUNT
    return s


def test_standard_bucket_with_soft_delete_composes_and_states_the_cost(
        emulator, gcs, mount_bucket):
    bucket = make_bucket(gcs, soft_delete_s=WEEK)
    m = mount_bucket(bucket)
    s = read_hinted(m)
    assert s["compose"] == "on"
    decision = s["compose_decision"]
    assert decision.startswith("on (soft delete 7 d: each temporary is billed ~7 d"), decision
    assert "$0.0047 per GiB composed" in decision  # 0.020 $/GiB-month x 7/30
    assert int(s["composes"]) >= 1
    assert reserved_objects(gcs, bucket) == []
    # The deleted temporaries are kept soft-deleted, as STANDARD objects.
    bill = emulator.bill()
    assert bill["storage_bytes_now"]["STANDARD"]["soft_deleted"] >= SIZE * 2
    assert m.log().count("compose on (soft delete 7 d") == 1
    shown = subprocess.run([str(find_fluxfs_binary()), "status", str(m.path)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert f"Compose:       {decision}\n" in shown.stdout


def test_soft_delete_bucket_reads_large_objects_with_plain_gets(emulator, gcs, mount_bucket):
    """On a soft delete bucket a batch is composed only where that costs less than its GETs:
    32 objects of 128 KiB composed would leave 4 MiB billed for a week ($0.0000186) to save 31
    GETs ($0.0000124 - a compose's $0.000005): every batch is read with plain GETs, nothing is
    composed, nothing left soft-deleted, and the status counts the batches."""
    bucket = gcs.bucket(unique_bucket_name("cc"))
    bucket.soft_delete_policy.retention_duration_seconds = WEEK
    bucket = gcs.create_bucket(bucket)
    big = 128 * 1024
    for i in range(COUNT):
        bucket.blob(f"d/{i:04d}").upload_from_string(bytes([i % 251]) * big)
    kept = emulator.bill()["storage_bytes_now"]["STANDARD"]["soft_deleted"]  # other tests'
    m = mount_bucket(bucket.name)
    names = [f"d/{i:04d}" for i in range(COUNT)]
    with open(Path(m.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(n + "\n" for n in names))
    s = wait_for(m, lambda s: int(s["hints_done"]) == COUNT, "the hints")
    for i, name in enumerate(names):
        assert (Path(m.path) / name).read_bytes() == bytes([i % 251]) * big
    assert s["compose"] == "on", s["compose_decision"]
    assert "below ~52 KiB per object in a batch of 32" in s["compose_decision"]
    assert int(s["composes"]) == 0
    assert int(s["batches_cheaper_direct"]) >= 1
    assert int(s["files_prefetched"]) == COUNT
    assert emulator.bill()["storage_bytes_now"]["STANDARD"]["soft_deleted"] == kept


def test_nearline_bucket_composes_standard_temporaries(emulator, gcs, mount_bucket):
    bucket = make_bucket(gcs, storage_class="NEARLINE")
    m = mount_bucket(bucket)
    s = read_hinted(m)
    assert s["compose"] == "on"
    assert "bucket class NEARLINE, temporaries STANDARD" in s["compose_decision"]
    assert int(s["composes"]) >= 1
    assert reserved_objects(gcs, bucket) == []
    # Temporaries created NEARLINE and deleted at once would owe 30 days of early deletion.
    assert emulator.bill()["early_deletion_gib_seconds"]["NEARLINE"] == 0


@pytest.mark.parametrize("setting,reason", [
    ({"retention_s": 3600}, "off (retention policy 1 h: temporaries could not be deleted"),
    ({"event_based_hold": True}, "off (default event-based hold: temporaries could not be"),
    ({"versioning": True}, "off (versioning: each deleted temporary would stay as a noncurrent"),
])
def test_retention_hold_or_versioning_turns_compose_off(emulator, gcs, mount_bucket, setting, reason):
    bucket = make_bucket(gcs, **setting)
    composes = emulator.stats()["ops"]["objects.compose"]
    m = mount_bucket(bucket)
    s = read_hinted(m)
    assert s["compose"] == "off"
    assert s["compose_decision"].startswith(reason), s["compose_decision"]
    assert int(s["composes"]) == 0 and int(s["direct_gets"]) >= COUNT
    assert emulator.stats()["ops"]["objects.compose"] == composes
    assert reserved_objects(gcs, bucket) == []


def test_unreadable_settings_assume_the_costly_case(emulator, gcs, mount_bucket):
    bucket = make_bucket(gcs)
    emulator.config(deny=["buckets.get"])
    composes = emulator.stats()["ops"]["objects.compose"]
    m = mount_bucket(bucket)
    s = read_hinted(m)
    assert s["compose"] == "off"
    assert s["compose_decision"].startswith("off (bucket settings unreadable (no "
                                            "storage.buckets.get)"), s["compose_decision"]
    assert emulator.stats()["ops"]["objects.compose"] == composes
    assert m.log().count("could not read gs://") == 1


def test_compose_on_forces_it_without_reading_the_bucket(emulator, gcs, mount_bucket):
    bucket = make_bucket(gcs, event_based_hold=False)
    gets = emulator.stats()["ops"]["buckets.get"]
    m = mount_bucket(bucket, "--compose", "on", "--read-only")
    assert status(m)["compose_decision"] == "on (forced by --compose on)"
    assert emulator.stats()["ops"]["buckets.get"] == gets
    # A read-write mount reads the settings once all the same (is the namespace
    # hierarchical? test_hns.py), and the decision stays forced.
    m = mount_bucket(bucket, "--compose", "on")
    s = read_hinted(m)
    assert s["compose_decision"] == "on (forced by --compose on)"
    assert int(s["composes"]) >= 1
    assert emulator.stats()["ops"]["buckets.get"] == gets + 1
