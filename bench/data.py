"""Data preparation benchmark: first run (empty cache) vs second run, and tokenization speed.

    python -m bench.data [--text ../shared/data/tinyshakespeare.txt] [--arch decoder]

Each run is a fresh Python process, as a real second `python train.py` would be; imports are
timed apart from preparation (`prepare_data()` + `setup()`). The first run uses a new
temporary cache directory. Throughput: tokens per second of the tokenization stage
(`Dataset.map` + writing the cache), measured on a forced re-tokenization.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(source: str, arch: str, cache: str, measure_throughput: bool) -> dict[str, float]:
    started = time.perf_counter()
    from data.config import DataConfig
    from data.datamodule import LMDataModule
    from data.tokenize import token_arrays, tokenize_corpus

    imported = time.perf_counter()
    settings = {"cache_dir": cache}
    if source != "builtin":
        settings |= {"source": "files", "path": source}
    dm = LMDataModule(DataConfig(**settings), arch=arch, max_seq_len=64, seed=0)
    dm.prepare_data()
    dm.setup("fit")
    prepared = time.perf_counter()
    result = {"import_s": imported - started, "prepare_s": prepared - imported}
    if measure_throughput:
        tokens = sum(len(token_arrays(dm.prepared.tokenized[s])[0]) for s in dm.prepared.corpus)
        # A fresh key forces `datasets` to tokenize again instead of reading the cache.
        tic = time.perf_counter()
        tokenize_corpus(dm.prepared.corpus, dm.tokenizer, f"bench-{time.time_ns()}")
        result |= {"tokens": tokens, "tokens_per_s": tokens / (time.perf_counter() - tic)}
    return result


def run_child(source: str, arch: str, cache: str, measure_throughput: bool) -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "bench.data",
        "--child",
        source,
        "--arch",
        arch,
        "--cache",
        cache,
    ]
    if measure_throughput:
        command.append("--throughput")
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", default=str(ROOT.parent / "shared/data/tinyshakespeare.txt"))
    parser.add_argument("--arch", default="decoder", choices=["decoder", "encoder"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--throughput", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.arch, args.cache, args.throughput)))
        return

    print(f"arch={args.arch}; times exclude imports (shown apart); each run a new process")
    row = "{:<22}{:>10}{:>12}{:>12}{:>10}{:>12}"
    print(row.format("corpus", "import s", "1st prep s", "2nd prep s", "tokens", "tokens/s"))
    for label, source in [("builtin", "builtin"), (Path(args.text).name, args.text)]:
        with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as cache:
            first = run_child(source, args.arch, cache, measure_throughput=True)
            second = run_child(source, args.arch, cache, measure_throughput=False)
        print(
            row.format(
                label,
                f"{second['import_s']:.2f}",
                f"{first['prepare_s']:.3f}",
                f"{second['prepare_s']:.3f}",
                f"{first['tokens']:,}",
                f"{first['tokens_per_s']:,.0f}",
            )
        )


if __name__ == "__main__":
    main()
