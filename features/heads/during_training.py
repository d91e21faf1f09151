"""``heads.log_every=N``: each head's attention entropy and importance during training.

Every N optimiser steps, one forward and backward pass on a fixed validation batch (the first
of the validation loader, drawn once) in eval mode, its gradient taken with respect to the
head gate only (the weights' gradients are untouched); logged as ``heads/entropy/L{l}H{h}``
and ``heads/importance/L{l}H{h}`` at that step, so the logger's charts show when heads specialise.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from torch import Tensor

from conf.schema import Settings
from features.heads.statistics import importance_and_attention
from models.transformer import eval_mode


class HeadStatistics(L.Callback):
    """Logs the per-head entropy (nats) and importance (|dL/dgate|) every ``every`` steps."""

    def __init__(self, every: int) -> None:
        self.every = every
        self._batch: dict[str, Tensor] | None = None
        self._logged_step = 0

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, idx: int
    ) -> None:
        step = trainer.global_step
        # With gradient accumulation several batches end at one step: log it once.
        if step % self.every or step == self._logged_step:
            return
        self._logged_step = step
        if self._batch is None:
            self._batch = next(iter(trainer.datamodule.val_dataloader()))
        batch = {k: v.to(pl_module.device) for k, v in self._batch.items()}
        with eval_mode(pl_module.model):
            _, importance, sums = importance_and_attention(pl_module.model, batch)
        entropy = sums["entropy"] / sums["queries"]  # (L, H)
        metrics = {}
        for name, values in (("entropy", entropy), ("importance", importance)):
            for layer, row in enumerate(values.tolist()):
                for head, value in enumerate(row):
                    metrics[f"heads/{name}/L{layer}H{head}"] = value
        # Straight to the loggers: LightningModule.log would keep only the steps that
        # trainer.log_every_n_steps also logs. The step is the optimiser steps taken.
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)


def callbacks(settings: Settings) -> list[L.Callback]:
    """The callback ``heads.log_every`` asks for, if it does."""
    every = settings.group("heads").log_every
    return [] if every is None else [HeadStatistics(every)]
