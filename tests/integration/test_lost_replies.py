"""Replies lost after the server acted, and deletes that must be retried (issue 15, defects 2
and 3). The emulator performs the request and cuts the reply (reset-mid), or answers 503 once.

- A one-request upload (objects.insert with ifGenerationMatch) or a compose commit whose reply
  is lost: the retry gets 412, and close() used to report ESTALE although the object held this
  writer's bytes. Now the live object is read back and accepted when its size and CRC32C (and
  a composite's component count) are what this writer sent.
- unlink was sent once without a precondition: one 503 failed `rm` with EIO. Now it carries
  ifGenerationMatch (retried); a 404 on a retry is success.
- After a clean unmount nothing this mount created is left under .fluxfs/ (markers, temporary
  parts) and no multipart upload is open, even when marker uploads, deletes and multipart
  initiates lost their replies.
- A recovered commit is a success for the operator too: no error line in the log, no failed
  request in the metrics (the retry itself is counted by cause), and the next open reads it.
- rename copies (objects.rewrite with ifGenerationMatch on the destination) then deletes the
  source generation. A lost copy reply made the retry's 412 fail the rename (ENOENT-free
  source and destination both left, an error logged). Now the destination is read back and
  accepted when it holds the source's bytes (size, CRC32C, MD5, symlink target and content
  encoding); the source delete goes on, and a lost delete reply is done (404 on the retry).
"""

import errno
import random
import socket
import time
import urllib.request

import pytest

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.mount import mounts_fixture
from tests.integration.transport_util import run_smoke

pytestmark = pytest.mark.emulator_only

BUCKET = "lost"
MiB = 1024 * 1024
WAIT_S = 60  # a guard against a hang, not a timed assertion
ARGS = ["--write-part-size", "5M", "--write-small-threshold", "6M", "--max-retries", "4",
        "--request-deadline", "60s", "--stat-ttl", "1", "--upload-cleanup-age", "0"]


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def bucket(gcs):
    return gcs.lookup_bucket(BUCKET) or gcs.create_bucket(BUCKET)


mounts = mounts_fixture(BUCKET, ARGS)


@pytest.fixture
def mount(bucket, mounts):
    return mounts


def lose_reply(emulator, op, count=1):
    emulator.config(faults=[{"kind": "reset-mid", "rate": 1, "count": count, "op": op}])


def injected(emulator):
    return emulator.stats()["faults_injected"]


def pattern(size, seed):
    return random.Random(seed).randbytes(size)


def write(path, data):
    with open(path, "wb") as f:
        for i in range(0, len(data), MiB):
            f.write(data[i:i + MiB])


def leftovers(emulator, bucket):
    """Objects under .fluxfs/ and multipart uploads still open in the bucket."""
    objects = [b.name for b in bucket.list_blobs(prefix=".fluxfs/")]
    result = run_smoke(["--endpoint", emulator.url, "--anonymous", BUCKET, "uploads", ""])
    assert result.rc == 0, result.stderr
    return objects, [line for line in result.text.splitlines() if line.strip()]


def test_lost_insert_reply_close_succeeds(emulator, bucket, mount):
    m = mount()
    data = pattern(300_000, 1)
    before = injected(emulator)
    lose_reply(emulator, "objects.insert")
    write(m.path / "small.bin", data)  # close() raised ESTALE before the fix
    assert injected(emulator) - before == 1
    blob = bucket.get_blob("small.bin")
    assert blob.download_as_bytes() == data
    assert "the first attempt's reply was lost; done" in m.log()


def test_lost_compose_reply_close_succeeds(emulator, bucket, mount):
    m = mount("--upload-mode", "composite")
    data = pattern(12 * MiB + 3, 2)  # three temporary parts composed onto the name
    before = injected(emulator)
    lose_reply(emulator, "objects.compose")
    write(m.path / "composed.bin", data)
    assert injected(emulator) - before == 1
    blob = bucket.get_blob("composed.bin")
    assert blob.download_as_bytes() == data
    assert blob.component_count == 3
    assert m.unmount() == 0
    assert leftovers(emulator, bucket) == ([], [])


def test_a_412_that_is_not_ours_stays_estale(emulator, bucket, mount):
    """The read-back must not accept another writer's object: a new file whose name another
    client creates meanwhile still fails close() with ESTALE (the retry is forced by a lost
    reply of a request the server then refuses: 503 once, the competitor, then 412)."""
    m = mount()
    path = m.path / "contested.bin"
    f = open(path, "wb")
    f.write(b"mine" * 1000)
    bucket.blob("contested.bin").upload_from_string(b"theirs")
    emulator.config(faults=[{"kind": "503", "rate": 1, "count": 1, "op": "objects.insert"}])
    with pytest.raises(OSError) as error:
        f.close()
    assert error.value.errno == errno.ESTALE
    assert bucket.get_blob("contested.bin").download_as_bytes() == b"theirs"
    m.expect_errors(r"contested\.bin")


def test_unlink_is_retried(emulator, bucket, mount):
    m = mount()
    for name in ("a", "b"):
        bucket.blob(f"del/{name}").upload_from_string(name.encode())
    names = sorted(p.name for p in (m.path / "del").iterdir())
    assert names == ["a", "b"]
    before = injected(emulator)
    # One 503: retried (the delete carries ifGenerationMatch). Before the fix: EIO.
    emulator.config(faults=[{"kind": "503", "rate": 1, "count": 1, "op": "objects.delete"}])
    (m.path / "del" / "a").unlink()
    assert bucket.get_blob("del/a") is None
    # A lost reply: the retry finds nothing, which is success.
    lose_reply(emulator, "objects.delete")
    (m.path / "del" / "b").unlink()
    assert bucket.get_blob("del/b") is None
    assert injected(emulator) - before == 2


def test_unlink_of_a_name_replaced_behind_the_mount(emulator, bucket, mount):
    m = mount()
    bucket.blob("swap").upload_from_string(b"one")
    assert (m.path / "swap").read_bytes() == b"one"
    bucket.blob("swap").upload_from_string(b"two")  # a new generation the mount has not seen
    (m.path / "swap").unlink()
    assert bucket.get_blob("swap") is None


def test_clean_unmount_leaves_nothing_under_faults(emulator, bucket, mount):
    m = mount()
    before = injected(emulator)
    # Marker uploads (objects.insert), their deletes, and multipart initiates lose replies.
    emulator.config(faults=[
        {"kind": "reset-mid", "rate": 1, "count": 2, "op": "objects.insert"},
        {"kind": "reset-mid", "rate": 1, "count": 3, "op": "objects.delete"},
        {"kind": "reset-mid", "rate": 1, "count": 2, "op": "xml.multipart_initiate"},
    ])
    datas = {f"big/{i}.bin": pattern(11 * MiB + i, 10 + i) for i in range(3)}
    (m.path / "big").mkdir()
    for name, data in datas.items():
        write(m.path / name, data)
    # A marker goes once its upload is completed, by a delete sent without waiting (retried
    # after a jittered backoff when its reply is lost): the last file's may reach the bucket
    # after close() returned. The faults stay on until all 7 were met (or the guard ends).
    deadline = time.monotonic() + WAIT_S
    while injected(emulator) - before < 7 and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = injected(emulator) - before
    emulator.config(faults=[])
    assert m.unmount() == 0
    for name, data in datas.items():
        assert bucket.blob(name).download_as_bytes() == data, name
    assert seen == 7
    assert leftovers(emulator, bucket) == ([], [])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port) -> dict:
    """{(name without _total, frozenset of labels): value} of /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            samples[(name, frozenset(sample.labels.items()))] = sample.value
    return samples


def failures(samples, name) -> dict:
    return {dict(labels).get("gcs_method", ""): v for (n, labels), v in samples.items()
            if n == name and v}


@pytest.mark.parametrize("op,mode,size,method", [
    ("objects.insert", "auto", 300_000, "CreateObject"),
    ("objects.compose", "composite", 12 * MiB + 3, "ComposeObjects"),
    ("xml.multipart_complete", "multipart", 12 * MiB + 5, "MultipartUploadComplete"),
], ids=["insert", "compose", "multipart"])
def test_a_recovered_commit_is_no_error_in_log_or_metrics(emulator, bucket, mount, op, mode,
                                                          size, method):
    """Before the fix the recovered commit counted as a failed request
    (fluxfs_gcs_request_failure_count{gcs_method=...} 1) and, for a one-request upload, as a
    failed upload (fluxfs_upload_failure_count 1)."""
    port = free_port()
    m = mount("--upload-mode", mode, "--prometheus-port", str(port), "--log-level", "debug")
    name = f"recovered-{mode}.bin"
    data = pattern(size, 20)
    before = scrape(port)
    lose_reply(emulator, op)
    write(m.path / name, data)
    assert bucket.get_blob(name).download_as_bytes() == data
    after = scrape(port)
    log = m.log()
    assert not m.error_lines(), "\n".join(m.error_lines())
    assert not [line for line in log.splitlines() if " warn " in line and name in line]
    assert failures(after, "fluxfs_gcs_request_failure_count").get(method, 0) == \
        failures(before, "fluxfs_gcs_request_failure_count").get(method, 0)
    assert after.get(("fluxfs_upload_failure_count", frozenset()), 0) == \
        before.get(("fluxfs_upload_failure_count", frozenset()), 0)
    assert "checking whether our earlier attempt committed" in log
    retried = sum(v for (n, _), v in after.items() if n == "fluxfs_gcs_retry_count")
    assert retried > sum(v for (n, _), v in before.items() if n == "fluxfs_gcs_retry_count")
    assert not [k for k, v in after.items() if k[0] == "fs_ops_error_count"
                and dict(k[1]).get("fs_op") in ("FlushFile", "ReleaseFileHandle", "WriteFile")
                and v]
    with open(m.path / name, "rb") as f:
        assert f.read() == data


def rename_failures(after, before):
    """Failed copies, deletes and renames counted between two scrapes (lookups of the new
    name answered 404/ENOENT are no failure of the rename)."""
    changed = {}
    for key, value in after.items():
        labels = dict(key[1])
        if ((key[0] == "fluxfs_gcs_request_failure_count"
             and labels.get("gcs_method") in ("CopyObject", "DeleteObject"))
                or (key[0] == "fs_ops_error_count" and labels.get("fs_op") == "Rename")) \
                and value != before.get(key, 0):
            changed[key] = value - before.get(key, 0)
    return changed


@pytest.mark.parametrize("replace", [False, True], ids=["new-name", "over-existing"])
def test_rename_with_lost_copy_reply(emulator, bucket, mount, replace):
    """Before the fix: rename failed with ESTALE ('objects.rewrite ... HTTP 412' at error),
    the destination written and the source left, CopyObject counted as a failed request."""
    port = free_port()
    m = mount("--prometheus-port", str(port), "--log-level", "debug")
    data = pattern(200_000, 30 + replace)
    src, dest = f"mv-src-{replace}.bin", f"mv-dest-{replace}.bin"
    bucket.blob(src).upload_from_string(data)
    if replace:
        bucket.blob(dest).upload_from_string(b"old bytes")
    assert (m.path / src).stat().st_size == len(data)
    if replace:
        assert (m.path / dest).stat().st_size == 9
    before_faults = injected(emulator)
    before = scrape(port)
    lose_reply(emulator, "objects.rewrite")
    (m.path / src).rename(m.path / dest)
    assert injected(emulator) - before_faults == 1
    assert bucket.get_blob(dest).download_as_bytes() == data
    assert bucket.get_blob(src) is None
    assert (m.path / dest).read_bytes() == data
    assert not (m.path / src).exists()
    after = scrape(port)
    log = m.log()
    assert not m.error_lines(), "\n".join(m.error_lines())
    assert not [line for line in log.splitlines() if " warn " in line and dest in line]
    assert "checking whether our earlier attempt committed" in log
    assert rename_failures(after, before) == {}
    retried = sum(v for (n, _), v in after.items() if n == "fluxfs_gcs_retry_count")
    assert retried > sum(v for (n, _), v in before.items() if n == "fluxfs_gcs_retry_count")


def test_directory_rename_with_lost_copy_and_delete_replies(emulator, bucket, mount):
    """A directory rename is one copy and one delete per object: the first copy and the first
    delete lose their replies; in a second rename the first copy loses two (the retry's 412 is
    lost too). Before the fix the first rename failed: ESTALE at the first object, which the
    kernel retries once, then ENOTEMPTY (the new name already had a child)."""
    port = free_port()
    m = mount("--prometheus-port", str(port), "--log-level", "debug")
    datas = {f"tree/{name}": pattern(50_000 + i, 40 + i)
             for i, name in enumerate(["a.bin", "b.bin", "sub/c.bin", "sub/d.bin"])}
    for name, data in datas.items():
        bucket.blob(name).upload_from_string(data)
    assert sorted(p.name for p in (m.path / "tree").iterdir()) == ["a.bin", "b.bin", "sub"]
    before_faults = injected(emulator)
    before = scrape(port)
    emulator.config(faults=[
        {"kind": "reset-mid", "rate": 1, "count": 1, "op": "objects.rewrite"},
        {"kind": "reset-mid", "rate": 1, "count": 1, "op": "objects.delete"},
    ])
    (m.path / "tree").rename(m.path / "moved")
    lost = injected(emulator) - before_faults
    emulator.config(faults=[
        {"kind": "reset-mid", "rate": 1, "count": 2, "op": "objects.rewrite"},
    ])
    (m.path / "moved").rename(m.path / "again")
    lost += injected(emulator) - before_faults - lost
    assert lost == 4
    for name, data in datas.items():
        final = "again/" + name.removeprefix("tree/")
        assert bucket.get_blob(final).download_as_bytes() == data, final
        assert (m.path / final).read_bytes() == data, final
    assert [b.name for b in bucket.list_blobs(prefix="tree/")] == []
    assert [b.name for b in bucket.list_blobs(prefix="moved/")] == []
    assert not (m.path / "tree").exists() and not (m.path / "moved").exists()
    after = scrape(port)
    assert not m.error_lines(), "\n".join(m.error_lines())
    assert not [line for line in m.log().splitlines()
                if " warn " in line and ("tree/" in line or "moved/" in line)]
    assert rename_failures(after, before) == {}
