"""Streaming a large corpus vs the built-in run: wall time (process start to exit) and peak RSS.

    python -m bench.streaming --text /work/corpus/big.txt [--repeats 3] [--steps 5] [--ddp]

The tokenizer is trained once by the streaming path (`data.tokenizer=bpe` on the first
`stream_tokenizer_examples` examples of the text) and then given to every streaming run, so
those runs prepare nothing. The built-in run reads its cached corpus: one unmeasured run of
each case warms the caches. Cases run alternately, `--repeats` times each; the table gives
medians with [min-max]. `--ddp` adds a 2-process CPU DDP streaming run, and the same runs at
10x the steps: a peak RSS that does not grow with the steps is a flat one. Peak RSS is GNU
time's (`/usr/bin/time -f %M`): of the largest process of the run (a DDP run's children
included, as they are waited for).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What both runs leave out alike: logging, the progress bar, the closing sample's tokens; and
# the same validation work (the built-in validation split fills 2 batches; streaming's first
# 1000 examples of a large corpus fill more).
QUIET = [
    "logger=none",
    "trainer.enable_progress_bar=false",
    "max_new_tokens=0",
    "trainer.limit_val_batches=2",
]
DDP = [
    "trainer=ddp",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.precision=32-true",
    "trainer.compile=false",
]


def train_tokenizer(text: str, cache: Path, out: Path) -> Path:
    """The streaming path's trained tokenizer, saved as out/tokenizer.json."""
    from data.config import DataConfig
    from data.streaming import prepare_stream
    from data.tokenizer import save_tokenizer

    cfg = DataConfig(source="files", path=text, streaming=True, cache_dir=str(cache))
    _, _, tokenizer = prepare_stream(cfg, "bpe", None, whole=False)
    return save_tokenizer(tokenizer, out)


def measure(overrides: list[str], run_dir: Path, cache: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one `python train.py OVERRIDES`."""
    rss_file = run_dir.with_suffix(".rss")
    command = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), sys.executable, "train.py"]
    env = {**os.environ, "TINYLM_CACHE": str(cache), "WANDB_MODE": "offline"}
    started = time.perf_counter()
    proc = subprocess.run(
        [*command, *QUIET, *overrides, f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(overrides)} failed:\n{proc.stderr[-2000:]}")
    return wall, int(rss_file.read_text().split()[-1]) / 1024


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", required=True, help="a large .txt corpus (not copied)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--ddp", action="store_true", help="add 2-process CPU DDP runs")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    cache = work / "cache"
    tic = time.perf_counter()
    tokenizer = train_tokenizer(args.text, cache, work)
    print(f"tokenizer trained by the streaming path in {time.perf_counter() - tic:.1f} s")
    stream = ["data=text", f"data.path={args.text}", "data.streaming=true"]
    stream.append(f"data.tokenizer={tokenizer}")
    steps = f"trainer.max_steps={args.steps}"
    longer = f"trainer.max_steps={10 * args.steps}"
    # The built-in run caches its corpus elsewhere: `cache` shows what streaming writes.
    cases = {"built-in": ([steps], work / "cache-builtin"), "streaming": ([*stream, steps], cache)}
    if args.ddp:
        cases |= {
            "streaming, 10x steps": ([*stream, longer], cache),
            "streaming DDP x2": ([*stream, *DDP, steps], cache),
            "streaming DDP x2, 10x steps": ([*stream, *DDP, longer], cache),
        }
    for number, (overrides, where) in enumerate(cases.values()):  # warm caches and page cache
        measure(overrides, work / f"warm-{number}", where)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for repeat in range(args.repeats):
        for number, (name, (overrides, where)) in enumerate(cases.items()):
            results[name].append(measure(overrides, work / f"{repeat}-{number}", where))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{args.repeats} runs each, {os.cpu_count()} CPUs, load average now {load}")
    print(f"{'case':<30} {'wall s':>20} {'peak RSS MiB':>22}")
    for name, runs in results.items():
        walls, peaks = zip(*runs, strict=True)
        print(f"{name:<30} {spread(list(walls), '.1f'):>20} {spread(list(peaks), '.0f'):>22}")
    base = statistics.median(p for _, p in results["built-in"])
    extra = statistics.median(p for _, p in results["streaming"]) - base
    print(f"\nstreaming peak RSS - built-in: {extra:+.0f} MiB (target <= +300 MiB)")
    cache_size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    print(f"streaming's cache directory after every run: {cache_size / 1024:.0f} KiB ({cache})")


if __name__ == "__main__":
    main()
