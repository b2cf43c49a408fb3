"""A daemon killed with SIGKILL (issue 24): a directory rename cut short is rolled forward by the
next mount, and a mountpoint whose daemon is gone is cleaned up by the next start.

Nothing here depends on timing: the rename is cut at a fixed point by the emulator's fault
schedule (the 50th objects.rewrite, i.e. the 50th copy, stalls after the copy is made and before
its reply leaves), the daemon is killed once the emulator reports that fault, and every wait is
for a condition (with a generous guard, never an assertion on how long something took)."""

import os
import re
import subprocess

import pytest

from tests.integration.mount import (
    EXIT_TIMEOUT_S,
    Mount,
    children,
    faults_injected,
    find_fluxfs_binary,
    is_mounted,
    kill_tree,
    read_plain,
    wait_for,
)
from tests.integration.test_packaging import simulate

pytestmark = pytest.mark.emulator_only

PREFIX = "m/"          # the mount's prefix in the bucket: records live in m/.fluxfs/renames/
FILES = 200
CUT_AT = 50            # the rewrite (copy) that stalls: 49 objects moved, the 50th copied
STALL_S = 60           # far longer than the kill takes; the daemon waits on it until killed


def content(i: int) -> bytes:
    return (f"file {i:03d} ".encode() * (1 + i * 7 % 97))[: 40 + i * 13 % 3000]


def names():
    """200 files below old/: 190 at its top, 10 in old/sub/ (flat listing order)."""
    return [f"f{i:03d}" for i in range(190)] + [f"sub/g{i:03d}" for i in range(10)]


def wait_replaced(path, alive):
    """Waits until a live fluxfs daemon serves path: reading .fluxfs/status needs one (OPEN and
    READ go to the daemon). Not a stat, which the kernel answers for a dead mount from its
    attribute cache; not mountinfo, whose mount IDs and device numbers are reused."""
    def served():
        alive()
        try:
            return b"version" in read_plain(path / ".fluxfs" / "status")
        except OSError:
            return False  # ENOTCONN (the dead mount), ENOENT (the bare directory)
    wait_for(served, timeout=60)


def wait_served(mount: Mount):
    def alive():
        assert mount.alive(), f"fluxfs exited\n{mount.log()}"
    wait_replaced(mount.path, alive)


def listed(bucket, prefix):
    return sorted(b.name for b in bucket.list_blobs(prefix=prefix))


def test_directory_rename_killed_midway_is_rolled_forward(emulator, gcs, mountpoint):
    bucket = gcs.create_bucket("crash-rename")
    for i, name in enumerate(names()):
        bucket.blob(f"{PREFIX}old/{name}").upload_from_string(content(i))
    first = Mount(emulator, f"{bucket.name}/{PREFIX.rstrip('/')}", mountpoint)
    second = None
    try:
        assert sorted(os.listdir(mountpoint / "old"))[:2] == ["f000", "f001"]
        emulator.config(faults=[{"kind": "stall", "rate": 1, "every": CUT_AT,
                                 "op": "objects.rewrite", "seconds": STALL_S}])
        rewrites_before = emulator.stats()["ops"]["objects.rewrite"]
        mv = subprocess.Popen(["mv", "old", "new"], cwd=mountpoint, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        # The 50th copy is made and its reply held back: the daemon waits on it.
        wait_for(lambda: faults_injected(emulator) >= 1, timeout=120)
        first.kill_daemon()  # the supervisor and the serving process: the mount is left stale
        assert mv.wait(EXIT_TIMEOUT_S) != 0  # the rename was cut: mv saw an error
        emulator.config(faults=[])
        assert emulator.stats()["ops"]["objects.rewrite"] - rewrites_before == CUT_AT

        # What the crash left: 49 moved, the 50th in both places, the rest not moved, and the
        # intent record.
        old = listed(bucket, f"{PREFIX}old/")
        new = listed(bucket, f"{PREFIX}new/")
        assert (len(old), len(new)) == (FILES - CUT_AT + 1, CUT_AT)
        both = {n.removeprefix(f"{PREFIX}old/") for n in old} & \
               {n.removeprefix(f"{PREFIX}new/") for n in new}
        assert both == {names()[CUT_AT - 1]}
        records = listed(bucket, f"{PREFIX}.fluxfs/renames/")
        assert len(records) == 1, records
        record = bucket.get_blob(records[0]).download_as_bytes().decode()
        assert record.startswith(f"fluxfs-rename 1\nsource {PREFIX}old/\ndest {PREFIX}new/\n")
        assert f"\ncount {FILES}\n" in record and record.endswith("\nend\n")

        # The next start: no extra flag; it cleans the dead mount up and finishes the rename
        # before it serves anything.
        second = Mount(emulator, f"{bucket.name}/{PREFIX.rstrip('/')}", mountpoint)
        wait_served(second)
        log = second.log()
        assert len(re.findall(r"unmounted the stale fluxfs mount", log)) == 1, log
        rolled = [line for line in log.splitlines() if "rolled forward" in line]
        assert len(rolled) == 1, log
        assert "rename of 'old' to 'new'" in rolled[0], rolled
        assert (f"{FILES - CUT_AT} objects moved now, 1 copied before (source deleted now), "
                f"{CUT_AT - 1} moved before, 0 kept") in rolled[0], rolled

        # Each file exactly once, under the new name, with its bytes; the old name is gone.
        assert sorted(os.listdir(mountpoint)) == ["new"]
        top = sorted(os.listdir(mountpoint / "new"))
        assert top == sorted([n for n in names() if "/" not in n] + ["sub"])
        assert sorted(os.listdir(mountpoint / "new" / "sub")) == \
            sorted(n.removeprefix("sub/") for n in names() if n.startswith("sub/"))
        for i, name in enumerate(names()):
            assert read_plain(mountpoint / "new" / name) == content(i), name
        assert not os.path.exists(mountpoint / "old")
        assert listed(bucket, f"{PREFIX}old/") == []
        assert listed(bucket, f"{PREFIX}new/") == sorted(f"{PREFIX}new/{n}" for n in names())
        assert listed(bucket, f"{PREFIX}.fluxfs/") == []

        # Running the same mv again: the old name is gone, so it fails and changes nothing
        # (before, it moved what was left of old into new/old).
        again = subprocess.run(["mv", "old", "new"], cwd=mountpoint, capture_output=True,
                               text=True)
        assert again.returncode != 0
        assert "No such file or directory" in again.stderr, again.stderr
        assert not os.path.exists(mountpoint / "new" / "old")
        assert len(listed(bucket, f"{PREFIX}new/")) == FILES

        assert second.error_lines() == []
        assert second.unmount() == 0
    finally:
        emulator.config(faults=[])
        if second is not None:
            second.close()
        first.close()


def test_roll_forward_never_overwrites_a_newer_write(emulator, gcs, mountpoint):
    """Between the crash and the next mount someone writes a new name the rename had not
    reached yet: that write keeps its bytes, the old object stays (a warning names both), and
    everything else is moved."""
    bucket = gcs.create_bucket("crash-conflict")
    for i in range(20):
        bucket.blob(f"{PREFIX}old/f{i:03d}").upload_from_string(content(i))
    first = Mount(emulator, f"{bucket.name}/{PREFIX.rstrip('/')}", mountpoint)
    second = None
    try:
        assert len(os.listdir(mountpoint / "old")) == 20
        emulator.config(faults=[{"kind": "stall", "rate": 1, "every": 5,
                                 "op": "objects.rewrite", "seconds": STALL_S}])
        before = faults_injected(emulator)
        mv = subprocess.Popen(["mv", "old", "new"], cwd=mountpoint, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        wait_for(lambda: faults_injected(emulator) > before, timeout=120)
        first.kill_daemon()  # the supervisor and the serving process: the mount is left stale
        mv.wait(EXIT_TIMEOUT_S)
        emulator.config(faults=[])
        assert len(listed(bucket, f"{PREFIX}new/")) == 5
        bucket.blob(f"{PREFIX}new/f010").upload_from_string(b"written meanwhile")

        second = Mount(emulator, f"{bucket.name}/{PREFIX.rstrip('/')}", mountpoint)
        wait_served(second)
        log = second.log()
        rolled = [line for line in log.splitlines() if "rolled forward" in line]
        assert len(rolled) == 1 and ("14 objects moved now, 1 copied before (source deleted "
                                     "now), 4 moved before, 1 kept") in rolled[0], log
        assert f"object '{PREFIX}new/f010' was written by someone else" in log, log
        assert read_plain(mountpoint / "new" / "f010") == b"written meanwhile"
        assert os.listdir(mountpoint / "old") == ["f010"]
        assert read_plain(mountpoint / "old" / "f010") == content(10)
        for i in range(20):
            if i != 10:
                assert read_plain(mountpoint / "new" / f"f{i:03d}") == content(i)
        assert listed(bucket, f"{PREFIX}.fluxfs/") == []
        assert second.error_lines() == []
        assert second.unmount() == 0
    finally:
        emulator.config(faults=[])
        if second is not None:
            second.close()
        first.close()


def test_a_rename_without_a_crash_leaves_no_record(emulator, gcs, mountpoint):
    bucket = gcs.create_bucket("crash-clean")
    for i in range(5):
        bucket.blob(f"{PREFIX}a/x{i}").upload_from_string(content(i))
    m = Mount(emulator, f"{bucket.name}/{PREFIX.rstrip('/')}", mountpoint)
    try:
        os.rename(mountpoint / "a", mountpoint / "b")
        assert sorted(os.listdir(mountpoint / "b")) == [f"x{i}" for i in range(5)]
        assert listed(bucket, f"{PREFIX}.fluxfs/") == []
        assert listed(bucket, f"{PREFIX}a/") == []
        assert "rolled forward" not in m.log()
        assert m.error_lines() == []
        assert m.unmount() == 0
    finally:
        m.close()


def test_a_rename_that_fails_part_way_is_finished_at_unmount(emulator, gcs, mountpoint):
    """An error past the retries (here: the first delete answered 503 twice, with one retry
    allowed) stops the rename with EIO and keeps its record; the unmount finishes it."""
    bucket = gcs.create_bucket("crash-fail")
    for i in range(6):
        bucket.blob(f"{PREFIX}a/x{i}").upload_from_string(content(i))
    m = Mount(emulator, f"{bucket.name}/{PREFIX.rstrip('/')}", mountpoint,
              args=["--max-retries", "1"])
    try:
        assert len(os.listdir(mountpoint / "a")) == 6
        emulator.config(faults=[{"kind": "503", "rate": 1, "count": 2,
                                 "op": "objects.delete"}])
        with pytest.raises(OSError) as info:
            os.rename(mountpoint / "a", mountpoint / "b")
        assert info.value.errno == 5  # EIO
        emulator.config(faults=[])
        # Cut after the first copy: x0 on both sides, the record kept.
        assert listed(bucket, f"{PREFIX}b/") == [f"{PREFIX}b/x0"]
        assert len(listed(bucket, f"{PREFIX}a/")) == 6
        assert len(listed(bucket, f"{PREFIX}.fluxfs/renames/")) == 1
        assert sorted(os.listdir(mountpoint)) == ["a", "b"]  # the record is not listed
        assert "intent record" in m.log() and "the unmount tries again" in m.log()
        assert m.unmount() == 0
        rolled = [line for line in m.log().splitlines() if "rolled forward" in line]
        assert len(rolled) == 1 and "5 objects moved now, 1 copied before" in rolled[0], rolled
        assert listed(bucket, f"{PREFIX}a/") == []
        assert listed(bucket, f"{PREFIX}b/") == [f"{PREFIX}b/x{i}" for i in range(6)]
        assert listed(bucket, f"{PREFIX}.fluxfs/") == []
        assert all("objects.delete" in line for line in m.error_lines()), m.error_lines()
    finally:
        emulator.config(faults=[])
        m.close()


@pytest.mark.parametrize("mode", [[], ["--no-crash-restart"]], ids=["supervised", "one-process"])
def test_restart_after_kill_9_without_flags(emulator, gcs, mountpoint, mode):
    """A stale mount left by SIGKILL of the whole daemon is cleaned up by a plain restart: one
    log line, then the mount serves. A live mount is never touched (test_operations covers
    that). Supervised (the default: the supervisor and its serving process killed) and in one
    process (--no-crash-restart, libfuse's clone_fd queues)."""
    bucket = gcs.create_bucket("crash-stale-one" if mode else "crash-stale")
    bucket.blob("d/f").upload_from_string(b"hello")
    first = Mount(emulator, bucket.name, mountpoint, mode)
    if mode:
        assert children(first.proc.pid) == [], "--no-crash-restart runs one process"
    second = None
    try:
        assert read_plain(mountpoint / "d" / "f") == b"hello"
        first.kill_daemon()  # the supervisor and the serving process: the mount is left stale
        with pytest.raises(OSError) as info:
            os.listdir(mountpoint)
        assert info.value.errno == 107  # ENOTCONN
        second = Mount(emulator, bucket.name, mountpoint)
        wait_served(second)
        assert read_plain(mountpoint / "d" / "f") == b"hello"
        assert second.log().count("unmounted the stale fluxfs mount") == 1
        assert second.error_lines() == []
        assert second.unmount() == 0
        assert not is_mounted(mountpoint)  # the stale one is gone too, not just hidden
    finally:
        if second is not None:
            second.close()
        first.close()


def test_systemd_unit_restarts_after_kill_9(emulator, gcs, tmp_path, mountpoint):
    """What Restart=on-failure does after a kill -9: the unit's ExecStartPre and ExecStart
    again, as the unit has them (worked out by test_packaging.simulate)."""
    bucket = gcs.create_bucket("crash-unit")
    bucket.blob("d/f").upload_from_string(b"unit")
    etc = tmp_path / "etc"
    (etc / "fluxfs").mkdir(parents=True)
    (etc / "fluxfs" / f"{bucket.name}.conf").write_text(
        f"FLUXFS_MOUNTPOINT={mountpoint}\n"
        f'FLUXFS_INSTANCE_OPTS="--endpoint {emulator.url} --anonymous --log-level info"\n')
    pre, start = simulate(bucket.name, etc)
    start = [str(find_fluxfs_binary()), *start[1:]]
    env = {k: v for k, v in os.environ.items()
           if k not in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS",
                        "NOTIFY_SOCKET")}

    def start_unit(log_path):
        for argv in pre:
            subprocess.run(argv, capture_output=True)  # "-": a failure is ignored
        with open(log_path, "ab") as log:
            return subprocess.Popen(start, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=env)

    procs = []
    try:
        for run in range(3):  # start, then two restarts after kill -9
            log_path = tmp_path / f"run{run}.log"
            proc = start_unit(log_path)
            procs.append(proc)

            def alive():
                assert proc.poll() is None, log_path.read_text()
            wait_replaced(mountpoint, alive)
            assert read_plain(mountpoint / "d" / "f") == b"unit"
            text = log_path.read_text()
            assert text.count("unmounted the stale fluxfs mount") == (1 if run else 0), text
            if run < 2:
                # What systemd's stop ends with (KillMode=mixed): SIGKILL to every process
                # left in the unit's cgroup, the --crash-restart supervisor and its child.
                kill_tree(proc.pid)
                proc.wait(EXIT_TIMEOUT_S)
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
        assert procs[-1].wait(EXIT_TIMEOUT_S) == 0
        assert not is_mounted(mountpoint)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
