#!/usr/bin/env python3
"""Checks that the pinned gcsfuse runs against the emulator unchanged: mount, list (with an
implicit sub-directory), read every file and compare it with a direct media GET, write a 5 MiB
file and stat it. Prints the emulator operations gcsfuse used; exit status 1 on any mismatch.

  bench/check_gcsfuse.py
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402


def main():
    if not C.gcsfuse_binary():
        sys.exit("gcsfuse not found: run bench/setup_contenders.sh")
    emu = C.start_emulator(["--populate", "bench/v/:20:3M", "--populate", "bench/v/sub/:3:1K"])
    mnt = Path(tempfile.mkdtemp(prefix="gcsfuse-check-"))
    cmd = [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
           "--anonymous-access", "--foreground", "--implicit-dirs", "--log-severity=warning",
           "bench", str(mnt)]
    failures = []
    try:
        with C.Mount("gcsfuse", cmd, mnt) as m:
            C.reset_stats(emu)
            names = sorted(os.listdir(mnt / "v"))
            want = [f"{i:08d}" for i in range(20)] + ["sub"]
            if names != want:
                failures.append(f"listing: {names[:5]}... ({len(names)} entries)")
            for n in names:
                if n == "sub":
                    continue
                got = hashlib.sha256((mnt / "v" / n).read_bytes()).hexdigest()
                with urllib.request.urlopen(f"{emu.url}/storage/v1/b/bench/o/v%2F{n}"
                                            "?alt=media") as r:
                    ref = hashlib.sha256(r.read()).hexdigest()
                if got != ref:
                    failures.append(f"content of v/{n} differs")
            sub = sorted(os.listdir(mnt / "v" / "sub"))
            if sub != ["00000000", "00000001", "00000002"]:
                failures.append(f"implicit dir v/sub lists {sub}")
            data = os.urandom(5 << 20)
            (mnt / "v" / "written.bin").write_bytes(data)
            if (mnt / "v" / "written.bin").stat().st_size != len(data):
                failures.append("size of the written file")
            with urllib.request.urlopen(f"{emu.url}/storage/v1/b/bench/o/v%2Fwritten.bin"
                                        "?alt=media") as r:
                if r.read() != data:
                    failures.append("written object's content")
            ops = {k: v for k, v in C.stats(emu)["ops"].items() if v}
            print(f"gcsfuse {C.gcsfuse_binary()}: operations seen (including this script's "
                  f"{20 + 1} verification GETs as objects.download): {ops}")
            if m.proc.poll() is not None:
                failures.append(f"gcsfuse exited: {m.tail()}")
    finally:
        emu.close()
        C.fuse_unmount(mnt)
        mnt.rmdir()
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)
    print("gcsfuse against the emulator: mount, list, implicit dirs, read, write: OK")


if __name__ == "__main__":
    main()
