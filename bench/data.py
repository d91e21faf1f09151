"""Data at scale: 5-step runs on a large corpus against the built-in one, cache size,
tokenization speed, and per-rank memory under 2-process CPU DDP.

    python -m bench.data --make-corpus /tmp/big.txt [--mb 320]
    python -m bench.data --text /tmp/big.txt [--repeats 3] [--ddp]

``--make-corpus`` writes a corpus of paragraphs of ../shared/data/tinyshakespeare.txt and the
built-in docs, reshuffled (seeded) until it reaches ``--mb`` megabytes; keep it out of the
repository. Every run is ``python train.py ... trainer.max_steps=5 logger=none`` in a fresh
process, timed from process start to exit, with its peak RSS (the largest single process of
the run: under DDP, the largest rank). The cold run starts from an empty cache; warm runs
reuse it. Tokenization speed: building the token store of the corpus's first 32 MB with a
given tokenizer, ``data.num_proc=1`` against the default (one process per usable core).
Targets (issue 13): warm large run <= 15 s; its peak RSS within 200 MB of the warm built-in
run; cache <= 1.5x the text.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
FIVE_STEPS = ["trainer.max_steps=5", "logger=none"]
DDP = [
    "trainer=ddp",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.precision=32-true",
    "trainer.compile=false",
]
SLICE_BYTES = 32 << 20


def make_corpus(path: Path, megabytes: int) -> None:
    from data.sources import builtin_documents

    texts = [SHAKESPEARE.read_text(), *builtin_documents()]
    paragraphs = [p.strip() for t in texts for p in re.split(r"\n\s*\n", t) if p.strip()]
    rng = random.Random(0)
    written = 0
    with open(path, "w") as f:
        while written < megabytes * 1_000_000:
            rng.shuffle(paragraphs)
            chunk = "\n\n".join(paragraphs) + "\n\n"
            f.write(chunk)
            written += len(chunk.encode())
    print(f"wrote {path}: {written / 1e6:.0f} MB")


def measured(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall seconds and peak RSS (MB) of ``command``, run by a fresh measuring process (its
    children's ru_maxrss then covers this command alone)."""
    probe = [sys.executable, "-m", "bench.data", "--measure", "--", *command]
    proc = subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(command: list[str]) -> None:
    started = time.perf_counter()
    code = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if code.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{code.stderr[-2000:]}")
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"s": seconds, "rss_mb": peak_mb}))


def five_steps(overrides: list[str], cache: str, run_dir: str) -> dict[str, float]:
    command = [sys.executable, "train.py", *FIVE_STEPS, *overrides, f"hydra.run.dir={run_dir}"]
    return measured(command, {**os.environ, "TINYLM_CACHE": cache})


def summary(values: list[float], unit: str) -> str:
    """Median [min, max] of the repeats."""
    return f"{statistics.median(values):.1f} {unit} [{min(values):.1f}, {max(values):.1f}]"


def tokenize_seconds(text: Path, tokenizer: Path, num_proc: int | None) -> float:
    """Seconds to build the token store of the first SLICE_BYTES of ``text`` (fresh cache)."""
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as work:
        part = Path(work) / "slice.txt"
        with open(text, "rb") as src:
            part.write_bytes(src.read(SLICE_BYTES).rsplit(b"\n\n", 1)[0])
        code = (
            "import time\nfrom data.config import DataConfig\nfrom data.datamodule import prepare\n"
            f"cfg = DataConfig(source='files', path={str(part)!r}, tokenizer={str(tokenizer)!r}, "
            f"num_proc={num_proc!r}, cache_dir={work!r})\n"
            "t = time.perf_counter(); prepare(cfg, 'decoder'); print(time.perf_counter() - t)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", type=Path, help="a large corpus (.txt); see --make-corpus")
    parser.add_argument("--make-corpus", type=Path, help="write a large corpus here and stop")
    parser.add_argument("--mb", type=int, default=320, help="size of --make-corpus")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ddp", action="store_true", help="also 2-process CPU DDP runs")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.measure:
        measure(rest[1:] if rest[:1] == ["--"] else rest)
        return
    if args.make_corpus:
        make_corpus(args.make_corpus, args.mb)
        return
    if args.text is None:
        parser.error("pass --text LARGE.txt (write one with --make-corpus PATH)")

    text_mb = args.text.stat().st_size / 1e6
    print(f"corpus {args.text} ({text_mb:.0f} MB); load {os.getloadavg()[0]:.1f}")
    large = ["data=text", f"data.path={args.text.resolve()}"]
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as work:
        cache, runs = f"{work}/cache", f"{work}/runs"
        five_steps([], cache, f"{runs}/warmup")  # the built-in corpus's cache
        cold = five_steps(large, cache, f"{runs}/cold")
        cache_mb = sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file()) / 1e6
        print(f"cold large run: {cold['s']:.1f} s, peak RSS {cold['rss_mb']:.0f} MB")
        print(f"cache: {cache_mb:.0f} MB = {cache_mb / text_mb:.2f}x the text (target <= 1.5x)")
        rows: dict[str, list[dict[str, float]]] = {"builtin": [], "large": []}
        if args.ddp:
            rows |= {"builtin, DDP x2": [], "large, DDP x2": []}
        for i in range(args.repeats):  # interleaved, so drifting load hits both alike
            for label in rows:
                overrides = (large if label.startswith("large") else []) + (
                    DDP if "DDP" in label else []
                )
                slug = re.sub(r"\W+", "-", label)
                rows[label].append(five_steps(overrides, cache, f"{runs}/{i}-{slug}"))
        tokenizer = Path(runs) / "cold" / "tokenizer.json"
        print(f"\nwarm 5-step runs, median [min, max] of {args.repeats}")
        for label, results in rows.items():
            seconds = summary([r["s"] for r in results], "s")
            rss = summary([r["rss_mb"] for r in results], "MB")
            print(f"  {label:<18} {seconds:>26}   peak RSS {rss}")
        for suffix in ("", ", DDP x2"):
            if f"large{suffix}" in rows:
                gap = [
                    a["rss_mb"] - b["rss_mb"]
                    for a, b in zip(rows[f"large{suffix}"], rows[f"builtin{suffix}"], strict=True)
                ]
                print(f"  RSS large - builtin{suffix}: {summary(gap, 'MB')} (target <= 200 MB)")
        serial = [tokenize_seconds(args.text, tokenizer, 1) for _ in range(args.repeats)]
        default = [tokenize_seconds(args.text, tokenizer, None) for _ in range(args.repeats)]
        mb = SLICE_BYTES / 1e6
        print(f"\ntoken store of the first {mb:.0f} MB, tokenizer given:")
        print(f"  data.num_proc=1: {summary(serial, 's')}")
        print(f"  default ({len(os.sched_getaffinity(0))} processes): {summary(default, 's')}")


if __name__ == "__main__":
    main()
