"""What the summary tests share: hand-made runs as a sweep job's metrics.json holds them, the
summary's opening sentences, and the tables and CSV files a summary writes, read back cell by
cell."""

from __future__ import annotations

import csv
from pathlib import Path


def table_cells(table: str) -> list[list[str]]:
    """The body rows of a markdown table, cell by cell."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV file's columns and its rows."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    return list(reader.fieldnames or []), rows


def hand_made_run(loss: float | None, seed: str, curve: bool = True, **overrides: str) -> dict:
    """A run's metrics.json: completed with ``loss`` (and a validation curve unless not
    ``curve``), or failed when ``loss`` is None."""
    record: dict = {"overrides": {"seed": seed, **overrides}}
    if loss is None:
        return {**record, "status": "failed", "error": "boom, in two words"}
    record.update(status="completed", best_val_loss=loss, val_acc=0.25, params=1000)
    if curve:
        record["val_curve"] = [[5, loss + 1.0], [10, loss]]
    return record


_FIRST_SENTENCES = (
    "is the mean ± sample standard deviation over a configuration's completed runs (seeds are "
    "replicates); vs_best is its difference from the best configuration's mean"
)
_JUDGED = (
    '"> 2 SE" when that exceeds two standard errors of the difference. p_welch is the '
    "two-sided p-value of Welch's t-test against the best configuration, holm its "
    "Holm-adjusted value over {comparisons} with the best, significant at <= 0.05 (the "
    "family-wise error rate). The best is chosen from the same runs, so its lead is "
    "optimistic: confirm it with new seeds."
)


def explanation(runs: int, configs: int, metric: str, comparisons: str, highest: str) -> str:
    """The summary's opening sentences as a user reads them."""
    return (
        f"{runs} runs in {configs} configurations. {metric} {_FIRST_SENTENCES}{highest}, "
        + _JUDGED.format(comparisons=comparisons)
    )


def summary_md(sweep: Path) -> str:
    return (sweep / "summary.md").read_text()


def summary_section(summary: str, heading: str) -> str:
    """The text of the summary.md section ``heading`` up to the next section."""
    return summary.split(f"\n## {heading}\n\n", 1)[1].split("\n## ", 1)[0]
