"""Interruption and resume: a signal saves last.ckpt and the run resumes to the same loss; a
sweep re-run in its directory skips finished jobs and resumes unfinished ones."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
import torch

from modes import Interrupted
from tests.conftest import RESUME, TINY, train_py
from tests.faults import SignalAtStep
from train import run

# --------------------------------------------------------------------------- interruption


# SIGINT in process is slow-marked: Ctrl-C is also proven through train.py below.
# optim=muon: both optimisers' states (Muon's momentum, AdamW's moments) must come back.
# μP: the checkpoint's base width and the hidden matrices' own learning-rate group too.
MUP = ["model.parametrization=mup", "model.mup_base_width=12"]


@pytest.mark.parametrize(
    "optim",
    [
        pytest.param(["optim=adamw"], id="adamw"),
        pytest.param(["optim=muon"], id="muon"),
        pytest.param(["optim=adamw", *MUP], id="adamw_mup"),
    ],
)
@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)]
)
def test_interrupted_run_resumes_to_the_same_loss(make_cfg, tmp_path, signum, optim) -> None:
    settings = [*RESUME, *optim]
    full = run(make_cfg(*settings, output_dir=tmp_path / "full"))

    with pytest.raises(Interrupted, match=rf"{signal.Signals(signum).name} at step 11") as err:
        run(make_cfg(*settings, output_dir=tmp_path / "cut"), [SignalAtStep(11, signum)])
    assert err.value.exit_code == 128 + signum
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 11 and "rng_states" in saved
    status = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert status["status"] == "interrupted" and status["resume_ckpt"] == str(last)

    resumed = run(make_cfg(*settings, f"ckpt_path={last}", output_dir=tmp_path / "resumed"))
    assert resumed["step"] == full["step"] == 24
    # Exact to float noise: without the RNG states restored the gap is ~4e-5 (dropout masks).
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)
    assert resumed["best_val_loss"] == pytest.approx(full["best_val_loss"], abs=1e-6)


def test_ctrl_c_through_train_py_saves_and_exits_cleanly(tmp_path: Path) -> None:
    wrapper = (
        "import signal\nfrom tests.faults import SignalAtStep, main_with\n"
        "main_with(SignalAtStep(5, signal.SIGINT))\n"
    )
    proc = train_py(
        *TINY,
        "trainer.max_steps=20",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
        wrapper=wrapper,
    )
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("tinylm:")]
    assert len(lines) == 1 and "interrupted by SIGINT at step 5" in lines[0], proc.stderr
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 5


# --------------------------------------------------------------------------- sweeps


def test_rerun_sweep_skips_finished_and_resumes_unfinished_jobs(tmp_path: Path) -> None:
    import csv

    sweep = tmp_path / "sweep"
    args = [
        "-m",
        *TINY,
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
    ]
    # First pass: job 0 completes, job 1 is stopped by SIGTERM at step 3 (a pre-emption),
    # before its first validation: the interruption's last.ckpt is its only checkpoint.
    wrapper = (
        "from tests.faults import SignalInSweepJob, main_with\nmain_with(SignalInSweepJob(1, 3))\n"
    )
    first = train_py(*args, cwd=tmp_path, wrapper=wrapper)
    assert first.returncode == 143, first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    assert f"hydra.sweep.dir={sweep}" in first.stdout  # the way back, printed at the start
    done = json.loads((sweep / "0" / "metrics.json").read_text())
    assert done["status"] == "completed"
    assert json.loads((sweep / "1" / "metrics.json").read_text())["status"] == "interrupted"
    stamp = (sweep / "0" / "metrics.json").stat().st_mtime_ns

    second = train_py(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "already completed, skipping" in second.stdout
    assert "resuming the unfinished job" in second.stdout
    assert (sweep / "0" / "metrics.json").stat().st_mtime_ns == stamp  # untouched
    resumed = json.loads((sweep / "1" / "metrics.json").read_text())
    assert resumed["status"] == "completed" and resumed["step"] == 10
    # The resumed job's checkpoints replace the interruption's (no last-v1.ckpt beside a stale
    # last.ckpt at step 3).
    checkpoints = sweep / "1" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["best.ckpt", "last.ckpt"]
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["global_step"] == 10
    with open(sweep / "runs.csv") as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    assert [rows[k]["status"] for k in ("0", "1")] == ["completed", "completed"]
    assert float(rows["0"]["best_val_loss"]) == pytest.approx(done["best_val_loss"], rel=1e-3)


@pytest.mark.slow
def test_rerun_sweep_retrains_a_deleted_job_and_resumes_one_without_metrics(
    tmp_path: Path,
) -> None:
    """The README's two ways back into a finished sweep: a job whose directory was deleted
    trains again from scratch; a job whose metrics.json alone is gone (killed hard after its
    last checkpoint) resumes from last.ckpt."""
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        *TINY,
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
    ]
    assert train_py(*args, cwd=tmp_path).returncode == 0
    first = {job: json.loads((sweep / job / "metrics.json").read_text()) for job in ("0", "1")}
    shutil.rmtree(sweep / "0")
    (sweep / "1" / "metrics.json").unlink()
    again = train_py(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already completed, skipping" not in again.stdout
    assert again.stdout.count("resuming the unfinished job") == 1
    assert f"resuming the unfinished job in {sweep / '1'}" in again.stdout
    retrained = json.loads((sweep / "0" / "metrics.json").read_text())
    # Trained from step 0 again with the same seed: the same losses as the first time.
    assert retrained["status"] == "completed" and retrained["step"] == 6
    assert retrained["best_val_loss"] == pytest.approx(first["0"]["best_val_loss"], abs=1e-6)
    assert retrained["train_seconds"] > 0
    # Resumed at its last step: nothing left to train, validated again.
    resumed = json.loads((sweep / "1" / "metrics.json").read_text())
    assert resumed["status"] == "completed" and resumed["step"] == 6
    assert resumed["val_loss"] == pytest.approx(first["1"]["val_loss"], abs=1e-6)
