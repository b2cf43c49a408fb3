"""Helpers for the transport tests: find and run gcs-smoke (tests/unit/gcs_smoke.c)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def gcs_smoke_binary() -> Path:
    env = os.environ.get("GCS_SMOKE")
    path = Path(env) if env else REPO_ROOT / "build" / "tests" / "unit" / "gcs-smoke"
    if not path.exists():
        pytest.fail(f"gcs-smoke not found at {path}: build it (ninja -C build) or set GCS_SMOKE")
    return path


@dataclass
class SmokeResult:
    rc: int
    stdout: bytes
    stderr: str

    @property
    def stats(self) -> dict:
        for line in self.stderr.splitlines():
            if line.startswith("STATS "):
                return json.loads(line[6:])
        raise AssertionError(f"no STATS line in stderr:\n{self.stderr}")

    @property
    def text(self) -> str:
        return self.stdout.decode()


def run_smoke(args, *, env=None, timeout=120) -> SmokeResult:
    """Runs gcs-smoke with args; env entries set to None are removed from the environment."""
    full_env = dict(os.environ)
    for key in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST"):
        full_env.pop(key, None)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    proc = subprocess.run([str(gcs_smoke_binary()), *args], capture_output=True,
                          env=full_env, timeout=timeout)
    return SmokeResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))
