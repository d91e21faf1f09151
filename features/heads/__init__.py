"""What the heads do: ``mode=heads`` scores a checkpoint once per head with that head gated off
(loss change, importance, entropy, the prune curve), ``heads.prune`` gates heads off in
``mode=eval``, and ``heads.log_every`` logs each head's entropy and importance during training
(README.md, this folder's guide)."""

from conf.features import Feature
from features.heads.config import HeadsConfig

FEATURE = Feature(
    name="heads",
    modes={"heads": "features.heads.command"},
    groups={"heads": HeadsConfig},
    scoring="features.heads.pruning:gate_heads",
    eval_fields=("heads_prune", "heads_pruned"),
    training_callbacks="features.heads.during_training:callbacks",
    report="features.heads.report:add_heads",
)
