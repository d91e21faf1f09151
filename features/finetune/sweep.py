"""``mode=finetune ckpt_path=SWEEP_DIR``: every completed job of a pretraining sweep fine-tuned
with its own seed, then its configurations compared on the task as the sweep summary groups
them, beside their pretraining loss (README.md, "Over a pretraining sweep")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L

from analysis.records import format_value, markdown_table
from analysis.run_record import Status, collect_runs, has_record, read_run, record_path
from analysis.summary import (
    REPLICATE_KEY,
    configuration_rows,
    configuration_table,
    group_runs,
    swept_keys,
)
from common.files import write_text_atomically
from conf.schema import Settings
from features.finetune.one_checkpoint import finetune_checkpoint, protocol_record
from features.finetune.suite import finetune_suite
from modes.inference import checkpoints_to_evaluate
from modes.report import refresh

PRETRAINING_LOSS = "pretraining_val_loss"  # a job's best validation loss in pretraining


def finetune_sweep(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    """Fine-tune every completed job of the sweep ``job.ckpt_path``; the runs and their table."""
    sweep = Path(settings.job.ckpt_path)
    jobs = completed_jobs(sweep)
    pretrained_runs = collect_runs(sweep)
    _check_seed(sweep, pretrained_runs, settings)
    out_dir = Path(settings.job.output_dir)
    runs = []
    for job in pretrained_runs:
        best = jobs.get(job["run"])
        pretraining = {"run": job["run"], "overrides": job.get("overrides", {})}
        if best is None:  # not fine-tuned: a failed job of its configuration
            runs.append({**pretraining, "status": Status.FAILED})
            continue
        seed = int(job.get("overrides", {}).get(REPLICATE_KEY, settings.job.seed))
        job_settings = replace(
            settings,
            job=replace(
                settings.job, ckpt_path=str(best), output_dir=str(out_dir / job["run"]), seed=seed
            ),
        )
        tuned = _finished(job_settings, best) or finetune_one(job_settings, best, callbacks)
        runs.append({**tuned, **pretraining, PRETRAINING_LOSS: job.get("best_val_loss")})
    table, written = write_finetune_summary(sweep, runs, settings)
    print(f"\n{table}\nwrote {written}")
    refresh(sweep)
    return {"runs": runs, "configurations": table, "summary": str(written)}


def _check_seed(sweep: Path, runs: Sequence[dict[str, Any]], settings: Settings) -> None:
    """A sweep over seeds fine-tunes each job with its own seed: a ``seed=`` given as well
    would be ignored, so it is refused."""
    if REPLICATE_KEY in settings.overrides and any(
        REPLICATE_KEY in run.get("overrides", {}) for run in runs
    ):
        raise ValueError(
            f"seed={settings.job.seed}: the sweep {sweep} swept seed, and each of its jobs is "
            "fine-tuned with its own pretraining seed (so scratch and pretrained arms vary "
            "alike); drop seed= from the command"
        )


def _finished(settings: Settings, pretrained: Path) -> dict[str, Any] | None:
    """The metrics of a fine-tune of ``pretrained`` completed in the job's output directory
    with these settings and seed (an interrupted sweep goes on where it stopped), or None."""
    out = Path(settings.job.output_dir)
    if not has_record(out):
        return None
    done = read_run(out, "it is fine-tuned again")
    same = (
        done.get("status") == Status.COMPLETED
        and done.get("seed") == settings.job.seed
        and done.get("pretrained") == str(pretrained.resolve())
        and done.get("config") == protocol_record(settings.group("finetune"))
    )
    if same:
        print(f"tinylm: {out} holds this fine-tune, completed: read, not run again")
    return done if same else None


def finetune_one(
    settings: Settings, ckpt: Path, callbacks: Sequence[L.Callback] = ()
) -> dict[str, Any]:
    """One pretrained checkpoint fine-tuned on the task, or on every task of a suite."""
    if settings.group("finetune").suite() is not None:
        return finetune_suite(settings, ckpt, callbacks)
    return finetune_checkpoint(settings, ckpt, callbacks)


def completed_jobs(sweep: Path) -> dict[str, Path]:
    """Job name -> best checkpoint, for the jobs of ``sweep`` whose record says completed."""
    found = checkpoints_to_evaluate(sweep)
    statuses = {job["run"]: job.get("status") for job in collect_runs(sweep)}
    jobs = {
        c.parents[1].name: c for c in found if statuses.get(c.parents[1].name) == Status.COMPLETED
    }
    if not jobs:
        counted = ", ".join(f"{name}: {status}" for name, status in statuses.items())
        raise ValueError(
            f"no job of the sweep {sweep} has completed ({counted or f'no {record_path().name}'}); "
            "fine-tuning needs each job's finished checkpoint: resume the sweep (run its "
            "command again) or pass one checkpoint as ckpt_path"
        )
    return jobs


def write_finetune_summary(
    sweep: Path, runs: Sequence[dict[str, Any]], settings: Settings
) -> tuple[str, Path]:
    """The configurations table of the fine-tuned jobs, and the markdown file it is written to
    in ``sweep``."""
    ft = settings.group("finetune")
    metric = next(r["metric"] for r in runs if r.get("status") == Status.COMPLETED)
    scored = f"test_{metric}"
    keys = [k for k in swept_keys(runs) if k != REPLICATE_KEY]
    configs = group_runs(runs, keys, metric=scored, higher_is_better=True)
    completed = next(r for r in runs if r.get("status") == Status.COMPLETED)
    if "runs" in completed:  # a suite: each task's metric beside the average
        extra = tuple(k for k in completed if k.startswith("test_") and k != scored)
    else:
        extra = ("test_accuracy",) if metric in ("f1", "mcc") else ()
    means = (*extra, PRETRAINING_LOSS)
    table = configuration_table(configs, configuration_rows(configs, means), means)
    run_columns = ["run", *keys, scored, PRETRAINING_LOSS, "status", "best_ckpt"]
    run_rows = [
        {c: format_value(r.get("overrides", {}).get(c, r.get(c))) for c in run_columns}
        for r in runs
    ]
    text = (
        f"# Fine-tuning the sweep {sweep}\n\n"
        f"Task {ft.task}, finetune.init={ft.init}, seed {settings.job.seed}: "
        "each completed job's best checkpoint fine-tuned with the same protocol (its run "
        f"directory under {settings.job.output_dir}). {scored} is the mean ± sample standard "
        "deviation over a pretraining configuration's jobs (their pretraining seeds are the "
        "replicates); vs_best is its difference from the best configuration (the highest), "
        '"> 2 SE" when that exceeds two standard errors of the difference; p_welch and holm '
        f"as in the sweep's summary.md. {PRETRAINING_LOSS} is the jobs' mean best validation "
        "loss in pretraining.\n\n## Configurations\n\n"
        + table
        + "\n## Jobs\n\n"
        + markdown_table(run_columns, run_rows)
    )
    path = sweep / f"finetune_summary_{ft.task}_{ft.init}.md"
    return table, write_text_atomically(path, text)
