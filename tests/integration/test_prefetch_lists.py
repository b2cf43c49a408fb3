"""Hint lists per writing process (issue 10): every process writing MOUNT/.fluxfs/prefetch has a
list of its own (DDP ranks each write theirs); a new list from the same process replaces only
its own; 70 lists are served together, each with its own lookahead; a list goes when its
writer exits; the counters cover the live lists only, with lines that resolve to nothing
counted as missing and never as done."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.prefetch_util import status, wait_for

pytestmark = pytest.mark.emulator_only

BUCKET = "lists"
COUNT = 1500
SIZE = 4096
LOOKAHEAD = 5
WRITERS = 70
PER_LIST = 20


@pytest.fixture(scope="module")
def emulator_args():
    return ["--latency-ms", "5", "--populate", f"{BUCKET}/p/:{COUNT}:{SIZE}:3"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    return ["--prefetch-lookahead", str(LOOKAHEAD)]


def name(i):
    return f"p/{i:08d}"


def write_hints(mount, paths):
    with open(Path(mount.path) / ".fluxfs" / "prefetch", "w") as f:
        f.write("".join(p + "\n" for p in paths))


def lists_of(s):
    """The hint_list_PID lines of a status snapshot: pid -> {total, done, ...}."""
    out = {}
    for key, value in s.items():
        if key.startswith("hint_list_"):
            out[int(key[len("hint_list_"):])] = {
                k: int(v) for k, v in (f.split("=") for f in value.split())}
    return out


# Forks one child per list: each writes its list to the hint file, reports, and waits for
# the helper's stdin to close (then exits; the helper reaps them).
WRITERS_SCRIPT = r"""
import os, sys
hint_file, count, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ready_r, ready_w = os.pipe()
pids = []
for k in range(count):
    pid = os.fork()
    if pid == 0:
        names = [f"p/{k * per + i:08d}" for i in range(per)]
        with open(hint_file, "w") as f:
            f.write("".join(n + "\n" for n in names))
        os.write(ready_w, b"x")
        os.read(0, 1)
        os._exit(0)
    pids.append(pid)
got = 0
while got < count:
    got += len(os.read(ready_r, count - got))
print(" ".join(map(str, pids)), flush=True)
for pid in pids:
    os.waitpid(pid, 0)
"""


def test_seventy_lists_served_together_each_with_its_own_lookahead(fluxfs_mount, emulator):
    hint_file = Path(fluxfs_mount.path) / ".fluxfs" / "prefetch"
    before = status(fluxfs_mount)
    helper = subprocess.Popen([sys.executable, "-c", WRITERS_SCRIPT, str(hint_file),
                               str(WRITERS), str(PER_LIST)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in helper.stdout.readline().split()]
        assert len(pids) == WRITERS
        # Nothing is read yet: every list is fetched up to its own lookahead, none beyond.
        s = wait_for(fluxfs_mount, lambda s: int(s["hint_lists"]) >= WRITERS and all(
            lst["done"] == LOOKAHEAD for pid, lst in lists_of(s).items() if pid in pids),
            "every list to be served up to its lookahead")
        lists = lists_of(s)
        assert set(pids) <= set(lists), "a writer's list is missing"
        for pid in pids:
            assert lists[pid]["total"] == PER_LIST and lists[pid]["missing"] == 0
        time.sleep(0.5)
        assert all(lists_of(status(fluxfs_mount))[pid]["done"] == LOOKAHEAD for pid in pids)
        # Reading list 3 moves that list alone.
        k = 3
        for i in range(PER_LIST):
            assert len((Path(fluxfs_mount.path) / name(k * PER_LIST + i)).read_bytes()) == SIZE
        s = wait_for(fluxfs_mount, lambda s: lists_of(s)[pids[k]]["done"] == PER_LIST,
                     "the list read to be done")
        assert lists_of(s)[pids[k]]["opened"] == PER_LIST
        assert all(lists_of(s)[pid]["done"] == LOOKAHEAD for pid in pids if pid != pids[k])
        # This process's own list replaces only itself.
        write_hints(fluxfs_mount, [name(1400 + i) for i in range(10)])
        write_hints(fluxfs_mount, [name(1450 + i) for i in range(12)])
        s = status(fluxfs_mount)
        own = lists_of(s)[os.getpid()]
        assert own["total"] == 12
        assert int(s["hint_lists"]) == int(before["hint_lists"]) + WRITERS + (
            0 if os.getpid() in lists_of(before) else 1)
        assert int(s["hints_total"]) >= WRITERS * PER_LIST + 12
    finally:
        helper.stdin.close()
        helper.wait(timeout=60)
    # The writers exited: their lists are gone, this process's stays.
    s = status(fluxfs_mount)
    assert not set(pids) & set(lists_of(s)), "an exited writer's list is still served"
    assert int(s["hint_lists_dropped"]) >= int(before["hint_lists_dropped"]) + WRITERS
    assert int(s["hints_total"]) == 12
    assert list(lists_of(s)) == [os.getpid()]


def test_missing_lines_counted_apart_and_done_never_above_total(fluxfs_mount):
    existing = [name(1000 + i) for i in range(30)]
    write_hints(fluxfs_mount, existing[:15] + ["p/nothing-here", "p"] + existing[15:]
                + ["no/such/dir/f"])
    for n in existing:
        (Path(fluxfs_mount.path) / n).read_bytes()
    s = wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) + int(s["hints_missing"])
                 == int(s["hints_total"]), "the list to be processed")
    assert int(s["hints_missing"]) == 3
    assert int(s["hints_done"]) == 30
    assert int(s["hints_total"]) == 33


def test_replaced_list_with_batches_in_flight_counts_only_the_new_one(fluxfs_mount, emulator):
    """A list replaced while batches of the old one are being fetched: their results belong to
    no live list (before, they were added to the new list's hints_done, above its total)."""
    emulator.config(latency_ms=60)
    try:
        old = [name(i) for i in range(1100, 1400)]
        new = [name(i) for i in range(1050, 1060)]
        hint_file = Path(fluxfs_mount.path) / ".fluxfs" / "prefetch"
        with open(hint_file, "w") as f:
            f.write("".join(p + "\n" for p in old))
        for n in old[:40]:  # moves the gate: batches go out
            (Path(fluxfs_mount.path) / n).read_bytes()
        write_hints(fluxfs_mount, new)
        deadline = time.monotonic() + 5
        samples = []
        while time.monotonic() < deadline:
            s = status(fluxfs_mount)
            samples.append((int(s["hints_done"]), int(s["hints_total"])))
            assert samples[-1][0] <= samples[-1][1], samples[-1]
            time.sleep(0.02)
        for n in new:
            (Path(fluxfs_mount.path) / n).read_bytes()
        s = wait_for(fluxfs_mount, lambda s: int(s["hints_done"]) == len(new), "the new list")
        assert int(s["hints_total"]) == len(new)
    finally:
        emulator.config(latency_ms=5)


def test_status_command_shows_each_list(fluxfs_mount):
    from tests.integration.mount import find_fluxfs_binary
    write_hints(fluxfs_mount, [name(1200 + i) for i in range(7)] + ["p/none-such"])
    for i in range(7):
        (Path(fluxfs_mount.path) / name(1200 + i)).read_bytes()
    wait_for(fluxfs_mount, lambda s: int(s["hints_missing"]) == 1, "the missing line")
    out = subprocess.run([str(find_fluxfs_binary()), "status", str(fluxfs_mount.path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Hint lists:    1 live" in out.stdout, out.stdout
    assert "1 hints naming no file" in out.stdout, out.stdout
    assert f"process {os.getpid():<6} total=8 done=7 missing=1 opened=7" in out.stdout, out.stdout
