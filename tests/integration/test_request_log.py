"""Request logs: --log-level trace (and gcsfuse's --debug_gcs at info) log one line per Cloud
Storage request attempt (operation, object, range, status, attempt, latency, bytes) and never
the bearer token, against an emulator that really requires the token (--auth-token) and a
token endpoint that really checks the service-account JWT. JSON records carry gcsfuse's keys
(timestamp {seconds, nanos}, severity in upper case, message) and fluxfs's."""

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from tests.integration.mount import MOUNT_TIMEOUT_S, find_fluxfs_binary, fluxfs_env, is_mounted
from tests.integration.test_auth import EMAIL, KEY_ID, make_key, write_service_key
from tests.integration.token_server import TokenServer

pytestmark = pytest.mark.emulator_only

TOKEN = "ya29.log-" + secrets.token_urlsafe(24)
BUCKET = "rlog"
SIZE = 5000


@pytest.fixture(scope="module")
def emulator_args():
    return ["--auth-token", TOKEN, "--populate", f"{BUCKET}/d/:3:{SIZE}:1"]


@pytest.fixture(scope="module")
def key_pair():
    return make_key()


@pytest.fixture
def key_file(key_pair, tmp_path):
    public = key_pair.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    with TokenServer(public, token=TOKEN, client_email=EMAIL, key_id=KEY_ID) as server:
        yield write_service_key(tmp_path / "key.json", key_pair, server.url)


def run_mounted(emulator, key, mountpoint, args, work):
    """Mounts with args (foreground, key file), runs work(mountpoint), unmounts; returns the
    daemon's exit status."""
    cmd = [str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url, "--key-file", key,
           *args, BUCKET, str(mountpoint)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=fluxfs_env())
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not is_mounted(mountpoint):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no mount"
            time.sleep(0.02)
        work(mountpoint)
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
        rc = proc.wait(60)
    return rc


def exercise(mountpoint):
    assert len((mountpoint / "d" / "00000001").read_bytes()) == SIZE
    assert not (mountpoint / "d" / "missing-for-log").exists()
    (mountpoint / "written-for-log").write_bytes(b"x" * 1234)
    (mountpoint / 'odd "name"\twith\\escapes').write_bytes(b"y")


REQUEST = re.compile(r"request op=(\w+) (\w+) bucket=(\S+) object=\"([^\"]*)\" range=(\S+) "
                     r"status=(\d+) attempt=(\d+) latency_ms=([\d.]+) call_ms=([\d.]+) "
                     r"bytes_down=(\d+) bytes_up=(\d+) (ok|failed|retrying)")


def test_trace_logs_every_request_and_never_the_token(emulator, key_file, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log = tmp_path / "log.json"
    rc = run_mounted(emulator, key_file, mountpoint,
                     ["--log-level", "trace", "--log-format", "json", "--log-file", str(log)],
                     exercise)
    assert rc == 0
    text = log.read_text()
    assert TOKEN not in text
    assert "Bearer" not in text and "authorization" not in text.lower()
    records = [json.loads(line) for line in text.splitlines()]
    for record in records:
        assert set(record["timestamp"]) == {"seconds", "nanos"}
        assert abs(record["timestamp"]["seconds"] - time.time()) < 3600
        assert record["severity"] in {"ERROR", "WARNING", "INFO", "DEBUG", "TRACE"}
        assert {"message", "time", "level", "component", "pid"} <= record.keys()
    requests = [REQUEST.search(r["message"]) for r in records if r["component"] == "gcs"]
    requests = [m for m in requests if m]
    assert requests, "no request lines"
    reads = [m for m in requests if m[1] == "NewReader" and m[4] == "d/00000001"]
    assert reads, [m[0] for m in requests]
    read = reads[0]
    assert read[2] == "GET" and read[3] == BUCKET and read[5].startswith("bytes=0-")
    assert read[6] in ("200", "206") and (read[7], read[12]) == ("1", "ok")
    assert int(read[10]) == SIZE
    methods = {m[1] for m in requests}
    assert {"GetBucket", "NewReader", "CreateObject"} <= methods or \
        {"NewReader", "CreateObject"} <= methods, methods
    assert any(m[1] in ("StatObject", "ListObjects") and m[6] == "404" or m[1] == "ListObjects"
               for m in requests)
    uploads = [m for m in requests if m[1] == "CreateObject" and m[4] == "written-for-log"]
    assert uploads and int(uploads[0][11]) >= 1234
    # A name's quotes, backslashes and control characters are escaped: one record per line.
    assert any('object="odd \\"name\\"\\twith\\\\escapes"' in r["message"] for r in records), \
        [r["message"] for r in records if "odd" in r["message"]]
    assert all(r["severity"] == "TRACE" for r in records if REQUEST.search(r["message"]))
    # The token request is logged without its body or query.
    assert any("request op=FetchToken POST status=200" in r["message"] for r in records)


def test_debug_gcs_logs_requests_at_info(emulator, key_file, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log = tmp_path / "log.txt"
    rc = run_mounted(emulator, key_file, mountpoint,
                     ["--debug_gcs", "--log-file", str(log)], exercise)
    assert rc == 0
    lines = log.read_text().splitlines()
    request_lines = [line for line in lines if REQUEST.search(line)]
    assert request_lines and all(" info " in line for line in request_lines)
    assert not any(TOKEN in line for line in lines)


def test_info_level_logs_no_request_lines(emulator, key_file, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log = tmp_path / "log.txt"
    rc = run_mounted(emulator, key_file, mountpoint, ["--log-file", str(log)], exercise)
    assert rc == 0
    assert not any(REQUEST.search(line) for line in log.read_text().splitlines())
    assert os.path.getsize(log) > 0
