"""EleutherAI's lm-evaluation-harness on tinylm's decoders: ``mode=harness`` and the ``harness``
group (README.md here)."""

from conf.features import Feature
from features.harness.config import HarnessConfig

FEATURE = Feature(
    name="harness",
    modes={"harness": "features.harness.command"},
    groups={"harness": HarnessConfig},
    list_keys=("harness.tasks",),
    moved_keys={
        "eval.harness": "mode=harness harness.tasks=TASKS",
        "eval.harness_include": "harness.include=DIR with mode=harness",
        "eval.harness_limit": "harness.limit=N with mode=harness",
        "eval.harness_num_fewshot": "harness.num_fewshot=K with mode=harness",
        "eval.harness_batch_size": "harness.batch_size=B with mode=harness",
    },
)
