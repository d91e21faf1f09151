"""What tinylm writes for people to read about runs: metrics.json, tables, sweep summaries.

Every run directory holds a ``metrics.json`` (written by the train mode, also for failed and
interrupted runs); a sweep summary is built from those files alone, so it can be rebuilt at
any time.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from data.cache import write_text_atomically

METRICS_FILE = "metrics.json"
_FIXED_COLUMNS = ("model.num_heads", "model.dropout")
_RESULT_COLUMNS = ("params", "best_val_loss", "val_ppl", "tokens_per_sec", "status", "error")


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


def swept_keys(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Override keys whose value differs between runs, in the order the user typed them."""
    keys: list[str] = []
    for run in runs:
        for key in run.get("overrides", {}):
            if key not in keys:
                keys.append(key)
    return [k for k in keys if len({str(r.get("overrides", {}).get(k)) for r in runs}) > 1]


def write_sweep_summary(sweep_dir: Path) -> list[Path]:
    """summary.csv, summary.md and a validation-loss heatmap over the first two swept keys."""
    sweep_dir = Path(sweep_dir)
    runs = collect_runs(sweep_dir)
    if not runs:
        return []
    keys = swept_keys(runs)
    columns = ["run", *keys, *(c for c in _FIXED_COLUMNS if c not in keys), *_RESULT_COLUMNS]
    rows = [_summary_row(run, columns) for run in runs]
    written = [sweep_dir / "summary.csv", sweep_dir / "summary.md"]
    with open(written[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    written[1].write_text(markdown_table(columns, rows))
    if keys:
        written.append(plot_heatmap(runs, keys, sweep_dir / "heatmap_val_loss.png"))
    return written


def _summary_row(run: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    values = {**run.get("config", {}), **run.get("overrides", {}), **run}
    return {c: format_value(values.get(c)) for c in columns}


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


@dataclass(frozen=True)
class HeatmapGrid:
    """What the heatmap draws: the best validation loss per (row value, column value) of the
    first two swept keys (NaN where no run completed), and which cells hold a failed run."""

    row_key: str
    col_key: str | None
    row_values: list[str]
    col_values: list[str]
    losses: list[list[float]]
    failed: list[list[bool]]


def heatmap_grid(runs: Sequence[dict[str, Any]], keys: Sequence[str]) -> HeatmapGrid:
    """The grid over the first two swept keys, the best over any other key."""
    row_key, col_key = keys[0], (keys[1] if len(keys) > 1 else None)

    def values_of(key: str | None) -> list[str]:
        seen = [str(r["overrides"].get(key)) for r in runs] if key else [""]
        return sorted(set(seen), key=natural_key)

    row_values, col_values = values_of(row_key), values_of(col_key)
    grid = [[math.nan] * len(col_values) for _ in row_values]
    failed = [[False] * len(col_values) for _ in row_values]
    for run in runs:
        i = row_values.index(str(run["overrides"].get(row_key)))
        j = col_values.index(str(run["overrides"].get(col_key))) if col_key else 0
        loss = run.get("best_val_loss")
        if run.get("status") == "completed" and loss is not None:
            grid[i][j] = loss if math.isnan(grid[i][j]) else min(grid[i][j], loss)
        elif run.get("status") == "failed":
            failed[i][j] = True
    return HeatmapGrid(row_key, col_key, row_values, col_values, grid, failed)


def plot_heatmap(runs: Sequence[dict[str, Any]], keys: Sequence[str], out_path: Path) -> Path:
    """Best validation loss over the first two swept keys (``heatmap_grid``), as a PNG."""
    heatmap = heatmap_grid(runs, keys)
    row_key, col_key = heatmap.row_key, heatmap.col_key
    row_values, col_values = heatmap.row_values, heatmap.col_values
    grid, failed = heatmap.losses, heatmap.failed
    fig, ax = plt.subplots(figsize=(1.6 + 1.2 * len(col_values), 1.2 + 0.8 * len(row_values)))
    image = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    fig.colorbar(image, ax=ax, label="best validation loss")
    ax.set_xticks(range(len(col_values)), col_values)
    ax.set_yticks(range(len(row_values)), row_values)
    ax.set_xlabel(col_key or "")
    ax.set_ylabel(row_key)
    low, high = image.get_clim()
    for i, row in enumerate(grid):
        for j, loss in enumerate(row):
            text = f"{loss:.3f}" if math.isfinite(loss) else ("failed" if failed[i][j] else "-")
            # Dark text on the light (low-loss) end of the colour map, white on the dark end.
            light = math.isfinite(loss) and (loss - low) <= 0.5 * (high - low)
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=9,
                color="black" if light else "white",
            )
    ax.set_title("validation loss")
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def natural_key(value: str) -> tuple[int, float, str]:
    """Sort numbers by value ("2" before "10"), then anything else by name."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)
