"""Approach 3 (the replication's procedure), its bootstrap, the compute-optimal allocation and
Approach 2 (features/scaling/law.py), on points from known laws."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from features.scaling.law import (
    COARSE,
    GRID,
    PARAMETERS,
    Fit,
    fit_law,
    isoflop,
    named_parameters,
    objective,
    predict,
)
from tests.features.scaling.points import TRUE, law_points


@pytest.fixture(scope="module")
def noisy_fit():
    """The fit of 20 points with 1% noise on log L, with 50 bootstrap resamples."""
    n, d, loss = law_points(noise=0.01)
    return fit_law(n, d, loss, bootstrap=50, seed=0, starts=COARSE[::3])


def test_the_grid_is_the_replications() -> None:
    """α, β ∈ {0, 0.5, ..., 2}; e ∈ {-1, -0.5, ..., 1}; a, b ∈ {0, 5, ..., 25}, as
    (a, b, e, α, β); the coarse grid is every other value of each."""
    values = [sorted({start[i] for start in GRID}) for i in range(5)]
    assert values == [
        [0, 5, 10, 15, 20, 25],
        [0, 5, 10, 15, 20, 25],
        [-1, -0.5, 0, 0.5, 1],
        [0, 0.5, 1, 1.5, 2],
        [0, 0.5, 1, 1.5, 2],
    ]
    assert len(GRID) == len(set(GRID)) == 4500
    assert len(COARSE) == 3**5 and set(COARSE) <= set(GRID)


def test_the_gradient_is_the_objectives() -> None:
    """The analytic gradient against central differences, inside and beyond Huber's δ."""
    n, d, loss = law_points(noise=0.01)
    args = (np.log(n), np.log(d), np.log(loss))
    for theta in ([6.0, 7.6, 0.53, 0.35, 0.37], [1.0, 3.0, -0.5, 0.2, 1.1]):
        theta = np.array(theta)
        _, grad = objective(theta, *args)
        step = 1e-6
        numeric = [
            (objective(theta + step * unit, *args)[0] - objective(theta - step * unit, *args)[0])
            / (2 * step)
            for unit in np.eye(5)
        ]
        np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_exact_points_give_back_their_law() -> None:
    n, d, loss = law_points(noise=0.0)
    found = fit_law(n, d, loss, bootstrap=0, starts=COARSE[::3])
    for name in PARAMETERS:
        assert found.params[name] == pytest.approx(TRUE[name], rel=2e-3), name
    assert found.interval("E") is None and found.objective < 1e-12


def test_noisy_points_give_their_law_within_its_intervals(noisy_fit) -> None:
    for name in PARAMETERS:
        low, high = noisy_fit.interval(name)
        assert low <= TRUE[name] <= high, (name, low, high)
    # the intervals say something: alpha's and beta's narrower than 0.15 at 1% noise
    for name in ("alpha", "beta"):
        low, high = noisy_fit.interval(name)
        assert high - low < 0.15, (name, low, high)
    assert len(noisy_fit.samples) == 50


def test_the_bootstrap_is_seeded() -> None:
    n, d, loss = law_points(noise=0.01)
    runs = [fit_law(n, d, loss, bootstrap=4, seed=seed, starts=COARSE[:8]) for seed in (1, 1, 2)]
    np.testing.assert_array_equal(runs[0].samples, runs[1].samples)
    assert not np.array_equal(runs[0].samples, runs[2].samples)


@pytest.mark.parametrize("flops", [1e18, 1e21, 5.76e23])
def test_the_compute_optimal_split_is_the_lowest_loss_at_its_budget(flops: float) -> None:
    """N_opt against a direct minimum of L(N, C/(6N)) over log N."""
    found = fit_law(*law_points(noise=0.0), bootstrap=0, starts=COARSE[:1])
    found.params = dict(TRUE)  # the formula on the known law, whatever the fit
    best = found.optimal(flops)

    def loss_at(log_n: float) -> float:
        n = np.exp(log_n)
        return float(predict(TRUE, n, flops / (6 * n)))

    direct = minimize_scalar(loss_at, bounds=(0, 60), method="bounded", options={"xatol": 1e-10})
    assert best.n == pytest.approx(np.exp(direct.x), rel=1e-4)
    assert best.d == pytest.approx(flops / (6 * best.n), rel=1e-12)
    assert best.loss == pytest.approx(direct.fun, rel=1e-9)


def test_the_allocation_has_intervals_around_it(noisy_fit) -> None:
    best = noisy_fit.optimal(1e21)
    assert best.n_interval[0] < best.n < best.n_interval[1]
    assert best.d_interval[0] < best.d < best.d_interval[1]


def test_a_law_without_interior_optimum_gives_unbounded_allocations() -> None:
    """Few points can fit a resample with α or β at 0: its optimum is at N = 0 or N = inf,
    and the interval reaches it instead of failing (the division by a zero power)."""
    fitted = Fit(params=dict(TRUE), objective=0.0, start=(), converged=1, points=9)
    row = [TRUE[name] for name in PARAMETERS]
    flat_in_n, flat_in_d = list(row), list(row)
    flat_in_n[PARAMETERS.index("alpha")] = 0.0  # the loss does not fall with N
    flat_in_d[PARAMETERS.index("beta")] = 0.0
    fitted.samples = np.array([row] * 8 + [flat_in_n] + [flat_in_d])
    fitted.level = 0.95
    best = fitted.optimal(1e21)
    assert best.n_interval == (0.0, math.inf) and best.d_interval == (0.0, math.inf)
    fitted.samples = np.array([row] * 18 + [flat_in_n] * 2)  # 10%: beyond the lower 2.5%
    best = fitted.optimal(1e21)
    assert best.n_interval[0] == 0.0 and 0 < best.n_interval[1] < math.inf
    assert best.d_interval[1] == math.inf
    alone = Fit(params=_named_row(flat_in_n), objective=0.0, start=(), converged=1, points=9)
    assert (alone.optimal(1e21).n, alone.optimal(1e21).d) == (0.0, math.inf)


def _named_row(row: list[float]) -> dict[str, float]:
    return dict(zip(PARAMETERS, row, strict=True))


def test_isoflop_finds_each_parabolas_minimum_and_their_power_law() -> None:
    """Loss = 2 + 0.3 (log N - log N*)^2 at each budget, N* = 0.1 C^0.5 exactly."""
    budgets, sizes, losses = [], [], []
    for flops in (1e16, 1e18, 1e20):
        star = 0.1 * flops**0.5
        for factor in (0.25, 0.5, 1.3, 3.0):
            budgets.append(flops)
            sizes.append(star * factor)
            losses.append(2 + 0.3 * np.log(factor) ** 2)
    # a budget with two sizes has no parabola; one that opens downwards no minimum
    budgets += [1e22, 1e22, 1e14, 1e14, 1e14]
    sizes += [1e9, 2e9, 1e6, 2e6, 4e6]
    losses += [2.0, 2.1, 3.0, 3.1, 3.0]
    found = isoflop(budgets, sizes, losses)
    assert [p.flops for p in found.parabolas] == [1e14, 1e16, 1e18, 1e20]
    assert found.parabolas[0].n_star is None
    for parabola in found.parabolas[1:]:
        assert parabola.n_star == pytest.approx(0.1 * parabola.flops**0.5, rel=1e-9)
        assert parabola.loss_star == pytest.approx(2.0, abs=1e-9) and parabola.inside
    assert found.exponent == pytest.approx(0.5, rel=1e-9)
    assert found.n_star(1e24) == pytest.approx(0.1 * 1e12, rel=1e-7)


def test_isoflop_needs_three_sizes_at_a_budget() -> None:
    assert isoflop([1e18] * 4, [1e6, 1e6, 2e6, 2e6], [3.0, 3.1, 2.9, 2.8]) is None


@pytest.mark.parametrize(
    ("n", "message"),
    [
        ([1e6, 2e6, 3e6, 4e6], "4 points cannot fit the 5 parameters"),
        ([1e6, 2e6, 3e6, 4e6, -5.0], "params holds -5.0"),
    ],
)
def test_bad_points_are_refused(n: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_law(n, [1e9] * len(n), [3.0] * len(n), bootstrap=0)


def test_every_start_is_tried_and_the_best_kept(monkeypatch) -> None:
    """The best end point over the starts, as the replication keeps it: a start that alone
    reaches a lower minimum wins whatever its place in the list."""
    n, d, loss = law_points(noise=0.01)
    starts = list(itertools.islice(COARSE, 0, 240, 40))
    alone = [fit_law(n, d, loss, bootstrap=0, starts=[start]) for start in starts]
    together = fit_law(n, d, loss, bootstrap=0, starts=starts[::-1])
    assert together.objective == pytest.approx(min(f.objective for f in alone), rel=1e-12)
    assert together.converged == sum(1 for f in alone if f.converged)


def test_parameters_past_exps_range_are_infinite_not_an_error() -> None:
    """A bootstrap resample of few points can end with log A beyond 709 (found on a sweep of
    16 runs): A is inf and its interval unbounded."""
    a, b, e = 800.0, 5.0, 0.5
    named = named_parameters(np.array([a, b, e, 0.3, 0.3]))
    assert named["A"] == math.inf and named["B"] == pytest.approx(math.exp(5.0))
