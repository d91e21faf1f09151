"""``mode=export``: a checkpoint's weights as ``NAME.safetensors`` beside it, with the model
config and the tokenizer in the file's metadata."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conf.schema import Settings
from training.checkpoint import check_no_model_overrides, export_safetensors


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    ckpt = Path(settings.job.ckpt_path)
    check_no_model_overrides(settings, ckpt)
    out = export_safetensors(ckpt, ckpt.with_suffix(".safetensors"))
    print(f"wrote {out}")
    return {"safetensors": str(out)}
