"""Fidelity: Cloud Storage semantics the emulator must give every client (issue 12).

Raw HTTP where the wire form matters (multipart line breaks, boundary quoting, the discovery
document's resumable path, storageLayout), Google's Python client elsewhere. Each test states
what Cloud Storage answers.
"""

import json
import urllib.error
import urllib.request

import pytest

from tests.fidelity.common import crc32c_b64, md5_b64, payload, qname
from tests.lib.emulator import unique_bucket_name

pytestmark = pytest.mark.emulator_only


def http(emulator, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request; errors are answers, not exceptions."""
    req = urllib.request.Request(emulator.url + path, data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def multipart_body(boundary: str, eol: bytes, metadata: dict, media: bytes) -> bytes:
    b = boundary.encode()
    return (b"--" + b + eol + b"Content-Type: application/json" + eol + b"MIME-Version: 1.0" +
            eol + eol + json.dumps(metadata).encode() + eol + b"--" + b + eol +
            b"Content-Type: application/octet-stream" + eol + eol + media + eol + b"--" + b +
            b"--" + eol)


# ------------------------------------------------------------------------------- uploads


@pytest.mark.parametrize("quote", ["", '"', "'"])
@pytest.mark.parametrize("eol", [b"\r\n", b"\n"], ids=["crlf", "lf"])
def test_multipart_boundary_quoting_and_line_breaks(emulator, fresh_bucket, quote, eol):
    """apitools (gcloud) writes boundary='...' and bare LF; RFC 2046 says CRLF. Media ending
    in the other style's line break keeps it: the style is decided once per body."""
    boundary = "===============7655778735559969686=="
    media = payload(5000, 3) + (b"\r" if eol == b"\n" else b"\n")
    body = multipart_body(boundary, eol, {"name": "m/obj", "contentType": "text/x-test"}, media)
    status, _, answer = http(
        emulator, "POST", f"/upload/storage/v1/b/{fresh_bucket.name}/o?uploadType=multipart",
        body, {"Content-Type": f"multipart/related; boundary={quote}{boundary}{quote}"})
    assert status == 200, answer
    resource = json.loads(answer)
    assert resource["size"] == str(len(media))
    assert resource["contentType"] == "text/x-test"
    assert resource["md5Hash"] == md5_b64(media)
    assert fresh_bucket.blob("m/obj").download_as_bytes() == media


def test_multipart_unterminated_quote_is_400(emulator, fresh_bucket):
    body = multipart_body("xyz", b"\n", {"name": "o"}, b"data")
    status, _, _ = http(emulator, "POST",
                        f"/upload/storage/v1/b/{fresh_bucket.name}/o?uploadType=multipart", body,
                        {"Content-Type": "multipart/related; boundary='xyz"})
    assert status == 400
    assert fresh_bucket.get_blob("o") is None


def test_resumable_path_of_the_discovery_document(emulator, fresh_bucket):
    """POST /resumable/upload/storage/v1/b/B/o starts a session like /upload/storage/v1."""
    status, headers, _ = http(
        emulator, "POST",
        f"/resumable/upload/storage/v1/b/{fresh_bucket.name}/o?uploadType=resumable",
        json.dumps({"name": "r"}).encode(), {"Content-Type": "application/json"})
    assert status == 200
    location = headers["Location"]
    data = payload(300_000, 9)
    path = location[len(emulator.url):]
    status, _, answer = http(emulator, "PUT", path, data,
                             {"Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}"})
    assert status == 200, answer
    assert json.loads(answer)["crc32c"] == crc32c_b64(data)
    assert fresh_bucket.blob("r").download_as_bytes() == data


def test_storage_layout(emulator, fresh_bucket):
    status, _, answer = http(emulator, "GET", f"/storage/v1/b/{fresh_bucket.name}/storageLayout")
    assert status == 200
    layout = json.loads(answer)
    assert layout["kind"] == "storage#storageLayout"
    assert layout["bucket"] == fresh_bucket.name
    assert layout["hierarchicalNamespace"] == {"enabled": False}
    status, _, _ = http(emulator, "GET", f"/storage/v1/b/{unique_bucket_name()}/storageLayout")
    assert status == 404


@pytest.mark.parametrize("kind", ["media", "multipart", "resumable", "xml", "xml-multipart",
                                  "copy", "compose"])
def test_writes_into_a_missing_bucket_are_404(emulator, fresh_bucket, kind):
    """Cloud Storage answers 404 and creates no bucket (the emulator used to create it)."""
    missing = unique_bucket_name("missing")
    fresh_bucket.blob("src").upload_from_string(b"source")
    if kind == "media":
        status, _, _ = http(emulator, "POST",
                            f"/upload/storage/v1/b/{missing}/o?uploadType=media&name=x", b"abc")
    elif kind == "multipart":
        status, _, _ = http(emulator, "POST",
                            f"/upload/storage/v1/b/{missing}/o?uploadType=multipart",
                            multipart_body("bb", b"\r\n", {"name": "x"}, b"abc"),
                            {"Content-Type": "multipart/related; boundary=bb"})
    elif kind == "resumable":
        status, _, _ = http(emulator, "POST",
                            f"/upload/storage/v1/b/{missing}/o?uploadType=resumable&name=x", b"")
    elif kind == "xml":
        status, _, _ = http(emulator, "PUT", f"/{missing}/x", b"abc")
    elif kind == "xml-multipart":
        status, _, _ = http(emulator, "POST", f"/{missing}/x?uploads", b"")
    elif kind == "copy":
        status, _, _ = http(emulator, "POST",
                            f"/storage/v1/b/{fresh_bucket.name}/o/src/copyTo/b/{missing}/o/x", b"")
    else:
        status, _, _ = http(emulator, "POST", f"/storage/v1/b/{missing}/o/x/compose",
                            json.dumps({"sourceObjects": [{"name": "src"}]}).encode(),
                            {"Content-Type": "application/json"})
    assert status == 404
    status, _, _ = http(emulator, "GET", f"/storage/v1/b/{missing}")
    assert status == 404


# ------------------------------------------------------------------------------- metadata


def resource(emulator, bucket, name):
    status, _, body = http(emulator, "GET", f"/storage/v1/b/{bucket}/o/{qname(name)}")
    assert status == 200, body
    return json.loads(body)


def test_patch_null_clears_fields(emulator, fresh_bucket):
    blob = fresh_bucket.blob("p")
    blob.cache_control = "no-cache"
    blob.content_disposition = "attachment"
    blob.content_language = "fr"
    blob.metadata = {"a": "1", "b": "2"}
    blob.upload_from_string(b"x", content_type="text/plain")
    # Google's client sends JSON null for an attribute set to None.
    blob.cache_control = None
    blob.content_type = None
    blob.patch()
    got = resource(emulator, fresh_bucket.name, "p")
    assert "cacheControl" not in got
    assert got["contentType"] == "application/octet-stream"
    assert got["contentDisposition"] == "attachment"  # left out: kept
    assert got["metageneration"] == "2"
    # Metadata merges key by key: null removes one key, an empty object changes nothing,
    # "metadata": null clears them all.
    body = json.dumps({"metadata": {"a": None, "c": "3"}}).encode()
    status, _, answer = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}/o/p", body,
                             {"Content-Type": "application/json"})
    assert status == 200, answer
    assert json.loads(answer)["metadata"] == {"b": "2", "c": "3"}
    status, _, answer = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}/o/p",
                             b'{"metadata": {}}', {"Content-Type": "application/json"})
    assert status == 200
    assert json.loads(answer)["metadata"] == {"b": "2", "c": "3"}
    status, _, answer = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}/o/p",
                             b'{"metadata": null}', {"Content-Type": "application/json"})
    assert status == 200
    assert "metadata" not in json.loads(answer)


def test_update_replaces_writable_metadata(emulator, fresh_bucket):
    blob = fresh_bucket.blob("u")
    blob.cache_control = "no-cache"
    blob.content_language = "fr"
    blob.metadata = {"a": "1"}
    blob.upload_from_string(b"x", content_type="text/plain")
    body = json.dumps({"contentType": "text/csv", "contentDisposition": "inline"}).encode()
    status, _, answer = http(emulator, "PUT", f"/storage/v1/b/{fresh_bucket.name}/o/u", body,
                             {"Content-Type": "application/json"})
    assert status == 200, answer
    got = json.loads(answer)
    assert got["contentType"] == "text/csv"
    assert got["contentDisposition"] == "inline"
    for gone in ("cacheControl", "contentLanguage", "metadata", "temporaryHold"):
        assert gone not in got, gone
    assert got["metageneration"] == "2"


def test_custom_time_only_moves_later(emulator, fresh_bucket):
    import datetime

    from google.api_core.exceptions import BadRequest

    blob = fresh_bucket.blob("t")
    blob.upload_from_string(b"x")
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    blob.custom_time = when
    blob.patch()
    assert fresh_bucket.get_blob("t").custom_time == when
    assert resource(emulator, fresh_bucket.name, "t")["customTime"] == "2026-01-02T03:04:05.678Z"
    blob.custom_time = when - datetime.timedelta(days=1)
    with pytest.raises(BadRequest):
        blob.patch()
    status, _, _ = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}/o/t",
                        b'{"customTime": null}', {"Content-Type": "application/json"})
    assert status == 400
    status, _, _ = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}/o/t",
                        b'{"customTime": "yesterday"}', {"Content-Type": "application/json"})
    assert status == 400
    got = fresh_bucket.get_blob("t")
    assert got.custom_time == when
    assert got.metageneration == 2  # the refused patches published nothing
    # Later with an offset is fine.
    status, _, answer = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}/o/t",
                             b'{"customTime": "2026-06-01T12:00:00+02:00"}',
                             {"Content-Type": "application/json"})
    assert status == 200
    assert json.loads(answer)["customTime"] == "2026-06-01T10:00:00.000Z"


@pytest.mark.parametrize("hold", ["temporary_hold", "event_based_hold"])
def test_held_object_cannot_be_deleted_or_overwritten(emulator, fresh_bucket, hold):
    from google.api_core.exceptions import Forbidden

    blob = fresh_bucket.blob("h")
    blob.upload_from_string(b"original")
    setattr(blob, hold, True)
    blob.patch()
    assert getattr(fresh_bucket.get_blob("h"), hold) is True
    with pytest.raises(Forbidden):
        blob.delete()
    with pytest.raises(Forbidden):
        fresh_bucket.blob("h").upload_from_string(b"overwrite")            # multipart
    with pytest.raises(Forbidden):
        fresh_bucket.blob("h", chunk_size=256 * 1024).upload_from_string(  # resumable
            payload(600_000, 1))
    fresh_bucket.blob("src").upload_from_string(b"src")
    with pytest.raises(Forbidden):
        fresh_bucket.copy_blob(fresh_bucket.blob("src"), fresh_bucket, "h")
    with pytest.raises(Forbidden):
        fresh_bucket.blob("h").compose([fresh_bucket.blob("src")])
    status, _, body = http(emulator, "PUT", f"/{fresh_bucket.name}/h", b"xml overwrite")
    assert status == 403 and b"AccessDenied" in body
    status, _, _ = http(emulator, "DELETE", f"/{fresh_bucket.name}/h")
    assert status == 403
    # Metadata still changes; the bytes never did.
    blob.metadata = {"k": "v"}
    blob.patch()
    assert fresh_bucket.blob("h").download_as_bytes() == b"original"
    setattr(blob, hold, False)
    blob.patch()
    blob.delete()
    assert fresh_bucket.get_blob("h") is None


def test_hold_given_at_upload(emulator, fresh_bucket):
    from google.api_core.exceptions import Forbidden

    body = multipart_body("bb", b"\r\n", {"name": "born-held", "temporaryHold": True,
                                           "customTime": "2026-03-04T05:06:07Z"}, b"x")
    status, _, answer = http(
        emulator, "POST", f"/upload/storage/v1/b/{fresh_bucket.name}/o?uploadType=multipart",
        body, {"Content-Type": "multipart/related; boundary=bb"})
    assert status == 200, answer
    got = json.loads(answer)
    assert got["temporaryHold"] is True
    assert got["customTime"] == "2026-03-04T05:06:07.000Z"
    assert fresh_bucket.get_blob("born-held").temporary_hold is True
    with pytest.raises(Forbidden):
        fresh_bucket.blob("born-held").delete()


# ------------------------------------------------------------------------------- listing


GLOB_NAMES = ["a.txt", "b.bin", "d/c.txt", "d/e/f.txt", "d/e/g.bin", "x/y.txt", "é.txt"]


@pytest.mark.parametrize("glob,want", [
    ("*.txt", ["a.txt", "é.txt"]),
    ("**.txt", ["a.txt", "d/c.txt", "d/e/f.txt", "x/y.txt", "é.txt"]),
    ("d/**/*.bin", ["d/e/g.bin"]),
    ("**/f.txt", ["d/e/f.txt"]),
    ("{a,b}.*", ["a.txt", "b.bin"]),
    ("[a-c].*", ["a.txt", "b.bin"]),
    ("[!a-c].txt", ["é.txt"]),
    ("?.txt", ["a.txt", "é.txt"]),
    ("nothing*", []),
])
def test_match_glob(gcs, fresh_bucket, glob, want):
    for name in GLOB_NAMES:
        fresh_bucket.blob(name).upload_from_string(b"")
    got = [b.name for b in gcs.list_blobs(fresh_bucket, match_glob=glob)]
    assert got == want
    # Small pages give the same answer.
    assert [b.name for b in gcs.list_blobs(fresh_bucket, match_glob=glob, page_size=1)] == want


def test_match_glob_with_delimiter_and_errors(emulator, gcs, fresh_bucket):
    for name in GLOB_NAMES:
        fresh_bucket.blob(name).upload_from_string(b"")
    it = gcs.list_blobs(fresh_bucket, match_glob="**.bin", delimiter="/")
    assert [b.name for b in it] == ["b.bin"]
    assert it.prefixes == {"d/"}
    status, _, body = http(emulator, "GET", f"/storage/v1/b/{fresh_bucket.name}/o?matchGlob=%5Ba")
    assert status == 400 and b"matchGlob" in body


def test_soft_deleted_is_empty_when_soft_delete_is_off(emulator, gcs, fresh_bucket):
    """The emulator's buckets have soft delete off (retentionDurationSeconds 0): deleted objects
    are gone, so softDeleted=true lists nothing and finds nothing, never live objects."""
    status, _, _ = http(emulator, "PATCH", f"/storage/v1/b/{fresh_bucket.name}",
                        body=json.dumps({"softDeletePolicy": {"retentionDurationSeconds": "0"}})
                        .encode(), headers={"Content-Type": "application/json"})
    assert status == 200
    blob = fresh_bucket.blob("live")
    blob.upload_from_string(b"x")
    gone = fresh_bucket.blob("gone")
    gone.upload_from_string(b"y")
    generation = fresh_bucket.get_blob("gone").generation
    gone.delete()
    assert list(gcs.list_blobs(fresh_bucket, soft_deleted=True)) == []
    assert fresh_bucket.get_blob("gone", generation=generation, soft_deleted=True) is None
    assert fresh_bucket.get_blob("live", generation=blob.generation, soft_deleted=True) is None
    status, _, answer = http(emulator, "GET", f"/storage/v1/b/{fresh_bucket.name}")
    assert json.loads(answer)["softDeletePolicy"]["retentionDurationSeconds"] == "0"
    status, _, _ = http(emulator, "GET",
                        f"/storage/v1/b/{fresh_bucket.name}/o?softDeleted=true&versions=true")
    assert status == 400
    status, _, _ = http(emulator, "GET", f"/storage/v1/b/{unique_bucket_name()}/o?softDeleted=true")
    assert status == 404
