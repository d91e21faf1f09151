"""``trainer.budget``: equal compute for every job of a sweep.

A tokens or FLOPs budget becomes the job's number of optimiser steps before training starts,
so that the cosine schedule spans the job's real length. A seconds budget is not known in
steps: the task stops the run when its training steps have taken that long.
"""

from __future__ import annotations

import lightning as L

from conf.schema import BudgetConfig, Settings
from models.config import ModelConfig


def tokens_per_step(settings: Settings, model: ModelConfig, trainer: L.Trainer) -> int:
    """Tokens one optimiser step trains on, across every rank."""
    micro_batch = settings.data.batch_size * model.max_seq_len
    return micro_batch * trainer.accumulate_grad_batches * trainer.world_size


def steps_for_budget(budget: BudgetConfig, step_tokens: int, flops_per_token: int) -> int | None:
    """The optimiser steps a tokens or FLOPs budget buys (rounded down), else None."""
    if budget.tokens is not None:
        spent, per_step, unit = budget.tokens, step_tokens, "tokens"
    elif budget.flops is not None:
        spent, per_step, unit = budget.flops, step_tokens * flops_per_token, "flops"
    else:
        return None
    steps = int(spent // per_step)
    if steps < 1:
        raise ValueError(
            f"trainer.budget.{unit}={spent:g} is less than one step, which costs {per_step:,} "
            f"{unit} here (data.batch_size x max_seq_len x accumulation x devices"
            + (" x the model's flops_per_token" if unit == "flops" else "")
            + f"); give at least {per_step:g}"
        )
    return steps


def apply_budget(settings: Settings, trainer: L.Trainer, model: ModelConfig, flops: int) -> None:
    """Set ``trainer``'s length from ``trainer.budget``, refusing one given with
    ``trainer.max_steps`` or ``trainer.max_epochs`` on the command line."""
    budget = settings.trainer.budget
    chosen = budget.chosen()
    if not chosen:
        return
    clashing = [k for k in ("trainer.max_steps", "trainer.max_epochs") if k in settings.overrides]
    if clashing:
        raise ValueError(
            f"trainer.budget.{chosen[0]} decides how long the run trains, and {clashing[0]} "
            "is also given; drop one of them"
        )
    steps = steps_for_budget(budget, tokens_per_step(settings, model, trainer), flops)
    trainer.fit_loop.max_epochs = -1
    trainer.fit_loop.epoch_loop.max_steps = -1 if steps is None else steps
    limit = "until its time is spent" if steps is None else f"for {steps:,} steps"
    print(f"tinylm: trainer.budget.{chosen[0]}={getattr(budget, chosen[0]):g}: training {limit}")
