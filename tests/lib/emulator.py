"""Start and control a local Cloud Storage server for tests and benchmarks.

Two kinds of server are supported:

* ``gcs-emulator``: the project's own emulator (tests/emulator/), the normal target. Found via
  the ``GCS_EMULATOR`` environment variable or ``build/tests/emulator/gcs-emulator`` relative to
  the repository root.
* ``fake-gcs-server``: github.com/fsouza/fake-gcs-server, used only for comparisons. Found via
  ``FAKE_GCS_SERVER``, ``build/tools/bin/fake-gcs-server``, ``~/go/bin/fake-gcs-server`` or PATH.

Usage::

    from tests.lib.emulator import Emulator, storage_client
    with Emulator(["--latency-ms", "20"]) as emu:
        client = storage_client(emu)
        client.create_bucket("b")
        print(emu.stats()["class_a"])

A server that exits early, never prints its URL or never answers raises EmulatorError with its
stderr, so a broken emulator is reported loudly instead of as a confusing client error.

TLS mode (gcs-emulator only): ``Emulator(tls=True)`` makes a throwaway CA and a server
certificate for 127.0.0.1 and localhost (tests/lib/tls.py) in the emulator's temporary directory and serves HTTPS;
``emu.url`` is then ``https://127.0.0.1:PORT`` and ``emu.ca_file`` the CA certificate clients
must trust (the control helpers and ``storage_client()`` already do). A caller with its own
certificates passes ``--tls-cert``/``--tls-key`` in args and ``ca_file=`` instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

GCS_EMULATOR = "gcs-emulator"
FAKE_GCS_SERVER = "fake-gcs-server"
KINDS = (GCS_EMULATOR, FAKE_GCS_SERVER)

# Which server the fixtures in tests/conftest.py start (the comparison suite starts both).
SERVER_ENV = "FIDELITY_SERVER"


class EmulatorError(RuntimeError):
    """The server could not be started, died, or answered a control request with an error."""


def find_emulator_binary() -> Path | None:
    env = os.environ.get("GCS_EMULATOR")
    if env:
        return Path(env)
    candidate = REPO_ROOT / "build" / "tests" / "emulator" / "gcs-emulator"
    return candidate if candidate.exists() else None


def find_fake_gcs_server_binary() -> Path | None:
    env = os.environ.get("FAKE_GCS_SERVER")
    if env:
        return Path(env) if Path(env).exists() else None
    for candidate in (
        REPO_ROOT / "build" / "tools" / "bin" / "fake-gcs-server",
        Path.home() / "go" / "bin" / "fake-gcs-server",
    ):
        if candidate.exists():
            return candidate
    found = shutil.which("fake-gcs-server")
    return Path(found) if found else None


def find_binary(kind: str) -> Path | None:
    if kind == GCS_EMULATOR:
        return find_emulator_binary()
    if kind == FAKE_GCS_SERVER:
        return find_fake_gcs_server_binary()
    raise ValueError(f"unknown server kind {kind!r} (expected one of {KINDS})")


def default_kind() -> str:
    kind = os.environ.get(SERVER_ENV, GCS_EMULATOR)
    if kind not in KINDS:
        raise ValueError(f"{SERVER_ENV}={kind!r}: expected one of {KINDS}")
    return kind


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """A running Cloud Storage server (our emulator by default).

    ``args`` are extra command-line flags (e.g. ``["--populate", "b/train/:100:4096"]``); they
    apply to gcs-emulator only. ``kind`` selects fake-gcs-server for comparisons.
    """

    def __init__(self, args=(), *, kind: str = GCS_EMULATOR, binary=None,
                 startup_timeout: float = 30.0, env=None, tls: bool = False,
                 ca_file=None):
        self.kind = kind
        self.args = list(args)
        # Soft delete off unless asked for: the emulator gives new buckets Cloud Storage's
        # default of 7 days, and kept in its memory, the gigabytes of compose temporaries and
        # overwritten uploads that suites and benchmarks delete would fill the machine. Tests
        # of soft delete pass --soft-delete-seconds or patch the bucket's policy.
        if kind == GCS_EMULATOR and "--soft-delete-seconds" not in self.args:
            self.args += ["--soft-delete-seconds", "0"]
        self.tls = tls
        # The CA clients must trust: made here with tls=True, or given with certificates the
        # caller passes in args (--tls-cert/--tls-key).
        self.ca_file: Path | None = Path(ca_file) if ca_file else None
        self.binary = Path(binary) if binary else find_binary(kind)
        if self.binary is None or not self.binary.exists():
            raise EmulatorError(f"{kind} binary not found (looked at {self.binary}); "
                                "build it (meson/ninja) or set GCS_EMULATOR / FAKE_GCS_SERVER")
        self.startup_timeout = startup_timeout
        self.url: str | None = None
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix=f"{kind}-")
        self._stdout_path = Path(self._tmp.name) / "stdout"
        self._stderr_path = Path(self._tmp.name) / "stderr"
        self._env = env
        if tls:
            if kind != GCS_EMULATOR:
                raise EmulatorError(f"TLS mode needs gcs-emulator, not {kind}")
            from tests.lib.tls import make_ca
            ca = make_ca(Path(self._tmp.name) / "ca")
            # localhost too: gcsfuse must be given a "localhost" endpoint (bench/common.py).
            server = ca.issue(Path(self._tmp.name) / "server", "127.0.0.1", "localhost")
            self.ca_file = ca.cert
            self.args += ["--tls-cert", str(server.cert), "--tls-key", str(server.key)]
        self.start()

    # --- lifecycle -------------------------------------------------------------------------

    def _command(self):
        if self.kind == GCS_EMULATOR:
            return [str(self.binary), "--port", "0", *self.args]
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        root = Path(self._tmp.name) / "fs-root"
        return [str(self.binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                "-backend", "memory", "-filesystem-root", str(root),
                "-public-host", f"127.0.0.1:{port}", "-external-url", self.url,
                "-log-level", "error", *self.args]

    def start(self):
        cmd = self._command()
        env = dict(os.environ, **(self._env or {}))
        with open(self._stdout_path, "wb") as out, open(self._stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         env=env)
        deadline = time.monotonic() + self.startup_timeout
        if self.kind == GCS_EMULATOR:
            self.url = self._read_url(deadline)
        self._wait_ready(deadline)

    def _read_url(self, deadline) -> str:
        while True:
            self._check_alive("before printing its URL")
            text = self._stdout_path.read_text(errors="replace")
            if "\n" in text:
                line = text.split("\n", 1)[0].strip()
                if not line.startswith("http://") and not line.startswith("https://"):
                    self._fail(f"first stdout line is not a URL: {line!r}")
                return line.rstrip("/")
            if time.monotonic() > deadline:
                self._fail(f"did not print its URL within {self.startup_timeout} s")
            time.sleep(0.01)

    def _probe_path(self):
        return "/_emulator/stats" if self.kind == GCS_EMULATOR else "/storage/v1/b"

    def ssl_context(self) -> ssl.SSLContext | None:
        """A context trusting the emulator's CA (None for plain HTTP)."""
        if self.ca_file is None:
            return None
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _wait_ready(self, deadline):
        last = None
        while True:
            self._check_alive("while starting")
            try:
                with urllib.request.urlopen(self.url + self._probe_path(), timeout=2,
                                            context=self.ssl_context()) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
            except (urllib.error.URLError, OSError) as e:
                last = repr(e)
            if time.monotonic() > deadline:
                self._fail(f"not answering {self._probe_path()} within "
                           f"{self.startup_timeout} s (last: {last})")
            time.sleep(0.02)

    def stderr(self) -> str:
        try:
            return self._stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def _fail(self, why: str):
        self.stop()
        raise EmulatorError(f"{self.kind} ({' '.join(self._describe())}) {why}\n"
                            f"--- stderr ---\n{self.stderr()[-8000:]}")

    def _describe(self):
        return [str(self.binary), *self.args]

    def _check_alive(self, when: str):
        if self.proc is None:
            raise EmulatorError(f"{self.kind} is not running")
        rc = self.proc.poll()
        if rc is not None:
            raise EmulatorError(f"{self.kind} exited with status {rc} {when}\n"
                                f"--- stderr ---\n{self.stderr()[-8000:]}")

    def check_alive(self):
        """Raises EmulatorError (with stderr) if the server has died."""
        self._check_alive("unexpectedly")

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit status."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def close(self):
        self.stop()
        self._tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- control API (gcs-emulator only) ---------------------------------------------------

    @property
    def is_emulator(self) -> bool:
        return self.kind == GCS_EMULATOR

    @property
    def host(self) -> str:
        """host:port, e.g. for tools that want no scheme."""
        return self.url.split("://", 1)[1]

    def _control(self, method: str, path: str, body=None):
        if not self.is_emulator:
            raise NotImplementedError(f"{self.kind} has no /_emulator control API")
        self.check_alive()
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ssl_context()) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            raise EmulatorError(f"{method} {path} -> HTTP {e.code}: "
                                f"{e.read().decode(errors='replace')}") from None
        if not payload.strip():
            return None
        return json.loads(payload)

    def stats(self) -> dict:
        return self._control("GET", "/_emulator/stats")

    def reset(self):
        self._control("POST", "/_emulator/reset", body={})

    def bill(self) -> dict:
        """GET /_emulator/bill: operations by class, storage GiB-seconds, early deletion, $."""
        return self._control("GET", "/_emulator/bill")

    def advance_clock(self, seconds: float) -> dict:
        """POST /_emulator/clock: the store's clock (soft delete, retention, the ledger) moves
        ``seconds`` ahead."""
        return self._control("POST", "/_emulator/clock", body={"advance_s": seconds})

    def config(self, **kw):
        """POST /_emulator/config, e.g. config(latency_ms=20, faults=[{"kind": "503", ...}])."""
        return self._control("POST", "/_emulator/config", body=kw)


def unique_bucket_name(prefix: str = "t") -> str:
    """A valid, unique bucket name (lowercase letters, digits, dashes)."""
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def start_server(args=(), kind: str | None = None, **kw) -> Emulator:
    return Emulator(args, kind=kind or default_kind(), **kw)


def storage_client(emulator: Emulator, project: str = "fluxfs-test", token: str | None = None):
    """A google.cloud.storage.Client talking to the server through STORAGE_EMULATOR_HOST.

    Anonymous by default; with ``token`` every request carries ``Authorization: Bearer TOKEN``
    (for an emulator started with ``--auth-token TOKEN``).

    The variable is process-wide (the client reads it at construction and, for transfer_manager
    worker processes, again in the children), so it is set here and left pointing at the most
    recent server a client was built for.
    """
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    os.environ["STORAGE_EMULATOR_HOST"] = emulator.url
    if token is not None:
        from google.oauth2.credentials import Credentials
        credentials = Credentials(token=token)
    else:
        credentials = AnonymousCredentials()
    if getattr(emulator, "ca_file", None) is None:
        return storage.Client(project=project, credentials=credentials)
    # HTTPS: a session that trusts the emulator's CA (and only it).
    from google.auth.transport.requests import AuthorizedSession
    session = AuthorizedSession(credentials)
    session.verify = str(emulator.ca_file)
    session.trust_env = False  # else REQUESTS_CA_BUNDLE from the environment wins over verify
    return storage.Client(project=project, credentials=credentials, _http=session)
