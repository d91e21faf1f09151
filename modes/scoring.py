"""What ``mode=eval`` and the features' evaluations share: a checkpoint's task, the data
``data.evaluation`` chooses for it, and the head of its records."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.precision import Precision
from torch import Tensor, nn

from conf.schema import Settings
from data.config import DataConfig
from data.datamodule import LMDataModule
from data.evaluation import ScoredText, data_to_evaluate
from training.task import LanguageModelTask, task_from_hparams
from training.trainer import evaluation_trainer

# Minimal pairs and harness tasks score the network in its float32 (the head analysis scores
# in mode=eval's precision: EvalPrecision).
FLOAT32 = "32-true"


@dataclass(frozen=True)
class EvalPrecision:
    """The precision and device ``mode=eval``'s trainer scores in, for code that runs the
    network itself: the weights converted, the batches moved and the forward passes run the
    way Lightning's evaluation loop does it, with the trainer's own precision plugin
    (``bf16-mixed``: autocast to bfloat16; ``-true``: the weights in that dtype)."""

    precision: str  # trainer.precision, as mode=eval records it
    device: torch.device
    plugin: Precision

    def network(self, model: nn.Module) -> nn.Module:
        """``model`` in eval mode, its weights in the precision's dtype on the device."""
        return self.plugin.convert_module(model).to(self.device).eval()

    def batch(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """``batch`` as the evaluation loop hands it to the network: converted, then moved."""
        return {k: v.to(self.device) for k, v in self.plugin.convert_input(batch).items()}

    @contextmanager
    def scoring(self, split: str) -> Iterator[None]:
        """The context of the evaluation loop's step on ``split`` (validation or test)."""
        step = (
            self.plugin.val_step_context if split == "validation" else self.plugin.test_step_context
        )
        with step():
            yield


def eval_precision(settings: Settings) -> EvalPrecision:
    """What ``mode=eval`` would score in with ``settings`` (already through
    ``training.precision.native_precision``, as mode=eval's are): its trainer's precision
    plugin and device, so that a feature's loss is mode=eval's to float tolerance."""
    trainer = evaluation_trainer(settings)
    return EvalPrecision(
        settings.trainer.precision, trainer.strategy.root_device, trainer.precision_plugin
    )


def task_and_data(
    checkpoint: dict[str, Any], settings: Settings, stride: int | None
) -> tuple[LanguageModelTask, LMDataModule, ScoredText]:
    """The checkpoint's task with its weights, the data module that scores it (windows sliding
    by ``stride``) and that data counted."""
    hparams = checkpoint["hyper_parameters"]
    arch, window = hparams["model_config"]["arch"], hparams["model_config"]["max_seq_len"]
    data = data_to_evaluate(DataConfig(**hparams["data_config"]), settings.data, settings.overrides)
    datamodule, text = data.prepare(
        arch,
        window,
        seed=settings.job.seed,  # the encoder's masks: fixed by the seed, not by chance
        tokenizer_json=hparams["tokenizer_json"],
        stride=stride,
    )
    # bpc and bpb divide by the characters (bytes) per token of the text scored, not of the
    # training run.
    task = task_from_hparams(
        hparams,
        chars_per_token=datamodule.chars_per_token,
        bytes_per_token=datamodule.bytes_per_token,
    )
    task.load_state_dict(checkpoint["state_dict"])
    return task, datamodule, text


def scored_batches(datamodule: LMDataModule, text: ScoredText) -> list[dict[str, Tensor]]:
    """Every batch of the split ``text`` scores, as its loader draws them."""
    split = datamodule.test_dataloader() if text.split == "test" else datamodule.val_dataloader()
    return list(split)


def record_head(ckpt: Path, checkpoint: dict[str, Any], text: ScoredText) -> dict[str, Any]:
    """Which checkpoint, at which step, on which data: how every record of one starts."""
    return {
        "checkpoint": str(ckpt.resolve()),
        "step": int(checkpoint.get("global_step", 0)),
        "arch": checkpoint["hyper_parameters"]["model_config"]["arch"],
        "data": text.data,
        "data_fingerprint": text.fingerprint,
        "split": text.label,
    }
