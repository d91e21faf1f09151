"""The figures of a report (``analysis/report.py``) and of the head analysis (``mode=heads``):
each drawn by one function here, to a PNG or an SVG file as its name says. The heatmap is also
data (``Heatmap``), because the page shows it as a coloured table of text.

The one part of the analysis library that needs matplotlib, apart from the grouping and
statistics (``analysis/summary.py``) so that what only groups runs (``mode=eval`` over a sweep)
never loads it.
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
from matplotlib.ticker import MaxNLocator  # noqa: E402

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
    """A heatmap cell: its configuration's mean (None: no completed run), the text it shows,
    its failed runs, and where its mean lies on the colour range (1: the best, 0: the far
    end)."""

    mean: float | None
    text: str
    failed: int
    goodness: float | None

    @property
    def dark_text(self) -> bool:
        """Dark text on the light (best) half of the colour map, white on the dark."""
        return self.goodness is None or self.goodness >= 0.5

    @property
    def colour(self) -> str:
        """Its background in the page's table: viridis, the light end the best."""
        return to_hex(VIRIDIS(self.goodness or 0.0))


@dataclass
class Heatmap:
    """A metric over the first two swept keys: ``cells[i][j]`` for row value i and column
    value j (None: no configuration), the colour range ``low``..``high`` and its caption."""

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
    cells: list[list[Configuration | None]] = [[None] * len(col_values) for _ in row_values]
    for config in configs:
        i = row_values.index(config.values[row_key])
        j = col_values.index(config.values[col_key]) if col_key else 0
        current = cells[i][j]
        if current is None or (
            config.mean is not None
            and (
                current.mean is None or _better(config.mean, current.mean, config.higher_is_better)
            )
        ):
            cells[i][j] = config
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
    """``heatmap`` as an image: each cell coloured by its mean with its text (a cell whose
    runs all failed hatched), the colour bar, the caption under the title."""
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
    return _save(fig, out_path, dpi=120)


def mean_curve(config: Configuration) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, low, high) of the validation loss at the steps every completed run of
    ``config`` evaluated; low/high are the min and max over its runs."""
    return _band(
        [
            {point[0]: point[1] for point in r["val_curve"]}
            for r in config.completed
            if r.get("val_curve")
        ]
    )


def plot_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """Validation loss against step: one line per configuration (mean over its runs), the
    band between its best and worst run."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _plot_bands(ax, configs, mean_curve)
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss")
    ax.set_title("validation loss (mean over seeds; band: min to max)", fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, out_path, dpi=120)


def best_so_far(values: Sequence[float | None], maximize: bool = False) -> list[float | None]:
    """The best value among each trial and those before it (None until the first value)."""
    best: list[float | None] = []
    for value in values:
        previous = best[-1] if best else None
        if value is None or previous is None:
            best.append(previous if value is None else value)
        else:
            best.append(max(previous, value) if maximize else min(previous, value))
    return best


def plot_search_history(record: dict[str, Any], out_path: Path) -> Path:
    """An Optuna search's history (its ``search.json``), one panel per objective: each
    completed trial's value against its number, the best so far as a step line, the pruned
    trials at their last reported validation loss and the failed ones as crosses on the
    axis."""
    objectives, directions = record["objectives"], record["directions"]
    fig, axes = plt.subplots(1, len(objectives), figsize=(6 * len(objectives), 4), squeeze=False)
    trials = sorted(record["trials"], key=lambda t: t["number"])
    numbers = [t["number"] for t in trials]
    for index, (ax, objective) in enumerate(zip(axes[0], objectives, strict=True)):
        values = [t["values"][index] if t["state"] == "COMPLETE" else None for t in trials]
        done = [n for n, v in zip(numbers, values, strict=True) if v is not None]
        shown = [v for v in values if v is not None]
        if done:
            ax.plot(done, shown, "o", label="completed trial", color="tab:blue")
        best = best_so_far(values, directions[index] == "maximize")
        ax.step(numbers, best, where="post", label="best so far", color="tab:orange")
        pruned = [t for t in trials if t["state"] == "PRUNED" and t["last_reported"] is not None]
        if pruned:  # a pruner prunes searches of one objective
            at = ([t["number"] for t in pruned], [t["last_reported"] for t in pruned])
            ax.plot(*at, "x", color="tab:gray", label="pruned (last reported)")
        failed = [t["number"] for t in trials if t["state"] == "FAIL"]
        if failed:
            floor = min(shown, default=0.0)
            ax.plot(failed, [floor] * len(failed), "x", color="red", label="failed")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("trial")
        ax.set_ylabel(f"{objective} ({directions[index]})")
        ax.legend(fontsize=7)
    fig.suptitle("search history", fontsize=9)
    return _save(fig, out_path, dpi=120)


def plot_head_maps(records: Sequence[dict[str, Any]], out_path: Path, title: str = "") -> Path:
    """Layer x head heatmaps of delta_loss, importance and entropy of ``heads.json`` records
    of one shape (each head's mean over them: a configuration's seeds), the uniform maximum in
    the entropy's label, each head's value written in its cell."""
    uniform = statistics.fmean(record["entropy_uniform"] for record in records)
    panels = (
        ("delta_loss", "loss with the head gated off - base"),
        ("importance", "importance: mean |dL/dgate|"),
        ("entropy", f"entropy, nats (uniform: {uniform:.2f})"),
    )
    num_layers, num_heads = records[0]["num_layers"], records[0]["num_heads"]
    fig, axes = plt.subplots(
        1, 3, figsize=(3 * max(3.0, 0.7 * num_heads + 1.5), max(2.5, 0.6 * num_layers + 1.5))
    )
    for ax, (name, label) in zip(axes, panels, strict=True):
        means = [[0.0] * num_heads for _ in range(num_layers)]
        # each head's rows, one per record (the records list their heads in one order)
        for rows in zip(*(record["heads"] for record in records), strict=True):
            means[rows[0]["layer"]][rows[0]["head"]] = statistics.fmean(row[name] for row in rows)
        image = ax.imshow(means, cmap="viridis", aspect="auto")
        for layer, row in enumerate(means):
            for head, mean in enumerate(row):
                text = f"{mean:.3g}"
                ax.text(head, layer, text, ha="center", va="center", fontsize=7, color="white")
        ax.set_xticks(range(num_heads))
        ax.set_yticks(range(num_layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(label, fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title, fontsize=9)
    return _save(fig, out_path, dpi=110)


def plot_prune_curve(curve: Sequence[dict], out_path: Path, title: str = "") -> Path:
    """Loss against the fraction of heads gated off (least important first)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot([p["removed_fraction"] for p in curve], [p["loss"] for p in curve], marker="o")
    _prune_axes(ax, title)
    return _save(fig, out_path, dpi=110)


def plot_prune_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """One prune curve per configuration (its runs with their ``heads.json`` as ``heads``) as
    the loss over each run's own base loss (so the seeds' different losses do not hide what
    pruning costs), the mean over its runs (seeds), the band between its lowest and highest
    run."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _plot_bands(
        ax,
        configs,
        lambda config: _band([_over_base(r["heads"]["prune_curve"]) for r in config.completed]),
        marker="o",
    )
    _prune_axes(ax, "prune curves (mean over seeds; band: min to max)")
    ax.set_ylabel("loss - the run's loss with every head")
    ax.legend(fontsize=7)
    return _save(fig, out_path, dpi=120)


def _over_base(curve: Sequence[dict]) -> dict[float, float]:
    """A prune curve as removed fraction -> loss minus its first point's (nothing removed)."""
    return {p["removed_fraction"]: p["loss"] - curve[0]["loss"] for p in curve}


def _band(curves: Sequence[dict[Any, float]]) -> tuple[list, list[float], list[float], list[float]]:
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


def _plot_bands(
    ax: plt.Axes,
    configs: Sequence[Configuration],
    band: Callable[[Configuration], tuple[list, list[float], list[float], list[float]]],
    **style: Any,
) -> None:
    """One line per configuration, the mean of its runs' curves (``band``: ``_band``'s), with
    the band from the lowest to the highest where it has several runs."""
    for config in configs:
        xs, mean, low, high = band(config)
        if not xs:
            continue
        (line,) = ax.plot(xs, mean, label=f"{config.label()} (n={config.n})", **style)
        if config.n > 1:
            ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)


def _prune_axes(ax: plt.Axes, title: str) -> None:
    ax.set_xlabel("fraction of heads gated off (least important first)")
    ax.set_ylabel("loss")
    if title:
        ax.set_title(title, fontsize=9)


def _save(fig: plt.Figure, out_path: Path, dpi: int) -> Path:
    """Write ``fig`` in the format ``out_path`` names and free it (a sweep draws many)."""
    fig.tight_layout()
    fig.savefig(out_path, dpi=dpi)
    plt.close(fig)
    return out_path


def _better(value: float, other: float, higher_is_better: bool) -> bool:
    return value > other if higher_is_better else value < other
