"""The installable hint package python/ (fluxfs_hints) where training really runs (issue 10):
installed with pip (no network: the venv's setuptools), 4 DDP-style processes with
DistributedSampler + HintedSampler on one mount (each object fetched about once, all four lists
served at once, the order changing with set_epoch), Lightning's Trainer(strategy="ddp",
devices=2, accelerator="cpu") with the FluxfsHints callback (hints on both ranks, the
LightningModule unchanged), and the warning given once when hints are refused or the files are
not on a fluxfs mount."""

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.integration.prefetch_util import status, wait_for
from tests.lib.emulator import REPO_ROOT

pytestmark = pytest.mark.emulator_only

BUCKET = "pkg"
COUNT = 800
SIZE = 16 * 1024
RANKS = 4
WAIT_S = 120


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "5", "--populate", f"{BUCKET}/d/:{COUNT}:{SIZE}:4",
            "--populate", f"{BUCKET}/l/:{COUNT // 4}:{SIZE}:5"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    return ["--allow-other"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """python/ installed with pip into a directory of its own (offline: the venv's
    setuptools builds it); scripts run with it first on PYTHONPATH, not python/."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("src")
    # Built from a copy: pip leaves build/ and *.egg-info next to the sources.
    subprocess.run(["cp", "-a", str(REPO_ROOT / "python"), str(build)], check=True)
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                             "--no-build-isolation", "--no-index", "--target", str(target),
                             str(build / "python")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (target / "fluxfs_hints" / "__init__.py").exists()
    assert (target / "fluxfs_hints" / "lightning.py").exists()
    return target


def run_env(installed):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(installed)
    return env


def lists_of(s):
    out = {}
    for key, value in s.items():
        if key.startswith("hint_list_"):
            out[int(key[len("hint_list_"):])] = {
                k: int(v) for k, v in (f.split("=") for f in value.split())}
    return out


def wait_files(paths, procs):
    deadline = time.monotonic() + WAIT_S
    while not all(Path(p).exists() for p in paths):
        for p in procs:
            if p.poll() is not None and p.returncode != 0:
                pytest.fail(f"a rank failed:\n{p.stderr.read()}")
        assert time.monotonic() < deadline, f"gave up waiting for {paths}"
        time.sleep(0.05)


RANK_SCRIPT = r"""
import json, os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
import fluxfs_hints
from fluxfs_hints import HintedSampler

assert "site" in fluxfs_hints.__file__, fluxfs_hints.__file__  # the installed copy
mount, rank, ranks, sync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = sorted(os.listdir(os.path.join(mount, "d")))
paths = [os.path.join(mount, "d", n) for n in names]

class Files(Dataset):
    def __len__(self):
        return len(paths)
    def __getitem__(self, i):
        with open(paths[i], "rb") as f:
            return i, len(f.read())

def barrier(name):
    open(os.path.join(sync, f"{name}.{rank}"), "w").close()
    while not os.path.exists(os.path.join(sync, name)):
        time.sleep(0.02)

sampler = HintedSampler(DistributedSampler(Files(), num_replicas=ranks, rank=rank, seed=7),
                        paths)
loader = DataLoader(Files(), sampler=sampler, batch_size=8, num_workers=2,
                    collate_fn=lambda b: b)
orders = []
for epoch in range(2):
    sampler.set_epoch(epoch)
    it = iter(loader)          # draws the epoch's order: the hints are written now
    barrier(f"start{epoch}")
    order = []
    for batch in it:
        for i, size in batch:
            assert size == %d, (i, size)
            order.append(i)
    orders.append(order)
    barrier(f"end{epoch}")
print(json.dumps({"pid": os.getpid(), "orders": orders, "hinted": sampler.hinted,
                  "replicas": sampler.num_replicas}))
""" % SIZE


def page_cache_drops():
    with open("/proc/vmstat") as f:
        return [line for line in f if line.startswith("drop_pagecache")]


def test_four_ranks_with_distributed_sampler_share_one_mount(fluxfs_mount, emulator, installed,
                                                             tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    sync = tmp_path / "sync"
    sync.mkdir()
    before = status(fluxfs_mount)
    bytes_before = emulator.stats()["bytes_out"]
    drops_before = page_cache_drops()
    procs = [subprocess.Popen([sys.executable, str(script), str(fluxfs_mount.path), str(r),
                               str(RANKS), str(sync)], env=run_env(installed),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(RANKS)]
    try:
        share = COUNT // RANKS
        for epoch in range(2):
            wait_files([sync / f"start{epoch}.{r}" for r in range(RANKS)], procs)
            # Every rank's list is there at once, each its own share, none replaced by another.
            lists = lists_of(status(fluxfs_mount))
            pids = {p.pid for p in procs}
            assert pids <= set(lists), (pids, lists)
            for pid in pids:
                assert lists[pid]["total"] == share, lists[pid]
            (sync / f"start{epoch}").touch()
            wait_files([sync / f"end{epoch}.{r}" for r in range(RANKS)], procs)
            # All four lists were served: each read to its end, every entry processed.
            s = wait_for(fluxfs_mount, lambda s: all(
                lists_of(s)[pid]["done"] == share for pid in pids), "the four lists")
            for pid in pids:
                assert lists_of(s)[pid]["opened"] == share
            (sync / f"end{epoch}").touch()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=WAIT_S)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r in results:
        assert r["replicas"] == RANKS and r["hinted"] == COUNT // RANKS
        # set_epoch reached the DistributedSampler: a new shuffle in the second epoch.
        assert r["orders"][0] != r["orders"][1]
    for epoch in range(2):
        seen = sorted(i for r in results for i in r["orders"][epoch])
        assert seen == list(range(COUNT))
    fetched = emulator.stats()["bytes_out"] - bytes_before
    # Cold epoch, then from the page cache: every object's bytes came about once (plus JSON).
    # Objects the page cache holds are not kept in the daemon too (hinted epochs), so when
    # another process dropped the page cache meanwhile (benchmarks do: /proc/vmstat), the
    # second epoch fetched what it dropped once more: at most twice in all then.
    bound = 1.1 if page_cache_drops() == drops_before else 2.2
    assert fetched <= COUNT * SIZE * bound, fetched / (COUNT * SIZE)
    s = status(fluxfs_mount)
    assert int(s["files_prefetched"]) - int(before["files_prefetched"]) >= COUNT // 2
    # The ranks exited: their lists went with them.
    assert not {p.pid for p in procs} & set(lists_of(s))


LIGHTNING_SCRIPT = r"""
import json, os, sys
import torch
from torch.utils.data import DataLoader, Dataset
import lightning.pytorch as pl
from fluxfs_hints.lightning import FluxfsHints

mount, out_dir = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(os.path.join(mount, "l")))

class Files(Dataset):
    def __init__(self):
        self.paths = [os.path.join(mount, "l", n) for n in names]
    def __len__(self):
        return len(self.paths)
    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = f.read()
        return torch.tensor([float(len(data)) / 1e4, float(data[0])])

class Model(pl.LightningModule):     # knows nothing of fluxfs
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
    def training_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.001)
    def train_dataloader(self):
        return DataLoader(Files(), batch_size=10, shuffle=True, num_workers=1)

class Report(pl.Callback):
    # After FluxfsHints (callbacks run in order): what this rank's list on the mount holds.
    def on_train_epoch_start(self, trainer, pl_module):
        lines = [l for l in open(os.path.join(mount, ".fluxfs", "status")).read().splitlines()
                 if l.startswith(f"hint_list_{os.getpid()}:")]
        hints = trainer.callbacks[0]
        sampler = trainer.train_dataloader.batch_sampler.sampler
        report = {"rank": trainer.global_rank, "pid": os.getpid(), "lines": lines,
                  "wrapped": type(sampler).__name__,
                  "inner": type(sampler.sampler).__name__ if hasattr(sampler, "sampler") else None,
                  "hinted": [s.hinted for s in hints.samplers],
                  "order": list(iter(sampler.sampler))}
        path = os.path.join(out_dir, f"rank{trainer.global_rank}-epoch{trainer.current_epoch}.json")
        with open(path, "w") as f:
            json.dump(report, f)

trainer = pl.Trainer(strategy="ddp", devices=2, accelerator="cpu", max_epochs=2,
                     callbacks=[FluxfsHints(), Report()], logger=False,
                     enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False)
trainer.fit(Model())
"""


def test_lightning_ddp_callback_hints_on_both_ranks(fluxfs_mount, installed, tmp_path):
    pytest.importorskip("lightning")
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING_SCRIPT)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = run_env(installed)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["PL_DISABLE_FORK"] = "1"
    result = subprocess.run([sys.executable, str(script), str(fluxfs_mount.path), str(out_dir)],
                            env=env, capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    share = (COUNT // 4) // 2
    orders = {}
    for rank in range(2):
        for epoch in range(2):
            path = out_dir / f"rank{rank}-epoch{epoch}.json"
            assert path.exists(), f"no report from rank {rank}, epoch {epoch}"
            report = json.loads(path.read_text())
            # Lightning's own DistributedSampler, wrapped by the callback, hinted on this rank.
            assert report["wrapped"] == "HintedSampler", report
            assert report["inner"] == "DistributedSampler", report
            assert report["hinted"] == [share], report
            assert len(report["lines"]) == 1, report
            fields = dict(f.split("=") for f in report["lines"][0].split(": ", 1)[1].split())
            assert int(fields["total"]) == share, report
            orders[rank, epoch] = report["order"]
    assert orders[0, 0] != orders[0, 1] and orders[1, 0] != orders[1, 1]
    assert not set(orders[0, 0]) & set(orders[1, 0])
    assert "HintWarning" not in result.stderr


def test_refused_hints_warn_once(fluxfs_mount, installed):
    """A process that is not the mount owner (an app container against a root-owned mount):
    the mount answers EACCES; the sampler warns once and the epochs still run."""
    sys.path.insert(0, str(installed))
    try:
        import fluxfs_hints
    finally:
        sys.path.remove(str(installed))
    import torch
    paths = [os.path.join(fluxfs_mount.path, "d", f"{i:08d}") for i in range(50)]
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        code = 100
        try:
            os.setgid(65534)
            os.setuid(65534)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sampler = fluxfs_hints.HintedSampler(torch.utils.data.RandomSampler(paths),
                                                     paths)
                drawn = [sorted(sampler) for _ in range(3)]
            refused = [w for w in caught if issubclass(w.category, fluxfs_hints.HintWarning)]
            os.write(write_end, "\n".join(
                [str(drawn == [list(range(50))] * 3), str(sampler.mount_root)]
                + [str(w.message) for w in refused]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        report = f.read().splitlines()
    _, wait_status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(wait_status) == 0, report
    # The epochs ran, the mount was found, and one warning (of three refused lists) said why.
    assert report[:2] == ["True", str(fluxfs_mount.path)], report
    assert len(report) == 3 and "permission denied" in report[2], report


def test_not_on_a_fluxfs_mount_warns_once(installed, tmp_path):
    paths = []
    for i in range(5):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x")
        paths.append(str(p))
    script = (
        "import sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "from fluxfs_hints import HintedSampler\n"
        f"paths = {paths!r}\n"
        "samplers = [HintedSampler(range(5), paths) for _ in range(3)]\n"
        "assert [list(s) for s in samplers] == [list(range(5))] * 3\n")
    result = subprocess.run([sys.executable, "-c", script], env=run_env(installed),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("HintWarning") == 1, result.stderr
    assert "not on a fluxfs mount" in result.stderr
