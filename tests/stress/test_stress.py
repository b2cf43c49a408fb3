"""The write-path concurrency stress (tests/stress/stress.py, README.md here) as CI tests.

FLUXFS_STRESS_SECONDS (default 60) is the load of both tests together: half on one mount,
half on two mounts of one bucket. FLUXFS_STRESS_SEED (printed with every run) repeats a run;
FLUXFS_STRESS_STRICT=1 also fails on coherence findings (stale views through a mount, known
fluxfs races: README.md here), which otherwise come as a warning. FLUXFS selects the daemon
(the ASan build too: README.md here)."""

import os
import warnings

import pytest

from tests.stress.content import END_OK, SCRATCH, parse, version_bytes
from tests.stress.stress import (ABSENT, BUCKET, DEFAULT_SECONDS, DEFAULT_SEED, MIX_WEIGHTS,
                                 Record, upload_problem, verify_bucket)

pytestmark = [
    pytest.mark.emulator_only,
    # The thread owners fork on purpose (a child that exits at once, as DataLoader workers and
    # subprocess do); Python 3.12+ warns about fork() in a multi-threaded process.
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

TOTAL_SECONDS = float(os.environ.get("FLUXFS_STRESS_SECONDS", DEFAULT_SECONDS))
SEED = int(os.environ.get("FLUXFS_STRESS_SEED", DEFAULT_SEED))
STRICT = os.environ.get("FLUXFS_STRESS_STRICT", "") == "1"
PER_TEST = TOTAL_SECONDS / 2
# Not a timed assertion: a guard against a hung run (setup, checks and unmount come on top of
# the load; the ASan daemon is several times slower).
TIMEOUT = int(PER_TEST) + 900


class CoherenceWarning(UserWarning):
    """Stale views through a mount that the stress run saw (not fatal unless strict)."""


def judge(summary, mounts):
    header = (f"stress run, seed {summary['seed']} (FLUXFS_STRESS_SEED={summary['seed']} "
              f"repeats it), {mounts} mount(s)")
    if summary["coherence_findings"]:
        warnings.warn(CoherenceWarning(
            f"{header}: {len(summary['coherence_findings'])} coherence finding(s):\n" +
            "\n".join(f[:600] for f in summary["coherence_findings"][:10])))
    assert not summary["violations"], (
        f"{header}: {len(summary['violations'])} violation(s)\n" +
        "\n".join(v[:1500] for v in summary["violations"][:60]))
    # The run proved something: every kind of operation ran, faults were injected.
    ran = {k.split(":", 1)[1] for k in summary["operations"] if k.startswith(("mix:", "faults:"))}
    expected = set(MIX_WEIGHTS) - ({"shared_write"} if mounts == 1 else set())
    assert ran >= expected, f"{header}: never ran {sorted(expected - ran)}"
    assert summary["phases"]["fork"]["files_closed"] > 0
    assert summary["phases"]["faults"]["faults_injected"] > 0, \
        f"{header}: no fault was injected: the fault phase proved nothing"
    assert summary["samples"] > 0 and summary["unmount_status"] == [0] * mounts


@pytest.mark.timeout(TIMEOUT)
def test_stress_one_mount():
    from tests.stress.stress import run_stress
    judge(run_stress(PER_TEST, mounts=1, seed=SEED, strict=STRICT), 1)


@pytest.mark.timeout(TIMEOUT)
def test_stress_two_mounts():
    from tests.stress.stress import run_stress
    judge(run_stress(PER_TEST, mounts=2, seed=SEED, strict=STRICT), 2)


def test_checks_can_fail():
    """The checks are not blind: torn, mixed and scratch-leaking contents are refused; the
    final bucket check reports a torn object, a lost version, a missing one, a stray object
    and a leftover under .fluxfs/; the upload bound trips at 4.5x (today's fork bug)."""
    segments = [(1000, 0), (70_000, END_OK), (5, 0), (300, END_OK)]
    data = version_bytes(7, 3, segments)
    assert parse(data) == ((7, 3, 4), None)
    assert parse(data[:1032 + 70_032]) == ((7, 3, 2), None)  # an fsync point: whole
    for bad in (data[:-1], data[:1032], data[:500] + version_bytes(8, 3, segments)[500:],
                version_bytes(7, 3, [(10, 0), (10, SCRATCH | END_OK)])):
        cid, why = parse(bad)
        assert cid is None and why, bad[:40]

    from tests.lib.emulator import Emulator, storage_client
    from tests.stress.bucket import BucketClient
    with Emulator([]) as emulator:
        bucket = storage_client(emulator).create_bucket(BUCKET)
        v1, v2 = version_bytes(1, 1, [(100, END_OK)]), version_bytes(1, 2, [(200, END_OK)])
        bucket.blob("w01/f0").upload_from_string(v1)           # as modelled
        bucket.blob("w01/f1").upload_from_string(v2[:150])     # torn
        bucket.blob("w01/f2").upload_from_string(v1)           # an older version than modelled
        bucket.blob("stray").upload_from_string(v1)
        bucket.blob(".fluxfs/tmp/left").upload_from_string(b"x")
        models = {"w01/f0": {(1, 1, 1)}, "w01/f1": {(1, 2, 1)}, "w01/f2": {(1, 2, 1)},
                  "w01/f3": {(1, 2, 1)}, "w01/f4": {ABSENT}}
        rec = Record("self-test")
        verify_bucket(BucketClient(emulator.url, BUCKET), models, {"w01/"}, rec)
    text = "\n".join(rec.violations)
    assert "w01/f0" not in text and "w01/f4" not in text
    assert "[whole] self-test: w01/f1: the bucket holds a torn object" in text
    assert "[final] self-test: w01/f2: the bucket holds writer 1 version 1" in text
    assert "[final] self-test: w01/f3 is missing" in text
    assert "[stray] self-test: stray object 'stray'" in text
    assert "[leftover] self-test: left under .fluxfs/ after the unmount: .fluxfs/tmp/left" in text

    fork = {"bytes_written": 64 << 20, "files_closed": 1, "bytes_in": int(4.5 * (64 << 20)),
            "ops": {}}
    assert "4.50x" in upload_problem(fork)
    fork["bytes_in"] = (64 << 20) + 3000
    assert upload_problem(fork) is None
