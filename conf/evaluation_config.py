"""The settings of the commands that read a trained checkpoint: ``eval``, ``summary``,
``sweep`` and ``export``; each dataclass validates itself (conf/schema.py gathers them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    pairs: minimal pairs to score instead of text: a BLiMP-format JSON-lines file, a
    directory of them, or ``builtin`` (``data/pairs.py``); None = text.
    weights: ``trained`` (the checkpoint's) or ``untrained``: a fresh network of the
    checkpoint's shape drawn from ``seed``, the baseline that trained weights must beat.

    harness: lm-evaluation-harness tasks (names, groups or tags, as ``lm-eval --tasks``
    takes them: a list or one comma-separated string) to score a decoder on instead of text;
    None = no harness. harness_include: a directory of task YAMLs added to the harness's
    own (``lm-eval --include_path``). harness_limit: at most this many examples per task
    (an integer), or this fraction of each (below 1), for a quick look (``--limit``);
    harness_num_fewshot: examples in each prompt (``--num_fewshot``; None = the task's own);
    harness_batch_size: requests per forward pass (``--batch_size``; changes speed only).
    """

    stride: int | None = None
    pairs: str | None = None
    weights: str = "trained"
    harness: Any = None
    harness_include: str | None = None
    harness_limit: float | None = None
    harness_num_fewshot: int | None = None
    harness_batch_size: int = 16

    def __post_init__(self) -> None:
        check_field_types(self, "eval.")
        if self.stride is not None and self.stride < 1:
            raise ValueError(
                f"eval.stride={self.stride} must be >= 1 (and at most the checkpoint's "
                "max_seq_len); omit it for non-overlapping windows"
            )
        self.harness = _task_names(self.harness)
        if self.weights not in WEIGHTS:
            raise ValueError(
                f"eval.weights={self.weights} is unknown; choose eval.weights=trained (the "
                "checkpoint's) or eval.weights=untrained (a fresh network of its shape, seeded "
                "by seed)"
            )
        if self.pairs is not None and not self.pairs.strip():
            raise ValueError(
                "eval.pairs is empty; pass a BLiMP-format .jsonl file, a directory of them or "
                "eval.pairs=builtin (or drop it to score text)"
            )
        if self.pairs is not None and self.harness is not None:
            raise ValueError(
                "eval.pairs and eval.harness each choose what mode=eval scores: keep one"
            )
        if self.harness is not None and self.weights != "trained":
            raise ValueError(
                f"eval.weights={self.weights} is for tinylm's own scoring (text, eval.pairs); "
                "the harness scores the checkpoint's weights: drop eval.weights"
            )
        if self.pairs is not None and self.stride is not None:
            raise ValueError(
                f"eval.stride={self.stride} is for text; minimal pairs score each sentence "
                "whole: drop eval.stride or eval.pairs"
            )
        harness_keys = {
            "harness_include": self.harness_include,
            "harness_limit": self.harness_limit,
            "harness_num_fewshot": self.harness_num_fewshot,
        }
        if self.harness is None:
            stray = [f"eval.{k}" for k, v in harness_keys.items() if v is not None]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)} set without eval.harness: name the tasks to run, "
                    "e.g. eval.harness=TASK (or drop them)"
                )
        elif self.stride is not None:
            raise ValueError(
                f"eval.stride={self.stride} is for scoring text; the harness tasks decide "
                "their own contexts (drop eval.stride or eval.harness)"
            )
        limit = self.harness_limit
        if limit is not None and not (0 < limit < 1 or (limit >= 1 and limit.is_integer())):
            raise ValueError(
                f"eval.harness_limit={limit:g} must be a whole number of examples (>= 1) or "
                "a fraction of each task in (0, 1)"
            )
        if self.harness_num_fewshot is not None and self.harness_num_fewshot < 0:
            raise ValueError(
                f"eval.harness_num_fewshot={self.harness_num_fewshot} must be >= 0 (0: "
                "zero-shot; omit it for each task's own)"
            )
        if self.harness_batch_size < 1:
            raise ValueError(f"eval.harness_batch_size={self.harness_batch_size} must be >= 1")


def _task_names(value: Any) -> list[str] | None:
    """eval.harness as a list of task names: from a list, or one comma-separated string."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(
            f"eval.harness={value!r} must name tasks: eval.harness=TASK, "
            "eval.harness='TASK1,TASK2' or eval.harness=[TASK1,TASK2]"
        )
    names = [item.strip() for item in items if item.strip()]
    if not names:
        raise ValueError(
            f"eval.harness={value!r} names no task: eval.harness=TASK (or omit it for "
            "tinylm's own loss, ppl and bpc)"
        )
    return list(dict.fromkeys(names))


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
