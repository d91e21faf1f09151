"""The report's figures, each drawn by one function to a PNG or an SVG file as its name says;
the heatmap is also data (``Heatmap``), which the page shows as a coloured table of text. The
one module of the analysis library that loads matplotlib, so that what only groups runs
(``mode=eval`` over a sweep) never does.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.colors import to_hex  # noqa: E402

from analysis.records import natural_key  # noqa: E402
from analysis.summary import (  # noqa: E402
    Configuration,
    best_configuration,
    difference_from_best,
    mean_pm_std,
)

VIRIDIS = matplotlib.colormaps["viridis"]


@dataclass
class HeatCell:
    """A heatmap cell of a configuration."""

    mean: float | None  # None: no completed run
    text: str
    failed: int
    goodness: float | None  # where the mean lies on the colour range: 1 the best, 0 the far end

    @property
    def dark_text(self) -> bool:
        """Dark text on the light (best) half of the colour map, white on the dark."""
        return self.goodness is None or self.goodness >= 0.5

    @property
    def colour(self) -> str:
        """Its background in the page's table."""
        return to_hex(VIRIDIS(self.goodness or 0.0))


@dataclass
class Heatmap:
    """A metric over the first two swept keys: ``cells[i][j]`` for row value i and column
    value j (None: no configuration)."""

    title: str
    key: str  # the report column it draws
    row_key: str
    col_key: str
    row_values: list[str]
    col_values: list[str]
    cells: list[list[HeatCell | None]]
    low: float
    high: float
    higher_is_better: bool
    caption: str


def heatmap_cells(
    configs: Sequence[Configuration], keys: Sequence[str]
) -> tuple[list[str], list[str], list[list[Configuration | None]]]:
    """(row values, column values, the configuration drawn in each cell) over the first two
    keys; with more keys a cell shows the configuration with the best mean among its own (the
    lowest, or the highest where higher is better)."""
    row_key, col_key = keys[0], (keys[1] if len(keys) > 1 else None)
    row_values = sorted({c.values[row_key] for c in configs}, key=natural_key)
    col_values = sorted({c.values[col_key] for c in configs}, key=natural_key) if col_key else [""]
    shared: dict[tuple[int, int], list[Configuration]] = {}
    for config in configs:
        i = row_values.index(config.values[row_key])
        j = col_values.index(config.values[col_key]) if col_key else 0
        shared.setdefault((i, j), []).append(config)
    cells: list[list[Configuration | None]] = [[None] * len(col_values) for _ in row_values]
    for (i, j), group in shared.items():
        cells[i][j] = best_configuration(group) or group[0]
    return row_values, col_values, cells


def heatmap(
    configs: Sequence[Configuration], keys: Sequence[str], title: str, key: str = ""
) -> Heatmap:
    """The configurations' metric per cell (``heatmap_cells``) as mean ± std, starred when
    worse than the best beyond two standard errors. The best end of the colour range is
    light, and the range is never narrower than four standard deviations, so noise does not
    look like a result."""
    row_values, col_values, layout = heatmap_cells(configs, keys)
    ranked = [c for c in configs if c.mean is not None]
    best = best_configuration(configs)
    best_mean = best.mean if best else 0.0
    stds = [c.std for c in ranked if c.std is not None]
    span = max((abs(c.mean - best_mean) for c in ranked), default=0.0)
    span = max(span, 4 * max(stds, default=0.0), 1e-12)
    higher = bool(configs and configs[0].higher_is_better)
    cells = []
    for row in layout:
        shown: list[HeatCell | None] = []
        for config in row:
            if config is None or config.mean is None:
                failed = config.failed if config else 0
                shown.append(HeatCell(None, "failed", failed, None) if failed else None)
                continue
            beyond = best is not None and difference_from_best(config, best)[1]
            goodness = min(1.0, max(0.0, 1 - abs(config.mean - best_mean) / span))
            text = mean_pm_std(config) + ("*" if beyond else "")
            shown.append(HeatCell(config.mean, text, config.failed, goodness))
        cells.append(shown)
    counts = sorted({c.n for c in configs})
    caption = (
        f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"
    ) + " runs per cell; * worse than the best beyond 2 standard errors"
    if not stds:
        caption = f"n = {max(counts, default=0)} per cell: no spread, differences not judged"
    low, high = (best_mean - span, best_mean) if higher else (best_mean, best_mean + span)
    col_key = keys[1] if len(keys) > 1 else ""
    return Heatmap(
        title, key, keys[0], col_key, row_values, col_values, cells, low, high, higher, caption
    )


def draw_heatmap(heatmap: Heatmap, out_path: Path) -> Path:
    """``heatmap`` as an image; a cell whose runs all failed hatched."""
    grid = [
        [math.nan if c is None or c.mean is None else c.mean for c in row] for row in heatmap.cells
    ]
    width = 2.2 + 1.6 * len(heatmap.col_values)
    fig, ax = plt.subplots(figsize=(width, 1.6 + 0.9 * len(heatmap.row_values)))
    cmap = "viridis" if heatmap.higher_is_better else "viridis_r"
    image = ax.imshow(grid, cmap=cmap, aspect="auto", vmin=heatmap.low, vmax=heatmap.high)
    fig.colorbar(image, ax=ax, label=f"{heatmap.title} (mean over seeds)")
    ax.set_xticks(range(len(heatmap.col_values)), heatmap.col_values)
    ax.set_yticks(range(len(heatmap.row_values)), heatmap.row_values)
    ax.set_xlabel(heatmap.col_key)
    ax.set_ylabel(heatmap.row_key)
    for i, row in enumerate(heatmap.cells):
        for j, cell in enumerate(row):
            text = "-" if cell is None else cell.text.replace(" ± ", "\n± ")
            if cell is not None and cell.mean is None:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="xx", lw=0))
            elif cell is not None and cell.failed:
                text += f"\n({cell.failed} failed)"
            color = "black" if cell is None or cell.dark_text else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    # Wrapped to the figure's width: a one-column heatmap is narrower than its caption.
    caption = textwrap.fill(heatmap.caption, int(width * 11))
    ax.set_title(f"{heatmap.title}\n{caption}", fontsize=9)
    return save_figure(fig, out_path, dpi=120)


def mean_curve(config: Configuration) -> tuple[list[int], list[float], list[float], list[float]]:
    """``band`` of the validation curves of ``config``'s completed runs."""
    return band(
        [
            {point[0]: point[1] for point in r["val_curve"]}
            for r in config.completed
            if r.get("val_curve")
        ]
    )


def plot_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """Validation loss against step, one line and band per configuration."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_bands(ax, configs, mean_curve)
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss")
    ax.set_title("validation loss (mean over seeds; band: min to max)", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, out_path, dpi=120)


def band(curves: Sequence[dict[Any, float]]) -> tuple[list, list[float], list[float], list[float]]:
    """(x, mean, low, high) of ``curves`` (x -> y) at the x values every one of them has;
    low/high are the min and max over them."""
    if not curves:
        return [], [], [], []
    xs = sorted(set.intersection(*(set(c) for c in curves)))
    values = [[c[x] for c in curves] for x in xs]
    return (
        xs,
        [statistics.fmean(v) for v in values],
        [min(v) for v in values],
        [max(v) for v in values],
    )


def plot_bands(
    ax: plt.Axes,
    configs: Sequence[Configuration],
    curve: Callable[[Configuration], tuple[list, list[float], list[float], list[float]]],
    **style: Any,
) -> None:
    """One line per configuration, the mean of its runs' curves (``curve``: ``band``'s), with
    the band from the lowest to the highest where it has several runs."""
    for config in configs:
        xs, mean, low, high = curve(config)
        if not xs:
            continue
        (line,) = ax.plot(xs, mean, label=f"{config.label()} (n={config.n})", **style)
        if config.n > 1:
            ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)


def save_figure(fig: plt.Figure, out_path: Path, dpi: int) -> Path:
    """Write ``fig`` in the format ``out_path`` names and free it (a sweep draws many)."""
    fig.tight_layout()
    fig.savefig(out_path, dpi=dpi)
    plt.close(fig)
    return out_path
