"""The fine-tuning task's numbers (features/finetune/task.py) recounted on hand-made batches
with an untrained tiny encoder, through a real Trainer in seconds: the validation and test
loss (weighted by each batch's examples), accuracy, F1 and Matthews correlation of two and
three classes with the confusion matrix kept for the record, a regression's Pearson and
Spearman correlations (against scipy), their mean and the MSE, each pass counted afresh; the
metrics at their edges (one example, none, scores below 1); the training loss and what a
non-finite one does; AdamW's groups, the fused kernel and the warmup-cosine schedule to 0,
stepped every step; the random states a resume restores; and the task rebuilt from its
hyper-parameters. (tests/features/finetune/test_classifier.py checks the head and the metric
functions themselves.)"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch
from scipy import stats

from features.finetune.config import FinetuneConfig
from features.finetune.task import (
    ClassificationTask,
    accuracy,
    average_ranks,
    classification_task_from_hparams,
    f1_score,
    matthews_correlation,
    metric_names,
    pearson,
    spearman,
)
from tests.tiny_models import VOCAB, tiny_config
from tests.tiny_tasks import loader, quick_trainer, resumed_random_states_come_back_once
from training.task import warmup_cosine

FINETUNE = FinetuneConfig(lr=1e-3, weight_decay=0.1, warmup_ratio=0.25)
TOTAL_STEPS = 10  # warmup: ceil(0.25 x 10) = 3 steps
TOKENIZER_JSON = '{"model": "tiny"}'
ROWS_PER_BATCH = (2, 5, 6)  # unequal: a plain mean over batches is not the mean over examples
LENGTH = 12


def _classifier(problem: str, classes: int) -> dict[str, Any]:
    """A fine-tuned checkpoint's ``classifier`` hyper-parameters."""
    return {
        "task": "files",
        "label_names": [f"class{k}" for k in range(classes)],
        "metric": "pearson_spearman" if problem == "regression" else "accuracy",
        "has_pairs": True,
        "pretrained": {"checkpoint": "pretrained.ckpt", "step": 7},
        "total_steps": TOTAL_STEPS,
        "problem": problem,
    }


def _inputs() -> list[dict[str, torch.Tensor]]:
    """Right-padded batches of two segments, without labels."""
    generator = torch.Generator().manual_seed(1)
    batches = []
    for rows in ROWS_PER_BATCH:
        lengths = torch.randint(4, LENGTH + 1, (rows, 1), generator=generator)
        positions = torch.arange(LENGTH)
        mask = (positions < lengths).long()  # (B, T)
        batches.append(
            {
                "input_ids": torch.randint(5, VOCAB, (rows, LENGTH), generator=generator) * mask,
                "attention_mask": mask,
                "token_type_ids": (positions >= lengths // 2).long() * mask,
            }
        )
    return batches


def _task(problem: str = "classification", classes: int = 3) -> ClassificationTask:
    """An untrained encoder with token types, its attention and head sharpened (at init an
    encoder's [CLS] state barely depends on what it attends to, and the logits are ~0.01),
    and its logits centred on the batches' examples, so that every class is predicted."""
    torch.manual_seed(0)
    task = ClassificationTask(
        tiny_config("encoder", type_vocab_size=2),
        TOKENIZER_JSON,
        FINETUNE,
        _classifier(problem, classes),
    )
    with torch.no_grad():
        for name, weight in task.model.backbone.named_parameters():
            if ".attn." in name and weight.dim() == 2:
                weight.mul_(10)
        task.model.score.weight.mul_(100)
        task.model.score.bias.sub_(_logits(task, _inputs()).mean(0).float())
    return task


def _batches(task: ClassificationTask) -> list[dict[str, torch.Tensor]]:
    """The batches with labels: a classification's are the network's own argmax for every
    other example (so accuracy is well away from 0 and 1), a regression's scores its
    prediction plus noise, on a grid of 0.5 (so they tie)."""
    generator = torch.Generator().manual_seed(2)
    batches = _inputs()
    for batch in batches:
        logits = _logits(task, [batch])  # (B, K)
        rows, classes = logits.shape
        if task.regression:
            noisy = logits[:, 0].float() + torch.randn(rows, generator=generator)
            batch["labels"] = (noisy * 2).round() / 2
        else:
            labels = torch.randint(0, classes, (rows,), generator=generator)
            labels[::2] = logits.argmax(-1)[::2]
            batch["labels"] = labels
    return batches


def _logits(
    task: ClassificationTask,
    batches: list[dict[str, torch.Tensor]],
    mask: bool = True,
    types: bool = True,
) -> torch.Tensor:
    """[N, K] logits of every example, in float64, the network given each batch's padding
    mask and token types (or not)."""
    with torch.no_grad():
        return torch.cat(
            [
                task.model(
                    batch["input_ids"],
                    batch["attention_mask"] if mask else None,
                    token_type_ids=batch["token_type_ids"] if types else None,
                ).double()
                for batch in batches
            ]
        )


def _labels(batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    return torch.cat([batch["labels"] for batch in batches])


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean negative log-likelihood of ``labels`` [N] under ``logits`` [N, K]."""
    log_p = torch.log_softmax(logits, dim=-1)
    return -float(log_p[range(len(labels)), labels].mean())


def _classification_recount(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
    """Loss, accuracy, F1 (class 1's of two classes, else the mean over classes) and
    Matthews correlation (of the one-hot codes) from their definitions, and the confusion
    matrix, [true][predicted]."""
    classes = logits.shape[1]
    true, predicted = labels.tolist(), logits.argmax(-1).tolist()
    confusion = [[0] * classes for _ in range(classes)]
    for t, p in zip(true, predicted, strict=True):
        confusion[t][p] += 1
    f1 = []
    for k in range(classes):
        tp = sum(t == p == k for t, p in zip(true, predicted, strict=True))
        errors = sum((t == k) != (p == k) for t, p in zip(true, predicted, strict=True))
        f1.append(2 * tp / (2 * tp + errors) if tp + errors else 0.0)
    x, y = np.eye(classes)[true], np.eye(classes)[predicted]  # (N, K) one-hot
    x, y = x - x.mean(0), y - y.mean(0)
    return {
        "loss": _cross_entropy(logits, labels),
        "accuracy": sum(t == p for t, p in zip(true, predicted, strict=True)) / len(true),
        "f1": f1[1] if classes == 2 else float(np.mean(f1)),
        "mcc": float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum())),
        "confusion": confusion,
    }


def _regression_recount(logits: torch.Tensor, scores: torch.Tensor) -> dict[str, float]:
    """The regression's loss and metrics by scipy and numpy."""
    predicted, true = logits[:, 0].numpy(), scores.double().numpy()
    mse = float(np.mean((predicted - true) ** 2))
    r = float(stats.pearsonr(predicted, true)[0])
    rho = float(stats.spearmanr(predicted, true)[0])
    return {
        "loss": mse,
        "pearson_spearman": (r + rho) / 2,
        "pearson": r,
        "spearman": rho,
        "mse": mse,
    }


def _score(task: ClassificationTask, stage: str, batches: list[dict]) -> L.Trainer:
    """A validation or test pass of ``task`` over ``batches``; the trainer that ran it."""
    trainer = quick_trainer()
    run = trainer.validate if stage == "val" else trainer.test
    run(task, dataloaders=loader(batches), verbose=False)
    return trainer


def _logged(trainer: L.Trainer) -> dict[str, float]:
    return {name: float(value) for name, value in trainer.callback_metrics.items()}


def _assert_the_inputs_matter(task: ClassificationTask, batches: list[dict]) -> None:
    """The logits differ without the padding mask and without the token types, so that a
    recount can tell whether the task passed them."""
    logits = _logits(task, batches)
    for without in (_logits(task, batches, mask=False), _logits(task, batches, types=False)):
        assert (logits - without).abs().max() > 1e-2


# ------------------------------------------------------------------- validation and test


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("stage", ["val", "test"])
def test_classification_metrics_are_the_recount_of_each_pass(stage: str, classes: int) -> None:
    """Every metric of a pass over all the batches, then of a second pass over the last
    two: each pass starts from nothing."""
    task = _task(classes=classes)
    batches = _batches(task)
    _assert_the_inputs_matter(task, batches)
    for scored in (batches, batches[1:]):
        expected = _classification_recount(_logits(task, scored), _labels(scored))
        if scored is batches:
            assert 0.2 < expected["accuracy"] < 0.9 and expected["mcc"] != 0.0
            batch_means = np.mean(
                [_cross_entropy(_logits(task, [b]), b["labels"]) for b in batches]
            )
            assert abs(batch_means - expected["loss"]) > 1e-3  # the weighting can tell
        trainer = _score(task, stage, scored)
        names = metric_names("classification")
        assert _logged(trainer) == pytest.approx(
            {f"{stage}/{name}": expected[name] for name in names}, rel=1e-5
        )
        assert task.confusion == {stage: expected["confusion"]}
        # The progress bar shows the validation loss only.
        assert set(trainer.progress_bar_metrics) == ({"val/loss"} if stage == "val" else set())


@pytest.mark.parametrize("stage", ["val", "test"])
def test_regression_metrics_are_scipys_for_each_pass(stage: str) -> None:
    task = _task("regression")
    batches = _batches(task)
    _assert_the_inputs_matter(task, batches)
    scores = _labels(batches)
    assert scores.dtype == torch.float32 and len(scores.unique()) < len(scores)  # ties
    for scored in (batches, batches[1:]):
        expected = _regression_recount(_logits(task, scored), _labels(scored))
        assert 0.2 < expected["pearson"] < 0.95 and expected["spearman"] != expected["pearson"]
        trainer = _score(task, stage, scored)
        names = metric_names("regression")
        assert _logged(trainer) == pytest.approx(
            {f"{stage}/{name}": expected[name] for name in names}, rel=1e-5
        )
        assert task.confusion == {}  # a regression has none
        assert set(trainer.progress_bar_metrics) == ({"val/loss"} if stage == "val" else set())


def test_the_metric_names_are_what_a_pass_logs_loss_first() -> None:
    assert metric_names("classification") == ("loss", "accuracy", "f1", "mcc")
    assert metric_names("regression") == ("loss", "pearson_spearman", "pearson", "spearman", "mse")


# ------------------------------------------------------------------------ metric edges


def _confusion(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)


def test_classification_metrics_of_one_example_and_of_none() -> None:
    one = _confusion([[0, 0], [0, 1]])  # one example of class 1, predicted right
    assert accuracy(one) == 1.0 and f1_score(one) == 1.0
    none = _confusion([[0, 0], [0, 0]])
    assert (accuracy(none), f1_score(none), matthews_correlation(none)) == (0.0, 0.0, 0.0)


def test_f1_with_a_class_predicted_once_and_below_one_half() -> None:
    """F1 = 2 TP / (2 TP + FP + FN) of class 1: precision and recall from single counts,
    and a precision and recall whose sum is below 1."""
    once = _confusion([[3, 0], [2, 1]])  # class 1: TP 1, FP 0, FN 2
    assert f1_score(once) == pytest.approx(2 * 1 / (2 * 1 + 0 + 2))
    recalled = _confusion([[3, 2], [0, 1]])  # class 1: TP 1, FP 2, FN 0
    assert f1_score(recalled) == pytest.approx(2 * 1 / (2 * 1 + 2 + 0))
    poor = _confusion([[0, 3], [3, 1]])  # class 1: TP 1, FP 3, FN 3: precision = recall = 1/4
    assert f1_score(poor) == pytest.approx(2 * 1 / (2 * 1 + 3 + 3))


def test_correlations_of_small_scores_and_of_constants() -> None:
    """Scores whose spread is below 1 (the denominator too) are still correlated; a
    constant has no correlation: 0, not NaN."""
    x = torch.tensor([0.0, 0.01, 0.03, 0.02, 0.05])
    y = torch.tensor([0.02, 0.0, 0.04, 0.01, 0.03])
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-6)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-6)
    assert pearson(torch.full((5,), 0.3), y) == 0.0
    assert pearson(x, torch.full((5,), 0.3)) == 0.0


def test_average_ranks_are_scipys_with_ties() -> None:
    values = torch.tensor([2.0, 7.0, 2.0, 5.0, 7.0, 7.0, 1.0, 9.0])
    expected = stats.rankdata(values.numpy(), method="average")
    assert average_ranks(values).tolist() == expected.tolist()


# ------------------------------------------------------------------------------ training


def test_the_training_loss_is_logged_on_the_progress_bar() -> None:
    task = _task()
    batch = _batches(task)[2]
    expected = _cross_entropy(_logits(task, [batch]), batch["labels"])  # before the step
    trainer = quick_trainer(max_steps=1, log_every_n_steps=1)
    trainer.fit(task, train_dataloaders=loader([batch]))
    assert float(trainer.callback_metrics["train/loss"]) == pytest.approx(expected, rel=1e-5)
    assert set(trainer.progress_bar_metrics) == {"train/loss"}


def test_a_regression_trains_on_the_mean_squared_error() -> None:
    task = _task("regression")
    batch = _batches(task)[2]
    expected = _regression_recount(_logits(task, [batch]), batch["labels"])["mse"]
    trainer = quick_trainer(max_steps=1, log_every_n_steps=1)
    trainer.fit(task, train_dataloaders=loader([batch]))
    assert float(trainer.callback_metrics["train/loss"]) == pytest.approx(expected, rel=1e-5)


def test_a_non_finite_training_loss_stops_with_the_rate_to_lower() -> None:
    task = _task()
    batch = _batches(task)[2]
    with torch.no_grad():
        task.model.score.weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError) as error:
        quick_trainer(max_steps=1).fit(task, train_dataloaders=loader([batch]))
    assert str(error.value) == (
        f"fine-tuning loss became nan at step 0; lower finetune.lr (now {FINETUNE.lr})"
    )


class _Rates(L.Callback):
    """Each group's learning rate at the start of every training step."""

    def __init__(self) -> None:
        self.rates: list[list[float]] = []

    def on_train_batch_start(self, trainer: L.Trainer, *_: Any) -> None:
        self.rates.append([group["lr"] for group in trainer.optimizers[0].param_groups])


def test_adamw_warms_up_then_decays_to_zero_every_step() -> None:
    """Warmup over ceil(warmup_ratio x total) steps, then the cosine to 0 at the total, the
    rate changed after every step (all in one epoch): all ten steps and one past the total."""
    task = _task()
    batch = _batches(task)[1]
    rates = _Rates()
    steps = TOTAL_STEPS + 1
    trainer = quick_trainer(max_steps=steps, num_sanity_val_steps=0, callbacks=[rates])
    trainer.fit(task, train_dataloaders=loader([batch] * steps))
    warmup = math.ceil(FINETUNE.warmup_ratio * TOTAL_STEPS)
    expected = [
        FINETUNE.lr * warmup_cosine(s, warmup_steps=warmup, total_steps=TOTAL_STEPS, min_ratio=0)
        for s in range(steps)
    ]
    assert expected[-1] == 0.0
    assert rates.rates == [pytest.approx([rate, rate], rel=1e-9, abs=1e-15) for rate in expected]


def test_adamw_decays_the_matrices_only() -> None:
    task = _task()
    optimizer = task.configure_optimizers()["optimizer"]
    assert isinstance(optimizer, torch.optim.AdamW)
    decayed, plain = optimizer.param_groups
    trainable = [p for p in task.parameters() if p.requires_grad]
    assert {id(p) for p in decayed["params"]} == {id(p) for p in trainable if p.dim() >= 2}
    assert {id(p) for p in plain["params"]} == {id(p) for p in trainable if p.dim() < 2}
    assert (decayed["weight_decay"], plain["weight_decay"]) == (FINETUNE.weight_decay, 0.0)
    assert optimizer.defaults["betas"] == (0.9, 0.999)


@pytest.mark.parametrize(("device", "fused"), [("cpu", True), ("cuda", True), ("mps", False)])
def test_adamw_is_fused_where_torch_has_the_kernel(monkeypatch, device: str, fused: bool) -> None:
    """Asked of the task's device (faked here: the parameters stay on the CPU)."""
    monkeypatch.setattr(ClassificationTask, "device", property(lambda _: torch.device(device)))
    assert _task().configure_optimizers()["optimizer"].defaults["fused"] is fused


def test_a_resumed_task_puts_the_random_states_back_before_its_first_batch() -> None:
    resumed_random_states_come_back_once(_task)
    fresh = _task()
    fresh.on_load_checkpoint({})  # a checkpoint without states: nothing to restore
    torch.manual_seed(9)
    fresh.on_train_batch_start(None, 0)
    drawn = torch.rand(4)
    torch.manual_seed(9)
    assert torch.equal(drawn, torch.rand(4))


# ------------------------------------------------------------------- hyper-parameters


@pytest.mark.parametrize(
    ("problem", "classes", "outputs"), [("classification", 3, 3), ("regression", 1, 1)]
)
def test_a_task_is_rebuilt_from_its_hyper_parameters(
    problem: str, classes: int, outputs: int
) -> None:
    task = _task(problem, classes)
    classifier = _classifier(problem, classes)
    assert dict(task.hparams) == {
        "model_config": tiny_config("encoder", type_vocab_size=2).to_dict(),
        "tokenizer_json": TOKENIZER_JSON,
        "finetune_config": dataclasses.asdict(FINETUNE),
        "classifier": classifier,
    }
    rebuilt = classification_task_from_hparams(dict(task.hparams))
    assert dict(rebuilt.hparams) == dict(task.hparams)
    assert rebuilt.config == task.config == tiny_config("encoder", type_vocab_size=2)
    assert rebuilt.finetune == task.finetune == FINETUNE
    assert rebuilt.label_names == classifier["label_names"]
    assert rebuilt.regression is (problem == "regression")
    assert rebuilt.model.score.out_features == outputs
    rebuilt.load_state_dict(task.state_dict())  # the same network
    batches = _batches(task)
    torch.testing.assert_close(_logits(rebuilt, batches), _logits(task, batches))


def test_a_checkpoint_from_before_regressions_is_a_classifier() -> None:
    classifier = _classifier("classification", 2)
    del classifier["problem"]
    task = ClassificationTask(tiny_config("encoder"), TOKENIZER_JSON, FINETUNE, classifier)
    assert not task.regression and task.model.score.out_features == 2
