#!/usr/bin/env python3
"""The crash journal under inode churn (issue 24): bytes per churned inode, and the CPU the
serving process spends on it.

A --crash-restart mount of an emulator bucket of --files small files; each round looks every
file up (stat) and then has the kernel forget them (`echo 2 > /proc/sys/vm/drop_caches`, as
root; waits until the daemon's inode count is back down). Per round: the supervisor's memfd
(bytes allocated to it), the journal's committed bytes (status crash_journal_bytes; absent in
builds before compaction), the serving process's CPU seconds (utime + stime) for the round,
and the compactions and their CPU (status crash_journal_compaction_cpu_us). At the end: the
memfd's growth per churned inode over the rounds after the first.

Run from the repository root as root, with the emulator built (tests/emulator):
    .venv/bin/python bench/crash_journal.py [--files 5000] [--rounds 6]
        [--fluxfs build/src/main/fluxfs]
"""
import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.mount import Mount, crash_state_memfd, mount_status  # noqa: E402
from tests.lib.emulator import Emulator, storage_client  # noqa: E402


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def name(i):
    return f"churn/c{i % 10}/f{i:06d}.bin"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--fluxfs", default=str(Path("build/src/main/fluxfs").resolve()))
    args = ap.parse_args()
    os.environ["FLUXFS"] = args.fluxfs
    emulator = Emulator([])
    try:
        bucket = storage_client(emulator).create_bucket("journal-bench")
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: bucket.blob(name(i)).upload_from_string(b"x" * 100),
                          range(args.files)))
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
              f"{args.fluxfs}; {args.files} files, {args.rounds} rounds", flush=True)
        with tempfile.TemporaryDirectory(prefix="fluxfs-bench-") as tmp:
            mnt = Path(tmp) / "mnt"
            mnt.mkdir()
            mount = Mount(emulator, bucket.name, mnt, ["--crash-restart"])
            try:
                supervisor = mount.proc.pid
                serving = int(mount_status(mnt)["pid"])
                allocated = []
                for r in range(args.rounds):
                    cpu0 = cpu_s(serving)
                    for i in range(args.files):
                        os.stat(mnt / name(i))
                    deadline = time.monotonic() + 300
                    while True:
                        with open("/proc/sys/vm/drop_caches", "w") as f:
                            f.write("2\n")
                        st = mount_status(mnt)
                        if int(st.get("inodes", 0)) < 100 or time.monotonic() > deadline:
                            break
                    cpu = cpu_s(serving) - cpu0
                    allocated.append(crash_state_memfd(supervisor)[1])
                    print(f"round {r + 1}: memfd allocated {allocated[-1]} B, journal "
                          f"{st.get('crash_journal_bytes', '-')} B, serving CPU {cpu:.2f} s, "
                          f"compactions {st.get('crash_journal_compactions', '-')} "
                          f"({st.get('crash_journal_compaction_cpu_us', '-')} us CPU in all)",
                          flush=True)
                churned = args.files * (args.rounds - 1)
                print(f"memfd growth per churned inode after round 1: "
                      f"{(allocated[-1] - allocated[0]) / churned:.1f} B")
                mount.unmount()
            finally:
                mount.close()
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
