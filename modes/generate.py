"""``mode=generate``: a decoder continues ``prompt``; an encoder fills its mask tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conf.schema import Settings
from modes.inference import fill_mask_text, generate_text, load_for_inference


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    loaded, tokenizer = load_for_inference(settings)
    if loaded.config.arch == "decoder":
        text = generate_text(loaded.model, tokenizer, settings.job, settings.job.prompt or "")
    else:
        text = fill_mask_text(loaded.model, tokenizer, settings.job.prompt)
    print(text)
    return {"text": text}
