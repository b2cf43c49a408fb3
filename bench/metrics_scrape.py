"""What Prometheus scraping costs the hot path: daemon CPU seconds per 1,000 files of a cached
epoch (every file read once more after a first epoch filled the content and page caches), with
the /metrics listener on and nobody scraping, and with a scrape every 100 ms during the epoch;
and the daemon CPU of one scrape on its own (scrapes, no reads).
CPU seconds (utime+stime of the daemon from /proc) are meaningful under contention; wall time is
reported but means little on a shared machine.

    .venv/bin/python bench/metrics_scrape.py --files 2000 --size 32K --seconds 10 --runs 3

Per run and mode: mount (fluxfs -f --prometheus-port P), a cold epoch, then cached epochs
measured together (at least --epochs, and until --seconds have passed, so that the scraper
makes --seconds / --interval scrapes); the modes alternate within each run so the machine's load hits them
alike. Also reported: FUSE requests and Cloud Storage requests per cached epoch (from the
metrics themselves), scrapes made and their size. Raw JSON in bench/results/.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET = "scrape"
PREFIX = "ds/"


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        return reply.read().decode()


def metric_sum(text: str, name: str) -> float:
    """Sum of the samples of one family (all label sets)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def read_epoch(root: Path, names: list[str]) -> int:
    total = 0
    for name in names:
        fd = os.open(root / name, os.O_RDONLY)
        try:
            while chunk := os.read(fd, 1 << 20):
                total += len(chunk)
        finally:
            os.close(fd)
    return total


class Scraper(threading.Thread):
    def __init__(self, port: int, interval: float):
        super().__init__(daemon=True)
        self.port, self.interval = port, interval
        self.stop_event = threading.Event()
        self.count = 0
        self.bytes = 0
        self.failures = 0

    def run(self):
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            try:
                self.bytes += len(scrape(self.port))
                self.count += 1
            except OSError:
                self.failures += 1
            next_at += self.interval
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))


def run_mode(emu, mnt: Path, mode: str, names: list[str], size: int, epochs: int,
             seconds: float, interval: float) -> dict:
    port = free_port()
    cmd = [str(C.fluxfs_binary()), "-f", "--endpoint", emu.url, "--anonymous",
           "--prometheus-port", str(port), BUCKET, str(mnt)]
    with C.Mount(f"fluxfs-{mode}", cmd, mnt) as m:
        assert read_epoch(mnt, names) == size * len(names)  # cold: fills the caches
        before = scrape(port)
        requests_before = C.stats(emu).get("requests", 0)
        scraper = Scraper(port, interval) if mode.startswith("scrape") else None
        cpu0 = C.cpu_seconds(m.proc.pid)
        t0 = time.monotonic()
        if scraper:
            scraper.start()
        done = 0
        if mode == "scrape-only":
            time.sleep(seconds)  # no reads: the daemon's CPU is the scrapes' own
            done = 1
        else:
            while done < epochs or time.monotonic() - t0 < seconds:
                assert read_epoch(mnt, names) == size * len(names)
                done += 1
        epochs = done
        wall = time.monotonic() - t0
        if scraper:
            scraper.stop_event.set()
            scraper.join()
        cpu1 = C.cpu_seconds(m.proc.pid)
        after = scrape(port)
        requests_after = C.stats(emu).get("requests", 0)
    files = epochs * len(names) if mode != "scrape-only" else 0
    scrapes = scraper.count if scraper else 0
    return {
        "cpu_ms_per_scrape": (cpu1 - cpu0) * 1000.0 / scrapes if mode == "scrape-only" and
        scrapes else None,
        "mode": mode,
        "epochs": epochs,
        "files": files,
        "cpu_s": cpu1 - cpu0,
        "cpu_s_per_1000_files": (cpu1 - cpu0) * 1000.0 / files if files else None,
        "wall_s": wall,
        "fuse_requests_per_epoch": (metric_sum(after, "fs_ops_count")
                                    - metric_sum(before, "fs_ops_count")) / epochs,
        "gcs_requests_per_epoch": (requests_after - requests_before) / epochs,
        "scrapes": scraper.count if scraper else 0,
        "scrape_failures": scraper.failures if scraper else 0,
        "scrape_bytes_each": (scraper.bytes / scraper.count) if scraper and scraper.count else 0,
        "loadavg": os.getloadavg(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--size", default="32K")
    parser.add_argument("--epochs", type=int, default=3,
                        help="fewest cached epochs measured per run")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="cached epochs go on until this long has passed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between scrapes")
    args = parser.parse_args()
    size = parse_size(args.size)
    names = [f"{PREFIX}{i:08d}" for i in range(args.files)]
    emu = C.start_emulator(["--populate", f"{BUCKET}/{PREFIX}:{args.files}:{size}:7"])
    mnt = Path(tempfile.mkdtemp(prefix="fluxfs-bench-mnt-"))
    results: dict[str, list] = {"idle-listener": [], "scrape": [], "scrape-only": []}
    try:
        for run in range(args.runs):
            for mode in results:
                r = run_mode(emu, mnt, mode, names, size, args.epochs, args.seconds,
                             args.interval)
                results[mode].append(r)
                per = (f"{r['cpu_s_per_1000_files']:.3f} s/1000 files" if r["files"] else
                       f"{r['cpu_ms_per_scrape']:.2f} ms/scrape")
                print(f"run {run + 1} {mode:14} {r['files']} files, cpu {r['cpu_s']:.2f} s = "
                      f"{per}, wall {r['wall_s']:.1f} s, "
                      f"{r['scrapes']} scrapes of {r['scrape_bytes_each']:.0f} B, FUSE "
                      f"{r['fuse_requests_per_epoch']:.0f}/epoch, GCS "
                      f"{r['gcs_requests_per_epoch']:.0f}/epoch, load {r['loadavg'][0]:.1f}",
                      flush=True)
    finally:
        emu.close()
        try:
            mnt.rmdir()
        except OSError:
            pass
    rows = []
    for mode, runs in results.items():
        rows.append([mode, C.fmt(C.median([r["cpu_s_per_1000_files"] for r in runs]), 3),
                     C.fmt(C.median([r["cpu_ms_per_scrape"] for r in runs]), 2),
                     C.fmt(C.median([r["wall_s"] for r in runs]), 1),
                     C.fmt(C.median([r["fuse_requests_per_epoch"] for r in runs]), 0),
                     C.fmt(C.median([r["gcs_requests_per_epoch"] for r in runs]), 0),
                     C.fmt(C.median([r["scrapes"] for r in runs]), 0)])
    print(C.table(["mode", "daemon CPU s / 1000 files (median)", "CPU ms / scrape", "wall s", "FUSE req/epoch",
                   "GCS req/epoch", "scrapes"], rows))
    path = C.write_results("metrics-scrape", {"args": vars(args), "results": results})
    print(f"raw results: {path}")


if __name__ == "__main__":
    main()
