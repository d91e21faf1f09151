"""The run record: what a run directory's ``metrics.json`` says about its run; the one module
that names, writes and reads that file (``tests/analysis/test_run_record.py`` checks it).

What a record holds besides its ``Status`` depends on how far the run got: a sweep job that
started, its ``overrides`` (so that a job killed before its first checkpoint is recognised when
the sweep is re-run); a completed or pruned run, its metrics, curve, consumed compute,
settings and provenance; an interrupted one, the checkpoint it resumes from; a failed one, its
error. Fields were added over time: readers ``.get`` them, so an older record reads as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, TypedDict, cast

from analysis.records import DamagedRecord, natural_key, warn
from common.files import write_text_atomically

_FILE = "metrics.json"


class Status(StrEnum):
    """A run's ``status``; str-valued, so a record's JSON holds the same strings as ever and a
    status read back from it compares equal to its member."""

    RUNNING = "running"
    COMPLETED = "completed"
    PRUNED = "pruned"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


# A run that ended with a result: a sweep re-run skips it.
FINISHED = (Status.COMPLETED, Status.PRUNED)


class RunRecord(TypedDict, total=False):
    """Every field a run records, in the order a record has them (a fine-tune's scores, its
    ``val_NAME`` and ``test_NAME`` metrics, follow ``best_val_loss``)."""

    status: Status
    error: str  # failed: why
    mode: str  # "finetune" for a fine-tune; absent for pretraining
    arch: str
    task: str  # a fine-tune's task, init, seed, pretrained checkpoint, metric, problem ...
    init: str
    seed: int
    pretrained: str
    metric: str
    problem: str
    label_names: list[str]
    n: dict[str, int]  # ... and the examples of each split
    step: int
    resume_ckpt: str  # interrupted: the checkpoint it resumes from
    best_val_loss: float | None
    val_loss: float | None
    val_ppl: float | None
    val_bpc: float | None
    val_bpb: float | None
    val_acc: float | None
    val_confusion: list[list[int]]  # a fine-tuned classifier's, on validation and test
    test_confusion: list[list[int]]
    tokens_per_sec: float | None
    train_seconds: float
    consumed: dict[str, float]  # steps, tokens, flops, seconds of the training steps
    flops_per_token: float
    examples_per_sec: float | None
    seconds_per_epoch: float | None
    started_at: float
    finished_at: float
    threads: int
    seconds: dict[str, float]  # where the time went: data, training, validation, sample
    best_ckpt: str
    # under trainer.stop_at_loss: the training seconds and steps at the first validation below
    # it, None when no validation got there
    seconds_to_target: float | None
    steps_to_target: int | None
    val_curve: list[list[float]]  # [step, loss, tokens, seconds]; [step, loss] before those
    overrides: dict[str, str]
    config: dict[str, Any]
    settings: dict[str, Any]  # every group's validated settings, as the job ran
    provenance: dict[str, Any]  # common/provenance.py
    params: int
    params_with_embeddings: int
    sample: str  # the closing sample of a trained language model


FIELDS = tuple(RunRecord.__annotations__)
# A language model's results, as the end of its training prints them and its page heads them.
HEADLINE = (
    "best_val_loss",
    "val_loss",
    "val_ppl",
    "val_bpc",
    "val_bpb",
    "val_acc",
    "tokens_per_sec",
)
SCORE_PREFIXES = ("val_", "test_")  # a fine-tune's scores: val_NAME, test_NAME
# The types of the fields that summaries, plots and sweep re-runs read.
_TEXT_FIELDS = ("status", "error")
_MAPPING_FIELDS = ("overrides", "config", "consumed")
_NUMBER_FIELDS = ("step", *HEADLINE, "params", "params_with_embeddings", "flops_per_token")


def run_record(status: Status, scores: Mapping[str, Any] | None = None, **fields: Any) -> RunRecord:
    """The record of a run with ``status`` and ``fields`` (``RunRecord``'s), its keys in the
    order of ``FIELDS`` whatever order they are given in; ``scores`` (a fine-tune's
    ``val_NAME``/``test_NAME`` metrics, in their order) follow ``best_val_loss``."""
    scores = dict(scores or {})
    unknown = sorted(set(fields) - set(FIELDS[1:]))
    if unknown:
        raise TypeError(f"a run record has no field {', '.join(unknown)}")
    odd = sorted(k for k in scores if k in fields or not k.startswith(SCORE_PREFIXES))
    if odd:
        raise TypeError(f"scores {', '.join(odd)} are not val_/test_ metrics beside the fields")
    record: dict[str, Any] = {"status": Status(status)}
    for key in FIELDS[1:]:
        if key in fields:
            record[key] = fields[key]
        if key == "best_val_loss":
            record.update(scores)
    return cast(RunRecord, record)


def record_path(run_dir: Path | str = ".") -> Path:
    """The record's file in ``run_dir`` (``record_path().name``: its name, for a message)."""
    return Path(run_dir) / _FILE


def has_record(run_dir: Path | str) -> bool:
    """Whether ``run_dir`` holds a record (read or not): a run directory's mark."""
    return record_path(run_dir).is_file()


def write_record(run_dir: Path | str, record: Mapping[str, Any]) -> Path:
    """Write ``record`` as the run's, atomically (a reader sees the old one or the new one)."""
    return write_text_atomically(record_path(run_dir), json.dumps(record, indent=2, default=str))


def read_record(run_dir: Path | str) -> RunRecord | None:
    """The run's record; None without one. ``DamagedRecord`` names the file and what is
    wrong when it is not JSON, not an object, or holds a field of the wrong type."""
    path = record_path(run_dir)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise DamagedRecord(f"{path} is damaged (not UTF-8 text)") from None
    except json.JSONDecodeError as err:
        raise DamagedRecord(
            f"{path} is damaged (not valid JSON: {err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    wrong = _wrong_field(record)
    if wrong:
        raise DamagedRecord(f"{path} is damaged ({wrong})")
    return cast(RunRecord, record)


def _wrong_field(record: Any) -> str | None:
    """What makes ``record`` unlike a record tinylm writes, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    expected = {
        **dict.fromkeys(_TEXT_FIELDS, ((str,), "text")),
        **dict.fromkeys(_MAPPING_FIELDS, ((dict,), "an object")),
        **dict.fromkeys(_NUMBER_FIELDS, ((int, float, type(None)), "a number")),
        "val_curve": ((list,), "a list of [step, loss, ...] points"),
    }
    for key, (types, name) in expected.items():
        value = record.get(key)
        if key in record and (not isinstance(value, types) or isinstance(value, bool)):
            return f"its {key} is {json.dumps(value)[:40]}, not {name}"
    pairs = record.get("val_curve") or []
    if not all(_is_curve_point(point) for point in pairs):
        return "its val_curve is not a list of [step, loss, ...] points"
    return None


def _is_curve_point(point: Any) -> bool:
    return (
        isinstance(point, list)
        and len(point) in (2, 4)  # [step, loss] before tokens and seconds were recorded
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in point)
    )


def read_run(run_dir: Path | str, consequence: str) -> RunRecord | None:
    """``read_record`` for readers that go on past a damaged file: it is named in a warning
    that ends with ``consequence``, and read as a failed run whose error says why."""
    try:
        return read_record(run_dir)
    except DamagedRecord as err:
        warn(f"{err}; {consequence} (rewrite or delete the file)")
        return run_record(Status.FAILED, error=str(err))


def collect_runs(sweep_dir: Path | str) -> list[dict[str, Any]]:
    """The record of every run directly below ``sweep_dir`` with its ``run`` (the directory's
    name), in job order; a damaged one is a failed run."""
    runs = []
    for run_dir in Path(sweep_dir).iterdir():
        record = read_run(run_dir, "the run counts as failed") if run_dir.is_dir() else None
        if record is not None:
            runs.append({"run": run_dir.name, **record})
    return sorted(runs, key=lambda r: natural_key(r["run"]))
