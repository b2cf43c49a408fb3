#!/usr/bin/env python3
"""Checkpoint save and load (issue 4, "Benchmarks").

One emulator (--latency-ms 20, objects in memory) serves every contender. Per run and per state
dict size, each contender in turn:

  fluxfs      fresh mount; torch.save(state, MNT/ckpt/F) timed (open to close, so the upload's
              tail and commit are inside); unmount; kernel caches dropped; fresh mount;
              torch.load(MNT/ckpt/F) timed; tensors compared one by one (not timed)
  gcsfuse     the same, mounted with --enable-streaming-writes (its default in v3.11.4, named
              anyway) and --enable-kernel-reader (its fastest reader in bench/seqread.py)
  connector   dataflux_pytorch.dataflux_checkpoint.DatafluxCheckpoint(project, bucket) over
              STORAGE_EMULATOR_HOST: torch.save into .writer(name), close() uploads (XML
              multipart, 32 MiB parts, 8 threads); torch.load(.reader(name))
  local       a file under --local-dir (page cache, no fsync, as torch.save does), caches
              dropped before the load

Every save and load runs in a child process (`checkpoint.py --worker ...`) that builds the
state dict from a seed (float32 tensors of 16 MiB, generation not timed), so the connector's
peak RSS (ru_maxrss of that child) can be reported, and a hung contender is killed after
--timeout seconds. Daemon peak RSS (VmHWM) and CPU seconds come from /proc of the mount that
did the save (or the load). Requests by class come from the emulator's stats, reset before each
operation. The object is deleted after each contender so the emulator holds one at a time.

Lightning: Trainer.save_checkpoint of a small model (one fit step first, not timed) to the mount,
to gcsfuse, to DatafluxLightningCheckpoint (gs://bench/ckpt/...) and to local disk.

  bench/checkpoint.py [--runs 3] [--sizes-mib 256,2048] [--only fluxfs,gcsfuse,connector,local]
  bench/checkpoint.py --rss-only --sizes-mib 8192     # fluxfs save only, peak RSS sampled
                                                       # (tensors: views of a sparse-file mmap)

Loads that jump or map the file (issue 11: fetch each byte once), --loads:

  bench/checkpoint.py --loads torch,mmap,safetensors,dcp1,dcp4 [--sizes-mib 512] [--runs 3]
                      [--only fluxfs,gcsfuse,fluxfs@/path/to/another/build/fluxfs]

One state dict per size is written locally (torch.save, safetensors save_file, and
torch.distributed.checkpoint's FileSystemWriter with one process) and uploaded once under
ckpt/loads-SIZE/. Then per run, pattern and contender, on a fresh mount with caches dropped, a
child process times: torch.load (torch), torch.load(mmap=True) then a sum over every tensor
(mmap: the tensors are faulted in), safetensors.torch.load_file then a sum over every tensor
(safetensors: load_file maps the file and returns views, touching each tensor's first page; the
sum faults the rest in; load_file alone is recorded as load_seconds), dcp.load into
preallocated tensors with 1 process (dcp1) or 4 gloo ranks (dcp4, torch.distributed.run; the
slowest rank's time). Every tensor is compared afterwards (not timed). Reported: seconds, and
bytes the emulator served divided by the size of the files (1.00 = each byte fetched once;
contention-independent). The connector (DatafluxCheckpoint) reads a stream: it has no mmap or
DCP reader, so only its torch.load row above applies.

Raw results: bench/results/checkpoint-*.json, checkpoint-loads-*.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

BUCKET, PREFIX = "bench", "ckpt"
MIB = 1 << 20
TENSOR_MIB = 16
GCSFUSE_FLAGS = ["--enable-streaming-writes", "--enable-kernel-reader"]


# ---------------------------------------------------------------- worker (child process)


def make_state(size_mib: int, seed: int):
    import torch
    g = torch.Generator().manual_seed(seed)
    n = TENSOR_MIB * MIB // 4
    return {f"layer{i:04d}.weight": torch.rand(n, generator=g)
            for i in range(max(1, size_mib // TENSOR_MIB))}


def lightning_model(hidden: int):
    import lightning.pytorch as pl
    import torch

    class Small(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden, hidden))

        def training_step(self, batch, _idx):
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    return Small()


def connector_compat():
    """gcs-torch-dataflux 1.4.0's multipart module imports
    _api_core_retry_to_resumable_media_retry from google.cloud.storage._helpers and
    .transfer_manager, which google-cloud-storage 3.x (3.17.1 in .venv) no longer has;
    everything else it imports is still there (google-resumable-media 2.11.0 included). Put
    back the function as google-cloud-storage 2.x defined it, before the connector is imported."""
    import google.cloud.storage._helpers as h
    if hasattr(h, "_api_core_retry_to_resumable_media_retry"):
        return
    from google.resumable_media import common

    def _api_core_retry_to_resumable_media_retry(retry, num_retries=None):
        if retry is not None and num_retries is not None:
            raise ValueError("num_retries and retry arguments are mutually exclusive")
        if retry is not None:
            return common.RetryStrategy(max_sleep=retry._maximum,
                                        max_cumulative_retry=retry._deadline,
                                        initial_delay=retry._initial,
                                        multiplier=retry._multiplier)
        if num_retries is not None:
            return common.RetryStrategy(max_retries=num_retries)
        return common.RetryStrategy(max_retries=0)

    h._api_core_retry_to_resumable_media_retry = _api_core_retry_to_resumable_media_retry
    import google.cloud.storage.transfer_manager as tm
    tm._api_core_retry_to_resumable_media_retry = _api_core_retry_to_resumable_media_retry


def worker(a):
    """One timed operation; prints one JSON line."""
    import torch
    if a.kind == "connector":
        connector_compat()
    out = {}
    if a.what == "lightning":
        import lightning.pytorch as pl
        plugins = []
        if a.kind == "connector":
            from dataflux_pytorch.lightning import DatafluxLightningCheckpoint
            plugins = [DatafluxLightningCheckpoint(project_name="bench")]
        x = torch.randn(64, a.hidden)
        dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x), batch_size=16)
        tr = pl.Trainer(max_steps=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tempfile.mkdtemp(), plugins=plugins,
                        accelerator="cpu", devices=1)
        tr.fit(lightning_model(a.hidden), dl)
        t0 = time.perf_counter()
        tr.save_checkpoint(a.path)
        out["seconds"] = time.perf_counter() - t0
    elif a.op == "pattern":
        out.update(load_pattern(a))
    elif a.op == "save":
        if a.sparse:
            # --rss-only: the tensors are 16 MiB views of one mmap of a sparse file (zeros), so
            # an 8 GiB state dict costs reclaimable page cache, not this process's memory;
            # torch.save writes their one storage (size_mib MiB) once.
            fd, sparse = tempfile.mkstemp(prefix="ckpt-sparse-", dir=a.sparse_dir)
            os.ftruncate(fd, a.size_mib * MIB)
            os.close(fd)
            flat = torch.from_file(sparse, shared=True, size=a.size_mib * MIB,
                                   dtype=torch.uint8)
            os.unlink(sparse)
            state = {f"layer{i:04d}.weight": flat[i * TENSOR_MIB * MIB:(i + 1) * TENSOR_MIB * MIB]
                     for i in range(a.size_mib // TENSOR_MIB)}
        else:
            state = make_state(a.size_mib, a.seed)
        t0 = time.perf_counter()
        if a.kind == "connector":
            from dataflux_pytorch import dataflux_checkpoint
            ck = dataflux_checkpoint.DatafluxCheckpoint(project_name="bench", bucket_name=BUCKET)
            w = ck.writer(a.path)
            torch.save(state, w)
            w.close()
        else:
            torch.save(state, a.path)
        out["seconds"] = time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        if a.kind == "connector":
            from dataflux_pytorch import dataflux_checkpoint
            ck = dataflux_checkpoint.DatafluxCheckpoint(project_name="bench", bucket_name=BUCKET)
            got = torch.load(ck.reader(a.path), weights_only=True)
        else:
            got = torch.load(a.path, weights_only=True)
        out["seconds"] = time.perf_counter() - t0
        # Compared one expected tensor at a time (the same generator sequence as make_state),
        # so an 8 GiB load needs the loaded state dict in memory and not a second copy.
        g = torch.Generator().manual_seed(a.seed)
        count = max(1, a.size_mib // TENSOR_MIB)
        bad = 0
        for i in range(count):
            want = torch.rand(TENSOR_MIB * MIB // 4, generator=g)
            key = f"layer{i:04d}.weight"
            if key not in got or not torch.equal(want, got[key]):
                bad += 1
            del want
        if bad or len(got) != count:
            out["error"] = f"{bad} tensors differ (of {count}), {len(got)} loaded"
    out["client_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    # One write (ranks of dcp4 share the pipe: a line must not be split by another's).
    sys.stdout.flush()
    os.write(1, ("RESULT " + json.dumps(out) + "\n").encode())


def load_pattern(a) -> dict:
    """One load of the files in directory a.path by pattern a.what; checks every tensor."""
    import torch
    d = Path(a.path)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if a.what == "dcp4":
        import torch.distributed as dist
        dist.init_process_group("gloo")
        dist.barrier()
    t0 = time.perf_counter()
    if a.what == "torch":
        got = torch.load(d / "model.pt", weights_only=True)
    elif a.what == "mmap":
        got = torch.load(d / "model.pt", mmap=True, weights_only=True)
        for t in got.values():
            t.sum()  # uses every tensor: faults its pages in
    elif a.what == "safetensors":
        from safetensors.torch import load_file
        got = load_file(d / "model.safetensors")
        # safetensors >= 0.4 maps the file and returns views: load_file itself reads little
        # (the first page of each tensor). The use is timed too, as for mmap.
        load_seconds = time.perf_counter() - t0
        for t in got.values():
            t.sum()
    else:
        import torch.distributed.checkpoint as dcp
        meta = dcp.FileSystemReader(str(d / "dcp")).read_metadata()
        got = {k: torch.empty(v.size, dtype=v.properties.dtype)
               for k, v in meta.state_dict_metadata.items()}
        dcp.load(got, checkpoint_id=str(d / "dcp"), no_dist=(world == 1))
    seconds = time.perf_counter() - t0
    want = make_state(a.size_mib, a.seed)
    bad = [k for k in want if k not in got or not torch.equal(want[k], got[k])]
    out = {"seconds": seconds}
    if a.what == "safetensors":
        out["load_seconds"] = load_seconds
    if bad or len(got) != len(want):
        out["error"] = f"{len(bad)} tensors differ (of {len(want)}), {len(got)} loaded"
    if a.what == "dcp4":
        import torch.distributed as dist
        dist.destroy_process_group()
    return out


def run_worker(args, emu, kind, what, op, path, size_mib=0, seed=0) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--kind", kind, "--what", what, "--op", op,
           *(["--sparse", "--sparse-dir", str(args.local_dir)] if args.rss_only else []),
           "--path", str(path), "--size-mib", str(size_mib), "--seed", str(seed),
           "--hidden", str(args.hidden)]
    env = dict(os.environ, STORAGE_EMULATOR_HOST=emu.url, GOOGLE_CLOUD_PROJECT="bench",
               **C.client_tls_env(emu))
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if what == "dcp4":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
               "--master-port", str(29500 + os.getpid() % 400), *cmd[1:]]
        env["OMP_NUM_THREADS"] = "1"
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    line = lines[0] if lines else None
    if p.returncode != 0 or line is None:
        raise RuntimeError(f"worker {kind} {what} {op} failed ({p.returncode}): "
                           f"{p.stderr[-2500:]}")
    r = json.loads(line[7:])
    if len(lines) > 1:  # ranks: the slowest one's time; any rank's error
        ranks = [json.loads(ln[7:]) for ln in lines]
        r["seconds"] = max(x["seconds"] for x in ranks)
        r.update({"error": x["error"] for x in ranks if "error" in x})
    if "error" in r:
        raise RuntimeError(f"{kind} {op}: {r['error']}")
    r["client_cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return r


# ---------------------------------------------------------------- contenders


def mount_cmd(kind, emu, args, mnt):
    if kind.startswith("fluxfs"):
        variant = kind[len("fluxfs"):].strip()  # "fluxfs --temp-dir=/dev/shm": extra flags
        return [str(C.fluxfs_binary()), "--endpoint", emu.url, "--anonymous",
                *C.fluxfs_tls_args(emu), *shlex.split(args.fluxfs_args), *shlex.split(variant), "-f",
                f"{BUCKET}/{PREFIX}", str(mnt)]
    return [str(C.gcsfuse_binary()), f"--custom-endpoint={C.gcsfuse_endpoint(emu)}",
            "--anonymous-access", "--foreground", "--implicit-dirs", f"--only-dir={PREFIX}",
            "--log-severity=warning", *GCSFUSE_FLAGS, BUCKET, str(mnt)]


class Sampler:
    """Samples a daemon's VmRSS every 50 ms (VmHWM already gives the peak; this adds the
    trace's maximum for cross-checking and catches a daemon that dies)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop_ev = pid, 0.0, threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop_ev.wait(0.05):
            if not Path(f"/proc/{self.pid}").exists():
                return
            # fluxfs: the supervisor and the serving process (C.daemon_tree).
            self.peak = max(self.peak, C.rss_kib(self.pid) / 1024.0)

    def stop(self):
        self.stop_ev.set()
        self.t.join()
        return self.peak


def one_op(args, emu, kind, what, op, name, size_mib, seed, mnt):
    """One save or load by one contender: returns the result dict with stats and usage."""
    C.reset_stats(emu)
    emu_cpu0 = C.cpu_seconds(emu.proc.pid)
    if kind.startswith("fluxfs") or kind == "gcsfuse":
        base, _, binary = kind.partition("@")  # "fluxfs@PATH": another build's binary
        cmd = mount_cmd(base, emu, args, mnt)
        if binary:
            cmd[0] = binary
        daemon = base.split()[0]
        with C.Mount(daemon, cmd, mnt, env=C.tls_env(emu),
                     log=args.logdir / f"{daemon}.log") as m:
            s = Sampler(m.proc.pid)
            r = run_worker(args, emu, daemon, what, op, mnt / name, size_mib, seed)
            r["rss_trace_peak_mib"] = s.stop()
            r.update(m.usage())
    elif kind == "connector":
        r = run_worker(args, emu, kind, what, op,
                       f"gs://{BUCKET}/{PREFIX}/{name}" if what == "lightning"
                       else f"{PREFIX}/{name}", size_mib, seed)
    else:
        r = run_worker(args, emu, kind, what, op, args.local_dir / name, size_mib, seed)
    r.update(C.request_classes(C.stats(emu)))
    r["emulator_cpu_s"] = C.cpu_seconds(emu.proc.pid) - emu_cpu0
    r["mib_s"] = size_mib / r["seconds"] if size_mib else None
    return r


def delete_object(emu, kind, args, name):
    if kind == "local":
        (args.local_dir / name).unlink(missing_ok=True)
        return
    url = f"{emu.url}/storage/v1/b/{BUCKET}/o/{(PREFIX + '/' + name).replace('/', '%2F')}"
    try:
        C.http_json("DELETE", url, emu=emu)
    except Exception:
        pass


def rss_only(args, emu, mnt):
    """fluxfs saves one large state dict; prints the daemon's VmHWM."""
    for size in args.sizes:
        name = f"rss-{size}.pt"
        r = one_op(args, emu, "fluxfs", "torch", "save", name, size, 7, mnt)
        print(f"fluxfs save {size} MiB: {r['seconds']:.1f} s, {r['mib_s']:,.0f} MiB/s, "
              f"daemon VmHWM {r['vmhwm_mib']:.1f} MiB (sampled peak "
              f"{r['rss_trace_peak_mib']:.1f}), CPU {r['cpu_s']:.2f} s, "
              f"{r['requests']} requests (A {r['class_a']}, B {r['class_b']}) {r['ops']}",
              flush=True)
        delete_object(emu, "fluxfs", args, name)
        C.write_results("checkpoint-rss", {"size_mib": size, "result": r})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    ap.add_argument("--what", default="torch", help=argparse.SUPPRESS)
    ap.add_argument("--op", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--size-mib", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--sparse", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sparse-dir", help=argparse.SUPPRESS)
    ap.add_argument("--hidden", type=int, default=1024,
                    help="Lightning model: two Linear(H, H) layers (default 1024: 8 MiB of "
                         "weights, 24 MiB checkpoint with Adam state)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes-mib", default="256,2048")
    ap.add_argument("--only", default="fluxfs,gcsfuse,connector,local")
    ap.add_argument("--no-lightning", action="store_true")
    ap.add_argument("--rss-only", action="store_true")
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--fluxfs-args", default="")
    ap.add_argument("--fluxfs-variant", action="append", default=[], dest="fluxfs_variants",
                    help="an extra fluxfs contender with these flags (repeatable), e.g. "
                         "--fluxfs-variant=--temp-dir=/dev/shm")
    ap.add_argument("--local-dir", type=Path, default=Path("/tmp"))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--tls", action="store_true",
                    help="HTTPS profile: the emulator serves TLS (throwaway CA)")
    ap.add_argument("--loads", default="",
                    help="load patterns instead of save/load: torch,mmap,safetensors,dcp1,dcp4")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.loads:
        return loads_main(args)
    args.sizes = [int(s) for s in args.sizes_mib.split(",") if s]
    args.only = [k for k in args.only.split(",") if k] + [f"fluxfs {v}"
                                                          for v in args.fluxfs_variants]
    args.logdir = C.RESULTS_DIR / "logs"
    args.logdir.mkdir(parents=True, exist_ok=True)
    args.local_dir = Path(tempfile.mkdtemp(prefix="ckpt-local-", dir=args.local_dir))

    emu_args = ["--latency-ms", str(args.latency_ms), "--populate", f"{BUCKET}/seed/:1:1K"]
    print(f"machine: {C.machine_line()}\nemulator ({'HTTPS' if args.tls else 'HTTP'}): "
          f"{C.emulator_binary()} {' '.join(emu_args)}", flush=True)
    emu = C.start_emulator(emu_args, tls=args.tls)
    mnt = Path(tempfile.mkdtemp(prefix="fluxfs-bench-mnt-"))
    results: dict[str, list] = {}
    try:
        if args.rss_only:
            return rss_only(args, emu, mnt)
        for k in range(args.runs):
            for size in args.sizes:
                for kind in args.only:
                    name = f"state-{size}-{k}.pt"
                    key = f"{size}|{kind}"
                    rec = {"loadavg_before": os.getloadavg()[0]}
                    try:
                        C.drop_caches()
                        rec["save"] = one_op(args, emu, kind, "torch", "save", name, size,
                                             k, mnt)
                        C.drop_caches()
                        rec["load"] = one_op(args, emu, kind, "torch", "load", name, size,
                                             k, mnt)
                    except Exception as e:  # one contender failing must not hide the others
                        rec["error"] = str(e)[-3000:]
                        C.fuse_unmount(mnt)
                    delete_object(emu, kind, args, name)
                    results.setdefault(key, []).append(rec)
                    if "error" in rec:
                        print(f"  run {k + 1} {size} MiB {kind}: ERROR {rec['error']}",
                              flush=True)
                    else:
                        s, ld = rec["save"], rec["load"]
                        print(f"  run {k + 1} {size} MiB {kind}: save {s['seconds']:.2f} s "
                              f"({s['mib_s']:,.0f} MiB/s, A {s['class_a']}, B {s['class_b']}, "
                              f"RSS {C.fmt(s.get('vmhwm_mib'), 1)}), load {ld['seconds']:.2f} s "
                              f"({ld['mib_s']:,.0f} MiB/s, A {ld['class_a']}, "
                              f"B {ld['class_b']})", flush=True)
            if not args.no_lightning:
                for kind in args.only:
                    name = f"lightning-{k}.ckpt"
                    try:
                        r = one_op(args, emu, kind, "lightning", "save", name, 0, k, mnt)
                        results.setdefault(f"lightning|{kind}", []).append({"save": r})
                        print(f"  run {k + 1} lightning {kind}: {r['seconds']:.3f} s, "
                              f"A {r['class_a']}, B {r['class_b']}", flush=True)
                    except Exception as e:
                        results.setdefault(f"lightning|{kind}", []).append(
                            {"error": str(e)[-3000:]})
                        print(f"  run {k + 1} lightning {kind}: ERROR {str(e)[-1500:]}",
                              flush=True)
                        C.fuse_unmount(mnt)
                    delete_object(emu, kind, args, name)
    finally:
        emu.stop()
        emu.close()
        C.fuse_unmount(mnt)
        for p in (mnt, args.local_dir):
            try:
                p.rmdir()
            except OSError:
                pass
    report(args, results, emu_args)


def upload_file(emu, local: Path, name: str):
    url = (f"{emu.url}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&"
           f"name={(PREFIX + '/' + name).replace('/', '%2F')}")
    subprocess.run(["curl", "-sf", "-X", "POST", "-T", str(local), url], check=True,
                   stdout=subprocess.DEVNULL)


def prepare_loads(emu, args, size, seed) -> int:
    """Writes the state dict of size MiB in each format locally, uploads it under
    loads-SIZE/; returns the bytes of the files a load reads (per pattern family)."""
    import torch
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import save_file
    state = make_state(size, seed)
    d = Path(tempfile.mkdtemp(prefix=f"loads-{size}-", dir=args.local_dir))
    torch.save(state, d / "model.pt")
    save_file(state, d / "model.safetensors")
    dcp.save(state, checkpoint_id=str(d / "dcp"), no_dist=True)
    del state
    sizes = {"model.pt": (d / "model.pt").stat().st_size,
             "model.safetensors": (d / "model.safetensors").stat().st_size, "dcp": 0}
    upload_file(emu, d / "model.pt", f"loads-{size}/model.pt")
    upload_file(emu, d / "model.safetensors", f"loads-{size}/model.safetensors")
    for f in sorted((d / "dcp").iterdir()):
        upload_file(emu, f, f"loads-{size}/dcp/{f.name}")
        sizes["dcp"] += f.stat().st_size
    subprocess.run(["rm", "-rf", str(d)], check=True)
    return sizes


def loads_main(args):
    patterns = [p for p in args.loads.split(",") if p]
    sizes = [int(s) for s in args.sizes_mib.split(",") if s]
    # "fluxfs@PATH": fluxfs from another build (e.g. the one before a change), side by side.
    kinds = [k for k in args.only.split(",") if k in ("fluxfs", "gcsfuse") or
             k.startswith("fluxfs@")]
    if "gcsfuse" in kinds and C.gcsfuse_binary() is None:
        print("gcsfuse: not built (scripts/setup --bench); skipped")
        kinds.remove("gcsfuse")
    args.logdir = C.RESULTS_DIR / "logs"
    args.logdir.mkdir(parents=True, exist_ok=True)
    args.local_dir = Path(tempfile.mkdtemp(prefix="ckpt-local-", dir=args.local_dir))
    emu_args = ["--latency-ms", str(args.latency_ms), "--populate", f"{BUCKET}/seed/:1:1K"]
    print(f"machine: {C.machine_line()}\nemulator: {C.emulator_binary()} {' '.join(emu_args)}",
          flush=True)
    emu = C.start_emulator(emu_args)
    mnt = Path(tempfile.mkdtemp(prefix="fluxfs-bench-mnt-"))
    results: dict[str, list] = {}
    try:
        for size in sizes:
            files = prepare_loads(emu, args, size, 11)
            for k in range(args.runs):
                for pattern in patterns:
                    total = files["model.pt" if pattern in ("torch", "mmap") else
                                  "model.safetensors" if pattern == "safetensors" else "dcp"]
                    for kind in kinds:
                        rec = {"loadavg_before": os.getloadavg()[0]}
                        try:
                            C.drop_caches()
                            cmd = mount_cmd(kind.split("@")[0], emu, args, mnt)
                            if "@" in kind:
                                cmd[0] = kind.split("@", 1)[1]
                            daemon = kind.split("@")[0]
                            with C.Mount(daemon, cmd, mnt,
                                         log=args.logdir / f"{daemon}.log") as m:
                                C.reset_stats(emu)
                                r = run_worker(args, emu, daemon, pattern, "pattern",
                                               mnt / f"loads-{size}", size, 11)
                                r.update(m.usage())
                            r.update(C.request_classes(C.stats(emu)))
                            r["fetched_ratio"] = r["bytes_out"] / total
                            rec.update(r)
                        except Exception as e:
                            rec["error"] = str(e)[-3000:]
                            C.fuse_unmount(mnt)
                        results.setdefault(f"{size}|{pattern}|{kind}", []).append(rec)
                        if "error" in rec:
                            print(f"  run {k + 1} {size} MiB {pattern} {kind}: ERROR "
                                  f"{rec['error']}", flush=True)
                        else:
                            print(f"  run {k + 1} {size} MiB {pattern} {kind}: "
                                  f"{rec['seconds']:.2f} s, fetched {rec['fetched_ratio']:.2f}x "
                                  f"the files, {rec['requests']} requests", flush=True)
    finally:
        emu.stop()
        emu.close()
        C.fuse_unmount(mnt)
        for p in (mnt, args.local_dir):
            try:
                p.rmdir()
            except OSError:
                pass

    def med(key, field):
        return C.median([r.get(field) for r in results.get(key, []) if "error" not in r])

    rows = []
    for size in sizes:
        for pattern in patterns:
            base = med(f"{size}|{pattern}|fluxfs", "seconds")
            for kind in kinds:
                key = f"{size}|{pattern}|{kind}"
                s = med(key, "seconds")
                if s is None:
                    rows.append([f"{size} MiB", pattern, kind, "failed", "", "", ""])
                    continue
                rows.append([f"{size} MiB", pattern, kind, f"{s:.2f}",
                             f"{s / base:.2f}x" if base else "n/a",
                             f"{med(key, 'fetched_ratio'):.2f}x",
                             C.fmt(med(key, "requests"), 0)])
    loads = [r["loadavg_before"] for rs in results.values() for r in rs]
    print()
    print(f"Checkpoint loads, emulator --latency-ms {args.latency_ms}, medians of {args.runs} "
          f"runs ({time.strftime('%Y-%m-%d %H:%M')}, {C.machine_line()}; 1-min load average "
          f"{min(loads, default=0):.1f} to {max(loads, default=0):.1f}: seconds are taken under "
          f"that load, bytes fetched are not affected by it)")
    print(C.table(["size", "load", "contender", "seconds", "vs fluxfs", "bytes fetched / file",
                   "requests"], rows))
    path = C.write_results("checkpoint-loads", {"args": {k: str(v) for k, v in vars(args).items()},
                                                "emulator_args": emu_args, "results": results,
                                                "table": rows})
    print(f"raw: {path}")


def report(args, results, emu_args):
    def med(key, op, field):
        return C.median([r[op].get(field) for r in results.get(key, [])
                         if "error" not in r and op in r])

    rows = []
    for size in args.sizes:
        base = {op: med(f"{size}|fluxfs", op, "seconds") for op in ("save", "load")}
        for kind in args.only:
            key = f"{size}|{kind}"
            if med(key, "save", "seconds") is None:
                rows.append([f"{size} MiB", kind, "failed"] + [""] * 11)
                continue
            row = [f"{size} MiB", kind]
            for op in ("save", "load"):
                s = med(key, op, "seconds")
                row += [f"{s:.2f}", f"{size / s:,.0f}",
                        f"{s / base[op]:.2f}x" if base[op] else "n/a",
                        f"{C.fmt(med(key, op, 'class_a'), 0)} / {C.fmt(med(key, op, 'class_b'), 0)}"]
            rss = (C.fmt(med(key, "save", "vmhwm_mib"), 0)
                   if kind.startswith("fluxfs") or kind == "gcsfuse"
                   else C.fmt(med(key, "save", "client_maxrss_mib"), 0) + " (client)"
                   if kind == "connector" else "")
            row += [rss, C.fmt(med(key, "save", "cpu_s"), 2), C.fmt(med(key, "load", "cpu_s"), 2),
                    C.fmt(med(key, "save", "emulator_cpu_s"), 2)]
            rows.append(row)
    print()
    profile = "HTTPS" if args.tls else "HTTP"
    print(f"torch.save / torch.load over {profile}, emulator --latency-ms {args.latency_ms}, "
          f"medians of "
          f"{args.runs} runs ({time.strftime('%Y-%m-%d %H:%M')}, {C.machine_line()})")
    print(C.table(["size", "contender", "save s", "save MiB/s", "save vs fluxfs",
                   "save A / B", "load s", "load MiB/s", "load vs fluxfs", "load A / B",
                   "save RSS MiB", "save CPU s", "load CPU s", "emu CPU s (save)"], rows))
    lrows = []
    lbase = med("lightning|fluxfs", "save", "seconds")
    for kind in args.only:
        s = med(f"lightning|{kind}", "save", "seconds")
        if s is None:
            if f"lightning|{kind}" in results:
                lrows.append([kind, "failed", "", ""])
            continue
        lrows.append([kind, f"{s:.3f}", f"{s / lbase:.2f}x" if lbase else "n/a",
                      f"{C.fmt(med(f'lightning|{kind}', 'save', 'class_a'), 0)} / "
                      f"{C.fmt(med(f'lightning|{kind}', 'save', 'class_b'), 0)}"])
    if lrows:
        print(f"\nLightning Trainer.save_checkpoint (two Linear({args.hidden}, {args.hidden}) + "
              "Adam state)")
        print(C.table(["contender", "seconds", "vs fluxfs", "A / B"], lrows))
    loads = [r["loadavg_before"] for rs in results.values() for r in rs if "loadavg_before" in r]
    if loads:
        print(f"1-min load average before each contender: {min(loads):.1f} to {max(loads):.1f}")
    path = C.write_results("checkpoint", {"args": {k: str(v) for k, v in vars(args).items()},
                                          "emulator_args": emu_args, "results": results,
                                          "table": rows, "lightning_table": lrows})
    print(f"raw: {path}")


if __name__ == "__main__":
    main()
