"""Lightning pieces that make training survive faults: signals, crashes mid-write, NaNs."""

from __future__ import annotations

import random
import signal
import threading
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from common.files import write_atomically
from common.library_private import mark_sigterm_received


def divergence_hint(optim_config: dict[str, Any]) -> str:
    """The likely causes of a divergence, with the run's learning rates."""
    rates = f"optim.lr={optim_config.get('lr')}"
    if optim_config.get("muon_lr") is not None:
        rates += f", optim.muon_lr={optim_config['muon_lr']}"
    return (
        f"Likely causes: a learning rate too high ({rates}; try 3x smaller, or a longer "
        "optim.warmup_steps), or fp16 overflow (use trainer.precision=bf16-mixed or 32-true). "
        "Nothing was saved after the divergence: the last checkpoint is intact."
    )


def rng_states() -> dict[str, Any]:
    """torch / numpy / Python RNG states as plain types (loadable with weights_only=True)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    numpy = states["numpy"]
    np.random.set_state(
        (
            numpy["kind"],
            numpy["keys"].numpy().astype(np.uint32),
            numpy["pos"],
            numpy["has_gauss"],
            numpy["cached_gaussian"],
        )
    )
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class AtomicCheckpointIO(TorchCheckpointIO):
    """A checkpoint written beside its path, then renamed over it, so that a crash mid-write
    leaves the previous one whole (Lightning's goes through a temp file in /tmp, a copy when
    that is another filesystem). Weights holding NaN/Inf are refused, so a diverged run never
    replaces a good checkpoint. The paths are local: the trainer's are ``Path``s."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        bad = [
            name
            for name, value in checkpoint.get("state_dict", {}).items()
            if torch.is_tensor(value)
            and value.is_floating_point()
            and not bool(torch.isfinite(value).all())
        ]
        if bad:
            optim_config = checkpoint.get("hyper_parameters", {}).get("optim_config", {})
            raise FloatingPointError(
                f"not saving {path}: weights {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''} "
                f"hold NaN/Inf at step {checkpoint.get('global_step')}. "
                f"{divergence_hint(optim_config)}"
            )
        write_atomically(path, lambda f: torch.save(checkpoint, f))


# SLURM's --signal (SIGUSR1 by convention) and submitit's pre-emption signal (SIGUSR2).
PREEMPTION_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


class SaveOnInterrupt(L.Callback):
    """SIGTERM, SIGINT, SIGUSR1 or SIGUSR2 stops training after the current step and saves a
    resumable checkpoint; a second Ctrl-C stops at once, without saving.

    Lightning's SIGTERM path does the stopping (``received_sigterm`` set, ``SIGTERMException``
    at the end of the step, then ``on_exception`` saves), with its handler replaced: under
    DDP the ranks must stop at the same step (saving holds a barrier), and Lightning's, which
    lets each rank stop at its own step and broadcasts from inside the handler, hung in a
    test. Under DDP ours only notes the signal, and the ranks agree after every step.

    After saving for a pre-emption signal, the handler ours replaced runs: under submitit or
    Lightning's SLURM environment, the one that requeues the job.
    """

    def __init__(self, save_path: str | Path) -> None:
        self.save_path = Path(save_path)
        self.signal: int | None = None
        self.saved: Path | None = None
        self.step: int | None = None
        self._trainer: L.Trainer | None = None
        self._previous: dict[int, Any] = {}  # the handlers ours replaced

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Lightning's teardown puts back the handlers it found.
        if threading.current_thread() is not threading.main_thread():
            return
        self._trainer = trainer
        for signum in (signal.SIGINT, signal.SIGTERM, *PREEMPTION_SIGNALS):
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and self.signal is not None:
            raise KeyboardInterrupt  # the second Ctrl-C: stop now
        first = self.signal is None
        self.signal = signum
        trainer = self._trainer
        if trainer is None:
            return
        launcher = trainer.strategy.launcher
        if signum == signal.SIGTERM and first and launcher is not None:
            launcher.kill(signum)  # as Lightning's handler does: the ranks this one launched
        if trainer.world_size == 1:
            mark_sigterm_received(trainer)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any
    ) -> None:
        if trainer.world_size > 1 and trainer.strategy.reduce_boolean_decision(
            self.signal is not None, all=False
        ):
            mark_sigterm_received(trainer)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        if not isinstance(exception, SIGTERMException):
            return  # a crash or a NaN: the last regular checkpoint stays as it is
        if self.signal is None:
            self.signal = signal.SIGTERM
        trainer.save_checkpoint(self.save_path)  # every rank: it holds a barrier
        self.saved = self.save_path
        self.step = trainer.global_step
        requeue = self._previous.get(self.signal)
        if self.signal in PREEMPTION_SIGNALS and callable(requeue):
            requeue(self.signal, None)
