"""Crash recovery under ML workloads (issue 24): with --crash-restart, a DataLoader epoch and a
loop of torch.save/torch.load go through repeated kill -9 of the serving process.

* A DataLoader (2 workers) reads 2,000 small files while a thread kills the serving process
  five times, each kill triggered by the number of batches consumed: the epoch completes with
  no error and every sample's bytes are the ones uploaded; the status counts the five restarts.
* torch.save of new checkpoints (1 MiB: one upload at close; 12 MiB: parts streamed while the
  file is written) with kills between saves and in the middle of a save (triggered after a
  given number of bytes written by the caller): each save either fails with an OSError (EIO)
  that its caller sees and leaves no object, or commits whole (the object's bytes are those of
  the same torch.save to memory, and torch.load returns an equal state dict).
* After the unmount: no process left, nothing under `.fluxfs/` in the bucket, only the
  objects uploaded and the checkpoints that committed.

Nothing waits on time: every wait is for a condition (batches consumed, bytes written, the
supervisor's child, the status file) with a generous guard; no draw is random."""

import errno
import io
import os
import re
import signal
import subprocess
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.mount import (
    EXIT_TIMEOUT_S,
    Mount,
    children,
    is_mounted,
    kill_serving,
    mount_status as status,
    pid_alive,
    read_plain,
    wait_for,
)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.emulator_only

FILES = 2000
BATCH = 16
KILL_AFTER_BATCHES = (10, 30, 50, 70, 90)  # of 125
# A guard, not a measure: no batch takes near this long unless a request is lost.
BATCH_GUARD_S = 100

# A known gap (docs/operations.md "What remains"): a SIGKILL that lands while a thread of the
# serving process is inside read(2) of /dev/fuse and the read has already taken a request (or
# between the read's return and the request's publication in the shared state) loses that
# request: the kernel keeps it on the connection's processing list, nobody knows its number,
# and its caller waits forever. Seen here in about 1 run of 10 (5 kills each, 2 loader workers).
LOST_REQUEST = ("a request the killed process had taken was never answered (a kill just after "
                "read(2) of /dev/fuse is what the landings in src/fs/crash_state.c cover): its "
                "caller waits forever")
MiB = 1024 * 1024
# A checkpoint's file streams 5 MiB parts while it is written (a 12 MiB save sends two).
SAVE_ARGS = ["--crash-restart", "--write-part-size", "5M", "--write-small-threshold", "5M"]


def content(i: int) -> bytes:
    return (f"sample {i:05d} ".encode() * 400)[: 200 + i * 613 % 4000]


def name(i: int) -> str:
    return f"train/s{i % 8}/x{i:05d}.bin"


class Killer:
    """Kills the serving process of a supervised mount and waits until its successor serves
    (a new child of the supervisor, named by the status file)."""

    def __init__(self, mount: Mount):
        self.mount = mount
        self.supervisor = mount.proc.pid
        self.kills = 0
        self.serving = int(status(mount.path)["pid"])
        assert children(self.supervisor) == [self.serving]

    def kill(self):
        st = kill_serving(self.supervisor, self.serving, self.mount.path)
        self.kills += 1
        self.serving = int(st["pid"])
        assert st["crash_restarts"] == str(self.kills), st

    def unmount_and_check(self, emulator, bucket, expected_names):
        """Unmounts; the supervisor exits 0, no process is left, the bucket holds exactly
        expected_names (nothing under .fluxfs/) and no multipart upload is open."""
        subprocess.run(["fusermount3", "-u", str(self.mount.path)], check=True,
                       capture_output=True)
        assert self.mount.wait() == 0, self.mount.log()[-3000:]
        wait_for(lambda: not pid_alive(self.serving), timeout=EXIT_TIMEOUT_S)
        assert not is_mounted(self.mount.path)
        assert os.listdir(self.mount.path) == []
        log = self.mount.log()
        assert len(re.findall(r"died by signal 9 .*crash restart", log)) == self.kills, log[-3000:]
        names = sorted(b.name for b in bucket.list_blobs())
        assert [n for n in names if n.startswith(".fluxfs/")] == []
        assert names == sorted(expected_names)
        with urllib.request.urlopen(f"{emulator.url}/{bucket.name}?uploads", timeout=30) as reply:
            text = reply.read().decode()
        assert re.findall(r"<Upload>.*?<Key>(.*?)</Key>", text, re.S) == []

    def cleanup(self):
        for pid in [self.serving, *children(self.supervisor)]:
            if pid and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def fuse_requests_waiting(mountpoint: Path) -> int:
    """Requests the kernel has sent on this mount's FUSE connection and not had answered."""
    try:
        dev = os.stat(mountpoint).st_dev
        return int(Path(f"/sys/fs/fuse/connections/{os.minor(dev)}/waiting").read_text())
    except (OSError, ValueError):
        return 0


class Samples(torch.utils.data.Dataset):
    def __init__(self, mountpoint: Path):
        self.mountpoint = mountpoint

    def __len__(self):
        return FILES

    def __getitem__(self, i):
        try:
            return i, read_plain(self.mountpoint / name(i)), None
        except OSError as e:  # reported, not raised: the epoch goes on and every error counts
            return i, b"", f"{name(i)}: {e}"


def collate(batch):
    return batch


def test_dataloader_epoch_across_five_kills(emulator, gcs, mountpoint):
    bucket = gcs.create_bucket("crash-dl")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: bucket.blob(name(i)).upload_from_string(content(i)),
                      range(FILES)))
    mount = Mount(emulator, bucket.name, mountpoint, ["--crash-restart"])
    killer = None
    consumed = [0]
    failure: list[BaseException] = []

    def kill_on_progress():
        try:
            for threshold in KILL_AFTER_BATCHES:
                wait_for(lambda: consumed[0] >= threshold, timeout=240)
                killer.kill()
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            failure.append(e)

    thread = None
    try:
        killer = Killer(mount)
        loader = torch.utils.data.DataLoader(
            Samples(mountpoint), batch_size=BATCH, num_workers=2, collate_fn=collate,
            shuffle=True, generator=torch.Generator().manual_seed(24), timeout=BATCH_GUARD_S)
        thread = threading.Thread(target=kill_on_progress, daemon=True)
        thread.start()
        seen = set()
        errors = []
        batches = iter(loader)
        while True:
            timed_out = False
            try:
                batch = next(batches)
            except StopIteration:
                break
            except RuntimeError as e:
                if "timed out" not in str(e):
                    raise
                timed_out = True
            if timed_out:  # out of the except block: nothing holds the iterator any more
                waiting = fuse_requests_waiting(mountpoint)
                # The loader's workers (this process's children running this Python): one
                # waits on the lost request; gone before the unmount, or their open files
                # keep the mount busy. torch's SIGCHLD handler would raise at their end.
                me = os.readlink("/proc/self/exe")
                workers = [p for p in children(os.getpid())
                           if os.readlink(f"/proc/{p}/exe") == me]
                previous = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for pid in workers:
                    os.kill(pid, signal.SIGKILL)
                wait_for(lambda: not any(pid_alive(p) for p in workers), timeout=120)
                del batches
                signal.signal(signal.SIGCHLD, previous)
                if waiting:
                    pytest.fail(f"{LOST_REQUEST}; {waiting} request(s) unanswered after "
                                 f"{killer.kills} kill(s)")
                pytest.fail(f"a batch took over {BATCH_GUARD_S} s with no request waiting")
            for i, data, error in batch:
                if error is not None:
                    errors.append(error)
                elif data != content(i):
                    errors.append(f"{name(i)}: {len(data)} bytes differ")
                seen.add(i)
            consumed[0] += 1
        thread.join(240)
        assert not thread.is_alive() and failure == [], failure
        assert errors == [], errors[:10]
        assert seen == set(range(FILES))
        assert killer.kills == len(KILL_AFTER_BATCHES)
        assert status(mountpoint)["crash_restarts"] == str(len(KILL_AFTER_BATCHES))
        killer.unmount_and_check(emulator, bucket, [name(i) for i in range(FILES)])
    finally:
        if thread is not None:
            consumed[0] = 1 << 30
            thread.join(240)
        if killer is not None:
            killer.cleanup()
        mount.close()


def state_dict(size: int, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {f"layer{k}.weight": torch.randn(size // 4 // 4, generator=gen) for k in range(4)} | {
        "step": torch.tensor(seed)}


def saved_bytes(sd: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(sd, buf)
    return buf.getvalue()


class KillingFile:
    """A file on the mount, written unbuffered; the first write that would carry the bytes
    written past kill_at first kills the serving process (and waits for its successor)."""

    def __init__(self, path: Path, kill_at, killer: Killer):
        self.f = open(path, "wb", buffering=0)  # noqa: SIM115 - closed by close()
        self.kill_at = kill_at
        self.killer = killer
        self.written = 0

    def write(self, b):
        if self.kill_at is not None and self.written + len(b) > self.kill_at:
            self.kill_at = None
            self.killer.kill()
        n = self.f.write(b)
        self.written += n
        return n

    def flush(self):
        self.f.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def is_eio(e: BaseException) -> bool:
    while e is not None:
        if isinstance(e, OSError) and e.errno == errno.EIO:
            return True
        e = e.__cause__ or e.__context__
    return False


# (size, when to kill): "before" the save (between saves), a byte count within the save, None.
PLAN = [
    (1 * MiB, None),
    (12 * MiB, None),
    (1 * MiB, "before"),
    (1 * MiB, 512 * 1024),  # in memory until close: the whole file is lost
    (12 * MiB, 7 * MiB),  # a 5 MiB part already went out as a part of the upload
    (12 * MiB, "before"),
    (12 * MiB, 11 * MiB),  # two parts out
    (1 * MiB, None),
    (12 * MiB, 64 * 1024),  # still in the first part
    (12 * MiB, None),
]


def test_torch_save_load_across_kills(emulator, gcs, mountpoint):
    bucket = gcs.create_bucket("crash-ckpt")
    for i in range(20):
        bucket.blob(name(i)).upload_from_string(content(i))
    mount = Mount(emulator, bucket.name, mountpoint,
                  SAVE_ARGS)
    killer = None
    try:
        killer = Killer(mount)
        (mountpoint / "ckpt").mkdir()
        committed = {}
        failed = []
        for k, (size, when) in enumerate(PLAN):
            sd = state_dict(size, k)
            path = mountpoint / "ckpt" / f"step{k:02d}.pt"
            if when == "before":
                killer.kill()
            kills_before = killer.kills
            try:
                with KillingFile(path, when if isinstance(when, int) else None, killer) as f:
                    torch.save(sd, f)
            except Exception as e:  # noqa: BLE001 - a kill in the save: must be EIO
                assert isinstance(when, int), f"step {k}: {e!r}"
                assert is_eio(e), f"step {k}: {e!r}"
                assert killer.kills == kills_before + 1
                failed.append(k)
                assert bucket.get_blob(f"ckpt/step{k:02d}.pt") is None, k
                # What the killed process had sent (parts, a multipart marker) is gone too:
                # its successor removed it before serving.
                assert [b.name for b in bucket.list_blobs(prefix=".fluxfs/")] == [], k
                continue
            assert not isinstance(when, int), f"step {k}: a save across a kill succeeded"
            committed[k] = sd
            blob = bucket.get_blob(f"ckpt/step{k:02d}.pt")
            assert blob is not None and blob.download_as_bytes() == saved_bytes(sd), k
            # Every checkpoint committed so far loads back equal, through the mount.
            for j, old in committed.items():
                loaded = torch.load(mountpoint / "ckpt" / f"step{j:02d}.pt")
                assert loaded.keys() == old.keys(), j
                for key in old:
                    assert torch.equal(loaded[key], old[key]), (j, key)
        assert failed == [k for k, (_, when) in enumerate(PLAN) if isinstance(when, int)]
        # Readers after the kills: the data files read back whole.
        for i in range(20):
            assert read_plain(mountpoint / name(i)) == content(i)
        listed = sorted(os.listdir(mountpoint / "ckpt"))
        assert listed == [f"step{k:02d}.pt" for k in committed], listed
        killer.unmount_and_check(
            emulator, bucket, [name(i) for i in range(20)] + [f"ckpt/step{k:02d}.pt" for k in committed]
            + ["ckpt/"])
    finally:
        if killer is not None:
            killer.cleanup()
        mount.close()


def open_uploads(emulator, bucket_name: str) -> list[str]:
    with urllib.request.urlopen(f"{emulator.url}/{bucket_name}?uploads", timeout=30) as reply:
        return re.findall(r"<Upload>.*?<Key>(.*?)</Key>", reply.read().decode(), re.S)


def test_kill_before_the_multipart_marker_lands_leaves_no_upload(emulator, gcs, mountpoint):
    """A streamed upload's marker (the object naming the multipart upload, for cleanup) is
    uploaded asynchronously beside its first part: a kill after the upload began and before
    the marker landed left the upload open for good (CI saw it once in
    test_torch_save_load_across_kills). Here the marker's insert is refused until after the kill
    (503s, retried), so the window is certain: the next serving process aborts every upload
    under the mount's temporary prefix before it serves, the killed save fails with EIO, and
    nothing is left in the bucket."""
    bucket = gcs.create_bucket("crash-marker")
    mount = Mount(emulator, bucket.name, mountpoint,
                  SAVE_ARGS)
    killer = None
    try:
        killer = Killer(mount)
        (mountpoint / "ckpt").mkdir()
        # From here the only object inserts are markers (parts go by the XML API).
        emulator.config(faults=[{"kind": "503", "rate": 1, "count": 1000,
                                 "op": "objects.insert"}])
        f = open(mountpoint / "ckpt" / "big.pt", "wb", buffering=0)  # noqa: SIM115
        try:
            block = os.urandom(MiB)
            for _ in range(7):  # the first 5 MiB part goes out: the upload begins
                f.write(block)
            wait_for(lambda: open_uploads(emulator, bucket.name) != [], timeout=120)
            assert [b.name for b in bucket.list_blobs(prefix=".fluxfs/")] == [], \
                "the marker landed despite the faults"
            killer.kill()
            emulator.config(faults=[])
            # The successor cleaned up before it served: no upload is open any more.
            assert open_uploads(emulator, bucket.name) == []
            with pytest.raises(OSError) as raised:
                f.write(block)
                f.close()
            assert raised.value.errno == errno.EIO
        finally:
            try:
                f.close()
            except OSError:
                pass
        assert bucket.get_blob("ckpt/big.pt") is None
        killer.unmount_and_check(emulator, bucket, ["ckpt/"])
    finally:
        emulator.config(faults=[])
        if killer is not None:
            killer.cleanup()
        mount.close()  # also detaches a mount left behind (fusermount3 -u -z)
