#!/usr/bin/env python3
"""How many FUSE IOCTLs CPython's open() sends per file (its isatty check), per interpreter.

Mounts an emulator bucket of 50 small files, and for each CPython found under ~/.pyenv/versions
(or given as arguments) reads every file with open(p, "rb").read(), counting fuse_op_ioctl in
MOUNT/.fluxfs/status before and after. Prints one line per interpreter. Nothing is asserted.

Usage: bench/isatty_ioctls.py [PYTHON ...]
"""
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.common as C  # noqa: E402

COUNT = 50
READ_ALL = ("import sys, glob\n"
            "for p in sorted(glob.glob(sys.argv[1] + '/p/*')):\n"
            "    open(p, 'rb').read()\n")


def ioctls(mnt: Path) -> int:
    for line in open(mnt / ".fluxfs" / "status"):
        if line.startswith("fuse_op_ioctl:"):
            return int(line.split(":")[1])
    return 0


def main():
    pythons = sys.argv[1:] or sorted(
        p for p in glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    emu = C.start_emulator(["--populate", f"small/p/:{COUNT}:4096:1"])
    mnt = Path(tempfile.mkdtemp(prefix="isatty-mnt-"))
    cmd = [str(C.fluxfs_binary()), "-f", "--endpoint", emu.url, "--anonymous", "small", str(mnt)]
    try:
        with C.Mount("fluxfs", cmd, mnt):
            for exe in pythons:
                version = subprocess.run([exe, "-c", "import sys; print(sys.version.split()[0])"],
                                         capture_output=True, text=True).stdout.strip()
                before = ioctls(mnt)
                subprocess.run([exe, "-c", READ_ALL, str(mnt)], check=True)
                time.sleep(0.3)  # the last RELEASE is asynchronous; IOCTLs are not, but settle
                print(f"CPython {version}: {ioctls(mnt) - before} IOCTLs for {COUNT} opens")
    finally:
        C.fuse_unmount(mnt)
        emu.close()


if __name__ == "__main__":
    main()
