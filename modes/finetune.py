"""``mode=finetune ckpt_path=PRETRAINED``: a classifier on a pretrained network, judged on a task.

The pretrained checkpoint gives the architecture, the weights (``finetune.init=pretrained``;
``scratch``: the same architecture from random weights, seeded by ``seed``) and the
tokenizer; ``data.labelled`` gives the task's splits. The classifier trains through the
same Lightning layer as pretraining (checkpoints, save-on-signal, loggers), validated after
every epoch; the checkpoint of the best validation loss is scored on the test split. The
run directory gets ``metrics.json`` (every metric, the per-class counts) and the
pretrained checkpoint's ``eval.jsonl`` gets one record, so that a checkpoint's evaluations
accumulate in one place. A fine-tuned ``last.ckpt`` as ``ckpt_path`` resumes an
interrupted fine-tune. A run directory as ``ckpt_path`` means its ``checkpoints/best.ckpt``; a
sweep directory, every completed job's (``modes/finetune_sweep.py``). One checkpoint's
fine-tune is ``modes/finetune_checkpoint.py``; a suite of tasks (``finetune.task=glue``, or
``files`` with a mapping of tasks to folders) is ``modes/finetune_suite.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from conf.schema import Settings
from modes.finetune_sweep import finetune_one, finetune_sweep


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    ckpt = Path(settings.job.ckpt_path)
    if ckpt.is_dir():  # a run directory: its best checkpoint; a sweep directory: every job's
        own = ckpt / "checkpoints" / "best.ckpt"
        if not own.is_file():
            return finetune_sweep(settings, callbacks)
        ckpt = own
    return finetune_one(settings, ckpt, callbacks)
