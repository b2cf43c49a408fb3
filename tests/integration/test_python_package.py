"""The Python package (python/fluxfs_hints, issue 22): one version with the daemon (meson.build's
project version is the one place; pyproject reads fluxfs_hints.__version__), and a clear
message when the Lightning callback is imported without Lightning."""

import re
import subprocess
import sys

from tests.integration.mount import find_fluxfs_binary
from tests.lib.emulator import REPO_ROOT

PYTHON_DIR = REPO_ROOT / "python"


def meson_version():
    text = (REPO_ROOT / "meson.build").read_text()
    return re.search(r"^\s*version:\s*'([^']+)'", text, re.M).group(1)


def test_package_and_daemon_have_one_version():
    version = meson_version()
    daemon = subprocess.run([str(find_fluxfs_binary()), "--version"], capture_output=True,
                            text=True, check=True).stdout
    assert daemon.startswith(f"fluxfs {version} "), daemon
    package = subprocess.run([sys.executable, "-c",
                              "import fluxfs_hints; print(fluxfs_hints.__version__)"],
                             cwd=PYTHON_DIR, capture_output=True, text=True, check=True).stdout
    assert package.strip() == version
    pyproject = (PYTHON_DIR / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = {attr = "fluxfs_hints.__version__"}' in pyproject
    assert not re.search(r"^version\s*=\s*\"", pyproject, re.M)  # no second copy


def test_lightning_callback_without_lightning_names_both_packages():
    # Both import names made unimportable, whatever this interpreter has installed.
    code = ("import sys; sys.modules['lightning'] = None; sys.modules['pytorch_lightning'] = None\n"
            "import fluxfs_hints.lightning")
    result = subprocess.run([sys.executable, "-c", code], cwd=PYTHON_DIR, capture_output=True,
                            text=True)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: fluxfs_hints.lightning needs Lightning"), last
    assert "pip install lightning" in last and "pytorch_lightning" in last, last


def test_relative_hints_resolve_against_the_working_directory(tmp_path):
    """Hints given as relative paths name files relative to the caller's working directory, as
    open() does; hints that resolve to nothing on the mount warn once (issue 22). The control
    file is stood in by a plain file: write_hints only opens and writes it."""
    root = tmp_path / "mnt"
    (root / ".fluxfs").mkdir(parents=True)
    (root / ".fluxfs" / "prefetch").write_bytes(b"")
    (root / "train").mkdir()
    code = f"""
import os, warnings
import fluxfs_hints
os.chdir({str(root / 'train')!r})
n = fluxfs_hints.write_hints({str(root)!r}, ["a.jpg", "../val/b.jpg", {str(root / 'c.jpg')!r},
                                             "/not/on/the/mount"])
print(n)
print(open({str(root / '.fluxfs' / 'prefetch')!r}).read().split())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        fluxfs_hints.write_hints({str(root)!r}, ["../../elsewhere/x.jpg"])
print(len(caught), str(caught[0].message) if caught else "")
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=PYTHON_DIR, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    count, lines, warned = result.stdout.splitlines()
    assert count == "3"
    assert lines == str(["train/a.jpg", "val/b.jpg", "c.jpg"])
    assert warned.startswith("1 ") and "resolve to nothing" in warned, warned
