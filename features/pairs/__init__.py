"""Minimal pairs: a checkpoint's accuracy on BLiMP-format pairs of sentences (a file, a
directory of them, or a built-in set), per paradigm and over every pair; ``mode=pairs`` and
the ``pairs`` config group (docs/evaluation.md, "Minimal pairs")."""

from conf.features import Feature
from features.pairs.config import PairsConfig

FEATURE = Feature(
    name="pairs",
    modes={"pairs": "features.pairs.command"},
    groups={"pairs": PairsConfig},
    moved_keys={"eval.pairs": "mode=pairs pairs.path=builtin|FILE|DIR"},
)
