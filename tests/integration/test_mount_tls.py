"""fluxfs against the emulator's own HTTPS (--tls-cert/--tls-key, a throwaway CA from
tests/lib/tls.py): it mounts and reads, every byte checked, trusting the CA through --ca-file or
SSL_CERT_FILE, and refuses the server otherwise. (tests/integration/test_tls.py covers fluxfs's
trust options in depth through a TLS-terminating proxy.)"""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.mount import Mount, MountError, find_fluxfs_binary
from tests.lib.emulator import Emulator
from tests.lib.synth import first_mismatch
pytestmark = [pytest.mark.emulator_only,
              pytest.mark.skipif(shutil.which("openssl") is None,
                                 reason="openssl is not installed")]

BUCKET = "tls"
COUNT, SIZE, SEED = 3, 5 * 1024 * 1024 + 7, 11


@pytest.fixture(scope="module")
def emulator():
    emu = Emulator(["--populate", f"{BUCKET}/d/:{COUNT}:{SIZE}:{SEED}"], tls=True)
    try:
        yield emu
        emu.check_alive()
    finally:
        emu.close()


def fluxfs_help() -> str:
    proc = subprocess.run([str(find_fluxfs_binary()), "--help"], capture_output=True,
                          text=True, timeout=30)
    return proc.stdout + proc.stderr


def read_and_check(mount, gcs):
    names = sorted(p.name for p in (mount.path / "d").iterdir())
    assert len(names) == COUNT
    for blob in gcs.bucket(BUCKET).list_blobs():
        data = (mount.path / blob.name).read_bytes()
        assert len(data) == SIZE
        bad = first_mismatch(blob.name, blob.generation, SEED, 0, data)
        assert bad is None, f"{blob.name}: wrong byte at {bad}"


def test_untrusted_server_is_refused(emulator, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(MountError) as e:
        Mount(emulator, BUCKET)
    assert "certificate" in str(e.value).lower()


def test_reads_over_https_with_ca_file(emulator, gcs):
    if "--ca-file" not in fluxfs_help():
        pytest.skip("fluxfs has no --ca-file yet (issue 15)")
    before = emulator.stats()["bytes_out"]
    mount = Mount(emulator, BUCKET, args=["--ca-file", str(emulator.ca_file)])
    try:
        read_and_check(mount, gcs)
        assert mount.unmount() == 0
    finally:
        mount.close()
    assert emulator.stats()["bytes_out"] - before >= COUNT * SIZE


def test_reads_over_https_with_ssl_cert_file(emulator, gcs, monkeypatch):
    if "SSL_CERT_FILE" not in fluxfs_help():
        pytest.skip("fluxfs does not read SSL_CERT_FILE yet (issue 15)")
    monkeypatch.setenv("SSL_CERT_FILE", str(emulator.ca_file))
    mount = Mount(emulator, BUCKET)
    try:
        read_and_check(mount, gcs)
        assert mount.unmount() == 0
    finally:
        mount.close()


def test_reads_with_a_large_ca_bundle_and_counts_connections(emulator, gcs, tmp_path):
    """The CA file is parsed once per mount into a store every connection shares (issue 27): a
    bundle of the system's authorities with the emulator's CA last still verifies, and the
    status file counts the connections (TLS handshakes) opened."""
    system = "/etc/ssl/certs/ca-certificates.crt"
    bundle = tmp_path / "bundle.pem"
    head = Path(system).read_bytes() if Path(system).exists() else b""
    bundle.write_bytes(head + b"\n" + emulator.ca_file.read_bytes())
    mount = Mount(emulator, BUCKET, args=["--ca-file", str(bundle)])
    try:
        read_and_check(mount, gcs)
        status = dict(line.split(":", 1) for line in
                      (mount.path / ".fluxfs" / "status").read_text().splitlines())
        assert int(status["http_connections_opened"]) >= 1, status
        assert mount.unmount() == 0
    finally:
        mount.close()
