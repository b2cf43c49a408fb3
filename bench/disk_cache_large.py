#!/usr/bin/env python3
"""What the disk cache saves on a large object read again after a remount (issue 16: gcsfuse's
file cache): a checkpoint-sized object is uploaded to the emulator, read whole through a mount
with --cache-dir, the mount is unmounted, a new mount with the same cache directory reads it
again. Prints the emulator's bytes out, media downloads and requests for each read. The figures
are counts, not timings, so they do not depend on the machine's load.

  .venv/bin/python bench/disk_cache_large.py [--mib 256]
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.mount import Mount  # noqa: E402
from tests.lib.emulator import Emulator, storage_client  # noqa: E402

BUCKET = "bench-cache"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="object size in MiB (default 256)")
    args = parser.parse_args()
    emu = Emulator(["--populate", f"{BUCKET}/x/:1:10"])
    try:
        data = os.urandom(args.mib << 20)
        storage_client(emu).bucket(BUCKET).blob("ckpt.bin").upload_from_string(data)
        cache = tempfile.mkdtemp(prefix="fluxfs-bench-cache-")
        for run in ("first read", "after a remount"):
            before = emu.stats()
            mount = Mount(emu, BUCKET, args=["--cache-dir", cache])
            try:
                with open(mount.path / "ckpt.bin", "rb") as f:
                    if f.read() != data:
                        sys.exit("bytes differ")
            finally:
                mount.unmount()
                mount.close()
            after = emu.stats()
            print(f"{run}: {after['bytes_out'] - before['bytes_out']:,} bytes out, "
                  f"{after['ops']['objects.download'] - before['ops']['objects.download']} "
                  f"media downloads, {after['requests'] - before['requests']} requests")
    finally:
        emu.close()


if __name__ == "__main__":
    main()
