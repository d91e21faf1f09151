"""What the sweep summary's files (analysis/sweep_summary.py) say of sweeps beyond a plain
pretraining grid: a sweep of fine-tunes ranked by its task's test metric (highest best) with the
other test metrics as means, ``summary.target_loss`` (its columns and section, and its warning
for fine-tunes, which have no validation curve), an Optuna search (its ``search.json`` or,
without one, ``optimization_results.yaml``; a search still running; a search record beside
another sweeper) and runs on other code versions. Built from hand-made metrics.json files and
search records as tinylm writes them."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from analysis.report_columns import Ranking, ranking
from analysis.run_record import write_record
from analysis.summary import MEANS
from analysis.sweep_summary import write_sweep_summary
from tests.analysis.summaries import hand_made_run, read_csv, table_cells

_FIRST_SENTENCES = (
    "is the mean ± sample standard deviation over a configuration's completed runs (seeds are "
    "replicates); vs_best is its difference from the best configuration's mean"
)
_JUDGED = (
    '"> 2 SE" when that exceeds two standard errors of the difference. p_welch is the '
    "two-sided p-value of Welch's t-test against the best configuration, holm its "
    "Holm-adjusted value over {comparisons} with the best, significant at <= 0.05 (the "
    "family-wise error rate). The best is chosen from the same runs, so its lead is "
    "optimistic: confirm it with new seeds."
)
_SEARCH_SENTENCE = (
    " An Optuna search runs each trial once (the run's number is the trial's): no spread is "
    "known and differences are not judged."
)
_TARGET_WARNING = (
    "tinylm: warning: summary.target_loss reads pretraining's validation curve; fine-tunes "
    "have none\n"
)


def _explanation(runs: int, configs: int, metric: str, comparisons: str, highest: str) -> str:
    """The summary's opening sentences as a user reads them."""
    return (
        f"{runs} runs in {configs} configurations. {metric} {_FIRST_SENTENCES}{highest}, "
        + _JUDGED.format(comparisons=comparisons)
    )


def _summary(sweep: Path) -> str:
    return (sweep / "summary.md").read_text()


def _section(summary: str, heading: str) -> str:
    """The text of the summary.md section ``heading`` up to the next section."""
    return summary.split(f"\n## {heading}\n\n", 1)[1].split("\n## ", 1)[0]


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
    summary = _summary(tmp_path)
    explanation = _explanation(5, 2, "test_accuracy", "the 1 comparison", " (the highest)")
    explanation += " Worse than the best beyond noise: finetune.lr=0.001."
    assert summary.startswith(f"# Sweep {tmp_path}\n\n{explanation}\n\n## Configurations\n\n")
    table = _section(summary, "Configurations")
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
    assert "Time to validation loss" not in _summary(tmp_path)


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
    summary = _summary(tmp_path)
    assert "|\n\n## Time to validation loss 2.5\n\nWhen validation loss first reached 2.5 " in (
        summary
    )
    section = _section(summary, "Time to validation loss 2.5")
    shown = [
        f"{statistics.fmean(reached[u]):.4g} ± {statistics.stdev(reached[u]):.2g}" for u in units
    ]
    assert table_cells(section.split("\n\n", 1)[1]) == [
        ["2", "2/2", *shown],
        ["4", "0/2", "", "", "", ""],
    ]
    assert summary.split("\n## ")[-1].startswith("Runs\n\n")


# --- an Optuna search -------------------------------------------------------------------------


def _search_sweep(sweep: Path, runs: dict[str, tuple[str, str, float]]) -> None:
    """Runs (job: lr, heads, best_val_loss) of a search by tinylm's Optuna sweeper."""
    for job, (lr, heads, loss) in runs.items():
        overrides = {"optim.lr": lr, "model.num_heads": heads}
        record = {"status": "completed", "best_val_loss": loss, "overrides": overrides}
        write_record(sweep / job, record)
    multirun = {
        "hydra": {
            "sweeper": {
                "_target_": "hydra_plugins.tinylm_features.OptunaSearch",
                "n_trials": len(runs),
            }
        }
    }
    (sweep / "multirun.yaml").write_text(yaml.safe_dump(multirun))


_TRIALS = {"0": ("0.001", "4", 2.5), "1": ("0.003", "2", 2.25), "2": ("0.003", "4", 2.25)}


def _search_explanation(runs: int) -> str:
    """A search's opening sentences: one run per configuration, so no comparison is judged."""
    return _explanation(runs, runs, "best_val_loss", "the 0 comparisons", "") + _SEARCH_SENTENCE


def test_a_search_without_its_record_names_the_best_trial_of_optimization_results(
    tmp_path: Path,
) -> None:
    """Run 1 has the best value but other settings; run 2 has both; run 3, the best value
    and no recorded settings (a metrics.json written without its overrides)."""
    _search_sweep(tmp_path, _TRIALS)
    write_record(tmp_path / "3", {"status": "completed", "best_val_loss": 2.25})
    results = {"name": "optuna", "best_params": {"optim.lr": 0.003, "model.num_heads": 4}}
    results["best_value"] = 2.25
    (tmp_path / "optimization_results.yaml").write_text(yaml.safe_dump(results, sort_keys=False))
    written = write_sweep_summary(tmp_path)
    # No heatmap; the history drawn from the runs (no search.json to draw it from).
    assert [p.name for p in written] == [
        "summary.csv",
        "runs.csv",
        "summary.md",
        "optuna_history.png",
    ]
    best = (
        " Optuna's best trial: run 2 (optim.lr=0.003, model.num_heads=4), best_val_loss 2.25 "
        "(optimization_results.yaml)."
    )
    expected = _search_explanation(4) + best
    assert _summary(tmp_path).startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Config")
    shutil.rmtree(tmp_path / "2")
    write_sweep_summary(tmp_path)
    gone = best.replace("run 2", "a run no longer here")
    expected = _search_explanation(3) + gone
    assert _summary(tmp_path).startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Config")


def test_a_search_still_running_names_no_best_trial(tmp_path: Path) -> None:
    _search_sweep(tmp_path, _TRIALS)
    written = write_sweep_summary(tmp_path)
    names = ["summary.csv", "runs.csv", "summary.md", "optuna_history.png"]  # no heatmap
    assert [p.name for p in written] == names
    assert _summary(tmp_path).startswith(
        f"# Sweep {tmp_path}\n\n{_search_explanation(3)}\n\n## Configurations\n\n"
    )


def _search_record(trials: dict[str, tuple[str, str, float]], best: int) -> dict:
    """search.json as features/optuna/study_report.py writes it, one trial per run."""
    return {
        "study_name": "heads-and-lr",
        "storage": "sqlite:///study.db",
        "objectives": ["best_val_loss"],
        "directions": ["minimize"],
        "trials": [
            {
                "number": int(job),
                "state": "COMPLETE",
                "params": {"optim.lr": float(lr), "model.num_heads": int(heads)},
                "values": [loss],
                "run": job,
                "consumed": {"steps": 100},
                "error": None,
                "last_reported": None,
            }
            for job, (lr, heads, loss) in trials.items()
        ],
        "best": [best],
        "importances": {"best_val_loss": {"optim.lr": 0.75, "model.num_heads": 0.25}},
    }


def test_a_search_with_its_record_has_its_sentence_section_and_history(tmp_path: Path) -> None:
    _search_sweep(tmp_path, _TRIALS)
    (tmp_path / "search.json").write_text(json.dumps(_search_record(_TRIALS, best=1)))
    written = write_sweep_summary(tmp_path)
    assert written[3:] == [tmp_path / "optuna_history.png"]
    assert [p.name for p in written] == ["summary.csv", "runs.csv", "summary.md", written[3].name]
    assert written[3].is_file()
    best = " Optuna's best trial: run 1 (optim.lr=0.003, model.num_heads=2), best_val_loss 2.25"
    expected = _search_explanation(3) + best + " (search.json)."
    summary = _summary(tmp_path)
    assert summary.startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Configurations\n\n")
    assert "|\n\n## Optuna search\n\nStudy `heads-and-lr` in `sqlite:///study.db`: 3 trials, " in (
        summary
    )
    search = _section(summary, "Optuna search")
    assert search.startswith("Study `heads-and-lr` in `sqlite:///study.db`: 3 trials, 3 completed.")
    assert "Training steps: 300 in all, 0 of them in pruned trials." in search
    assert summary.split("\n## ")[-1].startswith("Runs\n\n")


def test_a_search_record_beside_another_sweeper_is_not_read(tmp_path: Path) -> None:
    _search_sweep(tmp_path, _TRIALS)
    (tmp_path / "search.json").write_text(json.dumps(_search_record(_TRIALS, best=1)))
    basic = {"hydra": {"sweeper": {"_target_": "hydra._internal.core_plugins.BasicSweeper"}}}
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(basic))
    written = write_sweep_summary(tmp_path)
    assert [p.name for p in written] == [
        "summary.csv",
        "runs.csv",
        "summary.md",
        "heatmap_val_loss.png",
    ]
    summary = _summary(tmp_path)
    assert "Optuna" not in summary


# --- provenance ---------------------------------------------------------------------------------


def test_runs_on_other_code_are_named_after_the_explanation(tmp_path: Path) -> None:
    commits = ("a" * 40, "a" * 40, "b" * 40)
    for job, commit in enumerate(commits):
        run = hand_made_run(2.0 + job / 10, str(job + 1))
        write_record(tmp_path / str(job), {**run, "provenance": {"code": {"commit": commit}}})
    write_sweep_summary(tmp_path)
    explanation = _explanation(3, 1, "best_val_loss", "the 0 comparisons", "")
    provenance = (
        "Provenance: runs differ in code or library versions: run 2 (commit bbbbbbb); the "
        "other 2 (commit aaaaaaa). Their numbers may not compare."
    )
    assert _summary(tmp_path).startswith(
        f"# Sweep {tmp_path}\n\n{explanation}\n\n{provenance}\n\n## Configurations\n\n"
    )
