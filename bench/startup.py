"""Start-up benchmark: process start to the first training step of ``python train.py``.

Usage::

    python -m bench.startup                        # the default run (logger=wandb, offline)
    python -m bench.startup --repeats 5 -- logger=csv
    python -m bench.startup -- experiment=shakespeare_char data.path=FILE

Each repeat is a fresh process that runs train.py's ``main`` with the given overrides plus
``trainer.max_steps=1`` (and a temporary run directory); hooks added from outside record when
each phase ends. One untimed run first warms the caches (tokenizer, tokenized data, the OS
page cache), so the table shows the warm start-up the target is about (<= 8 s). Phases:

- interpreter: exec to the first line of this script (Python itself, site-packages);
- imports: train.py and what the train mode imports (Lightning, data, training);
- config+data: Hydra composition and the data module's ``prepare_data`` + ``setup``;
- model+trainer+fit: the task, the logger (W&B init), the Trainer and fit's set-up;
- fit to step 1: ``Trainer.fit`` set-up until the first batch starts (loader, optimiser);
- first step: the first training step itself (not counted in the target).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.launch import ROOT

PHASES = ["interpreter", "imports", "config+data", "model+trainer+fit", "fit to step 1"]


def seconds_since_process_start() -> float:
    """Seconds since this process was exec'd (Linux /proc; resolution one clock tick)."""
    start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def child(overrides: list[str]) -> None:
    marks = {"interpreter": seconds_since_process_start()}
    clock0 = time.perf_counter() - marks["interpreter"]

    def mark(name: str) -> None:
        marks.setdefault(name, time.perf_counter() - clock0)

    sys.argv = [str(ROOT / "train.py"), *overrides]
    import train
    from data.datamodule import LMDataModule
    from training.task import LanguageModelTask

    mark("imports")
    original_setup = LMDataModule.setup
    original_end = LanguageModelTask.on_train_batch_end

    def setup(self, stage=None):
        original_setup(self, stage)
        mark("config+data")

    def on_train_start(self):
        mark("model+trainer+fit")

    def on_train_batch_start(self, batch, batch_idx):
        mark("fit to step 1")

    def on_train_batch_end(self, outputs, batch, batch_idx):
        mark("first step")
        original_end(self, outputs, batch, batch_idx)

    LMDataModule.setup = setup
    LanguageModelTask.on_train_start = on_train_start
    LanguageModelTask.on_train_batch_start = on_train_batch_start
    LanguageModelTask.on_train_batch_end = on_train_batch_end
    try:
        train.main()
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise
    print(json.dumps(marks))


def run_child(overrides: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tinylm-startup-") as run_dir:
        command = [
            sys.executable,
            "-m",
            "bench.startup",
            "--child",
            "--",
            *overrides,
            "trainer.max_steps=1",
            f"hydra.run.dir={run_dir}",
        ]
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"train.py failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="train.py overrides (after --)")
    args = parser.parse_args()
    if args.child:
        child(args.overrides)
        return
    run_child(args.overrides)  # warm the caches
    runs = [run_child(args.overrides) for _ in range(args.repeats)]
    print(
        f"python train.py {' '.join(args.overrides)}: seconds from process start, warm "
        f"caches, median of {args.repeats} fresh processes"
    )
    print(f"{'phase':<16}{'ends at s':>10}{'takes s':>9}")
    previous = 0.0
    for phase in [*PHASES, "first step"]:
        at = statistics.median(r[phase] for r in runs)
        print(f"{phase:<16}{at:>10.2f}{at - previous:>9.2f}")
        previous = at
    total = statistics.median(r["fit to step 1"] for r in runs)
    verdict = "ok" if total <= 8 else "MISSED"
    print(
        f"start-up (process start to first training step): {total:.2f} s  "
        f"(target <= 8 s: {verdict})"
    )


if __name__ == "__main__":
    main()
