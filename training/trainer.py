"""The Lightning ``Trainer`` and logger of a job, built from ``Settings``."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import (
    EarlyStopping,
    LearningRateMonitor,
    ModelCheckpoint,
    TQDMProgressBar,
)
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger

from common.library_private import drop_wandb_init_argument
from conf.features import training_callbacks
from conf.schema import Settings
from training.callbacks import AtomicCheckpointIO, SaveOnInterrupt
from training.curves import CurvesLogger

# One copy of Lightning's messages (Hydra's root handler would repeat them), no ads.
logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
    lambda record: "litlogger" not in record.getMessage()
)
logging.getLogger("lightning.pytorch").propagate = False


def training_trainer(
    settings: Settings, out_dir: Path, callbacks: Sequence[L.Callback] = ()
) -> L.Trainer:
    """The Trainer of ``mode=train``: checkpoints (best and last), the save-on-signal guard,
    atomic checkpoint writes, the logger and the run's curves; ``callbacks`` are added to
    these."""
    checkpointing = ModelCheckpoint(
        dirpath=out_dir / "checkpoints",
        filename="best",
        monitor="val/loss",
        mode="min",
        save_top_k=1,
        save_last=True,
        auto_insert_metric_name=False,
        # Fixed names: a job resumed in its own directory (a sweep re-run) overwrites the
        # interruption's last.ckpt instead of writing last-v1.ckpt beside it.
        enable_version_counter=False,
    )
    logger = build_logger(settings, out_dir)
    curves = CurvesLogger(out_dir)
    all_callbacks = [
        checkpointing,
        SaveOnInterrupt(out_dir / "checkpoints" / "last.ckpt"),
        curves,
        LearningRateMonitor(logging_interval="step"),
        *callbacks,
        *training_callbacks(settings),  # the features'
    ]
    target = settings.trainer.stop_at_loss
    if target is not None:  # stops below the target only: the patience never runs out
        all_callbacks.append(
            EarlyStopping(
                "val/loss",
                mode="min",
                stopping_threshold=target,
                patience=sys.maxsize,
                check_on_train_epoch_end=False,
            )
        )
    if settings.trainer.enable_progress_bar:
        # Redrawing the bar every step costs more than a small CPU step's logging.
        all_callbacks.append(TQDMProgressBar(refresh_rate=settings.trainer.log_every_n_steps))
    kwargs = settings.trainer.trainer_kwargs()
    kwargs["devices"] = _devices_of_this_job(settings)
    if kwargs["strategy"] == "ddp" and settings.sweep_dir is not None:
        # The ddp launcher re-runs this script with its command line, which under multirun
        # would re-run the whole sweep in every child; spawned workers run just this job.
        kwargs["strategy"] = "ddp_spawn"
    return L.Trainer(
        **kwargs,
        default_root_dir=out_dir,
        logger=[logger, curves] if logger else [curves],  # the chosen one first: trainer.logger
        callbacks=all_callbacks,
        plugins=[AtomicCheckpointIO()],
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )


def _devices_of_this_job(settings: Settings) -> Any:
    """``trainer.devices``; in a parallel sweep on several GPUs, one-GPU job k takes GPU k mod
    (number of GPUs), so the jobs spread over them."""
    devices = settings.trainer.devices
    gpus = torch.cuda.device_count()
    on_gpu = settings.trainer.accelerator in ("gpu", "cuda", "auto") and gpus > 1
    if settings.parallel_jobs > 1 and on_gpu and devices == 1:
        return [settings.job_num % gpus]
    return devices


def evaluation_trainer(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> L.Trainer:
    """One device, no logger, no checkpoints: ``Trainer.validate``/``test`` for ``mode=eval``;
    ``trainer.deterministic`` as in training (torch's deterministic algorithms on a GPU)."""
    return L.Trainer(
        callbacks=list(callbacks),
        accelerator=settings.trainer.accelerator,
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        precision=settings.trainer.precision,
        deterministic=settings.trainer.deterministic,
    )


def build_logger(settings: Settings, out_dir: Path) -> Logger | None:
    cfg = settings.logger
    if cfg.kind == "none":
        return None
    name = settings.run_name()
    if cfg.kind == "csv":
        return CSVLogger(save_dir=out_dir, name="", version="csv")
    if cfg.kind == "tensorboard":
        # RUN_DIR/tensorboard/NAME: `tensorboard --logdir SWEEP_DIR` lists every job by name.
        return TensorBoardLogger(
            save_dir=out_dir,
            name="tensorboard",
            version=_directory_name(name or "run"),
            default_hp_metric=False,
        )
    group = cfg.group or (settings.sweep_dir.name if settings.sweep_dir else None)
    # WANDB_MODE in the environment wins over logger.mode; both default to offline.
    mode = os.environ.get("WANDB_MODE", cfg.mode)
    if mode == "online" and not _wandb_logged_in():
        raise ValueError(
            "logger.mode=online needs a Weights & Biases account: run `wandb login` or set "
            "WANDB_API_KEY, or keep the default logger.mode=offline and `wandb sync` later"
        )
    logger = WandbLogger(
        project=cfg.project,
        entity=cfg.entity,
        group=group,
        save_dir=str(out_dir),
        name=name,
        mode=mode,
        config={"settings": settings.plain(), "overrides": settings.overrides},
    )
    # Lightning always passes wandb.init `anonymous`, deprecated with a warning on every run;
    # left out, wandb's default is the same.
    drop_wandb_init_argument(logger, "anonymous")
    return logger


def _directory_name(name: str, limit: int = 200) -> str:
    """``name`` as one directory name: "/" replaced, a long one cut, with a digest of the whole,
    within the 255-byte limit of common filesystems."""
    name = name.replace("/", "_")
    if len(name.encode()) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name.encode()[: limit - 9].decode(errors='ignore')}-{digest}"


def _wandb_logged_in() -> bool:
    import wandb

    return bool(os.environ.get("WANDB_API_KEY") or wandb.api.api_key)


def finish_logger(trainer: L.Trainer) -> None:
    if isinstance(trainer.logger, WandbLogger):
        import wandb

        # One wandb run per job: a multirun must not append its next job to this run.
        wandb.finish()
