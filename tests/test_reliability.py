"""Faults, bad input and untrusted checkpoints: nothing is lost and every error explains itself.

Interruption and resume, atomic checkpoints, NaN losses, bad configuration, untrusted or
mismatched checkpoints, sweeps that skip and resume, and generation inputs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from tests.conftest import ROOT, TINY
from tests.faults import NaNAtStep, SignalAtStep
from train import Interrupted, run

# Dropout on, so that resuming exactly needs the RNG states too.
RESUME = ["logger=csv", "model.dropout=0.2", "trainer.max_steps=24",
          "trainer.val_check_interval=8"]


@pytest.fixture
def inject(monkeypatch):
    """Add Lightning callbacks (fault injectors) to the next training runs."""

    def add(*callbacks):
        monkeypatch.setattr(train, "EXTRA_CALLBACKS", list(callbacks))

    return add


# --------------------------------------------------------------------------- 1. interruption


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_run_resumes_to_the_same_loss(make_cfg, inject, tmp_path, signum) -> None:
    full = run(make_cfg(*RESUME, output_dir=tmp_path / "full"))

    inject(SignalAtStep(11, signum))
    with pytest.raises(Interrupted, match=rf"{signal.Signals(signum).name} at step 11") as err:
        run(make_cfg(*RESUME, output_dir=tmp_path / "cut"))
    assert err.value.exit_code == 128 + signum
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 11 and "rng_states" in saved
    status = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert status["status"] == "interrupted" and status["resume_ckpt"] == str(last)

    inject()
    resumed = run(make_cfg(*RESUME, f"ckpt_path={last}", output_dir=tmp_path / "resumed"))
    assert resumed["step"] == full["step"] == 24
    # Exact to float noise: without the RNG states restored the gap is ~4e-5 (dropout masks).
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)
    assert resumed["best_val_loss"] == pytest.approx(full["best_val_loss"], abs=1e-6)


def _train_py(*args: str, cwd: Path, wrapper: str | None = None,
              timeout: int = 300) -> subprocess.CompletedProcess:
    """The real entry point in a subprocess; ``wrapper`` is Python code run in place of
    ``train.py`` that adds fault injectors (it ends by calling ``train.main()``)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    env.pop("TINYLM_DEBUG", None)
    script = str(ROOT / "train.py")
    if wrapper:
        path = cwd / "train_with_faults.py"
        path.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                        "sys.argv[0] = " + repr(script) + "\n" + wrapper)
        script = str(path)
    return subprocess.run([sys.executable, script, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_ctrl_c_through_train_py_saves_and_exits_cleanly(tmp_path: Path) -> None:
    wrapper = ("import signal\nfrom tests.faults import SignalAtStep, main_with\n"
               "main_with(SignalAtStep(5, signal.SIGINT))\n")
    proc = _train_py(*TINY, "trainer.max_steps=20", f"hydra.run.dir={tmp_path / 'run'}",
                     cwd=tmp_path, wrapper=wrapper)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("tinylm:")]
    assert len(lines) == 1 and "interrupted by SIGINT at step 5" in lines[0], proc.stderr
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 5
