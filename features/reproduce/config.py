"""The ``reproduce`` group: which jobs ``mode=reproduce`` re-runs and how it judges them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from models.config import check_field_types

# Relative: what docs/training.md#reproducibility states for a re-run on a GPU in Lightning's
# deterministic mode (the same GPU model, driver and library versions).
GPU_TOLERANCE = 1e-4


@dataclass
class ReproduceConfig:
    """jobs: a sweep's jobs to re-run, by directory name (a list ``[0,3]`` or ``0,3``); None:
    every completed job. tolerance: the largest relative difference, ``|a - b| / max(|a|,
    |b|)``, that counts as "within tolerance" rather than "different"; None: 0 (bitwise) for a
    run recorded on a CPU, ``GPU_TOLERANCE`` for one on a GPU, where PyTorch promises no
    bitwise equality. other_code: re-run on this checkout even when the record's code differs
    (the table then shows what moved). fresh_cache: tokenize and train the tokenizer again in
    an empty cache, deleted afterwards, rather than reuse the one that may have made the
    record."""

    jobs: Any = None
    tolerance: float | None = None
    other_code: bool = False
    fresh_cache: bool = True

    def check_mode(self, mode: str) -> None:
        """A setting given to another mode is refused, not ignored."""
        given = [f.name for f in fields(self) if getattr(self, f.name) != f.default]
        if mode != "reproduce" and given:
            raise ValueError(
                f"reproduce.{given[0]} is for mode=reproduce; mode={mode} does not read it: "
                f"drop reproduce.{given[0]}"
            )

    def __post_init__(self) -> None:
        check_field_types(self, "reproduce.")
        if self.tolerance is not None and not 0 <= self.tolerance < 1:
            raise ValueError(
                f"reproduce.tolerance={self.tolerance} must be in [0, 1): the largest relative "
                "difference of a number that still counts as reproduced (0: bitwise)"
            )
        self.jobs = _job_names(self.jobs)


def tolerance_for(config: ReproduceConfig, record: Mapping[str, Any]) -> float:
    """The tolerance a run's numbers are judged with: the one given, else by its device."""
    if config.tolerance is not None:
        return config.tolerance
    return GPU_TOLERANCE if ran_on_gpu(record) else 0.0


def ran_on_gpu(record: Mapping[str, Any]) -> bool:
    """Whether the record's run trained on a GPU (its provenance's device)."""
    return str((record.get("provenance") or {}).get("device", "")).startswith("GPU")


def _job_names(value: Any) -> list[str] | None:
    """The jobs as directory names: ``[0, 3]``, ``"0,3"`` and ``3`` alike."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str, list, tuple)):
        raise ValueError(f"reproduce.jobs={value!r} must name jobs: reproduce.jobs=[0,3]")
    items = value.split(",") if isinstance(value, str) else value
    items = items if isinstance(items, (list, tuple)) else [items]
    names = [str(item).strip() for item in items if str(item).strip()]
    if not names:
        raise ValueError("reproduce.jobs names no job: give their directory names, [0,3]")
    return list(dict.fromkeys(names))
