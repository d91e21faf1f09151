"""Equal-compute budgets (trainer.budget.tokens / flops / seconds) and the sweep summary's time
to a target loss."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

import training.task
from analysis.run_record import write_record
from analysis.summary import group_runs
from analysis.sweep_summary import write_sweep_summary
from analysis.time_to_target import first_reached, target_rows, target_section
from conf.hydra_runtime import parse_settings
from conf.schema import BudgetConfig
from modes.train import check_same_job
from tests.conftest import TINY, compose_config, train_py
from train import run
from training.budget import apply_budget, steps_for_budget
from training.checkpoint import read_checkpoint
from training.task import warmup_cosine, warmup_cosine_over_time

SMALL = ("model.hidden_size=32", "model.num_layers=1")
LARGE = ("model.hidden_size=64", "model.num_layers=2")
BATCH, CONTEXT = 8, 32  # TINY's data.batch_size and model.max_seq_len


def _train(out: Path, *overrides: str, callbacks: tuple[L.Callback, ...] = ()) -> dict[str, Any]:
    return run(compose_config(f"output_dir={out}", *overrides), callbacks)


def test_a_flops_budget_gives_steps_in_the_ratio_of_the_costs(tmp_path: Path) -> None:
    """Two widths under one FLOPs budget: each trains floor(budget / (step tokens x its
    flops_per_token)) steps, so their steps are in the inverse ratio of their cost per token
    (within one step), and each consumed at most the budget and less than one step under it."""
    budget = 30 * BATCH * CONTEXT * 40_000.0
    runs = {
        name: _train(tmp_path / name, *shape, f"trainer.budget.flops={budget}")
        for name, shape in (("small", SMALL), ("large", LARGE))
    }
    for metrics in runs.values():
        per_step = BATCH * CONTEXT * metrics["flops_per_token"]
        consumed = metrics["consumed"]
        assert metrics["step"] == consumed["steps"] == int(budget // per_step)
        assert consumed["tokens"] == consumed["steps"] * BATCH * CONTEXT  # packed blocks
        assert consumed["flops"] == consumed["tokens"] * metrics["flops_per_token"]
        assert budget - per_step < consumed["flops"] <= budget
    small, large = runs["small"], runs["large"]
    assert small["flops_per_token"] < large["flops_per_token"]
    ratio = large["flops_per_token"] / small["flops_per_token"]
    assert abs(small["step"] - large["step"] * ratio) <= ratio  # one large step's worth


def test_a_tokens_budget_counts_batch_times_context(tmp_path: Path) -> None:
    metrics = _train(tmp_path / "run", f"trainer.budget.tokens={20 * BATCH * CONTEXT + 5}")
    assert metrics["step"] == 20 and metrics["consumed"]["tokens"] == 20 * BATCH * CONTEXT


def test_steps_for_budget_refuses_less_than_one_step() -> None:
    assert steps_for_budget(BudgetConfig(tokens=1000), 256, 10) == 3
    assert steps_for_budget(BudgetConfig(flops=25_600.0), 256, 10) == 10
    assert steps_for_budget(BudgetConfig(seconds=3.0), 256, 10) is None
    with pytest.raises(ValueError, match=r"trainer.budget.flops=100 is less than one step.*2,560"):
        steps_for_budget(BudgetConfig(flops=100.0), 256, 10)


def test_a_step_counts_accumulation_and_devices_and_its_steps_round_down_exactly() -> None:
    from types import SimpleNamespace

    from training.budget import tokens_per_step

    settings = SimpleNamespace(data=SimpleNamespace(batch_size=4))
    model = SimpleNamespace(max_seq_len=16)
    trainer = SimpleNamespace(accumulate_grad_batches=3, world_size=2)
    assert tokens_per_step(settings, model, trainer) == 4 * 16 * 3 * 2
    # Integer division: 2**53 + 1 is not a float.
    assert steps_for_budget(BudgetConfig(tokens=2**53 + 1), 1, 1) == 2**53 + 1


def test_less_than_one_step_names_what_a_step_costs() -> None:
    with pytest.raises(ValueError) as err:
        steps_for_budget(BudgetConfig(tokens=100), 256, 10)
    assert str(err.value) == (
        "trainer.budget.tokens=100 is less than one step, which costs 256 tokens here "
        "(data.batch_size x max_seq_len x accumulation x devices); give at least 256"
    )
    with pytest.raises(ValueError) as err:
        steps_for_budget(BudgetConfig(flops=100.0), 256, 10)
    assert str(err.value) == (
        "trainer.budget.flops=100 is less than one step, which costs 2,560 flops here "
        "(data.batch_size x max_seq_len x accumulation x devices x the model's "
        "flops_per_token); give at least 2560"
    )


@pytest.mark.parametrize(
    ("budget", "said", "max_steps"),
    [
        ("trainer.budget.tokens=1000", "trainer.budget.tokens=1000: training for 3 steps", 3),
        (
            "trainer.budget.seconds=2",
            "trainer.budget.seconds=2: training until its time is spent",
            -1,
        ),
    ],
)
def test_a_budget_sets_the_trainers_length_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture, budget: str, said: str, max_steps: int
) -> None:
    settings = parse_settings(compose_config(budget, f"output_dir={tmp_path}"))
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, max_epochs=3)
    apply_budget(settings, trainer, settings.model, 1000)
    assert trainer.fit_loop.max_epochs == -1
    assert trainer.fit_loop.epoch_loop.max_steps == max_steps
    assert capsys.readouterr().out.strip() == f"tinylm: {said}"


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"tokens": 10, "flops": 1e9}, "give one budget per run"),
        ({"seconds": 0}, r"trainer.budget.seconds=0.0 must be > 0"),
        ({"tokens": 1.5}, "trainer.budget.tokens=1.5 has type float"),
    ],
)
def test_budget_settings_are_checked(budget: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BudgetConfig(**budget)


def test_a_budget_with_max_steps_on_the_command_line_is_refused(tmp_path: Path) -> None:
    config = compose_config("trainer.budget.tokens=100000", f"output_dir={tmp_path}")
    settings = parse_settings(config)
    settings = dataclasses.replace(settings, overrides={"trainer.max_steps": "30"})
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False)
    with pytest.raises(ValueError, match="trainer.budget.tokens decides .* trainer.max_steps"):
        apply_budget(settings, trainer, settings.model, 1000)
    settings = dataclasses.replace(settings, overrides={"trainer.max_epochs": "2"})
    with pytest.raises(ValueError) as err:
        apply_budget(settings, trainer, settings.model, 1000)
    assert str(err.value) == (
        "trainer.budget.tokens decides how long the run trains, and trainer.max_epochs is also "
        "given; drop one of them"
    )


@pytest.mark.slow
def test_budget_mistakes_are_one_line_at_the_command_line(tmp_path: Path) -> None:
    typo = train_py("trainer.budget.flop=1e9", cwd=tmp_path)
    assert typo.returncode == 1
    assert "trainer.budget.flop (did you mean trainer.budget.flops?)" in typo.stderr
    tiny = [o for o in TINY if not o.startswith("trainer.max_steps")]
    both = train_py(*tiny, "trainer.budget.flops=1e9", "trainer.max_steps=10", cwd=tmp_path)
    assert both.returncode == 1 and "Traceback" not in both.stderr
    assert "drop one of them" in both.stderr


class _Clock(L.Callback):
    """The task's clock (``training.task.perf_counter``), made to advance by exactly
    ``step_seconds`` inside each training step and at no other time, so that a seconds budget
    is spent at a known step on any machine; records the seconds consumed before each step."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, step_seconds: float = 0.25) -> None:
        self.now, self.step_seconds = 1000.0, step_seconds
        self.before_step: list[float] = []
        monkeypatch.setattr(training.task, "perf_counter", lambda: self.now)

    def on_train_batch_start(self, trainer: L.Trainer, task: Any, batch: Any, i: int) -> None:
        self.before_step.append(task.consumed["seconds"])

    def on_train_batch_end(self, trainer: L.Trainer, task: Any, *args: Any) -> None:
        self.now += self.step_seconds  # before the task's own hook reads the clock


def test_a_seconds_budget_stops_within_one_step_and_saves_a_resumable_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock(monkeypatch)
    out = tmp_path / "run"
    metrics = _train(out, "trainer.budget.seconds=1.1", callbacks=(clock,))
    consumed = metrics["consumed"]
    # 0.25 s a step: 1.0 after 4 steps, 1.25 after 5: the step that crossed 1.1 was the last.
    assert consumed["steps"] == len(clock.before_step) == 5
    assert clock.before_step[-1] < 1.1 <= consumed["seconds"] == 1.25
    last = read_checkpoint(out / "checkpoints" / "last.ckpt")
    assert last["global_step"] == 5  # validated and saved at the stop
    assert last["consumed"]["seconds"] == 1.25
    assert metrics["val_curve"][-1][0] == 5
    # Resumed with a larger budget, it goes on from there and its totals carry over.
    again = _Clock(monkeypatch)
    resumed = _train(
        out,
        "trainer.budget.seconds=2.0",
        f"ckpt_path={out / 'checkpoints' / 'last.ckpt'}",
        callbacks=(again,),
    )
    assert again.before_step[0] == 1.25
    assert resumed["consumed"]["steps"] == 8 and resumed["consumed"]["seconds"] == 2.0


def test_the_time_schedule_warms_up_by_steps_and_decays_over_the_time_spent() -> None:
    kwargs = {"warmup_steps": 4, "min_ratio": 0.1}
    for step in range(4):  # the same warmup as the step schedule
        assert warmup_cosine_over_time(step, time_fraction=0.0, **kwargs) == pytest.approx(
            warmup_cosine(step, total_steps=100, **kwargs)
        )
    assert warmup_cosine_over_time(10, time_fraction=0.0, **kwargs) == pytest.approx(1.0)
    assert warmup_cosine_over_time(10, time_fraction=0.5, **kwargs) == pytest.approx(0.55)
    assert warmup_cosine_over_time(10, time_fraction=1.0, **kwargs) == pytest.approx(0.1)
    assert warmup_cosine_over_time(10, time_fraction=1.7, **kwargs) == pytest.approx(0.1)


def test_a_seconds_run_decays_its_learning_rate_over_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without warmup, the learning rate every step starts with is the cosine of the budget's
    fraction spent when the scheduler last stepped (after the previous step's update, before
    its time was added: the time consumed before that previous step)."""
    rates: list[float] = []

    class LearningRates(_Clock):
        def on_train_batch_start(self, trainer: L.Trainer, task: Any, *args: Any) -> None:
            super().on_train_batch_start(trainer, task, *args)
            group = trainer.optimizers[0].param_groups[0]
            rates.append(group["lr"] / group["initial_lr"])

    recorder = LearningRates(monkeypatch, step_seconds=0.5)
    budget = 4.0
    _train(
        tmp_path / "run",
        f"trainer.budget.seconds={budget}",
        "optim.warmup_steps=0",
        "optim.min_lr_ratio=0.1",
        callbacks=(recorder,),
    )
    assert len(rates) == 8 and rates[0] == pytest.approx(1.0)
    for step in range(1, len(rates)):
        fraction = min(1.0, recorder.before_step[step - 1] / budget)
        assert rates[step] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * fraction)))


# ---------------------------------------------------------------------- time to target


def _curve_run(root: Path, job: int, width: str, seed: str, curve: list[list[float]]) -> None:
    record = {
        "status": "completed",
        "best_val_loss": min(point[1] for point in curve),
        "overrides": {"model.hidden_size": width, "seed": seed},
        "val_curve": curve,
        "flops_per_token": 1000,
    }
    write_record(root / str(job), record)


def test_time_to_target_reads_the_first_validation_at_or_below_it() -> None:
    run_record = {
        "val_curve": [[10, 3.0, 100, 1.0], [20, 2.5, 200, 2.1], [30, 2.4, 300, 3.3]],
        "flops_per_token": 7,
    }
    assert first_reached(run_record, 2.5) == {
        "steps": 20,
        "tokens": 200,
        "flops": 1400,
        "seconds": 2.1,
    }
    assert first_reached(run_record, 3.5)["steps"] == 10
    assert first_reached(run_record, 2.0) is None
    old = {"val_curve": [[10, 3.0], [20, 2.5]]}  # recorded before tokens and seconds were
    assert first_reached(old, 2.6) == {"steps": 20, "tokens": None, "flops": None, "seconds": None}
    assert first_reached({**old, "flops_per_token": 7}, 2.6)["flops"] is None  # no tokens


def _timed_run(width: str, seed: str, curve: list[list[float]]) -> dict[str, Any]:
    overrides = {"model.hidden_size": width, "seed": seed}
    return {"status": "completed", "overrides": overrides, "val_curve": curve, "best_val_loss": 1}


def test_the_time_to_target_section_shows_mean_std_and_what_was_not_recorded() -> None:
    runs = [
        _timed_run("64", "1", [[10, 2.0, 100, 1.0]]),
        _timed_run("64", "2", [[10, 3.0, 100, 1.0], [20, 2.0, 200, 3.0]]),
        _timed_run("128", "1", [[10, 2.0]]),  # steps only: tokens and seconds not recorded
    ]
    configs = group_runs(runs, ["model.hidden_size"])
    section = target_section(configs, target_rows(configs, 2.5), 2.5)
    assert section == (
        "## Time to validation loss 2.5\n\n"
        "When validation loss first reached 2.5 (summary.target_loss): mean ± std over the "
        "completed runs that reached it (reached: how many of them did), at the resolution of "
        "the validation interval; seconds exclude validation.\n\n"
        "| model.hidden_size | reached | steps_to_target | tokens_to_target | flops_to_target "
        "| seconds_to_target |\n"
        "|---|---|---|---|---|---|\n"
        "| 64 | 2/2 | 15 ± 7.1 | 150 ± 71 |  | 2 ± 1.4 |\n"
        "| 128 | 1/1 | 10 |  |  |  |\n"
    )
    unreached = target_section(configs, target_rows(configs, 1.0), 1.0)
    assert unreached.splitlines()[2] == (
        "No run reached validation loss 1: raise summary.target_loss, or train longer."
    )
    assert (
        target_section([], [], 1.0).splitlines()[4] == "| reached | steps_to_target | "
        "tokens_to_target | flops_to_target | seconds_to_target |"
    )


def test_the_summary_reports_time_to_target_per_configuration(tmp_path: Path) -> None:
    curves = {
        ("32", "1"): [[10, 3.0, 100, 1.0], [20, 2.4, 200, 2.0]],
        ("32", "2"): [[10, 2.9, 100, 1.2], [20, 2.45, 200, 2.4]],
        ("64", "1"): [[10, 2.45, 100, 3.0], [20, 2.2, 200, 6.0]],
        ("64", "2"): [[10, 2.7, 100, 3.0], [20, 2.6, 200, 6.0]],  # never reaches 2.5
    }
    for job, ((width, seed), curve) in enumerate(curves.items()):
        _curve_run(tmp_path, job, width, seed, curve)
    write_sweep_summary(tmp_path, target_loss=2.5)
    with open(tmp_path / "summary.csv") as f:
        rows = {r["model.hidden_size"]: r for r in csv.DictReader(f)}
    assert rows["32"]["reached"] == "2" and rows["64"]["reached"] == "1"
    assert float(rows["32"]["steps_to_target_mean"]) == 20
    assert float(rows["32"]["seconds_to_target_mean"]) == pytest.approx(2.2)
    assert float(rows["32"]["seconds_to_target_std"]) == pytest.approx(0.2828427, rel=1e-5)
    assert float(rows["32"]["flops_to_target_mean"]) == 200 * 1000
    assert float(rows["64"]["steps_to_target_mean"]) == 10
    assert rows["64"]["seconds_to_target_std"] == ""  # one run reached it: no spread
    summary = (tmp_path / "summary.md").read_text()
    assert "## Time to validation loss 2.5" in summary and "| 64 | 1/2 | 10 |" in summary


def test_a_target_no_run_reached_is_said_in_the_summary(tmp_path: Path) -> None:
    _curve_run(tmp_path, 0, "32", "1", [[10, 3.0, 100, 1.0]])
    write_sweep_summary(tmp_path, target_loss=1.0)
    assert "No run reached validation loss 1" in (tmp_path / "summary.md").read_text()


def test_a_sweep_re_run_may_change_the_summary_settings(tmp_path: Path) -> None:
    stored = {"model.num_heads": "2", "seed": "1"}
    check_same_job(tmp_path, stored, {**stored, "summary.target_loss": "2.5"})
    with pytest.raises(Exception, match="other settings: model.num_heads=4"):
        check_same_job(tmp_path, stored, {**stored, "model.num_heads": "4"})


def test_a_run_records_what_it_consumed_at_each_validation(tmp_path: Path) -> None:
    metrics = _train(tmp_path / "run")  # TINY: 30 steps, validation every 15
    steps = [point[0] for point in metrics["val_curve"]]
    tokens = [point[2] for point in metrics["val_curve"]]
    seconds = [point[3] for point in metrics["val_curve"]]
    assert steps == [15, 30] and tokens == [15 * BATCH * CONTEXT, 30 * BATCH * CONTEXT]
    assert 0 < seconds[0] < seconds[1] == pytest.approx(metrics["consumed"]["seconds"])
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert on_disk["consumed"]["tokens"] == 30 * BATCH * CONTEXT
    assert torch.tensor(on_disk["val_curve"]).shape == (2, 4)
