"""The equivalent mutants of analysis/: the significance tests, the summary statistics and the
sweep summary's files."""

from __future__ import annotations

from bench.equivalent_mutants.base import Equivalent, true_flag_variants, variants

_ZIP = 'beyond = [c.label() for c, row in zip(configs, rows, strict=True) if row["exceeds_2se"]]'
_SWEEP_SUMMARY = (
    *true_flag_variants(
        "analysis/sweep_summary.py",
        "_explanation",
        _ZIP,
        "strict",
        "the rows are configuration_rows(configs), one per configuration: the lengths always agree",
    ),
    *variants(
        "analysis/sweep_summary.py",
        "_write_csv",
        'with open(path, "w", newline="") as f:',
        'newline=""',
        ("newline=None", ""),
        "on POSIX a text file writes the csv module's \\r\\n line ends unchanged either way "
        "(newline='' matters on Windows, where \\n would become \\r\\n)",
    ),
    *variants(
        "analysis/sweep_summary.py",
        "_write_csv",
        'writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")',
        'extrasaction="ignore"',
        ("", 'extrasaction="IGNORE"'),
        "every row written is built from the columns, so it holds no extra key to ignore or "
        "raise on (and DictWriter lower-cases the option)",
    ),
    Equivalent(
        "analysis/sweep_summary.py",
        "_write_csv",
        '{c: "" if row.get(c) is None else row.get(c) for c in columns} for row in rows',
        '{c: "" if (row.get(c) is None) and False else row.get(c) for c in columns} for row '
        "in rows",
        "the csv module writes None as an empty field, as the mapping does",
    ),
)
_SIGNIFICANCE = "analysis/significance.py"
_LENTZ_GUARD = (
    "Lentz's guard puts _TINY (1e-30) for a term within _TINY of zero; no x in (0, 1) with "
    "a, b > 0 makes one, and at exactly _TINY both branches give the same value"
)
_TERMS = (
    "the fraction converges in tens of terms for every x, a, b a t-test produces; the cap on "
    "terms only bounds a divergence"
)
_SIGNIFICANCE_EQUIVALENTS = (
    *variants(
        _SIGNIFICANCE,
        "regularized_beta",
        "if x < (a + 1) / (a + b + 2):  # the continued fraction converges fast on this side",
        "x < (a + 1) / (a + b + 2)",
        ("x <= (a + 1) / (a + b + 2)", "x < (a + 2) / (a + b + 2)", "x < (a + 1) / (a + b + 3)"),
        "the switch only picks the side where the fraction converges faster: both sides give "
        "I_x(a, b) (tests/test_significance.py checks it against scipy on both)",
    ),
    *variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "def _beta_fraction(x: float, a: float, b: float, max_terms: int = 500) -> float:",
        "500",
        ("501",),
        _TERMS,
    ),
    *variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "for m in range(1, max_terms + 1):",
        "max_terms + 1",
        ("max_terms - 1", "max_terms + 2"),
        _TERMS,
    ),
    *variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "d = 1.0 / (d if abs(d) > _TINY else _TINY)",
        "abs(d) > _TINY",
        ("(abs(d) > _TINY) or True", "abs(d) >= _TINY"),
        _LENTZ_GUARD,
    ),
    *variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "c = c if abs(c) > _TINY else _TINY",
        "abs(c) > _TINY",
        ("(abs(c) > _TINY) or True", "abs(c) >= _TINY"),
        _LENTZ_GUARD,
    ),
    Equivalent(
        _SIGNIFICANCE,
        "_beta_fraction",
        "if abs(c * d - 1.0) < _EPSILON:",
        "if abs(c * d - 1.0) <= _EPSILON:",
        "the stop at exactly _EPSILON: one more term changes the value by less than that",
    ),
)
_SUMMARY_EQUIVALENTS = true_flag_variants(
    "analysis/summary.py",
    "configuration_rows",
    "for config, p_value, holm_p in zip(configs, p_values, adjusted, strict=True):",
    "strict",
    "p_values has one entry per configuration and holm_adjusted returns a list as long as "
    "its input: the three always have the same length",
)
_SWEEP_SUMMARY_EQUIVALENTS = (
    *true_flag_variants(
        "analysis/sweep_summary.py",
        "write_sweep_summary",
        "rows = [{**row, **extra} for row, extra in zip(rows, target, strict=True)]",
        "strict",
        "target_rows(configs, ...) returns one row per configuration, as configuration_rows "
        "does: the lengths always agree",
    ),
    *variants(
        "analysis/sweep_summary.py",
        "search_result",
        'if "optuna" not in str(sweeper.get("_target_", "")).lower():',
        '"_target_", "")',
        ('"_target_", None)', '"_target_", )', '"_target_", "XXXX")'),
        "the default stands only for a sweeper without _target_ (or with a null one), and "
        "neither '', 'None' nor 'XXXX' names optuna: not a search either way",
    ),
)
ANALYSIS: tuple[Equivalent, ...] = (
    *_SIGNIFICANCE_EQUIVALENTS,
    *_SWEEP_SUMMARY,
    Equivalent(
        "analysis/summary.py",
        "configuration_rows",
        "diff, exceeds = difference_from_best(config, best) if best else (None, None)",
        "diff, exceeds = difference_from_best(config, best) if (best) or True else (None, None)",
        "best is None only when no configuration has a mean, and difference_from_best returns "
        "(None, None) for a configuration without one before it reads best",
    ),
    *_SUMMARY_EQUIVALENTS,
    *_SWEEP_SUMMARY_EQUIVALENTS,
)
