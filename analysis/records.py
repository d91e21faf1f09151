"""Records and tables: the JSON-lines records files (``eval.jsonl``), warnings, and how tinylm
prints numbers in tables. A line tinylm cannot read (cut short by a crash, edited by hand) is
named in a warning and kept as it is, never in the way of a new record.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common.files import write_atomically

# Every evaluation of a checkpoint (eval, pairs, harness, fine-tuning) appends its record here.
RESULTS_FILE = "eval.jsonl"
# Bytes that are not UTF-8 survive a rewrite of a records file unchanged.
_ENCODING = {"encoding": "utf-8", "errors": "surrogateescape"}
_LINES_NAMED = 5  # at most this many unreadable line numbers in one warning


class DamagedRecord(ValueError):
    """A file tinylm wrote that no longer reads as what it wrote."""


def warn(message: str) -> None:
    """One line on stderr, in the style of ``tinylm: error: ...``."""
    print(f"tinylm: warning: {message}", file=sys.stderr)


def append_records(
    path: Path, records: Sequence[dict[str, Any]], identity: Callable[[dict[str, Any]], str]
) -> Path:
    """Add ``records`` to the JSON-lines file ``path``, dropping the earlier records of the
    same ``identity``; every other line stays, unreadable ones included, in its order. The
    file is rewritten whole and atomically: a crash leaves the old one or the new one."""
    new = {identity(record) for record in records}
    kept = [
        text for text, record in read_records(path) if record is None or identity(record) not in new
    ]
    text = "\n".join([*kept, *(json.dumps(record) for record in records)]) + "\n"
    return write_atomically(path, lambda f: f.write(text.encode(**_ENCODING)))


def read_records(path: Path) -> list[tuple[str, dict[str, Any] | None]]:
    """Each non-blank line of the JSON-lines file ``path`` (none when it is absent) with its
    record, or None for a line that is not a JSON object; one warning names those lines."""
    lines = path.read_text(**_ENCODING).split("\n") if path.is_file() else []
    read, unreadable = [], []
    for number, text in enumerate(lines, start=1):
        if text.strip():
            record, problem = _parse_record(text)
            read.append((text, record))
            if problem:
                unreadable.append((number, problem))
    if unreadable:
        warn(_unreadable_lines(path, unreadable))
    return read


def _parse_record(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None), or (None, what is wrong with the line)."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        return None, f"{err.msg} at column {err.colno}"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    return record, None


def _unreadable_lines(path: Path, unreadable: Sequence[tuple[int, str]]) -> str:
    first, problem = unreadable[0]
    if len(unreadable) == 1:
        return (
            f"{path} line {first} is not a JSON record ({problem}); it is kept as it is, and "
            "new records are still added"
        )
    numbers = [str(number) for number, _ in unreadable[:_LINES_NAMED]]
    if len(unreadable) > _LINES_NAMED:
        numbers.append(f"{len(unreadable) - _LINES_NAMED} more")
    return (
        f"{path} lines {', '.join(numbers)} are not JSON records (line {first}: {problem}); "
        "they are kept as they are, and new records are still added"
    )


def format_value(value: Any) -> Any:
    """A table cell: floats to 4 significant digits (whole numbers from 1000 up), None empty."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return "" if value is None else value


def markdown_table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def natural_key(value: str) -> tuple[int, float, str]:
    """Sort numbers by value ("2" before "10"), then anything else by name."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)
