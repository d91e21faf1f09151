"""The contents of what tinylm writes for people to read: sweep summaries, the heatmap's grid,
the attention figure."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from analysis.plots import heatmap_cells
from analysis.summary import group_runs
from analysis.sweep_summary import write_sweep_summary

HEADS, DROPOUTS = ("1", "2", "3", "4"), ("0.0", "0.1", "0.2")


def _job_metrics(job: int, heads: str, dropout: str) -> dict[str, Any]:
    """What a job's metrics.json holds; 3 heads fails, as it does for an even width."""
    overrides = {"model.num_heads": heads, "model.dropout": dropout, "trainer.max_steps": "10"}
    if heads == "3":
        return {"status": "failed", "error": f"num_heads=3 (job {job})", "overrides": overrides}
    return {
        "status": "completed",
        "step": 10,
        "best_val_loss": 5.0 + job / 7,
        "val_loss": 5.1 + job / 7,
        "val_ppl": math.exp(5.1 + job / 7),
        "tokens_per_sec": 1234.5 * (job + 1),
        "overrides": overrides,
        "config": {"model.num_heads": int(heads), "model.dropout": float(dropout)},
        "params": 1000 + job,
    }


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A sweep directory as a 4 x 3 multirun leaves it: jobs 0..11, heads outer."""
    jobs = {}
    for job, (heads, dropout) in enumerate((h, d) for h in HEADS for d in DROPOUTS):
        jobs[str(job)] = _job_metrics(job, heads, dropout)
        (tmp_path / str(job)).mkdir()
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(jobs[str(job)]))
    (tmp_path / ".hydra").mkdir()  # not a job: no metrics.json
    return tmp_path, jobs


def _markdown_rows(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line.strip().strip("|").split("|") for line in text.strip().splitlines()]
    header = [c.strip() for c in lines[0]]
    assert set(lines[1]) <= {"---", ""}
    return header, [[c.strip() for c in line] for line in lines[2:]]


def test_runs_table_columns_order_and_values(sweep) -> None:
    sweep_dir, jobs = sweep
    written = write_sweep_summary(sweep_dir)
    names = ["summary.csv", "runs.csv", "summary.md", "heatmap_val_loss.png"]
    assert [p.name for p in written] == names
    # The README's columns: run, the swept keys (heads and dropout here), parameters, best
    # validation loss, validation perplexity and accuracy, tokens/s, status, error.
    columns = [
        "run",
        "model.num_heads",
        "model.dropout",
        "params",
        "best_val_loss",
        "val_ppl",
        "val_acc",
        "tokens_per_sec",
        "status",
        "error",
    ]
    with open(sweep_dir / "runs.csv") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == columns
    assert [r["run"] for r in rows] == [str(job) for job in range(12)]  # 10 after 9
    for row in rows:
        job = jobs[row["run"]]
        assert (row["model.num_heads"], row["model.dropout"]) == (
            job["overrides"]["model.num_heads"],
            job["overrides"]["model.dropout"],
        )
        assert row["status"] == job["status"]
        if job["status"] == "failed":
            assert row["error"] == job["error"]
            assert row["best_val_loss"] == row["val_ppl"] == row["params"] == ""
            continue
        assert row["error"] == ""
        assert int(row["params"]) == job["params"]
        # Four significant digits (whole numbers from 1000 up).
        assert float(row["best_val_loss"]) == pytest.approx(job["best_val_loss"], rel=5e-4)
        assert float(row["val_ppl"]) == pytest.approx(job["val_ppl"], rel=5e-4)
        assert float(row["tokens_per_sec"]) == pytest.approx(job["tokens_per_sec"], abs=0.5)

    runs_section = (sweep_dir / "summary.md").read_text().split("## Runs")[1]
    header, md_rows = _markdown_rows(runs_section)
    assert header == columns
    assert md_rows == [[r[c] for c in columns] for r in rows]  # the same table


def _cells(runs: list[dict[str, Any]], keys: list[str], all_keys: list[str] | None = None):
    return heatmap_cells(group_runs(runs, all_keys or keys), keys)


def test_heatmap_cells_hold_each_configuration_and_mark_failures(sweep) -> None:
    sweep_dir, jobs = sweep
    runs = [{"run": name, **metrics} for name, metrics in jobs.items()]
    keys = ["model.num_heads", "model.dropout"]
    row_values, col_values, cells = _cells(runs, keys)
    assert (row_values, col_values) == (list(HEADS), list(DROPOUTS))
    for metrics in jobs.values():
        i = HEADS.index(metrics["overrides"]["model.num_heads"])
        j = DROPOUTS.index(metrics["overrides"]["model.dropout"])
        if metrics["status"] == "failed":
            assert cells[i][j].failed == 1 and cells[i][j].mean is None
        else:
            assert cells[i][j].failed == 0 and cells[i][j].mean == metrics["best_val_loss"]


def test_heatmap_cell_is_the_best_over_a_third_swept_key() -> None:
    def job(heads: str, lr: str, loss: float | None, status: str = "completed") -> dict:
        overrides = {"model.num_heads": heads, "model.dropout": "0.0", "optim.lr": lr}
        return {"overrides": overrides, "best_val_loss": loss, "status": status}

    runs = [
        job("10", "1e-3", 4.0),
        job("10", "3e-3", 3.5),
        job("2", "1e-3", None, "failed"),
        job("2", "3e-3", 4.5),
        job("2", "1e-2", None, "interrupted"),
    ]
    rows, cols, cells = _cells(runs, ["model.num_heads", "optim.lr"])
    assert rows == ["2", "10"] and cols == ["1e-3", "3e-3", "1e-2"]
    assert [c.mean for c in cells[1][:2]] == [4.0, 3.5] and cells[0][1].mean == 4.5
    assert [[c is not None and c.failed > 0 for c in row] for row in cells] == [
        [True, False, False],
        [False, False, False],
    ]
    # An interrupted job is neither a loss nor a failure: a cell without a value.
    assert cells[0][2].mean is None and cells[0][2].failed == 0
    # One swept key: a single column, the best configuration over the other key.
    _, single_cols, single = _cells(runs, ["model.num_heads"], ["model.num_heads", "optim.lr"])
    assert single_cols == [""] and [row[0].mean for row in single] == [4.5, 3.5]
