"""TLS trust: an HTTPS endpoint whose certificate comes from a throwaway CA (tests/lib/tls.py;
the proxy of tests/lib/hostile.py terminates TLS in front of the emulator).

* by default the certificate is refused: the mount fails with a message naming the problem;
* --ca-file FILE, -o ca_file=FILE, SSL_CERT_FILE and SSL_CERT_DIR make it trusted;
* a CA file holding another authority is refused all the same.
"""

import pytest

from tests.integration.mount import Mount, MountError
from tests.lib.hostile import HostileProxy
from tests.lib.synth import first_mismatch
from tests.lib.tls import make_ca

pytestmark = pytest.mark.emulator_only

BUCKET = "tls"
SEED = 9
SIZE = 50_000


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/f/:4:{SIZE}:{SEED}"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    ca = make_ca(root / "ca")
    other = make_ca(root / "other", name="some other CA")
    server = ca.issue(root / "server", "127.0.0.1")
    return ca, other, server


@pytest.fixture(scope="module")
def https(emulator, pki):
    _, _, server = pki
    with HostileProxy(emulator.url, tls=(server.cert, server.key)) as proxy:
        assert proxy.url.startswith("https://")
        yield proxy


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def generations(gcs, emulator):
    return {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs()}


def mount_and_read(https, generations, args):
    mount = Mount(https, BUCKET, args=args)
    try:
        data = (mount.path / "f" / "00000001").read_bytes()
        assert len(data) == SIZE
        assert first_mismatch("f/00000001", generations["f/00000001"], SEED, 0, data) is None
        assert mount.error_lines() == []
        assert mount.unmount() == 0
    finally:
        mount.close()


def refused(https, args):
    """The mount fails; returns its log."""
    with pytest.raises(MountError) as err:
        Mount(https, BUCKET, args=args).close()
    return str(err.value)


def test_untrusted_certificate_is_refused(https, clean_env):
    failures = https.tls_failures
    log = refused(https, [])
    assert "certificate" in log.lower() or "SSL" in log
    assert "--ca-file" in log  # the way out is named
    assert https.tls_failures > failures  # the handshake was refused by fluxfs, not skipped


def test_ca_file_option(https, clean_env, pki, generations):
    ca, _, _ = pki
    mount_and_read(https, generations, ["--ca-file", str(ca.cert)])


def test_ca_file_mount_option(https, clean_env, pki, generations):
    ca, _, _ = pki
    mount_and_read(https, generations, ["-o", f"ca_file={ca.cert}"])


def test_ssl_cert_file_environment(https, clean_env, pki, generations):
    ca, _, _ = pki
    clean_env.setenv("SSL_CERT_FILE", str(ca.cert))
    mount_and_read(https, generations, [])


def test_ssl_cert_dir_environment(https, clean_env, pki, generations):
    ca, _, _ = pki
    clean_env.setenv("SSL_CERT_DIR", str(ca.dir))
    mount_and_read(https, generations, [])


def test_another_authority_is_refused(https, clean_env, pki):
    _, other, _ = pki
    refused(https, ["--ca-file", str(other.cert)])
    clean_env.setenv("SSL_CERT_FILE", str(other.cert))
    refused(https, [])


def test_missing_ca_file_is_a_clear_error(https, clean_env, tmp_path):
    log = refused(https, ["--ca-file", str(tmp_path / "nowhere.pem")])
    assert "ca-file" in log and "nowhere.pem" in log
