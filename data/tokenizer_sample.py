"""The text a trained tokenizer (bpe, wordpiece, char) learns from: a bounded sample of the
training split, `data.tokenizer_sample_bytes` of text at most.

- A source no larger than the budget (the built-in docs) gives its whole train split, in the
  order and batches of every version before the sample, under the same cache key: the same
  tokenizer and so the same numbers.
- A larger source of known size (`Source.size_bytes`: local files) keeps each training example
  by a seeded draw of its own, in source order, at rate budget / source size: the sample
  spreads over the whole corpus, its expected size is the budget times the train split's share
  of the source, and it is read in the pass that counts the examples for carving.
- A stream, or a source whose size is unknown before it is read (a Hub dataset), can only take
  its head: the training examples in order until the budget is reached.

Every sample stops at the budget (the example that reaches it included), so a size that
understates the text (compressed parquet) still bounds it, though its sample then leans to the
corpus's start.
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
