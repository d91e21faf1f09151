"""The Hydra callback that checks a sweep before its first job and summarises it at the end;
free of heavy imports, since Hydra builds it at every start, single runs included."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from conf.features import features, hook
from conf.hydra_runtime import parallel_jobs

if TYPE_CHECKING:  # the report's modules load matplotlib: only when a sweep ends
    from analysis.report import Report


class SweepSummary(Callback):
    """At the end of a multirun: summary.csv, summary.md and the figures at the sweep root."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = config.hydra.sweep.dir
        try:
            check_launcher(config.hydra.launcher)
            # A feature's sweeper (the Optuna search) checks its settings and says how it resumes.
            hints = [hook(f.sweep_start)(config) for f in features() if f.sweep_start]
        except ValueError as err:  # before any job starts: one line, no traceback
            print(f"tinylm: error: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        hint = next((h for h in hints if h), None) or (
            f"if the sweep is interrupted, re-run the same command with "
            f"hydra.sweep.dir={sweep_dir}: finished runs are skipped, unfinished ones "
            "resume from their last checkpoint"
        )
        print(f"tinylm: sweep directory {sweep_dir}; {hint}")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from modes.report import refresh  # matplotlib: when a sweep ends

        target = config.get("summary", {}).get("target_loss")
        report = write_summary(Path(config.hydra.sweep.dir), target_loss=target)
        refresh(Path(config.hydra.sweep.dir), target_loss=target, report=report)


def write_summary(sweep_dir: Path, target_loss: float | None = None) -> Report | None:
    """The sweep's summary files, each named on stdout; the report they render (None: no run)."""
    from analysis.report import build_report  # matplotlib: when a sweep ends
    from analysis.sweep_summary import write_summary_files

    report = build_report(sweep_dir, target_loss)
    for path in write_summary_files(report) if report else []:
        print(f"tinylm: wrote {path}")
    return report


def check_launcher(launcher: DictConfig) -> None:
    """Before any job: a positive number of parallel jobs (joblib), ``sbatch`` here (SLURM)."""
    parallel_jobs(launcher)
    if str(launcher.get("_target_", "")).endswith("SlurmLauncher") and not shutil.which("sbatch"):
        raise ValueError(
            "hydra/launcher=slurm submits jobs with sbatch, which is not on this machine: run "
            "the sweep on the cluster's login node, or here with hydra/launcher=submitit_local "
            "or hydra/launcher=joblib"
        )
