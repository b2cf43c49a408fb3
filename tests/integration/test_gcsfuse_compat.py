"""gcsfuse drop-in (issue 16): every gcsfuse v3 flag is accepted by the fluxfs command.

GCSFUSE_FLAGS below is the list kept with the test: each gcsfuse v3 flag (cfg/params.yaml of
gcsfuse, plus the ones its users pass that the v3 docs name) with a value gcsfuse accepts, and
whether fluxfs answers with a warning line (accepted, no effect) or silently (same meaning, or
mapped onto a fluxfs setting). Each one is mounted for real and the mount must serve a listing.
Flags whose meaning fluxfs implements get behaviour tests of their own further down."""

import contextlib
import os
import re
import subprocess
import time

import pytest

from tests.integration.mount import (
    Mount,
    find_fluxfs_binary,
    fluxfs_command,
    fluxfs_env,
    is_mounted,
)

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
    (["--limit-ops-per-sec", "100"], True),
    (["--limit-bytes-per-sec", "1000000"], True),
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
]

WARNING = re.compile(r" warn +options: (.*)")


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"{BUCKET}/d/:3:100"]


@pytest.fixture
def mountpoint(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


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
        before = _lists(emulator)
        for _ in range(3):
            assert sorted(os.listdir(m.path / "d")) == ["00000000", "00000001", "00000002"]
        assert _lists(emulator) - before == lists_for_three


def test_new_object_found_after_negative_ttl_despite_cached_listing(emulator, gcs):
    """The listing-consistency rule: a name missing from a cached listing is absent only for
    --negative-ttl after the listing was made; then the lookup asks Cloud Storage, and a name
    found drops the stale listing so ls shows it too. (It used to stay ENOENT and missing from ls
    for the whole --list-ttl, 60 s.)"""
    bucket = gcs.bucket(BUCKET)
    with mounted(emulator, BUCKET, ["--negative-ttl", "0.5", "--list-ttl", "1h"]) as m:
        d = m.path / "d"
        assert sorted(os.listdir(d)) == ["00000000", "00000001", "00000002"]
        bucket.blob("d/late-a").upload_from_string(b"A")
        # Within the negative TTL the listing's silence is trusted (no request).
        with pytest.raises(FileNotFoundError):
            (d / "late-a").read_bytes()
        time.sleep(0.6)  # let the negative TTL (0.5 s) pass: a semantic wait, not a timing check
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


def test_readme_table_names_every_flag():
    """The README's compatibility table names each flag of the list above (a family written as
    --prefix-* covers its members)."""
    from tests.lib.emulator import REPO_ROOT

    text = (REPO_ROOT / "README.md").read_text()
    table = text[text.index("## Switching from gcsfuse"):text.index("## The emulator")]
    families = re.findall(r"`(--[a-z_-]+)-\*`", table)
    missing = []
    for args, _ in GCSFUSE_FLAGS:
        for flag in (a.split("=")[0] for a in args if a.startswith("--")):
            if f"`{flag}`" not in table and not any(flag.startswith(f + "-") for f in families):
                missing.append(flag)
    assert not missing, sorted(set(missing))
