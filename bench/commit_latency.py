#!/usr/bin/env python3
"""Latency of unrelated stats and opens while a large file is committed (issue 20).

One emulator (--latency-ms 100 by default) holds small files in two directories, cl/a/ and
cl/b/. Per run, each contender in turn (interleaved: run 1 every contender, run 2 ...):

  1. fresh mount of the prefix cl/; every small file stat'ed and read once, both directories
     listed once (so everything probed later is cached);
  2. five prober processes start, each looping with --interval-ms between operations:
       stat a    os.stat of the small files of a/ (the committing file's directory), in turn
       stat b    os.stat of the small files of b/ (another directory)
       open a    open + read to EOF + close of the small files of a/
       open b    the same in b/
       list a    os.listdir(a/)
     Each operation's start and duration are recorded (CLOCK_MONOTONIC; processes, not
     threads, so no GIL sits between a probe and its clock);
  3. after --idle-s, the writer opens a/big.bin (O_CREAT|O_TRUNC), writes --size bytes
     sequentially (--write-mib per write()), then close(): the commit window is from the
     close() call to its return; --idle-s later the probers stop.

Reported per contender and probe: p50 / p99 / max of the operations that overlap the commit
window ("commit") and of all others ("outside": idle before, while writing, idle after), the
close() time (the commit), the write phase, the daemon's CPU seconds from the open of big.bin
to close()'s return, and the emulator's requests, class A requests, bytes in and out from that
open to close()'s return, per GiB written (requests include the probers' own: gcsfuse lists a/
from the bucket on every listdir, hence the "of which lists" column). The object's size is
checked afterwards and the object deleted (the emulator keeps objects in memory). The JSON has
every operation's start and duration ("samples", ms from the open of big.bin; "phases_ms").

Contenders:
  fluxfs      this build (FLUXFS_BIN / FLUXFS_BUILD, as the other benchmarks), with
              --kernel-ttl (default 0: --attr-timeout 0 --entry-timeout 0, so every stat and
              open is a request to the daemon, answered from its own metadata cache, stat-ttl
              60 s; with the kernel's caches a stat of a cached file never reaches the daemon and
              measures the kernel); extra flags with --fluxfs-args
  gcsfuse     v3.11.4 (bench/setup_contenders.sh) with its file cache (the small files' reads
              come from it) and its defaults otherwise; its kernel attribute and entry caches
              follow its metadata cache TTL (60 s), which cannot be set apart: its stats are
              mostly answered by the kernel
  fluxfs-old  with --old-bin PATH: another fluxfs binary (e.g. a build of the commit before
              cfed794), mounted like fluxfs

  .venv/bin/python bench/commit_latency.py [--size 2G] [--runs 1] [--latency-ms 100]
      [--old-bin /tmp/old/build/src/main/fluxfs] [--only fluxfs,gcsfuse,fluxfs-old]
      [--no-list] [--kernel-ttl 0|default|DURATION] [--json PATH]

Raw results: bench/results/commit-latency-*.json (and --json PATH).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import shutil
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET, PREFIX = "bench", "cl"
BIG = "a/big.bin"
GIB = 1 << 30
PROBES = [("stat", "a"), ("stat", "b"), ("open", "a"), ("open", "b"), ("list", "a")]


def parse_size(text: str) -> int:
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    return int(float(t[:-1] if t[-1:] in "KMGT" else t) * mult)


# ---------------------------------------------------------------- probers (child processes)


def prober(index: int, kind: str, paths: list[str], interval: float, stop, out_q):
    """Loops kind over paths until stop is set; puts (index, [(start, seconds, error)]) on
    out_q."""
    samples = []
    i = 0
    while not stop.is_set():
        p = paths[i % len(paths)]
        i += 1
        err = None
        t0 = time.monotonic()
        try:
            if kind == "stat":
                os.stat(p)
            elif kind == "open":
                with open(p, "rb", buffering=0) as f:
                    while f.read(1 << 20):
                        pass
            else:
                os.listdir(p)
        except OSError as e:
            err = f"{type(e).__name__}: {e}"
        samples.append((t0, time.monotonic() - t0, err))
        if interval > 0:
            time.sleep(interval)
    out_q.put((index, samples))


# ---------------------------------------------------------------- one contender, one run


def mount_cmd(kind: str, emu, args, mnt: Path, cache: Path) -> list[str]:
    if kind.startswith("fluxfs"):
        binary = args.old_bin if kind == "fluxfs-old" else str(C.fluxfs_binary())
        ttl = ([] if args.kernel_ttl == "default" else
               ["--attr-timeout", args.kernel_ttl, "--entry-timeout", args.kernel_ttl])
        return [binary, "--endpoint", emu.url, "--anonymous", *C.fluxfs_tls_args(emu), *ttl,
                *shlex.split(args.fluxfs_args), "-f", f"{BUCKET}/{PREFIX}", str(mnt)]
    return [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
            "--anonymous-access", "--foreground", "--implicit-dirs", f"--only-dir={PREFIX}",
            f"--cache-dir={cache}", "--file-cache-max-size-mb=-1", "--log-severity=warning",
            *shlex.split(args.gcsfuse_args), BUCKET, str(mnt)]


def object_url(emu, name: str) -> str:
    return (f"{emu.url}/storage/v1/b/{BUCKET}/o/"
            f"{urllib.parse.quote(PREFIX + '/' + name, safe='')}")


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of values, None when empty."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 100)) - 1))
    return v[k]


def summarize(samples, window) -> dict:
    """samples [(start, seconds, error)] split by overlap with window (t0, t1)."""
    c0, c1 = window
    parts = {"commit": [], "outside": []}
    errors = 0
    for start, secs, err in samples:
        if err:
            errors += 1
        parts["commit" if start < c1 and start + secs > c0 else "outside"].append(secs)
    out = {"errors": errors}
    for name, vals in parts.items():
        out[name] = {"n": len(vals), "p50_ms": _ms(pct(vals, 50)), "p99_ms": _ms(pct(vals, 99)),
                     "max_ms": _ms(max(vals) if vals else None)}
    return out


def _ms(s):
    return None if s is None else s * 1000.0


def run_contender(kind: str, emu, args, mnt: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="commit-latency-cache-"))
    cmd = mount_cmd(kind, emu, args, mnt, cache)
    env = C.tls_env(emu) if kind == "gcsfuse" else None
    r: dict = {"mount_cmd": cmd}
    try:
        with C.Mount(kind, cmd, mnt, env=env, log=args.logdir / f"commit-latency-{kind}.log") as m:
            files = {d: sorted(str(mnt / d / n) for n in os.listdir(mnt / d) if n.startswith("s"))
                     for d in ("a", "b")}
            for d, paths in files.items():
                if len(paths) != args.files:
                    raise RuntimeError(f"{d}/: {len(paths)} small files listed, "
                                       f"{args.files} expected")
                for p in paths:  # warm: metadata and contents cached
                    os.stat(p)
                    Path(p).read_bytes()
            ctx = multiprocessing.get_context("fork")
            stop, q = ctx.Event(), ctx.Queue()
            procs = []
            for i, (kind_, d) in enumerate(args.probes):
                target = [str(mnt / d)] if kind_ == "list" else files[d]
                p = ctx.Process(target=prober, args=(i, kind_, target, args.interval_ms / 1000.0,
                                                     stop, q), daemon=True)
                p.start()
                procs.append(p)
            chunk = os.urandom(args.write_mib << 20)
            try:
                time.sleep(args.idle_s)
                C.reset_stats(emu)
                cpu0 = C.cpu_seconds(m.proc.pid)
                t_open = time.monotonic()
                fd = os.open(mnt / BIG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                left = args.size
                while left > 0:
                    n = os.write(fd, chunk[:min(left, len(chunk))])
                    left -= n
                t_close0 = time.monotonic()
                os.close(fd)
                t_close1 = time.monotonic()
                s = C.stats(emu)
                cpu1 = C.cpu_seconds(m.proc.pid)
                time.sleep(args.idle_s)
            finally:
                stop.set()
                samples = [None] * len(procs)
                deadline = time.monotonic() + 120
                for _ in procs:
                    i, got = q.get(timeout=max(1.0, deadline - time.monotonic()))
                    samples[i] = got
                for p in procs:
                    p.join(10)
            r["usage"] = m.usage()
        r["probes"] = {}
        # Raw samples, times relative to the open of big.bin: [start ms, duration ms, error].
        r["samples"] = {}
        r["phases_ms"] = {"close_start": (t_close0 - t_open) * 1e3,
                          "close_end": (t_close1 - t_open) * 1e3}
        for (kind_, d), got in zip(args.probes, samples):
            r["probes"][f"{kind_} {d}"] = summarize(got, (t_close0, t_close1))
            r["samples"][f"{kind_} {d}"] = [[round((t - t_open) * 1e3, 3), round(x * 1e3, 3), e]
                                             for t, x, e in got]
        stall = [v["commit"]["max_ms"] for k, v in r["probes"].items()
                 if not k.startswith("list") and v["commit"]["max_ms"] is not None]
        r["worst_in_commit_ms"] = max(stall) if stall else None
        gib = args.size / GIB
        r.update(write_s=t_close0 - t_open, commit_s=t_close1 - t_close0,
                 daemon_cpu_s=(cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None,
                 emulator={k: s.get(k, 0) for k in ("requests", "class_a", "class_b",
                                                    "bytes_in", "bytes_out")},
                 commit_ops={k: v for k, v in s.get("ops", {}).items() if v})
        r["per_gib"] = {"requests": s.get("requests", 0) / gib,
                        "lists": s.get("ops", {}).get("objects.list", 0) / gib,
                        "class_a": s.get("class_a", 0) / gib,
                        "gib_in": s.get("bytes_in", 0) / GIB / gib,
                        "gib_out": s.get("bytes_out", 0) / GIB / gib}
        meta = C.http_json("GET", object_url(emu, BIG), emu=emu)
        r["object_size"] = int(meta["size"])
        if r["object_size"] != args.size:
            raise RuntimeError(f"{BIG}: {r['object_size']} bytes in the bucket, "
                               f"{args.size} written")
    finally:
        try:
            C.http_json("DELETE", object_url(emu, BIG), emu=emu)
        except Exception:
            pass
        shutil.rmtree(cache, ignore_errors=True)
    return r


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="2G", help="bytes written and committed (default 2G; "
                    "K/M/G suffixes)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--latency-ms", type=int, default=100)
    ap.add_argument("--files", type=int, default=16, help="small files per directory")
    ap.add_argument("--file-size", default="64K", help="size of each small file")
    ap.add_argument("--interval-ms", type=float, default=10.0,
                    help="pause between one prober's operations")
    ap.add_argument("--idle-s", type=float, default=1.0,
                    help="probing before the write starts and after the commit returns")
    ap.add_argument("--write-mib", type=int, default=1, help="bytes per write() in MiB")
    ap.add_argument("--kernel-ttl", default="0",
                    help="fluxfs --attr-timeout and --entry-timeout (default 0; 'default' "
                         "leaves fluxfs's own, the stat TTL)")
    ap.add_argument("--only", default="fluxfs,gcsfuse,fluxfs-old")
    ap.add_argument("--old-bin", help="a fluxfs binary to run as the contender fluxfs-old")
    ap.add_argument("--fluxfs-args", default="", help="extra flags for fluxfs and fluxfs-old")
    ap.add_argument("--gcsfuse-args", default="", help="extra flags for gcsfuse")
    ap.add_argument("--no-list", action="store_true", help="leave out the listdir prober")
    ap.add_argument("--json", help="also write the raw results to this file")
    args = ap.parse_args()
    args.probes = [p for p in PROBES if not (args.no_list and p[0] == "list")]
    args.size = parse_size(args.size)
    args.logdir = C.RESULTS_DIR / "logs"
    args.logdir.mkdir(parents=True, exist_ok=True)

    names = [n for n in args.only.split(",") if n]
    if "fluxfs-old" in names and not args.old_bin:
        names.remove("fluxfs-old")  # only with --old-bin
    if args.old_bin and not Path(args.old_bin).exists():
        sys.exit(f"--old-bin {args.old_bin}: no such file")
    if "gcsfuse" in names and C.gcsfuse_binary() is None:
        print("gcsfuse not found (bench/setup_contenders.sh): skipped", flush=True)
        names.remove("gcsfuse")
    if "fluxfs" in names and C.fluxfs_binary() is None:
        sys.exit("fluxfs not built (build/src/main/fluxfs, or FLUXFS_BIN / FLUXFS_BUILD)")
    todo = [(n, lambda e, a, m, n=n: run_contender(n, e, a, m)) for n in names]

    emu_args = ["--latency-ms", str(args.latency_ms),
                "--populate", f"{BUCKET}/{PREFIX}/a/s:{args.files}:{args.file_size}",
                "--populate", f"{BUCKET}/{PREFIX}/b/s:{args.files}:{args.file_size}"]
    print(f"machine: {C.machine_line()}\nemulator: {C.emulator_binary()} {' '.join(emu_args)}\n"
          f"size {args.size / GIB:.3g} GiB, contenders {', '.join(names)}", flush=True)

    def describe(r):
        worst = max((v["commit"]["max_ms"] or 0) for v in r["probes"].values())
        return (f"write {r['write_s']:.2f} s, commit {r['commit_s']:.2f} s, worst probe in the "
                f"commit {worst:.1f} ms, daemon CPU {C.fmt(r['daemon_cpu_s'])} s")

    results, restarts = C.run_interleaved(emu_args, todo, args.runs, args, describe)
    report(args, names, results, restarts, emu_args)


def report(args, names, results, restarts, emu_args):
    def ok(name):
        return [r for r in results.get(name, []) if "error" not in r]

    def med(name, get):
        return C.median([get(r) for r in ok(name)])

    rows = []
    for name in names:
        if not ok(name):
            rows.append([name, "failed"] + [""] * 8)
            continue
        for probe in (f"{k} {d}" for k, d in args.probes):
            row = [name, probe]
            for part in ("commit", "outside"):
                row.append(C.fmt(med(name, lambda r: r["probes"][probe][part]["n"]), 0))
                for stat in ("p50_ms", "p99_ms", "max_ms"):
                    row.append(C.fmt(med(name, lambda r: r["probes"][probe][part][stat]), 1))
            rows.append(row)
    srows = []
    for name in names:
        if not ok(name):
            continue
        srows.append([name, C.fmt(med(name, lambda r: r["write_s"])),
                      C.fmt(med(name, lambda r: r["commit_s"])),
                      C.fmt(med(name, lambda r: r["worst_in_commit_ms"]), 1),
                      C.fmt(med(name, lambda r: 100 * r["worst_in_commit_ms"] / 1e3 /
                                r["commit_s"]), 0) + "%",
                      C.fmt(med(name, lambda r: r["daemon_cpu_s"])),
                      C.fmt(med(name, lambda r: r["per_gib"]["requests"]), 1),
                      C.fmt(med(name, lambda r: r["per_gib"]["lists"]), 1),
                      C.fmt(med(name, lambda r: r["per_gib"]["class_a"]), 1),
                      C.fmt(med(name, lambda r: r["per_gib"]["gib_in"]), 3),
                      C.fmt(med(name, lambda r: r["per_gib"]["gib_out"]), 4),
                      C.fmt(med(name, lambda r: r["usage"]["vmhwm_mib"]), 0)])
    print()
    print(f"Unrelated stats and opens during a {args.size / GIB:.3g} GiB commit, emulator "
          f"--latency-ms {args.latency_ms}, medians of {args.runs} run(s) "
          f"({time.strftime('%Y-%m-%d %H:%M')}, {C.machine_line()}); ms, nearest-rank "
          "percentiles; \"commit\": operations overlapping close() of the big file")
    print(C.table(["contender", "probe", "n commit", "p50", "p99", "max", "n outside", "p50",
                   "p99", "max"], rows))
    print()
    print("The commit: write phase, close(), the slowest stat or open of a small file that "
          "overlapped the close (median of the runs' maxima) and its share of the close; daemon "
          "CPU and emulator counts from the open of the big file to close()'s return, per GiB "
          "written")
    print(C.table(["contender", "write s", "close (commit) s", "worst stat/open in it, ms",
                   "of the close", "daemon CPU s", "requests/GiB", "of which lists",
                   "class A/GiB", "GiB in/GiB", "GiB out/GiB", "daemon RSS MiB"], srows))
    loads = [r["loadavg_before"] for rs in results.values() for r in rs]
    if loads:
        print(f"1-min load average before each contender: {min(loads):.1f} to {max(loads):.1f} "
              f"(on {os.cpu_count()} cores)")
    if restarts:
        print(f"WARNING: the emulator exited during the run {len(restarts)} time(s): {restarts}")
    payload = {"args": {k: str(v) for k, v in vars(args).items()}, "emulator_args": emu_args,
               "results": results, "emulator_restarts": restarts, "table": rows,
               "commit_table": srows, "binaries_extra": {"fluxfs-old": args.old_bin}}
    path = C.write_results("commit-latency", payload)
    if args.json:
        shutil.copyfile(path, args.json)
        print(f"raw: {path} (and {args.json})")
    else:
        print(f"raw: {path}")


if __name__ == "__main__":
    main()
