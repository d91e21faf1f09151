"""The run's curves: every value logged while training is a line of ``curves.jsonl``, whatever
the logger, at the step the record's val_curve counts; a run resumed in its directory keeps
what came before its checkpoint, drops what the interrupted run logged after it, and marks the
resume."""

from __future__ import annotations

import json
import signal

import pytest

from modes import Interrupted
from tests.conftest import RESUME
from tests.faults import SignalAtStep
from train import run
from training.curves import CURVES_FILE, RESUMED, read_curves


def steps_with(lines: list[dict], key: str) -> list[int]:
    return [line["step"] for line in lines if key in line]


def test_every_logged_value_is_a_line_of_the_run_curves(make_cfg, tmp_path) -> None:
    out = tmp_path / "run"
    record = run(make_cfg("trainer.max_steps=20", "trainer.val_check_interval=10"))  # logger=none
    lines = read_curves(out / CURVES_FILE)
    assert steps_with(lines, "train/loss") == [5, 10, 15, 20]  # trainer.log_every_n_steps=5
    assert steps_with(lines, "train/grad_norm") == [5, 10, 15, 20]
    assert steps_with(lines, "train/tokens_per_sec")[-3:] == [10, 15, 20]
    # The learning rate is logged as each logging step starts.
    learning_rates = [line["step"] for line in lines if any(k.startswith("lr-") for k in line)]
    assert [step + 1 for step in learning_rates] == [5, 10, 15, 20]
    validations = [[line["step"], line["val/loss"]] for line in lines if "val/loss" in line]
    assert validations == [point[:2] for point in record["val_curve"]]
    assert all(value > 0 for line in lines for value in line.values())


def test_a_run_resumed_in_its_directory_keeps_its_curves_up_to_the_checkpoint(
    make_cfg, tmp_path
) -> None:
    cfg = make_cfg(*RESUME, "logger=none")
    with pytest.raises(Interrupted):
        run(cfg, [SignalAtStep(11, signal.SIGTERM)])
    curves = tmp_path / "run" / CURVES_FILE
    before = read_curves(curves)
    assert steps_with(before, "train/loss") == [5, 10] and steps_with(before, "val/loss") == [8]
    with open(curves, "a") as f:  # what the run logged after its checkpoint, before it died
        f.write(json.dumps({"step": 13, "train/loss": 9.0}) + "\n")
    run(make_cfg(*RESUME, "logger=none", f"ckpt_path={tmp_path / 'run/checkpoints/last.ckpt'}"))
    after = read_curves(curves)
    assert after[: len(before)] == before
    assert after[len(before)] == {"step": 11, RESUMED: True}
    assert steps_with(after, "train/loss") == [5, 10, 15, 20]
    assert steps_with(after, "val/loss") == [8, 16, 24]
