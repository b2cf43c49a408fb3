"""A Lightning callback that gives fluxfs order hints on every rank.

With ``strategy="ddp"`` Lightning replaces the training loader's sampler with its own
``DistributedSampler`` (``use_distributed_sampler=True``), so a sampler wrapped by the user is
lost. This callback works on the loader Lightning actually iterates: at the start of every
training epoch (after Lightning has set the sampler's epoch) it wraps the index sampler in a
``HintedSampler`` and writes this rank's order for the epoch. No change to the LightningModule
or the DataModule is needed::

    from fluxfs_hints.lightning import FluxfsHints

    trainer = Trainer(strategy="ddp", devices=4, callbacks=[FluxfsHints(paths)])
    trainer.fit(model, datamodule)

``paths``: the file of each dataset index (a sequence, or a function of the dataset returning
one); by default the dataset's ``paths`` or ``files`` attribute. A ``DistributedSampler``'s
order is fixed by its seed and epoch, so the first epoch is hinted too (Lightning creates the
first epoch's iterator before any epoch hook runs); other samplers are hinted from the
iteration after the first hook on (a plain ``RandomSampler`` draws a new order per iteration).

Checkpoints through the mount, saved in the background::

    from fluxfs_hints.lightning import FluxfsCheckpointIO

    trainer = Trainer(plugins=[FluxfsCheckpointIO()],
                      callbacks=[ModelCheckpoint(dirpath="/mnt/ckpt/run1")])

``save_checkpoint`` copies the checkpoint's tensors to host memory and returns; a background
thread writes the file with ``torch.save`` (the mount uploads parts while it is written and
commits at close). The next save, a load or removal of the same path, and ``teardown`` (end of
fit) wait for it, and an error of the write is raised there: a failed save is never silent.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional, Sequence, Union

from . import HintedSampler, _warn_once

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.plugins.io import CheckpointIO
except ImportError:
    try:  # the older standalone package
        from pytorch_lightning.callbacks import Callback
        from pytorch_lightning.plugins.io import CheckpointIO
    except ImportError:
        raise ImportError(
            "fluxfs_hints.lightning needs Lightning: pip install lightning (the package "
            "'lightning', or the older 'pytorch_lightning'); neither can be imported") from None

__all__ = ["FluxfsHints", "FluxfsCheckpointIO"]

PathsArg = Union[Sequence[str], Callable[[object], Sequence[str]], None]


def _loaders(obj):
    """The DataLoaders in what trainer.train_dataloader returns (a loader or a collection)."""
    if obj is None:
        return
    if isinstance(obj, dict):
        for value in obj.values():
            yield from _loaders(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _loaders(value)
    elif hasattr(obj, "batch_sampler") or hasattr(obj, "sampler"):
        yield obj


def _epoch_fixed(sampler) -> bool:
    """Whether iterating sampler twice in an epoch gives the same order (seeded per epoch)."""
    try:
        from torch.utils.data.distributed import DistributedSampler
    except ImportError:
        return False
    return isinstance(sampler, DistributedSampler)


class FluxfsHints(Callback):
    def __init__(self, paths: PathsArg = None, mount_root: str | None = None):
        self.paths = paths
        self.mount_root = mount_root
        self.samplers: list = []   # the HintedSamplers of the training loaders (this rank)

    def _paths_for(self, dataset):
        if callable(self.paths):
            return self.paths(dataset)
        if self.paths is not None:
            return self.paths
        for attribute in ("paths", "files"):
            found = getattr(dataset, attribute, None)
            if found is not None:
                return found
        _warn_once(("no-paths", type(dataset).__name__),
                   f"fluxfs_hints: FluxfsHints has no paths for {type(dataset).__name__} "
                   "(pass paths= or give the dataset a `paths` attribute): no order hints")
        return None

    def _wrap(self, loader):
        batch_sampler = getattr(loader, "batch_sampler", None)
        holder, attribute = (batch_sampler, "sampler") if batch_sampler is not None and \
            hasattr(batch_sampler, "sampler") else (None, None)
        if holder is None:
            _warn_once(("no-sampler", type(loader).__name__),
                       "fluxfs_hints: the training loader has no batch sampler (an iterable "
                       "dataset?): no order hints")
            return None
        sampler = getattr(holder, attribute)
        if isinstance(sampler, HintedSampler):
            return sampler
        paths = self._paths_for(loader.dataset)
        if paths is None:
            return None
        hinted = HintedSampler(sampler, paths, self.mount_root)
        setattr(holder, attribute, hinted)
        return hinted

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.samplers = []
        for loader in _loaders(trainer.train_dataloader):
            hinted = self._wrap(loader)
            if hinted is None:
                continue
            self.samplers.append(hinted)
            if _epoch_fixed(hinted.sampler):
                # Lightning set this epoch on the sampler just before this hook; the loader's
                # iterator may exist already (the first epoch's is made at setup).
                hinted.write_order(list(iter(hinted.sampler)), ahead=True)


def _snapshot(obj):
    """A copy of obj whose tensors are host-memory copies (training goes on changing the
    originals while the file is written); containers are copied, other values shared."""
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return type(obj)((k, _snapshot(v)) for k, v in obj.items()) \
            if type(obj) is not dict else {k: _snapshot(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_snapshot(v) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_snapshot(v) for v in obj)
    return obj


class FluxfsCheckpointIO(CheckpointIO):
    """Lightning checkpoints written through a fluxfs mount (any local path works), with
    asynchronous saves (async_save=False: written before save_checkpoint returns). One save at
    a time: a save waits for the one before it."""

    def __init__(self, async_save: bool = True):
        super().__init__()
        self.async_save = async_save
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._pending_path: Optional[str] = None
        self._error: Optional[BaseException] = None

    def _write(self, checkpoint, path: str) -> None:
        import torch
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # close() reports the upload's outcome (the object appears atomically on success).
        with open(path, "wb") as f:
            torch.save(checkpoint, f)

    def _run(self, checkpoint, path: str) -> None:
        try:
            self._write(checkpoint, path)
        except BaseException as e:  # kept for the caller that waits next
            with self._lock:
                self._error = e

    def wait(self) -> None:
        """Waits for the save under way; raises its error (once) if it failed."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            if self._thread is thread:
                self._thread = None
                self._pending_path = None
            error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"fluxfs checkpoint save failed: {error}") from error

    def save_checkpoint(self, checkpoint: dict, path, storage_options: Optional[Any] = None
                        ) -> None:
        if storage_options is not None:
            raise TypeError("FluxfsCheckpointIO takes no storage_options")
        self.wait()
        path = os.fspath(path)
        snapshot = _snapshot(checkpoint)
        if not self.async_save:
            self._write(snapshot, path)
            return
        thread = threading.Thread(target=self._run, args=(snapshot, path),
                                  name="fluxfs-checkpoint", daemon=False)
        with self._lock:
            self._thread = thread
            self._pending_path = path
        thread.start()

    def load_checkpoint(self, path, map_location: Optional[Any] = None,
                        weights_only: Optional[bool] = None) -> dict:
        import torch
        self.wait()
        with open(os.fspath(path), "rb") as f:
            return torch.load(f, map_location=map_location,
                              weights_only=bool(weights_only) if weights_only is not None
                              else False)

    def remove_checkpoint(self, path) -> None:
        self.wait()
        try:
            os.remove(os.fspath(path))
        except FileNotFoundError:
            pass

    def teardown(self) -> None:
        self.wait()
