"""``mode=harness``: lm-evaluation-harness tasks on decoder checkpoints, each task metric a
record of ``eval.jsonl`` (features/harness/README.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.records import format_value, markdown_table
from analysis.summary import by_configuration
from common.files import stable_hash
from common.provenance import provenance
from conf.schema import Settings
from features.harness.runner import (
    check_harness_checkpoint,
    check_hub_reachable,
    metric_rows,
    require_harness,
    run_harness,
    task_manager,
)
from modes.inference import checkpoints_to_evaluate
from modes.report import save_evaluations
from modes.scoring import FLOAT32
from training.checkpoint import check_no_model_overrides, load_checkpoint

COLUMNS = (
    "checkpoint",
    "step",
    "task",
    "task_version",
    "num_fewshot",
    "n",
    "metric",
    "value",
    "stderr",
)
# What makes two harness records the same evaluation (mode=eval's own records hold no task).
IDENTITY = (
    "evaluation",
    "checkpoint",
    "harness",
    "task",
    "task_version",
    "task_config",
    "num_fewshot",
    "limit",
    "metric",
    "filter",
)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    """Score every checkpoint ``ckpt_path`` names on ``harness.tasks`` (``callbacks``: unused,
    the harness runs the model)."""
    cfg = settings.group("harness")
    _check_settings(settings)
    target = Path(settings.job.ckpt_path)
    loaded = []
    for ckpt in checkpoints_to_evaluate(target):
        checkpoint = load_checkpoint(ckpt, settings.job.mode)
        check_no_model_overrides(settings, checkpoint.hparams["model_config"], ckpt)
        check_harness_checkpoint(checkpoint)
        loaded.append(checkpoint)
    manager, names = task_manager(cfg.tasks, cfg.include)
    lm_eval = require_harness()
    check_hub_reachable(manager, names)
    rows = []
    for checkpoint in loaded:
        results = run_harness(checkpoint, manager, names, cfg)
        base = {
            "evaluation": "harness",
            "checkpoint": str(checkpoint.path.resolve()),
            "step": checkpoint.global_step,
            "arch": checkpoint.config.arch,
            "harness": f"lm-eval {lm_eval.__version__}",
            "limit": cfg.limit,
            "provenance": provenance(FLOAT32, "cpu"),  # the harness runs it on the CPU
        }
        for row in metric_rows(results):
            rows.append({**base, **row, "task_config": _task_config(results, row["task"])})
    print(markdown_table(COLUMNS, [{c: format_value(r.get(c)) for c in COLUMNS} for r in rows]))
    summary: dict[str, Any] = {"results": rows}
    if len(loaded) > 1:  # a sweep: each task metric by configuration, seeds as replicates
        summary["configurations"] = configurations(rows)
        print(summary["configurations"])
    out = save_evaluations(target, rows, _identity)
    return {**summary, "eval_jsonl": str(out)}


def configurations(rows: Sequence[dict[str, Any]]) -> str:
    """One configuration table per task metric, as mode=eval groups a sweep's loss."""
    tables = []
    for key in dict.fromkeys(_metric_name(row) for row in rows):
        scored = [{**row, key: row["value"]} for row in rows if _metric_name(row) == key]
        better = bool(scored[0].get("higher_is_better"))
        tables.append(by_configuration(scored, metric=key, others=(), higher_is_better=better))
    return "\n\n".join(tables)


def _metric_name(row: dict[str, Any]) -> str:
    suffix = "" if row["filter"] == "none" else f",{row['filter']}"
    return f"{row['task']} {row['metric']}{suffix}"


def _task_config(results: dict[str, Any], task: str) -> str:
    """A digest of the task's configuration as the harness ran it (a group: its tasks'),
    without where its YAML lies."""
    configs = results.get("configs", {})
    parts = [task] if task in configs else results.get("group_subtasks", {}).get(task, [])
    return stable_hash([_without_source(configs.get(part)) for part in parts])


def _without_source(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return config
    metadata = {k: v for k, v in (config.get("metadata") or {}).items() if k != "config_source"}
    return {**config, "metadata": metadata}


def _check_settings(settings: Settings) -> None:
    """The tasks named; no setting of mode=eval's scoring, which the harness would ignore."""
    if settings.group("harness").tasks is None:
        raise ValueError(
            "mode=harness needs tasks: harness.tasks=TASK, harness.tasks=TASK1,TASK2 or "
            "harness.tasks=[TASK1,TASK2] (what lm-eval --tasks takes: names, groups, tags)"
        )
    keys = [k for k in settings.overrides if k == "data" or k.startswith("data.")]
    if keys:
        raise ValueError(
            f"{', '.join(keys)} chooses text to score, but harness tasks bring their own "
            "data: drop it, or score that text with mode=eval"
        )
    if settings.eval.stride is not None:
        raise ValueError(
            f"eval.stride={settings.eval.stride} is for scoring text (mode=eval); the harness "
            "tasks decide their own contexts: drop eval.stride"
        )
    if settings.eval.weights != "trained":
        raise ValueError(
            f"eval.weights={settings.eval.weights} is for tinylm's own scoring; the harness "
            "scores the checkpoint's weights: drop eval.weights"
        )


def _identity(record: dict[str, Any]) -> str:
    return stable_hash(*(record.get(key) for key in IDENTITY))
