"""The columns of a report's table: every metric recorded for a sweep's runs (or one run),
each a value per run, read from the runs' records and their ``eval.jsonl`` files. A record
belongs to the run whose directory holds its checkpoint; of two records for one run and column,
the later one counts (a file read later, or a later line). The page groups each column by
configuration over seeds exactly as the summary groups the best validation loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.records import RESULTS_FILE, read_records
from analysis.run_record import Status, has_record
from analysis.summary import MEANS
from analysis.time_to_target import first_reached

# A pretraining run's results, as runs.csv lists them.
_RUN_COLUMNS = ("params", "best_val_loss", "val_ppl", "val_acc", "tokens_per_sec", "status")
# A fine-tune's: the test split's metrics, its best validation loss, its speed.
_FINETUNE_MEANS = (
    "test_accuracy",
    "test_f1",
    "test_mcc",
    "best_val_loss",
    "examples_per_sec",
)


@dataclass(frozen=True)
class Ranking:
    """What a sweep's configurations are compared by: pretraining runs by their best
    validation loss, fine-tunes by their task's metric on the test split (highest best)."""

    metric: str = "best_val_loss"
    higher_is_better: bool = False
    means: tuple[str, ...] = MEANS
    run_columns: tuple[str, ...] = _RUN_COLUMNS
    fine_tunes: bool = False


def ranking(runs: Sequence[dict[str, Any]]) -> Ranking:
    """The ``Ranking`` of a sweep's runs: a fine-tune's when its completed runs are fine-tunes."""
    tuned = [r for r in runs if r.get("status") == Status.COMPLETED and r.get("mode") == "finetune"]
    if not tuned:
        return Ranking()
    metric = f"test_{tuned[0]['metric']}"
    means = tuple(m for m in _FINETUNE_MEANS if m != metric)
    return Ranking(metric, True, means, (metric, *means, "status"), fine_tunes=True)


@dataclass
class Column:
    """One metric: its value per run name, and which way is better (None: a description, such
    as a head count, with no best and no verdicts)."""

    key: str
    title: str
    group: str
    higher_is_better: bool | None
    values: dict[str, float] = field(default_factory=dict)

    @property
    def judged(self) -> bool:
        return self.higher_is_better is not None


def run_columns(
    runs: Sequence[dict[str, Any]],
    ranked: Ranking,
    target_loss: float | None,
    records: Sequence[tuple[str, dict[str, Any]]],
) -> list[Column]:
    """Every column with at least one value for ``runs`` (their ``records``:
    ``run_records``'), the first the metric they are ranked by."""
    columns: dict[str, Column] = {}

    def put(key: str, title: str, group: str, higher: bool | None, run: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            column = columns.setdefault(key, Column(key, title, group, higher))
            column.values[run] = float(value)

    for run in runs:
        if run.get("status") != Status.COMPLETED:
            continue
        name, metric = run["run"], ranked.metric
        put(metric, metric, "training", ranked.higher_is_better, name, run.get(metric))
        if not ranked.fine_tunes:
            put("val_bpb", "val_bpb", "training", False, name, run.get("val_bpb"))
        if target_loss is not None:
            reached = first_reached(run, target_loss) or {}
            for unit in ("steps", "seconds"):
                title = f"{unit} to loss {target_loss:g}"
                put(f"{unit}_to_target", title, "time to target", False, name, reached.get(unit))
    for name, record in records:
        for key, title, group, higher, value in _record_columns(record):
            put(key, title, group, higher, name, value)
    return list(columns.values())


def run_records(root: Path, runs: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(run name, record) for every record of the runs' checkpoints, in the order they count:
    the sweep's eval.jsonl, then each run's, then each run's checkpoints/."""
    dirs = run_dirs(root, runs)
    owners = {run_dir.resolve(): name for name, run_dir in dirs.items()}
    files = [root / RESULTS_FILE]
    for run_dir in dirs.values():
        files += [run_dir / RESULTS_FILE, run_dir / "checkpoints" / RESULTS_FILE]
    found = []
    for path in dict.fromkeys(files):
        for _, record in read_records(path):
            owner = _owner(record, owners)
            if owner is not None:
                found.append((owner, record))
    return found


def run_dirs(root: Path, runs: Sequence[dict[str, Any]]) -> dict[str, Path]:
    """Each run's directory: below the sweep directory ``root``, or ``root`` itself for a run
    directory's own report."""
    if len(runs) == 1 and has_record(root):
        return {runs[0]["run"]: root}
    return {run["run"]: root / run["run"] for run in runs}


def _owner(record: dict[str, Any] | None, owners: dict[Path, str]) -> str | None:
    if not record or not isinstance(record.get("checkpoint"), str):
        return None
    checkpoint = Path(record["checkpoint"]).resolve()
    return next((owners[p] for p in checkpoint.parents if p in owners), None)


def _record_columns(record: dict[str, Any]) -> list[tuple[str, str, str, bool, Any]]:
    """(key, title, group, higher is better, value) of each metric ``record`` holds."""
    kind = record.get("evaluation")
    variant = _variant(record)
    if kind == "finetune":
        title = f"{record.get('task')} ({record.get('init')}) {record.get('metric')}{variant}"
        return [(f"finetune:{title}", title, "fine-tuning", True, record.get("value"))]
    if kind == "harness":
        title = f"{record.get('task')} {record.get('metric')}{variant}"
        higher = record.get("higher_is_better") is not False
        return [(f"harness:{title}", title, "harness", higher, record.get("value"))]
    if "pairs" in record:
        title = f"{record.get('pairs')} pairs: {record.get('paradigm')}{variant}"
        return [(f"pairs:{title}", title, "pair accuracy", True, record.get("pair_acc"))]
    if kind is None and "loss" in record:
        name = f"{record.get('data')} {record.get('split')}{variant}"
        group = "held-out evaluation"
        return [
            (f"eval:{name}:{metric}", f"{name} {metric}", group, False, record.get(metric))
            for metric in ("loss", "bpb")
        ]
    return []


def _variant(record: dict[str, Any]) -> str:
    """What sets a record apart from its plain kind: untrained weights, heads gated off."""
    parts = []
    if record.get("weights", "trained") != "trained":
        parts.append(f"{record['weights']} weights")
    if record.get("heads_pruned"):
        parts.append(f"{len(record['heads_pruned'])} heads off")
    return f" [{', '.join(parts)}]" if parts else ""
