"""Fidelity: Google's `gcloud storage` CLI against the emulator, unchanged.

gcloud is pointed at the emulator with a throwaway configuration directory and properties given
as environment variables (CLOUDSDK_CONFIG, CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE,
CLOUDSDK_AUTH_DISABLE_CREDENTIALS): nothing in the user's own gcloud configuration is read or
changed. gcloud's storage client is apitools: JSON API multipart uploads with a single-quoted
boundary and bare-LF line breaks, resumable uploads through the discovery document's
/resumable/upload/storage/v1 path (8 MiB and more), parallel composite uploads (components, then
compose), sliced downloads (ranged GETs), and a storageLayout request before mv, rm -r, cp -r.

Skipped when gcloud is not installed. Every gcloud invocation costs about a second of CPU.
"""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fidelity.common import MiB, crc32c_b64, md5_b64, payload
from tests.lib.emulator import unique_bucket_name

GCLOUD = shutil.which("gcloud")
pytestmark = [
    pytest.mark.skipif(GCLOUD is None, reason="gcloud is not installed"),
    pytest.mark.emulator_only,
]


class Gcloud:
    """Runs `gcloud storage ...` against one server with a private configuration."""

    def __init__(self, url: str, config_dir: Path, ca_file: str | None = None):
        self.env = dict(os.environ)
        for key in list(self.env):
            if key.startswith("CLOUDSDK_"):
                del self.env[key]
        self.env.update({
            "CLOUDSDK_CONFIG": str(config_dir),
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE": url.rstrip("/") + "/",
            "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
            "CLOUDSDK_CORE_PROJECT": "fluxfs-test",
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
            # Small thresholds so that 20-60 MiB files take the interesting paths.
            "CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED": "False",
            "CLOUDSDK_STORAGE_SLICED_OBJECT_DOWNLOAD_THRESHOLD": "0",
        })
        if ca_file is not None:
            self.env["CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE"] = ca_file
        # requests (gcloud storage's transport) lets these override gcloud's own trust setting.
        for key in ("STORAGE_EMULATOR_HOST", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
            self.env.pop(key, None)

    def run(self, *args, check=True, env=None, timeout=240) -> subprocess.CompletedProcess:
        proc = subprocess.run([GCLOUD, "storage", *args], capture_output=True, text=True,
                              env=dict(self.env, **(env or {})), timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"gcloud storage {' '.join(args)} -> {proc.returncode}\n"
                                 f"--- stderr ---\n{proc.stderr[-4000:]}")
        return proc

    def describe(self, url: str) -> dict:
        return json.loads(self.run("objects", "describe", url, "--format=json").stdout)


@pytest.fixture(scope="module")
def gcloud(emulator, tmp_path_factory):
    return Gcloud(emulator.url, tmp_path_factory.mktemp("gcloud-config"))


@pytest.fixture
def bucket(gcs):
    return gcs.create_bucket(unique_bucket_name("gcloud"))


def write(path: Path, size: int, seed: int) -> bytes:
    data = payload(size, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def ops(emulator) -> dict:
    return emulator.stats()["ops"]


# ------------------------------------------------------------------------------- uploads


@pytest.mark.parametrize("size", [0, 1, 1000, 3 * MiB + 5])
def test_cp_up_and_down_small(gcloud, bucket, tmp_path, size):
    """Under 8 MiB gcloud sends one JSON multipart upload (single-quoted boundary, bare LF)."""
    data = write(tmp_path / "f", size, size)
    gcloud.run("cp", str(tmp_path / "f"), f"gs://{bucket.name}/dir/f")
    blob = bucket.get_blob("dir/f")
    assert blob.size == size
    assert blob.crc32c == crc32c_b64(data)
    assert blob.md5_hash == md5_b64(data)
    gcloud.run("cp", f"gs://{bucket.name}/dir/f", str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == data


def test_cp_20mib_is_a_resumable_upload(gcloud, emulator, bucket, tmp_path):
    data = write(tmp_path / "f", 20 * MiB + 3, 20)
    before = ops(emulator)
    gcloud.run("cp", str(tmp_path / "f"), f"gs://{bucket.name}/big")
    after = ops(emulator)
    # The initiation (POST /resumable/upload/...) and at least one chunk.
    assert after["objects.insert"] - before["objects.insert"] == 1
    assert after["objects.resumable_chunk"] > before["objects.resumable_chunk"]
    assert bucket.get_blob("big").crc32c == crc32c_b64(data)
    assert bucket.blob("big").download_as_bytes() == data


def test_cp_60mib_parallel_composite_and_sliced_download(gcloud, emulator, bucket, tmp_path):
    data = write(tmp_path / "f", 60 * MiB + 7, 60)
    env = {"CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED": "True",
           "CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_THRESHOLD": "30M",
           "CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_COMPONENT_SIZE": "16M",
           "CLOUDSDK_STORAGE_SLICED_OBJECT_DOWNLOAD_THRESHOLD": "10M",
           "CLOUDSDK_STORAGE_SLICED_OBJECT_DOWNLOAD_COMPONENT_SIZE": "16M",
           "CLOUDSDK_STORAGE_SLICED_OBJECT_DOWNLOAD_MAX_COMPONENTS": "4"}
    before = ops(emulator)
    gcloud.run("cp", str(tmp_path / "f"), f"gs://{bucket.name}/ckpt", env=env)
    after = ops(emulator)
    assert after["objects.compose"] - before["objects.compose"] >= 1
    blob = bucket.get_blob("ckpt")
    assert blob.component_count >= 2
    assert blob.crc32c == crc32c_b64(data)
    # The temporary components are gone.
    assert [b.name for b in bucket.list_blobs()] == ["ckpt"]
    before = emulator.stats()
    gcloud.run("cp", f"gs://{bucket.name}/ckpt", str(tmp_path / "back"), env=env)
    after = emulator.stats()
    assert after["ops"]["objects.download"] - before["ops"]["objects.download"] >= 2
    assert after["bytes_out"] - before["bytes_out"] >= len(data)
    assert hashlib.sha256((tmp_path / "back").read_bytes()).digest() == \
        hashlib.sha256(data).digest()


@pytest.mark.parametrize("size", [650_000, 20 * MiB + 3], ids=["multipart", "resumable"])
def test_cp_gzip_in_flight(gcloud, emulator, bucket, tmp_path, size):
    """`cp -J` gzips the request bodies (Content-Encoding: gzip) of the multipart upload and of
    every resumable chunk; the server inflates them and stores the file as it is."""
    line = b"a line of very compressible text\n"
    data = (line * (size // len(line) + 1))[:size]
    (tmp_path / "f").write_bytes(data)
    before = emulator.stats()["bytes_in"]
    gcloud.run("cp", "-J", str(tmp_path / "f"), f"gs://{bucket.name}/gz")
    assert emulator.stats()["bytes_in"] - before < size // 10  # it did travel compressed
    blob = bucket.get_blob("gz")
    assert blob.size == size
    assert blob.content_encoding is None
    assert blob.crc32c == crc32c_b64(data) and blob.md5_hash == md5_b64(data)
    gcloud.run("cp", f"gs://{bucket.name}/gz", str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == data


def test_upload_into_a_missing_bucket_is_404(gcloud, emulator, tmp_path):
    write(tmp_path / "f", 10, 1)
    name = unique_bucket_name("missing")
    proc = gcloud.run("cp", str(tmp_path / "f"), f"gs://{name}/x", check=False)
    assert proc.returncode != 0
    assert "404" in proc.stderr or "not found" in proc.stderr.lower()
    # Nothing was created on the way.
    from tests.lib.emulator import storage_client
    assert storage_client(emulator).lookup_bucket(name) is None


# ------------------------------------------------------------------------------- trees


TREE = {"one.txt": 11, "a/two.bin": 2000, "a/b/three.bin": 300_000, "a/b/c/four": 0,
        "sp ace/ünï.txt": 17}


def make_tree(root: Path) -> dict:
    out = {}
    for i, (rel, size) in enumerate(sorted(TREE.items())):
        out[rel] = write(root / rel, size, 100 + i)
    return out


def read_tree(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_cp_r_ls_du_rm_r(gcloud, emulator, bucket, tmp_path):
    src = tmp_path / "tree"
    files = make_tree(src)
    gcloud.run("cp", "-r", str(src), f"gs://{bucket.name}/")
    assert {b.name: b.size for b in bucket.list_blobs()} == \
        {f"tree/{k}": len(v) for k, v in files.items()}

    listing = gcloud.run("ls", "-l", "-r", f"gs://{bucket.name}/tree").stdout
    for rel, data in files.items():
        assert any(line.split()[:1] == [str(len(data))] and
                   line.endswith(f"gs://{bucket.name}/tree/{rel}")
                   for line in listing.splitlines()), (rel, listing)
    assert f"TOTAL: {len(files)} objects, {sum(map(len, files.values()))} bytes" in listing

    du = gcloud.run("du", "-s", f"gs://{bucket.name}/tree").stdout.split()
    assert du[0] == str(sum(map(len, files.values())))

    back = tmp_path / "back"
    back.mkdir()
    gcloud.run("cp", "-r", f"gs://{bucket.name}/tree", str(back))
    assert read_tree(back / "tree") == files

    # Cloud to cloud: gcloud asks for the bucket's storage layout first (a 404 there failed it).
    before = ops(emulator)
    gcloud.run("cp", "-r", f"gs://{bucket.name}/tree", f"gs://{bucket.name}/copy")
    assert ops(emulator)["buckets.getStorageLayout"] > before["buckets.getStorageLayout"]
    assert {b.name: b.size for b in bucket.list_blobs(prefix="copy/")} == \
        {f"copy/{k}": len(v) for k, v in files.items()}

    gcloud.run("rm", "-r", f"gs://{bucket.name}/tree", f"gs://{bucket.name}/copy")
    assert list(bucket.list_blobs()) == []


def test_rsync_both_ways(gcloud, bucket, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src)
    gcloud.run("rsync", "-r", str(src), f"gs://{bucket.name}/sync")
    dst = tmp_path / "dst"
    dst.mkdir()
    gcloud.run("rsync", "-r", f"gs://{bucket.name}/sync", str(dst))
    assert read_tree(dst) == files
    # Changes flow up, including deletions.
    (src / "one.txt").write_bytes(b"changed, and longer")
    (src / "a/two.bin").unlink()
    write(src / "new/five", 5, 5)
    gcloud.run("rsync", "-r", "--delete-unmatched-destination-objects", str(src),
               f"gs://{bucket.name}/sync")
    assert bucket.blob("sync/one.txt").download_as_bytes() == b"changed, and longer"
    assert bucket.get_blob("sync/a/two.bin") is None
    gcloud.run("rsync", "-r", "--delete-unmatched-destination-objects",
               f"gs://{bucket.name}/sync", str(dst))
    assert read_tree(dst) == read_tree(src)


def test_mv_object_and_prefix(gcloud, bucket, tmp_path):
    bucket.blob("m/a").upload_from_string(b"alpha")
    bucket.blob("m/d/b").upload_from_string(b"beta")
    gcloud.run("mv", f"gs://{bucket.name}/m/a", f"gs://{bucket.name}/m/a2")
    assert bucket.get_blob("m/a") is None
    assert bucket.blob("m/a2").download_as_bytes() == b"alpha"
    gcloud.run("mv", f"gs://{bucket.name}/m/d", f"gs://{bucket.name}/n")
    assert sorted(b.name for b in bucket.list_blobs()) == ["m/a2", "n/b"]
    assert bucket.blob("n/b").download_as_bytes() == b"beta"


def test_compose_and_hash(gcloud, bucket, tmp_path):
    parts = [payload(1000 + i, i) for i in range(3)]
    for i, data in enumerate(parts):
        bucket.blob(f"p{i}").upload_from_string(data)
    gcloud.run("objects", "compose", *[f"gs://{bucket.name}/p{i}" for i in range(3)],
               f"gs://{bucket.name}/whole")
    whole = b"".join(parts)
    desc = gcloud.describe(f"gs://{bucket.name}/whole")
    assert desc["component_count"] == 3
    assert desc["crc32c_hash"] == crc32c_b64(whole)
    assert "md5_hash" not in desc or desc["md5_hash"] is None
    hashed = gcloud.run("hash", f"gs://{bucket.name}/p0", "--format=json").stdout
    entry = json.loads(hashed)
    entry = entry[0] if isinstance(entry, list) else entry
    assert entry["crc32c_hash"] == crc32c_b64(parts[0])
    assert entry["md5_hash"] == md5_b64(parts[0])
    local = tmp_path / "p0"
    local.write_bytes(parts[0])
    entry = json.loads(gcloud.run("hash", str(local), "--format=json").stdout)
    entry = entry[0] if isinstance(entry, list) else entry
    assert entry["crc32c_hash"] == crc32c_b64(parts[0])


# ------------------------------------------------------------------------------- metadata


def test_objects_update_set_and_clear(gcloud, bucket):
    bucket.blob("o").upload_from_string(b"payload")
    url = f"gs://{bucket.name}/o"
    gcloud.run("objects", "update", url, "--content-type=text/plain", "--cache-control=no-cache",
               "--content-language=fr", "--custom-metadata=k=v,k2=v2",
               "--custom-time=2026-01-02T03:04:05Z", "--temporary-hold")
    desc = gcloud.describe(url)
    assert desc["content_type"] == "text/plain"
    assert desc["cache_control"] == "no-cache"
    assert desc["content_language"] == "fr"
    assert desc["custom_fields"] == {"k": "v", "k2": "v2"}
    assert desc["custom_time"].startswith("2026-01-02T03:04:05")
    assert desc["temporary_hold"] is True
    assert desc["metageneration"] == 2

    # Held: neither rm nor an overwriting cp gets through.
    assert gcloud.run("rm", url, check=False).returncode != 0
    assert bucket.blob("o").download_as_bytes() == b"payload"

    # --clear-* sends JSON null for each field. (--clear-custom-metadata and
    # --remove-custom-metadata send "metadata": {} after a GET without the metadata, which a
    # patch merges as nothing: see tests/emulator/README.md.)
    gcloud.run("objects", "update", url, "--clear-cache-control", "--clear-content-language",
               "--clear-content-type", "--no-temporary-hold")
    desc = gcloud.describe(url)
    for gone in ("cache_control", "content_language", "temporary_hold"):
        assert gone not in desc or desc[gone] in (None, False), (gone, desc)
    assert desc["content_type"] == "application/octet-stream"
    assert desc["custom_fields"] == {"k": "v", "k2": "v2"}
    assert desc["metageneration"] == 3
    # customTime cannot be removed once set (Cloud Storage refuses), and stays.
    assert gcloud.run("objects", "update", url, "--clear-custom-time",
                      check=False).returncode != 0
    assert gcloud.describe(url)["custom_time"].startswith("2026-01-02T03:04:05")
    gcloud.run("rm", url)
    assert bucket.get_blob("o") is None


def test_ls_with_wildcards(gcloud, bucket):
    for name in ["a.txt", "b.bin", "d/c.txt", "d/e/f.txt"]:
        bucket.blob(name).upload_from_string(b"")
    out = gcloud.run("ls", f"gs://{bucket.name}/**.txt").stdout.split()
    assert out == [f"gs://{bucket.name}/a.txt", f"gs://{bucket.name}/d/c.txt",
                   f"gs://{bucket.name}/d/e/f.txt"]
    out = gcloud.run("ls", f"gs://{bucket.name}/*.txt").stdout.split()
    assert out == [f"gs://{bucket.name}/a.txt"]
