#!/usr/bin/env python3
"""Many mounts, one bucket (issue 21): M fluxfs mounts on this machine read one bucket at once
under the emulator's rate model, each its own shard of N small objects, with order hints
(compose auto: on, the bucket has no soft delete). The bucket admits --write-rate object writes
(composes, deletes of temporaries) and --read-rate reads per second (defaults 50 and 250: Cloud
Storage's starting 1,000 and 5,000 scaled down by 20, so that a fleet on two cores meets them);
beyond them 429 with Retry-After. Each mount backs off by itself (the compose share while reads
have room, else the batches in flight: docs/prefetch.md, "Sharing a bucket's rate").

Per mount: files read, application errors (a read that raised or returned the wrong size),
files/s, the 429s it saw (rate_limited_reads/writes in MOUNT/.fluxfs/status), how far it backed
off (compose_share, its decreases, concurrency_limit/max and decreases), composes and direct
GETs, and its estimated dollars (cost_dollars). Overall: the emulator's refusals and scale-ups,
aggregate files/s (all files / the slowest mount's wall time), max/min files/s over mounts, and
max/min of the files each mount had read when the first finished its shard (the window in
which all were competing: a mount that finishes early leaves the bucket to the others, which
skews whole-shard rates).
Every --series seconds each mount's status is sampled (files read, batches in flight allowed,
429s to reads and writes, files prefetched) and the timeline up to the first finish printed,
with the files prefetched at its end (the bucket's share apart from the readers' waits).
--builds LABEL=BINARY,... --runs N runs the builds interleaved and prints medians.
Nothing is asserted. Results: bench/results/fleet-*.json.

Usage: bench/fleet.py [--mounts 8] [--files-per-mount 500] [--size 128K] [--write-rate 50]
                      [--read-rate 250] [--readers 4] [--rate-scale-up-s 1200] [--series 0.5]
       bench/fleet.py --mounts 16
       bench/fleet.py --mounts 8 --files-per-mount 3000 --runs 3 \
                      --builds parent=/tmp/before/fluxfs,branch=build/src/main/fluxfs
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C  # noqa: E402

BUCKET = "fleet"
PREFIX = "d/"
DONE_LOCK = threading.Lock()


def run_shard(mnt: Path, names: list[str], size: int, readers: int, start: threading.Event,
              done: list, slot: int):
    """Hints the shard's order, then reads every file once with a pool of readers; done[slot]
    counts the files read so far."""
    start.wait()
    t0 = time.monotonic()
    (mnt / ".fluxfs" / "prefetch").write_text("".join(n + "\n" for n in names))
    errors = []

    def one(name):
        try:
            with open(mnt / name, "rb") as f:
                got = len(f.read())
            if got != size:
                errors.append(f"{name}: {got} bytes")
            with DONE_LOCK:
                done[slot] += 1
        except OSError as e:
            errors.append(f"{name}: {e}")

    with concurrent.futures.ThreadPoolExecutor(readers) as pool:
        list(pool.map(one, names, chunksize=8))
    return time.monotonic() - t0, errors


def sample_series(mounts, done, t0, stop: threading.Event, period: float, series: list):
    """Every period seconds until stop: per mount (seconds since start, files read, batches in
    flight allowed, 429s to reads, 429s to writes, retries, files prefetched, reads that waited
    for a fetch in flight) from its status file."""
    while not stop.wait(period):
        t = time.monotonic() - t0
        row = []
        for i, m in enumerate(mounts):
            try:
                s = C.read_status(m.mnt)
            except OSError:
                s = {}
            row.append([round(t, 2), done[i], int(s.get("concurrency_limit", 0)),
                        int(s.get("rate_limited_reads", 0)), int(s.get("rate_limited_writes", 0)),
                        int(s.get("gcs_retries", 0)), int(s.get("files_prefetched", 0)),
                        int(s.get("cache_pending_waits", 0))])
        series.append(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mounts", type=int, default=8)
    ap.add_argument("--files-per-mount", type=int, default=500)
    ap.add_argument("--size", default="128K")
    ap.add_argument("--write-rate", type=int, default=50)
    ap.add_argument("--read-rate", type=int, default=250)
    ap.add_argument("--rate-scale-up-s", type=int, default=1200)
    ap.add_argument("--readers", type=int, default=4, help="reader threads per mount")
    ap.add_argument("--fluxfs-args", default="", help="extra flags for every mount")
    ap.add_argument("--series", type=float, default=0.5,
                    help="seconds between samples of each mount's status (0: none); printed "
                         "as a timeline of files read and batches in flight")
    ap.add_argument("--builds", default="",
                    help="LABEL=BINARY,LABEL=BINARY: compare builds, interleaved, --runs each "
                         "(default: one run of FLUXFS_BIN or ./build)")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds.split(",") if b] or [["this", None]]
    summaries = {label: [] for label, _ in builds}
    for run in range(args.runs):
        for label, binary in builds:
            if binary:
                os.environ["FLUXFS_BIN"] = binary
            print(f"\n=== run {run + 1} of {args.runs}: {label} ({C.fluxfs_binary()})")
            summaries[label].append(run_once(args))
    if len(builds) > 1 or args.runs > 1:
        print_comparison(args, summaries)


def print_comparison(args, summaries):
    """Medians over the runs of each build, each run's figure in brackets."""
    def col(runs, key, fmt):
        vals = [r[key] for r in runs]
        return f"{fmt.format(statistics.median(vals))} (" + ", ".join(fmt.format(v) for v in vals) + ")"
    rows = []
    for label, runs in summaries.items():
        rows.append([label, col(runs, "files_per_s", "{:.0f}"), col(runs, "ratio", "{:.2f}"),
                     col(runs, "window_ratio", "{:.2f}"), col(runs, "fetched_ratio", "{:.2f}"),
                     col(runs, "window_s", "{:.1f}"),
                     f"{statistics.median(r['read_429'] for r in runs):.0f} / "
                     f"{statistics.median(r['write_429'] for r in runs):.0f}",
                     col(runs, "cpu_per_1k", "{:.2f}"), col(runs, "dollars_per_1k", "{:.6f}"),
                     sum(r["errors"] for r in runs)])
    print(f"\ncomparison, {args.mounts} mounts x {args.files_per_mount} files, medians of "
          f"{args.runs} interleaved runs (each run in brackets); load at end "
          f"{os.getloadavg()[0]:.2f}\n")
    print(C.table(["build", "aggregate files/s", "per-mount files/s max/min", "window max/min",
                   "prefetched in window max/min", "window s", "429 reads / writes (emulator)", "daemon CPU s / 1k files",
                   "$ / 1k files", "app errors"], rows))


def run_once(args) -> dict:
    """One fleet run; prints its table and returns its summary."""
    size = C.parse_size(args.size)
    total = args.mounts * args.files_per_mount
    emu = C.start_emulator(["--populate", f"{BUCKET}/{PREFIX}:{total}:{args.size}",
                            "--write-rate", str(args.write_rate),
                            "--read-rate", str(args.read_rate),
                            "--rate-scale-up-s", str(args.rate_scale_up_s)])
    mounts, rows, per_mount = [], [], []
    base = Path(tempfile.mkdtemp(prefix="fluxfs-fleet-"))
    try:
        for i in range(args.mounts):
            mnt = base / f"m{i:02d}"
            cmd = [str(C.fluxfs_binary()), "-f", "--endpoint", emu.url, "--anonymous",
                   *args.fluxfs_args.split(), BUCKET, str(mnt)]
            mounts.append(C.Mount(f"fleet-{i}", cmd, mnt, timeout=120))
        before = C.stats(emu)
        cpu_before = [m.usage()["cpu_s"] or 0 for m in mounts]
        start = threading.Event()
        names = [f"{PREFIX}{i:08d}" for i in range(total)]
        done = [0] * args.mounts
        with concurrent.futures.ThreadPoolExecutor(args.mounts) as pool:
            futures = [pool.submit(run_shard, m.mnt,
                                   names[i * args.files_per_mount:(i + 1) * args.files_per_mount],
                                   size, args.readers, start, done, i)
                       for i, m in enumerate(mounts)]
            t0 = time.monotonic()
            start.set()
            series, stop_sampling = [], threading.Event()
            sampler = None
            if args.series > 0:
                sampler = threading.Thread(target=sample_series, daemon=True,
                                           args=(mounts, done, t0, stop_sampling, args.series,
                                                 series))
                sampler.start()
            # Fairness over the window in which every mount was reading: the files each had
            # read when the first one finished its shard.
            concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
            window_s = time.monotonic() - t0
            window = list(done)
            results = [f.result() for f in futures]
            wall = time.monotonic() - t0
            stop_sampling.set()
            if sampler:
                sampler.join()
        after = C.stats(emu)
        for i, (m, (secs, errors)) in enumerate(zip(mounts, results)):
            s = C.read_status(m.mnt)
            cpu = (m.usage()["cpu_s"] or 0) - cpu_before[i]
            r = {"mount": i, "wall_s": secs, "files_in_window": window[i], "errors": errors[:5],
                 "error_count": len(errors),
                 "files_per_s": args.files_per_mount / secs, "daemon_cpu_s": cpu, "status": s}
            per_mount.append(r)
            rows.append([i, args.files_per_mount, len(errors), f"{r['files_per_s']:.0f}",
                         window[i],
                         s.get("rate_limited_reads"), s.get("rate_limited_writes"),
                         s.get("composes"), s.get("direct_gets"),
                         f"{float(s.get('compose_share', 0)):.3f}",
                         s.get("compose_share_decreases"),
                         f"{s.get('concurrency_limit')}/{s.get('concurrency_max')}",
                         s.get("concurrency_decreases"), s.get("gcs_retries"),
                         f"{cpu * 1000 / args.files_per_mount:.2f}",
                         f"{float(s.get('cost_dollars', 0)) * 1000 / args.files_per_mount:.6f}"])
    finally:
        for m in mounts:
            m.stop()
        emu.stop()
    rates = [r["files_per_s"] for r in per_mount]
    keys = ("rate_limited_reads", "rate_limited_writes", "rate_limited_object_writes",
            "rate_scale_ups")
    emu_delta = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    print(f"\nbench/fleet.py: {args.mounts} mounts x {args.files_per_mount} objects x {args.size}, "
          f"{args.readers} readers each; rate model {args.write_rate} writes/s, "
          f"{args.read_rate} reads/s per bucket (scale-up every {args.rate_scale_up_s} s); "
          f"{C.machine_line()}; load at end {os.getloadavg()[0]:.2f}\n")
    print(C.table(["mount", "files", "app errors", "files/s", "files in window", "429 reads",
                   "429 writes",
                   "composes", "direct GETs", "compose share", "share cuts", "in flight",
                   "flight cuts", "retries", "CPU s/1k files", "$ per 1k files"], rows))
    print(f"\naggregate: {total:,} files in {wall:.1f} s = {total / wall:,.0f} files/s; "
          f"per mount files/s max/min = {max(rates) / min(rates):.2f}; application errors "
          f"{sum(r['error_count'] for r in per_mount)}")
    print(f"window while all {args.mounts} read ({window_s:.1f} s, until the first finished): "
          f"files per mount max/min = {max(window) / max(min(window), 1):.2f} "
          f"(min {min(window)}, max {max(window)})")
    # The bucket's share apart from the readers: files each mount's prefetcher had fetched at
    # the last sample inside the window (a reader waits for the earliest file still in
    # flight, so the files read jump when it comes; the files fetched move evenly).
    inside = [row for row in series if row[0][0] <= window_s]
    fetched = [r[6] for r in inside[-1]] if inside else []
    fetched_ratio = max(fetched) / max(min(fetched), 1) if fetched else float("nan")
    if fetched:
        print(f"files prefetched at {inside[-1][0][0]:.1f} s (last sample in the window): "
              f"max/min = {fetched_ratio:.2f} (min {min(fetched)}, max {max(fetched)})")
    print("emulator: " + ", ".join(f"{k} {v}" for k, v in emu_delta.items()))
    if series:
        print("\ntimeline until the first mount finished: per mount files read / batches in "
              "flight allowed / 429s to reads / to writes so far / files prefetched")
        for row in series:
            if row[0][0] > window_s + args.series:
                break
            print(f"{row[0][0]:5.1f} s  " + "  ".join(f"{r[1]:>4}/{r[2]}/{r[3]}/{r[4]}/{r[6]:<4}" for r in row))
    path = C.write_results("fleet", {"args": vars(args), "wall_s": wall, "window_s": window_s,
                                     "series": series,
                                     "mounts": per_mount,
                                     "emulator": emu_delta})
    print(f"raw: {path}")
    files = args.mounts * args.files_per_mount
    return {"files_per_s": total / wall, "ratio": max(rates) / min(rates),
            "window_ratio": max(window) / max(min(window), 1), "window_s": window_s,
            "fetched_ratio": fetched_ratio,
            "read_429": emu_delta["rate_limited_reads"], "write_429": emu_delta["rate_limited_writes"],
            "cpu_per_1k": sum(r["daemon_cpu_s"] for r in per_mount) * 1000 / files,
            "dollars_per_1k": sum(float(r["status"].get("cost_dollars", 0)) for r in per_mount)
            * 1000 / files,
            "errors": sum(r["error_count"] for r in per_mount)}


if __name__ == "__main__":
    main()
