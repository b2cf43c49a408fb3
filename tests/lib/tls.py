"""Throwaway certificate authorities for TLS tests, made with the openssl command line.

    ca = make_ca(tmp_path / "ca")              # ca.cert (PEM), ca.dir (hashed, for SSL_CERT_DIR)
    server = ca.issue(tmp_path / "srv", "127.0.0.1")   # server.cert, server.key
    HostileProxy(emulator.url, tls=(server.cert, server.key))   # https://127.0.0.1:PORT

Keys are EC P-256 (fast to make); certificates are valid for a day. Nothing here is trusted by
the system: a client that verifies certificates refuses them unless told to trust ca.cert.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args, cwd=None):
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=cwd)


@dataclass
class Issued:
    cert: Path
    key: Path


@dataclass
class CertificateAuthority:
    cert: Path
    key: Path
    dir: Path  # a directory holding the CA under its subject-hash name (openssl rehash)

    def issue(self, where: Path, host: str, *more_hosts: str) -> Issued:
        """A server certificate for host (and more_hosts: further names or addresses)."""
        where.mkdir(parents=True, exist_ok=True)
        key, csr, cert = where / "server.key", where / "server.csr", where / "server.cert"
        ext = where / "ext.cnf"
        san = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}"
                       for h in (host, *more_hosts))
        ext.write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                       "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
        _openssl("req", "-new", "-key", str(key), "-subj", f"/CN={host}", "-out", str(csr))
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key),
                 "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(cert))
        return Issued(cert, key)


def make_ca(where: Path, name: str = "fluxfs test CA") -> CertificateAuthority:
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is needed for the TLS tests")
    where.mkdir(parents=True, exist_ok=True)
    key, cert = where / "ca.key", where / "ca.cert"
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    _openssl("req", "-new", "-x509", "-key", str(key), "-subj", f"/CN={name}", "-days", "1",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", str(cert))
    hashed = where / "hashed"
    hashed.mkdir(exist_ok=True)
    shutil.copy(cert, hashed / "ca.pem")
    _openssl("rehash", str(hashed))
    return CertificateAuthority(cert, key, hashed)
