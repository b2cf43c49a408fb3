"""The write half of the gcs layer against gcs-emulator through gcs-smoke: one-request uploads
from a buffer and from a file descriptor, checksums and preconditions, XML multipart uploads
(parallel parts, abort, list, faults, a lost complete reply), resumable uploads recovering from
chunk faults, compose pinned by generation, copy through several rewrite calls, delete, patch
and testIamPermissions. Content is always checked with Google's Python client."""

import hashlib
import http.server
import threading

import google_crc32c
import numpy as np
import pytest

from tests.integration.transport_util import run_smoke
from tests.lib.synth import synth_bytes

pytestmark = pytest.mark.emulator_only

BUCKET = "writes"
SEED = 7
MIB = 1024 * 1024
COPY_SIZE = 200 * MIB


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/copysrc/:1:200M:{SEED}"]


@pytest.fixture(autouse=True)
def clean_faults(emulator):
    emulator.config(faults=[], latency_ms=0, deny=[])
    yield
    emulator.config(faults=[], latency_ms=0, deny=[])


@pytest.fixture(scope="module")
def bucket(gcs):
    return gcs.bucket(BUCKET)


def smoke(emulator, *args):
    return run_smoke(["--endpoint", emulator.url, "--anonymous", BUCKET, *args], timeout=300)


def reset_stats(emulator):
    emulator._control("POST", "/_emulator/reset?stats_only=true", body={})


def parse_object(line):
    fields = line.rstrip("\n").split("\t")
    return {"name": fields[0], "size": int(fields[1]), "generation": int(fields[2]),
            "metageneration": int(fields[3]), "updated_ns": int(fields[4]),
            "mtime_ns": int(fields[5]), "crc32c": int(fields[6], 16),
            "symlink": fields[7] if len(fields) > 7 else ""}


def ok(result):
    assert result.rc == 0, result.stderr
    return parse_object(result.text.splitlines()[-1])


def failure_lines(result):
    return [line for line in result.stderr.splitlines() if " failed: " in line]


def random_bytes(size, seed):
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


@pytest.fixture
def make_file(tmp_path):
    def make(name, data):
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)
    return make


# ---- one-request uploads ----

@pytest.mark.parametrize("mode", ["buffer", "fd"])
def test_upload_small_file(emulator, bucket, make_file, mode):
    data = random_bytes(1 * MIB + 12345, 1)
    path = make_file("small.bin", data)
    extra = ["--fd"] if mode == "fd" else []
    obj = ok(smoke(emulator, "upload", f"up/{mode}", path, "--mtime", "1700000000",
                   "--ctype", "application/x-test", "--ifgen", "0", *extra))
    assert obj["size"] == len(data) and obj["generation"] > 0
    assert obj["crc32c"] == google_crc32c.value(data)
    assert obj["mtime_ns"] == 1700000000 * 10**9
    blob = bucket.get_blob(f"up/{mode}")
    assert blob.download_as_bytes() == data
    assert blob.content_type == "application/x-test"
    assert blob.metadata == {"goog-reserved-file-mtime": "1700000000",
                             "gcsfuse_mtime": "2023-11-14T22:13:20Z"}


def test_upload_empty_and_symlink(emulator, bucket, make_file):
    path = make_file("empty", b"")
    obj = ok(smoke(emulator, "upload", "up/link", path, "--symlink", "../target dir/f"))
    assert obj["size"] == 0 and obj["symlink"] == "../target dir/f"
    blob = bucket.get_blob("up/link")
    assert blob.download_as_bytes() == b""
    assert blob.metadata["gcsfuse_symlink_target"] == "../target dir/f"


def test_upload_wrong_crc_is_rejected(emulator, bucket, make_file):
    path = make_file("data", random_bytes(300000, 2))
    result = smoke(emulator, "upload", "up/badcrc", path, "--badcrc")
    assert result.rc == 1
    assert "ERROR Input/output error" in result.stderr
    lines = failure_lines(result)
    assert len(lines) == 1 and "objects.insert gs://writes/up/badcrc failed" in lines[0]
    assert "HTTP 400" in lines[0]
    assert bucket.get_blob("up/badcrc") is None


def test_if_generation_match_zero_on_existing_object(emulator, bucket, make_file):
    first = make_file("first", b"first version")
    ok(smoke(emulator, "upload", "up/exists", first, "--ifgen", "0"))
    second = make_file("second", b"second version")
    result = smoke(emulator, "upload", "up/exists", second, "--ifgen", "0")
    assert result.rc == 1
    assert "ERROR Stale file handle" in result.stderr
    assert "HTTP 412" in failure_lines(result)[0]
    assert bucket.get_blob("up/exists").download_as_bytes() == b"first version"


def test_upload_retry_needs_a_precondition(emulator, make_file):
    path = make_file("data", b"x" * 5000)
    emulator.config(faults=[{"kind": "503", "rate": 1, "count": 1, "op": "objects.insert"}])
    result = smoke(emulator, "upload", "up/noretry", path)
    assert result.rc == 1 and "ERROR Input/output error" in result.stderr
    assert result.stats["retries"] == 0
    assert "1 attempt," in failure_lines(result)[0]
    emulator.config(faults=[{"kind": "503", "rate": 1, "count": 1, "op": "objects.insert"}])
    result = smoke(emulator, "upload", "up/retried", path, "--ifgen", "0")
    assert result.rc == 0, result.stderr
    assert result.stats["retries"] == 1


# ---- XML multipart upload ----

@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    data = random_bytes(64 * MIB, 3)
    path = tmp_path_factory.mktemp("big") / "big.bin"
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest(), google_crc32c.value(data)


@pytest.mark.parametrize("mode", ["buffer", "fd"])
def test_multipart_64mib_parallel_parts(emulator, bucket, big_file, mode):
    path, digest, crc = big_file
    reset_stats(emulator)
    extra = ["--fd"] if mode == "fd" else []
    obj = ok(smoke(emulator, "multipart", f"mp/{mode}", path, str(8 * MIB), "--ifgen", "0",
                   "--mtime", "1650000000", *extra))
    assert obj["size"] == 64 * MIB and obj["crc32c"] == crc
    assert obj["mtime_ns"] == 1650000000 * 10**9
    stats = emulator.stats()
    assert stats["ops"]["xml.multipart_initiate"] == 1
    assert stats["ops"]["xml.multipart_upload_part"] == 8
    assert stats["ops"]["xml.multipart_complete"] == 1
    assert stats["peak_connections"] > 1  # parts really were in flight together
    blob = bucket.get_blob(f"mp/{mode}")
    assert hashlib.sha256(blob.download_as_bytes()).hexdigest() == digest
    assert blob.metadata == {"goog-reserved-file-mtime": "1650000000",
                             "gcsfuse_mtime": "2022-04-15T05:20:00Z"}


def test_multipart_abort_leaves_no_upload(emulator, bucket, big_file):
    path, _, _ = big_file
    result = smoke(emulator, "multipart", "abort/obj", path, str(8 * MIB), "--abort")
    assert result.rc == 0, result.stderr
    assert result.text.startswith("ABORTED\t")
    listing = smoke(emulator, "uploads", "abort/")
    assert listing.rc == 0, listing.stderr
    assert listing.text == ""
    assert bucket.get_blob("abort/obj") is None


def test_multipart_list_finds_leftovers(emulator):
    ids = []
    for name in ("left/a", "left/b", "left/b", "other/c"):
        result = smoke(emulator, "mpbegin", name)
        assert result.rc == 0, result.stderr
        ids.append(result.text.strip())
    listing = smoke(emulator, "uploads", "left/")
    assert listing.rc == 0, listing.stderr
    rows = [line.split("\t") for line in listing.text.splitlines()]
    assert sorted(rows) == sorted([["left/a", ids[0]], ["left/b", ids[1]], ["left/b", ids[2]]])
    for name, upload_id in rows:
        assert smoke(emulator, "mpabort", name, upload_id).rc == 0
    assert smoke(emulator, "uploads", "left/").text == ""
    again = smoke(emulator, "mpabort", "left/a", ids[0])
    assert again.rc == 1 and "ERROR No such file or directory" in again.stderr
    assert smoke(emulator, "mpabort", "other/c", ids[3]).rc == 0


def test_multipart_list_pages(emulator):
    for i in range(5):
        assert smoke(emulator, "mpbegin", f"pages/{i % 2}").rc == 0
    # The emulator's pages are max-uploads long; gcs-smoke always walks every page, so ask the
    # server directly for a short page to check the markers, then for the whole list.
    import urllib.request
    with urllib.request.urlopen(
            f"{emulator.url}/{BUCKET}?uploads&prefix=pages/&max-uploads=2") as reply:
        page = reply.read().decode()
    assert "<IsTruncated>true</IsTruncated>" in page and "<NextUploadIdMarker>" in page
    listing = smoke(emulator, "uploads", "pages/")
    rows = [line.split("\t") for line in listing.text.splitlines()]
    assert len(rows) == 5 and len({r[1] for r in rows}) == 5
    for name, upload_id in rows:
        assert smoke(emulator, "mpabort", name, upload_id).rc == 0


def test_multipart_parts_retried_under_faults(emulator, bucket, big_file):
    path, digest, _ = big_file
    reset_stats(emulator)
    emulator.config(faults=[{"kind": "503", "rate": 1, "count": 3,
                             "op": "xml.multipart_upload_part"}])
    result = smoke(emulator, "multipart", "mp/faulted", path, str(8 * MIB))
    assert result.rc == 0, result.stderr
    assert result.stats["retries"] == 3 == emulator.stats()["faults_injected"]
    blob = bucket.get_blob("mp/faulted")
    assert hashlib.sha256(blob.download_as_bytes()).hexdigest() == digest


def test_multipart_five_percent_503_everywhere(emulator, bucket, make_file):
    datas = [random_bytes(21 * MIB, 10 + i) for i in range(6)]
    reset_stats(emulator)
    # Every 20th request fails, never twice for one object: no call can run out of retries,
    # and the 42 upload requests (6 x initiate, 5 parts, complete) and the few others meet at
    # least 2 faults. (A random 5% missed all of them in about 1 run in 9.)
    emulator.config(faults=[{"kind": "503", "every": 20, "per_object": 1}])
    for i, data in enumerate(datas):
        path = make_file(f"f{i}", data)
        result = smoke(emulator, "multipart", f"five/{i}", path, str(5 * MIB), "--ifgen", "0")
        assert result.rc == 0, result.stderr
    emulator.config(faults=[])
    stats = emulator.stats()
    assert stats["faults_injected"] >= 2, stats
    for i, data in enumerate(datas):
        assert bucket.get_blob(f"five/{i}").download_as_bytes() == data
    assert smoke(emulator, "uploads", "five/").text == ""


def test_multipart_complete_reply_lost(emulator, bucket, make_file):
    data = random_bytes(11 * MIB, 20)
    path = make_file("lost", data)
    # The complete is performed, its reply cut: the retry finds NoSuchUpload, and the object
    # with the parts' crc32c in place is accepted.
    emulator.config(faults=[{"kind": "reset-mid", "rate": 1, "count": 1,
                             "op": "xml.multipart_complete"}])
    obj = ok(smoke(emulator, "multipart", "lost/ok", path, str(5 * MIB), "--ifgen", "0"))
    assert obj["crc32c"] == google_crc32c.value(data)
    assert bucket.get_blob("lost/ok").download_as_bytes() == data
    # Without a precondition the complete is not retried: the caller hears EIO.
    emulator.config(faults=[{"kind": "reset-mid", "rate": 1, "count": 1,
                             "op": "xml.multipart_complete"}])
    result = smoke(emulator, "multipart", "lost/noretry", path, str(5 * MIB))
    assert result.rc == 1 and "ERROR Input/output error" in result.stderr
    assert result.stats["retries"] == 0


def test_multipart_complete_precondition(emulator, make_file):
    data = random_bytes(6 * MIB, 21)
    path = make_file("pre", data)
    ok(smoke(emulator, "multipart", "pre/obj", path, str(5 * MIB), "--ifgen", "0"))
    result = smoke(emulator, "multipart", "pre/obj", path, str(5 * MIB), "--ifgen", "0")
    assert result.rc == 1 and "ERROR Stale file handle" in result.stderr
    assert smoke(emulator, "uploads", "pre/").text == ""  # aborted after the failed complete


def test_multipart_unsupported_gives_enosys():
    class NotImplementedHandler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(501)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotImplementedHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = run_smoke(["--endpoint", f"http://127.0.0.1:{server.server_port}",
                            "--anonymous", BUCKET, "mpbegin", "x/y"])
    finally:
        server.shutdown()
    assert result.rc == 1
    assert "ERROR Function not implemented" in result.stderr


# ---- resumable uploads ----

def test_resumable_upload(emulator, bucket, make_file):
    data = random_bytes(3 * MIB + 777, 30)
    path = make_file("res", data)
    for args in ([], ["--unknown-size"], ["--fd"]):
        name = "res/plain" + "".join(args)
        obj = ok(smoke(emulator, "resumable", name, path, str(1 * MIB), *args))
        assert obj["size"] == len(data) and obj["crc32c"] == google_crc32c.value(data)
        assert bucket.get_blob(name).download_as_bytes() == data


@pytest.mark.parametrize("kind", ["503", "reset-before", "stall"])
def test_resumable_chunk_fault_recovers(emulator, bucket, make_file, kind):
    data = random_bytes(3 * MIB + 5, 31)
    path = make_file("res", data)
    reset_stats(emulator)
    # The first chunk fails in transit (performed or not, by kind); the client asks the
    # session where it stands and resends from there. (reset-mid would cut nothing: a 308 has
    # no body.)
    emulator.config(faults=[{"kind": kind, "rate": 1, "count": 1, "seconds": 5,
                             "op": "objects.resumable_chunk"}])
    result = run_smoke(["--endpoint", emulator.url, "--anonymous", "--stall", "1", BUCKET,
                        "resumable", f"res/{kind}", path, str(1 * MIB)])
    assert result.rc == 0, result.stderr
    stats = emulator.stats()
    assert stats["faults_injected"] == 1
    # 4 chunks, the failed attempt and one status query; a chunk performed before its reply
    # was lost (stall: performed, reply late) is not sent again.
    want = 5 if kind == "stall" else 6
    assert stats["ops"]["objects.resumable_chunk"] == want
    assert bucket.get_blob(f"res/{kind}").download_as_bytes() == data


def test_resumable_final_reply_lost(emulator, bucket, make_file):
    data = random_bytes(700000, 32)
    path = make_file("res", data)
    emulator.config(faults=[{"kind": "reset-mid", "rate": 1, "count": 1,
                             "op": "objects.resumable_chunk"}])
    obj = ok(smoke(emulator, "resumable", "res/final", path, str(1 * MIB)))
    assert obj["size"] == len(data)
    assert bucket.get_blob("res/final").download_as_bytes() == data


def test_resumable_and_multipart_small_edges(emulator, bucket, make_file):
    empty = make_file("empty", b"")
    obj = ok(smoke(emulator, "resumable", "edge/empty", empty, str(1 * MIB)))
    assert obj["size"] == 0
    assert bucket.get_blob("edge/empty").download_as_bytes() == b""
    small = random_bytes(1000, 33)
    path = make_file("small", small)
    obj = ok(smoke(emulator, "multipart", "edge/onepart", path, str(8 * MIB), "--fd"))
    assert obj["size"] == 1000 and obj["crc32c"] == google_crc32c.value(small)
    assert bucket.get_blob("edge/onepart").download_as_bytes() == small
    # A non-final chunk must be whole 256 KiB units: refused before any request.
    odd = smoke(emulator, "resumable", "edge/odd", make_file("odd", b"z" * 400000), "300000")
    assert odd.rc == 1 and "ERROR Invalid argument" in odd.stderr


def test_resumable_precondition_at_finalization(emulator, make_file):
    path = make_file("res", b"abc" * 1000)
    ok(smoke(emulator, "resumable", "res/pre", path, str(1 * MIB), "--ifgen", "0"))
    result = smoke(emulator, "resumable", "res/pre", path, str(1 * MIB), "--ifgen", "0")
    assert result.rc == 1 and "ERROR Stale file handle" in result.stderr


# ---- compose, copy, delete, patch, permissions ----

def test_compose_32_sources_pinned(emulator, bucket, make_file):
    datas = [random_bytes(1000 + 97 * i, 40 + i) for i in range(32)]
    generations = []
    for i, data in enumerate(datas):
        blob = bucket.blob(f"cmp/src{i:02d}")
        blob.upload_from_string(data)
        generations.append(blob.generation)
    sources = [f"cmp/src{i:02d}#{g}" for i, g in enumerate(generations)]
    whole = b"".join(datas)
    obj = ok(smoke(emulator, "compose", "cmp/out", *sources, "--ifgen", "0"))
    assert obj["size"] == len(whole) and obj["crc32c"] == google_crc32c.value(whole)
    assert bucket.get_blob("cmp/out").download_as_bytes() == whole
    # A source rewritten since: its pinned generation is gone.
    bucket.blob("cmp/src05").upload_from_string(b"changed")
    result = smoke(emulator, "compose", "cmp/out2", *sources)
    assert result.rc == 1
    assert "ERROR No such file or directory" in result.stderr
    assert bucket.get_blob("cmp/out2") is None
    too_many = smoke(emulator, "compose", "cmp/out3", *(sources + sources[:1]))
    assert too_many.rc == 1 and "ERROR Invalid argument" in too_many.stderr
    again = smoke(emulator, "compose", "cmp/out", sources[0], "--ifgen", "0")
    assert again.rc == 1 and "ERROR Stale file handle" in again.stderr


def test_copy_200mib_with_several_rewrites(emulator, bucket):
    src = bucket.get_blob("copysrc/00000000")
    assert src.size == COPY_SIZE
    reset_stats(emulator)
    obj = ok(smoke(emulator, "copy", src.name, str(src.generation), "cp/dest", "--ifgen", "0"))
    assert emulator.stats()["ops"]["objects.rewrite"] == 4  # 64 MiB per call
    assert obj["size"] == COPY_SIZE
    assert obj["crc32c"] == int.from_bytes(__import__("base64").b64decode(src.crc32c), "big")
    dest = bucket.get_blob("cp/dest")
    for offset in (0, 100 * MIB + 3, COPY_SIZE - 4096):
        got = dest.download_as_bytes(start=offset, end=offset + 4095)
        assert got == synth_bytes(src.name, src.generation, SEED, offset, 4096)
    stale = smoke(emulator, "copy", src.name, str(src.generation + 1), "cp/dest2")
    assert stale.rc == 1 and "ERROR No such file or directory" in stale.stderr


def test_delete_with_generation(emulator, bucket):
    blob = bucket.blob("del/obj")
    blob.upload_from_string(b"to delete")
    wrong = smoke(emulator, "delete", "del/obj", str(blob.generation + 1))
    assert wrong.rc == 1 and "ERROR No such file or directory" in wrong.stderr
    stale = smoke(emulator, "delete", "del/obj", "--ifgen", str(blob.generation + 1))
    assert stale.rc == 1 and "ERROR Stale file handle" in stale.stderr
    done = smoke(emulator, "delete", "del/obj", str(blob.generation))
    assert done.rc == 0, done.stderr
    assert bucket.get_blob("del/obj") is None
    gone = smoke(emulator, "delete", "del/obj")
    assert gone.rc == 1 and "ERROR No such file or directory" in gone.stderr


def test_delete_of_a_pinned_generation_is_retried(emulator, bucket):
    blob = bucket.blob("del/retry")
    blob.upload_from_string(b"x")
    # Performed, but the reply stalls: the retry finds nothing, which is success for a
    # pinned generation (the lost attempt deleted it).
    emulator.config(faults=[{"kind": "stall", "rate": 1, "count": 1, "seconds": 5,
                             "op": "objects.delete"}])
    result = run_smoke(["--endpoint", emulator.url, "--anonymous", "--stall", "1", BUCKET,
                        "delete", "del/retry", str(blob.generation)])
    assert result.rc == 0, result.stderr
    assert result.stats["retries"] == 1
    assert bucket.get_blob("del/retry") is None
    # The live object (no generation, no precondition) is not retried.
    blob.upload_from_string(b"y")
    emulator.config(faults=[{"kind": "503", "rate": 1, "count": 1, "op": "objects.delete"}])
    result = smoke(emulator, "delete", "del/retry")
    assert result.rc == 1 and "ERROR Input/output error" in result.stderr
    assert bucket.get_blob("del/retry") is not None


def test_patch_mtime(emulator, bucket):
    blob = bucket.blob("patch/obj")
    blob.upload_from_string(b"patch me")
    obj = ok(smoke(emulator, "patch", "patch/obj", "--mtime", "1600000000", "--ifmeta", "1"))
    assert obj["mtime_ns"] == 1600000000 * 10**9 and obj["metageneration"] == 2
    stat = smoke(emulator, "stat", "patch/obj")
    assert parse_object(stat.text)["mtime_ns"] == 1600000000 * 10**9
    assert bucket.get_blob("patch/obj").metadata == {"goog-reserved-file-mtime": "1600000000",
                                                     "gcsfuse_mtime": "2020-09-13T12:26:40Z"}
    stale = smoke(emulator, "patch", "patch/obj", "--mtime", "1", "--ifmeta", "1")
    assert stale.rc == 1 and "ERROR Stale file handle" in stale.stderr
    link = ok(smoke(emulator, "patch", "patch/obj", "--symlink", "there"))
    assert link["symlink"] == "there" and link["mtime_ns"] == 1600000000 * 10**9


def test_test_permissions(emulator):
    result = smoke(emulator, "testperm", "storage.objects.create", "storage.objects.delete")
    assert result.rc == 0, result.stderr
    assert result.text.splitlines() == ["storage.objects.create\t1",
                                        "storage.objects.delete\t1"]
    emulator.config(deny=["buckets.testIamPermissions"])
    denied = smoke(emulator, "testperm", "storage.objects.create")
    assert denied.rc == 1 and "ERROR Permission denied" in denied.stderr
