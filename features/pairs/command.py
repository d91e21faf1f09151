"""``mode=pairs``: minimal-pair accuracy of checkpoints, per paradigm and over all pairs, each
a record of ``eval.jsonl`` (features/pairs/README.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from analysis.records import format_value, markdown_table
from analysis.summary import by_configuration
from common.provenance import provenance
from conf.schema import Settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.pairs.pair_sets import PairSet, frame_sentence, read_pairs
from features.pairs.sentence_scores import decoder_log_likelihoods, pseudo_log_likelihoods
from models.transformer import Decoder
from modes.eval import record_identity
from modes.inference import checkpoints_to_evaluate
from modes.report import save_evaluations
from modes.scoring import FLOAT32
from training.checkpoint import check_no_model_overrides, load_checkpoint, use_weights

OVERALL = "all"  # the paradigm of the record over every pair
COLUMNS = (
    "checkpoint",
    "step",
    "weights",
    "pairs",
    "paradigm",
    "n_pairs",
    "pair_acc",
    "pair_acc_se",
    "ties",
)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    """Score every checkpoint ``ckpt_path`` names on ``pairs.path`` (``callbacks``: unused, no
    Trainer runs)."""
    target = Path(settings.job.ckpt_path)
    checkpoints = checkpoints_to_evaluate(target)
    rows = evaluate_all(checkpoints, settings)
    print(markdown_table(COLUMNS, [{c: format_value(r.get(c)) for c in COLUMNS} for r in rows]))
    results: dict[str, Any] = {"results": rows}
    if len(checkpoints) > 1:  # a sweep: the accuracy over every pair by configuration
        overall = [r for r in rows if r["paradigm"] == OVERALL]
        results["configurations"] = by_configuration(
            overall, metric="pair_acc", others=(), higher_is_better=True
        )
        print(results["configurations"])
    out = save_evaluations(target, rows, record_identity)
    return {**results, "eval_jsonl": str(out)}


def evaluate_all(
    checkpoints: Sequence[Path],
    settings: Settings,
    read: dict[Path, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The records of every checkpoint on ``pairs.path`` (``read``: the contents of those read
    already, taken out of it as they are used)."""
    _check_settings(settings)
    pair_set = read_pairs(settings.group("pairs").path)
    read = {} if read is None else read
    return [
        record
        for ckpt in checkpoints
        for record in evaluate_pairs(ckpt, settings, pair_set, read.pop(ckpt, None))
    ]


def _check_settings(settings: Settings) -> None:
    """A data.* setting or eval.stride (for text) would be ignored: refused."""
    data_keys = [k for k in settings.overrides if k == "data" or k.startswith("data.")]
    if data_keys:
        raise ValueError(
            f"{data_keys[0]} is for text; mode=pairs scores its sentences with the "
            "checkpoint's tokenizer and no data: drop the data settings"
        )
    if settings.eval.stride is not None:
        raise ValueError(
            f"eval.stride={settings.eval.stride} is for text (mode=eval); minimal pairs score "
            "each sentence whole: drop eval.stride"
        )


def evaluate_pairs(
    ckpt: Path, settings: Settings, pair_set: PairSet, checkpoint: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One checkpoint's (``eval.weights``') records on ``pair_set``: one per paradigm, then
    the overall one. ``checkpoint``: its contents, when read already."""
    loaded = load_checkpoint(ckpt, settings.job.mode, checkpoint)
    check_no_model_overrides(settings, loaded.hparams["model_config"], ckpt)
    use_weights(loaded.model, settings.eval.weights, settings.job.seed)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    config = loaded.config
    sequences = [
        frame_sentence(tokenizer, text, config.arch, config.max_seq_len, pair.where)
        for pair in pair_set.pairs
        for text in (pair.good, pair.bad)
    ]
    model = loaded.model.to(_device(settings))
    if isinstance(model, Decoder):
        scores = decoder_log_likelihoods(model, sequences)
    else:
        scores = pseudo_log_likelihoods(model, sequences, special_tokens_of(tokenizer).mask_id)
    untrained = settings.eval.weights == "untrained"
    base = {
        "checkpoint": str(ckpt.resolve()),
        "step": loaded.global_step,
        "arch": config.arch,
        "weights": settings.eval.weights,
        "weights_seed": settings.job.seed if untrained else None,
        "pairs": pair_set.name,
        "pairs_fingerprint": pair_set.fingerprint,
        "provenance": provenance(FLOAT32, settings.trainer.accelerator),
    }
    good, bad = scores[0::2], scores[1::2]  # (N,) each
    groups = {
        paradigm: [i for i, pair in enumerate(pair_set.pairs) if pair.paradigm == paradigm]
        for paradigm in pair_set.paradigms
    }
    groups[OVERALL] = list(range(len(pair_set.pairs)))
    return [
        {**base, "paradigm": paradigm, **pair_accuracy(good[rows], bad[rows])}
        for paradigm, rows in groups.items()
    ]


def pair_accuracy(good: Tensor, bad: Tensor) -> dict[str, Any]:
    """Accuracy (good strictly above bad: a tie is wrong, BLiMP's rule), its binomial standard
    error, the pairs and ties."""
    n = len(good)
    accuracy = float((good > bad).sum()) / n
    return {
        "n_pairs": n,
        "pair_acc": accuracy,
        "pair_acc_se": math.sqrt(accuracy * (1 - accuracy) / n),
        "ties": int((good == bad).sum()),
        "mean_margin": float((good - bad).mean()),  # nats: how far good is above bad
    }


def _device(settings: Settings) -> torch.device:
    wants_gpu = settings.trainer.accelerator in ("auto", "gpu", "cuda")
    return torch.device("cuda" if wants_gpu and torch.cuda.is_available() else "cpu")
