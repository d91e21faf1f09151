"""Sweep benchmark: the same small sweep run sequentially and as parallel joblib jobs.

Usage::

    python -m bench.sweep                      # 4 jobs x 150 steps, n_jobs 1 and 2, 1 repeat
    python -m bench.sweep --repeats 3 --steps 100

Each repeat runs ``python train.py -m model.dropout=0.0,0.1 seed=1,2 ...`` (a tiny model,
``logger=none``, warm data caches) with Hydra's basic launcher (n_jobs = 1: one process, one
job after another) and with ``hydra/launcher=joblib hydra.launcher.n_jobs=N``. It prints the
sweep's wall time, its ratio to the sequential wall, the torch threads each job used, and the
per-job overhead: a job's wall time (its ``started_at`` to ``finished_at`` in metrics.json)
minus its time in ``Trainer.fit``, i.e. data, model and Trainer set-up plus the closing
report. Medians over repeats, with min-max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis.run_record import Status
from bench.launch import ROOT

SHAPE = [
    "model.num_layers=2",
    "model.hidden_size=64",
    "model.num_heads=2",
    "model.max_seq_len=64",
    "trainer.val_check_interval=50",
    "trainer.limit_val_batches=5",
    "trainer.enable_progress_bar=false",
    "logger=none",
]


def run_sweep(n_jobs: int, steps: int) -> dict[str, float]:
    launcher = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}"] if n_jobs > 1 else []
    with tempfile.TemporaryDirectory(prefix="tinylm-sweep-") as sweep:
        command = [
            sys.executable, str(ROOT / "train.py"), "-m", "model.dropout=0.0,0.1", "seed=1,2",
            *SHAPE, f"trainer.max_steps={steps}", *launcher, f"hydra.sweep.dir={sweep}",
        ]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"the sweep failed:\n{proc.stderr[-3000:]}")
        jobs = [json.loads(p.read_text()) for p in sorted(Path(sweep).glob("*/metrics.json"))]
    if [j["status"] for j in jobs] != [Status.COMPLETED] * 4:
        raise SystemExit(f"expected 4 completed jobs, got {[j['status'] for j in jobs]}")
    overheads = [j["finished_at"] - j["started_at"] - j["train_seconds"] for j in jobs]
    return {
        "wall": wall,
        "threads": statistics.median(j["threads"] for j in jobs),
        "overhead_median": statistics.median(overheads),
        "overhead_max": max(overheads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    run_sweep(1, 2)  # warm the data and tokenizer caches
    results = {n: [run_sweep(n, args.steps) for _ in range(args.repeats)] for n in args.jobs}
    sequential = statistics.median(r["wall"] for r in results[args.jobs[0]])
    print(f"4 jobs x {args.steps} steps, {args.repeats} repeat(s); medians (min-max)\n")
    print("| n_jobs | threads/job | sweep wall (s) | vs sequential | per-job overhead (s) |")
    print("|---|---|---|---|---|")
    for n, runs in results.items():
        walls = [r["wall"] for r in runs]
        wall = statistics.median(walls)
        overhead = statistics.median(r["overhead_median"] for r in runs)
        worst = max(r["overhead_max"] for r in runs)
        print(
            f"| {n} | {runs[0]['threads']:.0f} | {wall:.1f} ({min(walls):.1f}-{max(walls):.1f}) "
            f"| {wall / sequential:.2f}x | {overhead:.2f} (max {worst:.2f}) |"
        )


if __name__ == "__main__":
    main()
