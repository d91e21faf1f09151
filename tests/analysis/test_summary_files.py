"""The sweep summary's files (analysis/sweep_summary.py), from hand-made metrics.json files:
an empty sweep directory gets none, a sweep over seeds alone is one configuration without a
heatmap, runs without curves get no curve figure, the summary.csv and runs.csv columns and
their empty cells, a failed run's error, and the explanation's sentences."""

from __future__ import annotations

from pathlib import Path

from analysis.run_record import write_record
from analysis.summary import MEANS
from analysis.sweep_summary import write_sweep_summary
from tests.analysis.summaries import hand_made_run, read_csv


def test_a_sweep_directory_without_runs_gets_no_files(tmp_path: Path) -> None:
    (tmp_path / ".hydra").mkdir()
    assert write_sweep_summary(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hydra"]


def test_a_sweep_over_seeds_alone_is_one_configuration_without_a_heatmap(tmp_path: Path) -> None:
    for job, loss in enumerate((2.0, 2.2)):
        write_record(tmp_path / str(job), hand_made_run(loss, seed=str(job + 1)))
    written = write_sweep_summary(tmp_path)
    assert [p.name for p in written] == [
        "summary.csv",
        "runs.csv",
        "summary.md",
        "curves_val_loss.png",
    ]
    columns, rows = read_csv(tmp_path / "summary.csv")
    numbers = ["best_val_loss_mean", "best_val_loss_std", "vs_best", "exceeds_2se"]
    tests = ["welch_p", "holm_p", "holm_significant"]
    assert columns == ["n", "failed", *numbers, *tests, *MEANS]
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
        hand_made_run(2.0, "1", curve=False, **{"model.num_heads": "2"}),
        hand_made_run(None, "1", **{"model.num_heads": "4"}),
    ]
    for job, run in enumerate(runs):
        write_record(tmp_path / str(job), run)
    written = write_sweep_summary(tmp_path)
    assert [p.name for p in written] == [
        "summary.csv",
        "runs.csv",
        "summary.md",
        "heatmap_val_loss.png",
    ]
    columns, rows = read_csv(tmp_path / "runs.csv")
    assert columns[-2:] == ["status", "error"]
    assert [r["error"] for r in rows] == ["", "boom, in two words"]  # quoted, not split
    assert [r["model.dropout"] for r in rows] == ["", ""]  # not recorded: empty, not None
    summary = (tmp_path / "summary.md").read_text()
    assert "2 runs in 2 configurations." in summary
    assert "fewer than 2 completed runs have no known spread" in summary


def test_the_summary_explains_itself_and_lists_the_configurations_beyond_noise(
    tmp_path: Path,
) -> None:
    """Heads 1 and 2 are far worse than heads 4 (two seeds each, spread 0.01), heads 8 has
    one run; runs.csv takes an unswept setting from the run's config, and a damaged
    metrics.json is a failed run without settings."""
    losses = {"1": (3.0, 3.01), "2": (2.5, 2.51), "4": (2.0, 2.01), "8": (2.2,)}
    job = 0
    for heads, values in losses.items():
        for seed, loss in enumerate(values, start=1):
            run = hand_made_run(loss, str(seed), **{"model.num_heads": heads})
            write_record(tmp_path / str(job), {**run, "config": {"model.dropout": 0.1}})
            job += 1
    (tmp_path / str(job)).mkdir()
    (tmp_path / str(job) / "metrics.json").write_text("{damaged")
    write_sweep_summary(tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    explanation = (
        "8 runs in 5 configurations. best_val_loss is the mean ± sample standard deviation "
        "over a configuration's completed runs (seeds are replicates); vs_best is its "
        'difference from the best configuration\'s mean, "> 2 SE" when that exceeds two '
        "standard errors of the difference. p_welch is the two-sided p-value of Welch's "
        "t-test against the best configuration, holm its Holm-adjusted value over the 2 "
        "comparisons with the best, significant at <= 0.05 (the family-wise error rate). The "
        "best is chosen from the same runs, so its lead is optimistic: confirm it with new "
        "seeds. Configurations with fewer than 2 completed runs "
        "have no known spread and their differences are not judged; add seeds (e.g. "
        "seed=1,2,3) to judge them. Worse than the best beyond noise: model.num_heads=1; "
        "model.num_heads=2."
    )
    assert summary.startswith(f"# Sweep {tmp_path}\n\n{explanation}\n\n## Configurations\n\n")
    configurations = summary.split("## Configurations\n\n")[1].split("\n## Runs")[0]
    header = "| model.num_heads | n | failed | best_val_loss | vs_best | p_welch | holm | "
    header += " | ".join(MEANS)
    assert configurations.splitlines()[0] == header + " |"
    columns, rows = read_csv(tmp_path / "runs.csv")
    assert [r["model.dropout"] for r in rows] == ["0.1"] * 7 + [""]
    assert rows[-1]["status"] == "failed" and rows[-1]["model.num_heads"] == ""
