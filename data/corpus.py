"""The corpus: raw text cut into examples and split into train / validation / test, read from
the source each time (only the tokenizer and the token store are cached). Splits the source
lacks are carved per example with a seeded permutation; each keeps its examples in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from datasets import Dataset, IterableDataset
from datasets.exceptions import DatasetGenerationError

from common.files import stable_hash
from data.config import DataConfig
from data.sources import SPLITS, Source, source_of
from data.tokenizer_sample import drawn, head, sample_key, sample_rate

# A paragraph ends at a line that is empty or holds only spaces/tabs.
_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
_BATCH = 1000  # records read at a time


def corpus_key(cfg: DataConfig) -> str:
    """Names the carved corpus; cheap (stats files, reads nothing)."""
    return stable_hash(
        "corpus",
        source_of(cfg).fingerprint(),
        cfg.example_unit,
        cfg.val_fraction,
        cfg.test_fraction,
        cfg.split_seed,
    )


@dataclass
class Corpus:
    """The examples of each split, read from the source on demand.

    With ``whole``, all of the source's text is the one split ``cfg.split``: what ``mode=eval``
    scores when data is given on its command line. A source without splits of its own gives
    every record; one with them (a Hub dataset, a data.path mapping) gives its ``cfg.split``.
    """

    cfg: DataConfig
    whole: bool = False

    @cached_property
    def source(self) -> Source:
        return source_of(self.cfg)

    @property
    def key(self) -> str:
        return whole_key(self.cfg) if self.whole else corpus_key(self.cfg)

    @cached_property
    def raw(self) -> dict[str, Dataset | IterableDataset]:
        raw = self.source.load()
        if self.whole:
            own_splits = self.source.has_own_splits
            if own_splits and self.cfg.split not in raw:
                raise ValueError(
                    f"{self.source.display_name} has no {self.cfg.split} split (its splits: "
                    f"{', '.join(raw)}); pass data.split=validation or test, whichever it has"
                )
            return {self.cfg.split: raw[self.cfg.split if own_splits else "train"]}
        return dict(raw)

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits this corpus has, in standard order."""
        if self.whole:
            return (self.cfg.split,)
        if not self.source.carves_missing_splits:
            return tuple(s for s in SPLITS if s in self.raw)
        return SPLITS

    def batches(self) -> Iterator[tuple[str, list[str]]]:
        """(split, examples) in batches: every split, each in source order."""
        carved = self._carved
        for name, ds in self.raw.items():
            for units in self._units(ds):
                if name != "train" or carved is None:
                    yield name, units
                    continue
                codes, carved = carved[: len(units)], carved[len(units) :]
                for code, split in enumerate(("train", *self._missing)):
                    picked = [u for u, c in zip(units, codes, strict=True) if c == code]
                    if picked:
                        yield split, picked

    def texts(self, split: str) -> Iterator[list[str]]:
        """The examples of one split, in batches."""
        return (units for name, units in self.batches() if name == split)

    @property
    def tokenizer_sample_key(self) -> tuple[object, ...]:
        """What `tokenizer_texts` adds to a trained tokenizer's cache key (cheap)."""
        return sample_key(self.cfg.tokenizer_sample_bytes, self.source.size_bytes())

    def tokenizer_texts(self) -> Iterator[list[str]]:
        """The training examples a trained tokenizer learns from, in batches: all of them when
        the source fits ``data.tokenizer_sample_bytes``, else a bounded sample (seeded draws
        across the corpus, or the head where the size is unknown)."""
        budget = self.cfg.tokenizer_sample_bytes
        rate = sample_rate(budget, self.source.size_bytes())
        if rate == 1.0:
            return self.texts("train")
        sample = self.texts("train") if rate is None else self._drawn_train(rate)
        return _nonempty(head(sample, budget), self.cfg)

    def _drawn_train(self, rate: float) -> Iterator[list[str]]:
        """Train examples kept by `drawn`, buffered (the budget bounds them) until the pass ends:
        the same pass counts the examples, which carving (which of them are train) needs."""
        picked = list(drawn(self._units(self.raw["train"]), rate, self.cfg.split_seed))
        count = picked[-1][0] if picked else 0
        # Known now: the store's build (`batches`) need not read the source to count again.
        self._carved = codes = self._carve(count) if self._missing else None
        for _, indices, kept in picked:
            if codes is not None:
                kept = [text for text, code in zip(kept, codes[indices], strict=True) if code == 0]
            if kept:
                yield kept

    @property
    def _missing(self) -> list[str]:
        if self.whole or not self.source.carves_missing_splits:
            return []
        return [s for s in ("validation", "test") if s not in self.raw]

    @cached_property
    def _carved(self) -> np.ndarray | None:
        """Per train example: 0 stays in train, k moves to the k-th missing split."""
        if not self._missing:
            return None
        return self._carve(sum(len(units) for units in self._units(self.raw["train"])))

    def _carve(self, n: int) -> np.ndarray:
        """`_carved` for a train split of ``n`` examples."""
        missing = self._missing
        if n == 0:
            raise ValueError(self.source.no_text())
        fractions = {"validation": self.cfg.val_fraction, "test": self.cfg.test_fraction}
        sizes = [max(1, round(n * fractions[s])) for s in missing]
        if n - sum(sizes) < 1:
            raise ValueError(
                f"the corpus has only {n} {self.cfg.example_unit}(s): too few to carve {missing} "
                "from it; use data.example_unit=paragraph or line, or more text"
            )
        order = np.random.default_rng(self.cfg.split_seed).permutation(n)
        codes = np.zeros(n, dtype=np.uint8)
        start = 0
        for code, size in enumerate(sizes, start=1):
            codes[order[start : start + size]] = code
            start += size
        return codes

    def _units(self, ds: Dataset | IterableDataset) -> Iterator[list[str]]:
        try:
            for batch in ds.iter(batch_size=_BATCH):
                units = split_units(batch, self.cfg.example_unit)["text"]
                if units:
                    yield units
        except (DatasetGenerationError, ValueError) as err:  # pyarrow's and pandas' parse errors
            cause = err.__cause__ or err.__context__ or err
            raise ValueError(
                f"cannot read the corpus {self.source.display_name}: {cause}. A malformed file, "
                "or one without a single record, does this; check the file and data.text_column"
            ) from None


def _nonempty(batches: Iterator[list[str]], cfg: DataConfig) -> Iterator[list[str]]:
    """``batches``, raising if they hold no example: a tokenizer would learn nothing."""
    empty = True
    for batch in batches:
        empty = False
        yield batch
    if empty:
        raise ValueError(
            f"the tokenizer sample (data.tokenizer_sample_bytes={cfg.tokenizer_sample_bytes}) "
            "drew no training example: raise it, or use data.example_unit=paragraph or line"
        )


def whole_key(cfg: DataConfig) -> str:
    """Names the text ``load_whole`` gives, as ``corpus_key`` names a carved corpus."""
    return stable_hash("whole", source_of(cfg).fingerprint(), cfg.example_unit, cfg.split)


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
