"""Scaling-law fits, numpy and scipy alone (no torch, Lightning or Hydra: ``python -m
features.scaling.fit`` starts in a fraction of a second).

Approach 3 of Hoffmann et al. (2022) as Besiroglu et al. (2024, "Chinchilla Scaling: A
replication attempt") do it: L(N, D) = E + A/N^α + B/D^β, fitted as the Huber loss
(δ = 1e-3) of log L against LSE(a − α log N, b − β log D, e), with A = exp a, B = exp b,
E = exp e, minimised by L-BFGS-B from every start of the grid α, β ∈ {0, 0.5, ..., 2},
e ∈ {-1, -0.5, ..., 1}, a, b ∈ {0, 5, ..., 25}; the best end point is kept. Bootstrap
intervals: the points resampled with replacement and refitted (from the full fit's best few
distinct end points rather than the whole grid: the replication refits each resample from one
start). Approach 2: at each FLOPs budget a parabola of loss against log N and its minimum,
then the power law of those minima against the budget.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

HUBER_DELTA = 1e-3
PARAMETERS = ("E", "A", "B", "alpha", "beta")
# The replication's grid of starts, in (a, b, e, alpha, beta) order.
GRID = tuple(
    (float(a), float(b), float(e), float(alpha), float(beta))
    for alpha, beta, e, a, b in itertools.product(
        np.arange(0, 2.5, 0.5),
        np.arange(0, 2.5, 0.5),
        np.arange(-1, 1.5, 0.5),
        np.arange(0, 30, 5),
        np.arange(0, 30, 5),
    )
)
# Every other value of each: 3^5 = 243 starts, a quick first look (scaling.grid=coarse).
COARSE = tuple(
    start
    for start in GRID
    if start[0] in (0, 10, 20)
    and start[1] in (0, 10, 20)
    and start[2] in (-1, 0, 1)
    and start[3] in (0, 1, 2)
    and start[4] in (0, 1, 2)
)
GRIDS = {"replication": GRID, "coarse": COARSE}
# Bootstrap resamples refit from this many of the full fit's best distinct end points.
BOOTSTRAP_STARTS = 4
DEFAULT_BOOTSTRAP = 200
DEFAULT_LEVEL = 0.95


def objective(
    theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray
) -> tuple[float, np.ndarray]:
    """The Huber loss of log L against LSE(a − α log N, b − β log D, e), summed over the
    points as the replication sums it, and its gradient in (a, b, e, α, β); both over δ (the
    same minimum; see ``_minimise_from``)."""
    a, b, e, alpha, beta = theta
    first, second = a - alpha * log_n, b - beta * log_d
    top = np.maximum(np.maximum(first, second), e)  # the log-sum-exp shifted: no overflow
    w_first, w_second, w_e = np.exp(first - top), np.exp(second - top), np.exp(e - top)
    total = w_first + w_second + w_e
    residual = top + np.log(total) - log_loss
    slope = np.clip(residual, -HUBER_DELTA, HUBER_DELTA)  # d huber / d residual
    huber = slope * (residual - 0.5 * slope)  # 0.5 r^2 within δ, δ (|r| - δ/2) beyond
    share = slope / total  # times a term's weight: d huber / d that term
    grad = np.array(
        [
            share @ w_first,
            share @ w_second,
            share @ w_e,
            -(share * w_first) @ log_n,
            -(share * w_second) @ log_d,
        ]
    )
    return float(huber.sum()) / HUBER_DELTA, grad / HUBER_DELTA


def predict(params: dict[str, float], n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
    """L(N, D) = E + A/N^α + B/D^β."""
    n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
    return params["E"] + params["A"] / n ** params["alpha"] + params["B"] / d ** params["beta"]


@dataclass
class Allocation:
    """The compute-optimal split of a budget C ≈ 6ND, with bootstrap intervals."""

    flops: float
    n: float
    d: float
    loss: float  # the fitted L(N_opt, D_opt)
    n_interval: tuple[float, float] | None = None
    d_interval: tuple[float, float] | None = None


@dataclass
class Fit:
    """Approach 3's fit: the parameters, the objective at the best end point, the grid start it
    came from, how many starts converged, and the bootstrap's parameters (one row per resample,
    columns in ``PARAMETERS`` order) with their central ``level`` intervals."""

    params: dict[str, float]
    objective: float
    start: tuple[float, ...]
    converged: int
    points: int
    ends: list[np.ndarray] = field(default_factory=list, repr=False)  # best distinct ends
    samples: np.ndarray | None = field(default=None, repr=False)
    level: float = DEFAULT_LEVEL

    def to_dict(self) -> dict:
        """The fit as JSON's types (``Fit.from_dict`` reads it back)."""
        return {
            "params": self.params,
            "objective": self.objective,
            "start": list(self.start),
            "converged": self.converged,
            "points": self.points,
            "ends": [end.tolist() for end in self.ends],
            "samples": None if self.samples is None else self.samples.tolist(),
            "level": self.level,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Fit:
        samples = data["samples"]
        return cls(
            params={k: float(v) for k, v in data["params"].items()},
            objective=float(data["objective"]),
            start=tuple(data["start"]),
            converged=int(data["converged"]),
            points=int(data["points"]),
            ends=[np.asarray(end, dtype=float) for end in data["ends"]],
            samples=None
            if samples is None
            else np.asarray(samples, dtype=float).reshape(-1, len(PARAMETERS)),
            level=float(data["level"]),
        )

    def interval(self, name: str) -> tuple[float, float] | None:
        """The bootstrap interval of a parameter (None without a bootstrap)."""
        if self.samples is None or not len(self.samples):
            return None
        return _percentiles(self.samples[:, PARAMETERS.index(name)], self.level)

    def optimal(self, flops: float) -> Allocation:
        """N_opt = G (C/6)^(β/(α+β)), D_opt = G^-1 (C/6)^(α/(α+β)),
        G = (αA/(βB))^(1/(α+β)); the intervals from the bootstrap's parameters."""
        n, d = _allocation(self.params, flops)
        with np.errstate(divide="ignore"):  # no interior optimum: N or D is 0, L is inf
            found = Allocation(flops, n, d, float(predict(self.params, n, d)))
        if self.samples is not None and len(self.samples):
            pairs = np.array([_allocation(_named(row), flops) for row in self.samples])
            found.n_interval = _percentiles(pairs[:, 0], self.level)
            found.d_interval = _percentiles(pairs[:, 1], self.level)
        return found


def fit_law(
    n: Sequence[float],
    d: Sequence[float],
    loss: Sequence[float],
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    starts: Sequence[Sequence[float]] = GRID,
) -> Fit:
    """Approach 3 on the points (N, D, L), with ``bootstrap`` resamples (0: none) drawn with
    ``seed``, and their central ``level`` intervals."""
    log_n, log_d, log_loss = _logs(n, d, loss)
    if len(log_n) < len(PARAMETERS):
        raise ValueError(
            f"{len(log_n)} points cannot fit the {len(PARAMETERS)} parameters of "
            "L = E + A/N^alpha + B/D^beta; give at least 5 (params, tokens, loss) points"
        )
    if not 0 < level < 1:
        raise ValueError(f"level={level} must be in (0, 1): the share the interval covers")
    if bootstrap < 0:
        raise ValueError(f"bootstrap={bootstrap} must be >= 0 (0: no intervals)")
    ends = _minimise_from(starts, log_n, log_d, log_loss)
    if not ends:
        raise ValueError("L-BFGS-B converged from none of the starts; the points fit no law")
    best_value, best_theta, best_start = ends[0]
    result = Fit(
        params=named_parameters(best_theta),
        objective=best_value * HUBER_DELTA,
        start=tuple(float(s) for s in best_start),
        converged=len(ends),
        points=len(log_n),
        ends=_distinct(ends, BOOTSTRAP_STARTS),
        level=level,
    )
    if bootstrap:
        result.samples = _bootstrap(result.ends, log_n, log_d, log_loss, bootstrap, seed)
    return result


def _minimise_from(
    starts: Sequence[Sequence[float]],
    log_n: np.ndarray,
    log_d: np.ndarray,
    log_loss: np.ndarray,
) -> list[tuple[float, np.ndarray, Sequence[float]]]:
    """(objective, end point, start) of each start from which L-BFGS-B converged, best first
    (the replication keeps the best of the converged ones).

    The objective is over δ: L-BFGS-B stops when every gradient component is below 1e-5, and
    the plain sum's gradient near a minimum is of the order of δ times a residual, so a start
    near the minimum (a bootstrap's, from the full fit's) would stop where it began. One BLAS
    thread: L-BFGS-B's tiny matrix products cost ~20x more when OpenBLAS wakes its threads."""
    ends = []
    with (
        threadpool_limits(1, user_api="blas"),
        np.errstate(over="ignore", invalid="ignore", divide="ignore"),
    ):
        for start in starts:
            found = minimize(
                objective,
                np.asarray(start, dtype=float),
                args=(log_n, log_d, log_loss),
                jac=True,
                method="L-BFGS-B",
            )
            if found.success and np.isfinite(found.fun) and np.all(np.isfinite(found.x)):
                ends.append((float(found.fun), found.x, start))
    ends.sort(key=lambda end: end[0])
    return ends


def _distinct(ends: list[tuple[float, np.ndarray, Sequence[float]]], count: int) -> list:
    """The best ``count`` end points that differ (many starts reach the same minimum)."""
    kept: list[np.ndarray] = []
    for _, theta, _ in ends:
        if all(np.max(np.abs(theta - other)) > 1e-3 for other in kept):
            kept.append(theta)
        if len(kept) == count:
            break
    return kept


def _bootstrap(
    starts: list[np.ndarray],
    log_n: np.ndarray,
    log_d: np.ndarray,
    log_loss: np.ndarray,
    resamples: int,
    seed: int,
) -> np.ndarray:
    """The parameters (``PARAMETERS`` order) refitted on ``resamples`` resamples of the points;
    a resample from which no start converged is left out."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(resamples):
        pick = rng.integers(0, len(log_n), len(log_n))
        ends = _minimise_from(starts, log_n[pick], log_d[pick], log_loss[pick])
        if ends:
            rows.append([named_parameters(ends[0][1])[name] for name in PARAMETERS])
    return np.array(rows, dtype=float).reshape(-1, len(PARAMETERS))


def _logs(
    n: Sequence[float], d: Sequence[float], loss: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arrays = [np.asarray(values, dtype=float) for values in (n, d, loss)]
    if len({len(values) for values in arrays}) > 1:
        raise ValueError("params, tokens and loss must have one value per point each")
    for name, values in zip(("params", "tokens", "loss"), arrays, strict=True):
        bad = values[~(np.isfinite(values) & (values > 0))]
        if len(bad):
            raise ValueError(
                f"{name} holds {float(bad[0])!r}: every params, tokens and loss must be a positive "
                "number (the fit takes their logarithms)"
            )
    return np.log(arrays[0]), np.log(arrays[1]), np.log(arrays[2])


def named_parameters(theta: np.ndarray) -> dict[str, float]:
    """The law's E, A, B, α, β of the fitted vector (a, b, e, α, β)."""
    a, b, e, alpha, beta = (float(v) for v in theta)
    # A resample of few points can run a, b or e past exp's range: inf, which the intervals
    # report as an unbounded end rather than failing.
    with np.errstate(over="ignore"):
        scales = {name: float(np.exp(v)) for name, v in (("E", e), ("A", a), ("B", b))}
    return {**scales, "alpha": alpha, "beta": beta}


def _named(row: np.ndarray) -> dict[str, float]:
    return dict(zip(PARAMETERS, (float(v) for v in row), strict=True))


def _allocation(params: dict[str, float], flops: float) -> tuple[float, float]:
    alpha, beta = params["alpha"], params["beta"]
    size_falls = alpha > 0 and params["A"] > 0
    data_falls = beta > 0 and params["B"] > 0
    if not (size_falls and data_falls):
        # No interior optimum (a resample of few points can fit α or β = 0): a loss that does
        # not fall with N puts every FLOP into tokens (N -> 0), one that does not fall with D
        # into parameters (N -> inf).
        return (math.inf, 0.0) if size_falls else (0.0, math.inf)
    g = (alpha * params["A"] / (beta * params["B"])) ** (1 / (alpha + beta))
    return g * (flops / 6) ** (beta / (alpha + beta)), (flops / 6) ** (alpha / (alpha + beta)) / g


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` of ``values``; with an unbounded value (an allocation without
    optimum) among them, order statistics, so that a bound may be 0 or inf."""
    tail = (1 - level) / 2
    values = values[~np.isnan(values)]
    method = "linear" if np.isfinite(values).all() else "inverted_cdf"
    low, high = np.quantile(values, [tail, 1 - tail], method=method)
    return float(low), float(high)


@dataclass
class Parabola:
    """Approach 2 at one budget: loss = c2 (log N)^2 + c1 log N + c0 over its sizes, the
    minimum N* (None when the parabola opens downwards: no minimum) and whether N* lies inside
    the sizes tried (outside: an extrapolation)."""

    flops: float
    sizes: int
    coefficients: tuple[float, float, float]
    n_star: float | None
    loss_star: float | None
    inside: bool


@dataclass
class IsoFlop:
    """Approach 2: each budget's parabola, and N* = k C^exponent over the budgets with a
    minimum (None with fewer than two)."""

    parabolas: list[Parabola]
    exponent: float | None = None
    coefficient: float | None = None

    def n_star(self, flops: float) -> float | None:
        """The power law's N* at ``flops``."""
        if self.exponent is None or self.coefficient is None:
            return None
        return self.coefficient * flops**self.exponent


MIN_SIZES = 3


def isoflop(budgets: Sequence[float], n: Sequence[float], loss: Sequence[float]) -> IsoFlop | None:
    """Approach 2 over points labelled by their FLOPs budget: a parabola of loss against log N at
    each budget with at least ``MIN_SIZES`` distinct sizes; None when no budget has them."""
    budgets_a, n_a, loss_a = (np.asarray(v, dtype=float) for v in (budgets, n, loss))
    parabolas = []
    for flops in sorted(set(budgets_a.tolist())):
        at = budgets_a == flops
        if len(set(n_a[at].tolist())) < MIN_SIZES:
            continue
        x = np.log(n_a[at])
        c2, c1, c0 = (float(c) for c in np.polyfit(x, loss_a[at], 2))
        n_star = loss_star = None
        inside = False
        if c2 > 0:
            x_star = -c1 / (2 * c2)
            n_star, loss_star = float(np.exp(x_star)), float(c0 - c1**2 / (4 * c2))
            inside = bool(x.min() <= x_star <= x.max())
        parabolas.append(Parabola(flops, int(at.sum()), (c2, c1, c0), n_star, loss_star, inside))
    if not parabolas:
        return None
    found = IsoFlop(parabolas)
    minima = [(p.flops, p.n_star) for p in parabolas if p.n_star is not None]
    if len(minima) >= 2:
        slope, intercept = np.polyfit(
            np.log([c for c, _ in minima]), np.log([s for _, s in minima]), 1
        )
        found.exponent, found.coefficient = float(slope), float(np.exp(intercept))
    return found
