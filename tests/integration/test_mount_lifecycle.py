"""The fluxfs command: detaching only after the mount works, clean unmounts (fusermount3 -u,
SIGTERM, SIGINT), fstab-style invocation, and clear errors with the right exit status for bad
options, a missing bucket and an unreachable endpoint."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from tests.integration.mount import (
    EXIT_TIMEOUT_S,
    Mount,
    find_fluxfs_binary,
    fluxfs_command,
    fluxfs_env,
    is_mounted,
)

BUCKET = "life"
pytestmark = pytest.mark.emulator_only


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/x/:3:100"]


def run_fluxfs(args, timeout=120):
    return subprocess.run([str(find_fluxfs_binary()), *args], capture_output=True, text=True,
                          env=fluxfs_env(), stdin=subprocess.DEVNULL, timeout=timeout)


def daemon_pids(mountpoint):
    """Processes running fluxfs for this mountpoint (the detached daemon is not our child)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"fluxfs") and str(mountpoint).encode() in argv:
            pids.append(int(entry))
    return pids


def wait_gone(pid):
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ", 1)[1].startswith("Z"):
                return  # exited, waiting for its (init) parent to reap it
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), f"daemon {pid} still running"


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_detaches_only_after_the_mount_is_live(emulator, mountpoint, tmp_path):
    log = tmp_path / "daemon.log"
    cmd = fluxfs_command(emulator, BUCKET, mountpoint, ["--log-file", str(log)],
                         foreground=False)
    # capture_output: run() returns only when the daemon has let go of stdout and stderr.
    result = subprocess.run(cmd, capture_output=True, text=True, env=fluxfs_env(),
                            stdin=subprocess.DEVNULL, timeout=120)
    assert result.returncode == 0, result.stderr
    assert is_mounted(mountpoint)  # live when the command returns, no polling
    assert sorted(os.listdir(mountpoint / "x")) == ["00000000", "00000001", "00000002"]
    # The daemon: the --crash-restart supervisor (a session leader: setsid) and the serving
    # process, its child in its session.
    pids = daemon_pids(mountpoint)
    assert len(pids) == 2, pids
    stats = {}
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().split(") ", 1)[1].split()
        stats[pid] = (int(fields[1]), int(fields[3]))  # parent, session
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
    supervisor = [pid for pid in pids if stats[pid][1] == pid]
    assert len(supervisor) == 1, f"the daemon is not a session leader (setsid): {stats}"
    serving = [pid for pid in pids if pid != supervisor[0]]
    assert stats[serving[0]] == (supervisor[0], supervisor[0]), stats
    subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
    for pid in pids:
        wait_gone(pid)
    assert not is_mounted(mountpoint)
    assert "mounted gs://life/" in log.read_text()


def test_fusermount_unmount_exits_zero(emulator, mountpoint):
    m = Mount(emulator, BUCKET, mountpoint)
    try:
        assert os.listdir(mountpoint) == ["x"]
        assert m.unmount() == 0
        assert not is_mounted(mountpoint)
        assert m.error_lines() == []
    finally:
        m.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_unmounts_and_exits_zero(emulator, mountpoint, sig):
    m = Mount(emulator, BUCKET, mountpoint)
    try:
        os.stat(mountpoint / "x" / "00000001")
        assert m.terminate(sig) == 0
        assert not is_mounted(mountpoint)
        assert m.error_lines() == []
    finally:
        m.close()


def test_fstab_style_invocation(emulator, mountpoint):
    """What mount.fuse3 runs for an fstab line: options after the arguments, fstab-only keys."""
    opts = (f"rw,noauto,nofail,_netdev,user,x-systemd.automount,x-systemd.idle-timeout=60,"
            f"ro,endpoint={emulator.url},anonymous,stat_ttl=30s,file_mode=0440")
    cmd = [str(find_fluxfs_binary()), BUCKET, str(mountpoint), "-o", opts, "-o", "foreground"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=fluxfs_env())
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(mountpoint):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "not mounted"
            time.sleep(0.02)
        assert os.statvfs(mountpoint).f_flag & os.ST_RDONLY
        assert os.stat(mountpoint / "x" / "00000000").st_mode & 0o7777 == 0o440
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
        assert proc.wait(EXIT_TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_help_and_version():
    result = run_fluxfs(["--help"])
    assert result.returncode == 0
    for topic in ("Mounting:", "Credentials", "Presentation", "Metadata caching",
                  "Performance", "Logging:"):
        assert topic in result.stdout
    result = run_fluxfs(["--version"])
    assert result.returncode == 0
    assert result.stdout.startswith("fluxfs ")


@pytest.mark.parametrize("args, message", [
    (["--bogus", BUCKET, "{mnt}"], "unknown option '--bogus'"),
    (["-o", "bogus_key", BUCKET, "{mnt}"], "unknown option '-o bogus_key'"),
    ([BUCKET, "{mnt}", "--key-file"], "'--key-file' needs a value"),
    (["--stat-ttl", "soon", BUCKET, "{mnt}"], "'--stat-ttl': 'soon'"),
    (["--memory-limit", "12Q", BUCKET, "{mnt}"], "'--memory-limit': '12Q'"),
    (["--file-mode", "999", BUCKET, "{mnt}"], "'--file-mode': '999'"),
    (["--max-connections", "many", BUCKET, "{mnt}"], "'--max-connections'"),
    (["--anonymous", "--key-file", "/dev/null", BUCKET, "{mnt}"], "--anonymous and --key-file"),
    (["Not_A_Bucket", "{mnt}"], "invalid bucket name 'Not_A_Bucket'"),
    ([BUCKET, "{mnt}/missing"], "No such file or directory"),
    ([BUCKET, "/etc/hostname"], "is not a directory"),
    ([BUCKET], "missing MOUNTPOINT"),
])
def test_bad_command_lines_exit_2_with_one_clear_line(mountpoint, args, message):
    args = [a.replace("{mnt}", str(mountpoint)) for a in args]
    result = run_fluxfs(args)
    assert result.returncode == 2, result.stderr
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith("fluxfs: ")
    assert message in first_line
    assert not is_mounted(mountpoint)


@pytest.mark.parametrize("foreground", [True, False])
def test_unreachable_endpoint_fails_before_detaching(mountpoint, foreground):
    url = f"http://127.0.0.1:{closed_port()}"
    args = ["--endpoint", url, "--anonymous", "--max-retries", "1", "--request-deadline", "10s",
            BUCKET, str(mountpoint)]
    result = run_fluxfs((["-f"] if foreground else []) + args)
    assert result.returncode == 1, result.stderr
    assert f"cannot access gs://{BUCKET} at {url}" in result.stderr
    assert not is_mounted(mountpoint)
    assert daemon_pids(mountpoint) == []


@pytest.mark.parametrize("foreground", [True, False])
def test_missing_bucket_fails_before_detaching(emulator, mountpoint, foreground):
    cmd = fluxfs_command(emulator, "no-such-bucket", mountpoint, foreground=foreground)
    result = subprocess.run(cmd, capture_output=True, text=True, env=fluxfs_env(),
                            stdin=subprocess.DEVNULL, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "no-such-bucket" in result.stderr
    assert "does not exist" in result.stderr
    assert not is_mounted(mountpoint)
    assert daemon_pids(mountpoint) == []


def mount_foreground(cmd, mountpoint, env):
    """Starts a foreground fluxfs and waits for its mount; returns the process."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while not is_mounted(mountpoint):
        if proc.poll() is not None:
            raise AssertionError(f"fluxfs exited {proc.returncode}: {proc.stderr.read().decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("not mounted")
        time.sleep(0.02)
    return proc


def unmount_and_wait(proc, mountpoint):
    subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
    try:
        return proc.wait(EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("form", ["url", "host:port"])
def test_storage_emulator_host_is_honoured(emulator, mountpoint, form):
    """No --endpoint, no --anonymous: the variable alone selects the emulator, without auth."""
    env = fluxfs_env()
    env["STORAGE_EMULATOR_HOST"] = emulator.url if form == "url" else emulator.host
    proc = mount_foreground([str(find_fluxfs_binary()), "-f", BUCKET, str(mountpoint)],
                            mountpoint, env)
    assert os.listdir(mountpoint) == ["x"]
    assert unmount_and_wait(proc, mountpoint) == 0


def test_gcsfuse_command_line(emulator, mountpoint):
    """gcsfuse's flags and positional form, with only the binary name changed."""
    cmd = [str(find_fluxfs_binary()), "--foreground", "--implicit-dirs", "--only-dir", "x",
           f"--custom-endpoint={emulator.url}/storage/v1/", "--anonymous-access",
           "--stat-cache-ttl", "1m0s", "--type-cache-ttl", "1m0s", "--file-mode", "600",
           "--dir-mode", "700", "--max-conns-per-host", "16", "--log-severity", "WARNING",
           "--log-format", "text", BUCKET, str(mountpoint)]
    proc = mount_foreground(cmd, mountpoint, fluxfs_env())
    assert sorted(os.listdir(mountpoint)) == ["00000000", "00000001", "00000002"]
    assert os.stat(mountpoint / "00000001").st_mode & 0o7777 == 0o600
    assert unmount_and_wait(proc, mountpoint) == 0


def test_json_log_file(emulator, mountpoint, tmp_path):
    log = tmp_path / "fluxfs.json"
    cmd = fluxfs_command(emulator, BUCKET, mountpoint,
                         ["--log-format", "json", "--log-file", str(log)])
    proc = mount_foreground(cmd, mountpoint, fluxfs_env())
    os.listdir(mountpoint / "x")
    assert unmount_and_wait(proc, mountpoint) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records, "empty log"
    assert all({"time", "level", "component", "message"} <= r.keys() for r in records)
    assert any(r["message"].startswith("mounted gs://life/") for r in records)
