#!/usr/bin/env python3
"""Order hints under DDP (issue 10): RANKS processes on one mount, each a DataLoader (WORKERS
workers, batch 64) over its DistributedSampler share of COUNT objects of SIZE bytes, at 20 ms
time to first byte, one cold epoch (then a second from the page cache).

Contenders (each a fresh fluxfs mount, kernel caches dropped, the same objects):
  per-rank   every rank wraps its DistributedSampler in fluxfs_hints.HintedSampler: one hint
             list per rank process on the mount (how the package is meant to be used)
  none       no hints (demand reads only)
  single     one process with hints: rank 0 writes all ranks' orders interleaved (r0[0], r1[0],
             ..., r0[1], ...) as a single list; the other ranks write nothing (the workaround
             before per-process lists, and the figure per-rank lists are measured against)

The ranks start together (a file barrier); an epoch's time is from the start to the last rank
done; files/s = COUNT / that. Per contender: files/s of both epochs, the emulator's requests
(class A/B) and bytes sent per file, the daemon's prefetch counters and CPU seconds. Ratios:
per-rank / none (target >= 3) and per-rank / single (target >= 0.9). Timings are only
meaningful on a quiet machine: the load average before each run is printed and stored; the
request and byte counts do not depend on it. Nothing is asserted. Results:
bench/results/ddp-*.json.

Usage: bench/ddp.py [--runs 3] [--count 4000] [--size 64K] [--ranks 4] [--workers 2]
                    [--latency-ms 20] [--only per-rank,none,single]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUCKET = "ddp"
PREFIX = "d/"

# One rank: prints {"epochs": [start->done per epoch (s)], "files": n} after both epochs.
RANK = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from fluxfs_hints import HintedSampler, write_hints, find_mount_root

repo, mount, mode, rank, ranks, workers, count, sync = sys.argv[1:9]
rank, ranks, workers, count = int(rank), int(ranks), int(workers), int(count)
paths = [os.path.join(mount, "d", f"{i:08d}") for i in range(count)]

class Files(Dataset):
    def __len__(self): return count
    def __getitem__(self, i):
        with open(paths[i], "rb") as f:
            return len(f.read())

def barrier(name):
    open(os.path.join(sync, f"{name}.{rank}"), "w").close()
    while not os.path.exists(os.path.join(sync, name)):
        time.sleep(0.002)

inner = DistributedSampler(Files(), num_replicas=ranks, rank=rank, seed=1)
sampler = HintedSampler(inner, paths) if mode == "per-rank" else inner
loader = DataLoader(Files(), sampler=sampler, batch_size=64, num_workers=workers,
                    collate_fn=sum)
epochs = []
for epoch in range(2):
    sampler.set_epoch(epoch)
    if mode == "single" and rank == 0:
        orders = []
        for r in range(ranks):
            s = DistributedSampler(Files(), num_replicas=ranks, rank=r, seed=1)
            s.set_epoch(epoch)
            orders.append(list(s))
        merged = [o[i] for i in range(max(map(len, orders))) for o in orders if i < len(o)]
    barrier(f"go{epoch}")
    t0 = time.monotonic()
    if mode == "single" and rank == 0:
        write_hints(find_mount_root(paths[0]), (paths[i] for i in merged))
    total = sum(b for b in loader)
    epochs.append(time.monotonic() - t0)
    barrier(f"done{epoch}")
print(json.dumps({"epochs": epochs, "bytes": total}))
"""


def run_ranks(mnt, mode, ranks, workers, count):
    sync = Path(tempfile.mkdtemp(prefix="ddp-sync-"))
    script = sync / "rank.py"
    script.write_text(RANK)
    procs = [subprocess.Popen([sys.executable, str(script), str(REPO), str(mnt), mode, str(r),
                               str(ranks), str(workers), str(count), str(sync)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(ranks)]
    walls = []
    try:
        for epoch in range(2):
            for stage in ("go", "done"):
                while not all((sync / f"{stage}{epoch}.{r}").exists() for r in range(ranks)):
                    for p in procs:
                        if p.poll() is not None and p.returncode != 0:
                            raise RuntimeError(p.stderr.read()[-3000:])
                    time.sleep(0.002)
                if stage == "go":
                    t0 = time.monotonic()
                else:
                    walls.append(time.monotonic() - t0)
                (sync / f"{stage}{epoch}").touch()
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(err[-3000:])
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in sync.iterdir():
            f.unlink()
        sync.rmdir()
    return {"epochs": walls, "rank_epochs": [o["epochs"] for o in outs],
            "bytes": sum(o["bytes"] for o in outs)}


def status(mnt):
    text = (Path(mnt) / ".fluxfs" / "status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines())}


def contender(emu, mnt, mode, args):
    cmd = [str(C.fluxfs_binary()), "-f", "--endpoint", emu.url, "--anonymous",
           "--memory-limit", "4608M", "--memory-cache-size", "2G", BUCKET, str(mnt)]
    with C.Mount(f"fluxfs-{mode}", cmd, mnt) as m:
        r = run_ranks(mnt, mode, args.ranks, args.workers, args.count)
        s = status(mnt)
        r["prefetch"] = {k: int(s[k]) for k in ("files_prefetched", "bytes_prefetched",
                                                "composes", "direct_gets", "hint_lists_dropped",
                                                "cache_memory_hits", "cache_misses",
                                                "cache_pending_waits")}
        r["usage"] = m.usage()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--size", default="64K")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--only", default="per-rank,none,single")
    args = ap.parse_args()
    size = int(args.size.rstrip("KkMm")) * {"k": 1024, "m": 1 << 20}.get(args.size[-1].lower(), 1)
    emu = C.start_emulator(["--latency-ms", str(args.latency_ms), "--populate",
                            f"{BUCKET}/{PREFIX}:{args.count}:{size}:1"])
    mnt = Path(tempfile.mkdtemp(prefix="ddp-mnt-"))
    results: dict[str, list] = {}
    try:
        for run in range(args.runs):
            for mode in args.only.split(","):
                C.reset_stats(emu)
                C.drop_caches()
                load = os.getloadavg()
                try:
                    r = contender(emu, mnt, mode, args)
                    r["requests"] = C.request_classes(C.stats(emu))
                except Exception as e:  # reported, the others go on
                    r = {"error": str(e)[-2000:]}
                    C.fuse_unmount(mnt)
                r["loadavg_before"] = load
                results.setdefault(mode, []).append(r)
                if "error" in r:
                    print(f"run {run + 1} {mode:9s} ERROR {r['error'][-500:]}", flush=True)
                    continue
                q = r["requests"]
                print(f"run {run + 1} {mode:9s} epoch1 {args.count / r['epochs'][0]:7.0f} files/s"
                      f"  epoch2 {args.count / r['epochs'][1]:7.0f} files/s  A {q['class_a']}"
                      f" B {q['class_b']}  {q['bytes_out'] / args.count / size:.3f} x bytes/file"
                      f"  prefetched {r['prefetch']['files_prefetched']}"
                      f"  daemon CPU {r['usage']['cpu_s']} s  load {load[0]:.2f}", flush=True)
    finally:
        C.fuse_unmount(mnt)
        emu.close()
    rows, e1 = [], {}
    for mode, runs in results.items():
        ok = [r for r in runs if "epochs" in r]
        if not ok:
            rows.append([mode, "failed"] + [""] * 7)
            continue
        e1[mode] = C.median([args.count / r["epochs"][0] for r in ok])
        rows.append([mode, C.fmt(e1[mode], 0),
                     C.fmt(C.median([args.count / r["epochs"][1] for r in ok]), 0),
                     C.fmt(C.median([r["requests"]["class_a"] for r in ok]), 0),
                     C.fmt(C.median([r["requests"]["class_b"] for r in ok]), 0),
                     C.fmt(C.median([r["requests"]["bytes_out"] / args.count / size
                                     for r in ok]), 3),
                     C.fmt(C.median([r["prefetch"]["files_prefetched"] for r in ok]), 0),
                     C.fmt(C.median([r["usage"]["cpu_s"] or 0 for r in ok]), 2),
                     C.fmt(C.median([r["loadavg_before"][0] for r in ok]), 2)])
    print(f"{args.ranks} ranks x {args.workers} workers, {args.count} x {args.size}, "
          f"{args.latency_ms} ms; medians of {args.runs} runs; {C.machine_line()}")
    print(C.table(["contender", "epoch1 files/s", "epoch2 files/s", "class A", "class B",
                   "bytes sent / dataset", "files prefetched", "daemon CPU s", "load before"],
                  rows))
    ratios = {}
    if "per-rank" in e1 and "none" in e1 and e1["none"]:
        ratios["per_rank_over_none"] = e1["per-rank"] / e1["none"]
    if "per-rank" in e1 and "single" in e1 and e1["single"]:
        ratios["per_rank_over_single"] = e1["per-rank"] / e1["single"]
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    path = C.write_results("ddp", {"args": vars(args), "results": results, "ratios": ratios})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
