"""``mode=eval``: score a checkpoint, a run directory or every run of a sweep directory.

Each checkpoint is scored on its own run's data (``data.split``: validation or test) unless
the command line names other data (``data=...`` or ``data.*``). The table is printed and
written to ``eval.json`` beside the checkpoint (or in the sweep directory).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L

from conf.schema import Settings
from data.config import DataConfig
from data.datamodule import prepared_datamodule
from modes.report import format_value, markdown_table, natural_key
from training.checkpoint import check_no_model_overrides, read_checkpoint
from training.task import task_from_hparams
from training.trainer import evaluation_trainer

COLUMNS = ("checkpoint", "arch", "split", "loss", "ppl", "bpc", "acc", "step")
METRICS = ("loss", "ppl", "bpc", "acc")


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    target = Path(settings.job.ckpt_path)
    checkpoints = checkpoints_to_evaluate(target)
    check_no_model_overrides(settings, checkpoints[0])
    rows = [evaluate_checkpoint(ckpt, settings, callbacks) for ckpt in checkpoints]
    print(markdown_table(COLUMNS, [{c: format_value(r.get(c)) for c in COLUMNS} for r in rows]))
    out = (target if target.is_dir() else target.parent) / "eval.json"
    out.write_text(json.dumps(rows if target.is_dir() else rows[0], indent=2))
    print(f"wrote {out}")
    return {"results": rows, "eval_json": str(out)}


def checkpoints_to_evaluate(target: Path) -> list[Path]:
    """A checkpoint file; a run directory's best.ckpt; or every run's best.ckpt below a sweep
    directory, in job order."""
    if target.is_file():
        return [target]
    if not target.is_dir():
        raise FileNotFoundError(f"ckpt_path={target} does not exist")
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
    checkpoint = read_checkpoint(ckpt)
    hparams = checkpoint["hyper_parameters"]
    model_config = hparams["model_config"]
    data_config = _data_to_evaluate(DataConfig(**hparams["data_config"]), settings)
    split = data_config.split
    datamodule = prepared_datamodule(
        data_config,
        model_config["arch"],
        model_config["max_seq_len"],
        seed=settings.job.seed,
        stage="validate" if split == "validation" else "test",
        tokenizer_json=hparams["tokenizer_json"],
    )
    # bpc divides by the characters per token of the data evaluated, not of the training run.
    task = task_from_hparams(hparams, chars_per_token=datamodule.chars_per_token)
    task.load_state_dict(checkpoint["state_dict"])
    trainer = evaluation_trainer(settings, callbacks)
    if split == "validation":
        results = trainer.validate(task, datamodule=datamodule, verbose=False)[0]
        stage = "val"
    else:
        results = trainer.test(task, datamodule=datamodule, verbose=False)[0]
        stage = "test"
    return {
        "checkpoint": str(ckpt),
        "arch": model_config["arch"],
        "split": split,
        "step": int(checkpoint.get("global_step", 0)),
        **{m: float(results[f"{stage}/{m}"]) for m in METRICS if f"{stage}/{m}" in results},
    }


def _data_to_evaluate(trained: DataConfig, settings: Settings) -> DataConfig:
    """The run's own data, unless the command line names other data (``data=...``), with the
    ``data.*`` keys the command line changes (``data.split`` always)."""
    if "data" in settings.overrides:
        return settings.data
    changed = {
        key: getattr(settings.data, key)
        for key in (k.removeprefix("data.") for k in settings.overrides if k.startswith("data."))
    }
    return replace(trained, **{"split": settings.data.split, **changed})
