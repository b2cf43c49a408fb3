"""Reads through the mount, every byte checked against the emulator's synthetic content
(tests/lib/synth.py): whole files of several sizes, ranges around boundaries, random offsets,
many threads at once, and reads at and past the end."""

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "reads"
# prefix -> (count, size, seed)
SETS = {
    "small/": (64, 10_000, 7),
    "medium/": (4, 3_000_001, 8),
    "large/": (2, 40 * 1024 * 1024 + 123, 9),
    "empty/": (2, 0, 10),
}


@pytest.fixture(scope="module")
def emulator_args():
    return [arg for prefix, (count, size, seed) in SETS.items()
            for arg in ("--populate", f"{BUCKET}/{prefix}:{count}:{size}:{seed}")]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def objects(fluxfs_mount, gcs):
    """name -> (generation, size, seed) from the bucket listing."""
    seeds = {prefix: seed for prefix, (_, _, seed) in SETS.items()}
    result = {}
    for blob in gcs.bucket(BUCKET).list_blobs():
        prefix = blob.name.split("/", 1)[0] + "/"
        result[blob.name] = (blob.generation, blob.size, seeds[prefix])
    assert len(result) == sum(count for count, _, _ in SETS.values())
    return result


def check(objects, name, offset, data):
    generation, _, seed = objects[name]
    bad = first_mismatch(name, generation, seed, offset, data)
    assert bad is None, f"{name}: wrong byte at offset {bad} (read from {offset}, {len(data)} B)"


def pread_exact(path, offset, length):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


def test_whole_files(fluxfs_mount, objects):
    for name, (_, size, _) in sorted(objects.items()):
        data = (fluxfs_mount.path / name).read_bytes()
        assert len(data) == size, name
        check(objects, name, 0, data)


def test_ranges_around_boundaries(fluxfs_mount, objects):
    for name, (_, size, _) in sorted(objects.items()):
        if size == 0:
            continue
        path = fluxfs_mount.path / name
        points = {0, 1, 4095, 4096, 4097, 65535, 131072, 1 << 20, (1 << 20) + 1,
                  8 << 20, size // 2, size - 4097, size - 1}
        for offset in sorted(p for p in points if 0 <= p < size):
            for length in (1, 4096, 100_000):
                data = pread_exact(path, offset, length)
                assert len(data) == min(length, size - offset), (name, offset, length)
                check(objects, name, offset, data)


def test_random_offsets_one_open_file(fluxfs_mount, objects):
    rng = random.Random(1234)
    for name, (_, size, _) in sorted(objects.items()):
        if size == 0:
            continue
        fd = os.open(fluxfs_mount.path / name, os.O_RDONLY)
        try:
            for _ in range(60):
                offset = rng.randrange(size)
                length = rng.choice((1, 512, 4096, 65536, 1 << 20, 3 << 20))
                data = os.pread(fd, length, offset)
                assert len(data) == min(length, size - offset)
                check(objects, name, offset, data)
        finally:
            os.close(fd)


def test_at_and_past_the_end(fluxfs_mount, objects):
    for name, (_, size, _) in sorted(objects.items()):
        fd = os.open(fluxfs_mount.path / name, os.O_RDONLY)
        try:
            assert os.pread(fd, 100, size) == b""
            assert os.pread(fd, 100, size + 12345) == b""
        finally:
            os.close(fd)


def test_sequential_chunks_of_a_large_file(fluxfs_mount, objects):
    name = "large/00000001"
    _, size, _ = objects[name]
    offset = 0
    with open(fluxfs_mount.path / name, "rb", buffering=0) as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            check(objects, name, offset, chunk)
            offset += len(chunk)
    assert offset == size


def test_concurrent_readers(fluxfs_mount, objects):
    """16 threads: whole small files, random ranges of large ones, interleaved."""
    rng = random.Random(99)
    jobs = []
    for name, (_, size, _) in objects.items():
        if size == 0:
            continue
        if size <= 10_000:
            jobs.append((name, 0, size))
        else:
            for _ in range(24):
                offset = rng.randrange(size)
                jobs.append((name, offset, rng.choice((4096, 1 << 20, 5 << 20))))
    rng.shuffle(jobs)

    def run(job):
        name, offset, length = job
        data = pread_exact(fluxfs_mount.path / name, offset, length)
        size = objects[name][1]
        assert len(data) == min(length, size - offset), job
        check(objects, name, offset, data)
        return len(data)

    with ThreadPoolExecutor(max_workers=16) as pool:
        total = sum(pool.map(run, jobs))
    assert total > 0


def test_two_large_files_read_interleaved(fluxfs_mount, objects):
    names = ["large/00000000", "large/00000001"]
    files = [open(fluxfs_mount.path / n, "rb", buffering=0) for n in names]
    try:
        offsets = [0, 0]
        done = [False, False]
        while not all(done):
            for i, f in enumerate(files):
                if done[i]:
                    continue
                chunk = f.read(3 << 20)
                if not chunk:
                    done[i] = True
                    continue
                check(objects, names[i], offsets[i], chunk)
                offsets[i] += len(chunk)
        assert offsets == [objects[n][1] for n in names]
    finally:
        for f in files:
            f.close()


def test_kernel_readahead_sends_1mib_reads(fluxfs_mount, objects):
    """The daemon sets the mount's kernel readahead to 1 MiB (root only: sysfs), so a
    sequential reader costs one READ per MiB, not one per 128 KiB (the kernel's default)."""
    dev = os.stat(fluxfs_mount.path).st_dev
    bdi = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
    # Root is not enough: a container's /sys is usually read-only (the daemon then only logs,
    # and the mount works with the kernel's default).
    if os.geteuid() != 0 or not os.access(bdi, os.W_OK):
        pytest.skip("setting a mount's read_ahead_kb needs root and a writable /sys")
    with open(bdi) as f:
        assert int(f.read()) == 1024
    name = "large/00000000"
    _, size, _ = objects[name]

    def reads():
        with open(fluxfs_mount.path / ".fluxfs" / "status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "fuse_reads":
                    return int(value)
        raise AssertionError("no fuse_reads counter")

    before = reads()
    with open(fluxfs_mount.path / name, "rb", buffering=0) as f:
        offset = 0
        while chunk := f.read(1 << 20):
            offset += len(chunk)
    assert offset == size
    # The page cache may already hold some of it (an earlier test): at most one READ per MiB
    # (plus the unaligned tail), far below the 320 a 128 KiB readahead sends.
    assert reads() - before <= size // (1 << 20) + 2
