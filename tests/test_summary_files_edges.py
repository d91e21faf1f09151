"""The sweep summary's files (modes/sweep_summary.py) at their edges, from hand-made
metrics.json files: an empty sweep directory, a sweep over seeds alone (one configuration, no
heatmap), runs without curves, the summary.csv columns and their empty cells, and the
explanation's sentences. Each test kills mutants that the sweep tests leave alive
(``python -m bench.mutations --module modes/sweep_summary.py``)."""

from __future__ import annotations

import csv
from pathlib import Path

from modes.report import write_metrics
from modes.summary import MEANS
from modes.sweep_summary import write_sweep_summary


def _csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    return list(reader.fieldnames or []), rows


def _run(loss: float | None, seed: str, curve: bool = True, **overrides: str) -> dict:
    record: dict = {"overrides": {"seed": seed, **overrides}}
    if loss is None:
        return {**record, "status": "failed", "error": "boom, in two words"}
    record.update(status="completed", best_val_loss=loss, val_acc=0.25, params=1000)
    if curve:
        record["val_curve"] = [[5, loss + 1.0], [10, loss]]
    return record


def test_a_sweep_directory_without_runs_gets_no_files(tmp_path: Path) -> None:
    (tmp_path / ".hydra").mkdir()
    assert write_sweep_summary(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hydra"]


def test_a_sweep_over_seeds_alone_is_one_configuration_without_a_heatmap(tmp_path: Path) -> None:
    for job, loss in enumerate((2.0, 2.2)):
        write_metrics(tmp_path / str(job), _run(loss, seed=str(job + 1)))
    written = write_sweep_summary(tmp_path)
    assert [p.name for p in written] == [
        "summary.csv",
        "runs.csv",
        "summary.md",
        "curves_val_loss.png",
    ]
    columns, rows = _csv(tmp_path / "summary.csv")
    numbers = ["best_val_loss_mean", "best_val_loss_std", "vs_best", "exceeds_2se"]
    assert columns == ["n", "failed", *numbers, *MEANS]
    assert len(rows) == 1 and rows[0]["n"] == "2" and rows[0]["vs_best"] == "0.0"
    # Only what is known is written: no bpc, no throughput.
    assert rows[0]["val_bpc"] == rows[0]["tokens_per_sec"] == ""
    assert rows[0]["exceeds_2se"] == "False"  # the best against itself
    assert rows[0]["val_acc"] == "0.25" and rows[0]["params"] == "1000.0"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith(f"# Sweep {tmp_path}\n\n2 runs in 1 configurations. ")
    assert "fewer than 2 completed runs" not in summary  # two seeds: the spread is known
    assert "Worse than the best" not in summary


def test_runs_without_curves_get_no_curve_figure_and_failures_keep_their_error(
    tmp_path: Path,
) -> None:
    runs = [
        _run(2.0, "1", curve=False, **{"model.num_heads": "2"}),
        _run(None, "1", **{"model.num_heads": "4"}),
    ]
    for job, run in enumerate(runs):
        write_metrics(tmp_path / str(job), run)
    written = write_sweep_summary(tmp_path)
    assert [p.name for p in written] == [
        "summary.csv",
        "runs.csv",
        "summary.md",
        "heatmap_val_loss.png",
    ]
    columns, rows = _csv(tmp_path / "runs.csv")
    assert columns[-2:] == ["status", "error"]
    assert [r["error"] for r in rows] == ["", "boom, in two words"]  # quoted, not split
    assert [r["model.dropout"] for r in rows] == ["", ""]  # not recorded: empty, not None
    summary = (tmp_path / "summary.md").read_text()
    assert "2 runs in 2 configurations." in summary
    assert "fewer than 2 completed runs have no known spread" in summary
