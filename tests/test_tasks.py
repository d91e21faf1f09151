"""Tests for training/task.py: the loss and the learning-rate schedule."""

from __future__ import annotations

import math

import pytest
import torch

from conf.schema import OptimConfig
from data.config import DataConfig
from tests.test_models import tiny_config
from training.task import MaskedLMTask, warmup_cosine

OPTIM = OptimConfig(
    lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, warmup_steps=1, min_lr_ratio=0.1
)


def test_mlm_batch_without_masked_tokens_has_zero_loss_not_nan() -> None:
    cfg = tiny_config(arch="encoder")
    task = MaskedLMTask(
        model_config=cfg,
        optim_config=OPTIM,
        tokenizer_json="{}",
        data_config=DataConfig(),
        chars_per_token={},
    )
    ids = torch.randint(5, cfg.vocab_size, (2, 8))
    labels = torch.full_like(ids, -100)
    loss, _ = task._loss({"input_ids": ids, "labels": labels})
    assert loss.item() == 0.0
    labels[0, 3] = ids[0, 3]  # one target: the mean over targets is that token's loss
    loss, logits = task._loss({"input_ids": ids, "labels": labels})
    expected = torch.nn.functional.cross_entropy(logits[0, 3:4], ids[0, 3:4])
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_warmup_then_cosine_to_the_floor() -> None:
    def lr(step: int) -> float:
        return warmup_cosine(step, warmup_steps=10, total_steps=110, min_ratio=0.1)

    assert [round(lr(s), 4) for s in (0, 4, 9)] == [round((s + 1) / 11, 4) for s in (0, 4, 9)]
    assert lr(10) == pytest.approx(1.0)
    assert lr(60) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr(110) == pytest.approx(0.1) and lr(500) == pytest.approx(0.1)
    steps = [lr(s) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(steps, steps[1:], strict=False))  # monotone decay
