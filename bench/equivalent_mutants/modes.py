"""The equivalent mutants of modes/: mode=eval."""

from __future__ import annotations

from bench.equivalent_mutants.base import Equivalent, variants

_EVAL_EQUIVALENTS = (
    Equivalent(
        "modes/eval.py",
        "run",
        'overall, metric="pair_acc", others=(), higher_is_better=True',
        'overall, metric="pair_acc", higher_is_better=True',
        "by_configuration's others defaults to (), the value passed: the same table",
    ),
)
MODES: tuple[Equivalent, ...] = (
    *(
        known
        for call in ("validate", "test")
        for known in variants(
            "modes/eval.py",
            "evaluate_checkpoint",
            f"results = trainer.{call}(task, datamodule=datamodule, verbose=False)[0]",
            "verbose=False",
            ("verbose=None",),
            "Lightning only asks whether verbose is true: None prints nothing, as False does",
        )
    ),
    *_EVAL_EQUIVALENTS,
)
