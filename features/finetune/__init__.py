"""Fine-tuning: a classifier (or regressor) on a pretrained checkpoint's network, scored on
labelled text: the built-in topic task, local files, GLUE tasks and suites; ``mode=finetune``
and the ``finetune`` config group; its checkpoints in ``mode=eval``, ``generate`` and
``export`` (docs/evaluation.md, "Fine-tuning")."""

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
