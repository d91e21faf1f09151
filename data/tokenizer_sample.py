"""The text a trained tokenizer learns from: at most `data.tokenizer_sample_bytes` of the train
split (docs/data.md, "Tokenizers"). A source within the budget gives its whole train split under
the cache key of the versions before the sample (the same tokenizer, so the same numbers); a
larger one of known size seeded draws across it; a stream or a Hub dataset its head. Every
sample stops at the budget, so a size that understates the text (parquet) still bounds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

# The draws' own random stream, apart from the carving permutation's (same split_seed).
_DRAW_STREAM = 1


def sample_rate(budget: int, size: int | None) -> float | None:
    """The share of training examples drawn: 1.0 when the source fits the budget, None when its
    size is unknown (then the head is taken)."""
    if size is None:
        return None
    return min(1.0, budget / size) if size else 1.0


def sample_key(budget: int, size: int | None) -> tuple[object, ...]:
    """What the sample adds to a tokenizer's cache key: nothing when the whole train split is
    read (the key of earlier versions), else the budget. The seed and the source's size are in
    the corpus key already."""
    return () if sample_rate(budget, size) == 1.0 else ("sample", budget)


def drawn(
    batches: Iterable[list[str]], rate: float, seed: int
) -> Iterator[tuple[int, np.ndarray, list[str]]]:
    """(examples read so far, indices kept, examples kept) after each batch: example i (counted
    across batches) is kept when its own seeded uniform draw falls below ``rate``, so the same
    seed and source give the same sample."""
    draws = np.random.default_rng((seed, _DRAW_STREAM))
    start = 0
    for batch in batches:
        kept = np.flatnonzero(draws.random(len(batch)) < rate)
        start += len(batch)
        yield start, kept + (start - len(batch)), [batch[i] for i in kept]


def head(batches: Iterable[list[str]], budget: int) -> Iterator[list[str]]:
    """The batches up to ``budget`` bytes of UTF-8 text, the example that reaches it
    included (so an example larger than the budget is still a sample)."""
    left = budget
    for batch in batches:
        for count, text in enumerate(batch, start=1):
            left -= len(text.encode())
            if left <= 0:
                yield batch[:count]
                return
        yield batch
