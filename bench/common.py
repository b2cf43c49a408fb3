"""Shared helpers for the benchmarks in bench/: finding binaries, starting the emulator,
reading its stats, measuring a daemon's memory and CPU, mounting and unmounting, medians and
plain-text tables.

Nothing here asserts timings; the scripts print what they measured and write raw JSON under
bench/results/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
TOOLS_BIN = REPO_ROOT / "build" / "tools" / "bin"

sys.path.insert(0, str(REPO_ROOT))
from tests.lib.emulator import Emulator  # noqa: E402  (the project's start/stop helper)

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- binaries


def _first_existing(candidates):
    for c in candidates:
        if c and Path(c).exists():
            return Path(c)
    return None


def build_dir() -> Path | None:
    """The meson build folder to take binaries from: $FLUXFS_BUILD, else build/."""
    env = os.environ.get("FLUXFS_BUILD")
    return Path(env) if env else REPO_ROOT / "build"


def emulator_binary() -> Path | None:
    return _first_existing([os.environ.get("GCS_EMULATOR"),
                            build_dir() / "tests" / "emulator" / "gcs-emulator"])


def fluxfs_binary() -> Path | None:
    return _first_existing([os.environ.get("FLUXFS_BIN"),
                            build_dir() / "src" / "main" / "fluxfs"])


def gcsfuse_binary() -> Path | None:
    return _first_existing([os.environ.get("GCSFUSE_BIN"), TOOLS_BIN / "gcsfuse",
                            shutil.which("gcsfuse")])


def start_emulator(args, tls: bool = False) -> Emulator:
    """The emulator with args; tls=True serves HTTPS with a throwaway CA (emu.ca_file), the
    HTTPS profile of the benchmarks."""
    binary = emulator_binary()
    if binary is None:
        sys.exit("gcs-emulator not found: build it (meson/ninja) or set GCS_EMULATOR / "
                 "FLUXFS_BUILD")
    return Emulator(list(args), binary=binary, startup_timeout=600, tls=tls)


def profile(emu: Emulator) -> str:
    return "HTTPS" if emu.url.startswith("https://") else "HTTP"


def tls_env(emu: Emulator) -> dict:
    """Environment for a daemon that must trust the emulator's CA: SSL_CERT_FILE (gcsfuse and
    other Go programs; fluxfs too). Empty for plain HTTP."""
    return {"SSL_CERT_FILE": str(emu.ca_file)} if emu.ca_file else {}


def client_tls_env(emu: Emulator) -> dict:
    """Environment for Python clients (requests) and the C bound clients: trust the CA."""
    if not emu.ca_file:
        return {}
    return {"REQUESTS_CA_BUNDLE": str(emu.ca_file), "SSL_CERT_FILE": str(emu.ca_file),
            "BOUND_CA_FILE": str(emu.ca_file)}


def fluxfs_tls_args(emu: Emulator) -> list[str]:
    return ["--ca-file", str(emu.ca_file)] if emu.ca_file else []


# ---------------------------------------------------------------- emulator control


def http_json(method: str, url: str, body=None, timeout=60, emu: Emulator | None = None):
    """emu: the server addressed, whose CA to trust when it serves HTTPS."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    context = emu.ssl_context() if emu is not None else None
    with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
        payload = resp.read()
    return json.loads(payload) if payload.strip() else None


def stats(emu: Emulator) -> dict:
    return http_json("GET", emu.url + "/_emulator/stats", emu=emu)


def reset_stats(emu: Emulator):
    http_json("POST", emu.url + "/_emulator/reset?stats_only=true", emu=emu)


def request_classes(s: dict) -> dict:
    """The per-class request counts of a stats snapshot, in a stable shape."""
    return {"requests": s.get("requests", 0), "class_a": s.get("class_a", 0),
            "class_b": s.get("class_b", 0), "free": s.get("free", 0),
            "ops": s.get("ops", {}), "bytes_out": s.get("bytes_out", 0)}


# ---------------------------------------------------------------- processes


def daemon_tree(pid: int) -> list[int]:
    """A daemon's processes: the process a mount started and its children. fluxfs runs as a
    --crash-restart supervisor (the default) and its serving process; every figure of "the
    daemon" sums both (--no-crash-restart: one process)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        text = ""
    return [pid, *(int(p) for p in text.split())]


def proc_usage(pid: int) -> dict:
    """Peak RSS (VmHWM, MiB) and CPU seconds (utime+stime) of a live daemon: summed over the
    process and its children (daemon_tree), plus the CPU of children it has reaped (a serving
    process that died, cutime+cstime)."""
    out = {"vmhwm_mib": None, "cpu_s": None, "user_s": None, "sys_s": None}
    try:
        hwm = user = sys_ = 0.0
        for i, p in enumerate(daemon_tree(pid)):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm += int(line.split()[1]) / 1024.0
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            # fields[0] is the state (field 3); utime, stime, cutime, cstime: fields 14-17.
            user += int(fields[11]) / CLK_TCK + (int(fields[13]) / CLK_TCK if i == 0 else 0)
            sys_ += int(fields[12]) / CLK_TCK + (int(fields[14]) / CLK_TCK if i == 0 else 0)
        out.update(vmhwm_mib=hwm, user_s=user, sys_s=sys_, cpu_s=user + sys_)
    except (OSError, IndexError, ValueError):
        pass
    return out


def rss_kib(pid: int, key: str = "VmRSS") -> int:
    """A /proc status memory field (VmRSS, VmHWM...) in KiB, summed over daemon_tree(pid)."""
    total = 0
    for p in daemon_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_seconds(pid: int) -> float | None:
    return proc_usage(pid)["cpu_s"]


def is_mounted(mnt: Path) -> bool:
    target = str(Path(mnt).resolve())
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4 and parts[4] == target:
                return True
    return False


def fuse_unmount(mnt: Path):
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", str(mnt)], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while is_mounted(mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-uz", str(mnt)], stderr=subprocess.DEVNULL)


class Mount:
    """A FUSE daemon started in the foreground (so its pid is the daemon's), waited for until
    the mount point is a mount, and stopped with fusermount3 -u (then SIGTERM)."""

    def __init__(self, name: str, cmd: list[str], mnt: Path, env=None, log: Path | None = None,
                 timeout: float = 60.0):
        self.name, self.cmd, self.mnt = name, cmd, Path(mnt)
        self.log = log or Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
        self.mnt.mkdir(parents=True, exist_ok=True)
        fuse_unmount(self.mnt)
        self._logf = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + timeout
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {self.proc.returncode} before mounting:"
                                   f"\n{' '.join(cmd)}\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not mount within {timeout} s\n{self.tail()}")
            time.sleep(0.02)

    def tail(self, n=4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def usage(self) -> dict:
        return proc_usage(self.proc.pid)

    def stop(self):
        fuse_unmount(self.mnt)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                for pid in reversed(daemon_tree(self.proc.pid)):  # children first
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait()
        self._logf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def drop_caches():
    """Cold kernel caches (dentries, inodes, page cache) between runs; harmless if denied."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass


def cache_drops() -> tuple:
    """The kernel's count of drop_caches writes (/proc/vmstat drop_pagecache, drop_slab). Other
    benchmarks on the machine drop the caches too: a cached epoch that saw the count change was
    not measured from a warm page cache."""
    try:
        with open("/proc/vmstat") as f:
            return tuple(line.strip() for line in f if line.startswith("drop_"))
    except OSError:
        return ()


# ---------------------------------------------------------------- reporting


def parse_size(text: str) -> int:
    """"128K", "4M", "1G" or a plain byte count."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def read_status(mnt: Path) -> dict:
    """The mount's .fluxfs/status as a dict of stripped strings."""
    text = (mnt / ".fluxfs" / "status").read_text()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines())}


def median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits=2):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(headers, rows) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(cells[0])) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for r in cells[1:]:
        lines.append("| " + " | ".join(c.rjust(widths[i]) if i else c.ljust(widths[i])
                                       for i, c in enumerate(r)) + " |")
    return "\n".join(lines)


def machine_line() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {os.uname().release}"


def write_results(name: str, payload: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--short", "--", "src",
                                "tests/emulator", "include"],
                               capture_output=True, text=True).stdout.split("\n")
    except OSError:
        commit, dirty = None, []
    payload = dict(payload, machine=machine_line(), date=time.strftime("%Y-%m-%d %H:%M:%S %z"),
                   argv=sys.argv, commit=commit,
                   uncommitted_sources=[d for d in dirty if d.strip()], loadavg_at_end=os.getloadavg(),
                   binaries={"emulator": str(emulator_binary()), "fluxfs": str(fluxfs_binary()),
                             "gcsfuse": str(gcsfuse_binary())})
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def gcsfuse_endpoint(emu: Emulator) -> str:
    """gcsfuse's --custom-endpoint for the emulator. The host must read "localhost": gcsfuse
    v3.11.4 creates its gRPC storage-control client (GetStorageLayout, for hierarchical
    namespace detection) unless the custom endpoint contains "localhost", and that client dials
    "host:port/storage/v1/" as a port and never mounts."""
    scheme, rest = emu.url.split("://", 1)
    port = rest.rsplit(":", 1)[1]
    return f"{scheme}://localhost:{port}/storage/v1/"


def run_interleaved(emu_args, todo, runs, args, describe):
    """Runs every contender of todo ([(name, fn(emu, args, mnt) -> result dict)]) once per run,
    interleaved (run 1 all, run 2 all, ...) against one emulator started with emu_args, so the
    machine's load hits them alike. Before each: caches dropped, load noted; after each: the
    emulator's requests by class and CPU seconds added. A contender that raises gets
    {"error": ...} and the others go on; an emulator that died is restarted and noted.
    describe(result) gives the per-run line. Returns (results by name, restarts)."""
    tls = getattr(args, "tls", False)
    emu = start_emulator(emu_args, tls=tls)
    restarts: list[dict] = []
    mnt = Path(tempfile.mkdtemp(prefix="fluxfs-bench-mnt-"))
    results: dict[str, list] = {}
    try:
        for k in range(runs):
            for name, fn in todo:
                if emu.proc.poll() is not None:  # died (or was killed): note it, go on
                    print(f"  emulator exited with status {emu.proc.returncode}; restarting it"
                          f"\n{emu.stderr()[-2000:]}", flush=True)
                    restarts.append({"before": f"run {k + 1} {name}",
                                     "status": emu.proc.returncode})
                    emu.close()
                    emu = start_emulator(emu_args, tls=tls)
                drop_caches()
                load = os.getloadavg()[0]
                emu_cpu0 = cpu_seconds(emu.proc.pid)
                try:
                    r = fn(emu, args, mnt)
                    r.update(request_classes(stats(emu)))
                    r["emulator_cpu_s"] = cpu_seconds(emu.proc.pid) - emu_cpu0
                except Exception as e:  # one contender failing must not hide the others
                    r = {"error": str(e)[-3000:]}
                    fuse_unmount(mnt)
                r["loadavg_before"] = load
                results.setdefault(name, []).append(r)
                if "error" in r:
                    print(f"  run {k + 1} {name}: ERROR {r['error']}", flush=True)
                else:
                    print(f"  run {k + 1} {name}: {describe(r)}" + (
                        f", RSS {r['vmhwm_mib']:.1f} MiB, CPU {r['cpu_s']:.2f} s"
                        if r.get("cpu_s") is not None else ""), flush=True)
        if emu.proc.poll() is not None:
            restarts.append({"before": "end", "status": emu.proc.returncode})
    finally:
        emu.stop()
        emu.close()
        fuse_unmount(mnt)
        try:
            mnt.rmdir()
        except OSError:
            pass
    return results, restarts
