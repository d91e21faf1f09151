"""The Lightning ``Trainer`` and logger of a job, built from ``Settings``.

Training gets checkpointing (best and last), the save-on-signal guard, atomic checkpoint IO,
a progress bar redrawn once per logging interval, and the configured logger; evaluation gets a
bare single-device Trainer. Lightning's own DDP/FSDP strategies carry the same configs across
GPUs and nodes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import lightning as L
from lightning.fabric.utilities.rank_zero import _get_rank
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger

from conf.schema import Settings
from training.callbacks import AtomicCheckpointIO, SaveOnInterrupt


def _quiet_lightning() -> None:
    """One copy of Lightning's messages (Hydra's root handler would repeat them), no ads."""
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    rank_zero.addFilter(lambda record: "litlogger" not in record.getMessage())
    logging.getLogger("lightning.pytorch").propagate = False


_quiet_lightning()


def global_rank() -> int:
    """This process's rank, known before the Trainer exists (DDP children, SLURM tasks)."""
    return _get_rank() or 0


def training_trainer(
    settings: Settings, out_dir: Path, callbacks: Sequence[L.Callback] = ()
) -> L.Trainer:
    """The Trainer of ``mode=train``; ``callbacks`` are added to tinylm's own (tests add fault
    injectors this way)."""
    checkpointing = ModelCheckpoint(
        dirpath=out_dir / "checkpoints",
        filename="best",
        monitor="val/loss",
        mode="min",
        save_top_k=1,
        save_last=True,
        auto_insert_metric_name=False,
    )
    logger = build_logger(settings, out_dir)
    all_callbacks = [
        checkpointing,
        SaveOnInterrupt(out_dir / "checkpoints" / "last.ckpt"),
        *callbacks,
    ]
    if settings.trainer.enable_progress_bar:
        # Redrawing the bar every step costs more than a small CPU step's logging.
        all_callbacks.append(TQDMProgressBar(refresh_rate=settings.trainer.log_every_n_steps))
    if logger:
        all_callbacks.append(LearningRateMonitor(logging_interval="step"))
    kwargs = settings.trainer.trainer_kwargs()
    if kwargs["strategy"] == "ddp" and settings.sweep_dir is not None:
        # The ddp launcher re-runs this script with its command line, which under multirun
        # would re-run the whole sweep in every child; spawned workers run just this job.
        kwargs["strategy"] = "ddp_spawn"
    return L.Trainer(
        **kwargs,
        default_root_dir=out_dir,
        logger=logger or False,
        callbacks=all_callbacks,
        plugins=[AtomicCheckpointIO()],
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )


def evaluation_trainer(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> L.Trainer:
    """One device, no logger, no checkpoints: ``Trainer.validate``/``test`` for ``mode=eval``."""
    return L.Trainer(
        callbacks=list(callbacks),
        accelerator=settings.trainer.accelerator,
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        precision=settings.trainer.precision,
    )


def build_logger(settings: Settings, out_dir: Path) -> Logger | None:
    cfg = settings.logger
    if cfg.kind == "none":
        return None
    if cfg.kind == "csv":
        return CSVLogger(save_dir=out_dir, name="", version="csv")
    group = cfg.group or (settings.sweep_dir.name if settings.sweep_dir else None)
    # WANDB_MODE in the environment wins over logger.mode; both default to offline.
    mode = os.environ.get("WANDB_MODE", cfg.mode)
    if mode == "online" and not _wandb_logged_in():
        raise ValueError(
            "logger.mode=online needs a Weights & Biases account: run `wandb login` or set "
            "WANDB_API_KEY, or keep the default logger.mode=offline and `wandb sync` later"
        )
    overrides = settings.overrides
    return WandbLogger(
        project=cfg.project,
        entity=cfg.entity,
        group=group,
        save_dir=str(out_dir),
        name=",".join(f"{k}={v}" for k, v in overrides.items()) or None,
        mode=mode,
        config={"settings": settings.plain(), "overrides": overrides},
    )


def _wandb_logged_in() -> bool:
    import wandb

    return bool(os.environ.get("WANDB_API_KEY") or wandb.api.api_key)


def finish_logger(trainer: L.Trainer) -> None:
    if isinstance(trainer.logger, WandbLogger):
        import wandb

        # One wandb run per job: a multirun must not append its next job to this run.
        wandb.finish()
