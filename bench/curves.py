"""What recording the run's curves costs (``curves.jsonl``, training/curves.py; the target is at
most 1% of the default run).

Usage::

    python -m bench.curves                        # the default run, 100 steps, 3 rounds
    python -m bench.curves --steps 40 --rounds 1 -- model.num_layers=1

Each round trains the default run (``python train.py``'s settings, in this process, no progress
bar) twice, in alternating order: as shipped, and with the recording off (``CurvesLogger``'s
lines and the gradient norm made no-ops). It compares their training steps' seconds (the
record's ``consumed.seconds``): a ratio per round, its median and range over rounds. Beside it,
the seconds spent inside the recording itself (both functions timed in the shipped runs) as a
share of the steps: a measure that the other jobs on the machine do not blur.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from hydra import compose, initialize_config_dir

from bench.launch import ROOT
from training.curves import CurvesLogger
from training.task import LanguageModelTask

RECORDING = ((CurvesLogger, "log_metrics"), (LanguageModelTask, "on_before_optimizer_step"))


@contextmanager
def recording(on: bool, spent: list[float]) -> Iterator[None]:
    """The recording as shipped, its seconds added to ``spent`` (``on``), or made no-ops."""
    with ExitStack() as stack:
        for owner, name in RECORDING:
            original = getattr(owner, name)
            replacement = _timed(original, spent) if on else (lambda *args, **kwargs: None)
            stack.enter_context(mock.patch.object(owner, name, replacement))
        yield


def _timed(function: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started

    return timed


def steps_seconds(steps: int, overrides: Sequence[str], on: bool) -> tuple[float, float]:
    """(the training steps' seconds, the seconds inside the recording) of one run."""
    from train import run  # after the argument parsing: train.py sets the environment

    spent = [0.0]
    with tempfile.TemporaryDirectory() as out:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(
                config_name="config",
                overrides=[
                    f"trainer.max_steps={steps}",
                    f"trainer.val_check_interval={steps}",
                    "trainer.enable_progress_bar=false",
                    *overrides,
                    f"output_dir={Path(out) / 'run'}",
                ],
            )
        with recording(on, spent):
            record = run(cfg)
    return record["consumed"]["seconds"], spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="after --: overrides of the default run")
    args = parser.parse_args()
    ratios, shares = [], []
    for round_number in range(args.rounds):
        order = (True, False) if round_number % 2 == 0 else (False, True)
        seconds = {}
        for on in order:
            seconds[on] = steps_seconds(args.steps, args.overrides, on)
        ratios.append(seconds[True][0] / seconds[False][0])
        shares.append(seconds[True][1] / seconds[True][0])
        print(
            f"round {round_number + 1}: steps {seconds[True][0]:.2f} s recorded, "
            f"{seconds[False][0]:.2f} s not; inside the recording {seconds[True][1]:.4f} s"
        )
    print(
        f"recorded / not recorded: median {statistics.median(ratios):.4f} "
        f"(range {min(ratios):.4f}-{max(ratios):.4f}, {args.rounds} rounds of {args.steps} steps)"
    )
    print(
        f"inside the recording: median {statistics.median(shares):.3%} of the steps' seconds "
        f"(range {min(shares):.3%}-{max(shares):.3%})"
    )


if __name__ == "__main__":
    main()
