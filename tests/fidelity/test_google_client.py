"""Fidelity: Google's google-cloud-storage Python client against the emulator, unchanged.

Runs against gcs-emulator by default; FIDELITY_SERVER=fake-gcs-server runs the same tests
against fake-gcs-server (tests marked emulator_only are then skipped).
"""

import io
import json
import math
import os
import threading
import types

import pytest
import requests
from google.api_core import exceptions as gexc
from google.cloud.storage import transfer_manager

from tests.fidelity.common import (
    KiB,
    MiB,
    crc32c_b64,
    md5_b64,
    parse_goog_hash,
    payload,
    qname,
    synth_bytes,
    xml_path,
)

SYNTH_BUCKET = "fidelity-synth"
SYNTH_PREFIX = "train/"
SYNTH_COUNT = 40
SYNTH_SIZE = 10_000
SYNTH_SEED = 7
BIG_NAME = "big/00000000"
BIG_SIZE = 300 * MiB  # synthetic: costs the emulator nothing


@pytest.fixture(scope="module")
def emulator_args():
    return [
        "--populate", f"{SYNTH_BUCKET}/{SYNTH_PREFIX}:{SYNTH_COUNT}:{SYNTH_SIZE}:{SYNTH_SEED}",
        "--populate", f"{SYNTH_BUCKET}/big/:1:{BIG_SIZE}:{SYNTH_SEED}",
    ]


def put(bucket, name, data=b"x", **kw):
    blob = bucket.blob(name)
    blob.upload_from_string(data, **kw)
    return blob


def names_of(blobs):
    return [b.name for b in blobs]


def stats_delta(before, after, key):
    return after.get(key, 0) - before.get(key, 0)


def ops_delta(before, after, op):
    return after["ops"].get(op, 0) - before["ops"].get(op, 0)


# ============================================================================================
# Buckets
# ============================================================================================


def test_bucket_insert_get_list_conflict(gcs, fresh_bucket):
    got = gcs.get_bucket(fresh_bucket.name)
    assert got.name == fresh_bucket.name
    assert got.metageneration is not None and got.metageneration >= 1
    listed = [b.name for b in gcs.list_buckets()]
    assert fresh_bucket.name in listed
    assert listed == sorted(listed)
    with pytest.raises(gexc.Conflict):
        gcs.create_bucket(fresh_bucket.name)


def test_bucket_test_iam_permissions_grants_what_is_asked(fresh_bucket):
    asked = ["storage.objects.get", "storage.objects.create", "storage.objects.delete"]
    assert sorted(fresh_bucket.test_iam_permissions(asked)) == sorted(asked)


def test_unknown_bucket_get_is_404(gcs):
    with pytest.raises(gexc.NotFound):
        gcs.get_bucket("fidelity-never-created-bucket-0001")


# ============================================================================================
# Listing
# ============================================================================================


def test_list_pagination_every_item_exactly_once_in_order(gcs, fresh_bucket):
    names = [f"obj-{i:03d}" for i in range(23)]
    for n in reversed(names):  # insertion order must not matter
        put(fresh_bucket, n, n.encode())
    it = gcs.list_blobs(fresh_bucket, page_size=4)
    pages = []
    for page in it.pages:
        pages.append([b.name for b in page])
    assert all(1 <= len(p) <= 4 for p in pages), pages
    assert len(pages) == math.ceil(23 / 4)
    flat = [n for p in pages for n in p]
    assert flat == names
    assert it.next_page_token is None


def test_list_max_results_caps_total(gcs, fresh_bucket):
    for i in range(7):
        put(fresh_bucket, f"m{i}")
    got = names_of(gcs.list_blobs(fresh_bucket, max_results=3, page_size=2))
    assert got == ["m0", "m1", "m2"]


def test_list_item_fields(gcs, fresh_bucket):
    data = payload(1000, 1)
    put(fresh_bucket, "dir/item", data, content_type="text/plain")
    fresh_bucket.blob("dir/item").reload()
    (item,) = list(gcs.list_blobs(fresh_bucket, prefix="dir/"))
    assert item.name == "dir/item"
    assert item.bucket.name == fresh_bucket.name
    assert item.size == 1000
    assert item.generation > 0
    assert item.metageneration == 1
    assert item.crc32c == crc32c_b64(data)
    assert item.md5_hash == md5_b64(data)
    assert item.etag
    assert item.storage_class == "STANDARD"
    assert item.content_type == "text/plain"
    assert item.updated is not None and item.time_created is not None
    assert item.media_link
    # mediaLink must point at the server under test, and work.
    assert requests.get(item.media_link).content == data


def test_list_prefixes_and_items_paginate_together(gcs, fresh_bucket):
    objs = ["a/1", "a/2", "b", "c/x", "c/y/z", "d", "e/1", "e/2/3", "f"]
    for n in objs:
        put(fresh_bucket, n)
    it = gcs.list_blobs(fresh_bucket, delimiter="/", page_size=2)
    entries = []  # merged sequence, page by page
    for page in it.pages:
        items = [b.name for b in page]
        prefixes = sorted(page.prefixes)
        assert 1 <= len(items) + len(prefixes) <= 2, (items, prefixes)
        entries.append(sorted(items + prefixes))
    flat = [e for page in entries for e in page]
    assert flat == ["a/", "b", "c/", "d", "e/", "f"], entries
    assert it.prefixes == {"a/", "c/", "e/"}


def test_list_prefix_with_delimiter(gcs, fresh_bucket):
    for n in ["c/x", "c/y/z", "c/y/w", "c/zz/", "cx", "d/c/x"]:
        put(fresh_bucket, n)
    it = gcs.list_blobs(fresh_bucket, prefix="c/", delimiter="/")
    items = names_of(it)
    assert items == ["c/x"]
    assert it.prefixes == {"c/y/", "c/zz/"}
    # Without a delimiter: everything under the prefix, flat.
    assert names_of(gcs.list_blobs(fresh_bucket, prefix="c/")) == ["c/x", "c/y/w", "c/y/z", "c/zz/"]
    # A prefix that is not at a '/' boundary.
    assert names_of(gcs.list_blobs(fresh_bucket, prefix="c")) == ["c/x", "c/y/w", "c/y/z", "c/zz/", "cx"]


def test_list_multichar_delimiter(gcs, fresh_bucket):
    for n in ["x__1__a", "x__1__b", "x__2", "y"]:
        put(fresh_bucket, n)
    it = gcs.list_blobs(fresh_bucket, prefix="x__", delimiter="__")
    assert names_of(it) == ["x__2"]
    assert it.prefixes == {"x__1__"}


def test_list_start_end_offset(gcs, fresh_bucket):
    names = [f"n{i:02d}" for i in range(20)]
    for n in names:
        put(fresh_bucket, n)
    got = names_of(gcs.list_blobs(fresh_bucket, start_offset="n05", end_offset="n12"))
    assert got == names[5:12]  # start inclusive, end exclusive
    # Paginated, the range is still respected on every page.
    got = names_of(gcs.list_blobs(fresh_bucket, start_offset="n05", end_offset="n12", page_size=3))
    assert got == names[5:12]
    # Offsets that are not object names.
    assert names_of(gcs.list_blobs(fresh_bucket, start_offset="n055", end_offset="n085")) == \
        ["n06", "n07", "n08"]
    assert names_of(gcs.list_blobs(fresh_bucket, start_offset="n18")) == ["n18", "n19"]
    assert names_of(gcs.list_blobs(fresh_bucket, end_offset="n02")) == ["n00", "n01"]


def test_list_offsets_with_prefix_and_delimiter(gcs, fresh_bucket):
    for n in ["p/a/1", "p/b/1", "p/c", "p/d/1", "p/e", "q/a"]:
        put(fresh_bucket, n)
    it = gcs.list_blobs(fresh_bucket, prefix="p/", delimiter="/", start_offset="p/b",
                        end_offset="p/e")
    assert names_of(it) == ["p/c"]
    assert it.prefixes == {"p/b/", "p/d/"}


def test_list_include_trailing_delimiter(gcs, fresh_bucket):
    for n in ["dir/", "dir/a", "other", "x/y/"]:
        put(fresh_bucket, n)
    it = gcs.list_blobs(fresh_bucket, delimiter="/")
    assert names_of(it) == ["other"]
    assert it.prefixes == {"dir/", "x/"}
    it = gcs.list_blobs(fresh_bucket, delimiter="/", include_trailing_delimiter=True)
    assert names_of(it) == ["dir/", "other"]
    assert it.prefixes == {"dir/", "x/"}
    # "x/y/" ends in exactly one delimiter after the prefix "x/": an item and a prefix.
    it = gcs.list_blobs(fresh_bucket, prefix="x/", delimiter="/", include_trailing_delimiter=True)
    assert names_of(it) == ["x/y/"]
    assert it.prefixes == {"x/y/"}
    it = gcs.list_blobs(fresh_bucket, prefix="x/", delimiter="/")
    assert names_of(it) == []
    assert it.prefixes == {"x/y/"}


def model_list(names, prefix="", delimiter=None, start=None, end=None, trailing=False):
    """Cloud Storage's listing semantics, as a reference: (items in order, set of prefixes)."""
    items, prefixes = [], []
    for n in sorted(names, key=lambda x: x.encode()):
        if not n.startswith(prefix):
            continue
        if start is not None and n.encode() < start.encode():
            continue
        if end is not None and n.encode() >= end.encode():
            continue
        if delimiter:
            rest = n[len(prefix):]
            i = rest.find(delimiter)
            if i >= 0:
                p = prefix + rest[:i + len(delimiter)]
                if p not in prefixes:
                    prefixes.append(p)
                if trailing and i + len(delimiter) == len(rest):
                    items.append(n)
                continue
        items.append(n)
    return items, set(prefixes)


def test_list_matches_reference_model(gcs, emulator, fresh_bucket):
    import random
    rng = random.Random(2024)
    alphabet = ["a", "b", "/", "é", " ", "-", "~"]
    names = set()
    while len(names) < 150:
        names.add("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))))
    with requests.Session() as s:
        for n in names:
            r = s.post(f"{emulator.url}/upload/storage/v1/b/{fresh_bucket.name}/o",
                       params={"uploadType": "media", "name": n}, data=n.encode())
            assert r.status_code == 200, (n, r.text)
    for q in range(80):
        kw = {}
        if rng.random() < 0.6:
            kw["prefix"] = rng.choice(["", "a", "a/", "b/", "/", "é", "a/b", "ab", " "])
        if rng.random() < 0.7:
            kw["delimiter"] = rng.choice(["/", "/", "b", "a/"])
            kw["include_trailing_delimiter"] = rng.random() < 0.3
        if rng.random() < 0.4:
            kw["start_offset"] = rng.choice(sorted(names) + ["a/", "b", "é"])
        if rng.random() < 0.4:
            kw["end_offset"] = rng.choice(sorted(names) + ["b", "~", "a/z"])
        page_size = rng.randint(1, 9)
        it = gcs.list_blobs(fresh_bucket, page_size=page_size, **kw)
        items, prefixes_seen = [], []
        for page in it.pages:
            page_items = [b.name for b in page]
            assert len(page_items) + len(page.prefixes) <= page_size, (kw, page_size)
            items += page_items
            prefixes_seen += list(page.prefixes)
        want_items, want_prefixes = model_list(
            names, kw.get("prefix", ""), kw.get("delimiter"), kw.get("start_offset"),
            kw.get("end_offset"), kw.get("include_trailing_delimiter", False))
        assert items == want_items, (q, kw, page_size)
        assert sorted(prefixes_seen) == sorted(want_prefixes), (q, kw, page_size)
        assert len(prefixes_seen) == len(set(prefixes_seen)), "a prefix came twice"


def test_list_unknown_bucket_is_404(gcs):
    with pytest.raises(gexc.NotFound):
        list(gcs.list_blobs("fidelity-never-created-bucket-0002"))


def test_list_empty_bucket_and_unmatched_prefix(gcs, fresh_bucket):
    assert list(gcs.list_blobs(fresh_bucket)) == []
    put(fresh_bucket, "a")
    it = gcs.list_blobs(fresh_bucket, prefix="zz", delimiter="/")
    assert list(it) == [] and it.prefixes == set()


# ============================================================================================
# Uploads
# ============================================================================================


def assert_server_checksums(blob, data):
    blob.reload()
    assert blob.size == len(data)
    assert blob.crc32c == crc32c_b64(data)
    if blob.component_count is None:
        assert blob.md5_hash == md5_b64(data)


@pytest.mark.parametrize("checksum", [None, "md5", "crc32c"])
def test_upload_small_multipart(fresh_bucket, checksum):
    data = payload(5000, 2)
    blob = fresh_bucket.blob("small")
    blob.metadata = {"k": "v"}
    blob.upload_from_string(data, content_type="application/x-test", checksum=checksum)
    assert blob.generation and blob.generation > 0
    assert_server_checksums(blob, data)
    assert blob.content_type == "application/x-test"
    assert blob.metadata == {"k": "v"}
    assert fresh_bucket.blob("small").download_as_bytes() == data


def test_upload_empty_object(fresh_bucket):
    blob = put(fresh_bucket, "empty", b"")
    assert_server_checksums(blob, b"")
    assert blob.crc32c == "AAAAAA=="
    assert fresh_bucket.blob("empty").download_as_bytes() == b""


@pytest.mark.parametrize("size", [3 * MiB + 1234, 3 * MiB, 100])
def test_upload_resumable_small_chunks(emulator, fresh_bucket, size):
    data = payload(size, 3)
    blob = fresh_bucket.blob(f"resumable-{size}")
    blob.chunk_size = 256 * KiB
    before = emulator.stats() if emulator.is_emulator else None
    blob.upload_from_file(io.BytesIO(data), content_type="application/octet-stream",
                          checksum="crc32c")
    assert_server_checksums(blob, data)
    assert fresh_bucket.blob(blob.name).download_as_bytes() == data
    if before is not None:
        after = emulator.stats()
        chunks = ops_delta(before, after, "objects.resumable_chunk")
        assert chunks >= math.ceil(size / (256 * KiB)), after["ops"]


def test_upload_resumable_with_known_size_and_metadata(fresh_bucket, tmp_path):
    data = payload(2 * MiB + 5, 4)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    blob = fresh_bucket.blob("resumable-file")
    blob.chunk_size = 512 * KiB
    blob.metadata = {"origin": "fidelity"}
    blob.upload_from_filename(str(path), content_type="application/x-custom")
    fresh = fresh_bucket.get_blob("resumable-file")
    assert fresh.metadata == {"origin": "fidelity"}
    assert fresh.content_type == "application/x-custom"
    assert_server_checksums(fresh, data)
    assert fresh.download_as_bytes() == data


def test_upload_large_default_is_resumable(fresh_bucket):
    data = payload(9 * MiB + 1, 5)  # > 8 MiB: the client switches to a resumable upload
    blob = fresh_bucket.blob("large-default")
    blob.upload_from_file(io.BytesIO(data), size=len(data))
    assert_server_checksums(blob, data)
    assert blob.download_as_bytes() == data


def test_upload_chunks_concurrently_xml_multipart(emulator, fresh_bucket, tmp_path):
    data = payload(12 * MiB + 777, 6)
    path = tmp_path / "mpu.bin"
    path.write_bytes(data)
    blob = fresh_bucket.blob("checkpoints/step 100.pt")
    blob.metadata = {"step": "100"}
    before = emulator.stats() if emulator.is_emulator else None
    transfer_manager.upload_chunks_concurrently(
        str(path), blob, content_type="application/x-ckpt", chunk_size=5 * MiB,
        worker_type=transfer_manager.THREAD, max_workers=4)
    got = fresh_bucket.get_blob("checkpoints/step 100.pt")
    assert got.size == len(data)
    assert got.crc32c == crc32c_b64(data)
    assert got.content_type == "application/x-ckpt"
    assert got.metadata == {"step": "100"}
    assert got.download_as_bytes() == data
    if before is not None:
        after = emulator.stats()
        assert ops_delta(before, after, "xml.multipart_initiate") == 1
        assert ops_delta(before, after, "xml.multipart_upload_part") == 3
        assert ops_delta(before, after, "xml.multipart_complete") == 1


def test_upload_chunks_concurrently_with_processes(fresh_bucket, tmp_path):
    # The default worker type: processes that rebuild the client from STORAGE_EMULATOR_HOST.
    data = payload(10 * MiB + 3, 7)
    path = tmp_path / "mpu2.bin"
    path.write_bytes(data)
    blob = fresh_bucket.blob("mpu-processes")
    transfer_manager.upload_chunks_concurrently(str(path), blob, chunk_size=5 * MiB,
                                                max_workers=2)
    assert fresh_bucket.blob("mpu-processes").download_as_bytes() == data


def test_blob_writer_and_reader(fresh_bucket):
    # blob.open("wb") streams through a resumable upload, chunk by chunk.
    data = payload(1 * MiB + 999, 60)
    with fresh_bucket.blob("writer").open("wb", chunk_size=256 * KiB) as f:
        for i in range(0, len(data), 100_000):
            f.write(data[i:i + 100_000])
    got = fresh_bucket.get_blob("writer")
    assert got.size == len(data) and got.crc32c == crc32c_b64(data)
    with fresh_bucket.blob("writer").open("rb", chunk_size=300 * KiB) as f:
        assert f.read() == data


def test_download_chunks_concurrently(fresh_bucket, tmp_path):
    # transfer_manager's parallel ranged GETs, checked against the object's crc32c.
    data = payload(7 * MiB + 11, 61)
    put(fresh_bucket, "sliced", data)
    out = tmp_path / "sliced.out"
    transfer_manager.download_chunks_concurrently(
        fresh_bucket.blob("sliced"), str(out), chunk_size=1 * MiB,
        worker_type=transfer_manager.THREAD, max_workers=4, crc32c_checksum=True)
    assert out.read_bytes() == data


def test_upload_many_download_many(fresh_bucket):
    items = [(io.BytesIO(payload(5000 + i, 70 + i)), fresh_bucket.blob(f"many/{i}"))
             for i in range(6)]
    results = transfer_manager.upload_many(items, worker_type=transfer_manager.THREAD,
                                           raise_exception=True)
    assert results == [None] * 6
    outs = [(fresh_bucket.blob(f"many/{i}"), io.BytesIO()) for i in range(6)]
    transfer_manager.download_many(outs, worker_type=transfer_manager.THREAD,
                                   raise_exception=True)
    assert [o.getvalue() for _, o in outs] == [payload(5000 + i, 70 + i) for i in range(6)]


def test_upload_overwrite_creates_new_generation(fresh_bucket):
    b1 = put(fresh_bucket, "ow", b"one")
    b2 = put(fresh_bucket, "ow", b"two")
    assert b2.generation > b1.generation
    assert b2.metageneration == 1
    assert fresh_bucket.blob("ow").download_as_bytes() == b"two"
    # The old generation is gone (no versioning): 404.
    with pytest.raises(gexc.NotFound):
        fresh_bucket.blob("ow", generation=b1.generation).download_as_bytes()
    assert fresh_bucket.blob("ow", generation=b2.generation).download_as_bytes() == b"two"


def test_upload_crc32c_mismatch_rejected(emulator, fresh_bucket):
    # Multipart upload whose metadata claims a wrong crc32c: Cloud Storage answers 400.
    url = f"{emulator.url}/upload/storage/v1/b/{fresh_bucket.name}/o?uploadType=multipart"
    meta = {"name": "badsum", "crc32c": crc32c_b64(b"something else")}
    body, ctype = multipart_related(meta, b"actual bytes")
    r = requests.post(url, data=body, headers={"Content-Type": ctype})
    assert r.status_code == 400, r.text
    assert fresh_bucket.get_blob("badsum") is None


def multipart_related(meta, data, boundary="fidelity_boundary_1234"):
    body = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
            f"{json.dumps(meta)}\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f'multipart/related; boundary="{boundary}"'


def test_upload_media_raw(emulator, fresh_bucket):
    data = payload(777, 8)
    url = (f"{emulator.url}/upload/storage/v1/b/{fresh_bucket.name}/o"
           f"?uploadType=media&name={qname('raw/media obj')}")
    r = requests.post(url, data=data, headers={"Content-Type": "text/x-raw"})
    assert r.status_code == 200, r.text
    meta = r.json()
    assert meta["name"] == "raw/media obj"
    assert int(meta["size"]) == 777
    assert meta["crc32c"] == crc32c_b64(data)
    assert meta["md5Hash"] == md5_b64(data)
    assert meta["contentType"] == "text/x-raw"
    assert fresh_bucket.blob("raw/media obj").download_as_bytes() == data


# --- resumable protocol details (raw HTTP on a session the client created) -----------------


def resumable_session(fresh_bucket, name, size=None):
    return fresh_bucket.blob(name).create_resumable_upload_session(size=size)


def test_resumable_status_query_does_not_finalize(fresh_bucket):
    data = payload(768 * KiB + 100, 9)
    url = resumable_session(fresh_bucket, "rq")
    r = requests.put(url, data=data[:512 * KiB],
                     headers={"Content-Range": f"bytes 0-{512 * KiB - 1}/*"})
    assert r.status_code == 308, r.text
    assert r.headers.get("Range") == f"bytes=0-{512 * KiB - 1}"
    # Status query: 308 with the persisted range; the object must not exist yet.
    r = requests.put(url, headers={"Content-Range": "bytes */*"})
    assert r.status_code == 308, r.text
    assert r.headers.get("Range") == f"bytes=0-{512 * KiB - 1}"
    assert fresh_bucket.get_blob("rq") is None
    # The upload continues where it was, and completes.
    r = requests.put(url, data=data[512 * KiB:],
                     headers={"Content-Range": f"bytes {512 * KiB}-{len(data) - 1}/{len(data)}"})
    assert r.status_code in (200, 201), r.text
    assert r.json()["crc32c"] == crc32c_b64(data)
    assert fresh_bucket.blob("rq").download_as_bytes() == data


def test_resumable_status_query_before_any_bytes(fresh_bucket):
    url = resumable_session(fresh_bucket, "rq0")
    r = requests.put(url, headers={"Content-Range": "bytes */*"})
    assert r.status_code == 308, r.text
    assert "Range" not in r.headers
    assert fresh_bucket.get_blob("rq0") is None


def test_resumable_resent_overlapping_chunk(fresh_bucket):
    data = payload(1 * MiB + 10, 10)
    url = resumable_session(fresh_bucket, "overlap")
    r = requests.put(url, data=data[:512 * KiB],
                     headers={"Content-Range": f"bytes 0-{512 * KiB - 1}/*"})
    assert r.status_code == 308
    # Resend from 256 KiB (as a client does when it lost a reply): duplicate bytes are ignored.
    r = requests.put(url, data=data[256 * KiB:768 * KiB],
                     headers={"Content-Range": f"bytes {256 * KiB}-{768 * KiB - 1}/*"})
    assert r.status_code == 308, r.text
    assert r.headers.get("Range") == f"bytes=0-{768 * KiB - 1}"
    r = requests.put(url, data=data[768 * KiB:],
                     headers={"Content-Range": f"bytes {768 * KiB}-{len(data) - 1}/{len(data)}"})
    assert r.status_code in (200, 201), r.text
    assert fresh_bucket.blob("overlap").download_as_bytes() == data


def test_resumable_non_multiple_of_256k_chunk_rejected_or_trimmed(fresh_bucket):
    # A non-final chunk that is not a multiple of 256 KiB: Cloud Storage persists only whole
    # 256 KiB units (and says so in Range) or rejects the chunk; it never persists the odd tail.
    data = payload(600 * KiB, 11)
    url = resumable_session(fresh_bucket, "odd")
    r = requests.put(url, data=data[:300 * KiB],
                     headers={"Content-Range": f"bytes 0-{300 * KiB - 1}/*"})
    if r.status_code == 308:
        persisted = int(r.headers["Range"].split("-")[1]) + 1 if "Range" in r.headers else 0
        assert persisted % (256 * KiB) == 0
    else:
        assert r.status_code == 400, r.text
        persisted = 0
    r = requests.put(url, data=data[persisted:],
                     headers={"Content-Range": f"bytes {persisted}-{len(data) - 1}/{len(data)}"})
    assert r.status_code in (200, 201), r.text
    assert fresh_bucket.blob("odd").download_as_bytes() == data


def test_resumable_cancel(fresh_bucket):
    url = resumable_session(fresh_bucket, "cancelled")
    r = requests.put(url, data=b"x" * (256 * KiB),
                     headers={"Content-Range": f"bytes 0-{256 * KiB - 1}/*"})
    assert r.status_code == 308
    r = requests.delete(url)
    assert r.status_code in (499, 204), r.text  # Cloud Storage answers 499 to a cancel
    r = requests.put(url, headers={"Content-Range": "bytes */*"})
    assert r.status_code in (404, 410), r.text
    assert fresh_bucket.get_blob("cancelled") is None


def test_resumable_known_size_single_put(fresh_bucket):
    data = payload(300 * KiB, 12)
    url = resumable_session(fresh_bucket, "one-put", size=len(data))
    r = requests.put(url, data=data)
    assert r.status_code in (200, 201), r.text
    assert fresh_bucket.blob("one-put").download_as_bytes() == data


# --- XML API (raw) --------------------------------------------------------------------------


def test_xml_put_get_head_delete(emulator, fresh_bucket):
    data = payload(4000, 13)
    url = f"{emulator.url}/{fresh_bucket.name}/{xml_path('xml/o bj+1')}"
    r = requests.put(url, data=data, headers={"Content-Type": "text/x-xml-test",
                                               "x-goog-meta-color": "blue"})
    assert r.status_code == 200, r.text
    gen = int(r.headers["x-goog-generation"])
    assert parse_goog_hash(r.headers["x-goog-hash"])["crc32c"] == crc32c_b64(data)
    blob = fresh_bucket.get_blob("xml/o bj+1")
    assert blob.generation == gen and blob.metadata == {"color": "blue"}
    assert blob.content_type == "text/x-xml-test"
    r = requests.head(url)
    assert r.status_code == 200
    assert int(r.headers["Content-Length"]) == 4000
    assert r.headers["x-goog-generation"] == str(gen)
    assert r.headers.get("x-goog-meta-color") == "blue"
    r = requests.get(url, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == data[10:20]
    # x-goog-if-generation-match: wrong -> 412 (XML error body), right -> 200.
    r = requests.put(url, data=b"new", headers={"x-goog-if-generation-match": str(gen + 1)})
    assert r.status_code == 412 and "<Code>PreconditionFailed</Code>" in r.text, r.text
    r = requests.put(url, data=b"new", headers={"x-goog-if-generation-match": "0"})
    assert r.status_code == 412
    r = requests.put(url, data=b"new", headers={"x-goog-if-generation-match": str(gen)})
    assert r.status_code == 200
    assert requests.get(url).content == b"new"
    r = requests.delete(url)
    assert r.status_code == 204
    r = requests.get(url)
    assert r.status_code == 404 and "<Code>NoSuchKey</Code>" in r.text, r.text


def test_xml_multipart_raw_list_parts_and_abort(emulator, fresh_bucket):
    import xml.etree.ElementTree as ET
    url = f"{emulator.url}/{fresh_bucket.name}/{xml_path('xml-mpu')}"
    r = requests.post(url + "?uploads")
    assert r.status_code == 200, r.text
    root = ET.fromstring(r.content)
    upload_id = next(e.text for e in root.iter() if e.tag.endswith("UploadId"))
    part1 = payload(5 * MiB, 14)
    part2 = payload(1000, 15)
    etags = []
    for n, part in ((1, part1), (2, part2)):
        r = requests.put(f"{url}?partNumber={n}&uploadId={upload_id}", data=part)
        assert r.status_code == 200, r.text
        assert r.headers.get("ETag")
        assert parse_goog_hash(r.headers["x-goog-hash"])["crc32c"] == crc32c_b64(part)
        etags.append(r.headers["ETag"])
    r = requests.get(f"{url}?uploadId={upload_id}")
    assert r.status_code == 200, r.text
    listed = [int(e.text) for e in ET.fromstring(r.content).iter() if e.tag.endswith("PartNumber")]
    assert listed == [1, 2]
    # The object does not exist until completion.
    assert fresh_bucket.get_blob("xml-mpu") is None
    complete = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{t}</ETag></Part>"
        for n, t in ((1, etags[0]), (2, etags[1]))) + "</CompleteMultipartUpload>"
    r = requests.post(f"{url}?uploadId={upload_id}", data=complete)
    assert r.status_code == 200, r.text
    got = fresh_bucket.get_blob("xml-mpu")
    assert got.size == len(part1) + len(part2)
    assert got.crc32c == crc32c_b64(part1 + part2)
    # Abort of a second upload: parts are gone, the upload id is unknown afterwards.
    r = requests.post(url + "-2?uploads")
    upload_id2 = next(e.text for e in ET.fromstring(r.content).iter() if e.tag.endswith("UploadId"))
    assert requests.put(f"{url}-2?partNumber=1&uploadId={upload_id2}", data=b"x").status_code == 200
    r = requests.delete(f"{url}-2?uploadId={upload_id2}")
    assert r.status_code == 204, r.text
    r = requests.get(f"{url}-2?uploadId={upload_id2}")
    assert r.status_code == 404 and "NoSuchUpload" in r.text, r.text
    assert fresh_bucket.get_blob("xml-mpu-2") is None


def test_xml_multipart_small_non_last_part_rejected(emulator, fresh_bucket):
    import xml.etree.ElementTree as ET
    url = f"{emulator.url}/{fresh_bucket.name}/small-parts"
    upload_id = next(e.text for e in ET.fromstring(requests.post(url + "?uploads").content).iter()
                     if e.tag.endswith("UploadId"))
    etags = [requests.put(f"{url}?partNumber={n}&uploadId={upload_id}",
                          data=b"p" * 1000).headers["ETag"] for n in (1, 2)]
    complete = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{t}</ETag></Part>"
        for n, t in zip((1, 2), etags)) + "</CompleteMultipartUpload>"
    r = requests.post(f"{url}?uploadId={upload_id}", data=complete)
    assert r.status_code == 400 and "EntityTooSmall" in r.text, r.text
    assert fresh_bucket.get_blob("small-parts") is None


def test_xml_multipart_part_errors(emulator, fresh_bucket):
    import xml.etree.ElementTree as ET
    url = f"{emulator.url}/{fresh_bucket.name}/part-errors"
    upload_id = next(e.text for e in ET.fromstring(requests.post(url + "?uploads").content).iter()
                     if e.tag.endswith("UploadId"))
    p1, p2 = payload(5 * MiB, 80), payload(100, 81)
    e1 = requests.put(f"{url}?partNumber=1&uploadId={upload_id}", data=p1).headers["ETag"]
    e2 = requests.put(f"{url}?partNumber=2&uploadId={upload_id}", data=p2).headers["ETag"]

    def complete(parts):
        xml = "<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{t}</ETag></Part>" for n, t in parts
        ) + "</CompleteMultipartUpload>"
        return requests.post(f"{url}?uploadId={upload_id}", data=xml)

    r = complete([(2, e2), (1, e1)])
    assert r.status_code == 400 and "InvalidPartOrder" in r.text, r.text
    r = complete([(1, e1), (3, e2)])
    assert r.status_code == 400 and "<Code>InvalidPart</Code>" in r.text, r.text
    r = complete([(1, '"0123456789abcdef0123456789abcdef"'), (2, e2)])
    assert r.status_code == 400 and "<Code>InvalidPart</Code>" in r.text, r.text
    r = requests.post(f"{url}?uploadId={upload_id}", data=b"<not-xml")
    assert r.status_code == 400 and "MalformedXML" in r.text, r.text
    assert fresh_bucket.get_blob("part-errors") is None
    # After the failures the upload is still usable.
    r = complete([(1, e1), (2, e2)])
    assert r.status_code == 200, r.text
    assert fresh_bucket.blob("part-errors").download_as_bytes() == p1 + p2
    # A part whose declared checksum does not match its bytes is refused.
    r = requests.post(url + "-2?uploads")
    uid = next(e.text for e in ET.fromstring(r.content).iter() if e.tag.endswith("UploadId"))
    r = requests.put(f"{url}-2?partNumber=1&uploadId={uid}", data=b"abc",
                     headers={"x-goog-hash": f"crc32c={crc32c_b64(b'abd')}"})
    assert r.status_code == 400 and "BadDigest" in r.text, r.text


def test_xml_copy_and_list(emulator, fresh_bucket):
    put(fresh_bucket, "src/o", b"copy me")
    r = requests.put(f"{emulator.url}/{fresh_bucket.name}/dst/o",
                     headers={"x-goog-copy-source": f"/{fresh_bucket.name}/src/o"})
    assert r.status_code == 200, r.text
    assert fresh_bucket.blob("dst/o").download_as_bytes() == b"copy me"
    r = requests.get(f"{emulator.url}/{fresh_bucket.name}",
                     params={"list-type": "2", "delimiter": "/"})
    assert r.status_code == 200, r.text
    import xml.etree.ElementTree as ET
    root = ET.fromstring(r.content)
    prefixes = sorted(e.text for e in root.iter() if e.tag.endswith("Prefix") and e.text)
    assert prefixes == ["dst/", "src/"]


# ============================================================================================
# Downloads
# ============================================================================================


@pytest.fixture
def ranged_blob(fresh_bucket):
    data = payload(100_000, 16)
    blob = put(fresh_bucket, "ranged", data)
    return blob, data


@pytest.mark.parametrize("start,end", [(0, 0), (0, 99), (10, 20), (99_999, 99_999),
                                       (50_000, None), (99_000, 200_000), (None, 9)])
def test_download_ranges(ranged_blob, start, end):
    blob, data = ranged_blob
    got = blob.download_as_bytes(start=start, end=end)
    s = start or 0
    e = len(data) if end is None else min(end + 1, len(data))
    assert got == data[s:e]


def test_download_range_past_end_is_416(ranged_blob):
    blob, _ = ranged_blob
    with pytest.raises(gexc.RequestRangeNotSatisfiable):
        blob.download_as_bytes(start=100_000)


def test_download_blob_reader_random_access(ranged_blob):
    blob, data = ranged_blob
    with blob.open("rb", chunk_size=4096) as f:
        assert f.read(10) == data[:10]
        f.seek(77_777)
        assert f.read(5000) == data[77_777:82_777]
        f.seek(-100, os.SEEK_END)
        assert f.read() == data[-100:]


def test_download_to_file_with_checksum(ranged_blob, tmp_path):
    blob, data = ranged_blob
    path = tmp_path / "out"
    blob.download_to_filename(str(path), checksum="crc32c")
    assert path.read_bytes() == data
    blob.download_to_filename(str(path), checksum="md5")
    assert path.read_bytes() == data


def test_download_raw_headers(emulator, ranged_blob):
    blob, data = ranged_blob
    blob.reload()
    url = f"{emulator.url}/storage/v1/b/{blob.bucket.name}/o/{qname(blob.name)}?alt=media"
    r = requests.get(url)
    assert r.status_code == 200
    assert r.content == data
    assert int(r.headers["Content-Length"]) == len(data)
    assert r.headers["x-goog-generation"] == str(blob.generation)
    assert r.headers["x-goog-metageneration"] == "1"
    h = parse_goog_hash(r.headers["x-goog-hash"])
    assert h["crc32c"] == crc32c_b64(data) and h["md5"] == md5_b64(data)
    assert r.headers.get("ETag")
    # Ranges: 206 with Content-Range, suffix and open-ended forms.
    for rng, lo, hi in (("bytes=0-9", 0, 9), ("bytes=99990-", 99_990, 99_999),
                        ("bytes=-10", 99_990, 99_999), ("bytes=500-99999999", 500, 99_999)):
        r = requests.get(url, headers={"Range": rng})
        assert r.status_code == 206, (rng, r.status_code)
        assert r.content == data[lo:hi + 1], rng
        assert r.headers["Content-Range"] == f"bytes {lo}-{hi}/{len(data)}", rng
    # /download/storage/v1 serves the same bytes.
    r = requests.get(f"{emulator.url}/download/storage/v1/b/{blob.bucket.name}/o/"
                     f"{qname(blob.name)}?alt=media", headers={"Range": "bytes=5-7"})
    assert r.status_code == 206 and r.content == data[5:8]


def test_download_bad_ranges(emulator, ranged_blob):
    blob, data = ranged_blob
    url = f"{emulator.url}/storage/v1/b/{blob.bucket.name}/o/{qname(blob.name)}?alt=media"
    r = requests.get(url, headers={"Range": "bytes=100000-"})
    assert r.status_code == 416, r.status_code
    r = requests.get(url, headers={"Range": "bytes=200000-300000"})
    assert r.status_code == 416
    # Not a byte range: ignored, whole object.
    for bad in ("bytes=abc", "items=0-5", "bytes=0-5,10-20"):
        r = requests.get(url, headers={"Range": bad})
        assert r.status_code in (200, 206), (bad, r.status_code)
        if r.status_code == 200:
            assert r.content == data, bad
    r = requests.get(url, headers={"Range": "bytes=abc"})
    assert r.status_code == 200 and r.content == data
    emulator.check_alive()


def test_download_empty_object_with_range(emulator, fresh_bucket):
    put(fresh_bucket, "empty-r", b"")
    url = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/empty-r?alt=media"
    r = requests.get(url)
    assert r.status_code == 200 and r.content == b""
    r = requests.get(url, headers={"Range": "bytes=0-"})
    assert r.status_code in (200, 416)
    assert r.content == b"" or r.status_code == 416


# ============================================================================================
# Compose, copy, rewrite, delete, patch
# ============================================================================================


def test_compose_content_crc_and_component_count(fresh_bucket):
    parts = [payload(1000 + i * 37, 20 + i) for i in range(3)]
    srcs = [put(fresh_bucket, f"part{i}", p) for i, p in enumerate(parts)]
    dest = fresh_bucket.blob("composite")
    dest.content_type = "application/x-composite"
    dest.compose(srcs)
    dest.reload()
    whole = b"".join(parts)
    assert dest.size == len(whole)
    assert dest.crc32c == crc32c_b64(whole)
    assert dest.component_count == 3
    assert dest.md5_hash is None  # composites have no MD5
    assert dest.content_type == "application/x-composite"
    assert dest.download_as_bytes() == whole
    # Composing a composite sums the component counts.
    dest2 = fresh_bucket.blob("composite2")
    dest2.compose([dest, srcs[0], dest])
    dest2.reload()
    assert dest2.component_count == 7
    assert dest2.download_as_bytes() == whole + parts[0] + whole
    assert dest2.crc32c == crc32c_b64(whole + parts[0] + whole)


def test_compose_32_ok_33_rejected(fresh_bucket):
    srcs = [put(fresh_bucket, f"s{i:02d}", f"<{i}>".encode()) for i in range(33)]
    dest = fresh_bucket.blob("c32")
    dest.compose(srcs[:32])
    assert dest.download_as_bytes() == b"".join(f"<{i}>".encode() for i in range(32))
    dest.reload()
    assert dest.component_count == 32
    with pytest.raises(gexc.BadRequest):
        fresh_bucket.blob("c33").compose(srcs)
    assert fresh_bucket.get_blob("c33") is None


def test_compose_same_source_repeated_and_missing_source(fresh_bucket):
    a = put(fresh_bucket, "a", b"AB")
    dest = fresh_bucket.blob("aaa")
    dest.compose([a, a, a])
    assert dest.download_as_bytes() == b"ABABAB"
    with pytest.raises(gexc.NotFound):
        fresh_bucket.blob("bad").compose([a, fresh_bucket.blob("missing")])


def test_compose_source_generation_preconditions(fresh_bucket):
    a = put(fresh_bucket, "ga", b"a1")
    b = put(fresh_bucket, "gb", b"b1")
    dest = fresh_bucket.blob("gdest")
    with pytest.raises(gexc.PreconditionFailed):
        dest.compose([a, b], if_source_generation_match=[a.generation, b.generation + 1])
    assert fresh_bucket.get_blob("gdest") is None
    dest.compose([a, b], if_source_generation_match=[a.generation, b.generation])
    assert dest.download_as_bytes() == b"a1b1"


def test_compose_pinned_source_generation(emulator, fresh_bucket):
    a = put(fresh_bucket, "pa", b"old")
    old_gen = a.generation
    put(fresh_bucket, "pa", b"new")
    body = {"sourceObjects": [{"name": "pa", "generation": str(old_gen)}],
            "destination": {"contentType": "application/octet-stream"}}
    url = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/pdest/compose"
    r = requests.post(url, json=body)
    # The old generation no longer exists (no versioning): 404, never the new bytes.
    assert r.status_code == 404, r.text
    live = fresh_bucket.get_blob("pa")
    body["sourceObjects"][0]["generation"] = str(live.generation)
    r = requests.post(url, json=body)
    assert r.status_code == 200, r.text
    assert fresh_bucket.blob("pdest").download_as_bytes() == b"new"


def test_copy_blob_same_and_other_bucket(gcs, fresh_bucket):
    data = payload(3000, 30)
    src = fresh_bucket.blob("src")
    src.metadata = {"a": "1"}
    src.upload_from_string(data, content_type="text/x-src")
    copy = fresh_bucket.copy_blob(src, fresh_bucket, "dst")
    assert copy.name == "dst" and copy.generation != src.generation
    got = fresh_bucket.get_blob("dst")
    assert got.metadata == {"a": "1"} and got.content_type == "text/x-src"
    assert got.crc32c == crc32c_b64(data) and got.md5_hash == md5_b64(data)
    assert got.download_as_bytes() == data
    other = gcs.create_bucket(fresh_bucket.name + "-other")
    fresh_bucket.copy_blob(src, other, "moved/here")
    assert other.blob("moved/here").download_as_bytes() == data
    # The source is untouched.
    assert fresh_bucket.blob("src").download_as_bytes() == data
    with pytest.raises(gexc.NotFound):
        fresh_bucket.copy_blob(fresh_bucket.blob("nope"), fresh_bucket, "x")


def test_rewrite_small(fresh_bucket):
    data = payload(10_000, 31)
    src = put(fresh_bucket, "rw-src", data)
    dest = fresh_bucket.blob("rw-dst")
    token, done, total = dest.rewrite(src)
    assert token is None and done == total == len(data)
    assert dest.download_as_bytes() == data
    dest.reload()
    assert dest.crc32c == crc32c_b64(data)


def rewrite_until_done(dest, src, **kw):
    token, done, total = dest.rewrite(src, **kw)
    calls = [(token, done, total)]
    while token is not None:
        token, done, total = dest.rewrite(src, token=token, **kw)
        calls.append((token, done, total))
        assert len(calls) < 10_000
    return calls


def check_rewrite_progress(calls, size):
    dones = [c[1] for c in calls]
    assert all(c[2] == size for c in calls)
    assert dones == sorted(dones) and dones[-1] == size
    assert all(0 < d for d in dones)


@pytest.mark.emulator_only
def test_rewrite_large_synthetic_uses_tokens(gcs):
    bucket = gcs.bucket(SYNTH_BUCKET)
    src = bucket.get_blob(BIG_NAME)
    assert src.size == BIG_SIZE
    dest = bucket.blob("big-copy")
    calls = rewrite_until_done(dest, src)
    check_rewrite_progress(calls, BIG_SIZE)
    assert len(calls) > 1, "a 300 MiB rewrite should need several calls with a rewriteToken"
    dest.reload()
    assert dest.size == BIG_SIZE and dest.crc32c == src.crc32c
    # Spot-check the bytes against the source's synthetic formula.
    for off in (0, BIG_SIZE // 2 + 3, BIG_SIZE - 4096):
        got = dest.download_as_bytes(start=off, end=off + 4095)
        assert got == synth_bytes(BIG_NAME, src.generation, SYNTH_SEED, off, 4096)


def test_rewrite_uploaded_large(fresh_bucket):
    data = payload(12 * MiB, 32)
    src = put(fresh_bucket, "rw-big", data)
    dest = fresh_bucket.blob("rw-big-dst")
    calls = rewrite_until_done(dest, src)
    check_rewrite_progress(calls, len(data))
    assert dest.download_as_bytes() == data


def test_delete(fresh_bucket):
    blob = put(fresh_bucket, "del", b"x")
    blob.delete()
    assert fresh_bucket.get_blob("del") is None
    with pytest.raises(gexc.NotFound):
        fresh_bucket.blob("del").download_as_bytes()
    with pytest.raises(gexc.NotFound):
        fresh_bucket.blob("del").delete()


def test_delete_blobs_batch_style(gcs, fresh_bucket):
    for i in range(5):
        put(fresh_bucket, f"many/{i}")
    for b in list(gcs.list_blobs(fresh_bucket, prefix="many/")):
        b.delete()
    assert list(gcs.list_blobs(fresh_bucket)) == []


def test_patch_and_update_metadata(fresh_bucket):
    data = b"content stays"
    blob = put(fresh_bucket, "meta", data)
    gen = blob.generation
    assert blob.metageneration == 1
    blob.metadata = {"a": "1", "b": "2"}
    blob.patch()
    assert blob.metageneration == 2 and blob.generation == gen
    assert blob.metadata == {"a": "1", "b": "2"}
    blob.metadata = {"a": None, "c": "3"}  # None removes a key
    blob.content_type = "text/x-patched"
    blob.patch()
    fresh = fresh_bucket.get_blob("meta")
    assert fresh.metageneration == 3 and fresh.generation == gen
    assert fresh.metadata == {"b": "2", "c": "3"}
    assert fresh.content_type == "text/x-patched"
    # update (PUT) replaces the whole metadata.
    fresh.metadata = {"only": "this"}
    fresh.update()
    again = fresh_bucket.get_blob("meta")
    assert again.metageneration == 4
    assert again.metadata == {"only": "this"}
    assert again.download_as_bytes() == data
    assert again.crc32c == crc32c_b64(data)


def test_patch_missing_object_is_404(fresh_bucket):
    blob = fresh_bucket.blob("ghost")
    blob.metadata = {"a": "b"}
    with pytest.raises(gexc.NotFound):
        blob.patch()


# ============================================================================================
# Preconditions: every one failing and passing, on every operation that takes it
# ============================================================================================

PRECONDITIONS = ["if_generation_match", "if_generation_not_match",
                 "if_metageneration_match", "if_metageneration_not_match"]


def pre_value(blob, kind, passing):
    current = blob.generation if "metageneration" not in kind else blob.metageneration
    is_match = kind.endswith("_match") and "not_match" not in kind
    if passing:
        return current if is_match else current + 1000
    return current + 1000 if is_match else current


def read_failure(kind):
    # Cloud Storage: a failed *NotMatch on a read is 304 Not Modified; a failed *Match is 412.
    return gexc.NotModified if "not_match" in kind else gexc.PreconditionFailed


@pytest.fixture
def target(fresh_bucket):
    blob = put(fresh_bucket, "target", b"original")
    blob.metadata = {"m": "1"}
    blob.patch()  # metageneration 2, so generation and metageneration differ
    blob.reload()
    assert blob.metageneration == 2
    return blob


def assert_unchanged(bucket, blob):
    now = bucket.get_blob(blob.name)
    assert now is not None
    assert (now.generation, now.metageneration) == (blob.generation, blob.metageneration)
    assert now.download_as_bytes() == b"original"


def op_get(bucket, blob, pre):
    b = bucket.blob(blob.name)
    b.reload(**pre)
    assert b.generation == blob.generation


def op_download(bucket, blob, pre):
    assert bucket.blob(blob.name).download_as_bytes(**pre) == b"original"


# Note: for uploads, google-cloud-storage 3.17 spells the last precondition
# "ifMetaGenerationNotMatch" (capital G) in the query string; the emulator must honour it
# for upload_from_string/upload_from_file(if_metageneration_not_match=...) to work.
def op_upload(bucket, blob, pre):
    b = bucket.blob(blob.name)
    b.upload_from_string(b"replaced", **pre)
    assert bucket.blob(blob.name).download_as_bytes() == b"replaced"


def op_upload_resumable(bucket, blob, pre):
    b = bucket.blob(blob.name)
    b.chunk_size = 256 * KiB
    data = payload(600 * KiB, 40)
    b.upload_from_file(io.BytesIO(data), **pre)
    assert bucket.blob(blob.name).download_as_bytes() == data


def op_delete(bucket, blob, pre):
    bucket.blob(blob.name).delete(**pre)
    assert bucket.get_blob(blob.name) is None


def op_patch(bucket, blob, pre):
    b = bucket.blob(blob.name)
    b.metadata = {"patched": "yes"}
    b.patch(**pre)
    assert b.metageneration == blob.metageneration + 1


def op_copy_dest(bucket, blob, pre):
    src = put(bucket, "copy-src", b"copied")
    bucket.copy_blob(src, bucket, blob.name, **pre)
    assert bucket.blob(blob.name).download_as_bytes() == b"copied"


def op_copy_source(bucket, blob, pre):
    spre = {k.replace("if_", "if_source_"): v for k, v in pre.items()}
    bucket.copy_blob(blob, bucket, "copy-dst", **spre)
    assert bucket.blob("copy-dst").download_as_bytes() == b"original"


def op_rewrite_dest(bucket, blob, pre):
    src = put(bucket, "rw-src", b"rewritten")
    bucket.blob(blob.name).rewrite(src, **pre)
    assert bucket.blob(blob.name).download_as_bytes() == b"rewritten"


def op_rewrite_source(bucket, blob, pre):
    spre = {k.replace("if_", "if_source_"): v for k, v in pre.items()}
    bucket.blob("rw-dst").rewrite(blob, **spre)
    assert bucket.blob("rw-dst").download_as_bytes() == b"original"


def op_compose_dest(bucket, blob, pre):
    src = put(bucket, "c-src", b"composed")
    bucket.blob(blob.name).compose([src], **pre)
    assert bucket.blob(blob.name).download_as_bytes() == b"composed"


READ_OPS = {"get": op_get, "download": op_download}
WRITE_OPS = {"upload": op_upload, "upload_resumable": op_upload_resumable, "delete": op_delete,
             "patch": op_patch, "copy_dest": op_copy_dest, "copy_source": op_copy_source,
             "rewrite_dest": op_rewrite_dest, "rewrite_source": op_rewrite_source}
COMPOSE_PRECONDITIONS = ["if_generation_match", "if_metageneration_match"]

CASES = (
    [(op, kind, passing) for op in READ_OPS for kind in PRECONDITIONS for passing in (True, False)]
    + [(op, kind, passing) for op in WRITE_OPS for kind in PRECONDITIONS
       for passing in (True, False)]
    + [("compose_dest", kind, passing) for kind in COMPOSE_PRECONDITIONS
       for passing in (True, False)]
)


@pytest.mark.parametrize("op,kind,passing", CASES,
                         ids=[f"{o}-{k}-{'pass' if p else 'fail'}" for o, k, p in CASES])
def test_precondition(fresh_bucket, target, op, kind, passing):
    fn = {**READ_OPS, **WRITE_OPS, "compose_dest": op_compose_dest}[op]
    pre = {kind: pre_value(target, kind, passing)}
    if passing:
        fn(fresh_bucket, target, pre)
        return
    expected = read_failure(kind) if op in READ_OPS else gexc.PreconditionFailed
    with pytest.raises(expected):
        fn(fresh_bucket, target, pre)
    assert_unchanged(fresh_bucket, target)
    if op == "copy_source":
        assert fresh_bucket.get_blob("copy-dst") is None
    if op == "rewrite_source":
        assert fresh_bucket.get_blob("rw-dst") is None


@pytest.mark.parametrize("op", ["upload", "upload_resumable", "copy_dest", "rewrite_dest",
                                "compose_dest"])
def test_if_generation_match_zero_create_only(fresh_bucket, target, op):
    fn = {**WRITE_OPS, "compose_dest": op_compose_dest}[op]
    with pytest.raises(gexc.PreconditionFailed):
        fn(fresh_bucket, target, {"if_generation_match": 0})
    assert_unchanged(fresh_bucket, target)
    # On a name that does not exist, generation 0 passes.
    fn(fresh_bucket, types.SimpleNamespace(name="brand-new"), {"if_generation_match": 0})
    assert fresh_bucket.get_blob("brand-new") is not None


def test_precondition_on_missing_object(fresh_bucket):
    # ifGenerationMatch=N on an absent object: 412, not 404, for writes.
    with pytest.raises(gexc.PreconditionFailed):
        fresh_bucket.blob("absent").upload_from_string(b"x", if_generation_match=12345)
    assert fresh_bucket.get_blob("absent") is None


def test_read_not_match_raw_304(emulator, target):
    base = f"{emulator.url}/storage/v1/b/{target.bucket.name}/o/target"
    r = requests.get(base, params={"ifGenerationNotMatch": target.generation})
    assert r.status_code == 304 and r.content == b""
    r = requests.get(base, params={"alt": "media", "ifMetagenerationNotMatch": target.metageneration})
    assert r.status_code == 304 and r.content == b""
    r = requests.get(base, params={"alt": "media", "ifGenerationMatch": target.generation + 1})
    assert r.status_code == 412
    assert r.json()["error"]["code"] == 412
    r = requests.get(base, params={"alt": "media", "ifGenerationNotMatch": target.generation + 1})
    assert r.status_code == 200 and r.content == b"original"


# ============================================================================================
# Unusual names
# ============================================================================================

UNUSUAL = [
    "with space", "per%cent", "per%25cent", "hash#tag", "question?mark", "plus+sign",
    "amp&eq=semi;", "unicode-é-日本語-🙂", "a//b", "trailing/", "/leading", "dots/../x",
    "star*[brackets]!'()~", "back\\slash", "tab\tchar", "e\u0301-combining", "x" * 1024,
    "é" * 512,  # 1024 bytes of UTF-8
]


@pytest.mark.parametrize("name", UNUSUAL, ids=[f"n{i}" for i in range(len(UNUSUAL))])
def test_unusual_name_round_trip(gcs, emulator, fresh_bucket, name):
    data = f"content of {name!r}".encode()
    blob = fresh_bucket.blob(name)
    blob.upload_from_string(data)
    assert blob.name == name
    # list (exact match by prefix), get, download through the client
    listed = names_of(gcs.list_blobs(fresh_bucket, prefix=name))
    assert listed == [name]
    got = fresh_bucket.get_blob(name)
    assert got is not None and got.name == name and got.size == len(data)
    assert got.download_as_bytes() == data
    assert requests.get(got.media_link).content == data
    # XML API path style
    r = requests.get(f"{emulator.url}/{fresh_bucket.name}/{xml_path(name)}")
    assert r.status_code == 200 and r.content == data
    # and delete
    fresh_bucket.blob(name).delete()
    assert fresh_bucket.get_blob(name) is None


def test_unusual_names_list_order_is_utf8_bytes(gcs, fresh_bucket):
    names = ["b", "B", "a b", "a+b", "a%b", "é", "z", "日本", "~", "a/b", "a//b", "ab"]
    for n in names:
        put(fresh_bucket, n)
    got = names_of(gcs.list_blobs(fresh_bucket, page_size=5))
    assert got == sorted(names, key=lambda s: s.encode())


@pytest.mark.parametrize("bad", [".", "..", "line\nfeed", "carriage\rreturn"])
def test_invalid_object_names_rejected(fresh_bucket, bad):
    with pytest.raises(gexc.BadRequest):
        fresh_bucket.blob(bad).upload_from_string(b"x")
    assert list(fresh_bucket.list_blobs()) == []


def test_bucket_delete(gcs, fresh_bucket):
    put(fresh_bucket, "o")
    with pytest.raises(gexc.Conflict):
        fresh_bucket.delete()
    fresh_bucket.blob("o").delete()
    fresh_bucket.delete()
    with pytest.raises(gexc.NotFound):
        gcs.get_bucket(fresh_bucket.name)


def test_name_too_long_rejected(fresh_bucket):
    with pytest.raises(gexc.BadRequest):
        fresh_bucket.blob("x" * 1025).upload_from_string(b"x")


# ============================================================================================
# Synthetic populated objects (gcs-emulator --populate)
# ============================================================================================


@pytest.mark.emulator_only
def test_populated_objects_list_and_verify(gcs):
    blobs = list(gcs.list_blobs(SYNTH_BUCKET, prefix=SYNTH_PREFIX, page_size=7))
    assert [b.name for b in blobs] == [f"{SYNTH_PREFIX}{i:08d}" for i in range(SYNTH_COUNT)]
    for b in blobs[:10] + blobs[-3:]:
        assert b.size == SYNTH_SIZE
        expected = synth_bytes(b.name, b.generation, SYNTH_SEED, 0, SYNTH_SIZE)
        assert b.crc32c == crc32c_b64(expected)
        assert b.download_as_bytes() == expected
        assert b.download_as_bytes(start=1001, end=2999) == expected[1001:3000]


@pytest.mark.emulator_only
def test_populated_objects_are_ordinary_objects(gcs):
    bucket = gcs.bucket(SYNTH_BUCKET)
    src = bucket.get_blob(f"{SYNTH_PREFIX}00000003")
    expected = synth_bytes(src.name, src.generation, SYNTH_SEED, 0, SYNTH_SIZE)
    dest = bucket.blob("composed-synth")
    dest.compose([src, bucket.blob(f"{SYNTH_PREFIX}00000004")])
    other = synth_bytes(f"{SYNTH_PREFIX}00000004",
                        bucket.get_blob(f"{SYNTH_PREFIX}00000004").generation,
                        SYNTH_SEED, 0, SYNTH_SIZE)
    assert dest.download_as_bytes() == expected + other
    dest.reload()
    assert dest.crc32c == crc32c_b64(expected + other)
    dest.delete()


# ============================================================================================
# Stats and faults (gcs-emulator's control API), observed through the client
# ============================================================================================


@pytest.mark.emulator_only
def test_stats_count_operations_by_class(emulator, fresh_bucket, gcs):
    data = payload(12345, 50)
    before = emulator.stats()
    blob = fresh_bucket.blob("counted")
    blob.upload_from_string(data)                       # objects.insert      class A
    for _ in range(3):
        list(gcs.list_blobs(fresh_bucket))              # objects.list        class A
    fresh_bucket.blob("counted").reload()               # objects.get         class B
    fresh_bucket.blob("counted").reload()               # objects.get         class B
    assert fresh_bucket.blob("counted").download_as_bytes() == data  # download class B
    fresh_bucket.blob("counted").delete()               # objects.delete      free
    after = emulator.stats()
    assert ops_delta(before, after, "objects.insert") == 1
    assert ops_delta(before, after, "objects.list") == 3
    assert ops_delta(before, after, "objects.get") == 2
    assert ops_delta(before, after, "objects.download") == 1
    assert ops_delta(before, after, "objects.delete") == 1
    assert stats_delta(before, after, "class_a") == 4
    assert stats_delta(before, after, "class_b") == 3
    assert stats_delta(before, after, "free") == 1
    assert stats_delta(before, after, "requests") >= 8
    assert stats_delta(before, after, "bytes_in") >= len(data)
    assert stats_delta(before, after, "bytes_out") >= len(data)
    assert after["peak_connections"] >= 1


@pytest.fixture
def no_faults(emulator):
    yield
    if emulator.is_emulator:
        emulator.config(faults=[])


@pytest.mark.emulator_only
def test_fault_503_once_is_retried_by_client(emulator, fresh_bucket, no_faults):
    put(fresh_bucket, "f503", b"payload")
    before = emulator.stats()
    emulator.config(faults=[{"kind": "503", "rate": 1.0, "op": "objects.get", "count": 1}])
    blob = fresh_bucket.blob("f503")
    blob.reload()  # first attempt gets 503, the client's retry succeeds
    assert blob.size == 7
    after = emulator.stats()
    assert ops_delta(before, after, "objects.get") in (1, 2)  # the faulted attempt may count
    assert stats_delta(before, after, "faults_injected") == 1
    # count exhausted: no more faults
    fresh_bucket.blob("f503").reload()
    assert stats_delta(before, emulator.stats(), "faults_injected") == 1


@pytest.mark.emulator_only
def test_fault_503_seen_raw_and_on_unconditional_upload(emulator, fresh_bucket, no_faults):
    emulator.config(faults=[{"kind": "503", "rate": 1.0, "op": "objects.get", "count": 1}])
    r = requests.get(f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/anything")
    assert r.status_code == 503
    assert r.json()["error"]["code"] == 503
    # With retries off, the 503 surfaces through the client as ServiceUnavailable.
    emulator.config(faults=[{"kind": "503", "rate": 1.0, "op": "objects.insert", "count": 1}])
    with pytest.raises(gexc.ServiceUnavailable):
        fresh_bucket.blob("u").upload_from_string(b"data", retry=None)
    assert fresh_bucket.get_blob("u") is None
    # With the default policy (and a generation precondition) the client retries and succeeds.
    emulator.config(faults=[{"kind": "503", "rate": 1.0, "op": "objects.insert", "count": 1}])
    fresh_bucket.blob("u").upload_from_string(b"data", if_generation_match=0)
    assert fresh_bucket.blob("u").download_as_bytes() == b"data"


@pytest.mark.emulator_only
def test_fault_429_counted_and_retried(emulator, fresh_bucket, no_faults):
    put(fresh_bucket, "f429", b"abc")
    emulator.config(faults=[{"kind": "429", "rate": 1.0, "op": "objects.list", "count": 1,
                             "retry_after": 1}])
    r = requests.get(f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o")
    assert r.status_code == 429
    assert r.headers.get("Retry-After") == "1"
    emulator.config(faults=[{"kind": "429", "rate": 1.0, "op": "objects.list", "count": 1,
                             "retry_after": 1}])
    before = emulator.stats()
    assert names_of(fresh_bucket.list_blobs()) == ["f429"]
    after = emulator.stats()
    assert ops_delta(before, after, "objects.list") in (1, 2)  # the faulted attempt may count
    assert stats_delta(before, after, "faults_injected") == 1


@pytest.mark.emulator_only
@pytest.mark.parametrize("kind", ["reset-before", "reset-mid", "truncate"])
def test_fault_connection_faults_on_download_are_survived(emulator, fresh_bucket, no_faults,
                                                          kind):
    data = payload(2 * MiB, 51)
    put(fresh_bucket, "conn", data)
    emulator.config(faults=[{"kind": kind, "rate": 1.0, "op": "objects.download", "count": 1}])
    before = emulator.stats()
    assert fresh_bucket.blob("conn").download_as_bytes() == data
    after = emulator.stats()
    assert stats_delta(before, after, "faults_injected") == 1
    assert ops_delta(before, after, "objects.download") >= 1


@pytest.mark.emulator_only
def test_fault_stall_then_timeout(emulator, fresh_bucket, no_faults):
    put(fresh_bucket, "stall", b"s")
    emulator.config(faults=[{"kind": "stall", "rate": 1.0, "op": "objects.get", "count": 1,
                             "seconds": 3}])
    url = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/stall"
    with pytest.raises(requests.exceptions.Timeout):
        requests.get(url, timeout=0.5)
    r = requests.get(url, timeout=10)
    assert r.status_code == 200


@pytest.mark.emulator_only
def test_config_latency_applies(emulator, fresh_bucket, no_faults):
    import time
    put(fresh_bucket, "lat", b"l")
    url = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o/lat"
    emulator.config(latency_ms=300)
    try:
        t0 = time.monotonic()
        assert requests.get(url).status_code == 200
        assert time.monotonic() - t0 >= 0.29
    finally:
        emulator.config(latency_ms=0)
    # Off again: the quickest of three GETs (one stalled by a loaded machine proves nothing).
    took = []
    for _ in range(3):
        t0 = time.monotonic()
        assert requests.get(url).status_code == 200
        took.append(time.monotonic() - t0)
    assert min(took) < 0.2, took


@pytest.mark.emulator_only
def test_concurrent_clients(emulator, gcs, fresh_bucket):
    errors = []

    def worker(i):
        try:
            data = payload(20_000, 100 + i)
            b = fresh_bucket.blob(f"conc/{i:03d}")
            b.upload_from_string(data)
            assert fresh_bucket.blob(f"conc/{i:03d}").download_as_bytes() == data
        except Exception as e:  # noqa: BLE001 - collected and reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(list(gcs.list_blobs(fresh_bucket, prefix="conc/"))) == 32
    assert emulator.stats()["peak_connections"] >= 2


# ============================================================================================
# Bad input: the errors Cloud Storage gives, never a crash
# ============================================================================================


def assert_json_error(r, code, reason=None):
    assert r.status_code == code, (r.status_code, r.text)
    body = r.json()
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    if reason is not None:
        assert reason in [e.get("reason") for e in body["error"].get("errors", [])], body


def test_malformed_json_body_is_400(emulator, fresh_bucket):
    put(fresh_bucket, "obj", b"x")
    base = f"{emulator.url}/storage/v1/b"
    r = requests.post(f"{base}?project=p", data=b"{not json",
                      headers={"Content-Type": "application/json"})
    assert_json_error(r, 400)
    r = requests.patch(f"{base}/{fresh_bucket.name}/o/obj", data=b"[1, 2",
                       headers={"Content-Type": "application/json"})
    assert_json_error(r, 400)
    r = requests.post(f"{base}/{fresh_bucket.name}/o/dest/compose", data=b"{\"sourceObjects\": ",
                      headers={"Content-Type": "application/json"})
    assert_json_error(r, 400)
    r = requests.post(f"{base}/{fresh_bucket.name}/o/dest/compose", json={"sourceObjects": []})
    assert_json_error(r, 400)
    emulator.check_alive()


def test_unknown_object_and_bucket_404_error_body(emulator, fresh_bucket):
    base = f"{emulator.url}/storage/v1/b"
    assert_json_error(requests.get(f"{base}/{fresh_bucket.name}/o/missing"), 404, "notFound")
    assert_json_error(requests.get(f"{base}/{fresh_bucket.name}/o/missing?alt=media"), 404,
                      "notFound")
    assert_json_error(requests.delete(f"{base}/{fresh_bucket.name}/o/missing"), 404, "notFound")
    assert_json_error(requests.get(f"{base}/fidelity-never-created-bucket-0003"), 404, "notFound")
    assert_json_error(requests.get(f"{base}/fidelity-never-created-bucket-0003/o/x"), 404,
                      "notFound")


def test_bad_parameters_are_400(emulator, fresh_bucket):
    base = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o"
    assert_json_error(requests.get(base, params={"maxResults": "abc"}), 400)
    assert_json_error(requests.get(base, params={"pageToken": "!!not-a-token!!"}), 400)
    assert_json_error(requests.get(base + "/x", params={"ifGenerationMatch": "12x"}), 400)
    r = requests.post(f"{emulator.url}/upload/storage/v1/b/{fresh_bucket.name}/o",
                      params={"uploadType": "bogus", "name": "x"}, data=b"x")
    assert_json_error(r, 400)
    # Unknown parameters are not an error for Cloud Storage's JSON API.
    r = requests.get(base, params={"someUnknownParameter": "1"})
    assert r.status_code == 200, r.text
    emulator.check_alive()


def test_invalid_bucket_name_rejected(gcs):
    with pytest.raises(gexc.BadRequest):
        gcs.create_bucket("Invalid_Upper")


def test_oversized_header_rejected_without_crash(emulator, fresh_bucket):
    url = f"{emulator.url}/storage/v1/b/{fresh_bucket.name}/o"
    try:
        r = requests.get(url, headers={"X-Huge": "a" * (256 * KiB)}, timeout=30)
        assert r.status_code in (400, 413, 431), r.status_code
    except requests.exceptions.ConnectionError:
        pass  # closing the connection on an oversized header is acceptable
    emulator.check_alive()
    assert requests.get(url).status_code == 200
