"""Helpers shared by the fidelity suites: checksums as Cloud Storage encodes them, payloads,
raw HTTP helpers and a Python port of the emulator's synthetic content (tests/emulator/synth.h).
"""

import base64
import hashlib
import random
import struct
import urllib.parse

import google_crc32c

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


# --- synthetic content: same formula as tests/emulator/synth.h ------------------------------

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & _M64
    return h


def _splitmix64(x: int) -> int:
    z = (x + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def synth_key(name: str, generation: int, seed: int) -> int:
    return _fnv1a64(name.encode()) ^ seed ^ ((generation * _GOLDEN) & _M64)


def synth_bytes(name: str, generation: int, seed: int, offset: int, length: int) -> bytes:
    """Bytes [offset, offset + length) of a synthetic object."""
    key = synth_key(name, generation, seed)
    first_word = offset // 8
    last_word = (offset + length + 7) // 8
    words = [_splitmix64((key + k) & _M64) for k in range(first_word, last_word)]
    blob = struct.pack(f"<{len(words)}Q", *words)
    start = offset - first_word * 8
    return blob[start:start + length]
