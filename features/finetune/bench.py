"""Fine-tuning on the built-in task: pretrained against scratch over a pretraining sweep's
seeds, and its throughput.

Usage::

    python -m features.finetune.bench --gpt SWEEP_DIR --bert SWEEP_DIR  # the pretraining sweeps
    python -m features.finetune.bench --gpt multirun/gpt --inits scratch --out bench_finetune

Each pretraining sweep directory holds one job per seed (``python train.py -m seed=1,2,3``,
and ``model=bert`` for the encoder). Each arm (``--inits``: pretrained, scratch) is one
``python train.py mode=finetune ckpt_path=SWEEP_DIR finetune.init=INIT`` process, the sweep
path of ``mode=finetune`` (``features/finetune/sweep.py``): every completed job fine-tuned with
the default protocol and its own seed (scratch: random weights of the same architecture drawn
from that seed), into ``--out/FAMILY/INIT/JOB``; a job already fine-tuned there is read, not
re-run, so an interrupted benchmark continues. Printed per family: the test accuracy as
mean ± std over the seeds and the difference between pretrained and scratch against
2 standard errors (with Welch's p, ``analysis.summary``), and the training throughput
(examples/s and seconds per epoch of the training batches, validation excluded: median and
range over the runs).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from analysis.run_record import Status, collect_runs
from analysis.summary import configuration_rows, configuration_table, group_runs
from bench.launch import run_child, train_command

INITS = ("pretrained", "scratch")


def finetune_arm(sweep: Path, init: str, out: Path, extra: list[str]) -> list[dict]:
    """Every job of ``sweep`` fine-tuned with ``init`` by ``mode=finetune``'s sweep path; the
    completed fine-tunes, each labelled with its init and its pretraining job's seed."""
    overrides = [
        "mode=finetune",
        f"ckpt_path={sweep}",
        f"finetune.init={init}",
        f"output_dir={out}",
        "logger=none",
        "trainer.enable_progress_bar=false",
        *extra,
    ]
    run_child(train_command(overrides))
    jobs = {job["run"]: job for job in collect_runs(sweep)}
    runs = []
    for tuned in collect_runs(out):
        if tuned.get("status") != Status.COMPLETED:
            continue
        seed = jobs[tuned["run"]].get("overrides", {}).get("seed", tuned["seed"])
        runs.append({**tuned, "overrides": {"init": init, "seed": str(seed)}})
        print(
            f"{init} job {tuned['run']} (seed {seed}): test accuracy "
            f"{tuned['test_accuracy']:.4f}, {tuned['examples_per_sec']:.1f} examples/s",
            flush=True,
        )
    return runs


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt", type=Path, help="the default GPT's pretraining sweep dir")
    parser.add_argument("--bert", type=Path, help="the default BERT's pretraining sweep dir")
    parser.add_argument("--inits", nargs="+", default=list(INITS), choices=INITS)
    parser.add_argument("--out", type=Path, default=Path("bench_finetune"))
    parser.add_argument(
        "overrides", nargs="*", help="more train.py overrides, e.g. finetune.epochs=1"
    )
    args = parser.parse_args()
    families = {"gpt": args.gpt, "bert": args.bert}
    for family, sweep in families.items():
        if sweep is None:
            continue
        runs = [
            run
            for init in args.inits
            for run in finetune_arm(sweep, init, args.out / family / init, args.overrides)
        ]
        seeds = len({run["overrides"]["seed"] for run in runs})
        configs = group_runs(runs, ["init"], metric="test_accuracy", higher_is_better=True)
        rows = configuration_rows(configs, means=("test_mcc", "best_val_loss"))
        print(f"\n{family}: test accuracy on the built-in task, {seeds} seeds")
        print(configuration_table(configs, rows, extra=("test_mcc", "best_val_loss")))
        for config in configs:
            speeds = [r["examples_per_sec"] for r in config.completed]
            epochs = [r["seconds_per_epoch"] for r in config.completed]
            print(
                f"{family} {config.values['init']}: {spread(speeds)} examples/s, "
                f"{spread(epochs)} s per epoch (median (range) over {len(speeds)} runs)"
            )
        print()


if __name__ == "__main__":
    main()
