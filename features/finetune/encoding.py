"""Labelled examples as token ids and batches: encoder ``[CLS] a [SEP] (b [SEP])``, with
segment ids where the network has token types; decoder ``a EOS (b EOS)``, as pretraining
ended each document; a long pair cut from its longer text first; batches right-padded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from tokenizers import Tokenizer
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from data.sampler import ResumableDataLoader, ResumableSampler
from data.tokenizer import special_tokens_of
from features.finetune.labelled import Example
from models.config import ModelConfig


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
    """Both texts within ``budget`` tokens together, as cutting the longer one a token at a
    time (the second when they are as long) leaves them: Hugging Face's ``longest_first``."""
    if b is None:
        return a[:budget], None
    keep_b = min(len(b), max(budget // 2, budget - len(a)))
    return a[: budget - keep_b], b[:keep_b]


def encode_examples(
    examples: Sequence[Example], tokenizer: Tokenizer, *, arch: str, max_len: int, token_types: bool
) -> list[dict[str, Any]]:
    """Each example's ids (and segment ids) and label."""
    specials = special_tokens_of(tokenizer)
    firsts = tokenizer.encode_batch([e.text for e in examples])
    has_pairs = any(e.pair is not None for e in examples)
    seconds = tokenizer.encode_batch([e.pair or "" for e in examples])
    encoded = []
    for example, a, b in zip(examples, firsts, seconds, strict=True):
        ids, types = encode_pair(
            a.ids,
            b.ids if has_pairs else None,
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
        ids = [torch.tensor(row["input_ids"]) for row in rows]
        batch = {
            "input_ids": pad_sequence(ids, batch_first=True, padding_value=self.pad_id),  # (B, T)
            "attention_mask": pad_sequence([torch.ones_like(i) for i in ids], batch_first=True),
            "labels": torch.tensor([row["label"] for row in rows]),  # (B,)
        }
        if "token_type_ids" in rows[0]:
            types = [torch.tensor(row["token_type_ids"]) for row in rows]
            batch["token_type_ids"] = pad_sequence(types, batch_first=True)  # (B, T)
        return batch


class ClassificationDataModule(L.LightningDataModule):
    """Examples encoded for ``config``'s network -> loaders; train is shuffled per epoch
    (seeded) and resumes mid-epoch."""

    def __init__(
        self,
        splits: dict[str, Sequence[Example]],
        tokenizer: Tokenizer,
        config: ModelConfig,
        *,
        max_len: int,
        batch_size: int,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.encoded = {
            split: encode_examples(
                examples,
                tokenizer,
                arch=config.arch,
                max_len=max_len,
                token_types=config.type_vocab_size > 0,
            )
            for split, examples in splits.items()
        }
        self.batch_size = batch_size
        self.seed = seed
        self.collate = PadCollator(special_tokens_of(tokenizer).pad_id)

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
