"""Fitting under tinylm's interrupt policy, for every mode that trains (train, finetune)."""

from __future__ import annotations

import signal
from pathlib import Path

import lightning as L

from analysis.run_record import Status, run_record, write_record
from common.provenance import provenance
from conf.schema import Settings
from modes import Interrupted
from training.callbacks import SaveOnInterrupt


def fit(
    trainer: L.Trainer,
    task: L.LightningModule,
    datamodule: L.LightningDataModule,
    resume: str | None,
    settings: Settings,
) -> None:
    """``trainer.fit``; on SIGINT/SIGTERM a resumable checkpoint is saved, the run recorded as
    interrupted and ``Interrupted`` raised (one line for the user, exit code 130/143)."""
    out_dir = Path(settings.job.output_dir)
    mode = "" if settings.job.mode == "train" else f"mode={settings.job.mode} "
    guard = next(c for c in trainer.callbacks if isinstance(c, SaveOnInterrupt))
    try:
        trainer.fit(task, datamodule=datamodule, ckpt_path=resume, weights_only=True)
    except (SystemExit, KeyboardInterrupt) as err:
        # Lightning ends an interrupted fit with SystemExit: SIGTERMException after a
        # signal, sys.exit(1) after a KeyboardInterrupt (our second Ctrl-C).
        signum = guard.signal or signal.SIGINT
        name = signal.Signals(signum).name
        if guard.saved is None:
            raise Interrupted(
                f"training interrupted by {name} (twice) and stopped at once, without saving; "
                f"the last regular checkpoint is in {out_dir / 'checkpoints'}",
                signum,
            ) from err
        if trainer.is_global_zero:
            status = run_record(
                Status.INTERRUPTED,
                step=guard.step,
                resume_ckpt=str(guard.saved),
                overrides=settings.overrides,
                provenance=provenance(
                    settings.trainer.precision,
                    settings.trainer.accelerator,
                    compiled=settings.trainer.compile and settings.job.mode == "train",
                ),
            )
            write_record(out_dir, status)
        raise Interrupted(
            f"training interrupted by {name} at step {guard.step}; saved {guard.saved}. "
            f"Resume with: python train.py {mode}ckpt_path={guard.saved} (plus the same settings)",
            signum,
        ) from err
