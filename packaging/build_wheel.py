#!/usr/bin/env python3
"""Builds the wheel of the Python package (python/, module fluxfs_hints) with the standard
library only, so that scripts/package works offline whatever setuptools the host has; the
wheel then installs with `pip install --no-index fluxfs_hints-VERSION-py3-none-any.whl`.

Usage: build_wheel.py PYTHON_DIR OUT_DIR   (prints the wheel's path)

The name, version, summary and readme come from pyproject.toml and fluxfs_hints.__version__
(the project's one version, meson.build's, checked by test_python_package.py)."""

import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

DIST = "fluxfs_hints"
# A fixed timestamp: the same sources give the same wheel.
STAMP = (1980, 1, 1, 0, 0, 0)


def project_field(pyproject: str, key: str) -> str:
    match = re.search(rf'^{key}\s*=\s*"([^"]*)"', pyproject, re.M)
    if not match:
        raise SystemExit(f"build_wheel.py: no {key} in pyproject.toml")
    return match.group(1)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    source, out = Path(argv[1]), Path(argv[2])
    pyproject = (source / "pyproject.toml").read_text()
    init = (source / "fluxfs_hints" / "__init__.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    name = project_field(pyproject, "name")
    summary = project_field(pyproject, "description")
    requires_python = project_field(pyproject, "requires-python")
    readme = (source / "README.md").read_text()
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                f"Summary: {summary}\nRequires-Python: {requires_python}\n"
                "Provides-Extra: torch\nRequires-Dist: torch; extra == \"torch\"\n"
                "Provides-Extra: lightning\nRequires-Dist: lightning; extra == \"lightning\"\n"
                "Description-Content-Type: text/markdown\n\n" + readme)
    wheel_meta = ("Wheel-Version: 1.0\nGenerator: fluxfs packaging/build_wheel.py\n"
                  "Root-Is-Purelib: true\nTag: py3-none-any\n")
    info = f"{DIST}-{version}.dist-info"
    files = [(f"fluxfs_hints/{p.name}", p.read_bytes())
             for p in sorted((source / "fluxfs_hints").glob("*.py"))]
    files += [(f"{info}/METADATA", metadata.encode()), (f"{info}/WHEEL", wheel_meta.encode()),
              (f"{info}/top_level.txt", b"fluxfs_hints\n")]
    record = "\n".join(record_line(n, d) for n, d in files) + f"\n{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{DIST}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file_name, data in files:
            entry = zipfile.ZipInfo(file_name, STAMP)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    print(wheel)


if __name__ == "__main__":
    main(sys.argv)
