"""What the sweep summary and the page say of an Optuna search (``features/optuna/report.py``):
its ``search.json`` or, without one, ``optimization_results.yaml`` and its runs; a search still
running; a search record beside another sweeper; the history's best so far. Built from
hand-made metrics.json files and search records as tinylm writes them; no Optuna needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

import features.optuna.report
from analysis.run_record import write_record
from analysis.sweep_summary import write_sweep_summary
from features.optuna.report import best_so_far, plot_search_history
from tests.analysis.summaries import explanation, summary_md, summary_section

_SEARCH_SENTENCE = (
    " An Optuna search runs each trial once (the run's number is the trial's): no spread is "
    "known and differences are not judged."
)


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
    return explanation(runs, runs, "best_val_loss", "the 0 comparisons", "") + _SEARCH_SENTENCE


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
    assert summary_md(tmp_path).startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Config")
    shutil.rmtree(tmp_path / "2")
    write_sweep_summary(tmp_path)
    gone = best.replace("run 2", "a run no longer here")
    expected = _search_explanation(3) + gone
    assert summary_md(tmp_path).startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Config")


def test_a_search_still_running_names_no_best_trial(tmp_path: Path) -> None:
    _search_sweep(tmp_path, _TRIALS)
    written = write_sweep_summary(tmp_path)
    names = ["summary.csv", "runs.csv", "summary.md", "optuna_history.png"]  # no heatmap
    assert [p.name for p in written] == names
    assert summary_md(tmp_path).startswith(
        f"# Sweep {tmp_path}\n\n{_search_explanation(3)}\n\n## Configurations\n\n"
    )


def _search_record(trials: dict[str, tuple[str, str, float]], best: int) -> dict:
    """search.json as features/optuna/search.py writes it, one trial per run."""
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
    summary = summary_md(tmp_path)
    assert summary.startswith(f"# Sweep {tmp_path}\n\n{expected}\n\n## Configurations\n\n")
    assert "|\n\n## Optuna search\n\nStudy `heads-and-lr` in `sqlite:///study.db`: 3 trials, " in (
        summary
    )
    search = summary_section(summary, "Optuna search")
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
    summary = summary_md(tmp_path)
    assert "Optuna" not in summary


def test_a_search_page_draws_its_history_and_no_heatmap(tmp_path: Path) -> None:
    page = pytest.importorskip("features.report.page", reason="the report page is a feature")
    sweeper = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    (tmp_path / "multirun.yaml").write_text(f"hydra:\n  sweeper:\n    _target_: {sweeper}\n")
    for trial, (lr, loss) in enumerate([("0.001", 5.0), ("0.003", 4.5), ("0.01", None)]):
        status = {"status": "completed", "best_val_loss": loss} if loss else {"status": "failed"}
        write_record(tmp_path / str(trial), {**status, "overrides": {"optim.lr": lr}})
    html = page.write_report(tmp_path).read_text()
    assert "search history" in html and 'id="heatmap-choice"' not in html
    assert "2 completed" in html and "1 failed" in html


def test_best_so_far_follows_the_direction() -> None:
    assert best_so_far([None, 3.0, None, 2.0, 4.0]) == [None, 3.0, 3.0, 2.0, 2.0]
    assert best_so_far([1.0, 3.0, 2.0], maximize=True) == [1.0, 3.0, 3.0]


def _drawn(record: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict:
    """The history's marks: label -> (trial numbers, values)."""
    figures = []
    monkeypatch.setattr(
        features.optuna.report, "save_figure", lambda fig, path, dpi: figures.append(fig)
    )
    plot_search_history(record, tmp_path / "history.png")
    (ax,) = figures[0].axes
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines}


def _trial(number: int, state: str, value: float | None, reported: float | None) -> dict:
    values = None if value is None else [value]
    return {"number": number, "state": state, "values": values, "last_reported": reported}


@pytest.mark.parametrize("objective", ["seconds_to_target", "best_val_loss"])
def test_the_history_draws_unreached_targets_on_top_and_pruned_trials_on_their_axis(
    objective: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    trials = [
        _trial(0, "COMPLETE", 20.0, 1.9),
        _trial(1, "COMPLETE", float("inf"), 1.95),  # never reached trainer.stop_at_loss
        _trial(2, "PRUNED", None, 2.6),
        _trial(3, "COMPLETE", 25.0, 1.8),
    ]
    record = {"objectives": [objective], "directions": ["minimize"], "trials": trials}
    drawn = _drawn(record, monkeypatch, tmp_path)
    assert drawn["completed trial"] == ([0, 3], [20.0, 25.0])
    assert drawn["completed, target not reached (inf)"] == ([1], [25.0])  # at the top
    if objective == "best_val_loss":  # a loss: the pruned trial at the loss it reported
        assert drawn["pruned (last reported)"] == ([2], [2.6])
    else:  # its validation loss is no number of seconds: on the axis
        assert drawn["pruned (on the axis)"] == ([2], [20.0])
    assert drawn["best so far"][1] == [20.0, 20.0, 20.0, 20.0]


def test_trials_tied_for_the_best_value_name_the_first(tmp_path: Path) -> None:
    """Optuna lists every trial tied for the best value of one objective as its best."""
    _search_sweep(tmp_path, _TRIALS)
    (tmp_path / "search.json").write_text(
        json.dumps(_search_record(_TRIALS, best=1) | {"best": [1, 2]})
    )
    write_sweep_summary(tmp_path)
    best = " Optuna's best trial: run 1 (optim.lr=0.003, model.num_heads=2), best_val_loss 2.25"
    assert summary_md(tmp_path).startswith(
        f"# Sweep {tmp_path}\n\n{_search_explanation(3)}{best} (search.json).\n\n## Configurations"
    )
