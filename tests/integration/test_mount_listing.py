"""Listing a flat directory of 100,000 objects through the mount: every name exactly once, the
same answer from the cache, and entries that stat without further surprises."""

import os
import stat

import pytest

pytestmark = pytest.mark.emulator_only

COUNT = 100_000


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", f"huge/flat/:{COUNT}:0", "--populate", "huge/side/:3:10"]


@pytest.fixture(scope="module")
def mount_bucket():
    return "huge"


@pytest.fixture(scope="module")
def mount_args():
    return ["--list-ttl", "5m", "--stat-ttl", "5m"]


def test_huge_directory_listed_completely_and_once(fluxfs_mount):
    names = os.listdir(fluxfs_mount.path / "flat")
    assert len(names) == COUNT
    assert len(set(names)) == COUNT
    assert set(names) == {f"{i:08d}" for i in range(COUNT)}


def test_second_listing_is_identical(fluxfs_mount):
    first = sorted(os.listdir(fluxfs_mount.path / "flat"))
    second = sorted(os.listdir(fluxfs_mount.path / "flat"))
    assert first == second
    assert len(second) == COUNT


def test_scandir_types_and_stat(fluxfs_mount):
    seen = 0
    for entry in os.scandir(fluxfs_mount.path / "flat"):
        assert entry.is_file(follow_symlinks=False)
        seen += 1
    assert seen == COUNT
    for i in (0, 1, 4999, 50_000, COUNT - 1):
        st = os.stat(fluxfs_mount.path / "flat" / f"{i:08d}")
        assert stat.S_ISREG(st.st_mode) and st.st_size == 0
    with pytest.raises(FileNotFoundError):
        os.stat(fluxfs_mount.path / "flat" / f"{COUNT:08d}")


def test_neighbour_directory_and_root(fluxfs_mount):
    assert sorted(os.listdir(fluxfs_mount.path)) == ["flat", "side"]
    assert sorted(os.listdir(fluxfs_mount.path / "side")) == ["00000000", "00000001", "00000002"]
