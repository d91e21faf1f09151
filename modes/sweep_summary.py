"""The summary files of a sweep directory, written at the end of every multirun.

Every run directory of a sweep holds a ``metrics.json``; this module reads them alone, so a
summary can be rebuilt at any time. Runs are grouped by configuration with seeds as replicates
(``modes/summary.py``, which says how differences are judged).

Writes ``summary.md`` (configurations, then runs), ``summary.csv`` (configurations),
``runs.csv`` (runs), ``heatmap_val_loss.png`` and ``curves_val_loss.png`` (``modes/plots.py``).
An Optuna search (``hydra/sweeper=optuna``) is one run per trial, numbered as Optuna numbers
its trials; its summary names the best trial (the plugin's ``optimization_results.yaml``) and
draws no heatmap (values drawn from a range fill one cell per row and column).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.files import write_text_atomically
from modes.plots import plot_curves, plot_heatmap
from modes.report import collect_runs, format_value, markdown_table
from modes.significance import ALPHA
from modes.summary import (
    MEANS,
    REPLICATE_KEY,
    Configuration,
    configuration_rows,
    configuration_table,
    group_runs,
    swept_keys,
)
from modes.time_to_target import UNITS, target_rows, target_section

# The columns of runs.csv after the swept keys: these two even when not swept, then results.
_FIXED_KEYS = ("model.num_heads", "model.dropout")
_RUN_COLUMNS = ("params", "best_val_loss", "val_ppl", "val_acc", "tokens_per_sec", "status")
_TARGET_COLUMNS = (
    "reached",
    *(f"{unit}_to_target_{stat}" for unit in UNITS for stat in ("mean", "std")),
)


def write_sweep_summary(sweep_dir: Path, target_loss: float | None = None) -> list[Path]:
    """The summary files of ``sweep_dir`` (see the module docstring), with the time to
    ``target_loss`` when given; the paths written."""
    sweep_dir = Path(sweep_dir)
    runs = collect_runs(sweep_dir)
    if not runs:
        return []
    keys = swept_keys(runs)
    config_keys = [k for k in keys if k != REPLICATE_KEY]
    configs = group_runs(runs, config_keys)
    rows = configuration_rows(configs)
    run_columns = ["run", *keys, *(c for c in _FIXED_KEYS if c not in keys), *_RUN_COLUMNS]
    run_columns.append("error")
    target = target_rows(configs, target_loss) if target_loss is not None else None
    if target is not None:  # the per-configuration columns of summary.csv
        rows = [{**row, **extra} for row, extra in zip(rows, target, strict=True)]
    run_rows = [{c: format_value(_run_value(run, c)) for c in run_columns} for run in runs]
    numbers = [
        "best_val_loss_mean",
        "best_val_loss_std",
        "vs_best",
        "exceeds_2se",
        "welch_p",
        "holm_p",
        "holm_significant",
    ]
    written = [
        _write_csv(
            sweep_dir / "summary.csv",
            [*config_keys, "n", "failed", *numbers, *MEANS, *(_TARGET_COLUMNS if target else ())],
            rows,
        ),
        _write_csv(sweep_dir / "runs.csv", run_columns, run_rows),
    ]
    search = _search_result(sweep_dir)
    explanation = _explanation(configs, rows, len(runs), search is not None)
    if search:
        explanation += " " + _best_trial(search, runs)
    markdown = (
        f"# Sweep {sweep_dir}\n\n{explanation}\n\n"
        "## Configurations\n\n"
        + configuration_table(configs, rows, MEANS)
        + ("" if target is None else "\n" + target_section(configs, target, target_loss))
        + "\n## Runs\n\n"
        + markdown_table(run_columns, run_rows)
    )
    written.append(write_text_atomically(sweep_dir / "summary.md", markdown))
    if config_keys and search is None:
        written.append(plot_heatmap(configs, config_keys, sweep_dir / "heatmap_val_loss.png"))
    if any(r.get("val_curve") for r in runs):
        written.append(plot_curves(configs, sweep_dir / "curves_val_loss.png"))
    return written


def _explanation(
    configs: Sequence[Configuration], rows: Sequence[dict[str, Any]], n_runs: int, search: bool
) -> str:
    text = (
        f"{n_runs} runs in {len(configs)} configurations. best_val_loss is the mean ± "
        "sample standard deviation over a configuration's completed runs (seeds are "
        "replicates); vs_best is its difference from the best configuration's mean, "
        '"> 2 SE" when that exceeds two standard errors of the difference. p_welch is '
        "the two-sided p-value of Welch's t-test against the best configuration, holm its "
        f"Holm-adjusted value over {_comparisons(rows)} with the best, significant at <= "
        f"{ALPHA} (the family-wise error rate). The best is "
        "chosen from the same runs, so its lead is optimistic: confirm it with new seeds."
    )
    if search:
        text += (
            " An Optuna search runs each trial once (the run's number is the trial's): no "
            "spread is known and differences are not judged."
        )
    elif min(c.n for c in configs) < 2:
        text += (
            " Configurations with fewer than 2 completed runs have no known spread and their "
            "differences are not judged; add seeds (e.g. seed=1,2,3) to judge them."
        )
    beyond = [c.label() for c, row in zip(configs, rows, strict=True) if row["exceeds_2se"]]
    if beyond:
        text += f" Worse than the best beyond noise: {'; '.join(beyond)}."
    return text


def _search_result(sweep_dir: Path) -> dict[str, Any] | None:
    """None unless the sweep is an Optuna search (its sweeper in ``multirun.yaml``); then the
    plugin's ``optimization_results.yaml``, empty until the search has ended with a best trial."""
    from omegaconf import OmegaConf

    config, result = sweep_dir / "multirun.yaml", sweep_dir / "optimization_results.yaml"
    sweeper = OmegaConf.load(config).hydra.get("sweeper", {}) if config.is_file() else {}
    if "optuna" not in str(sweeper.get("_target_", "")).lower():
        return None
    return OmegaConf.to_container(OmegaConf.load(result)) if result.is_file() else {}


def _best_trial(result: dict[str, Any], runs: Sequence[dict[str, Any]]) -> str:
    """The sentence naming the search's best trial and its run."""
    params = result.get("best_params") or {}
    found = [
        run["run"]
        for run in runs
        if run.get("best_val_loss") == result.get("best_value")
        and all(str(run.get("overrides", {}).get(k)) == str(v) for k, v in params.items())
    ]
    settings = ", ".join(f"{k}={v}" for k, v in params.items())
    return (
        f"Optuna's best trial: {f'run {found[0]}' if found else 'a run no longer here'} "
        f"({settings}), best_val_loss {format_value(result.get('best_value'))} "
        "(optimization_results.yaml)."
    )


def _comparisons(rows: Sequence[dict[str, Any]]) -> str:
    tested = sum(row["welch_p"] is not None for row in rows)
    return f"the {tested} comparison{'' if tested == 1 else 's'}"


def _run_value(run: dict[str, Any], column: str) -> Any:
    return {**run.get("config", {}), **run.get("overrides", {}), **run}.get(column)


def _write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(
            {c: "" if row.get(c) is None else row.get(c) for c in columns} for row in rows
        )
    return path
