"""``mode=eval``: score a checkpoint, a run directory or every run of a sweep directory on text
(docs/evaluation.md), each evaluation a record in ``eval.jsonl`` that a re-run replaces."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from analysis.records import format_value, markdown_table
from analysis.summary import by_configuration
from common.files import stable_hash
from common.provenance import provenance
from conf.features import checkpoint_handler, eval_fields, features, scoring_fields
from conf.schema import Settings
from data.examples import check_stride
from modes.inference import checkpoints_to_evaluate
from modes.report import save_evaluations
from modes.scoring import record_head, task_and_data
from training.checkpoint import (
    check_language_model,
    check_no_model_overrides,
    read_checkpoint,
    use_weights,
)
from training.precision import native_precision
from training.trainer import evaluation_trainer

COLUMNS = (
    "checkpoint",
    "step",
    "weights",
    "data",
    "split",
    "stride",
    "tokens_scored",
    "loss",
    "ppl",
    "bpc",
    "bpb",
    "acc",
)
METRICS = ("loss", "ppl", "bpc", "bpb", "acc")
# What makes two records the same evaluation. pairs, pairs_fingerprint and paradigm (None in
# text records) keep the identity of records written when mode=eval scored pairs too.
IDENTITY = (
    "checkpoint",
    "data",
    "data_fingerprint",
    "split",
    "stride",
    "mask_seed",
    "pairs",
    "pairs_fingerprint",
    "paradigm",
    "weights",
    "weights_seed",
    "precision",
    *eval_fields(),
)
# Records written before eval.weights existed scored the trained weights, and before records
# named their precision, in float32.
_IDENTITY_DEFAULTS = {"weights": "trained", "precision": "32-true"}


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    target = Path(settings.job.ckpt_path)
    checkpoints = checkpoints_to_evaluate(target)
    first = read_checkpoint(checkpoints[0])
    handler = checkpoint_handler(first["hyper_parameters"], "eval")
    if handler is not None:  # a feature's checkpoint (a fine-tuned classifier: labelled text)
        return handler(settings, checkpoints, first, callbacks)
    check_no_feature_settings(settings, checkpoints[0])
    read = {checkpoints[0]: first}  # each checkpoint read once
    del first
    settings = native_precision(settings)
    rows = [
        evaluate_checkpoint(ckpt, settings, callbacks, read.pop(ckpt, None)) for ckpt in checkpoints
    ]
    columns = (*COLUMNS, *(f for f in eval_fields() if any(f in row for row in rows)))
    print(markdown_table(columns, [{c: format_value(r.get(c)) for c in columns} for r in rows]))
    results: dict[str, Any] = {"results": rows}
    if len(checkpoints) > 1:  # a sweep: its configurations, seeds as replicates
        results["configurations"] = by_configuration(rows, others=METRICS[1:])
        print(results["configurations"])
    out = save_evaluations(target, rows, record_identity)
    return {**results, "eval_jsonl": str(out)}


def check_no_feature_settings(settings: Settings, ckpt: Path) -> None:
    """The settings of a feature whose checkpoints ``mode=eval`` hands it (``finetune.*``) are
    refused, not ignored, with a language model's checkpoint."""
    for feature in (f for f in features() if f.checkpoint_key):
        keys = [k for k in settings.overrides if k.partition(".")[0] in feature.groups]
        if keys:
            group = keys[0].partition(".")[0]
            raise ValueError(
                f"{keys[0]} is not read when mode=eval scores a language model, and {ckpt} is "
                f"one: drop the {group}.* settings (they are for python train.py "
                f"mode={next(iter(feature.modes), group)} ckpt_path={ckpt})"
            )


def evaluate_checkpoint(
    ckpt: Path,
    settings: Settings,
    callbacks: Sequence[L.Callback] = (),
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Score one checkpoint (``checkpoint``: its contents, when read already); its record."""
    checkpoint = checkpoint or read_checkpoint(ckpt)
    hparams = checkpoint["hyper_parameters"]
    check_language_model(ckpt, hparams, "eval")
    check_no_model_overrides(settings, hparams["model_config"], ckpt)
    arch, window = hparams["model_config"]["arch"], hparams["model_config"]["max_seq_len"]
    stride = eval_stride(settings.eval.stride, arch, window)
    task, datamodule, text = task_and_data(checkpoint, settings, stride)
    use_weights(task.model, settings.eval.weights, settings.job.seed)
    added = scoring_fields(settings, task, datamodule, text)  # heads gated off, say
    trainer = evaluation_trainer(settings, callbacks)
    if text.split == "validation":
        results = trainer.validate(task, datamodule=datamodule, verbose=False)[0]
        stage = "val"
    else:
        results = trainer.test(task, datamodule=datamodule, verbose=False)[0]
        stage = "test"
    metrics = {m: float(results[f"{stage}/{m}"]) for m in METRICS if f"{stage}/{m}" in results}
    return {
        **record_head(ckpt, checkpoint, text),
        "stride": stride,
        "mask_seed": settings.job.seed if arch == "encoder" else None,
        "weights": settings.eval.weights,
        "weights_seed": settings.job.seed if settings.eval.weights == "untrained" else None,
        "precision": settings.trainer.precision,
        "provenance": provenance(settings.trainer.precision, settings.trainer.accelerator),
        "tokens": text.tokens,
        "tokens_scored": text.tokens_scored,
        "characters": text.characters,
        "bytes": text.bytes,
        **metrics,
        **added,
    }


def eval_stride(stride: int | None, arch: str, window: int) -> int | None:
    """The sliding window's step of a decoder (the window when unset); None for an encoder."""
    if arch == "encoder":
        if stride is not None:
            raise ValueError(
                f"eval.stride={stride} is for decoders; an encoder scores each example whole "
                "(drop eval.stride)"
            )
        return None
    stride = window if stride is None else stride
    check_stride(stride, window)
    return stride


def record_identity(record: dict[str, Any]) -> str:
    """What makes two evaluation records the same evaluation: a re-run replaces its match."""
    return stable_hash(*(record.get(key, _IDENTITY_DEFAULTS.get(key)) for key in IDENTITY))
