"""Tokenize the corpus with `Dataset.map`, cached by `datasets` fingerprinting.

Examples are tokenized once, without special tokens and without truncation, so one cache
serves both architectures and every sequence length; packing (decoder) and [CLS]/[SEP] +
truncation (encoder) happen on the fly in `data.examples`.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, Features, Sequence, Value
from tokenizers import Tokenizer

from data.cache import stable_hash

TOKEN_FEATURES = Features({"input_ids": Sequence(Value("int32"))})


def encode_batch(batch: dict[str, list], tokenizer: Tokenizer) -> dict[str, list]:
    """Batched map: texts -> token ids (no special tokens)."""
    encodings = tokenizer.encode_batch(batch["text"], add_special_tokens=False)
    return {"input_ids": [e.ids for e in encodings]}


def tokenize_corpus(
    corpus: DatasetDict, tokenizer: Tokenizer, corpus_key: str, num_proc: int = 1
) -> DatasetDict:
    """Each split -> column "input_ids"; a second call with the same inputs reads the cache.

    The fingerprint is given explicitly (corpus key + split + the tokenizer's JSON) rather
    than derived by `datasets` from pickling the function and tokenizer: cheap, and stable
    across processes.
    """
    tokenizer_hash = stable_hash(tokenizer.to_str())
    tokenized = {}
    for split, ds in corpus.items():
        tokenized[split] = ds.map(
            encode_batch,
            batched=True,
            num_proc=num_proc if num_proc > 1 else None,
            fn_kwargs={"tokenizer": tokenizer},
            remove_columns=ds.column_names,
            features=TOKEN_FEATURES,
            new_fingerprint=stable_hash("tokenize", corpus_key, split, tokenizer_hash),
            desc=f"Tokenizing {split}",
        )
    return DatasetDict(tokenized)


def token_arrays(tokenized: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets): example i is ids[offsets[i]:offsets[i + 1]] (memory-mapped ids)."""
    column = tokenized.data.column("input_ids")
    lists = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    offsets = lists.offsets.to_numpy()
    return lists.flatten().to_numpy(), offsets - offsets[0]


def text_counts(texts: Dataset, tokenized: Dataset) -> tuple[int, int]:
    """(characters, tokens) of a split, examples counted as joined by one separator character
    encoded as one token (the EOS of packed decoder data)."""
    n = len(texts)
    chars = pc.sum(pc.utf8_length(texts.data.column("text"))).as_py() or 0
    tokens = pc.sum(pc.list_value_length(tokenized.data.column("input_ids"))).as_py() or 0
    return chars + n, tokens + n


def chars_per_token(texts: Dataset, tokenized: Dataset) -> float:
    """Characters per token of a split, for bits per character: bpc = loss_per_token / ln 2 /
    chars_per_token (see ``text_counts``)."""
    chars, tokens = text_counts(texts, tokenized)
    return chars / tokens
