#!/usr/bin/env python3
"""The pause a reader sees during a hand-over (issue 24).

One reader reads small files (whole, os.open/os.read) in a loop from a fluxfs mount of an
emulator bucket; after WARMUP reads, `fluxfs BUCKET MOUNT` is run again on the live mount
(the hand-over), and the reader goes on for as many reads again. Reported: per-file read
latency p50/p99/max of the reads before the hand-over, and of the reads that overlapped it
(started before the new command returned and finished after it was started), the longest
single read, the hand-over command's wall time, and the count of errors (must be 0).

Run from the repository root, with the emulator built (tests/emulator) and fluxfs built:
    .venv/bin/python bench/handover.py [--files 200] [--rounds 3] [--fluxfs build/src/main/fluxfs]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.mount import Mount, fluxfs_env, is_mounted  # noqa: E402
from tests.lib.emulator import Emulator, storage_client  # noqa: E402


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def read_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


def one_round(emulator, bucket, files, fluxfs):
    with tempfile.TemporaryDirectory(prefix="fluxfs-bench-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        first = Mount(emulator, bucket, mnt)
        samples = []  # (start, end, ok)
        stop = threading.Event()

        def reader():
            i = 0
            while not stop.is_set():
                start = time.monotonic()
                ok = True
                try:
                    read_file(mnt / f"f{i % files:05d}")
                except OSError:
                    ok = False
                samples.append((start, time.monotonic(), ok))
                i += 1

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        while len(samples) < 2 * files:
            time.sleep(0.01)
        t0 = time.monotonic()
        cmd = [fluxfs, "--endpoint", emulator.url, "--anonymous", "--log-file",
               str(Path(tmp) / "new.log"), bucket, str(mnt)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=fluxfs_env())
        t1 = time.monotonic()
        assert done.returncode == 0, done.stderr
        first.wait()
        n = len(samples)
        while len(samples) < n + 2 * files:
            time.sleep(0.01)
        stop.set()
        thread.join()
        before = [(e - s) * 1e3 for s, e, ok in samples if e < t0]
        around = [(e - s) * 1e3 for s, e, ok in samples if s < t1 and e > t0]
        errors = sum(1 for _, _, ok in samples if not ok)
        status = (mnt / ".fluxfs" / "status").read_text()
        pid = int(next(line.split()[1] for line in status.splitlines()
                       if line.startswith("pid:")))
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
        while is_mounted(mnt):
            time.sleep(0.01)
        for _ in range(500):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)
        first.close()
        return before, around, (t1 - t0) * 1e3, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fluxfs", default=str(Path("build/src/main/fluxfs").resolve()))
    args = ap.parse_args()
    os.environ["FLUXFS"] = args.fluxfs
    emulator = Emulator([])
    try:
        gcs = storage_client(emulator)
        bucket = gcs.create_bucket("handover-bench")
        for i in range(args.files):
            bucket.blob(f"f{i:05d}").upload_from_string(os.urandom(16384))
        print(f"load average: {os.getloadavg()[0]:.2f}; {args.files} files of 16 KiB; "
              f"{args.rounds} rounds")
        for r in range(args.rounds):
            before, around, wall, errors = one_round(emulator, bucket.name, args.files,
                                                     args.fluxfs)
            print(f"round {r + 1}: before p50 {statistics.median(before):.2f} ms "
                  f"p99 {pct(before, 99):.2f} max {max(before):.2f} | "
                  f"around the hand-over ({len(around)} reads) "
                  f"p50 {statistics.median(around):.2f} p99 {pct(around, 99):.2f} "
                  f"max {max(around):.2f} ms | command {wall:.0f} ms | errors {errors}")
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
