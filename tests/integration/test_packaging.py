"""The systemd unit (issue 22): what `systemctl start fluxfs@INSTANCE` runs, worked out the way
systemd does it, without systemd: the unit's specifiers (%i, %I, %%), then Environment= and
EnvironmentFile= (later files override earlier settings, a leading "-" means optional), then
ExecStart's words with ${VAR} kept as one word and a lone $VAR split at whitespace (see
systemd.unit(5) "Specifiers" and systemd.service(5) "Command lines").

%I unescapes the instance name (a "-" becomes "/"), so `fluxfs@my-bucket` with %I mounted
bucket "my", prefix "bucket". The unit uses %i: the instance is the bucket as written, and
/etc/fluxfs/INSTANCE.conf may name a prefix, another mountpoint and options of its own."""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.mount import find_fluxfs_binary
from tests.lib.emulator import REPO_ROOT


def built_unit() -> str:
    build = find_fluxfs_binary().parent.parent.parent
    return (build / "packaging" / "fluxfs@.service").read_text()


def unescape_instance(name: str) -> str:
    """systemd's unit-name unescaping (%I): "-" is "/", "\\xNN" is the byte NN."""
    if shutil.which("systemd-escape"):
        return subprocess.run(["systemd-escape", "--unescape", "--", name], check=True,
                              capture_output=True, text=True).stdout.rstrip("\n")
    out = name.replace("-", "/")
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), out)


def expand_specifiers(text: str, instance: str) -> str:
    table = {"i": instance, "I": unescape_instance(instance), "%": "%", "n": f"fluxfs@{instance}"}
    return re.sub(r"%(.)", lambda m: table[m.group(1)], text)


def service_settings(unit: str):
    """The [Service] section as (key, value) pairs, in order."""
    section, pairs = None, []
    for raw in unit.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            pairs.append((key.strip(), value.strip()))
    return pairs


def read_environment_file(path: Path) -> dict:
    values = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, _, value = line.partition("=")
        words = shlex.split(value)
        values[key.strip()] = " ".join(words)
    return values


def command_argv(command: str, env: dict):
    command = command.lstrip("-@:+!")
    argv = []
    for word in shlex.split(command):
        lone = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if lone:
            argv += env.get(lone.group(1), "").split()
            continue
        argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                           lambda m: env.get(m.group(1), ""), word))
    return argv


def simulate(instance: str, etc: Path):
    """(ExecStartPre argvs, ExecStart argv) of fluxfs@INSTANCE, with /etc mapped to etc."""
    unit = expand_specifiers(built_unit(), instance)
    env, pre, start = {}, [], None
    settings = service_settings(unit)
    # Environment= first, then every EnvironmentFile= in order (they override Environment=).
    for key, value in settings:
        if key == "Environment":
            for word in shlex.split(value):
                name, _, val = word.partition("=")
                env[name] = val
    for key, value in settings:
        if key == "EnvironmentFile":
            optional = value.startswith("-")
            path = Path(value.lstrip("-"))
            assert path.is_absolute(), value
            local = etc / path.relative_to("/etc") if path.is_relative_to("/etc") else path
            if local.exists():
                env.update(read_environment_file(local))
            else:
                assert optional, f"{value} is required but missing"
    for key, value in settings:
        if key == "ExecStartPre":
            pre.append(command_argv(value, env))
        elif key == "ExecStart":
            start = command_argv(value, env)
    return pre, start


def test_instance_name_with_dashes_is_the_bucket(tmp_path):
    pre, start = simulate("my-bucket", tmp_path)
    assert start[0].endswith("/fluxfs")
    assert start[-2:] == ["my-bucket", "/mnt/my-bucket"], start
    assert "--foreground" in start
    assert ["/bin/mkdir", "-p", "/mnt/my-bucket"] in pre, pre


def test_shared_and_per_instance_options_files(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "fluxfs").write_text('FLUXFS_OPTS="--stat-ttl 5 --log-level info"\n')
    pre, start = simulate("my-bucket", tmp_path)
    assert start[-6:] == ["--stat-ttl", "5", "--log-level", "info", "my-bucket",
                          "/mnt/my-bucket"], start
    # One instance names a prefix, a mountpoint and options of its own; the shared options stay.
    (tmp_path / "fluxfs").mkdir()
    (tmp_path / "fluxfs" / "runs-2024.conf").write_text(
        "# gs://runs-2024/exp-1/ckpt on /mnt/ckpt\n"
        "FLUXFS_SOURCE=runs-2024/exp-1/ckpt\n"
        "FLUXFS_MOUNTPOINT=/mnt/ckpt\n"
        'FLUXFS_INSTANCE_OPTS="--read-only --list-ttl 10"\n')
    pre, start = simulate("runs-2024", tmp_path)
    assert start[-9:] == ["--stat-ttl", "5", "--log-level", "info", "--read-only",
                          "--list-ttl", "10", "runs-2024/exp-1/ckpt", "/mnt/ckpt"], start
    assert ["/bin/mkdir", "-p", "/mnt/ckpt"] in pre, pre
    # Other instances do not see that file.
    _, other = simulate("my-bucket", tmp_path)
    assert other[-2:] == ["my-bucket", "/mnt/my-bucket"]


def test_unit_cleans_a_stale_mount_before_starting(tmp_path):
    _, start = simulate("my-bucket", tmp_path)
    assert "--unmount-stale" in start, start


def built_deb():
    debs = sorted((REPO_ROOT / "build" / "pkg").glob("fluxfs_*.deb"))
    return debs[-1] if debs else None


@pytest.mark.skipif(built_deb() is None or not shutil.which("dpkg-deb"),
                    reason="no build/pkg/*.deb: scripts/package (scripts/test runs it) builds it")
def test_deb_has_md5sums_and_the_logrotate_conffile(tmp_path):
    import hashlib

    root = tmp_path / "deb"
    subprocess.run(["dpkg-deb", "-R", str(built_deb()), str(root)], check=True)
    listed = {}
    for line in (root / "DEBIAN" / "md5sums").read_text().splitlines():
        digest, path = line.split("  ", 1)
        listed[path] = digest
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
             and p.relative_to(root).parts[0] not in ("DEBIAN", "etc")]
    assert files and sorted(listed) == sorted(str(p.relative_to(root)) for p in files)
    for path in files:
        assert listed[str(path.relative_to(root))] == hashlib.md5(path.read_bytes()).hexdigest()
    assert "usr/bin/fluxfs" in listed
    # The logrotate file is the administrator's to edit: a conffile, not in md5sums.
    assert (root / "etc" / "logrotate.d" / "fluxfs").is_file()
    assert (root / "DEBIAN" / "conffiles").read_text().split() == ["/etc/logrotate.d/fluxfs"]


def test_logrotate_file_rotates_fluxfs_logs_and_sends_sighup():
    text = (REPO_ROOT / "packaging" / "logrotate.conf").read_text()
    body = text[text.index("/var/log/fluxfs/*.log {"):]
    assert "missingok" in body and "sharedscripts" in body
    postrotate = body[body.index("postrotate"):body.index("endscript")]
    assert "-HUP" in postrotate and "-x fluxfs" in postrotate  # the exact process name only
    if shutil.which("logrotate"):
        subprocess.run(["logrotate", "-d", str(REPO_ROOT / "packaging" / "logrotate.conf")],
                       check=True, capture_output=True)


def test_wheel_installs_offline_into_a_fresh_venv(tmp_path):
    """scripts/package ships the Python package as a wheel (issue 22, item 15), built with the
    standard library (packaging/build_wheel.py): pip installs it with --no-index into a new
    venv, with no setuptools needed, and it imports with the project's version."""
    import re
    import sys

    script = (REPO_ROOT / "scripts" / "package").read_text()
    assert "packaging/build_wheel.py python" in script
    out = tmp_path / "dist"
    built = subprocess.run([sys.executable, str(REPO_ROOT / "packaging" / "build_wheel.py"),
                            str(REPO_ROOT / "python"), str(out)], capture_output=True,
                           text=True, check=True).stdout.strip()
    version = re.search(r"^\s*version:\s*'([^']+)'",
                        (REPO_ROOT / "meson.build").read_text(), re.M).group(1)
    wheel = out / f"fluxfs_hints-{version}-py3-none-any.whl"
    assert built == str(wheel) and wheel.is_file()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                             "--no-index", str(wheel)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    shown = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import fluxfs_hints, os; print(fluxfs_hints.__version__); "
                            "print(os.path.dirname(fluxfs_hints.__file__))"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    got_version, location = shown.split()
    assert got_version == version
    assert location.startswith(str(venv)), location
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "-f",
                             "fluxfs-hints"], capture_output=True, text=True, check=True).stdout
    assert f"Version: {version}" in listed and "fluxfs_hints/lightning.py" in listed
