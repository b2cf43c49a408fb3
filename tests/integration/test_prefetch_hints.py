"""Order hints through MOUNT/.fluxfs/prefetch: compose-batched prefetch splits random sizes
(0-byte objects included) into exactly the right bytes, a rewritten object is never served with
its old bytes, the reserved prefix is empty once an epoch is done, the control files are
hidden from listings and refused to other users, and the Python helper drives a real
DataLoader."""

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.prefetch_util import reserved_objects, status, wait_for
from tests.lib.emulator import REPO_ROOT

pytestmark = pytest.mark.emulator_only

BUCKET = "hints"


def random_bodies(count, seed, max_size=96 * 1024):
    rng = random.Random(seed)
    bodies = {}
    for i in range(count):
        size = rng.choice([0, 0, 1, 17, rng.randrange(0, max_size)])
        bodies[f"set/f{i:04d}"] = rng.randbytes(size)
    return bodies


BODIES = random_bodies(160, 1)
RW_NAMES = [f"rw/f{i:03d}" for i in range(64)]


def old_body(name):
    return b"old " + name.encode() * 50


def helper_bodies():
    rng = random.Random(5)
    return {f"dl/s{i:03d}": rng.randbytes(rng.randrange(0, 40_000)) for i in range(96)}


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "5"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    # stat TTL 0: every open revalidates, so a rewritten object is seen at once.
    return ["--allow-other", "--stat-ttl", "0", "--prefetch-lookahead", "100000"]


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        for name, body in BODIES.items():
            bucket.blob(name).upload_from_string(body)
        for name in RW_NAMES:
            bucket.blob(name).upload_from_string(old_body(name))
        for name, body in helper_bodies().items():
            bucket.blob(name).upload_from_string(body)
    return seed


def write_hints(mount, paths):
    with open(Path(mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(p + "\n" for p in paths))


def test_control_files_hidden_but_resolvable(fluxfs_mount):
    root = Path(fluxfs_mount.path)
    assert ".fluxfs" not in os.listdir(root)
    assert (root / ".fluxfs").is_dir()
    assert (root / ".fluxfs" / "prefetch").is_file()
    assert os.listdir(root / ".fluxfs") == []
    assert "compose:" in (root / ".fluxfs" / "status").read_text()
    with pytest.raises(FileNotFoundError):
        os.stat(root / ".fluxfs" / "nothing")


def test_hinted_epoch_splits_random_sizes_exactly(fluxfs_mount, gcs):
    names = list(BODIES)
    random.Random(2).shuffle(names)
    before = status(fluxfs_mount)
    write_hints(fluxfs_mount, names)
    s = wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) == len(names)
                 and int(s["temps_live"]) == 0, "the hints to be prefetched")
    assert int(s["composes"]) > int(before["composes"])
    assert int(s["files_prefetched"]) >= sum(1 for b in BODIES.values() if b)
    for name in names:
        data = (Path(fluxfs_mount.path) / name).read_bytes()
        assert data == BODIES[name], f"{name}: {len(data)} bytes differ from the upload"
    after = status(fluxfs_mount)
    nonempty = sum(1 for b in BODIES.values() if b)
    assert int(after["cache_memory_hits"]) - int(s["cache_memory_hits"]) >= nonempty
    assert reserved_objects(gcs, BUCKET) == []


def test_rewritten_object_never_served_with_old_bytes(fluxfs_mount, gcs):
    bucket = gcs.bucket(BUCKET)
    names = RW_NAMES
    # Hints for all; rewrite half of them while the prefetch is under way.
    write_hints(fluxfs_mount, names)
    new = {}
    for name in names[::2]:
        new[name] = b"NEW " + name.encode() * 70
        bucket.blob(name).upload_from_string(new[name])
    wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) == len(names)
             and int(s["temps_live"]) == 0, "the hints to be prefetched")
    for name in names:
        data = (Path(fluxfs_mount.path) / name).read_bytes()
        expected = new.get(name, old_body(name))
        assert data == expected, f"{name} served with the wrong generation's bytes"
    # And after the cache holds the old generation: rewrite again, read again.
    for name in names[1::2]:
        new[name] = b"NEWER " + name.encode() * 30
        bucket.blob(name).upload_from_string(new[name])
        assert (Path(fluxfs_mount.path) / name).read_bytes() == new[name]
    assert reserved_objects(gcs, BUCKET) == []


def test_hint_file_refused_to_another_user(fluxfs_mount):
    hint_file = Path(fluxfs_mount.path) / ".fluxfs" / "prefetch"
    before = status(fluxfs_mount)["hints_total"]
    result = subprocess.run(
        ["runuser", "-u", "nobody", "--", "sh", "-c", f"echo set/f0001 > '{hint_file}'"],
        capture_output=True, text=True)
    assert result.returncode != 0
    assert "denied" in result.stderr.lower() or "not permitted" in result.stderr.lower()
    # The same user can still read the mount's files (allow_other) and the status.
    result = subprocess.run(["runuser", "-u", "nobody", "--", "cat",
                             str(Path(fluxfs_mount.path) / "set" / "f0003")], capture_output=True)
    assert result.returncode == 0 and result.stdout == BODIES["set/f0003"]
    assert status(fluxfs_mount)["hints_total"] == before


HELPER_SCRIPT = r"""
import hashlib, json, os, sys
import torch
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
from fluxfs_hints import hint_loader

mount, expected_path = sys.argv[2], sys.argv[3]
expected = json.load(open(expected_path))
paths = sorted(os.path.join(mount, n) for n in expected)

class Files(torch.utils.data.Dataset):
    def __len__(self):
        return len(paths)
    def __getitem__(self, i):
        with open(paths[i], "rb") as f:
            return os.path.relpath(paths[i], mount), hashlib.sha256(f.read()).hexdigest()

loader = torch.utils.data.DataLoader(Files(), batch_size=8, shuffle=True, num_workers=2,
                                     collate_fn=lambda batch: batch)
hint_loader(loader, paths)
seen = 0
for epoch in range(2):
    for batch in loader:
        for name, digest in batch:
            assert digest == expected[name], name
            seen += 1
print(seen)
"""


def test_python_helper_with_dataloader(fluxfs_mount, gcs, tmp_path):
    expected = {name: hashlib.sha256(body).hexdigest() for name, body in helper_bodies().items()}
    expected_path = tmp_path / "expected.json"
    expected_path.write_text(json.dumps(expected))
    script = tmp_path / "helper.py"
    script.write_text(HELPER_SCRIPT)
    before = status(fluxfs_mount)
    result = subprocess.run([sys.executable, str(script), str(REPO_ROOT), str(fluxfs_mount.path),
                             str(expected_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) == 2 * len(expected)
    s = wait_for(fluxfs_mount, lambda s: int(s["temps_live"]) == 0, "temporaries to go")
    # The helper wrote each epoch's order; its list went when the process exited (the lists
    # left are this test process's own).
    assert int(s["hint_lists_dropped"]) > int(before["hint_lists_dropped"])
    assert int(s["hints_total"]) == int(before["hints_total"])
    assert int(s["files_prefetched"]) > int(before["files_prefetched"])
    assert reserved_objects(gcs, BUCKET) == []
