"""``mode=eval``: score a checkpoint, a run directory or every run of a sweep directory.

Without data on the command line, each checkpoint is scored on its own run's split
(``data.split``: validation or test). With data on it (``data=...``, ``data.path=...``,
``data.name=...``: where text comes from), all of that text is scored, nothing carved off
(which data that is, and its counts, are the data layer's: ``data.evaluation``). A decoder
reads the text in windows of ``max_seq_len`` tokens sliding by ``eval.stride``; an encoder's
masks are drawn from ``seed``, so two evaluations of one checkpoint agree.

With ``eval.pairs`` (a BLiMP-format file or directory, or ``builtin``), minimal pairs are
scored instead of text (``modes/eval_pairs.py``). With ``eval.weights=untrained``, each
checkpoint's network is replaced by a fresh one of its shape drawn from ``seed``: the
untrained baseline.

Each evaluation is a record (what was scored, how much of it, the metrics) in ``eval.jsonl``
beside the checkpoint (or in the sweep directory); running the same evaluation again
replaces its own record and keeps every other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from common.files import stable_hash
from conf.schema import Settings
from data.config import DataConfig
from data.evaluation import data_to_evaluate
from data.examples import check_stride
from modes import eval_pairs
from modes.report import append_records, format_value, markdown_table, natural_key, read_run
from modes.summary import (
    REPLICATE_KEY,
    configuration_rows,
    configuration_table,
    group_runs,
    swept_keys,
)
from training.checkpoint import (
    check_language_model,
    check_no_model_overrides,
    check_not_hf_export,
    read_checkpoint,
    use_weights,
)
from training.task import task_from_hparams
from training.trainer import evaluation_trainer

RESULTS_FILE = "eval.jsonl"
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
# What makes two records the same evaluation: a re-run replaces the record that matches.
# Text records have no pairs fields and pair records no data fields.
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
)
# Records written before eval.weights existed scored the trained weights.
_IDENTITY_DEFAULTS = {"weights": "trained"}


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    if settings.eval.harness:  # lm-evaluation-harness tasks instead of text
        from modes import eval_harness  # imports the harness only when asked

        return eval_harness.run(settings, callbacks)
    target = Path(settings.job.ckpt_path)
    checkpoints = checkpoints_to_evaluate(target)
    if settings.eval.pairs is None:
        columns = COLUMNS
        rows = [evaluate_checkpoint(ckpt, settings, callbacks) for ckpt in checkpoints]
    else:
        columns = eval_pairs.COLUMNS
        rows = eval_pairs.evaluate_all(checkpoints, settings)
    print(markdown_table(columns, [{c: format_value(r.get(c)) for c in columns} for r in rows]))
    results: dict[str, Any] = {"results": rows}
    if len(checkpoints) > 1:  # a sweep: its configurations, seeds as replicates
        if settings.eval.pairs is None:
            results["configurations"] = by_configuration(rows)
        else:  # the accuracy over every pair
            overall = [r for r in rows if r["paradigm"] == eval_pairs.OVERALL]
            results["configurations"] = by_configuration(
                overall, metric="pair_acc", others=(), higher_is_better=True
            )
        print(results["configurations"])
    out = append_records(
        (target if target.is_dir() else target.parent) / RESULTS_FILE, rows, _identity
    )
    print(f"wrote {out}")
    return {**results, "eval_jsonl": str(out)}


def by_configuration(
    rows: Sequence[dict[str, Any]],
    metric: str = "loss",
    others: Sequence[str] = METRICS[1:],
    higher_is_better: bool = False,
) -> str:
    """The evaluated ``metric`` (with the means of ``others``) of a sweep's runs grouped as
    the sweep summary groups them (by every swept key but the seed; modes/summary.py), as a
    markdown table."""
    runs = []
    for row in rows:
        run_dir = Path(row["checkpoint"]).parent.parent
        stored = read_run(run_dir, "the run is grouped without its settings") or {}
        run = {"status": "completed", **row}
        if "overrides" in stored:  # none recorded: the run sets no key apart (summary.swept_keys)
            run["overrides"] = stored["overrides"]
        runs.append(run)
    keys = [k for k in swept_keys(runs) if k != REPLICATE_KEY]
    configs = group_runs(runs, keys, metric=metric, higher_is_better=higher_is_better)
    return configuration_table(configs, configuration_rows(configs, others), others)


def checkpoints_to_evaluate(target: Path) -> list[Path]:
    """A checkpoint file; a run directory's best.ckpt; or every run's best.ckpt below a sweep
    directory, in job order."""
    if target.is_file():
        return [target]
    if not target.is_dir():
        raise FileNotFoundError(f"ckpt_path={target} does not exist")
    check_not_hf_export(target)
    own = target / "checkpoints" / "best.ckpt"
    found = (
        [own]
        if own.is_file()
        else sorted(
            target.glob("*/checkpoints/best.ckpt"),
            key=lambda p: natural_key(p.parent.parent.name),
        )
    )
    if not found:
        raise FileNotFoundError(
            f"no checkpoints/best.ckpt in {target} or in its run directories; pass a "
            "checkpoint file, a run directory or a sweep directory"
        )
    return found


def evaluate_checkpoint(
    ckpt: Path, settings: Settings, callbacks: Sequence[L.Callback] = ()
) -> dict[str, Any]:
    """Score one checkpoint; returns its record."""
    checkpoint = read_checkpoint(ckpt)
    hparams = checkpoint["hyper_parameters"]
    check_language_model(ckpt, hparams, "eval")
    check_no_model_overrides(settings, hparams["model_config"], ckpt)
    arch, window = hparams["model_config"]["arch"], hparams["model_config"]["max_seq_len"]
    stride = _stride(settings.eval.stride, arch, window)
    data = data_to_evaluate(DataConfig(**hparams["data_config"]), settings.data, settings.overrides)
    datamodule, text = data.prepare(
        arch,
        window,
        seed=settings.job.seed,  # the encoder's masks: fixed by the seed, not by chance
        tokenizer_json=hparams["tokenizer_json"],
        stride=stride,
    )
    # bpc and bpb divide by the characters (bytes) per token of the text scored, not of the
    # training run.
    task = task_from_hparams(
        hparams,
        chars_per_token=datamodule.chars_per_token,
        bytes_per_token=datamodule.bytes_per_token,
    )
    task.load_state_dict(checkpoint["state_dict"])
    use_weights(task.model, settings.eval.weights, settings.job.seed)
    trainer = evaluation_trainer(settings, callbacks)
    if text.split == "validation":
        results = trainer.validate(task, datamodule=datamodule, verbose=False)[0]
        stage = "val"
    else:
        results = trainer.test(task, datamodule=datamodule, verbose=False)[0]
        stage = "test"
    metrics = {m: float(results[f"{stage}/{m}"]) for m in METRICS if f"{stage}/{m}" in results}
    return {
        "checkpoint": str(ckpt.resolve()),
        "step": int(checkpoint.get("global_step", 0)),
        "arch": arch,
        "data": text.data,
        "data_fingerprint": text.fingerprint,
        "split": text.label,
        "stride": stride,
        "mask_seed": settings.job.seed if arch == "encoder" else None,
        "weights": settings.eval.weights,
        "weights_seed": settings.job.seed if settings.eval.weights == "untrained" else None,
        "tokens": text.tokens,
        "tokens_scored": text.tokens_scored,
        "characters": text.characters,
        "bytes": text.bytes,
        **metrics,
    }


def _stride(stride: int | None, arch: str, window: int) -> int | None:
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


def _identity(record: dict[str, Any]) -> str:
    return stable_hash(*(record.get(key, _IDENTITY_DEFAULTS.get(key)) for key in IDENTITY))
