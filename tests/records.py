"""What two runs of one command must agree on, for the reproducibility tests: a record with
the fields that measure time left out and the run's own folder named ``<root>``, and where two
such records differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The fields that measure wall-clock time or speed: they differ on every run by nature.
# ``seconds`` is consumed.seconds and where a run's time went (seconds.data, ...); val_curve's
# points are [step, loss, tokens, seconds]; curves.jsonl prefixes a name (train/tokens_per_sec).
TIME_FIELDS = frozenset(
    {
        "tokens_per_sec",
        "train_seconds",
        "seconds",
        "started_at",
        "finished_at",
        "examples_per_sec",
        "seconds_per_epoch",
    }
)
ROOT_MARK = "<root>"


def without_times_and_paths(record: Any, root: Path) -> Any:
    """``record`` (JSON: dicts, lists, numbers, strings) without its time fields, and with
    ``root`` (the folder that holds this run's directory and data cache) written as
    ``<root>`` in every string: checkpoint paths and the command line name the folder, which
    differs between two runs, and nothing else may."""
    if isinstance(record, dict):
        return {
            key: (
                [point[:3] for point in value]
                if key == "val_curve"
                else without_times_and_paths(value, root)
            )
            for key, value in record.items()
            if key.rsplit("/", 1)[-1] not in TIME_FIELDS
        }
    if isinstance(record, list):
        return [without_times_and_paths(value, root) for value in record]
    if isinstance(record, str):
        return record.replace(str(root), ROOT_MARK)
    return record


def differences(first: Any, second: Any, where: str = "") -> list[str]:
    """The places (``key.key[index]``) where two records differ, with both values; exact
    equality, so 0.1 and 0.10000000000000002 differ."""
    if isinstance(first, dict) and isinstance(second, dict):
        found = [
            f"{where}.{key}: only in the {'first' if key in first else 'second'}"
            for key in sorted(first.keys() ^ second.keys())
        ]
        for key in first.keys() & second.keys():
            found += differences(first[key], second[key], f"{where}.{key}")
        return sorted(found)
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        return [
            found
            for index, (a, b) in enumerate(zip(first, second, strict=True))
            for found in differences(a, b, f"{where}[{index}]")
        ]
    # bool is an int in Python: True == 1 must still count as a difference of type.
    if type(first) is not type(second) or first != second:
        return [f"{where or 'record'}: {first!r} != {second!r}"]
    return []


def numbers_in(record: Any) -> int:
    """How many numbers ``record`` holds: a comparison of records without any proves nothing."""
    if isinstance(record, dict):
        return sum(numbers_in(value) for value in record.values())
    if isinstance(record, list):
        return sum(numbers_in(value) for value in record)
    return int(isinstance(record, (int, float)) and not isinstance(record, bool))


def assert_reproduced(first: Any, second: Any, first_root: Path, second_root: Path) -> None:
    """Two runs' records are the same, number for number, but for time and their folders."""
    first = without_times_and_paths(first, first_root)
    second = without_times_and_paths(second, second_root)
    assert numbers_in(first) > 0, f"no number to compare in {first!r}"
    assert not (found := differences(first, second)), "the two runs differ:\n" + "\n".join(found)


def read_records(path: Path) -> list[Any]:
    """The records of a .json file (one) or a .jsonl file (one a line)."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    return [json.loads(path.read_text())]
