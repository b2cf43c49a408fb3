"""The crash journal under inode churn (issue 24): with --crash-restart the serving process
journals the inode table and the open handles in the supervisor's memfd. Each inode the kernel
looked up and then forgot used to leave ~136 bytes there for the process's life (its NEW and
its GONE), so a DataLoader over many files whose inodes the kernel forgets and looks up again,
epoch after epoch, filled the journal's 1 GiB and a crash then ended the mount. Dead records
are now compacted away while serving (the live ones copied to the other half of the journal
area, switched to by one atomic store of the header): the memfd stays bounded round after
round, and a kill -9 at any point of a compaction leaves a journal the next process adopts.

The kernel is made to forget the inodes for real: `echo 2 > /proc/sys/vm/drop_caches` (root)
evicts every inode nothing holds, and the kernel sends their FORGETs. Nothing waits on time:
each wait is for a condition (the status file's inode count, its crash_restarts), with a
generous guard."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration.mount import (
    children,
    crash_state_memfd,
    kill_serving,
    mount_status as status,
    pid_alive,
    EXIT_TIMEOUT_S,
    Mount,
    read_plain,
    wait_for,
)

pytestmark = pytest.mark.emulator_only

FILES = 2500
PINNED = range(0, FILES, 250)  # held by O_PATH descriptors: never forgotten
KEPT = (7, 1234)  # open for reading across the kills


def name(i: int) -> str:
    return f"churn/c{i % 10}/f{i:05d}.bin"


def content(i: int) -> bytes:
    return (f"churn {i:05d} ".encode() * (1 + i % 50))[: 40 + i % 300]


def drop_caches() -> None:
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def setup_bucket(gcs, bucket_name: str):
    if not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        pytest.skip("the kernel's inode cache can be dropped only as root")
    bucket = gcs.create_bucket(bucket_name)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: bucket.blob(name(i)).upload_from_string(content(i)),
                      range(FILES)))
    return bucket


def look_up_all(mountpoint) -> None:
    """Every file looked up, from 4 threads (inodes journaled while forgets and compactions
    go on beside them: TSan runs this); every 10th file read too (its handle opened and
    closed, its OPEN record written and marked dead)."""
    def one(i):
        if i % 10 == 0:
            assert read_plain(mountpoint / name(i)) == content(i), name(i)
        else:
            assert os.stat(mountpoint / name(i)).st_size == len(content(i)), name(i)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(FILES)))


def forget_all(mountpoint, crashed=lambda: False) -> None:
    """Has the kernel forget every inode nothing holds, and waits until the daemon has dropped
    them (or until crashed() says the process died: a successor keeps what it adopted)."""
    def forgotten():
        if crashed():
            return True
        drop_caches()
        st = status(mountpoint)
        # The pinned files, their directories, the root's children: far below FILES.
        # An older daemon (no inodes line): one drop.
        return int(st.get("inodes", 0)) < 100
    wait_for(forgotten, timeout=EXIT_TIMEOUT_S * 4)


def memfd_allocated(supervisor: int) -> int:
    size, allocated = crash_state_memfd(supervisor)
    assert size > 0, "no crash-state memfd"
    return allocated


def pin(mountpoint):
    pinned = {i: os.open(mountpoint / name(i), os.O_PATH) for i in PINNED}
    inodes = {i: os.fstat(fd).st_ino for i, fd in pinned.items()}
    kept = {i: os.open(mountpoint / name(i), os.O_RDONLY) for i in KEPT}
    for i, fd in kept.items():
        assert os.read(fd, 20) == content(i)[:20]
    return pinned, inodes, kept


def check_pins(mountpoint, pinned, inodes, kept, close=False):
    """Same inode numbers through the descriptors and through new lookups; the descriptors
    open for reading read on (the bytes after those read before)."""
    for i, ino in inodes.items():
        assert os.fstat(pinned[i]).st_ino == ino, name(i)
        assert os.stat(mountpoint / name(i)).st_ino == ino, name(i)
    for i, fd in kept.items():
        os.lseek(fd, 20, os.SEEK_SET)
        rest = b""
        while chunk := os.read(fd, 1 << 16):
            rest += chunk
        assert rest == content(i)[20:], name(i)
    if close:
        for fd in list(pinned.values()) + list(kept.values()):
            os.close(fd)


def test_inode_churn_does_not_grow_the_journal(emulator, gcs, mountpoint):
    """Six rounds of looking up 2,500 files and having the kernel forget them: main's journal
    grew ~136 bytes per forgotten inode (~340 KB a round); now the memfd after the last rounds
    is no larger than after the first ones. Then two kills (the second after more churn in the
    successor, whose journal is in the other half): pinned inodes keep their numbers, open
    descriptors read on."""
    bucket = setup_bucket(gcs, "crash-churn")
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    supervisor = mount.proc.pid
    try:
        pinned, inodes, kept = pin(mountpoint)
        allocated = []
        for _ in range(6):
            look_up_all(mountpoint)
            forget_all(mountpoint)
            allocated.append(memfd_allocated(supervisor))
        grown = max(allocated[-2:]) - max(allocated[:2])
        assert grown < 128 * 1024, f"the memfd grew {grown} bytes in 4 rounds: {allocated}"
        st = status(mountpoint)
        assert int(st["crash_journal_compactions"]) >= 1, st
        # Two rounds' live records at most, or the minimum a compaction waits for.
        assert int(st["crash_journal_bytes"]) < 2 * 1024 * 1024, st

        serving = int(st["pid"])
        for round_ in (1, 2):
            st = kill_serving(supervisor, serving, mountpoint)
            assert st["crash_restarts"] == str(round_), st
            serving = int(st["pid"])
            check_pins(mountpoint, pinned, inodes, kept)
            look_up_all(mountpoint)
        assert "took over" in mount.log(), mount.log()[-3000:]
        check_pins(mountpoint, pinned, inodes, kept, close=True)
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
    finally:
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)


@pytest.mark.parametrize("phase", [1, 2, 3])
def test_kill_in_the_middle_of_a_compaction(emulator, gcs, mountpoint, monkeypatch, phase):
    """A test hook kills the serving process inside its second compaction: 1 with half the
    live records copied to the other half, 2 with all copied and the header not yet switched,
    3 switched and the old half not yet freed. The next process adopts whichever journal the
    header names: the pinned inodes keep their numbers, the open descriptors read on, every
    file is found again, and that process serves and compacts on."""
    bucket = setup_bucket(gcs, f"crash-compact-{phase}")
    monkeypatch.setenv("FLUXFS_TEST_KILL_IN_COMPACTION", f"2:{phase}")
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    supervisor = mount.proc.pid
    try:
        first = int(status(mountpoint)["pid"])
        pinned, inodes, kept = pin(mountpoint)
        crashed = lambda: not pid_alive(first)  # noqa: E731
        for _ in range(12):
            look_up_all(mountpoint)
            forget_all(mountpoint, crashed)
            if crashed():
                break
        assert crashed(), mount.log()[-3000:]
        wait_for(lambda: children(supervisor) not in ([], [first]), timeout=EXIT_TIMEOUT_S)
        st = status(mountpoint)
        assert st["crash_restarts"] == "1", st
        log = mount.log()
        assert "kills itself in journal compaction 2" in log, log[-3000:]
        assert "took over" in log, log[-3000:]
        check_pins(mountpoint, pinned, inodes, kept)
        look_up_all(mountpoint)
        check_pins(mountpoint, pinned, inodes, kept, close=True)
        serving = int(st["pid"])
        assert mount.unmount() == 0, mount.log()[-3000:]
        wait_for(lambda: not pid_alive(serving), timeout=EXIT_TIMEOUT_S)
    finally:
        mount.close()
