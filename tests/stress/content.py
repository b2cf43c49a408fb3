"""Self-describing file contents for the stress test (tests/stress/stress.py).

Every byte string the stress test writes is a sequence of *segments*, each a 32-byte header and
a body derived from the header, so that any byte string read back (through the mount or from
the bucket) can be judged on its own, with no record of what was written:

    header = "FXS1", writer id, version, segment index, body length, flags (u32 each, little
             endian), the CRC-32 of those 24 bytes, 4 zero bytes
    body   = 4 KiB blocks, each the block's (writer, version, segment, block number) as 4 u32
             and then 4080 bytes drawn from Random("fxs:writer:version:segment"); the last block
             cut to the body length

A file is one writer's one version: segments 0, 1, 2, ... of the same (writer, version), each
whole. Flags:

* END_OK: a version may end after this segment. The last segment of every write has it, and so
  has each segment after which the writer calls fsync() (fsync commits on demand: what the
  bucket then holds is that prefix, itself a whole version).
* SCRATCH: written and then cut off again with ftruncate() before anything may commit; it must
  never be seen in the bucket.

So a *whole version* (what the bucket may hold) is: empty, or segments 0..n-1 of one
(writer, version), every one complete, none SCRATCH, the last with END_OK, nothing after it.
A torn upload (a commit of a file still being written, a part missing or doubled, bytes of two
versions mixed, a scratch segment that leaked) fails that test with a reason naming the byte
offset. A *partial* read (a reader of a file being written on the same mount) may also stop
anywhere: every byte it has must still be where that version puts it.

Content ids name what a byte string is: ``(writer, version, segments)`` for a whole version,
EMPTY for zero bytes, ABSENT for no object at all.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib

import google_crc32c

MAGIC = b"FXS1"
HEADER = struct.Struct("<4sIIIII")  # magic, writer, version, segment, body length, flags
HEADER_SIZE = 32
END_OK = 1
SCRATCH = 2
BLOCK = 4096
BLOCK_STAMP = struct.Struct("<IIII")

ABSENT = "absent"
EMPTY = "empty"


def segment_header(writer: int, version: int, index: int, length: int, flags: int) -> bytes:
    head = HEADER.pack(MAGIC, writer, version, index, length, flags)
    return head + struct.pack("<II", zlib.crc32(head), 0)


def segment_body(writer: int, version: int, index: int, length: int) -> bytes:
    if length == 0:
        return b""
    pad = random.Random(f"fxs:{writer}:{version}:{index}").randbytes(BLOCK)[BLOCK_STAMP.size:]
    blocks = (length + BLOCK - 1) // BLOCK
    body = b"".join(BLOCK_STAMP.pack(writer, version, index, j) + pad for j in range(blocks))
    return body[:length]


def segment_bytes(writer: int, version: int, index: int, length: int, flags: int) -> bytes:
    return segment_header(writer, version, index, length, flags) + \
        segment_body(writer, version, index, length)


def version_bytes(writer: int, version: int, segments) -> bytes:
    """The bytes of segments (a list of (body length, flags)) of one version."""
    return b"".join(segment_bytes(writer, version, i, length, flags)
                    for i, (length, flags) in enumerate(segments))


def describe(cid) -> str:
    if cid in (ABSENT, EMPTY):
        return cid
    writer, version, segments = cid
    return f"writer {writer} version {version} ({segments} segment{'s' * (segments != 1)})"


def fingerprint(data: bytes) -> tuple[int, str]:
    """(size, CRC32C as Cloud Storage shows it: base64 of the big-endian value)."""
    crc = google_crc32c.value(data)
    return len(data), base64.b64encode(crc.to_bytes(4, "big")).decode()


def parse(data: bytes, *, partial: bool = False):
    """Judges data: returns (content id, None) for a whole version, (None, why) otherwise.

    partial=True accepts any prefix of what one writer was writing (a read of a file being
    written): then a cut segment, a cut header and a missing END_OK are fine, and the id
    returned for an incomplete prefix is ("partial", writer, version, complete segments)."""
    if not data:
        return EMPTY, None
    size = len(data)
    pos = 0
    index = 0
    first = None
    flags = 0
    while pos < size:
        if size - pos < HEADER_SIZE:
            if partial and _header_prefix_ok(data[pos:], first, index):
                return ("partial", *(first or (None, None)), index), None
            return None, (f"{size - pos} bytes at offset {pos} are a cut segment header "
                          f"(object of {size} bytes)")
        head = data[pos:pos + 24]
        magic, writer, version, seg, length, flags = HEADER.unpack(head)
        crc, zero = struct.unpack_from("<II", data, pos + 24)
        if magic != MAGIC or crc != zlib.crc32(head) or zero != 0:
            return None, (f"no segment header at offset {pos} (object of {size} bytes; there: "
                          f"{data[pos:pos + 32].hex()})")
        if first is None:
            first = (writer, version)
        elif (writer, version) != first:
            return None, (f"offset {pos}: a segment of writer {writer} version {version} after "
                          f"segments of writer {first[0]} version {first[1]} (versions mixed)")
        if seg != index:
            return None, f"offset {pos}: segment {seg} where segment {index} belongs"
        if flags & SCRATCH and not partial:
            return None, (f"offset {pos}: segment {seg} of writer {writer} version {version} is "
                          "a scratch segment, cut off by ftruncate() before the file was closed")
        start = pos + HEADER_SIZE
        have = min(length, size - start)
        expected = segment_body(writer, version, seg, length)
        if data[start:start + have] != expected[:have]:
            bad = _first_difference(data[start:start + have], expected[:have])
            return None, (f"segment {seg} of writer {writer} version {version}: wrong byte at "
                          f"offset {start + bad}")
        if have < length:
            if partial:
                return ("partial", writer, version, index), None
            return None, (f"segment {seg} of writer {writer} version {version} is cut after "
                          f"{have} of {length} bytes: the object ends at {size} bytes (a torn "
                          "upload)")
        if flags & SCRATCH and start + length < size:
            return None, f"offset {pos}: a scratch segment that is not the last"
        pos = start + length
        index += 1
    if not flags & END_OK or flags & SCRATCH:
        if partial:
            return ("partial", *first, index), None
        return None, (f"ends after segment {index - 1} of writer {first[0]} version {first[1]} "
                      f"({size} bytes), where that writer's version does not end: a commit of "
                      "a file still being written (torn)")
    return (first[0], first[1], index), None


def _first_difference(a: bytes, b: bytes) -> int:
    step = 1 << 16
    at = next(i for i in range(0, len(a), step) if a[i:i + step] != b[i:i + step])
    return at + next(i for i in range(step) if a[at + i] != b[at + i])


def _header_prefix_ok(tail: bytes, first, index: int) -> bool:
    if not MAGIC.startswith(tail[:4]):
        return False
    if first is None or len(tail) < 16:
        return True
    _, writer, version, seg = struct.unpack_from("<4sIII", tail)
    return (writer, version) == tuple(first) and seg == index
