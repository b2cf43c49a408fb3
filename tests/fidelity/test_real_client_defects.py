"""Fidelity: defects real clients found (issue 21): rewriteTo with a null body (rclone 1.60),
XML ?acl, objects.move, V4 signed URLs the emulator can judge, managedFolders, and the folders
resource of buckets with a hierarchical namespace. Raw HTTP where Google's Python client has no
call for it; each test states what Cloud Storage answers.
"""

import gzip
import json
import urllib.error
import zlib
import urllib.request

import pytest

from tests.fidelity.common import qname
from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only
GZIP = {"Content-Encoding": "gzip"}


def http(emulator, method, path, body=None, headers=None):
    req = urllib.request.Request(emulator.url + path, data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


JSON = {"Content-Type": "application/json"}


def test_rewrite_with_null_body_copies(emulator, fresh_bucket):
    fresh_bucket.blob("src").upload_from_string(b"hello", content_type="text/plain")
    status, _, body = http(emulator, "POST",
                           f"/storage/v1/b/{fresh_bucket.name}/o/src/rewriteTo/b/"
                           f"{fresh_bucket.name}/o/dst", b"null", JSON)
    assert status == 200, body
    answer = json.loads(body)
    assert answer["done"] is True
    assert answer["resource"]["contentType"] == "text/plain"
    assert fresh_bucket.blob("dst").download_as_bytes() == b"hello"


def test_xml_acl_never_answers_the_bytes(emulator, fresh_bucket):
    fresh_bucket.blob("o").upload_from_string(b"secret-bytes")
    status, _, body = http(emulator, "GET", f"/{fresh_bucket.name}/o?acl")
    assert status == 501
    assert b"<Code>NotImplemented</Code>" in body
    assert b"secret-bytes" not in body
    # A PUT ?acl must not overwrite the object with the ACL document.
    status, _, _ = http(emulator, "PUT", f"/{fresh_bucket.name}/o?acl", b"<AccessControlList/>")
    assert status == 501
    assert fresh_bucket.blob("o").download_as_bytes() == b"secret-bytes"


@pytest.mark.parametrize("hns", [False, True], ids=["flat", "hns"])
def test_objects_move(emulator, gcs, hns):
    name = unique_bucket_name()
    body = {"name": name}
    if hns:
        body["hierarchicalNamespace"] = {"enabled": True}
        body["iamConfiguration"] = {"uniformBucketLevelAccess": {"enabled": True}}
    status, _, answer = http(emulator, "POST", "/storage/v1/b?project=p",
                             json.dumps(body).encode(), JSON)
    assert status == 200, answer
    bucket = gcs.bucket(name)
    bucket.blob("a/src").upload_from_string(b"moved bytes", content_type="text/x-moved")
    status, _, answer = http(emulator, "POST",
                             f"/storage/v1/b/{name}/o/{qname('a/src')}/moveTo/o/{qname('b/dst')}")
    assert status == 200, answer
    assert json.loads(answer)["name"] == "b/dst"
    assert bucket.get_blob("a/src") is None
    moved = bucket.get_blob("b/dst")
    assert moved.download_as_bytes() == b"moved bytes"
    assert moved.content_type == "text/x-moved"
    # The source is gone: a second move is 404, a move onto a precondition fails 412.
    status, _, _ = http(emulator, "POST",
                        f"/storage/v1/b/{name}/o/{qname('a/src')}/moveTo/o/x")
    assert status == 404
    bucket.blob("c").upload_from_string(b"c")
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{name}/o/c/moveTo/o/{qname('b/dst')}"
                        "?ifGenerationMatch=0")
    assert status == 412
    assert bucket.blob("b/dst").download_as_bytes() == b"moved bytes"
    # Source preconditions: a wrong ifSourceGenerationMatch is 412 and moves nothing; the
    # right one moves.
    generation = bucket.get_blob("c").generation
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{name}/o/c/moveTo/o/d"
                        f"?ifSourceGenerationMatch={generation + 1}")
    assert status == 412
    assert bucket.get_blob("c") is not None and bucket.get_blob("d") is None
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{name}/o/c/moveTo/o/d"
                        f"?ifSourceGenerationMatch={generation}&ifGenerationMatch=0")
    assert status == 200
    assert bucket.get_blob("c") is None and bucket.blob("d").download_as_bytes() == b"c"


def signed_query(signature, algorithm="GOOG4-RSA-SHA256", date="20990101T000000Z"):
    return ("?X-Goog-Algorithm=" + algorithm +
            "&X-Goog-Credential=sa%40p.iam.gserviceaccount.com%2F20990101%2Fauto%2Fstorage"
            "%2Fgoog4_request&X-Goog-Date=" + date + "&X-Goog-Expires=900"
            "&X-Goog-SignedHeaders=host&X-Goog-Signature=" + signature)


def test_signed_url_with_a_malformed_signature_is_refused(emulator, fresh_bucket):
    fresh_bucket.blob("o").upload_from_string(b"bytes")
    path = f"/{fresh_bucket.name}/o"
    good = "ab" * 256  # the shape of an RSA-2048 signature, hex
    status, _, body = http(emulator, "GET", path + signed_query(good))
    assert status == 200 and body == b"bytes"
    for bad in ("zz" * 256, "AB" * 256, "ab" * 255 + "a", "ab" * 32):
        status, _, body = http(emulator, "GET", path + signed_query(bad))
        assert status == 403, bad
        assert b"SignatureDoesNotMatch" in body
    status, _, body = http(emulator, "GET", path + signed_query(good, date="20200101T000000Z"))
    assert status == 400 and b"ExpiredToken" in body


def test_managed_folders_list_is_empty(emulator, fresh_bucket):
    status, _, body = http(emulator, "GET", f"/storage/v1/b/{fresh_bucket.name}/managedFolders")
    assert status == 200
    assert json.loads(body).get("items", []) == []
    status, _, _ = http(emulator, "GET", f"/storage/v1/b/{unique_bucket_name()}/managedFolders")
    assert status == 404


@pytest.fixture
def hns_bucket(emulator, gcs):
    name = unique_bucket_name()
    body = {"name": name, "hierarchicalNamespace": {"enabled": True},
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}}}
    status, _, answer = http(emulator, "POST", "/storage/v1/b?project=p",
                             json.dumps(body).encode(), JSON)
    assert status == 200, answer
    return gcs.bucket(name)


def folders(emulator, bucket, query=""):
    status, _, body = http(emulator, "GET", f"/storage/v1/b/{bucket}/folders{query}")
    assert status == 200, body
    return [f["name"] for f in json.loads(body).get("items", [])]


def test_folders_insert_get_list_delete(emulator, hns_bucket):
    b = hns_bucket.name
    status, _, body = http(emulator, "POST", f"/storage/v1/b/{b}/folders",
                           json.dumps({"name": "x/"}).encode(), JSON)
    assert status == 200, body
    assert json.loads(body)["kind"] == "storage#folder"
    # A missing parent needs recursive=true.
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{b}/folders",
                        json.dumps({"name": "p/q/"}).encode(), JSON)
    assert status == 404
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{b}/folders?recursive=true",
                        json.dumps({"name": "p/q/"}).encode(), JSON)
    assert status == 200
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{b}/folders",
                        json.dumps({"name": "x/"}).encode(), JSON)
    assert status == 409
    hns_bucket.blob("x/y/z").upload_from_string(b"z")  # creates x/y/
    assert folders(emulator, b) == ["p/", "p/q/", "x/", "x/y/"]
    assert folders(emulator, b, "?delimiter=/") == ["p/", "x/"]
    assert folders(emulator, b, "?prefix=x/&delimiter=/") == ["x/y/"]
    status, _, body = http(emulator, "GET", f"/storage/v1/b/{b}/folders/{qname('x/y/')}")
    assert status == 200 and json.loads(body)["name"] == "x/y/"
    # Not empty: 409; empty: deleted.
    status, _, _ = http(emulator, "DELETE", f"/storage/v1/b/{b}/folders/{qname('x/y/')}")
    assert status == 409
    hns_bucket.blob("x/y/z").delete()
    status, _, _ = http(emulator, "DELETE", f"/storage/v1/b/{b}/folders/{qname('x/y/')}")
    assert status == 204
    status, _, _ = http(emulator, "GET", f"/storage/v1/b/{b}/folders/{qname('x/y/')}")
    assert status == 404


def test_folders_on_a_flat_bucket_are_refused(emulator, fresh_bucket):
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{fresh_bucket.name}/folders",
                        json.dumps({"name": "x/"}).encode(), JSON)
    assert status == 400


def test_folder_rename_moves_everything_below(emulator, hns_bucket):
    b = hns_bucket.name
    for name in ("tmp/a", "tmp/sub/b", "tmpx/untouched"):
        hns_bucket.blob(name).upload_from_string(name.encode())
    status, _, body = http(emulator, "POST", f"/storage/v1/b/{b}/folders/{qname('tmp/')}"
                           f"/renameTo/folders/{qname('final/')}")
    assert status == 200, body
    op = json.loads(body)
    assert op["kind"] == "storage#operation" and op["done"] is True
    op_id = op["name"].rsplit("/", 1)[1]
    status, _, body = http(emulator, "GET", f"/storage/v1/b/{b}/operations/{op_id}")
    assert status == 200 and json.loads(body)["done"] is True
    names = sorted(blob.name for blob in hns_bucket.client.list_blobs(b))
    assert names == ["final/a", "final/sub/b", "tmpx/untouched"]
    assert hns_bucket.blob("final/sub/b").download_as_bytes() == b"tmp/sub/b"
    assert folders(emulator, b) == ["final/", "final/sub/", "tmpx/"]
    # Onto an existing folder: 409, nothing moved.
    status, _, _ = http(emulator, "POST", f"/storage/v1/b/{b}/folders/{qname('final/')}"
                        f"/renameTo/folders/{qname('tmpx/')}")
    assert status == 409
    assert hns_bucket.get_blob("final/a") is not None


# ------------------------------------------------ Content-Encoding: gzip on request bodies


def test_gzip_request_bodies_are_inflated(emulator, fresh_bucket):
    """gzip-in-flight (gcloud storage cp -J): media, multipart and resumable request bodies
    sent gzipped are stored as the bytes they inflate to; the object has no contentEncoding."""
    b = fresh_bucket.name
    data = b"0123456789abcdef" * 40_000
    status, _, body = http(emulator, "POST", f"/upload/storage/v1/b/{b}/o?uploadType=media"
                           "&name=media", gzip.compress(data), GZIP)
    assert status == 200, body
    assert json.loads(body)["size"] == str(len(data))
    boundary = "gz-boundary"
    multipart = (f"--{boundary}\r\nContent-Type: application/json\r\n\r\n"
                 '{"name": "multi", "contentType": "text/plain"}\r\n'
                 f"--{boundary}\r\nContent-Type: text/plain\r\n\r\n").encode() + data + \
        f"\r\n--{boundary}--\r\n".encode()
    status, _, body = http(emulator, "POST", f"/upload/storage/v1/b/{b}/o?uploadType=multipart",
                           gzip.compress(multipart),
                           dict(GZIP, **{"Content-Type":
                                         f"multipart/related; boundary={boundary}"}))
    assert status == 200, body
    # Resumable: each chunk gzipped on its own; Content-Range counts inflated bytes.
    status, headers, body = http(emulator, "POST", f"/upload/storage/v1/b/{b}/o?"
                                 "uploadType=resumable&name=resumable", b"{}", JSON)
    assert status == 200, body
    session = headers["Location"].split("://", 1)[1].split("/", 1)[1]
    half = 256 * 1024
    status, headers, _ = http(emulator, "PUT", "/" + session, gzip.compress(data[:half]),
                              dict(GZIP, **{"Content-Range": f"bytes 0-{half - 1}/*"}))
    assert status == 308 and headers["Range"] == f"bytes=0-{half - 1}"
    status, _, body = http(emulator, "PUT", "/" + session, gzip.compress(data[half:]),
                           dict(GZIP, **{"Content-Range":
                                         f"bytes {half}-{len(data) - 1}/{len(data)}"}))
    assert status == 200, body
    for name in ("media", "multi", "resumable"):
        blob = fresh_bucket.get_blob(name)
        assert blob.content_encoding is None
        assert blob.download_as_bytes() == data, name


def test_gzip_bomb_and_broken_gzip_are_refused(emulator, fresh_bucket):
    b = fresh_bucket.name
    # 300 MiB of zeros in 300 KB of gzip: past the inflation cap (256 MiB) -> 413, not stored.
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(squeeze.compress(bytes(1 << 20)) for _ in range(300)) + squeeze.flush()
    status, _, body = http(emulator, "POST", f"/upload/storage/v1/b/{b}/o?uploadType=media"
                           "&name=bomb", bomb, GZIP)
    assert status == 413 and b"uploadTooLarge" in body
    for broken in (b"not gzip at all", gzip.compress(b"hello")[:12],
                   gzip.compress(b"hello") + b"trailing garbage"):
        status, _, body = http(emulator, "POST", f"/upload/storage/v1/b/{b}/o?"
                               "uploadType=media&name=broken", broken, GZIP)
        assert status == 400 and b"badContent" in body, broken
    assert [blob.name for blob in fresh_bucket.client.list_blobs(b)] == []
    emulator.check_alive()
    # Members one after another are one stream (what `cat a.gz b.gz` gives).
    status, _, body = http(emulator, "POST", f"/upload/storage/v1/b/{b}/o?uploadType=media"
                           "&name=two", gzip.compress(b"hel") + gzip.compress(b"lo"), GZIP)
    assert status == 200, body
    assert fresh_bucket.blob("two").download_as_bytes() == b"hello"


def test_xml_put_content_encoding_is_the_objects_metadata(emulator, fresh_bucket):
    """In the XML API Content-Encoding on a PUT is object metadata (gsutil cp -z): the gzip
    bytes are stored as sent, and served with Content-Encoding: gzip."""
    packed = gzip.compress(b"stored compressed")
    status, _, _ = http(emulator, "PUT", f"/{fresh_bucket.name}/z", packed, GZIP)
    assert status == 200
    blob = fresh_bucket.get_blob("z")
    assert blob.content_encoding == "gzip" and blob.size == len(packed)


# ------------------------------------------------------------------ XML resumable uploads


def xml_resumable_start(emulator, bucket, name, headers=None):
    status, answer, body = http(emulator, "POST", f"/{bucket}/{qname(name)}", b"",
                                dict({"x-goog-resumable": "start",
                                      "Content-Type": "text/x-resumable",
                                      "x-goog-meta-origin": "xml"}, **(headers or {})))
    assert status == 201, body
    location = answer["Location"]
    assert location.startswith(emulator.url + f"/{bucket}/") and "upload_id=" in location
    return location[len(emulator.url):]


def test_xml_resumable_upload_in_chunks(emulator, fresh_bucket):
    """XML API resumable upload as Cloud Storage documents it: POST with x-goog-resumable:
    start -> 201 + Location; PUT chunks with Content-Range -> 308 + Range; a status query;
    the last chunk -> 200 with the object's headers."""
    b = fresh_bucket.name
    unit = 256 * 1024
    data = bytes(range(256)) * (3 * unit // 256) + b"tail"
    session = xml_resumable_start(emulator, b, "dir/x y.bin")
    # Nothing persisted yet: a status query answers 308 without Range.
    status, headers, _ = http(emulator, "PUT", session, b"", {"Content-Range": "bytes */*"})
    assert status == 308 and headers.get("Range") is None
    status, headers, _ = http(emulator, "PUT", session, data[:unit],
                              {"Content-Range": f"bytes 0-{unit - 1}/*"})
    assert status == 308 and headers["Range"] == f"bytes=0-{unit - 1}"
    # A chunk that is not a whole number of 256 KiB units keeps only the whole units.
    status, headers, _ = http(emulator, "PUT", session, data[unit:2 * unit + 100],
                              {"Content-Range": f"bytes {unit}-{2 * unit + 99}/*"})
    assert status == 308 and headers["Range"] == f"bytes=0-{2 * unit - 1}"
    status, headers, _ = http(emulator, "PUT", session, b"",
                              {"Content-Range": f"bytes */{len(data)}"})
    assert status == 308 and headers["Range"] == f"bytes=0-{2 * unit - 1}"
    status, headers, body = http(emulator, "PUT", session, data[2 * unit:],
                                 {"Content-Range": f"bytes {2 * unit}-{len(data) - 1}/"
                                                   f"{len(data)}"})
    assert status == 200, body
    assert int(headers["x-goog-generation"]) > 0
    assert int(headers["x-goog-stored-content-length"]) == len(data)
    blob = fresh_bucket.get_blob("dir/x y.bin")
    assert blob.download_as_bytes() == data
    assert blob.content_type == "text/x-resumable"
    assert blob.metadata == {"origin": "xml"}
    # Asking again after the end answers the object again.
    status, _, _ = http(emulator, "PUT", session, b"", {"Content-Range": f"bytes */{len(data)}"})
    assert status == 200
    ops = emulator.stats()["ops"]
    assert ops["xml.resumable_initiate"] >= 1 and ops["xml.resumable_chunk"] >= 5


def test_xml_resumable_whole_object_cancel_and_errors(emulator, fresh_bucket):
    b = fresh_bucket.name
    # One PUT without Content-Range carries the whole object.
    session = xml_resumable_start(emulator, b, "whole")
    status, _, _ = http(emulator, "PUT", session, b"all at once")
    assert status == 200
    assert fresh_bucket.blob("whole").download_as_bytes() == b"all at once"
    # DELETE cancels: 499, and the session is gone.
    session = xml_resumable_start(emulator, b, "cancelled")
    status, _, _ = http(emulator, "DELETE", session)
    assert status == 499
    status, _, body = http(emulator, "PUT", session, b"x", {"Content-Range": "bytes 0-0/1"})
    assert status == 404 and b"NoSuchUpload" in body
    assert fresh_bucket.get_blob("cancelled") is None
    # A chunk beyond what is persisted is refused.
    session = xml_resumable_start(emulator, b, "gap")
    status, _, _ = http(emulator, "PUT", session, b"x", {"Content-Range": "bytes 10-10/11"})
    assert status == 400
    # Into a missing bucket: 404 at the start; a failing precondition: 412 at the end.
    status, _, body = http(emulator, "POST", f"/{unique_bucket_name()}/o", b"",
                           {"x-goog-resumable": "start"})
    assert status == 404 and b"NoSuchBucket" in body
    session = xml_resumable_start(emulator, b, "whole", {"x-goog-if-generation-match": "0"})
    status, _, body = http(emulator, "PUT", session, b"second", {"Content-Range": "bytes 0-5/6"})
    assert status == 412 and b"PreconditionFailed" in body
    assert fresh_bucket.blob("whole").download_as_bytes() == b"all at once"
