"""The task's budgets, hyper-parameters, head mask and loss precision (training/task.py),
checked on hand-made batches through a real Trainer in seconds: the tokens and seconds a run
consumes (timed against a fake clock, counted over every DDP rank) and their round trip
through a checkpoint; a seconds budget that stops training and decays the learning rate over
the time spent; the bits per byte of the split scored; the hyper-parameters a task stores and
is rebuilt from (bytes_per_token, seconds_budget); a head mask that changes the logits of
every forward and never enters the weights; half-precision logits scored in float32.

The tasks, batches and Trainers are tests/tiny_tasks.py's."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from lightning.pytorch.strategies import SingleDeviceStrategy

import training.task
from data.collate import IGNORE_INDEX
from tests.tiny_tasks import (
    OPTIM,
    FakeClock,
    attentive,
    hand_made_batches,
    loader,
    padded_batch,
    quick_trainer,
    recount,
    tiny_task,
    with_rows,
)
from training.task import (
    LanguageModelTask,
    mean_token_loss,
    task_from_hparams,
    warmup_cosine_over_time,
)

BYTES_PER_TOKEN = {"validation": 4.0, "test": 7.0}


def _budgeted(**hparams: Any) -> LanguageModelTask:
    """A decoder task of tests/tiny_tasks.py with other hyper-parameters (e.g. a
    ``seconds_budget`` or ``bytes_per_token``)."""
    return task_from_hparams(dict(tiny_task().hparams), **hparams)


def _cosine(fraction: float, min_ratio: float = OPTIM.min_lr_ratio) -> float:
    """The cosine decay from 1 to ``min_ratio`` over a fraction 0..1, written out."""
    return min_ratio + (1 - min_ratio) * (1 + math.cos(math.pi * fraction)) / 2


def test_half_precision_logits_are_scored_in_float32() -> None:
    """The loss of bfloat16 logits is the exact cross-entropy of their values (bfloat16
    arithmetic would be off by about 1%), in float32; float64 logits stay float64."""
    generator = torch.Generator().manual_seed(3)
    logits = (torch.randn(2, 8, 37, generator=generator) * 4).to(torch.bfloat16)
    labels = torch.randint(0, 37, (2, 8), generator=generator)
    labels[0, :3] = IGNORE_INDEX
    keep = labels != IGNORE_INDEX
    log_p = torch.log_softmax(logits.double()[keep], dim=-1)
    expected = -log_p.gather(-1, labels[keep].unsqueeze(-1)).mean().item()
    loss = mean_token_loss(logits, labels)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert mean_token_loss(logits.double(), labels).dtype == torch.float64


def test_consumed_tokens_and_seconds_count_every_step_and_round_trip_a_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batches of 1, 2 and 3 rows of 16 tokens: 96 tokens. The clock ticks 0.5 s a read: the
    first step counts from its own start (0.5 s), the others from the previous step's end
    (1 s each): 2.5 s."""
    monkeypatch.setattr(training.task, "perf_counter", FakeClock().perf_counter)
    task = tiny_task()
    assert task.consumed == {"tokens": 0, "seconds": 0.0}
    batch = hand_made_batches(task)[1]
    trainer = quick_trainer(max_steps=3, num_sanity_val_steps=0)
    trainer.fit(task, train_dataloaders=loader([with_rows(batch, rows) for rows in (1, 2, 3)]))
    assert task.consumed == {"tokens": 96, "seconds": 2.5}
    checkpoint: dict[str, Any] = {}
    task.on_save_checkpoint(checkpoint)
    assert checkpoint["consumed"] == {"tokens": 96, "seconds": 2.5}
    resumed = tiny_task()
    resumed.on_load_checkpoint(checkpoint)
    assert resumed.consumed == {"tokens": 96, "seconds": 2.5}
    resumed.on_load_checkpoint({})  # a checkpoint of an earlier version: what it had
    assert resumed.consumed == {"tokens": 96, "seconds": 2.5}
    fresh = tiny_task()
    fresh.on_load_checkpoint({"consumed": {"tokens": 5}})  # a total it lacks stays at 0
    assert fresh.consumed == {"tokens": 5, "seconds": 0.0}


def test_a_seconds_budget_stops_at_the_step_that_spends_it_and_decays_the_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A budget of 1.5 s, spent exactly at the end of step 2 (0.5 + 1 s). The scheduler last
    stepped after step 2's update, before its time was added: at a third of the budget."""
    monkeypatch.setattr(training.task, "perf_counter", FakeClock().perf_counter)
    task = _budgeted(seconds_budget=1.5)
    trainer = quick_trainer(max_steps=10, num_sanity_val_steps=0)
    trainer.fit(task, train_dataloaders=loader([hand_made_batches(task)[1]] * 10))
    assert trainer.global_step == 2
    assert task.consumed["seconds"] == 1.5
    rates = [group["lr"] for group in trainer.optimizers[0].param_groups]
    assert rates == pytest.approx([OPTIM.lr * _cosine(1 / 3)] * len(rates), rel=1e-9)


def test_the_time_schedule_reads_the_seconds_consumed_over_the_budget() -> None:
    """Warmup by steps (1 step here), then the cosine of the fraction of the budget spent."""
    task = _budgeted(seconds_budget=12.0)
    scheduler = task.configure_optimizers()["lr_scheduler"]["scheduler"]
    multiplier = scheduler.lr_lambdas[0]
    assert multiplier(0) == pytest.approx(0.5)  # warming up: (0 + 1) / (1 + 1)
    task.consumed["seconds"] = 3.0
    assert multiplier(0) == pytest.approx(0.5)  # the warmup counts steps, not time
    assert multiplier(2) == pytest.approx(_cosine(0.25))


@pytest.mark.parametrize(
    ("step", "fraction", "expected"),
    [
        (2, 0.0, 3 / 5),  # warming up over 4 steps: (2 + 1) / (4 + 1)
        (4, 0.5, _cosine(0.5)),  # the first step after warmup already decays over time
        (4, 1.0, OPTIM.min_lr_ratio),
        (9, 1.5, OPTIM.min_lr_ratio),  # a step past the budget stays at the floor
    ],
)
def test_the_time_schedule_at_its_edges(step: int, fraction: float, expected: float) -> None:
    multiplier = warmup_cosine_over_time(
        step, warmup_steps=4, time_fraction=fraction, min_ratio=OPTIM.min_lr_ratio
    )
    assert multiplier == pytest.approx(expected, rel=1e-12)


class _TwoRanks(SingleDeviceStrategy):
    """One process standing for rank 0 of two: the other rank trains batches of the same size
    and its clock already says the budget is spent. Decisions reduce as DDP's do: all ranks
    (``all``) or any."""

    def __init__(self) -> None:
        super().__init__(torch.device("cpu"))
        self.world_size = 2

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        other_rank_spent = True
        return (decision and other_rank_spent) if all else (decision or other_rank_spent)


def test_every_rank_stops_when_one_rank_spends_the_budget_and_counts_all_ranks_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(training.task, "perf_counter", FakeClock().perf_counter)
    task = _budgeted(seconds_budget=100.0)  # this rank's clock: 0.5 s of 100 after step 1
    trainer = quick_trainer(max_steps=3, num_sanity_val_steps=0, strategy=_TwoRanks())
    trainer.fit(task, train_dataloaders=loader([with_rows(hand_made_batches(task)[1], 1)] * 3))
    assert trainer.global_step == 1
    assert task.consumed == {"tokens": 2 * 16, "seconds": 0.5}


def test_bits_per_byte_are_of_the_split_scored() -> None:
    task = _budgeted(bytes_per_token=BYTES_PER_TOKEN)
    batches = hand_made_batches(task)
    nats = recount(task, batches)["loss"]
    for stage, split in (("val", "validation"), ("test", "test")):
        trainer = quick_trainer()
        score = trainer.validate if stage == "val" else trainer.test
        score(task, dataloaders=loader(batches), verbose=False)
        bpb = float(trainer.callback_metrics[f"{stage}/bpb"])
        assert bpb == pytest.approx(nats / math.log(2) / BYTES_PER_TOKEN[split], rel=1e-5)


def test_the_budget_and_bytes_per_token_are_hyper_parameters_a_task_is_rebuilt_from() -> None:
    bytes_per_token = dict(BYTES_PER_TOKEN)
    task = _budgeted(bytes_per_token=bytes_per_token, seconds_budget=30.0)
    bytes_per_token["test"] = 1.0  # the task keeps its own copy
    assert task.hparams["bytes_per_token"] == BYTES_PER_TOKEN
    assert task.hparams["seconds_budget"] == 30.0
    hparams = dict(task.hparams)
    assert dict(task_from_hparams(hparams).hparams) == hparams
    for key in ("bytes_per_token", "seconds_budget"):  # checkpoints of earlier versions
        del hparams[key]
    rebuilt = task_from_hparams(hparams)
    assert rebuilt.hparams["bytes_per_token"] is None
    assert rebuilt.hparams["seconds_budget"] is None


def _head_mask(task: LanguageModelTask) -> torch.Tensor:
    """[L, H] ones but for head 1 of the first layer, gated off."""
    mask = torch.ones(task.config.num_layers, task.config.num_heads)
    mask[0, 1] = 0.0
    return mask


def test_the_head_mask_changes_the_metrics_and_the_forward() -> None:
    task = attentive(tiny_task())
    batches = [padded_batch(batch, left=True) for batch in hand_made_batches(task)]
    head_mask = _head_mask(task)
    masked_model = functools.partial(task.model, head_mask=head_mask)
    expected = recount(SimpleNamespace(model=masked_model), batches)["loss"]
    assert abs(expected - recount(task, batches)["loss"]) > 1e-3 * expected
    task.head_mask = head_mask
    trainer = quick_trainer()
    trainer.validate(task, dataloaders=loader(batches), verbose=False)
    assert float(trainer.callback_metrics["val/loss"]) == pytest.approx(expected, rel=1e-5)
    ids, padding = batches[0]["input_ids"], batches[0]["attention_mask"]
    with torch.no_grad():
        logits = task(ids, padding)
        assert torch.equal(logits, masked_model(ids, attention_mask=padding))
        assert not torch.allclose(logits, task.model(ids, attention_mask=padding), atol=1e-4)
        assert not torch.allclose(logits, masked_model(ids), atol=1e-4)


def test_the_head_mask_is_no_part_of_the_weights() -> None:
    task = tiny_task()
    task.head_mask = _head_mask(task)
    assert "head_mask" not in task.state_dict()
    tiny_task().load_state_dict(task.state_dict())  # strict: the same keys
