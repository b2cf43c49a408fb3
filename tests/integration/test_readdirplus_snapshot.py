"""readdirplus of a listing taken before a change made through the mount hands the kernel no
dentry or attributes for the changed name.

The stress test saw a removed name stat as the deleted object, and a writer's own stat right
after close() show the previous size, for the entry/attr timeout (60 s): a directory read
(readdirplus) was served from a listing whose requests were out while the unlink or the
commit completed, and readdirplus gives the kernel a dentry and attributes per entry. The
daemon's caches no longer store such a listing (test_racing_listing.py); this is the kernel's.

Fixed schedule, no draw: the directory's list request is held back (a stall of its reply)
while this thread unlinks or rewrites the file; the lister reads the directory (opendir lists
it, readdirplus serves that listing) once the reply comes.
"""

import errno
import os
import threading
import time

import pytest

from tests.integration.mount import faults_injected, mounts_fixture, read_plain, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "readdirplussnapshot"
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


def stat_of(path):
    try:
        st = os.stat(path)
    except OSError as e:
        return e.errno
    return f"exists ({st.st_size} B)"


def rewrite(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)  # commits


@pytest.mark.parametrize("op", ["unlink", "commit"])
def test_readdirplus_of_an_older_listing_gives_no_stale_entry(emulator, bucket, mount, op):
    d = f"plus-{op}"
    bucket.blob(f"{d}/f").upload_from_string(b"old bytes")
    bucket.blob(f"{d}/keep").upload_from_string(b"k")
    m = mount()
    directory, name = m.path / d, m.path / d / "f"
    assert read_plain(name) == b"old bytes"  # d and d/f known: the list request below is d's

    before = faults_injected(emulator)
    emulator.config(faults=[{"kind": "stall", "rate": 1, "count": 1, "seconds": STALL_S,
                             "op": "objects.list"}])
    listed = []

    def lister():
        try:  # opendir lists d (held back); readdirplus serves that listing
            listed.append(sorted(os.listdir(directory)))
        except OSError as e:  # asserted after the join
            listed.append(e)

    thread = threading.Thread(target=lister)
    thread.start()
    started = time.monotonic()
    try:
        wait_for(lambda: faults_injected(emulator) > before)
        time.sleep(0.3)  # the emulator answers (holding the reply back) right after the fault
        if op == "unlink":
            os.unlink(name)
        else:
            rewrite(name, b"new bytes, longer")
        assert thread.is_alive(), (
            f"the listing stalled {STALL_S} s but ended after {time.monotonic() - started:.1f} s:"
            f" the {op} did not happen inside the window (machine too slow?)")
    finally:
        thread.join(STALL_S + 60)
        emulator.config(faults=[])
    # The late listing was made before the change, and the directory was read from it.
    assert f"listed '{d}/': 2 entries" in m.log(), m.log()[-3000:]
    assert listed == [["f", "keep"]]

    if op == "unlink":
        assert bucket.get_blob(f"{d}/f") is None
        # Before the fix: exists (9 B) for the entry timeout, reads gave the deleted bytes.
        assert stat_of(name) == errno.ENOENT
        with pytest.raises(FileNotFoundError):
            read_plain(name)
        assert sorted(os.listdir(directory)) == ["keep"]
    else:
        # Before the fix: the old size for the attr timeout.
        assert stat_of(name) == "exists (17 B)"
        assert read_plain(name) == b"new bytes, longer"
