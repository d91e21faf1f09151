"""The summary files of a sweep directory, written at the end of every multirun.

Every run directory of a sweep holds its record; this module reads them alone, so a
summary can be rebuilt at any time. Runs are grouped by configuration with seeds as replicates
(``analysis/summary.py``, which says how differences are judged).

Writes ``summary.md`` (configurations, then runs), ``summary.csv`` (configurations),
``runs.csv`` (runs), ``heatmap_val_loss.png`` and ``curves_val_loss.png`` (``analysis/plots.py``).
An Optuna search (``hydra/sweeper=optuna``) is one run per trial, numbered as Optuna numbers
its trials; its summary names the best trial (``optimization_results.yaml``) or the Pareto
front, adds the search's section and ``optuna_history.png`` from its ``search.json``
(``analysis/search_summary.py``), and draws no heatmap (values drawn from a range fill one cell
per row and column). A sweep of
fine-tunes (``mode=finetune``) is ranked by its task's metric on the test split, highest
best, as its record names it (``test_accuracy``, ``test_f1``, ``test_mcc``), with
the other test metrics as means and no heatmap (its colours rank the lowest best).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from analysis.plots import plot_curves, plot_heatmap, plot_optimisation_history
from analysis.records import format_value, markdown_table, warn
from analysis.run_record import Status, collect_runs
from analysis.search_summary import best_sentence, read_search, search_section
from analysis.significance import ALPHA
from analysis.summary import (
    MEANS,
    REPLICATE_KEY,
    Configuration,
    configuration_rows,
    configuration_table,
    group_runs,
    swept_keys,
)
from analysis.time_to_target import UNITS, target_rows, target_section
from common.files import write_text_atomically
from common.provenance import differing_runs

# The columns of runs.csv after the swept keys: these two even when not swept, then results.
_FIXED_KEYS = ("model.num_heads", "model.dropout")
_RUN_COLUMNS = ("params", "best_val_loss", "val_ppl", "val_acc", "tokens_per_sec", "status")
# A fine-tune's: the test split's metrics, its best validation loss, its speed.
_FINETUNE_MEANS = (
    "test_accuracy",
    "test_f1",
    "test_mcc",
    "best_val_loss",
    "examples_per_sec",
)
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
    ranked = ranking(runs)
    configs = group_runs(runs, config_keys, ranked.metric, ranked.higher_is_better)
    rows = configuration_rows(configs, ranked.means)
    run_columns = ["run", *keys, *(c for c in _FIXED_KEYS if c not in keys), *ranked.run_columns]
    run_columns.append("error")
    if target_loss is not None and ranked.fine_tunes:
        warn("summary.target_loss reads pretraining's validation curve; fine-tunes have none")
        target_loss = None
    target = target_rows(configs, target_loss) if target_loss is not None else None
    if target is not None:  # the per-configuration columns of summary.csv
        rows = [{**row, **extra} for row, extra in zip(rows, target, strict=True)]
    run_rows = [{c: format_value(_run_value(run, c)) for c in run_columns} for run in runs]
    # configuration_rows names the compared metric's statistics best_val_loss_*: the csv
    # names them by the metric
    rows = [
        {
            **row,
            f"{ranked.metric}_mean": row["best_val_loss_mean"],
            f"{ranked.metric}_std": row["best_val_loss_std"],
        }
        for row in rows
    ]
    numbers = [
        f"{ranked.metric}_mean",
        f"{ranked.metric}_std",
        "vs_best",
        "exceeds_2se",
        "welch_p",
        "holm_p",
        "holm_significant",
    ]
    written = [
        _write_csv(
            sweep_dir / "summary.csv",
            [
                *config_keys,
                "n",
                "failed",
                *numbers,
                *ranked.means,
                *(_TARGET_COLUMNS if target else ()),
            ],
            rows,
        ),
        _write_csv(sweep_dir / "runs.csv", run_columns, run_rows),
    ]
    search = search_result(sweep_dir)
    record = read_search(sweep_dir) if search is not None else None
    explanation = _explanation(configs, rows, len(runs), search is not None, ranked)
    if record:
        explanation += " " + best_sentence(record)
    elif search:  # a search that wrote no search.json: an earlier tinylm's
        explanation += " " + _best_trial(search, runs)
    mixed = differing_runs([(run["run"], run.get("provenance")) for run in runs])
    if mixed:
        explanation += f"\n\nProvenance: {mixed}"
    markdown = (
        f"# Sweep {sweep_dir}\n\n{explanation}\n\n"
        "## Configurations\n\n"
        + configuration_table(configs, rows, ranked.means)
        + ("" if target is None else "\n" + target_section(configs, target, target_loss))
        + ("" if record is None else "\n" + search_section(record))
        + "\n## Runs\n\n"
        + markdown_table(run_columns, run_rows)
    )
    written.append(write_text_atomically(sweep_dir / "summary.md", markdown))
    if config_keys and search is None and not ranked.fine_tunes:  # its colours: lower is best
        written.append(plot_heatmap(configs, config_keys, sweep_dir / "heatmap_val_loss.png"))
    if any(r.get("val_curve") for r in runs):
        written.append(plot_curves(configs, sweep_dir / "curves_val_loss.png"))
    if record is not None:
        written.append(plot_optimisation_history(record, sweep_dir / "optuna_history.png"))
    return written


@dataclass(frozen=True)
class Ranking:
    """What a sweep's configurations are compared by: pretraining runs by their best
    validation loss (lowest best), fine-tunes by their task's metric on the test split
    (highest best), as their records name it."""

    metric: str = "best_val_loss"
    higher_is_better: bool = False
    means: tuple[str, ...] = MEANS
    run_columns: tuple[str, ...] = _RUN_COLUMNS
    fine_tunes: bool = False


def ranking(runs: Sequence[dict[str, Any]]) -> Ranking:
    """The ``Ranking`` of a sweep's runs: a fine-tune's when its completed runs are fine-tunes."""
    tuned = [r for r in runs if r.get("status") == Status.COMPLETED and r.get("mode") == "finetune"]
    if not tuned:
        return Ranking()
    metric = f"test_{tuned[0]['metric']}"
    means = tuple(m for m in _FINETUNE_MEANS if m != metric)
    return Ranking(metric, True, means, (metric, *means, "status"), fine_tunes=True)


def _explanation(
    configs: Sequence[Configuration],
    rows: Sequence[dict[str, Any]],
    n_runs: int,
    search: bool,
    ranked: Ranking,
) -> str:
    highest = " (the highest)" if ranked.higher_is_better else ""
    text = (
        f"{n_runs} runs in {len(configs)} configurations. {ranked.metric} is the mean ± "
        "sample standard deviation over a configuration's completed runs (seeds are "
        f"replicates); vs_best is its difference from the best configuration's mean{highest}, "
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


def search_result(sweep_dir: Path) -> dict[str, Any] | None:
    """None unless the sweep is an Optuna search (its sweeper in ``multirun.yaml``); then the
    plugin's ``optimization_results.yaml``, empty until the search has ended with a best trial."""
    config, result = sweep_dir / "multirun.yaml", sweep_dir / "optimization_results.yaml"
    written = yaml.safe_load(config.read_text()) if config.is_file() else {}
    sweeper = (written or {}).get("hydra", {}).get("sweeper") or {}
    if "optuna" not in str(sweeper.get("_target_", "")).lower():
        return None
    return (yaml.safe_load(result.read_text()) or {}) if result.is_file() else {}


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
