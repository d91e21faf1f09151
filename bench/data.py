"""Data at scale: 5-step runs on a large corpus, from its token store and streamed, against
the built-in corpus; cache size; tokenization speed; per-rank memory under 2-process CPU DDP.

    python -m bench.data --make-corpus /tmp/big.txt [--mb 320]
    python -m bench.data --text /tmp/big.txt [--repeats 3] [--ddp]
    python -m bench.data --text /tmp/big.txt --tokenizer-loss [--seeds 1 2 3] [--steps 5 200]
    python -m bench.data --text /tmp/big.txt --wordpiece-cost [--repeats 3] [--first-runs 2]

``--make-corpus`` writes a corpus of paragraphs of ../shared/data/tinyshakespeare.txt and the
built-in docs, reshuffled (seeded) until it reaches ``--mb`` megabytes; keep it out of the
repository. Every run is ``python train.py ... trainer.max_steps=5 logger=none`` (the default
GPT, its validation and closing sample included) in a fresh process, timed from process start
to exit, with its peak RSS (of the largest single process: under DDP, the largest rank). The
cold run builds the large corpus's token store from an empty cache; the warm runs reuse it;
the streamed runs read the text with ``data.streaming=true`` and the cold run's tokenizer
given, in a cache of their own (its size afterwards: what streaming writes). With ``--ddp``,
2-process runs, and runs of 10x the steps: a peak RSS that does not grow with the steps is
flat. Tokenization speed: building the token store of the corpus's first 32 MB with a given
tokenizer, ``data.num_proc=1`` against the default (one process per usable core).
Each of the ``--repeats`` cold runs starts from an empty cache of its own.
Targets (issue 13): warm large run <= 15 s, its peak RSS within 200 MB of the built-in run's;
cache <= 1.5x the text; streamed run <= 45 s, peak RSS within 300 MB of the built-in run's.
Target (issue 26): cold large run <= 60 s, its peak RSS within 300 MB of the warm run's.

``--tokenizer-loss`` instead compares the sampled tokenizer (``data.tokenizer_sample_bytes``'s
default) with one trained on the whole train split (the setting above the corpus's size): the
validation loss and bits per character of ``--steps``-step runs, one per ``--seeds`` seed, in
one shared cache (each tokenizer and store is built once). Loss per token depends on the
tokenizer; bits per character do not.

``--wordpiece-cost`` instead times the deterministic WordPiece training (data/tokenizer.py: a
probe pass, then the real one with the continuing tokens given) against the baseline, the
plain single-pass trainer it replaced (``plain_wordpiece``), on the sample a first run draws
from the corpus: ``--repeats`` fresh processes each, interleaved A B B A so that drifting load
hits both, with tokenizers' threads set to the usable cores; then ``--first-runs`` first runs
of ``python train.py model=bert data=text data.path=TEXT`` (5 steps, each from an empty cache),
of which the tokenizer's training is a share.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.launch import ROOT, module_command, run_child, train_command

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
QUIET = ["logger=none"]  # no logger start-up: the data path is what is measured
DDP = ["trainer=cpu_ddp"]
SLICE_BYTES = 32 << 20
WORDPIECE = {"deterministic": "deterministic (data/tokenizer.py)", "plain": "plain single pass"}


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
    proc = run_child(module_command("bench.data", ["--measure", "--", *command]), env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(command: list[str]) -> None:
    started = time.perf_counter()
    run_child(command)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"s": seconds, "rss_mb": peak_mb}))


def five_steps(overrides: list[str], cache: str, run_dir: str, steps: int = 5) -> dict[str, float]:
    """A ``steps``-step run of train.py with ``overrides``, measured (see ``measured``)."""
    settings = [*QUIET, f"trainer.max_steps={steps}", *overrides, f"hydra.run.dir={run_dir}"]
    return measured(train_command(settings), {**os.environ, "TINYLM_CACHE": cache})


def summary(values: list[float], unit: str, digits: int = 1) -> str:
    """Median [min, max] of the repeats."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} {unit} [{low:.{digits}f}, {high:.{digits}f}]"


def tokenizer_loss(text: Path, seeds: list[int], steps: list[int]) -> None:
    """Validation loss and bpc with the sampled tokenizer against a whole-corpus one."""
    whole = f"data.tokenizer_sample_bytes={text.stat().st_size + 1}"
    tokenizers = {"sampled (default)": [], "whole corpus": [whole]}
    print(f"corpus {text}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as work:
        large = ["data=text", f"data.path={text.resolve()}"]
        for n in steps:
            for label, overrides in tokenizers.items():
                scores = []
                for seed in seeds:
                    run = f"{work}/runs/{n}-{len(overrides)}-{seed}"
                    five_steps([*large, *overrides, f"seed={seed}"], f"{work}/cache", run, n)
                    scores.append(json.loads(Path(run, "metrics.json").read_text()))
                loss = summary([m["val_loss"] for m in scores], "", 3)
                bpc = summary([m["val_bpc"] for m in scores], "", 3)
                print(f"  {n:>4} steps, {label:<18} val_loss {loss:<26} val_bpc {bpc}")
    print(f"seeds {seeds}, median [min, max]; load {os.getloadavg()[0]:.1f}")


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


def plain_wordpiece(texts: list[list[str]], vocab_size: int) -> Tokenizer:
    """The baseline: tokenizers' WordPieceTrainer in one pass, what data/tokenizer.py did
    before issue 43 (ids of continuing tokens, and so some merges, differ run to run)."""
    from tokenizers import trainers

    from data.tokenizer import BASE_SPECIALS, ensure_special_tokens, untrained_wordpiece

    tokenizer = (
        untrained_wordpiece()
    )  # the same recipe as the deterministic path: only training differs
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=list(BASE_SPECIALS), show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    ensure_special_tokens(tokenizer)
    return tokenizer


def draw_sample(text: Path, out: Path) -> None:
    """Pickle the tokenizer sample a first run on ``text`` draws (default data settings)."""
    from data.config import DataConfig
    from data.corpus import Corpus

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as cache:
        texts = list(
            Corpus(DataConfig(source="files", path=str(text), cache_dir=cache)).tokenizer_texts()
        )
    seconds = time.perf_counter() - started
    out.write_bytes(pickle.dumps(texts))
    print(json.dumps({"s": seconds, "mb": sum(len(t.encode()) for b in texts for t in b) / 1e6}))


def train_wordpiece(kind: str, sample: Path) -> None:
    """Seconds to train a ``kind`` WordPiece on the pickled sample, and its JSON's hash."""
    from data.config import DataConfig
    from data.tokenizer import train_tokenizer

    texts = pickle.loads(sample.read_bytes())
    vocab_size = DataConfig().vocab_size
    started = time.perf_counter()
    if kind == "plain":
        tokenizer = plain_wordpiece(texts, vocab_size)
    else:
        tokenizer = train_tokenizer("wordpiece", texts, vocab_size)
    seconds = time.perf_counter() - started
    print(
        json.dumps({"s": seconds, "sha": hashlib.sha256(tokenizer.to_str().encode()).hexdigest()})
    )


def wordpiece_cost(text: Path, repeats: int, first_runs: int) -> None:
    """The deterministic WordPiece path against the plain trainer, and the first run's wall."""
    threads = str(len(os.sched_getaffinity(0)))
    env = {**os.environ, "RAYON_NUM_THREADS": threads}  # tokenizers' thread pool, fixed
    print(f"corpus {text} ({text.stat().st_size / 1e6:.0f} MB); {threads} threads; {load()}")
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as work:
        sample = Path(work) / "sample.pickle"
        args = ["--wordpiece-sample", str(text.resolve()), str(sample)]
        drawn = json.loads(run_child(module_command("bench.data", args), env).stdout)
        print(f"sample: {drawn['mb']:.1f} MB, drawn in {drawn['s']:.1f} s (both paths alike)")
        results: dict[str, list[dict]] = {kind: [] for kind in WORDPIECE}
        for i in range(repeats):
            for kind in list(WORDPIECE)[:: 1 if i % 2 == 0 else -1]:  # A B, B A, ...
                args = ["--wordpiece-train", kind, str(sample)]
                proc = run_child(module_command("bench.data", args), env)
                results[kind].append(json.loads(proc.stdout))
                print(f"  {i + 1} {WORDPIECE[kind]:<34} {results[kind][-1]['s']:6.1f} s; {load()}")
        seconds = {kind: [r["s"] for r in rows] for kind, rows in results.items()}
        print(f"\nWordPiece training on the sample, median [min, max] of {repeats}; {load()}")
        for kind, label in WORDPIECE.items():
            hashes = len({r["sha"] for r in results[kind]})
            print(
                f"  {label:<34} {summary(seconds[kind], 's'):<24} {hashes} distinct tokenizer.json"
            )
        extra = [d - p for d, p in zip(seconds["deterministic"], seconds["plain"], strict=True)]
        print(f"  deterministic - plain, per repeat: {summary(extra, 's')}")
        firsts = []
        for i in range(first_runs):  # each from an empty cache, as bench.data's cold runs
            cache, runs = f"{work}/cache-{i}", f"{work}/runs-{i}"
            five_steps(["model=bert"], cache, f"{runs}/warmup")  # the built-in corpus's cache
            large = ["model=bert", "data=text", f"data.path={text.resolve()}"]
            firsts.append(five_steps(large, cache, f"{runs}/first")["s"])
            print(f"first run {i + 1}, model=bert on {text.name}: {firsts[-1]:.1f} s; {load()}")
        if firsts:
            first = statistics.median(firsts)
            tokenizer = statistics.median(seconds["deterministic"])
            print(
                f"first run {summary(firsts, 's')}: deterministic WordPiece training "
                f"{tokenizer / first:.1%} of it, deterministic - plain "
                f"{statistics.median(extra) / first:+.1%}"
            )


def load() -> str:
    """The machine's load, as uptime gives it (1, 5 and 15 minutes)."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", type=Path, help="a large corpus (.txt); see --make-corpus")
    parser.add_argument("--make-corpus", type=Path, help="write a large corpus here and stop")
    parser.add_argument("--mb", type=int, default=320, help="size of --make-corpus")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ddp", action="store_true", help="also 2-process CPU DDP runs")
    parser.add_argument(
        "--tokenizer-loss", action="store_true", help="sampled vs whole-corpus tokenizer"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, nargs="+", default=[5, 200])
    parser.add_argument(
        "--wordpiece-cost", action="store_true", help="deterministic vs plain WordPiece training"
    )
    parser.add_argument("--first-runs", type=int, default=2, help="of --wordpiece-cost")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--wordpiece-sample", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--wordpiece-train", nargs=2, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.measure:
        measure(rest[1:] if rest[:1] == ["--"] else rest)
        return
    if args.make_corpus:
        make_corpus(args.make_corpus, args.mb)
        return
    if args.wordpiece_sample:
        draw_sample(*args.wordpiece_sample)
        return
    if args.wordpiece_train:
        train_wordpiece(args.wordpiece_train[0], Path(args.wordpiece_train[1]))
        return
    if args.text is None:
        parser.error("pass --text LARGE.txt (write one with --make-corpus PATH)")

    if args.tokenizer_loss:
        tokenizer_loss(args.text, args.seeds, args.steps)
        return
    if args.wordpiece_cost:
        wordpiece_cost(args.text, args.repeats, args.first_runs)
        return

    text_mb = args.text.stat().st_size / 1e6
    print(f"corpus {args.text} ({text_mb:.0f} MB); load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as work:
        cache, runs, stream_cache = f"{work}/cache", f"{work}/runs", f"{work}/stream-cache"
        large = ["data=text", f"data.path={args.text.resolve()}"]
        colds = []
        for i in range(args.repeats):  # each from an empty cache; the last one's stays
            shutil.rmtree(cache, ignore_errors=True)
            five_steps([], cache, f"{runs}/warmup")  # the built-in corpus's cache
            colds.append(five_steps(large, cache, f"{runs}/cold-{i}"))
            print(f"cold large run {i + 1}: {colds[-1]['s']:.1f} s; load {os.getloadavg()[0]:.1f}")
        cache_mb = sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file()) / 1e6
        seconds = summary([r["s"] for r in colds], "s")
        print(f"cold large run: {seconds}, peak RSS {summary([r['rss_mb'] for r in colds], 'MB')}")
        print(f"cache: {cache_mb:.0f} MB = {cache_mb / text_mb:.2f}x the text (target <= 1.5x)")
        tokenizer = Path(runs) / f"cold-{args.repeats - 1}" / "tokenizer.json"
        streamed = [*large, "data.streaming=true", f"data.tokenizer={tokenizer}"]
        cases = {"builtin": [], "large": large, "large, streamed": streamed}
        if args.ddp:
            cases |= {f"{name}, DDP x2": [*o, *DDP] for name, o in cases.items()}
            cases |= {"large, 10x steps": large, "large, DDP x2, 10x steps": [*large, *DDP]}
        rows: dict[str, list[dict[str, float]]] = {label: [] for label in cases}
        for i in range(args.repeats):  # interleaved, so drifting load hits all alike
            for label, overrides in cases.items():
                where = stream_cache if "streamed" in label else cache
                slug = re.sub(r"\W+", "-", label)
                steps = 50 if "10x" in label else 5
                rows[label].append(five_steps(overrides, where, f"{runs}/{i}-{slug}", steps))
        print(f"\nwarm runs, median [min, max] of {args.repeats}; load {os.getloadavg()[0]:.1f}")
        for label, results in rows.items():
            seconds = summary([r["s"] for r in results], "s")
            rss = summary([r["rss_mb"] for r in results], "MB")
            print(f"  {label:<26} {seconds:>24}   peak RSS {rss}")
        gap = [c["rss_mb"] - w["rss_mb"] for c, w in zip(colds, rows["large"], strict=True)]
        print(f"  RSS cold large - warm large: {summary(gap, 'MB')} (target <= 300 MB)")
        for label in rows:
            base = "builtin" + (", DDP x2" if "DDP" in label else "")
            if label.startswith("large") and "10x" not in label:
                gap = [
                    a["rss_mb"] - b["rss_mb"] for a, b in zip(rows[label], rows[base], strict=True)
                ]
                print(f"  RSS {label} - {base}: {summary(gap, 'MB')}")
        stream_kb = sum(p.stat().st_size for p in Path(stream_cache).rglob("*") if p.is_file())
        print(f"  the streamed runs' cache directory afterwards: {stream_kb / 1024:.0f} KiB")
        serial = [tokenize_seconds(args.text, tokenizer, 1) for _ in range(args.repeats)]
        default = [tokenize_seconds(args.text, tokenizer, None) for _ in range(args.repeats)]
        mb = min(SLICE_BYTES, args.text.stat().st_size) / 1e6
        print(f"\ntoken store of the first {mb:.0f} MB, tokenizer given:")
        print(f"  data.num_proc=1: {summary(serial, 's')}")
        print(f"  default ({len(os.sched_getaffinity(0))} processes): {summary(default, 's')}")


if __name__ == "__main__":
    main()
