"""Sentence log-likelihoods in nats, the scores of minimal pairs: a decoder's sum of token
log-probabilities, an encoder's pseudo-log-likelihood (each token masked in turn; Salazar et al.
2020), both in eval mode without gradients.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor

from models.transformer import Decoder, Encoder, eval_mode

# Tokens per forward pass (rows x padded width): bounds the logits a pass holds, e.g. 64 MiB
# of float32 logits for a vocabulary of 2048.
MAX_TOKENS = 8192


def decoder_log_likelihoods(
    model: Decoder, sequences: Sequence[Sequence[int]], max_tokens: int = MAX_TOKENS
) -> Tensor:
    """``sum_{i >= 1} log p(x_i | x_<i)`` of each sequence, float64 [N]. Sequences of similar
    length share a forward pass, right-padded: causal attention keeps the padding out of every
    real token's logits, so no mask is needed."""
    _check_lengths(sequences, 2, "a decoder scores the tokens after the first")
    scores = torch.zeros(len(sequences), dtype=torch.float64)
    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        for batch in length_batches(sequences, lambda n: 1, max_tokens):
            lengths = torch.tensor([len(sequences[i]) for i in batch])
            ids = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)  # (B, T)
            for row, i in enumerate(batch):
                ids[row, : lengths[row]] = torch.tensor(sequences[i])
            ids = ids.to(device)
            logits = model(ids[:, :-1]).float()  # (B, T - 1, V)
            picked = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]  # (B, T - 1)
            scored = (lengths - 1).to(device)  # targets per row
            real = torch.arange(ids.shape[1] - 1, device=device) < scored[:, None]  # (B, T - 1)
            scores[batch] = torch.where(real, picked, 0.0).double().sum(1).cpu()
    return scores


def pseudo_log_likelihoods(
    model: Encoder,
    sequences: Sequence[Sequence[int]],
    mask_id: int,
    max_tokens: int = MAX_TOKENS,
) -> Tensor:
    """``sum_i log p(x_i | x with x_i masked)`` over each sequence's tokens between [CLS] and
    [SEP], float64 [N]: n inner tokens are n rows, row i masking token i; the rows of sequences
    of similar length share a forward pass, right-padded under an attention mask."""
    _check_lengths(sequences, 3, "an encoder scores the tokens between [CLS] and [SEP]")
    scores = torch.zeros(len(sequences), dtype=torch.float64)
    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        for batch in length_batches(sequences, lambda n: n - 2, max_tokens):
            owners, positions = [], []  # per row: its sequence, the token it masks
            for i in batch:
                inner = len(sequences[i]) - 2
                owners += [i] * inner
                positions += range(1, inner + 1)
            width = max(len(sequences[i]) for i in batch)
            ids = torch.zeros(len(owners), width, dtype=torch.long)  # (R, T)
            attention_mask = torch.zeros(len(owners), width, dtype=torch.bool)  # (R, T)
            for row, i in enumerate(owners):
                ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
                attention_mask[row, : len(sequences[i])] = True
            rows = torch.arange(len(owners))
            position = torch.tensor(positions)
            targets = ids[rows, position]  # (R,)
            ids[rows, position] = mask_id
            logits = model(ids.to(device), attention_mask=attention_mask.to(device))
            logits = logits[rows.to(device), position.to(device)].float()  # (R, V)
            picked = logits.log_softmax(-1).gather(-1, targets.to(device)[:, None])[:, 0]  # (R,)
            scores.index_add_(0, torch.tensor(owners), picked.double().cpu())
    return scores


def length_batches(
    sequences: Sequence[Sequence[int]], rows_of: Callable[[int], int], max_tokens: int
) -> Iterator[list[int]]:
    """Indices of sequences, shortest first, in groups whose rows (``rows_of(length)`` each)
    times the longest length stay within ``max_tokens``; a sequence over it goes alone."""
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    batch: list[int] = []
    rows = 0
    for i in order:
        length = len(sequences[i])
        if batch and (rows + rows_of(length)) * length > max_tokens:
            yield batch
            batch, rows = [], 0
        batch.append(i)
        rows += rows_of(length)
    if batch:
        yield batch


def _check_lengths(sequences: Sequence[Sequence[int]], least: int, why: str) -> None:
    short = [i for i, s in enumerate(sequences) if len(s) < least]
    if short:
        raise ValueError(
            f"sequence {short[0]} has {len(sequences[short[0]])} tokens, fewer than {least}: {why}"
        )
