#!/usr/bin/env python3
"""Listing a flat directory of 100,000 objects, cold (issue 3, "Benchmarks").

One emulator (--latency-ms 20, --populate bench/flat/:100000:1K) serves every contender; each
run does every contender once, in turn, with the emulator's stats reset before each:

  fluxfs       fresh mount of bench/flat, then `ls -f MNT` read through a pipe (timed: the ls only);
               the daemon's peak RSS (VmHWM) and CPU seconds (utime+stime) are read after it
  sequential   one keep-alive connection paging objects.list (prefix=flat/, maxResults=1000)
               and parsing each page's JSON: what a plain client does
  gcsfuse      fresh mount (--only-dir flat, --implicit-dirs), then `ls -f MNT | wc -l`
  connector    gcs-torch-dataflux's dataflux_core.fast_list.ListingController(prefix="flat/")
               .run(), timed inside its process (imports excluded), at its default parallelism
               (os.cpu_count()) and at --connector-procs

--tls is the HTTPS profile: the emulator serves TLS with a throwaway CA, which every contender
trusts (fluxfs --ca-file, gcsfuse SSL_CERT_FILE, the sequential client's context, the connector
REQUESTS_CA_BUNDLE/SSL_CERT_FILE), as bench/seqread.py does.

Kernel caches are dropped before each contender. Reported: median seconds over the runs, the
ratio to fluxfs, and the requests by class each contender made (median over runs).

  bench/listing.py [--runs 3] [--count 100000] [--latency-ms 20] [--only fluxfs,gcsfuse,...]
                   [--tls]

  fluxfs-before (in --only): the fluxfs mount again with the binary FLUXFS_BEFORE_BIN (the
               parent of a change), interleaved with fluxfs in every run
  --perf DIR   records the fluxfs daemons with `perf record --call-graph dwarf` during each ls
               (DIR/<contender>-run<N>.data; read with `perf report -i FILE --no-children`);
               the recording costs CPU, so take timings from runs without it

Binaries: FLUXFS_BIN / FLUXFS_BUILD (default build/src/main/fluxfs), GCSFUSE_BIN (default
build/tools/bin/gcsfuse, see bench/setup_contenders.sh), GCS_EMULATOR. Extra fluxfs flags:
--fluxfs-args "...". Raw results: bench/results/listing-*.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET, PREFIX = "bench", "flat/"

CONNECTOR_CODE = r"""
import json, logging, os, sys, time
from dataflux_core import fast_list
procs = int(sys.argv[1]); bucket = sys.argv[2]; prefix = sys.argv[3]
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
lister = fast_list.ListingController(max_parallelism=procs, project="bench", bucket=bucket,
                                     prefix=prefix, sort_results=False)
objs = lister.run()
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "entries": len(objs)}))
"""


def timed_ls(mnt: Path, timeout: float):
    """`ls -f MNT`, its output read through a pipe (what `| wc -l` would do). Entries are
    counted without "." and "..", which some filesystems (gcsfuse) do not return."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(["ls", "-f", str(mnt)], capture_output=True, timeout=timeout)
    secs = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ls_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if out.returncode != 0:
        raise RuntimeError(f"ls failed: {out.stderr.decode(errors='replace')}")
    names = out.stdout.split(b"\n")
    return secs, sum(1 for n in names if n not in (b"", b".", b"..")), ls_cpu


def perf_record(args, pid: int, label: str):
    """`perf record` of pid until stopped (perf_stop), or None without --perf."""
    if not args.perf:
        return None
    args.perf.mkdir(parents=True, exist_ok=True)
    args.perf_runs[label] = args.perf_runs.get(label, 0) + 1
    out = args.perf / f"{label}-run{args.perf_runs[label]}.data"
    proc = subprocess.Popen(["perf", "record", "-q", "--call-graph", "dwarf,16384", "-F", "999",
                             "-p", ",".join(map(str, C.daemon_tree(pid))), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf attaches to every thread before the listing starts
    return proc


def perf_stop(proc):
    if proc is not None:
        proc.send_signal(signal.SIGINT)
        proc.wait(120)


def run_fluxfs(emu, args, mnt, extra=(), binary=None, label="fluxfs"):
    cmd = [str(binary or C.fluxfs_binary()), "--endpoint", emu.url, "--anonymous",
           *C.fluxfs_tls_args(emu), *shlex.split(args.fluxfs_args), *extra, "-f",
           f"{BUCKET}/{PREFIX.rstrip('/')}", str(mnt)]
    C.reset_stats(emu)
    t0 = time.perf_counter()
    with C.Mount("fluxfs", cmd, mnt, env=C.tls_env(emu), log=args.logdir / "fluxfs.log") as m:
        mount_s = time.perf_counter() - t0
        perf = perf_record(args, m.proc.pid, label)
        try:
            secs, n, ls_cpu = timed_ls(mnt, args.timeout)
        finally:
            perf_stop(perf)
        usage = m.usage()
    return {"seconds": secs, "entries": n, "mount_s": mount_s, "ls_cpu_s": ls_cpu,
            "cmd": " ".join(cmd), **usage}


def run_gcsfuse(emu, args, mnt):
    cmd = [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
           "--anonymous-access", "--foreground", "--implicit-dirs",
           f"--only-dir={PREFIX.rstrip('/')}", "--log-severity=warning",
           *shlex.split(args.gcsfuse_args), BUCKET, str(mnt)]
    C.reset_stats(emu)
    t0 = time.perf_counter()
    with C.Mount("gcsfuse", cmd, mnt, env=C.tls_env(emu), log=args.logdir / "gcsfuse.log") as m:
        mount_s = time.perf_counter() - t0
        secs, n, ls_cpu = timed_ls(mnt, args.timeout)
        usage = m.usage()
    return {"seconds": secs, "entries": n, "mount_s": mount_s, "ls_cpu_s": ls_cpu,
            "cmd": " ".join(cmd), **usage}


def run_sequential(emu, args, _mnt):
    import http.client
    from urllib.parse import quote, urlsplit
    C.reset_stats(emu)
    u = urlsplit(emu.url)
    t0 = time.perf_counter()
    if u.scheme == "https":
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=args.timeout,
                                           context=emu.ssl_context())
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=args.timeout)
    token, n, pages = None, 0, 0
    while True:
        path = f"/storage/v1/b/{BUCKET}/o?prefix={quote(PREFIX, safe='')}&maxResults=1000"
        if token:
            path += "&pageToken=" + quote(token, safe="")
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {body[:300]!r}")
        page = json.loads(body)
        n += len(page.get("items", []))
        pages += 1
        token = page.get("nextPageToken")
        if not token:
            break
    conn.close()
    return {"seconds": time.perf_counter() - t0, "entries": n, "pages": pages}


def run_connector(emu, args, _mnt, procs):
    C.reset_stats(emu)
    env = dict(os.environ, STORAGE_EMULATOR_HOST=emu.url, **C.client_tls_env(emu))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CONNECTOR_CODE, str(procs), BUCKET, PREFIX],
                         capture_output=True, text=True, env=env, timeout=args.timeout)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"connector failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_with_startup_s"] = wall
    res["procs"] = procs
    return res


def contenders(args):
    out = []
    have_fluxfs = C.fluxfs_binary() is not None
    if "fluxfs" in args.only:
        if have_fluxfs:
            out.append(("fluxfs", run_fluxfs))
            for v in args.fluxfs_variants:
                out.append((f"fluxfs ({v})",
                            lambda e, a, m, fl=shlex.split(v): run_fluxfs(e, a, m, fl, label="fluxfs-variant")))
        else:
            print("fluxfs binary not found: the fluxfs column is NOT measured", flush=True)
    if "fluxfs-before" in args.only:
        before = os.environ.get("FLUXFS_BEFORE_BIN")
        if not before:
            sys.exit("fluxfs-before: set FLUXFS_BEFORE_BIN to the fluxfs binary to compare with")
        out.append(("fluxfs-before",
                    lambda e, a, m: run_fluxfs(e, a, m, binary=before, label="fluxfs-before")))
    if "sequential" in args.only:
        out.append(("sequential list", run_sequential))
    if "gcsfuse" in args.only:
        if C.gcsfuse_binary():
            out.append(("gcsfuse", run_gcsfuse))
        else:
            print("gcsfuse not found (bench/setup_contenders.sh): skipped", flush=True)
    if "connector" in args.only:
        for procs in dict.fromkeys([os.cpu_count(), args.connector_procs]):
            out.append((f"connector (P={procs})",
                        lambda e, a, m, p=procs: run_connector(e, a, m, p)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--only", default="fluxfs,sequential,gcsfuse,connector")
    ap.add_argument("--connector-procs", type=int, default=16)
    ap.add_argument("--fluxfs-args", default="", help="extra flags for every fluxfs mount")
    ap.add_argument("--fluxfs-variant", action="append", default=[], dest="fluxfs_variants",
                    help="an extra fluxfs contender with these flags (repeatable), e.g. "
                         "--fluxfs-variant=--list-parallelism=32")
    ap.add_argument("--gcsfuse-args", default="")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--tls", action="store_true",
                    help="HTTPS profile: the emulator serves TLS (throwaway CA)")
    ap.add_argument("--perf", type=Path, default=None,
                    help="perf record the fluxfs daemons during each ls into this folder")
    args = ap.parse_args()
    args.perf_runs = {}
    args.only = set(args.only.split(","))
    args.logdir = C.RESULTS_DIR / "logs"
    args.logdir.mkdir(parents=True, exist_ok=True)

    emu_args = ["--latency-ms", str(args.latency_ms),
                "--populate", f"{BUCKET}/{PREFIX}:{args.count}:1K"]
    profile = "HTTPS" if args.tls else "HTTP"
    print(f"machine: {C.machine_line()}\nemulator ({profile}): {C.emulator_binary()} "
          f"{' '.join(emu_args)}",
          flush=True)
    todo = contenders(args)
    results, restarts = C.run_interleaved(
        emu_args, todo, args.runs, args,
        lambda r: f"{r['seconds']:.3f} s, {r['entries']:,} entries, {r['requests']} requests "
                  f"(A {r['class_a']}, B {r['class_b']})")

    def med(name, key):
        return C.median([r.get(key) for r in results.get(name, []) if "error" not in r])

    base = med("fluxfs", "seconds")
    rows = []
    for name, _ in todo:
        ok = [r for r in results[name] if "error" not in r]
        if not ok:
            rows.append([name, "failed"] + [""] * 8)
            continue
        s = med(name, "seconds")
        entries = sorted({r["entries"] for r in ok})
        rows.append([name, f"{s:.3f}", f"{s / base:.1f}x" if base else "n/a",
                     ",".join(f"{e:,}" for e in entries),
                     C.fmt(med(name, "class_a"), 0), C.fmt(med(name, "class_b"), 0),
                     C.fmt(med(name, "vmhwm_mib"), 1), C.fmt(med(name, "cpu_s"), 2),
                     C.fmt(med(name, "ls_cpu_s"), 2), C.fmt(med(name, "emulator_cpu_s"), 2)])
    print()
    print(f"Listing {args.count:,} objects (flat) over {profile}, emulator --latency-ms {args.latency_ms}, "
          f"cold, medians of {args.runs} runs ({time.strftime('%Y-%m-%d')}, "
          f"{C.machine_line()})")
    print(C.table(["contender", "seconds", "vs fluxfs", "entries", "class A", "class B",
                   "RSS MiB", "CPU s", "ls CPU s", "emulator CPU s"], rows))
    if base is None:
        print("fluxfs: NOT MEASURED (no binary or every run failed)")
    loads = [r["loadavg_before"] for rs in results.values() for r in rs]
    if loads:
        print(f"1-min load average before each measurement: {min(loads):.1f} to "
              f"{max(loads):.1f} (on {os.cpu_count()} cores)")
    if restarts:
        print(f"WARNING: the emulator exited during the run {len(restarts)} time(s): {restarts}"
              " (the measurement in progress then failed and is left out)")
    path = C.write_results("listing", {"args": {k: (sorted(v) if isinstance(v, set) else v)
                                                for k, v in vars(args).items()},
                                       "emulator_args": emu_args, "results": results,
                                       "emulator_restarts": restarts,
                                       "table": rows})
    print(f"raw: {path}")


if __name__ == "__main__":
    main()
