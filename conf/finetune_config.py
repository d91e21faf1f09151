"""The ``finetune`` group: what ``mode=finetune`` trains on and how; validates itself
(conf/schema.py gathers it into ``Settings``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from data.labelled import TASKS as FINETUNE_TASKS
from data.labelled import Columns, LabelledTask, load_task
from models.config import check_field_types, closest

FINETUNE_INITS = ("pretrained", "scratch")
FINETUNE_METRICS = ("accuracy", "f1", "mcc")


@dataclass
class FinetuneConfig:
    """The ``finetune`` block of conf/config.yaml: what ``mode=finetune`` trains on, and how.

    task: ``builtin`` (which reference-documentation topic a paragraph of the built-in corpus
    comes from; no network), ``files`` (``path``: a .csv/.jsonl/.parquet file, its splits
    carved, or a {train:, validation:, test:} mapping) or a GLUE task (sst2, cola, mrpc,
    qqp, qnli, rte, wnli, mnli; from the Hub). text_column, text_pair_column (None: single
    texts) and label_column name a file's columns.
    init: ``pretrained`` (the checkpoint's weights) or ``scratch`` (the same architecture from
    random weights, seeded by ``seed``: what pretraining is measured against).
    The protocol (cramming's "sane" one, for every task): ``epochs`` epochs of batches of
    ``batch_size``, AdamW at ``lr`` with ``weight_decay``, linear warmup over ``warmup_ratio``
    of the steps, then cosine decay to 0; ``max_steps`` (None: the epochs decide) caps it.
    metric: the one the task is known by (None: accuracy; F1 for mrpc/qqp; Matthews
    correlation, mcc, for cola). max_seq_len: examples cut to this many tokens, specials
    included (None: the checkpoint's context; at most that). val_fraction, test_fraction,
    split_seed: the splits carved from train where the task lacks them, the same for every
    job.
    """

    task: str = "builtin"
    path: Any = None
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    init: str = "pretrained"
    epochs: int = 5
    max_steps: int | None = None
    batch_size: int = 32
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    metric: str | None = None
    max_seq_len: int | None = None
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    split_seed: int = 0

    def __post_init__(self) -> None:
        check_field_types(self, "finetune.")
        if self.task not in FINETUNE_TASKS:
            hint = closest(self.task, FINETUNE_TASKS)
            raise ValueError(
                f"finetune.task={self.task} is unknown"
                + (f" (did you mean {hint}?)" if hint else "")
                + f"; choose one of {', '.join(FINETUNE_TASKS)}"
            )
        if self.path is not None and self.task != "files":
            raise ValueError(
                f"finetune.path is for finetune.task=files (got finetune.task={self.task}): "
                "add finetune.task=files or drop finetune.path"
            )
        if self.init not in FINETUNE_INITS:
            raise ValueError(
                f"finetune.init={self.init} is unknown; choose finetune.init=pretrained (the "
                "checkpoint's weights) or finetune.init=scratch (random weights, same shape)"
            )
        if self.metric is not None and self.metric not in FINETUNE_METRICS:
            raise ValueError(
                f"finetune.metric={self.metric} is unknown; choose one of "
                f"{', '.join(FINETUNE_METRICS)} (or null: the task's own)"
            )
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"finetune.{name}={getattr(self, name)} must be >= 1")
        if self.max_seq_len is not None and self.max_seq_len < 8:
            raise ValueError(
                f"finetune.max_seq_len={self.max_seq_len} must be >= 8 (null: the checkpoint's)"
            )
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"finetune.max_steps={self.max_steps} must be >= 1 (null: epochs)")
        if not self.lr > 0:
            raise ValueError(f"finetune.lr={self.lr} must be > 0, e.g. finetune.lr=1e-4")
        if self.weight_decay < 0:
            raise ValueError(f"finetune.weight_decay={self.weight_decay} must be >= 0")
        for name in ("warmup_ratio", "val_fraction", "test_fraction"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"finetune.{name}={getattr(self, name)} must be in [0, 1)")

    def columns(self) -> Columns:
        return Columns(self.text_column, self.text_pair_column, self.label_column)

    def labelled_task(self) -> LabelledTask:
        """The task's examples per split as these settings choose them (``data.labelled``)."""
        return load_task(
            self.task,
            path=self.path,
            columns=self.columns(),
            val_fraction=self.val_fraction,
            test_fraction=self.test_fraction,
            split_seed=self.split_seed,
            metric=self.metric,
        )
