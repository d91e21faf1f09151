"""``mode=coordcheck``: μP's coordinate check of the run's model (``coordcheck.py``) at
``coordcheck.widths`` under each of ``coordcheck.parametrizations``; in the run directory
``coordcheck.json`` (the means), ``coordcheck.md`` (the verdicts and ratio tables),
``coordcheck.png`` (mup's figure) and the run record that lists the directory in reports.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from analysis.records import warn
from analysis.run_record import Status, run_record, write_record
from common.files import write_text_atomically
from common.provenance import provenance
from conf.schema import Settings
from features.mup.config import CoordCheckConfig
from features.mup.coordcheck import coordinate_data
from features.mup.plots import plot_coord_check
from features.mup.verdict import judge, markdown, sentence
from modes.report import refresh
from training.precision import native_precision

RESULTS_FILE = "coordcheck.json"
FIGURE_FILE = "coordcheck.png"
TABLE_FILE = "coordcheck.md"


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    started_at = time.time()
    settings = native_precision(settings)
    check: CoordCheckConfig = settings.group("coordcheck")
    check_settings(settings)
    out_dir = Path(settings.job.output_dir)
    warmup_note(settings, check.steps)
    seeds = [settings.job.seed + i for i in range(check.seeds)]
    data = coordinate_data(
        settings, check.widths, check.steps, seeds, check.parametrizations, callbacks
    )
    data["settings"] = {
        "model": settings.model.to_dict(),
        "optim": settings.plain()["optim"],
        "precision": settings.trainer.precision,
    }
    judged = judge(data)
    data["ratios"] = {
        j.parametrization: {
            layer: [r if math.isfinite(r) else None for r in values]  # inf: null in JSON
            for layer, values in j.ratios.items()
        }
        for j in judged
    }
    data["verdicts"] = {j.parametrization: sentence(j, data["widths"]) for j in judged}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out_dir / RESULTS_FILE, json.dumps(data, indent=1) + "\n")
    write_text_atomically(out_dir / TABLE_FILE, markdown(data, judged))
    plot_coord_check(data, out_dir / FIGURE_FILE, title=figure_title(settings))
    record = run_record(
        Status.COMPLETED,
        mode="coordcheck",
        arch=settings.model.arch,
        seed=settings.job.seed,
        started_at=started_at,
        finished_at=time.time(),
        overrides=settings.overrides,
        config={f"model.{k}": v for k, v in settings.model.to_dict().items()},
        settings=settings.plain(),
        provenance=provenance(settings.trainer.precision, settings.trainer.accelerator),
    )
    write_record(out_dir, record)
    for line in data["verdicts"].values():
        print(f"tinylm: {line}")
    files = ", ".join(str(out_dir / f) for f in (RESULTS_FILE, TABLE_FILE, FIGURE_FILE))
    print(f"tinylm: wrote {files}")
    refresh(out_dir)
    return {"coordcheck": str(out_dir / RESULTS_FILE), "verdicts": data["verdicts"]}


def check_settings(settings: Settings) -> None:
    """What the check cannot honour is refused in one line before anything trains."""
    budget = settings.trainer.budget.chosen()
    if budget:
        raise ValueError(
            f"trainer.budget.{budget[0]} decides a run's length; mode=coordcheck trains "
            "coordcheck.steps steps at each width: drop trainer.budget."
            f"{budget[0]} (the schedule is trainer.max_steps')"
        )
    if settings.job.ckpt_path:
        raise ValueError(
            "mode=coordcheck trains fresh networks at each width and reads no checkpoint: "
            "drop ckpt_path"
        )
    if settings.data.streaming:
        raise ValueError(
            "mode=coordcheck reads the token store, not a stream: drop data.streaming=true"
        )


def warmup_note(settings: Settings, steps: int) -> None:
    """Said when the check's steps lie inside the warmup: their updates are small."""
    warmup = settings.optim.warmup_steps
    if warmup >= steps:
        warn(
            f"the {steps} checked steps lie inside the warmup (optim.warmup_steps={warmup}): "
            f"their learning rate is at most {steps}/{warmup + 1} of optim.lr, as in training; "
            "give optim.warmup_steps=0 to check the full rate"
        )


def figure_title(settings: Settings) -> str:
    model, optim = settings.model, settings.optim
    rates = f"lr {optim.lr:g}" + (f", muon_lr {optim.muon_lr:g}" if optim.kind == "muon" else "")
    return (
        f"coordinate check: {model.arch}, layers {model.num_layers}, heads {model.num_heads}, "
        f"mup_base_width {model.mup_base_width}, optim={optim.kind} ({rates})"
    )
