"""What the sweep summary's files (analysis/sweep_summary.py) say of sweeps beyond a plain
pretraining grid: a sweep of fine-tunes ranked by its task's test metric (highest best) with the
other test metrics as means, ``summary.target_loss`` (its columns and section, and its warning
for fine-tunes, which have no validation curve) and runs on other code versions. Built from
hand-made metrics.json files as tinylm writes them."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from analysis.report_columns import Ranking, ranking
from analysis.run_record import write_record
from analysis.summary import MEANS
from analysis.sweep_summary import write_sweep_summary
from tests.analysis.summaries import (
    explanation,
    hand_made_run,
    read_csv,
    summary_md,
    summary_section,
    table_cells,
)

_TARGET_WARNING = (
    "tinylm: warning: summary.target_loss reads pretraining's validation curve; fine-tunes "
    "have none\n"
)

# --- fine-tunes -----------------------------------------------------------------------------


def _fine_tune(accuracy: float, seed: int, lr: str, metric: str = "accuracy") -> dict:
    """A completed fine-tune's metrics.json (features/finetune/one_checkpoint.py's fields)."""
    return {
        "status": "completed",
        "mode": "finetune",
        "task": "sst2",
        "metric": metric,
        "best_val_loss": 1.0 - accuracy,
        "test_accuracy": accuracy,
        "test_f1": accuracy - 0.1,
        "test_mcc": accuracy - 0.3,
        "examples_per_sec": 100.0 * seed,
        "overrides": {"finetune.lr": lr, "seed": str(seed)},
    }


_ACCURACIES = {"0.0001": (0.8, 0.82), "0.001": (0.6, 0.61)}


def _write_fine_tunes(sweep: Path) -> None:
    """Two learning rates, two seeds each, then a fine-tune that failed."""
    job = 0
    for lr, accuracies in _ACCURACIES.items():
        for seed, accuracy in enumerate(accuracies, start=1):
            write_record(sweep / str(job), _fine_tune(accuracy, seed, lr))
            job += 1
    failed = {"status": "failed", "error": "out of memory", "overrides": {"finetune.lr": "0.001"}}
    write_record(sweep / str(job), {**failed, "overrides": {**failed["overrides"], "seed": "3"}})


def test_ranking_takes_the_metric_of_the_first_completed_fine_tune() -> None:
    runs = [
        {"run": "0", "status": "failed", "mode": "finetune", "metric": "mcc"},
        {"run": "1", "status": "completed", "mode": "finetune", "metric": "f1"},
    ]
    others = ("test_accuracy", "test_mcc", "best_val_loss", "examples_per_sec")
    assert ranking(runs) == Ranking(
        metric="test_f1",
        higher_is_better=True,
        means=others,
        run_columns=("test_f1", *others, "status"),
        fine_tunes=True,
    )
    pretraining = ranking([{"run": "0", "status": "completed", "best_val_loss": 2.0}])
    assert pretraining == Ranking("best_val_loss", False, MEANS, pretraining.run_columns, False)


def test_a_fine_tune_sweep_is_ranked_by_its_test_metric_highest_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_fine_tunes(tmp_path)
    written = write_sweep_summary(tmp_path)
    # No heatmap (its colours rank the lowest best), no curves (fine-tunes record none).
    assert [p.name for p in written] == ["summary.csv", "runs.csv", "summary.md"]
    assert capsys.readouterr().err == ""  # no target loss asked for: nothing to warn about
    columns, rows = read_csv(tmp_path / "summary.csv")
    others = ["test_f1", "test_mcc", "best_val_loss", "examples_per_sec"]
    numbers = ["test_accuracy_mean", "test_accuracy_std", "vs_best", "exceeds_2se"]
    tests = ["welch_p", "holm_p", "holm_significant"]
    assert columns == ["finetune.lr", "n", "failed", *numbers, *tests, *others]
    assert [(r["finetune.lr"], r["n"], r["failed"]) for r in rows] == [
        ("0.0001", "2", "0"),
        ("0.001", "2", "1"),
    ]
    best, worse = (statistics.fmean(_ACCURACIES[lr]) for lr in ("0.0001", "0.001"))
    assert float(rows[0]["test_accuracy_mean"]) == pytest.approx(best)
    assert float(rows[0]["test_accuracy_std"]) == pytest.approx(statistics.stdev((0.8, 0.82)))
    assert rows[0]["vs_best"] == "0.0"  # the highest is the best
    assert float(rows[1]["vs_best"]) == pytest.approx(worse - best)
    assert rows[1]["exceeds_2se"] == "True"
    for row, lr in zip(rows, _ACCURACIES, strict=True):
        accuracies = _ACCURACIES[lr]
        assert float(row["test_f1"]) == pytest.approx(statistics.fmean(a - 0.1 for a in accuracies))
        assert float(row["test_mcc"]) == pytest.approx(
            statistics.fmean(a - 0.3 for a in accuracies)
        )
        assert float(row["best_val_loss"]) == pytest.approx(
            statistics.fmean(1.0 - a for a in accuracies)
        )
        assert float(row["examples_per_sec"]) == pytest.approx(150.0)
    run_columns, run_rows = read_csv(tmp_path / "runs.csv")
    assert run_columns == [
        "run",
        "finetune.lr",
        "seed",
        "model.num_heads",
        "model.dropout",
        "test_accuracy",
        *others,
        "status",
        "error",
    ]
    assert [r["status"] for r in run_rows] == ["completed"] * 4 + ["failed"]
    assert run_rows[0]["test_accuracy"] == "0.8" and run_rows[0]["test_mcc"] == "0.5"
    summary = summary_md(tmp_path)
    expected = explanation(5, 2, "test_accuracy", "the 1 comparison", " (the highest)")
    expected += " Worse than the best beyond noise: finetune.lr=0.001."
    assert summary.startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Configurations\n\n")
    table = summary_section(summary, "Configurations")
    header = "| finetune.lr | n | failed | test_accuracy | vs_best | p_welch | holm | "
    assert table.splitlines()[0] == header + " | ".join(others) + " |"
    lr_at, n_at, failed_at, _, vs_best_at = range(5)  # the cells' places in a row
    shown = [(r[lr_at], r[n_at], r[failed_at], r[vs_best_at]) for r in table_cells(table)]
    assert shown == [
        ("0.0001", "2", "0", "best"),
        ("0.001", "2", "1", f"{worse - best:+.4f} (> 2 SE)"),
    ]
    # The configurations table is followed by the runs: no target or search section between.
    headings = [part.split("\n", 1)[0] for part in summary.split("\n## ")[1:]]
    assert headings == ["Configurations", "Runs"] and table.endswith(" |\n")


def test_a_target_loss_is_dropped_with_a_warning_for_fine_tunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_fine_tunes(tmp_path)
    written = write_sweep_summary(tmp_path, target_loss=0.3)
    assert [p.name for p in written] == ["summary.csv", "runs.csv", "summary.md"]
    assert capsys.readouterr().err == _TARGET_WARNING
    columns, _ = read_csv(tmp_path / "summary.csv")
    assert columns[-1] == "examples_per_sec" and "reached" not in columns
    assert "Time to validation loss" not in summary_md(tmp_path)


# --- the time to a target loss ----------------------------------------------------------------

# [step, validation loss, tokens, seconds]: heads 2 reaches 2.5 (seed 1 at step 10, seed 2 at
# step 5), heads 4 never does.
_CURVES = {
    ("2", "1"): [[5, 3.0, 500, 1.0], [10, 2.4, 1000, 2.0]],
    ("2", "2"): [[5, 2.45, 500, 1.5], [10, 2.2, 1000, 3.0]],
    ("4", "1"): [[5, 2.9, 500, 1.0], [10, 2.6, 1000, 2.0]],
    ("4", "2"): [[5, 2.8, 500, 1.5], [10, 2.55, 1000, 3.0]],
}
_FLOPS_PER_TOKEN = 6.0


def test_the_time_to_a_target_loss_is_in_the_csv_and_its_own_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for job, ((heads, seed), curve) in enumerate(_CURVES.items()):
        run = hand_made_run(curve[-1][1], seed, **{"model.num_heads": heads})
        run.update(val_curve=curve, flops_per_token=_FLOPS_PER_TOKEN)
        write_record(tmp_path / str(job), run)
    write_sweep_summary(tmp_path, target_loss=2.5)
    assert capsys.readouterr().err == ""  # pretraining runs have the curve it reads
    columns, rows = read_csv(tmp_path / "summary.csv")
    units = ("steps", "tokens", "flops", "seconds")
    target_columns = [f"{unit}_to_target_{stat}" for unit in units for stat in ("mean", "std")]
    assert columns[-9:] == ["reached", *target_columns]
    assert columns[:-9][-len(MEANS) :] == list(MEANS)
    reached = {"steps": (10, 5), "tokens": (1000, 500), "seconds": (2.0, 1.5)}
    reached["flops"] = tuple(t * _FLOPS_PER_TOKEN for t in reached["tokens"])
    assert [r["reached"] for r in rows] == ["2", "0"]
    for unit, values in reached.items():
        assert float(rows[0][f"{unit}_to_target_mean"]) == pytest.approx(statistics.fmean(values))
        assert float(rows[0][f"{unit}_to_target_std"]) == pytest.approx(statistics.stdev(values))
        assert rows[1][f"{unit}_to_target_mean"] == rows[1][f"{unit}_to_target_std"] == ""
    # The compared loss is still best_val_loss, its statistics beside the target's.
    assert float(rows[0]["best_val_loss_mean"]) == pytest.approx(statistics.fmean((2.4, 2.2)))
    summary = summary_md(tmp_path)
    assert "|\n\n## Time to validation loss 2.5\n\nWhen validation loss first reached 2.5 " in (
        summary
    )
    section = summary_section(summary, "Time to validation loss 2.5")
    shown = [
        f"{statistics.fmean(reached[u]):.4g} ± {statistics.stdev(reached[u]):.2g}" for u in units
    ]
    assert table_cells(section.split("\n\n", 1)[1]) == [
        ["2", "2/2", *shown],
        ["4", "0/2", "", "", "", ""],
    ]
    assert summary.split("\n## ")[-1].startswith("Runs\n\n")


# --- provenance ---------------------------------------------------------------------------------


def test_runs_on_other_code_are_named_after_the_explanation(tmp_path: Path) -> None:
    commits = ("a" * 40, "a" * 40, "b" * 40)
    for job, commit in enumerate(commits):
        run = hand_made_run(2.0 + job / 10, str(job + 1))
        write_record(tmp_path / str(job), {**run, "provenance": {"code": {"commit": commit}}})
    write_sweep_summary(tmp_path)
    expected = explanation(3, 1, "best_val_loss", "the 0 comparisons", "")
    provenance = (
        "Provenance: runs differ in code or library versions: run 2 (commit bbbbbbb); the "
        "other 2 (commit aaaaaaa). Their numbers may not compare."
    )
    assert summary_md(tmp_path).startswith(
        f"# Sweep {tmp_path}\n\n{expected}\n\n{provenance}\n\n## Configurations\n\n"
    )


# --- what features add ------------------------------------------------------------------------


def two_notes(report) -> None:
    """A feature's ``report`` hook that adds two sentences."""
    report.notes.extend(["First note.", "Second note."])


def test_a_features_sentences_follow_the_explanation_in_order(monkeypatch, tmp_path: Path) -> None:
    import conf.features
    from conf.features import Feature

    planted = Feature(name="notes", report="tests.analysis.test_summary_sections:two_notes")
    monkeypatch.setattr(conf.features, "features", lambda: (planted,))
    for job, loss in enumerate((2.0, 2.2, 2.4)):
        write_record(tmp_path / str(job), hand_made_run(loss, str(job + 1)))
    write_sweep_summary(tmp_path)
    expected = explanation(3, 1, "best_val_loss", "the 0 comparisons", "")
    assert summary_md(tmp_path).startswith(
        f"# Sweep {tmp_path}\n\n{expected} First note. Second note.\n\n"
    )
