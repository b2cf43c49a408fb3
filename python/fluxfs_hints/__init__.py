"""Order hints for fluxfs: tell the mount which files an epoch will read, in order.

fluxfs prefetches small files compose-batched (up to 32 objects per request) when it knows
the upcoming read order. A training script knows it exactly: the sampler draws every index of
the epoch up front. This package writes the epoch's paths, in sampler order, to the hidden
control file ``MOUNT/.fluxfs/prefetch`` at the start of each epoch; the mount then fetches
ahead of the DataLoader workers (a bounded lookahead, ``--prefetch-lookahead``).

Each process that writes hints has a list of its own on the mount: with DDP every rank's main
process writes its own rank's order (its ``DistributedSampler`` share), a new epoch's list
replaces only that process's previous list, and a list goes when its process exits. One list
per process: hint the training loader only.

On a read-only mount (which refuses to open the control file for writing) the same list goes
through ioctls on ``MOUNT/.fluxfs``. Only the mount owner (or root) may write hints. Nothing here is required for correctness:
without hints (or off a fluxfs mount) the files are read exactly the same, only slower. When
the mount refuses the hints (e.g. EACCES: not the mount owner) or the files are not on a fluxfs
mount, a warning says so once and training goes on.

Install: ``pip install ./python`` (pure Python; torch and lightning are used when present).

Plain PyTorch (a map-style dataset whose item i is the file ``paths[i]``)::

    from fluxfs_hints import hint_loader

    paths = sorted(glob.glob("/mnt/data/train/*.jpg"))
    loader = torch.utils.data.DataLoader(MyDataset(paths), batch_size=64, shuffle=True,
                                         num_workers=8)
    hint_loader(loader, paths)          # each epoch's order goes to /mnt/data/.fluxfs/prefetch
    for epoch in range(epochs):
        for batch in loader:
            ...

DDP (torchrun, one process per rank; every rank hints its own share)::

    sampler = HintedSampler(DistributedSampler(dataset), paths)
    loader = DataLoader(dataset, sampler=sampler, batch_size=64, num_workers=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)        # forwarded to the DistributedSampler
        for batch in loader:
            ...

Lightning (``strategy="ddp"`` replaces the sampler with its own ``DistributedSampler``; the
callback hints whatever sampler the training loader ends up with, on every rank, without any
change to the LightningModule)::

    from fluxfs_hints.lightning import FluxfsHints

    trainer = Trainer(strategy="ddp", devices=4, callbacks=[FluxfsHints(paths)])

Iterable datasets (WebDataset shards, an ``IterableDataset`` streaming files in a known order):
each DataLoader worker is a process of its own, so each hints the shards it will read itself::

    from fluxfs_hints import HintedShards

    class Shards(torch.utils.data.IterableDataset):
        def __iter__(self):
            for shard in HintedShards(shard_paths):   # this worker's share, hinted, in order
                yield from read_samples(shard)

``HintedShards`` takes every ``num_workers``-th shard for this worker (``worker_shards``), and
with ``split_by_rank=True`` every ``world_size``-th for this DDP rank first; give it the
split list with ``split=False`` when the dataset splits already (WebDataset's
``split_by_worker``). ``hint_shards(paths)`` writes any known order at once.
"""

from __future__ import annotations

import errno
import os
import threading
import warnings
from typing import Iterable, Iterator, Sequence

CONTROL_DIR = ".fluxfs"

# The project's one version is meson.build's; pyproject.toml reads this attribute, and
# tests/integration/test_python_package.py checks that it equals meson.build's.
__version__ = "0.2.0"

__all__ = ["find_mount_root", "write_hints", "HintedSampler", "hint_loader", "HintWarning",
           "hint_shards", "worker_shards", "HintedShards"]


class HintWarning(UserWarning):
    """Hints could not be given (refused by the mount, or the files are not on a fluxfs mount).
    Shown once per mount and reason; training is not affected."""


_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(key, message: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, HintWarning, stacklevel=3)


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
    """Writes paths as this process's new hint list; returns how many. A relative path is
    relative to the working directory, as for open(); paths outside mount_root are dropped
    (a warning, once, when none is left). One write call per 1 MiB of text. Raises OSError
    when the mount refuses (EACCES/EPERM: not the mount owner; ENOSPC: too many lists)."""
    lines = []
    given = 0
    root = os.path.abspath(mount_root)
    outside = os.pardir + os.sep
    for p in paths:
        given += 1
        rel = os.path.relpath(os.path.abspath(p), root)
        if rel == os.curdir or rel == os.pardir or rel.startswith(outside):
            continue  # not a file on this mount
        lines.append(rel)
    if given and not lines:
        _warn_once(("nothing", root),
                   f"fluxfs_hints: the {given} hinted paths resolve to nothing on the mount "
                   f"{root} (relative paths are taken from the working directory "
                   f"{os.getcwd()}); no order hints are written")
    data = ("\n".join(lines) + "\n").encode() if lines else b""
    try:
        f = open(os.path.join(mount_root, CONTROL_DIR, "prefetch"), "wb", buffering=0)
    except OSError as e:
        if e.errno != errno.EROFS:
            raise
        # A read-only mount: the same list through ioctls on the .fluxfs directory.
        _write_hints_ioctl(mount_root, [line.encode() for line in lines])
        return len(lines)
    with f:
        view = memoryview(data)
        while view:
            n = f.write(view[: 1 << 20])
            view = view[n:]
    return len(lines)


# fluxfs's hint ioctl (src/fs/fs_control.c): _IOW('F', 0x17, 16000 bytes): u32 flags (1: a new
# list), u32 length, then whole newline-ended lines.
_HINT_CHUNK = 16000
_HINT_DATA = _HINT_CHUNK - 8
_IOC_HINTS = (1 << 30) | (_HINT_CHUNK << 16) | (ord("F") << 8) | 0x17


def _write_hints_ioctl(mount_root: str, lines: list) -> None:
    import fcntl
    import struct

    fd = os.open(os.path.join(mount_root, CONTROL_DIR), os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags, chunk = 1, []
        size = 0

        def send():
            body = b"".join(chunk)
            # A bytearray: fcntl.ioctl passes a mutable buffer of any size (bytes: 1 KiB at most).
            buf = bytearray(struct.pack("II", flags, len(body)) + body.ljust(_HINT_DATA, b"\0"))
            fcntl.ioctl(fd, _IOC_HINTS, buf, True)

        for line in lines:
            if size + len(line) + 1 > _HINT_DATA and chunk:
                send()
                flags, chunk, size = 0, [], 0
            chunk.append(line + b"\n")
            size += len(line) + 1
        if chunk or flags:
            send()
    finally:
        os.close(fd)


def _write_or_warn(mount_root: str, paths) -> int:
    """write_hints that never raises: a refusal is warned about once and 0 returned."""
    try:
        return write_hints(mount_root, paths)
    except OSError as e:  # hints are advice: never fail the epoch over them
        if e.errno in (errno.EACCES, errno.EPERM):
            why = ("permission denied: only the mount's owner (or root) may write hints; "
                   "run as that user or mount with -o uid=/gid= of this one")
        else:
            why = os.strerror(e.errno) if e.errno else str(e)
        _warn_once(("refused", mount_root, e.errno),
                   f"fluxfs_hints: order hints refused by {mount_root} ({why}); "
                   "reads go on without them")
        return 0


def _mount_of(path: str) -> str | None:
    root = find_mount_root(path)
    if root is None:
        _warn_once(("not-fluxfs", os.path.dirname(os.path.abspath(path))),
                   f"fluxfs_hints: {path} is not on a fluxfs mount (no "
                   f"{CONTROL_DIR}/status above it): no order hints are given")
    return root


def hint_shards(paths: Sequence[str], mount_root: str | None = None) -> int:
    """Writes a known read order (shard files, in the order they will be read) as this
    process's hint list; returns how many were hinted (0 when off a fluxfs mount or refused:
    warned once, never raised). Called in a DataLoader worker, the list is that worker's."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        return 0
    root = mount_root if mount_root is not None else _mount_of(paths[0])
    if root is None:
        return 0
    return _write_or_warn(root, paths)


def _rank_and_world():
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def worker_shards(shards: Sequence[str], split_by_rank: bool = False) -> list:
    """This process's share of shards, in order: every world_size-th from this DDP rank's
    index on (split_by_rank), then every num_workers-th from this DataLoader worker's id on
    (torch.utils.data.get_worker_info(); all of them outside a worker)."""
    mine = list(shards)
    if split_by_rank:
        rank, world = _rank_and_world()
        mine = mine[rank::world]
    try:
        from torch.utils.data import get_worker_info
        info = get_worker_info()
    except ImportError:
        info = None
    if info is not None:
        mine = mine[info.id::info.num_workers]
    return mine


class HintedShards:
    """An iterable of shard paths for an IterableDataset (or WebDataset's shard list): each
    iteration takes this worker's share (split=True: see worker_shards), writes it as this
    process's hint list, and yields the shards in that order. ``hinted``: how many the last
    iteration hinted."""

    def __init__(self, shards: Sequence[str], split: bool = True, split_by_rank: bool = False,
                 mount_root: str | None = None):
        self.shards = [os.fspath(s) for s in shards]
        self.split = split
        self.split_by_rank = split_by_rank
        self.mount_root = mount_root
        self.hinted = 0

    def __len__(self) -> int:
        return len(self.shards)

    def __iter__(self) -> Iterator[str]:
        mine = worker_shards(self.shards, self.split_by_rank) if self.split else \
            list(self.shards)
        self.hinted = hint_shards(mine, self.mount_root)
        return iter(mine)


def _flatten(order) -> list:
    flat = []
    for item in order:
        if isinstance(item, (list, tuple)):
            flat.extend(item)
        else:
            flat.append(item)
    return flat


class HintedSampler:
    """Wraps a sampler (torch.utils.data.Sampler or any iterable of indices with a length):
    each iteration draws the whole epoch's order first, writes paths[i] for each index to the
    mount's hint file, then yields the same indices. A sampler that yields lists of indices
    (a batch sampler) is handled too.

    Everything else is the wrapped sampler's: ``set_epoch`` (DistributedSampler's shuffle
    changes with it), ``num_replicas``, ``rank``, ``seed`` and any other attribute are
    forwarded, so code and frameworks that look for them find them."""

    def __init__(self, sampler, paths: Sequence[str], mount_root: str | None = None):
        self.sampler = sampler
        self.paths = paths
        if mount_root is None and len(paths):
            mount_root = find_mount_root(paths[0])
            if mount_root is None:
                _warn_once(("not-fluxfs", os.path.dirname(os.path.abspath(paths[0]))),
                           f"fluxfs_hints: {paths[0]} is not on a fluxfs mount (no "
                           f"{CONTROL_DIR}/status above it): no order hints are given")
        self.mount_root = mount_root
        self.hinted = 0          # entries written in the last list
        self._written_ahead = None  # the order written before the loader asked (see below)

    def __getattr__(self, name):
        # Only called for attributes this object lacks. "sampler" itself may be missing while
        # unpickling: never recurse for it.
        if name == "sampler" or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        return getattr(self.sampler, name)

    def set_epoch(self, epoch: int) -> None:
        """Forwards to the wrapped sampler (AttributeError when it has no set_epoch)."""
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.sampler)

    def write_order(self, order, ahead: bool = False) -> int:
        """Writes the hint list for an epoch's order (indices, or lists of them); returns how
        many entries were written (0 when hints are off or were refused; warned once).
        ahead: written before the loader iterates this epoch (the Lightning callback, for a
        sampler whose order the epoch fixes): the loader's own iteration with the same order
        then writes nothing (a second list would start the epoch's progress over)."""
        if self.mount_root is None:
            return 0
        flat = _flatten(order)
        key = (len(flat), hash(tuple(flat)))
        if not ahead and key == self._written_ahead:
            self._written_ahead = None
            return self.hinted
        self._written_ahead = key if ahead else None
        self.hinted = _write_or_warn(self.mount_root, (self.paths[i] for i in flat))
        return self.hinted

    def __iter__(self) -> Iterator:
        order = list(iter(self.sampler))
        self.write_order(order)
        return iter(order)


def hint_loader(loader, paths: Sequence[str], mount_root: str | None = None):
    """Makes an existing DataLoader (shuffle=True or not, a DistributedSampler too) write hints
    at the start of each epoch, by wrapping the sampler inside its batch sampler. Returns the
    loader."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and hasattr(batch_sampler, "sampler"):
        if not isinstance(batch_sampler.sampler, HintedSampler):
            batch_sampler.sampler = HintedSampler(batch_sampler.sampler, paths, mount_root)
    else:
        raise ValueError("hint_loader needs a map-style DataLoader with a batch sampler; "
                         "use HintedSampler as its sampler instead")
    return loader
