"""packaging/kubernetes/ (issue 13): the native-sidecar pod is well formed where it matters
(the sidecar is an init container with restartPolicy Always, Bidirectional propagation on its
side and HostToContainer on the app's, --uid/--gid of the app's user, a termination grace
longer than fluxfs's own), and its fluxfs arguments really mount (against the emulator, the
mountpoint moved to a temporary directory) and its startup probe passes once they have."""

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.mount import find_fluxfs_binary, fluxfs_env, is_mounted
from tests.lib.emulator import REPO_ROOT

pytestmark = pytest.mark.emulator_only

MANIFEST = REPO_ROOT / "packaging" / "kubernetes" / "pod-native-sidecar.yaml"
WAIT_S = 60  # a guard against a hang, not a timed assertion


@pytest.fixture(scope="module")
def emulator_args():
    return ["--populate", "my-bucket/datasets/imagenet/:2:100:1"]


def pod():
    doc = yaml.safe_load(MANIFEST.read_text())
    assert doc["kind"] == "Pod"
    return doc["spec"]


def test_sidecar_shape():
    spec = pod()
    sidecar = next(c for c in spec["initContainers"] if c["name"] == "fluxfs")
    app = spec["containers"][0]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["securityContext"]["privileged"] is True
    mount = next(v for v in sidecar["volumeMounts"] if v["name"] == "data")
    app_mount = next(v for v in app["volumeMounts"] if v["name"] == "data")
    assert mount["mountPropagation"] == "Bidirectional"
    assert app_mount["mountPropagation"] == "HostToContainer"
    assert mount["mountPath"] == sidecar["args"][-1] == app_mount["mountPath"]
    uid = app["securityContext"]["runAsUser"]
    gid = app["securityContext"]["runAsGroup"]
    assert f"--uid={uid}" in sidecar["args"] and f"--gid={gid}" in sidecar["args"]
    grace = next(a for a in sidecar["args"] if a.startswith("--shutdown-grace="))
    grace_s = int(grace.split("=")[1].rstrip("s"))
    assert spec["terminationGracePeriodSeconds"] > grace_s
    assert sidecar["startupProbe"]["exec"]["command"][:2] == ["/usr/bin/fluxfs", "status"]


def test_sidecar_arguments_mount(emulator, tmp_path):
    sidecar = next(c for c in pod()["initContainers"] if c["name"] == "fluxfs")
    mnt = tmp_path / "data"
    mnt.mkdir()
    args = [a for a in sidecar["args"] if not a.startswith("--prometheus-port")]
    args[-1] = str(mnt)
    proc = subprocess.Popen([str(find_fluxfs_binary()), "-f", "--endpoint", emulator.url,
                             "--anonymous", *args], env=fluxfs_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while not is_mounted(mnt):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        probe = sidecar["startupProbe"]["exec"]["command"]
        result = subprocess.run([str(find_fluxfs_binary()), *probe[1:-1], str(mnt)],
                                capture_output=True, text=True, timeout=WAIT_S)
        assert result.returncode == 0, result.stderr
        st = (mnt / "00000000").stat()
        assert (st.st_uid, st.st_gid) == (1000, 1000)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)])
