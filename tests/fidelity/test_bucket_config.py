"""Issue 21's test bed: request bodies the emulator must survive, bucket configuration
(storage class, location, soft delete, versioning, retention, event-based holds, hierarchical
namespace, autoclass) as Cloud Storage has it, soft-deleted and noncurrent objects, and the
ledger at /_emulator/bill. Google's Python client where it can say it; raw HTTP where it cannot
(hostile bodies, the emulator's own endpoints).

Only meaningful for gcs-emulator: skipped when FIDELITY_SERVER selects another server.
"""

import pytest
import requests
from google.api_core import exceptions as gexc

from tests.fidelity.common import qname
from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only

# 50,000 nested arrays in 100 KB: yajl_tree_free recursing per level overflowed the emulator's
# 1 MiB connection-thread stack.
DEEP = b"[" * 50_000 + b"]" * 50_000


def deep_object(key: str) -> bytes:
    return b'{"' + key.encode() + b'":' + DEEP + b"}"


def json_api(emulator, path: str) -> str:
    return f"{emulator.url}/storage/v1/{path}"


@pytest.mark.parametrize("method,path,key", [
    ("PATCH", "b/{bucket}/o/{name}", "metadata"),
    ("PUT", "b/{bucket}/o/{name}", "metadata"),
    ("PATCH", "b/{bucket}", "labels"),
    ("POST", "b?project=p", "name"),
    ("POST", "b/{bucket}/o/{name}/compose", "sourceObjects"),
])
def test_deeply_nested_body_is_400_not_a_crash(emulator, fresh_bucket, method, path, key):
    blob = fresh_bucket.blob("deep/one")
    blob.upload_from_string(b"x")
    url = json_api(emulator, path.format(bucket=fresh_bucket.name, name=qname(blob.name)))
    reply = requests.request(method, url, data=deep_object(key),
                             headers={"Content-Type": "application/json"}, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["code"] == 400
    emulator.check_alive()
    blob.reload()  # and it still answers
    assert blob.size == 1


def test_deeply_nested_multipart_metadata_is_400(emulator, fresh_bucket):
    boundary = "deep-boundary"
    body = (f"--{boundary}\r\nContent-Type: application/json\r\n\r\n".encode()
            + deep_object("metadata")
            + f"\r\n--{boundary}\r\nContent-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
            .encode())
    reply = requests.post(
        f"{emulator.url}/upload/storage/v1/b/{fresh_bucket.name}/o?uploadType=multipart&name=m",
        data=body, headers={"Content-Type": f"multipart/related; boundary={boundary}"},
        timeout=30)
    assert reply.status_code == 400, reply.text
    emulator.check_alive()
    assert fresh_bucket.get_blob("m") is None


def test_deeply_nested_control_config_is_400(emulator):
    reply = requests.post(f"{emulator.url}/_emulator/config", data=deep_object("faults"),
                          timeout=30)
    assert reply.status_code == 400, reply.text
    emulator.check_alive()
    assert requests.get(f"{emulator.url}/_emulator/stats", timeout=30).status_code == 200


@pytest.fixture(scope="module")
def emulator_args():
    # Cloud Storage's default for new buckets, which the harness turns off (tests/lib/emulator.py).
    return ["--soft-delete-seconds", "604800"]


def test_new_bucket_gets_seven_days_of_soft_delete_and_config_round_trips(gcs):
    bucket = gcs.bucket(unique_bucket_name())
    bucket.storage_class = "NEARLINE"
    created = gcs.create_bucket(bucket, location="us-central1")
    assert created.storage_class == "NEARLINE"
    assert created.location == "US-CENTRAL1" and created.location_type == "region"
    assert created.soft_delete_policy.retention_duration_seconds == 604800
    created.versioning_enabled = True
    created.default_event_based_hold = True
    created.patch()
    again = gcs.get_bucket(created.name)
    assert again.versioning_enabled and again.default_event_based_hold
    blob = again.blob("n")
    blob.upload_from_string(b"x")
    blob.reload()
    assert blob.storage_class == "NEARLINE" and blob.event_based_hold is True
    with pytest.raises(gexc.Forbidden):
        blob.delete()


def test_soft_deleted_objects_are_listed_got_and_restored(gcs, fresh_bucket):
    blob = fresh_bucket.blob("sd/one")
    blob.upload_from_string(b"first")
    generation = fresh_bucket.get_blob("sd/one").generation
    blob.delete()
    assert list(gcs.list_blobs(fresh_bucket)) == []  # normal listings do not show it
    listed = list(gcs.list_blobs(fresh_bucket, soft_deleted=True))
    assert [(b.name, b.generation) for b in listed] == [("sd/one", generation)]
    got = fresh_bucket.get_blob("sd/one", generation=generation, soft_deleted=True)
    assert got is not None and got.size == 5
    restored = fresh_bucket.restore_blob("sd/one", generation=generation)
    assert restored.generation != generation
    assert fresh_bucket.blob("sd/one").download_as_bytes() == b"first"
    assert list(gcs.list_blobs(fresh_bucket, soft_deleted=True)) == []


def test_versioning_keeps_noncurrent_generations(gcs, fresh_bucket):
    fresh_bucket.versioning_enabled = True
    fresh_bucket.patch()
    blob = fresh_bucket.blob("v")
    blob.upload_from_string(b"1")
    first = fresh_bucket.get_blob("v").generation
    blob.upload_from_string(b"22")
    names = [(b.name, b.generation) for b in gcs.list_blobs(fresh_bucket, versions=True)]
    assert len(names) == 2 and names[0] == ("v", first)
    assert [b.name for b in gcs.list_blobs(fresh_bucket)] == ["v"]
    old = fresh_bucket.blob("v", generation=first)
    assert old.download_as_bytes() == b"1"


def test_retention_policy_refuses_delete_and_overwrite(gcs, fresh_bucket):
    fresh_bucket.retention_period = 3600
    fresh_bucket.patch()
    assert gcs.get_bucket(fresh_bucket.name).retention_period == 3600
    blob = fresh_bucket.blob("kept")
    blob.upload_from_string(b"x")
    with pytest.raises(gexc.Forbidden):
        blob.delete()
    with pytest.raises(gexc.Forbidden):
        blob.upload_from_string(b"y")
