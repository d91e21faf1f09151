"""A record against its re-run's: every recorded number (and the sample, and the tokenizer's
bytes) side by side, judged identical, within tolerance or different; and what in the two
provenances differs. Times and paths are left out: no two runs share them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from common.provenance import code_label, recorded_versions

# What measures wall time or names a file: different on every run by nature.
TIMES = (
    "tokens_per_sec",
    "train_seconds",
    "started_at",
    "finished_at",
    "examples_per_sec",
    "seconds_per_epoch",
    "consumed.seconds",
    "seconds",  # where a run's time went: seconds.data, seconds.training, ...
)
PATHS = ("best_ckpt", "pretrained")
# Compared on their own: the command that ran, and what ran it.
NOT_NUMBERS = ("status", "error", "overrides", "settings", "provenance", "threads", "resume_ckpt")
CURVE_POINT = ("step", "loss", "tokens", "seconds")  # a val_curve point's fields


class Verdict(StrEnum):
    IDENTICAL = "identical"
    WITHIN = "within tolerance"
    DIFFERENT = "different"
    MISSING = "missing"  # recorded by one run only
    FAILED = "re-run failed"  # a whole run's: its re-run left no record to compare


ROW_VERDICTS = (Verdict.IDENTICAL, Verdict.WITHIN, Verdict.DIFFERENT, Verdict.MISSING)


@dataclass(frozen=True)
class Row:
    name: str
    recorded: Any
    rerun: Any
    verdict: Verdict

    @property
    def difference(self) -> float | None:
        """The relative difference of two numbers (None for text or a missing one)."""
        if not (_is_number(self.recorded) and _is_number(self.rerun)):
            return None
        return relative_difference(self.recorded, self.rerun)


def recorded_values(record: Mapping[str, Any]) -> dict[str, Any]:
    """Every value of a run record that a re-run must give again, by a dotted name:
    ``consumed.tokens``, ``config.model.num_heads``, ``val_curve@100.loss``, ``sample``."""
    return {
        name: value
        for name, value in _leaves(record, "")
        if name not in TIMES and name.split(".")[0] not in (*NOT_NUMBERS, *PATHS, *TIMES)
    }


def _leaves(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, f"{name}.{key}" if name else str(key))
    elif name == "val_curve" and isinstance(value, list):
        for point in value:
            step = point[0]
            for field, inner in zip(CURVE_POINT[1:], point[1:], strict=False):
                if field != "seconds":
                    yield f"val_curve@{step}.{field}", inner
    elif isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        for index, inner in enumerate(value):  # a confusion matrix, row by row
            yield from _leaves(inner, f"{name}[{index}]")
    elif isinstance(value, list) and all(_is_number(v) for v in value):
        for index, inner in enumerate(value):
            yield f"{name}[{index}]", inner
    else:
        yield name, value


def compare(recorded: Mapping[str, Any], rerun: Mapping[str, Any], tolerance: float) -> list[Row]:
    """Each value of either record (``recorded_values``), recorded against re-run."""
    before, after = recorded_values(recorded), recorded_values(rerun)
    names = [*before, *(name for name in after if name not in before)]
    return [_row(name, before.get(name), after.get(name), tolerance) for name in names]


def _row(name: str, recorded: Any, rerun: Any, tolerance: float) -> Row:
    if recorded is None and rerun is None:
        verdict = Verdict.IDENTICAL
    elif recorded is None or rerun is None:
        verdict = Verdict.MISSING
    elif _same(recorded, rerun):
        verdict = Verdict.IDENTICAL
    elif (
        _is_number(recorded)
        and _is_number(rerun)
        and relative_difference(recorded, rerun) <= tolerance
    ):
        verdict = Verdict.WITHIN
    else:
        verdict = Verdict.DIFFERENT
    return Row(name, recorded, rerun, verdict)


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (a diverged loss reproduced is reproduced)."""
    both_nan = _is_number(a) and _is_number(b) and math.isnan(a) and math.isnan(b)
    return both_nan or a == b


def relative_difference(a: float, b: float) -> float:
    """``|a - b| / max(|a|, |b|)``: 0 for equal numbers, inf across NaN or infinity."""
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def file_row(name: str, recorded: Path, rerun: Path) -> Row:
    """Two files' bytes as one row: their SHA-256 prefixes, identical or different."""
    before, after = _digest(recorded), _digest(rerun)
    if before is None or after is None:
        return Row(name, before, after, Verdict.MISSING)
    return Row(name, before, after, Verdict.IDENTICAL if before == after else Verdict.DIFFERENT)


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None


def provenance_differences(
    recorded: Mapping[str, Any], rerun: Mapping[str, Any]
) -> list[tuple[str, str, str]]:
    """(what, recorded, re-run) for each part of the two runs' provenance that differs: the
    code (commit and dirty diff), library versions, device, precision, threads and whatever
    else the records hold."""
    before, after = _provenance(recorded), _provenance(rerun)
    names = [*before, *(name for name in after if name not in before)]
    return [
        (name, str(before.get(name, "not recorded")), str(after.get(name, "not recorded")))
        for name in names
        if before.get(name) != after.get(name)
    ]


def _provenance(record: Mapping[str, Any]) -> dict[str, Any]:
    recorded = dict(record.get("provenance") or {})
    found = {"code": code_label(recorded), "threads": record.get("threads")}
    for name, value in _leaves(recorded, ""):
        if not name.startswith(("code.", "versions.")) and name != "command":
            found[name] = value
    # An older record's "unknown" library is one that was not installed.
    return {**found, **recorded_versions(recorded)}
