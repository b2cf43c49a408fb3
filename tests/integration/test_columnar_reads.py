"""Columnar readers fetch about the bytes they read (issue 22, item 13): pyarrow reading 2 of a
Parquet file's 10 columns, on a fresh mount each, against the sizes of those column chunks plus
the footer (from the file's own metadata).

pyarrow reads the footer, then each wanted column chunk whole (a jump, then a sequential run of
one chunk), several chunks at once from parallel threads (read_table reads the footer through
one handle and the chunks through another; use_threads=False, pre_buffer=False reads one chunk
at a time: the third case). Before the fix a chunk's continuation read after another chunk's
jump counted as a jump of its own (1 MiB at least), and one that followed its own jump opened a
full readahead window (8 MiB GETs rounded to the chunk grid): 4.25x here. Now an object whose
first read was its tail, and whose reader then jumps more than 4 MiB before it (not to offset 0),
is columnar: interleaved streams are followed, and each stream that began with a jump reads
ahead at most 1/32 of what it has read (docs/performance.md, "Columnar readers"). The footer is
read before any chunk, so the file is known as columnar before any chunk's window could open,
whatever order the threads' reads arrive in: the bound does not depend on timing.

What bounds the ratio, per column chunk: the kernel's own readahead past the chunk's end (up to
two of its windows; the mount is given read_ahead_kb=128, which is also the kernel's default
when fluxfs cannot raise it, so the bound holds as root and not), page alignment (8 KiB), and
fluxfs's window (1/32 of the chunk). Column chunks of 8 MiB keep all of it under 1.1x (1.064x
measured, the same every run, also beside 2 CPU hogs).
"""

import os

import pytest

from tests.integration.mount import Mount

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

pytestmark = pytest.mark.emulator_only

BUCKET = "columnar"
MiB = 1 << 20
ROWS_PER_GROUP = 1 << 20  # float64: 8 MiB per column chunk
ROW_GROUPS = 2
COLUMNS = [f"c{i}" for i in range(10)]
WANTED = ["c3", "c7"]
TARGET = 1.1
MOUNT_ARGS = ["-o", "read_ahead_kb=128"]


@pytest.fixture(scope="module")
def parquet(emulator, gcs, tmp_path_factory):
    """Uploads a 160 MiB Parquet file (10 float64 columns, 2 row groups, no compression, so the
    chunks are as large as their data); returns (local path, bytes wanted)."""
    path = tmp_path_factory.mktemp("parquet") / "table.parquet"
    rng = np.random.default_rng(22)
    table = pa.table({name: rng.random(ROWS_PER_GROUP * ROW_GROUPS) for name in COLUMNS})
    pq.write_table(table, path, row_group_size=ROWS_PER_GROUP, compression="none",
                   use_dictionary=False)
    meta = pq.ParquetFile(path).metadata
    wanted, last_end = 0, 0
    for rg in range(meta.num_row_groups):
        for ci in range(meta.num_columns):
            col = meta.row_group(rg).column(ci)
            start = col.dictionary_page_offset or col.data_page_offset
            last_end = max(last_end, start + col.total_compressed_size)
            if col.path_in_schema in WANTED:
                wanted += col.total_compressed_size
    footer = os.path.getsize(path) - last_end
    bucket = gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)
    bucket.blob("table.parquet").upload_from_filename(path)
    return path, wanted + footer


def served_reading(emulator, read):
    """Bytes the emulator served while read(mount path) ran on a fresh mount, less those the
    kernel asked for again after dropping them (counted apart by the daemon)."""
    mount = Mount(emulator, BUCKET, args=MOUNT_ARGS)
    try:
        emulator._control("POST", "/_emulator/reset?stats_only=true", body={})
        result = read(mount.path / "table.parquet")
        served = emulator.stats()["bytes_out"]
        status = (mount.path / ".fluxfs" / "status").read_text()
        refetched = int(dict(line.split(": ", 1) for line in status.splitlines())
                        ["refetched_bytes"])
        assert mount.alive(), mount.log()
        assert not mount.unexpected_errors(), mount.log()[-4000:]
    finally:
        mount.close()
    return served - refetched, result


def read_table(path):
    return pq.read_table(path, columns=WANTED)


def iter_batches(path):
    with pq.ParquetFile(path) as f:
        return pa.Table.from_batches(list(f.iter_batches(columns=WANTED, batch_size=65536)))


def read_table_one_thread(path):
    # One chunk at a time, nothing interleaved: recognized by the footer read first.
    return pq.read_table(path, columns=WANTED, use_threads=False, pre_buffer=False)


@pytest.mark.parametrize("read", [read_table, iter_batches, read_table_one_thread],
                         ids=["read_table", "iter_batches", "read_table_one_thread"])
def test_two_of_ten_columns_fetch_about_their_chunks(emulator, parquet, read):
    local, wanted = parquet
    served, got = served_reading(emulator, read)
    assert got.equals(pq.read_table(local, columns=WANTED)), "columns differ from the local copy"
    ratio = served / wanted
    print(f"{read.__name__}: served {served} bytes for {wanted} wanted: {ratio:.3f}x")
    assert ratio <= TARGET, f"{read.__name__} fetched {ratio:.2f}x the column chunks and footer"
