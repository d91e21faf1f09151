"""mode=harness loads without Hydra, matplotlib or lm-eval: lm-eval (the optional ``eval`` extra)
is imported inside ``features/harness/runner.py``'s functions only, when tasks run. Probed as
tests/test_imports.py probes the core's modes: in a child of an interpreter that has imported
Lightning alone, whose own heavy packages are allowed."""

from __future__ import annotations

import pytest

from tests.test_imports import probe

MODULES = ["features.harness", "features.harness.command"]


@pytest.fixture(scope="module")
def probes() -> dict[str, dict[str, list[str]]]:
    return probe(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_the_harness_mode_imports_without_hydra_matplotlib_or_lm_eval(
    module: str, probes: dict[str, dict[str, list[str]]]
) -> None:
    found = probes[module]
    assert found["holders"] == [], f"import {module}: tinylm modules hold {found['holders']}"
    assert "hydra" not in found["loaded"]
    lightning_alone = set(probes["lightning"]["loaded"])
    assert set(found["loaded"]) <= lightning_alone, f"{module} loads {found['loaded']}"
