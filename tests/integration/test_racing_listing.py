"""A name removed through the mount stays removed when a listing that started before the
removal comes back after it.

The stress test saw removed names come back (11 of 40 rounds): a listing of the directory
(opendir, or a lookup in a directory being written) sent its objects.list before an unlink or
rename and got its reply after the unlink had invalidated the caches, so it stored the old
name again: in the directory listing cache (default TTLs), or in the metadata cache too when
listings feed it (a list TTL shorter than the stat TTL). For up to the TTL the name then
stat'ed as the deleted object and reads gave its bytes or ESTALE.

Here the window is made to last on a fixed schedule, no draw: the directory's list request
is held back (a stall of its reply, after the emulator computed it) while this thread unlinks
or renames the file; the directory is opened without reading it, so nothing reaches the
kernel from the late listing and what the next stat sees comes from the daemon's caches.
"""

import errno
import os
import threading
import time

import pytest

from tests.integration.mount import faults_injected, mounts_fixture, read_plain, stat_errno, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "racinglisting"
STALL_S = 4


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def bucket(gcs):
    return gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)


mounts = mounts_fixture(BUCKET)


@pytest.fixture
def mount(bucket, mounts):
    return mounts


@pytest.mark.parametrize("op", ["unlink", "rename"])
@pytest.mark.parametrize("caches", ["listing-cache", "metadata-cache"])
def test_removed_name_stays_removed_after_a_racing_listing(emulator, bucket, mount, op, caches):
    d = f"{op}-{caches}"
    bucket.blob(f"{d}/f").upload_from_string(b"deleted bytes")
    bucket.blob(f"{d}/keep").upload_from_string(b"k")
    # metadata-cache: no listing cache (list TTL 0), so listings feed the stat cache.
    m = mount(*(["--list-ttl", "0"] if caches == "metadata-cache" else []))
    directory, name = m.path / d, m.path / d / "f"
    assert read_plain(name) == b"deleted bytes"  # d and d/f known: no list request below but one

    before = faults_injected(emulator)
    emulator.config(faults=[{"kind": "stall", "rate": 1, "count": 1, "seconds": STALL_S,
                             "op": "objects.list"}])
    lister_error = []

    def lister():
        try:  # opendir lists the directory; nothing is read, so the kernel learns no names
            os.close(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))
        except OSError as e:  # asserted after the join
            lister_error.append(e)

    thread = threading.Thread(target=lister)
    thread.start()
    started = time.monotonic()
    try:
        wait_for(lambda: faults_injected(emulator) > before)
        time.sleep(0.3)  # the emulator answers (holding the reply back) right after the fault
        if op == "unlink":
            os.unlink(name)
        else:
            os.rename(name, m.path / d / "g")
        assert thread.is_alive(), (
            f"the listing stalled {STALL_S} s but ended after {time.monotonic() - started:.1f} s:"
            f" the {op} did not happen inside the window (machine too slow?)")
    finally:
        thread.join(STALL_S + 60)
        emulator.config(faults=[])
    assert not lister_error
    # The late listing was made before the removal (it still had f).
    assert f"listed '{d}/': 2 entries" in m.log(), m.log()[-3000:]

    assert bucket.get_blob(f"{d}/f") is None
    # Before the fix: exists (13 B) for the TTL, and reads gave the deleted bytes or ESTALE.
    assert stat_errno(name) == errno.ENOENT
    with pytest.raises(FileNotFoundError):
        read_plain(name)
    expected = ["g", "keep"] if op == "rename" else ["keep"]
    assert sorted(os.listdir(directory)) == expected
    if op == "rename":
        assert read_plain(m.path / d / "g") == b"deleted bytes"
