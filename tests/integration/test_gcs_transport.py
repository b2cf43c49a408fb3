"""The transport (http engine + gcs layer) against gcs-emulator through gcs-smoke: paginated
listing, stat, ranged and whole reads verified against the synthetic content, retries under
injected faults (counted against the emulator's own stats), deadlines, hostile names, stored
gzip bytes, STORAGE_EMULATOR_HOST, and the errors a mount reports."""

import gzip
import random
import time

import google_crc32c
import pytest

from tests.integration.transport_util import run_smoke
from tests.lib.synth import synth_bytes

pytestmark = pytest.mark.emulator_only

SEED = 11
SMALL_COUNT, SMALL_SIZE = 2500, 3000
BIG_SIZE = 6 * 1024 * 1024


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"tb/ds/:{SMALL_COUNT}:{SMALL_SIZE}:{SEED}",
            "--populate", f"tb/big/:2:6M:{SEED}"]


@pytest.fixture(autouse=True)
def clean_faults(emulator):
    emulator.config(faults=[], latency_ms=0)
    yield
    emulator.config(faults=[], latency_ms=0)


def smoke(emulator, *args, env=None):
    return run_smoke(["--endpoint", emulator.url, "--anonymous", *args], env=env)


def reset_stats(emulator):
    emulator._control("POST", "/_emulator/reset?stats_only=true", body={})


def stat(emulator, name):
    result = smoke(emulator, "tb", "stat", name)
    assert result.rc == 0, result.stderr
    fields = result.text.rstrip("\n").split("\t")
    return {"name": fields[0], "size": int(fields[1]), "generation": int(fields[2]),
            "crc32c": int(fields[6], 16)}


def expected(name, generation, offset, length):
    return synth_bytes(name, generation, SEED, offset, length)


def test_list_paginates_exactly_once_each(emulator):
    reset_stats(emulator)
    result = smoke(emulator, "tb", "list", "ds/", "", "1000")
    assert result.rc == 0, result.stderr
    names = [line.split("\t")[1] for line in result.text.splitlines()]
    assert names == [f"ds/{i:08d}" for i in range(SMALL_COUNT)]
    assert "PAGES 3" in result.stderr
    assert result.stats["list_calls"] == 3
    assert emulator.stats()["ops"]["objects.list"] == 3


def test_list_with_delimiter(emulator):
    result = smoke(emulator, "tb", "list", "", "/")
    assert result.rc == 0, result.stderr
    assert result.text.splitlines() == ["P\tbig/", "P\tds/"]


def test_stat_matches_content(emulator):
    obj = stat(emulator, "ds/00000042")
    assert obj["size"] == SMALL_SIZE and obj["generation"] > 0
    data = expected("ds/00000042", obj["generation"], 0, SMALL_SIZE)
    assert obj["crc32c"] == google_crc32c.value(data)
    missing = smoke(emulator, "tb", "stat", "ds/nope")
    assert missing.rc == 1 and "ERROR No such file or directory" in missing.stderr


def test_ranged_reads(emulator):
    obj = stat(emulator, "big/00000001")
    rng = random.Random(5)
    cases = [(0, 1), (0, 4096), (BIG_SIZE - 1, 1), (BIG_SIZE - 100, 1000), (BIG_SIZE, 10),
             (BIG_SIZE + 5000, 10)]
    cases += [(rng.randrange(BIG_SIZE), rng.randrange(1, 3_000_000)) for _ in range(6)]
    for offset, length in cases:
        result = smoke(emulator, "tb", "read", "big/00000001", str(offset), str(length))
        assert result.rc == 0, result.stderr
        want_len = max(0, min(length, BIG_SIZE - offset))
        assert len(result.stdout) == want_len, (offset, length)
        if want_len:
            assert result.stdout == expected("big/00000001", obj["generation"], offset,
                                             want_len), (offset, length)


def test_whole_and_parallel_reads(emulator):
    obj = stat(emulator, "big/00000000")
    want = expected("big/00000000", obj["generation"], 0, BIG_SIZE)
    whole = smoke(emulator, "tb", "readall", "big/00000000")
    assert whole.rc == 0, whole.stderr
    assert whole.stdout == want
    reset_stats(emulator)
    # 50 ms to first byte per request: requests submitted together must overlap, even on a
    # loaded machine where unpaced transfers could finish one after another.
    emulator.config(latency_ms=50)
    parallel = smoke(emulator, "tb", "pread", "big/00000000", str(256 * 1024))
    emulator.config(latency_ms=0)
    assert parallel.rc == 0, parallel.stderr
    assert parallel.stdout == want
    assert parallel.stats["media_calls"] == 24
    assert emulator.stats()["peak_connections"] > 1  # requests really were in flight together


def test_retries_under_503(emulator):
    obj = stat(emulator, "big/00000001")
    reset_stats(emulator)
    # Every 10th request fails, one object (or listing page) at most twice: far within the
    # 6 retries, whatever the order of the parallel range reads; the 48 ranges and 25 pages
    # meet at least 5 faults. (A random 10% could also miss them all.)
    emulator.config(faults=[{"kind": "503", "every": 10, "per_object": 2}])
    read = smoke(emulator, "tb", "pread", "big/00000001", str(128 * 1024))
    listing = smoke(emulator, "tb", "list", "ds/", "", "100")
    assert read.rc == 0, read.stderr
    assert listing.rc == 0, listing.stderr
    assert read.stdout == expected("big/00000001", obj["generation"], 0, BIG_SIZE)
    assert len(listing.text.splitlines()) == SMALL_COUNT
    injected = emulator.stats()["faults_injected"]
    assert injected >= 5
    # Every injected fault cost exactly one retry, and nothing else was retried.
    assert read.stats["retries"] + listing.stats["retries"] == injected
    assert read.stats["failures"] == 0 and listing.stats["failures"] == 0


@pytest.mark.parametrize("kind", ["reset-before", "reset-mid", "truncate"])
def test_retries_transport_faults(emulator, kind):
    obj = stat(emulator, "big/00000000")
    reset_stats(emulator)
    # Every 5th of the 24 range reads fails, at most 3 times on the one object: within the 6
    # retries, whatever their order (a random 20% missed them all in 1 run in 200).
    emulator.config(faults=[{"kind": kind, "every": 5, "per_object": 3,
                             "op": "objects.download"}])
    result = smoke(emulator, "tb", "pread", "big/00000000", str(256 * 1024))
    assert result.rc == 0, result.stderr
    assert result.stdout == expected("big/00000000", obj["generation"], 0, BIG_SIZE)
    injected = emulator.stats()["faults_injected"]
    assert injected == 3
    if kind == "reset-before":
        # libcurl itself re-sends once on a reused connection closed before any reply, so some
        # of these never reach our retry policy.
        assert result.stats["retries"] <= injected
    else:
        assert result.stats["retries"] == injected


def test_stalled_body_is_retried(emulator):
    obj = stat(emulator, "big/00000000")
    emulator.config(faults=[{"kind": "stall", "rate": 1.0, "count": 2, "seconds": 60,
                             "op": "objects.download"}])
    started = time.monotonic()
    result = smoke(emulator, "--stall", "1", "tb", "pread", "big/00000000", str(1024 * 1024))
    elapsed = time.monotonic() - started
    assert result.rc == 0, result.stderr
    assert result.stdout == expected("big/00000000", obj["generation"], 0, BIG_SIZE)
    assert result.stats["retries"] >= 2
    assert elapsed < 30  # the stalls (60 s) were cut off, not waited out


def test_retry_after_honoured(emulator):
    emulator.config(faults=[{"kind": "429", "rate": 1.0, "count": 2, "retry_after": 1,
                             "op": "objects.get"}])
    started = time.monotonic()
    result = smoke(emulator, "tb", "stat", "ds/00000001")
    elapsed = time.monotonic() - started
    assert result.rc == 0, result.stderr
    assert result.stats["retries"] == 2
    assert elapsed >= 1.9  # two Retry-After: 1 waits, not the ~0.1-0.2 s backoff


def test_exhausted_retries_give_eio_and_one_log_line(emulator):
    emulator.config(faults=[{"kind": "503", "rate": 1.0, "op": "objects.get"}])
    result = smoke(emulator, "--retries", "2", "tb", "stat", "ds/00000001")
    assert result.rc == 1
    assert "ERROR Input/output error" in result.stderr
    lines = [l for l in result.stderr.splitlines() if "failed:" in l]
    assert len(lines) == 1, result.stderr
    assert "objects.get gs://tb/ds/00000001 failed" in lines[0]
    assert "HTTP 503" in lines[0] and "3 attempts" in lines[0]


def test_deadline_gives_etimedout(emulator):
    emulator.config(faults=[{"kind": "stall", "rate": 1.0, "seconds": 30, "op": "objects.get"}])
    started = time.monotonic()
    result = smoke(emulator, "--deadline", "2", "--stall", "30", "tb", "stat", "ds/00000001")
    assert result.rc == 1
    assert "ERROR Connection timed out" in result.stderr
    assert time.monotonic() - started < 10


def test_hostile_names(emulator, gcs):
    bucket = gcs.bucket("tb")
    names = ["sp ace/a b.txt", "100%", "q?x#y", "plus+sign=eq&amp", "unicod\u00e9/\u65e5\u672c",
             "dir//double", "semi;colon:at@", "tilde~"]
    for i, name in enumerate(names):
        bucket.blob(name).upload_from_string(f"content {i} of {name}".encode())
    for i, name in enumerate(names):
        obj = stat(emulator, name)
        assert obj["name"] == name
        result = smoke(emulator, "tb", "readall", name)
        assert result.rc == 0, result.stderr
        assert result.stdout == f"content {i} of {name}".encode()
    listing = smoke(emulator, "tb", "list", "sp ace/")
    assert [l.split("\t")[1] for l in listing.text.splitlines()] == ["sp ace/a b.txt"]


def test_gzip_objects_read_as_stored(emulator, gcs):
    raw = b"hello fluxfs " * 5000
    stored = gzip.compress(raw)
    blob = gcs.bucket("tb").blob("enc/data.gz")
    blob.content_encoding = "gzip"
    blob.upload_from_string(stored, content_type="application/octet-stream")
    obj = stat(emulator, "enc/data.gz")
    assert obj["size"] == len(stored)
    result = smoke(emulator, "tb", "readall", "enc/data.gz")
    assert result.rc == 0, result.stderr
    assert result.stdout == stored  # the stored bytes, matching the size a stat reports


def test_storage_emulator_host(emulator):
    for value in (emulator.host, emulator.url, emulator.url + "/"):
        result = run_smoke(["tb", "check"], env={"STORAGE_EMULATOR_HOST": value,
                                                 "HOME": "/nonexistent"})
        assert result.rc == 0, (value, result.stderr)


def test_unreachable_endpoint(emulator):
    result = run_smoke(["--endpoint", "http://127.0.0.1:1", "--anonymous", "tb", "check"])
    assert result.rc == 1
    assert "ERROR Connection refused: cannot reach http://127.0.0.1:1" in result.stderr
    result = run_smoke(["--endpoint", "http://no-such-host.invalid", "--anonymous", "tb",
                        "check"])
    assert result.rc == 1
    assert "cannot reach http://no-such-host.invalid" in result.stderr


def test_denied_bucket(emulator):
    emulator.config(deny=["objects.list"])
    try:
        result = smoke(emulator, "tb", "check")
    finally:
        emulator.config(deny=[])
    assert result.rc == 1
    assert "ERROR Permission denied: access denied to bucket tb" in result.stderr


def test_missing_bucket(emulator):
    result = smoke(emulator, "never-created-bucket", "check")
    assert result.rc == 1
    assert "bucket never-created-bucket does not exist" in result.stderr
