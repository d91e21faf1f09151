"""How a record is compared with its re-run's: every number but times and paths, each judged
identical, within the tolerance or different; the provenance's differences named."""

from __future__ import annotations

import math

import pytest

from features.reproduce.compare import (
    Verdict,
    compare,
    provenance_differences,
    recorded_values,
    relative_difference,
)
from features.reproduce.config import GPU_TOLERANCE, ReproduceConfig, tolerance_for

RECORD = {
    "status": "completed",
    "arch": "decoder",
    "best_val_loss": 4.5,
    "tokens_per_sec": 1000.0,
    "train_seconds": 3.0,
    "seconds": {"data": 1.0, "training": 2.0},
    "consumed": {"steps": 10, "tokens": 640, "seconds": 2.5},
    "best_ckpt": "/runs/a/checkpoints/best.ckpt",
    "val_curve": [[5, 5.0, 320, 1.2], [10, 4.5, 640, 2.5]],
    "val_confusion": [[1, 2], [3, 4]],
    "overrides": {"model.num_heads": "2"},
    "threads": 2,
    "provenance": {"code": {"commit": "a" * 40, "dirty": False}, "versions": {"torch": "2.1"}},
    "sample": "The end",
}


def test_every_number_but_times_and_paths_is_compared() -> None:
    assert recorded_values(RECORD) == {
        "arch": "decoder",
        "best_val_loss": 4.5,
        "consumed.steps": 10,
        "consumed.tokens": 640,
        "val_curve@5.loss": 5.0,
        "val_curve@5.tokens": 320,
        "val_curve@10.loss": 4.5,
        "val_curve@10.tokens": 640,
        "val_confusion[0][0]": 1,
        "val_confusion[0][1]": 2,
        "val_confusion[1][0]": 3,
        "val_confusion[1][1]": 4,
        "sample": "The end",
    }


def verdicts(rerun: dict, tolerance: float = 0.0) -> dict[str, Verdict]:
    rows = compare(RECORD, rerun, tolerance)
    return {row.name: row.verdict for row in rows if row.verdict != Verdict.IDENTICAL}


def test_each_number_is_judged_against_the_tolerance() -> None:
    timing = {**RECORD, "tokens_per_sec": 9.0, "best_ckpt": "/elsewhere"}
    assert verdicts(timing) == {}
    nudged = {**RECORD, "best_val_loss": 4.5 * (1 + 1e-7)}
    assert verdicts(nudged) == {"best_val_loss": Verdict.DIFFERENT}
    assert verdicts(nudged, tolerance=1e-6) == {"best_val_loss": Verdict.WITHIN}
    moved = {**RECORD, "best_val_loss": 4.6, "sample": "The start"}
    assert verdicts(moved, tolerance=1e-3) == {
        "best_val_loss": Verdict.DIFFERENT,
        "sample": Verdict.DIFFERENT,
    }
    fewer = {**RECORD, "val_curve": RECORD["val_curve"][:1], "extra": 1}
    assert verdicts(fewer) == {
        "val_curve@10.loss": Verdict.MISSING,
        "val_curve@10.tokens": Verdict.MISSING,
        "extra": Verdict.MISSING,
    }
    diverged = {**RECORD, "best_val_loss": math.nan}
    assert verdicts(diverged, tolerance=0.5) == {"best_val_loss": Verdict.DIFFERENT}
    assert verdicts({**diverged}, 0.0) != {} and compare(diverged, diverged, 0.0)[2].verdict == (
        Verdict.IDENTICAL
    )


def test_relative_difference() -> None:
    assert relative_difference(2.0, 2.0) == 0.0
    assert relative_difference(2.0, 1.0) == 0.5
    assert relative_difference(-1.0, 1.0) == 2.0
    assert relative_difference(1.0, math.inf) == math.inf


def test_the_provenance_differences_are_named() -> None:
    other = {
        **RECORD,
        "threads": 4,
        "provenance": {
            "code": {"commit": "b" * 40, "dirty": True, "diff_hash": "feed"},
            "versions": {"torch": "2.2"},
            "device": "CPU: x",
        },
    }
    assert provenance_differences(RECORD, RECORD) == []
    # An older record's "unknown" library was one not installed, as a re-run now says.
    older = {**RECORD, "provenance": {**RECORD["provenance"], "versions": {"torch": "unknown"}}}
    newer = {
        **RECORD,
        "provenance": {**RECORD["provenance"], "versions": {"torch": "not installed"}},
    }
    assert provenance_differences(older, newer) == []
    assert provenance_differences(RECORD, other) == [
        ("code", "commit aaaaaaa", "commit bbbbbbb (dirty, diff feed)"),
        ("threads", "2", "4"),
        ("torch", "2.1", "2.2"),
        ("device", "not recorded", "CPU: x"),
    ]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tolerance": 1.0}, r"reproduce.tolerance=1.0 must be in \[0, 1\)"),
        ({"tolerance": -1e-9}, "must be in"),
        ({"jobs": ""}, "names no job"),
        ({"jobs": True}, "must name jobs"),
    ],
)
def test_bad_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReproduceConfig(**settings)


def test_jobs_are_directory_names() -> None:
    assert ReproduceConfig(jobs=[0, 3, 3]).jobs == ["0", "3"]
    assert ReproduceConfig(jobs="0, 3").jobs == ["0", "3"]
    assert ReproduceConfig(jobs=2).jobs == ["2"]


def test_its_settings_are_refused_by_other_modes() -> None:
    with pytest.raises(ValueError, match="reproduce.tolerance is for mode=reproduce"):
        ReproduceConfig(tolerance=0.1).check_mode("train")
    ReproduceConfig(tolerance=0.1).check_mode("reproduce")


def test_a_gpu_run_is_judged_with_the_gpu_tolerance_unless_one_is_given() -> None:
    on_gpu = {"provenance": {"device": "GPU: NVIDIA H100 80GB HBM3"}}
    on_cpu = {"provenance": {"device": "CPU: Intel(R) Xeon(R)"}}
    assert tolerance_for(ReproduceConfig(), on_cpu) == 0.0
    assert tolerance_for(ReproduceConfig(), {}) == 0.0
    assert tolerance_for(ReproduceConfig(), on_gpu) == GPU_TOLERANCE > 0
    assert tolerance_for(ReproduceConfig(tolerance=1e-3), on_gpu) == 1e-3
    assert tolerance_for(ReproduceConfig(tolerance=0.0), on_gpu) == 0.0
