"""``python -m features.scaling.fit points.csv --flops 1e18``: the scaling-law fit of a table
with columns ``params,tokens,loss`` (and optionally ``flops``, the budget each point belongs
to, for Approach 2), printed with its intervals and the compute-optimal N and D of the budget.
No torch, Lightning or Hydra: it starts in well under a second.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from features.scaling.law import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_LEVEL,
    GRIDS,
    PARAMETERS,
    Fit,
    IsoFlop,
    fit_law,
    isoflop,
)

COLUMNS = ("params", "tokens", "loss")
BUDGET_COLUMN = "flops"
SYMBOLS = {"E": "E", "A": "A", "B": "B", "alpha": "α", "beta": "β"}


def read_points(path: Path) -> dict[str, list[float]]:
    """The table's columns ``params``, ``tokens``, ``loss`` (and ``flops`` when it has one)
    as numbers, every one checked positive; a ValueError names the row and the fix."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file; give a CSV with columns {','.join(COLUMNS)}")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = [name.strip() for name in reader.fieldnames or []]
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise ValueError(
                f"{path} has no column {', '.join(missing)} (its header: "
                f"{','.join(header) or 'none'}); give columns {','.join(COLUMNS)}"
            )
        wanted = [*COLUMNS, *([BUDGET_COLUMN] if BUDGET_COLUMN in header else [])]
        columns: dict[str, list[float]] = {name: [] for name in wanted}
        for line, row in enumerate(reader, start=2):
            row = {(k or "").strip(): v for k, v in row.items()}
            for name in wanted:
                text = (row.get(name) or "").strip()
                try:
                    value = float(text)
                except ValueError:
                    value = math.nan
                if not (math.isfinite(value) and value > 0):
                    raise ValueError(
                        f"{path} line {line}: {name}={text!r} must be a positive number "
                        "(the fit takes logarithms); fix or drop the row"
                    )
                columns[name].append(value)
    count = len(columns["loss"])
    if count < len(PARAMETERS):
        raise ValueError(
            f"{path} holds {count} point{'s' * (count != 1)}: fewer than the "
            f"{len(PARAMETERS)} parameters of L = E + A/N^α + B/D^β; give at least "
            f"{len(PARAMETERS)} rows"
        )
    return columns


def number(value: float) -> str:
    """Four significant digits."""
    return f"{value:.4g}"


def interval(bounds: tuple[float, float] | None) -> str:
    return f"[{number(bounds[0])}, {number(bounds[1])}]" if bounds else "(no bootstrap)"


def parameter_lines(found: Fit) -> list[tuple[str, str, str]]:
    """(name, value, interval) of each fitted parameter."""
    return [
        (SYMBOLS[name], number(found.params[name]), interval(found.interval(name)))
        for name in PARAMETERS
    ]


def describe_fit(found: Fit, grid: str, seconds: float, bootstrap: int, seed: int) -> str:
    """What the fit did, in one sentence."""
    kept = f"; {len(found.samples)} kept" if found.samples is not None else ""
    resampled = (
        f"{bootstrap} bootstrap resamples (seed {seed}{kept}), {found.level:.0%} intervals"
        if bootstrap
        else "no bootstrap"
    )
    return (
        f"Approach 3 as Besiroglu et al. (2024) fit it, on {found.points} points: the Huber loss "
        f"(δ = 1e-3) of log L, L-BFGS-B from {len(GRIDS[grid])} starts ({grid} grid; "
        f"{found.converged} converged, the best kept), {resampled}; {seconds:.1f} s"
    )


def isoflop_lines(found: IsoFlop) -> list[str]:
    """Approach 2 as text: each budget's minimum, then the power law of the minima."""
    lines = []
    for p in found.parabolas:
        where = (
            f"N* = {number(p.n_star)}, loss {number(p.loss_star)}"
            + ("" if p.inside else " (outside the sizes tried: extrapolated)")
            if p.n_star is not None
            else "no minimum (the parabola opens downwards)"
        )
        lines.append(f"C = {p.flops:.3g}: {p.sizes} points, {where}")
    if found.exponent is not None:
        lines.append(
            f"N* = {number(found.coefficient)} C^{number(found.exponent)} over the budgets "
            "with a minimum"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m features.scaling.fit",
        description="Fit L(N, D) = E + A/N^alpha + B/D^beta to a table of runs (Approach 3 of "
        "Hoffmann et al. 2022 as Besiroglu et al. 2024 replicate it) and predict the "
        "compute-optimal N and D of a budget C = 6ND.",
    )
    parser.add_argument("points", type=Path, help="CSV with columns params,tokens,loss[,flops]")
    parser.add_argument("--flops", type=float, help="the budget C to allocate, in FLOPs")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_BOOTSTRAP, help="resamples")
    parser.add_argument("--level", type=float, default=DEFAULT_LEVEL, help="interval coverage")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    parser.add_argument("--grid", choices=tuple(GRIDS), default="replication")
    args = parser.parse_args(argv)
    try:
        if args.flops is not None and not args.flops > 0:
            raise ValueError(f"--flops {args.flops} must be > 0: a budget in FLOPs (1e18)")
        columns = read_points(args.points)
        started = time.perf_counter()
        found = fit_law(
            columns["params"],
            columns["tokens"],
            columns["loss"],
            bootstrap=args.bootstrap,
            seed=args.seed,
            level=args.level,
            starts=GRIDS[args.grid],
        )
        seconds = time.perf_counter() - started
    except ValueError as err:
        print(f"tinylm: error: {err}", file=sys.stderr)
        return 1
    print(describe_fit(found, args.grid, seconds, args.bootstrap, args.seed))
    print("L(N, D) = E + A/N^α + B/D^β")
    for name, value, bounds in parameter_lines(found):
        print(f"  {name:<2} {value:>10}  {bounds}")
    if args.flops is not None:
        best = found.optimal(args.flops)
        print(f"Compute-optimal for C = {args.flops:.3g} FLOPs (C ≈ 6ND):")
        print(f"  N_opt {number(best.n):>10}  {interval(best.n_interval)}")
        print(f"  D_opt {number(best.d):>10}  {interval(best.d_interval)}")
        print(f"  D/N   {number(best.d / best.n):>10}")
        print(f"  loss  {number(best.loss):>10}  (the fit's L(N_opt, D_opt))")
    if BUDGET_COLUMN in columns:
        found2 = isoflop(columns[BUDGET_COLUMN], columns["params"], columns["loss"])
        print("Approach 2 (IsoFLOP parabolas of loss against log N, per flops value):")
        for line in isoflop_lines(found2) if found2 else ["no budget has 3 sizes"]:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
