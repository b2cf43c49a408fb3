#!/usr/bin/env python3
"""What an epoch over small files costs, by read strategy and bucket setting (issue 21).

One emulator holds one bucket per setting, each populated with the same N synthetic objects
(--populate, default 2,000 x 128 KiB) and then given its setting by buckets.patch:

  default      Cloud Storage's default for a new bucket: soft delete 7 days
  soft-off     soft delete 0 (off)
  versioning   versioning on (soft delete 7 days too, as on a new bucket)
  nearline     default storage class NEARLINE (soft delete 7 days); the populated objects
               stay STANDARD, fluxfs's temporaries are created STANDARD whatever the default

Strategies (each a fresh fluxfs mount; a reader pool of --readers threads reads every file once,
in name order):

  off            no hints, --compose off: a demand GET per file (the kernel's lookups first)
  hints-get      the order written to MOUNT/.fluxfs/prefetch, --compose off: the prefetcher
                 fetches ahead with plain whole-object GETs
  hints-compose  the same with --compose on: batches of up to 32 objects composed into a
                 temporary, one GET, one delete (the temporary is what soft delete keeps)
  auto           hints with --compose auto (the default): the mount's own cost decision

Other contenders, where they run here (each skipped with a note when it is not installed:
bench/setup_contenders.sh installs them):

  gcsfuse        gcsfuse (bench/setup_contenders.sh's build) with the flags bench/smallfiles.py
                 gives it (file cache, parallel downloads, unlimited stat and type caches), read
                 by the same reader pool
  connector-map  the Cloud Storage Connector for PyTorch (gcs-torch-dataflux), its
                 DataFluxMapStyleDataset under a DataLoader (batches of 64, 4 workers): each
                 batch is one __getitems__, which composes objects up to its 100 MB cap into a
                 temporary, reads it and deletes it (the connector's defaults)
  connector-iter its DataFluxIterableDataset, the same compose download per batch

fluxfs has no range-GET batch mode (a batch is either a compose or one GET per object), so none
is measured. Per setting, a checkpoint save is measured too: --ckpt-shards files of
--ckpt-shard-mib written under ckpt.tmp/ and the directory renamed to ckpt-1/ (what Lightning
and DCP do): on a flat bucket the rename is one copy and one delete per shard, so soft delete
keeps the checkpoint's bytes a second time.

Per cell, from the emulator's ledger (GET /_emulator/bill) before the mount and after the
unmount: operations by class, their list-price dollars, bytes left soft-deleted and noncurrent
(the ledger's storage_bytes_now), and the storage those commit to: soft-deleted bytes for the
bucket's soft delete period, noncurrent bytes per 30 days kept (until a lifecycle rule deletes
them), a soft-deleted NEARLINE/COLDLINE/ARCHIVE version at least for its class's minimum
duration (30/90/365 days: the early deletion the ledger would charge at its hard delete).
Beside it, fluxfs's own estimate from MOUNT/.fluxfs/status (cost_*), read before the
unmount. Also wall seconds and the daemon's CPU seconds per 1,000 files (not the point here:
the emulator has no latency unless --latency-ms). Nothing is asserted.

The table ends with a projection of the issue's epoch over --project-files (default 1,000,000)
objects of the same size: requests scale per file, so each measured cell's operations by class,
bytes left soft-deleted/noncurrent and dollars are multiplied by project-files / files (the
listing's class A calls scale per 1,000 names too). It is a projection from the N files
measured, not a run; the title says so.

Usage: bench/cost.py [--files 2000] [--size 128K] [--settings default,soft-off,...]
                     [--strategies off,hints-get,...,gcsfuse,connector-map]
                     [--ckpt-shards 8] [--ckpt-shard-mib 8] [--project-files 1000000]
       bench/cost.py --files 1000000 --readers 32      # the issue's 1M-object epoch, measured
Results: bench/results/cost-*.json and the table on stdout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C  # noqa: E402

WEEK = 7 * 86400
MONTH = 30 * 86400
SETTINGS = {
    "default": {},
    "soft-off": {"softDeletePolicy": {"retentionDurationSeconds": "0"}},
    "versioning": {"versioning": {"enabled": True}},
    "nearline": {"storageClass": "NEARLINE"},
}
STRATEGIES = {
    "off": (["--compose", "off"], False),
    "hints-get": (["--compose", "off"], True),
    "hints-compose": (["--compose", "on"], True),
    "auto": ([], True),
}
# Contenders other than fluxfs: name -> whether it runs here (a reason when not).
OTHERS = ("gcsfuse", "connector-map", "connector-iter")
PREFIX = "d/"
# Minimum storage durations: a version gone sooner is billed the rest (early deletion).
MINIMUM_S = {"NEARLINE": 30 * 86400, "COLDLINE": 90 * 86400, "ARCHIVE": 365 * 86400}


def wait_status(mnt: Path, predicate, what: str, limit_s: float) -> dict:
    deadline = time.monotonic() + limit_s
    while True:
        s = C.read_status(mnt)
        if predicate(s):
            return s
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}: {s}")
        time.sleep(0.05)


def settled(s: dict) -> bool:
    return (int(s.get("temps_live", 0)) == 0 and int(s.get("cost_temporaries_live", 0)) == 0
            and int(s.get("open_writers", 0)) == 0)


def bucket_name(setting: str) -> str:
    return f"cost-{setting}"


def bill(emu) -> dict:
    return C.http_json("GET", emu.url + "/_emulator/bill", emu=emu)


def bill_delta(before: dict, after: dict) -> dict:
    """Operations by class and bytes now by state (summed over classes) between two bills, and
    the storage price per GiB-month of each class."""
    ops = {k: after["operations"][k] - before["operations"][k] for k in ("A", "B", "free")}
    by_state = {}
    for state in ("live", "soft_deleted", "noncurrent"):
        by_state[state] = {
            cls: after["storage_bytes_now"][cls][state] - before["storage_bytes_now"][cls][state]
            for cls in after["storage_bytes_now"]}
    early = {cls: after["early_deletion_gib_seconds"][cls] -
             before["early_deletion_gib_seconds"][cls]
             for cls in after["early_deletion_gib_seconds"]}
    return {"ops": ops, "bytes_now": by_state, "early_gib_seconds": early,
            "prices": after["prices"]}


def dollars(delta: dict, soft_delete_s: int) -> dict:
    prices = delta["prices"]
    per_gib_month = prices["storage_per_gib_month"]
    op = (delta["ops"]["A"] * prices["operations_per_1000"]["A"] +
          delta["ops"]["B"] * prices["operations_per_1000"]["B"]) / 1000.0
    gib = float(1 << 30)
    # A soft-deleted version is billed for the period, and at least for its class's minimum
    # duration (the ledger charges that early deletion only at the hard delete, a week on).
    soft = sum(b / gib * per_gib_month[cls] * max(soft_delete_s, MINIMUM_S.get(cls, 0)) / MONTH
               for cls, b in delta["bytes_now"]["soft_deleted"].items())
    noncurrent = sum(b / gib * per_gib_month[cls]
                     for cls, b in delta["bytes_now"]["noncurrent"].items())
    early = sum(gs * per_gib_month[cls] / MONTH for cls, gs in delta["early_gib_seconds"].items())
    return {"operations": op, "soft_deleted_commitment": soft,
            "noncurrent_per_month": noncurrent, "early_deletion": early,
            "total": op + soft + noncurrent + early}


def fluxfs_cmd(emu, bucket: str, mnt: Path, extra: list[str]) -> list[str]:
    return [str(C.fluxfs_binary()), "-f", "--endpoint", emu.url, "--anonymous",
            *C.fluxfs_tls_args(emu), *extra, bucket, str(mnt)]


def read_all(mnt: Path, names: list[str], readers: int) -> int:
    def one(name):
        with open(mnt / name, "rb") as f:
            return len(f.read())
    with concurrent.futures.ThreadPoolExecutor(readers) as pool:
        return sum(pool.map(one, names, chunksize=16))


def epoch(emu, setting: str, strategy: str, names: list[str], args, mnt: Path) -> dict:
    extra, hinted = STRATEGIES[strategy]
    before = bill(emu)
    with C.Mount(f"fluxfs-{strategy}", fluxfs_cmd(emu, bucket_name(setting), mnt, extra),
                 mnt) as m:
        t0 = time.monotonic()
        if hinted:
            (mnt / ".fluxfs" / "prefetch").write_text("".join(n + "\n" for n in names))
        got = read_all(mnt, names, args.readers)
        wall = time.monotonic() - t0
        if got != len(names) * args.size_bytes:
            raise RuntimeError(f"read {got} bytes, expected {len(names) * args.size_bytes}")
        status = wait_status(mnt, settled, "the temporaries' deletes", 600)
        usage = m.usage()
    after = bill(emu)
    return {"kind": "epoch", "wall_s": wall, "daemon_cpu_s": usage["cpu_s"], "status": status,
            "ledger": bill_delta(before, after)}


def other_available(name: str) -> str | None:
    """None when the contender runs here, else why not."""
    if name == "gcsfuse":
        return None if C.gcsfuse_binary() else "gcsfuse not built (bench/setup_contenders.sh)"
    import importlib.util
    if importlib.util.find_spec("dataflux_pytorch") is None or \
            importlib.util.find_spec("torch") is None:
        return "gcs-torch-dataflux or torch not installed (bench/setup_contenders.sh)"
    return None


def epoch_gcsfuse(emu, setting: str, names: list[str], args, mnt: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="gcsfuse-cache-"))
    cmd = [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
           "--anonymous-access", "--foreground", "--implicit-dirs", f"--cache-dir={cache}",
           "--file-cache-max-size-mb=-1", "--file-cache-enable-parallel-downloads",
           "--stat-cache-max-size-mb=-1", "--type-cache-max-size-mb=-1",
           bucket_name(setting), str(mnt)]
    before = bill(emu)
    try:
        with C.Mount("gcsfuse", cmd, mnt, env=C.tls_env(emu)) as m:
            t0 = time.monotonic()
            got = read_all(mnt, names, args.readers)
            wall = time.monotonic() - t0
            usage = m.usage()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if got != len(names) * args.size_bytes:
        raise RuntimeError(f"read {got} bytes, expected {len(names) * args.size_bytes}")
    after = bill(emu)
    return {"kind": "epoch", "wall_s": wall, "daemon_cpu_s": usage["cpu_s"], "status": {},
            "ledger": bill_delta(before, after)}


# One epoch of the connector's dataset under a DataLoader, in a process of its own (torch).
CONNECTOR = r"""
import json, sys, time
import torch
kind, bucket, prefix, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "connector-map":
    from dataflux_pytorch import dataflux_mapstyle_dataset as M
    ds = M.DataFluxMapStyleDataset(project_name="bench", bucket_name=bucket,
                                   config=M.Config(prefix=prefix, num_processes=1))
else:
    from dataflux_pytorch import dataflux_iterable_dataset as I
    ds = I.DataFluxIterableDataset(project_name="bench", bucket_name=bucket,
                                   config=I.Config(prefix=prefix, num_processes=1))
def collate(batch): return sum(len(b) for b in batch)
loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=workers, collate_fn=collate,
                                     shuffle=False)
t0 = time.monotonic(); total = 0
for b in loader: total += b
print(json.dumps({"bytes": total, "wall_s": time.monotonic() - t0}))
"""


def epoch_connector(emu, setting: str, kind: str, names: list[str], args) -> dict:
    env = dict(os.environ, STORAGE_EMULATOR_HOST=emu.url, **C.client_tls_env(emu))
    before = bill(emu)
    proc = subprocess.Popen([sys.executable, "-c", CONNECTOR, kind, bucket_name(setting),
                             PREFIX, str(args.connector_workers)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} failed: {err[-3000:]}")
    r = json.loads(out.strip().splitlines()[-1])
    if r["bytes"] != len(names) * args.size_bytes:
        raise RuntimeError(f"{kind} read {r['bytes']} bytes, expected "
                           f"{len(names) * args.size_bytes}")
    after = bill(emu)
    return {"kind": "epoch", "wall_s": r["wall_s"], "daemon_cpu_s": None, "status": {},
            "ledger": bill_delta(before, after)}


def checkpoint(emu, setting: str, args, mnt: Path) -> dict:
    before = bill(emu)
    shard = os.urandom(1 << 20) * args.ckpt_shard_mib
    with C.Mount("fluxfs-ckpt", fluxfs_cmd(emu, bucket_name(setting), mnt, []), mnt) as m:
        t0 = time.monotonic()
        tmp = mnt / "ckpt.tmp"
        tmp.mkdir()
        for i in range(args.ckpt_shards):
            (tmp / f"shard-{i:03d}").write_bytes(shard)
        os.rename(tmp, mnt / "ckpt-1")
        wall = time.monotonic() - t0
        status = wait_status(mnt, settled, "the checkpoint's uploads", 600)
        usage = m.usage()
    after = bill(emu)
    return {"kind": "checkpoint", "wall_s": wall, "daemon_cpu_s": usage["cpu_s"],
            "status": status, "ledger": bill_delta(before, after)}


def soft_delete_of(emu, setting: str) -> int:
    b = C.http_json("GET", f"{emu.url}/storage/v1/b/{bucket_name(setting)}", emu=emu)
    return int(b.get("softDeletePolicy", {}).get("retentionDurationSeconds", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", default="128K")
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--strategies", default=",".join((*STRATEGIES, *OTHERS)),
                    help="fluxfs strategies and other contenders (those not installed here "
                    "are skipped with a note)")
    ap.add_argument("--connector-workers", type=int, default=4,
                    help="DataLoader workers of the connector contenders")
    ap.add_argument("--project-files", type=int, default=1_000_000,
                    help="the epoch the table projects to from the files measured")
    ap.add_argument("--readers", type=int, default=16, help="reader threads")
    ap.add_argument("--ckpt-shards", type=int, default=8)
    ap.add_argument("--ckpt-shard-mib", type=int, default=8)
    ap.add_argument("--no-checkpoint", action="store_true")
    ap.add_argument("--latency-ms", type=int, default=0)
    args = ap.parse_args()
    args.size_bytes = C.parse_size(args.size)
    settings = [s for s in args.settings.split(",") if s]
    strategies = [s for s in args.strategies.split(",") if s]
    for s in settings:
        if s not in SETTINGS:
            sys.exit(f"unknown setting {s}: {', '.join(SETTINGS)}")
    skipped = {}
    for s in strategies:
        if s not in STRATEGIES and s not in OTHERS:
            sys.exit(f"unknown strategy {s}: {', '.join((*STRATEGIES, *OTHERS))}")
        if s in OTHERS and other_available(s):
            skipped[s] = other_available(s)
    strategies = [s for s in strategies if s not in skipped]
    if C.fluxfs_binary() is None:
        sys.exit("fluxfs not found: build it or set FLUXFS_BIN / FLUXFS_BUILD")

    # New buckets get Cloud Storage's default soft delete (tests/lib/emulator.py turns it off
    # unless asked).
    emu_args = ["--latency-ms", str(args.latency_ms), "--soft-delete-seconds", str(WEEK)]
    for s in settings:
        emu_args += ["--populate", f"{bucket_name(s)}/{PREFIX}:{args.files}:{args.size}"]
    names = [f"{PREFIX}{i:08d}" for i in range(args.files)]
    mnt = Path(tempfile.mkdtemp(prefix="fluxfs-cost-mnt-"))
    emu = C.start_emulator(emu_args)
    cells = []
    try:
        for s in settings:
            if SETTINGS[s]:
                C.http_json("PATCH", f"{emu.url}/storage/v1/b/{bucket_name(s)}", SETTINGS[s],
                            emu=emu)
            soft_s = soft_delete_of(emu, s)
            todo = []
            for st in strategies:
                if st == "gcsfuse":
                    todo.append((st, lambda: epoch_gcsfuse(emu, s, names, args, mnt)))
                elif st in OTHERS:
                    todo.append((st, lambda st=st: epoch_connector(emu, s, st, names, args)))
                else:
                    todo.append((st, lambda st=st: epoch(emu, s, st, names, args, mnt)))
            if not args.no_checkpoint:
                todo.append(("checkpoint", lambda: checkpoint(emu, s, args, mnt)))
            for name, fn in todo:
                print(f"{s} / {name} ...", file=sys.stderr, flush=True)
                r = fn()
                r.update(setting=s, strategy=name, soft_delete_s=soft_s,
                         dollars=dollars(r["ledger"], soft_s), loadavg=os.getloadavg())
                cells.append(r)
    finally:
        emu.stop()
        C.fuse_unmount(mnt)

    gib = float(1 << 30)
    rows = []
    for r in cells:
        d, led, st = r["dollars"], r["ledger"], r["status"]
        soft_b = sum(led["bytes_now"]["soft_deleted"].values())
        nonc_b = sum(led["bytes_now"]["noncurrent"].values())
        per_k = 1000.0 / args.files if r["kind"] == "epoch" else None
        rows.append([
            r["setting"], r["strategy"], led["ops"]["A"], led["ops"]["B"], led["ops"]["free"],
            f"{soft_b / gib:.4f}", f"{nonc_b / gib:.4f}",
            f"{d['operations']:.5f}", f"{d['total'] - d['operations']:.5f}",
            f"{d['total']:.5f}",
            f"{d['total'] * per_k:.6f}" if per_k else "",
            f"{st.get('cost_class_a_ops')}/{st.get('cost_class_b_ops')}/{st.get('cost_free_ops')}"
            if st else "",
            f"{float(st.get('cost_dollars', 0)):.5f}" if st else "",
            f"{r['wall_s']:.1f}",
            f"{r['daemon_cpu_s'] * per_k:.3f}" if per_k and r["daemon_cpu_s"] is not None else "",
        ])
    headers = ["setting", "strategy", "A ops", "B ops", "free", "soft-del GiB left",
               "noncurrent GiB left", "ops $", "storage $", "total $", "$ per 1k files",
               "fluxfs A/B/free", "fluxfs $", "wall s", "daemon CPU s/1k files"]
    print(f"\nbench/cost.py: {args.files:,} objects x {args.size}, readers {args.readers}, "
          f"latency {args.latency_ms} ms; checkpoint {args.ckpt_shards} x "
          f"{args.ckpt_shard_mib} MiB; {C.machine_line()}; load at end "
          f"{os.getloadavg()[0]:.2f}")
    print("storage $: soft-deleted bytes for the bucket's soft delete period (at least the "
          "class's minimum duration) + noncurrent bytes for 30 days (list prices, the ledger's "
          "table)\n")
    print(C.table(headers, rows))
    # The projection: every epoch cell scaled per file to --project-files.
    scale = args.project_files / args.files
    prows = []
    for r in cells:
        if r["kind"] != "epoch":
            continue
        d, led = r["dollars"], r["ledger"]
        soft_b = sum(led["bytes_now"]["soft_deleted"].values())
        prows.append([
            r["setting"], r["strategy"], f"{led['ops']['A'] * scale:,.0f}",
            f"{led['ops']['B'] * scale:,.0f}", f"{soft_b * scale / gib:,.1f}",
            f"{d['operations'] * scale:,.2f}", f"{(d['total'] - d['operations']) * scale:,.2f}",
            f"{d['total'] * scale:,.2f}"])
    if prows:
        print(f"\nProjection to an epoch over {args.project_files:,} x {args.size} objects, "
              f"from the {args.files:,} files measured (requests, bytes left and dollars scaled "
              f"per file by {scale:,.0f}; not a run)\n")
        print(C.table(["setting", "contender", "A ops", "B ops", "soft-del GiB left", "ops $",
                       "storage $", "total $"], prows))
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    for r in cells:
        if r["strategy"] == "auto":
            print(f"auto on {r['setting']}: compose {r['status'].get('compose_decision')}")
    path = C.write_results("cost", {"args": vars(args), "cells": cells, "skipped": skipped})
    print(f"\nraw: {path}")


if __name__ == "__main__":
    main()
