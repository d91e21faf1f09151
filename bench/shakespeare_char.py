"""The ``shakespeare_char`` preset end to end: wall time, tokens/s, final losses.

Usage::

    python -m bench.shakespeare_char                       # ../shared/data/tinyshakespeare.txt
    python -m bench.shakespeare_char --data PATH --repeats 3 -- logger=csv
    python -m bench.shakespeare_char --bare-steps 0        # skip the bare-loop comparison
    python -m bench.shakespeare_char --builtin             # the built-in corpus, characters
    python -m bench.shakespeare_char --repeats 3 --bare-steps 0 \
        --versus experiment=shakespeare_char_fast --versus "optim=muon model.position=rope"

Runs ``python train.py experiment=shakespeare_char data.path=PATH [overrides]`` (2000 steps,
validation every 250 steps on 20 batches: conf/experiment/shakespeare_char.yaml) in a fresh
process and times it from before the process starts to after it exits, start-up, data
preparation, validation and the final sample included. The child is train.py's own ``main``
with one hook that records the last training loss. Then, unless ``--bare-steps 0``, a bare
PyTorch loop of the same shape (bench/train_step.py's ``bare``) runs ``--bare-steps`` steps on
random batches for a tokens/s comparison (steady state, median step).

Repeat i runs with ``seed=1234+i``, so the spread of the losses is the seeds'.
``--versus "OVERRIDES"`` (repeatable) adds configurations to compare with the preset: each
is the preset plus those overrides (or another ``experiment=``). Runs interleave (preset,
then each configuration, per repeat), so load drift hits them alike. For each it prints the
median wall time and final validation loss with their spread (min-max), the ratio of its wall
time to the preset's (median of the per-repeat ratios), the difference in validation loss,
and whether it reaches the preset's median validation loss. Time to loss: a configuration
that reaches the preset's loss does so in at most its wall time (the targets of issue 14:
``experiment=shakespeare_char_fast`` there in <= 0.4x the preset's wall time;
``optim=muon model.position=rope`` at the preset's 2000 steps >= 0.3 nats lower).

Reference (nanoGPT's CPU recipe, same shape): val loss ~1.88 in ~73 s on this class of machine.
Targets: val loss <= 1.88, wall <= 80 s, tokens/s >= the bare loop's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from analysis.significance import welch_p_value
from bench.launch import ROOT, module_command, run_child

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"


def child(overrides: list[str]) -> None:
    sys.argv = [str(ROOT / "train.py"), *overrides]
    import modes.train
    import train
    from training.task import LanguageModelTask

    seen: dict[str, float] = {}
    original_end = LanguageModelTask.on_train_end

    def on_train_end(self) -> None:
        loss = self.trainer.callback_metrics.get("train/loss")
        if loss is not None:
            seen["train_loss"] = float(loss)
        original_end(self)

    LanguageModelTask.on_train_end = on_train_end
    original_train = modes.train.run

    def timed_train(settings, callbacks=()):
        metrics = original_train(settings, callbacks)
        seen.update(
            {
                k: metrics.get(k)
                for k in ("val_loss", "best_val_loss", "tokens_per_sec", "train_seconds", "step")
            }
        )
        return metrics

    modes.train.run = timed_train
    train.main()
    print("BENCH " + json.dumps(seen))


def run_once(data: Path | None, overrides: list[str]) -> dict[str, float]:
    """One train.py process on the file ``data`` (None: the built-in corpus); the preset
    unless ``overrides`` name another experiment."""
    if not any(o.startswith("experiment=") for o in overrides):
        overrides = ["experiment=shakespeare_char", *overrides]
    corpus = "data.source=builtin" if data is None else f"data.path={data}"
    with tempfile.TemporaryDirectory(prefix="tinylm-shakespeare-") as run_dir:
        command = module_command(
            "bench.shakespeare_char",
            ["--child", "--", corpus, *overrides, f"hydra.run.dir={run_dir}"],
        )
        started = time.perf_counter()
        proc = run_child(command)
        wall = time.perf_counter() - started
    line = next(x for x in reversed(proc.stdout.splitlines()) if x.startswith("BENCH "))
    return {"wall_s": wall, **json.loads(line.removeprefix("BENCH "))}


def bare_tokens_per_s(steps: int) -> float:
    from bench.train_step import SHAPES, run_bare

    overrides, batch_size, _ = SHAPES["shakespeare_char"]
    step_times = run_bare("shakespeare_char", steps + 10, "cpu", "32-true")[10:]
    return batch_size * overrides["max_seq_len"] / statistics.median(step_times)


def spread(values: list[float], digits: int) -> str:
    """'median [min-max]'."""
    return (
        f"{statistics.median(values):.{digits}f} "
        f"[{min(values):.{digits}f}-{max(values):.{digits}f}]"
    )


def print_comparison(base: list[dict], versus: dict[str, list[dict]]) -> None:
    base_wall = [r["wall_s"] for r in base]
    print(f"\n{'configuration':<44}{'wall s':>22}{'val loss':>26}{'wall ratio':>12}{'d val':>9}")
    base_vals = [r["val_loss"] for r in base]
    base_val = statistics.median(base_vals)
    print(f"{'the preset':<44}{spread(base_wall, 1):>22}{spread(base_vals, 4):>26}")
    for name, runs in versus.items():
        walls = [r["wall_s"] for r in runs]
        vals = [r["val_loss"] for r in runs]
        ratios = [r["wall_s"] / b["wall_s"] for r, b in zip(runs, base, strict=True)]
        ratio = statistics.median(ratios)
        delta = statistics.median(vals) - base_val
        print(f"{name:<44}{spread(walls, 1):>22}{spread(vals, 4):>26}{ratio:>12.3f}{delta:>+9.4f}")
        reaches = statistics.median(vals) <= base_val
        # Reaching the loss by its last step bounds the time to that loss by its wall time.
        print(
            f"  {'reaches' if reaches else 'does NOT reach'} the preset's val loss "
            f"{base_val:.4f}"
            + (f" within {ratio:.2f}x its wall time" if reaches else "")
            + f" ({sum(v <= base_val for v in vals)} of {len(vals)} seeds reach it)"
        )
        p_value = welch_p_value(walls, base_wall)
        welch = "n/a (one repeat)" if p_value is None else f"{p_value:.2g}"
        print(f"  wall ratio per repeat {min(ratios):.3f}-{max(ratios):.3f}; Welch's p {welch}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--builtin",
        action="store_true",
        help="train on the built-in corpus (CPython's docs, characters) instead of --data",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--bare-steps", type=int, default=300)
    parser.add_argument(
        "--versus",
        action="append",
        default=[],
        help='overrides of a configuration to compare with the preset, e.g. "optim=muon"',
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="extra train.py overrides (after --)")
    args = parser.parse_args()
    if args.child:
        child(args.overrides)
        return
    if not args.builtin and not args.data.is_file():
        raise SystemExit(f"--data {args.data} is not a file; pass the tinyshakespeare.txt path")
    data = None if args.builtin else args.data.resolve()
    runs = []
    versus: dict[str, list[dict]] = {v: [] for v in args.versus}
    for index in range(args.repeats):  # interleaved: drifting load hits every configuration alike
        # Seed 1234 (train.py's) first, then others: the loss spread is the seeds'.
        overrides = [f"seed={1234 + index}", *args.overrides]
        runs.append(run_once(data, overrides))
        for name, results in versus.items():
            results.append(run_once(data, [*overrides, *name.split()]))
    corpus = "data.source=builtin" if data is None else f"data.path={args.data}"
    print(f"python train.py experiment=shakespeare_char {corpus} {' '.join(args.overrides)}")
    print(
        f"{'run':>4}{'wall s':>9}{'train s':>9}{'tokens/s':>10}{'train loss':>12}"
        f"{'val loss':>10}{'steps':>7}"
    )
    for index, r in enumerate(runs, 1):
        print(
            f"{index:>4}{r['wall_s']:>9.1f}{r['train_seconds']:>9.1f}"
            f"{r['tokens_per_sec']:>10,.0f}{r.get('train_loss', float('nan')):>12.4f}"
            f"{r['val_loss']:>10.4f}{r['step']:>7}"
        )
    wall = statistics.median(r["wall_s"] for r in runs)
    val = statistics.median(r["val_loss"] for r in runs)
    tps = statistics.median(r["tokens_per_sec"] for r in runs)
    print(
        f"final val loss {val:.4f} (target <= 1.88: {'ok' if val <= 1.88 else 'MISSED'}); "
        f"wall {wall:.1f} s, start-up included (target <= 80 s: "
        f"{'ok' if wall <= 80 else 'MISSED'})"
    )
    if versus:
        for name, results in versus.items():
            print(f"\n{name}")
            for index, r in enumerate(results, 1):
                print(f"{index:>4}{r['wall_s']:>9.1f} s{r['val_loss']:>10.4f}{r['step']:>7}")
        print_comparison(runs, versus)
    if args.bare_steps:
        bare = bare_tokens_per_s(args.bare_steps)
        print(
            f"tokens/s: train.py {tps:,.0f} (average over all steps, data and logging "
            f"included) vs bare loop {bare:,.0f} (median step, random batches): ratio "
            f"{tps / bare:.3f} (target >= 1: {'ok' if tps >= bare else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
