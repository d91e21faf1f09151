"""``mode=export``: a checkpoint's network outside tinylm's training code.

``export.format=safetensors`` (default) writes ``NAME.safetensors`` beside the checkpoint,
with the model config and the tokenizer in the file's metadata; ``export.format=hf`` writes a
folder ``NAME-hf`` that Hugging Face ``transformers`` loads on its own (``training.hf_export``).
``export.path`` puts either elsewhere; an existing output needs ``export.overwrite=true``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conf.schema import Settings
from training.checkpoint import (
    check_no_model_overrides,
    check_output_free,
    export_safetensors,
    is_classifier,
    load_checkpoint,
    load_classifier,
    read_checkpoint,
)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    ckpt = Path(settings.job.ckpt_path)
    export = settings.export
    if export.path:
        out = Path(export.path)
    elif export.format == "hf":
        out = ckpt.with_name(f"{ckpt.stem}-hf")
    else:
        out = ckpt.with_suffix(".safetensors")
    check_output_free(out, export.overwrite)  # before any work: say it now
    checkpoint = read_checkpoint(ckpt)
    if is_classifier(checkpoint["hyper_parameters"]):
        if export.format != "hf":
            raise ValueError(
                f"{ckpt} is a fine-tuned classifier: export it with export.format=hf (a "
                "transformers *ForSequenceClassification folder); safetensors is for language "
                "models"
            )
        loaded = load_classifier(ckpt, checkpoint)
    else:
        loaded = load_checkpoint(ckpt, "export", checkpoint)
    check_no_model_overrides(settings, loaded.hparams["model_config"], ckpt)
    if export.format == "hf":
        from training.hf_export import export_hf  # imports transformers: only when asked

        out = export_hf(loaded, out, overwrite=export.overwrite)
    else:
        out = export_safetensors(loaded, out)
    print(f"wrote {out}")
    return {export.format: str(out)}
