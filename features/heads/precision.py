"""The precision ``mode=heads`` (and ``heads.prune`` in ``mode=eval``) runs the network in:
``mode=eval``'s, applied as Lightning's evaluation loop applies it, so that the analysis's
``base_loss`` is mode=eval's loss of the checkpoint and its prune curve ranks the heads as
``heads.prune`` does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from lightning.pytorch.plugins.precision import Precision
from torch import Tensor, nn

from conf.schema import Settings
from training.trainer import evaluation_trainer


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
    def step(self, split: str) -> Iterator[None]:
        """The context of the evaluation loop's step on ``split`` (validation or test)."""
        step = (
            self.plugin.val_step_context if split == "validation" else self.plugin.test_step_context
        )
        with step():
            yield


def eval_precision(settings: Settings) -> EvalPrecision:
    """What ``mode=eval`` would score in with ``settings`` (already through
    ``training.precision.native_precision``, as mode=eval's are): its trainer's precision
    plugin and device."""
    trainer = evaluation_trainer(settings)
    return EvalPrecision(
        settings.trainer.precision, trainer.strategy.root_device, trainer.precision_plugin
    )
