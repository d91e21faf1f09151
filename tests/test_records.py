"""The reproducibility tests' comparison (tests/records.py) leaves out only time and the run's
folder, and finds every other difference: a helper that dropped too much would let them pass on
runs that differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.records import assert_reproduced, differences, numbers_in, without_times_and_paths

ROOT = Path("/scratch/first")


def record(**changed: object) -> dict:
    """A run's record as metrics.json holds it, with ``changed`` fields."""
    return {
        "best_val_loss": 4.25,
        "val_acc": 0.125,
        "tokens_per_sec": 1000.0,
        "started_at": 1.0,
        "consumed": {"steps": 30, "tokens": 7680, "seconds": 0.5},
        "val_curve": [[15, 4.5, 3840, 0.25], [30, 4.25, 7680, 0.5]],
        "best_ckpt": f"{ROOT}/run/checkpoints/best.ckpt",
        "sample": "The end",
        "finished": True,
        **changed,
    }


def test_time_is_left_out_and_the_folder_named() -> None:
    kept = without_times_and_paths(record(), ROOT)
    assert kept == {
        "best_val_loss": 4.25,
        "val_acc": 0.125,
        "consumed": {"steps": 30, "tokens": 7680},
        "val_curve": [[15, 4.5, 3840], [30, 4.25, 7680]],
        "best_ckpt": "<root>/run/checkpoints/best.ckpt",
        "sample": "The end",
        "finished": True,
    }
    assert numbers_in(kept) == 10  # True is not a number


def test_a_curves_line_keeps_its_loss_and_loses_its_speed() -> None:
    line = {"step": 5, "train/loss": 5.5, "train/tokens_per_sec": 467.2}
    assert without_times_and_paths(line, ROOT) == {"step": 5, "train/loss": 5.5}


def test_two_runs_that_differ_only_in_time_and_folder_agree() -> None:
    other = Path("/scratch/second")
    second = record(
        tokens_per_sec=2000.0,
        started_at=7.0,
        consumed={"steps": 30, "tokens": 7680, "seconds": 0.75},
        val_curve=[[15, 4.5, 3840, 0.5], [30, 4.25, 7680, 1.0]],
        best_ckpt=f"{other}/run/checkpoints/best.ckpt",
    )
    assert_reproduced([record()], [second], ROOT, other)


@pytest.mark.parametrize(
    ("changed", "found"),
    [
        ({"best_val_loss": 4.250000000000001}, ".best_val_loss: 4.25 != 4.250000000000001"),
        ({"val_curve": [[15, 4.5, 3840, 0.25], [30, 4.0, 7680, 0.5]]}, ".val_curve[1][1]"),
        ({"consumed": {"steps": 30, "tokens": 7681}}, ".consumed.tokens: 7680 != 7681"),
        ({"sample": "The End"}, ".sample: 'The end' != 'The End'"),
        ({"finished": 1}, ".finished: True != 1"),
        ({"best_ckpt": "/elsewhere/best.ckpt"}, ".best_ckpt"),
        ({"val_ppl": 70.0}, ".val_ppl: only in the second"),
    ],
)
def test_any_other_difference_is_found_and_named(changed: dict, found: str) -> None:
    first, second = (without_times_and_paths(r, ROOT) for r in (record(), record(**changed)))
    (difference,) = differences(first, second)
    assert difference.startswith(found)
    with pytest.raises(AssertionError, match="the two runs differ"):
        assert_reproduced(record(), record(**changed), ROOT, ROOT)
