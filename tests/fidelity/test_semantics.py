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
