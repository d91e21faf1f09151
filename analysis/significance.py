"""Significance tests for a sweep's configurations: Welch's t-test (scipy) and Holm's correction.

Welch's test is ``scipy.stats.ttest_ind_from_stats`` on the means and sample standard
deviations that ``statistics`` computes: ``ttest_ind`` on the raw values would warn of
"catastrophic cancellation" for every configuration whose runs all gave the same loss. Importing
scipy.stats costs about 0.7 s where Lightning has not loaded it already (its torchmetrics does):
once at the end of a sweep, or in ``mode=report``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from scipy import stats

ALPHA = 0.05  # the family-wise error rate of Holm's verdicts


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of Welch's t-test (unequal variances) that ``a`` and ``b`` have the
    same mean; None when either side has fewer than 2 values. Two samples without spread
    give 1.0 for equal means and 0.0 for different ones (scipy: nan and 0.0)."""
    if len(a) < 2 or len(b) < 2:
        return None
    # statistics' mean and stdev are correctly rounded: a sample of one repeated value has
    # exactly that mean and a spread of exactly 0 (math.fsum(a) / len(a) can miss the mean by
    # an ulp, and that ulp made a spread of rounding noise and a p-value of it).
    mean_a, mean_b = statistics.mean(a), statistics.mean(b)
    std_a, std_b = statistics.stdev(a), statistics.stdev(b)
    if std_a == std_b == 0:
        return 1.0 if mean_a == mean_b else 0.0
    test = stats.ttest_ind_from_stats(mean_a, std_a, len(a), mean_b, std_b, len(b), equal_var=False)
    return float(test.pvalue)


def holm_adjusted(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and is not counted as a test):
    the i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) p_(j))``.
    An adjusted p-value <= ALPHA is significant with the family-wise error rate kept at ALPHA
    across all the comparisons."""
    # Written out: scipy (1.17) adjusts p-values only for the false discovery rate
    # (stats.false_discovery_control: Benjamini-Hochberg/-Yekutieli), not for Holm's
    # family-wise rate, and statsmodels' multipletests would be a dependency for these lines.
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[index] = running
    return adjusted
