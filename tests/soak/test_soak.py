"""The fault soak (tests/soak/soak.py) as a CI test: SOAK_SECONDS (default 60) of mixed work
under 503/429/resets/truncation/stalls; any violation of its invariants fails (wrong bytes, a
failed close() whose version is there after all, a partial or stray object, anything left under
.fluxfs/ or an open multipart upload after the unmount, a hang)."""

import os
import random

import pytest

from tests.soak.soak import run_soak

pytestmark = pytest.mark.emulator_only

SECONDS = float(os.environ.get("SOAK_SECONDS", "60"))


@pytest.mark.timeout(SECONDS + 420)
def test_fault_soak():
    summary = run_soak(SECONDS)
    assert summary["faults_injected"] > 0, "no fault was injected: the soak proved nothing"
    assert summary["operations_total"] > 0
    assert not summary["violations"], "\n".join(summary["violations"])


def test_soak_checks_can_fail():
    """The model is not blind: an object changed behind the mount's back, a stray object and a
    leftover under .fluxfs/ are each reported."""
    from tests.integration.mount import Mount
    from tests.lib.emulator import Emulator, storage_client
    from tests.soak.soak import BUCKET, MOUNT_ARGS, Soak, verify_bucket

    with Emulator([]) as emulator:
        bucket = storage_client(emulator).create_bucket(BUCKET)
        mount = Mount(emulator, BUCKET, args=MOUNT_ARGS)
        try:
            soak = Soak(mount, 2, 2, seed=7)
            soak.run()
            # One write of its own: how many the 2 s run managed depends on the machine's load.
            with soak.dir_locks["a"]:
                soak.do_write("a/f0", random.Random(7))
            assert soak.violations == []
            written = [n for n, states in soak.allowed.items() if None not in states]
            assert written, "the short run wrote nothing"
            assert mount.unmount() == 0
            bucket.blob(written[0]).upload_from_string(b"not a version anyone wrote")
            bucket.blob("a/stray").upload_from_string(b"x")
            bucket.blob(".fluxfs/tmp/left-behind").upload_from_string(b"x")
            verify_bucket(soak, emulator)
        finally:
            mount.close()
    text = "\n".join(soak.violations)
    assert f"object {written[0]}:" in text and "no version allowed" in text
    assert "stray object 'a/stray'" in text
    assert "left under .fluxfs/: .fluxfs/tmp/left-behind" in text
