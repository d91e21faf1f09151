"""The learning-rate transfer of a sweep over widths and learning rates (``README.md``, "The
transfer sweep"): per width, the validation loss at each learning rate (mean and spread over
seed replicates), the best learning rate, and whether that optimum moved across widths by
more than one step of the grid, beyond the seeds' spread. Plain statistics of the sweep's
``analysis.summary.Configuration`` groups: no matplotlib here (``plots.py`` draws them).

The spread rule: the loss of two learning rates of one width differs when the difference of
their means exceeds the larger of their two sample standard deviations over seeds. At each
width the optimum is then the run of grid steps around the best learning rate whose losses do
not differ from the best's; the optimum moved by as many steps as separate those runs of the
widths (none where they overlap), so a move smaller than the seeds' spread is no move.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from analysis.records import natural_key
from analysis.summary import Configuration

WIDTH_KEY = "model.hidden_size"
# The learning rates a transfer sweep may vary: AdamW's (every parameter under optim=adamw,
# the rest beside Muon under optim=muon) and Muon's.
LR_KEYS = ("optim.lr", "optim.muon_lr")


@dataclass
class Point:
    """One (width, learning rate) of a panel: its seeds' losses."""

    lr: float
    losses: list[float]
    failed: int = 0

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.losses) if self.losses else None

    @property
    def spread(self) -> float | None:
        """Sample standard deviation over seeds (as ``Configuration.std``); None below two."""
        return statistics.stdev(self.losses) if len(self.losses) >= 2 else None


@dataclass
class Curve:
    """One width's losses against the learning rate, its points in grid order."""

    width: int
    points: list[Point]
    grid: list[float]  # the panel's learning rates, every width's, in order

    @property
    def measured(self) -> list[Point]:
        return [p for p in self.points if p.mean is not None]

    @property
    def best(self) -> Point | None:
        return min(
            self.measured, key=lambda p: math.inf if p.mean is None else p.mean, default=None
        )

    @property
    def best_step(self) -> int | None:
        best = self.best
        return None if best is None else self.grid.index(best.lr)

    def differs_from_best(self, point: Point) -> bool | None:
        """Whether ``point``'s loss differs from the best's beyond the seeds' spread (the
        larger of the two standard deviations); None when either has a single seed."""
        best = self.best
        assert best is not None and best.mean is not None and point.mean is not None
        spreads = (best.spread, point.spread)
        if None in spreads:
            return None
        return point.mean - best.mean > max(s for s in spreads if s is not None)

    def optimum(self) -> tuple[int, int]:
        """The grid steps (first, last) around the best whose losses do not differ from the
        best's; the best's step alone where the spread is unknown (one seed)."""
        step = self.best_step
        assert step is not None
        by_step = {self.grid.index(p.lr): p for p in self.measured}
        low = high = step
        while low - 1 in by_step and self.differs_from_best(by_step[low - 1]) is False:
            low -= 1
        while high + 1 in by_step and self.differs_from_best(by_step[high + 1]) is False:
            high += 1
        return low, high

    def resolved(self) -> bool | None:
        """Whether every measured neighbour of the best differs from it beyond the spread
        (None: a single seed somewhere there)."""
        step = self.best_step
        assert step is not None
        by_step = {self.grid.index(p.lr): p for p in self.measured}
        verdicts = [
            self.differs_from_best(by_step[s]) for s in (step - 1, step + 1) if s in by_step
        ]
        if None in verdicts:
            return None
        return all(verdicts)


@dataclass
class Panel:
    """The curves of one setting of the sweep's other keys (a parametrization)."""

    label: str  # "model.parametrization=mup", or "" when nothing else varies
    curves: list[Curve] = field(default_factory=list)

    @property
    def judged(self) -> list[Curve]:
        return [c for c in self.curves if c.best is not None]

    def moved_steps(self) -> int:
        """Grid steps between the lowest and the highest best learning rate over widths."""
        steps = [c.best_step for c in self.judged if c.best_step is not None]
        return max(steps) - min(steps) if steps else 0

    def moved_beyond_spread(self) -> int:
        """Grid steps between the widths' optima (``Curve.optimum``) that no seed spread
        covers: 0 where every width's optimum overlaps every other's."""
        optima = [c.optimum() for c in self.judged]
        if not optima:
            return 0
        return max(0, max(low for low, _ in optima) - min(high for _, high in optima))

    def spread_known(self) -> bool:
        return all(c.resolved() is not None for c in self.judged)


@dataclass
class Transfer:
    """A transfer sweep: which key is the learning rate, and its panels."""

    lr_key: str
    panel_keys: list[str]
    panels: list[Panel]


def transfer_of(configs: Sequence[Configuration], keys: Sequence[str]) -> Transfer | None:
    """The transfer of a sweep whose configurations (grouped by ``keys``, the swept keys but
    the seed) vary the width and a learning rate; None for any other sweep. The keys that
    vary besides them (``model.parametrization``) make a panel per setting."""
    lr_keys = [k for k in keys if k in LR_KEYS]
    if WIDTH_KEY not in keys or not lr_keys:
        return None
    lr_key = lr_keys[0]  # both varied: the first typed, the other sets panels apart
    panel_keys = [k for k in keys if k not in (WIDTH_KEY, lr_key)]
    panels: dict[str, dict[int, dict[float, Point]]] = {}
    for config in configs:
        try:
            width = int(config.values[WIDTH_KEY])
            lr = float(config.values[lr_key])
        except ValueError:
            return None  # a value that is no number (an interpolation): no transfer to draw
        label = ", ".join(f"{k}={config.values[k]}" for k in panel_keys)
        point = panels.setdefault(label, {}).setdefault(width, {}).setdefault(lr, Point(lr, []))
        point.losses += config.losses
        point.failed += config.failed
    result = []
    for label in sorted(panels, key=natural_key):
        by_width = panels[label]
        grid = sorted({lr for points in by_width.values() for lr in points})
        curves = [
            Curve(width, [by_width[width][lr] for lr in sorted(by_width[width])], grid)
            for width in sorted(by_width)
        ]
        result.append(Panel(label, curves))
    widths = {c.width for panel in result for c in panel.curves}
    if len(widths) < 2 or all(len(panel.curves[0].grid) < 2 for panel in result):
        return None
    return Transfer(lr_key, panel_keys, result)


def verdict(panel: Panel, lr_key: str) -> str:
    """One sentence: whether the optimum moved across widths by more than one grid step, and
    whether, at the optimum, neighbouring learning rates differ beyond the seeds' spread."""
    judged = panel.judged
    where = f"{panel.label}: " if panel.label else ""
    if len(judged) < 2:
        return f"{where}fewer than two widths have a completed run: no transfer to judge."
    bests = ", ".join(f"{_lr(c.best.lr)} at width {c.width}" for c in judged if c.best)
    nominal = panel.moved_steps()
    head = f"{where}the best {lr_key} is {bests}: it moved {_steps(nominal)} across widths"
    if not panel.spread_known():
        return (
            f"{head} ({_judged(nominal)}); with a single seed at the optimum the seeds' spread "
            "is unknown, so the move is not judged against noise (add seeds: seed=0,1,2)."
        )
    unresolved = [str(c.width) for c in judged if not c.resolved()]
    if unresolved:
        noise = (
            "at widths "
            + ", ".join(unresolved)
            + " a neighbouring learning rate is within the seeds' spread of the best"
        )
    else:
        noise = (
            "at every width the neighbouring learning rates differ from the best beyond the "
            "seeds' spread"
        )
    beyond = panel.moved_beyond_spread()
    return (
        f"{head}; {noise}, so the optimum moved {_steps(beyond)} beyond the spread: "
        f"{_judged(beyond)}."
    )


def _judged(steps: int) -> str:
    if steps > 1:
        return "it moved by more than one grid step"
    if steps == 1:
        return "it stayed within one grid step"
    return "no move"


def _steps(n: int) -> str:
    return f"{n} grid step{'' if n == 1 else 's'}"


def _lr(value: float) -> str:
    return f"{value:g}"


def table_rows(panel: Panel) -> list[dict[str, str]]:
    """One row per width: its best learning rate, that point's loss ± spread and seeds, the
    optimum's range within the spread, and the failed runs."""
    rows = []
    for curve in panel.curves:
        best = curve.best
        if best is None or best.mean is None:
            failed = sum(p.failed for p in curve.points)
            rows.append({"width": str(curve.width), "failed": str(failed)})
            continue
        spread = "" if best.spread is None else f" ± {best.spread:.4f}"
        low, high = curve.optimum()
        within = (
            _lr(curve.grid[low])
            if low == high
            else f"{_lr(curve.grid[low])}–{_lr(curve.grid[high])}"
        )
        rows.append(
            {
                "width": str(curve.width),
                "best lr": _lr(best.lr),
                "loss": f"{best.mean:.4f}{spread}",
                "seeds": str(len(best.losses)),
                "within spread": within,
                "failed": str(sum(p.failed for p in curve.points)),
            }
        )
    return rows
