"""Fidelity over TLS: the emulator serving HTTPS (--tls-cert/--tls-key) with a throwaway CA
(tests/lib/tls.py), driven by Google's Python client, gcloud storage and gsutil (which
hard-codes https), each trusting only that CA. Also the flags' own errors."""

import hashlib
import os
import shutil
import socket
import ssl
import subprocess
import urllib.request

import pytest

from tests.fidelity.common import MiB, crc32c_b64, md5_b64, payload
from tests.fidelity.test_gcloud import GCLOUD, Gcloud
from tests.lib.emulator import Emulator, find_emulator_binary, unique_bucket_name
from tests.lib.tls import make_ca

pytestmark = [pytest.mark.emulator_only,
              pytest.mark.skipif(shutil.which("openssl") is None,
                                 reason="openssl is not installed")]

GSUTIL = shutil.which("gsutil")


@pytest.fixture(scope="module")
def emulator():
    """This module's emulator serves HTTPS (overrides tests/conftest.py's)."""
    emu = Emulator(["--populate", "synth/x/:2:3M:5"], tls=True)
    try:
        yield emu
        emu.check_alive()
    finally:
        emu.close()


def test_python_client_over_tls(emulator, gcs):
    assert emulator.url.startswith("https://")
    bucket = gcs.create_bucket(unique_bucket_name("tls"))
    small = payload(100_000, 1)
    big = payload(9 * MiB + 11, 2)  # over 8 MiB: a resumable upload
    bucket.blob("small").upload_from_string(small)                      # multipart
    bucket.blob("big", chunk_size=256 * 1024).upload_from_string(big)   # resumable
    blob = bucket.get_blob("big")
    assert blob.crc32c == crc32c_b64(big) and blob.md5_hash == md5_b64(big)
    assert blob.media_link.startswith(emulator.url + "/download/")
    assert bucket.blob("small").download_as_bytes() == small
    assert bucket.blob("big").download_as_bytes(start=1000, end=1999) == big[1000:2000]
    assert sorted(b.name for b in bucket.list_blobs()) == ["big", "small"]
    bucket.blob("big").delete()
    stats = emulator.stats()
    assert stats["ops"]["objects.insert"] >= 2 and stats["ops"]["objects.resumable_chunk"] >= 1


def test_untrusted_and_plain_clients_are_refused(emulator):
    # A client that does not trust the CA fails the handshake...
    with pytest.raises(urllib.error.URLError) as e:
        urllib.request.urlopen(emulator.url + "/storage/v1/b", timeout=10,
                               context=ssl.create_default_context())
    assert isinstance(e.value.reason, ssl.SSLCertVerificationError)
    # ... plain HTTP to the TLS port gets no HTTP answer ...
    host, port = emulator.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET /storage/v1/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        try:
            answer = s.recv(100)
        except ConnectionResetError:
            answer = b""
    assert not answer.startswith(b"HTTP/")
    # ... and the server keeps serving trusting clients.
    assert emulator.stats() is not None


def test_tls_flag_errors(tmp_path):
    binary = find_emulator_binary()
    one_ca, other_ca = make_ca(tmp_path / "ca1"), make_ca(tmp_path / "ca2")
    one = one_ca.issue(tmp_path / "one", "127.0.0.1")
    other = other_ca.issue(tmp_path / "other", "127.0.0.1")

    def run(*args):
        return subprocess.run([str(binary), "--port", "0", *args], capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)

    proc = run("--tls-cert", str(one.cert))
    assert proc.returncode == 2 and "go together" in proc.stderr
    proc = run("--tls-cert", str(one.cert), "--tls-key", str(other.key))
    assert proc.returncode == 2 and "is not the key of" in proc.stderr
    proc = run("--tls-cert", str(one.key), "--tls-key", str(one.key))
    assert proc.returncode == 2 and "no PEM certificate" in proc.stderr
    proc = run("--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(one.key))
    assert proc.returncode == 2 and "missing.pem" in proc.stderr
    assert proc.stdout == ""
    # The right pair starts and prints an https URL.
    with Emulator(["--tls-cert", str(one.cert), "--tls-key", str(one.key)],
                  ca_file=one_ca.cert) as emu:
        assert emu.url.startswith("https://")
        assert emu.stats()["requests"] == 0


@pytest.mark.skipif(GCLOUD is None, reason="gcloud is not installed")
def test_gcloud_over_tls(emulator, gcs, tmp_path):
    bucket = gcs.create_bucket(unique_bucket_name("gtls"))
    gcloud = Gcloud(emulator.url, tmp_path / "cfg", ca_file=str(emulator.ca_file))
    small, big = payload(5000, 3), payload(20 * MiB + 1, 4)
    (tmp_path / "small").write_bytes(small)
    (tmp_path / "big").write_bytes(big)
    gcloud.run("cp", str(tmp_path / "small"), str(tmp_path / "big"), f"gs://{bucket.name}/d/")
    assert bucket.get_blob("d/big").crc32c == crc32c_b64(big)
    listing = gcloud.run("ls", "-l", "-r", f"gs://{bucket.name}").stdout
    assert "TOTAL: 2 objects" in listing
    (tmp_path / "back").mkdir()
    gcloud.run("cp", "-r", f"gs://{bucket.name}/d", str(tmp_path / "back"))
    assert (tmp_path / "back" / "d" / "big").read_bytes() == big
    assert (tmp_path / "back" / "d" / "small").read_bytes() == small
    gcloud.run("rm", "-r", f"gs://{bucket.name}/d")
    assert list(bucket.list_blobs()) == []
    # Without the CA gcloud refuses the server.
    plain = Gcloud(emulator.url, tmp_path / "cfg2")
    proc = plain.run("ls", f"gs://{bucket.name}", check=False,
                     env={"CLOUDSDK_CORE_HTTP_TIMEOUT": "10"}, timeout=120)
    assert proc.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in proc.stderr or "certificate" in proc.stderr.lower()


@pytest.mark.skipif(GSUTIL is None or GCLOUD is None, reason="gsutil is not installed")
@pytest.mark.parametrize("api", ["json", "xml"])
def test_gsutil_over_tls(emulator, gcs, tmp_path, api):
    """gsutil has no http endpoint setting at all: the JSON API host and port come from a boto
    config, the scheme is always https. With prefer_api = xml (boto underneath) a file over
    gsutil's 8 MiB resumable threshold goes up as an XML API resumable upload
    (x-goog-resumable: start, then PUT chunks)."""
    bucket = gcs.create_bucket(unique_bucket_name("gsutil"))
    host, port = emulator.host.rsplit(":", 1)
    boto = tmp_path / "boto.cfg"
    boto.write_text(f"[Credentials]\ngs_json_host = {host}\ngs_json_port = {port}\n"
                    # boto (the XML API) checks the certificate's DNS names only, not its IP.
                    f"gs_host = localhost\ngs_port = {port}\n"
                    "[Boto]\nnum_retries = 0\n"
                    f"[GSUtil]\nprefer_api = {api}\ndefault_project_id = fluxfs-test\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSDK_")}
    env.update({"BOTO_CONFIG": str(boto), "CLOUDSDK_CONFIG": str(tmp_path / "cfg"),
                "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
                "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": str(emulator.ca_file),
                "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true"})

    def gsutil(*args):
        proc = subprocess.run([GSUTIL, *args], capture_output=True, text=True, env=env,
                              timeout=180, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"gsutil {' '.join(args)}\n{proc.stderr[-3000:]}"
        return proc.stdout

    data = payload(9 * MiB + 5, 6)
    (tmp_path / "f").write_bytes(data)
    before = emulator.stats()["ops"]
    gsutil("cp", str(tmp_path / "f"), f"gs://{bucket.name}/f")
    if api == "xml":
        after = emulator.stats()["ops"]
        assert after["xml.resumable_initiate"] == before["xml.resumable_initiate"] + 1
        assert after["xml.resumable_chunk"] > before["xml.resumable_chunk"]
    assert bucket.get_blob("f").md5_hash == md5_b64(data)
    if api == "xml":
        # The rest through boto stops at gsutil's own bug: a download formats gs_port from the
        # boto config with %d and fails on the string (TypeError, before any request).
        assert bucket.blob("f").download_as_bytes() == data
        return
    gsutil("cp", f"gs://{bucket.name}/f", str(tmp_path / "back"))
    assert hashlib.sha256((tmp_path / "back").read_bytes()).digest() == \
        hashlib.sha256(data).digest()
    assert f"gs://{bucket.name}/f" in gsutil("ls", "-l", f"gs://{bucket.name}")
    hashes = gsutil("hash", "-c", f"gs://{bucket.name}/f")
    assert crc32c_b64(data) in hashes
    gsutil("rm", f"gs://{bucket.name}/f")
    assert bucket.get_blob("f") is None
