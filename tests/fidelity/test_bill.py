"""The emulator's ledger at /_emulator/bill and its clock at /_emulator/clock (issue 21):
operations by billing class, storage GiB-seconds by storage class and state (live, noncurrent,
soft-deleted), early deletion charges, and dollars at the README's list prices; the clock moves
days ahead so that soft delete retention, retention periods and storage time can be tested
without waiting. Google's Python client makes the requests the bill counts.

Each test resets the emulator and so starts from an empty bill. Storage time is measured on the
emulator's clock, which also runs in real time: bounds allow SLACK real seconds per test.

Only meaningful for gcs-emulator: skipped when FIDELITY_SERVER selects another server.
"""

import pytest
import requests
from google.api_core import exceptions as gexc

from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only

GIB = 1024 ** 3
MIB = 1024 ** 2
DAY = 86400
MONTH = 30 * DAY
SLACK = 600  # real seconds a slow machine may add to a test's storage time
# The README's price table (us-central1, list prices).
CLASS_A, CLASS_B = 0.005 / 1000, 0.0004 / 1000
PER_GIB_MONTH = {"STANDARD": 0.020, "NEARLINE": 0.010, "COLDLINE": 0.004, "ARCHIVE": 0.0012}


@pytest.fixture(scope="module")
def emulator_args():
    return ["--soft-delete-seconds", str(7 * DAY)]


@pytest.fixture(autouse=True)
def empty_bill(emulator):
    emulator.reset()
    yield


def make_bucket(gcs, storage_class="STANDARD", soft_delete_s=None, versioning=False):
    bucket = gcs.bucket(unique_bucket_name("bill"))
    bucket.storage_class = storage_class
    if soft_delete_s is not None:
        bucket.soft_delete_policy.retention_duration_seconds = soft_delete_s
    bucket.versioning_enabled = versioning
    return gcs.create_bucket(bucket)


def gib_seconds(bill, cls, state):
    return bill["storage_gib_seconds"][cls][state]


def about(value, expected_s, size=MIB):
    """value (GiB-seconds) is size bytes held expected_s seconds, give or take SLACK seconds."""
    low = size / GIB * expected_s
    high = size / GIB * (expected_s + SLACK)
    return low <= value <= high


def test_empty_bill_shows_the_dated_price_table(emulator):
    bill = emulator.bill()
    assert bill["operations"] == {"A": 0, "B": 0, "free": 0}
    assert bill["dollars"]["total"] == 0
    prices = bill["prices"]
    assert prices["source"].startswith("https://cloud.google.com/storage/pricing")
    assert prices["as_of"] and "list" in prices["note"]
    assert prices["storage_per_gib_month"] == PER_GIB_MONTH
    assert prices["operations_per_1000"] == {"A": 0.005, "B": 0.0004, "free": 0}
    for cls in PER_GIB_MONTH:
        assert set(bill["storage_gib_seconds"][cls]) == {"live", "noncurrent", "soft_deleted"}


def test_operations_are_counted_by_class_and_priced(emulator, gcs):
    bucket = make_bucket(gcs)                       # buckets.insert: A
    blob = bucket.blob("ops/one")
    blob.upload_from_string(b"x" * 100)             # objects.insert: A
    assert bucket.get_blob("ops/one").size == 100   # objects.get: B
    assert blob.download_as_bytes() == b"x" * 100   # objects.download: B
    blob.delete()                                   # objects.delete: free
    bill = emulator.bill()
    stats = emulator.stats()
    assert bill["operations"] == {"A": stats["class_a"], "B": stats["class_b"],
                                  "free": stats["free"]}
    assert bill["operations"]["A"] >= 2 and bill["operations"]["B"] >= 2
    assert bill["operations"]["free"] == 1
    ops = bill["operations"]
    assert bill["dollars"]["operations"] == pytest.approx(ops["A"] * CLASS_A + ops["B"] * CLASS_B)
    assert bill["dollars"]["total"] == pytest.approx(
        bill["dollars"]["operations"] + bill["dollars"]["storage"]
        + bill["dollars"]["early_deletion"])


def test_live_then_soft_deleted_storage_until_retention_ends(emulator, gcs):
    bucket = make_bucket(gcs)
    assert bucket.soft_delete_policy.retention_duration_seconds == 7 * DAY
    blob = bucket.blob("sd/one")
    blob.upload_from_string(b"s" * MIB)
    emulator.advance_clock(DAY)
    blob.delete()
    bill = emulator.bill()
    assert about(gib_seconds(bill, "STANDARD", "live"), DAY)
    assert bill["storage_bytes_now"]["STANDARD"]["soft_deleted"] == MIB
    assert bill["storage_bytes_now"]["STANDARD"]["live"] == 0

    emulator.advance_clock(3 * DAY)
    assert about(gib_seconds(emulator.bill(), "STANDARD", "soft_deleted"), 3 * DAY)
    assert [b.name for b in gcs.list_blobs(bucket, soft_deleted=True)] == ["sd/one"]

    # The policy's 7 days end: the version goes for good and is billed for 7 days, not 10.
    emulator.advance_clock(6 * DAY)
    bill = emulator.bill()
    assert list(gcs.list_blobs(bucket, soft_deleted=True)) == []
    assert bill["storage_bytes_now"]["STANDARD"]["soft_deleted"] == 0
    assert about(gib_seconds(bill, "STANDARD", "soft_deleted"), 7 * DAY)
    storage = (gib_seconds(bill, "STANDARD", "live") + gib_seconds(bill, "STANDARD", "soft_deleted"))
    assert bill["dollars"]["storage"] == pytest.approx(storage * 0.020 / MONTH)
    assert bill["dollars"]["early_deletion"] == 0  # STANDARD has no minimum duration


def test_overwrite_under_versioning_is_billed_noncurrent(emulator, gcs):
    bucket = make_bucket(gcs, soft_delete_s=0, versioning=True)
    blob = bucket.blob("v")
    blob.upload_from_string(b"1" * MIB)
    blob.upload_from_string(b"2" * MIB)
    emulator.advance_clock(2 * DAY)
    bill = emulator.bill()
    assert bill["storage_bytes_now"]["STANDARD"] == {"live": MIB, "noncurrent": MIB,
                                                     "soft_deleted": 0}
    assert about(gib_seconds(bill, "STANDARD", "noncurrent"), 2 * DAY)
    assert about(gib_seconds(bill, "STANDARD", "live"), 2 * DAY)


def test_nearline_deleted_early_is_charged_the_rest_of_30_days(emulator, gcs):
    bucket = make_bucket(gcs, storage_class="NEARLINE", soft_delete_s=0)
    blob = bucket.blob("n")
    blob.upload_from_string(b"n" * MIB)
    emulator.advance_clock(10 * DAY)
    blob.delete()
    bill = emulator.bill()
    early = bill["early_deletion_gib_seconds"]["NEARLINE"]
    # 30 days minimum, 10 served: 20 days charged (less the real seconds that passed).
    assert MIB / GIB * (20 * DAY - SLACK) <= early <= MIB / GIB * 20 * DAY
    assert bill["dollars"]["early_deletion"] == pytest.approx(early * 0.010 / MONTH)
    assert about(gib_seconds(bill, "NEARLINE", "live"), 10 * DAY)


def test_soft_deleted_coldline_is_charged_early_deletion_at_its_hard_delete(emulator, gcs):
    bucket = make_bucket(gcs, storage_class="COLDLINE", soft_delete_s=7 * DAY)
    blob = bucket.blob("c")
    blob.upload_from_string(b"c" * MIB)
    emulator.advance_clock(10 * DAY)
    blob.delete()
    assert emulator.bill()["early_deletion_gib_seconds"]["COLDLINE"] == 0  # still kept
    emulator.advance_clock(8 * DAY)
    early = emulator.bill()["early_deletion_gib_seconds"]["COLDLINE"]
    # 90 days minimum; gone for good at day 17: 73 days charged.
    assert MIB / GIB * (73 * DAY - SLACK) <= early <= MIB / GIB * 73 * DAY


def test_clock_lets_a_retention_period_end(emulator, gcs):
    bucket = make_bucket(gcs, soft_delete_s=0)
    bucket.retention_period = 3600
    bucket.patch()
    blob = bucket.blob("kept")
    blob.upload_from_string(b"x")
    with pytest.raises(gexc.Forbidden):
        blob.delete()
    before = requests.get(f"{emulator.url}/_emulator/clock", timeout=30).json()
    after = emulator.advance_clock(3601)
    assert after["offset_s"] >= before["offset_s"] + 3601
    blob.delete()
    assert bucket.get_blob("kept") is None


@pytest.mark.parametrize("body", [b"", b"[]", b'{"advance_s": -1}', b'{"advance_s": "1"}',
                                  b'{"advance_s": 1e12}'])
def test_clock_rejects_a_bad_body(emulator, body):
    before = emulator.advance_clock(0)["offset_s"]
    reply = requests.post(f"{emulator.url}/_emulator/clock", data=body, timeout=30)
    assert reply.status_code == 400, reply.text
    assert emulator.advance_clock(0)["offset_s"] == pytest.approx(before)


def test_soft_deleted_bytes_stop_at_hard_delete_whatever_bucket_runs_the_ledger(emulator, gcs):
    first = make_bucket(gcs, soft_delete_s=7 * DAY)
    other = make_bucket(gcs, soft_delete_s=0)
    blob = first.blob("gone")
    blob.upload_from_string(b"g" * MIB)
    blob.delete()
    emulator.advance_clock(20 * DAY)
    other.blob("w").upload_from_string(b"w")  # the ledger runs on before first is purged
    bill = emulator.bill()
    assert bill["storage_bytes_now"]["STANDARD"]["soft_deleted"] == 0
    assert about(gib_seconds(bill, "STANDARD", "soft_deleted"), 7 * DAY)
