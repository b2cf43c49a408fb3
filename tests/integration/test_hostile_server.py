"""A server that lies or breaks (tests/lib/hostile.py in front of the emulator): no lie becomes
a wrong byte, a short file, a hang or a directory that cannot be listed.

* a list whose nextPageToken repeats ends with EIO, quickly, instead of looping;
* a list that never ends stops when the process listing it is gone;
* a name holding a NUL is hidden like other impossible names, the directory still lists;
* a whole-object reply shorter than the object is retried, and EIO when it stays short;
* a connection left out of step (garbage reply) is dropped and the request retried on a new one;
* a reply nested 400,000 levels deep (a stack overflow for a recursive JSON parser) is EIO, and
  the daemon lives on;
* a large object read front to back whose bytes were corrupted in transit fails with EIO at the
  end (CRC32C of everything served), and a new open reads it right.
"""

import errno
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration.mount import Mount
from tests.lib.hostile import HostileProxy
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "hostile"
SEED = 5
SMALL = 100_000
BIG = 12 * 1024 * 1024  # above --small-file-threshold: ranged GETs, no whole-object check
# Guard against a hang (not a timing assertion): a looping listing fails instead of hanging.
LIST_GUARD_S = 90


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/token/:2500:10:{SEED}",
            "--populate", f"{BUCKET}/endless/:10:10:{SEED}",
            "--populate", f"{BUCKET}/nul/:20:10:{SEED}",
            "--populate", f"{BUCKET}/deep/:5:10:{SEED}",
            "--populate", f"{BUCKET}/small/:40:{SMALL}:{SEED}",
            "--populate", f"{BUCKET}/big/:4:{BIG}:{SEED}"]


@pytest.fixture(scope="module")
def proxy(emulator):
    with HostileProxy(emulator.url) as p:
        yield p


@pytest.fixture(scope="module")
def fluxfs_mount(proxy, emulator):
    mount = Mount(proxy, BUCKET, args=["--max-retries", "3", "--negative-ttl", "0",
                                       "--compose", "off", "--request-deadline", "60s"])
    try:
        yield mount
        assert mount.alive(), f"fluxfs died during the module\n--- log ---\n{mount.log()}"
        assert mount.unmount() == 0
    finally:
        mount.close()


@pytest.fixture
def lies(proxy):
    proxy.clear()
    yield proxy
    proxy.clear()


@pytest.fixture(scope="module")
def generations(gcs, emulator):
    return {b.name: b.generation for b in gcs.bucket(BUCKET).list_blobs()}


def list_in_child(path):
    """os.listdir in a child process: (errno or 0, names), or pytest fails after a guard."""
    code = ("import os, sys\n"
            "try:\n"
            "    print('\\n'.join(sorted(os.listdir(sys.argv[1]))))\n"
            "except OSError as e:\n"
            "    sys.exit(e.errno)\n")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                              text=True, timeout=LIST_GUARD_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"listing {path} did not end within {LIST_GUARD_S} s")
    return done.returncode, done.stdout.split()


def test_repeated_page_token_ends_with_eio(fluxfs_mount, lies):
    fluxfs_mount.expect_errors(r"error core: .*page token")
    lies.add("repeat_token", op="list")
    before = lies.requests
    rc, _ = list_in_child(fluxfs_mount.path / "token")
    assert rc == errno.EIO
    # It noticed at the first repeat, not after a long loop.
    assert lies.requests - before < 50
    lies.clear()
    # An honest server again: the directory lists in full.
    rc, names = list_in_child(fluxfs_mount.path / "token")
    assert rc == 0 and len(names) == 2500


def test_endless_listing_stops_when_the_reader_is_gone(fluxfs_mount, lies):
    os.stat(fluxfs_mount.path / "endless")  # known to be a directory before the lies start
    lies.add("endless", op="list")
    child = subprocess.Popen([sys.executable, "-c", "import os, sys; os.listdir(sys.argv[1])",
                              str(fluxfs_mount.path / "endless")])
    # Wait until the listing is well under way (pages keep coming), then kill the reader.
    deadline = time.monotonic() + LIST_GUARD_S
    while lies.applied["endless"] < 20:
        assert time.monotonic() < deadline, "the endless listing never started"
        assert child.poll() is None, "the listing ended on an endless server"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(LIST_GUARD_S)
    # The daemon stops asking for pages: no new page request for 2 s, within the guard (it
    # would go on forever otherwise).
    deadline = time.monotonic() + LIST_GUARD_S
    while True:
        seen = lies.applied["endless"]
        time.sleep(2.0)
        if lies.applied["endless"] == seen:
            break
        assert time.monotonic() < deadline, "the listing went on after its reader was killed"
    lies.clear()
    rc, names = list_in_child(fluxfs_mount.path / "endless")
    assert rc == 0 and len(names) == 10


def test_nul_name_is_hidden_not_eio(fluxfs_mount, lies):
    lies.add("nul_name", op="list")
    rc, names = list_in_child(fluxfs_mount.path / "nul")
    assert rc == 0
    assert names == [f"{i:08d}" for i in range(20)]
    assert lies.applied["nul_name"] >= 1


@pytest.mark.parametrize("op", ["stat", "list"])
def test_deeply_nested_reply_is_eio_not_a_crash(fluxfs_mount, lies, generations, op):
    """400,000 nested arrays in 800 KB: yajl_tree_free recursing per level would overflow the
    daemon's stack; the depth check refuses the reply before the tree is built."""
    fluxfs_mount.expect_errors(r"error (gcs|core): ")
    lies.add("deep_json", op=op)
    if op == "stat":
        with pytest.raises(OSError) as err:
            os.stat(fluxfs_mount.path / "small" / "00000031")
        assert err.value.errno == errno.EIO
    else:
        rc, _ = list_in_child(fluxfs_mount.path / "deep")
        assert rc == errno.EIO
    assert lies.applied["deep_json"] >= 1
    assert fluxfs_mount.alive(), fluxfs_mount.log()
    lies.clear()
    if op == "stat":
        read_small(fluxfs_mount, generations, 31)
    else:
        rc, names = list_in_child(fluxfs_mount.path / "deep")
        assert rc == 0 and len(names) == 5


def read_small(mount, generations, index):
    name = f"small/{index:08d}"
    data = (mount.path / name).read_bytes()
    assert len(data) == SMALL, name
    assert first_mismatch(name, generations[name], SEED, 0, data) is None, name


def test_short_whole_object_reply_is_retried(fluxfs_mount, lies, generations):
    os.stat(fluxfs_mount.path / "small" / "00000000")  # metadata known, content not
    lies.add("short_body", op="media", count=1)
    read_small(fluxfs_mount, generations, 0)
    assert lies.applied["short_body"] == 1


@pytest.mark.parametrize("lie,index", [("short_body", 17), ("short_object", 22)])
def test_short_whole_object_reply_is_eio_never_a_short_file(fluxfs_mount, lies, generations, lie,
                                                            index):
    name = f"small/{index:08d}"
    fluxfs_mount.expect_errors(rf"error gcs: objects\.get\(media\) gs://hostile/{name}")
    os.stat(fluxfs_mount.path / name)
    lies.add(lie, op="media")
    with pytest.raises(OSError) as err:
        (fluxfs_mount.path / name).read_bytes()
    assert err.value.errno == errno.EIO
    assert lies.applied[lie] >= 2  # retried
    lies.clear()
    read_small(fluxfs_mount, generations, index)


# Scattered indices: reads in listing order would have the prefetcher fetch the next files.
@pytest.mark.parametrize("lie,op,index", [("bad_reply", "stat", 25), ("bad_reply", "media", 8),
                                          ("garbage_after", "stat", 33),
                                          ("reset", "media", 12)])
def test_out_of_step_connection_is_replaced(fluxfs_mount, lies, generations, lie, op, index):
    if op == "media":
        os.stat(fluxfs_mount.path / "small" / f"{index:08d}")
    lies.add(lie, op=op, count=1)
    read_small(fluxfs_mount, generations, index)
    if lie == "garbage_after":
        # The next request on that connection reads the garbage (or the connection is seen to
        # be out of step and dropped): either way every read succeeds.
        for i in (38, 3, 29, 21, 5, 16):
            read_small(fluxfs_mount, generations, i)
    assert lies.applied[lie] == 1
    # No ERROR line (the log guard): the retries hid the broken connection.


def read_big(mount, generations, index):
    name = f"big/{index:08d}"
    data = (mount.path / name).read_bytes()
    assert len(data) == BIG, name
    assert first_mismatch(name, generations[name], SEED, 0, data) is None, name


def test_front_to_back_read_of_corrupted_bytes_is_eio(fluxfs_mount, lies, generations):
    name = "big/00000000"
    fluxfs_mount.expect_errors(rf"error io: '{name}' generation \d+: .* CRC32C")
    os.stat(fluxfs_mount.path / name)
    lies.add("corrupt", op="media", count=1)  # one byte of one ranged GET
    with pytest.raises(OSError) as err:
        (fluxfs_mount.path / name).read_bytes()
    assert err.value.errno == errno.EIO
    assert lies.applied["corrupt"] == 1
    # A new open fetches again (the kernel's pages of the bad pass are dropped).
    read_big(fluxfs_mount, generations, 0)


def test_front_to_back_read_of_good_bytes_passes(fluxfs_mount, lies, generations):
    read_big(fluxfs_mount, generations, 1)
    # Read by several threads at once (reads answered out of order: the check combines the
    # pieces) in steps that are not page multiples.
    name = "big/00000002"
    fd = os.open(fluxfs_mount.path / name, os.O_RDONLY)
    try:
        step = 3 * 1024 * 1024 + 17
        with ThreadPoolExecutor(4) as pool:
            chunks = list(pool.map(lambda off: os.pread(fd, step, off), range(0, BIG, step)))
    finally:
        os.close(fd)
    assert first_mismatch(name, generations[name], SEED, 0, b"".join(chunks)) is None
