"""The ``coordcheck`` group: the widths, steps, seeds and parametrizations of
``mode=coordcheck`` (``README.md``, "The coordinate check")."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from models.config import check_field_types

PARAMETRIZATIONS = ("standard", "mup")


@dataclass
class CoordCheckConfig:
    """widths: the hidden sizes trained, at least two (``coordcheck.widths=32,64,128``); every
    other model setting is the run's. steps: the optimiser steps each width trains; each step's
    forward pass is measured (step 0: at initialisation). seeds: how many seeds (from ``seed``
    up) each mean is averaged over. parametrizations: which of standard and mup to check."""

    widths: Any = field(default_factory=lambda: [64, 128, 256, 512])
    steps: int = 5
    seeds: int = 3
    parametrizations: Any = field(default_factory=lambda: list(PARAMETRIZATIONS))

    def check_mode(self, mode: str) -> None:
        """A setting given to another mode is refused, not ignored."""
        given = [f.name for f in fields(self) if getattr(self, f.name) != getattr(_DEFAULT, f.name)]
        if mode != "coordcheck" and given:
            raise ValueError(
                f"coordcheck.{given[0]} is for mode=coordcheck (the μP coordinate check); "
                f"mode={mode} does not read it: drop coordcheck.{given[0]}"
            )

    def __post_init__(self) -> None:
        check_field_types(self, "coordcheck.")
        self.widths = _widths(self.widths)
        if self.steps < 1:
            raise ValueError(
                f"coordcheck.steps={self.steps} must be >= 1: the optimiser steps each width "
                "trains (a few, e.g. 5)"
            )
        if self.seeds < 1:
            raise ValueError(
                f"coordcheck.seeds={self.seeds} must be >= 1: the seeds each mean is averaged "
                "over (e.g. 3)"
            )
        self.parametrizations = _parametrizations(self.parametrizations)


def _widths(value: Any) -> list[int]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        items = [items]
    widths = []
    for item in items:
        try:
            width = int(str(item).strip())
        except ValueError:
            width = 0
        if isinstance(item, bool) or width < 1 or str(width) != str(item).strip():
            raise ValueError(
                f"coordcheck.widths has {item!r}: give positive whole hidden sizes, "
                "coordcheck.widths=64,128,256"
            )
        widths.append(width)
    if len(set(widths)) < 2:
        raise ValueError(
            f"coordcheck.widths={value!r} needs at least two different widths to compare, "
            "e.g. coordcheck.widths=64,128,256"
        )
    return sorted(set(widths))


def _parametrizations(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        items = [items]
    names = [str(item).strip() for item in items]
    unknown = [n for n in names if n not in PARAMETRIZATIONS]
    if unknown or not names:
        raise ValueError(
            f"coordcheck.parametrizations names {', '.join(map(repr, unknown)) or 'none'}: "
            f"choose from {', '.join(PARAMETRIZATIONS)}, e.g. "
            "coordcheck.parametrizations=standard,mup"
        )
    return [p for p in PARAMETRIZATIONS if p in names]


_DEFAULT = CoordCheckConfig()
