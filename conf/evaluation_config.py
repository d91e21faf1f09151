"""The ``eval``, ``summary``, ``sweep`` and ``export`` groups (docs/evaluation.md, sweeps.md,
export.md), each validating itself."""

from __future__ import annotations

from dataclasses import dataclass

from models.config import check_field_types

EXPORT_FORMATS = ("safetensors", "hf")
WEIGHTS = ("trained", "untrained")


@dataclass
class EvalConfig:
    """How ``mode=eval`` scores. stride: windows of ``max_seq_len`` slide by it (None: by
    ``max_seq_len``; checked against the checkpoint's when it is read). weights: ``trained``, or
    ``untrained``: a fresh network of the checkpoint's shape drawn from ``seed``."""

    stride: int | None = None
    weights: str = "trained"

    def __post_init__(self) -> None:
        check_field_types(self, "eval.")
        if self.stride is not None and self.stride < 1:
            raise ValueError(
                f"eval.stride={self.stride} must be >= 1 (and at most the checkpoint's "
                "max_seq_len); omit it for non-overlapping windows"
            )
        if self.weights not in WEIGHTS:
            raise ValueError(
                f"eval.weights={self.weights} is unknown; choose eval.weights=trained (the "
                "checkpoint's) or eval.weights=untrained (a fresh network of its shape, seeded "
                "by seed)"
            )


@dataclass
class SummaryConfig:
    """What the sweep summary adds. target_loss: the compute at which each configuration's
    validation loss first reached it; not a setting of the jobs."""

    target_loss: float | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "summary.")
        if self.target_loss is not None and self.target_loss <= 0:
            raise ValueError(f"summary.target_loss={self.target_loss} must be a loss > 0")


@dataclass
class SweepConfig:
    """How a sweep re-run treats its finished jobs. rerun_changed: train a completed job again
    when the code it ran differs from this checkout's (false: reuse it, and say so)."""

    rerun_changed: bool = False

    def __post_init__(self) -> None:
        check_field_types(self, "sweep.")


@dataclass
class ExportConfig:
    """What ``mode=export`` writes (``format``: safetensors or hf), where (``path``; None:
    beside the checkpoint), and whether it may replace an existing output."""

    format: str = "safetensors"
    path: str | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        check_field_types(self, "export.")
        if self.format not in EXPORT_FORMATS:
            raise ValueError(
                f"export.format={self.format} is unknown; choose export.format=safetensors "
                "(tinylm's file) or export.format=hf (a Hugging Face transformers folder)"
            )
