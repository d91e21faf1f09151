"""The runs of a sweep as a scaling law's points, and the ``scaling`` settings they recorded
(``features/scaling/report.py`` fits them, ``features/scaling/figures.py`` draws them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.records import warn
from analysis.run_record import Status
from features.scaling.config import PARAMETER_FIELDS, ScalingConfig
from models.config import from_mapping

BUDGET_KEYS = ("flops", "tokens", "seconds")


@dataclass
class Point:
    """A completed run as the fit sees it."""

    run: str
    n: float
    n_other: float | None  # N by the other convention
    d: float
    loss: float
    compute: tuple[Any, ...]  # the settings that decide its length: budget and max_steps
    budget: float | None  # its trainer.budget.flops, the IsoFLOP budget
    flops_per_token: float | None


def scaling_settings(runs: list[dict[str, Any]]) -> ScalingConfig:
    """The ``scaling`` group the runs recorded (the defaults when none did); runs that differ
    are named in a warning and the first one's settings kept."""
    recorded = [
        run["settings"]["scaling"]
        for run in runs
        if isinstance(run.get("settings"), dict)
        and isinstance(run["settings"].get("scaling"), dict)
    ]
    if not recorded:
        return ScalingConfig()
    if any(r != recorded[0] for r in recorded[1:]):
        warn("the runs recorded different scaling settings; the report fits with the first run's")
    return from_mapping(ScalingConfig, dict(recorded[0]), "scaling.")


def scaling_points(runs: list[dict[str, Any]], config: ScalingConfig) -> list[Point]:
    """Every completed pretraining run with a final validation loss, a parameter count and
    consumed tokens, as a point: seed replicates stay separate points (the bootstrap resamples
    them; their spread is the noise the intervals carry)."""
    field = PARAMETER_FIELDS[config.parameters]
    (other,) = set(PARAMETER_FIELDS.values()) - {field}
    points = []
    for run in runs:
        consumed = run.get("consumed") or {}
        n, d, loss = run.get(field), consumed.get("tokens"), run.get("val_loss")
        usable = all(isinstance(v, int | float) and v > 0 for v in (n, d, loss))
        if run.get("status") != Status.COMPLETED or run.get("mode") or not usable:
            continue
        trainer = (run.get("settings") or {}).get("trainer") or {}
        budget = trainer.get("budget") or {}
        compute = (*(budget.get(k) for k in BUDGET_KEYS), trainer.get("max_steps"))
        flops_budget = budget.get("flops")
        points.append(
            Point(
                run=run["run"],
                n=float(n),
                n_other=run.get(other),
                d=float(d),
                loss=float(loss),
                compute=compute,
                budget=float(flops_budget) if isinstance(flops_budget, int | float) else None,
                flops_per_token=run.get("flops_per_token"),
            )
        )
    return points
