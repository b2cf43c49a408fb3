"""--prometheus-port: /metrics scraped and parsed with the official client's text parser
(prometheus_client), counters that move with the work done (one read of N bytes makes
gcs_read_bytes_count grow by N), every FUSE request kind counted (IOCTL included) in /metrics
and in .fluxfs/status, errors by gcsfuse's categories, upload counters, a clear failure
when the port is taken, and `fluxfs status MOUNT [--json]`."""

import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.mount import (Mount, MountError, find_fluxfs_binary, fluxfs_command,
                                     fluxfs_env, read_plain)
from tests.integration.prefetch_util import wait_for
from tests.lib.synth import first_mismatch

pytestmark = pytest.mark.emulator_only

BUCKET = "metrics"
SEED = 5
COUNT = 8
SIZE = 300_000
BIG_SIZE = 6 << 20  # above the small-file threshold (4 MiB): the reader's own ranged GETs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = free_port()


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/d/:{COUNT}:{SIZE}:{SEED}",
            "--populate", f"{BUCKET}/big/:2:{BIG_SIZE}:{SEED}"]


@pytest.fixture(scope="module")
def mount_bucket():
    return BUCKET


@pytest.fixture(scope="module")
def mount_args():
    return ["--prometheus-port", str(PORT)]


def scrape_text(port=PORT, path="/metrics") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return reply.read().decode()


def scrape(port=PORT) -> dict:
    """{(sample name, frozenset of labels): value} of one scrape, parsed by prometheus_client."""
    samples = {}
    for family in text_string_to_metric_families(scrape_text(port)):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples, name, **labels) -> float:
    # The parser names a counter's samples NAME_total (gcsfuse's exposition has no suffix).
    key = frozenset(labels.items())
    return samples.get((name, key), samples.get((name + "_total", key), 0.0))


def total(samples, name) -> float:
    return sum(v for (n, _), v in samples.items() if n in (name, name + "_total"))


def eventually(check, timeout=60.0):
    """check() until it stops raising AssertionError: the kernel sends RELEASE after close()
    returns (asynchronously), so what a release moves can come a moment later (the timeout is a
    guard against a hang: the ASan daemon beside CPU hogs can take seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def status(mount) -> dict:
    text = read_plain(Path(mount.path) / ".fluxfs" / "status").decode()
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def test_scrape_parses_with_gcsfuse_names_and_types(fluxfs_mount):
    os.listdir(fluxfs_mount.path)
    families = {f.name: f for f in text_string_to_metric_families(scrape_text())}
    expected = {
        "fs_ops_count": "counter", "fs_ops_error_count": "counter",
        "fs_ops_latency": "histogram", "gcs_request_count": "counter",
        "gcs_request_latencies": "histogram", "gcs_read_bytes_count": "counter",
        "gcs_download_bytes_count": "counter", "gcs_reader_count": "counter",
        "gcs_retry_count": "counter", "fluxfs_upload_commit_count": "counter",
        "fluxfs_memory_budget_used_bytes": "gauge", "fluxfs_cache_hits_count": "counter",
        "fluxfs_prefetch_bytes_count": "counter", "fluxfs_list_pages_count": "counter",
        "fluxfs_prefetch_dir_lists_count": "counter", "fluxfs_upload_retry_count": "counter",
    }
    for name, kind in expected.items():
        assert name in families, f"{name} missing from /metrics"
        assert families[name].type == kind, (name, families[name].type)
    samples = scrape()
    assert value(samples, "fs_ops_count", fs_op="ReadDir") + \
        value(samples, "fs_ops_count", fs_op="ReadDirPlus") >= 1
    assert value(samples, "gcs_request_count", gcs_method="ListObjects") >= 1
    # A histogram's count equals its +Inf bucket and the ops counter.
    lookups = value(samples, "fs_ops_count", fs_op="LookUpInode")
    if lookups:
        assert value(samples, "fs_ops_latency_count", fs_op="LookUpInode") == lookups
        assert value(samples, "fs_ops_latency_bucket", fs_op="LookUpInode", le="+Inf") == lookups


def test_one_read_moves_read_bytes_by_its_size(fluxfs_mount, gcs):
    name = "d/00000003"
    generation = gcs.bucket(BUCKET).get_blob(name).generation
    before = scrape()
    data = read_plain(Path(fluxfs_mount.path) / name)
    after = scrape()
    assert len(data) == SIZE
    assert first_mismatch(name, generation, SEED, 0, data) is None
    grew = value(after, "gcs_read_bytes_count", reader="Others") - \
        value(before, "gcs_read_bytes_count", reader="Others")
    assert grew == SIZE
    assert total(after, "gcs_download_bytes_count") - total(before, "gcs_download_bytes_count") \
        == SIZE
    assert value(after, "gcs_request_count", gcs_method="NewReader") > \
        value(before, "gcs_request_count", gcs_method="NewReader")
    opened = value(after, "gcs_reader_count", io_method="opened")
    assert opened > value(before, "gcs_reader_count", io_method="opened")
    assert value(after, "fs_ops_count", fs_op="OpenFile") > \
        value(before, "fs_ops_count", fs_op="OpenFile")

    def released():
        now = scrape()
        assert value(now, "fs_ops_count", fs_op="ReleaseFileHandle") > \
            value(before, "fs_ops_count", fs_op="ReleaseFileHandle")
        assert value(now, "gcs_reader_count", io_method="closed") == opened
    # (READs may not reach the daemon at all: the open can put the bytes into the page cache.)
    eventually(released)
    # A second read is served from the kernel or the content cache: no new object bytes.
    (Path(fluxfs_mount.path) / name).read_bytes()
    again = scrape()
    assert value(again, "gcs_read_bytes_count", reader="Others") == \
        value(after, "gcs_read_bytes_count", reader="Others")


def test_random_reads_move_the_random_download_series(fluxfs_mount, gcs):
    """gcsfuse counts the bytes a seeking reader downloads as read_type Random; fluxfs labels
    the fetches of reads that readahead judged random (not continuing the previous read)."""
    name = "big/00000000"
    generation = gcs.bucket(BUCKET).get_blob(name).generation
    before = scrape()
    fd = os.open(Path(fluxfs_mount.path) / name, os.O_RDONLY)
    try:
        # Page-aligned 4 KiB reads far apart, none at offset 0: the kernel forwards each as it
        # is (a small random read gets no readahead), the reader fetches random_min around it.
        for offset in (5 << 20, 1 << 20, 3 << 20, (4 << 20) + 4096 * 37):
            data = os.pread(fd, 4096, offset)
            assert len(data) == 4096
            assert first_mismatch(name, generation, SEED, offset, data) is None
    finally:
        os.close(fd)
    after = scrape()
    random = value(after, "gcs_download_bytes_count", read_type="Random") - \
        value(before, "gcs_download_bytes_count", read_type="Random")
    assert random >= 4 * 4096
    # No byte of the object was fetched twice or labelled twice.
    grew = total(after, "gcs_download_bytes_count") - total(before, "gcs_download_bytes_count")
    assert random <= grew <= BIG_SIZE
    # A sequential read of the other object moves Sequential by its size, not Random; unless
    # the page cache dropped bytes it was served and the kernel asked again (another test's
    # drop_caches on this machine): those are fetched again, counted as refetched, and the
    # backward jump to them reads as random.
    data = read_plain(Path(fluxfs_mount.path) / "big/00000001")
    assert len(data) == BIG_SIZE
    sequential = scrape()

    def grew(name, **labels):
        return value(sequential, name, **labels) - value(after, name, **labels)
    refetched = grew("fluxfs_refetched_bytes_count")
    assert grew("gcs_download_bytes_count", read_type="Sequential") + \
        grew("gcs_download_bytes_count", read_type="Random") - refetched == BIG_SIZE
    assert grew("gcs_download_bytes_count", read_type="Random") <= refetched


def test_errors_are_counted_by_category(fluxfs_mount):
    before = scrape()
    with pytest.raises(FileNotFoundError):
        os.stat(Path(fluxfs_mount.path) / "d" / "no-such-file-for-metrics")
    after = scrape()
    key = dict(fs_op="LookUpInode", fs_error_category="NO_FILE_OR_DIR")
    assert value(after, "fs_ops_error_count", **key) == value(before, "fs_ops_error_count",
                                                               **key) + 1
    assert value(after, "gcs_request_count", gcs_method="StatObject") + \
        value(after, "gcs_request_count", gcs_method="ListObjects") > \
        value(before, "gcs_request_count", gcs_method="StatObject") + \
        value(before, "gcs_request_count", gcs_method="ListObjects")


def test_ioctl_is_counted_in_metrics_and_status(fluxfs_mount):
    before_status = status(fluxfs_mount)
    before = scrape()
    fd = os.open(Path(fluxfs_mount.path) / "d" / "00000001", os.O_RDONLY)
    try:
        with pytest.raises(OSError) as raised:
            fcntl.ioctl(fd, 0x80086601, bytearray(8))  # FS_IOC_GETFLAGS
        assert raised.value.errno in (errno.ENOTTY, errno.ENOSYS, errno.EINVAL, errno.ENOTSUP)
    finally:
        os.close(fd)
    after = scrape()
    after_status = status(fluxfs_mount)
    assert value(after, "fs_ops_count", fs_op="Ioctl") == \
        value(before, "fs_ops_count", fs_op="Ioctl") + 1
    assert int(after_status["fuse_op_ioctl"]) == int(before_status["fuse_op_ioctl"]) + 1
    # ENOTTY to an ioctl the mount does not support is an answer, not an error (issue 22):
    # counted apart, in neither fs_ops_error_count nor the status's errors.
    assert value(after, "fs_ops_unsupported_count", fs_op="Ioctl") == \
        value(before, "fs_ops_unsupported_count", fs_op="Ioctl") + 1
    assert total(after, "fs_ops_error_count") == total(before, "fs_ops_error_count")
    assert int(after_status["fuse_op_ioctl_errors"]) == int(before_status["fuse_op_ioctl_errors"])
    assert int(after_status["fuse_errors"]) == int(before_status["fuse_errors"])
    assert int(after_status["fuse_unsupported"]) == int(before_status["fuse_unsupported"]) + 1


def test_isatty_at_every_open_is_no_error(fluxfs_mount):
    """CPython's open() asks isatty (TCGETS) of every file: 50 opens, no error counted."""
    before_status = status(fluxfs_mount)
    for i in range(50):
        with open(Path(fluxfs_mount.path) / "d" / f"{i % COUNT:08d}", "rb") as f:
            assert not f.isatty()
    after_status = status(fluxfs_mount)
    assert int(after_status["fuse_errors"]) == int(before_status["fuse_errors"])
    assert int(after_status["fuse_unsupported"]) >= int(before_status["fuse_unsupported"]) + 50


def test_status_file_has_identity_and_per_kind_counts(fluxfs_mount):
    s = status(fluxfs_mount)
    assert s["bucket"] == BUCKET
    assert s["version"]
    assert float(s["uptime_s"]) >= 0
    assert s["metrics_url"] == f"http://127.0.0.1:{PORT}/metrics"
    assert int(s["fuse_requests"]) >= int(s["fuse_op_lookup"]) > 0
    # Every request kind has a key, also the ones never sent.
    for kind in ("lookup", "getattr", "open", "read", "write", "ioctl", "setxattr", "statfs",
                 "readdirplus", "batch_forget", "lseek", "copy_file_range"):
        assert f"fuse_op_{kind}" in s and f"fuse_op_{kind}_errors" in s, kind
    assert int(s["fuse_op_init"]) == 1 and int(s["fuse_op_destroy"]) == 0
    assert int(s["memory_limit"]) > 0
    wait_for(fluxfs_mount, lambda s: int(s["open_writers"]) == 0, "earlier writers' release")


def test_a_write_moves_upload_counters(fluxfs_mount):
    before = scrape()
    payload = os.urandom(123_457)
    target = Path(fluxfs_mount.path) / "written-for-metrics.bin"
    with open(target, "wb") as f:
        f.write(payload)
        f.flush()
        held = status(fluxfs_mount)
        assert int(held["open_writers"]) == 1
        # The write buffer holds the bytes until the commit: shown beside the read budget.
        assert int(held["write_buffer_used"]) >= len(payload), held
        assert int(held["write_buffer_peak"]) >= int(held["write_buffer_used"])
        assert int(held["write_buffer_limit"]) > 0
        assert value(scrape(), "fluxfs_write_buffer_bytes") >= len(payload)
    after = scrape()
    assert value(after, "fluxfs_upload_commit_count") == \
        value(before, "fluxfs_upload_commit_count") + 1
    assert value(after, "fluxfs_upload_parts_count") > value(before, "fluxfs_upload_parts_count")
    assert value(after, "fluxfs_upload_bytes_count") - \
        value(before, "fluxfs_upload_bytes_count") >= len(payload)
    assert value(after, "fs_ops_count", fs_op="WriteFile") > \
        value(before, "fs_ops_count", fs_op="WriteFile")
    # close() returns with FLUSH's answer (the commit); the writer ends at RELEASE, which the
    # kernel sends after that: wait for it rather than race it.
    wait_for(fluxfs_mount, lambda s: int(s["open_writers"]) == 0, "the writer's release")
    target.unlink()


def test_only_metrics_is_served(fluxfs_mount):
    with pytest.raises(urllib.error.HTTPError) as raised:
        scrape_text(path="/")
    assert raised.value.code == 404


def test_taken_port_fails_the_mount_with_a_clear_message(emulator, tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        mountpoint = tmp_path / "mnt"
        mountpoint.mkdir()
        cmd = fluxfs_command(emulator, BUCKET, mountpoint, ["--prometheus-port", str(port)],
                             foreground=False)
        result = subprocess.run(cmd, capture_output=True, text=True, env=fluxfs_env(),
                                timeout=120)
    assert result.returncode != 0
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr, result.stderr
    assert not os.path.ismount(mountpoint)


def test_prometheus_port_as_mount_option(emulator):
    port = free_port()
    mount = Mount(emulator, BUCKET, args=["-o", f"prometheus_port={port}"])
    try:
        os.listdir(mount.path)
        assert value(scrape(port), "fs_ops_count", fs_op="OpenDir") >= 1
    finally:
        assert mount.unmount() == 0
        mount.close()


STAT_IN_CHILD = """
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *_: None)  # a signal that interrupts, not one that kills
print("ready", flush=True)
print(os.stat(sys.argv[1]).st_size, flush=True)
# Python's finalization puts the default action (death) back: a late signal is held instead.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
os._exit(0)
"""


def test_an_interrupted_request_is_counted(emulator):
    """libfuse answers INTERRUPT by itself (no operation of the table sees it); fluxfs counts
    it where libfuse reads the device. A caller signalled while its LOOKUP waits on a slow
    bucket makes the kernel send one; the lookup still completes."""
    port = free_port()
    mount = Mount(emulator, BUCKET, args=["--prometheus-port", str(port)])
    try:
        before = value(scrape(port), "fs_ops_count", fs_op="Interrupt")
        emulator.config(latency_ms=800)
        try:
            child = subprocess.Popen([sys.executable, "-c", STAT_IN_CHILD,
                                      str(mount.path / "d" / "00000002")],
                                     stdout=subprocess.PIPE, text=True)
            assert child.stdout.readline() == "ready\n"
            # Signalled until it is done: each signal that finds it waiting on the daemon
            # makes an INTERRUPT (a fresh mount: the lookups of d and of the file each wait
            # for a request to the bucket).
            while child.poll() is None:
                time.sleep(0.2)
                child.send_signal(signal.SIGUSR1)
            out, _ = child.communicate(timeout=30)
        finally:
            emulator.config(latency_ms=0)
        assert child.returncode == 0
        assert int(out) == SIZE
        after = scrape(port)
        assert value(after, "fs_ops_count", fs_op="Interrupt") > before
        assert value(after, "fs_ops_error_count", fs_op="Interrupt",
                     fs_error_category="INTERRUPT_ERROR") == 0
        assert int(status(mount)["fuse_op_interrupt"]) >= 1
    finally:
        assert mount.unmount() == 0
        mount.close()


def test_bad_address_is_refused(emulator, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    with pytest.raises(MountError) as raised:
        Mount(emulator, BUCKET, mountpoint, args=["--prometheus-port", str(free_port()),
                                                  "--prometheus-address", "not an address"])
    assert "cannot resolve the metrics address 'not an address'" in str(raised.value)


# --- fluxfs status MOUNT [--json] ---------------------------------------------------------

def run_status(*args):
    return subprocess.run([str(find_fluxfs_binary()), "status", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def test_status_command_summarises_the_mount(fluxfs_mount):
    (Path(fluxfs_mount.path) / "d" / "00000002").read_bytes()
    result = run_status(fluxfs_mount.path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"on {os.path.realpath(fluxfs_mount.path)}: gs://{BUCKET}/" in out
    assert f"Metrics:       http://127.0.0.1:{PORT}/metrics" in out
    for heading in ("FUSE requests:", "Cloud Storage:", "Throughput:", "Uploads:", "Memory:"):
        assert heading in out, out
    assert "lookup " in out and "NewReader " in out, out


def test_status_command_json_from_a_path_inside_the_mount(fluxfs_mount):
    result = run_status(Path(fluxfs_mount.path) / "d", "--json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["bucket"] == BUCKET
    assert isinstance(figures["fuse_requests"], int) and figures["fuse_requests"] > 0
    assert isinstance(figures["uptime_s"], float)
    assert isinstance(figures["fuse_op_ioctl"], int)
    assert figures["version"] == status(fluxfs_mount)["version"]
    assert figures["gcs_read_bytes"] >= SIZE


def test_status_command_refuses_what_is_not_a_mount(tmp_path):
    result = run_status(tmp_path)
    assert result.returncode == 1
    assert f"{tmp_path} is not on a fluxfs mount" in result.stderr
    # A look-alike control file that is not fluxfs's.
    (tmp_path / ".fluxfs").mkdir()
    (tmp_path / ".fluxfs" / "status").write_text("hello: world\n")
    result = run_status(tmp_path)
    assert result.returncode == 1 and "not fluxfs's" in result.stderr
    assert run_status(tmp_path / "missing").returncode == 1
    usage = run_status()
    assert usage.returncode == 2 and "Usage: fluxfs status MOUNT [--json]" in usage.stderr
    assert run_status(tmp_path, "--bogus").returncode == 2


def test_grafana_dashboard_uses_only_served_metrics(fluxfs_mount):
    import re
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "packaging" / "grafana" /
                            "fluxfs-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b([a-z_]+)\{instance", e)}
    served = {f.name for f in text_string_to_metric_families(scrape_text())}
    # Histogram series are NAME_bucket of family NAME.
    missing = {m for m in used if m not in served and m.removesuffix("_bucket") not in served}
    assert not missing and len(used) >= 20, (missing, used)


def test_ipv6_listener_address(emulator):
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
            port = s.getsockname()[1]
    except OSError:
        pytest.skip("no IPv6 loopback here")
    mount = Mount(emulator, BUCKET, args=["--prometheus-port", str(port),
                                          "--prometheus-address", "::1"])
    try:
        os.listdir(mount.path)
        with urllib.request.urlopen(f"http://[::1]:{port}/metrics", timeout=30) as reply:
            text = reply.read().decode()
        assert "fs_ops_count{fs_op=\"OpenDir\"}" in text
        # Not on the IPv4 loopback.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        assert mount.unmount() == 0
        mount.close()


def test_status_command_interval_adds_recent_rates(fluxfs_mount):
    import threading
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            os.listdir(Path(fluxfs_mount.path) / "d")
            os.stat(Path(fluxfs_mount.path) / "d" / "00000000")

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        figures = json.loads(run_status(fluxfs_mount.path, "--json", "--interval", "1").stdout)
        text = run_status(fluxfs_mount.path, "--interval=0.5").stdout
    finally:
        stop.set()
        worker.join()
    assert 0.5 <= figures["rate_interval_s"] <= 30
    assert figures["rate_fuse_requests_per_s"] > 0
    assert figures["rate_gcs_received_bytes_per_s"] >= 0
    assert "FUSE requests/s" in text and text.count("\nLast ") == 1, text
    assert run_status(fluxfs_mount.path, "--interval", "0").returncode == 2
    assert run_status(fluxfs_mount.path, "--interval").returncode == 2


def test_scrapes_during_unmount_end_cleanly(emulator):
    """The listener stops before the session frees what a scrape reads: scraping as fast as
    possible through the unmount ends with exit status 0 (no crash, no hang)."""
    import threading
    port = free_port()
    mount = Mount(emulator, BUCKET, args=["--prometheus-port", str(port)])
    stop = threading.Event()
    scrapes = []

    def hammer():
        while not stop.is_set():
            try:
                scrapes.append(len(scrape_text(port)))
            except OSError:
                if not mount.alive():
                    return

    workers = [threading.Thread(target=hammer) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        while len(scrapes) < 20:
            time.sleep(0.01)
        assert mount.unmount() == 0
    finally:
        stop.set()
        for w in workers:
            w.join()
        mount.close()
    assert all(n > 1000 for n in scrapes)
