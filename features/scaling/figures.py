"""The scaling law's figures (``features/scaling/report.py`` draws them): the IsoFLOP parabolas
and the fitted law against the points. The module of this feature that loads matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from analysis.plots import VIRIDIS, save_figure
from features.scaling.law import Fit, IsoFlop, predict

if TYPE_CHECKING:
    from features.scaling.points import Point


def _colours(count: int) -> list:
    return [VIRIDIS(i / max(1, count - 1) * 0.9) for i in range(count)]


def plot_isoflop(points: Sequence[Point], iso: IsoFlop, convention: str, out_path: Path) -> Path:
    """Loss against N (log axis) at each budget with its parabola in log N, each minimum
    starred; the budgets without three sizes are left out, as Approach 2 leaves them."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for colour, parabola in zip(_colours(len(iso.parabolas)), iso.parabolas, strict=True):
        at = [p for p in points if p.budget == parabola.flops]
        label = f"C = {parabola.flops:.3g}"
        ax.scatter([p.n for p in at], [p.loss for p in at], color=colour, s=18, label=label)
        logs = np.log([p.n for p in at])
        span = np.linspace(logs.min() - 0.2, logs.max() + 0.2, 100)
        ax.plot(np.exp(span), np.polyval(parabola.coefficients, span), color=colour, lw=1)
        if parabola.n_star is not None:
            ax.scatter(
                [parabola.n_star],
                [parabola.loss_star],
                marker="*",
                s=140,
                color=colour,
                edgecolors="black",
                linewidths=0.6,
                zorder=3,
            )
    ax.set_xscale("log")
    ax.set_xlabel(f"N, {convention}")
    ax.set_ylabel("final validation loss")
    title = "IsoFLOP parabolas (Approach 2); star: each budget's minimum N*"
    if iso.exponent is not None:
        title += f"; N* ∝ C^{iso.exponent:.3g}"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, out_path, dpi=120)


def plot_fit(points: Sequence[Point], found: Fit, convention: str, out_path: Path) -> Path:
    """Loss against tokens (log axis), one colour per size: the runs as dots, the fitted
    L(N, D) of that size as a line, the fitted E dashed; N counted as ``convention`` says."""
    sizes = sorted({p.n for p in points})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    tokens = np.array([p.d for p in points])
    span = np.geomspace(tokens.min() / 1.5, tokens.max() * 1.5, 100)
    for colour, n in zip(_colours(len(sizes)), sizes, strict=True):
        at = [p for p in points if p.n == n]
        ax.scatter([p.d for p in at], [p.loss for p in at], color=colour, s=18)
        label = f"N = {n:.3g}"
        ax.plot(span, predict(found.params, n, span), color=colour, lw=1, label=label)
    ax.axhline(found.params["E"], color="grey", ls="--", lw=0.8, label="E (fitted)")
    ax.text(0.01, 0.01, f"N: {convention}", transform=ax.transAxes, fontsize=7, va="bottom")
    ax.set_xscale("log")
    ax.set_xlabel("D, training tokens")
    ax.set_ylabel("final validation loss")
    p = found.params
    ax.set_title(
        f"L = {p['E']:.3g} + {p['A']:.3g}/N^{p['alpha']:.3g} + {p['B']:.3g}/D^{p['beta']:.3g} "
        "(Approach 3): lines, the fit; dots, the runs",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    return save_figure(fig, out_path, dpi=120)
