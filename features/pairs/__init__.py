"""Minimal pairs (BLiMP's format): ``mode=pairs`` and the ``pairs`` group (README.md here)."""

from conf.features import Feature
from features.pairs.config import PairsConfig

FEATURE = Feature(
    name="pairs",
    modes={"pairs": "features.pairs.command"},
    groups={"pairs": PairsConfig},
    moved_keys={"eval.pairs": "mode=pairs pairs.path=builtin|FILE|DIR"},
)
