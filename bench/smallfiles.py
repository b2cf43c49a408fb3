#!/usr/bin/env python3
"""Small files at bulk speed (issue 5): a PyTorch DataLoader (8 workers, shuffle, batch 64)
reads every object of a prefix, two epochs, against one emulator with 20 ms time to first byte.

Contenders (each a fresh mount / fresh client, same objects, side by side in one run):
  fluxfs-hints     fluxfs; the sampler's order goes to MOUNT/.fluxfs/prefetch (python/fluxfs_hints.py)
  fluxfs-hints-before the same with the binary FLUXFS_BEFORE_BIN (the parent of a change), so
                   a change to src/io or src/fs is measured against its parent in one run
  fluxfs-warmup    fluxfs; `fluxfs prefetch MOUNT/PREFIX` first (its time is reported apart)
  fluxfs-off       fluxfs --compose off, no hints (demand reads, memory cache for epoch 2)
  fluxfs-auto      fluxfs, no hints, --batch-misses 2000: concurrent demand misses of the 8
                   workers gathered for up to 2 ms and fetched with one compose (>= 4 of them)
  gcsfuse          gcsfuse v3.11.4 with its file cache and parallel downloads
  dataflux-map     the seed connector's DataFluxMapStyleDataset (STORAGE_EMULATOR_HOST)
  dataflux-iter    the seed connector's DataFluxIterableDataset
  pyclient         a plain Dataset: google-cloud-storage, one download per item
  bound            no DataLoader: a raw C client (bench/bound_client.c, libcurl multi),
                   batches of 32 composed, GET and deleted, 512 batches in flight, each
                   batch's steps pipelined (what compose batching can reach here)
  fluxfs-ro        fluxfs --read-only, no hints: the kernel opens files without requests
  fluxfs-ro-before the same with the binary FLUXFS_BEFORE_BIN (a build before a change)
  fluxfs-ro-hints  fluxfs --read-only with hints (sent by ioctls on MOUNT/.fluxfs)
  local            the same files on local disk (the cached-epoch reference)

Usage: bench/smallfiles.py [--runs 3] [--sets 5000x128K,1500x1M] [--only a,b] [--latency-ms 20]
Prints per contender: epoch 1 and 2 files/s (medians), requests by class, daemon RSS and CPU s,
and the DataLoader process tree's CPU s and largest RSS (os.wait4 of the loader); per epoch,
FUSE requests per file (fluxfs: MOUNT/.fluxfs/status, with and without the IOCTL CPython's
open() sends) and daemon CPU s per 1,000 files (/proc/PID/stat, fluxfs and gcsfuse).
A run during which another process dropped the kernel's caches (other benchmarks on the machine
do; /proc/vmstat drop_pagecache) is marked, and left out of the medians when clean runs exist
("clean runs" column). Nothing is asserted. Results: bench/results/smallfiles-*.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUCKET = "small"
WORKERS = 8
BATCH = 64

# The child that runs the DataLoader: prints one JSON line {"epochs": [s1, s2], "files": n}.
LOADER = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch
kind, arg, prefix, count = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
names = [f"{prefix}{i:08d}" for i in range(count)]

BUFFERING = int(os.environ.get("FLUXFS_BENCH_BUFFERING", "-1"))

class MountFiles(torch.utils.data.Dataset):
    def __len__(self): return len(names)
    def __getitem__(self, i):
        with open(os.path.join(arg, names[i]), "rb", buffering=BUFFERING) as f:
            return len(f.read())

class ClientFiles(torch.utils.data.Dataset):
    client = None
    def __len__(self): return len(names)
    def __getitem__(self, i):
        if ClientFiles.client is None:
            from google.cloud import storage
            from google.auth.credentials import AnonymousCredentials
            ClientFiles.client = storage.Client(project="bench", credentials=AnonymousCredentials())
        return len(ClientFiles.client.bucket(arg).blob(names[i]).download_as_bytes())

def collate(batch): return sum(len(b) if isinstance(b, (bytes, bytearray)) else b for b in batch)

if kind in ("mount", "hints"):
    ds = MountFiles()
elif kind == "pyclient":
    ds = ClientFiles()
elif kind == "dataflux-map":
    from dataflux_pytorch import dataflux_mapstyle_dataset as M
    ds = M.DataFluxMapStyleDataset(project_name="bench", bucket_name=arg,
                                   config=M.Config(prefix=prefix, num_processes=1))
elif kind == "dataflux-iter":
    from dataflux_pytorch import dataflux_iterable_dataset as I
    ds = I.DataFluxIterableDataset(project_name="bench", bucket_name=arg,
                                   config=I.Config(prefix=prefix, num_processes=1))
iterable = kind == "dataflux-iter"
loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=not iterable, num_workers=8,
                                     collate_fn=collate, persistent_workers=False)
if kind == "hints":
    from fluxfs_hints import hint_loader
    hint_loader(loader, [os.path.join(arg, n) for n in names], arg)
daemon_pid = os.environ.get("FLUXFS_BENCH_DAEMON_PID")
status_path = os.path.join(arg, ".fluxfs", "status") if kind in ("mount", "hints") else None

def daemon_cpu():
    # The daemon's processes: the --crash-restart supervisor and its serving child.
    if not daemon_pid:
        return None
    kids = open(f"/proc/{daemon_pid}/task/{daemon_pid}/children").read().split()
    ticks = 0
    for pid in [daemon_pid, *kids]:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")

def fuse_requests():
    # FUSE requests fluxfs answered, by kind (MOUNT/.fluxfs/status); None elsewhere.
    try:
        text = open(status_path).read()
    except (OSError, TypeError):
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k.startswith("fuse_op_") and not k.endswith("_errors"):
            out[k[8:]] = int(v)
    return out

def drops():
    with open("/proc/vmstat") as f:
        return [line for line in f if line.startswith("drop_")]

def emulator_bytes_out():
    # The emulator's bytes served so far (every epoch's share of the run's total is reported:
    # a run that repeats its cached epoch counts those epochs' fetches too).
    url = os.environ.get("FLUXFS_BENCH_EMULATOR_URL")
    if not url:
        return None
    import ssl, urllib.request
    ca = os.environ.get("FLUXFS_BENCH_EMULATOR_CA")
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    with urllib.request.urlopen(url + "/_emulator/stats", timeout=60, context=ctx) as resp:
        return json.loads(resp.read()).get("bytes_out", 0)

epoch_bytes_out = []  # bytes the emulator served from the start of each epoch to its end

# --trace: while epoch 1 runs, a thread samples the mount's status and the daemon's CPU every
# 50 ms into a file (JSON lines): how far the prefetcher runs ahead of the readers over time.
TRACE = os.environ.get("FLUXFS_BENCH_TRACE")
TRACE_KEYS = ("hints_done", "hints_opened", "hint_position", "files_prefetched", "composes",
              "temps_live", "fuse_opens", "kernel_stores", "files_already_cached",
              "cache_memory_hits", "buffers_reused", "buffers_fresh")

def trace_loop(stop, out):
    import threading
    t0 = time.monotonic()
    with open(out, "w") as f:
        while not stop.wait(0.05):
            row = {"t": round(time.monotonic() - t0, 3), "cpu": daemon_cpu()}
            try:
                for line in open(status_path).read().splitlines():
                    k, _, v = line.partition(": ")
                    if k in TRACE_KEYS:
                        row[k] = int(v)
            except (OSError, TypeError, ValueError):
                pass
            f.write(json.dumps(row) + "\n")

def run_epoch():
    c0, r0, b0 = daemon_cpu(), fuse_requests(), emulator_bytes_out()
    t0 = time.monotonic(); total = 0
    for b in loader: total += b
    seconds = time.monotonic() - t0
    c1, r1, b1 = daemon_cpu(), fuse_requests(), emulator_bytes_out()
    epoch_bytes_out.append(None if b0 is None else b1 - b0)
    return (seconds, total, None if c0 is None else c1 - c0,
            None if r0 is None else {k: r1[k] - r0[k] for k in r1 if r1[k] != r0.get(k, 0)})

# Epoch 1 (cold), then the cached epoch: on a machine where other processes drop the page
# cache (other benchmarks do), epochs are repeated, up to CACHED_TRIES, until one ran with no
# drop since the start of the epoch before it (which refilled the cache); cached_clean says
# whether one did.
tries = int(os.environ.get("FLUXFS_BENCH_CACHED_TRIES", "1"))
mark = drops()
if TRACE and status_path:
    import threading
    stop_trace = threading.Event()
    tracer = threading.Thread(target=trace_loop, args=(stop_trace, TRACE), daemon=True)
    tracer.start()
first = run_epoch()
if TRACE and status_path:
    stop_trace.set()
    tracer.join()
second, clean, attempts = None, False, 0
while attempts < tries and not clean:
    start = drops()
    second = run_epoch()
    attempts += 1
    clean = drops() == start == mark
    mark = start
epochs = [first[0], second[0]]
print(json.dumps({"epochs": epochs, "bytes": first[1], "files": count,
                  "epoch_daemon_cpu_s": [first[2], second[2]],
                  "epoch_fuse_requests": [first[3], second[3]],
                  "cached_attempts": attempts, "cached_clean": clean,
                  "epoch_bytes_out": epoch_bytes_out}))
"""


def run_loader(kind, arg, prefix, count, env=None):
    script = Path(tempfile.mkstemp(prefix="loader-", suffix=".py")[1])
    script.write_text(LOADER)
    outf = tempfile.TemporaryFile(mode="w+")
    errf = tempfile.TemporaryFile(mode="w+")
    try:
        proc = subprocess.Popen([sys.executable, str(script), str(REPO), kind, str(arg), prefix,
                                 str(count)], stdout=outf, stderr=errf,
                                env=dict(os.environ, **(env or {})))
        # wait4: the loader's own usage plus that of its reaped workers.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        script.unlink()
    outf.seek(0)
    errf.seek(0)
    out, err = outf.read(), errf.read()
    if proc.returncode != 0:
        raise RuntimeError(err[-3000:])
    r = json.loads(out.strip().splitlines()[-1])
    r["loader_cpu_s"] = usage.ru_utime + usage.ru_stime
    r["loader_maxrss_mib"] = usage.ru_maxrss / 1024
    return r


FLUXFS_ARGS: list[str] = []   # --fluxfs-args: extra flags for every fluxfs contender


def fluxfs_mount(emu, mnt, extra, name, binary=None):
    cmd = [str(binary or C.fluxfs_binary()), "-f", "--endpoint", emu.url, "--anonymous",
           *C.fluxfs_tls_args(emu), "--memory-limit", "4608M", "--memory-cache-size", "2G",
           *FLUXFS_ARGS, *extra, BUCKET, str(mnt)]
    return C.Mount(name, cmd, mnt)


def contender_fluxfs(emu, mnt, prefix, count, mode):
    extra = {"off": ["--compose", "off"], "auto": ["--batch-misses", "2000"],
             "ro": ["--read-only"], "ro-before": ["--read-only"],
             "ro-hints": ["--read-only"], "ro-hints-before": ["--read-only"]}.get(mode, [])
    # fluxfs-ro-before: the same mount with another build (FLUXFS_BEFORE_BIN), e.g. main
    # before a change, side by side in the same run.
    binary = os.environ.get("FLUXFS_BEFORE_BIN") if mode.endswith("-before") else None
    if mode.endswith("-before") and not binary:
        raise RuntimeError("set FLUXFS_BEFORE_BIN to the fluxfs binary to compare with")
    # FLUXFS_BENCH_ARGS_<MODE> (e.g. FLUXFS_BENCH_ARGS_HINTS_BEFORE): flags for one contender
    # only, to compare an option's values side by side in one run.
    extra = extra + shlex.split(os.environ.get(
        "FLUXFS_BENCH_ARGS_" + mode.upper().replace("-", "_"), ""))
    with fluxfs_mount(emu, mnt, extra, f"fluxfs-{mode}", binary) as m:
        warm_s = None
        if mode == "warmup":
            t0 = time.monotonic()
            subprocess.run([str(C.fluxfs_binary()), "prefetch", str(mnt / prefix)], check=True,
                           capture_output=True)
            warm_s = time.monotonic() - t0
        hinted = mode.removesuffix("-before") in ("hints", "ro-hints")
        r = run_loader("hints" if hinted else "mount", mnt, prefix, count,
                       env={"FLUXFS_BENCH_DAEMON_PID": str(m.proc.pid)})
        r["usage"] = m.usage()
        r["warmup_s"] = warm_s
    return r


def contender_gcsfuse(emu, mnt, prefix, count):
    cache = Path(tempfile.mkdtemp(prefix="gcsfuse-cache-"))
    cmd = [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
           "--anonymous-access", "--foreground", "--implicit-dirs", f"--cache-dir={cache}",
           "--file-cache-max-size-mb=-1", "--file-cache-enable-parallel-downloads",
           "--stat-cache-max-size-mb=-1", "--type-cache-max-size-mb=-1", BUCKET, str(mnt)]
    try:
        with C.Mount("gcsfuse", cmd, mnt, env=C.tls_env(emu)) as m:
            r = run_loader("mount", mnt, prefix, count,
                           env={"FLUXFS_BENCH_DAEMON_PID": str(m.proc.pid)})
            r["usage"] = m.usage()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return r


def contender_client(emu, kind, prefix, count):
    env = {"STORAGE_EMULATOR_HOST": emu.url, **C.client_tls_env(emu)}
    return run_loader(kind, BUCKET, prefix, count, env=env)


# The bound's client (bench/bound_client.c), built here on first use: libcurl's multi interface.
BOUND_SRC = REPO / "bench" / "bound_client.c"
# Objects per compose batch: 32 (the most Cloud Storage allows, fluxfs's --compose-max-objects
# default and the connector's MAX_NUM_OBJECTS_TO_COMPOSE), fewer only where the composite would
# pass 32 MiB (fluxfs's --compose-batch-max-bytes default; the connector's cap is 100 MB).
BOUND_BATCH = 32
BOUND_BATCH_MAX_BYTES = 32 << 20
# Batches in flight at once (= transfers = connections). 16, 32, 64, 128, 256 and 512 tried on
# all four sets (bench/README.md): 16-32 slower, 64-512 within the noise of a loaded machine,
# 512 the best median (and more than the batches of every set but 20,000 x 128 KiB: all at once).
BOUND_CONCURRENCY = int(os.environ.get("FLUXFS_BOUND_CONCURRENCY", "512"))


def bound_client() -> Path:
    """bench/bound_client.c compiled (cc -O2, libcurl) into bench/results/.bin, keyed by the
    source's hash so an edit rebuilds it; written under a temporary name and renamed, so
    concurrent benches never run a half-written binary."""
    import hashlib
    src = BOUND_SRC.read_bytes()
    out = REPO / "bench" / "results" / ".bin" / f"bound-client-{hashlib.sha1(src).hexdigest()[:12]}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcurl"], check=True,
                               capture_output=True, text=True).stdout.split()
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        subprocess.run(["cc", "-O2", "-o", str(tmp), str(BOUND_SRC), *flags], check=True)
        os.replace(tmp, out)
    return out


def contender_bound(emu, prefix, count, size):
    """The ceiling a mount could reach: no DataLoader, no FUSE, one C process on libcurl's multi
    interface (bench/bound_client.c). Batches of BOUND_BATCH objects (fewer if the composite
    would pass BOUND_BATCH_MAX_BYTES; 32 for both sets here), BOUND_CONCURRENCY batches in
    flight; each batch is compose -> GET the composite (alt=media) -> DELETE it, every step
    started the moment its predecessor finishes (pipelined: while some batches compose, others
    download or delete; no phase waits for a whole other phase). Composites go under the
    reserved prefix .fluxfs/compose/bound-PID-EPOCH/ (the listing ignores .fluxfs/). Each epoch
    times the whole client process (start to exit: steps 1-3 together, plus reading its batch
    list); the media bytes received must equal count * size."""
    binary = bound_client()
    per = max(1, min(BOUND_BATCH, BOUND_BATCH_MAX_BYTES // max(size, 1)))
    names = [f"{prefix}{i:08d}" for i in range(count)]
    batches = "".join("\t".join(names[i:i + per]) + "\n" for i in range(0, count, per))
    epochs, requests, cpu, rss = [], 0, 0.0, 0
    with tempfile.TemporaryFile("w+") as inf:
        inf.write(batches)
        for epoch in range(2):
            dest = f".fluxfs/compose/bound-{os.getpid()}-{epoch}/"
            inf.seek(0)
            with tempfile.TemporaryFile("w+") as outf, tempfile.TemporaryFile("w+") as errf:
                t0 = time.monotonic()
                proc = subprocess.Popen([str(binary), emu.url, BUCKET, dest,
                                         str(BOUND_CONCURRENCY)], stdin=inf, stdout=outf,
                                        stderr=errf, env=dict(os.environ,
                                                              **C.client_tls_env(emu)))
                _, status, usage = os.wait4(proc.pid, 0)  # its own CPU and peak RSS
                epochs.append(time.monotonic() - t0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                outf.seek(0)
                errf.seek(0)
                out, err = outf.read(), errf.read()
            if proc.returncode != 0:
                raise RuntimeError(f"bound client failed ({proc.returncode}): {err[-2000:]}")
            got, reqs = (int(x) for x in out.split())
            if got != count * size:
                raise RuntimeError(f"bound client got {got} bytes, expected {count * size}")
            requests += reqs
            cpu += usage.ru_utime + usage.ru_stime
            rss = max(rss, usage.ru_maxrss / 1024)
    return {"epochs": epochs, "bytes": count * size, "files": count, "batch": per,
            "concurrency": BOUND_CONCURRENCY, "client_requests": requests,
            "loader_cpu_s": cpu, "loader_maxrss_mib": rss}


def contender_local(prefix, count, size):
    d = Path(tempfile.mkdtemp(prefix="local-files-"))
    try:
        (d / prefix).mkdir(parents=True)
        blob = os.urandom(size)
        for i in range(count):
            (d / f"{prefix}{i:08d}").write_bytes(blob)
        return run_loader("mount", d, prefix, count)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def spread(values, digits=0):
    """'median (min-max)' of a list of numbers: the spread goes beside every median."""
    if not values:
        return ""
    if len(values) == 1:
        return C.fmt(values[0], digits)
    return (f"{C.fmt(C.median(values), digits)} ({C.fmt(min(values), digits)}-"
            f"{C.fmt(max(values), digits)})")


REFERENCES = ("dataflux-map", "fluxfs-hints-before", "fluxfs-ro-before", "bound")


def ratio_rows(results, sets):
    """Cold-epoch files/s of each contender over each reference present, run by run (a run's
    contenders ran one after another, so load drifts less within a run than across runs)."""
    rows = []
    for label, by_name in results.items():
        count = next(c for c, _, lab in sets if lab == label)
        for ref in REFERENCES:
            if ref not in by_name:
                continue
            for name, runs in by_name.items():
                if name == ref:
                    continue
                per = []
                for r, q in zip(runs, by_name[ref]):
                    if "epochs" in r and "epochs" in q:
                        per.append((count / r["epochs"][0]) / (count / q["epochs"][0]))
                if per:
                    rows.append([label, name, ref, " ".join(C.fmt(x, 2) for x in per),
                                 spread(per, 2)])
    return rows


def parse_sets(text):
    out = []
    for item in text.split(","):
        count, size = item.lower().split("x")
        mult = {"k": 1024, "m": 1 << 20}.get(size[-1], 1)
        out.append((int(count), int(size.rstrip("km")) * mult, item))
    return out


def temps_left(emu) -> int:
    """Compose temporaries in the bucket now (after the contender unmounted): none may be."""
    url = (f"{emu.url}/storage/v1/b/{BUCKET}/o?prefix="
           + urllib.parse.quote(".fluxfs/compose/", safe=""))
    return len((C.http_json("GET", url, emu=emu) or {}).get("items", []))


def rate_limited(stats: dict) -> dict:
    """The rate model's refusals so far (zeros when it is off)."""
    return {"writes": stats.get("rate_limited_writes", 0)
            + stats.get("rate_limited_object_writes", 0),
            "reads": stats.get("rate_limited_reads", 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sets", default="5000x128K,1500x1M")
    ap.add_argument("--only", default="fluxfs-hints,fluxfs-warmup,fluxfs-off,fluxfs-auto,gcsfuse,"
                    "dataflux-map,dataflux-iter,pyclient,bound,local")
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--fluxfs-args", default="",
                    help="extra flags for every fluxfs mount, e.g. '--prefetch-workers 32'")
    ap.add_argument("--cached-tries", type=int, default=1,
                    help="repeat the cached epoch up to N times until one ran with no page "
                         "cache drop by another process since the epoch before it")
    ap.add_argument("--buffering", type=int, default=-1,
                    help="open(..., buffering=N) in the datasets reading files (default -1: "
                         "CPython's default, whose isatty() costs a FUSE IOCTL per file; a size "
                         "> 1 skips that check)")
    ap.add_argument("--trace", default="",
                    help="a folder: each fluxfs run's epoch 1 samples the mount's status and the "
                         "daemon's CPU every 50 ms into FOLDER/SET-runN-CONTENDER.jsonl")
    ap.add_argument("--emulator-args", default="",
                    help="extra emulator flags, e.g. '--write-rate 20' (the rate model: object "
                         "writes per second per bucket before 429); the 429s each contender "
                         "got are reported")
    ap.add_argument("--tls", action="store_true",
                    help="HTTPS profile: the emulator serves TLS (throwaway CA)")
    args = ap.parse_args()
    FLUXFS_ARGS[:] = shlex.split(args.fluxfs_args)
    os.environ["FLUXFS_BENCH_BUFFERING"] = str(args.buffering)
    os.environ["FLUXFS_BENCH_CACHED_TRIES"] = str(args.cached_tries)
    only = args.only.split(",")
    sets = parse_sets(args.sets)
    populate = []
    for count, size, label in sets:
        populate += ["--populate", f"{BUCKET}/s{label}/:{count}:{size}:1"]
    emu = C.start_emulator(["--latency-ms", str(args.latency_ms), *populate,
                            *shlex.split(args.emulator_args)], tls=args.tls)
    print(f"profile: {C.profile(emu)}", flush=True)
    os.environ["FLUXFS_BENCH_EMULATOR_URL"] = emu.url  # the loader's per-epoch byte counts
    if emu.ca_file:
        os.environ["FLUXFS_BENCH_EMULATOR_CA"] = str(emu.ca_file)
    mnt = Path(tempfile.mkdtemp(prefix="smallfiles-mnt-"))
    results = {}
    try:
        for count, size, label in sets:
            prefix = f"s{label}/"
            for run in range(args.runs):
                for name in only:
                    if args.trace:
                        Path(args.trace).mkdir(parents=True, exist_ok=True)
                        os.environ["FLUXFS_BENCH_TRACE"] = str(
                            Path(args.trace) / f"{label}-run{run + 1}-{name}.jsonl")
                    C.reset_stats(emu)
                    refused_before = rate_limited(C.stats(emu))
                    C.drop_caches()
                    drops = C.cache_drops()
                    try:
                        if name.startswith("fluxfs-"):
                            r = contender_fluxfs(emu, mnt, prefix, count, name.split("-", 1)[1])
                        elif name == "gcsfuse":
                            if not C.gcsfuse_binary():
                                continue
                            r = contender_gcsfuse(emu, mnt, prefix, count)
                        elif name in ("dataflux-map", "dataflux-iter", "pyclient"):
                            r = contender_client(emu, name, prefix, count)
                        elif name == "bound":
                            r = contender_bound(emu, prefix, count, size)
                        elif name == "local":
                            r = contender_local(prefix, count, size)
                        else:
                            continue
                    except Exception as e:  # a contender that fails is reported, not fatal
                        r = {"error": str(e)[-800:]}
                    after = C.stats(emu)
                    r["requests"] = C.request_classes(after)
                    # 429s of the rate model (--emulator-args '--write-rate N'): its counters
                    # are not reset with the stats.
                    r["rate_limited"] = {k: v - refused_before[k]
                                         for k, v in rate_limited(after).items()}
                    r["temps_left"] = temps_left(emu)
                    # Another process dropped the page cache meanwhile: epoch 2 was not cached.
                    r["caches_dropped"] = C.cache_drops() != drops and not r.get("cached_clean")
                    # Bytes served per dataset pass: the run's total over the epochs it ran
                    # (the cold one and every cached attempt), and its costliest epoch.
                    if r.get("bytes") and r.get("epoch_bytes_out"):
                        per = [b for b in r["epoch_bytes_out"] if b is not None]
                        r["epochs_run"] = len(r["epoch_bytes_out"])
                        r["fetched_x_per_epoch"] = (r["requests"]["bytes_out"] / r["bytes"]
                                                    / r["epochs_run"])
                        r["fetched_x_max_epoch"] = max(per) / r["bytes"] if per else None
                    results.setdefault(label, {}).setdefault(name, []).append(r)
                    ep = r.get("epochs")
                    print(f"{label} run {run + 1} {name:14s} " +
                          (f"epoch1 {count / ep[0]:8.0f} files/s  epoch2 {count / ep[1]:8.0f} "
                           f"files/s  A {r['requests']['class_a']} B {r['requests']['class_b']}  "
                           f"daemon {r.get('usage', {}).get('vmhwm_mib')} MiB "
                           f"{r.get('usage', {}).get('cpu_s')} s  loader "
                           f"{r.get('loader_cpu_s', 0):.1f} s {r.get('loader_maxrss_mib', 0):.0f} MiB"
                           + (f"  bytes x{r['requests']['bytes_out'] / r['bytes']:.3f} in "
                              f"{r['epochs_run']} epochs (costliest x"
                              f"{r['fetched_x_max_epoch'] or 0:.3f})"
                              if r.get("epochs_run") else "")
                           + (f"  429s: {r['rate_limited']['writes']} writes "
                              f"{r['rate_limited']['reads']} reads, "
                              f"{r['requests']['requests'] * 1000 / count:.0f} requests/1k files "
                              f"(both epochs), {r['temps_left']} temporaries left"
                              if args.emulator_args else "")
                           + ("  [caches dropped by another process]" if r["caches_dropped"]
                              else "")
                           if ep else f"FAILED {r.get('error', '')[:300]}"), flush=True)
    finally:
        C.fuse_unmount(mnt)
        emu.close()
    rows = []
    for label, by_name in results.items():
        count = next(c for c, _, lab in sets if lab == label)
        for name, runs in by_name.items():
            ok = [r for r in runs if "epochs" in r]
            if not ok:
                rows.append([label, name, "failed"] + [""] * 16)
                continue
            # Medians over the runs whose caches nobody else dropped, when there are any.
            clean = [r for r in ok if not r.get("caches_dropped")]
            ok = clean or ok
            e1s = [count / r["epochs"][0] for r in ok]
            e2s = [count / r["epochs"][1] for r in ok]
            a = C.median([r["requests"]["class_a"] for r in ok])
            b = C.median([r["requests"]["class_b"] for r in ok])
            rss = C.median([r.get("usage", {}).get("vmhwm_mib") or 0 for r in ok])
            cpu = C.median([r.get("usage", {}).get("cpu_s") or 0 for r in ok])
            lcpu = C.median([r.get("loader_cpu_s") or 0 for r in ok])
            lrss = C.median([r.get("loader_maxrss_mib") or 0 for r in ok])
            warm = [r["warmup_s"] for r in ok if r.get("warmup_s") is not None]
            per_file = []
            for e in (0, 1):
                q = [sum(r["epoch_fuse_requests"][e].values()) / count for r in ok
                     if r.get("epoch_fuse_requests") and r["epoch_fuse_requests"][e] is not None]
                q_no_ioctl = [sum(v for k, v in r["epoch_fuse_requests"][e].items()
                                  if k != "ioctl") / count for r in ok
                              if r.get("epoch_fuse_requests") and
                              r["epoch_fuse_requests"][e] is not None]
                c = [r["epoch_daemon_cpu_s"][e] * 1000 / count for r in ok
                     if r.get("epoch_daemon_cpu_s") and r["epoch_daemon_cpu_s"][e] is not None]
                per_file += [C.fmt(C.median(q), 2) if q else "",
                             C.fmt(C.median(q_no_ioctl), 2) if q_no_ioctl else "",
                             C.fmt(C.median(c), 3) if c else ""]
            # List-price dollars of the run's requests per 1,000 files of the set (include/
            # fluxfs/gcs.h's prices; the emulator runs without soft delete, so temporaries
            # add nothing here: see docs/prefetch.md for what soft delete adds).
            dollars = (a * 0.005 + b * 0.0004) / 1000 / count * 1000
            rows.append([label, name, spread(e1s), spread(e2s), C.fmt(a, 0), C.fmt(b, 0),
                         f"{dollars:.5f}",
                         C.fmt(rss, 0), C.fmt(cpu, 1), C.fmt(lcpu, 1), C.fmt(lrss, 0),
                         C.fmt(C.median(warm), 2) if warm else "", f"{len(clean)}/{len(runs)}",
                         *per_file])
    print(C.table(["set", "contender", "epoch1 files/s (min-max)", "epoch2 files/s (min-max)",
                   "class A",
                   "class B", "$ per 1k files (requests, list prices)", "daemon RSS MiB", "daemon CPU s", "loader CPU s",
                   "loader max RSS MiB", "warm-up s", "clean runs", "e1 FUSE req/file",
                   "e1 req/file w/o IOCTL", "e1 daemon CPU s/1k files", "e2 FUSE req/file",
                   "e2 req/file w/o IOCTL", "e2 daemon CPU s/1k files"], rows))
    ratios = ratio_rows(results, sets)
    if ratios:
        print("cold-epoch ratios, per run (each run's contenders ran back to back):")
        print(C.table(["set", "contender", "reference", "per run", "median (min-max)"], ratios))
    path = C.write_results("smallfiles", {"args": vars(args), "results": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
