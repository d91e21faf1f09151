"""What ``mode=eval`` and the features' evaluations share: a checkpoint's task, the data
``data.evaluation`` chooses for it, and the head of its records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from conf.schema import Settings
from data.config import DataConfig
from data.datamodule import LMDataModule
from data.evaluation import ScoredText, data_to_evaluate
from training.task import LanguageModelTask, task_from_hparams

# Minimal pairs and harness tasks score the network in its float32.
FLOAT32 = "32-true"


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
