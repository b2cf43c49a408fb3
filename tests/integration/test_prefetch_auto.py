"""Automatic prefetch, with no hints: concurrent demand misses of small files gathered into one
compose (--batch-misses), plain GETs when too few arrive together, the fallback to plain GETs
when compose fails or is denied, and the listing-order prefetch (files opened in name order
prefetch the next ones). Every byte read is checked against the emulator's synthetic content;
the emulator's request counters say which requests were made."""

import random
import threading
import time
from pathlib import Path

import pytest

from tests.integration.prefetch_util import (WAIT_S, mounts_fixture, reserved_objects, status,
                                              wait_for)
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "pauto"
SEED = 23
SIZE = 20_000
DIRS = 256          # c/dNNN/f: one file per directory, so no listing order can be seen
SEQ_COUNT = 240     # s/NNNNNNNN: one directory read in name order
WINDOW_US = "200000"  # wide, so that threads released together always share a window

mounts = mounts_fixture(BUCKET)


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "5", "--populate", f"{BUCKET}/s/:{SEQ_COUNT}:{SIZE}:{SEED}"]


@pytest.fixture(scope="module")
def generations(emulator, gcs):
    """Uploads one random body per c/dNNN/f; returns ({name: generation}, {name: body})."""
    bucket = gcs.bucket(BUCKET)
    rng = random.Random(SEED)
    bodies = {f"c/d{i:03d}/f": rng.randbytes(SIZE - i) for i in range(DIRS)}
    for name, body in bodies.items():
        bucket.blob(name).upload_from_string(body)
    gens = {b.name: b.generation for b in bucket.list_blobs(prefix="c/")}
    return gens, bodies


def ops(emulator):
    return emulator.stats()["ops"]


def read_together(mount, names):
    """Reads names from one thread each, all released at once; returns {name: bytes}."""
    barrier = threading.Barrier(len(names))
    got, errors = {}, []

    def one(name):
        try:
            barrier.wait(timeout=WAIT_S)
            got[name] = (Path(mount.path) / name).read_bytes()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{name}: {e!r}")
    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not errors, errors
    return got


def check(got, bodies):
    for name, data in got.items():
        assert data == bodies[name], f"{name}: wrong bytes"


def stat_all(mount, names):
    # Lookups first, so that the opens race only for the content.
    for name in names:
        (Path(mount.path) / name).stat()


def test_concurrent_misses_share_one_compose(mounts, emulator, gcs, generations):
    _, bodies = generations
    names = [f"c/d{i:03d}/f" for i in range(0, 16)]
    m = mounts("--batch-misses", WINDOW_US)
    stat_all(m, names)
    before = ops(emulator)
    got = read_together(m, names)
    check(got, bodies)
    after = ops(emulator)
    s = wait_for(m, lambda s: int(s["miss_batch_temps_live"]) == 0, "temporaries to go")
    assert int(s["miss_batch_misses"]) == len(names)
    assert int(s["miss_batch_composed"]) >= 4, s
    composes = after.get("objects.compose", 0) - before.get("objects.compose", 0)
    downloads = after.get("objects.download", 0) - before.get("objects.download", 0)
    assert composes >= 1
    # One composite GET per compose plus the plain GETs of what was not composed.
    assert downloads == composes + int(s["miss_batch_direct"]), (composes, downloads, s)
    assert downloads < len(names)
    assert reserved_objects(gcs, BUCKET) == []


def test_few_misses_are_plain_gets(mounts, emulator, generations):
    _, bodies = generations
    names = [f"c/d{i:03d}/f" for i in range(16, 18)]  # 2 < the minimum of 4
    m = mounts("--batch-misses", WINDOW_US)
    stat_all(m, names)
    before = ops(emulator)
    check(read_together(m, names), bodies)
    after = ops(emulator)
    s = status(m)
    assert int(s["miss_batch_composes"]) == 0 and int(s["miss_batch_direct"]) == 2
    assert after.get("objects.compose", 0) == before.get("objects.compose", 0)
    assert after.get("objects.download", 0) - before.get("objects.download", 0) == 2


def test_no_batching_by_default(mounts, emulator, generations):
    _, bodies = generations
    names = [f"c/d{i:03d}/f" for i in range(18, 30)]
    m = mounts()
    stat_all(m, names)
    before = ops(emulator)
    check(read_together(m, names), bodies)
    after = ops(emulator)
    assert "miss_batch_misses" not in status(m)
    assert after.get("objects.compose", 0) == before.get("objects.compose", 0)
    assert after.get("objects.download", 0) - before.get("objects.download", 0) == len(names)


def test_compose_failure_falls_back_to_gets(mounts, emulator, gcs, generations):
    _, bodies = generations
    names = [f"c/d{i:03d}/f" for i in range(32, 48)]
    m = mounts("--batch-misses", WINDOW_US, "--max-retries", "0")
    m.expect_errors(r"injected fault", r"objects\.compose")
    stat_all(m, names)
    emulator.config(faults=[{"kind": "503", "rate": 1, "op": "objects.compose"}])
    check(read_together(m, names), bodies)
    emulator.config(faults=[])
    s = wait_for(m, lambda s: int(s["miss_batch_temps_live"]) == 0, "temporaries to go")
    assert int(s["miss_batch_compose_failures"]) >= 1
    assert int(s["miss_batch_fallbacks"]) >= 4
    assert int(s["miss_batch_composed"]) == 0
    assert reserved_objects(gcs, BUCKET) == []


def test_composite_get_failure_falls_back_to_gets(mounts, emulator, gcs, generations):
    _, bodies = generations
    names = [f"c/d{i:03d}/f" for i in range(48, 64)]
    m = mounts("--batch-misses", WINDOW_US, "--max-retries", "0")
    m.expect_errors(r"injected fault", r"not usable")
    stat_all(m, names)
    # Every composite GET fails; the plain GETs of the fallback come after the fault's count.
    emulator.config(faults=[{"kind": "503", "rate": 1, "op": "objects.download", "count": 1}])
    check(read_together(m, names), bodies)
    emulator.config(faults=[])
    s = wait_for(m, lambda s: int(s["miss_batch_temps_live"]) == 0, "temporaries to go")
    assert int(s["miss_batch_fallbacks"]) >= 4, s
    assert reserved_objects(gcs, BUCKET) == []


def test_compose_denied_turns_batching_to_gets(mounts, emulator, gcs, generations):
    _, bodies = generations
    m = mounts("--batch-misses", WINDOW_US)
    m.expect_errors(r"objects\.compose .* 403", r"compose refused")
    emulator.config(deny=["objects.compose"])
    first = [f"c/d{i:03d}/f" for i in range(64, 80)]
    stat_all(m, first)
    check(read_together(m, first), bodies)
    s = status(m)
    assert s["miss_batch_compose"] == "off"
    # Once off, no more composes are tried.
    second = [f"c/d{i:03d}/f" for i in range(80, 96)]
    stat_all(m, second)
    before = ops(emulator)
    check(read_together(m, second), bodies)
    after = ops(emulator)
    assert after.get("objects.compose", 0) == before.get("objects.compose", 0)
    assert after.get("objects.download", 0) - before.get("objects.download", 0) == len(second)
    emulator.config(deny=[])
    assert reserved_objects(gcs, BUCKET) == []


def test_listing_order_reads_prefetch_the_next_files(mounts, emulator, gcs):
    generations = {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs(prefix="s/")}
    names = sorted(generations)
    assert len(names) == SEQ_COUNT
    m = mounts()
    root = Path(m.path)
    # A listing, as an iterable dataset would make; then the files in that order.
    assert sorted(p.name for p in (root / "s").iterdir()) == [n[2:] for n in names]
    before = ops(emulator)
    for name in names:
        data = (root / name).read_bytes()
        assert len(data) == SIZE
        bad = first_mismatch(name, generations[name], SEED, 0, data)
        assert bad is None, f"{name}: wrong byte at {bad}"
    after = ops(emulator)
    s = wait_for(m, lambda s: int(s["temps_live"]) == 0, "temporaries to go")
    assert int(s["auto_queued"]) >= SEQ_COUNT // 2, s
    assert int(s["files_prefetched"]) >= SEQ_COUNT // 2, s
    assert after.get("objects.compose", 0) > before.get("objects.compose", 0)
    # Most files came out of composites: far fewer GETs than files.
    downloads = after.get("objects.download", 0) - before.get("objects.download", 0)
    assert downloads < SEQ_COUNT // 2, (downloads, s)
    assert reserved_objects(gcs, BUCKET) == []


def test_shuffled_reads_queue_no_listing_prefetch(mounts, emulator, gcs):
    names = sorted(b.name for b in gcs.bucket(BUCKET).list_blobs(prefix="s/"))
    random.Random(4).shuffle(names)
    # Break every increasing run of 3: swap to make the order strictly zig-zag.
    order = sorted(names[:60])
    zigzag = [n for pair in zip(order[30:][::-1], order[:30]) for n in pair]
    m = mounts()
    for name in zigzag:
        (Path(m.path) / name).read_bytes()
    assert int(status(m)["auto_queued"]) == 0
