"""--memory-limit is one figure for the daemon's buffers and caches (issue 22, item 11): the
write buffers take their share of it (a third, whole parts, unless --write-buffer-size is
given), read buffers and the memory cache the rest, and .fluxfs/status shows the resident
memory beside both. With --memory-limit 64M, four readers of 32 MiB objects and a writer of a
96 MiB file run at once: neither budget is ever exceeded (the budgets' own peaks, which are
admission counters: no timing in them) and every byte read and written is right.

The RSS bound itself is measured, not asserted (bench/memory_limit.py): RSS includes code,
thread stacks and the allocator's slack, which differ by build (ASan) and machine."""

import hashlib
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.integration.mount import find_fluxfs_binary, fluxfs_command
from tests.integration.prefetch_util import mounts_fixture, status, wait_for
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "memlim"
SEED = 31
COUNT = 4
SIZE = 32 << 20
MIB = 1 << 20

mounts = mounts_fixture(BUCKET)


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/r/:{COUNT}:{SIZE}:{SEED}"]


def test_readers_and_a_writer_stay_inside_their_shares(mounts, gcs):
    mount = mounts("--memory-limit", "64M")
    root = Path(mount.path)
    generations = {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs(prefix="r/")}
    assert len(generations) == COUNT
    s = status(mount)
    assert int(s["memory_limit"]) == 64 * MIB
    assert int(s["write_buffer_limit"]) == 16 * MIB        # a third of 64M in 16M parts
    assert int(s["memory_read_limit"]) == 48 * MIB         # the rest for reads
    assert int(s["memory_rss"]) > 0
    assert int(s["memory_rss_peak"]) >= int(s["memory_rss"])

    problems = []

    def read(name):
        data = bytearray()
        with open(root / name, "rb", buffering=0) as f:
            while chunk := f.read(MIB):
                data += chunk
        bad = first_mismatch(name, generations[name], SEED, 0, bytes(data))
        if len(data) != SIZE or bad is not None:
            problems.append(f"{name}: {len(data)} bytes, first mismatch at {bad}")

    digest = hashlib.sha256()

    def write():
        block = bytearray(os.urandom(MIB))
        with open(root / "w" / "big.bin", "wb") as f:
            for i in range(96):
                block[:8] = i.to_bytes(8, "little")
                digest.update(block)
                f.write(block)

    (root / "w").mkdir()
    threads = [threading.Thread(target=read, args=(n,)) for n in sorted(generations)]
    threads.append(threading.Thread(target=write))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, problems

    s = status(mount)
    assert 0 < int(s["write_buffer_peak"]) <= 16 * MIB, s
    assert int(s["memory_peak"]) <= 48 * MIB, s
    # The writer ends at RELEASE, which the kernel sends after close() has returned (the
    # commit itself was FLUSH's answer): wait for it rather than race it.
    wait_for(mount, lambda s: int(s["open_writers"]) == 0, "the writer's release")
    stored = gcs.bucket(BUCKET).blob("w/big.bin")
    assert hashlib.sha256(stored.download_as_bytes()).hexdigest() == digest.hexdigest()

    out = subprocess.run([str(find_fluxfs_binary()), "status", mount.path],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "resident" in out.stdout and "--memory-limit 64.0 MiB" in out.stdout, out.stdout
    assert "Read buffers:" in out.stdout and "Write buffers:" in out.stdout, out.stdout


def test_a_write_buffer_larger_than_the_limit_is_refused(emulator, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    cmd = fluxfs_command(emulator, BUCKET, mnt, ["--memory-limit", "64M",
                                                 "--write-buffer-size", "64M"])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--write-buffer-size" in result.stderr and "--memory-limit" in result.stderr, \
        result.stderr
    assert not os.path.ismount(mnt)
