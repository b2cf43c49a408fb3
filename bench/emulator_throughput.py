#!/usr/bin/env python3
"""The emulator's own throughput, with no injected latency (issue 2, "Performance").

  (a) small GETs/s: wrk with keep-alive, 64 / 256 / 512 connections, media GETs
      (/storage/v1/b/B/o/NAME?alt=media) of 2 KiB synthetic objects, names rotated by a Lua
      script over 10,000 objects;
  (b) large GETs GiB/s: N parallel curl processes, each downloading its own 256 MiB synthetic
      objects to /dev/null over one keep-alive connection;
  (c) 512 concurrent keep-alive connections: wrk -c 512; peak_connections from the stats and
      wrk's socket/status error counts;
  (d) listing a 1,000,000-object prefix page by page (maxResults=1000, one keep-alive
      connection, sequential), then the first 50, middle 50 and last 50 pages fetched again
      by their page tokens, interleaved, 3 times: median ms/page of each window.

Every client here runs on the same 2 cores as the server, so the figures are a floor for the
server, not a ceiling. Each repetition starts a fresh emulator; the table shows medians.

  bench/emulator_throughput.py [--runs 3] [--duration 10] [--quick]

Needs wrk (apt-get install wrk) and curl. Raw results: bench/results/emulator_throughput-*.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET = "bench"
SMALL_PREFIX, SMALL_COUNT, SMALL_SIZE = "small/", 10_000, "2K"
LARGE_PREFIX, LARGE_SIZE_MIB = "large/", 256
LIST_PREFIX, LIST_COUNT = "flat/", 1_000_000
LUA = C.BENCH_DIR / "lua" / "rotate_get.lua"


def raise_fd_limit(n=65536):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(max(n, soft), hard) if hard != resource.RLIM_INFINITY else n
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ValueError, OSError):
        pass


def run_wrk(url, conns, threads, duration, env_extra):
    env = dict(os.environ, **env_extra)
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration}s", "--timeout", "10s",
           "-s", str(LUA), url]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=duration + 60)
    m = re.search(r"^WRKJSON (\{.*\})$", out.stdout, re.M)
    if not m:
        raise RuntimeError(f"wrk printed no summary:\n{out.stdout}\n{out.stderr}")
    res = json.loads(m.group(1))
    secs = res["duration_us"] / 1e6
    res["rps"] = res["requests"] / secs
    res["mib_s"] = res["bytes"] / secs / 2**20
    res["errors"] = sum(res[k] for k in ("connect", "read", "write", "status", "timeout"))
    res["cmd"] = " ".join(cmd)
    return res


def small_gets(emu, conns, duration):
    C.reset_stats(emu)
    threads = 2
    res = run_wrk(emu.url, conns, threads, duration,
                  {"WRK_BUCKET": BUCKET, "WRK_PREFIX": SMALL_PREFIX.replace("/", "%2F"),
                   "WRK_COUNT": str(SMALL_COUNT)})
    st = C.stats(emu)
    res["peak_connections"] = st.get("peak_connections")
    res["server_requests"] = st.get("requests")
    return res


def large_gets(emu, clients, per_client, large_count):
    """`clients` curl processes in parallel, each fetching `per_client` distinct 256 MiB
    objects in a row over one connection (curl reuses it for URLs on one command line)."""
    C.reset_stats(emu)
    procs = []
    t0 = time.perf_counter()
    for c in range(clients):
        urls = []
        for k in range(per_client):
            idx = (c * per_client + k) % large_count
            name = f"{LARGE_PREFIX}{idx:08d}".replace("/", "%2F")
            urls += [f"{emu.url}/storage/v1/b/{BUCKET}/o/{name}?alt=media", "-o", "/dev/null"]
        procs.append(subprocess.Popen(["curl", "-sS", "--fail", "-w", "%{size_download}\\n",
                                       *urls], stdout=subprocess.PIPE, text=True))
    total = 0
    failed = 0
    for p in procs:
        out, _ = p.communicate(timeout=600)
        failed += p.returncode != 0
        total += sum(int(x) for x in out.split())
    secs = time.perf_counter() - t0
    want = clients * per_client * LARGE_SIZE_MIB * 2**20
    st = C.stats(emu)
    return {"clients": clients, "per_client": per_client, "bytes": total, "expected": want,
            "seconds": secs, "gib_s": total / secs / 2**30, "failed_clients": failed,
            "server_bytes_out": st.get("bytes_out"), "peak_connections":
            st.get("peak_connections")}


def paged_listing(emu, count):
    """Sequential pages over one keep-alive connection; returns per-page seconds. The client
    only extracts nextPageToken (and counts items) with a regex, to keep its own cost small."""
    u = urlsplit(emu.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    token = None
    per_page, items, tokens = [], 0, []
    tok_re = re.compile(rb'"nextPageToken"\s*:\s*"([^"]+)"')
    name_re = re.compile(rb'"kind"\s*:\s*"storage#object"')
    from urllib.parse import quote
    C.reset_stats(emu)
    while True:
        path = (f"/storage/v1/b/{BUCKET}/o?prefix={quote(LIST_PREFIX, safe='')}"
                f"&maxResults=1000")
        if token:
            path += "&pageToken=" + quote(token, safe="")
        tokens.append(path)
        t0 = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        per_page.append(time.perf_counter() - t0)
        if resp.status != 200:
            raise RuntimeError(f"list page {len(per_page)}: HTTP {resp.status}: {body[:300]!r}")
        items += len(name_re.findall(body))
        m = tok_re.search(body)
        if not m:
            break
        token = m.group(1).decode()
    n = len(per_page)
    mid = n // 2
    windows = {"first50": range(0, min(50, n)), "mid50": range(max(0, mid - 25), mid + 25),
               "last50": range(max(0, n - 50), n)}

    # The walk above is sensitive to whatever else the machine does meanwhile; so the same
    # pages are fetched again by their page tokens, the three windows interleaved (first, mid,
    # last, first, ...), `reps` times, so that noise falls on all three alike.
    probe = {w: [] for w in windows}
    reps = 3
    for _ in range(reps):
        for j in range(50):
            for w, idx in windows.items():
                if j >= len(idx):
                    continue
                t0 = time.perf_counter()
                conn.request("GET", tokens[idx[j]])
                resp = conn.getresponse()
                resp.read()
                probe[w].append(time.perf_counter() - t0)
                if resp.status != 200:
                    raise RuntimeError(f"re-fetch of page {idx[j]}: HTTP {resp.status}")
    conn.close()

    def ms(xs):
        return C.median(xs) * 1000 if xs else None

    out = {"pages": n, "items": items, "expected_items": count, "total_s": sum(per_page)}
    for w, idx in windows.items():
        out[f"{w}_walk_ms"] = ms([per_page[i] for i in idx])
        out[f"{w}_ms"] = ms(probe[w])
    return out


def one_run(args, k):
    large_count = args.large_clients * args.large_per_client
    emu_args = ["--populate", f"{BUCKET}/{SMALL_PREFIX}:{SMALL_COUNT}:{SMALL_SIZE}",
                "--populate", f"{BUCKET}/{LARGE_PREFIX}:{large_count}:{LARGE_SIZE_MIB}M",
                "--populate", f"{BUCKET}/{LIST_PREFIX}:{args.list_count}:1K"]
    t0 = time.perf_counter()
    emu = C.start_emulator(emu_args)
    startup = time.perf_counter() - t0
    run = {"run": k, "emulator_args": emu_args, "startup_s": startup,
           "loadavg_before": os.getloadavg()}
    try:
        run["small"] = {}
        for conns in args.conns:
            r = small_gets(emu, conns, args.duration)
            run["small"][conns] = r
            print(f"  run {k}: small GETs c={conns}: {r['rps']:,.0f}/s, errors {r['errors']}, "
                  f"peak_connections {r['peak_connections']}", flush=True)
        r = large_gets(emu, args.large_clients, args.large_per_client, large_count)
        run["large"] = r
        print(f"  run {k}: large GETs x{args.large_clients}: {r['gib_s']:.2f} GiB/s "
              f"({r['bytes'] / 2**30:.1f} GiB in {r['seconds']:.2f} s)", flush=True)
        r = paged_listing(emu, args.list_count)
        run["listing"] = r
        print(f"  run {k}: listing {r['items']:,} objects in {r['pages']} pages "
              f"({r['total_s']:.2f} s); walk: first50 {r['first50_walk_ms']:.2f} ms/page, mid50 "
              f"{r['mid50_walk_ms']:.2f}, last50 {r['last50_walk_ms']:.2f}; interleaved "
              f"re-fetch: first50 {r['first50_ms']:.2f}, mid50 {r['mid50_ms']:.2f}, last50 "
              f"{r['last50_ms']:.2f}", flush=True)
        emu.check_alive()
    finally:
        emu.stop()
        emu.close()
    run["loadavg_after"] = os.getloadavg()
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--conns", type=int, nargs="+", default=[64, 256, 512])
    ap.add_argument("--large-clients", type=int, default=4)
    ap.add_argument("--large-per-client", type=int, default=4)
    ap.add_argument("--list-count", type=int, default=LIST_COUNT)
    ap.add_argument("--quick", action="store_true", help="1 run, 3 s wrk, 100k listing")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.duration, args.list_count = 1, 3, 100_000
    for tool in ("wrk", "curl"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (apt-get install {tool})")
    raise_fd_limit()
    print(f"emulator: {C.emulator_binary()}  machine: {C.machine_line()}", flush=True)

    runs = [one_run(args, k + 1) for k in range(args.runs)]

    rows = []
    for conns in args.conns:
        rps = C.median([r["small"][conns]["rps"] for r in runs])
        errs = max(r["small"][conns]["errors"] for r in runs)
        peak = C.median([r["small"][conns]["peak_connections"] for r in runs])
        p99 = C.median([r["small"][conns]["lat_p99_us"] for r in runs]) / 1000
        rows.append([f"(a/c) small GETs ({SMALL_SIZE}), wrk -t2 -c{conns}",
                     f"{rps:,.0f} GETs/s", f"p99 {p99:.1f} ms, peak_connections "
                     f"{C.fmt(peak)}, errors {errs}"])
    gib = C.median([r["large"]["gib_s"] for r in runs])
    short = sum(r["large"]["bytes"] != r["large"]["expected"] for r in runs)
    rows.append([f"(b) large GETs, {args.large_clients} curl x {args.large_per_client} x "
                 f"{LARGE_SIZE_MIB} MiB", f"{gib:.2f} GiB/s",
                 f"short downloads: {short}"])
    for part in ("first50", "mid50", "last50"):
        v = C.median([r["listing"][f"{part}_ms"] for r in runs])
        walk = C.median([r["listing"][f"{part}_walk_ms"] for r in runs])
        rows.append([f"(d) list {args.list_count:,} objects, {part} pages", f"{v:.2f} ms/page",
                     f"in the sequential walk: {walk:.2f} ms/page"])
    tot = C.median([r["listing"]["total_s"] for r in runs])
    rows.append([f"(d) list {args.list_count:,} objects, whole listing", f"{tot:.2f} s",
                 f"{runs[0]['listing']['pages']} pages, {runs[0]['listing']['items']:,} items"])
    print()
    print(f"Emulator throughput, medians of {args.runs} runs, no injected latency "
          f"({time.strftime('%Y-%m-%d')}, {C.machine_line()})")
    print(C.table(["measure", "median", "notes"], rows))
    loads = [f"{r['loadavg_before'][0]:.1f}" for r in runs]
    print(f"1-min load average before each run: {', '.join(loads)} (on {os.cpu_count()} cores)")
    path = C.write_results("emulator_throughput", {"args": vars(args), "runs": runs,
                                                   "table": rows})
    print(f"raw: {path}")


if __name__ == "__main__":
    main()
