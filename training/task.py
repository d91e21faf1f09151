"""LightningModules that train tinylm's networks: losses, metrics, optimiser and schedule.

The configs are stored as plain dicts in the hyper-parameters, so a checkpoint loads with
``torch.load(weights_only=True)`` and rebuilds model and tokenizer with no other file.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict
from time import perf_counter
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor
from torchmetrics import MeanMetric, SumMetric

from conf.schema import OptimConfig
from data.collate import IGNORE_INDEX
from data.config import DataConfig
from models.config import ModelConfig
from models.transformer import build_model
from training.callbacks import divergence_hint, rng_states, set_rng_states
from training.optim import build_optimizer


def network_inputs(batch: dict[str, Tensor]) -> dict[str, Tensor | None]:
    """A batch's inputs to the network beside its token ids: the padding mask, and the
    document ids of a decoder's packed documents (``data.document_mask=true``) when present."""
    inputs = {"attention_mask": batch.get("attention_mask")}
    if "document_ids" in batch:
        inputs["document_ids"] = batch["document_ids"]
    return inputs


def mean_token_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of logits [B, T, V] over the targets of labels [B, T]."""
    # Divided by at least 1: an MLM batch that masks no token has loss 0, not a NaN that would
    # look like divergence. Half-precision logits are summed in float32.
    return F.cross_entropy(
        logits.flatten(0, 1).to(torch.promote_types(logits.dtype, torch.float32)),
        labels.flatten(),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    ) / (labels != IGNORE_INDEX).sum().clamp(min=1)


def warmup_cosine(step: int, *, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """LR multiplier: linear warmup to 1, then cosine decay to ``min_ratio`` at total_steps."""
    # Equivalent mutants: <= and > give the same value at the boundaries.
    if step < warmup_steps:  # pragma: no mutate
        return _warmup(step, warmup_steps)
    if step >= total_steps:  # pragma: no mutate
        return min_ratio
    return _cosine((step - warmup_steps) / max(1, total_steps - warmup_steps), min_ratio)


def warmup_cosine_over_time(
    step: int, *, warmup_steps: int, time_fraction: float, min_ratio: float
) -> float:
    """LR multiplier under ``trainer.budget.seconds``: linear warmup over steps, then the
    cosine decay over the fraction of the time budget spent."""
    if step < warmup_steps:
        return _warmup(step, warmup_steps)
    return _cosine(min(1.0, time_fraction), min_ratio)


def warmup_stable_decay(
    step: int, *, warmup_steps: int, total_steps: int, min_ratio: float, cooldown_fraction: float
) -> float:
    """LR multiplier of ``optim.schedule=wsd``: linear warmup to 1, 1 until the last
    ``cooldown_fraction`` of total_steps, then linear decay to ``min_ratio`` at total_steps."""
    if step < warmup_steps:
        return _warmup(step, warmup_steps)
    return _cooldown(step / max(1, total_steps), min_ratio, cooldown_fraction)


def warmup_stable_decay_over_time(
    step: int,
    *,
    warmup_steps: int,
    time_fraction: float,
    min_ratio: float,
    cooldown_fraction: float,
) -> float:
    """``warmup_stable_decay`` under ``trainer.budget.seconds``: the cooldown over the last
    ``cooldown_fraction`` of the time budget."""
    if step < warmup_steps:
        return _warmup(step, warmup_steps)
    return _cooldown(time_fraction, min_ratio, cooldown_fraction)


def _cooldown(progress: float, min_ratio: float, fraction: float) -> float:
    left = max(0.0, 1 - progress)
    return 1.0 if left >= fraction else min_ratio + (1 - min_ratio) * left / fraction


def _warmup(step: int, warmup_steps: int) -> float:
    return (step + 1) / (warmup_steps + 1)


def _cosine(progress: float, min_ratio: float) -> float:
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


class LanguageModelTask(L.LightningModule):
    """What both tasks share: the network, the optimiser, throughput, checkpoint payload."""

    def __init__(
        self,
        model_config: ModelConfig,
        optim_config: OptimConfig,
        tokenizer_json: str,
        data_config: DataConfig,
        chars_per_token: dict[str, float],
        total_steps: int | None = None,
        bytes_per_token: dict[str, float] | None = None,
        seconds_budget: float | None = None,
    ) -> None:
        super().__init__()
        # Plain types only: the checkpoint must load with weights_only=True.
        self.save_hyperparameters(
            {
                "model_config": model_config.to_dict(),
                "optim_config": asdict(optim_config),
                "tokenizer_json": tokenizer_json,
                "data_config": asdict(data_config),
                "chars_per_token": dict(chars_per_token),
                "total_steps": total_steps,
                # None in checkpoints saved before bits per byte: their bpb is not known.
                "bytes_per_token": None if bytes_per_token is None else dict(bytes_per_token),
                "seconds_budget": seconds_budget,
            }
        )
        self.config = model_config
        self.optim = optim_config
        self.model = build_model(self.config)
        # Analytic, not Lightning's measure_flops: that counts 143,616 FLOPs per token for the
        # tests' tiny decoder where this gives 146,496, which would move MFU and flops budgets.
        self.flops_per_token = self.model.flops_per_token()
        kinds = {"loss": MeanMetric, "correct": SumMetric, "targets": SumMetric}
        self._metrics = torch.nn.ModuleDict(
            {f"{stage}_{name}": kind() for stage in ("val", "test") for name, kind in kinds.items()}
        )
        self._last_step_end: float | None = None
        self._tokens_since_log = 0
        self._seconds_since_log = 0.0
        self._tokens_total = 0
        self._seconds_total = 0.0
        self.validation_seconds = 0.0  # of this process: where a run's time went
        self._validation_started = 0.0
        self._pending_rng_states: dict[str, Any] | None = None
        # Equivalent mutants: on_train_batch_start sets it before anything reads it.
        self._batch_started = 0.0  # pragma: no mutate
        # Carried through checkpoints, so that a resumed run's totals and curve are whole.
        self.consumed: dict[str, float] = {"tokens": 0, "seconds": 0.0}
        self.val_curve: list[list[float]] = []  # [step, val loss, tokens, seconds] each
        # [L, H] multipliers on the heads' outputs (heads.prune: 0 gates a head off).
        self.register_buffer("head_mask", None, persistent=False)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.model(input_ids, attention_mask=attention_mask, head_mask=self.head_mask)

    def _loss(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Mean cross-entropy over the targets, and the logits [B, T, V]."""
        inputs = network_inputs(batch)
        logits = self.model(batch["input_ids"], **inputs, head_mask=self.head_mask)  # (B, T, V)
        return mean_token_loss(logits, batch["labels"]), logits

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss, _ = self._loss(batch)
        # Only on logging steps (the check waits for an accelerator): a per-step self.log
        # costs ~5% of a small CPU step.
        logging_step = self._logging_step()
        if (logging_step or self.device.type == "cpu") and not torch.isfinite(loss):
            raise FloatingPointError(
                f"training loss became {loss.item()} at step {self.global_step}. "
                f"{divergence_hint(self.hparams['optim_config'])}"
            )
        if logging_step:
            self.log("train/loss", loss, prog_bar=True)
        return loss

    def _logging_step(self) -> bool:
        """Whether the step under way is one Lightning logs (every log_every_n_steps)."""
        return (self.global_step + 1) % self.trainer.log_every_n_steps == 0

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # Before gradient clipping: the norm the clip is judged against.
        if self._logging_step():
            grads = [p.grad for p in self.parameters() if p.grad is not None]
            self.log("train/grad_norm", torch.nn.utils.get_total_norm(grads))

    # Lightning does not restore the RNGs dropout draws from: they are put back just before the
    # first batch after a resume (building the loaders' iterators draws from them before).
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = rng_states()
        checkpoint["val_curve"] = [list(point) for point in self.val_curve]
        checkpoint["consumed"] = dict(self.consumed)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._pending_rng_states = checkpoint.get("rng_states")
        self.val_curve = [list(point) for point in checkpoint.get("val_curve", [])]
        self.consumed = {**self.consumed, **checkpoint.get("consumed", {})}

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self._pending_rng_states is not None:
            set_rng_states(self._pending_rng_states)
            self._pending_rng_states = None
        if self.optim.muon_momentum_warmup:  # under optim=muon: the optimiser is MuonWithAdamW
            momentum = self.optim.muon_momentum_at(self.trainer.global_step)
            for group in self.trainer.optimizers[0].muon.param_groups:
                group["momentum"] = momentum
        self._batch_started = perf_counter()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        # Between step ends (data loading included); the first after a start or a validation
        # counts from its own start.
        now = perf_counter()
        began = self._batch_started if self._last_step_end is None else self._last_step_end
        self.consumed["seconds"] += now - began
        # Every rank trains on a batch of this size.
        self.consumed["tokens"] += batch["input_ids"].numel() * self.trainer.world_size
        budget = self.hparams.get("seconds_budget")
        if budget is not None:
            # One decision for all DDP ranks: their clocks differ.
            spent = self.consumed["seconds"] >= budget
            if self.trainer.strategy.reduce_boolean_decision(spent, all=False):
                self.trainer.should_stop = True
        # Not Lightning's ThroughputMonitor: its rates are over a rolling window (none before
        # 100 batches) and include the first step after a start or a validation (compilation,
        # loader restarts), and it synchronises the device every batch.
        if self._last_step_end is not None:
            tokens = batch["input_ids"].numel()
            self._seconds_since_log += now - self._last_step_end
            self._seconds_total += now - self._last_step_end
            self._tokens_since_log += tokens
            self._tokens_total += tokens
        self._last_step_end = now
        if self.trainer.global_step % self.trainer.log_every_n_steps == 0 and (
            self._seconds_since_log > 0
        ):
            tokens_per_sec = self._tokens_since_log / self._seconds_since_log
            self.log("train/tokens_per_sec", tokens_per_sec)
            peak = _peak_flops(self.device, self.trainer.precision)
            if peak:
                self.log("train/mfu", tokens_per_sec * self.flops_per_token / peak)
            self._tokens_since_log = 0
            self._seconds_since_log = 0.0

    def tokens_per_sec(self) -> float | None:
        """Average training throughput of this process, the first step after a start excluded."""
        return self._tokens_total / self._seconds_total if self._seconds_total else None

    def on_validation_start(self) -> None:
        self._last_step_end = None  # validation time is not training throughput
        self._validation_started = perf_counter()

    def on_validation_end(self) -> None:
        self.validation_seconds += perf_counter() - self._validation_started

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._update_eval_metrics("val", batch)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._update_eval_metrics("test", batch)

    def _update_eval_metrics(self, stage: str, batch: dict[str, Tensor]) -> None:
        loss, logits = self._loss(batch)
        labels = batch["labels"]  # (B, T)
        targets = labels != IGNORE_INDEX
        n_targets = targets.sum()
        self._metrics[f"{stage}_loss"].update(loss, weight=n_targets)
        self._metrics[f"{stage}_correct"].update(((logits.argmax(-1) == labels) & targets).sum())
        self._metrics[f"{stage}_targets"].update(n_targets)

    def on_validation_epoch_end(self) -> None:
        self._log_eval_metrics("val")

    def on_test_epoch_end(self) -> None:
        self._log_eval_metrics("test")

    def _log_eval_metrics(self, stage: str) -> None:
        metrics = {name: m.compute() for name, m in self._metrics.items() if name.startswith(stage)}
        for m in self._metrics.values():
            m.reset()
        if not metrics[f"{stage}_targets"]:
            # The weighted mean over no target is NaN, which would read as divergence.
            split = "validation" if stage == "val" else stage
            raise ValueError(
                f"the {split} data gave no target to score: the encoder's masking chose no "
                "token in it; give it more text or raise data.mlm_probability"
            )
        loss = metrics[f"{stage}_loss"]
        if not torch.isfinite(loss) and self.trainer.state.fn == TrainerFn.FITTING:
            # Stop before ModelCheckpoint saves these weights as last.ckpt.
            raise FloatingPointError(
                f"validation loss became {loss.item()} at step {self.global_step}: the weights "
                f"diverged. {divergence_hint(self.hparams['optim_config'])}"
            )
        if stage == "val" and self.trainer.state.fn == TrainerFn.FITTING:
            point = [self.global_step, float(loss), self.consumed["tokens"]]
            self.val_curve.append([*point, self.consumed["seconds"]])
        values = {
            "loss": loss,
            "ppl": torch.exp(loss.clamp(max=50)),
            # the next token (decoder) or the masked token (encoder)
            "acc": metrics[f"{stage}_correct"] / metrics[f"{stage}_targets"].clamp(min=1),
            **self.extra_metrics(stage, loss),
        }
        for name, value in values.items():
            # Equivalent mutants: torchmetrics already synced these across DDP ranks;
            # sync_dist=True only says so and silences Lightning's epoch-level warning.
            self.log(
                f"{stage}/{name}",
                value,
                sync_dist=True,  # pragma: no mutate
                prog_bar=stage == "val" and name == "loss",
            )

    def extra_metrics(self, stage: str, loss: Tensor) -> dict[str, Any]:
        return {}

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = build_optimizer(
            self,
            self.model.blocks,
            self.optim,
            fused=self.device.type in ("cpu", "cuda"),
            hidden_matrices=self.model.hidden_matrices(),
            width_multiplier=self.model.config.width_multiplier,
        )
        budget = self.hparams.get("seconds_budget")
        shape = {"warmup_steps": self.optim.warmup_steps, "min_ratio": self.optim.min_lr_ratio}
        if self.optim.schedule == "wsd":
            shape["cooldown_fraction"] = self.optim.cooldown_fraction
        if budget is not None:
            multiplier = functools.partial(self._multiplier_over_time, budget, shape)
        else:
            total = self.hparams["total_steps"] or int(self.trainer.estimated_stepping_batches)
            by_steps = warmup_stable_decay if self.optim.schedule == "wsd" else warmup_cosine
            multiplier = functools.partial(by_steps, total_steps=total, **shape)
        # One multiplier for every group: with optim=muon, Muon's and AdamW's rates alike.
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
        schedule = {"scheduler": scheduler, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def _multiplier_over_time(self, budget: float, shape: dict[str, Any], step: int) -> float:
        by_time = (
            warmup_stable_decay_over_time
            if self.optim.schedule == "wsd"
            else warmup_cosine_over_time
        )
        return by_time(step, time_fraction=self.consumed["seconds"] / budget, **shape)


class CausalLMTask(LanguageModelTask):
    """Next-token prediction for the decoder; reports bits per character and per UTF-8 byte
    too (comparable across tokenizers)."""

    def extra_metrics(self, stage: str, loss: Tensor) -> dict[str, Any]:
        split = "validation" if stage == "val" else stage
        bits = loss / math.log(2)
        ratios = {
            "bpc": self.hparams["chars_per_token"].get(split),
            "bpb": (self.hparams.get("bytes_per_token") or {}).get(split),
        }
        return {name: bits / ratio for name, ratio in ratios.items() if ratio}


class MaskedLMTask(LanguageModelTask):
    """Masked-language modelling for the encoder: the metrics are over the masked tokens."""


def task_class(arch: str) -> type[LanguageModelTask]:
    return CausalLMTask if arch == "decoder" else MaskedLMTask


def task_from_hparams(hparams: dict[str, Any], **changes: Any) -> LanguageModelTask:
    """The task of a checkpoint's ``hyper_parameters``, with ``changes`` applied (the weights
    are not loaded)."""
    values = {**hparams, **changes}
    model_config = ModelConfig.from_dict(values["model_config"])
    return task_class(model_config.arch)(
        model_config=model_config,
        optim_config=OptimConfig(**values["optim_config"]),
        tokenizer_json=values["tokenizer_json"],
        data_config=DataConfig(**values["data_config"]),
        chars_per_token=values["chars_per_token"],
        total_steps=values.get("total_steps"),
        bytes_per_token=values.get("bytes_per_token"),
        seconds_budget=values.get("seconds_budget"),
    )


def _peak_flops(device: torch.device, precision: str) -> float | None:
    """Peak FLOP/s of a CUDA device for MFU, from Lightning's table; None where unknown."""
    if device.type != "cuda":
        return None
    from lightning.fabric.utilities.throughput import get_available_flops

    # As Lightning maps its precision plugins, in a private function.
    dtypes = {"bf16": torch.bfloat16, "16": torch.float16, "64": torch.float64}
    return get_available_flops(device, dtypes.get(str(precision).split("-")[0], torch.float32))
