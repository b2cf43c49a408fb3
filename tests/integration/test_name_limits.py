"""Cloud Storage's 1,024-byte limit on object names, prefix included (issue 22): a name that
would exceed it is refused with ENAMETOOLONG when it is created (open O_CREAT, mkdir, symlink,
mknod, rename), never accepted and then lost at close. And mknod/mkfifo on an existing name is
EEXIST, as POSIX says (pjdfstest), not EPERM."""

import errno
import os

import pytest

PREFIX = "pfx/"  # 4 bytes of every object name
pytestmark = pytest.mark.emulator_only


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", "data/pfx/seed/:1:10"]


@pytest.fixture(scope="module")
def mount_bucket():
    return "data/" + PREFIX.rstrip("/")


@pytest.fixture(scope="module")
def deep(fluxfs_mount):
    """A directory whose files' object names start with 808 bytes: pfx/ + 4 x (200 + '/')."""
    path = fluxfs_mount.path
    for letter in "abcd":
        path = path / (letter * 200)
        path.mkdir()
    return path


def object_len(name):
    return len(PREFIX) + 4 * 201 + len(name.encode())


def test_create_at_the_limit_works_and_beyond_is_enametoolong(deep):
    fits = "f" * (1024 - object_len(""))
    assert object_len(fits) == 1024
    (deep / fits).write_bytes(b"kept")
    assert (deep / fits).read_bytes() == b"kept"
    with pytest.raises(OSError) as info:
        open(deep / (fits + "x"), "wb")
    assert info.value.errno == errno.ENAMETOOLONG
    assert not (deep / (fits + "x")).exists()


def test_mkdir_counts_the_placeholder_slash(deep):
    name = "d" * (1024 - object_len("") - 1)  # "…/ddd/" is 1,024 bytes
    (deep / name).mkdir()
    assert (deep / name).is_dir()
    with pytest.raises(OSError) as info:
        (deep / (name + "d")).mkdir()
    assert info.value.errno == errno.ENAMETOOLONG


def test_symlink_and_rename_refuse_too_long_names(deep):
    too_long = "s" * (1025 - object_len(""))
    with pytest.raises(OSError) as info:
        os.symlink("target", deep / too_long)
    assert info.value.errno == errno.ENAMETOOLONG
    (deep / "short").write_bytes(b"x")
    with pytest.raises(OSError) as info:
        os.rename(deep / "short", deep / too_long)
    assert info.value.errno == errno.ENAMETOOLONG
    assert (deep / "short").read_bytes() == b"x"


def test_mknod_and_mkfifo_on_an_existing_name_are_eexist(fluxfs_mount):
    existing = fluxfs_mount.path / "exists-for-mknod"
    existing.write_bytes(b"x")
    with pytest.raises(FileExistsError):
        os.mkfifo(existing)
    with pytest.raises(FileExistsError):
        os.mknod(existing, 0o644 | 0o100000)  # S_IFREG
    (fluxfs_mount.path / "dir-for-mknod").mkdir()
    with pytest.raises(FileExistsError):
        os.mkfifo(fluxfs_mount.path / "dir-for-mknod")
    # A FIFO where nothing exists stays refused: objects are no FIFOs.
    with pytest.raises(PermissionError):
        os.mkfifo(fluxfs_mount.path / "new-fifo")
