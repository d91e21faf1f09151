"""Import layering: the modes and the training layer load without Hydra, matplotlib or lm-eval.

Hydra belongs to the entry point (``train.py``, ``conf/hydra_runtime.py``, the sweep callback),
matplotlib to the modules that draw (``analysis/plots.py``, ``features/attention/command.py``)
and the lm-evaluation-harness to the functions of a feature that run it (its own test probes
it, ``probe``). Each
import runs in a child forked from one fresh interpreter that has imported Lightning alone
(what every mode imports first; ``lightning_alone`` is what that interpreter holds).
Lightning's torchmetrics imports matplotlib itself when it is installed, so matplotlib in
``sys.modules`` is allowed exactly when Lightning alone puts it there; that no tinylm module
imports it is checked on the modules themselves: none holds a matplotlib or Hydra object at
module level.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("matplotlib", "hydra", "lm_eval")
TINYLM_PACKAGES = sorted(
    {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} | {"train"}
)

PROBED = [
    "modes.eval",
    "training.task",
    "analysis.plots",
    "conf.hydra_runtime",
]

# Imports Lightning, then for each module of argv[3:] forks a child that imports it and
# prints (one JSON line) which HEAVY packages are loaded and which tinylm module globals
# (``module.name``) are objects of one of them; "lightning" is the parent's own state.
_PROBE = r"""
import importlib, json, os, sys, types

heavy, ours = set(json.loads(sys.argv[1])), set(json.loads(sys.argv[2]))


def package(value):
    name = value.__name__ if isinstance(value, types.ModuleType) else None
    name = name or getattr(value, "__module__", None)
    return name.partition(".")[0] if isinstance(name, str) else None


def report(module):
    holders = sorted(
        f"{name}.{key}"
        for name, loaded in list(sys.modules.items())
        if name.partition(".")[0] in ours
        for key, value in vars(loaded).items()
        if package(value) in heavy
    )
    loaded = sorted({name.partition(".")[0] for name in sys.modules} & heavy)
    print(json.dumps({"module": module, "loaded": loaded, "holders": holders}), flush=True)


import lightning

report("lightning")
for module in sys.argv[3:]:
    pid = os.fork()
    if pid == 0:
        importlib.import_module(module)
        report(module)
        os._exit(0)
    if os.waitpid(pid, 0)[1] != 0:
        sys.exit(f"import {module} failed")
"""


def probe(modules: list[str]) -> dict[str, dict[str, list[str]]]:
    """What each of ``modules`` (and Lightning alone, ``lightning``) holds once imported."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(HEAVY), json.dumps(TINYLM_PACKAGES), *modules],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {f.pop("module"): f for f in found}


@pytest.fixture(scope="module")
def probes() -> dict[str, dict[str, list[str]]]:
    """What each module of PROBED (and Lightning alone) holds once imported."""
    return probe(PROBED)


@pytest.fixture(scope="module")
def lightning_alone(probes: dict[str, dict[str, list[str]]]) -> set[str]:
    """The heavy packages Lightning (with torchmetrics) loads by itself."""
    return set(probes["lightning"]["loaded"])


@pytest.mark.parametrize("module", ["modes.eval", "training.task"])
def test_modes_and_training_import_without_hydra_matplotlib_or_lm_eval(
    module: str, lightning_alone: set[str], probes: dict[str, dict[str, list[str]]]
) -> None:
    found = probes[module]
    assert found["holders"] == [], f"import {module}: tinylm modules hold {found['holders']}"
    assert "hydra" not in found["loaded"]
    assert set(found["loaded"]) <= lightning_alone, f"{module} loads {found['loaded']}"


@pytest.mark.parametrize(
    ("module", "package"), [("analysis.plots", "matplotlib"), ("conf.hydra_runtime", "hydra")]
)
def test_the_probe_sees_the_modules_that_do_import_them(
    module: str, package: str, probes: dict[str, dict[str, list[str]]]
) -> None:
    found = probes[module]
    assert package in found["loaded"]
    assert any(holder.startswith(f"{module}.") for holder in found["holders"])
