"""Helpers shared by the fidelity suites: checksums as Cloud Storage encodes them, payloads,
raw HTTP helpers, and the synthetic content formula (tests/lib/synth.py) re-exported.
"""

import base64
import hashlib
import random
import struct
import urllib.parse

import google_crc32c

from tests.lib.synth import synth_bytes  # noqa: F401  (re-exported for the suites)

MiB = 1024 * 1024
KiB = 1024


def crc32c_b64(data: bytes) -> str:
    """Base64 of the big-endian CRC32C, as in the crc32c field and x-goog-hash."""
    return base64.b64encode(struct.pack(">I", google_crc32c.value(data))).decode()


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def payload(size: int, seed: int = 0) -> bytes:
    """Deterministic pseudo-random bytes (incompressible, no repeating pattern)."""
    return random.Random(seed).randbytes(size)


def qname(name: str) -> str:
    """An object name as one URL path segment (JSON API: '/' becomes %2F)."""
    return urllib.parse.quote(name, safe="")


def xml_path(name: str) -> str:
    """An object name in an XML API path: '/' stays, everything else reserved is encoded.

    '.' and '..' segments are percent-encoded so that HTTP libraries (urllib3 normalizes dot
    segments) send them unchanged; the server decodes them back to the same name."""
    segments = urllib.parse.quote(name, safe="/").split("/")
    return "/".join(s.replace(".", "%2E") if s in (".", "..") else s for s in segments)


def parse_goog_hash(header: str) -> dict:
    """'crc32c=AAAA==,md5=BBBB==' (possibly several headers joined with ', ') -> dict."""
    out = {}
    for part in header.split(","):
        part = part.strip()
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out
