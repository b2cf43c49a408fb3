"""The namespace through the mount: ls, stat and find over nested trees; implicit and placeholder
directories; unusual names; names that cannot be file names (the rules of
include/fluxfs/name_map.h: hidden, directory wins over file, placeholders are not files); mount
prefixes; owners and modes from the options."""

import os
import stat
import subprocess

import pytest

from tests.integration.mount import Mount

pytestmark = pytest.mark.emulator_only

LONG_SEGMENT = "L" * 256

# Object name -> content. Every visible file is listed in VISIBLE_FILES below.
OBJECTS = {
    "top.txt": b"top",
    "a/file3": b"three",
    "a/b/file2": b"two!",
    "a/b/c/file1.txt": b"one..",
    "deep/1/2/3/4/5/leaf": b"leaf",
    "implicit/x/y": b"implicit",
    "ph/": b"",                      # placeholder with a child
    "ph/child": b"child",
    "empty-dir/": b"",               # placeholder, nothing below
    "odd/sp ace.txt": b"space",
    "odd/per%cent": b"percent",
    "odd/ha#sh": b"hash",
    "odd/que?ry": b"query",
    "odd/pl+us": b"plus",
    "odd/ampers&and=eq;semi": b"amp",
    "odd/\u65e5\u672c\u8a9e.txt": b"unicode",
    "odd/emoji\U0001F642": b"emoji",
    "odd/caf\u00e9": b"nfc",
    "odd/" + "n" * 255: b"longest allowed segment",
    # Not representable: hidden (rule 1).
    "mixed/ok": b"ok",
    "mixed//empty-segment": b"x",
    "mixed/./dot": b"x",
    "mixed/../dotdot": b"x",
    "mixed/" + LONG_SEGMENT: b"x",
    "mixed/" + LONG_SEGMENT + "/below": b"x",
    "/leading-slash": b"x",
    # File and prefix at once: the directory wins (rule 2).
    "conflict": b"i am hidden",
    "conflict/inner": b"inner",
    # Reserved control name at the root (rule 4).
    ".fluxfs/hidden": b"x",
}

VISIBLE_FILES = {
    "top.txt", "a/file3", "a/b/file2", "a/b/c/file1.txt", "deep/1/2/3/4/5/leaf", "implicit/x/y",
    "ph/child", "odd/sp ace.txt", "odd/per%cent", "odd/ha#sh", "odd/que?ry", "odd/pl+us",
    "odd/ampers&and=eq;semi", "odd/\u65e5\u672c\u8a9e.txt", "odd/emoji\U0001F642",
    "odd/caf\u00e9", "odd/" + "n" * 255, "mixed/ok", "conflict/inner",
}
VISIBLE_DIRS = {
    "a", "a/b", "a/b/c", "deep", "deep/1", "deep/1/2", "deep/1/2/3", "deep/1/2/3/4",
    "deep/1/2/3/4/5", "implicit", "implicit/x", "ph", "empty-dir", "odd", "mixed", "conflict",
}
CUSTOM_MTIME = 1600000000


@pytest.fixture(scope="module")
def emulator_args():
    return []


@pytest.fixture(scope="module")
def seed_objects():
    def seed(bucket):
        for name, data in OBJECTS.items():
            bucket.blob(name).upload_from_string(data)
        blob = bucket.blob("mtime/custom")
        blob.metadata = {"goog-reserved-file-mtime": str(CUSTOM_MTIME)}
        blob.upload_from_string(b"old file")
    return seed


@pytest.fixture(scope="module")
def blobs(fluxfs_mount, gcs):
    return {b.name: b for b in gcs.bucket("data").list_blobs()}


def test_root_listing(fluxfs_mount):
    assert sorted(os.listdir(fluxfs_mount.path)) == sorted(
        ["top.txt", "a", "deep", "implicit", "ph", "empty-dir", "odd", "mixed", "conflict",
         "mtime"])


def test_find_lists_the_whole_tree_once(fluxfs_mount):
    out = subprocess.run(["find", ".", "-mindepth", "1", "-printf", "%y %P\\0"],
                         cwd=fluxfs_mount.path, capture_output=True, check=True).stdout
    entries = [e.decode() for e in out.split(b"\0") if e]
    assert len(entries) == len(set(entries))
    files = {e[2:] for e in entries if e.startswith("f ")}
    dirs = {e[2:] for e in entries if e.startswith("d ")}
    assert files == VISIBLE_FILES | {"mtime/custom"}
    assert dirs == VISIBLE_DIRS | {"mtime"}


def test_walk_agrees_with_find(fluxfs_mount):
    walked = set()
    for root, dirs, files in os.walk(fluxfs_mount.path):
        rel = os.path.relpath(root, fluxfs_mount.path)
        for name in files:
            walked.add(os.path.normpath(os.path.join(rel, name)))
    assert walked == VISIBLE_FILES | {"mtime/custom"}


def test_stat_of_files_and_directories(fluxfs_mount, blobs):
    for path in VISIBLE_FILES:
        st = os.stat(fluxfs_mount.path / path)
        assert stat.S_ISREG(st.st_mode), path
        assert stat.S_IMODE(st.st_mode) == 0o644, path
        assert st.st_size == len(OBJECTS[path]), path
        assert st.st_uid == os.getuid() and st.st_gid == os.getgid()
        assert abs(st.st_mtime - blobs[path].updated.timestamp()) < 1.0, path
    for path in VISIBLE_DIRS:
        st = os.stat(fluxfs_mount.path / path)
        assert stat.S_ISDIR(st.st_mode), path
        assert stat.S_IMODE(st.st_mode) == 0o755, path


def test_custom_mtime_metadata(fluxfs_mount):
    assert os.stat(fluxfs_mount.path / "mtime" / "custom").st_mtime == CUSTOM_MTIME


def test_ls_l_of_a_nested_directory(fluxfs_mount):
    out = subprocess.run(["ls", "-la", "--time-style=+%s", str(fluxfs_mount.path / "a" / "b")],
                         capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines()[1:]]
    assert sorted(names) == [".", "..", "c", "file2"]


def test_contents_of_unusual_names(fluxfs_mount):
    for path in VISIBLE_FILES:
        assert (fluxfs_mount.path / path).read_bytes() == OBJECTS[path], path


def test_implicit_and_placeholder_directories(fluxfs_mount):
    root = fluxfs_mount.path
    assert os.listdir(root / "implicit") == ["x"]
    assert os.listdir(root / "implicit" / "x") == ["y"]
    assert os.listdir(root / "empty-dir") == []
    assert os.listdir(root / "ph") == ["child"]  # the placeholder "ph/" itself is no file


def test_unrepresentable_names_are_hidden(fluxfs_mount):
    root = fluxfs_mount.path
    assert os.listdir(root / "mixed") == ["ok"]
    for name in ("dot", "dotdot", "empty-segment", "leading-slash", ".fluxfs"):
        assert not os.path.exists(root / "mixed" / name)
        if name != ".fluxfs":
            assert not os.path.exists(root / name)
    # At the root, ".fluxfs" is fluxfs's control directory: never listed, and the objects
    # stored under that name stay hidden.
    assert ".fluxfs" not in os.listdir(root)
    assert not os.path.exists(root / ".fluxfs" / "hidden")
    with pytest.raises(OSError):  # ENAMETOOLONG from the kernel, or ENOENT
        os.stat(root / "mixed" / LONG_SEGMENT)


def test_file_and_prefix_conflict_directory_wins(fluxfs_mount):
    root = fluxfs_mount.path
    assert os.path.isdir(root / "conflict")
    assert os.listdir(root / "conflict") == ["inner"]
    assert sorted(os.listdir(root)).count("conflict") == 1


def test_missing_names_are_enoent(fluxfs_mount):
    for path in ("nope", "a/nope", "a/b/c/file1.txt/below", "top.txt.bak", "ph/child/x"):
        with pytest.raises((FileNotFoundError, NotADirectoryError)):
            os.stat(fluxfs_mount.path / path)
    # Asking twice (the second answer may come from the negative cache) changes nothing.
    with pytest.raises(FileNotFoundError):
        os.stat(fluxfs_mount.path / "nope")


def test_prefix_mount_and_options(emulator, fluxfs_mount):
    """A second mount of a prefix, with owners and modes from the options."""
    m = Mount(emulator, "data/a/b", args=["--uid", "1234", "--gid", "4321", "--file-mode",
                                          "0600", "--dir-mode", "0700"])
    try:
        assert sorted(os.listdir(m.path)) == ["c", "file2"]
        st = os.stat(m.path / "file2")
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 4321, 0o600)
        assert (m.path / "c" / "file1.txt").read_bytes() == b"one.."
        st = os.stat(m.path / "c")
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert m.unmount() == 0
        assert m.error_lines() == []
    finally:
        m.close()


def test_without_implicit_dirs_only_placeholders_are_directories(emulator, fluxfs_mount):
    m = Mount(emulator, "data", args=["--no-implicit-dirs"])
    try:
        names = set(os.listdir(m.path))
        assert {"ph", "empty-dir", "top.txt"} <= names
        assert not names & {"a", "deep", "implicit", "odd", "mixed"}
        assert os.listdir(m.path / "ph") == ["child"]
        assert not os.path.exists(m.path / "implicit")
        assert m.unmount() == 0
    finally:
        m.close()
