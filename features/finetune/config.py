"""The ``finetune`` config group, validating itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from features.finetune.labelled import (
    CLASSIFICATION_METRICS,
    GLUE,
    PROBLEMS,
    REGRESSION_METRICS,
    SPLITS,
    TASKS,
    Columns,
    LabelledTask,
    load_task,
)
from models.config import check_field_types, closest

FINETUNE_INITS = ("pretrained", "scratch")
FINETUNE_METRICS = (*CLASSIFICATION_METRICS, *REGRESSION_METRICS)
SUITE = "glue"  # every GLUE task, one run each (features/finetune/suite.py)
FINETUNE_TASKS = (*TASKS, SUITE)


@dataclass
class FinetuneConfig:
    """The ``finetune`` group: the task, its columns and problem, the init, the protocol
    (epochs, batch size, AdamW with warmup then cosine decay) and the headline metric; the
    guide, features/finetune/README.md, says what each key does."""

    task: str = "builtin"
    path: Any = None
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    problem: str | None = None
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
        self._check_path()
        if self.problem is not None and self.problem not in PROBLEMS:
            raise ValueError(
                f"finetune.problem={self.problem} is unknown; choose "
                "finetune.problem=classification or finetune.problem=regression"
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
        regression = self.problem == "regression" or self.task == "stsb"
        fitting = REGRESSION_METRICS if regression else CLASSIFICATION_METRICS
        if self.metric is not None and self.suite() is None and self.metric not in fitting:
            raise ValueError(
                f"finetune.metric={self.metric} is not a "
                f"{'regression' if regression else 'classification'}'s metric; choose one of "
                f"{', '.join(fitting)} (or null: the task's own)"
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

    def _check_path(self) -> None:
        if self.path is None or self.task == "files":
            return
        if self.task in GLUE and isinstance(self.path, str):
            return
        if self.task in GLUE:
            raise ValueError(
                f"finetune.path={self.path} for finetune.task={self.task} must be one folder "
                f"in GLUE's layout (train.jsonl, validation.jsonl), or null for the Hub"
            )
        raise ValueError(
            f"finetune.path is for finetune.task=files or a GLUE task's folder (got "
            f"finetune.task={self.task}): add finetune.task=files or drop finetune.path"
        )

    def suite(self) -> dict[str, Any] | None:
        """The tasks a suite runs, name -> folder (None: the Hub) or {path:, problem:}; None
        when the settings are one task."""
        if self.task == SUITE:
            return dict.fromkeys(GLUE)
        if self.task != "files" or not isinstance(self.path, dict):
            return None
        if set(self.path) <= set(SPLITS):
            return None  # one task's split files
        return dict(self.path)

    def columns(self) -> Columns:
        return Columns(self.text_column, self.text_pair_column, self.label_column)

    def labelled_task(self) -> LabelledTask:
        """The task's examples per split as these settings choose them (``labelled.py``)."""
        return load_task(
            self.task,
            path=self.path,
            columns=self.columns(),
            val_fraction=self.val_fraction,
            test_fraction=self.test_fraction,
            split_seed=self.split_seed,
            metric=self.metric,
            problem=self.problem,
        )
