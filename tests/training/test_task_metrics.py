"""The Lightning task's numbers (training/task.py) recounted on hand-made batches with an
untrained tiny network, through a real Trainer in seconds: the validation and test loss
(weighted by each batch's targets), perplexity (and its clamp), accuracy, bits per character
of the split scored, the validation curve, what a non-finite loss does, the training loss's
logging steps, throughput against a fake clock, and the peak-FLOPs dtype for MFU; the padding
mask and document ids the metrics' forward is given; the random states a resume restores, the
task rebuilt from its hyper-parameters, and its optimiser and schedule."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import training.task
from data.collate import IGNORE_INDEX
from tests.tiny_tasks import (
    CHARS_PER_TOKEN,
    OPTIM,
    FakeClock,
    attentive,
    hand_made_batches,
    loader,
    padded_batch,
    quick_trainer,
    recount,
    resumed_random_states_come_back_once,
    tiny_task,
    with_rows,
)
from tests.training.test_tasks import MUON
from training.optim import MuonWithAdamW
from training.task import (
    LanguageModelTask,
    _peak_flops,
    task_class,
    task_from_hparams,
    warmup_cosine,
)


@pytest.mark.parametrize("stage", ["val", "test"])
def test_eval_metrics_are_the_recount_over_all_targets(stage: str) -> None:
    task = tiny_task()
    batches = hand_made_batches(task)
    expected = recount(task, batches)
    assert 0.1 < expected["acc"] < 0.9
    trainer = quick_trainer()
    score = trainer.validate if stage == "val" else trainer.test
    score(task, dataloaders=loader(batches), verbose=False)
    logged = {k: float(v) for k, v in trainer.callback_metrics.items()}
    split = "validation" if stage == "val" else "test"
    assert logged == pytest.approx(
        {
            f"{stage}/loss": expected["loss"],
            f"{stage}/ppl": math.exp(expected["loss"]),
            f"{stage}/acc": expected["acc"],
            f"{stage}/bpc": expected["loss"] / math.log(2) / CHARS_PER_TOKEN[split],
        },
        rel=1e-5,
    )
    # The progress bar shows the validation loss only.
    assert set(trainer.progress_bar_metrics) == ({"val/loss"} if stage == "val" else set())
    assert task.val_curve == []  # a validation outside training is no point of the curve


def test_without_characters_per_token_there_is_no_bpc_and_an_encoder_has_none() -> None:
    for task in (tiny_task(chars_per_token={"test": 5.0}), tiny_task("encoder")):
        trainer = quick_trainer()
        trainer.validate(task, dataloaders=loader(hand_made_batches(task)), verbose=False)
        assert set(trainer.callback_metrics) == {"val/loss", "val/ppl", "val/acc"}


def test_perplexity_is_clamped_at_exp_50() -> None:
    """A loss above 50 nats (a confident network that is always wrong) reads as exp(50)."""
    task = tiny_task()
    with torch.no_grad():
        task.model.final_norm.weight.mul_(1e3)  # logits x 1000
    batches = hand_made_batches(task)
    for batch in batches:
        with torch.no_grad():
            batch["labels"] = task.model(batch["input_ids"]).argmin(-1)  # the least likely
    trainer = quick_trainer()
    trainer.validate(task, dataloaders=loader(batches), verbose=False)
    assert float(trainer.callback_metrics["val/loss"]) > 50
    assert float(trainer.callback_metrics["val/ppl"]) == pytest.approx(math.exp(50), rel=1e-6)


def test_the_validation_curve_holds_each_validation_of_training_and_survives_a_checkpoint():
    task = tiny_task()
    batches = hand_made_batches(task)
    trainer = quick_trainer(max_steps=2, val_check_interval=1, num_sanity_val_steps=0)
    trainer.fit(task, train_dataloaders=loader(batches[1:] * 4), val_dataloaders=loader(batches))
    assert [point[0] for point in task.val_curve] == [1, 2]
    assert task.val_curve[-1][1] == pytest.approx(recount(task, batches)["loss"], rel=1e-5)
    checkpoint: dict[str, Any] = {}
    task.on_save_checkpoint(checkpoint)
    resumed = tiny_task()
    resumed.on_load_checkpoint(checkpoint)
    assert resumed.val_curve == task.val_curve
    resumed.on_load_checkpoint({})  # a checkpoint of an earlier version has no curve
    assert resumed.val_curve == []


def _nan_task() -> LanguageModelTask:
    task = tiny_task()
    with torch.no_grad():
        task.model.final_norm.weight.fill_(float("nan"))
    return task


def test_a_non_finite_validation_loss_stops_training_but_is_reported_by_validate() -> None:
    task = _nan_task()
    batches = hand_made_batches(tiny_task())
    with pytest.raises(FloatingPointError, match=r"^validation loss became nan at step 0: "):
        # The sanity check validates before the first step, as training.
        quick_trainer(max_steps=1, num_sanity_val_steps=1).fit(
            task, train_dataloaders=loader(batches[1:] * 4), val_dataloaders=loader(batches)
        )
    trainer = quick_trainer()
    trainer.validate(task, dataloaders=loader(batches), verbose=False)
    assert math.isnan(float(trainer.callback_metrics["val/loss"]))


def test_a_non_finite_training_loss_stops_at_once_on_a_cpu() -> None:
    batches = hand_made_batches(tiny_task())
    trainer = quick_trainer(max_steps=3, log_every_n_steps=50, num_sanity_val_steps=0)
    with pytest.raises(FloatingPointError, match=r"^training loss became nan at step 0\. "):
        trainer.fit(_nan_task(), train_dataloaders=loader(batches[1:] * 4))


@pytest.mark.parametrize(("steps", "logged"), [(2, False), (3, True)])
def test_the_training_loss_is_logged_on_logging_steps(steps: int, logged: bool) -> None:
    """Every third step: after steps 3, 6, ..; so not after 2."""
    task = tiny_task()
    trainer = quick_trainer(max_steps=steps, log_every_n_steps=3)
    trainer.fit(task, train_dataloaders=loader([hand_made_batches(task)[1]] * steps))
    assert ("train/loss" in trainer.callback_metrics) is logged
    if logged:
        assert "train/loss" in trainer.progress_bar_metrics


@pytest.mark.parametrize(("steps", "logged", "average"), [(2, 16, 16), (4, 40, 32)])
def test_throughput_counts_the_tokens_of_timed_steps_over_their_time(
    monkeypatch, steps: int, logged: float, average: float
) -> None:
    """Batches of 1, 1, 2 and 3 rows of 16 tokens, one second per step by the clock; the first
    step is warm-up, not timed. Logged every 2 steps: the tokens since the last log over
    their seconds (16 at step 2; (32 + 48) / 2 at step 4); the run's average: 96 / 3."""
    monkeypatch.setattr(training.task, "perf_counter", FakeClock().perf_counter)
    task = tiny_task()
    batch = hand_made_batches(task)[1]
    batches = [with_rows(batch, rows) for rows in (1, 1, 2, 3)][:steps]
    trainer = quick_trainer(max_steps=steps, log_every_n_steps=2, num_sanity_val_steps=0)
    assert task.tokens_per_sec() is None  # nothing timed yet
    trainer.fit(task, train_dataloaders=loader(batches))
    assert task.tokens_per_sec() == pytest.approx(average)
    assert float(trainer.callback_metrics["train/tokens_per_sec"]) == pytest.approx(logged)
    assert "train/mfu" not in trainer.callback_metrics  # a CPU has no known peak


def test_mfu_is_the_throughput_in_flops_over_the_peak(monkeypatch) -> None:
    """With a peak for this device and precision (a CPU has none: here 1 GFLOP/s)."""

    def peak_flops(device: torch.device, precision: str) -> float | None:
        return 1e9 if (device.type, precision) == ("cpu", "32-true") else None

    monkeypatch.setattr(training.task, "perf_counter", FakeClock().perf_counter)
    monkeypatch.setattr(training.task, "_peak_flops", peak_flops)
    task = tiny_task()
    batch = with_rows(hand_made_batches(task)[1], 1)  # 16 tokens a step, one second each
    trainer = quick_trainer(max_steps=2, log_every_n_steps=2, num_sanity_val_steps=0)
    trainer.fit(task, train_dataloaders=loader([batch] * 2))
    expected = 16 * task.model.flops_per_token() / 1e9
    assert float(trainer.callback_metrics["train/mfu"]) == pytest.approx(expected, rel=1e-6)


def test_a_validation_is_not_timed_as_training(monkeypatch) -> None:
    monkeypatch.setattr(training.task, "perf_counter", FakeClock().perf_counter)
    task = tiny_task()
    batch = hand_made_batches(task)[1]
    trainer = quick_trainer(
        max_steps=3, val_check_interval=1, log_every_n_steps=1, num_sanity_val_steps=0
    )
    trainer.fit(task, train_dataloaders=loader([batch] * 3), val_dataloaders=loader([batch]))
    # Every step follows a validation: none is timed, and no throughput is logged.
    assert task.tokens_per_sec() is None
    assert "train/tokens_per_sec" not in trainer.callback_metrics


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("bf16-mixed", torch.bfloat16),
        ("bf16-true", torch.bfloat16),
        ("16-mixed", torch.float16),
        ("32-true", torch.float32),
        ("32", torch.float32),
        ("16-true", torch.float16),
        ("64-true", torch.float64),
    ],
)
def test_mfu_asks_the_peak_of_the_precision_trained_in(monkeypatch, precision, dtype) -> None:
    import lightning.fabric.utilities.throughput as throughput

    asked = []
    monkeypatch.setattr(
        throughput,
        "get_available_flops",
        lambda device, dtype: asked.append((device, dtype)) or 1e12,
    )
    assert _peak_flops(torch.device("cpu"), precision) is None
    assert _peak_flops(torch.device("cuda"), precision) == 1e12
    assert asked == [(torch.device("cuda"), dtype)]


def test_accuracy_over_one_target() -> None:
    """One target, the network's own argmax, and a batch without targets: accuracy 1."""
    task = tiny_task("encoder")
    batch = hand_made_batches(task)[1]
    with torch.no_grad():
        argmax = task.model(batch["input_ids"]).argmax(-1)  # (B, T)
    one = torch.full_like(batch["labels"], IGNORE_INDEX)
    one[0, 4] = argmax[0, 4]
    batches = [{**batch, "labels": one}, {**batch, "labels": torch.full_like(one, IGNORE_INDEX)}]
    trainer = quick_trainer()
    trainer.validate(task, dataloaders=loader(batches), verbose=False)
    assert float(trainer.callback_metrics["val/acc"]) == 1.0


@pytest.mark.parametrize("stage", ["val", "test"])
def test_an_evaluation_without_targets_is_one_clear_error(stage: str) -> None:
    """An encoder whose masking chose no token in the whole split: no loss to report (the
    weighted mean over nothing is NaN, which training would call divergence)."""
    task = tiny_task("encoder")
    batch = hand_made_batches(task)[1]
    nothing = {**batch, "labels": torch.full_like(batch["labels"], IGNORE_INDEX)}
    trainer = quick_trainer()
    score = trainer.validate if stage == "val" else trainer.test
    split = "validation" if stage == "val" else "test"
    with pytest.raises(ValueError) as error:
        score(task, dataloaders=loader([nothing]), verbose=False)
    assert str(error.value) == (
        f"the {split} data gave no target to score: the encoder's masking chose no token in "
        "it; give it more text or raise data.mlm_probability"
    )


@pytest.mark.parametrize(("arch", "left"), [("encoder", False), ("decoder", True)])
def test_padding_is_masked_in_the_metrics(arch: str, left: bool) -> None:
    """An encoder's padded examples (padding at the end) and a left-padded decoder batch:
    the metrics are those of the network given the padding mask."""
    task = attentive(tiny_task(arch))
    batches = [padded_batch(batch, left) for batch in hand_made_batches(task)]
    _assert_validation_uses_the_masks(task, batches)


def test_document_ids_are_attended_within_each_document_in_the_metrics() -> None:
    task = attentive(tiny_task())
    batches = []
    for batch in hand_made_batches(task):
        document_ids = torch.zeros_like(batch["input_ids"])
        document_ids[:, 6:] = 1  # (B, T): a second document from position 6
        batches.append({**batch, "document_ids": document_ids})
    _assert_validation_uses_the_masks(task, batches)


def _assert_validation_uses_the_masks(task: LanguageModelTask, batches: list[dict]) -> None:
    """The validation loss is the recount with the batches' masks, which differs from the
    recount without them (so the check can tell)."""
    expected = recount(task, batches)
    unmasked = recount(task, batches, inputs=False)
    assert abs(expected["loss"] - unmasked["loss"]) > 1e-3 * expected["loss"]
    trainer = quick_trainer()
    trainer.validate(task, dataloaders=loader(batches), verbose=False)
    assert float(trainer.callback_metrics["val/loss"]) == pytest.approx(expected["loss"], rel=1e-5)


def test_a_resumed_task_puts_the_random_states_back_before_its_first_batch() -> None:
    resumed_random_states_come_back_once(tiny_task)
    tiny_task().on_load_checkpoint({})  # a checkpoint without states: nothing to restore


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_a_task_is_rebuilt_from_its_hyper_parameters_with_changes(arch: str) -> None:
    task = tiny_task(arch)
    hparams = dict(task.hparams)
    rebuilt = task_from_hparams(hparams, chars_per_token={"test": 2.0})
    assert type(rebuilt) is type(task) and type(task) is task_class(arch)
    assert rebuilt.config == task.config and rebuilt.optim == task.optim
    assert dict(rebuilt.hparams) == {**hparams, "chars_per_token": {"test": 2.0}}
    assert rebuilt.hparams["total_steps"] == 10
    del hparams["total_steps"]  # checkpoints of earlier versions: the Trainer's count
    assert task_from_hparams(hparams).hparams["total_steps"] is None
    rebuilt.load_state_dict(task.state_dict())  # the same network


@pytest.mark.parametrize(("device", "fused"), [("cpu", True), ("cuda", True), ("mps", False)])
def test_adamw_is_fused_where_torch_has_the_kernel(monkeypatch, device: str, fused: bool):
    """Asked of the task's device (faked here: the parameters stay on the CPU)."""
    monkeypatch.setattr(LanguageModelTask, "device", property(lambda _: torch.device(device)))
    assert tiny_task().configure_optimizers()["optimizer"].defaults["fused"] is fused


def test_muon_takes_the_blocks() -> None:
    optimizer = tiny_task(optim=MUON).configure_optimizers()["optimizer"]
    assert isinstance(optimizer, MuonWithAdamW)


@pytest.mark.parametrize("total_steps", [None, 10])
def test_the_schedule_steps_every_step_to_the_total(total_steps: int | None) -> None:
    """After 4 optimiser steps with 1 of warmup, the rate is warmup_cosine(4) of the total:
    the task's own, or else the Trainer's count (max_steps = 4: the floor)."""
    task = tiny_task(total_steps=total_steps)
    batch = hand_made_batches(task)[1]
    trainer = quick_trainer(max_steps=4, num_sanity_val_steps=0)
    trainer.fit(task, train_dataloaders=loader([batch] * 4))
    multiplier = warmup_cosine(4, warmup_steps=1, total_steps=total_steps or 4, min_ratio=0.1)
    rates = [group["lr"] for group in trainer.optimizers[0].param_groups]
    assert rates == pytest.approx([OPTIM.lr * multiplier] * len(rates), rel=1e-9)
