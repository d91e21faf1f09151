"""The corpus: raw text cut into examples and split into train / validation / test, cached.

The result is saved with `save_to_disk` under a key built from the config and a cheap
source fingerprint, so a later run memory-maps it without touching the source again; the
tokenization cache files of `datasets` then live next to it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
from datasets import DatasetDict, load_from_disk

from data.cache import cache_root, stable_hash
from data.config import SPLITS, DataConfig
from data.sources import load_raw, source_fingerprint

# A paragraph ends at a line that is empty or holds only spaces/tabs.
_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")


def corpus_key(cfg: DataConfig) -> str:
    """Names the cached corpus; cheap (stats files, reads nothing)."""
    return stable_hash(
        "corpus",
        source_fingerprint(cfg),
        cfg.example_unit,
        cfg.val_fraction,
        cfg.test_fraction,
        cfg.split_seed,
    )


def load_corpus(cfg: DataConfig) -> tuple[DatasetDict, str]:
    """The corpus (splits train/validation/test, column "text") and its cache key."""
    key = corpus_key(cfg)
    path = cache_root(cfg) / "corpus" / key
    if not (path / "dataset_dict.json").exists():
        corpus = _build(cfg)
        _save_atomically(corpus, path)
    return load_from_disk(str(path)), key


def load_whole(cfg: DataConfig) -> tuple[DatasetDict, str]:
    """All of a source's text as the one split ``cfg.split``, carved from nothing: what
    ``mode=eval`` scores when data is given on its command line. Files and the builtin corpus
    give every record; a Hub dataset or a data.path mapping gives its split ``cfg.split``."""
    raw = load_raw(cfg)
    # A Hub dataset and a data.path mapping have splits of their own: cfg.split is one.
    own_splits = cfg.source == "hub" or isinstance(cfg.path, dict)
    if own_splits and cfg.split not in raw:
        raise ValueError(
            f"{source_name(cfg)} has no {cfg.split} split (its splits: {', '.join(raw)}); "
            "pass data.split=validation or test, whichever it has"
        )
    own = cfg.split if own_splits else "train"  # a file, a directory, builtin: all their text
    units = raw[own].map(
        split_units,
        batched=True,
        fn_kwargs={"unit": cfg.example_unit},
        remove_columns=["text"],
        desc=f"Cutting into {cfg.example_unit}s",
    )
    if len(units) == 0:
        raise ValueError(f"the data {source_name(cfg)} has no text to evaluate")
    return DatasetDict({cfg.split: units}), whole_key(cfg)


def whole_key(cfg: DataConfig) -> str:
    """Names the text ``load_whole`` gives, as ``corpus_key`` names a carved corpus."""
    return stable_hash("whole", source_fingerprint(cfg), cfg.example_unit, cfg.split)


def source_name(cfg: DataConfig) -> str:
    """The source as the user named it: the path, the Hub name (/config), or builtin."""
    if cfg.source == "files":
        return str(cfg.path)
    if cfg.source == "hub":
        return f"{cfg.name}" + (f"/{cfg.config_name}" if cfg.config_name else "")
    return "builtin"


def split_units(batch: dict[str, list], unit: str) -> dict[str, list[str]]:
    """Batched map: each text -> its documents / paragraphs / lines; blank pieces dropped."""
    pieces: list[str] = []
    for text in batch["text"]:
        if not text:
            continue
        if unit == "document":
            parts = [text]
        elif unit == "paragraph":
            parts = _PARAGRAPH_BREAK.split(text)
        else:
            parts = text.split("\n")
        # rstrip drops '\r' of CRLF files and trailing blanks; leading indentation is content.
        pieces.extend(p.strip("\n").rstrip() for p in parts if p.strip())
    return {"text": pieces}


def _build(cfg: DataConfig) -> DatasetDict:
    raw = load_raw(cfg)
    units = raw.map(
        split_units,
        batched=True,
        fn_kwargs={"unit": cfg.example_unit},
        remove_columns=["text"],
        desc=f"Cutting into {cfg.example_unit}s",
    )
    if len(units["train"]) == 0:
        where = {"files": f" (data.path={cfg.path!r})", "hub": f" ({cfg.name})"}
        raise ValueError(f"the {cfg.source} corpus{where.get(cfg.source, '')} has no text")
    if isinstance(cfg.path, dict):  # fixed split files: nothing is carved
        empty = [split for split, ds in units.items() if len(ds) == 0]
        if empty:
            raise ValueError(f"data.path.{empty[0]}={cfg.path[empty[0]]} has no text")
        return units
    return _carve_missing_splits(units, cfg)


def _carve_missing_splits(units: DatasetDict, cfg: DataConfig) -> DatasetDict:
    """Move a seeded random share of train examples into each missing split.

    Each split keeps its examples in source order, so packed decoder blocks read naturally.
    """
    missing = [s for s in ("validation", "test") if s not in units]
    if not missing:
        return units
    train = units["train"]
    n = len(train)
    fractions = {"validation": cfg.val_fraction, "test": cfg.test_fraction}
    sizes = {s: max(1, round(n * fractions[s])) for s in missing}
    if n - sum(sizes.values()) < 1:
        raise ValueError(
            f"the corpus has only {n} {cfg.example_unit}(s): too few to carve {missing} from it; "
            "use data.example_unit=paragraph or line, or more text"
        )
    order = np.random.default_rng(cfg.split_seed).permutation(n)
    carved = dict(units)
    start = 0
    for split in missing:
        carved[split] = train.select(np.sort(order[start : start + sizes[split]]))
        start += sizes[split]
    carved["train"] = train.select(np.sort(order[start:]))
    return DatasetDict({s: carved[s] for s in SPLITS})


def _save_atomically(corpus: DatasetDict, path: Path) -> None:
    # Save beside the target and rename, so a killed run or a concurrent rank never leaves a
    # half-written corpus that looks complete.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    corpus.save_to_disk(str(tmp))
    try:
        os.replace(tmp, path)
    except OSError:  # another process got there first; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
