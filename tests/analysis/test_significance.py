"""The sweep summary's significance columns: Welch's t-test against values that owe nothing to
scipy (which analysis/significance.py calls), Holm's correction on worked examples, and the
verdicts the summary prints for hand-made runs.

The expected p-values come from (1) the worked examples of Wikipedia's "Welch's t-test" page
(t, df and p printed to two or three digits), (2) the closed forms of Student's t with 1 and 2
degrees of freedom, and (3) Welch's statistic and Welch-Satterthwaite degrees of freedom
written out here, with the t tail integrated from the density by Simpson's rule."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest

from analysis.run_record import write_record
from analysis.significance import holm_adjusted, welch_p_value
from analysis.sweep_summary import write_sweep_summary


def _t_tail(t: float, df: float, steps: int = 2000) -> float:
    """``P(|T| >= |t|)`` for Student's t with ``df`` degrees of freedom: one minus twice the
    density's integral over [0, |t|] (composite Simpson's rule)."""
    scale = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def density(x: float) -> float:
        return scale * (1 + x * x / df) ** (-(df + 1) / 2)

    h = abs(t) / steps
    inner = sum((4 if k % 2 else 2) * density(k * h) for k in range(1, steps))
    return 1 - 2 * h / 3 * (density(0.0) + inner + density(abs(t)))


def _welch_by_hand(a: list[float], b: list[float]) -> tuple[float, float]:
    """Welch's t and its Welch-Satterthwaite degrees of freedom."""
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    se2_a = sum((x - mean_a) ** 2 for x in a) / (len(a) - 1) / len(a)
    se2_b = sum((x - mean_b) ** 2 for x in b) / (len(b) - 1) / len(b)
    df = (se2_a + se2_b) ** 2 / (se2_a**2 / (len(a) - 1) + se2_b**2 / (len(b) - 1))
    return (mean_a - mean_b) / math.sqrt(se2_a + se2_b), df


def _welch_p_by_hand(a: list[float], b: list[float]) -> float:
    return _t_tail(*_welch_by_hand(a, b))


def test_the_hand_made_t_tail_is_right_where_it_has_a_closed_form() -> None:
    for t in (0.0, 0.5, 1.0, 3.0, 10.0):
        # df = 1 is Cauchy's distribution; df = 2 has the tail 1 - |t| / sqrt(t² + 2).
        assert _t_tail(t, 1.0) == pytest.approx(1 - 2 / math.pi * math.atan(t), abs=1e-11)
        assert _t_tail(-t, 2.0) == pytest.approx(1 - t / math.sqrt(t * t + 2), abs=1e-11)


# Wikipedia, "Welch's t-test", Examples: the samples with the t, df and p printed there.
PUBLISHED = [
    (
        [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4],
        [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4],
        -2.46,
        25.0,
        0.021,
    ),
    (
        [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8],
        [21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8]
        + [20.7, 21.7, 21.5, 22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8],
        -1.57,
        9.9,
        0.149,
    ),
    (
        [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0],
        [28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7]
        + [23.2, 17.5, 20.6, 18.0, 23.9, 21.6, 24.3, 20.4, 23.9, 13.3],
        -2.22,
        24.5,
        0.036,
    ),
]


@pytest.mark.parametrize(("a", "b", "t", "df", "p"), PUBLISHED)
def test_welch_on_published_worked_examples(
    a: list[float], b: list[float], t: float, df: float, p: float
) -> None:
    # Within one unit of the last digit printed (the page prints t = -2.2255 as -2.22).
    by_hand_t, by_hand_df = _welch_by_hand(a, b)
    assert by_hand_t == pytest.approx(t, abs=0.01) and by_hand_df == pytest.approx(df, abs=0.1)
    assert welch_p_value(a, b) == pytest.approx(p, abs=0.001)
    assert welch_p_value(b, a) == pytest.approx(welch_p_value(a, b), rel=1e-12)


def test_welch_p_values_at_one_and_two_degrees_of_freedom_are_the_closed_forms() -> None:
    # Against a constant sample the degrees of freedom are the other's n - 1: [0, 2] has
    # SE 1, so t = (1 - 5) / 1 and df = 1 (a pooled test would take df = 3).
    assert welch_p_value([0.0, 2.0], [5.0, 5.0, 5.0]) == pytest.approx(
        1 - 2 / math.pi * math.atan(4.0), rel=1e-12
    )
    # Two pairs the same distance apart: SE² 1 a side, t = 3 / sqrt(2), df = (1 + 1)² / 2 = 2.
    t = 3 / math.sqrt(2)
    assert welch_p_value([-1.0, 1.0], [2.0, 4.0]) == pytest.approx(
        1 - t / math.sqrt(t * t + 2), rel=1e-12
    )


def _samples(rng: random.Random) -> tuple[list[float], list[float]]:
    a = [rng.gauss(0.0, rng.uniform(0.05, 2.0)) for _ in range(rng.randint(2, 9))]
    shift = rng.uniform(-2.0, 2.0)
    b = [rng.gauss(shift, rng.uniform(0.05, 2.0)) for _ in range(rng.randint(2, 9))]
    return a, b


def test_welch_p_values_are_the_t_tail_at_welch_satterthwaite_degrees_of_freedom() -> None:
    rng = random.Random(7)
    for _ in range(150):
        a, b = _samples(rng)
        if abs(_welch_by_hand(a, b)[0]) > 12:  # a tail too thin for the integral's precision
            continue
        assert welch_p_value(a, b) == pytest.approx(_welch_p_by_hand(a, b), rel=1e-7, abs=1e-10)


def test_welch_is_symmetric_and_ignores_order_shift_and_scale() -> None:
    rng = random.Random(11)
    for _ in range(100):
        a, b = _samples(rng)
        p = welch_p_value(a, b)
        assert 0 < p <= 1
        assert welch_p_value(b, a) == pytest.approx(p, rel=1e-12)
        assert welch_p_value(a[::-1], sorted(b)) == pytest.approx(p, rel=1e-12)
        assert welch_p_value([x + 3 for x in a], [x + 3 for x in b]) == pytest.approx(p, rel=1e-6)
        assert welch_p_value([5 * x for x in a], [5 * x for x in b]) == pytest.approx(p, rel=1e-9)


def test_welch_falls_as_the_means_part() -> None:
    a = [1.0, 1.3, 0.8, 1.1]
    p_values = [welch_p_value(a, [x + shift for x in [1.2, 0.9, 1.0]]) for shift in range(5)]
    assert p_values == sorted(p_values, reverse=True) and len(set(p_values)) == 5
    assert p_values[-1] < 0.001
    # The mirror image of a shift gives the same two-sided p-value.
    assert welch_p_value(a, [1.2 - 2, 0.9 - 2, 1.0 - 2]) == pytest.approx(
        welch_p_value([-x for x in a], [-1.2 + 2, -0.9 + 2, -1.0 + 2]), rel=1e-12
    )


def test_welch_needs_two_values_a_side_and_handles_no_spread() -> None:
    assert welch_p_value([1.0], [1.0, 2.0]) is None
    assert welch_p_value([1.0, 2.0], [1.0]) is None
    assert welch_p_value([], [1.0, 2.0]) is None
    assert welch_p_value([1.0, 1.0], [1.0, 1.0]) == 1.0
    assert welch_p_value([1.0, 1.0], [2.0, 2.0]) == 0.0
    # 0.1 three times sums to 0.30000000000000004: a mean of sum / n would be an ulp off.
    assert welch_p_value([0.1, 0.1, 0.1], [0.1, 0.1]) == 1.0
    assert welch_p_value([0.1, 0.1, 0.1], [0.2, 0.2]) == 0.0
    # Identical samples, and one sample against itself in another order: t = 0, p = 1.
    assert welch_p_value([1.0, 2.0, 4.0], [1.0, 2.0, 4.0]) == 1.0
    assert welch_p_value([1.0, 2.0, 4.0], [4.0, 1.0, 2.0]) == 1.0
    assert type(welch_p_value([1.0, 2.0], [3.0, 5.0])) is float


def test_holm_never_exceeds_one() -> None:
    # m = 2: 0.6 x 2 = 1.2 is capped at 1; 0.7 x 1 = 0.7 is raised to the running maximum 1.
    assert holm_adjusted([0.7, 0.6]) == [1.0, 1.0]


def test_holm_on_a_worked_example() -> None:
    # Wikipedia's "Holm-Bonferroni method" example (p = 0.01, 0.04, 0.03, 0.005 at alpha
    # 0.05: H1 and H4 rejected). m = 4: sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03
    # (x2 = 0.06), 0.04 (x1 = 0.04, raised to the running maximum 0.06). None is no test and
    # does not count in m.
    adjusted = holm_adjusted([0.01, 0.04, None, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, None, 0.06, 0.02])
    assert holm_adjusted([None, None]) == [None, None] and holm_adjusted([]) == []


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
    raw = {h: _welch_p_by_hand(losses[h], losses["4"]) for h in "128"}
    order = sorted(raw, key=raw.get)
    holm, running = {}, 0.0
    for rank, heads in enumerate(order):  # Holm written out for three comparisons
        running = max(running, min(1.0, (3 - rank) * raw[heads]))
        holm[heads] = running
    for heads in "128":
        assert float(rows[heads]["welch_p"]) == pytest.approx(raw[heads], rel=1e-7, abs=1e-10)
        assert float(rows[heads]["holm_p"]) == pytest.approx(holm[heads], rel=1e-7, abs=1e-10)
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
    # Two seeds each at mean -/+ 0.01 (SE 0.01 a side, df = 2): |t| for the p wanted, from
    # the tail 1 - |t| / sqrt(t² + 2) = raw solved for |t|.
    q = 1 - raw
    t = q * math.sqrt(2 / (1 - q * q))
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
