#!/usr/bin/env python3
"""Sequential read of 16 x 256 MiB objects by 4 readers (issue 3, "Benchmarks").

One emulator (--latency-ms 20, --populate bench/big/:16:256M) serves every contender; each run
does every contender once, in turn, with kernel caches dropped and the emulator's stats reset
before each:

  fluxfs       fresh mount of bench/big; 4 reader threads, each reading 4 whole files with
               1 MiB read() calls (unbuffered, into one reused buffer); the daemon's peak RSS
               (VmHWM) and CPU seconds (utime+stime) are read after the reads
  gcsfuse      fresh mount (--only-dir big) with each flag set of --gcsfuse-variants, same readers
  bound        a raw parallel ranged-GET client: curl --parallel (libcurl multi, C, keep-alive)
               issuing --range-mib ranged GETs of the 16 objects, --parallel-max at a time,
               bytes to /dev/null. No filesystem, no page cache: what the emulator and loopback
               can deliver to one well-behaved client at this latency

MiB/s = 4096 MiB / wall seconds of the reads (mount time excluded). Reported: medians, % of
the bound, requests by class (median over runs), RSS and CPU seconds of the daemons, and the
daemons' CPU seconds per GiB read: on a shared machine CPU seconds per GiB stay meaningful under
contention, MiB/s does not.

--tls is the HTTPS profile: the emulator serves TLS with a throwaway CA, which fluxfs trusts
through --ca-file, gcsfuse through SSL_CERT_FILE and the bound's curl through cacert.

  bench/seqread.py [--runs 3] [--only fluxfs,gcsfuse,bound] [--latency-ms 20] [--tls]
  bench/seqread.py --files 4 --only fluxfs --tls     # 1 GiB through fluxfs over HTTPS

Raw results: bench/results/seqread-*.json
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET, PREFIX = "bench", "big/"
MIB = 1 << 20
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

# gcsfuse v3.11.4 flag sets tried (name -> flags). "buffered-read" is its parallel prefetching
# reader for large sequential files; "kernel-reader" hands readahead to the kernel.
GCSFUSE_VARIANTS = {
    "default": [],
    "buffered-read": ["--enable-buffered-read"],
    "kernel-reader": ["--enable-kernel-reader"],
}


def read_files(mnt: Path, files: list[str], readers: int, read_size: int, timeout: float):
    """`readers` threads; reader i reads files[i::readers] start to end. Returns (seconds,
    bytes per file)."""
    sizes: dict[str, int] = {}
    errors: list[str] = []

    def reader(names):
        buf = bytearray(read_size)
        view = memoryview(buf)
        for name in names:
            got = 0
            try:
                fd = os.open(mnt / name, os.O_RDONLY)
                try:
                    while True:
                        n = os.readv(fd, [view])
                        if n == 0:
                            break
                        got += n
                finally:
                    os.close(fd)
            except OSError as e:
                errors.append(f"{name}: {e}")
            sizes[name] = got

    threads = [threading.Thread(target=reader, args=(files[i::readers],), daemon=True)
               for i in range(readers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, timeout - (time.perf_counter() - t0)))
    secs = time.perf_counter() - t0
    if any(t.is_alive() for t in threads):
        raise RuntimeError(f"readers still running after {timeout} s")
    if errors:
        raise RuntimeError("read errors: " + "; ".join(errors[:5]))
    return secs, sizes


def check_sizes(sizes, want):
    bad = {k: v for k, v in sizes.items() if v != want}
    if bad:
        raise RuntimeError(f"short reads: {dict(list(bad.items())[:4])}")
    return sum(sizes.values())


def run_mounted(name, cmd, emu, args, mnt, env=None):
    C.reset_stats(emu)
    t0 = time.perf_counter()
    with C.Mount(name, cmd, mnt, env=env, log=args.logdir / f"{name}.log") as m:
        mount_s = time.perf_counter() - t0
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        secs, sizes = read_files(mnt, args.files, args.readers, args.read_kib * 1024,
                                 args.timeout)
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        total = check_sizes(sizes, args.size_mib * MIB)
        usage = m.usage()
        counters = fluxfs_counters(mnt) if name == "fluxfs" else {}
    # The daemon's whole life (mount included, a negligible part) per GiB read.
    gib = total / (1 << 30)
    def per_gib(key):
        return usage[key] / gib if usage.get(key) is not None else None
    return {"seconds": secs, "bytes": total, "mib_s": total / MIB / secs, "mount_s": mount_s,
            "cpu_s_per_gib": per_gib("cpu_s"), "user_s_per_gib": per_gib("user_s"),
            "sys_s_per_gib": per_gib("sys_s"), **counters,
            "client_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            "cmd": " ".join(cmd), **usage}


def fluxfs_counters(mnt):
    """Fresh read-buffer memory (mapped and zeroed by the kernel) from .fluxfs/status."""
    try:
        text = (Path(mnt) / ".fluxfs" / "status").read_text()
    except OSError:
        return {}
    keys = ("memory_buffer_fresh_bytes", "memory_buffers_fresh", "memory_buffers_reused",
            "memory_peak", "http_connections_opened")
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k.strip() in keys:
            try:
                out[k.strip()] = int(v.strip())
            except ValueError:
                pass
    return out


def trust_bundle(emu, args):
    """--system-bundle: the emulator's CA appended to the system's CA bundle, so that a daemon
    loads a real-size bundle (~140 authorities) as it would against Cloud Storage."""
    if not (emu.ca_file and args.system_bundle):
        return None
    path = args.logdir / "ca-bundle-with-emulator.pem"
    path.write_bytes(Path(SYSTEM_BUNDLE).read_bytes() + b"\n" + Path(emu.ca_file).read_bytes())
    return path


def run_fluxfs(emu, args, mnt, extra=(), binary=None):
    bundle = trust_bundle(emu, args)
    tls_args = ["--ca-file", str(bundle)] if bundle else C.fluxfs_tls_args(emu)
    cmd = [str(binary or C.fluxfs_binary()), "--endpoint", emu.url, "--anonymous",
           *tls_args, *shlex.split(args.fluxfs_args), *extra, "-f",
           f"{BUCKET}/{PREFIX.rstrip('/')}", str(mnt)]
    return run_mounted("fluxfs", cmd, emu, args, mnt)


def run_gcsfuse(emu, args, mnt, flags):
    cmd = [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
           "--anonymous-access", "--foreground", "--implicit-dirs",
           f"--only-dir={PREFIX.rstrip('/')}", "--log-severity=warning", *flags,
           BUCKET, str(mnt)]
    bundle = trust_bundle(emu, args)
    env = {"SSL_CERT_FILE": str(bundle)} if bundle else C.tls_env(emu)
    return run_mounted("gcsfuse", cmd, emu, args, mnt, env=env)


def run_bound(emu, args, _mnt):
    """curl --parallel over every (object, range) pair; per-transfer options separated by
    `next` in a config file."""
    size = args.size_mib * MIB
    step = args.range_mib * MIB
    lines = []
    for name in args.files:
        url = f"{emu.url}/storage/v1/b/{BUCKET}/o/{(PREFIX + name).replace('/', '%2F')}?alt=media"
        for off in range(0, size, step):
            if lines:
                lines.append("next")
            lines += [f'url = "{url}"', f'range = "{off}-{min(off + step, size) - 1}"',
                      *([f'cacert = "{emu.ca_file}"'] if emu.ca_file else []),
                      'output = "/dev/null"', 'write-out = "%{size_download}\\n"', "silent",
                      "show-error", "fail"]
    with tempfile.NamedTemporaryFile("w", suffix=".curlrc", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        cfg = f.name
    C.reset_stats(emu)
    cmd = ["curl", "--parallel", "--parallel-immediate", "--parallel-max",
           str(args.parallel), "-K", cfg]
    try:
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        secs = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        os.unlink(cfg)
    if out.returncode != 0:
        raise RuntimeError(f"curl failed ({out.returncode}): {out.stderr[-2000:]}")
    total = sum(int(x) for x in out.stdout.split())
    if total != size * len(args.files):
        raise RuntimeError(f"bound client got {total} bytes, expected {size * len(args.files)}")
    return {"seconds": secs, "bytes": total, "mib_s": total / MIB / secs,
            "client_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            "cmd": f"curl --parallel --parallel-immediate --parallel-max {args.parallel} "
                   f"({len(args.files) * (size // step)} ranged GETs of {args.range_mib} MiB)"}


def contenders(args):
    out = []
    if "bound" in args.only:
        out.append((f"bound (curl, {args.parallel} x {args.range_mib} MiB ranges)", run_bound))
    if "fluxfs" in args.only:
        if C.fluxfs_binary():
            out.append(("fluxfs", run_fluxfs))
            for v in args.fluxfs_variants:
                out.append((f"fluxfs ({v})",
                            lambda e, a, m, fl=shlex.split(v): run_fluxfs(e, a, m, fl)))
            for v in args.fluxfs_bins:
                label, _, path = v.partition("=")
                out.append((f"fluxfs ({label})",
                            lambda e, a, m, b=path: run_fluxfs(e, a, m, binary=b)))
        else:
            print("fluxfs binary not found: the fluxfs column is NOT measured", flush=True)
    if "gcsfuse" in args.only:
        if C.gcsfuse_binary():
            for v in args.gcsfuse_variants:
                flags = GCSFUSE_VARIANTS[v] if v in GCSFUSE_VARIANTS else shlex.split(v)
                out.append((f"gcsfuse ({v})",
                            lambda e, a, m, fl=flags: run_gcsfuse(e, a, m, fl)))
        else:
            print("gcsfuse not found (bench/setup_contenders.sh): skipped", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files", type=int, default=16, dest="nfiles")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--read-kib", type=int, default=1024)
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--only", default="bound,fluxfs,gcsfuse")
    ap.add_argument("--gcsfuse-variants", nargs="+",
                    default=["default", "buffered-read", "kernel-reader"],
                    help=f"names from {list(GCSFUSE_VARIANTS)} or literal flag strings")
    ap.add_argument("--parallel", type=int, default=16, help="bound: transfers in flight")
    ap.add_argument("--range-mib", type=int, default=16, help="bound: bytes per ranged GET")
    ap.add_argument("--fluxfs-args", default="", help="extra flags for every fluxfs mount")
    ap.add_argument("--fluxfs-variant", action="append", default=[], dest="fluxfs_variants",
                    help="an extra fluxfs contender with these flags (repeatable), e.g. "
                         "--fluxfs-variant=--list-parallelism=32")
    ap.add_argument("--fluxfs-bin", action="append", default=[], dest="fluxfs_bins",
                    metavar="LABEL=PATH", help="an extra fluxfs contender running another "
                    "binary (repeatable; e.g. the build before a change, copied aside)")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--tls", action="store_true",
                    help="HTTPS profile: the emulator serves TLS (throwaway CA)")
    ap.add_argument("--system-bundle", action="store_true",
                    help="with --tls: daemons trust the system's CA bundle plus the emulator's CA "
                         f"({SYSTEM_BUNDLE}), a real-size bundle as against Cloud Storage")
    args = ap.parse_args()
    args.only = set(args.only.split(","))
    args.files = [f"{i:08d}" for i in range(args.nfiles)]
    args.logdir = C.RESULTS_DIR / "logs"
    args.logdir.mkdir(parents=True, exist_ok=True)

    emu_args = ["--latency-ms", str(args.latency_ms),
                "--populate", f"{BUCKET}/{PREFIX}:{args.nfiles}:{args.size_mib}M"]
    profile = "HTTPS" if args.tls else "HTTP"
    print(f"machine: {C.machine_line()}\nemulator ({profile}): {C.emulator_binary()} "
          f"{' '.join(emu_args)}", flush=True)
    todo = contenders(args)
    results, restarts = C.run_interleaved(
        emu_args, todo, args.runs, args,
        lambda r: f"{r['mib_s']:,.0f} MiB/s ({r['seconds']:.2f} s), {r['requests']} requests "
                  f"(A {r['class_a']}, B {r['class_b']})")

    def med(name, key):
        return C.median([r.get(key) for r in results.get(name, []) if "error" not in r])

    bound_name = next((n for n, _ in todo if n.startswith("bound")), None)
    bound = med(bound_name, "mib_s") if bound_name else None
    def served_per_read(name):
        return C.median([r["bytes_out"] / r["bytes"] for r in results.get(name, [])
                         if "error" not in r and r.get("bytes")])

    # The bound reads every byte exactly once, so its bytes_out/bytes is the emulator counter's
    # own factor (the emulator at the time of writing counts media bytes twice); dividing by it
    # leaves each contender's read amplification (1.00 = nothing fetched twice or wasted).
    factor = (served_per_read(bound_name) if bound_name else None) or 1.0
    def span(name, key):
        vals = [r.get(key) for r in results.get(name, []) if "error" not in r
                and r.get(key) is not None]
        if not vals:
            return "n/a"
        return f"{C.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})"

    rows = []
    for name, _ in todo:
        if not any("error" not in r for r in results[name]):
            rows.append([name, "failed"] + [""] * 12)
            continue
        v = med(name, "mib_s")
        rows.append([name, f"{v:,.0f}", f"{100 * v / bound:.0f}%" if bound else "n/a",
                     f"{med(name, 'seconds'):.2f}", C.fmt(med(name, "class_a"), 0),
                     C.fmt(med(name, "class_b"), 0), C.fmt(med(name, "vmhwm_mib"), 1),
                     C.fmt(med(name, "cpu_s"), 2), span(name, "cpu_s_per_gib"),
                     span(name, "user_s_per_gib"), span(name, "sys_s_per_gib"),
                     C.fmt(med(name, "emulator_cpu_s"), 2),
                     C.fmt(med(name, "client_cpu_s"), 2),
                     C.fmt(served_per_read(name) / factor, 2)])
    total_mib = args.nfiles * args.size_mib
    print()
    print(f"Sequential read over {profile}, {args.nfiles} x {args.size_mib} MiB by "
          f"{args.readers} readers "
          f"({args.read_kib} KiB reads), emulator --latency-ms {args.latency_ms}, medians of "
          f"{args.runs} runs ({time.strftime('%Y-%m-%d')}, {C.machine_line()})")
    print(C.table(["contender", "MiB/s", "% of bound", f"s for {total_mib} MiB", "class A",
                   "class B", "RSS MiB", "CPU s", "CPU s/GiB (min-max)", "user s/GiB",
                   "system s/GiB", "emulator CPU s", "client CPU s",
                   "served / read"], rows))
    print("CPU s/GiB: the daemon's CPU seconds (user+system) per GiB read, meaningful under "
          "contention; MiB/s is not when the machine is shared (see the load average)")
    print(f"served / read: emulator bytes_out per byte read, divided by the bound's "
          f"({factor:.2f}, the counter's own factor)")
    if "fluxfs" in args.only and med("fluxfs", "mib_s") is None:
        print("fluxfs: NOT MEASURED (no binary or every run failed)")
    for name, _ in todo:
        fresh = [r.get("memory_buffer_fresh_bytes") for r in results.get(name, [])
                 if "error" not in r and r.get("memory_buffer_fresh_bytes") is not None]
        if fresh:
            print(f"{name}: fresh read-buffer MiB per run: "
                  + ", ".join(f"{f / MIB:.0f}" for f in fresh))
        conns = [r.get("http_connections_opened") for r in results.get(name, [])
                 if "error" not in r and r.get("http_connections_opened") is not None]
        if conns:
            print(f"{name}: connections opened per run: " + ", ".join(map(str, conns)))
    loads = [r["loadavg_before"] for rs in results.values() for r in rs]
    if loads:
        print(f"1-min load average before each measurement: {min(loads):.1f} to "
              f"{max(loads):.1f} (on {os.cpu_count()} cores)")
    if restarts:
        print(f"WARNING: the emulator exited during the run {len(restarts)} time(s): {restarts}"
              " (the measurement in progress then failed and is left out)")
    path = C.write_results("seqread", {"args": {k: (sorted(v) if isinstance(v, set) else v)
                                                for k, v in vars(args).items()},
                                       "emulator_args": emu_args, "results": results,
                                       "emulator_restarts": restarts,
                                       "table": rows})
    print(f"raw: {path}")


if __name__ == "__main__":
    main()
