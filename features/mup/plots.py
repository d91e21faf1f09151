"""The μP figures: the coordinate check (mup's ``plot_coord_data`` layout: mean |activation|
against width, log-log, a line per layer, a panel per step, a row per parametrization) and the
learning-rate transfer (loss against learning rate, a curve per width, a panel per setting of
the sweep's other keys)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from analysis.plots import save_figure
from features.mup.transfer import Transfer


def plot_coord_check(data: dict[str, Any], out_path: Path, title: str = "") -> Path:
    """``coordcheck.json``'s means as mup draws them; a zero mean (a zero-initialised
    readout's logits at step 0) has no place on a log axis and is left out, as the panel's
    title says."""
    widths: Sequence[int] = data["widths"]
    layers: Sequence[str] = data["layers"]
    rows: Sequence[str] = list(data["results"])
    steps = data["steps"]
    # A last, narrow column holds the legend: save_figure's tight layout then leaves it room.
    fig, grid = plt.subplots(
        len(rows),
        steps + 1,
        figsize=(2.6 * steps + 1.8, 2.5 * len(rows) + 0.6),
        squeeze=False,
        gridspec_kw={"width_ratios": [1.0] * steps + [0.55]},
    )
    axes = [row[:steps] for row in grid]
    for row in grid:
        row[steps].axis("off")
    colours = plt.get_cmap("viridis")
    for row, parametrization in enumerate(rows):
        means = data["results"][parametrization]
        for step in range(steps):
            ax = axes[row][step]
            zero = False
            for i, layer in enumerate(layers):
                values = means[layer][step]
                zero |= any(v == 0 for v in values)
                shown = [v if v > 0 else math.nan for v in values]
                colour = colours(i / max(1, len(layers) - 1))
                ax.plot(widths, shown, marker=".", color=colour, label=layer, lw=1)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(list(widths), [str(w) for w in widths], fontsize=7)
            ax.tick_params(axis="y", which="both", labelsize=7)
            note = "\n(zero means not drawn)" if zero else ""
            ax.set_title(f"{parametrization}, step {step}{note}", fontsize=8)
            if step == 0:
                ax.set_ylabel("mean |activation|", fontsize=8)
            if row == len(rows) - 1:
                ax.set_xlabel("width (hidden_size)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    grid[0][steps].legend(handles, labels, loc="upper left", fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out_path, dpi=110)


def plot_transfer(transfer: Transfer, out_path: Path) -> Path:
    """Validation loss against the learning rate (log x), a curve per width (the mean over
    seeds, the standard deviation as error bars), each width's best learning rate starred; a
    panel per setting of the other swept keys, side by side, on one loss axis."""
    panels = transfer.panels
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False, sharey=True
    )
    widths = sorted({c.width for panel in panels for c in panel.curves})
    colours = plt.get_cmap("viridis")
    for ax, panel in zip(axes[0], panels, strict=True):
        for curve in panel.curves:
            measured = curve.measured
            if not measured:
                continue
            colour = colours(widths.index(curve.width) / max(1, len(widths) - 1))
            ax.errorbar(
                [p.lr for p in measured],
                [p.mean for p in measured],
                yerr=[p.spread or 0.0 for p in measured],
                marker="o",
                ms=4,
                capsize=3,
                color=colour,
                label=f"width {curve.width} (n={max(len(p.losses) for p in measured)})",
            )
            best = curve.best
            assert best is not None
            ax.plot([best.lr], [best.mean], marker="*", ms=14, color=colour, mec="black", ls="")
        ax.set_xscale("log")
        # The grid's own learning rates as ticks: log-axis minor labels would overlap.
        rates = sorted({p.lr for curve in panel.curves for p in curve.measured})
        ax.set_xticks(rates, [f"{lr:g}" for lr in rates], fontsize=7, rotation=45)
        ax.minorticks_off()
        ax.set_xlabel(transfer.lr_key)
        ax.set_title(panel.label or "learning-rate transfer", fontsize=9)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("best validation loss (mean over seeds; bars: std)")
    fig.suptitle("loss against learning rate per width; ★ each width's best", fontsize=9)
    return save_figure(fig, out_path, dpi=120)
