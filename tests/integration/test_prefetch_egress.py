"""Egress of hinted epochs (issue 17 report): every byte the emulator serves is counted, for
two hinted epochs of 1 MiB files with a content cache much smaller than the dataset, read by
parallel readers the way DataLoader workers read. A training user pays for each byte fetched:
an epoch may fetch the dataset once, plus once more each file that the kernel evicted and that
is read again (what the daemon saw: READs of files the kernel held, probes that found a file
gone), never a file many times, and nothing once the readers are done.

The benchmark figures that raised this (6.0x and 5.75x of the dataset in one run) counted
every epoch the run repeated (bench/smallfiles.py --cached-tries: up to 7 epochs, each after
another process dropped the page cache); per epoch they were <= 1.0x (the script now reports
the bytes of each epoch)."""

import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.prefetch_util import status, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "egress"
COUNT = 96
SIZE = 1 << 20
DATASET = COUNT * SIZE
READERS = 4
STEP_S = 0.004          # a training step per file: the prefetcher runs ahead of the readers
DROP_EVERY_S = 0.1      # the page cache drops of the second test
QUIET_S = 1.5           # readers done, list alive: nothing may be fetched meanwhile
COUNTERS = ("files_prefetched", "kernel_probes", "kernel_probe_misses", "kernel_evictions")


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "2", "--populate", f"{BUCKET}/d/:{COUNT}:{SIZE}:5"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    # 16 MiB of content cache for 96 MiB of files: prefetched objects are dropped as soon as
    # the page cache holds them, and the hint gate keeps the lookahead inside the cache.
    return ["--memory-cache-size", "16M"]


def epoch_order(seed):
    order = [f"d/{i:08d}" for i in range(COUNT)]
    random.Random(seed).shuffle(order)
    return order


def read_file(mount, name):
    with open(Path(mount.path) / name, "rb") as f:
        data = f.read()
    time.sleep(STEP_S)
    return len(data)


def hinted_epoch(mount, emulator, seed):
    """Writes the epoch's order to .fluxfs/prefetch (replacing the previous list), reads every
    file with READERS threads in that order; returns the counters' deltas and the bytes the
    emulator served from the hints' write until the hints were done."""
    order = epoch_order(seed)
    before, bytes_before = status(mount), emulator.stats()["bytes_out"]
    with open(Path(mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(n + "\n" for n in order))
    with ThreadPoolExecutor(READERS) as pool:
        assert list(pool.map(lambda n: read_file(mount, n), order)) == [SIZE] * COUNT
    after = wait_for(mount, lambda s: int(s["hints_done"]) == COUNT, "the hints to be done")
    delta = {k: int(after[k]) - int(before[k]) for k in COUNTERS}
    return delta, emulator.stats()["bytes_out"] - bytes_before


def assert_quiet(mount, emulator):
    """The readers are done and the list (this process's) is alive: nothing is fetched."""
    before = emulator.stats()["bytes_out"]
    time.sleep(QUIET_S)
    fetched = emulator.stats()["bytes_out"] - before
    assert fetched == 0, f"{fetched / SIZE:.2f} files' bytes fetched after the epoch: {status(mount)}"


def seen_evicted(delta):
    """Files the daemon saw evicted by the kernel (a READ of a file it held, a probe that
    found one gone): each may be fetched once more. An over-count (a file both probed and
    read) only loosens the bound."""
    return min(COUNT, delta["kernel_evictions"] + delta["kernel_probe_misses"])


@pytest.fixture
def drop_loop():
    """Drops the page cache every DROP_EVERY_S while the test runs (what other sessions'
    benchmarks do on a shared machine)."""
    path = "/proc/sys/vm/drop_caches"
    try:
        with open(path, "w") as f:
            f.write("1\n")
    except OSError as e:
        pytest.skip(f"cannot drop the page cache here: {e}")
    stop = threading.Event()

    def loop():
        while not stop.wait(DROP_EVERY_S):
            try:
                with open(path, "w") as f:
                    f.write("1\n")
            except OSError:
                return

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield stop
    stop.set()
    thread.join()


def test_two_hinted_epochs_fetch_the_dataset_once(fluxfs_mount, emulator):
    # Cold: the dataset once (compose temporaries' downloads count as bytes too, 1:1), plus
    # what the kernel evicted on its own between an open and its read.
    delta, fetched = hinted_epoch(fluxfs_mount, emulator, 1)
    assert delta["files_prefetched"] > COUNT // 2, delta
    assert fetched <= 1.02 * DATASET + seen_evicted(delta) * SIZE, (fetched / DATASET, delta)
    assert_quiet(fluxfs_mount, emulator)
    # Warm, a new list: the page cache holds the files; only what it lost is fetched, once.
    delta, fetched = hinted_epoch(fluxfs_mount, emulator, 2)
    assert fetched <= 1.02 * seen_evicted(delta) * SIZE, (fetched / DATASET, delta)
    assert_quiet(fluxfs_mount, emulator)


def test_page_cache_drops_during_epochs_fetch_each_evicted_file_once(fluxfs_mount, emulator,
                                                                      drop_loop):
    total = 0
    for seed in (3, 4):
        delta, fetched = hinted_epoch(fluxfs_mount, emulator, seed)
        total += fetched
        # The dataset once, and once more each file evicted and read again; in no case the
        # same files over and over (a list fetched again at every drop).
        assert fetched <= 1.02 * DATASET + 1.02 * seen_evicted(delta) * SIZE, (
            fetched / DATASET, delta)
        assert fetched <= 2.05 * DATASET, (fetched / DATASET, delta)
        # Every prefetch of a list pass is an object not held: at most one per entry, and
        # one more per file the probes found evicted.
        assert delta["files_prefetched"] <= COUNT + delta["kernel_probe_misses"], delta
    drop_loop.set()  # the drops stop: nothing is fetched once the readers are done
    time.sleep(DROP_EVERY_S * 2)
    assert_quiet(fluxfs_mount, emulator)
    assert total <= 4.1 * DATASET, total / DATASET
