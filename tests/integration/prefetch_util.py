"""Helpers shared by the prefetch suites (test_prefetch_*.py): the control directory's status
file, waiting on it, the reserved prefix of compose temporaries, and a fixture making extra
mounts that are checked and unmounted after the test."""

import time
from pathlib import Path

from tests.integration.mount import mounts_fixture  # noqa: F401 (the prefetch suites import it here)

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
