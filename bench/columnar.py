#!/usr/bin/env python3
"""Columnar reads, small random reads and a sequential read (issue 22, item 13).

One emulator (--latency-ms 10, objects in memory) serves two fluxfs builds, interleaved run by
run, each case on a fresh mount with the kernel caches dropped:

  columnar    pyarrow pq.read_table(columns=[c3, c7]) of a Parquet file of 10 float64 columns,
              2 row groups (8 MiB per column chunk, 160 MiB); wanted = those chunks + footer
  random      400 preads of 4-64 KiB at offsets drawn from a fixed seed in a 1 GiB object
  sequential  the 1 GiB object read front to back with 1 MiB reads

Reported per case (medians of --runs): bytes the emulator served per byte wanted, GET requests,
the daemon's CPU seconds, seconds and MiB/s.

  bench/columnar.py [--runs 3] --builds new=build/src/main/fluxfs,old=/tmp/x/fluxfs
  [--read-ahead-kb N]   (mount option read_ahead_kb; default: fluxfs's own)

Raw results: bench/results/columnar-*.json
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

MIB = 1 << 20
BUCKET = "bench"
COLUMNS = [f"c{i}" for i in range(10)]
WANTED = ["c3", "c7"]


def make_parquet(path: Path) -> int:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = 1 << 20
    rng = np.random.default_rng(22)
    pq.write_table(pa.table({c: rng.random(2 * rows) for c in COLUMNS}), path,
                   row_group_size=rows, compression="none", use_dictionary=False)
    meta = pq.ParquetFile(path).metadata
    wanted, last = 0, 0
    for rg in range(meta.num_row_groups):
        for ci in range(meta.num_columns):
            col = meta.row_group(rg).column(ci)
            last = max(last, col.data_page_offset + col.total_compressed_size)
            if col.path_in_schema in WANTED:
                wanted += col.total_compressed_size
    return wanted + os.path.getsize(path) - last


def case_columnar(mnt: Path):
    import pyarrow.parquet as pq
    t = pq.read_table(mnt / "col" / "table.parquet", columns=WANTED)
    return t.nbytes


def case_random(mnt: Path):
    rng = random.Random(13)
    size = 1 << 30
    fd = os.open(mnt / "seq" / "00000000", os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        total = 0
        for _ in range(400):
            n = rng.choice([4, 8, 16, 32, 64]) * 1024
            total += len(os.pread(fd, n, rng.randrange(0, size - n)))
    finally:
        os.close(fd)
    return total


def case_sequential(mnt: Path):
    total = 0
    with open(mnt / "seq" / "00000000", "rb", buffering=0) as f:
        while True:
            b = f.read(MIB)
            if not b:
                break
            total += len(b)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--builds", required=True, help="name=path,name=path")
    ap.add_argument("--read-ahead-kb", type=int, default=0)
    ap.add_argument("--cases", default="columnar,random,sequential")
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="columnar-bench-"))
    local = tmp / "table.parquet"
    wanted_col = make_parquet(local)
    emu = C.start_emulator(["--latency-ms", "10", "--populate", f"{BUCKET}/seq/:1:1G"])
    os.environ["STORAGE_EMULATOR_HOST"] = emu.url
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    gcs = storage.Client(project="bench", credentials=AnonymousCredentials())
    gcs.bucket(BUCKET).blob("col/table.parquet").upload_from_filename(local)
    cases = {"columnar": (case_columnar, wanted_col), "random": (case_random, None),
             "sequential": (case_sequential, 1 << 30)}
    mnt = tmp / "mnt"
    results: dict = {}
    print(C.machine_line(), flush=True)
    try:
        for run in range(args.runs):
            for case in args.cases.split(","):
                fn, wanted = cases[case]
                for name, binary in builds:
                    C.drop_caches()
                    load = os.getloadavg()[0]
                    cmd = [binary, "-f", "--endpoint", emu.url, "--anonymous"]
                    if args.read_ahead_kb:
                        cmd += ["-o", f"read_ahead_kb={args.read_ahead_kb}"]
                    with C.Mount(name, cmd + [BUCKET, str(mnt)], mnt) as m:
                        C.reset_stats(emu)
                        cpu0 = m.usage()["cpu_s"]
                        t0 = time.monotonic()
                        got = fn(mnt)
                        secs = time.monotonic() - t0
                        cpu = m.usage()["cpu_s"] - cpu0
                        s = C.stats(emu)
                    w = wanted if wanted else got
                    r = {"served_per_wanted": s["bytes_out"] / w, "gets":
                         s["ops"].get("objects.download", 0), "cpu_s": cpu, "seconds": secs,
                         "mib_s": got / MIB / secs, "loadavg": load}
                    results.setdefault(case, {}).setdefault(name, []).append(r)
                    print(f"run {run + 1} {case:10s} {name:6s} served/wanted "
                          f"{r['served_per_wanted']:.3f} GETs {r['gets']} CPU {cpu:.2f} s "
                          f"{secs:.2f} s {r['mib_s']:.0f} MiB/s load {load:.1f}", flush=True)
    finally:
        emu.stop()
        emu.close()
    rows = []
    for case, by in results.items():
        for name, rs in by.items():
            rows.append([case, name] + [C.fmt(C.median([r[k] for r in rs]), 3 if k ==
                                             "served_per_wanted" else 2)
                                        for k in ("served_per_wanted", "gets", "cpu_s",
                                                  "seconds", "mib_s")])
    print(C.table(["case", "build", "served/wanted", "GETs", "daemon CPU s", "s", "MiB/s"],
                  rows))
    print("results:", C.write_results("columnar", {"args": vars(args), "results": results}))


if __name__ == "__main__":
    main()
