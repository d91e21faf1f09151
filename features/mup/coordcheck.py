"""The coordinate check's measurement (mup's ``get_coord_data``): for each parametrization,
width and seed, the run's network at that ``model.hidden_size`` (the MLP's width scaled with
it), trained ``coordcheck.steps`` steps by the training task itself (``training.task``: its
loss, its optimiser with μP's learning-rate rules, its schedule) under a Lightning Trainer
with the run's precision and gradient clipping; forward hooks record the mean |activation| of
each layer's output in each training step's forward pass. Step t's pass sees the weights
after t updates: step 0 is the initialisation.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import lightning as L
from torch import Tensor, nn

from conf.schema import Settings
from data.datamodule import LMDataModule, prepared_datamodule
from models.config import ModelConfig
from modes.train import new_task
from training.task import LanguageModelTask


def layer_modules(network: nn.Module) -> dict[str, nn.Module]:
    """The layers whose outputs are measured, in the order of the forward pass: the
    embeddings, each block's attention output, MLP output and output, and the network itself,
    whose output is the logits (after any output multiplier, as the loss sees them)."""
    layers: dict[str, nn.Module] = {"embeddings": network.embeddings}
    for i, block in enumerate(network.blocks):
        layers |= {f"block{i}.attn": block.attn, f"block{i}.mlp": block.mlp, f"block{i}": block}
    layers["logits"] = network
    return layers


def _output(value: Any) -> Tensor:
    """A layer's output tensor (a block returns (states, attention probabilities))."""
    return value[0] if isinstance(value, tuple) else value


class ActivationRecorder(L.Callback):
    """Mean |activation| of each layer's output in each training step's forward pass:
    ``means[layer][step]``, averaged over a step's micro-batches (gradient accumulation)."""

    def __init__(self) -> None:
        self.sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.step = 0
        self._handles: list[Any] = []

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for name, module in layer_modules(pl_module.model).items():
            self._handles.append(module.register_forward_hook(self._hook(name)))

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.step = trainer.global_step

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str) -> Callable[[nn.Module, Any, Any], None]:
        def record(module: nn.Module, inputs: Any, output: Any) -> None:
            if not module.training:
                return
            value = _output(output).detach().float().abs().mean().item()
            self.sums[name][self.step] += value
            self.counts[name][self.step] += 1

        return record

    def means(self, steps: int) -> dict[str, list[float]]:
        return {
            name: [self.sums[name][s] / self.counts[name][s] for s in range(steps)]
            for name in self.sums
        }


def width_config(model: ModelConfig, width: int, parametrization: str) -> ModelConfig:
    """The run's model at ``width`` under ``parametrization``; an MLP width given
    (``model.intermediate_size``) is scaled with the hidden size, as 4 * hidden_size is. A
    width the model refuses (heads that do not divide it) is named as coordcheck's."""
    intermediate = model.intermediate_size
    if intermediate is not None:
        intermediate = max(1, round(intermediate * width / model.hidden_size))
    try:
        return replace(
            model,
            hidden_size=width,
            intermediate_size=intermediate,
            parametrization=parametrization,
        )
    except ValueError as err:
        raise ValueError(f"coordcheck.widths has {width}, which the model refuses: {err}") from None


def check_widths(
    model: ModelConfig, widths: Sequence[int], parametrizations: Sequence[str]
) -> None:
    """Every width and parametrization builds a valid model: refused before any training."""
    for width in widths:
        for parametrization in parametrizations:
            width_config(model, width, parametrization)


@contextmanager
def quiet_trainers() -> Iterator[None]:
    """Lightning's lines of each Trainer it starts (devices found, fit stopped), one pair per
    width and seed here, held back; its warnings still show."""
    logger = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def train_and_record(
    settings: Settings,
    task: LanguageModelTask,
    datamodule: LMDataModule,
    steps: int,
    callbacks: Sequence[L.Callback] = (),
) -> tuple[dict[str, list[float]], list[float]]:
    """Train ``task`` ``steps`` steps on ``datamodule``; the layers' means per step and the
    schedule's learning-rate multiplier of each step's update."""
    recorder = ActivationRecorder()
    with quiet_trainers():
        trainer = L.Trainer(
            accelerator=settings.trainer.accelerator,
            devices=1,
            precision=settings.trainer.precision,
            max_steps=steps,
            max_epochs=-1,
            limit_val_batches=0,  # no validation: only the training steps' forward passes
            gradient_clip_val=settings.trainer.gradient_clip_val,
            accumulate_grad_batches=settings.trainer.accumulate_grad_batches,
            deterministic=settings.trainer.deterministic,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            callbacks=[recorder, *callbacks],
        )
        trainer.fit(task, datamodule=datamodule)
    scheduler = trainer.lr_scheduler_configs[0].scheduler
    multipliers = [float(scheduler.lr_lambdas[0](step)) for step in range(steps)]
    return recorder.means(steps), multipliers


def coordinate_data(
    settings: Settings,
    widths: Sequence[int],
    steps: int,
    seeds: Sequence[int],
    parametrizations: Sequence[str],
    callbacks: Sequence[L.Callback] = (),
) -> dict[str, Any]:
    """The check's means: ``results[parametrization][layer][step][i]`` at ``widths[i]``,
    averaged over ``seeds``; with the layers, and the schedule's multiplier of each step."""
    model = settings.model
    check_widths(model, widths, parametrizations)
    # One data module per seed: the seed orders the training batches, as in a run.
    modules = {
        seed: prepared_datamodule(
            settings.data, model.arch, model.max_seq_len, seed=seed, stage="fit"
        )
        for seed in seeds
    }
    # The run's schedule (warmup, then cosine decay over trainer.max_steps): these are its
    # first steps, as training takes them.
    total = settings.trainer.max_steps if settings.trainer.max_steps > 0 else None
    results: dict[str, dict[str, list[list[float]]]] = {}
    layers: list[str] = []
    multipliers: list[float] = []
    for parametrization in parametrizations:
        per_width: list[dict[str, list[float]]] = []
        for width in widths:
            runs = []
            for seed, datamodule in modules.items():
                config = width_config(model, width, parametrization)
                L.seed_everything(seed, workers=True, verbose=False)  # the weights' seed
                task = new_task(settings, config, datamodule, total_steps=total)
                means, multipliers = train_and_record(settings, task, datamodule, steps, callbacks)
                runs.append(means)
            layers = list(runs[0])
            per_width.append(
                {
                    layer: [statistics.fmean(r[layer][s] for r in runs) for s in range(steps)]
                    for layer in layers
                }
            )
            print(
                f"tinylm: coordcheck {parametrization} width {width}: "
                f"{len(modules)} seed(s) trained {steps} steps"
            )
        results[parametrization] = {
            layer: [[means[layer][s] for means in per_width] for s in range(steps)]
            for layer in layers
        }
    return {
        "widths": list(widths),
        "steps": steps,
        "seeds": list(seeds),
        "layers": layers,
        "lr_multipliers": multipliers,
        "results": results,
    }
