"""The commands of ``python train.py mode=NAME``, each a module with ``run(settings,
callbacks=()) -> dict``, imported on demand (``mode=generate`` pays nothing for training)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from conf.features import feature_modes

MODES = {
    "train": "modes.train",
    "eval": "modes.eval",
    "generate": "modes.generate",
    "export": "modes.export",
}


def find(mode: str) -> Callable[..., dict[str, Any]]:
    """The ``run`` function of ``mode``, or a ValueError that lists the modes."""
    modes = {**MODES, **feature_modes()}
    if mode not in modes:
        raise ValueError(f"mode={mode} is unknown; choose one of {', '.join(modes)}")
    return importlib.import_module(modes[mode]).run


class Interrupted(Exception):
    """Training stopped on SIGINT/SIGTERM; ``exit_code`` is the shell's 128 + signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class SweepConflict(Exception):
    """A sweep re-run in a directory whose job ran other settings: the sweep stops rather than
    report old results under new values or overwrite them."""
