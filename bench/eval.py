"""Whole-file evaluation throughput: ``mode=eval`` at stride = max_seq_len and max_seq_len/4.

Usage::

    python -m bench.eval                      # builtin + ../shared/data/tinyshakespeare.txt
    python -m bench.eval --max-chars 200000   # the first 200k characters of each
    python -m bench.eval --shakespeare PATH --threads 1

For each corpus a model of the shape the docs train on it is trained a few steps (the
weights do not change the cost): the default GPT (4 layers, C=128, max_seq_len=128, BPE) on
the builtin corpus, the ``shakespeare_char`` preset (max_seq_len=64, characters) on
Shakespeare. The corpus is written to a text file and scored whole, as
``python train.py mode=eval ckpt_path=CK data.path=FILE eval.stride=S`` does, once to warm
the caches (tokenization), then timed at each stride. tokens/s = tokens scored / wall time of
the evaluation (data loading, forward passes, metrics). Striding costs max_seq_len / S times
the forward passes for the same tokens scored. Each stride is scored in every
``--precisions`` value (``trainer.precision``: float32 and bfloat16 autocast by default);
"vs first" is a precision's tokens/s over the first one's at the same stride.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.launch import ROOT

DEFAULT_SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"


def _compose(*overrides: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=["logger=none", *overrides])


def _evaluate(ckpt: Path, data: Path, stride: int, out: Path, precision: str) -> tuple[dict, float]:
    import modes.eval
    from conf.hydra_runtime import parse_settings

    overrides = [f"data.path={data}", f"eval.stride={stride}", f"trainer.precision={precision}"]
    cfg = _compose("mode=eval", f"ckpt_path={ckpt}", f"output_dir={out}", *overrides)
    # What Hydra records for the same command line (compose records none).
    settings = replace(parse_settings(cfg), overrides=dict(o.split("=", 1) for o in overrides))
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the mode's own table
        record = modes.eval.run(settings)["results"][0]
    return record, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shakespeare", type=Path, default=DEFAULT_SHAKESPEARE)
    parser.add_argument("--max-chars", type=int, default=0, help="0 = the whole corpus")
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = its default")
    parser.add_argument(
        "--precisions", default="32-true,bf16-mixed", help="trainer.precision values, comma-split"
    )
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from pydoc_data.topics import topics

    import torch

    import train

    if args.threads:  # on a shared machine one thread can beat two that wait for each other
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="tinylm-bench-eval-"))
    corpora = {"builtin": ("\n\n".join(topics[k] for k in sorted(topics)), [])}
    if args.shakespeare.is_file():
        corpora["shakespeare"] = (
            args.shakespeare.read_text(),
            ["experiment=shakespeare_char"],
        )
    else:
        print(f"no {args.shakespeare}: Shakespeare skipped (--shakespeare PATH)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    precisions = args.precisions.split(",")
    head = f"{'corpus':<12}{'T':>5}{'stride':>8}{'precision':>12}{'tokens scored':>15}{'s':>9}"
    head += f"{'tokens/s':>11}{'loss':>8}{'cost':>7}{'vs first':>10}"
    print(head)
    print("-" * len(head))
    for name, (text, preset) in corpora.items():
        text = text[: args.max_chars] if args.max_chars else text
        data = work / f"{name}.txt"
        data.write_text(text)
        run_dir = work / f"run-{name}"
        with contextlib.redirect_stdout(io.StringIO()):  # the run's summary and sample
            train.run(
                _compose(
                    *preset,
                    f"data.path={data}" if preset else "data=builtin",
                    f"trainer.max_steps={args.train_steps}",
                    f"trainer.val_check_interval={args.train_steps}",
                    "trainer.limit_val_batches=1",
                    "trainer.enable_progress_bar=false",
                    "max_new_tokens=0",
                    f"output_dir={run_dir}",
                )
            )
        ckpt = run_dir / "checkpoints" / "last.ckpt"
        window = int(_compose(*preset).model.max_seq_len)
        _evaluate(ckpt, data, window, work, precisions[0])  # warm-up: tokenization, caches
        base = None
        for stride in (window, window // 4):
            first = None
            for precision in precisions:
                record, seconds = _evaluate(ckpt, data, stride, work, precision)
                rate = record["tokens_scored"] / seconds
                base, first = base or rate, first or rate
                print(
                    f"{name:<12}{window:>5}{stride:>8}{precision:>12}"
                    f"{record['tokens_scored']:>15,}{seconds:>9.1f}{rate:>11,.0f}"
                    f"{record['loss']:>8.3f}{base / rate:>6.1f}x{rate / first:>9.2f}x",
                    flush=True,
                )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
