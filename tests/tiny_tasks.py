"""Untrained tiny Lightning tasks and what the task tests run them with: hand-made batches
(their targets recounted from the network's logits), a loader that hands them out in order, a
quiet CPU Trainer, a fake clock; shared by tests/training/ and the fine-tuning task's tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from conf.schema import OptimConfig
from data.collate import IGNORE_INDEX
from data.config import DataConfig
from tests.tiny_models import VOCAB, tiny_config
from training.task import LanguageModelTask, task_class

OPTIM = OptimConfig(
    lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, warmup_steps=1, min_lr_ratio=0.1
)
# optim=muon's settings at the same rates (Muon for the blocks' matrices, AdamW for the rest).
MUON = OptimConfig(
    kind="muon",
    lr=3e-3,
    weight_decay=0.1,
    beta1=0.9,
    beta2=0.95,
    warmup_steps=1,
    min_lr_ratio=0.1,
    muon_lr=0.02,
    muon_momentum=0.95,
    muon_weight_decay=0.01,
)
# Characters per token of each split: bpc divides by the one of the split scored.
CHARS_PER_TOKEN = {"validation": 3.0, "test": 5.0}


def tiny_task(
    arch: str = "decoder",
    chars_per_token: dict[str, float] | None = None,
    optim: OptimConfig = OPTIM,
    total_steps: int | None = 10,
    **model: Any,
) -> LanguageModelTask:
    """An untrained task of ``tiny_config(arch, **model)``."""
    torch.manual_seed(0)
    return task_class(arch)(
        model_config=tiny_config(arch, **model),
        optim_config=optim,
        tokenizer_json="{}",
        data_config=DataConfig(),
        chars_per_token=CHARS_PER_TOKEN if chars_per_token is None else chars_per_token,
        total_steps=total_steps,
    )


def hand_made_batches(task: LanguageModelTask) -> list[dict[str, torch.Tensor]]:
    """Two batches with 3 and 32 targets (so a plain mean over batches is not the mean over
    targets); a third of the first batch's targets and half the second's are the network's
    own argmax, so that accuracy is well away from 0."""
    generator = torch.Generator().manual_seed(1)
    batches = []
    for n_targets in (3, 32):
        ids = torch.randint(5, VOCAB, (2, 16), generator=generator)
        labels = torch.randint(5, VOCAB, (2, 16), generator=generator)
        with torch.no_grad():
            argmax = task.model(ids).argmax(-1)  # (B, T)
        labels.view(-1)[::2] = argmax.view(-1)[::2]
        labels.view(-1)[n_targets:] = IGNORE_INDEX
        batches.append({"input_ids": ids, "labels": labels})
    return batches


def recount(
    task: LanguageModelTask, batches: list[dict[str, torch.Tensor]], inputs: bool = True
) -> dict[str, float]:
    """Mean negative log-likelihood and accuracy over every target of ``batches``, the
    network given each batch's padding mask and document ids (none when not ``inputs``)."""
    nll, correct, targets = 0.0, 0, 0
    with torch.no_grad():
        for batch in batches:
            given = {k: v for k, v in batch.items() if k in ("attention_mask", "document_ids")}
            logits = task.model(batch["input_ids"], **(given if inputs else {})).double()
            keep = batch["labels"] != IGNORE_INDEX
            log_p = torch.log_softmax(logits[keep], dim=-1)  # (N, V)
            nll -= log_p.gather(-1, batch["labels"][keep].unsqueeze(-1)).sum().item()
            correct += int((logits[keep].argmax(-1) == batch["labels"][keep]).sum())
            targets += int(keep.sum())
    return {"loss": nll / targets, "acc": correct / targets}


def loader(batches: list[dict[str, torch.Tensor]]) -> DataLoader:
    """The batches as they are, in order."""
    return DataLoader(batches, batch_size=None)


def quick_trainer(**options: Any) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **options,
    )


class FakeClock:
    """training.task's perf_counter: half a second later at every call. The task reads it at
    every step's start and end, so consecutive step ends are one second apart."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.5
        return self.now


def with_rows(batch: dict[str, torch.Tensor], rows: int) -> dict[str, torch.Tensor]:
    """``batch`` with ``rows`` rows (its rows repeated as needed)."""
    return {k: v.repeat(rows, 1)[:rows] for k, v in batch.items()}


def padded_batch(batch: dict[str, torch.Tensor], left: bool) -> dict[str, torch.Tensor]:
    """``batch`` with the last (or first) 10 of each row's 16 positions padding, never
    targets, and a target at every real position."""
    mask = torch.ones_like(batch["input_ids"])
    pad = slice(0, 10) if left else slice(-10, None)
    mask[:, pad] = 0
    labels = batch["input_ids"].roll(-1, dims=1)
    labels[:, pad] = IGNORE_INDEX
    return {**batch, "labels": labels, "attention_mask": mask}


def attentive(task: LanguageModelTask) -> LanguageModelTask:
    """``task`` with its attention matrices and output norm x 10: an untrained network's
    predictions then depend on what each position attends to (at init they barely do)."""
    norm = task.model.final_norm or task.model.mlm_head.norm
    with torch.no_grad():
        for name, weight in task.model.named_parameters():
            if ".attn." in name and weight.dim() == 2:
                weight.mul_(10)
        norm.weight.mul_(10)
    return task


def resumed_random_states_come_back_once(make_task: Callable[[], L.LightningModule]) -> None:
    """A task saved and resumed puts torch's random state back before its first batch, and
    only then (``make_task`` seeds 0 itself; the states are saved after)."""
    torch.manual_seed(123)
    checkpoint: dict[str, Any] = {}
    make_task().on_save_checkpoint(checkpoint)
    expected = torch.rand(4)
    resumed = make_task()
    resumed.on_load_checkpoint(checkpoint)
    torch.manual_seed(9)  # what happens between loading and the first batch
    resumed.on_train_batch_start(None, 0)
    assert torch.equal(torch.rand(4), expected)
    torch.manual_seed(9)
    resumed.on_train_batch_start(None, 1)  # once only: later batches draw on
    assert not torch.equal(torch.rand(4), expected)
