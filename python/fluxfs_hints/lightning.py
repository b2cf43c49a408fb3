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
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

from . import HintedSampler, _warn_once

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:
    try:  # the older standalone package
        from pytorch_lightning.callbacks import Callback
    except ImportError:
        raise ImportError(
            "fluxfs_hints.lightning needs Lightning: pip install lightning (the package "
            "'lightning', or the older 'pytorch_lightning'); neither can be imported") from None

__all__ = ["FluxfsHints"]

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
