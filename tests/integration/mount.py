"""Start fluxfs against an emulator, wait for the mount, watch its log, unmount.

Usage::

    m = Mount(emulator, "bucket", mountpoint, args=["--stat-ttl", "1"])
    ...                                  # use m.path
    m.expect_errors(r"objects\\.get .* 503")   # this test provokes such log lines
    m.unmount()                          # fusermount3 -u, waits for the daemon, returns its status

The daemon runs in the foreground (-f) so the test owns the process: a daemon that dies while
mounting raises MountError with its log instead of a timeout, and unmount() can check that it
exited 0. The log (stderr, text format) goes to a file; error_lines() returns its ERROR lines so
a test fails on errors nobody expected (like sshfs's test/conftest.py does with stderr).

The fluxfs binary is found through the FLUXFS environment variable or build/src/main/fluxfs.
FLUXFS_KEEP_LOGS=1 keeps the daemon logs (/tmp/fluxfs-log-*.txt) after the tests.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.lib import sanitizer
from tests.lib.emulator import REPO_ROOT

# Not a timed assertion: a guard so a hung mount fails the test instead of hanging the suite.
MOUNT_TIMEOUT_S = 60
EXIT_TIMEOUT_S = 60

# "2026-01-01T00:00:00.000000Z error gcs: ..." (text format of src/util/log.c)
ERROR_LINE = re.compile(r"^\S+ error ")


class MountError(RuntimeError):
    """fluxfs exited or never mounted; the message carries its log."""


def find_fluxfs_binary() -> Path:
    env = os.environ.get("FLUXFS")
    candidate = Path(env) if env else REPO_ROOT / "build" / "src" / "main" / "fluxfs"
    if not candidate.exists():
        raise MountError(f"fluxfs binary not found at {candidate}; build it (meson/ninja) "
                         "or set FLUXFS")
    return candidate


def is_mounted(path) -> bool:
    """True when path is a FUSE mount point (per /proc/self/mountinfo, not stat, so a dead
    daemon's stale mount counts as mounted and gets cleaned up)."""
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            mount_point = fields[4].encode().decode("unicode_escape")
            if mount_point == target:
                return True
    return False


def fluxfs_command(emulator, bucket, mountpoint, args=(), foreground=True):
    """The command line that mounts `bucket` (optionally "bucket/prefix") from the emulator."""
    cmd = [str(find_fluxfs_binary())]
    if foreground:
        cmd.append("-f")
    # FLUXFS_TEST_ARGS adds options to every mount the tests make (e.g. "--crash-restart" to run
    # the whole suite supervised); unset in CI.
    extra = shlex.split(os.environ.get("FLUXFS_TEST_ARGS", ""))
    cmd += ["--endpoint", emulator.url, "--anonymous", *extra, *args, bucket, str(mountpoint)]
    return cmd


def fluxfs_env():
    """The environment for fluxfs: no emulator variable left by the Google client helpers (the
    command line says where to go), no ambient credentials."""
    env = dict(os.environ)
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"):
        env.pop(name, None)
    return env


class Mount:
    def __init__(self, emulator, bucket, mountpoint=None, args=(), *, log_level="info"):
        self.emulator = emulator
        self.bucket = bucket
        self._tmp = None
        if mountpoint is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fluxfs-mnt-")
            mountpoint = self._tmp.name
        self.path = Path(mountpoint)
        self.args = ["--log-level", log_level, *args]
        self.log_path = Path(tempfile.mkstemp(prefix="fluxfs-log-", suffix=".txt")[1])
        self.proc: subprocess.Popen | None = None
        self.allowed_errors: list[re.Pattern] = []
        self._checked_offset = 0
        self.start()

    # --- lifecycle --------------------------------------------------------------------------

    def start(self):
        cmd = fluxfs_command(self.emulator, self.bucket, self.path, self.args)
        self.command = cmd
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=fluxfs_env())
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not is_mounted(self.path):
            rc = self.proc.poll()
            if rc is not None:
                raise MountError(f"fluxfs exited with status {rc} before mounting\n"
                                 f"command: {' '.join(cmd)}\n--- log ---\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise MountError(f"fluxfs did not mount within {MOUNT_TIMEOUT_S} s\n"
                                 f"--- log ---\n{self.log()}")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def unmount(self) -> int:
        """fusermount3 -u, then waits for the daemon; returns its exit status."""
        if self.proc is None:
            return 0
        if is_mounted(self.path):
            subprocess.run(["fusermount3", "-u", str(self.path)], check=True,
                           capture_output=True)
        return self.wait()

    def terminate(self, sig=signal.SIGTERM) -> int:
        """Sends sig to the daemon and waits for it; returns its exit status."""
        self.proc.send_signal(sig)
        return self.wait()

    def wait(self) -> int:
        try:
            rc = self.proc.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise MountError(f"fluxfs did not exit within {EXIT_TIMEOUT_S} s\n"
                             f"--- log ---\n{self.log()}") from None
        return rc

    def kill_daemon(self):
        """SIGKILLs the whole daemon, as systemd's or a container runtime's stop does at its
        end: the process the mount started (by default the --crash-restart supervisor) and the
        serving process(es) it runs, so nothing restarts it and the mount is left stale. The
        supervisor is stopped first, so it forks no successor while its children are read."""
        kill_tree(self.proc.pid)
        self.proc.wait(EXIT_TIMEOUT_S)

    def kill(self):
        """Last resort cleanup: kill the daemon (with the processes it runs) and lazily detach
        a stale mount."""
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()
        if is_mounted(self.path):
            subprocess.run(["fusermount3", "-u", "-z", str(self.path)], capture_output=True)

    def close(self):
        """Unmounts if needed and removes the mount point and the log (kept when the environment
        sets FLUXFS_KEEP_LOGS; a failing test already shows the log's tail)."""
        try:
            if self.alive():
                self.unmount()
        finally:
            self.kill()
            if self._tmp is not None:
                self._tmp.cleanup()
            if not os.environ.get("FLUXFS_KEEP_LOGS"):
                self.log_path.unlink(missing_ok=True)

    # --- log --------------------------------------------------------------------------------

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def error_lines(self, since: int = 0) -> list[str]:
        return [line for line in self.log()[since:].splitlines() if ERROR_LINE.match(line)]

    def expect_errors(self, *patterns: str):
        """Declares ERROR log lines the current test provokes on purpose (regexes)."""
        self.allowed_errors += [re.compile(p) for p in patterns]

    def unexpected_errors(self) -> list[str]:
        """ERROR lines since the last call that no expect_errors pattern allows; resets the
        allowed patterns (they last one test)."""
        text = self.log()
        lines = [line for line in text[self._checked_offset:].splitlines()
                 if sanitizer.REPORT_LINE.search(line)
                 or (ERROR_LINE.match(line)
                     and not any(p.search(line) for p in self.allowed_errors))]
        self._checked_offset = len(text)
        self.allowed_errors = []
        return lines


def faults_injected(emulator) -> int:
    """Faults the emulator has injected so far (its stats)."""
    return emulator.stats()["faults_injected"]


def wait_for(predicate, timeout=30.0):
    """Waits until predicate() is true: a condition, not a sleep (fails after timeout s)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def stat_errno(path):
    """os.stat's errno for path, or "exists (N B)"."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.errno
    return f"exists ({st.st_size} B)"


def read_plain(path) -> bytes:
    """Reads with os.open/os.read: Python's open() asks isatty(), itself an IOCTL request."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def managed_mounts(emulator, make):
    """A generator for fixtures: yields a function that makes a mount with make(*args) and
    keeps it; afterwards faults are reset, and every mount must have logged no unexpected
    error and unmount cleanly."""
    made = []

    def mount(*args):
        m = make(*args)
        made.append(m)
        return m

    yield mount
    emulator.config(faults=[], deny=[])
    problems = []
    for m in made:
        problems += m.unexpected_errors()
        if m.alive() and m.unmount() != 0:
            problems.append(f"exit status {m.proc.returncode}\n{m.log()[-3000:]}")
        m.close()
    assert not problems, "\n".join(problems)


def mounts_fixture(bucket, base_args=()):
    """A function-scoped fixture `mounts(*args)` making mounts of bucket (base_args, then
    args); afterwards faults are reset and every mount must have logged no unexpected error
    and unmount cleanly."""
    import pytest

    @pytest.fixture
    def mounts(emulator):
        yield from managed_mounts(
            emulator, lambda *args: Mount(emulator, bucket, args=[*base_args, *args]))

    return mounts


def mount_status(mountpoint) -> dict:
    """The daemon's `.fluxfs/status`, as a dict of its `key: value` lines."""
    text = read_plain(Path(mountpoint) / ".fluxfs" / "status").decode()
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def pid_alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a detached daemon's parent may be gone, and
    init reaps it later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def parent(pid: int) -> int:
    """The pid of a process's parent (/proc/PID/stat's fourth field)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def children(pid: int) -> list[int]:
    """The pids of a process's children (its main thread's)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def kill_tree(pid: int):
    """SIGKILLs a process and its children: SIGSTOP first (a stopped process forks no more),
    then the children it has, then the process itself (what remains of a --crash-restart
    mount's daemon after it: nothing)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    killed = children(pid)
    for child in killed:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    # The children, orphaned, are reaped by init: until then a zombie's pid still answers
    # kill(pid, 0), and a new mount would take its temporaries for a live mount's.
    wait_for(lambda: not any(os.path.exists(f"/proc/{c}") for c in killed),
             timeout=EXIT_TIMEOUT_S)


def crash_state_memfd(supervisor: int) -> tuple[int, int]:
    """(size, bytes allocated) of a --crash-restart supervisor's crash-state memfd (sparse:
    1 GiB long); (0, 0) when it holds none."""
    for fd in os.listdir(f"/proc/{supervisor}/fd"):
        try:
            target = os.readlink(f"/proc/{supervisor}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:fluxfs-crash-state"):
            st = os.stat(f"/proc/{supervisor}/fd/{fd}")
            return st.st_size, st.st_blocks * 512
    return 0, 0


def kill_serving(supervisor: int, serving: int, mountpoint, timeout=EXIT_TIMEOUT_S,
                 read_status=None) -> dict:
    """SIGKILLs the serving process of a --crash-restart mount and waits for the supervisor's
    next child to serve; returns the status file then (its "pid" is the new serving process,
    the supervisor's only child). read_status reads the status (default mount_status)."""
    os.kill(serving, signal.SIGKILL)
    wait_for(lambda: not pid_alive(serving), timeout=timeout)
    wait_for(lambda: children(supervisor) not in ([], [serving]), timeout=timeout)
    st = (read_status or (lambda: mount_status(mountpoint)))()
    new = int(st["pid"])
    assert new != serving and children(supervisor) == [new], st
    return st
