"""The ``scaling`` group: what a sweep's report does with its scaling-law fit."""

from __future__ import annotations

from dataclasses import dataclass, fields

from models.config import check_field_types

# How N is counted: the record's field for each convention.
PARAMETER_FIELDS = {"non_embedding": "params", "total": "params_with_embeddings"}
# The starts of Approach 3's L-BFGS-B (features/scaling/law.py: GRIDS).
GRID_NAMES = ("replication", "coarse")


@dataclass
class ScalingConfig:
    """The ``scaling`` group, read by the report of a sweep that varies model size and
    compute (README.md in this folder).

    flops: the budget C (FLOPs, C ≈ 6ND) whose compute-optimal N and D the report predicts;
        None: the sweep's largest compute.
    parameters: N without the embeddings (``non_embedding``, the record's ``params``) or
        with them (``total``, ``params_with_embeddings``).
    bootstrap: resamples for the intervals (0: none).
    level: the share of the bootstrap the intervals cover.
    seed: the bootstrap's seed.
    grid: Approach 3's starts: ``replication`` (Besiroglu et al.'s 4,500) or ``coarse`` (243
        of them, every other value: ~20x quicker, for a first look).
    """

    flops: float | None = None
    parameters: str = "non_embedding"
    bootstrap: int = 200
    level: float = 0.95
    seed: int = 0
    grid: str = "replication"

    def check_mode(self, mode: str) -> None:
        """Settings given to a mode that fits nothing are refused, not ignored."""
        changed = [f.name for f in fields(self) if getattr(self, f.name) != f.default]
        if mode != "train" and changed:
            raise ValueError(
                f"scaling.{changed[0]} is read by the report of a training sweep "
                f"(python train.py -m ...); mode={mode} does not read it: drop scaling.{changed[0]}"
            )

    def __post_init__(self) -> None:
        check_field_types(self, "scaling.")
        if self.flops is not None and not self.flops > 0:
            raise ValueError(
                f"scaling.flops={self.flops} must be > 0: the FLOPs budget to predict the "
                "compute-optimal model for (scaling.flops=1e18), or null for the sweep's largest"
            )
        if self.parameters not in PARAMETER_FIELDS:
            raise ValueError(
                f"scaling.parameters={self.parameters!r} must be one of "
                f"{', '.join(PARAMETER_FIELDS)}: N without or with the embeddings"
            )
        if self.bootstrap < 0:
            raise ValueError(
                f"scaling.bootstrap={self.bootstrap} must be >= 0: the resamples of the "
                "intervals (0: none)"
            )
        if not 0 < self.level < 1:
            raise ValueError(
                f"scaling.level={self.level} must be in (0, 1): the share the intervals cover "
                "(0.95)"
            )
        if self.grid not in GRID_NAMES:
            raise ValueError(
                f"scaling.grid={self.grid!r} must be one of {', '.join(GRID_NAMES)}: the starts "
                "of the fit"
            )
