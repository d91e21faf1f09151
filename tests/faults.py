"""Fault injectors for the reliability tests (not used by the application itself)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import lightning as L
from omegaconf import DictConfig


class SignalAtStep(L.Callback):
    """Send ``signum`` to this process once ``global_step`` reaches ``step``."""

    def __init__(self, step: int, signum: int = signal.SIGTERM) -> None:
        self.step = step
        self.signum = signum
        self.sent = False

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        if not self.sent and trainer.global_step >= self.step and trainer.is_global_zero:
            self.sent = True
            os.kill(os.getpid(), self.signum)


class NaNAtStep(L.Callback):
    """Make every weight NaN after the optimiser step that brings ``global_step`` to ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object
    ) -> None:
        if trainer.global_step == self.step:
            import torch

            with torch.no_grad():
                for p in pl_module.parameters():
                    p.fill_(float("nan"))


class SignalInSweepJob(SignalAtStep):
    """``SignalAtStep`` in one job of a multirun only (by Hydra's job number)."""

    def __init__(self, job_num: int, step: int, signum: int = signal.SIGTERM) -> None:
        super().__init__(step, signum)
        self.job_num = job_num

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.get().job.num == self.job_num:
            super().on_train_batch_end(trainer, *args)


class RecordFinalStep(L.Callback):
    """Append "RANK STEP" to ``path`` when this process's training ends, finished or stopped
    by an exception (an interruption included): one line per rank."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _record(self, trainer: L.Trainer) -> None:
        with open(self.path, "a") as f:
            f.write(f"{trainer.global_rank} {trainer.global_step}\n")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._record(trainer)


def main_with(*callbacks: L.Callback) -> None:
    """Run train.py's entry point as ``main`` does (Hydra, argv, the exit policy), with extra
    callbacks."""
    import hydra

    import train

    conf = Path(train.__file__).resolve().parent / "conf"

    @hydra.main(config_path=str(conf), config_name="config", version_base="1.3")
    def entry(cfg: DictConfig) -> float | None:
        return train.execute(cfg, callbacks)

    entry()


def count_tokenizer_training(path: str) -> None:
    """Append this process's rank to ``path`` each time a tokenizer is actually trained."""
    import data.tokenizer

    train_tokenizer = data.tokenizer.train_tokenizer

    def counted(*args, **kwargs):
        with open(path, "a") as f:
            f.write(f"{os.environ.get('LOCAL_RANK', '0')}\n")
        return train_tokenizer(*args, **kwargs)

    data.tokenizer.train_tokenizer = counted


class MeetOtherJobs(L.Callback):
    """At the start of training, mark this job present in ``directory`` and wait until
    ``jobs`` jobs are (or ``patience_s`` passes): jobs that really run side by side all get
    through at once, so their training overlaps however slowly each one started."""

    def __init__(self, directory: str, jobs: int, patience_s: float = 300.0) -> None:
        self.directory = Path(directory)
        self.jobs = jobs
        self.patience_s = patience_s

    def on_train_start(self, trainer: L.Trainer, *args: object) -> None:
        import time

        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / str(os.getpid())).touch()
        deadline = time.monotonic() + self.patience_s
        while len(list(self.directory.iterdir())) < self.jobs and time.monotonic() < deadline:
            time.sleep(0.05)


class RecordBatches(L.Callback):
    """Append each training batch of this rank to ``PATH.RANK`` as a JSON line: the step and
    its blocks (input_ids plus the last label: the max_seq_len + 1 tokens of a decoder block)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: dict, batch_idx: int
    ) -> None:
        import json

        import torch

        blocks = torch.cat([batch["input_ids"], batch["labels"][:, -1:]], dim=1)
        with open(f"{self.path}.{trainer.global_rank}", "a") as f:
            f.write(json.dumps({"step": trainer.global_step, "blocks": blocks.tolist()}) + "\n")
