"""The run's curves, whatever the logger: every value logged while training (the training
loss, learning rates, gradient norm, tokens/s, each validation's metrics) as a JSON line in the
run directory's ``curves.jsonl``, ``{"step": S, "NAME": VALUE, ...}`` (S: the optimiser steps
taken when it was logged), for the report and for
any reader (``pandas.read_json(path, lines=True)``). W&B, TensorBoard or CSV get the same values
as before, beside it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

CURVES_FILE = "curves.jsonl"
RESUMED = "resumed"  # a line's key: training resumed from a checkpoint at this step


class CurvesLogger(Logger, L.Callback):
    """A Lightning logger that appends each logged step to ``curves.jsonl``; also a callback,
    so that a resumed run first drops what the interrupted one logged after its checkpoint
    (it trains those steps again) and marks where it resumed."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.path = Path(run_dir) / CURVES_FILE
        self.trainer: L.Trainer | None = None

    @property
    def name(self) -> str:
        return "curves"

    @property
    def version(self) -> str:
        return ""

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """The settings are in the run's record already."""

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        # The optimiser steps taken, as the run record's val_curve counts them (Lightning's own
        # step is one less: the 10th step's loss at 9).
        if self.trainer is not None:
            step = self.trainer.global_step
        values = {k: float(v) for k, v in metrics.items() if k != "epoch"}
        self._append(
            {"step": step, **{k: v if math.isfinite(v) else str(v) for k, v in values.items()}}
        )

    @rank_zero_only
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.trainer = trainer
        step = trainer.global_step
        if step == 0:  # a new run: nothing of an earlier one in this directory counts
            self.path.write_text("")
            return
        kept = [line for line in read_curves(self.path) if line.get("step", 0) <= step]
        text = "".join(json.dumps(line) + "\n" for line in [*kept, {"step": step, RESUMED: True}])
        self.path.write_text(text)

    def _append(self, line: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def read_curves(path: Path) -> list[dict[str, Any]]:
    """The lines of a ``curves.jsonl`` (none when it is absent); a line cut short by a crash
    is left out."""
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines
