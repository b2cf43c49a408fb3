#!/usr/bin/env python3
"""Dataset writes (issue 11): many small files created through the mount.

One emulator (--latency-ms 20, objects in memory) serves every contender; each measurement
runs on a fresh mount, contenders interleaved run by run (bench/common.run_interleaved):

  cp-r        `cp -r SRC MNT/ds/copy-K` of --files files of --file-kib KiB (a local directory
              written once, page cache warm): files/s, emulator requests per file
  1-writer    one thread creating --per-writer x 16 files in MNT/ds/one-K (an existing
              directory with one object in it, not listed yet): files/s, requests per file
  16-writers  16 threads creating --per-writer files each in one such directory: files/s,
              requests per file, and the speed-up over 1-writer (issue 11 wants >= 6x: writers
              into one directory must not be serialized by round trips under the kernel's
              directory lock)

Contenders: fluxfs (build/src/main/fluxfs) and gcsfuse (build/tools/bin/gcsfuse v3.11.4, built
by `scripts/setup --bench`; mounted with --implicit-dirs). Requests come from the emulator's
stats (reset before each operation, after mounting); a contender that is missing is reported
as such.

  bench/dataset_write.py [--runs 3] [--files 4000] [--file-kib 100] [--per-writer 64]
                         [--only fluxfs,gcsfuse] [--latency-ms 20]

Raw results: bench/results/dataset-write-*.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET, PREFIX = "bench", "ds"
WRITERS = 16


def mount_cmd(kind, emu, mnt):
    if kind == "fluxfs":
        return [str(C.fluxfs_binary()), "--endpoint", emu.url, "--anonymous", "-f",
                f"{BUCKET}/{PREFIX}", str(mnt)]
    return [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
            "--anonymous-access", "--foreground", "--implicit-dirs", f"--only-dir={PREFIX}",
            "--log-severity=warning", BUCKET, str(mnt)]


def seed_dir(emu, name):
    """An existing directory in the bucket (one object in it) for the writers."""
    url = (f"{emu.url}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&"
           f"name={PREFIX}%2F{name}%2Fseed.bin")
    subprocess.run(["curl", "-sf", "-X", "POST", "--data-binary", "seed", url], check=True,
                   stdout=subprocess.DEVNULL)


def writers_into_one_dir(mnt: Path, dirname: str, writers: int, per_writer: int,
                         data: bytes) -> float:
    directory = mnt / dirname
    errors = []

    def write(w):
        try:
            for i in range(per_writer):
                with open(directory / f"w{w:02d}-{i:05d}.bin", "wb") as f:
                    f.write(data)
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} writers failed: {errors[0]}")
    return seconds


def measure(kind, what, args, src, run):
    def fn(emu, _args, mnt):
        with C.Mount(kind, mount_cmd(kind, emu, mnt), mnt,
                     log=args.logdir / f"{kind}.log") as m:
            data = os.urandom(args.file_kib * 1024)
            if what == "cp-r":
                C.reset_stats(emu)
                t0 = time.perf_counter()
                subprocess.run(["cp", "-r", str(src), str(mnt / f"copy-{run[0]}")], check=True)
                seconds = time.perf_counter() - t0
                files = args.files
            else:
                writers = WRITERS if what == "16-writers" else 1
                per = args.per_writer if writers > 1 else args.per_writer * WRITERS // 4
                dirname = f"{what}-{run[0]}"
                seed_dir(emu, dirname)
                os.stat(mnt / dirname)  # the directory's own lookup is not a create's
                C.reset_stats(emu)
                seconds = writers_into_one_dir(mnt, dirname, writers, per, data)
                files = writers * per
            r = {"seconds": seconds, "files": files, "files_s": files / seconds}
            r.update(m.usage())
        return r
    return fn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--file-kib", type=int, default=100)
    ap.add_argument("--per-writer", type=int, default=64)
    ap.add_argument("--only", default="fluxfs,gcsfuse")
    ap.add_argument("--latency-ms", type=int, default=20)
    args = ap.parse_args()
    args.logdir = C.RESULTS_DIR / "logs"
    args.logdir.mkdir(parents=True, exist_ok=True)
    kinds = []
    for kind in [k for k in args.only.split(",") if k]:
        binary = C.fluxfs_binary() if kind == "fluxfs" else C.gcsfuse_binary()
        if binary is None:
            print(f"{kind}: binary not found (gcsfuse: scripts/setup --bench); skipped")
            continue
        kinds.append(kind)
    src = Path(tempfile.mkdtemp(prefix="dataset-src-")) / "images"
    src.mkdir()
    for i in range(args.files):
        (src / f"img{i:06d}.jpg").write_bytes(os.urandom(args.file_kib * 1024))
    run = [0]
    todo = []
    for what in ("cp-r", "1-writer", "16-writers"):
        for kind in kinds:
            todo.append((f"{what}|{kind}", measure(kind, what, args, src, run)))

    def describe(r):
        return (f"{r['files']} files in {r['seconds']:.2f} s ({r['files_s']:.1f} files/s), "
                f"{r['requests'] / r['files']:.2f} requests/file "
                f"{ {k: v for k, v in r['ops'].items() if v} }")

    emu_args = ["--latency-ms", str(args.latency_ms), "--populate", f"{BUCKET}/seed/:1:1K"]
    print(f"machine: {C.machine_line()}\nemulator: {C.emulator_binary()} {' '.join(emu_args)}",
          flush=True)
    results: dict[str, list] = {}
    try:
        for k in range(args.runs):
            run[0] = k
            res, _ = C.run_interleaved(emu_args, todo, 1, args, describe)
            for name, rs in res.items():
                results.setdefault(name, []).extend(rs)
    finally:
        shutil.rmtree(src.parent, ignore_errors=True)
    report(args, kinds, results)


def report(args, kinds, results):
    def med(key, field):
        return C.median([r.get(field) for r in results.get(key, []) if "error" not in r])

    def per_file(key):
        vals = [r["requests"] / r["files"] for r in results.get(key, []) if "error" not in r]
        return C.median(vals)

    rows = []
    for kind in kinds:
        one = med(f"1-writer|{kind}", "files_s")
        for what in ("cp-r", "1-writer", "16-writers"):
            key = f"{what}|{kind}"
            fs = med(key, "files_s")
            if fs is None:
                rows.append([what, kind, "failed", "", "", ""])
                continue
            speedup = f"{fs / one:.1f}x" if what == "16-writers" and one else ""
            rows.append([what, kind, f"{fs:.1f}", speedup, C.fmt(per_file(key), 2),
                         C.fmt(med(key, "cpu_s"), 2)])
    loads = [r["loadavg_before"] for rs in results.values() for r in rs if "loadavg_before" in r]
    print()
    print(f"Dataset writes ({args.files} x {args.file_kib} KiB for cp -r; {WRITERS} writers x "
          f"{args.per_writer} files), emulator --latency-ms {args.latency_ms}, medians of "
          f"{args.runs} runs ({time.strftime('%Y-%m-%d %H:%M')}, {C.machine_line()}; 1-min load "
          f"average {min(loads, default=0):.1f} to {max(loads, default=0):.1f}: files/s are "
          f"taken under that load, requests/file are not affected by it)")
    print(C.table(["workload", "contender", "files/s", "vs 1 writer", "requests/file",
                   "daemon CPU s"], rows))
    path = C.write_results("dataset-write", {"args": {k: str(v) for k, v in vars(args).items()},
                                             "results": results, "table": rows})
    print(f"raw: {path}")


if __name__ == "__main__":
    main()
