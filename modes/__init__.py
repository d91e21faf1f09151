"""The commands of ``python train.py mode=NAME``: one module per mode, one registry.

Each module in ``MODES`` has ``run(settings, callbacks=()) -> dict`` returning the job's
results. ``find`` is what checks ``mode=``, so adding a mode is one module and one line here.
Modules are imported on demand: ``mode=generate`` never pays for what training imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

MODES = {
    "train": "modes.train",
    "eval": "modes.eval",
    "generate": "modes.generate",
    "attention": "modes.attention",
    "export": "modes.export",
    "heads": "modes.heads",
    "finetune": "modes.finetune",
    "report": "modes.report",
}


def find(mode: str) -> Callable[..., dict[str, Any]]:
    """The ``run`` function of ``mode``, or a ValueError that lists the modes."""
    if mode not in MODES:
        raise ValueError(f"mode={mode} is unknown; choose one of {', '.join(MODES)}")
    return importlib.import_module(MODES[mode]).run


class Interrupted(Exception):
    """Training stopped on SIGINT/SIGTERM; ``exit_code`` is the shell's 128 + signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class SweepConflict(Exception):
    """A sweep re-run in a directory whose job ran other settings: the sweep stops rather than
    report old results under new values or overwrite them."""
