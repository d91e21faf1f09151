"""Tokenize a corpus into its token store (data/store.py), in parallel where that pays.

Examples are tokenized once, without special tokens and without truncation, so one store
serves both architectures and every sequence length; packing (decoder) and [CLS]/[SEP] +
truncation (encoder) happen on the fly in `data.examples`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from common.files import stable_hash
from data.config import DataConfig
from data.corpus import Corpus
from data.sources import source_of
from data.store import SplitStore, StoreBuilder, StoreDamaged, open_store
from data.tokenizer import special_tokens_of

log = logging.getLogger(__name__)

# Below this much source text, starting worker processes costs more than they save.
PARALLEL_MIN_BYTES = 8 << 20
_worker_tokenizer: Tokenizer | None = None


def encode_documents(tokenizer: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Texts -> (ids, offsets): text i is ids[offsets[i]:offsets[i + 1]] (no special tokens)."""
    encodings = tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(e.ids) for e in encodings], out=offsets[1:])
    ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int64, int(offsets[-1]))
    return ids, offsets


def token_store(corpus: Corpus, tokenizer: Tokenizer, root: Path) -> dict[str, SplitStore]:
    """The corpus's token store for this tokenizer: opened from the cache, or built there (a
    damaged one, or what a killed build left, removed first). Callers hold the cache's prepare
    lock (`data.datamodule.prepare`), so no other process is building this store meanwhile."""
    key = stable_hash("tokens", corpus.key, stable_hash(tokenizer.to_str()))
    directory = root / "tokens" / key
    if directory.exists():
        try:
            return open_store(directory)
        except StoreDamaged as damage:
            log.warning("token store %s is damaged (%s): building it again", directory, damage)
            shutil.rmtree(directory)
    for unfinished in directory.parent.glob(f".{directory.name}-*"):  # a killed build's
        shutil.rmtree(unfinished)
    build_store(corpus, tokenizer, directory)
    return open_store(directory)


def build_store(corpus: Corpus, tokenizer: Tokenizer, directory: Path) -> None:
    """Tokenize every split of ``corpus`` into a new store at ``directory`` (all or nothing)."""
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    eos_id = special_tokens_of(tokenizer).eos_id
    with StoreBuilder(directory, vocab_size, eos_id) as builder:
        for split in corpus.splits:
            builder.writer(split)  # a split without examples still gets (empty) files
        for split, texts, ids, offsets in encoded(
            corpus.batches(), tokenizer, tokenize_workers(corpus.cfg)
        ):
            builder.writer(split).add(ids, offsets, texts)
        for split, writer in builder.writers.items():
            if writer.tokens == 0:
                raise ValueError(_no_text(corpus, split))
        builder.commit()


def tokenize_workers(cfg: DataConfig) -> int:
    """``data.num_proc``, or by default every usable core once the text is large enough (or
    of unknown size)."""
    if cfg.num_proc is not None:
        return cfg.num_proc
    size = source_of(cfg).size_bytes()
    if size is not None and size < PARALLEL_MIN_BYTES:
        return 1
    return len(os.sched_getaffinity(0))


def encoded(
    batches: Iterable[tuple[str, list[str]]], tokenizer: Tokenizer, workers: int
) -> Iterator[tuple[str, list[str], np.ndarray, np.ndarray]]:
    """(split, texts, ids, offsets) for each batch, in order; ``workers`` processes encode."""
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        for split, texts in batches:
            with _tokenizer_threads_off():  # one worker is one core
                encoding = encode_documents(tokenizer, texts)
            yield split, texts, *encoding
        return
    context = multiprocessing.get_context("fork")  # workers inherit the imported modules
    with _tokenizer_threads_off():  # inherited: each worker is one core
        pool = context.Pool(workers, _start_worker, (tokenizer.to_str(),))
    with pool:
        pending: deque = deque()
        for split, texts in batches:
            pending.append((split, texts, pool.apply_async(_encode_in_worker, (texts,))))
            if len(pending) > 2 * workers:  # bounded: the source is never read far ahead
                split, texts, result = pending.popleft()
                yield split, texts, *result.get()
        for split, texts, result in pending:
            yield split, texts, *result.get()


@contextmanager
def _tokenizer_threads_off() -> Iterator[None]:
    # The tokenizers library reads this at each call (and workers forked inside inherit it):
    # its own threads would oversubscribe the cores, and it warns when a process using them
    # forks.
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def _start_worker(tokenizer_json: str) -> None:
    global _worker_tokenizer
    _worker_tokenizer = Tokenizer.from_str(tokenizer_json)


def _encode_in_worker(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    assert _worker_tokenizer is not None
    ids, offsets = encode_documents(_worker_tokenizer, texts)
    return ids.astype(np.uint32), offsets  # a quarter of the bytes to send back


def _no_text(corpus: Corpus, split: str) -> str:
    if corpus.whole:
        return f"the data {corpus.source.display_name} has no text to evaluate"
    return corpus.source.no_text(split)
