"""The figures of a sweep summary (the validation-loss heatmap, the validation curves) and of
the head analysis (``mode=heads``: per-head maps, prune curves, a sweep's prune curves).

The one part of the summary that needs matplotlib, apart from the grouping and statistics
(``analysis/summary.py``) so that what only groups runs (``mode=eval`` over a sweep) never loads it.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator  # noqa: E402

from analysis.records import natural_key  # noqa: E402
from analysis.summary import (  # noqa: E402
    Configuration,
    best_configuration,
    difference_from_best,
    mean_pm_std,
)


class HeadMaps(Protocol):
    """What the head maps draw: per-head [layer][head] values (the heads feature's
    ``HeadStats`` has them; the analysis library reads no torch)."""

    entropy_uniform: float
    delta_loss: list[list[float]]
    importance: list[list[float]]
    entropy: list[list[float]]


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


def plot_heatmap(
    configs: Sequence[Configuration],
    keys: Sequence[str],
    out_path: Path,
    label: str = "best validation loss",
) -> Path:
    """Mean of the configurations' metric (``label``: the best validation loss unless named)
    per cell with its spread; failed cells hatched. The best end of the colour map is light
    (the lowest value, or the highest where higher is better). The colour range is never
    narrower than four standard deviations, so noise does not look like a result; cells worse
    than the best beyond two standard errors are starred."""
    row_values, col_values, cells = heatmap_cells(configs, keys)
    ranked = [c for c in configs if c.mean is not None]
    best = best_configuration(configs)
    higher = bool(configs and configs[0].higher_is_better)
    grid = [[math.nan if c is None or c.mean is None else c.mean for c in row] for row in cells]
    stds = [c.std for c in ranked if c.std is not None]
    best_mean = best.mean if best else 0.0
    span = max((abs(c.mean - best_mean) for c in ranked), default=0.0)
    span = max(span, 4 * max(stds, default=0.0), 1e-6)
    low, high = (best_mean - span, best_mean) if higher else (best_mean, best_mean + span)
    width = 2.2 + 1.6 * len(col_values)
    fig, ax = plt.subplots(figsize=(width, 1.6 + 0.9 * len(row_values)))
    cmap = "viridis" if higher else "viridis_r"
    image = ax.imshow(grid, cmap=cmap, aspect="auto", vmin=low, vmax=high)
    fig.colorbar(image, ax=ax, label=f"{label} (mean over seeds)")
    ax.set_xticks(range(len(col_values)), col_values)
    ax.set_yticks(range(len(row_values)), row_values)
    ax.set_xlabel(keys[1] if len(keys) > 1 else "")
    ax.set_ylabel(keys[0])
    for i, row in enumerate(cells):
        for j, config in enumerate(row):
            if config is None or config.mean is None and not config.failed:
                text, light = "-", True
            elif config.mean is None:
                text, light = "failed", True
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="xx", lw=0))
            else:
                _, exceeds = difference_from_best(config, best)
                text = mean_pm_std(config).replace(" ± ", "\n± ") + ("*" if exceeds else "")
                if config.failed:
                    text += f"\n({config.failed} failed)"
                # Dark text on the light (best) end of the colour map, white on the dark.
                light = abs(config.mean - best_mean) <= 0.5 * span
            color = "black" if light else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    counts = sorted({c.n for c in configs})
    caption = (
        f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"
    ) + " runs per cell; * worse than the best beyond 2 standard errors"
    if not stds:
        caption = f"n = {max(counts, default=0)} per cell: no spread, differences not judged"
    # Wrapped to the figure's width: a one-column heatmap is narrower than its caption.
    ax.set_title(f"{label}\n" + textwrap.fill(caption, int(width * 11)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def mean_curve(config: Configuration) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, low, high) of the validation loss at the steps every completed run of
    ``config`` evaluated; low/high are the min and max over its runs."""
    curves = [
        {point[0]: point[1] for point in r["val_curve"]}  # step -> loss
        for r in config.completed
        if r.get("val_curve")
    ]
    if not curves:
        return [], [], [], []
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    values = [[c[s] for c in curves] for s in steps]
    return (
        steps,
        [statistics.fmean(v) for v in values],
        [min(v) for v in values],
        [max(v) for v in values],
    )


def plot_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """Validation loss against step: one line per configuration (mean over its runs), the
    band between its best and worst run."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config in configs:
        steps, mean, low, high = mean_curve(config)
        if not steps:
            continue
        (line,) = ax.plot(steps, mean, label=f"{config.label()} (n={config.n})")
        if config.n > 1:
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss")
    ax.set_title("validation loss (mean over seeds; band: min to max)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


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


def plot_optimisation_history(report: dict, out_path: Path) -> Path:
    """An Optuna search's optimisation history (``search.json``), one panel per objective:
    each completed trial's value against its number, the best so far as a step line, and the
    pruned trials at their last reported validation loss."""
    objectives, directions = report["objectives"], report["directions"]
    fig, axes = plt.subplots(1, len(objectives), figsize=(6 * len(objectives), 4), squeeze=False)
    trials = sorted(report["trials"], key=lambda t: t["number"])
    for index, (ax, objective) in enumerate(zip(axes[0], objectives, strict=True)):
        values = [t["values"][index] if t["state"] == "COMPLETE" else None for t in trials]
        numbers = [t["number"] for t in trials]
        done = [n for n, v in zip(numbers, values, strict=True) if v is not None]
        if done:
            shown = [v for v in values if v is not None]
            ax.plot(done, shown, "o", label="completed trial", color="tab:blue")
        best = best_so_far(values, directions[index] == "maximize")
        ax.step(numbers, best, where="post", label="best so far", color="tab:orange")
        pruned = [t for t in trials if t["state"] == "PRUNED"]
        if pruned:  # a pruner prunes searches of one objective
            at = ([t["number"] for t in pruned], [t["last_reported"] for t in pruned])
            ax.plot(*at, "x", color="tab:gray", label="pruned (last reported)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("trial")
        ax.set_ylabel(f"{objective} ({directions[index]})")
        ax.legend(fontsize=7)
    fig.suptitle("optimisation history", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def plot_head_maps(stats: HeadMaps, out_path: Path, title: str = "") -> Path:
    """Layer x head heatmaps of delta_loss, importance and entropy (the uniform maximum in
    the colour bar's label), each head's value written in its cell."""
    panels = (
        ("delta_loss", "loss with the head gated off - base"),
        ("importance", "importance: mean |dL/dgate|"),
        ("entropy", f"entropy, nats (uniform: {stats.entropy_uniform:.2f})"),
    )
    num_layers, num_heads = len(stats.importance), len(stats.importance[0])
    fig, axes = plt.subplots(
        1, 3, figsize=(3 * max(3.0, 0.7 * num_heads + 1.5), max(2.5, 0.6 * num_layers + 1.5))
    )
    for ax, (name, label) in zip(axes, panels, strict=True):
        values = getattr(stats, name)
        image = ax.imshow(values, cmap="viridis", aspect="auto")
        for layer in range(num_layers):
            for head in range(num_heads):
                ax.text(
                    head,
                    layer,
                    f"{values[layer][head]:.3g}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
        ax.set_xticks(range(num_heads))
        ax.set_yticks(range(num_layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(label, fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def plot_prune_curve(curve: Sequence[dict], out_path: Path, title: str = "") -> Path:
    """Loss against the fraction of heads gated off (least important first)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot([p["removed_fraction"] for p in curve], [p["loss"] for p in curve], marker="o")
    _prune_axes(ax, title)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def plot_prune_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """One prune curve per configuration as the loss over each run's own base loss (so the
    seeds' different losses do not hide what pruning costs), the mean over its runs (seeds),
    the band between its lowest and highest run."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config in configs:
        curves = [_over_base(r["prune_curve"]) for r in config.completed]
        if not curves:
            continue
        fractions = sorted(set.intersection(*(set(c) for c in curves)))
        values = [[c[f] for c in curves] for f in fractions]
        mean = [statistics.fmean(v) for v in values]
        (line,) = ax.plot(fractions, mean, marker="o", label=f"{config.label()} (n={config.n})")
        if config.n > 1:
            low, high = [min(v) for v in values], [max(v) for v in values]
            ax.fill_between(fractions, low, high, color=line.get_color(), alpha=0.2)
    _prune_axes(ax, "prune curves (mean over seeds; band: min to max)")
    ax.set_ylabel("loss - the run's loss with every head")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def _over_base(curve: Sequence[dict]) -> dict[float, float]:
    """A prune curve as removed fraction -> loss minus its first point's (nothing removed)."""
    return {p["removed_fraction"]: p["loss"] - curve[0]["loss"] for p in curve}


def _prune_axes(ax: plt.Axes, title: str) -> None:
    ax.set_xlabel("fraction of heads gated off (least important first)")
    ax.set_ylabel("loss")
    if title:
        ax.set_title(title, fontsize=9)


def plot_search_history(trials: Sequence[tuple[int, float | None]], out_path: Path) -> Path:
    """A search's best validation loss per trial (number, loss; None: failed, drawn as a cross
    on the axis) and the best so far."""
    fig, ax = plt.subplots(figsize=(7, 4))
    done = [(n, loss) for n, loss in trials if loss is not None]
    ax.plot([n for n, _ in done], [loss for _, loss in done], "o", label="trial")
    so_far = best_so_far([loss for _, loss in done])
    ax.step([n for n, _ in done], so_far, where="post", label="best so far")
    failed = [n for n, loss in trials if loss is None]
    if failed:
        floor = min((loss for _, loss in done), default=0.0)
        ax.plot(failed, [floor] * len(failed), "x", color="red", label="failed")
    ax.set_xlabel("trial")
    ax.set_ylabel("best validation loss")
    ax.set_title("search history", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def _better(value: float, other: float, higher_is_better: bool) -> bool:
    return value > other if higher_is_better else value < other
