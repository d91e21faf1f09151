"""The settings of the commands that read a trained checkpoint: ``eval``, ``summary``,
``sweep`` and ``export``; each dataclass validates itself (conf/schema.py gathers them)."""

from __future__ import annotations

from dataclasses import dataclass

from models.config import check_field_types

EXPORT_FORMATS = ("safetensors", "hf")
WEIGHTS = ("trained", "untrained")


@dataclass
class EvalConfig:
    """The ``eval`` block of conf/config.yaml: what ``mode=eval`` scores, and how.

    stride: sliding windows of ``max_seq_len`` tokens, each scoring its last ``stride``
    tokens (every token once, with up to ``max_seq_len - stride`` tokens of extra context);
    None = ``max_seq_len``, non-overlapping windows. Checked against the checkpoint's
    ``max_seq_len`` when it is read.
    weights: ``trained`` (the checkpoint's) or ``untrained``: a fresh network of the
    checkpoint's shape drawn from ``seed``, the baseline that trained weights must beat (the
    features' evaluations that score tinylm's network read it too).
    """

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
    """The ``summary`` block of conf/config.yaml: what the sweep summary adds.

    target_loss: report, per configuration, the steps, tokens, FLOPs and seconds at which
        validation loss first reached it (``analysis/time_to_target.py``); None = not reported.
        Not a setting of the jobs: a sweep re-run with another value rewrites the summary.
    """

    target_loss: float | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "summary.")
        if self.target_loss is not None and self.target_loss <= 0:
            raise ValueError(f"summary.target_loss={self.target_loss} must be a loss > 0")


@dataclass
class SweepConfig:
    """The ``sweep`` block of conf/config.yaml: how a sweep re-run treats its finished jobs.

    rerun_changed: train a completed job again when the code it ran (its recorded commit and
        uncommitted diff) differs from this checkout's; false reuses it and says so.
    """

    rerun_changed: bool = False

    def __post_init__(self) -> None:
        check_field_types(self, "sweep.")


@dataclass
class ExportConfig:
    """The ``export`` block of conf/config.yaml: what ``mode=export`` writes, and where.

    format: safetensors (tinylm's own file, the config in its metadata) or hf (a folder that
    Hugging Face ``transformers`` loads as GPT2LMHeadModel, GPTNeoXForCausalLM (rope) or
    BertForMaskedLM).
    path: the output file (safetensors) or folder (hf); None puts it beside the checkpoint.
    overwrite: replace an existing output; without it an existing one is refused.
    """

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
