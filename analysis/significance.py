"""Significance tests for a sweep's configurations: Welch's t-test and Holm's correction.

Standard library only (the sweep summary runs at the end of every multirun, and the figures'
matplotlib is the only heavy import it allows). Student's t distribution is reached through
the regularised incomplete beta function, ``P(|T| > t) = I_x(df / 2, 1 / 2)`` with
``x = df / (df + t²)``, evaluated by its continued fraction (Lentz's method), which converges
quickly for every ``x`` once the symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` picks the side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ALPHA = 0.05  # the family-wise error rate of Holm's verdicts
_TINY = 1e-300
_EPSILON = 1e-15


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of Welch's t-test (unequal variances) that ``a`` and ``b`` have the
    same mean; None when either side has fewer than 2 values. Two samples without spread
    give 1.0 for equal means and 0.0 for different ones."""
    if len(a) < 2 or len(b) < 2:
        return None
    mean_a, mean_b = math.fsum(a) / len(a), math.fsum(b) / len(b)
    var_a = math.fsum((x - mean_a) ** 2 for x in a) / (len(a) - 1) / len(a)  # se_a²
    var_b = math.fsum((x - mean_b) ** 2 for x in b) / (len(b) - 1) / len(b)  # se_b²
    spread = var_a + var_b
    if spread == 0:
        return 1.0 if mean_a == mean_b else 0.0
    t = (mean_a - mean_b) / math.sqrt(spread)
    # Welch-Satterthwaite degrees of freedom.
    df = spread**2 / (var_a**2 / (len(a) - 1) + var_b**2 / (len(b) - 1))
    return student_t_two_sided(t, df)


def student_t_two_sided(t: float, df: float) -> float:
    """``P(|T| >= |t|)`` for Student's t with ``df`` (> 0, not necessarily whole) degrees of
    freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    return regularized_beta(df / (df + t * t), df / 2, 0.5)


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)`` for 0 <= x <= 1, a, b > 0."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must lie in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):  # the continued fraction converges fast on this side
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float, max_terms: int = 500) -> float:
    """The continued fraction of ``I_x(a, b)`` (modified Lentz's method)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, max_terms + 1):
        # The even step, then the odd step of the fraction's terms.
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            return result
    raise ArithmeticError(f"the incomplete beta fraction did not converge at x={x}, a={a}, b={b}")


def holm_adjusted(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and is not counted as a test):
    the i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) p_(j))``.
    An adjusted p-value <= ALPHA is significant with the family-wise error rate kept at ALPHA
    across all the comparisons."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[index] = running
    return adjusted
