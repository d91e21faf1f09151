"""Run records and tables: every run directory's ``metrics.json``, and how tinylm prints
numbers in tables.

The train mode writes ``metrics.json`` for completed, interrupted and failed runs alike;
sweep summaries (``modes/summary.py``) and evaluations read them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.files import write_text_atomically

METRICS_FILE = "metrics.json"


def write_metrics(run_dir: Path, metrics: dict[str, Any]) -> Path:
    return write_text_atomically(
        Path(run_dir) / METRICS_FILE, json.dumps(metrics, indent=2, default=str)
    )


def read_metrics(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / METRICS_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def collect_runs(sweep_dir: Path) -> list[dict[str, Any]]:
    """metrics.json of every run directly below ``sweep_dir``, in job order."""
    runs = []
    for run_dir in Path(sweep_dir).iterdir():
        metrics = read_metrics(run_dir) if run_dir.is_dir() else None
        if metrics is not None:
            runs.append({"run": run_dir.name, **metrics})
    return sorted(runs, key=lambda r: natural_key(r["run"]))


def format_value(value: Any) -> Any:
    """A table cell: floats to 4 significant digits (whole numbers from 1000 up), None empty."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return "" if value is None else value


def markdown_table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def natural_key(value: str) -> tuple[int, float, str]:
    """Sort numbers by value ("2" before "10"), then anything else by name."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)
