"""The ``harness`` group: which lm-evaluation-harness tasks ``mode=harness`` runs, and how."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from models.config import check_field_types


@dataclass
class HarnessConfig:
    """``lm-eval``'s ``--tasks`` (a list, or one comma-separated string), ``--include_path``,
    ``--limit`` (examples per task, or a fraction below 1), ``--num_fewshot`` (None: each
    task's own) and ``--batch_size``."""

    tasks: Any = None
    include: str | None = None
    limit: float | None = None
    num_fewshot: int | None = None
    batch_size: int = 16

    def check_mode(self, mode: str) -> None:
        """A setting given to another mode is refused, not ignored."""
        given = [f.name for f in fields(self) if getattr(self, f.name) != f.default]
        if mode != "harness" and given:
            raise ValueError(
                f"harness.{given[0]} is for mode=harness (lm-evaluation-harness tasks); "
                f"mode={mode} does not read it: drop harness.{given[0]}, or run the tasks with "
                "mode=harness"
            )

    def __post_init__(self) -> None:
        check_field_types(self, "harness.")
        self.tasks = _task_names(self.tasks)
        if self.tasks is None:
            stray = [
                f"harness.{key}"
                for key in ("include", "limit", "num_fewshot")
                if getattr(self, key) is not None
            ]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)} set without harness.tasks: name the tasks to run, "
                    "e.g. harness.tasks=TASK (or drop them)"
                )
        limit = self.limit
        if limit is not None and not (0 < limit < 1 or (limit >= 1 and limit.is_integer())):
            raise ValueError(
                f"harness.limit={limit:g} must be a whole number of examples (>= 1) or a "
                "fraction of each task in (0, 1)"
            )
        if self.num_fewshot is not None and self.num_fewshot < 0:
            raise ValueError(
                f"harness.num_fewshot={self.num_fewshot} must be >= 0 (0: zero-shot; omit it "
                "for each task's own)"
            )
        if self.batch_size < 1:
            raise ValueError(f"harness.batch_size={self.batch_size} must be >= 1")


def _task_names(value: Any) -> list[str] | None:
    """harness.tasks as a list of task names."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(
            f"harness.tasks={value!r} must name tasks: harness.tasks=TASK, "
            "harness.tasks=TASK1,TASK2 or harness.tasks=[TASK1,TASK2]"
        )
    names = [item.strip() for item in items if item.strip()]
    if not names:
        raise ValueError(f"harness.tasks={value!r} names no task: harness.tasks=TASK")
    return list(dict.fromkeys(names))
