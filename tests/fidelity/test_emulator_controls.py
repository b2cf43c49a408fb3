"""The emulator's own interface, seen from a client: command-line flags (--data-dir,
--auth-token, --deny, --fault, --latency-ms, --populate), the control API (stats, reset,
config) and the test helper (tests/lib/emulator.py) that every suite starts it with.

Only meaningful for gcs-emulator: skipped when FIDELITY_SERVER selects another server.
"""

import http.client
import json
import os
import signal
import time

import google.auth.exceptions
import pytest
import requests
from google.api_core import exceptions as gexc

from tests.fidelity.common import MiB, crc32c_b64, payload
from tests.lib.emulator import Emulator, EmulatorError, storage_client, unique_bucket_name

pytestmark = pytest.mark.emulator_only

MANY = 2500


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"ctl-many/m/:{MANY}:8"]


@pytest.fixture
def restore_config(emulator):
    yield
    emulator.config(latency_ms=0, jitter_ms=0, bandwidth_mibps=0, qps_limit=0, faults=[],
                    deny=[])


def timed_get(url, **kw):
    t0 = time.monotonic()
    r = requests.get(url, **kw)
    return r, time.monotonic() - t0


def fastest_get(url, tries=3, **kw):
    """The quickest of a few GETs: an upper bound on a time holds for one of them even when a
    loaded machine stalls the others (a lower bound needs no such help)."""
    return min((timed_get(url, **kw) for _ in range(tries)), key=lambda answer: answer[1])


# --- the helper --------------------------------------------------------------------------


def test_helper_reports_startup_failure_with_stderr():
    with pytest.raises(EmulatorError) as info:
        Emulator(["--no-such-flag"])
    msg = str(info.value)
    assert "exited with status" in msg
    assert "--- stderr ---" in msg
    assert msg.split("--- stderr ---", 1)[1].strip(), "stderr should explain the failure"


def test_helper_notices_a_dead_emulator():
    emu = Emulator()
    try:
        assert requests.get(emu.url + "/_emulator/stats").status_code == 200
        os.kill(emu.proc.pid, signal.SIGKILL)
        emu.proc.wait(10)
        with pytest.raises(EmulatorError, match="exited with status -9"):
            emu.check_alive()
        with pytest.raises(EmulatorError):
            emu.stats()
    finally:
        emu.close()


def test_helper_stop_terminates_cleanly():
    emu = Emulator()
    rc = emu.stop()
    assert rc is not None and rc != -signal.SIGKILL  # exited on SIGTERM, not killed
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(emu.url + "/_emulator/stats", timeout=2)
    emu.close()


# --- flags --------------------------------------------------------------------------------


def test_data_dir_persists_across_restart(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    small, big = payload(1000, 1), payload(3 * MiB + 3, 2)
    with Emulator(["--data-dir", str(data_dir)]) as emu:
        gcs = storage_client(emu)
        bucket = gcs.create_bucket("persisted")
        bucket.blob("small").upload_from_string(small)
        blob = bucket.blob("dir/big")
        blob.chunk_size = 1 * MiB
        blob.upload_from_file(__import__("io").BytesIO(big))
        bucket.blob("composed").compose([bucket.blob("small"), bucket.blob("dir/big")])
        patched = bucket.blob("small")
        patched.metadata = {"k": "v"}
        patched.patch()
        bucket.blob("deleted").upload_from_string(b"gone")
        bucket.blob("deleted").delete()
        before = {b.name: (b.generation, b.metageneration, b.crc32c, b.size, b.metadata)
                  for b in gcs.list_blobs("persisted")}
    with Emulator(["--data-dir", str(data_dir)]) as emu:
        gcs = storage_client(emu)
        after = {b.name: (b.generation, b.metageneration, b.crc32c, b.size, b.metadata)
                 for b in gcs.list_blobs("persisted")}
        assert after == before
        assert sorted(after) == ["composed", "dir/big", "small"]
        bucket = gcs.bucket("persisted")
        assert bucket.blob("small").download_as_bytes() == small
        assert bucket.blob("dir/big").download_as_bytes() == big
        assert bucket.blob("composed").download_as_bytes() == small + big
        # New writes after a restart get newer generations.
        new = bucket.blob("small")
        new.upload_from_string(b"newer")
        assert new.generation > before["small"][0]


def test_auth_token():
    with Emulator(["--auth-token", "s3cret"]) as emu:
        anonymous = storage_client(emu)
        # On a 401 the client tries to refresh its credentials, which anonymous ones cannot.
        with pytest.raises((gexc.Unauthorized, google.auth.exceptions.InvalidOperation)):
            anonymous.create_bucket("authb")
        authed = storage_client(emu, token="s3cret")
        bucket = authed.create_bucket("authb")
        bucket.blob("o").upload_from_string(b"private")
        assert bucket.blob("o").download_as_bytes() == b"private"
        base = f"{emu.url}/storage/v1/b/authb/o/o"
        assert requests.get(base).status_code == 401
        assert requests.get(base, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert requests.get(base, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert requests.get(f"{emu.url}/authb/o").status_code == 401  # XML API too
        assert requests.get(f"{emu.url}/authb/o",
                            headers={"Authorization": "Bearer s3cret"}).content == b"private"
        # The control API stays open (the helper and benchmarks use it).
        assert emu.stats()["requests"] > 0


def test_fault_flag_and_latency_flag():
    with Emulator(["--fault", "503:1:objects.get", "--latency-ms", "150"]) as emu:
        gcs = storage_client(emu)
        bucket = gcs.create_bucket("faulty")
        bucket.blob("o").upload_from_string(b"x")
        r, took = timed_get(f"{emu.url}/storage/v1/b/faulty/o/o")
        assert r.status_code == 503 and r.json()["error"]["code"] == 503
        assert took >= 0.14
        # Other operations are not affected by the fault rule.
        r, took = timed_get(f"{emu.url}/storage/v1/b/faulty/o/o", params={"alt": "media"})
        assert r.status_code == 200 and r.content == b"x"
        assert took >= 0.14
        assert emu.stats()["faults_injected"] >= 1


def test_deny_flag_and_config(emulator, gcs, restore_config):
    bucket = gcs.create_bucket(unique_bucket_name())
    a = bucket.blob("a")
    a.upload_from_string(b"A")
    emulator.config(deny=["objects.compose"])
    with pytest.raises(gexc.Forbidden):
        bucket.blob("c").compose([a, a])
    assert bucket.blob("a").download_as_bytes() == b"A"  # other operations still work
    emulator.config(deny=[])
    bucket.blob("c").compose([a, a])
    assert bucket.blob("c").download_as_bytes() == b"AA"


def test_qps_limit(emulator, gcs, restore_config):
    bucket = gcs.create_bucket(unique_bucket_name())
    bucket.blob("q").upload_from_string(b"q")
    url = f"{emulator.url}/storage/v1/b/{bucket.name}/o/q"
    emulator.config(qps_limit=5)
    codes = []
    started = time.monotonic()
    with requests.Session() as s:
        # Until 15 were refused (a fixed 30 requests refused 15 only if they took < 2 s).
        while codes.count(429) < 15 and len(codes) < 1000:
            r = s.get(url)
            codes.append(r.status_code)
            if r.status_code == 429:
                assert int(r.headers["Retry-After"]) >= 1
                assert r.json()["error"]["errors"][0]["reason"] == "rateLimitExceeded"
    elapsed = time.monotonic() - started
    # One second of burst (5), then 5 a second: never more, however long the requests took.
    assert 1 <= codes.count(200) <= 5 + 5 * elapsed + 1, (elapsed, codes)
    assert codes.count(429) >= 15, codes
    # Google's client backs off on 429 and gets through.
    blob = bucket.blob("q")
    blob.reload()
    assert blob.size == 1
    emulator.config(qps_limit=0)
    with requests.Session() as s:
        assert all(s.get(url).status_code == 200 for _ in range(30))


def test_bandwidth_limit(emulator, gcs, restore_config):
    bucket = gcs.create_bucket(unique_bucket_name())
    data = payload(8 * MiB, 3)
    bucket.blob("bw").upload_from_string(data)
    url = f"{emulator.url}/storage/v1/b/{bucket.name}/o/bw?alt=media"
    emulator.config(bandwidth_mibps=10)
    r, took = timed_get(url)
    assert r.content == data
    assert took >= 8 / 10 * 0.85, took
    emulator.config(bandwidth_mibps=0)
    r, took = fastest_get(url)
    assert r.content == data and took < 0.4, took  # unlimited again (loopback: ~10 ms)


def test_fault_schedule_every_and_per_object(emulator, gcs, restore_config):
    bucket = gcs.create_bucket(unique_bucket_name())
    for name in "abc":
        bucket.blob(name).upload_from_string(name.encode())
    emulator.config(faults=[{"kind": "503", "op": "objects.get", "every": 2, "per_object": 1}])
    rule = requests.get(emulator.url + "/_emulator/config").json()["faults"][0]
    assert (rule["every"], rule["per_object"]) == (2, 1)
    # A rule read back from GET is accepted as it is.
    emulator.config(faults=[rule])

    def get(name):
        return requests.get(f"{emulator.url}/storage/v1/b/{bucket.name}/o/{name}").status_code

    # Every 2nd objects.get fails, but never twice for one object: the fault due on a's fourth
    # request passes to b's first.
    assert [get("a"), get("a"), get("a"), get("a"), get("b"), get("b"), get("c"), get("c")] == \
        [200, 503, 200, 200, 503, 200, 503, 200]
    # Other operations neither fail nor move the schedule.
    assert requests.get(f"{emulator.url}/storage/v1/b/{bucket.name}/o").status_code == 200
    # A media upload is its name parameter's object.
    emulator.config(faults=[{"kind": "503", "op": "objects.insert", "every": 1,
                             "per_object": 1}])
    upload = f"{emulator.url}/upload/storage/v1/b/{bucket.name}/o?uploadType=media&name="
    assert [requests.post(upload + name, data=b"x").status_code for name in "xxyy"] == \
        [503, 200, 503, 200]


def test_config_get_and_invalid_config_changes_nothing(emulator, restore_config):
    emulator.config(latency_ms=7, faults=[{"kind": "429", "rate": 0.5, "op": "objects.list",
                                           "retry_after": 2}])
    current = requests.get(emulator.url + "/_emulator/config").json()
    assert current["latency_ms"] == 7
    assert len(current["faults"]) == 1 and current["faults"][0]["kind"] == "429"
    for bad in ({"faults": [{"kind": "bogus", "rate": 1}]}, {"latency_ms": -5},
                {"faults": [{"kind": "503", "rate": 1, "op": "objects.nonsense"}]},
                {"faults": [{"kind": "503", "rate": 0.5, "every": 2}]},
                {"faults": [{"kind": "503", "every": -1}]},
                {"faults": [{"kind": "503", "every": 1.5}]},
                {"faults": [{"kind": "503", "per_object": "x"}]}):
        r = requests.post(emulator.url + "/_emulator/config", json=bad)
        assert r.status_code == 400, (bad, r.status_code, r.text)
    r = requests.post(emulator.url + "/_emulator/config", data=b"{not json")
    assert r.status_code == 400
    assert requests.get(emulator.url + "/_emulator/config").json() == current


# --- listing limits over a populated bucket -------------------------------------------------


@pytest.fixture
def many(emulator):
    # test_reset empties the store; restart-free: ensure the populated objects exist.
    if requests.get(f"{emulator.url}/storage/v1/b/ctl-many").status_code == 404:
        pytest.skip("populated bucket was reset by an earlier test")
    return "ctl-many"


def test_list_max_results_is_capped_at_1000(emulator, many):
    base = f"{emulator.url}/storage/v1/b/{many}/o"
    for params in ({"maxResults": 5000}, {}):
        j = requests.get(base, params=params).json()
        assert len(j["items"]) == 1000, params
        assert j["nextPageToken"]
    names, token, pages = [], None, 0
    while True:
        params = {"maxResults": 1000, "fields": "items(name),nextPageToken"}
        if token:
            params["pageToken"] = token
        j = requests.get(base, params=params).json()
        names += [i["name"] for i in j.get("items", [])]
        pages += 1
        token = j.get("nextPageToken")
        if not token:
            break
    assert names == [f"m/{i:08d}" for i in range(MANY)]
    assert pages == 3


def test_list_versions_param_accepted(emulator, many, gcs):
    blobs = list(gcs.list_blobs(many, versions=True, max_results=5))
    assert [b.name for b in blobs] == [f"m/{i:08d}" for i in range(5)]


# --- connections ----------------------------------------------------------------------------


def test_more_than_512_concurrent_connections(emulator, gcs):
    bucket = gcs.create_bucket(unique_bucket_name())
    data = payload(100, 9)
    bucket.blob("c").upload_from_string(data)
    host, port = emulator.host.split(":")
    path = f"/storage/v1/b/{bucket.name}/o/c?alt=media"
    conns = [http.client.HTTPConnection(host, int(port), timeout=60) for _ in range(520)]
    try:
        for c in conns:
            c.connect()
        for c in conns:
            c.request("GET", path)
        bodies = []
        for c in conns:
            r = c.getresponse()
            bodies.append((r.status, r.read()))
        assert all(b == (200, data) for b in bodies)
        assert emulator.stats()["peak_connections"] >= 512
        # Keep-alive: the same connections serve a second round.
        for c in conns[:50]:
            c.request("GET", path)
            r = c.getresponse()
            assert (r.status, r.read()) == (200, data)
    finally:
        for c in conns:
            c.close()


def test_stats_bytes_in_and_out_are_exact_for_media(emulator, gcs):
    bucket = gcs.create_bucket(unique_bucket_name())
    data = payload(123_457, 10)
    url = f"{emulator.url}/upload/storage/v1/b/{bucket.name}/o"
    before = emulator.stats()
    r = requests.post(url, params={"uploadType": "media", "name": "b"}, data=data)
    assert r.status_code == 200 and r.json()["crc32c"] == crc32c_b64(data)
    mid = emulator.stats()
    assert mid["bytes_in"] - before["bytes_in"] == len(data)
    r = requests.get(f"{emulator.url}/storage/v1/b/{bucket.name}/o/b",
                     params={"alt": "media"}, headers={"Range": "bytes=100-199"})
    assert r.status_code == 206
    after = emulator.stats()
    assert after["bytes_out"] - mid["bytes_out"] == 100
    assert json.dumps(after)  # plain JSON


# Last: it empties the store (including the populated bucket the listing tests use).
def test_reset(emulator, gcs):
    name = unique_bucket_name()
    gcs.create_bucket(name).blob("o").upload_from_string(b"x")
    requests.post(emulator.url + "/_emulator/reset?stats_only=true").raise_for_status()
    stats = emulator.stats()
    assert stats["requests"] == 0 and stats["class_a"] == 0 and stats["bytes_in"] == 0
    assert gcs.bucket(name).blob("o").download_as_bytes() == b"x"  # objects kept
    assert emulator.stats()["ops"]["objects.download"] == 1
    emulator.reset()
    with pytest.raises(gexc.NotFound):
        gcs.get_bucket(name)
    assert emulator.stats()["ops"].get("objects.download", 0) == 0
    # The populated bucket is gone too (reset empties the store); repopulate is not implied.
    with pytest.raises(gexc.NotFound):
        gcs.get_bucket("ctl-many")
