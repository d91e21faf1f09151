"""The ``heads`` group: how the head analysis reaches ``mode=train`` and ``mode=eval``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from models.config import check_field_types

# Each setting, the modes that read it and what it does there.
READERS = {
    "log_every": (("train", "finetune"), "mode=train and mode=finetune (log the heads)"),
    "prune": (("eval",), "mode=eval (score with those heads gated off)"),
}


@dataclass
class HeadsConfig:
    """The ``heads`` group: the head analysis's settings beyond ``mode=heads``'s own.

    log_every: every N optimiser steps, log each head's entropy and importance (None: off).
    prune: gate heads off before scoring, a fraction of all heads in [0, 1] (the least
    important first, never a layer's last head) or heads named ``LAYER:HEAD`` (a list
    ``[0:1,1:3]`` or one string ``0:1,1:3``); None scores every head.
    """

    log_every: int | None = None
    prune: Any = None

    def check_mode(self, mode: str) -> None:
        """A setting given to a mode that does not read it is refused, not ignored."""
        for key, (modes, what) in READERS.items():
            if getattr(self, key) is None or mode in modes:
                continue
            reason = (
                "mode=heads analyses every head and draws the prune curve itself"
                if mode == "heads"
                else f"mode={mode} does not read it"
            )
            raise ValueError(f"heads.{key} is for {what}; {reason}: drop heads.{key}")

    def __post_init__(self) -> None:
        check_field_types(self, "heads.")
        if self.log_every is not None and self.log_every < 1:
            raise ValueError(
                f"heads.log_every={self.log_every} must be >= 1: the steps between the heads' "
                "logged entropy and importance (null: off)"
            )
        value = self.prune
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float, str, list, tuple)):
            raise ValueError(
                f"heads.prune={value!r} must be a fraction of the heads (heads.prune=0.5) or "
                "heads named LAYER:HEAD (heads.prune=[0:1,1:3])"
            )
        if isinstance(value, (int, float)):
            if not 0 <= value <= 1:
                raise ValueError(
                    f"heads.prune={value} is outside [0, 1]: give the fraction of the heads to "
                    "gate off (0.5: the least important half) or name them, "
                    "heads.prune=[0:1,1:3]"
                )
            self.prune = float(value)
            return
        items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
        names = [item.strip() for item in items if item.strip()]
        bad = [n for n in names if not re.fullmatch(r"\d+:\d+", n)]
        if bad or not names:
            raise ValueError(
                f"heads.prune names {', '.join(map(repr, bad)) or 'no head'}: write heads as "
                "LAYER:HEAD (both from 0), heads.prune=[0:1,1:3], or a fraction heads.prune=0.5"
            )
        self.prune = list(dict.fromkeys(names))
