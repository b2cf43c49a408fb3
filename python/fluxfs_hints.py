"""Order hints for fluxfs: tell the mount which files an epoch will read, in order.

fluxfs prefetches small files compose-batched (up to 32 objects per request) when it knows
the upcoming read order. A training script knows it exactly: the sampler draws every index of
the epoch up front. This module writes the epoch's paths, in sampler order, to the hidden
control file ``MOUNT/.fluxfs/prefetch`` at the start of each epoch; the mount then fetches
ahead of the DataLoader workers (a bounded lookahead, ``--prefetch-lookahead``).

Only the mount owner (or root) may write hints. Nothing here is required for correctness:
without hints (or off a fluxfs mount) the files are read exactly the same, only slower.

Example (a map-style dataset whose item i is the file ``paths[i]``)::

    import torch
    from fluxfs_hints import hint_loader

    paths = sorted(glob.glob("/mnt/data/train/*.jpg"))
    dataset = MyImageDataset(paths)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8)
    hint_loader(loader, paths)          # each epoch's order goes to /mnt/data/.fluxfs/prefetch
    for epoch in range(2):
        for batch in loader:
            ...

or, building the sampler yourself::

    sampler = HintedSampler(torch.utils.data.RandomSampler(dataset), paths)
    loader = torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=64, num_workers=8)
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator, Sequence

CONTROL_DIR = ".fluxfs"

__all__ = ["find_mount_root", "write_hints", "HintedSampler", "hint_loader"]


def find_mount_root(path: str) -> str | None:
    """The root of the fluxfs mount holding path (the nearest ancestor whose .fluxfs/status
    exists), or None when path is not on a fluxfs mount."""
    current = os.path.abspath(path)
    if not os.path.isdir(current):
        current = os.path.dirname(current)
    while True:
        if os.path.exists(os.path.join(current, CONTROL_DIR, "status")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def write_hints(mount_root: str, paths: Iterable[str]) -> int:
    """Writes paths (absolute, or relative to mount_root) as a new hint list; returns how many.
    One write call per 1 MiB of text; the list replaces the previous one."""
    lines = []
    for p in paths:
        rel = os.path.relpath(p, mount_root) if os.path.isabs(p) else p
        lines.append(rel)
    data = ("\n".join(lines) + "\n").encode() if lines else b""
    with open(os.path.join(mount_root, CONTROL_DIR, "prefetch"), "wb", buffering=0) as f:
        view = memoryview(data)
        while view:
            n = f.write(view[: 1 << 20])
            view = view[n:]
    return len(lines)


class HintedSampler:
    """Wraps a sampler (torch.utils.data.Sampler or any iterable of indices with a length):
    each iteration draws the whole epoch's order first, writes paths[i] for each index to the
    mount's hint file, then yields the same indices. A sampler that yields lists of indices
    (a batch sampler) is handled too."""

    def __init__(self, sampler, paths: Sequence[str], mount_root: str | None = None):
        self.sampler = sampler
        self.paths = paths
        self.mount_root = mount_root or (find_mount_root(paths[0]) if len(paths) else None)

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator:
        order = list(iter(self.sampler))
        if self.mount_root is not None:
            flat = []
            for item in order:
                if isinstance(item, (list, tuple)):
                    flat.extend(item)
                else:
                    flat.append(item)
            try:
                write_hints(self.mount_root, (self.paths[i] for i in flat))
            except OSError:
                pass  # hints are advice: never fail the epoch over them
        return iter(order)


def hint_loader(loader, paths: Sequence[str], mount_root: str | None = None):
    """Makes an existing DataLoader (shuffle=True or not) write hints at the start of each
    epoch, by wrapping the sampler inside its batch sampler. Returns the loader."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and hasattr(batch_sampler, "sampler"):
        batch_sampler.sampler = HintedSampler(batch_sampler.sampler, paths, mount_root)
    else:
        raise ValueError("hint_loader needs a map-style DataLoader with a batch sampler; "
                         "use HintedSampler as its sampler instead")
    return loader
