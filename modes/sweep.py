"""Sweeps (``python train.py -m ...``): the Hydra callback that summarises them at the end.

How a job re-run in an existing sweep directory skips or resumes is the train mode's
(``modes/train.py``). This module stays free of heavy imports: Hydra builds the callback at
every start, single runs included.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from conf.hydra_runtime import parallel_jobs


class SweepSummary(Callback):
    """At the end of a multirun: summary.csv, summary.md and the heatmap at the sweep root."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_launcher(config.hydra.launcher)
        except ValueError as err:  # before any job starts: one line, no traceback
            print(f"tinylm: error: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        sweep_dir = config.hydra.sweep.dir
        print(
            f"tinylm: sweep directory {sweep_dir}; if the sweep is interrupted, re-run the "
            f"same command with hydra.sweep.dir={sweep_dir}: finished runs are skipped, "
            "unfinished ones resume from their last checkpoint"
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from modes.sweep_summary import write_sweep_summary  # matplotlib: when a sweep ends

        target = config.get("summary", {}).get("target_loss")
        for path in write_sweep_summary(Path(config.hydra.sweep.dir), target_loss=target):
            print(f"tinylm: wrote {path}")


def check_launcher(launcher: DictConfig) -> None:
    """What a launcher needs, checked before it starts any job: a positive number of parallel
    jobs (joblib), ``sbatch`` on this machine (SLURM)."""
    parallel_jobs(launcher)
    if str(launcher.get("_target_", "")).endswith("SlurmLauncher") and not shutil.which("sbatch"):
        raise ValueError(
            "hydra/launcher=slurm submits jobs with sbatch, which is not on this machine: run "
            "the sweep on the cluster's login node, or here with hydra/launcher=submitit_local "
            "or hydra/launcher=joblib"
        )
