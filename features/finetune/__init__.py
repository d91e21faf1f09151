"""Fine-tuning: a classifier (or regressor) on a pretrained checkpoint, scored on labelled
text; ``mode=finetune`` and its checkpoints in eval, generate and export (README.md)."""

from conf.features import Feature
from features.finetune.config import FinetuneConfig

FEATURE = Feature(
    name="finetune",
    modes={"finetune": "features.finetune.command"},
    groups={"finetune": FinetuneConfig},
    checkpoint_key="classifier",
    checkpoint_modes={
        "eval": "features.finetune.evaluate:run",
        "generate": "features.finetune.checkpoints:generate",
        "export": "features.finetune.checkpoints:export",
    },
    describe_checkpoint="features.finetune.checkpoints:describe",
)
