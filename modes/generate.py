"""``mode=generate``: a decoder continues ``prompt``; an encoder fills its mask tokens; a
feature's checkpoint is the feature's (a fine-tuned classifier predicts a label)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conf.features import checkpoint_handler
from conf.schema import Settings
from modes.inference import load_for_inference, sample_text
from training.checkpoint import read_checkpoint


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    checkpoint = read_checkpoint(settings.job.ckpt_path)
    handler = checkpoint_handler(checkpoint["hyper_parameters"], "generate")
    if handler is not None:  # a feature's checkpoint (a fine-tuned classifier)
        return handler(settings, [settings.job.ckpt_path], checkpoint, callbacks)
    loaded, tokenizer = load_for_inference(settings, checkpoint)
    text = sample_text(loaded.model, tokenizer, settings.job)
    print(text)
    return {"text": text}
