"""The same scripted call sequence (tests/fidelity/compare_calls.py) against gcs-emulator and
fake-gcs-server: our emulator must give Cloud Storage's answer at every step, and the places
where fake-gcs-server departs from it must be exactly the documented ones
(compare_calls.KNOWN_FAKE_DIFFERENCES, explained in tests/emulator/README.md).

Skipped when fake-gcs-server is not installed (scripts/setup installs it with go install).
"""

from pathlib import Path

import pytest

from tests.fidelity import compare_calls
from tests.lib.emulator import (
    FAKE_GCS_SERVER,
    GCS_EMULATOR,
    Emulator,
    find_binary,
    storage_client,
    unique_bucket_name,
)

README = Path(__file__).parent.parent / "emulator" / "README.md"
STEP_NAMES = [s.name for s in compare_calls.STEPS]


def run_on(kind):
    with Emulator(kind=kind) as emu:
        observed = compare_calls.run_sequence(emu.url, storage_client(emu),
                                              unique_bucket_name("cmp"))
        emu.check_alive()
    return observed


@pytest.fixture(scope="module")
def fake_results():
    if find_binary(FAKE_GCS_SERVER) is None:
        pytest.skip("fake-gcs-server is not installed (go install "
                    "github.com/fsouza/fake-gcs-server@v1.56.1; see tests/fidelity/README.md)")
    return run_on(FAKE_GCS_SERVER)


@pytest.fixture(scope="module")
def emulator_results(fake_results):
    # Depends on fake_results so that the whole comparison skips when fake-gcs-server is absent.
    return run_on(GCS_EMULATOR)


@pytest.mark.parametrize("step", compare_calls.STEPS, ids=STEP_NAMES)
def test_emulator_gives_cloud_storage_answer(emulator_results, fake_results, step):
    got = emulator_results[step.name]
    assert got == step.expect, (
        f"gcs-emulator: {step.call}\n  expected (Cloud Storage): {step.expect!r}\n"
        f"  got: {got!r}\n  fake-gcs-server: {fake_results[step.name]!r}")


def test_fake_gcs_server_differences_are_the_documented_ones(fake_results):
    observed = set(compare_calls.deviations(fake_results))
    documented = set(compare_calls.KNOWN_FAKE_DIFFERENCES)
    assert observed == documented, (
        f"newly different: {sorted(observed - documented)}; "
        f"no longer different: {sorted(documented - observed)}")


def test_fake_gcs_server_agrees_on_the_rest(fake_results, emulator_results):
    # Where fake-gcs-server implements a feature as Cloud Storage does, both servers answer alike.
    same = [s for s in STEP_NAMES if s not in compare_calls.KNOWN_FAKE_DIFFERENCES]
    assert len(same) >= 15
    assert {s: fake_results[s] for s in same} == {s: emulator_results[s] for s in same}


def test_readme_explains_every_difference():
    text = README.read_text()
    section = text.split("## Differences from fake-gcs-server", 1)
    assert len(section) == 2, "README.md lacks the differences section"
    for name in compare_calls.KNOWN_FAKE_DIFFERENCES:
        assert f"`{name}`" in section[1], f"README.md does not explain {name}"
