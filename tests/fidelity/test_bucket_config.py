"""Issue 21's test bed: request bodies the emulator must survive, bucket configuration
(storage class, location, soft delete, versioning, retention, event-based holds, hierarchical
namespace, autoclass) as Cloud Storage has it, soft-deleted and noncurrent objects, and the
ledger at /_emulator/bill. Google's Python client where it can say it; raw HTTP where it cannot
(hostile bodies, the emulator's own endpoints).

Only meaningful for gcs-emulator: skipped when FIDELITY_SERVER selects another server.
"""

import pytest
import requests

from tests.fidelity.common import qname

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
