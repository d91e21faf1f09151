"""What the summary tests share: hand-made runs as a sweep job's metrics.json holds them, and
the tables and CSV files a summary writes, read back cell by cell."""

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
