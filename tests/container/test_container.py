"""The container image (issue 26), run by scripts/test-container with the image it built
(FLUXFS_CONTAINER_IMAGE) and its podman command (FLUXFS_PODMAN); skipped otherwise.

In one container as root (--device /dev/fuse --cap-add SYS_ADMIN, --network host to reach the
emulator on the host): mount, list, read, write, then `podman stop` (SIGTERM, SIGKILL 10 s
later, docker's and podman's default) while a file is open for writing: fluxfs must commit it
whole and exit 0 within the stop timeout. Then the caller-mounted /dev/fd/N path as the image's
non-root user (65532), used and stopped the same way from the host; and the message a container
without /dev/fuse gets."""

import ctypes
import hashlib
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path

import pytest

IMAGE = os.environ.get("FLUXFS_CONTAINER_IMAGE")
PODMAN = shlex.split(os.environ.get("FLUXFS_PODMAN", "podman"))

pytestmark = [pytest.mark.emulator_only,
              pytest.mark.skipif(not IMAGE, reason="run by scripts/test-container")]

BUCKET = "ctr"
SEED = 7
SIZE = 70_000
HELD_SIZE = 3_000_000  # several write requests, below one upload part: all in the tail commit
STOP_TIMEOUT_S = 10     # docker stop / podman stop default
WAIT_S = 60             # a guard against a hang, not a timed assertion
MNT_DETACH = 2


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/data/:3:{SIZE}:{SEED}"]


def podman(*args, check=True, **kwargs):
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, check=check,
                          timeout=WAIT_S + STOP_TIMEOUT_S, **kwargs)


def pattern(word: bytes, size: int) -> bytes:
    """What `yes WORD | head -c SIZE` writes."""
    line = word + b"\n"
    return (line * (size // len(line) + 1))[:size]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_bytes(gcs, name):
    blob = gcs.bucket(BUCKET).get_blob(name)
    assert blob is not None, f"gs://{BUCKET}/{name} missing"
    return blob.download_as_bytes()


def wait_until(predicate, what):
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, what()
        time.sleep(0.1)


def logs(name):
    result = podman("logs", name, check=False)
    return result.stdout + result.stderr


def stop_and_check_exit(name):
    """podman stop with the default timeout; fluxfs must exit 0 by itself (137: SIGKILLed)."""
    podman("stop", "-t", str(STOP_TIMEOUT_S), name)
    state = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
    text = logs(name)
    assert state == "0", f"exit {state}:\n{text}"
    return text


def test_image_stops_with_sigterm():
    inspect = podman("image", "inspect", "--format",
                     "{{.Config.StopSignal}} {{.Config.User}}", IMAGE).stdout.split()
    assert inspect == ["SIGTERM", "65532:65532"]


def test_mount_in_container_and_stop_loses_nothing(emulator, gcs):
    name = f"fluxfs-ci-root-{os.getpid()}"
    podman("run", "-d", "--name", name, "--network", "host", "--device", "/dev/fuse",
           "--cap-add", "SYS_ADMIN", "--user", "0", IMAGE, "--endpoint", emulator.url,
           "--anonymous", BUCKET, "/mnt")
    try:
        def mounted():
            return podman("exec", name, "grep", "-q", " /mnt .* fuse.fluxfs ",
                          "/proc/self/mountinfo", check=False).returncode == 0
        wait_until(mounted, lambda: logs(name))

        listing = podman("exec", name, "ls", "/mnt/data").stdout.split()
        assert listing == [f"{i:08d}" for i in range(3)]
        for entry in listing:
            got = podman("exec", name, "sha256sum", f"/mnt/data/{entry}").stdout.split()[0]
            assert got == sha(blob_bytes(gcs, f"data/{entry}"))
        podman("exec", name, "sh", "-c", "mkdir -p /mnt/out && yes small | head -c 100000 > /mnt/out/small")
        assert blob_bytes(gcs, "out/small") == pattern(b"small", 100_000)

        # A writer that never closes (perl, Essential in Debian: a shell's redirections close
        # duplicates, and a close by the writer commits): the stop must commit it, whole.
        assert HELD_SIZE % len(b"held\n") == 0
        podman("exec", "-d", name, "perl", "-e",
               'open(my $f, ">", $ARGV[0]) or die; my $d = "held\\n" x $ARGV[1]; '
               'syswrite($f, $d) == length($d) or die; open(my $t, ">", "/tmp/written"); '
               'close($t); sleep 1000', "/mnt/out/held", str(HELD_SIZE // len(b"held\n")))
        wait_until(lambda: podman("exec", name, "test", "-e", "/tmp/written",
                                  check=False).returncode == 0, lambda: "writer never wrote")
        before = gcs.bucket(BUCKET).get_blob("out/held")  # created empty at open, no more
        assert before is None or before.size == 0, before.size
        text = stop_and_check_exit(name)
        assert blob_bytes(gcs, "out/held") == pattern(b"held", HELD_SIZE), text
        assert "committed 1 as fsync would (0 failed)" in text, text
        # /mnt is the container's own, private mount: the warning says it is not shared.
        assert "will not be seen outside the container" in text, text
        assert "modprobe" not in text
    finally:
        podman("rm", "-f", name, check=False)


def libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return lib


def within(fn, what):
    """Runs fn in a thread: a daemon that never answers must fail the test, not hang it."""
    result, error = [], []

    def run():
        try:
            result.append(fn())
        except BaseException as e:  # noqa: BLE001 - reported below
            error.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(WAIT_S)
    assert not t.is_alive(), f"{what} hung"
    if error:
        raise error[0]
    return result[0]


def test_descriptor_handoff_non_root(emulator, gcs, tmp_path):
    """The caller (this process, root on the host) mounts with fd=N; the container, as 65532
    with no device and no capability, serves /dev/fd/3; the host uses and stops it."""
    lib = libc()
    target = tmp_path / "target"
    target.mkdir()
    fuse_fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    options = f"fd={fuse_fd},rootmode=40000,user_id=0,group_id=0,allow_other"
    assert lib.mount(f"gs://{BUCKET}".encode(), str(target).encode(), b"fuse.fluxfs", 0,
                     options.encode()) == 0, os.strerror(ctypes.get_errno())
    mounted = True
    name = f"fluxfs-ci-fd-{os.getpid()}"
    held = None
    try:
        # podman --preserve-fds 1 passes its descriptor 3 on as the container's 3.
        subprocess.run(["bash", "-c", f'exec "$@" 3<&{fuse_fd}', "podman",
                        *PODMAN, "run", "-d", "--name", name, "--network", "host",
                        "--preserve-fds", "1", IMAGE, "--endpoint", emulator.url,
                        "--anonymous", BUCKET, "/dev/fd/3"],
                       check=True, capture_output=True, pass_fds=(fuse_fd,), timeout=WAIT_S)
        os.close(fuse_fd)  # only the container holds the connection now
        fuse_fd = -1
        wait_until(lambda: "mounted gs://" in logs(name), lambda: logs(name))
        assert podman("exec", name, "id", "-u").stdout.strip() == "65532"

        names = within(lambda: sorted(os.listdir(target / "data")), "listing")
        assert names == [f"{i:08d}" for i in range(3)]
        for entry in names:
            data = within(lambda e=entry: (target / "data" / e).read_bytes(), "reading")
            assert data == blob_bytes(gcs, f"data/{entry}")
        within(lambda: (target / "fd-small").write_bytes(pattern(b"fd", 50_000)), "writing")
        assert blob_bytes(gcs, "fd-small") == pattern(b"fd", 50_000)

        held = os.open(target / "fd-held", os.O_WRONLY | os.O_CREAT, 0o644)
        payload = pattern(b"fd-held", HELD_SIZE)
        within(lambda: os.write(held, payload), "writing the held file")
        text = stop_and_check_exit(name)
        assert blob_bytes(gcs, "fd-held") == payload, text
        assert "committed 1 as fsync would (0 failed)" in text, text
    finally:
        if held is not None:
            try:
                os.close(held)
            except OSError:
                pass  # ENOTCONN: the daemon is gone, as intended
        podman("rm", "-f", name, check=False)
        if fuse_fd >= 0:
            os.close(fuse_fd)
        if mounted:
            lib.umount2(str(target).encode(), MNT_DETACH)


def test_no_fuse_device_message(emulator):
    result = podman("run", "--rm", "--network", "host", IMAGE, "--endpoint", emulator.url,
                    "--anonymous", BUCKET, "/mnt", check=False)
    assert result.returncode != 0
    assert "--device /dev/fuse" in result.stderr, result.stderr
    assert "--cap-add SYS_ADMIN" in result.stderr, result.stderr
    assert "modprobe" not in result.stderr, result.stderr
