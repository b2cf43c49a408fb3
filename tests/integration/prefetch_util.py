"""Helpers shared by the prefetch suites (test_prefetch_*.py): the control directory's status
file, waiting on it, the reserved prefix of compose temporaries, and a fixture making extra
mounts that are checked and unmounted after the test."""

import time
from pathlib import Path

import pytest

from tests.integration.mount import Mount

RESERVED = ".fluxfs/compose/"
WAIT_S = 60  # guard against a hang, not a timed assertion


def status(mount):
    """MOUNT/.fluxfs/status as a dict of counter name -> text."""
    text = (Path(mount.path) / ".fluxfs" / "status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines())}


def wait_for(mount, predicate, what):
    """Polls the status file until predicate(status) holds; fails after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while True:
        s = status(mount)
        if predicate(s):
            return s
        assert time.monotonic() < deadline, f"gave up waiting for {what}: {s}"
        time.sleep(0.05)


def reserved_objects(gcs, bucket):
    """Compose temporaries left in the bucket (none may outlive their use)."""
    return [b.name for b in gcs.bucket(bucket).list_blobs(prefix=RESERVED)]


def mounts_fixture(bucket):
    """A function-scoped fixture `mounts(*args)` making mounts of bucket; afterwards faults are
    reset and every mount must have logged no unexpected error and unmount cleanly."""

    @pytest.fixture
    def mounts(emulator):
        made = []

        def mount(*args):
            m = Mount(emulator, bucket, args=list(args))
            made.append(m)
            return m

        yield mount
        emulator.config(faults=[], deny=[])
        problems = []
        for m in made:
            problems += m.unexpected_errors()
            if m.alive() and m.unmount() != 0:
                problems.append(f"exit status {m.proc.returncode}")
            m.close()
        assert not problems, "\n".join(problems)

    return mounts
