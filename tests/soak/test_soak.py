"""The fault soak (tests/soak/soak.py) as a CI test: SOAK_SECONDS (default 60) of mixed work
under 503/429/resets/truncation/stalls; any violation of its invariants fails.

Two kinds of violation belong to issue 15 defects fixed on another branch: the cleanup
invariants (nothing of the mount left under .fluxfs/, no open multipart upload; defect 3) and
a failed close() whose version is there after all (a lost commit reply reported as ESTALE;
defect 2). Until those fixes are on main they make this test xfail (reported, every other
invariant still enforced); SOAK_STRICT=1 fails on them too.
"""

import os

import pytest

from tests.soak.soak import FAILED_CLOSE_LEFT_VERSION, run_soak

pytestmark = pytest.mark.emulator_only

SECONDS = float(os.environ.get("SOAK_SECONDS", "60"))
# Issue 15 defects 2 (a close() whose commit reply was lost reports ESTALE) and 3 (cleanup
# after faults), fixed on another branch.
PENDING = ("left under .fluxfs/", "multipart uploads left open", FAILED_CLOSE_LEFT_VERSION)


@pytest.mark.timeout(SECONDS + 420)
def test_fault_soak():
    summary = run_soak(SECONDS)
    assert summary["faults_injected"] > 0, "no fault was injected: the soak proved nothing"
    assert summary["operations_total"] > 0
    violations = summary["violations"]
    pending = [v for v in violations if v.startswith(PENDING)]
    others = [v for v in violations if v not in pending]
    assert not others, "\n".join(others)
    if pending and not os.environ.get("SOAK_STRICT"):
        pytest.xfail("issue 15 defects 2/3 (pending on another branch): " + "; ".join(pending))
    assert not pending, "\n".join(pending)


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
