"""Fine-tuning on the built-in task: pretrained against scratch, 3 seeds, and its throughput.

Usage::

    python -m bench.finetune --gpt SWEEP_DIR --bert SWEEP_DIR       # the pretraining sweeps
    python -m bench.finetune --gpt runs/gpt --seeds 1 2 --out bench_finetune

Each pretraining sweep directory holds jobs 0, 1, 2 (``python train.py -m seed=1,2,3``, and
``model=bert`` for the encoder); fine-tuning seed k starts from job k-1's best checkpoint
(so the spread covers pretraining's seed too) or, for ``scratch``, from random weights of
the same architecture drawn from seed k. A checkpoint file instead of a directory is the
start of every seed; ``--inits`` runs one of the two arms. Every fine-tune is one ``python train.py
mode=finetune`` process with the default protocol, writing its run directory under
``--out``; a job whose ``metrics.json`` is complete is read, not re-run, so an interrupted
benchmark continues. Printed per family: the test accuracy as mean ± std over the seeds and
the difference between pretrained and scratch against 2 standard errors (with Welch's p,
``analysis.summary``), and the training throughput (examples/s and seconds per epoch of the
training batches, validation excluded: median and range over the runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from analysis.summary import configuration_rows, configuration_table, group_runs

ROOT = Path(__file__).resolve().parents[1]
INITS = ("pretrained", "scratch")


def finetune(pretrained: Path, init: str, seed: int, out: Path, extra: list[str]) -> dict:
    """The metrics of one fine-tune, run now unless ``out`` already holds them."""
    metrics_file = out / "metrics.json"
    if metrics_file.is_file():
        metrics = json.loads(metrics_file.read_text())
        if metrics.get("status") == "completed":
            return metrics
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        "mode=finetune",
        f"ckpt_path={pretrained}",
        f"finetune.init={init}",
        f"seed={seed}",
        f"output_dir={out}",
        "logger=none",
        "trainer.enable_progress_bar=false",
        *extra,
    ]
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return json.loads(metrics_file.read_text())


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt", type=Path, help="the default GPT's sweep dir (or a .ckpt)")
    parser.add_argument("--bert", type=Path, help="the default BERT's sweep dir (or a .ckpt)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
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
        runs = []
        for init in args.inits:
            for job, seed in enumerate(args.seeds):
                pretrained = (
                    sweep if sweep.is_file() else sweep / str(job) / "checkpoints" / "best.ckpt"
                )
                out = args.out / family / f"{init}-seed{seed}"
                metrics = finetune(pretrained, init, seed, out, args.overrides)
                runs.append(
                    {**metrics, "overrides": {"init": init, "seed": str(seed)}, "run": str(out)}
                )
                print(
                    f"{family} {init} seed {seed}: test accuracy {metrics['test_accuracy']:.4f}, "
                    f"{metrics['examples_per_sec']:.1f} examples/s",
                    flush=True,
                )
        configs = group_runs(runs, ["init"], metric="test_accuracy", higher_is_better=True)
        rows = configuration_rows(configs, means=("test_mcc", "best_val_loss"))
        print(f"\n{family}: test accuracy on the built-in task, {len(args.seeds)} seeds")
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
