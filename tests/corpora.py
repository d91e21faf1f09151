"""Small corpora and prepared data modules that the data tests share."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd

from data.config import DataConfig
from data.corpus import Corpus
from data.datamodule import LMDataModule

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "far",
    "away",
    "quickly",
    "slowly",
    "big",
    "small",
    "red",
    "green",
]


def make_paragraphs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f"Paragraph {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))) + "."
        for i in range(n)
    ]


def write_source(directory: Path, fmt: str, paragraphs: list[str], column: str) -> Path:
    """One file of `fmt` holding `paragraphs` (txt: separated by blank lines)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"corpus.{fmt}"
    frame = pd.DataFrame({column: paragraphs, "other": range(len(paragraphs))})
    if fmt == "txt":
        path.write_text("\n\n".join(paragraphs) + "\n")
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    elif fmt == "json":
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    elif fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    return path


def load_corpus(cfg: DataConfig, whole: bool = False) -> dict[str, list[str]]:
    """Every split's examples, in order, read from the source."""
    corpus = Corpus(cfg, whole)
    texts: dict[str, list[str]] = {split: [] for split in corpus.splits}
    for split, batch in corpus.batches():
        texts[split] += batch
    return texts


def all_texts(corpus: dict[str, list[str]]) -> list[str]:
    return [text for texts in corpus.values() for text in texts]


def small_cfg(tmp_path: Path, **overrides) -> DataConfig:
    """A small txt corpus (60 paragraphs) with a small tokenizer, cached under tmp_path."""
    path = tmp_path / "src" / "corpus.txt"
    if not path.exists():
        write_source(path.parent, "txt", make_paragraphs(60), "text")
    settings = {
        "source": "files",
        "path": str(path),
        "vocab_size": 300,
        "batch_size": 4,
        "cache_dir": str(tmp_path / "cache"),
        "val_fraction": 0.1,
        "test_fraction": 0.1,
    }
    return DataConfig(**{**settings, **overrides})


def ready(cfg: DataConfig, arch: str = "decoder", max_seq_len: int = 16, **kw) -> LMDataModule:
    dm = LMDataModule(cfg, arch=arch, max_seq_len=max_seq_len, seed=7, **kw)
    dm.prepare_data()
    dm.setup("fit")
    return dm
