"""``mode=export``: a checkpoint's network as a safetensors file or a Hugging Face folder
(docs/export.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conf.features import checkpoint_handler
from conf.schema import ExportConfig, Settings
from training.checkpoint import (
    check_no_model_overrides,
    check_output_free,
    export_safetensors,
    load_checkpoint,
    read_checkpoint,
)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    ckpt = Path(settings.job.ckpt_path)
    export = settings.export
    out = output_path(ckpt, export)
    check_output_free(out, export.overwrite)  # before any work: say it now
    checkpoint = read_checkpoint(ckpt)
    handler = checkpoint_handler(checkpoint["hyper_parameters"], "export")
    if handler is not None:  # a feature's checkpoint (a fine-tuned classifier)
        return handler(settings, [ckpt], checkpoint, callbacks)
    loaded = load_checkpoint(ckpt, "export", checkpoint)
    check_no_model_overrides(settings, loaded.hparams["model_config"], ckpt)
    if export.format == "hf":
        from training.hf_export import export_hf  # imports transformers: only when asked

        out = export_hf(loaded, out, overwrite=export.overwrite)
    else:
        out = export_safetensors(loaded, out)
    print(f"wrote {out}")
    return {export.format: str(out)}


def output_path(ckpt: Path, export: ExportConfig) -> Path:
    """Where the export goes: ``export.path``, else beside the checkpoint (``NAME-hf`` or
    ``NAME.safetensors``)."""
    if export.path:
        return Path(export.path)
    if export.format == "hf":
        return ckpt.with_name(f"{ckpt.stem}-hf")
    return ckpt.with_suffix(".safetensors")
