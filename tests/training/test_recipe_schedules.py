"""The speed-run schedules: warmup-stable-decay (``optim.schedule=wsd``), Muon's momentum
warm-up (``optim.muon_momentum_warmup``), and stopping at a target loss
(``trainer.stop_at_loss``) with the time to it in the run record."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.conftest import compose_config
from tests.tiny_tasks import MUON, OPTIM, hand_made_batches, loader, quick_trainer, tiny_task
from train import run
from training.task import warmup_cosine, warmup_stable_decay, warmup_stable_decay_over_time


def test_wsd_warms_up_holds_then_decays_linearly_over_its_last_fraction() -> None:
    def lr(step: int) -> float:
        return warmup_stable_decay(
            step, warmup_steps=10, total_steps=100, min_ratio=0.1, cooldown_fraction=0.2
        )

    assert [lr(s) for s in (0, 4, 9)] == pytest.approx([(s + 1) / 11 for s in (0, 4, 9)])
    assert [lr(s) for s in (10, 50, 80)] == pytest.approx([1.0] * 3)  # stable to the last 20
    assert lr(90) == pytest.approx(0.55)  # half-way down the line from 1 to 0.1
    assert lr(100) == pytest.approx(0.1) and lr(140) == pytest.approx(0.1)
    decay = [lr(s) for s in range(80, 101)]
    steps = [a - b for a, b in zip(decay, decay[1:], strict=False)]
    assert steps == pytest.approx([0.9 / 20] * 20)  # a straight line


def test_wsd_over_a_time_budget_decays_over_its_last_fraction_of_the_time() -> None:
    shape = {"warmup_steps": 5, "min_ratio": 0.0, "cooldown_fraction": 0.5}
    assert warmup_stable_decay_over_time(2, time_fraction=0.9, **shape) == pytest.approx(0.5)
    assert warmup_stable_decay_over_time(50, time_fraction=0.4, **shape) == 1.0
    assert warmup_stable_decay_over_time(50, time_fraction=0.75, **shape) == pytest.approx(0.5)
    assert warmup_stable_decay_over_time(50, time_fraction=1.3, **shape) == 0.0


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_the_task_schedules_by_optim_schedule(schedule: str) -> None:
    optim = dataclasses.replace(MUON, schedule=schedule, cooldown_fraction=0.5)
    task = tiny_task(optim=optim, total_steps=10)
    scheduler = task.configure_optimizers()["lr_scheduler"]["scheduler"]
    shape = {"warmup_steps": 1, "total_steps": 10, "min_ratio": 0.1}
    if schedule == "wsd":
        expected = [warmup_stable_decay(s, cooldown_fraction=0.5, **shape) for s in range(11)]
    else:
        expected = [warmup_cosine(s, **shape) for s in range(11)]
    assert [scheduler.lr_lambdas[0](s) for s in range(11)] == pytest.approx(expected)
    assert (expected[4] == 1.0) == (schedule == "wsd")  # the two shapes differ


def test_muon_momentum_warms_up_from_0_85_in_the_training_steps() -> None:
    optim = dataclasses.replace(MUON, muon_momentum_warmup=4)
    assert [optim.muon_momentum_at(s) for s in (0, 2, 4, 9)] == pytest.approx(
        [0.85, 0.90, 0.95, 0.95]
    )
    assert MUON.muon_momentum_at(0) is None  # no warm-up: torch's momentum as configured
    task = tiny_task(optim=optim)
    batches = hand_made_batches(task)
    quick_trainer(max_steps=2).fit(task, loader(batches))
    (group,) = task.trainer.optimizers[0].muon.param_groups
    assert group["momentum"] == pytest.approx(0.875)  # set before the second step (step 1)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schedule": "linear"}, "optim.schedule=linear is unknown; choose one of: cosine, wsd"),
        ({"cooldown_fraction": 0.0}, r"optim.cooldown_fraction=0.0 must be in \(0, 1\]"),
        ({"muon_momentum_warmup": -1}, "optim.muon_momentum_warmup=-1 must be >= 0"),
        (
            {"muon_momentum_warmup": 10, "muon_momentum": 0.8},
            "optim.muon_momentum=0.8 is below the warm-up's start, 0.85",
        ),
    ],
)
def test_bad_schedule_settings_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(MUON, **changes)


def test_a_momentum_warmup_without_muon_is_refused() -> None:
    with pytest.raises(ValueError, match="optim.muon_momentum_warmup set with optim=adamw"):
        dataclasses.replace(OPTIM, muon_momentum_warmup=10)


def test_stop_at_loss_stops_at_the_first_validation_below_it_and_records_when(
    tmp_path: Path,
) -> None:
    every = ("trainer.max_steps=30", "trainer.val_check_interval=10")
    free = run(compose_config(f"output_dir={tmp_path / 'free'}", *every), ())
    assert "seconds_to_target" not in free  # no target, no time to it
    curve = free["val_curve"]
    target = (curve[0][1] + curve[1][1]) / 2  # the second validation gets below it
    assert curve[1][1] < target < curve[0][1]
    stopped = run(
        compose_config(
            f"output_dir={tmp_path / 'stopped'}", *every, f"trainer.stop_at_loss={target}"
        ),
        (),
    )
    assert stopped["status"] == "completed"
    assert stopped["step"] == stopped["steps_to_target"] == 20
    assert len(stopped["val_curve"]) == 2
    assert stopped["seconds_to_target"] == stopped["val_curve"][1][3] > 0
    missed = run(
        compose_config(f"output_dir={tmp_path / 'missed'}", *every, "trainer.stop_at_loss=0.01"),
        (),
    )
    assert missed["step"] == 30
    assert missed["seconds_to_target"] is None and missed["steps_to_target"] is None
