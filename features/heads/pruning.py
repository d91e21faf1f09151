"""``heads.prune``: ``mode=eval`` scores with heads gated off (``conf/features.py``'s
``scoring`` hook), the heads named or the least important fraction on the data scored."""

from __future__ import annotations

from typing import Any

import torch

from conf.schema import Settings
from data.datamodule import LMDataModule
from data.evaluation import ScoredText
from features.heads.precision import eval_precision
from features.heads.statistics import (
    Head,
    gated_off,
    head_importance,
    heads_to_prune,
    parse_heads,
)
from modes.scoring import scored_batches
from training.task import LanguageModelTask


def gate_heads(
    settings: Settings, task: LanguageModelTask, datamodule: LMDataModule, text: ScoredText
) -> dict[str, Any]:
    """Gate ``heads.prune``'s heads off ``task``'s network; the record's fields that say so
    (none when nothing is pruned)."""
    prune = settings.group("heads").prune
    if prune is None:
        return {}
    pruned = heads_to_gate_off(settings, task.model, datamodule, text, prune)
    task.head_mask = gated_off(task.model, pruned)
    return {"heads_prune": prune, "heads_pruned": [str(h) for h in pruned]}


def heads_to_gate_off(
    settings: Settings,
    model: torch.nn.Module,
    datamodule: LMDataModule,
    text: ScoredText,
    prune: float | list[str],
) -> list[Head]:
    """``heads.prune``'s heads: those named (checked against the network), or the least
    important ``prune`` of them on the data scored (``statistics.heads_to_prune``), ranked in
    the precision mode=eval scores in, as mode=heads ranks them for its prune curve."""
    cfg = model.config
    if isinstance(prune, list):
        return parse_heads(prune, cfg.num_layers, cfg.num_heads)
    evaluation = eval_precision(settings)
    # Converted and moved in place, as the trainer would next: the gate made from it matches.
    model = evaluation.network(model)
    batches = [evaluation.batch(batch) for batch in scored_batches(datamodule, text)]
    with evaluation.step(text.split):
        importance = head_importance(model, batches)
    return heads_to_prune(importance, prune)
