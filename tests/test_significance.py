"""The sweep summary's significance columns: Welch's t-test against scipy, Holm's correction on
worked examples, and the verdicts the summary prints for hand-made runs."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest
from scipy import stats

from analysis.run_record import write_record
from analysis.significance import (
    _beta_fraction,
    holm_adjusted,
    regularized_beta,
    student_t_two_sided,
    welch_p_value,
)
from analysis.sweep_summary import write_sweep_summary


def _samples(rng: random.Random) -> tuple[list[float], list[float]]:
    a = [rng.gauss(0.0, rng.uniform(0.05, 2.0)) for _ in range(rng.randint(2, 9))]
    shift = rng.uniform(-2.0, 2.0)
    b = [rng.gauss(shift, rng.uniform(0.05, 2.0)) for _ in range(rng.randint(2, 9))]
    return a, b


def test_welch_p_values_equal_scipys() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a, b = _samples(rng)
        expected = stats.ttest_ind(a, b, equal_var=False).pvalue
        assert welch_p_value(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("df", [0.7, 1.0, 2.0, 3.5, 10.0, 200.0])
@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.0, 4.0, 12.0])
def test_the_t_tail_equals_scipys(t: float, df: float) -> None:
    assert student_t_two_sided(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9)


def test_the_incomplete_beta_equals_scipys_on_both_sides_of_its_switch() -> None:
    for x in (1e-6, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-6):
        for a, b in ((0.5, 0.5), (2.0, 0.5), (0.5, 7.0), (30.0, 0.5)):
            assert regularized_beta(x, a, b) == pytest.approx(
                stats.beta.cdf(x, a, b), rel=1e-9, abs=1e-15
            )


def test_the_incomplete_beta_is_exact_at_its_ends_and_refuses_outside_them() -> None:
    assert regularized_beta(0.0, 2.0, 3.0) == 0.0
    assert regularized_beta(1.0, 2.0, 3.0) == 1.0
    for x in (-0.1, 1.5):
        with pytest.raises(ValueError, match=rf"^x must lie in \[0, 1\], got {x}$"):
            regularized_beta(x, 2.0, 3.0)


def test_the_t_tail_needs_positive_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match=r"^degrees of freedom must be > 0, got 0$"):
        student_t_two_sided(1.0, 0)


def test_a_fraction_that_does_not_converge_says_where() -> None:
    with pytest.raises(ArithmeticError, match=r"did not converge at x=0.5, a=50.0, b=50.0$"):
        _beta_fraction(0.5, 50.0, 50.0, max_terms=2)


def test_holm_never_exceeds_one() -> None:
    # m = 2: 0.6 x 2 = 1.2 is capped at 1; 0.7 x 1 = 0.7 is raised to the running maximum 1.
    assert holm_adjusted([0.7, 0.6]) == [1.0, 1.0]


def test_welch_needs_two_values_a_side_and_handles_no_spread() -> None:
    assert welch_p_value([1.0], [1.0, 2.0]) is None
    assert welch_p_value([1.0, 1.0], [1.0, 1.0]) == 1.0
    assert welch_p_value([1.0, 1.0], [2.0, 2.0]) == 0.0


def test_holm_on_a_worked_example() -> None:
    # m = 4: sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04,
    # raised to the running maximum 0.06). None is no test and does not count in m.
    adjusted = holm_adjusted([0.01, 0.04, None, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, None, 0.06, 0.02])


def test_holm_is_the_step_down_procedure() -> None:
    """The adjusted p-values reject exactly what the step-down procedure (reject the i-th
    smallest while p_(i) <= alpha / (m - i + 1), stop at the first that is not) rejects, at
    every alpha, for random p-values."""
    rng = random.Random(3)
    for _ in range(200):
        p = [rng.random() ** 3 for _ in range(rng.randint(1, 8))]
        adjusted = holm_adjusted(p)
        for alpha in (0.01, 0.05, 0.2):
            rejected, order = set(), sorted(range(len(p)), key=lambda i: p[i])
            for rank, i in enumerate(order):
                if p[i] > alpha / (len(p) - rank):
                    break
                rejected.add(i)
            assert {i for i, q in enumerate(adjusted) if q <= alpha} == rejected


def _sweep(root: Path, losses: dict[str, list[float]]) -> list[dict[str, str]]:
    job = 0
    for heads, values in losses.items():
        for seed, loss in enumerate(values, start=1):
            overrides = {"model.num_heads": heads, "seed": str(seed)}
            record = {"status": "completed", "best_val_loss": loss, "overrides": overrides}
            write_record(root / str(job), record)
            job += 1
    write_sweep_summary(root)
    with open(root / "summary.csv") as f:
        return list(csv.DictReader(f))


def test_the_summary_gives_welch_and_holm_against_the_best(tmp_path: Path) -> None:
    losses = {
        "1": [2.30, 2.31, 2.32],  # far worse than the best
        "2": [2.012, 1.995, 2.031],  # inside the best's spread
        "4": [2.01, 1.99, 2.03],  # the best
        "8": [2.06, 2.05, 2.09],  # worse, but less clearly
    }
    rows = {r["model.num_heads"]: r for r in _sweep(tmp_path, losses)}
    raw = {h: stats.ttest_ind(losses[h], losses["4"], equal_var=False).pvalue for h in "128"}
    order = sorted(raw, key=raw.get)
    holm, running = {}, 0.0
    for rank, heads in enumerate(order):  # Holm written out for three comparisons
        running = max(running, min(1.0, (3 - rank) * raw[heads]))
        holm[heads] = running
    for heads in "128":
        assert float(rows[heads]["welch_p"]) == pytest.approx(raw[heads], rel=1e-9)
        assert float(rows[heads]["holm_p"]) == pytest.approx(holm[heads], rel=1e-9)
        assert rows[heads]["holm_significant"] == str(holm[heads] <= 0.05)
    assert rows["4"]["welch_p"] == rows["4"]["holm_p"] == rows["4"]["holm_significant"] == ""
    assert rows["1"]["holm_significant"] == "True" and rows["2"]["holm_significant"] == "False"
    summary = (tmp_path / "summary.md").read_text()
    assert f"{holm['1']:.3g} (significant)" in summary
    assert f"{holm['2']:.3g} (not significant)" in summary
    assert "Holm-adjusted value over the 3 comparisons with the best" in summary


@pytest.mark.parametrize(("holm_p", "significant"), [(0.04, True), (0.06, False)])
def test_the_holm_verdict_is_judged_near_its_threshold(
    tmp_path: Path, holm_p: float, significant: bool
) -> None:
    """Two configurations against the best, one built so that its Holm-adjusted p-value
    (2 x its raw p, the smaller of the two) is 0.04 or 0.06: the verdict must flip there (a
    rule at 0.1, or the unadjusted p, would call both significant)."""
    raw = holm_p / 2
    # Two seeds each at mean -/+ 0.01 (SE 0.01 a side, df = 2): |t| for the p wanted.
    t = stats.t.isf(raw / 2, 2)
    difference = t * math.hypot(0.01, 0.01)
    losses = {
        "4": [1.99, 2.01],
        "1": [1.99 + difference, 2.01 + difference],
        "2": [2.0, 2.02],  # 0.01 worse: p about 0.55, the larger of the two
    }
    rows = {r["model.num_heads"]: r for r in _sweep(tmp_path, losses)}
    assert float(rows["1"]["welch_p"]) == pytest.approx(raw, rel=1e-6)
    assert float(rows["1"]["holm_p"]) == pytest.approx(holm_p, rel=1e-6)
    assert rows["1"]["holm_significant"] == str(significant)
