#!/usr/bin/env python3
"""The daemon's CPU to start: mount, list the root once, read /proc/PID/stat (issue 23).

Usage: bench/startup_cpu.py [--rounds 5] BINARY [BINARY ...]
Each round mounts every binary in turn against one emulator (20 ms to first byte, plain HTTP),
so builds are compared interleaved. Prints each binary's CPU seconds per round and the median.
Nothing is asserted.
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    emu = C.start_emulator(["--latency-ms", "20", "--populate", "bkt/seed/:1:1K"])
    results = {b: [] for b in args.binaries}
    with emu:
        for _ in range(args.rounds):
            for binary in args.binaries:
                mnt = Path(tempfile.mkdtemp(prefix="fluxfs-startup-"))
                cmd = [binary, "--endpoint", emu.url, "--anonymous", "-f", "bkt", str(mnt)]
                with C.Mount("fluxfs", cmd, mnt,
                             log=Path(tempfile.gettempdir()) / "fluxfs-startup.log") as m:
                    list(mnt.iterdir())
                    time.sleep(0.3)
                    results[binary].append(C.cpu_seconds(m.proc.pid))
                mnt.rmdir()
    for binary, values in results.items():
        print(f"{binary}: daemon CPU s after mount + one listing "
              f"{[round(v, 2) for v in values]}, median {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
