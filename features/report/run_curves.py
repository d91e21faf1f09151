"""The training's curves on a page, as a run page of W&B or TensorBoard starts with them: what
a run logged to its ``curves.jsonl`` (``training.curves``) in four figures, each drawn by one
function: the training loss (raw and smoothed) with the validation loss, the learning rates,
tokens/s and the gradient norm, a resumed run's resume points marked in each. A sweep's page
draws them per configuration: the mean over its runs with a band from the lowest to the
highest. Each line is an SVG element with an id (matplotlib's ``gid``: ``train-loss``,
``train-loss-smoothed``, ``val-loss``, ``lr-1``..., ``tokens-per-sec``, ``grad-norm``,
``resume-1``...), so that a reader or a test finds its path.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from analysis.plots import band  # noqa: E402
from analysis.records import natural_key  # noqa: E402
from analysis.summary import Configuration  # noqa: E402
from training.curves import CURVES_FILE, RESUMED, read_curves  # noqa: E402

LOSS, VAL_LOSS = "train/loss", "val/loss"
TOKENS_PER_SEC, GRAD_NORM = "train/tokens_per_sec", "train/grad_norm"
LEARNING_RATE = "lr-"  # LearningRateMonitor's keys: lr-<Optimizer>[/pg<N>]
SMOOTHING = 0.6  # the weight of the moving average: TensorBoard's default
MAX_CONFIGURATIONS = 16  # a sweep's page draws at most this many configurations' curves
# Every logged point kept in the SVG path (matplotlib drops nearly collinear ones otherwise);
# text as text, not glyph outlines: a sweep's page holds many figures.
_STYLE = {"path.simplify": False, "svg.fonttype": "none", "svg.hashsalt": "tinylm"}


@dataclass
class RunCurves:
    """One run's curves: each logged name's values by step, and the steps it resumed at."""

    series: dict[str, dict[int, float]]
    resumed: list[int]


@dataclass
class CurveSet:
    """The curve figures of one run or one configuration: (caption, draw) pairs."""

    label: str
    figures: list[tuple[str, Callable[[Path], Path]]]


def run_curves(run_dir: Path, record: Mapping[str, Any]) -> RunCurves:
    """The curves of the run in ``run_dir`` (``record``: its run record). A run from before
    ``curves.jsonl`` existed still has its record's validation curve; a value that was not
    finite (a diverged loss, recorded as text) is left out."""
    series: dict[str, dict[int, float]] = {}
    resumed = []
    for line in read_curves(run_dir / CURVES_FILE):
        step = line.get("step")
        if not isinstance(step, int):
            continue
        if line.get(RESUMED) is True:
            resumed.append(step)
            continue
        for key, value in line.items():
            if key != "step" and _finite(value):
                series.setdefault(key, {})[step] = float(value)
    if VAL_LOSS not in series and record.get("val_curve"):
        series[VAL_LOSS] = {int(p[0]): float(p[1]) for p in record["val_curve"]}
    return RunCurves(series, resumed)


def curve_set(runs: Sequence[RunCurves], config: Configuration | None = None) -> CurveSet:
    """The figures of ``runs`` that have data: a run's, or ``config``'s runs' (their captions
    name it)."""
    over = f" (mean over {len(runs)} runs; band: min to max)" if len(runs) > 1 else ""
    name = f"{config.label()}: " if config else ""
    trained = any(LOSS in run.series for run in runs)
    loss = "training loss (raw and smoothed) and validation loss" if trained else "validation loss"
    figures = [
        (loss, draw_loss, (LOSS, VAL_LOSS)),
        ("learning rate", draw_learning_rates, _learning_rates(runs)),
        ("tokens per second", draw_tokens_per_sec, (TOKENS_PER_SEC,)),
        ("gradient norm (before clipping)", draw_grad_norm, (GRAD_NORM,)),
    ]
    return CurveSet(
        f"{config.label()} (n={len(runs)})" if config else "",
        [
            (name + title + over, partial(draw, runs))
            for title, draw, keys in figures
            if any(key in run.series for run in runs for key in keys)
        ],
    )


def configuration_sets(
    configs: Sequence[Configuration], run_dirs: Mapping[str, Path]
) -> tuple[list[CurveSet], int]:
    """A curve set per configuration with curves (its completed runs'), at most
    ``MAX_CONFIGURATIONS`` of them, the best first chosen; and how many were left out."""
    found = []
    for config in configs:
        runs = [run_curves(run_dirs[run["run"]], run) for run in config.completed]
        runs = [run for run in runs if run.series]
        if runs:
            found.append((config, curve_set(runs, config)))
    sign = -1 if configs and configs[0].higher_is_better else 1
    ranked = sorted(found, key=lambda f: math.inf if f[0].mean is None else sign * f[0].mean)
    kept = {id(config) for config, _ in ranked[:MAX_CONFIGURATIONS]}
    return [s for config, s in found if id(config) in kept], max(0, len(found) - len(kept))


def draw_loss(runs: Sequence[RunCurves], out_path: Path) -> Path:
    """The training loss, raw (faint) and smoothed, and the validation loss against step."""
    with _axes(runs, "loss", out_path) as ax:
        steps, raw = _plot(ax, runs, LOSS, "train-loss", "training loss", alpha=0.35, lw=1)
        if steps:
            label = f"training loss, smoothed ({SMOOTHING})"
            ax.plot(steps, smoothed(raw), color="C0", label=label, gid="train-loss-smoothed")
        _plot(ax, runs, VAL_LOSS, "val-loss", "validation loss", color="C1", marker="o", ms=3)
    return out_path


def draw_learning_rates(runs: Sequence[RunCurves], out_path: Path) -> Path:
    """Each parameter group's learning rate against step."""
    with _axes(runs, "learning rate", out_path) as ax:
        for number, key in enumerate(_learning_rates(runs), start=1):
            _plot(ax, runs, key, f"lr-{number}", key.removeprefix(LEARNING_RATE))
    return out_path


def draw_tokens_per_sec(runs: Sequence[RunCurves], out_path: Path) -> Path:
    """The training throughput against step."""
    with _axes(runs, "tokens/s", out_path) as ax:
        _plot(ax, runs, TOKENS_PER_SEC, "tokens-per-sec", "tokens/s", color="C2")
    return out_path


def draw_grad_norm(runs: Sequence[RunCurves], out_path: Path) -> Path:
    """The gradient norm before clipping against step."""
    with _axes(runs, "gradient norm", out_path) as ax:
        _plot(ax, runs, GRAD_NORM, "grad-norm", "gradient norm", color="C3")
    return out_path


def smoothed(values: Sequence[float], weight: float = SMOOTHING) -> list[float]:
    """The exponential moving average of ``values``, debiased as TensorBoard's (the first
    points are not pulled towards zero)."""
    average, out = 0.0, []
    for count, value in enumerate(values, start=1):
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight**count))
    return out


@contextlib.contextmanager
def _axes(runs: Sequence[RunCurves], ylabel: str, out_path: Path) -> Iterator[plt.Axes]:
    """One figure's axes; once drawn on, the resume points marked, then saved to
    ``out_path``."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(5.6, 3.4))
        try:
            yield ax
            resumed = sorted({step for run in runs for step in run.resumed})
            for number, step in enumerate(resumed, start=1):
                label = "resumed" if number == 1 else None
                ax.axvline(step, color="grey", ls="--", lw=1, label=label, gid=f"resume-{number}")
            ax.set_xlabel("step")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7)
            # Fixed margins, not tight_layout: that measured every label and took 40% of the
            # drawing, and a sweep's page draws four figures per configuration.
            fig.subplots_adjust(left=0.15, right=0.97, bottom=0.14, top=0.96)
            fig.savefig(out_path, dpi=100)
        finally:
            plt.close(fig)


def _plot(
    ax: plt.Axes, runs: Sequence[RunCurves], key: str, gid: str, label: str, **style: Any
) -> tuple[list[int], list[float]]:
    """``key``'s curve: the mean over ``runs`` at the steps all of them logged, with the band
    from the lowest to the highest where there are several; its (steps, means)."""
    steps, mean, low, high = band([run.series[key] for run in runs if key in run.series])
    if steps:
        (line,) = ax.plot(steps, mean, label=label, gid=gid, **style)
        if len(runs) > 1:
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, lw=0)
    return steps, mean


def _learning_rates(runs: Sequence[RunCurves]) -> list[str]:
    keys = {key for run in runs for key in run.series if key.startswith(LEARNING_RATE)}
    return sorted(keys, key=natural_key)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
