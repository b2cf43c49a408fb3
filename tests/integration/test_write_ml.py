"""Checkpoints through the mount, unchanged ML code: torch.save/torch.load (small and 1 GiB, also
mmap=True), numpy.save/load, cp/dd/rsync of large files, Lightning's ModelCheckpoint then a
resumed fit, torch.distributed.checkpoint with 2 gloo processes. Content checked through the
mount and through Google's client."""

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

BUCKET = "wml"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    return ["--upload-cleanup-age", "0"]


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        pass
    return seed


def state_dict(total_bytes, seed):
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    per = max(total_bytes // 8, 1024)
    i = 0
    while sum(t.numel() * t.element_size() for t in tensors.values()) < total_bytes:
        tensors[f"layer{i}.weight"] = torch.randn(per // 4, generator=gen)
        i += 1
    tensors["step"] = torch.tensor(1234)
    tensors["int8"] = torch.randint(-128, 127, (1000,), dtype=torch.int8, generator=gen)
    return tensors


def assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_torch_save_load_small(fluxfs_mount, gcs):
    sd = state_dict(64 * 1024, 1)
    path = fluxfs_mount.path / "small.pt"
    torch.save(sd, path)
    assert_same(sd, torch.load(path))
    blob = gcs.bucket(BUCKET).blob("small.pt").download_as_bytes()
    assert blob == path.read_bytes()


def test_torch_save_load_1gib(fluxfs_mount, gcs, tmp_path):
    sd = state_dict(1024 * MiB, 2)
    path = fluxfs_mount.path / "ckpt" / "big.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save(sd, path)
    loaded = torch.load(path)
    assert_same(sd, loaded)
    del loaded
    mapped = torch.load(path, mmap=True)
    assert_same(sd, mapped)
    del mapped
    # Through Google's client: the same bytes as a local torch.save of the same state.
    local = tmp_path / "big.pt"
    torch.save(sd, local)
    remote = tmp_path / "remote.pt"
    gcs.bucket(BUCKET).blob("ckpt/big.pt").download_to_filename(str(remote))
    assert os.path.getsize(remote) == os.path.getsize(local)
    assert_same(sd, torch.load(remote))


def test_numpy_save_load(fluxfs_mount, gcs):
    arr = np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float32)
    path = fluxfs_mount.path / "arr.npy"
    np.save(path, arr)
    assert np.array_equal(np.load(path), arr)
    assert np.array_equal(np.load(path, mmap_mode="r"), arr)
    data = gcs.bucket(BUCKET).blob("arr.npy").download_as_bytes()
    assert data == path.read_bytes()


def test_cp_dd_rsync_large_files(fluxfs_mount, gcs, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(48 * MiB + 123))
    digest = sha(src.read_bytes())
    root = fluxfs_mount.path / "tools"
    root.mkdir(exist_ok=True)
    subprocess.run(["cp", str(src), str(root / "cp.bin")], check=True)
    subprocess.run(["dd", f"if={src}", f"of={root / 'dd.bin'}", "bs=4M", "status=none"],
                   check=True)
    if shutil.which("rsync") is None:
        pytest.skip("rsync is not installed")
    # rsync writes a temporary dot-file, then renames it over the target.
    subprocess.run(["rsync", str(src), str(root / "rsync.bin")], check=True)
    for name in ("cp.bin", "dd.bin", "rsync.bin"):
        assert sha((root / name).read_bytes()) == digest, name
        assert sha(gcs.bucket(BUCKET).blob(f"tools/{name}").download_as_bytes()) == digest, name
    # rsync again with --inplace over an existing object (edits of an existing file).
    data = bytearray(src.read_bytes())
    data[1000:1010] = b"0123456789"
    src.write_bytes(bytes(data))
    # --ignore-times: same size and (second-granular) mtime must not skip the transfer.
    subprocess.run(["rsync", "--inplace", "--no-whole-file", "--ignore-times", str(src), str(root / "rsync.bin")],
                   check=True)
    assert sha(gcs.bucket(BUCKET).blob("tools/rsync.bin").download_as_bytes()) == sha(data)
    names = [b.name for b in gcs.list_blobs(BUCKET, prefix="tools/")]
    # The placeholder of mkdir and the three files; no rsync temporary file is left.
    assert sorted(names) == ["tools/", "tools/cp.bin", "tools/dd.bin", "tools/rsync.bin"]


LIGHTNING_SCRIPT = textwrap.dedent("""
    import sys, torch
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(16, 1)
        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 1))
    ckpt_dir, epochs, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    callback = ModelCheckpoint(dirpath=ckpt_dir, save_top_k=-1, every_n_epochs=1,
                               save_last=True)
    trainer = L.Trainer(max_epochs=epochs, callbacks=[callback], logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=ckpt_dir, accelerator="cpu", devices=1)
    trainer.fit(Tiny(), DataLoader(data, batch_size=16),
                ckpt_path=None if resume == "-" else resume)
    print("global_step", trainer.global_step)
""")


def test_lightning_checkpoint_and_resume(fluxfs_mount, gcs, tmp_path):
    pytest.importorskip("lightning")
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING_SCRIPT)
    ckpt_dir = fluxfs_mount.path / "lightning"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, str(script), str(ckpt_dir), "2", "-"], check=True,
                         capture_output=True, text=True, env=env, timeout=300)
    assert "global_step 8" in out.stdout, out.stdout + out.stderr
    names = sorted(os.listdir(ckpt_dir))
    assert "last.ckpt" in names and "epoch=1-step=8.ckpt" in names, names
    ckpt = torch.load(ckpt_dir / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 8
    out = subprocess.run([sys.executable, str(script), str(ckpt_dir), "4",
                          str(ckpt_dir / "last.ckpt")], check=True, capture_output=True,
                         text=True, env=env, timeout=300)
    assert "global_step 16" in out.stdout, out.stdout + out.stderr
    assert torch.load(ckpt_dir / "last.ckpt", weights_only=False)["global_step"] == 16
    remote = {b.name for b in gcs.list_blobs(BUCKET, prefix="lightning/")}
    assert "lightning/epoch=3-step=16.ckpt" in remote


DCP_SCRIPT = textwrap.dedent("""
    import os, sys, torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    def main(rank, world, path, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.manual_seed(rank)
        state = {f"rank{rank}.w": torch.randn(1024, 256), "shared": torch.arange(10) + rank}
        dcp.save(state, checkpoint_id=path)
        dist.barrier()
        loaded = {f"rank{rank}.w": torch.zeros(1024, 256), "shared": torch.zeros(10, dtype=torch.long)}
        dcp.load(loaded, checkpoint_id=path)
        assert torch.equal(loaded[f"rank{rank}.w"], state[f"rank{rank}.w"]), rank
        dist.destroy_process_group()

    if __name__ == "__main__":
        import torch.multiprocessing as mp
        mp.spawn(main, args=(2, sys.argv[1], sys.argv[2]), nprocs=2, join=True)
        print("dcp ok")
""")


def test_torch_distributed_checkpoint(fluxfs_mount, gcs, tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    script = tmp_path / "dcp.py"
    script.write_text(DCP_SCRIPT)
    path = fluxfs_mount.path / "dcp" / "step1"
    out = subprocess.run([sys.executable, str(script), str(path), port], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "dcp ok" in out.stdout, out.stdout + out.stderr
    names = sorted(os.listdir(path))
    assert ".metadata" in names and ".metadata.tmp" not in names, names
    assert len([n for n in names if n.endswith(".distcp")]) >= 2, names
    remote = {b.name for b in gcs.list_blobs(BUCKET, prefix="dcp/step1/")}
    assert "dcp/step1/.metadata" in remote
