"""The learning-rate transfer of a sweep's report (features/mup/transfer.py, report.py), from
hand-made run records as ``mode=train`` writes them: each width's best learning rate, the
optimum that stays, moves by one grid step or by more, a move within the seeds' spread
reported as none, a single seed's unknown spread, a panel per parametrization, the summary's
section and table, the figure drawn, and nothing for sweeps that do not vary a width and a
learning rate."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from analysis.report import build_report
from analysis.run_record import write_record
from analysis.summary import group_runs
from analysis.sweep_summary import write_summary_files
from features.mup.transfer import transfer_of, verdict

LRS = ("1e-3", "3e-3", "1e-2", "3e-2")
WIDTHS = ("32", "64", "128")


def _loss(lr: str, best: str, seed: int, noise: float = 0.01, depth: float = 0.2) -> float:
    """A parabola in log10(lr) around ``best``, the seeds at -noise, 0, +noise."""
    steps = math.log10(float(lr)) - math.log10(float(best))
    return 3.0 + depth * (steps / math.log10(3)) ** 2 + noise * (seed - 1)


def _runs(best: dict[str, str], seeds: int = 3, extra: dict | None = None, **kw) -> list[dict]:
    runs = []
    for width in best:
        for lr in LRS:
            for seed in range(seeds):
                overrides = {
                    "model.hidden_size": width,
                    "optim.lr": lr,
                    **(extra or {}),
                    "seed": str(seed),
                }
                loss = _loss(lr, best[width], seed, **kw)
                runs.append(
                    {
                        "run": str(len(runs)),
                        "status": "completed",
                        "best_val_loss": loss,
                        "overrides": overrides,
                    }
                )
    return runs


def _panel(runs: list[dict]):
    keys = [k for k in runs[0]["overrides"] if k != "seed"]
    transfer = transfer_of(group_runs(runs, keys), keys)
    assert transfer is not None
    return transfer


def test_the_best_learning_rate_per_width_and_no_move() -> None:
    transfer = _panel(_runs({w: "3e-3" for w in WIDTHS}))
    (panel,) = transfer.panels
    assert transfer.lr_key == "optim.lr" and panel.label == ""
    assert [c.width for c in panel.curves] == [32, 64, 128]
    assert [c.best.lr for c in panel.curves] == [3e-3] * 3
    assert panel.moved_steps() == 0 and panel.moved_beyond_spread() == 0
    assert [c.resolved() for c in panel.curves] == [True] * 3
    sentence = verdict(panel, "optim.lr")
    assert "moved 0 grid steps across widths" in sentence
    assert sentence.endswith(
        "differ from the best beyond the seeds' spread, so the optimum "
        "moved 0 grid steps beyond the spread: no move."
    )


def test_a_move_of_one_step_and_of_more_than_one() -> None:
    one = _panel(_runs({"32": "3e-3", "64": "3e-3", "128": "1e-2"})).panels[0]
    assert one.moved_steps() == 1 and one.moved_beyond_spread() == 1
    assert verdict(one, "optim.lr").endswith("it stayed within one grid step.")
    two = _panel(_runs({"32": "1e-2", "64": "3e-3", "128": "1e-3"})).panels[0]
    assert [c.best.lr for c in two.curves] == [1e-2, 3e-3, 1e-3]
    assert two.moved_steps() == 2 and two.moved_beyond_spread() == 2
    assert verdict(two, "optim.lr").endswith("it moved by more than one grid step.")


def test_a_move_within_the_seeds_spread_is_no_move() -> None:
    # The same nominal move of 2 steps, but the parabola (0.002 per step squared) is shallower
    # than the seeds' spread (0.05): every neighbour is within noise of each width's best.
    runs = _runs({"32": "1e-2", "64": "3e-3", "128": "1e-3"}, noise=0.05, depth=0.002)
    (panel,) = _panel(runs).panels
    assert panel.moved_steps() == 2
    assert [c.resolved() for c in panel.curves] == [False] * 3
    assert panel.moved_beyond_spread() == 0
    sentence = verdict(panel, "optim.lr")
    assert "at widths 32, 64, 128 a neighbouring learning rate is within the seeds' spread" in (
        sentence
    )
    assert sentence.endswith("moved 0 grid steps beyond the spread: no move.")


def test_one_seed_leaves_the_spread_unknown() -> None:
    (panel,) = _panel(_runs({"32": "1e-2", "64": "3e-3", "128": "1e-3"}, seeds=1)).panels
    assert panel.curves[0].best.spread is None and not panel.spread_known()
    sentence = verdict(panel, "optim.lr")
    assert "moved 2 grid steps across widths (it moved by more than one grid step)" in sentence
    assert "spread is unknown" in sentence and "seed=0,1,2" in sentence


def test_a_failed_learning_rate_is_left_out_of_its_curve() -> None:
    runs = _runs({w: "3e-3" for w in WIDTHS})
    for run in runs:  # the largest rate diverged at width 128
        if (
            run["overrides"]["optim.lr"] == "3e-2"
            and run["overrides"]["model.hidden_size"] == "128"
        ):
            run.update(status="failed", best_val_loss=None)
    (panel,) = _panel(runs).panels
    widest = panel.curves[-1]
    assert [p.lr for p in widest.measured] == [1e-3, 3e-3, 1e-2]
    assert widest.points[-1].failed == 3 and widest.best.lr == 3e-3


@pytest.mark.parametrize(
    "keys",
    [
        {"model.hidden_size": "32"},  # a width alone
        {"optim.lr": "1e-3"},  # a learning rate alone
        {"model.num_heads": "2"},
    ],
)
def test_a_sweep_without_widths_and_learning_rates_has_no_transfer(keys: dict) -> None:
    key = next(iter(keys))
    runs = [
        {
            "run": str(i),
            "status": "completed",
            "best_val_loss": 3.0 + i,
            "overrides": {key: str(v), "seed": "0"},
        }
        for i, v in enumerate((1, 2, 4))
    ]
    assert transfer_of(group_runs(runs, [key]), [key]) is None


def test_the_sweep_summary_has_a_panel_per_parametrization_and_the_figure(tmp_path: Path) -> None:
    runs = _runs({w: "3e-3" for w in WIDTHS}, extra={"model.parametrization": "mup"})
    runs += _runs(
        {"32": "1e-2", "64": "3e-3", "128": "1e-3"}, extra={"model.parametrization": "standard"}
    )
    for number, run in enumerate(runs):
        write_record(tmp_path / str(number), {k: v for k, v in run.items() if k != "run"})
    report = build_report(tmp_path)
    written = write_summary_files(report)
    assert tmp_path / "transfer.png" in written
    assert (tmp_path / "transfer.png").stat().st_size > 10_000
    summary = (tmp_path / "summary.md").read_text()
    section = summary[summary.index("## Learning-rate transfer") : summary.index("## Runs")]
    mup = section[section.index("### model.parametrization=mup") :]
    standard = section[section.index("### model.parametrization=standard") :]
    assert mup.index("no move.") < mup.index("| width |")
    assert "it moved by more than one grid step." in standard
    rows = re.findall(r"^\| (\d+) \| (\S+) \| (\S+ ± \S+) \| 3 \| (\S+) \| 0 \|$", mup, re.M)
    assert [(w, lr, span) for w, lr, _, span in rows[:3]] == [
        ("32", "0.003", "0.003"),
        ("64", "0.003", "0.003"),
        ("128", "0.003", "0.003"),
    ]
    assert rows[0][2] == "3.0000 ± 0.0100"
    titles = [figure.title for figure in report.figures]
    assert "learning-rate transfer: loss against optim.lr, a curve per width" in titles


def test_a_plain_sweep_gets_no_transfer_section(tmp_path: Path) -> None:
    for number, lr in enumerate(LRS):
        write_record(
            tmp_path / str(number),
            {"status": "completed", "best_val_loss": 3.0, "overrides": {"optim.lr": lr}},
        )
    report = build_report(tmp_path)
    write_summary_files(report)
    assert "Learning-rate transfer" not in (tmp_path / "summary.md").read_text()
    assert not (tmp_path / "transfer.png").exists()
