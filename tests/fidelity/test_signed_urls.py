"""Fidelity: V4 signed URLs verified against keys the emulator was given (issue 21).

The emulator starts with --signing-key (a service account JSON key file made here) and
--hmac-key. Google's Python client signs URLs with that service account (GOOG4-RSA-SHA256);
HMAC-signed URLs (GOOG4-HMAC-SHA256) are made here by Cloud Storage's documented V4 signing
process, as Python's client has no HMAC signer. A good signature is served; a tampered
signature, path, query parameter or header, another key, another account and an expired URL
are refused. Without keys (every other module) only the URL's shape is checked
(test_real_client_defects.py).
"""

import datetime
import hashlib
import hmac
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.fidelity.common import qname
from tests.lib.emulator import unique_bucket_name

crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
service_account = pytest.importorskip("google.oauth2.service_account")

pytestmark = pytest.mark.emulator_only

EMAIL = "signer@fluxfs-test.iam.gserviceaccount.com"
HMAC_ID = "GOOG1EXAMPLEACCESSID"
HMAC_SECRET = "c2VjcmV0LW9mLXRoZS1obWFjLWtleQ"


def make_key_info(email: str) -> dict:
    key = crypto.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return {"type": "service_account", "project_id": "fluxfs-test", "private_key_id": "k1",
            "private_key": pem, "client_email": email, "client_id": "1",
            "token_uri": "https://oauth2.googleapis.com/token"}


@pytest.fixture(scope="module")
def key_info():
    return make_key_info(EMAIL)


@pytest.fixture(scope="module")
def emulator_args(key_info, tmp_path_factory):
    path = tmp_path_factory.mktemp("signing") / "key.json"
    path.write_text(json.dumps(key_info))
    return ["--signing-key", str(path), "--hmac-key", f"{HMAC_ID}:{HMAC_SECRET}"]


@pytest.fixture(scope="module")
def signer(key_info):
    return service_account.Credentials.from_service_account_info(key_info)


@pytest.fixture
def bucket(gcs):
    b = gcs.create_bucket(unique_bucket_name("signed"))
    b.blob("dir/obj one").upload_from_string(b"signed bytes")
    b.blob("other").upload_from_string(b"other bytes")
    return b


def fetch(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def signed(emulator, blob, signer, **kw):
    return blob.generate_signed_url(version="v4", expiration=datetime.timedelta(minutes=15),
                                    api_access_endpoint=emulator.url, credentials=signer, **kw)


def with_param(url: str, name: str, value: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, value if k == name else v) for k, v in query]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def test_rsa_signed_get_and_put(emulator, bucket, signer):
    url = signed(emulator, bucket.blob("dir/obj one"), signer)
    assert fetch(url) == (200, b"signed bytes")
    put = signed(emulator, bucket.blob("uploaded"), signer, method="PUT",
                 content_type="text/plain")
    status, body = fetch(put, "PUT", b"put through a signed URL", {"Content-Type": "text/plain"})
    assert status == 200, body
    assert bucket.blob("uploaded").download_as_bytes() == b"put through a signed URL"


def test_rsa_tampering_is_refused(emulator, bucket, signer):
    url = signed(emulator, bucket.blob("dir/obj one"), signer)
    signature = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["X-Goog-Signature"][0]
    flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    cases = {
        "signature": with_param(url, "X-Goog-Signature", flipped),
        "path": url.replace(f"/{qname('dir/obj one')}?".replace("%2F", "/"), "/other?"),
        "expires": with_param(url, "X-Goog-Expires", "901"),
        "credential": with_param(url, "X-Goog-Credential",
                                 urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
                                 ["X-Goog-Credential"][0].replace("signer@", "intruder@")),
    }
    assert cases["path"] != url
    for what, bad in cases.items():
        status, body = fetch(bad)
        assert status == 403, what
        assert b"SignatureDoesNotMatch" in body, what
        assert b"signed bytes" not in body and b"other bytes" not in body
    # A URL for GET does not serve a DELETE.
    status, _ = fetch(url, "DELETE")
    assert status == 403
    assert bucket.get_blob("dir/obj one") is not None
    # The shape alone no longer passes once a key is configured.
    status, _ = fetch(with_param(url, "X-Goog-Signature", "ab" * 256))
    assert status == 403


def test_rsa_another_key_of_the_same_account_is_refused(emulator, bucket):
    stranger = service_account.Credentials.from_service_account_info(make_key_info(EMAIL))
    status, body = fetch(signed(emulator, bucket.blob("dir/obj one"), stranger))
    assert status == 403 and b"SignatureDoesNotMatch" in body


def hmac_signed_url(emulator, method, bucket, name, access_id=HMAC_ID, secret=HMAC_SECRET,
                    signed_at=None, expires=900):
    """Cloud Storage's V4 signing process with an HMAC key, written out."""
    now = signed_at or datetime.datetime.now(datetime.timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/auto/storage/goog4_request"
    host = emulator.url.split("://", 1)[1]
    path = f"/{bucket}/" + urllib.parse.quote(name, safe="/~")
    query = {"X-Goog-Algorithm": "GOOG4-HMAC-SHA256",
             "X-Goog-Credential": f"{access_id}/{scope}", "X-Goog-Date": stamp,
             "X-Goog-Expires": str(expires), "X-Goog-SignedHeaders": "host"}
    canonical_query = "&".join(sorted(f"{urllib.parse.quote(k, safe='~')}="
                                      f"{urllib.parse.quote(v, safe='~')}"
                                      for k, v in query.items()))
    canonical = "\n".join([method, path, canonical_query, f"host:{host}\n", "host",
                           "UNSIGNED-PAYLOAD"])
    to_sign = "\n".join(["GOOG4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("GOOG4" + secret).encode()
    for part in (day, "auto", "storage", "goog4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"{emulator.url}{path}?{canonical_query}&X-Goog-Signature={signature}"


def test_hmac_signed_urls(emulator, bucket):
    assert fetch(hmac_signed_url(emulator, "GET", bucket.name, "dir/obj one")) == \
        (200, b"signed bytes")
    status, body = fetch(hmac_signed_url(emulator, "PUT", bucket.name, "by-hmac"), "PUT", b"h")
    assert status == 200, body
    assert bucket.blob("by-hmac").download_as_bytes() == b"h"
    for bad in (hmac_signed_url(emulator, "GET", bucket.name, "dir/obj one", secret="wrong"),
                hmac_signed_url(emulator, "GET", bucket.name, "dir/obj one",
                                access_id="GOOG1OTHER"),
                hmac_signed_url(emulator, "PUT", bucket.name, "dir/obj one")):  # GET with it
        status, body = fetch(bad)
        assert status == 403 and b"SignatureDoesNotMatch" in body


def test_expired_urls_are_refused(emulator, bucket, signer):
    """Last in the module: it moves the emulator's clock an hour on. Cloud Storage answers an
    expired signed URL with 400 ExpiredToken (a good signature) and so do we."""
    rsa_url = signed(emulator, bucket.blob("dir/obj one"), signer)
    hmac_url = hmac_signed_url(emulator, "GET", bucket.name, "dir/obj one")
    assert fetch(rsa_url)[0] == 200 and fetch(hmac_url)[0] == 200
    emulator.advance_clock(3600)
    for url in (rsa_url, hmac_url):
        status, body = fetch(url)
        assert status == 400 and b"ExpiredToken" in body
        assert b"signed bytes" not in body
    # Expired and tampered: the signature is judged first.
    status, _ = fetch(with_param(rsa_url, "X-Goog-Signature", "0" * 512))
    assert status == 403
