"""Auth against a token endpoint that really checks credentials (token_server.py) and an
emulator that requires its bearer token (--auth-token): service-account JWTs, authorized_user
refresh tokens, the gcloud ADC file, the metadata server, token caching and refresh, and clean
failures for wrong keys, anonymous callers and missing credentials. A fresh RSA key is made per
run; no private key is committed."""

import json
import secrets

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.integration.token_server import TokenServer
from tests.integration.transport_util import run_smoke

pytestmark = pytest.mark.emulator_only

TOKEN = "ya29.test-" + secrets.token_urlsafe(24)
EMAIL = "fluxfs-test@test-project.iam.gserviceaccount.com"
KEY_ID = "test-key-" + secrets.token_hex(4)
NO_CREDENTIALS = ("no credentials found: set GOOGLE_APPLICATION_CREDENTIALS, use --key-file, "
                  "or --anonymous")


@pytest.fixture(scope="module")
def emulator_args():
    return ["--auth-token", TOKEN, "--populate", "authb/ds/:5:1000:3"]


def make_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


@pytest.fixture(scope="module")
def service_key():
    return make_key()


@pytest.fixture(scope="module")
def refresh_client():
    return ("client-" + secrets.token_hex(4), "secret-" + secrets.token_hex(8),
            "1//refresh/" + secrets.token_urlsafe(16))


@pytest.fixture
def token_server(service_key, refresh_client):
    public = service_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    with TokenServer(public, token=TOKEN, client_email=EMAIL, key_id=KEY_ID,
                     refresh_client=refresh_client) as server:
        yield server


def write_service_key(path, key, token_uri):
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "test-project", "private_key_id": KEY_ID,
        "private_key": private_pem(key), "client_email": EMAIL, "client_id": "1234",
        "token_uri": token_uri,
    }))
    return str(path)


def smoke(emulator, *args, env=None):
    return run_smoke(["--endpoint", emulator.url, *args], env=env)


def test_service_account_key_file(emulator, token_server, service_key, tmp_path):
    key = write_service_key(tmp_path / "key.json", service_key, token_server.url)
    result = smoke(emulator, "--key-file", key, "authb", "check")
    assert result.rc == 0, result.stderr
    assert result.text == "ok\n"
    assert token_server.issued == 1 and token_server.rejected == 0, token_server.reasons

    listing = smoke(emulator, "--key-file", key, "authb", "list", "ds/")
    assert listing.rc == 0, listing.stderr
    names = [line.split("\t")[1] for line in listing.text.splitlines()]
    assert names == [f"ds/{i:08d}" for i in range(5)]


def test_token_cached_across_calls(emulator, token_server, service_key, tmp_path):
    key = write_service_key(tmp_path / "key.json", service_key, token_server.url)
    result = smoke(emulator, "--key-file", key, "authb", "statloop", "ds/00000001", "8", "0")
    assert result.rc == 0, result.stderr
    assert result.text.count("ds/00000001\t1000\t") == 8
    assert token_server.issued == 1  # one token for eight calls


def test_token_refreshed_before_expiry(emulator, token_server, service_key, tmp_path):
    token_server.expires_in = 2  # refresh at 1.5 s, hard expiry at 1.8 s
    key = write_service_key(tmp_path / "key.json", service_key, token_server.url)
    result = smoke(emulator, "--key-file", key, "authb", "statloop", "ds/00000002", "8", "500")
    assert result.rc == 0, result.stderr
    assert result.text.count("ds/00000002\t") == 8
    # 3.5 s of calls with 2-second tokens: refreshed, but not once per call.
    assert 2 <= token_server.issued <= 5, token_server.issued
    assert token_server.rejected == 0


def test_google_application_credentials(emulator, token_server, service_key, tmp_path):
    key = write_service_key(tmp_path / "key.json", service_key, token_server.url)
    result = smoke(emulator, "authb", "check", env={"GOOGLE_APPLICATION_CREDENTIALS": key,
                                                    "HOME": str(tmp_path)})
    assert result.rc == 0, result.stderr
    assert token_server.issued == 1


def test_wrong_key_fails_cleanly(emulator, token_server, tmp_path):
    key = write_service_key(tmp_path / "key.json", make_key(), token_server.url)
    result = smoke(emulator, "--key-file", key, "authb", "check")
    assert result.rc == 1
    assert "ERROR Permission denied" in result.stderr
    assert "refused the credentials" in result.stderr
    assert "Invalid JWT Signature." in result.stderr
    assert token_server.issued == 0 and token_server.rejected >= 1
    assert "Segmentation" not in result.stderr and "STATS" in result.stderr


def test_token_url_override(emulator, token_server, service_key, tmp_path):
    key = write_service_key(tmp_path / "key.json", service_key, "http://127.0.0.1:1/token")
    result = smoke(emulator, "--key-file", key, "--token-url", token_server.url, "authb", "check")
    assert result.rc == 0, result.stderr
    assert token_server.issued == 1


def test_anonymous_is_refused_by_the_bucket(emulator):
    result = smoke(emulator, "--anonymous", "authb", "check")
    assert result.rc == 1
    assert "access denied to bucket authb" in result.stderr
    assert "Anonymous caller does not have access" in result.stderr


def test_authorized_user(emulator, token_server, refresh_client, tmp_path):
    client_id, secret, refresh = refresh_client
    path = tmp_path / "user.json"
    path.write_text(json.dumps({"type": "authorized_user", "client_id": client_id,
                                "client_secret": secret, "refresh_token": refresh}))
    result = smoke(emulator, "--key-file", str(path), "--token-url", token_server.url, "authb",
                   "check")
    assert result.rc == 0, result.stderr
    assert token_server.issued == 1

    path.write_text(json.dumps({"type": "authorized_user", "client_id": client_id,
                                "client_secret": "wrong", "refresh_token": refresh}))
    result = smoke(emulator, "--key-file", str(path), "--token-url", token_server.url, "authb",
                   "check")
    assert result.rc == 1 and "ERROR Permission denied" in result.stderr


def test_gcloud_adc_file(emulator, token_server, refresh_client, tmp_path):
    client_id, secret, refresh = refresh_client
    (tmp_path / "application_default_credentials.json").write_text(json.dumps({
        "type": "authorized_user", "client_id": client_id, "client_secret": secret,
        "refresh_token": refresh}))
    result = smoke(emulator, "--token-url", token_server.url, "authb", "check",
                   env={"CLOUDSDK_CONFIG": str(tmp_path), "HOME": str(tmp_path)})
    assert result.rc == 0, result.stderr
    assert token_server.issued == 1


def test_metadata_server(emulator, token_server, tmp_path):
    result = smoke(emulator, "authb", "check",
                   env={"HOME": str(tmp_path), "CLOUDSDK_CONFIG": str(tmp_path),
                        "GCE_METADATA_HOST": token_server.host})
    assert result.rc == 0, result.stderr
    assert token_server.issued == 1


def test_metadata_server_nesting_too_deep(emulator, token_server, tmp_path):
    """A token reply of 400,000 nested arrays fails cleanly instead of overflowing the stack."""
    token_server.deep_levels = 400_000
    result = smoke(emulator, "authb", "check",
                   env={"HOME": str(tmp_path), "CLOUDSDK_CONFIG": str(tmp_path),
                        "GCE_METADATA_HOST": token_server.host})
    assert result.rc == 1, result.stderr
    assert "token refresh failed" in result.stderr


def test_no_credentials(emulator, tmp_path):
    result = smoke(emulator, "authb", "check",
                   env={"HOME": str(tmp_path), "CLOUDSDK_CONFIG": str(tmp_path),
                        "GCE_METADATA_HOST": "127.0.0.1:1"})
    assert result.rc == 1
    assert NO_CREDENTIALS in result.stderr


@pytest.mark.parametrize("content, message", [
    (None, "cannot read the key file"),
    ("not json", "is not JSON"),
    ('{"type": "external_account"}', 'has type "external_account"'),
    ('{"type": "service_account", "client_email": "a@b", "private_key": "junk"}',
     "not a PEM RSA private key"),
])
def test_bad_key_files(emulator, tmp_path, content, message):
    path = tmp_path / "key.json"
    if content is not None:
        path.write_text(content)
    result = smoke(emulator, "--key-file", str(path), "authb", "check")
    assert result.rc == 1
    assert message in result.stderr


def test_token_never_logged(emulator, token_server, service_key, tmp_path):
    key = write_service_key(tmp_path / "key.json", service_key, token_server.url)
    result = smoke(emulator, "--key-file", key, "authb", "statloop", "ds/00000000", "2", "0",
                   env={"GCS_SMOKE_LOG": "trace"})
    assert result.rc == 0, result.stderr
    assert "new access token" in result.stderr  # the trace did log the refresh
    assert TOKEN not in result.stderr


def test_gcsfuse_token_url_without_key_file(emulator, token_server, tmp_path):
    """gcsfuse's --token-url: with no key file, the URL itself hands out tokens (issue 16; it
    used to be ignored, and fluxfs fell back to the metadata server and failed)."""
    import os
    import subprocess
    import time

    from tests.integration.mount import find_fluxfs_binary, fluxfs_env, is_mounted

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = fluxfs_env()
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path), GCE_METADATA_HOST="127.0.0.1:1")
    url = f"http://{token_server.host}/computeMetadata/v1/instance/service-accounts/default/token"
    cmd = [str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url, "--token-url", url,
           "authb", str(mnt)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 60  # a guard against a hang, not a timing assertion
        while not is_mounted(mnt):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "not mounted"
            time.sleep(0.02)
        assert sorted(os.listdir(mnt / "ds")) == [f"{i:08d}" for i in range(5)]
        assert (mnt / "ds" / "00000001").stat().st_size == 1000
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
        assert proc.wait(60) == 0
    assert token_server.issued == 1 and token_server.rejected == 0, token_server.reasons


def test_relative_google_application_credentials_at_mount(emulator, token_server, service_key,
                                                         tmp_path):
    """A relative GOOGLE_APPLICATION_CREDENTIALS names a file in the caller's directory, as a
    relative --key-file does, although the daemon detaches into / (issue 22)."""
    import os
    import subprocess

    from tests.integration.mount import find_fluxfs_binary, fluxfs_env, is_mounted

    write_service_key(tmp_path / "key.json", service_key, token_server.url)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = fluxfs_env()
    env["GOOGLE_APPLICATION_CREDENTIALS"] = "key.json"
    result = subprocess.run([str(find_fluxfs_binary()), "--endpoint", emulator.url,
                             "authb", str(mnt)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        assert sorted(os.listdir(mnt / "ds")) == [f"{i:08d}" for i in range(5)]
        assert token_server.issued >= 1
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
