#!/usr/bin/env python3
"""Fresh memory and daemon CPU of one sequential read: 4 readers x 256 MiB (1 MiB reads), emulator
at 20 ms; prints the seconds, the daemon's CPU seconds, and the memory budget's counters from
MOUNT/.fluxfs/status (memory_buffer_fresh_bytes: bytes of read buffers that were new memory,
which the kernel zeroes as they are first filled; memory_buffers_reused: from the pool).

Usage: bench/seqread_memory.py [FLUXFS_BINARY]   (default: build/src/main/fluxfs)
"""
import os, subprocess, sys, tempfile, time, threading
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C
binary = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent.parent / "build/src/main/fluxfs")
emu = C.start_emulator(["--latency-ms", "20", "--populate", "big/b/:4:268435456:1"])
mnt = Path(tempfile.mkdtemp())
cmd = [binary, "-f", "--endpoint", emu.url, "--anonymous", "big", str(mnt)]
try:
    with C.Mount("fluxfs", cmd, mnt) as m:
        c0 = C.cpu_seconds(m.proc.pid)
        def rd(p):
            with open(p, "rb", buffering=0) as f:
                while f.read(1 << 20): pass
        ts = [threading.Thread(target=rd, args=(mnt / "b" / f"{i:08d}",)) for i in range(4)]
        t0 = time.monotonic(); [t.start() for t in ts]; [t.join() for t in ts]
        dt = time.monotonic() - t0
        print(f"1 GiB in {dt:.2f} s, daemon CPU {C.cpu_seconds(m.proc.pid) - c0:.2f} s")
        for line in open(mnt / ".fluxfs" / "status"):
            if line.startswith(("memory_", "refetched")): print(line.strip())
finally:
    C.fuse_unmount(mnt); emu.close()
