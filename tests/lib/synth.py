"""Synthetic object content, the same function as tests/emulator/synth.h, for Python tests.

Objects made by ``gcs-emulator --populate`` (and any synthetic upload) hold bytes that are a
pure function of (name, generation, seed), so a test can check every byte it reads::

    from tests.lib.synth import synth_bytes, verify
    data = blob.download_as_bytes(start=1000, end=1999)
    assert verify(blob.name, blob.generation, seed, 1000, data)

Definition (synth.h), all arithmetic mod 2**64::

    key     = fnv1a64(name_utf8) ^ seed ^ (generation * 0x9E3779B97F4A7C15)
    word[k] = splitmix64(key + k)
    byte[i] = (word[i // 8] >> (8 * (i % 8))) & 0xff

numpy (if installed) fills ~1 GB/s; without it a pure-Python loop gives the same bytes, slowly.
Run ``python tests/lib/synth.py dump NAME GENERATION SEED OFFSET LENGTH [--pure]`` to print bytes
as hex (the C unit tests compare against it), or ``python tests/lib/synth.py selftest``.
"""

from __future__ import annotations

import struct
import sys

try:
    import numpy as _np
except ImportError:  # pure Python fallback below
    _np = None

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
# Words per numpy batch: bounds the temporary arrays (8 MiB of output per batch).
_BATCH_WORDS = 1 << 20


def _utf8(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode("utf-8")


def fnv1a64(data: str | bytes) -> int:
    """FNV-1a 64-bit over the name's UTF-8 bytes."""
    h = 0xCBF29CE484222325
    for b in _utf8(data):
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def splitmix64(x: int) -> int:
    z = (x + GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & MASK64
    return z ^ (z >> 31)


def synth_key(name: str | bytes, generation: int, seed: int = 0) -> int:
    """The content key of (name, generation, seed); generation may be any int64."""
    return fnv1a64(name) ^ (seed & MASK64) ^ ((generation * GOLDEN) & MASK64)


def _words_pure(key: int, first: int, count: int) -> bytes:
    pack = struct.Struct("<Q").pack
    return b"".join(pack(splitmix64((key + k) & MASK64)) for k in range(first, first + count))


def _words_numpy(key: int, first: int, count: int) -> bytes:
    out = []
    with _np.errstate(over="ignore"):
        for start in range(first, first + count, _BATCH_WORDS):
            n = min(_BATCH_WORDS, first + count - start)
            base = _np.uint64((key + start + GOLDEN) & MASK64)
            z = _np.arange(n, dtype=_np.uint64) + base
            z = (z ^ (z >> _np.uint64(30))) * _np.uint64(_MIX1)
            z = (z ^ (z >> _np.uint64(27))) * _np.uint64(_MIX2)
            z ^= z >> _np.uint64(31)
            out.append(z.astype("<u8", copy=False).tobytes())
    return b"".join(out)


def synth_fill(key: int, offset: int, length: int, pure: bool = False) -> bytes:
    """Bytes [offset, offset + length) of the stream with this key."""
    if length <= 0:
        return b""
    if offset < 0:
        raise ValueError("offset must be >= 0")
    first = offset // 8
    last = (offset + length + 7) // 8
    words = _words_pure if pure or _np is None else _words_numpy
    raw = words(key, first, last - first)
    skip = offset - first * 8
    return raw[skip : skip + length]


def synth_bytes(name: str | bytes, generation: int, seed: int, offset: int, length: int,
                pure: bool = False) -> bytes:
    """Bytes [offset, offset + length) of the synthetic object (name, generation, seed)."""
    return synth_fill(synth_key(name, generation, seed), offset, length, pure=pure)


def first_mismatch(name: str | bytes, generation: int, seed: int, offset: int,
                   data: bytes) -> int | None:
    """Offset (in the object) of the first byte of data that is wrong, or None if all match."""
    want = synth_bytes(name, generation, seed, offset, len(data))
    if want == data:
        return None
    view_a, view_b = memoryview(want), memoryview(bytes(data))
    for i in range(len(data)):
        if view_a[i] != view_b[i]:
            return offset + i
    return offset + len(data)  # unreachable: equal lengths and unequal bytes


def verify(name: str | bytes, generation: int, seed: int, offset: int, data: bytes) -> bool:
    """True when data is exactly bytes [offset, offset + len(data)) of the synthetic object."""
    return first_mismatch(name, generation, seed, offset, data) is None


def _selftest() -> int:
    cases = [("train/00000042", 1700000000123456, 42), ("", 1, 0), ("\u00e9t\u00e9", -1, MASK64)]
    for name, gen, seed in cases:
        for offset in range(0, 17):
            for length in (0, 1, 7, 8, 9, 100):
                a = synth_bytes(name, gen, seed, offset, length, pure=True)
                b = synth_bytes(name, gen, seed, offset, length)
                assert a == b, (name, gen, seed, offset, length)
                assert len(a) == length
        whole = synth_bytes(name, gen, seed, 0, 64)
        assert verify(name, gen, seed, 3, whole[3:40])
        broken = bytearray(whole[3:40])
        broken[10] ^= 1
        assert first_mismatch(name, gen, seed, 3, bytes(broken)) == 13
    print("synth selftest ok (numpy: %s)" % ("yes" if _np is not None else "no"))
    return 0


def _main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "selftest":
        return _selftest()
    if len(argv) >= 7 and argv[1] == "dump":
        name = argv[2].encode("utf-8", "surrogateescape")
        gen, seed, offset, length = (int(v, 0) for v in argv[3:7])
        pure = "--pure" in argv[7:]
        print(synth_bytes(name, gen, seed, offset, length, pure=pure).hex())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
