"""Labelled examples as token ids and batches: the pair encoding, padding, the data module.

Encoder (BERT's layout): ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``, with segment ids 0
for ``[CLS] a [SEP]`` and 1 for ``b [SEP]`` when the network has token types
(``type_vocab_size > 0``); without them (tinylm's default BERT, pretrained on one segment)
the ``[SEP]`` alone marks where the second text starts, as in RoBERTa. Decoder: ``a EOS`` or
``a EOS b EOS``: the pretraining ended every document with EOS, and the classifier reads the
last token, which has seen everything before it. Too long a pair is cut one token at a time
from the longer text (Hugging Face's ``longest_first``); batches are right-padded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from tokenizers import Tokenizer
from torch import Tensor
from torch.utils.data import DataLoader

from data.sampler import ResumableDataLoader, ResumableSampler
from data.tokenizer import special_tokens_of
from features.finetune.labelled import Example


def encode_pair(
    a: list[int],
    b: list[int] | None,
    *,
    arch: str,
    max_len: int,
    specials: Any,
    token_types: bool,
) -> tuple[list[int], list[int] | None]:
    """Token ids (and segment ids when ``token_types``) of one example, at most ``max_len``."""
    start, sep = (
        ([specials.cls_id], specials.sep_id) if arch == "encoder" else ([], specials.eos_id)
    )
    budget = max_len - len(start) - (1 if b is None else 2)
    if budget < 2:
        raise ValueError(f"max_seq_len={max_len} leaves no room for the text of an example")
    a, b = _truncate(a, b, budget)
    first = [*start, *a, sep]
    second = [] if b is None else [*b, sep]
    types = [0] * len(first) + [1] * len(second) if token_types else None
    return first + second, types


def _truncate(a: list[int], b: list[int] | None, budget: int) -> tuple[list[int], list[int] | None]:
    """Cut the longer of the two texts until both fit ``budget`` tokens together."""
    if b is None:
        return a[:budget], None
    keep_a, keep_b = len(a), len(b)
    while keep_a + keep_b > budget:
        if keep_a > keep_b:
            keep_a -= 1
        else:
            keep_b -= 1
    return a[:keep_a], b[:keep_b]


def encode_examples(
    examples: Sequence[Example], tokenizer: Tokenizer, *, arch: str, max_len: int, token_types: bool
) -> list[dict[str, Any]]:
    """Each example's ids (and segment ids) and label."""
    specials = special_tokens_of(tokenizer)
    texts = [e.text for e in examples]
    firsts = [enc.ids for enc in tokenizer.encode_batch(texts)]
    pairs = [e.pair for e in examples]
    has_pairs = any(p is not None for p in pairs)
    seconds = [enc.ids for enc in tokenizer.encode_batch([p or "" for p in pairs])]
    encoded = []
    for example, a, b in zip(examples, firsts, seconds, strict=True):
        ids, types = encode_pair(
            a,
            b if has_pairs else None,
            arch=arch,
            max_len=max_len,
            specials=specials,
            token_types=token_types,
        )
        row = {"input_ids": ids, "label": example.label}
        if types is not None:
            row["token_type_ids"] = types
        encoded.append(row)
    return encoded


class PadCollator:
    """Rows -> a right-padded batch: input_ids, attention_mask, (token_type_ids), labels."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, Tensor]:
        length = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)  # (B, T)
        mask = torch.zeros((len(rows), length), dtype=torch.long)  # (B, T)
        with_types = "token_type_ids" in rows[0]
        types = torch.zeros((len(rows), length), dtype=torch.long)  # (B, T)
        for i, row in enumerate(rows):
            n = len(row["input_ids"])
            ids[i, :n] = torch.tensor(row["input_ids"])
            mask[i, :n] = 1
            if with_types:
                types[i, :n] = torch.tensor(row["token_type_ids"])
        batch = {
            "input_ids": ids,
            "attention_mask": mask,
            "labels": torch.tensor([r["label"] for r in rows]),  # (B,)
        }
        if with_types:
            batch["token_type_ids"] = types
        return batch


class ClassificationDataModule(L.LightningDataModule):
    """Encoded splits -> loaders; train is shuffled per epoch (seeded) and resumes mid-epoch."""

    def __init__(
        self, encoded: dict[str, list[dict[str, Any]]], *, batch_size: int, seed: int, pad_id: int
    ) -> None:
        super().__init__()
        self.encoded = encoded
        self.batch_size = batch_size
        self.seed = seed
        self.collate = PadCollator(pad_id)

    def train_dataloader(self) -> DataLoader:
        rows = self.encoded["train"]
        return ResumableDataLoader(
            rows,
            sampler=ResumableSampler(rows, seed=self.seed),
            batch_size=self.batch_size,
            collate_fn=self.collate,
        )

    def val_dataloader(self) -> DataLoader:
        return self._ordered("validation")

    def test_dataloader(self) -> DataLoader:
        return self._ordered("test")

    def _ordered(self, split: str) -> DataLoader:
        return DataLoader(self.encoded[split], batch_size=self.batch_size, collate_fn=self.collate)
