#!/usr/bin/env python3
"""The daemon's layers, checked (issue 25, item 1; docs/development.md "Layers").

    util <- http <- auth <- gcs <- core <- io <- fs <- main      (arrows point down only)

Three checks, all run by `meson test layers`:
  includes  every src/LAYER file includes only headers of its own layer or a lower one
            (HEADER_LAYER below assigns each include/fluxfs header; a header missing from it
            fails, so a new one must be placed);
  symbols   no layer's static library (build/src/libfluxfs-LAYER.a, one per layer) has an
            undefined symbol that a higher layer's library defines: a call upward does not
            pass, even through a local declaration that bypasses the headers.
  fs files  inside src/fs (issue 25, item 2), no cycle: each object of libfluxfs-fs.a calls
            only files of lower rows of FS_LEVELS (the table at the top of
            src/fs/fs-internal.h says the same in prose); fs-writes.h is included by the write
            path's two files only; libfuse's fuse_reply_err/fuse_reply_entry are called by
            fs_base.c only and no fs file #defines a fuse_* name.
ALLOWED lists the exceptions that exist, each with its reason; adding one is a decision.

Usage: tests/check_layers.py SOURCE_ROOT [LIB_LAYER=PATH.a ...]
"""
import re
import subprocess
import sys
from pathlib import Path

ORDER = ["util", "http", "auth", "gcs", "core", "io", "fs", "main"]

HEADER_LAYER = {
    "base64": "util", "crc32c": "util", "json_depth": "util", "json_string": "util",
    "log": "util", "metrics": "util", "metrics_server": "util", "mime": "util",
    "timens": "util", "tsan": "util", "invariant": "util", "wait_group": "util", "fd_pass": "util",
    "http": "http",
    "auth": "auth",
    "gcs": "gcs",
    "dircache": "core", "inode": "core", "key_range": "core", "listing": "core",
    "metacache": "core", "name_map": "core", "namespace": "core",
    "compose_plan": "io", "content_cache": "io", "cost_model": "io", "membudget": "io",
    "miss_batch": "io", "prefetch": "io", "readahead": "io", "reader": "io", "writer": "io",
    "aimd": "io", "temp_reaper": "io", "upload": "io",
    "fs": "fs",
    "options": "main",
}

# (file, header): why it is allowed for now.
# None today: the fs layer reads its own struct fs_config (include/fluxfs/fs.h), which main
# fills from the command line's options (src/main/fs_config.c).
ALLOWED: dict[tuple[str, str], str] = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"fluxfs/([A-Za-z0-9_]+)\.h"', re.M)


def check_includes(root: Path) -> list[str]:
    problems = []
    for header in sorted((root / "include" / "fluxfs").glob("*.h")):
        if header.stem not in HEADER_LAYER:
            problems.append(f"include/fluxfs/{header.name}: no layer assigned in "
                            f"tests/check_layers.py HEADER_LAYER")
    for layer in ORDER:
        for source in sorted((root / "src" / layer).glob("*.[ch]")):
            rel = source.relative_to(root).as_posix()
            for header in INCLUDE.findall(source.read_text(errors="replace")):
                target = HEADER_LAYER.get(header)
                if target is None:
                    continue  # reported above
                if ORDER.index(target) > ORDER.index(layer) and (rel, header) not in ALLOWED:
                    problems.append(f"{rel} ({layer}) includes fluxfs/{header}.h of the higher "
                                    f"layer {target}")
    return problems


def symbols(lib: str, *flags: str) -> set[str]:
    out = subprocess.run(["nm", "-g", *flags, lib], capture_output=True, text=True, check=True)
    names = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if not parts or line.endswith(":"):
            continue
        if "--defined-only" in flags:
            if len(parts) == 3 and parts[1] in "TDBRVWGS":
                names.add(parts[2])
        else:
            names.add(parts[-1])
    return names


def check_symbols(libs: dict[str, str]) -> list[str]:
    problems = []
    defined = {layer: symbols(path, "--defined-only") for layer, path in libs.items()}
    for layer, path in libs.items():
        wanted = symbols(path, "--undefined-only")
        for higher in ORDER[ORDER.index(layer) + 1:]:
            for name in sorted(wanted & defined.get(higher, set())):
                problems.append(f"libfluxfs-{layer}.a calls {name}, defined by the higher "
                                f"layer {higher}")
    return problems


# src/fs files, lowest row first: a file may call files of lower rows only (not its own row).
FS_LEVELS = [
    ["rename_record", "hint_lines", "crash_state"],
    ["fs_notify", "fs_rename", "fs_gate"],
    ["fs_writes"],
    ["fs_base"],
    ["fs_dir", "fs_noopen"],
    ["fs_write"],
    ["fs_ops"],
    ["fs_status", "fs_handover"],
    ["fs_control", "fs_metrics"],
    ["fs_crash"],
    ["fs_table"],
    ["fs"],
]
FS_PRIVATE_HEADERS = {"fs-writes.h": {"fs_write", "fs_writes"}}
FS_REPLY_CALLERS = {"fs_base"}

LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_.-]+\.h)"', re.M)
FUSE_DEFINE = re.compile(r'^\s*#\s*define\s+fuse_', re.M)
FUSE_REPLY_CALL = re.compile(r'\bfuse_reply_(err|entry)\s*\(')


def fs_objects(lib: str) -> dict[str, tuple[set[str], set[str]]]:
    """The archive's members by source stem (meson names them fs_STEM.c.o): (defined, undefined)."""
    out = subprocess.run(["nm", "-g", lib], capture_output=True, text=True, check=True).stdout
    members: dict[str, tuple[set[str], set[str]]] = {}
    current = None
    for line in out.splitlines():
        if line.endswith(":"):
            name = line[:-1].rsplit("/", 1)[-1]
            stem = name.removesuffix(".c.o").removesuffix(".o")
            current = members.setdefault(stem.removeprefix("fs_") if stem.startswith("fs_")
                                         else stem, (set(), set()))
            continue
        parts = line.split()
        if current is None or not parts:
            continue
        if len(parts) == 2 and parts[0] == "U":
            current[1].add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWGS":
            current[0].add(parts[2])
    return members


def check_fs_files(root: Path, lib: str | None) -> list[str]:
    problems = []
    row = {name: i for i, names in enumerate(FS_LEVELS) for name in names}
    fs_dir = root / "src" / "fs"
    for source in sorted(fs_dir.glob("*.[ch]")):
        stem, rel = source.stem, source.relative_to(root).as_posix()
        text = source.read_text(errors="replace")
        if source.suffix == ".c" and stem not in row:
            problems.append(f"{rel}: no row in tests/check_layers.py FS_LEVELS")
        for header in LOCAL_INCLUDE.findall(text):
            allowed = FS_PRIVATE_HEADERS.get(header)
            if allowed is not None and stem not in allowed and source.name != header:
                problems.append(f"{rel} includes {header}, private to {sorted(allowed)}")
        if FUSE_DEFINE.search(text):
            problems.append(f"{rel} #defines a libfuse name (call fluxfs's own, e.g. fs_reply_err)")
        if source.suffix == ".c" and stem not in FS_REPLY_CALLERS and FUSE_REPLY_CALL.search(text):
            problems.append(f"{rel} calls libfuse's fuse_reply_err/entry (use fs_reply_err/entry)")
    if lib:
        members = fs_objects(lib)
        owner = {sym: stem for stem, (defined, _) in members.items() for sym in defined}
        for stem, (_, wanted) in sorted(members.items()):
            if stem not in row:
                problems.append(f"libfluxfs-fs.a member {stem}: no row in FS_LEVELS")
                continue
            for sym in sorted(wanted):
                callee = owner.get(sym)
                if callee is None or callee == stem or callee not in row:
                    continue
                if row[callee] >= row[stem]:
                    problems.append(f"src/fs/{stem}.c calls {sym} of {callee}.c, not a lower row "
                                    f"of FS_LEVELS")
    return problems


def main() -> int:
    root = Path(sys.argv[1])
    libs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    problems = check_includes(root)
    if libs:
        problems += check_symbols(libs)
    problems += check_fs_files(root, libs.get("fs"))
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s); {len(libs)} libraries, "
          f"{len(ALLOWED)} allowed exception(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
