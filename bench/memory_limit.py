#!/usr/bin/env python3
"""Does --memory-limit bound the daemon? (issue 22, item 11)

8 parallel sequential readers (64 MiB objects, 1 MiB reads) and one writer (256 MiB in 1 MiB
writes) run at once on a mount with --memory-limit LIMIT (default 64M); the daemon's RSS is
sampled every 50 ms from /proc. Prints the peak RSS (VmHWM), the RSS when idle afterwards,
the daemon's CPU seconds, and the memory lines of MOUNT/.fluxfs/status.

Usage: bench/memory_limit.py [--limit 64M] [FLUXFS_BINARY ...]   (default build/src/main/fluxfs)
Several binaries are measured one after the other, in one run, against one emulator.
"""
import argparse, os, subprocess, sys, tempfile, threading, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C

def status_kb(pid, key):
    return C.rss_kib(pid, key)  # the supervisor and the serving process (C.daemon_tree)

def run(binary, emu, limit, tag):
    mnt = Path(tempfile.mkdtemp())
    cmd = [binary, "-f", "--endpoint", emu.url, "--anonymous", "--memory-limit", limit,
           "big", str(mnt)]
    out = {}
    with C.Mount("fluxfs", cmd, mnt) as m:
        pid = m.proc.pid
        c0 = C.cpu_seconds(pid)
        base = status_kb(pid, "VmRSS")
        peak = [0]; stop = threading.Event()
        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], status_kb(pid, "VmRSS")); time.sleep(0.05)
        def rd(p):
            with open(p, "rb", buffering=0) as f:
                while f.read(1 << 20): pass
        def wr(p):
            buf = os.urandom(1 << 20)
            with open(p, "wb") as f:
                for _ in range(256): f.write(buf)
        s = threading.Thread(target=sample); s.start()
        ts = [threading.Thread(target=rd, args=(mnt / "b" / f"{i:08d}",)) for i in range(8)]
        ts.append(threading.Thread(target=wr, args=(mnt / f"w-{tag}",)))
        t0 = time.monotonic(); [t.start() for t in ts]; [t.join() for t in ts]
        dt = time.monotonic() - t0
        time.sleep(1.0)
        stop.set(); s.join()
        if os.environ.get("SMAPS"):
            subprocess.run([sys.executable, os.environ["SMAPS"], str(pid)])
        out = dict(seconds=dt, cpu=C.cpu_seconds(pid) - c0, base=base / 1024,
                   peak=max(peak[0], status_kb(pid, "VmHWM")) / 1024,
                   idle=status_kb(pid, "VmRSS") / 1024)
        lines = [l.strip() for l in open(mnt / ".fluxfs" / "status")
                 if l.startswith(("memory_", "write_buffer", "rss"))]
        os.unlink(mnt / f"w-{tag}")
    C.fuse_unmount(mnt)
    print(f"{tag}: {binary}\n  --memory-limit {limit}: {out['seconds']:.2f} s, daemon CPU "
          f"{out['cpu']:.2f} s, RSS at mount {out['base']:.0f} MiB, peak {out['peak']:.0f} MiB, "
          f"idle after {out['idle']:.0f} MiB")
    for l in lines: print("   ", l)
    return out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", default="64M")
    ap.add_argument("binaries", nargs="*")
    a = ap.parse_args()
    bins = a.binaries or [str(Path(__file__).resolve().parent.parent / "build/src/main/fluxfs")]
    emu = C.start_emulator(["--latency-ms", "5", "--populate", "big/b/:8:67108864:1"])
    try:
        for i, b in enumerate(bins):
            run(b, emu, a.limit, f"#{i}")
    finally:
        emu.close()

if __name__ == "__main__":
    main()
