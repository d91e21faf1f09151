"""``mode=finetune ckpt_path=PRETRAINED``: a checkpoint or run directory is one fine-tune (or
one suite of them), a sweep directory every completed job's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from conf.schema import Settings
from features.finetune.sweep import finetune_one, finetune_sweep


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    ckpt = Path(settings.job.ckpt_path)
    if ckpt.is_dir():  # a run directory: its best checkpoint; a sweep directory: every job's
        own = ckpt / "checkpoints" / "best.ckpt"
        if not own.is_file():
            return finetune_sweep(settings, callbacks)
        ckpt = own
    return finetune_one(settings, ckpt, callbacks)
