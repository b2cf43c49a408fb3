#!/usr/bin/env python3
"""The pause a reader sees during a hand-over or a crash recovery, and the supervisor's memory
(issue 24).

One reader reads small files (whole, os.open/os.read, the bytes compared) in a loop from a
fluxfs mount of an emulator bucket. After a cold pass and two more (3 x --files reads) the event
happens, and the reader goes on for two passes again:
  --event handover  `fluxfs BUCKET MOUNT` is run again on the live mount (one mount per round);
  --event crash     the mount runs with --crash-restart and the serving process gets SIGKILL
                    (kill -9); the supervisor starts a new one on the kept connection. One
                    mount for all rounds: round K is the K-th crash restart, 2 x --files
                    reads after the previous one.
Reported per round: per-file read latency p50/p99/max of the reads before the event, of the
reads that overlapped it (started before it ended, finished after it began) and of those after
it, the longest single read, the event's time (hand-over: the new command's wall time; crash:
from the kill until `.fluxfs/status` answers with the new pid, and until the supervisor had
forked the new process; and the CPU time the new process had used by then: its start and the
recovery), and the count of errors (failed or wrong reads: must be 0).
With --event crash, also the memory: VmRSS and Pss (/proc/PID/smaps_rollup) of the supervisor
and of the serving process at steady state (after the warm-up, before the first kill) and after
the last restart, and the supervisor's memfd (size, and bytes allocated to it).
--drop-pages drops each file's pages before reading it (posix_fadvise DONTNEED), so every read
reaches the daemon (without it the kernel's page cache serves most bytes; OPEN always does).

Run from the repository root, with the emulator built (tests/emulator) and fluxfs built:
    .venv/bin/python bench/handover.py [--event handover|crash] [--files 200] [--rounds 3]
        [--drop-pages] [--fluxfs build/src/main/fluxfs]
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.mount import (  # noqa: E402
    Mount, children, crash_state_memfd, fluxfs_env, is_mounted, mount_status, pid_alive)
from tests.lib.emulator import Emulator, storage_client  # noqa: E402


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def summary(label, values):
    if not values:
        return f"{label} (0 reads)"
    return (f"{label} ({len(values)} reads) p50 {statistics.median(values):.2f} "
            f"p99 {pct(values, 99):.2f} max {max(values):.2f} ms")


def read_file(path, drop_pages):
    fd = os.open(path, os.O_RDONLY)
    try:
        if drop_pages:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class Reader(threading.Thread):
    """Reads f00000.. in order, again and again; samples are (start, end, ok)."""

    def __init__(self, mnt, contents, drop_pages):
        super().__init__(daemon=True)
        self.mnt, self.contents, self.drop_pages = mnt, contents, drop_pages
        self.samples = []
        self.failures = []
        self.stop = threading.Event()

    def run(self):
        i = 0
        files = len(self.contents)
        while not self.stop.is_set():
            start = time.monotonic()
            ok = True
            try:
                ok = read_file(self.mnt / f"f{i % files:05d}", self.drop_pages) == \
                    self.contents[i % files]
                if not ok:
                    self.failures.append(f"f{i % files:05d}: bytes differ")
            except OSError as e:
                ok = False
                self.failures.append(f"f{i % files:05d}: {e}")
            self.samples.append((start, time.monotonic(), ok))
            i += 1

    def wait_reads(self, n):
        while len(self.samples) < n:
            time.sleep(0.01)


def latencies(samples, t0, t1):
    """ms of the reads before t0, overlapping [t0, t1], after t1."""
    before = [(e - s) * 1e3 for s, e, _ in samples if e < t0]
    around = [(e - s) * 1e3 for s, e, _ in samples if s < t1 and e > t0]
    after = [(e - s) * 1e3 for s, e, _ in samples if s >= t1]
    return before, around, after


def handover_round(emulator, bucket, contents, fluxfs, drop_pages):
    files = len(contents)
    with tempfile.TemporaryDirectory(prefix="fluxfs-bench-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        first = Mount(emulator, bucket, mnt)
        reader = Reader(mnt, contents, drop_pages)
        reader.start()
        reader.wait_reads(3 * files)  # a cold pass, then two: "before" is steady state
        start = len(reader.samples) - 2 * files
        t0 = time.monotonic()
        cmd = [fluxfs, "--endpoint", emulator.url, "--anonymous", "--log-file",
               str(Path(tmp) / "new.log"), bucket, str(mnt)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=fluxfs_env())
        t1 = time.monotonic()
        assert done.returncode == 0, done.stderr
        first.wait()
        n = len(reader.samples)
        reader.wait_reads(n + 2 * files)
        reader.stop.set()
        reader.join()
        pid = int(mount_status(mnt)["pid"])
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
        while is_mounted(mnt):
            time.sleep(0.01)
        for _ in range(500):
            if not pid_alive(pid):
                break
            time.sleep(0.01)
        first.close()
        samples = reader.samples[start:]
        for failure in reader.failures[:5]:
            print(f"  {failure}")
        return (*latencies(samples, t0, t1), f"command {(t1 - t0) * 1e3:.0f} ms",
                len(reader.failures))


def cpu_s(pid):
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid):
    """VmRSS, Pss and Anonymous (private memory: heap, stacks) of a process, in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmRSS:")))
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    fields = {l.split(":")[0]: int(l.split()[1]) for l in rollup.splitlines()[1:]}
    return rss, fields["Pss"], fields["Anonymous"]


def memory_line(label, supervisor, serving):
    s_rss, s_pss, s_anon = memory(supervisor)
    c_rss, c_pss, c_anon = memory(serving)
    size, allocated = crash_state_memfd(supervisor)
    return (f"memory {label}: supervisor VmRSS {s_rss} KiB Pss {s_pss} KiB Anonymous {s_anon} "
            f"KiB | serving process VmRSS {c_rss} KiB Pss {c_pss} KiB Anonymous {c_anon} KiB | "
            f"memfd size {size >> 20} MiB, allocated {allocated >> 10} KiB")


def crash_rounds(emulator, bucket, contents, fluxfs, drop_pages, rounds):
    """Yields one result per kill, then the memory lines."""
    files = len(contents)
    with tempfile.TemporaryDirectory(prefix="fluxfs-bench-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        mount = Mount(emulator, bucket, mnt, ["--crash-restart"])
        reader = Reader(mnt, contents, drop_pages)
        try:
            supervisor = mount.proc.pid
            serving = int(mount_status(mnt)["pid"])
            assert children(supervisor) == [serving], (supervisor, serving)
            reader.start()
            reader.wait_reads(2 * files)
            steady = memory_line("at steady state", supervisor, serving)
            grown_from = (len(reader.samples), crash_state_memfd(supervisor)[1])
            results = []
            for k in range(rounds):
                # two passes since the last event (or the start): "before" is steady state
                reader.wait_reads(len(reader.samples) + 2 * files)
                n = len(reader.samples)
                if k == 0:
                    reads, allocated = len(reader.samples), crash_state_memfd(supervisor)[1]
                    growth = (f"the memfd grew {(allocated - grown_from[1]) >> 10} KiB over "
                              f"{reads - grown_from[0]} reads before the first kill "
                              f"({(allocated - grown_from[1]) / (reads - grown_from[0]):.0f} "
                              f"bytes per read)")
                t0 = time.monotonic()
                os.kill(serving, signal.SIGKILL)
                while True:
                    kids = children(supervisor)
                    if kids and kids != [serving]:
                        forked = time.monotonic()
                        break
                    time.sleep(0.0005)
                while True:  # blocks in the kernel until a serving process answers
                    new = int(mount_status(mnt)["pid"])
                    if new != serving:
                        break
                t1 = time.monotonic()
                started_cpu = cpu_s(new)
                serving = new
                reader.wait_reads(n + 2 * files)
                samples = reader.samples[n - 2 * files:n + 2 * files]
                results.append((*latencies(samples, t0, t1),
                                f"kill to answer {(t1 - t0) * 1e3:.0f} ms "
                                f"(fork after {(forked - t0) * 1e3:.0f} ms; the new process "
                                f"had used {started_cpu * 1e3:.0f} ms of CPU)",
                                sum(1 for _, _, ok in samples if not ok)))
            # after the last restart, one more pass of reads at steady state
            reader.wait_reads(len(reader.samples) + files)
            after = memory_line(f"after {rounds} restarts", supervisor, serving)
            restarts = mount_status(mnt)["crash_restarts"]
            notes = [steady, growth, after, f"crash_restarts: {restarts}; failed or wrong reads: "
                     f"{len(reader.failures)} of {len(reader.samples)}"]
            notes += [f"  {failure}" for failure in reader.failures[:5]]
        finally:
            reader.stop.set()
            reader.join(60)
            mount.close()
        return results, notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--event", choices=("handover", "crash"), default="handover")
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--drop-pages", action="store_true")
    ap.add_argument("--fluxfs", default=str(Path("build/src/main/fluxfs").resolve()))
    args = ap.parse_args()
    os.environ["FLUXFS"] = args.fluxfs
    emulator = Emulator([])
    try:
        gcs = storage_client(emulator)
        bucket = gcs.create_bucket(f"{args.event}-bench")
        contents = [os.urandom(16384) for _ in range(args.files)]
        for i, data in enumerate(contents):
            bucket.blob(f"f{i:05d}").upload_from_string(data)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
              f"{args.files} files of 16 KiB; {args.rounds} rounds of {args.event}"
              f"{'; pages dropped before each read' if args.drop_pages else ''}", flush=True)
        if args.event == "handover":
            results = (handover_round(emulator, bucket.name, contents, args.fluxfs,
                                      args.drop_pages) for _ in range(args.rounds))
            notes = []
        else:
            results, notes = crash_rounds(emulator, bucket.name, contents, args.fluxfs,
                                          args.drop_pages, args.rounds)
        errors = 0
        for r, (before, around, after, event, failed) in enumerate(results):
            errors += failed
            print(f"round {r + 1}: {summary('before', before)} | "
                  f"{summary('around the ' + args.event, around)} | {summary('after', after)}"
                  f" | {event} | errors {failed}", flush=True)
        for note in notes:
            print(note)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        sys.exit(1 if errors or any("  f" in note for note in notes) else 0)
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
