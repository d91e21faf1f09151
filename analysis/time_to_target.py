"""Time to a target loss (``summary.target_loss``): when each run's validation loss first
reached it, in steps, tokens, FLOPs and seconds, and per configuration over its seeds. Read from
the record's ``val_curve``, so known to the validation interval; a run that never reached it
counts as not reached, never as its full length.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from analysis.records import markdown_table
from analysis.summary import Configuration

UNITS = ("steps", "tokens", "flops", "seconds")


def first_reached(run: dict[str, Any], target: float) -> dict[str, float | None] | None:
    """The steps, tokens, FLOPs and seconds at ``run``'s first validation with loss <=
    ``target`` (None for what was not recorded), or None when none reached it."""
    for point in run.get("val_curve") or []:
        if point[1] <= target:
            tokens, seconds = (point[2], point[3]) if len(point) == 4 else (None, None)
            flops_per_token = run.get("flops_per_token")
            flops = tokens * flops_per_token if tokens is not None and flops_per_token else None
            return {"steps": point[0], "tokens": tokens, "flops": flops, "seconds": seconds}
    return None


def target_rows(configs: Sequence[Configuration], target: float) -> list[dict[str, Any]]:
    """Per configuration: its values, how many completed runs reached ``target`` of how many,
    and the mean and sample std of each unit over the runs that did."""
    rows = []
    for config in configs:
        reached = [r for r in (first_reached(run, target) for run in config.completed) if r]
        row: dict[str, Any] = {**config.values, "reached": len(reached), "n": config.n}
        for unit in UNITS:
            values = [r[unit] for r in reached if r[unit] is not None]
            row[f"{unit}_to_target_mean"] = statistics.fmean(values) if values else None
            row[f"{unit}_to_target_std"] = statistics.stdev(values) if len(values) > 1 else None
        rows.append(row)
    return rows


def target_section(
    configs: Sequence[Configuration], rows: Sequence[dict[str, Any]], target: float
) -> str:
    """The summary.md section: one row per configuration, mean ± std of each unit."""
    keys = list(configs[0].values) if configs else []
    columns = [*keys, "reached", *(f"{unit}_to_target" for unit in UNITS)]
    shown = []
    for row in rows:
        cells = {k: row[k] for k in keys}
        cells["reached"] = f"{row['reached']}/{row['n']}"
        for unit in UNITS:
            mean, std = row[f"{unit}_to_target_mean"], row[f"{unit}_to_target_std"]
            text = "" if mean is None else f"{mean:.4g}"
            cells[f"{unit}_to_target"] = text if std is None else f"{text} ± {std:.2g}"
        shown.append(cells)
    if not any(row["reached"] for row in rows):
        lead = (
            f"No run reached validation loss {target:g}: raise summary.target_loss, or "
            "train longer."
        )
    else:
        lead = (
            f"When validation loss first reached {target:g} (summary.target_loss): mean ± std "
            "over the completed runs that reached it (reached: how many of them did), at "
            "the resolution of the validation interval; seconds exclude validation."
        )
    return f"## Time to validation loss {target:g}\n\n{lead}\n\n" + markdown_table(columns, shown)
