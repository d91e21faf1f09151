"""Sweeps (``python train.py -m ...``): the Hydra callback that summarises them at the end.

How a job re-run in an existing sweep directory skips or resumes is the train mode's
(``modes/train.py``). This module stays free of heavy imports: Hydra builds the callback at
every start, single runs included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepSummary(Callback):
    """At the end of a multirun: summary.csv, summary.md and the heatmap at the sweep root."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = config.hydra.sweep.dir
        print(
            f"tinylm: sweep directory {sweep_dir}; if the sweep is interrupted, re-run the "
            f"same command with hydra.sweep.dir={sweep_dir}: finished runs are skipped, "
            "unfinished ones resume from their last checkpoint"
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from modes.report import write_sweep_summary  # matplotlib: only when a sweep ends

        for path in write_sweep_summary(Path(config.hydra.sweep.dir)):
            print(f"tinylm: wrote {path}")
