"""What users missed next to the Connector for PyTorch (issue 22, item 16), on a real mount:
(a) order hints for iterable datasets: each DataLoader worker hints its own share of a known
shard order (fluxfs_hints.HintedShards), and (b) a Lightning CheckpointIO that writes through
the mount with asynchronous saves (fluxfs_hints.lightning.FluxfsCheckpointIO): save returns
while a background thread writes, the next save / teardown waits, errors are raised there."""

import json
import os
import subprocess
import sys
import threading

import pytest

from tests.integration.prefetch_util import status
from tests.lib.emulator import REPO_ROOT

pytestmark = pytest.mark.emulator_only

BUCKET = "iterck"
SHARDS = 8
SHARD_SIZE = 64 * 1024
PYTHON_DIR = REPO_ROOT / "python"


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/shards/:{SHARDS}:{SHARD_SIZE}:3"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


def python_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


ITERABLE_SCRIPT = r"""
import json, os, sys
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from fluxfs_hints import HintedShards

mount = sys.argv[1]
shards = [os.path.join(mount, "shards", n) for n in sorted(os.listdir(os.path.join(mount, "shards")))]

class Shards(IterableDataset):
    def __iter__(self):
        hinted = HintedShards(shards)
        mine = iter(hinted)
        # This worker's list on the mount, right after it was written.
        lines = [l for l in open(os.path.join(mount, ".fluxfs", "status")).read().splitlines()
                 if l.startswith(f"hint_list_{os.getpid()}:")]
        for shard in mine:
            with open(shard, "rb") as f:
                data = f.read()
            yield {"worker": get_worker_info().id, "shard": shard, "size": len(data),
                   "hinted": hinted.hinted, "lines": lines}

loader = DataLoader(Shards(), batch_size=None, num_workers=2)
print(json.dumps(list(loader)))
"""


def test_iterable_dataset_workers_hint_their_shards(fluxfs_mount, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "iterable.py"
    script.write_text(ITERABLE_SCRIPT)
    result = subprocess.run([sys.executable, str(script), str(fluxfs_mount.path)],
                            env=python_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    items = json.loads(result.stdout.strip().splitlines()[-1])
    shards = sorted(str(fluxfs_mount.path / "shards" / f"{i:08d}") for i in range(SHARDS))
    assert sorted(i["shard"] for i in items) == shards  # each shard read once, by one worker
    assert all(i["size"] == SHARD_SIZE for i in items)
    for worker in (0, 1):
        mine = [i for i in items if i["worker"] == worker]
        assert [i["shard"] for i in mine] == shards[worker::2]
        assert {i["hinted"] for i in mine} == {SHARDS // 2}
        # The mount holds that worker's list of its share (one list per worker process).
        lines = mine[0]["lines"]
        assert len(lines) == 1, lines
        fields = dict(f.split("=") for f in lines[0].split(": ", 1)[1].split())
        assert int(fields["total"]) == SHARDS // 2, lines
    assert "HintWarning" not in result.stderr


def test_hint_shards_off_the_mount_warns_and_returns_zero(tmp_path):
    shard = tmp_path / "local.tar"
    shard.write_bytes(b"x")
    code = ("import warnings; warnings.simplefilter('always')\n"
            "import fluxfs_hints\n"
            f"print(fluxfs_hints.hint_shards([{str(shard)!r}]))\n")
    result = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
    assert "not on a fluxfs mount" in result.stderr


@pytest.fixture
def checkpoint_io_module():
    pytest.importorskip("torch")
    pytest.importorskip("lightning")
    sys.path.insert(0, str(PYTHON_DIR))
    try:
        import fluxfs_hints.lightning as module
    finally:
        sys.path.remove(str(PYTHON_DIR))
    return module


def test_checkpoint_save_is_asynchronous_and_keeps_the_saved_values(fluxfs_mount,
                                                                    checkpoint_io_module):
    import torch

    release = threading.Event()
    writing = threading.Event()

    class Gated(checkpoint_io_module.FluxfsCheckpointIO):
        def _write(self, checkpoint, path):
            writing.set()
            assert release.wait(120), "never released"
            super()._write(checkpoint, path)

    io = Gated()
    path = fluxfs_mount.path / "ckpt" / "async.ckpt"
    weights = torch.arange(1000, dtype=torch.float32)
    io.save_checkpoint({"state_dict": {"w": weights}, "epoch": 3}, path)
    # save returned while its write is held: nothing is on the mount yet.
    assert writing.wait(120)
    assert not path.exists()
    weights.mul_(-1)  # training goes on changing the tensors
    release.set()
    io.teardown()     # waits for the write
    loaded = torch.load(path, weights_only=False)
    assert loaded["epoch"] == 3
    assert torch.equal(loaded["state_dict"]["w"], torch.arange(1000, dtype=torch.float32))
    assert io.load_checkpoint(path)["epoch"] == 3
    io.remove_checkpoint(path)
    assert not path.exists()


def test_checkpoint_save_error_surfaces(fluxfs_mount, checkpoint_io_module):
    io = checkpoint_io_module.FluxfsCheckpointIO()
    # An object name over Cloud Storage's 1,024 bytes: the mount refuses it (ENAMETOOLONG).
    deep = fluxfs_mount.path.joinpath(*(["d" * 200] * 6))
    io.save_checkpoint({"epoch": 1}, deep / "x.ckpt")
    with pytest.raises(RuntimeError, match="checkpoint save failed"):
        io.teardown()
    io.teardown()  # raised once; nothing pending now
    io.save_checkpoint({"epoch": 2}, deep / "y.ckpt")
    with pytest.raises(RuntimeError, match="checkpoint save failed"):
        io.save_checkpoint({"epoch": 3}, fluxfs_mount.path / "ckpt" / "z.ckpt")
    io.teardown()


TRAINER_SCRIPT = r"""
import os, sys
import torch
import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset
from fluxfs_hints.lightning import FluxfsCheckpointIO

out = sys.argv[1]

class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.ones(16, 4)), batch_size=4)

io = FluxfsCheckpointIO()
trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=3, logger=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     plugins=[io],
                     callbacks=[ModelCheckpoint(dirpath=out, save_top_k=-1,
                                                filename="e{epoch}", auto_insert_metric_name=False)])
model = Model()
trainer.fit(model)
assert trainer.strategy.checkpoint_io is io
torch.save(model.state_dict(), os.path.join(out, "..", "final-local.pt"))
"""


def test_lightning_trainer_saves_through_the_mount(fluxfs_mount, checkpoint_io_module,
                                                    tmp_path):
    import torch

    script = tmp_path / "train.py"
    script.write_text(TRAINER_SCRIPT)
    out = fluxfs_mount.path / "ckpt" / "run1"
    env = python_env()
    env["PL_DISABLE_FORK"] = "1"
    result = subprocess.run([sys.executable, str(script), str(out)], env=env,
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    names = sorted(os.listdir(out))
    assert names == ["e0.ckpt", "e1.ckpt", "e2.ckpt"], names
    for epoch, name in enumerate(names):
        loaded = torch.load(out / name, weights_only=False)
        assert loaded["epoch"] == epoch
        assert "layer.weight" in loaded["state_dict"]
    final = torch.load(fluxfs_mount.path / "ckpt" / "final-local.pt", weights_only=False)
    last = torch.load(out / "e2.ckpt", weights_only=False)
    assert torch.equal(final["layer.weight"], last["state_dict"]["layer.weight"])
    assert int(status(fluxfs_mount).get("fuse_opens", "0")) > 0
