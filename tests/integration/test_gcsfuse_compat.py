"""gcsfuse drop-in (issue 16): every gcsfuse v3 flag is accepted by the fluxfs command.

GCSFUSE_FLAGS below is the list kept with the test: each gcsfuse v3 flag (cfg/params.yaml of
gcsfuse, plus the ones its users pass that the v3 docs name) with a value gcsfuse accepts, and
whether fluxfs answers with a warning line (accepted, no effect) or silently (same meaning, or
mapped onto a fluxfs setting). Each one is mounted for real and the mount must serve a listing.
Flags whose meaning fluxfs implements get behaviour tests of their own further down."""

import contextlib
import errno
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.mount import (
    Mount,
    find_fluxfs_binary,
    fluxfs_command,
    fluxfs_env,
    is_mounted,
)
from tests.integration.prefetch_util import wait_for

BUCKET = "compat"
pytestmark = pytest.mark.emulator_only

# (arguments, True when fluxfs prints one warning line for them)
GCSFUSE_FLAGS = [
    # same meaning as gcsfuse (fluxfs has the behaviour)
    (["--app-name", "trainer"], False),
    (["--billing-project", "my-project"], False),
    (["--cache-dir", "{tmp}/cache"], False),
    (["--dir-mode", "755"], False),
    (["--file-mode", "644"], False),
    (["--foreground"], False),
    (["--gid", "-1"], False),
    (["--uid", "-1"], False),
    (["--implicit-dirs"], False),
    (["--implicit-dirs=false"], False),
    (["--kernel-list-cache-ttl-secs", "-1"], False),
    (["--kernel-list-cache-ttl-secs", "30"], False),
    (["--log-format", "json"], False),
    (["--log-file", "{tmp}/gcsfuse.log"], False),
    (["--log-severity", "warning"], False),
    (["--log-severity", "off"], False),
    (["--metadata-cache-ttl-secs", "-1"], False),
    (["--metadata-cache-negative-ttl-secs", "0"], False),
    (["--only-dir", "d"], False),
    (["--rename-dir-limit", "200000"], False),
    (["--sequential-read-size-mb", "200"], False),
    (["--stat-cache-ttl", "1m0s"], False),
    (["--type-cache-ttl", "30s"], False),
    (["--temp-dir", "{tmp}"], False),
    (["--max-conns-per-host", "0"], False),
    (["--max-conns-per-host", "100"], False),
    (["--http-client-timeout", "0s"], False),
    (["--http-client-timeout", "45s"], False),
    (["--anonymous-access"], False),
    (["--custom-endpoint", "{endpoint}/storage/v1/"], False),
    (["--debug_gcs"], False),
    (["--debug_fuse=false"], False),
    (["--prometheus-port", "0"], False),
    (["--o", "ro"], False),
    (["-o", "ro,allow_other=false"], False),
    # mapped onto fluxfs settings
    (["--file-cache-max-size-mb", "-1", "--cache-dir", "{tmp}/c2"], False),
    (["--file-cache-max-size-mb", "0"], False),
    (["--file-cache-max-size-mb", "512"], False),
    (["--stat-cache-max-size-mb", "-1"], False),
    (["--stat-cache-max-size-mb", "33"], False),
    (["--stat-cache-capacity", "20460"], False),
    (["--max-retry-attempts", "0"], False),
    (["--max-retry-attempts", "5"], False),
    (["--experimental-metadata-prefetch-on-mount", "sync"], False),
    (["--experimental-metadata-prefetch-on-mount", "disabled"], False),
    (["--enable-metadata-prefetch"], False),
    (["--write-block-size-mb", "32"], False),
    (["--write-global-max-blocks", "4"], False),
    (["--write-global-max-blocks", "-1"], False),
    (["--write-global-max-blocks", "0"], False),
    (["--write-max-blocks-per-file", "1"], False),
    (["--client-protocol", "http1"], False),
    (["--client-protocol", "grpc"], True),
    (["--client-protocol", "http2"], True),
    # accepted, no effect in fluxfs: a warning unless the value is what fluxfs does anyway
    (["--enable-hns"], True),
    (["--enable-hns=false"], False),
    (["--ignore-interrupts"], True),
    (["--enable-streaming-writes"], False),
    (["--enable-streaming-writes=false"], True),
    (["--create-empty-file"], True),
    (["--enable-nonexistent-type-cache"], True),
    (["--reuse-token-from-url=false"], True),
    (["--enable-buffered-read"], False),
    (["--read-global-max-blocks", "40"], True),
    (["--read-block-size-mb", "16"], True),
    (["--read-max-blocks-per-handle", "20"], True),
    (["--read-min-blocks-per-handle", "4"], True),
    (["--read-start-blocks-per-handle", "1"], True),
    (["--read-random-seek-threshold", "3"], True),
    (["--read-inactive-stream-timeout", "10s"], True),
    (["--limit-ops-per-sec", "-1"], False),
    (["--limit-ops-per-sec", "100"], False),
    (["--limit-ops-per-sec", "2.5"], False),
    (["--limit-bytes-per-sec", "1000000"], False),
    (["--limit-bytes-per-sec", "-1"], False),
    (["--max-idle-conns-per-host", "100"], True),
    (["--max-retry-sleep", "30s"], True),
    (["--retry-multiplier", "2"], True),
    (["--max-retry-duration", "0s"], False),
    (["--chunk-transfer-timeout-secs", "10"], True),
    (["--enable-read-stall-retry"], False),
    (["--read-stall-initial-req-timeout", "20s"], True),
    (["--read-stall-max-req-timeout", "20m"], True),
    (["--read-stall-min-req-timeout", "1500ms"], True),
    (["--read-stall-req-increase-rate", "15"], True),
    (["--read-stall-req-target-percentile", "0.99"], True),
    (["--profile", "aiml-training"], True),
    (["--machine-type", "a3-highgpu-8g"], True),
    (["--disable-autoconfig"], False),
    (["--trace-sampling-ratio", "0.5"], True),
    (["--experimental-tracing-mode", "stdout"], True),
    (["--experimental-tracing-project-id", "p"], True),
    (["--experimental-tracing-sampling-ratio", "0.1"], True),
    (["--file-cache-cache-file-for-range-read"], True),
    (["--file-cache-enable-parallel-downloads"], True),
    (["--file-cache-parallel-downloads-per-file", "16"], True),
    (["--file-cache-max-parallel-downloads", "96"], True),
    (["--file-cache-download-chunk-size-mb", "200"], True),
    (["--file-cache-enable-crc"], True),
    (["--file-cache-enable-o-direct=false"], False),
    (["--file-cache-write-buffer-size", "4194304"], True),
    (["--file-cache-include-regex", "^b/x"], True),
    (["--file-cache-exclude-regex", "^b/y"], True),
    (["--file-cache-experimental-parallel-downloads-default-on"], True),
    (["--file-cache-experimental-enable-chunk-cache"], True),
    (["--type-cache-max-size-mb", "4"], True),
    (["--enable-atomic-rename-object=false"], False),
    (["--enable-google-lib-auth"], False),
    (["--enable-new-reader"], True),
    (["--enable-unsupported-path-support"], True),
    (["--enable-http-dns-cache"], False),
    (["--enable-empty-managed-folders"], True),
    (["--enable-rapid-appends"], False),
    (["--finalize-file-for-rapid=false"], False),
    (["--precondition-errors"], False),
    (["--disable-parallel-dirops=false"], False),
    (["--experimental-enable-dentry-cache"], True),
    (["--experimental-enable-readdirplus"], True),
    (["--experimental-o-direct=false"], False),
    (["--o-direct=false"], False),
    (["--enable-kernel-reader=false"], False),
    (["--enable-kernel-reader"], True),
    (["--fuse-max-request-size-kb", "1024"], True),
    (["--experimental-enable-json-read"], True),
    (["--experimental-grpc-conn-pool-size", "1"], True),
    (["--experimental-local-socket-address", "127.0.0.1"], True),
    (["--congestion-threshold", "0"], False),
    (["--max-background", "0"], False),
    (["--max-read-ahead-kb", "1024"], True),
    (["--unused-mrd-cache-size", "0"], True),
    (["--enable-cloud-profiler=false"], False),
    (["--cloud-profiler-cpu"], True),
    (["--cloud-profiler-heap"], True),
    (["--cloud-profiler-allocated-heap"], True),
    (["--cloud-profiler-goroutines=false"], True),
    (["--cloud-profiler-mutex=false"], True),
    (["--cloud-profiler-label", "x"], True),
    (["--cloud-metrics-export-interval-secs", "0"], False),
    (["--cloud-metrics-export-interval-secs", "60"], True),
    (["--stackdriver-export-interval", "0s"], False),
    (["--enable-grpc-metrics=false"], False),
    (["--metrics-buffer-size", "256"], True),
    (["--metrics-workers", "3"], True),
    (["--metrics-use-new-names"], True),
    (["--enable-dummy-io=false"], False),
    (["--dummy-io-per-mb-latency", "0s"], True),
    (["--dummy-io-reader-latency", "0s"], True),
    (["--visualize-workload-insight=false"], False),
    (["--workload-insight-output-file", "{tmp}/wi"], True),
    (["--workload-insight-forward-merge-threshold-mb", "0"], True),
    (["--log-rotate-backup-file-count", "10"], True),
    (["--log-rotate-max-file-size-mb", "512"], True),
    (["--log-rotate-compress"], True),
    (["--debug_http=false"], False),
    (["--debug_http"], True),
    (["--debug_fs"], True),
    (["--debug_fuse_errors"], True),
    (["--debug_invariants"], True),
    (["--debug_mutex"], True),
    # the same as -o keys (mount -t fuse.fluxfs, fstab)
    (["-o", "implicit_dirs,file_mode=644,enable_hns=false,max_conns_per_host=0"], False),
    (["-o", "kernel_list_cache_ttl_secs=-1,log_severity=trace"], False),
    (["-o", "noatime,nodiratime,lazytime,_netdev,nofail"], False),
    # config keys as mount options, the GKE Cloud Storage FUSE CSI driver's form
    (["-o", "file-cache:max-size-mb:-1,metadata-cache:ttl-secs:30"], False),
    (["-o", "gcs-connection:client-protocol:http1,logging:severity:trace"], False),
    (["-o", "file-system:kernel-list-cache-ttl-secs:60,implicit-dirs"], False),
    (["-o", "metadata-cache:negative-ttl-secs=0,file_system:dir_mode:755"], False),
    (["-o", "gcs-connection:client-protocol:grpc"], True),
    (["-o", "write:enable-streaming-writes:false"], True),
]

WARNING = re.compile(r" warn +options: (.*)")


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/d/:3:100"]


def _expand(args, tmp_path, emulator):
    (tmp_path / "cache").mkdir(exist_ok=True)
    return [a.replace("{tmp}", str(tmp_path)).replace("{endpoint}", emulator.url) for a in args]


def mount_foreground(cmd, mountpoint, env=None):
    """Starts a foreground fluxfs and waits for its mount; returns the process."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env or fluxfs_env())
    deadline = time.monotonic() + 60  # a guard against a hang, not a timing assertion
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
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("args,warns", GCSFUSE_FLAGS,
                         ids=[" ".join(a) for a, _ in GCSFUSE_FLAGS])
def test_every_gcsfuse_flag_mounts(emulator, mountpoint, tmp_path, args, warns):
    args = _expand(args, tmp_path, emulator)
    log = tmp_path / "fluxfs.log"
    if "--log-file" in args:  # the flag under test names the log
        log = tmp_path / "gcsfuse.log"
        extra = args
    else:
        extra = ["--log-file", str(log), *args]
    proc = mount_foreground(fluxfs_command(emulator, BUCKET, mountpoint, extra), mountpoint)
    try:
        names = sorted(os.listdir(mountpoint))
    finally:
        rc = unmount_and_wait(proc, mountpoint)
    assert rc == 0
    if "--only-dir" in args:
        assert names == ["00000000", "00000001", "00000002"]
    elif "--implicit-dirs=false" in args:  # "d" has no placeholder object
        assert names == []
    else:
        assert names == ["d"]
    text = log.read_text()
    if "--log-format" in args:
        warnings = [line for line in text.splitlines() if '"level":"warn"' in line
                    and '"component":"options"' in line]
    else:
        warnings = WARNING.findall(text)
    if warns:
        assert len(warnings) == 1, text
        assert "gcsfuse compatibility" in warnings[0]
    else:
        assert warnings == [], warnings


@contextlib.contextmanager
def mounted(emulator, bucket, args=()):
    m = Mount(emulator, bucket, args=list(args))
    try:
        yield m
        assert not m.unexpected_errors()
        assert m.unmount() == 0, m.log()
    finally:
        m.close()


def _lists(emulator):
    return emulator.stats()["ops"]["objects.list"]


@pytest.mark.parametrize("kernel_ttl,lists_for_three", [("0", 3), ("60", 0)])
def test_kernel_list_cache_ttl_is_the_kernels(emulator, kernel_ttl, lists_for_three):
    """gcsfuse's --kernel-list-cache-ttl-secs: the kernel keeps a directory's entries and serves
    ls from them for that long (default 0: every opendir reaches the daemon). The daemon's own
    listing cache is off here (--list-ttl 0), so each listing the daemon does is a request.
    (It used to be an alias of --list-ttl, whose default is 60 s.)"""
    with mounted(emulator, BUCKET, ["--list-ttl", "0", "--kernel-list-cache-ttl-secs",
                                    kernel_ttl]) as m:
        os.listdir(m.path / "d")  # the lookup of d and its first listing
        # The lookup's one-item list probe runs beside its stat and may still be answered
        # after listdir returned (a loaded machine: one extra list counted once in a CI run
        # under ASan and two CPU hogs): counted once the count has stopped moving.
        before, settled = _lists(emulator), time.monotonic()
        deadline = settled + 30
        while time.monotonic() - settled < 1.0 and time.monotonic() < deadline:
            time.sleep(0.1)
            now = _lists(emulator)
            if now != before:
                before, settled = now, time.monotonic()
        for _ in range(3):
            assert sorted(os.listdir(m.path / "d")) == ["00000000", "00000001", "00000002"]
        assert _lists(emulator) - before == lists_for_three


def test_new_object_found_after_negative_ttl_despite_cached_listing(emulator, gcs):
    """The listing-consistency rule: a name missing from a cached listing is absent only for
    --negative-ttl after the listing was made; then the lookup asks Cloud Storage, and a name
    found drops the stale listing so ls shows it too. (It used to stay ENOENT and missing from ls
    for the whole --list-ttl, 60 s.)"""
    bucket = gcs.bucket(BUCKET)
    negative_ttl = 2.0
    with mounted(emulator, BUCKET, ["--negative-ttl", str(negative_ttl), "--list-ttl", "1h"]) as m:
        d = m.path / "d"
        started = time.monotonic()
        assert sorted(os.listdir(d)) == ["00000000", "00000001", "00000002"]
        bucket.blob("d/late-a").upload_from_string(b"A")
        # Within the negative TTL the listing's silence is trusted (no request). 0.5 s left an
        # upload on a loaded machine little room; should the machine stall beyond 2 s, there
        # is nothing to check.
        try:
            (d / "late-a").read_bytes()
        except FileNotFoundError:
            pass
        else:
            assert time.monotonic() - started >= negative_ttl, "found within the negative TTL"
        time.sleep(negative_ttl + 0.1)  # let it pass: a semantic wait, not a timing check
        assert (d / "late-a").read_bytes() == b"A"
        assert "late-a" in os.listdir(d)


def test_new_object_found_at_once_with_negative_ttl_zero(emulator, gcs):
    """gcsfuse's aiml profiles use --metadata-cache-negative-ttl-secs 0: absence is never
    trusted, so a name another client just created opens at once after a listing."""
    bucket = gcs.bucket(BUCKET)
    with mounted(emulator, BUCKET, ["--metadata-cache-negative-ttl-secs", "0"]) as m:
        d = m.path / "d"
        names = set(os.listdir(d))
        bucket.blob("d/late-b").upload_from_string(b"B")
        assert "late-b" not in names
        assert (d / "late-b").read_bytes() == b"B"
        assert "late-b" in os.listdir(d)


def test_billing_project_on_every_request(emulator, gcs, mountpoint):
    """--billing-project: Requester Pays buckets need userProject on every request. The emulator
    refuses (400) any request without it; reads, listings, writes of every upload path, renames
    and deletes through the mount all succeed and none is refused."""
    emulator.config(requester_pays_project="payer-1")
    try:
        with mounted(emulator, BUCKET, ["--billing-project", "payer-1", "--negative-ttl", "0",
                                        "--write-part-size", "5M"]) as m:
            d = m.path / "d"
            assert sorted(os.listdir(d))[:3] == ["00000000", "00000001", "00000002"]
            assert len((d / "00000001").read_bytes()) == 100
            (m.path / "w").mkdir()
            (m.path / "w" / "small").write_bytes(b"s" * 1000)
            big = os.urandom(20 << 20)  # over --write-small-threshold: streamed in parts
            (m.path / "w" / "big").write_bytes(big)
            assert (m.path / "w" / "big").read_bytes() == big
            os.rename(m.path / "w" / "small", m.path / "w" / "moved")
            os.unlink(m.path / "w" / "moved")
            os.unlink(m.path / "w" / "big")
            os.rmdir(m.path / "w")
        assert emulator.stats()["unbilled"] == 0
        # The switch is real: the same mount without the flag fails its access check.
        result = subprocess.run(fluxfs_command(emulator, BUCKET, mountpoint), capture_output=True,
                                text=True, env=fluxfs_env(), timeout=60)
        assert result.returncode == 1
        assert "requester pays" in result.stderr
        assert emulator.stats()["unbilled"] >= 1
    finally:
        emulator.config(requester_pays_project=None)


def test_docs_table_names_every_flag():
    """The compatibility table of docs/gcsfuse-migration.md (moved there from the README) names
    each flag of the list above (a family written as --prefix-* covers its members)."""
    from tests.lib.emulator import REPO_ROOT

    text = (REPO_ROOT / "docs" / "gcsfuse-migration.md").read_text()
    table = text[text.index("# Switching from gcsfuse"):]
    families = re.findall(r"`(--[a-z_-]+)-\*`", table)
    missing = []
    for args, _ in GCSFUSE_FLAGS:
        for flag in (a.split("=")[0] for a in args if a.startswith("--")):
            if f"`{flag}`" not in table and not any(flag.startswith(f + "-") for f in families):
                missing.append(flag)
    assert not missing, sorted(set(missing))


# ---- metadata interop with gcsfuse and gcloud ------------------------------------------------

NS_20240501 = 1714564800123456789  # 2024-05-01T12:00:00.123456789Z


def test_objects_shaped_as_gcsfuse_and_gcloud_write_them(emulator, gcs):
    """Read side: gcsfuse's RFC 3339 mtime (nanoseconds) is preferred over the seconds key
    gcloud writes; gcloud's symlinks (goog-reserved-file-is-symlink, target as the bytes) and
    gcsfuse's (gcsfuse_symlink_target) are links. (fluxfs used to prefer the seconds key, so
    the two mounts showed different mtimes, and showed gcloud's links as regular files.)"""
    bucket = gcs.bucket(BUCKET)

    def put(name, data, metadata):
        blob = bucket.blob(f"shaped/{name}")
        blob.metadata = metadata
        blob.upload_from_string(data)

    put("gcsfuse-mtime", b"x", {"gcsfuse_mtime": "2024-05-01T12:00:00.123456789Z",
                                "goog-reserved-file-mtime": "1000"})
    put("gcloud-mtime", b"y", {"goog-reserved-file-mtime": "1714564800"})
    put("gcloud-link", b"gcsfuse-mtime", {"goog-reserved-file-is-symlink": "true"})
    put("gcsfuse-link", b"", {"gcsfuse_symlink_target": "gcloud-mtime"})
    with mounted(emulator, BUCKET) as m:
        d = m.path / "shaped"
        assert os.stat(d / "gcsfuse-mtime").st_mtime_ns == NS_20240501
        assert os.stat(d / "gcloud-mtime").st_mtime_ns == 1714564800 * 10**9
        link = os.lstat(d / "gcloud-link")
        assert stat.S_ISLNK(link.st_mode) and link.st_size == len("gcsfuse-mtime")
        assert os.readlink(d / "gcloud-link") == "gcsfuse-mtime"
        assert os.readlink(d / "gcloud-link") == "gcsfuse-mtime"  # kept: no second GET
        assert (d / "gcloud-link").read_bytes() == b"x"  # followed
        assert os.readlink(d / "gcsfuse-link") == "gcloud-mtime"
        assert (d / "gcsfuse-link").read_bytes() == b"y"


def test_writes_carry_what_gcsfuse_and_gcloud_read(emulator, gcs):
    """Write side: a touch stores gcsfuse's gcsfuse_mtime (RFC 3339, nanoseconds kept) and
    gcloud's goog-reserved-file-mtime (seconds); a symlink stores gcsfuse's target key, gcloud's
    goog-reserved-file-is-symlink and the target as its bytes (a fluxfs link used to become an
    empty file under gcloud storage cp --preserve-symlinks)."""
    bucket = gcs.bucket(BUCKET)
    with mounted(emulator, BUCKET) as m:
        w = m.path / "written"
        w.mkdir()
        (w / "f").write_bytes(b"data")
        os.utime(w / "f", ns=(NS_20240501, NS_20240501))
        assert os.stat(w / "f").st_mtime_ns == NS_20240501
        os.symlink("f", w / "link")
        assert os.readlink(w / "link") == "f"
        assert os.lstat(w / "link").st_size == 1
    blob = bucket.get_blob("written/f")
    assert blob.metadata["gcsfuse_mtime"] == "2024-05-01T12:00:00.123456789Z"
    assert blob.metadata["goog-reserved-file-mtime"] == "1714564800"
    link = bucket.get_blob("written/link")
    assert link.download_as_bytes() == b"f"
    assert link.metadata["gcsfuse_symlink_target"] == "f"
    assert link.metadata["goog-reserved-file-is-symlink"] == "true"
    # A fresh mount reads the nanoseconds back.
    with mounted(emulator, BUCKET) as m:
        assert os.stat(m.path / "written" / "f").st_mtime_ns == NS_20240501


def test_cp_a_cp_p_install_p_work(emulator, tmp_path):
    """setxattr/removexattr answer ENOTSUP (not supported) on a writable mount, which coreutils
    ignores for cp -a, cp -p and install -p (they exited 1 on EROFS); EROFS stays on -o ro."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"hello")
    os.utime(src / "a.txt", ns=(NS_20240501, NS_20240501))
    try:
        os.setxattr(src / "a.txt", "user.origin", b"local")  # copied by cp -a when supported
    except OSError:
        pass  # the temporary directory's filesystem has no user xattrs: cp -a has none to copy
    with mounted(emulator, BUCKET) as m:
        dst = m.path / "copies"
        dst.mkdir()
        for cmd in (["cp", "-a", str(src), str(dst / "tree")],
                    ["cp", "-p", str(src / "a.txt"), str(dst / "p.txt")],
                    ["install", "-p", "-m", "0644", str(src / "a.txt"), str(dst / "i.txt")]):
            result = subprocess.run(cmd, capture_output=True, text=True)
            assert result.returncode == 0, (cmd, result.stderr)
        for name in ("tree/a.txt", "p.txt", "i.txt"):
            assert (dst / name).read_bytes() == b"hello"
            assert os.stat(dst / name).st_mtime_ns == NS_20240501  # preserved, to the ns
        with pytest.raises(OSError) as raised:
            os.setxattr(dst / "p.txt", "user.x", b"1")
        assert raised.value.errno == errno.EOPNOTSUPP
        with pytest.raises(OSError) as raised:
            os.removexattr(dst / "p.txt", "user.x")
        assert raised.value.errno == errno.EOPNOTSUPP
    with mounted(emulator, BUCKET, ["-o", "ro"]) as m:
        with pytest.raises(OSError) as raised:
            os.setxattr(m.path / "copies" / "p.txt", "user.x", b"1")
        assert raised.value.errno == errno.EROFS


def _gcsfuse_binary():
    from tests.lib.emulator import REPO_ROOT

    for candidate in (os.environ.get("GCSFUSE_BIN"), REPO_ROOT / "build/tools/bin/gcsfuse",
                      shutil.which("gcsfuse")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


@contextlib.contextmanager
def gcsfuse_mounted(emulator, bucket, mountpoint):
    """The pinned gcsfuse (bench/setup_contenders.sh builds it) on the same emulator, with its
    metadata caches off. Its custom endpoint must say "localhost" (see bench/common.py)."""
    port = emulator.url.rsplit(":", 1)[1]
    cmd = [str(_gcsfuse_binary()), f"--custom-endpoint=http://localhost:{port}/storage/v1/",
           "--anonymous-access", "--foreground", "--implicit-dirs", "--log-severity=warning",
           "--metadata-cache-ttl-secs=0", bucket, str(mountpoint)]
    proc = mount_foreground(cmd, mountpoint)
    try:
        yield mountpoint
    finally:
        assert unmount_and_wait(proc, mountpoint) == 0


@pytest.mark.skipif(_gcsfuse_binary() is None,
                    reason="gcsfuse not built (bench/setup_contenders.sh builds v3.11.4)")
def test_mtime_and_symlinks_both_ways_with_gcsfuse(emulator, tmp_path):
    """The real gcsfuse and fluxfs on one bucket: a touch through either shows the same
    nanosecond mtime through the other, and each reads the other's symlinks."""
    other = tmp_path / "gcsfuse"
    other.mkdir()
    ns_a, ns_b = NS_20240501, NS_20240501 + 987654321
    with mounted(emulator, BUCKET, ["--stat-ttl", "0", "--negative-ttl", "0"]) as m, \
            gcsfuse_mounted(emulator, BUCKET, other):
        ours, theirs = m.path / "both", other / "both"
        ours.mkdir()
        (ours / "from-fluxfs").write_bytes(b"1")
        os.utime(ours / "from-fluxfs", ns=(ns_a, ns_a))
        os.symlink("from-fluxfs", ours / "link-from-fluxfs")
        assert os.stat(theirs / "from-fluxfs").st_mtime_ns == ns_a
        assert os.readlink(theirs / "link-from-fluxfs") == "from-fluxfs"
        assert (theirs / "link-from-fluxfs").read_bytes() == b"1"

        (theirs / "from-gcsfuse").write_bytes(b"2")
        os.utime(theirs / "from-gcsfuse", ns=(ns_b, ns_b))
        os.symlink("from-gcsfuse", theirs / "link-from-gcsfuse")
        assert os.stat(ours / "from-gcsfuse").st_mtime_ns == ns_b
        assert os.readlink(ours / "link-from-gcsfuse") == "from-gcsfuse"
        assert (ours / "link-from-gcsfuse").read_bytes() == b"2"


GCLOUD = shutil.which("gcloud")


@pytest.mark.skipif(GCLOUD is None, reason="gcloud is not installed")
def test_symlinks_and_mtime_both_ways_with_gcloud(emulator, gcs, tmp_path):
    """gcloud storage cp --preserve-symlinks / --preserve-posix and fluxfs: a fluxfs link
    downloads as a link (it became an empty file), a link gcloud uploads is a link in the mount,
    and the mtime gcloud stores is the one the mount shows."""
    from tests.fidelity.test_gcloud import Gcloud

    gcloud = Gcloud(emulator.url, tmp_path / "gcloud-config")
    local = tmp_path / "local"
    local.mkdir()
    (local / "target.txt").write_bytes(b"t")
    os.utime(local / "target.txt", (1700000000, 1700000000))
    os.symlink("target.txt", local / "up-link")
    gcloud.run("cp", "--preserve-symlinks", "--preserve-posix", str(local / "target.txt"),
               str(local / "up-link"), f"gs://{BUCKET}/gcl/")
    with mounted(emulator, BUCKET) as m:
        g = m.path / "gcl"
        assert os.readlink(g / "up-link") == "target.txt"
        assert (g / "up-link").read_bytes() == b"t"
        assert os.stat(g / "target.txt").st_mtime_ns == 1700000000 * 10**9
        os.symlink("target.txt", g / "fluxfs-link")
    down = tmp_path / "down"
    down.mkdir()
    gcloud.run("cp", "--preserve-symlinks", f"gs://{BUCKET}/gcl/fluxfs-link", str(down) + "/")
    assert os.path.islink(down / "fluxfs-link")
    assert os.readlink(down / "fluxfs-link") == "target.txt"


@pytest.mark.parametrize("mode,has_md5", [("auto", False), ("resumable", True)])
def test_which_upload_mode_gives_an_md5(emulator, gcs, mode, has_md5):
    """What docs/semantics.md says about MD5s: a file over --write-small-threshold is uploaded in parts
    and its object has no MD5 (gcloud then needs fast CRC32C), except with --upload-mode
    resumable; a small file always has one."""
    data = os.urandom(20 << 20)
    with mounted(emulator, BUCKET, ["--upload-mode", mode]) as m:
        (m.path / f"md5-{mode}").mkdir()
        (m.path / f"md5-{mode}" / "big").write_bytes(data)
        (m.path / f"md5-{mode}" / "small").write_bytes(b"s" * 1000)
    bucket = gcs.bucket(BUCKET)
    assert (bucket.get_blob(f"md5-{mode}/big").md5_hash is not None) == has_md5
    assert bucket.get_blob(f"md5-{mode}/small").md5_hash is not None


# ---- --config-file -----------------------------------------------------------------------------

def test_config_file_mounts_with_gcsfuse_keys(emulator, tmp_path):
    """gcsfuse's --config-file: its keys and nesting take effect, the command line overrides
    the file, an unknown key is one warning line; a bad value is refused naming the key."""
    config = tmp_path / "gcsfuse.yaml"
    log = tmp_path / "cfg.log"
    config.write_text(
        "only-dir: d\n"
        "file-system:\n"
        "  file-mode: 600\n"
        "  dir-mode: 700\n"
        "  fuse-options:\n"
        "    - ro\n"
        "metadata-cache:\n"
        "  ttl-secs: -1\n"
        "logging:\n"
        f"  file-path: {log}\n"
        "  severity: info\n"
        "gcs-connection:\n"
        "  billing-project: p\n"
        "made-up-key: 1\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cmd = fluxfs_command(emulator, BUCKET, mnt, ["--config-file", str(config),
                                                 "--file-mode", "640"])
    proc = mount_foreground(cmd, mnt)
    try:
        assert sorted(os.listdir(mnt))[:3] == ["00000000", "00000001", "00000002"]
        # 640 from the command line over the file's 600, 700 from the file; -o ro (the file's
        # fuse-options) takes the write bits away.
        assert stat.S_IMODE(os.stat(mnt / "00000001").st_mode) == 0o440
        assert stat.S_IMODE(os.stat(mnt).st_mode) == 0o500
        with pytest.raises(OSError) as raised:  # fuse-options: ro
            (mnt / "new").write_bytes(b"x")
        assert raised.value.errno == errno.EROFS
    finally:
        assert unmount_and_wait(proc, mnt) == 0
    warnings = WARNING.findall(log.read_text())
    assert len(warnings) == 1 and "unknown key 'made-up-key'" in warnings[0], warnings

    config.write_text("metadata-cache:\n  negative-ttl-secs: -7\n")
    result = subprocess.run(fluxfs_command(emulator, BUCKET, mnt, ["--config-file", str(config)]),
                            capture_output=True, text=True, env=fluxfs_env(), timeout=60)
    assert result.returncode == 2
    assert f"config file {config}: option 'metadata-cache.negative-ttl-secs': '-7'" in \
        result.stderr
    config.write_text("file-system:\n  file-mode: [600\n")
    result = subprocess.run(fluxfs_command(emulator, BUCKET, mnt, ["--config-file", str(config)]),
                            capture_output=True, text=True, env=fluxfs_env(), timeout=60)
    assert result.returncode == 2 and f"config file {config}, line 3" in result.stderr, \
        result.stderr


# ---- the disk cache holds large objects (gcsfuse's file cache) ---------------------------------

def _status(mount_path):
    text = (mount_path / ".fluxfs" / "status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines()
                                      if ":" in line)}


def test_large_objects_read_from_the_disk_cache_after_a_remount(emulator, gcs, tmp_path):
    """--cache-dir also holds large objects read through the mount (a shard read front to
    back, a checkpoint loaded with parallel ranged reads), keyed by generation: after a
    remount, reading them again costs no media bytes from Cloud Storage. A partly read object
    is not kept; a changed object is fetched again."""
    bucket = gcs.bucket(BUCKET)
    shard = os.urandom(24 << 20)
    bucket.blob("large/shard-0000.tar").upload_from_string(shard)
    bucket.blob("large/partial.bin").upload_from_string(os.urandom(12 << 20))
    cache = tmp_path / "cache"
    args = ["--cache-dir", str(cache)]
    with mounted(emulator, BUCKET, args) as m:
        assert (m.path / "large" / "shard-0000.tar").read_bytes() == shard
        with open(m.path / "large" / "partial.bin", "rb") as f:
            f.read(1 << 20)
        # The fill is committed after the READ completing it was answered: wait for it.
        wait_for(m, lambda s: s["cache_large_fills"] == "1", "the shard's fill")
    before = emulator.stats()["bytes_out"]
    with mounted(emulator, BUCKET, args) as m:
        with open(m.path / "large" / "shard-0000.tar", "rb") as f:
            # Out of order, as a checkpoint loader reads: the end first, then the rest.
            f.seek(20 << 20)
            tail = f.read()
            f.seek(0)
            head = f.read(20 << 20)
        assert head + tail == shard
        status = _status(m.path)
        assert status["cache_large_hits"] == "1", status
    # Listings and stats only: far less than one MiB, where the shard is 24.
    assert emulator.stats()["bytes_out"] - before < (1 << 20)

    # A new generation is not served from the old one's file.
    shard2 = os.urandom(24 << 20)
    bucket.blob("large/shard-0000.tar").upload_from_string(shard2)
    with mounted(emulator, BUCKET, args) as m:
        assert (m.path / "large" / "shard-0000.tar").read_bytes() == shard2


def test_large_object_cache_bounded_and_checked(emulator, gcs, tmp_path):
    """--cache-size bounds it (an object larger than the cap is never stored); a cache file
    damaged on disk is detected at its first open, removed, and the object fetched again."""
    bucket = gcs.bucket(BUCKET)
    data = os.urandom(10 << 20)
    bucket.blob("large/checked.bin").upload_from_string(data)
    small_cache = tmp_path / "small"
    with mounted(emulator, BUCKET, ["--cache-dir", str(small_cache), "--cache-size", "8M"]) as m:
        assert (m.path / "large" / "checked.bin").read_bytes() == data
        assert _status(m.path)["cache_large_fills"] == "0"
    cache = tmp_path / "cache"
    with mounted(emulator, BUCKET, ["--cache-dir", str(cache)]) as m:
        assert (m.path / "large" / "checked.bin").read_bytes() == data
    files = [p for p in (cache / "fluxfs-content-v1").iterdir() if p.stat().st_size > (8 << 20)]
    assert len(files) == 1
    with open(files[0], "r+b") as f:  # one flipped byte in the body
        f.seek(5 << 20)
        byte = f.read(1)
        f.seek(5 << 20)
        f.write(bytes([byte[0] ^ 0xFF]))
    with mounted(emulator, BUCKET, ["--cache-dir", str(cache)]) as m:
        m.expect_errors()  # a warning, not an error, is logged
        assert (m.path / "large" / "checked.bin").read_bytes() == data
        status = _status(m.path)
        assert status["cache_corrupt_files"] == "1" and status["cache_large_hits"] == "0"


# ---- config keys as mount options (GKE) ---------------------------------------------------------

def test_gke_mount_options_through_mount_helper(emulator, tmp_path):
    """The GKE CSI driver's mountOptions ("section:key:value") reach fluxfs through mount(8)'s
    helper as one comma-separated -o list (fstab's form) and mean what the config file's keys
    mean: modes, TTLs, the log file; a key fluxfs cannot follow is one warning line."""
    helper = find_fluxfs_binary().parent.parent.parent / "packaging" / "mount.fluxfs"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "gke.log"
    env = fluxfs_env()
    env["FLUXFS_BINARY"] = str(find_fluxfs_binary())
    options = (f"rw,_netdev,endpoint={emulator.url},anonymous,only-dir:d,"
               "file-system:file-mode:600,file-system:dir-mode:700,metadata-cache:ttl-secs:-1,"
               f"logging:file-path:{log},logging:severity:info,"
               "gcs-connection:client-protocol:grpc,file-cache:max-size-mb:-1")
    result = subprocess.run(["sh", str(helper), BUCKET, str(mnt), "-o", options], env=env,
                            capture_output=True, text=True, timeout=60)
    try:
        assert result.returncode == 0, result.stderr
        assert is_mounted(mnt)
        assert {"00000000", "00000001", "00000002"} <= set(os.listdir(mnt))  # only-dir:d
        assert stat.S_IMODE(os.stat(mnt / "00000001").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(mnt).st_mode) == 0o700
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
    deadline = time.monotonic() + 30  # the detached daemon writes its last lines as it exits
    while "gcs-connection:client-protocol" not in log.read_text() and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    warnings = WARNING.findall(log.read_text())
    assert len(warnings) == 1, warnings
    assert "-o gcs-connection:client-protocol grpc accepted for gcsfuse compatibility" in \
        warnings[0]


@pytest.mark.parametrize("option,message", [
    ("file-cache:no-such-key:1", "unknown gcsfuse config key 'file-cache.no-such-key'"),
    ("made-up:ttl-secs:1", "unknown gcsfuse config key 'made-up.ttl-secs'"),
    ("metadata-cache:30", "'metadata-cache' is a section of gcsfuse's config"),
    ("file-cache:max-size-mb", "'file-cache.max-size-mb' needs a value"),
    ("metadata-cache:ttl-secs:soon", "option '-o metadata-cache:ttl-secs': 'soon'"),
    ("logging:severity:loud", "option '-o logging:severity': 'loud'"),
    ("file-system:file-mode:999", "option '-o file-system:file-mode': '999'"),
    ("implicit-dirs:maybe", "option '-o implicit-dirs': 'maybe' is not true or false"),
])
def test_bad_gke_mount_options_refused(emulator, tmp_path, option, message):
    """An unknown key or a bad value is a usage error (exit 2) naming the option, from the
    command line and from the mount helper alike; nothing is mounted."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run(fluxfs_command(emulator, BUCKET, mnt, ["-o", f"rw,{option}"]),
                            capture_output=True, text=True, env=fluxfs_env(), timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
    helper = find_fluxfs_binary().parent.parent.parent / "packaging" / "mount.fluxfs"
    env = fluxfs_env()
    env["FLUXFS_BINARY"] = str(find_fluxfs_binary())
    result = subprocess.run(["sh", str(helper), BUCKET, str(mnt), "-o",
                             f"endpoint={emulator.url},anonymous,{option}"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not is_mounted(mnt)


# ---- --limit-ops-per-sec and --limit-bytes-per-sec ------------------------------------------------
# Lower bounds only: a limit makes work take at least so long; load can only add to it.

def _stat_missing_names(root, count, threads=8):
    def stat_one(i):
        with contextlib.suppress(FileNotFoundError):
            os.stat(root / f"absent-{i:04d}")
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(stat_one, range(count)))


def _calls(emulator):
    return sum(emulator.stats()["ops"].values())


def test_limit_ops_per_sec_spaces_calls(emulator):
    """--limit-ops-per-sec 20: 60 lookups of distinct absent names (8 threads at once: the limit
    is the mount's, not a thread's) are at least 60 calls, so they need at least (60 - burst of
    2) / 20 = 2.9 s; the waits show in the status file. Without the flag nothing waits."""
    with mounted(emulator, BUCKET, ["--limit-ops-per-sec", "20"]) as m:
        calls_before = _calls(emulator)
        started = time.monotonic()
        _stat_missing_names(m.path, 60)
        elapsed = time.monotonic() - started
        calls = _calls(emulator) - calls_before
        status = _status(m.path)
        assert calls >= 60, calls
        assert elapsed >= 2.5, (elapsed, calls)
        assert int(status["limit_op_waits"]) >= 40, status
        assert int(status["limit_op_wait_ms"]) >= 1000, status
    with mounted(emulator, BUCKET) as m:
        _stat_missing_names(m.path, 60)
        status = _status(m.path)
        assert status["limit_op_waits"] == "0" and status["limit_byte_pauses"] == "0", status


def test_limit_bytes_per_sec_paces_reads(emulator, gcs):
    """--limit-bytes-per-sec 1 MiB: reading a 4 MiB object needs at least (4 MiB - burst of
    0.1 MiB - one 512 KiB piece of curl's in flight) / 1 MiB/s = 3.4 s; the bytes are right and
    the pauses show in the status file."""
    data = os.urandom(4 << 20)
    gcs.bucket(BUCKET).blob("paced/big").upload_from_string(data)
    with mounted(emulator, BUCKET, ["--limit-bytes-per-sec", str(1 << 20)]) as m:
        started = time.monotonic()
        assert (m.path / "paced" / "big").read_bytes() == data
        elapsed = time.monotonic() - started
        status = _status(m.path)
        assert elapsed >= 2.5, elapsed
        assert int(status["limit_byte_pauses"]) >= 1, status
        assert int(status["limit_byte_wait_ms"]) >= 1000, status
        assert status["limit_op_waits"] == "0", status


def test_limit_flags_refuse_garbage(emulator, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for args in (["--limit-ops-per-sec", "fast"], ["-o", "gcs-connection:limit-bytes-per-sec:1x"]):
        result = subprocess.run(fluxfs_command(emulator, BUCKET, mnt, args), capture_output=True,
                                text=True, env=fluxfs_env(), timeout=60)
        assert result.returncode == 2 and "is not a number (-1 = no limit)" in result.stderr, \
            result.stderr
