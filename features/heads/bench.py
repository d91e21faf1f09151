"""The cost of ``mode=heads`` against one ``mode=eval`` pass over the same data.

Usage::

    python -m features.heads.bench                          # a default GPT trained a few steps
    python -m features.heads.bench --ckpt RUN/checkpoints/best.ckpt --repeats 5
    python -m features.heads.bench --warmup 0 -- model.num_layers=1   # train another shape

Both modes score the checkpoint's own validation split (the data ``mode=eval`` chooses). The
checkpoint is copied into a temporary run directory, so its own directory gets no heads.json
or eval.jsonl; without ``--ckpt``, the default GPT (with the overrides after ``--``) is
trained ``--train-steps`` steps. Each mode runs ``--warmup`` times to warm the caches
(tokenization), then ``--repeats`` times; the wall time of each run (data loading, the
passes, the records and, for heads, the two figures) is reported as the median with its
min-max spread, and the ratio of the medians.
The analysis makes one forward and backward pass per batch, one forward pass per batch for
``base_loss`` (mode=eval's own pass), one per head and batch (the ablation: L x H passes) and
one per point of the prune curve, so its cost is about L x H + 2 + points evaluation passes.
Both modes run in the same precision (mode=eval's).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.launch import ROOT


def _compose(*overrides: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=["logger=none", *overrides])


def _timed(mode: str, ckpt: Path, out: Path) -> tuple[dict, float]:
    import train

    cfg = _compose(f"mode={mode}", f"ckpt_path={ckpt}", f"output_dir={out}")
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the modes' own tables
        result = train.run(cfg)
    return result, time.perf_counter() - start


def _default_checkpoint(work: Path, steps: int, overrides: list[str]) -> Path:
    """The default GPT (conf/model/gpt.yaml, with ``overrides``) trained ``steps`` steps: the
    cost does not depend on the weights."""
    import train

    out = work / "trained"
    cfg = _compose(
        *overrides,
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={steps}",
        "trainer.enable_progress_bar=false",
        "max_new_tokens=0",
        f"output_dir={out}",
    )
    with contextlib.redirect_stdout(io.StringIO()):
        train.run(cfg)
    return out / "checkpoints" / "best.ckpt"


def _spread(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", type=Path, default=None, help="default: train a default GPT")
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of each mode first")
    parser.add_argument("overrides", nargs="*", help="after --: the trained model's overrides")
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = its default")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="tinylm-bench-heads-"))
    source = args.ckpt or _default_checkpoint(work, args.train_steps, args.overrides)
    ckpt = work / "run" / "checkpoints" / "best.ckpt"
    ckpt.parent.mkdir(parents=True)
    shutil.copy(source, ckpt)

    times: dict[str, list[float]] = {"eval": [], "heads": []}
    results = {}
    for repeat in range(args.warmup + args.repeats):
        for mode in times:
            results[mode], seconds = _timed(mode, ckpt, work / "out")
            if repeat >= args.warmup:
                times[mode].append(seconds)
    heads = results["heads"]
    layers, per_layer = heads["num_layers"], heads["num_heads"]
    points = len(heads["prune_curve"]) - 1  # the first point is the base loss itself
    passes = 1 + layers * per_layer + points
    print(
        f"checkpoint {source}: {layers} layers x {per_layer} heads, "
        f"{heads['tokens']} tokens in {heads['batches']} batches "
        f"(eval scored {results['eval']['results'][0]['tokens_scored']})"
    )
    print(
        f"threads {torch.get_num_threads()}, {args.repeats} repeats after {args.warmup} "
        "warm-up runs each"
    )
    print(f"mode=eval : {_spread(times['eval'])}")
    print(f"mode=heads: {_spread(times['heads'])}")
    ratio = statistics.median(times["heads"]) / statistics.median(times["eval"])
    print(
        f"ratio heads / eval: {ratio:.1f}x; the analysis makes {passes} passes over the data "
        f"(1 forward+backward, {layers * per_layer} ablations: one per head, {points} prune "
        "points), eval one"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
