"""The per-request cost of --crash-restart (issue 24), not a test: run it by name,
    FLUXFS_BEFORE=/path/to/parent/fluxfs .venv/bin/python -m pytest \\
        tests/integration/bench_crash_overhead.py -s -q
Three contenders, interleaved, 3 runs each: the parent build, this build with --no-crash-restart, this build with
--crash-restart. Each run reads 1,000 small files (4 KiB) twice: once cold, once with the page
cache dropped (posix_fadvise DONTNEED: every read reaches the daemon; the daemon's memory cache
serves it), and prints the serving daemon's CPU seconds (/proc/PID/stat, utime+stime) per
1,000 files and files/s for the second pass, and with --crash-restart the supervisor's CPU
seconds over the same pass (it only waits: expect 0). FLUXFS_RUNS sets the runs (default 3),
FLUXFS_PASSES the measured passes per run (default 1; CPU time comes in clock ticks of 10 ms:
take 10 for figures finer than that).
Nothing is asserted."""

import os
import statistics
import time
from pathlib import Path

import pytest

from tests.integration.mount import Mount, read_plain

pytestmark = pytest.mark.emulator_only
FILES = 1000


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serving_pid(mountpoint: Path) -> int:
    text = read_plain(mountpoint / ".fluxfs" / "status").decode()
    return int(dict(l.split(": ", 1) for l in text.splitlines() if ": " in l)["pid"])


def one_pass(mountpoint: Path):
    for i in range(FILES):
        fd = os.open(mountpoint / f"s/f{i:05d}", os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.read(fd, 1 << 16)
        finally:
            os.close(fd)


def test_overhead(emulator, gcs, tmp_path):
    bucket = gcs.create_bucket("overhead")
    for i in range(FILES):
        bucket.blob(f"s/f{i:05d}").upload_from_string(os.urandom(4096))
    here = str(Path(__file__).resolve().parents[2] / "build" / "src" / "main" / "fluxfs")
    # The supervisor is the default since 27712a0: "this" is the one-process mount.
    contenders = {"parent": (os.environ["FLUXFS_BEFORE"], []),
                  "this": (here, ["--no-crash-restart"]),
                  "this --crash-restart": (here, ["--crash-restart"])}
    results = {name: [] for name in contenders}
    supervisor_cpu = []
    passes = int(os.environ.get("FLUXFS_PASSES", "1"))
    print(f"\nload average at the start {os.getloadavg()}")
    for run in range(int(os.environ.get("FLUXFS_RUNS", "3"))):
        for name, (binary, args) in contenders.items():
            os.environ["FLUXFS"] = binary
            mp = tmp_path / f"m{run}{len(results[name])}{name[:4]}{len(args)}"
            mp.mkdir()
            mount = Mount(emulator, bucket.name, mp, args)
            try:
                one_pass(mp)  # cold: fetches, fills the daemon's memory cache
                pid = serving_pid(mp)
                supervised = pid != mount.proc.pid
                s0 = cpu_s(mount.proc.pid) if supervised else 0.0
                c0, t0 = cpu_s(pid), time.monotonic()
                for _ in range(passes):
                    one_pass(mp)
                c1, t1 = cpu_s(pid), time.monotonic()
                if supervised:
                    supervisor_cpu.append(round(cpu_s(mount.proc.pid) - s0, 2))
                reads = FILES * passes
                results[name].append(((c1 - c0) * 1000 / reads, reads / (t1 - t0)))
            finally:
                mount.close()
    print(f"load average at the end {os.getloadavg()}")
    for name, rows in results.items():
        cpu = statistics.median(r[0] for r in rows)  # per 1,000 reads
        rate = statistics.median(r[1] for r in rows)
        print(f"{name:24s} daemon CPU s per 1,000 files {cpu:.3f}  files/s {rate:.0f}  "
              f"runs {[(round(a, 3), round(b)) for a, b in rows]}")
    print(f"supervisor CPU s per run of {FILES * passes} reads: {supervisor_cpu}")
