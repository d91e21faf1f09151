"""Sentence log-likelihoods, the scores of minimal pairs: a decoder's sum of token
log-probabilities, an encoder's pseudo-log-likelihood (PLL: each token masked in turn and
predicted from the rest; Salazar et al. 2020, "Masked Language Model Scoring").

Pure torch: token id sequences in, one float64 score in nats per sequence out. The caller
frames each sentence as the model read text in training (``data.pairs.frame_sentence``): a
decoder's sequence starts with the EOS that ends the document before it, and every token after
that one is scored; an encoder's is ``[CLS] sentence [SEP]``, and every token between the two
is scored. Both run the network in eval mode (no dropout) without gradients.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from models.transformer import Decoder, Encoder, eval_mode

DECODER_BATCH = 64  # sequences per forward pass


def decoder_log_likelihoods(
    model: Decoder, sequences: Sequence[Sequence[int]], batch_size: int = DECODER_BATCH
) -> Tensor:
    """``sum_{i >= 1} log p(x_i | x_<i)`` of each sequence, float64 [N].

    Sequences of similar length share a forward pass, right-padded: causal attention keeps
    the padding out of every real token's logits, so no mask is needed.
    """
    _check_lengths(sequences, 2, "a decoder scores the tokens after the first")
    scores = torch.empty(len(sequences), dtype=torch.float64)
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            lengths = torch.tensor([len(sequences[i]) for i in chunk])
            ids = torch.zeros(len(chunk), int(lengths.max()), dtype=torch.long)  # (B, T)
            for row, i in enumerate(chunk):
                ids[row, : lengths[row]] = torch.tensor(sequences[i])
            ids = ids.to(device)
            logits = model(ids[:, :-1]).float()  # (B, T - 1, V)
            picked = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]  # (B, T - 1)
            scored = (lengths - 1).to(device)  # targets per row
            real = torch.arange(ids.shape[1] - 1, device=device) < scored[:, None]  # (B, T - 1)
            scores[chunk] = torch.where(real, picked, 0.0).double().sum(1).cpu()
    return scores


def pseudo_log_likelihoods(
    model: Encoder, sequences: Sequence[Sequence[int]], mask_id: int
) -> Tensor:
    """``sum_i log p(x_i | x with x_i masked)`` over each sequence's inner tokens (all but the
    first and the last: [CLS] and [SEP]), float64 [N]. A sequence of n inner tokens is one
    forward pass of n rows, row i masking token i."""
    _check_lengths(sequences, 3, "an encoder scores the tokens between [CLS] and [SEP]")
    scores = torch.empty(len(sequences), dtype=torch.float64)
    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        for k, sequence in enumerate(sequences):
            ids = torch.tensor(sequence, device=device)  # (T,)
            n = len(sequence) - 2
            rows = torch.arange(n, device=device)
            positions = rows + 1  # the inner tokens
            masked = ids.repeat(n, 1)  # (n, T)
            masked[rows, positions] = mask_id
            logits = model(masked)[rows, positions].float()  # (n, V)
            picked = logits.log_softmax(-1).gather(-1, ids[positions, None])  # (n, 1)
            scores[k] = picked.double().sum().cpu()
    return scores


def _check_lengths(sequences: Sequence[Sequence[int]], least: int, why: str) -> None:
    short = [i for i, s in enumerate(sequences) if len(s) < least]
    if short:
        raise ValueError(
            f"sequence {short[0]} has {len(sequences[short[0]])} tokens, fewer than {least}: {why}"
        )
