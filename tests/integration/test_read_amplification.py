"""Checkpoint loads fetch each byte once (issue 11): bytes served by the emulator per load
pattern, on a fresh mount each (empty page cache), against the file's size.

The patterns that fetched about twice the file before: torch.load(mmap=True) (the zip reader
hops from record header to record header, then the tensors are faulted in through the mmap),
safetensors load_file then using the tensors (mmap, tensors taken in name order, not file
order), torch.distributed.checkpoint load (each item's slice, its end, and back; 1 process and
4 gloo ranks), np.load(mmap_mode='r'). Every load is checked tensor by tensor against the
state it came from, and the ratio bound (<= 1.1x) is the issue's target. A run with a memory
budget smaller than the file checks that shared bytes are given back under pressure without a
wrong byte (its bound is looser: bytes dropped for memory are fetched again).

Bytes fluxfs fetches again after it served them and let them go, because the kernel asked for
them again, are not counted against the bound: the page cache dropped them (another test's or
a benchmark's drop_caches on this shared machine, memory pressure: 1.40x and 1.20x when a
drop_caches loop ran beside this file), and fluxfs must fetch them again. The daemon counts
them (refetched_bytes in .fluxfs/status); every other byte fetched twice still counts.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.integration.mount import Mount

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
safetensors_torch = pytest.importorskip("safetensors.torch")

pytestmark = pytest.mark.emulator_only

BUCKET = "amplify"
MiB = 1 << 20
TARGET = 1.1
# Uneven tensor sizes (MiB), as in real models: record headers lie 1-24 MiB apart.
TENSOR_MIB = [4, 16, 1, 8, 24, 2, 16, 4, 12, 8, 1, 3]


def make_state(seed=7):
    gen = torch.Generator().manual_seed(seed)
    return {f"layer{i}.weight": torch.rand(mib * MiB // 4, generator=gen)
            for i, mib in enumerate(TENSOR_MIB)}


@pytest.fixture(scope="module")
def files(emulator, gcs, tmp_path_factory):
    """Uploads one checkpoint in each format; returns {pattern: (object name, size)} and the
    state dict."""
    import torch.distributed.checkpoint as dcp
    tmp = tmp_path_factory.mktemp("ckpt")
    bucket = gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)
    state = make_state()
    torch.save(state, tmp / "model.pt")
    safetensors_torch.save_file(state, tmp / "model.safetensors")
    array = torch.cat([t for t in state.values()]).numpy()
    np.save(tmp / "array.npy", array)
    (tmp / "dcp").mkdir()
    dcp.save(state, checkpoint_id=str(tmp / "dcp"), no_dist=True)
    sizes = {}
    for name in ["model.pt", "model.safetensors", "array.npy"]:
        bucket.blob(name).upload_from_filename(tmp / name)
        sizes[name] = os.path.getsize(tmp / name)
    dcp_size = 0
    for entry in os.listdir(tmp / "dcp"):
        bucket.blob(f"dcp/{entry}").upload_from_filename(tmp / "dcp" / entry)
        dcp_size += os.path.getsize(tmp / "dcp" / entry)
    sizes["dcp"] = dcp_size
    return state, sizes


def reset_stats(emulator):
    emulator._control("POST", "/_emulator/reset?stats_only=true", body={})


def refetched_bytes(mount) -> int:
    text = (mount.path / ".fluxfs" / "status").read_text()
    return int(dict(line.split(": ", 1) for line in text.splitlines())["refetched_bytes"])


def fetched(emulator, mount_args, load):
    """Runs load(mount path) on a fresh mount; returns (bytes served, bytes fetched again
    because the kernel asked for them again)."""
    mount = Mount(emulator, BUCKET, args=mount_args)
    try:
        reset_stats(emulator)
        load(mount.path)
        served = emulator.stats()["bytes_out"]
        refetched = refetched_bytes(mount)
        assert mount.alive(), mount.log()
        assert not mount.unexpected_errors(), mount.log()[-4000:]
    finally:
        mount.close()
    return served, refetched


def fetched_ratio(emulator, mount_args, size, load):
    """Bytes served / size on a fresh mount, less what was fetched again because the kernel
    asked for it again."""
    served, refetched = fetched(emulator, mount_args, load)
    return (served - refetched) / size


def assert_same(expected, got):
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key


def load_mmap(state):
    def load(path):
        loaded = torch.load(path / "model.pt", mmap=True, weights_only=True)
        assert_same(state, loaded)  # faults every tensor in through the mmap
    return load


def load_safetensors(state):
    def load(path):
        loaded = safetensors_torch.load_file(path / "model.safetensors")
        assert_same(state, loaded)
    return load


def load_numpy(state):
    expected = torch.cat([t for t in state.values()]).numpy()

    def load(path):
        array = np.load(path / "array.npy", mmap_mode="r")
        assert np.array_equal(array, expected)
    return load


DCP_LOAD = textwrap.dedent("""
    import os, sys, torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    path, world, expected = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if world > 1:
        dist.init_process_group("gloo")
    meta = dcp.FileSystemReader(path).read_metadata()
    state = {k: torch.empty(v.size, dtype=v.properties.dtype)
             for k, v in meta.state_dict_metadata.items()}
    dcp.load(state, checkpoint_id=path, no_dist=(world == 1))
    reference = torch.load(expected, weights_only=True)
    assert state.keys() == reference.keys()
    for k in state:
        assert torch.equal(state[k], reference[k]), k
    if world > 1:
        dist.destroy_process_group()
""")


def load_dcp(world, reference, tmp_path):
    script = tmp_path / "dcp_load.py"
    script.write_text(DCP_LOAD)

    def load(path):
        if world == 1:
            cmd = [sys.executable, str(script), str(path / "dcp"), "1", str(reference)]
        else:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                   "--master-port", str(29400 + os.getpid() % 500), str(script),
                   str(path / "dcp"), str(world), str(reference)]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return load


@pytest.mark.parametrize("pattern", ["mmap", "safetensors", "numpy"])
def test_load_fetches_file_once(emulator, files, pattern):
    state, sizes = files
    load, name = {
        "mmap": (load_mmap(state), "model.pt"),
        "safetensors": (load_safetensors(state), "model.safetensors"),
        "numpy": (load_numpy(state), "array.npy"),
    }[pattern]
    ratio = fetched_ratio(emulator, [], sizes[name], load)
    assert ratio <= TARGET, f"{pattern}: fetched {ratio:.3f}x the file"


@pytest.mark.parametrize("world", [1, 4])
def test_dcp_load_fetches_checkpoint_once(emulator, files, world, tmp_path):
    state, sizes = files
    reference = tmp_path / "reference.pt"
    torch.save(state, reference)
    ratio = fetched_ratio(emulator, [], sizes["dcp"], load_dcp(world, reference, tmp_path))
    assert ratio <= TARGET, f"DCP load with {world} process(es): fetched {ratio:.3f}x"


def test_plain_read_then_mmap_shares_bytes(emulator, files):
    """One handle reads the whole file (with readahead), closes; a second open maps it: the
    second costs nothing (the page cache or the shared reader holds every byte)."""
    state, sizes = files

    def load(path):
        with open(path / "model.pt", "rb") as f:
            while f.read(4 * MiB):
                pass
        loaded = torch.load(path / "model.pt", mmap=True, weights_only=True)
        assert_same(state, loaded)
    ratio = fetched_ratio(emulator, [], sizes["model.pt"], load)
    assert ratio <= TARGET, f"read then mmap: fetched {ratio:.3f}x"


def test_bytes_the_kernel_dropped_are_counted_when_read_again(emulator, files):
    """The page cache dropped between a plain read and an mmap load (drop_caches, as another
    test or a benchmark on this machine may do at any time): the load asks for the bytes
    again, fluxfs fetches them again and counts them; nothing else is fetched twice, and every
    tensor is right."""
    drop = "/proc/sys/vm/drop_caches"
    if not os.access(drop, os.W_OK):
        pytest.skip("needs root and a writable /proc/sys/vm/drop_caches")
    state, sizes = files
    size = sizes["model.pt"]

    def load(path):
        with open(path / "model.pt", "rb") as f:
            while f.read(4 * MiB):
                pass
        os.sync()
        with open(drop, "w") as f:
            f.write("1\n")
        load_mmap(state)(path)

    served, refetched = fetched(emulator, [], load)
    assert refetched > size // 2, (refetched, size)  # most of the file was fetched again
    assert refetched <= size, (refetched, size)  # once: nothing was dropped twice
    assert served - refetched <= TARGET * size, (served / size, refetched / size)


@pytest.mark.parametrize("pattern", ["mmap", "safetensors"])
def test_budget_smaller_than_file(emulator, files, pattern):
    """A memory budget of a third of the file: shared bytes are given back when memory is
    needed (never a wrong byte, no failure), and readahead does not push out bytes fetched for
    another handle (which fetched the file about twice over)."""
    state, sizes = files
    load, name = {
        "mmap": (load_mmap(state), "model.pt"),
        "safetensors": (load_safetensors(state), "model.safetensors"),
    }[pattern]
    args = ["--memory-limit", "40M", "--readahead-chunk", "4M", "--readahead-max", "16M"]
    ratio = fetched_ratio(emulator, args, sizes[name], load)
    assert ratio <= 1.3, f"{pattern} with a small budget: fetched {ratio:.3f}x"
