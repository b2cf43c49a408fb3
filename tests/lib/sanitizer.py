"""Sanitizer reports of the processes the tests start (the ASan+UBSan CI run, scripts/test, and
the ThreadSanitizer run, scripts/test-tsan).

scripts/test-sanitized runs the suites against a daemon built with
-Db_sanitize=address,undefined and points ASAN_OPTIONS/UBSAN_OPTIONS ``log_path`` into
FLUXFS_SANITIZER_LOG_DIR; scripts/test-tsan does the same with TSAN_OPTIONS (files tsan.<pid>).
So every report of every process (a daemon a test killed included) lands in a file there: any
non-empty file counts, whatever its name. A report fails the test that was running
(tests/conftest.py) and the run (pytest_sessionfinish and the scripts). A daemon started without
log_path writes its report to its log (stderr): Mount.unexpected_errors counts those lines as
errors no test may expect.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LOG_DIR_ENV = "FLUXFS_SANITIZER_LOG_DIR"

# The first line of an ASan/LSan report, UBSan's "file:line:col: runtime error: ...", and TSan's
# "WARNING: ThreadSanitizer: data race (pid=...)" (TSan reports are warnings, not errors).
REPORT_LINE = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|: runtime error: "
                         r"|WARNING: ThreadSanitizer: "
                         r"|SUMMARY: (Address|Undefined|Leak|Thread)")


def log_dir() -> Path | None:
    value = os.environ.get(LOG_DIR_ENV)
    return Path(value) if value else None


def report_files() -> dict[str, int]:
    """name -> size of every non-empty report file so far."""
    directory = log_dir()
    if directory is None or not directory.is_dir():
        return {}
    out = {}
    for path in directory.iterdir():
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size > 0:
            out[path.name] = size
    return out


def new_reports(before: dict[str, int]) -> list[str]:
    """The text of the reports written (or grown) since `before` (from report_files)."""
    directory = log_dir()
    texts = []
    for name, size in sorted(report_files().items()):
        if before.get(name) != size:
            try:
                texts.append(f"--- {name} ---\n" + (directory / name).read_text(errors="replace"))
            except OSError:
                pass
    return texts
