"""The head analysis guide's commands in the docs test (tests/docs_lists.py merges these)."""

from tests.docs_lists import SMALL_TRAIN

NOT_RUNNABLE = {
    "python train.py mode=heads ckpt_path=$SWEEP": (
        "analyses the 12 jobs of the docs' sweep (about a second each with its two figures); "
        "tests/features/heads/test_mode_heads.py analyses and groups a sweep of 3 jobs"
    ),
}
PROMISES = {
    "python train.py mode=heads ckpt_path=$RUN/checkpoints/best.ckpt": [
        *("$RUN/checkpoints/heads.json", "$RUN/checkpoints/heads.png"),
        "$RUN/checkpoints/prune_curve.png",
    ],
}
# The benchmark writes only in a temporary directory of its own (tests/docs_lists.py, BESIDE).
BESIDE = {"features.heads.bench"}
QUICK = {
    "python -m features.heads.bench": [
        *("--train-steps", "1", "--repeats", "1", "--warmup", "0", "--", *SMALL_TRAIN),
    ],
}
