"""The sweep statistics at their edges (analysis/summary.py), on hand-made runs: the other
metrics' means, labels, runs without recorded settings, natural order, every configuration
failed, runs that neither finished nor failed, single runs, a difference of exactly two
standard errors, the compared metric's name. Each test kills mutants that the sweep tests
leave alive (``python -m tools.mutation --module analysis/summary.py``)."""

from __future__ import annotations

import math

import pytest

from analysis.records import markdown_table
from analysis.summary import (
    Configuration,
    best_configuration,
    configuration_rows,
    configuration_table,
    difference_from_best,
    group_runs,
    mean_pm_std,
)


def _completed(loss: float, **extra: object) -> dict[str, object]:
    return {"status": "completed", "best_val_loss": loss, **extra}


def _configuration(losses: list[float], **values: str) -> Configuration:
    return Configuration(dict(values), [_completed(loss) for loss in losses])


def _cells(table: str) -> list[list[str]]:
    """The body rows of a markdown table, cell by cell."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


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
    assert _cells(configuration_table(configs, rows)) == [
        ["1", "0", "1", "failed", "", "", ""],
        ["2", "0", "1", "failed", "", "", ""],
    ]


def test_a_configuration_whose_runs_neither_finished_nor_failed_shows_no_loss() -> None:
    interrupted = Configuration({"seed": "1"}, [{"status": "interrupted"}])
    assert mean_pm_std(interrupted) == ""
    assert mean_pm_std(Configuration({}, [{"status": "failed"}])) == "failed"


def test_single_runs_show_their_difference_without_a_verdict() -> None:
    configs = [_configuration([2.3], heads="1"), _configuration([2.1], heads="2")]
    table = _cells(configuration_table(configs, configuration_rows(configs)))
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
    assert _cells(table) == [["2", "1", "0", "2.0000", "best", "", ""]]


def test_no_configurations_make_a_table_without_rows() -> None:
    columns = ["n", "failed", "best_val_loss", "vs_best", "p_welch", "holm", "val_acc"]
    expected = markdown_table(columns, [])
    assert configuration_table([], [], ["val_acc"]) == expected
