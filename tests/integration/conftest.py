"""Fixtures for the mount tests: one fluxfs mount per test module, over the module's emulator.

A module chooses what it mounts by overriding these module-scoped fixtures:

* ``emulator_args`` (from tests/conftest.py): e.g. ``["--populate", "data/big/:100000:0"]``
* ``mount_bucket``: the bucket (or "bucket/prefix") to mount; default "data"
* ``mount_args``: extra fluxfs flags, e.g. ``["--stat-ttl", "1"]``
* ``seed_objects``: a function(gcs_client) run before mounting to upload objects

and then uses ``fluxfs_mount`` (a tests.integration.mount.Mount; ``fluxfs_mount.path`` is the
mount point). After every test the daemon must still be alive and its log must hold no ERROR
line that the test did not declare with ``fluxfs_mount.expect_errors(regex)``.
"""

import subprocess

import pytest

from tests.integration.mount import Mount, is_mounted


@pytest.fixture
def mountpoint(tmp_path):
    """An empty directory to mount on; lazily unmounted after the test if still mounted."""
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


@pytest.fixture(scope="module")
def mount_bucket():
    return "data"


@pytest.fixture(scope="module")
def mount_args():
    return []


@pytest.fixture(scope="module")
def seed_objects():
    return None


@pytest.fixture(scope="module")
def fluxfs_mount(emulator, gcs, mount_bucket, mount_args, seed_objects):
    bucket_name = mount_bucket.split("/", 1)[0]
    if seed_objects is not None:
        bucket = gcs.lookup_bucket(bucket_name) or gcs.create_bucket(bucket_name)
        seed_objects(bucket)
    mount = Mount(emulator, mount_bucket, args=mount_args)
    try:
        yield mount
        assert mount.alive(), f"fluxfs died during the module\n--- log ---\n{mount.log()}"
        rc = mount.unmount()
        assert rc == 0, f"fluxfs exited with status {rc} after unmount\n{mount.log()}"
        assert not is_mounted(mount.path)
    finally:
        mount.close()


@pytest.fixture(autouse=True)
def _fluxfs_log_guard(request):
    """Fails a test that left the daemon dead or logged ERROR lines it did not expect."""
    if "fluxfs_mount" not in request.fixturenames:
        yield
        return
    mount = request.getfixturevalue("fluxfs_mount")
    mount.unexpected_errors()  # start from a clean slate
    yield
    problems = []
    if not mount.alive():
        problems.append(f"fluxfs exited with status {mount.proc.returncode}")
    errors = mount.unexpected_errors()
    if errors:
        problems.append("unexpected ERROR lines in the fluxfs log:\n" + "\n".join(errors))
    if problems:
        pytest.fail("\n".join(problems) + f"\n--- log tail ---\n{mount.log()[-4000:]}")
