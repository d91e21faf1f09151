"""The ``pairs`` group: which minimal pairs ``mode=pairs`` scores."""

from __future__ import annotations

from dataclasses import dataclass

from models.config import check_field_types


@dataclass
class PairsConfig:
    """path: a BLiMP-format JSON-lines file, a directory of them, or ``builtin``."""

    path: str = "builtin"

    def check_mode(self, mode: str) -> None:
        """Another pair set given to another mode is refused, not ignored."""
        if mode != "pairs" and self.path != "builtin":
            raise ValueError(
                f"pairs.path is for mode=pairs (the minimal pairs it scores); mode={mode} does "
                "not read it: drop pairs.path, or score the pairs with mode=pairs"
            )

    def __post_init__(self) -> None:
        check_field_types(self, "pairs.")
        if not self.path.strip():
            raise ValueError(
                "pairs.path is empty; pass a BLiMP-format .jsonl file, a directory of them or "
                "pairs.path=builtin"
            )
