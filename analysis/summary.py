"""Runs grouped by configuration, with seeds as replicates: the statistics and their table.

A configuration's metric is the mean ± sample standard deviation over its completed runs; each
is compared with the best (lowest, or highest where higher is better): a difference counts when
it exceeds two standard errors of the difference, and Welch's t-test gives its p-value, with
Holm's correction across the table (``analysis/significance.py``). Standard library and scipy
only: ``mode=eval`` over a sweep groups runs without loading matplotlib.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.records import format_value, markdown_table, natural_key, warn
from analysis.run_record import Status, read_run
from analysis.significance import ALPHA, holm_adjusted, welch_p_value
from common.provenance import differing_runs

REPLICATE_KEY = "seed"
# The metrics a configuration reports as the mean over its completed runs.
MEANS = ("val_ppl", "val_bpc", "val_bpb", "val_acc", "tokens_per_sec", "params")


@dataclass
class Configuration:
    """The runs of one setting of the swept keys (other than the seed)."""

    values: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)
    metric: str = "best_val_loss"  # the loss compared between configurations
    higher_is_better: bool = False  # an accuracy: the best configuration is the highest

    @property
    def completed(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.runs
            if r.get("status") == Status.COMPLETED and r.get(self.metric) is not None
        ]

    @property
    def failed(self) -> int:
        return sum(r.get("status") == Status.FAILED for r in self.runs)

    @property
    def n(self) -> int:
        return len(self.completed)

    @property
    def losses(self) -> list[float]:
        return [float(r[self.metric]) for r in self.completed]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.losses) if self.losses else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation; None below two runs."""
        return statistics.stdev(self.losses) if self.n >= 2 else None

    @property
    def standard_error(self) -> float | None:
        return None if self.std is None else self.std / math.sqrt(self.n)

    def mean_of(self, key: str) -> float | None:
        values = [float(r[key]) for r in self.completed if r.get(key) is not None]
        return statistics.fmean(values) if values else None

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items()) or "all runs"


def swept_keys(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Override keys whose value differs between runs, in the order the user typed them. A
    run without recorded overrides (its record was damaged) sets no key apart."""
    recorded = [run["overrides"] for run in runs if "overrides" in run]
    keys = dict.fromkeys(key for overrides in recorded for key in overrides)
    return [k for k in keys if len({str(o.get(k)) for o in recorded}) > 1]


def group_runs(
    runs: Sequence[dict[str, Any]],
    keys: Sequence[str],
    metric: str = "best_val_loss",
    higher_is_better: bool = False,
) -> list[Configuration]:
    """One ``Configuration`` per distinct setting of ``keys``, in natural order of the values."""
    groups: dict[tuple[str, ...], Configuration] = {}
    for run in runs:
        values = {k: str(run.get("overrides", {}).get(k)) for k in keys}
        group = groups.setdefault(
            tuple(values.values()),
            Configuration(values, metric=metric, higher_is_better=higher_is_better),
        )
        group.runs.append(run)
    return [groups[k] for k in sorted(groups, key=lambda t: [natural_key(v) for v in t])]


def best_configuration(configs: Sequence[Configuration]) -> Configuration | None:
    """The configuration with the lowest mean loss, or the highest mean of a metric where
    higher is better (None when every one failed)."""
    ranked = [c for c in configs if c.mean is not None]
    if not ranked:
        return None
    return (max if ranked[0].higher_is_better else min)(ranked, key=lambda c: c.mean)


def difference_from_best(
    config: Configuration, best: Configuration
) -> tuple[float | None, bool | None]:
    """(mean - best mean, whether its size exceeds two standard errors of the difference);
    the second is None when either side has fewer than two runs."""
    if config.mean is None or best.mean is None:
        return None, None
    diff = config.mean - best.mean
    if config.standard_error is None or best.standard_error is None:
        return diff, None
    return diff, abs(diff) > 2 * math.hypot(config.standard_error, best.standard_error)


def mean_pm_std(config: Configuration) -> str:
    if config.mean is None:
        return "failed" if config.failed else ""
    if config.std is None:
        return f"{config.mean:.4f}"
    return f"{config.mean:.4f} ± {config.std:.4f}"


def configuration_rows(
    configs: Sequence[Configuration], means: Sequence[str] = MEANS
) -> list[dict[str, Any]]:
    """One row per configuration: its key values, n, failed runs, the metric's mean and std,
    its difference from the best, the 2 SE verdict, Welch's p-value and Holm's adjusted value
    and verdict at ALPHA, and the means of the ``means`` metrics."""
    best = best_configuration(configs)
    p_values = [
        welch_p_value(config.losses, best.losses) if best and config is not best else None
        for config in configs
    ]
    adjusted = holm_adjusted(p_values)
    rows = []
    for config, p_value, holm_p in zip(configs, p_values, adjusted, strict=True):
        diff, exceeds = difference_from_best(config, best) if best else (None, None)
        rows.append(
            {
                **config.values,
                "n": config.n,
                "failed": config.failed,
                "best_val_loss_mean": config.mean,
                "best_val_loss_std": config.std,
                "vs_best": diff,
                "exceeds_2se": exceeds,
                "welch_p": p_value,
                "holm_p": holm_p,
                "holm_significant": None if holm_p is None else holm_p <= ALPHA,
                "is_best": config is best,
                "label": mean_pm_std(config),
                **{key: config.mean_of(key) for key in means},
            }
        )
    return rows


def configuration_table(
    configs: Sequence[Configuration], rows: Sequence[dict[str, Any]], extra: Sequence[str] = ()
) -> str:
    """The markdown table of ``configuration_rows``, then the ``extra`` columns."""
    keys = list(configs[0].values) if configs else []
    metric = configs[0].metric if configs else "best_val_loss"
    columns = [*keys, "n", "failed", metric, "vs_best", "p_welch", "holm", *extra]
    return markdown_table(columns, [{**_display(row), metric: row["label"]} for row in rows])


def _display(row: dict[str, Any]) -> dict[str, Any]:
    """A configuration row as the markdown table shows it (the metric's cell: ``label``)."""
    if row["is_best"]:
        verdict = "best"
    elif row["vs_best"] is None:
        verdict = ""
    else:
        judged = {True: " (> 2 SE)", False: " (within noise)", None: ""}[row["exceeds_2se"]]
        verdict = f"{row['vs_best']:+.4f}{judged}"
    shown = {k: format_value(v) for k, v in row.items()}
    holm = ""
    if row["holm_p"] is not None:
        judged = "significant" if row["holm_significant"] else "not significant"
        holm = f"{row['holm_p']:.3g} ({judged})"
    return {
        **shown,
        "vs_best": verdict,
        "p_welch": "" if row["welch_p"] is None else f"{row['welch_p']:.3g}",
        "holm": holm,
    }


def by_configuration(
    rows: Sequence[dict[str, Any]],
    metric: str = "loss",
    others: Sequence[str] = (),
    higher_is_better: bool = False,
) -> str:
    """The evaluated ``metric`` (with the means of ``others``) of a sweep's runs grouped as
    the sweep summary groups them, as a markdown table."""
    runs, provenances = [], {}
    for row in rows:
        run_dir = Path(row["checkpoint"]).parent.parent
        stored = read_run(run_dir, "the run is grouped without its settings") or {}
        run = {"status": Status.COMPLETED, **row}
        if "overrides" in stored:  # none recorded: the run sets no key apart (summary.swept_keys)
            run["overrides"] = stored["overrides"]
        runs.append(run)
        provenances[run_dir.name] = stored.get("provenance")
    mixed = differing_runs(list(provenances.items()))
    if mixed:
        warn(mixed)
    keys = [k for k in swept_keys(runs) if k != REPLICATE_KEY]
    configs = group_runs(runs, keys, metric=metric, higher_is_better=higher_is_better)
    return configuration_table(configs, configuration_rows(configs, others), others)
