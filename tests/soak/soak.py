"""Fault soak: a mixed workload on a mount whose server fails often, checked against a model.

The emulator injects 5% 503, 2% 429 (Retry-After 1 s), 1% resets before the reply, 1% resets
mid-body, 1% truncated bodies and 0.5% stalls (3 s, with --stall-timeout 2s) into every request.
Worker threads write, overwrite, rename, unlink, read and list files in a few directories of
the mount; every version written is a deterministic byte string whose sha256 is recorded.

The model keeps, for each name, the set of states it may be in (a sha256, or None for "no such
file"): a close() that returned 0 sets it to exactly that version; a failed close() adds
"nothing" to what was there (the new version is NOT allowed: a failed close must leave the
previous version or nothing); failed renames and unlinks widen the set the same way. Checked:

* every read returns a whole allowed version (0 wrong bytes); ENOENT only where "nothing" is
  allowed; listings show every name that must exist and none that cannot;
* after the run (faults off): every name read through the mount, then unmount (exit 0), then
  the bucket read directly: every object is an allowed version of a model name (no partial
  object, no stray name), every name that must exist does, nothing is left under .fluxfs/ and
  no multipart upload is open.

Failures the application saw (EIO from close, read, listing, ...) are allowed and counted with
why; violations of the above are not. Ops are serialized per directory, so the model is exact.

    .venv/bin/python -m tests.soak.soak --minutes 10        # by hand
    SOAK_SECONDS=60 .venv/bin/python -m pytest tests/soak    # what CI runs

Prints a summary (and writes it as JSON with --json FILE); exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from tests.integration.mount import Mount
from tests.lib.emulator import Emulator, storage_client

KiB, MiB = 1024, 1024 * 1024
BUCKET = "soak"
DIRS = ["a", "b", "c", "d"]
NAMES_PER_DIR = 8
OP_WEIGHTS = {"write": 30, "read": 30, "rename": 10, "unlink": 8, "list": 12, "stat": 10}
STALL_TIMEOUT = "2s"
MAX_VIOLATIONS = 200  # the workers stop early only after this many
# Violations where what was seen is the version of a close() that had failed.
FAILED_CLOSE_LEFT_VERSION = "failed close() left its version"

FAULTS = [
    {"kind": "503", "rate": 0.05},
    {"kind": "429", "rate": 0.02, "retry_after": 1},
    {"kind": "reset-before", "rate": 0.01},
    {"kind": "reset-mid", "rate": 0.01},
    {"kind": "truncate", "rate": 0.01},
    {"kind": "stall", "rate": 0.005, "seconds": 3},
]

MOUNT_ARGS = ["--stall-timeout", STALL_TIMEOUT, "--request-deadline", "90s",
              "--write-part-size", "5M", "--write-small-threshold", "1M"]


def content(version: int, size: int, seed: int) -> bytes:
    return random.Random(f"{seed}:{version}").randbytes(size)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pick_size(rng: random.Random) -> int:
    kind = rng.random()
    if kind < 0.05:
        return 0
    if kind < 0.5:
        return rng.randint(1, 256 * KiB)
    if kind < 0.85:
        return rng.randint(512 * KiB, 6 * MiB)
    return rng.randint(8 * MiB, 16 * MiB)


class Soak:
    def __init__(self, mount: Mount, seconds: float, threads: int, seed: int):
        self.mount = mount
        self.root = mount.path
        self.seconds = seconds
        self.threads = threads
        self.seed = seed
        self.dir_locks = {d: threading.Lock() for d in DIRS}
        self.allowed: dict[str, set] = {f"{d}/f{i}": {None} for d in DIRS
                                        for i in range(NAMES_PER_DIR)}
        self.versions = 0
        self.lock = threading.Lock()  # the counters and the version number
        self.ops = Counter()
        self.app_failures = Counter()  # (op, errno name)
        self.violations: list[str] = []
        self.bytes_written = 0
        self.bytes_read = 0
        self.history: dict[str, list] = {name: [] for name in self.allowed}
        # Versions whose close() failed, per name (moved by renames): seeing one of them is the
        # violation "a failed close() left the new version" (a commit whose reply was lost).
        self.failed_versions: dict[str, set] = {name: set() for name in self.allowed}
        self.failed_close_names: set[str] = set()
        self.started = time.monotonic()

    # --- bookkeeping ------------------------------------------------------------------------

    def next_version(self) -> int:
        with self.lock:
            self.versions += 1
            return self.versions

    def count(self, op):
        with self.lock:
            self.ops[op] += 1

    def failed(self, op, err: OSError):
        name = errno.errorcode.get(err.errno, str(err.errno)) if err.errno else type(err).__name__
        with self.lock:
            self.app_failures[(op, name)] += 1

    def note(self, name, what):
        """One line of a name's history (shown with a violation about it)."""
        self.history[name].append(f"{time.monotonic() - self.started:7.2f}s {what}")

    def violation(self, text, name=None, digest=None):
        if name is not None and (digest in self.failed_versions[name] if digest
                                 else bool(self.failed_versions[name])):
            text = f"{FAILED_CLOSE_LEFT_VERSION}: {text}"
            self.failed_close_names.add(name)
        if name is not None:
            text += " -- history: " + "; ".join(self.history[name][-6:])
        with self.lock:
            self.violations.append(text)
        print(f"VIOLATION: {text}", file=sys.stderr, flush=True)

    # --- operations (the caller holds the directory locks of every name it touches) ---------

    def do_write(self, name, rng):
        size = pick_size(rng)
        data = content(self.next_version(), size, self.seed)
        digest = sha(data)
        ok = True
        why = ""
        f = None
        try:
            f = open(self.root / name, "wb")
            for i in range(0, len(data), MiB):
                f.write(data[i:i + MiB])
        except OSError as e:
            ok = False
            why = f"write {errno.errorcode.get(e.errno, e.errno)}"
            self.failed("write", e)
        finally:
            if f is not None:
                try:
                    f.close()
                except OSError as e:
                    if ok:
                        self.failed("close", e)
                        why = f"close {errno.errorcode.get(e.errno, e.errno)}"
                    ok = False
        if ok:
            self.allowed[name] = {digest}
            with self.lock:
                self.bytes_written += size
            self.failed_versions[name] = set()
            self.note(name, f"write {size} B {digest[:8]} ok")
        else:
            self.allowed[name] = self.allowed[name] | {None}
            self.failed_versions[name].add(digest)
            self.note(name, f"write {size} B {digest[:8]} FAILED ({why})")

    def do_read(self, name, rng):
        try:
            data = (self.root / name).read_bytes()
        except FileNotFoundError:
            if None not in self.allowed[name]:
                self.violation(f"read {name}: ENOENT, but it must exist", name)
            return
        except OSError as e:
            self.failed("read", e)
            self.note(name, f"read FAILED ({errno.errorcode.get(e.errno, e.errno)})")
            return
        with self.lock:
            self.bytes_read += len(data)
        if sha(data) not in self.allowed[name]:
            self.violation(f"read {name}: {len(data)} bytes ({sha(data)[:8]}) that are no "
                           f"version allowed ({len(self.allowed[name])} allowed)", name,
                           sha(data))

    def do_stat(self, name, rng):
        try:
            os.stat(self.root / name)
        except FileNotFoundError:
            if None not in self.allowed[name]:
                self.violation(f"stat {name}: ENOENT, but it must exist", name)
        except OSError as e:
            self.failed("stat", e)
        else:
            if self.allowed[name] == {None}:
                self.violation(f"stat {name}: exists, but it cannot", name)

    def do_unlink(self, name, rng):
        try:
            os.unlink(self.root / name)
        except FileNotFoundError:
            if None not in self.allowed[name]:
                self.violation(f"unlink {name}: ENOENT, but it must exist", name)
            self.allowed[name] = {None}
            self.note(name, "unlink ENOENT")
        except OSError as e:
            self.failed("unlink", e)
            self.allowed[name] = self.allowed[name] | {None}
            self.note(name, f"unlink FAILED {e.errno}")
        else:
            self.allowed[name] = {None}
            self.note(name, "unlink ok")

    def do_rename(self, source, target):
        before_source, before_target = self.allowed[source], self.allowed[target]
        try:
            os.rename(self.root / source, self.root / target)
        except FileNotFoundError:
            if None not in before_source:
                self.violation(f"rename {source}: ENOENT, but it must exist", source)
            self.allowed[source] = {None}
            outcome = "ENOENT"
        except OSError as e:
            self.failed("rename", e)
            # Not atomic on Cloud Storage (copy, then delete): either side may have moved.
            self.allowed[source] = before_source | {None}
            self.allowed[target] = before_target | (before_source - {None})
            self.failed_versions[target] |= self.failed_versions[source]
            outcome = f"FAILED {e.errno}"
        else:
            if before_source == {None}:
                self.violation(f"rename {source} -> {target}: succeeded, but {source} cannot "
                               "exist", source)
            self.allowed[target] = before_source - {None}
            self.allowed[source] = {None}
            self.failed_versions[target] = self.failed_versions[source]
            self.failed_versions[source] = set()
            outcome = "ok"
        self.note(source, f"rename to {target} {outcome}")
        self.note(target, f"rename from {source} {outcome}")

    def do_list(self, directory):
        try:
            listed = set(os.listdir(self.root / directory))
        except OSError as e:
            self.failed("list", e)
            return
        for i in range(NAMES_PER_DIR):
            base = f"f{i}"
            states = self.allowed[f"{directory}/{base}"]
            if base in listed and states == {None}:
                self.violation(f"list {directory}: shows {base}, which cannot exist",
                               f"{directory}/{base}")
            if base not in listed and None not in states:
                self.violation(f"list {directory}: misses {base}, which must exist",
                               f"{directory}/{base}")
        for extra in listed - {f"f{i}" for i in range(NAMES_PER_DIR)}:
            self.violation(f"list {directory}: unexpected entry {extra!r}")

    # --- driver -----------------------------------------------------------------------------

    def one_op(self, rng):
        op = rng.choices(list(OP_WEIGHTS), weights=list(OP_WEIGHTS.values()))[0]
        directory = rng.choice(DIRS)
        name = f"{directory}/f{rng.randrange(NAMES_PER_DIR)}"
        if op == "list":
            with self.dir_locks[directory]:
                self.do_list(directory)
        elif op == "rename":
            other_dir = rng.choice(DIRS)
            target = f"{other_dir}/f{rng.randrange(NAMES_PER_DIR)}"
            if target == name:
                return
            locks = [self.dir_locks[d] for d in sorted({directory, other_dir})]
            for lock in locks:
                lock.acquire()
            try:
                self.do_rename(name, target)
            finally:
                for lock in reversed(locks):
                    lock.release()
        else:
            with self.dir_locks[directory]:
                getattr(self, f"do_{op}")(name, rng)
        self.count(op)

    def worker(self, index, deadline):
        rng = random.Random(f"{self.seed}:worker:{index}")
        # Runs on after a violation: a long soak reports everything it saw.
        while time.monotonic() < deadline and len(self.violations) < MAX_VIOLATIONS:
            try:
                self.one_op(rng)
            except Exception as e:  # an unexpected exception is a finding, not a crash
                self.violation(f"worker {index}: {type(e).__name__}: {e}")

    def run(self):
        for d in DIRS:
            os.makedirs(self.root / d, exist_ok=True)
        deadline = time.monotonic() + self.seconds
        workers = [threading.Thread(target=self.worker, args=(i, deadline), daemon=True)
                   for i in range(self.threads)]
        for t in workers:
            t.start()
        for t in workers:
            # An op hangs when it outlives the deadline by more than the request deadline.
            t.join(max(0.0, deadline - time.monotonic()) + 300)
            if t.is_alive():
                self.violation("an operation hung (no answer 300 s past the end)")

    def verify_through_mount(self):
        for name in sorted(self.allowed):
            self.do_read(name, None)
        for d in DIRS:
            self.do_list(d)


def open_multipart_uploads(emulator) -> int:
    with urllib.request.urlopen(f"{emulator.url}/{BUCKET}?uploads", timeout=30) as reply:
        doc = ET.fromstring(reply.read())
    return sum(1 for el in doc.iter() if el.tag.split("}")[-1] == "Upload")


def verify_bucket(soak: Soak, emulator):
    bucket = storage_client(emulator).bucket(BUCKET)
    seen = set()
    for blob in bucket.list_blobs():
        if blob.name.startswith(".fluxfs/"):
            soak.violation(f"left under .fluxfs/: {blob.name}")
            continue
        if blob.name.endswith("/") and blob.name.rstrip("/") in DIRS:
            continue  # the directories' placeholders (mkdir)
        if blob.name not in soak.allowed:
            soak.violation(f"stray object {blob.name!r}")
            continue
        seen.add(blob.name)
        digest = sha(blob.download_as_bytes())
        if digest not in soak.allowed[blob.name]:
            soak.violation(f"object {blob.name}: {blob.size} bytes ({digest[:8]}) that are no "
                           "version allowed (a partial or wrong object)", blob.name, digest)
    for name, states in soak.allowed.items():
        if name not in seen and None not in states:
            soak.violation(f"object {name} is missing, but it must exist", name)
    uploads = open_multipart_uploads(emulator)
    if uploads:
        soak.violation(f"{uploads} multipart uploads left open")


def run_soak(seconds: float, threads: int = 4, seed: int = 1, log=print) -> dict:
    started = time.monotonic()
    with Emulator(["--seed", str(seed)]) as emulator:
        storage_client(emulator).create_bucket(BUCKET)
        mount = Mount(emulator, BUCKET, args=MOUNT_ARGS)
        soak = Soak(mount, seconds, threads, seed)
        unmount_rc = None
        try:
            emulator.config(faults=FAULTS)
            before = emulator.stats()
            soak.run()
            during = emulator.stats()
            emulator.config(faults=[])
            soak.verify_through_mount()
            unmount_rc = mount.unmount()
            if unmount_rc != 0:
                soak.violation(f"fluxfs exited with status {unmount_rc} after unmount")
            verify_bucket(soak, emulator)
        finally:
            daemon_log = mount.log()
            mount.close()
        load = os.getloadavg()
        summary = {
            "seconds": seconds,
            "threads": threads,
            "seed": seed,
            "operations": dict(soak.ops),
            "operations_total": sum(soak.ops.values()),
            "bytes_written": soak.bytes_written,
            "bytes_read": soak.bytes_read,
            "requests": during["requests"] - before["requests"],
            "faults_injected": during["faults_injected"] - before["faults_injected"],
            "app_failures": {f"{op} {why}": n for (op, why), n in sorted(soak.app_failures.items())},
            "app_failures_total": sum(soak.app_failures.values()),
            "violations": soak.violations,
            "failed_closes_that_committed": sorted(soak.failed_close_names),
            "unmount_status": unmount_rc,
            "daemon_error_lines": sum(1 for line in daemon_log.splitlines() if " error " in line),
            "daemon_error_kinds": dict(Counter(
                line.split(" error ", 1)[1].split(":", 1)[0] + ": " +
                (line.split("(", 1)[1].split(",", 1)[0] if "(" in line else "?")
                for line in daemon_log.splitlines() if " error " in line).most_common(12)),
            "load_average": [round(x, 2) for x in load],
            "wall_seconds": round(time.monotonic() - started, 1),
        }
    log(json.dumps(summary, indent=2))
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description="fluxfs fault soak (see the module docstring)")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the summary here")
    args = parser.parse_args(argv)
    summary = run_soak(args.minutes * 60, args.threads, args.seed)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
