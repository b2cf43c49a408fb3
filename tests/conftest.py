"""Fixtures shared by every pytest suite: a Cloud Storage server per module, fresh buckets.

* ``emulator`` (module scope): a started server, by default our gcs-emulator; the environment
  variable FIDELITY_SERVER=fake-gcs-server starts fake-gcs-server instead (for comparisons).
  A module changes the command-line flags by overriding the ``emulator_args`` fixture::

      @pytest.fixture(scope="module")
      def emulator_args():
          return ["--populate", "data/train/:1000:4096"]

* ``gcs`` (module scope): a google.cloud.storage.Client for that server.
* ``fresh_bucket`` (function scope): a newly created bucket with a unique name.

Tests marked ``emulator_only`` are skipped when the server is not gcs-emulator.
"""

import pytest

from tests.lib import sanitizer
from tests.lib.emulator import (
    GCS_EMULATOR,
    Emulator,
    EmulatorError,
    default_kind,
    find_binary,
    storage_client,
    unique_bucket_name,
)


@pytest.fixture(scope="session")
def server_kind():
    return default_kind()


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def emulator(server_kind, emulator_args):
    if server_kind != GCS_EMULATOR and find_binary(server_kind) is None:
        pytest.skip(f"{server_kind} is not installed")
    emu = Emulator(emulator_args if server_kind == GCS_EMULATOR else [], kind=server_kind)
    try:
        yield emu
        # A server that crashed during the module fails the module loudly, with its stderr.
        emu.check_alive()
    finally:
        emu.close()


@pytest.fixture(autouse=True)
def _emulator_only(request, server_kind):
    if request.node.get_closest_marker("emulator_only") and server_kind != GCS_EMULATOR:
        pytest.skip(f"needs gcs-emulator (running against {server_kind})")


@pytest.fixture(scope="module")
def gcs(emulator):
    return storage_client(emulator)


@pytest.fixture
def fresh_bucket(gcs):
    bucket = gcs.create_bucket(unique_bucket_name())
    return bucket


__all__ = ["EmulatorError"]


@pytest.fixture(autouse=True)
def _sanitizer_reports():
    """Fails the test during which a process wrote an ASan/UBSan/LSan report (the sanitized CI
    run sets FLUXFS_SANITIZER_LOG_DIR; see tests/lib/sanitizer.py)."""
    before = sanitizer.report_files()
    yield
    reports = sanitizer.new_reports(before)
    if reports:
        pytest.fail("sanitizer report(s) written during this test:\n" + "\n".join(reports)[-8000:])


def pytest_sessionfinish(session, exitstatus):
    """Reports written between tests (a module's daemon at its unmount) fail the run too."""
    if sanitizer.report_files():
        print(f"\nsanitizer reports in {sanitizer.log_dir()}: the run fails")
        session.exitstatus = 1
