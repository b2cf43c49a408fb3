"""The content cache and the prefetcher's life cycle, one mount per test: the warm-up command,
reuse of the disk cache after a remount, eviction under a small --cache-size, the fallback to
plain GETs when compose is denied or fails, and the reserved prefix left empty after injected
failures and after kill -9 plus a remount. Every byte read is checked against the emulator's
synthetic content."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.mount import find_fluxfs_binary
from tests.integration.prefetch_util import (WAIT_S, mounts_fixture, reserved_objects, status,
                                              wait_for)
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "pcache"
SEED = 11
COUNT = 120
SIZE = 24_000

mounts = mounts_fixture(BUCKET)


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "5", "--populate", f"{BUCKET}/w/:{COUNT}:{SIZE}:{SEED}"]


@pytest.fixture(scope="module")
def generations(emulator, gcs):
    return {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs()}


def downloads(emulator):
    return emulator.stats()["ops"].get("objects.download", 0)


def names():
    return [f"w/{i:08d}" for i in range(COUNT)]


def read_and_check(mount, generations, subset=None):
    for name in subset or names():
        data = (Path(mount.path) / name).read_bytes()
        assert len(data) == SIZE
        bad = first_mismatch(name, generations[name], SEED, 0, data)
        assert bad is None, f"{name}: wrong byte at {bad}"


def hint_all(mount, paths=None):
    with open(Path(mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(p + "\n" for p in (paths or names())))


def test_warmup_command_fills_the_cache(mounts, emulator, gcs, generations):
    m = mounts()
    result = subprocess.run([str(find_fluxfs_binary()), "prefetch", str(Path(m.path) / "w")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"warmed {COUNT} files ({COUNT} fetched, 0 already cached), {COUNT * SIZE} bytes" \
        in result.stdout, result.stdout
    assert "skipped" not in result.stdout
    assert f"{COUNT}/{COUNT} files" in result.stderr  # the final progress line
    s = wait_for(m, lambda s: int(s["temps_live"]) == 0, "temporaries to go")
    assert int(s["composes"]) >= COUNT // 32
    before = downloads(emulator)
    read_and_check(m, generations)
    assert downloads(emulator) == before, "warmed files were downloaded again"
    assert reserved_objects(gcs, BUCKET) == []
    # Again: nothing fetched, everything found cached, and said so.
    result = subprocess.run([str(find_fluxfs_binary()), "prefetch", str(Path(m.path) / "w")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"warmed {COUNT} files (0 fetched, {COUNT} already cached)" in result.stdout, \
        result.stdout
    assert downloads(emulator) == before


def test_warmup_reports_files_that_did_not_fit(mounts, emulator, generations):
    """A cache too small for the tree: the files left out are reported as skipped with the
    reason, never counted as warmed."""
    m = mounts("--memory-cache-size", "1M")
    result = subprocess.run([str(find_fluxfs_binary()), "prefetch", str(Path(m.path) / "w")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    s = status(m)
    warmed = int(s["warmup_fetched"]) + int(s["warmup_cached"])
    skipped = int(s["warmup_skipped"])
    assert skipped > 0 and warmed + skipped == COUNT, s
    assert f"warmed {warmed} files" in result.stdout, result.stdout
    assert f"skipped {skipped} files: no room left in the cache" in result.stdout, result.stdout
    assert int(s["warmup_bytes"]) == warmed * SIZE


def test_warmup_cancelled_with_the_command(mounts, emulator, generations):
    """SIGTERM to `fluxfs prefetch`: it says so, exits 128+15, and the daemon drops the paths
    it had not started (warmup_cancelled), fetching no more of them."""
    m = mounts("--prefetch-workers", "1", "--compose", "off")
    emulator.config(latency_ms=400)
    try:
        proc = subprocess.Popen([str(find_fluxfs_binary()), "prefetch", str(Path(m.path) / "w")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(m, lambda s: int(s["warmup_total"]) == COUNT and int(s["warmup_done"]) > 0,
                 "the warm-up to start")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 128 + signal.SIGTERM, (out, err)
        assert "cancelled by signal 15" in err
        s = wait_for(m, lambda s: int(s["warmup_done"]) + int(s["warmup_cancelled"]) == COUNT,
                     "the session's queue to be dropped")
        assert int(s["warmup_cancelled"]) > 0, s
    finally:
        emulator.config(latency_ms=5)
    done = int(s["warmup_done"])
    time.sleep(1)  # nothing more may be taken (a hang guard is not needed: counts only)
    assert int(status(m)["warmup_done"]) == done


def test_subcommands_off_a_mount_mount_nothing(tmp_path):
    """`fluxfs prefetch|status PATH` where PATH is no fluxfs mount: a non-zero exit and a clear
    message; "prefetch" and "status" are never taken for a bucket name."""
    binary = str(find_fluxfs_binary())
    target = tmp_path / "plain"
    target.mkdir()
    for argv, code in ([[binary, "prefetch", str(target)], 1], [[binary, "status", str(target)], 1],
                       [[binary, "prefetch"], 2], [[binary, "status"], 2]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert result.returncode == code, (argv, result.stdout, result.stderr)
        assert "fluxfs" in result.stderr
        mounts_text = Path("/proc/self/mountinfo").read_text()
        assert str(target) not in mounts_text, mounts_text
    result = subprocess.run([binary, "prefetch", str(target)], capture_output=True, text=True)
    assert "is not on a fluxfs mount" in result.stderr


def test_disk_cache_reused_after_remount(mounts, emulator, generations, tmp_path):
    cache = tmp_path / "cache"
    m = mounts("--cache-dir", str(cache), "--compose", "off")
    read_and_check(m, generations)
    assert m.unmount() == 0
    files = list((cache / "fluxfs-content-v1").iterdir())
    assert len(files) == COUNT
    m2 = mounts("--cache-dir", str(cache), "--memory-cache-size", "0")
    before = downloads(emulator)
    read_and_check(m2, generations)
    assert downloads(emulator) == before, "cached files were downloaded again after remount"
    assert int(status(m2)["cache_disk_hits"]) == COUNT


def test_damaged_cache_file_is_not_served(mounts, emulator, generations, tmp_path):
    cache = tmp_path / "cache"
    m = mounts("--cache-dir", str(cache), "--compose", "off")
    read_and_check(m, generations, names()[:4])
    assert m.unmount() == 0
    for f in (cache / "fluxfs-content-v1").iterdir():
        data = bytearray(f.read_bytes())
        data[-1] ^= 0xFF
        f.write_bytes(bytes(data))
    m2 = mounts("--cache-dir", str(cache), "--memory-cache-size", "0")
    m2.expect_errors()  # damaged files are warnings, not errors
    read_and_check(m2, generations, names()[:4])
    assert int(status(m2)["cache_corrupt_files"]) == 4


def test_small_cache_size_evicts(mounts, emulator, generations, tmp_path):
    cache = tmp_path / "cache"
    cap = 10 * (SIZE + 32)
    m = mounts("--cache-dir", str(cache), "--cache-size", str(cap), "--memory-cache-size", "0")
    read_and_check(m, generations)
    s = status(m)
    assert int(s["cache_disk_bytes"]) <= cap
    assert int(s["cache_evictions"]) >= COUNT - 10
    on_disk = sum(f.stat().st_size for f in (cache / "fluxfs-content-v1").iterdir())
    assert on_disk <= cap
    # The most recently read files are the ones kept; the first ones are gone.
    assert m.unmount() == 0
    m2 = mounts("--cache-dir", str(cache), "--cache-size", str(cap), "--memory-cache-size", "0")
    before = downloads(emulator)
    read_and_check(m2, generations, names()[-5:])
    assert int(status(m2)["cache_disk_hits"]) == 5
    assert downloads(emulator) == before
    read_and_check(m2, generations, names()[:5])
    # (>=: reading in name order also starts the listing-order prefetch of the next files)
    assert downloads(emulator) >= before + 5


def test_compose_denied_falls_back_to_plain_gets(mounts, emulator, gcs, generations):
    emulator.config(deny=["objects.compose"])
    m = mounts()
    m.expect_errors(r"objects\.compose .* 403")
    hint_all(m)
    s = wait_for(m, lambda s: int(s["hints_done"]) == COUNT and int(s["temps_live"]) == 0,
                 "the hints")
    assert s["compose"] == "off"
    assert int(s["compose_failures"]) >= 1
    assert int(s["direct_gets"]) >= COUNT - 32
    assert int(s["files_prefetched"]) == COUNT
    before = downloads(emulator)
    read_and_check(m, generations)
    assert downloads(emulator) == before
    assert reserved_objects(gcs, BUCKET) == []


def test_compose_off_option(mounts, emulator, generations):
    m = mounts("--compose", "off")
    hint_all(m)
    s = wait_for(m, lambda s: int(s["hints_done"]) == COUNT, "the hints")
    assert s["compose"] == "off" and int(s["composes"]) == 0
    assert int(s["files_prefetched"]) == COUNT
    read_and_check(m, generations)


@pytest.mark.parametrize("op", ["objects.compose", "objects.download"])
def test_reserved_prefix_empty_after_injected_failures(mounts, emulator, gcs, generations, op):
    m = mounts("--max-retries", "1")
    m.expect_errors(r"injected fault")
    emulator.config(faults=[{"kind": "503", "rate": 0.5, "op": op}])
    hint_all(m)
    wait_for(m, lambda s: int(s["hints_done"]) == COUNT and int(s["temps_live"]) == 0,
             "the hints")
    emulator.config(faults=[])
    read_and_check(m, generations)
    assert reserved_objects(gcs, BUCKET) == []


def test_kill_9_then_remount_sweeps_temporaries(mounts, emulator, gcs, generations):
    m = mounts()
    # Deletes fail, so the composites stay behind when the daemon dies.
    emulator.config(deny=["objects.delete"])
    m.expect_errors(r"objects\.delete .* 403")
    hint_all(m)
    wait_for(m, lambda s: int(s["composes"]) >= 2, "some composes")
    m.kill()
    assert len(reserved_objects(gcs, BUCKET)) >= 1, "the test needs leftovers to be meaningful"
    emulator.config(deny=[])
    subprocess.run(["fusermount3", "-u", "-z", str(m.path)], capture_output=True)
    m2 = mounts()
    deadline = time.monotonic() + WAIT_S
    while reserved_objects(gcs, BUCKET):
        assert time.monotonic() < deadline, "the next mount did not sweep the leftovers"
        time.sleep(0.1)
    assert int(status(m2)["temps_swept"]) >= 1
    read_and_check(m2, generations, names()[:8])
