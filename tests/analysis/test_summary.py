"""The sweep statistics (analysis/summary.py), on hand-made runs and records: the other
metrics' means, labels, runs without recorded settings, natural order, every configuration
failed, runs that neither finished nor failed, single runs, a difference of exactly two
standard errors, the compared metric's name; the best configuration where higher is better and
on a tie, Welch's p-value and Holm's verdict in the rows and as the table shows them (one at
exactly ALPHA included); and ``by_configuration``, the grouping of evaluation records over
seeds that ``mode=eval`` and the harness use: the metric compared and which way is better, the
means of the other metrics, a damaged metrics.json and runs on other code named in warnings.

The p-values are recomputed from the losses with ``statistics`` and a closed form: every
configuration here has two runs the same distance apart, so Welch's degrees of freedom are
(2v)² / (v² + v²) = 2, and Student's t with 2 degrees of freedom has the two-sided tail
``1 - |t| / sqrt(t² + 2)``. The losses are binary fractions, so the variances agree exactly."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

import analysis.summary
from analysis.records import markdown_table
from analysis.run_record import write_record
from analysis.significance import ALPHA
from analysis.summary import (
    Configuration,
    best_configuration,
    by_configuration,
    configuration_rows,
    configuration_table,
    difference_from_best,
    group_runs,
    mean_pm_std,
)
from tests.analysis.summaries import table_cells


def _completed(loss: float, **extra: object) -> dict[str, object]:
    return {"status": "completed", "best_val_loss": loss, **extra}


def _configuration(losses: list[float], **values: str) -> Configuration:
    return Configuration(dict(values), [_completed(loss) for loss in losses])


def test_the_other_metrics_are_means_over_the_completed_runs_that_have_them() -> None:
    config = Configuration(
        {"model.num_heads": "2"},
        [
            _completed(2.0, val_acc=0.5, params=1000),
            _completed(2.2, val_acc=0.7, params=1000),
            _completed(2.1),  # recorded no accuracy: not a zero
            {"status": "failed", "val_acc": 0.1},  # a failed run's numbers do not count
        ],
    )
    assert config.mean_of("val_acc") == pytest.approx(0.6)
    (row,) = configuration_rows([config])
    assert row["val_acc"] == pytest.approx(0.6) and row["params"] == 1000.0
    assert row["val_bpc"] is None and row["tokens_per_sec"] is None  # no run has them


def test_a_label_names_every_key_and_no_keys_is_all_runs() -> None:
    config = _configuration([2.0], **{"model.num_heads": "2", "model.dropout": "0.1"})
    assert config.label() == "model.num_heads=2, model.dropout=0.1"
    assert _configuration([2.0]).label() == "all runs"


def test_a_run_without_recorded_overrides_is_grouped_under_none() -> None:
    """A damaged metrics.json is read as a failed run without its overrides."""
    runs = [_completed(2.0, overrides={"model.num_heads": "2"}), {"status": "failed"}]
    configs = group_runs(runs, ["model.num_heads"])
    assert [c.values for c in configs] == [{"model.num_heads": "2"}, {"model.num_heads": "None"}]
    assert [c.failed for c in configs] == [0, 1]


def test_configurations_come_in_natural_order_of_their_values() -> None:
    runs = [_completed(2.0, overrides={"optim.lr": lr}) for lr in ("10", "2", "1")]
    assert [c.values["optim.lr"] for c in group_runs(runs, ["optim.lr"])] == ["1", "2", "10"]


def test_when_every_configuration_failed_none_is_best_and_no_difference_is_shown() -> None:
    configs = [
        Configuration({"model.num_heads": heads}, [{"status": "failed"}]) for heads in ("1", "2")
    ]
    assert best_configuration(configs) is None
    rows = configuration_rows(configs)
    assert [(r["vs_best"], r["exceeds_2se"], r["is_best"]) for r in rows] == [
        (None, None, False)
    ] * 2
    # heads, n, failed, best_val_loss, vs_best, p_welch, holm: "failed", no verdict, no test
    assert table_cells(configuration_table(configs, rows)) == [
        ["1", "0", "1", "failed", "", "", ""],
        ["2", "0", "1", "failed", "", "", ""],
    ]


def test_a_configuration_whose_runs_neither_finished_nor_failed_shows_no_loss() -> None:
    interrupted = Configuration({"seed": "1"}, [{"status": "interrupted"}])
    assert mean_pm_std(interrupted) == ""
    assert mean_pm_std(Configuration({}, [{"status": "failed"}])) == "failed"


def test_single_runs_show_their_difference_without_a_verdict() -> None:
    configs = [_configuration([2.3], heads="1"), _configuration([2.1], heads="2")]
    table = table_cells(configuration_table(configs, configuration_rows(configs)))
    assert table == [
        ["1", "1", "0", "2.3000", "+0.2000", "", ""],  # one run a side: no test either
        ["2", "1", "0", "2.1000", "best", "", ""],
    ]


def test_a_difference_of_exactly_two_standard_errors_does_not_exceed_them() -> None:
    """Standard errors 1 and 0.75 (two runs each at mean -/+ se): two standard errors of the
    difference are 2 * hypot(1, 0.75) = 2.5, and the difference is 2.5, both exact in floats."""
    best, other = _configuration([0.0, 2.0]), _configuration([2.75, 4.25])
    threshold = 2 * math.hypot(best.standard_error, other.standard_error)
    assert other.mean - best.mean == threshold == 2.5
    assert difference_from_best(other, best) == (2.5, False)
    assert difference_from_best(_configuration([2.76, 4.26]), best)[1] is True


def test_the_table_names_the_metric_it_compares() -> None:
    """``mode=eval`` over a sweep compares ``loss``; one configuration is a table too."""
    config = Configuration({"model.num_heads": "2"}, [{"status": "completed", "loss": 2.0}], "loss")
    table = configuration_table([config], configuration_rows([config]))
    header = "| model.num_heads | n | failed | loss | vs_best | p_welch | holm |"
    assert table.splitlines()[0] == header
    assert table_cells(table) == [["2", "1", "0", "2.0000", "best", "", ""]]


def test_no_configurations_make_a_table_without_rows() -> None:
    columns = ["n", "failed", "best_val_loss", "vs_best", "p_welch", "holm", "val_acc"]
    expected = markdown_table(columns, [])
    assert configuration_table([], [], ["val_acc"]) == expected


BEST = [1.0, 1.5]
CLOSE = [1.5, 2.0]  # 0.5 above the best: within two standard errors, p ≈ 0.29
FAR = [4.0, 4.5]  # 3.0 above the best: beyond two standard errors, p ≈ 0.014


def _welch_p_of_two_runs_each(a: list[float], b: list[float]) -> float:
    """Welch's two-sided p-value for two runs a side with the same spread (2 degrees of
    freedom), from the standard errors of the two means."""
    standard_error = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    t = abs(statistics.fmean(a) - statistics.fmean(b)) / standard_error
    return 1 - t / math.sqrt(t * t + 2)


def _three_configurations() -> list[Configuration]:
    return [
        _configuration(BEST, heads="1"),
        _configuration(CLOSE, heads="2"),
        _configuration(FAR, heads="4"),
    ]


def test_where_higher_is_better_the_highest_mean_is_best() -> None:
    runs = [
        {"status": "completed", "acc": acc, "overrides": {"heads": heads}}
        for heads, acc in (("1", 0.6), ("1", 0.7), ("2", 0.9), ("2", 0.8))
    ]
    configs = group_runs(runs, ["heads"], metric="acc", higher_is_better=True)
    assert [c.higher_is_better for c in configs] == [True, True]
    assert best_configuration(configs) is configs[1]  # mean 0.85 against 0.65
    lower = group_runs(runs, ["heads"], metric="acc")
    assert best_configuration(lower) is lower[0]  # not told so: the lowest mean


@pytest.mark.parametrize("higher_is_better", [False, True])
def test_on_a_tie_the_first_configuration_in_the_table_is_best(higher_is_better: bool) -> None:
    configs = [
        Configuration({"heads": heads}, [_completed(2.0)], higher_is_better=higher_is_better)
        for heads in ("1", "2")
    ]
    assert best_configuration(configs) is configs[0]
    assert [row["is_best"] for row in configuration_rows(configs)] == [True, False]


def test_each_configuration_is_tested_against_the_best_and_holm_adjusts_the_two() -> None:
    close_p = _welch_p_of_two_runs_each(CLOSE, BEST)
    far_p = _welch_p_of_two_runs_each(FAR, BEST)
    # Holm over two tests: the smaller p-value doubled, the larger one at least that.
    far_holm = 2 * far_p
    close_holm = max(far_holm, close_p)
    assert far_holm <= ALPHA < close_holm  # one verdict each way
    rows = configuration_rows(_three_configurations())
    assert [row["welch_p"] for row in rows] == [
        None,  # the best is not tested against itself
        pytest.approx(close_p, rel=1e-9),
        pytest.approx(far_p, rel=1e-9),
    ]
    assert [row["holm_p"] for row in rows] == [
        None,
        pytest.approx(close_holm, rel=1e-9),
        pytest.approx(far_holm, rel=1e-9),
    ]
    assert [row["holm_significant"] for row in rows] == [None, False, True]


def test_the_table_shows_the_p_values_and_holms_verdicts() -> None:
    configs = _three_configurations()
    close_p = _welch_p_of_two_runs_each(CLOSE, BEST)
    far_p = _welch_p_of_two_runs_each(FAR, BEST)
    std = statistics.stdev(BEST)  # the same for all three
    two_se = 2 * math.hypot(std / math.sqrt(2), std / math.sqrt(2))
    assert 0.5 < two_se < 3.0  # CLOSE within the noise, FAR beyond it
    # heads, n, failed, best_val_loss, vs_best, p_welch, holm
    assert table_cells(configuration_table(configs, configuration_rows(configs))) == [
        ["1", "2", "0", f"1.2500 ± {std:.4f}", "best", "", ""],
        [
            "2",
            "2",
            "0",
            f"1.7500 ± {std:.4f}",
            "+0.5000 (within noise)",
            f"{close_p:.3g}",
            f"{close_p:.3g} (not significant)",
        ],
        [
            "4",
            "2",
            "0",
            f"4.2500 ± {std:.4f}",
            "+3.0000 (> 2 SE)",
            f"{far_p:.3g}",
            f"{2 * far_p:.3g} (significant)",
        ],
    ]


def test_an_adjusted_p_value_of_exactly_alpha_is_significant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Holm's verdict is ``p <= ALPHA``; with one test the adjusted p-value is Welch's."""
    monkeypatch.setattr(analysis.summary, "welch_p_value", lambda a, b: ALPHA)
    configs = [_configuration(BEST, heads="1"), _configuration(FAR, heads="4")]
    rows = configuration_rows(configs)
    assert [(row["holm_p"], row["holm_significant"]) for row in rows] == [
        (None, None),
        (ALPHA, True),
    ]
    assert table_cells(configuration_table(configs, rows))[1][-2:] == ["0.05", "0.05 (significant)"]


def _evaluated_sweep(
    sweep: Path,
    runs: list[tuple[str, str, dict[str, float]]],
    provenance: list[dict[str, object]] | None = None,
) -> list[dict[str, object]]:
    """Evaluation records of a sweep's runs, one per (heads, seed, metrics), each run's
    metrics.json holding its overrides (and the run's ``provenance`` when given)."""
    records = []
    for job, (heads, seed, metrics) in enumerate(runs):
        run_dir = sweep / str(job)
        recorded = {"overrides": {"model.num_heads": heads, "seed": seed}}
        if provenance is not None:
            recorded["provenance"] = provenance[job]
        write_record(run_dir, recorded)
        records.append({"checkpoint": str(run_dir / "checkpoints" / "best.ckpt"), **metrics})
    return records


def test_an_evaluated_sweep_compares_its_metric_the_way_that_is_better(tmp_path: Path) -> None:
    """A harness task's accuracy: the highest mean over the seeds is best."""
    records = _evaluated_sweep(
        tmp_path,
        [
            ("2", "1", {"acc": 0.5}),
            ("2", "2", {"acc": 0.5}),
            ("4", "1", {"acc": 0.75}),
            ("4", "2", {"acc": 0.75}),
        ],
    )
    table = by_configuration(records, metric="acc", higher_is_better=True)
    assert (
        table.splitlines()[0] == "| model.num_heads | n | failed | acc | vs_best | p_welch | holm |"
    )
    # Two runs without spread a side: any difference exceeds their (zero) standard errors,
    # and Welch's p is 0 for different means (Holm's too).
    assert table_cells(table) == [
        ["2", "2", "0", "0.5000 ± 0.0000", "-0.2500 (> 2 SE)", "0", "0 (significant)"],
        ["4", "2", "0", "0.7500 ± 0.0000", "best", "", ""],
    ]


def test_an_evaluated_sweep_shows_the_means_of_the_other_metrics(tmp_path: Path) -> None:
    records = _evaluated_sweep(
        tmp_path,
        [
            ("2", "1", {"loss": 2.0, "ppl": math.exp(2.0)}),
            ("2", "2", {"loss": 2.5, "ppl": math.exp(2.5)}),
            ("4", "1", {"loss": 3.0}),  # recorded no perplexity: not a zero
        ],
    )
    lines = by_configuration(records, others=("ppl",)).splitlines()
    assert lines[0] == "| model.num_heads | n | failed | loss | vs_best | p_welch | holm | ppl |"
    std = statistics.stdev([2.0, 2.5])
    ppl = statistics.fmean([math.exp(2.0), math.exp(2.5)])
    assert table_cells("\n".join(lines)) == [
        ["2", "2", "0", f"2.2500 ± {std:.4f}", "best", "", "", f"{ppl:.4g}"],
        ["4", "1", "0", "3.0000", "+0.7500", "", "", ""],
    ]


def test_an_evaluated_sweep_names_a_damaged_metrics_json_and_why_it_matters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _evaluated_sweep(tmp_path, [("2", "1", {"loss": 2.0}), ("4", "1", {"loss": 2.5})])
    damaged = tmp_path / "2"
    damaged.mkdir()
    (damaged / "metrics.json").write_text("[1, 2]")
    records.append({"checkpoint": str(damaged / "checkpoints" / "best.ckpt"), "loss": 3.0})
    assert table_cells(by_configuration(records)) == [
        ["2", "1", "0", "2.0000", "best", "", ""],
        ["4", "1", "0", "2.5000", "+0.5000", "", ""],
        ["None", "1", "0", "3.0000", "+1.0000", "", ""],  # its settings are unknown
    ]
    assert capsys.readouterr().err == (
        f"tinylm: warning: {damaged / 'metrics.json'} is damaged (a JSON list, not an object); "
        "the run is grouped without its settings (rewrite or delete the file)\n"
    )


def _provenance(commit: str) -> dict[str, object]:
    versions = {"python": "3.12.1", "torch": "2.13.0", "lightning": "2.6.0"}
    return {"code": {"commit": commit, "dirty": False, "diff_hash": None}, "versions": versions}


def test_an_evaluated_sweep_names_the_runs_on_other_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _evaluated_sweep(
        tmp_path,
        [("2", "1", {"loss": 2.0}), ("2", "2", {"loss": 2.5}), ("4", "1", {"loss": 3.0})],
        provenance=[_provenance("a" * 40), _provenance("b" * 40), _provenance("a" * 40)],
    )
    by_configuration(records)
    assert capsys.readouterr().err == (
        "tinylm: warning: runs differ in code or library versions: run 1 (commit bbbbbbb); "
        "the other 2 (commit aaaaaaa). Their numbers may not compare.\n"
    )


def test_an_evaluated_sweep_on_one_code_version_warns_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _evaluated_sweep(
        tmp_path,
        [("2", "1", {"loss": 2.0}), ("4", "1", {"loss": 3.0})],
        provenance=[_provenance("a" * 40), _provenance("a" * 40)],
    )
    by_configuration(records)
    assert capsys.readouterr().err == ""
