#!/usr/bin/env python3
"""The daemon's layers, checked (issue 25, item 1; docs/development.md "Layers").

    util <- http <- auth <- gcs <- core <- io <- fs <- main      (arrows point down only)

Two checks, both run by `meson test layers`:
  includes  every src/LAYER file includes only headers of its own layer or a lower one
            (HEADER_LAYER below assigns each include/fluxfs header; a header missing from it
            fails, so a new one must be placed);
  symbols   no layer's static library (build/src/libfluxfs-LAYER.a, one per layer) has an
            undefined symbol that a higher layer's library defines: a call upward does not
            pass, even through a local declaration that bypasses the headers.
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
    "timens": "util", "tsan": "util", "invariant": "util",
    "http": "http",
    "auth": "auth",
    "gcs": "gcs",
    "dircache": "core", "inode": "core", "key_range": "core", "listing": "core",
    "metacache": "core", "name_map": "core", "namespace": "core",
    "compose_plan": "io", "content_cache": "io", "cost_model": "io", "membudget": "io",
    "miss_batch": "io", "prefetch": "io", "readahead": "io", "reader": "io", "writer": "io",
    "aimd": "io", "temp_reaper": "io",
    "fs": "fs",
    "options": "main",
}

# (file, header): why it is allowed for now.
ALLOWED = {
    ("src/fs/fs-internal.h", "options"):
        "the fs layer reads the mount's struct fluxfs_options (a data type, no call); issue 25 "
        "item 1 gives fs a configuration struct of its own",
}

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


def main() -> int:
    root = Path(sys.argv[1])
    libs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    problems = check_includes(root)
    if libs:
        problems += check_symbols(libs)
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s); {len(libs)} libraries, "
          f"{len(ALLOWED)} allowed exception(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
