"""Collators: decoder blocks -> shifted inputs/labels (with document ids for document
masking); encoder rows -> padded, MLM-masked."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from data.tokenizer import SpecialTokens

IGNORE_INDEX = -100  # labels the loss skips (torch's cross_entropy default)
PAD_MULTIPLE = 8  # MLM batches are padded to a multiple of this (at most max_seq_len)


def collate_blocks(blocks: list[np.ndarray]) -> dict[str, torch.Tensor]:
    """Blocks of T + 1 tokens -> input_ids = block[:-1], labels = block[1:], both [B, T]."""
    batch = torch.from_numpy(np.stack(blocks).astype(np.int64))  # [B, T+1]
    # Copies, always: for B = 1 both slices are already contiguous, so .contiguous() would
    # return two views of one storage, and editing the labels (collate_windows) would edit
    # the inputs.
    return {"input_ids": batch[:, :-1].clone(), "labels": batch[:, 1:].clone()}


def collate_windows(windows: list[dict[str, object]]) -> dict[str, torch.Tensor]:
    """`StridedWindows` items -> input_ids, labels [B, T]; the targets a window does not score
    (those an earlier window scored) are IGNORE_INDEX."""
    batch = collate_blocks([w["block"] for w in windows])
    length = batch["labels"].shape[1]
    for row, window in enumerate(windows):
        batch["labels"][row, : length - window["scored"]] = IGNORE_INDEX
    return batch


def document_ids(input_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Document id [B, T] of each input: the number of EOS tokens before it in its row.

    The EOS belongs to the document it ends, so ids run 0, .., 0 (EOS), 1, .. and a token
    after an EOS starts the next document.
    """
    is_eos = (input_ids == eos_id).long()  # (B, T)
    return is_eos.cumsum(dim=1) - is_eos  # (B, T): exclusive count


class DocumentCollator:
    """A decoder collator (`collate_blocks`, `collate_windows`) whose batches also carry
    "document_ids" [B, T] (see `document_ids`), for `data.document_mask=true`."""

    def __init__(
        self, collate: Callable[[list[Any]], dict[str, torch.Tensor]], eos_id: int
    ) -> None:
        self.collate = collate
        self.eos_id = eos_id

    def __call__(self, items: list[Any]) -> dict[str, torch.Tensor]:
        batch = self.collate(items)
        batch["document_ids"] = document_ids(batch["input_ids"], self.eos_id)
        return batch


class MLMCollator:
    """Pad a batch to its longest example rounded up to a multiple of 8 (at most
    max_seq_len), then mask for MLM.

    Each real, non-special token is selected with probability `mlm_probability`; a selected
    token becomes [MASK] (80%), a random regular token (10%) or stays (10%); labels are the
    original ids at selected positions and -100 elsewhere. The random stream is seeded by
    `seed` and the batch's content, so a batch is masked the same way in any worker, after a
    resume, or in a rerun, while a reshuffled epoch gets fresh masks.
    """

    def __init__(
        self,
        specials: SpecialTokens,
        vocab_size: int,
        max_seq_len: int,
        mlm_probability: float = 0.15,
        # Equivalent mutants: the data module always passes the run's seed.
        seed: int = 0,  # pragma: no mutate
    ) -> None:
        self.pad_id = specials.pad_id
        self.mask_id = specials.mask_id
        self.special_ids = torch.tensor(specials.all_ids)
        is_regular = torch.ones(vocab_size, dtype=torch.bool)
        is_regular[self.special_ids] = False
        self.regular_ids = is_regular.nonzero().squeeze(1)  # random replacements come from here
        self.max_seq_len = max_seq_len
        self.mlm_probability = mlm_probability
        self.seed = seed

    def __call__(self, examples: list[np.ndarray]) -> dict[str, torch.Tensor]:
        longest = max(len(e) for e in examples)
        length = min(self.max_seq_len, -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE)
        input_ids = torch.full((len(examples), length), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(examples), length), dtype=torch.long)
        for row, example in enumerate(examples):
            input_ids[row, : len(example)] = torch.from_numpy(np.asarray(example, dtype=np.int64))
            attention_mask[row, : len(example)] = 1
        masked, labels = self.mask(input_ids, attention_mask)
        return {"input_ids": masked, "attention_mask": attention_mask, "labels": labels}

    def mask(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked input_ids, labels) for a padded batch [B, T]."""
        # numpy's SeedSequence mixes (seed, content) fully; torch's CPU generator would keep
        # only 32 bits of a combined seed.
        rng = np.random.default_rng([self.seed, zlib.crc32(input_ids.numpy().tobytes())])
        shape = input_ids.shape
        maskable = attention_mask.bool() & ~torch.isin(input_ids, self.special_ids)
        selected = maskable & torch.from_numpy(rng.random(shape) < self.mlm_probability)
        labels = torch.where(selected, input_ids, IGNORE_INDEX)
        action = torch.from_numpy(rng.random(shape))
        random_ids = self.regular_ids[
            torch.from_numpy(rng.integers(len(self.regular_ids), size=shape))
        ]
        masked = torch.where(selected & (action < 0.8), self.mask_id, input_ids)
        masked = torch.where(selected & (action >= 0.8) & (action < 0.9), random_ids, masked)
        return masked, labels
