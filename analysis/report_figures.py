"""The report's figures: the summary's and the head analysis's own (``analysis/plots.py``),
drawn as SVG and embedded in the page as ``data:`` URIs, so that the page is one file that
needs nothing else (and an image cannot run a script).
"""

from __future__ import annotations

import base64
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.colors import to_hex

from analysis.plots import (
    heatmap_cells,
    plot_curves,
    plot_heatmap,
    plot_prune_curve,
    plot_prune_curves,
    plot_search_history,
)
from analysis.report_columns import Column, column_cells
from analysis.run_record import Status
from analysis.summary import Configuration, group_runs

VIRIDIS = colormaps["viridis"]


@dataclass
class Figure:
    """One embedded figure: what it shows, and the image as a data URI."""

    title: str
    uri: str
    key: str = ""  # the column a heatmap draws


@dataclass
class Grid:
    """A heatmap drawn as a table: ``cells[i][j]`` for row value i and column value j (None:
    no value), each with its colour."""

    title: str
    key: str  # the column it draws (a heatmap), or ""
    row_values: list[str]
    col_values: list[str]
    cells: list[list[dict[str, Any] | None]]


def svg_uri(draw: Callable[[Path], Path]) -> str:
    """What ``draw`` writes to the SVG file it is given, as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        data = draw(Path(tmp) / "figure.svg").read_bytes()
    return "data:image/svg+xml;base64," + base64.b64encode(data).decode("ascii")


def heatmaps(
    columns: Sequence[Column], runs: Sequence[dict[str, Any]], keys: Sequence[str]
) -> list[Grid]:
    """Each judged column over the first two swept keys as a coloured table (the best end of
    the colour map light; its range never narrower than four standard deviations, so noise
    does not look like a result, as in the summary's heatmap), one cell per configuration
    (``heatmap_cells``: with more keys, the best of those it stands for)."""
    grids = []
    for column in columns:
        if not column.judged:
            continue
        configs, cells = column_cells(column, runs, keys)
        by_config = {id(config): cell for config, cell in zip(configs, cells, strict=True)}
        measured = [cell for cell in cells if cell.mean is not None]
        if not measured:
            continue
        best = next((cell for cell in cells if cell.best), measured[0])
        spread = max((cell.std for cell in measured if cell.std is not None), default=0.0)
        span = max(max(abs(c.mean - best.mean) for c in measured), 4 * spread, 1e-12)
        row_values, col_values, layout = heatmap_cells(configs, keys)
        grid = []
        for row in layout:
            shown = []
            for config in row:
                cell = by_config.get(id(config)) if config is not None else None
                if cell is None or cell.mean is None:
                    shown.append(None)
                    continue
                worse = abs(cell.mean - best.mean) / span  # 0 at the best, 1 at the range's end
                shown.append({"cell": cell, **_colour(1 - worse)})
            grid.append(shown)
        grids.append(Grid(column.title, column.key, row_values, col_values, grid))
    return grids


def head_maps(configs: Sequence[Configuration], heads: dict[str, dict[str, Any]]) -> list[Grid]:
    """Per configuration: each head's importance (mean |dL/dgate|, averaged over the
    configuration's analysed runs) as a layer x head table, coloured by its share of the
    largest."""
    grids = []
    for config in configs:
        records = [heads[r["run"]] for r in config.runs if r["run"] in heads]
        if not records or len({(r["num_layers"], r["num_heads"]) for r in records}) > 1:
            continue
        importance = _averaged(records, "importance")
        largest = max(max(row) for row in importance) or 1.0
        grid = [
            [{"value": value, **_colour(value / largest)} for value in row] for row in importance
        ]
        title = f"{config.label()} (mean over {len(records)} run{'s' * (len(records) > 1)})"
        layers = [str(layer) for layer in range(len(importance))]
        grids.append(Grid(title, "", layers, [str(h) for h in range(len(importance[0]))], grid))
    return grids


def loss_heatmap(configs: Sequence[Configuration], keys: Sequence[str]) -> Figure:
    """The summary's heatmap of the best validation loss."""
    return Figure(
        "best validation loss over the first two swept keys",
        svg_uri(lambda path: plot_heatmap(configs, keys, path)),
    )


def validation_curves(configs: Sequence[Configuration]) -> Figure | None:
    """The validation curves of the configurations' runs, with their bands over seeds."""
    if not any(r.get("val_curve") for c in configs for r in c.completed):
        return None
    return Figure(
        "validation loss (mean over seeds; band: min to max)",
        svg_uri(lambda path: plot_curves(configs, path)),
    )


def prune_curves(
    runs: Sequence[dict[str, Any]], heads: dict[str, dict[str, Any]], keys: Sequence[str]
) -> Figure | None:
    """The prune curves of the analysed runs, a band over each configuration's seeds."""
    analysed = [
        {
            "status": run.get("status"),
            "overrides": run.get("overrides", {}),
            "pruned_half_loss": heads[run["run"]]["pruned_half_loss"],
            "prune_curve": heads[run["run"]]["prune_curve"],
        }
        for run in runs
        if run["run"] in heads
    ]
    if not analysed:
        return None
    configs = group_runs(analysed, keys, metric="pruned_half_loss")
    return Figure("prune curves", svg_uri(lambda path: plot_prune_curves(configs, path)))


def prune_curve(record: dict[str, Any]) -> Figure:
    """One run's prune curve."""
    return Figure(
        "prune curve", svg_uri(lambda path: plot_prune_curve(record["prune_curve"], path))
    )


def search_history(runs: Sequence[dict[str, Any]]) -> Figure:
    """A search's trials in order with the best so far."""
    trials = [
        (
            int(run["run"]),
            run.get("best_val_loss") if run.get("status") == Status.COMPLETED else None,
        )
        for run in runs
        if str(run["run"]).isdigit()
    ]
    return Figure("search history", svg_uri(lambda path: plot_search_history(trials, path)))


def _averaged(records: Sequence[dict[str, Any]], name: str) -> list[list[float]]:
    """The per-head ``name`` of the records' heads, [layer][head], averaged over them."""
    layers, heads = records[0]["num_layers"], records[0]["num_heads"]
    cells: list[list[list[float]]] = [[[] for _ in range(heads)] for _ in range(layers)]
    for record in records:
        for row in record["heads"]:
            cells[row["layer"]][row["head"]].append(row[name])
    return [[statistics.fmean(values) for values in row] for row in cells]


def _colour(goodness: float) -> dict[str, Any]:
    """A cell's background on viridis (1: the light, best end) and whether its text is dark."""
    goodness = min(1.0, max(0.0, goodness))
    return {"colour": to_hex(VIRIDIS(goodness)), "dark_text": goodness >= 0.5}
